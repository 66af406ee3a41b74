"""Live P4Runtime tests of the controller against simple_switch_grpc processes with no ports
(BMv2 runs with zero interfaces): meters in bytes/s and overrides read back (SEBF), D-CLAS
coordination from counters, arbitration between two controllers, controller restart.
Skips loudly without the toolchain or the compiled pipeline."""
import os

import pytest

import live
from live import BMV2_JSON, P4INFO, bmv2_marks, wait_for

pytestmark = bmv2_marks()

_next = [700 + os.getpid() % 500 * 20]


def offset_ids(t):
    _next[0] += 10
    return live.offset_ids(t, _next[0])


@pytest.fixture
def switches(request):
    from coflow.ctl.bmv2 import Bmv2
    started = []

    def make(t):
        for s in t.switches:
            started.append(Bmv2(s.device_id).start())
        return {s.name: b.address for s, b in zip(t.switches, started[-len(t.switches):])}, \
            {s.name: b for s, b in zip(t.switches, started[-len(t.switches):])}
    yield make
    for b in started:
        b.stop()


def controller(t, addrs, mode, **kw):
    from coflow.ctl.daemon import Controller
    return Controller(t, mode, P4INFO, BMV2_JSON, addrs, **kw)



def test_sebf_meters_and_overrides_read_back(switches):
    from coflow import topology as T
    from coflow.ctl import model as M
    t = offset_ids(T.bigswitch(4))
    addrs, _ = switches(t)
    c = controller(t, addrs, "sebf", settings={"link_mbps": "10"}).start()
    try:
        a = c.registry.register([("h0", "h1", 1_000_000)])
        b = c.registry.register([("h0", "h2", 2_000_000), ("h3", "h2", 2_000_000)])
        ag = c.agents["s0"]
        assert wait_for(lambda: ag.actual is not None and len(ag.actual.of_kind("meter")) == 3)
        got = ag.read_state()  # from the switch, not the cache
        meters = {m.index: (m.cir, m.pir, m.cburst) for m in got.of_kind("meter")}
        # one meter per flow from s0's pool (0, 1, 2); 10 Mb/s = 1,250,000 frame B/s (the
        # scheduler's full payload rate, 1,188,904 B/s, x 1514/1440); burst 5 ms = 6,250 B,
        # at least two frames
        assert meters == {0: (1_250_000, 1_250_000, 6_250), 1: (12_500, 12_500, 3_028),
                          2: (1_250_000, 1_250_000, 6_250)}
        ov = {dict(e.match)["external_id"]: dict(e.params)["prio"] for e in got.table(M.T_OVERRIDE)}
        assert ov == {a.cid.external: 7, b.cid.external: 6}
        fm = sorted(dict(e.params)["index"] for e in got.table(M.T_FLOW_METER))
        assert fm == [0, 1, 2]
        # the raw MeterConfig on the wire: bytes per second
        cfg = ag.client.read_meter("flow_meters", 0)
        assert (cfg.cir, cfg.pir) == (1_250_000, 1_250_000)
        # A finishes (the API's Update still counts): its entries are deleted and its meter
        # keeps its config (no entry points at it; the index's next owner overwrites it: one
        # write, no reset); B's two flows now share h2's downlink (MADD: equal bottleneck
        # times, 625,000 frame B/s each)
        c.registry.update(a.cid, sent={0: 1_000_000})
        assert wait_for(lambda: {m.index: m.cir for m in ag.actual.of_kind("meter")}
                        == {0: 1_250_000, 1: 625_000, 2: 625_000})
        got = ag.read_state()
        assert {m.index: m.cir for m in got.of_kind("meter")} == {0: 1_250_000, 1: 625_000, 2: 625_000}
        assert sorted(dict(e.params)["index"] for e in got.table(M.T_FLOW_METER)) == [1, 2]
        assert {dict(e.match)["external_id"] for e in got.table(M.T_OVERRIDE)} == {b.cid.external}
        assert c.status()["switches"]["s0"]["write_errors"] == 0
    finally:
        c.stop()


def test_dclas_coordination_from_counters(switches):
    """Counters written on two edges (2 x 6 MB > Q1 = 10 MB, each < Q1): the next round
    reads them, sums 12 MB and installs priority-6 overrides on both edges only."""
    from coflow import topology as T
    from coflow.ctl import model as M
    t = offset_ids(T.leafspine(2, 2, 2))
    addrs, _ = switches(t)
    c = controller(t, addrs, "dclas", delta_s=0.01).start()
    try:
        r = c.registry.register([("h0", "h2", None), ("h2", "h0", None)])
        cid = (r.cid.external, r.cid.internal)
        assert wait_for(lambda: cid in c.slots.slot and all(
            c.agents[e].actual is not None and c.agents[e].actual.table(M.T_SLOT) for e in ("l0", "l1")))
        slot = c.slots.slot[cid]
        for e in ("l0", "l1"):
            c.agents[e].client.write_counter("coflow_bytes", slot, 6 << 20, 10)
        assert wait_for(lambda: c._queues.get(cid) == 2)
        assert c._sizes[cid] == 12 << 20
        assert wait_for(lambda: all(c.agents[e].actual.table(M.T_OVERRIDE) for e in ("l0", "l1")))
        for e in ("l0", "l1"):
            (ov,) = c.agents[e].read_state().table(M.T_OVERRIDE)
            assert dict(ov.params) == {"prio": 6}
        assert c.agents["s0"].read_state().table(M.T_OVERRIDE) == []  # spines: nothing
        st = c.status()
        assert st["coflows"][0]["queue"] == 2 and st["last_round"]["read_s"] > 0
        # unregister: the slot entry and the overrides go
        c.registry.unregister(r.cid)
        assert wait_for(lambda: not c.agents["l0"].actual.table(M.T_OVERRIDE)
                        and not c.agents["l0"].actual.table(M.T_SLOT))
    finally:
        c.stop()


def test_fifo_lm_coordination_from_counters(switches):
    """FIFO-LM: three registered coflows, all sent from h0 (l0); the oldest becomes heavy
    globally (2 x 6 MB > 10 MB from counters on two edges), so it shares the next one's group:
    overrides 7, 7, 6 on l0, and on l1 only the oldest's (it counted bytes there; the others
    never send from l1: overrides only where a coflow sends); when the middle one leaves, the
    heavy one shares with the last (7, 7)."""
    from coflow import topology as T
    from coflow.ctl import model as M
    t = offset_ids(T.leafspine(2, 2, 2))
    addrs, _ = switches(t)
    c = controller(t, addrs, "fifo-lm", delta_s=0.01, settings={"heavy_bytes": str(10 << 20)}).start()
    try:
        regs = [c.registry.register([("h0", "h2", None)]) for _ in range(3)]
        cids = [(r.cid.external, r.cid.internal) for r in regs]

        def prios(edge):
            return {(dict(e.match)["external_id"], dict(e.match)["internal_id"]): dict(e.params)["prio"]
                    for e in c.agents[edge].read_state().table(M.T_OVERRIDE)}
        assert wait_for(lambda: all(x in c.slots.slot for x in cids) and all(
            len(c.agents[e].actual.table(M.T_SLOT)) == 3 for e in ("l0", "l1")))
        assert wait_for(lambda: prios("l0") == dict(zip(cids, [7, 6, 5])))      # plain FIFO
        slot = c.slots.slot[cids[0]]
        for e in ("l0", "l1"):
            c.agents[e].client.write_counter("coflow_bytes", slot, 6 << 20, 10)
        assert wait_for(lambda: c._sizes.get(cids[0]) == 12 << 20)
        assert wait_for(lambda: prios("l0") == dict(zip(cids, [7, 7, 6])) and prios("l1") == {cids[0]: 7})
        c.registry.unregister(regs[1].cid)
        assert wait_for(lambda: prios("l0") == {cids[0]: 7, cids[2]: 7} and prios("l1") == {cids[0]: 7})
        assert c.agents["s0"].read_state().table(M.T_OVERRIDE) == []             # spines: nothing
    finally:
        c.stop()


def test_two_controllers_arbitration(switches):
    from coflow import topology as T
    from coflow.ctl import model as M
    from coflow.dataplane.p4rt import P4RuntimeError
    t = offset_ids(T.bigswitch(2))
    addrs, _ = switches(t)
    primary = controller(t, addrs, "dclas", election_id=20).start()
    backup = controller(t, addrs, "fair", election_id=10)
    try:
        backup.start()  # returns: every switch answered (as backup)
        assert backup.agents["s0"].state == "backup" and primary.agents["s0"].state == "master"
        with pytest.raises(P4RuntimeError) as err:
            backup.agents["s0"].client.write_counter("coflow_bytes", 1, 0, 0)
        assert err.value.code == "PERMISSION_DENIED"
        def mode_of(state):
            (c,) = [d for d in state.of_kind("default") if d.table == M.T_CONFIG]
            return dict(c.params)["mode"]
        cfg = lambda: mode_of(primary.agents["s0"].read_state())
        assert cfg() == 1  # the primary's mode (dclas)
        primary.stop()
        assert wait_for(lambda: backup.agents["s0"].state == "master", 3.0)
        assert wait_for(lambda: backup.agents["s0"].actual is not None
                        and mode_of(backup.agents["s0"].actual) == 0)
        got = backup.agents["s0"].read_state()
        assert mode_of(got) == 0  # fair: the new primary's
        assert backup.agents["s0"].pipeline_pushes == 0  # same pipeline: kept, not re-pushed
    finally:
        primary.stop()
        backup.stop()


def test_controller_restart_adopts_state(switches, tmp_path):
    from coflow import topology as T
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl import model as M
    t = offset_ids(T.leafspine(2, 1, 1))
    addrs, _ = switches(t)
    db = str(tmp_path / "reg.sqlite")
    reg = CoflowRegistry([h.name for h in t.hosts], db_path=db)
    c1 = controller(t, addrs, "dclas", registry=reg).start()
    try:
        # senders on both edges: l1 holds the override that l0's count makes it need
        recs = [reg.register([("h0", "h1", None), ("h1", "h0", None)]) for _ in range(3)]
        reg.unregister(recs[0].cid)  # slot 0 freed: the others hold slots 1 and 2
        keep = (recs[2].cid.external, 0)
        slot_cids = lambda: {dict(e.match)["external_id"] for e in c1.agents["l0"].actual.table(M.T_SLOT)}
        assert wait_for(lambda: slot_cids() == {recs[1].cid.external, recs[2].cid.external})
        slots = dict(c1.slots.slot)
        c1.agents["l0"].client.write_counter("coflow_bytes", slots[keep], 30 << 20, 1)
        assert wait_for(lambda: c1._queues.get(keep) == 2)
    finally:
        c1.stop()
        reg.close()
    reg2 = CoflowRegistry([h.name for h in t.hosts], db_path=db)
    c2 = controller(t, addrs, "dclas", registry=reg2)
    try:
        c2.start()
        assert c2.slots.slot == slots  # adopted, not re-assigned (counters not reset)
        assert c2.agents["l0"].pipeline_pushes == 0
        assert c2.agents["l0"].client.read_counter("coflow_bytes", slots[keep])[0] == 30 << 20
        assert wait_for(lambda: c2._queues.get(keep) == 2 and c2._sizes.get(keep) == 30 << 20)
        (ov,) = c2.agents["l1"].read_state().table(M.T_OVERRIDE)
        assert dict(ov.params)["prio"] == 6
    finally:
        c2.stop()
        reg2.close()


def test_audit_reads_back_in_the_background_and_repairs_drift(switches):
    """Someone else's writes (here: the controller's own client, behind its cache's back) are
    found by the periodic audit, read back outside the round, and undone by the next round."""
    from coflow import topology as T
    from coflow.ctl import model as M
    from coflow.ctl import translate as TR
    t = offset_ids(T.bigswitch(4))
    addrs, _ = switches(t)
    c = controller(t, addrs, "dclas", settings={"audit_s": "0.2"}, delta_s=0.02).start()
    try:
        ag = c.agents["s0"]
        cid = c.registry.register([("h0", "h1", None)]).cid
        key = (cid.external, cid.internal)
        assert wait_for(lambda: ag.actual is not None and ag.actual.table(M.T_SLOT))
        slot_entry = ag.actual.table(M.T_SLOT)[0]
        stray = TR.override_entity((4242, 7), 2)  # a managed table: must go
        ag.client.write([("INSERT", c.codec.encode(stray)),
                         ("DELETE", c.codec.encode(slot_entry, key_only=True))])
        assert stray.key not in ag.actual.entities  # the cache did not see it
        assert wait_for(lambda: {e.key for e in ag.read_state().table(M.T_OVERRIDE)} == set()
                        and any(dict(e.match)["external_id"] == key[0]
                                for e in ag.read_state().table(M.T_SLOT)), 5.0), ag.status()
        assert ag.read_state().entities == c.book.state("s0").entities
    finally:
        c.stop()


def test_read_only_client_reads_without_taking_mastership():
    """connect_reader (the emulation's queue statistics): Read RPCs on a channel with no
    stream; the primary controller stays primary and keeps writing."""
    from coflow.ctl.bmv2 import Bmv2
    from coflow.dataplane.p4rt import P4InfoHelper, P4RuntimeClient
    b = Bmv2(_next[0] + 1).start()
    try:
        primary = P4RuntimeClient(b.address, device_id=b.device_id, election_id=5)
        primary.connect()
        primary.set_pipeline(P4INFO, BMV2_JSON)
        primary.load_p4info(P4INFO)
        primary.write_counter("CoflowIngress.stamp.queue_enq", 8 * 3 + 7, byte_count=1000, packet_count=9)
        reader = P4RuntimeClient(b.address, device_id=b.device_id, p4info=P4InfoHelper.from_file(P4INFO))
        reader.connect_reader(timeout=5)
        got = {e.counter_entry.index.index: e.counter_entry.data.packet_count
               for e in reader.read(reader.counter_entity("CoflowIngress.stamp.queue_enq"))}
        assert got[31] == 9 and sum(got.values()) == 9
        reader.close()
        assert primary.is_master
        primary.write_counter("CoflowIngress.stamp.queue_enq", 31, packet_count=0)   # still primary
        assert primary.read_counter("CoflowIngress.stamp.queue_enq", 31) == (0, 0)
        primary.close()
    finally:
        b.stop()


def test_telemetry_reads_the_data_plane_counters(switches):
    """The drop / collision / RED / queue-drop counters the pipeline keeps are read over
    P4Runtime with the compiled P4Info's ids and show up in /status (what `coflow ctl status`
    prints) and /metrics by name. The values are written into the switch's counters first (a
    zero-port switch gets no packets; tests/test_ctl_live_fabric.py sends real ones)."""
    import json
    import urllib.request
    from coflow import topology as T
    from coflow.ctl import model as M
    t = offset_ids(T.bigswitch(4))
    addrs, _ = switches(t)
    c = controller(t, addrs, "sebf", metrics_addr="127.0.0.1:0",
                   settings={"telemetry_s": "0.05"}).start()
    try:
        a = c.registry.register([("h0", "h1", 1_000_000)])
        assert wait_for(lambda: c._meter_ctx.flows((a.cid.external, a.cid.internal)))
        [(_, _, _, meter)] = c._meter_ctx.flows((a.cid.external, a.cid.internal))
        cl = c.agents["s0"].client
        cl.write_counter(M.C_DROP_REASONS, 5, packet_count=3)           # OPT_LEN
        cl.write_counter(M.C_DROP_REASONS, 10, packet_count=2)          # METER_RED
        cl.write_counter(M.C_COLLISIONS, 700, packet_count=4)
        cl.write_counter(M.C_COLLISIONS, 1024, packet_count=50)        # the no-collision index
        cl.write_counter(M.C_TAKEOVERS, 600, packet_count=3)
        cl.write_counter(M.C_TAKEOVERS, 1024, packet_count=40)         # the no-take-over index
        cl.write_counter(M.C_RED_DROPS, meter, packet_count=2)         # the coflow's meter
        cl.write_counter(M.C_QUEUE_DROP, 2 * 8 + 6, packet_count=2)
        assert wait_for(lambda: c.status()["dataplane"].get("s0", {}).get("drops", {})
                        .get("OPT_LEN") == 3 and c.status()["dataplane"]["s0"]["queue_drops"])
        with urllib.request.urlopen(f"http://{c.metrics_addr}/status", timeout=5) as r:
            st = json.load(r)
        dp = st["dataplane"]["s0"]
        assert dp["drops"]["OPT_LEN"] == 3 and dp["drops"]["METER_RED"] == 2
        assert dp["drops_total"] == 5
        assert dp["slot_collisions"] == 4 and dp["collision_slots"] == {"700": 4}
        assert dp["slot_takeovers"] == 3
        assert dp["meter_red_drops"] == 2 and dp["queue_drops"] == {"2/6": 2}
        assert [x["meter_red_drops"] for x in st["coflows"]] == [2]
        with urllib.request.urlopen(f"http://{c.metrics_addr}/metrics", timeout=5) as r:
            lines = set(r.read().decode().splitlines())
        assert 'coflow_dp_drops_total{reason="OPT_LEN",switch="s0"} 3.0' in lines
        assert 'coflow_dp_slot_collisions_total{switch="s0"} 4.0' in lines
        assert 'coflow_dp_slot_takeovers_total{switch="s0"} 3.0' in lines
        assert 'coflow_dp_meter_red_drops_total{switch="s0"} 2.0' in lines
        assert 'coflow_dp_queue_drops_total{port="2",priority="6",switch="s0"} 2.0' in lines
    finally:
        c.stop()


def test_rate_mode_restart_keeps_meters_and_progress(switches, tmp_path):
    """SEBF: the closed loop reads flow_bytes (written here into the switch's counter: a
    zero-port switch gets no packets; tests/test_ctl_live_closed_loop.py sends real ones);
    a restarted controller adopts the flow's meter index, so the counter is not reset and
    the bytes sent survive."""
    from coflow import topology as T
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl import model as M
    t = offset_ids(T.bigswitch(4))
    addrs, _ = switches(t)
    db = str(tmp_path / "reg.sqlite")
    reg = CoflowRegistry([h.name for h in t.hosts], db_path=db)
    c1 = controller(t, addrs, "sebf", registry=reg, settings={"progress_s": "0.02"}).start()
    try:
        x = reg.register([("h3", "h1", 1_000_000)])    # takes index 0, then leaves
        assert wait_for(lambda: len(c1.agents["s0"].actual.table(M.T_FLOW_METER)) == 1)
        r = reg.register([("h0", "h1", 1_000_000), ("h0", "h2", 1_000_000)])   # one uplink
        cid = (r.cid.external, r.cid.internal)
        reg.unregister(x.cid)
        assert wait_for(lambda: len(c1._meter_ctx.flows(cid)) == 2
                        and len(c1.agents["s0"].actual.table(M.T_FLOW_METER)) == 2)
        idx = {(a, b): i for a, b, _, i in c1._meter_ctx.flows(cid)}
        rates0 = {m.index: m.cir for m in c1.agents["s0"].actual.of_kind("meter")}
        assert rates0[idx[(0, 1)]] == rates0[idx[(0, 2)]]
        c1.agents["s0"].client.write_counter(M.C_FLOW_BYTES, idx[(0, 1)], 100 * 1514, 100)
        assert wait_for(lambda: c1.progress.sent(cid).get((0, 1)) == 144_000)
        # the flow drained: MADD shares h0's uplink by remaining bytes (856 kB vs 1 MB)
        assert wait_for(lambda: (lambda r: r.get(idx[(0, 1)], 0) * 1_000_000 == pytest.approx(
            r.get(idx[(0, 2)], 0) * 856_000, rel=1e-3))(
            {m.index: m.cir for m in c1.agents["s0"].actual.of_kind("meter")}))
    finally:
        c1.stop()
        reg.close()
    reg2 = CoflowRegistry([h.name for h in t.hosts], db_path=db)
    c2 = controller(t, addrs, "sebf", registry=reg2, settings={"progress_s": "0.02"})
    try:
        c2.start()
        assert {(a, b): i for a, b, _, i in c2._meter_ctx.flows(cid)} == idx   # adopted
        assert c2.agents["s0"].client.read_counter(M.C_FLOW_BYTES, idx[(0, 1)]) == (100 * 1514, 100)
        assert wait_for(lambda: c2.progress.sent(cid).get((0, 1)) == 144_000)
    finally:
        c2.stop()
        reg2.close()


def test_shared_registry_backup_continues_the_primarys_coflows(switches, tmp_path):
    """Two controllers on one shared registry database: the primary takes registrations, the
    backup follows them (and refuses changes), and after the primary stops the backup owns
    the switches with the same coflows in the same slots, and goes on with fresh ids."""
    from coflow import topology as T
    from coflow.api.registry import ApiError, CoflowRegistry
    from coflow.ctl import model as M
    t = offset_ids(T.leafspine(2, 2, 2))
    addrs, _ = switches(t)
    db = str(tmp_path / "shared.sqlite")
    hosts = [h.name for h in t.hosts]
    ra = CoflowRegistry(hosts, db_path=db, shared=True)
    rb = CoflowRegistry(hosts, db_path=db, shared=True)
    a = controller(t, addrs, "dclas", election_id=20, registry=ra).start()
    b = controller(t, addrs, "dclas", election_id=10, registry=rb)
    try:
        b.start()
        assert a.is_primary() and not b.is_primary()
        c1 = ra.register([("h0", "h2", None)]).cid
        c2 = ra.register([("h1", "h3", None)]).cid
        key1 = (c1.external, c1.internal)
        assert wait_for(lambda: key1 in b.slots.slot and len(rb) == 2, 3.0)   # b follows
        assert a.slots.slot == b.slots.slot                                   # same slots
        with pytest.raises(ApiError) as e:
            rb.register([("h0", "h3", None)])
        assert e.value.code == "FAILED_PRECONDITION"
        a.stop()
        assert wait_for(lambda: b.is_primary(), 5.0)
        # (is_primary and wait_installed pass over a switch whose stream is down: after the
        # old primary's exit an edge's stream may be re-arbitrating; wait until every edge is
        # b's, so that the check below is about the slots, not about a switch that was away)
        from coflow.ctl.switch import SwitchAgent
        assert wait_for(lambda: all(b.agents[e].state == SwitchAgent.MASTER for e in ("l0", "l1")), 5.0)
        c3 = rb.register([("h3", "h0", None)]).cid
        assert c3.external == c2.external + 1          # ids continue, none reused
        assert b.wait_installed(c3, 3.0)
        for e in ("l0", "l1"):
            slots = {(dict(x.match)["external_id"], dict(x.match)["internal_id"]): dict(x.params)["slot"]
                     for x in b.agents[e].read_state().table(M.T_SLOT)}
            assert slots == dict(b.slots.slot) and len(slots) == 3
    finally:
        a.stop()
        b.stop()
        ra.close()
        rb.close()


def test_register_answers_once_the_slot_is_on_the_edges(switches):
    """The API's Register waits for Controller.wait_installed: when it returns, every edge
    already holds the coflow's slot entry (its first packets are classed as registered)."""
    from coflow import topology as T
    from coflow.api.client import CoflowClient
    from coflow.api.server import serve
    from coflow.ctl import model as M
    t = offset_ids(T.leafspine(2, 2, 2))
    addrs, _ = switches(t)
    c = controller(t, addrs, "dclas").start()
    server = serve(c.registry, "127.0.0.1:0", after_register=lambda rec: c.wait_installed(rec.cid))
    try:
        with CoflowClient(server.coflow_addresses[0]) as cl:
            for _ in range(5):
                cid = cl.register([("h0", "h2", None), ("h3", "h1", None)])
                ext, internal = (int(x) for x in str(cid).split("."))
                for e in ("l0", "l1"):     # read from the switches, not the cache
                    got = {(dict(x.match)["external_id"], dict(x.match)["internal_id"])
                           for x in c.agents[e].read_state().table(M.T_SLOT)}
                    assert (ext, internal) in got, (e, cid)
    finally:
        server.stop(None)
        c.stop()

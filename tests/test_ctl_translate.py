"""Translation (pure): topology -> routes/roles/config/thresholds, coflows -> slots, overrides,
meters (bytes per second), plus the controller settings parser."""
import os
import re

import pytest

from coflow import topology as T
from coflow.ctl import model as M
from coflow.ctl import translate as TR
from coflow.dataplane.constants import SLOT_IDLE_EPOCHS
from coflow.params import MB, DclasParams

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def ft():
    t = T.fattree(4)
    return t, TR.static_state(t, T.routes(t), "dclas", DclasParams(K=8))


def test_edge_switch_routing(ft):
    t, st = ft
    e0 = M.SwitchState.of(st["e0"])
    members = {m.member_id: dict(m.params) for m in e0.of_kind("member")}
    # e0: hosts h0, h1 on ports 1, 2; aggregation switches on ports 3, 4
    assert sorted(members) == [1, 2, 3, 4]
    assert members[1] == {"port": 1, "smac": TR.mac_int("02:00:00:00:00:01"),
                          "dmac": TR.mac_int(t.host("h0").mac)}
    assert members[3]["dmac"] == TR.mac_int(t.switch("a0").mac)
    groups = e0.of_kind("group")
    assert [(g.group_id, g.members, g.max_size) for g in groups] == [(1, (3, 4), 2)]
    routes = {dict(e.match)["ipv4_dst"]: e for e in e0.table(M.T_ROUTING)}
    assert len(routes) == 16
    assert routes[(TR.ip_int("10.0.0.1"), 32)].member_id == 1
    assert routes[(TR.ip_int("10.0.0.16"), 32)].group_id == 1


def test_core_switch_has_no_groups(ft):
    _, st = ft
    c0 = M.SwitchState.of(st["c0"])
    assert c0.of_kind("group") == []  # one path down from a core to every host
    assert len(c0.table(M.T_ROUTING)) == 16


def test_port_roles_fabric_only(ft):
    _, st = ft
    roles = lambda sw: sorted(dict(e.match)["ingress_port"] for e in M.SwitchState.of(st[sw]).table(M.T_PORT_ROLE))
    assert roles("e0") == [3, 4]          # host ports 1, 2 stay edges (the table default)
    assert roles("a0") == [1, 2, 3, 4]
    for e in M.SwitchState.of(st["e0"]).table(M.T_PORT_ROLE):
        assert dict(e.params) == {"role": 0}


def test_config_and_thresholds(ft):
    _, st = ft
    e0 = M.SwitchState.of(st["e0"])
    (cfg,) = [d for d in e0.of_kind("default") if d.table == M.T_CONFIG]
    assert dict(cfg.params) == {"mode": 1, "fair_prio": 4, "heavy_bytes": (1 << 64) - 1, "fifo_base": 0,
                                "managed": 1, "slot_idle_epochs": SLOT_IDLE_EPOCHS}
    th = sorted(e0.table(M.T_DCLAS), key=lambda e: dict(e.match)["bytes"])
    # hand-checked: Q1 = 10 MB = 10485760 B, x10 per queue, queue q -> priority 8 - q
    assert dict(th[0].match)["bytes"] == (0, 10 * MB - 1) and dict(th[0].params)["prio"] == 7
    assert dict(th[1].match)["bytes"] == (10 * MB, 100 * MB - 1) and dict(th[1].params)["prio"] == 6
    assert dict(th[7].match)["bytes"] == (10 ** 7 * MB, (1 << 64) - 1) and dict(th[7].params)["prio"] == 0
    assert len(th) == 8


def test_ecmp_window_per_layer(ft):
    """Each switch's ECMP hash window is its layer's (routing.p4): fat-tree edges 0, aggregations
    8, cores 16; a leaf-spine's leaves 0 and spines 8. Consecutive layers never share one (the
    fat-tree's polarization: tests/test_ctl_live_ecmp.py)."""
    t, st = ft
    want = {"e": 0, "a": 8, "c": 16}
    for sw in t.switches:
        (w,) = [d for d in M.SwitchState.of(st[sw.name]).of_kind("default")
                if d.table == M.T_ECMP_WINDOW]
        assert w.action == M.A_ECMP_WINDOW and dict(w.params) == {"shift": want[sw.name[0]]}, sw.name
    ls = T.leafspine(2, 2, 2)
    assert T.layers(ls) == {"l0": 0, "l1": 0, "s0": 1, "s1": 1}
    assert [TR.ecmp_shift(n) for n in range(5)] == [0, 8, 16, 0, 8]
    with pytest.raises(ValueError, match="one of 0, 8, 16"):
        TR.ecmp_window_entity(4)


def test_control_segments_class(ft):
    t, st = ft
    for sw in t.switches:
        (e,) = M.SwitchState.of(st[sw.name]).table(M.T_UNTAGGED)
        m = dict(e.match)
        # untagged TCP of IP length 0..127 (pure ACKs: 40-80), any DSCP -> the top class
        assert m == {"dscp": (0, 0), "ip_len": (0, 127), "protocol": (6, 0xFF)}
        assert dict(e.params) == {"prio": 7} and e.priority > 0
    off = TR.static_state(t, T.routes(t), "dclas", DclasParams(K=8), control_max_len=0)
    assert all(not M.SwitchState.of(ents).table(M.T_UNTAGGED) for ents in off.values())
    low = TR.static_state(t, T.routes(t), "fair", DclasParams(K=8), control_prio=5, control_max_len=100)
    (e,) = M.SwitchState.of(low["e0"]).table(M.T_UNTAGGED)
    assert dict(e.params) == {"prio": 5} and dict(e.match)["ip_len"] == (0, 100)


def test_dclas_k_above_8_rejected():
    with pytest.raises(ValueError, match="K=10"):
        TR.dclas_entities(DclasParams(K=10))


def test_fifo_lm_config():
    cfg = TR.config_entity("fifo-lm", 4, 10 * MB, 7)
    assert dict(cfg.params) == {"mode": 2, "fair_prio": 4, "heavy_bytes": 10 * MB, "fifo_base": 7,
                                "managed": 1, "slot_idle_epochs": SLOT_IDLE_EPOCHS}
    assert dict(TR.config_entity("hug").params)["mode"] == 3


@pytest.mark.parametrize("mode", TR.MODES)
def test_the_controller_config_says_a_controller_is_in_charge(mode):
    """Whatever the mode, the pipeline_config the controller writes on every switch has
    managed = 1 (unregistered coflows are served last: coflow.p4) and the slot idle age from
    the setting; the P4 program's own default (no controller) has managed = 0."""
    t = T.leafspine(2, 2, 2)
    st = TR.static_state(t, T.routes(t), mode, DclasParams(K=8), slot_idle_epochs=3)
    for sw in t.switches:
        d = {x.table: x for x in M.SwitchState.of(st[sw.name]).of_kind("default")}
        assert set(d) == {M.T_CONFIG, M.T_ECMP_WINDOW}
        cfg = d[M.T_CONFIG]
        assert cfg.table == M.T_CONFIG and cfg.action == M.A_SET_CONFIG
        assert dict(cfg.params)["managed"] == 1 and dict(cfg.params)["slot_idle_epochs"] == 3
    assert dict(TR.config_entity(mode, target="tofino").params)["managed"] == 1
    p4 = open(os.path.join(REPO, "p4src", "include", "control", "config.p4")).read()
    default = re.search(r"default_action = set_config\((.*)\);", p4).group(1)   # (bit<8>)Mode_t.DCLAS, ...
    assert [a.strip() for a in default.split(",")][4:] == ["0", "SLOT_IDLE_EPOCHS"]


@pytest.mark.skipif(not os.path.exists(os.path.join(REPO, "build", "coflow.p4info.txt")),
                    reason="build/coflow.p4info.txt missing: run `make p4`")
def test_controller_desired_state_sets_the_flag_and_the_p4info_takes_it():
    """The Controller's own desired state (daemon._static, from --set slot_idle_epochs) and
    its codec: the P4 program's set_config has both parameters at the widths written."""
    from coflow.ctl.daemon import Controller
    build = os.path.join(REPO, "build")
    t = T.leafspine(2, 2, 2)
    c = Controller(t, "dclas", os.path.join(build, "coflow.p4info.txt"),
                   os.path.join(build, "coflow.json"), {s.name: "127.0.0.1:1" for s in t.switches},
                   settings={"slot_idle_epochs": "5"})
    try:
        for name, state in c._static().items():
            d = {x.table: x for x in state.of_kind("default")}
            cfg, win = d[M.T_CONFIG], d[M.T_ECMP_WINDOW]
            assert dict(cfg.params)["managed"] == 1 and dict(cfg.params)["slot_idle_epochs"] == 5
            for d in (cfg, win):
                assert c.codec.decode(c.codec.encode(d)) == d, name
    finally:
        c.stop()


def test_slot_table():
    s = TR.SlotTable(size=3)
    assert [s.assign((i, 0)) for i in range(4)] == [0, 1, 2, None]
    assert s.assign((1, 0)) == 1  # idempotent
    assert s.release((0, 0)) == 0
    assert s.assign((9, 0)) == 0
    s.release((1, 0)); s.release((2, 0))
    assert s.assign((10, 0)) == 1  # freed first, reused first
    t = TR.SlotTable(size=4)
    assert t.seed((5, 0), 2) and not t.seed((6, 0), 2) and not t.seed((5, 0), 3)
    assert t.assign((7, 0)) == 0 and t.assign((8, 0)) == 1 and t.assign((9, 0)) == 3


def test_order_priorities_saturate():
    assert TR.order_priorities("abcdefghi") == {"a": 7, "b": 6, "c": 5, "d": 4, "e": 3, "f": 2,
                                                "g": 1, "h": 1, "i": 1}


def test_keep_classes_never_promotes_a_coflow_still_sending():
    """Hand-checked: A, B, C by rank 7, 6, 5. A finishes: B and C keep 6 and 5 (by rank they
    would rise to 7 and 6, and their next segments overtake their queued ones). D arrives
    ahead of all: the free top class. E arrives between B and C: B 6, E 5, C demoted to 4.
    B and C swap: C keeps 4 (no rise), B goes below it. A coflow absent last round (no active
    flow: nothing in flight) is placed afresh."""
    k = TR.keep_classes
    r1 = k(TR.order_priorities("ABC"), {})
    assert r1 == {"A": 7, "B": 6, "C": 5}
    r2 = k(TR.order_priorities("BC"), r1)
    assert r2 == {"B": 6, "C": 5}
    r3 = k(TR.order_priorities("DBC"), r2)
    assert r3 == {"D": 7, "B": 6, "C": 5}
    r4 = k(TR.order_priorities("DBEC"), r3)
    assert r4 == {"D": 7, "B": 6, "E": 5, "C": 4}
    r5 = k(TR.order_priorities("DCEB"), r4)
    assert r5 == {"D": 7, "C": 4, "E": 3, "B": 2}
    assert k(TR.order_priorities("CB"), {"B": 2}) == {"C": 7, "B": 2}   # C idle last round
    # ties in the ranked input (a shared class, e.g. FIFO-LM groups) stay ties
    assert k({"a": 7, "b": 7, "c": 6}, {"a": 5}) == {"a": 5, "b": 5, "c": 4}
    # saturation: everything past the bottom shares it
    assert list(k(TR.order_priorities("abcdefghi"), {"a": 2}).values()) == [2] + [1] * 8


def test_keep_classes_properties_over_random_histories():
    """Over random histories of orders (arrivals, departures, reorderings): no coflow present
    in two consecutive rounds rises; along the order priorities never increase; two coflows
    the ranking separates are one class apart unless at the bottom; every class is in
    1..7; and a newcomer placed first gets 7."""
    import random
    rnd = random.Random(7)
    for _ in range(300):
        live: list = []
        prev: dict = {}
        nxt = 0
        for _ in range(30):
            for c in list(live):
                if rnd.random() < 0.2:
                    live.remove(c)
            for _ in range(rnd.randint(0, 3)):
                live.insert(rnd.randint(0, len(live)), nxt)
                nxt += 1
            if len(live) > 1 and rnd.random() < 0.3:
                i, j = rnd.sample(range(len(live)), 2)
                live[i], live[j] = live[j], live[i]
            got = TR.keep_classes(TR.order_priorities(live), prev)
            assert list(got) == live
            vals = list(got.values())
            assert all(1 <= v <= 7 for v in vals)
            assert all(b <= a for a, b in zip(vals, vals[1:]))
            assert all(b < a or b == 1 for a, b in zip(vals, vals[1:]))
            assert all(got[c] <= prev[c] for c in got if c in prev)
            if live and live[0] not in prev:
                assert got[live[0]] == 7
            prev = got


def test_override_priority_range():
    with pytest.raises(ValueError):
        TR.override_entity((1, 0), 8)


def test_meter_units_bytes_per_second():
    """cir/pir: the scheduler's payload rate as frame bytes PER SECOND (x 1514/1440); burst:
    one RTT of it, clamped to [2 frames, half the port buffer]."""
    s = TR.CtlSettings(link_mbps=10)  # 1.25e6 B/s
    m = TR.meter_config(42, 250_000.0, s)  # 2 Mb/s of payload
    assert (m.cir, m.pir) == (262_848, 262_848)  # 250,000 * 1514 / 1440, bytes/s (not bytes/us)
    assert m.cburst == m.pburst == 2 * 1514  # 5 ms of 263 kB/s = 1,315 B < 2 frames
    big = TR.meter_config(1, 100e6, s)
    assert big.cburst == 32 * 1514 // 2  # 5 ms of 105 MB/s: capped at half the port buffer
    mid = TR.meter_config(1, 1_000_000.0, TR.CtlSettings(rtt_us=10_000))
    assert mid.cburst == 10_514  # 10 ms of 1,051,389 B/s
    floor = TR.meter_config(1, 0.0, s)
    assert floor.cir == 12_500  # 1% of the link (frame bytes): a paused flow keeps a trickle
    full = TR.meter_config(1, s.link_payload_Bps, s)
    assert full.cir == 1_250_000  # the whole link's payload rate is the link's frame rate


def test_meter_entities_one_meter_per_pair():
    """Each (coflow, src, dst) pair its own meter index from the pool of its sender's edge;
    flows on the same pair share the table key, hence the meter, at the sum of their rates."""
    t = T.fattree(4)
    s = TR.CtlSettings(min_rate_frac=0)
    cid = (7, 2)
    flows = [(cid, "h0", "h5", 1440.0), (cid, "h0", "h5", 720.0),  # same pair: one meter, summed
             (cid, "h1", "h9", 288.0), (cid, "h2", "h3", 144.0)]
    out = TR.meter_entities(t, flows, None, s)
    assert sorted(out) == ["e0", "e1"]  # h0, h1 on e0; h2 on e1: the sender's edge
    e0 = M.SwitchState.of(out["e0"])
    fm = {(dict(e.match)["ipv4_src"], dict(e.match)["ipv4_dst"]): dict(e.params)["index"]
          for e in e0.table(M.T_FLOW_METER)}
    assert fm == {(TR.ip_int("10.0.0.1"), TR.ip_int("10.0.0.6")): 0,
                  (TR.ip_int("10.0.0.2"), TR.ip_int("10.0.0.10")): 1}
    meters = {m.index: m for m in e0.of_kind("meter")}
    assert (meters[0].cir, meters[1].cir) == (2271, 303)  # ceil(x * 1514 / 1440)
    e1 = M.SwitchState.of(out["e1"])
    assert [m.index for m in e1.of_kind("meter")] == [0]  # per-switch pools


def test_meter_every_pair_enforced_exactly():
    """10 pairs of one coflow at one edge: 10 meters, each at its own pair's rate (the old
    slot*8 + rank mod 8 scheme shared token buckets beyond 8 pairs)."""
    t = T.bigswitch(16)
    s = TR.CtlSettings(min_rate_frac=0)
    cid = (1, 0)
    flows = [(cid, "h0", f"h{d}", 1440.0 * d) for d in range(1, 11)]
    out = M.SwitchState.of(TR.meter_entities(t, flows, None, s)["s0"])
    idx = {TR.ip_int(f"10.0.0.{d + 1}"): dict(e.params)["index"]
           for d in range(1, 11) for e in out.table(M.T_FLOW_METER)
           if dict(e.match)["ipv4_dst"] == TR.ip_int(f"10.0.0.{d + 1}")}
    assert sorted(idx.values()) == list(range(10))
    meters = {m.index: m.cir for m in out.of_kind("meter")}
    for d in range(1, 11):
        assert meters[idx[TR.ip_int(f"10.0.0.{d + 1}")]] == 1514 * d


def test_split_settings():
    ctl, rest = TR.split_settings({"link_mbps": "100", "K": "8", "fair_prio": "3"})
    assert ctl.link_Bps == 12.5e6 and ctl.fair_prio == 3 and rest == {"K": "8"}
    with pytest.raises(ValueError, match="link_mbps"):
        TR.split_settings({"link_mbps": "fast"})
    with pytest.raises(ValueError, match="fair_prio"):
        TR.split_settings({"fair_prio": "9"})
    ctl, _ = TR.split_settings({"control_prio": "6", "control_max_len": "0"})
    assert (ctl.control_prio, ctl.control_max_len) == (6, 0)
    with pytest.raises(ValueError, match="control_prio"):
        TR.split_settings({"control_prio": "8"})
    with pytest.raises(ValueError, match="control_max_len"):
        TR.split_settings({"control_max_len": "-1"})
    with pytest.raises(ValueError, match="control_max_len"):
        TR.split_settings({"control_max_len": "70000"})


@pytest.mark.parametrize("kv, msg", [
    ({"rtt_us": "0"}, "rtt_us"), ({"rtt_us": "-5"}, "rtt_us"), ({"rtt_us": "nan"}, "rtt_us"),
    ({"rtt_us": "fast"}, "rtt_us"), ({"port_buffer_bytes": "3000"}, "port_buffer_bytes"),
    ({"port_buffer_bytes": "6055", "burst_buffer_frac": "0.5"}, "port_buffer_bytes"),
    ({"burst_buffer_frac": "0"}, "burst_buffer_frac"), ({"burst_buffer_frac": "1.5"}, "burst_buffer_frac"),
    ({"progress_s": "-1"}, "progress_s"), ({"min_rate_frac": "2"}, "min_rate_frac")])
def test_burst_settings_are_validated_in_one_line(kv, msg):
    with pytest.raises(ValueError, match=msg) as err:
        TR.split_settings(kv)
    assert "\n" not in str(err.value)


def test_burst_settings_accepted():
    ctl, rest = TR.split_settings({"rtt_us": "250", "port_buffer_bytes": "6056",
                                   "burst_buffer_frac": "1", "progress_s": "0"})
    assert (ctl.rtt_us, ctl.port_buffer_bytes, ctl.burst_buffer_frac, ctl.progress_s) == \
        (250.0, 6056, 1.0, 0.0) and rest == {}
    assert TR.split_settings({})[0].slot_idle_epochs == SLOT_IDLE_EPOCHS
    assert TR.split_settings({"slot_idle_epochs": "2"})[0].slot_idle_epochs == 2
    for bad in ("0", "65536"):
        with pytest.raises(ValueError, match="slot_idle_epochs"):
            TR.split_settings({"slot_idle_epochs": bad})


def test_vq_drain_is_the_rate_in_shifted_bytes_per_microsecond():
    from coflow.dataplane.constants import VQ_SHIFT
    assert TR.vq_drain(1.0) == 128                      # 0.125 B/us << 10
    assert TR.vq_drain(10_000.0) == 1_280_000           # 10 Gb/s
    assert TR.vq_drain(1e-6) == 1                       # never 0: a level that never drains
    assert TR.vq_drain(8.0) == 1 << VQ_SHIFT            # 1 byte per microsecond


def test_ecn_entities_on_every_port_only_when_asked():
    t = T.fattree(4)
    routes = T.routes(t)
    off = TR.static_state(t, routes, "fair", DclasParams(K=8))
    assert all(not M.SwitchState.of(ents).table(M.T_ECN_PORT) for ents in off.values())
    on = TR.static_state(t, routes, "fair", DclasParams(K=8), ecn_threshold_bytes=30_000,
                         link_mbps=4.0)
    for sw in t.switches:
        ents = M.SwitchState.of(on[sw.name]).table(M.T_ECN_PORT)
        assert sorted(dict(e.match)["egress_port"] for e in ents) == sorted(sw.ports)
        assert {e.action for e in ents} == {M.A_SET_VQ}
        assert {e.params for e in ents} == {M.params(drain_per_us=512, threshold_level=30_000 << 10)}


def test_ecn_setting_is_validated():
    from coflow.dataplane.constants import ECN_MAX_THRESHOLD_BYTES
    assert TR.split_settings({})[0].ecn_threshold_bytes == 0
    assert TR.split_settings({"ecn_threshold_bytes": "30280"})[0].ecn_threshold_bytes == 30280
    for bad in ("-1", str(ECN_MAX_THRESHOLD_BYTES + 1), "lots"):
        with pytest.raises(ValueError, match="ecn_threshold_bytes") as err:
            TR.split_settings({"ecn_threshold_bytes": bad})
        assert "\n" not in str(err.value)


def test_meter_peak_burst_leaves_room_for_marks():
    """meter_peak_bursts = k: pburst = k x cburst (what lies between is YELLOW, ECN-marked by
    flow_meter.p4), capped at the port buffer, never below cburst; cir = pir unchanged."""
    s = TR.CtlSettings(link_mbps=10, meter_peak_bursts=4.0)
    m = TR.meter_config(42, 250_000.0, s)
    assert (m.cir, m.pir, m.cburst, m.pburst) == (262_848, 262_848, 2 * 1514, 8 * 1514)
    big = TR.meter_config(1, 100e6, s)       # committed burst = half the buffer: peak = buffer
    assert (big.cburst, big.pburst) == (16 * 1514, 32 * 1514)
    assert TR.meter_config(1, 250_000.0, TR.CtlSettings()).pburst == 2 * 1514   # default: k = 1
    # paced senders (headroom): the peak holds the 10 segments Linux never paces
    paced = TR.CtlSettings(link_mbps=10, meter_peak_bursts=4.0, meter_headroom=0.1)
    assert TR.meter_config(42, 250_000.0, paced).pburst == 10 * 1514
    for bad in ("0.5", "nan", "-2"):
        with pytest.raises(ValueError, match="meter_peak_bursts"):
            TR.split_settings({"meter_peak_bursts": bad})

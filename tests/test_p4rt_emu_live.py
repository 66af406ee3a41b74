"""The emulated switch (bench/p4rt_emu.py) against BMv2: the same controller operations on both
(a leaf-spine's worth of each; the controller's start, D-CLAS demotions from counters, SEBF meters
and flow_meter entries, departures, a controller restart), then the switches' state compared:
every entity the controller manages (its read-back), the default actions, every index of the
counters and meters it reads, and the answers to its counter reads byte for byte after decoding.
Also: the write errors of a Write before its dependency, on both."""
import os
import sys

import pytest

from coflow import topology as T
from live import BMV2_JSON, P4INFO, REPO, bmv2_marks, offset_ids

sys.path.insert(0, os.path.join(REPO, "bench"))

pytestmark = bmv2_marks()



@pytest.fixture
def both():
    """(topology, {"bmv2": addrs, "emulated": addrs})."""
    from p4rt_emu import EmulatorThread
    from coflow.ctl.bmv2 import Bmv2
    topo = offset_ids(T.leafspine(2, 2, 2), 3000 + os.getpid() % 500 * 10)
    sws = [Bmv2(s.device_id).start() for s in topo.switches]
    emu = EmulatorThread([s.device_id for s in topo.switches]).start()
    try:
        yield topo, {"bmv2": {s.name: b.address for s, b in zip(topo.switches, sws)},
                     "emulated": {s.name: emu.addresses[s.device_id] for s in topo.switches}}, emu
    finally:
        emu.stop()
        for b in sws:
            b.stop()


def snapshot(ctl) -> dict:
    """Everything the controller uses, read from each switch with a fresh client."""
    from coflow.ctl import model as M
    from coflow.dataplane.p4rt import P4RuntimeClient
    out = {}
    for name, a in ctl.agents.items():
        c = P4RuntimeClient(a.address, a.device_id, 1, ctl.codec.h)
        c.connect_reader(timeout=5)
        try:
            ents = c.read_many(ctl.codec.wildcard_reads())
            st = sorted(repr(ctl.codec.decode(e)) for e in ents if ctl.codec.decode(e) is not None)
            counters = {}
            for cn in (M.C_COFLOW_BYTES, M.C_FLOW_BYTES):
                got = c.read(c.counter_entity(cn))
                counters[cn] = sorted((e.counter_entry.index.index, e.counter_entry.data.byte_count,
                                       e.counter_entry.data.packet_count) for e in got)
            meters = sorted((e.meter_entry.index.index, e.meter_entry.config.cir, e.meter_entry.config.pir,
                             e.meter_entry.config.cburst, e.meter_entry.config.pburst)
                            for e in c.read(c.meter_entity(M.M_FLOW, 0)) + c.read(_wild(c, M.M_FLOW)))
            out[name] = {"entities": st, "counters": counters, "meters": meters,
                         "cookie": c.pipeline_cookie()}
        finally:
            c.close()
    return out


def _wild(c, meter):
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    e = pb.Entity()
    e.meter_entry.meter_id = c.p4info.get_id("meters", meter)
    return e


def drive(topo, addrs, mode) -> tuple:
    """The same controller operations on one fabric; returns (snapshots after each phase,
    decoded counter reads)."""
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl import model as M
    from coflow.ctl.daemon import Controller
    from coflow.params import MB
    hosts = [h.name for h in topo.hosts]
    reg = CoflowRegistry(hosts)
    settings = {"audit_s": "0", "telemetry_s": "0", "link_mbps": "10"}
    snaps, reads = [], []
    ctl = Controller(topo, mode, P4INFO, BMV2_JSON, addrs, registry=reg, settings=settings)
    try:
        ctl.start(loop=False)
        cids = [reg.register([(hosts[k], hosts[(k + 1) % len(hosts)], 10**6 * (k + 1)),
                              (hosts[(k + 2) % len(hosts)], hosts[k], None)]).cid for k in range(4)]
        ctl.round()
        snaps.append(snapshot(ctl))
        slots = dict(ctl.slots.slot)
        e0 = ctl.edges[0]
        a = ctl.agents[e0]
        if mode == "dclas":     # two coflows pass thresholds on one edge
            vals = {slots[(cids[0].external, cids[0].internal)]: 20 * MB,
                    slots[(cids[1].external, cids[1].internal)]: 200 * MB}
        else:                   # the closed loop: bytes through two meters
            vals = {i: 1514 * 10 * (i + 1) for i in sorted({x for _, x in ctl._meter_ctx.pool.index_of.values()})[:2]}
        counter = M.C_COFLOW_BYTES if mode == "dclas" else M.C_FLOW_BYTES
        with a.lock:
            a.client.write([("MODIFY", _counter(a.client, counter, i, v)) for i, v in vals.items()])
        import time
        time.sleep(0.2)   # the emulated edges push their counters (BMv2 is polled)
        ctl.round()
        reads.append(sorted(a.read_counter_all_start(counter, tuple(sorted(vals)))().items()))
        reads.append(len(a.read_counter_all_start(counter, None)()))
        snaps.append(snapshot(ctl))
        reg.unregister(cids[2])
        reg.update(cids[0], sent={0: 10**5})
        ctl.round()
        import time
        time.sleep(1.1)   # the departed coflow's slot lingers 1 s
        ctl.round()
        snaps.append(snapshot(ctl))
    finally:
        ctl.stop()
    # a restarted controller reads everything back and adopts it
    ctl2 = Controller(topo, mode, P4INFO, BMV2_JSON, addrs, registry=reg, settings=settings)
    try:
        ctl2.start(loop=False)
        ctl2.round()
        snaps.append(snapshot(ctl2))
        reads.append({n: a.pipeline_pushes for n, a in ctl2.agents.items()})
    finally:
        ctl2.stop()
        reg.close()
    return snaps, reads


def _counter(client, counter, index, nbytes):
    ent = client.counter_entity(counter, index)
    ent.counter_entry.data.byte_count = nbytes
    ent.counter_entry.data.packet_count = 10
    return ent


@pytest.mark.parametrize("mode", ["dclas", "sebf"])
def test_the_controller_leaves_the_same_state_on_both(both, mode):
    topo, addrs, _ = both
    got = {k: drive(topo, a, mode) for k, a in addrs.items()}
    snaps_b, reads_b = got["bmv2"]
    snaps_e, reads_e = got["emulated"]
    assert len(snaps_b) == len(snaps_e) == 4
    for i, (sb, se) in enumerate(zip(snaps_b, snaps_e)):
        for sw in sb:
            for part in ("entities", "counters", "meters", "cookie"):
                assert sb[sw][part] == se[sw][part], (mode, i, sw, part)
    assert reads_b == reads_e
    # not vacuous: the controller wrote overrides / meters, and counters were read
    flat = " ".join(" ".join(s["entities"]) for s in snaps_b[1].values())
    assert ("coflow_override" in flat) if mode == "dclas" else ("flow_meter" in flat and "MeterConfig" in flat)


def test_a_write_before_its_dependency_fails_the_same_way_on_both(both):
    from coflow.ctl import model as M
    from coflow.ctl.codec import Codec
    from coflow.dataplane.p4rt import P4RuntimeClient, P4RuntimeError
    topo, addrs, _ = both
    codec = Codec.from_file(P4INFO)
    sw = topo.switches[0]
    grp = M.Group(M.P_ECMP, 7, (1, 2))
    mem = [M.Member(M.P_ECMP, i, M.A_NEXT_HOP, M.params(port=i, smac=1, dmac=2)) for i in (1, 2)]
    errors = {}
    for kind, a in addrs.items():
        c = P4RuntimeClient(a[sw.name], sw.device_id, 10, codec.h)
        c.connect(timeout=5)
        try:
            c.set_pipeline(P4INFO, BMV2_JSON, cookie=1)
            got = []
            for ops in ([M.Op("INSERT", grp)] + [M.Op("INSERT", m) for m in mem],   # group first
                        [M.Op("INSERT", m) for m in mem] + [M.Op("INSERT", grp)],   # right order
                        [M.Op("DELETE", mem[0]), M.Op("DELETE", grp)]):             # member first
                req = c.write_request()
                codec.add_updates(req, ops)
                try:
                    c.write_raw(req.SerializeToString())
                    got.append([])
                except P4RuntimeError as e:
                    got.append([d.split(":")[0] for d in e.details])   # which updates failed
            errors[kind] = got
        finally:
            c.close()
    assert errors["bmv2"] == errors["emulated"]
    # PI creates the group of the first batch (empty: its members did not exist yet) and fails
    # the update; so the second batch's group insert is ALREADY_EXISTS, and the third's deletes
    # succeed (the empty group holds no member)
    assert errors["bmv2"] == [["update 0"], ["update 0", "update 1", "update 2"], []]

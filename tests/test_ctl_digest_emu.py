"""The controller's report digests end to end against emulated switches (bench/p4rt_emu.py, in
this process; the emulator sends a DigestList when a coflow_bytes write crosses a report step
multiple, as report.p4 does per packet): the controller configures the digest, writes one
report_step entry per coordinated slot, and a coflow whose bytes on one edge cross Q1 is
demoted (overrides on the other edge) from the digest alone, with no counter read after the
connection's first poll. A missed digest list makes the next round poll that edge."""
import os
import sys

import pytest
from live import wait_for

from coflow import topology as T
from coflow.api.registry import CoflowRegistry
from coflow.ctl import daemon as D
from coflow.ctl import model as M

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
P4INFO = os.path.join(ROOT, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(ROOT, "build", "coflow.json")


def _has_digest():
    if not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)):
        return False
    with open(P4INFO) as f:
        return "report_digest_t" in f.read()


pytestmark = pytest.mark.skipif(not _has_digest(),
                                reason="build/coflow.p4info.txt without the report digest: run `make p4`")


@pytest.fixture
def setup():
    from p4rt_emu import EmulatorThread
    topo = T.leafspine(2, 1, 2)
    emu = EmulatorThread([s.device_id for s in topo.switches]).start()
    hosts = [h.name for h in topo.hosts]
    reg = CoflowRegistry(hosts)
    # a sends from both edges (hosts 0 and 3), b from e0 only
    a = reg.register([(hosts[0], hosts[2], None), (hosts[3], hosts[1], None)]).cid
    b = reg.register([(hosts[1], hosts[3], None)]).cid
    ctl = D.Controller(topo, "dclas", P4INFO, BMV2_JSON,
                       {s.name: emu.addresses[s.device_id] for s in topo.switches}, registry=reg,
                       settings={"audit_s": "0", "telemetry_s": "0", "Q1": "4096", "push": "0",
                                 "digest": "1", "digest_resync_s": "1000"})
    ctl.start(loop=False)
    try:
        yield ctl, emu, topo, (a, b)
    finally:
        ctl.stop()
        emu.stop()
        reg.close()


def _bump(ctl, emu, topo, edge, slot, nbytes):
    dev = next(s.device_id for s in topo.switches if s.name == edge)
    cid = ctl.codec.counter_id[M.C_COFLOW_BYTES]
    emu.call(lambda: emu.emu.devices[dev].bump_counter(cid, slot, nbytes, 1))


def test_demotion_from_a_digest_without_a_read(setup):
    ctl, emu, topo, (a, b) = setup
    assert ctl.use_digest
    ctl.round()
    e0, e1 = ctl.edges
    sa = ctl.slots.slot[(a.external, a.internal)]
    steps = ctl.digest.steps
    assert steps[sa] & (steps[sa] - 1) == 0 and steps[sa] <= 4096 // (2 * 8)
    # every edge holds a report_step entry per coordinated slot, mask = ~(step - 1)
    for e in ctl.edges:
        ents = ctl.agents[e].actual.table(M.T_REPORT)
        assert {dict(x.match)["slot"] for x in ents} == set(ctl.slots.slot.values())
    polls = dict(ctl.digest.polls)
    assert polls.get("connected") == 2 and "clock" not in polls
    got0 = ctl.agents[e0].digests.lists
    _bump(ctl, emu, topo, e0, sa, 5000)     # 0 -> 5000 bytes on e0: past Q1 = 4096
    assert wait_for(lambda: ctl.agents[e0].digests.lists > got0), "no digest list arrived"
    r = ctl.round()
    assert ctl.digest.polls == polls                       # nothing was polled
    assert r["read_s"] >= 0 and ctl._queues[(a.external, a.internal)] == 2
    assert ctl._queues[(b.external, b.internal)] == 1
    # e1 saw none of a's bytes, but holds a's registered sender (host 3): its local decision
    # (queue 1) is overridden to queue 2 before its first byte
    assert (a.external, a.internal) in ctl._overrides[e1]
    assert (a.external, a.internal) not in ctl._overrides[e0]
    # the coordinator's count is the digest's, rounded down to the step
    assert ctl.coord.local_bytes(e0, sa) == 5000 & ~(steps[sa] - 1)


def test_a_missed_list_polls_that_edge(setup):
    ctl, emu, topo, (a, b) = setup
    ctl.round()
    e0, e1 = ctl.edges
    sb = ctl.slots.slot[(b.external, b.internal)]
    dev = next(s.device_id for s in topo.switches if s.name == e1)
    did = ctl.digest.fmt.digest_id

    def skip_one():
        d = emu.emu.devices[dev]
        d.digest_lists[did] = d.digest_lists.get(did, 0) + 1   # list n+1 is "lost"
    _bump(ctl, emu, topo, e1, sb, 300)      # a first list on this connection (list 1)
    assert wait_for(lambda: ctl.agents[e1].digests.lists == 1)
    ctl.round()
    emu.call(skip_one)
    before = dict(ctl.digest.polls)
    _bump(ctl, emu, topo, e1, sb, 2700)     # list 3 arrives, list 2 never did
    assert wait_for(lambda: ctl.agents[e1].digests.lists == 2)
    ctl.round()
    assert ctl.digest.polls.get("gap", 0) == before.get("gap", 0) + 1
    assert ctl.agents[e1].digests.missed == 1
    assert ctl.coord.local_bytes(e1, sb) == 3000 & ~(ctl.digest.steps[sb] - 1)


def test_a_digest_lost_without_a_gap_is_repaired_by_the_resync_poll_and_counted(setup):
    """A crossing whose digest the switch drops without skipping a list id (Tofino's learn
    filter): the count stays stale until the edge's resync poll, which repairs it and counts
    a correction in the controller's metrics."""
    ctl, emu, topo, (a, b) = setup
    ctl.round()
    e0 = ctl.edges[0]
    sb = ctl.slots.slot[(b.external, b.internal)]
    dev = next(s.device_id for s in topo.switches if s.name == e0)
    cid = ctl.codec.counter_id[M.C_COFLOW_BYTES]

    def lost():   # the crossing happens, its digest never leaves the switch
        d = emu.emu.devices[dev]
        rep, d._report = d._report, None
        d.bump_counter(cid, sb, 5000, 1)
        d._report = rep
    emu.call(lost)
    ctl.round()
    assert ctl.coord.local_bytes(e0, sb) == 0          # stale: nothing pushed, no gap seen
    assert ctl.agents[e0].digests.missed == 0

    def corrections():
        return ctl.metrics.registry.get_sample_value(
            "coflow_ctl_digest_resync_corrections_total", {"switch": e0}) or 0
    assert corrections() == 0
    ctl.digest.resync_s = 1e-6                         # the slow clock's turn comes
    for _ in ctl.edges:
        ctl.round()
    step = ctl.digest.steps[sb]
    assert ctl.coord.local_bytes(e0, sb) == 5000 & ~(step - 1)
    assert corrections() == 1


def digest_entry_sequence(address, device_id):
    """DigestEntry writes as PI's digest_mgr answers them: INSERT of a configured digest
    ALREADY_EXISTS, MODIFY / DELETE of an unconfigured one NOT_FOUND, an unknown digest id
    NOT_FOUND; configure_digest (INSERT, else MODIFY) works either way. (Also run against BMv2:
    tests/test_ctl_digest_live.py.)"""
    from coflow.ctl.digest import DigestFormat
    from coflow.dataplane.p4rt import P4InfoHelper, P4RuntimeClient, P4RuntimeError
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    c = P4RuntimeClient(address, device_id, 10, P4InfoHelper.from_file(P4INFO))
    c.connect(timeout=5)
    try:
        c.set_pipeline(P4INFO, BMV2_JSON)
        did = DigestFormat.from_p4info(c.p4info.p4info).digest_id

        def ent(d=did):
            e = pb.Entity()
            e.digest_entry.digest_id = d
            e.digest_entry.config.max_list_size = 1
            return e
        with pytest.raises(P4RuntimeError, match="code 5"):     # NOT_FOUND
            c.write([("MODIFY", ent())])
        with pytest.raises(P4RuntimeError, match="code 5"):
            c.write([("INSERT", ent(did + 1))])
        c.write([("INSERT", ent())])
        with pytest.raises(P4RuntimeError, match="code 6"):     # ALREADY_EXISTS
            c.write([("INSERT", ent())])
        c.configure_digest(did)                                  # falls back to MODIFY
        c.write([("DELETE", ent())])
        with pytest.raises(P4RuntimeError, match="code 5"):
            c.write([("DELETE", ent())])
        c.configure_digest(did)                                  # INSERT again
    finally:
        c.close()


def test_emulated_digest_entry_has_pi_semantics():
    from p4rt_emu import EmulatorThread
    with EmulatorThread([7]) as emu:
        digest_entry_sequence(emu.addresses[7], 7)

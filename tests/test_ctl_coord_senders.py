"""Overrides only where a coflow sends (issue 29, :mod:`coflow.ctl.coord`): a demoted coflow's
override goes to the edges that counted its bytes (now or before a restart) and to the edges of
its registered flows' senders, nowhere else; hand-checked on 4 edges (K=8, E=10, Q1=10 MB:
queue 2 from 10 MB, BMv2 priority 8 - queue), for the full and the incremental round alike, and
for FIFO-LM. The random histories are in tests/test_ctl_coord_incremental.py."""
import pytest

from coflow.ctl.coord import DclasCoordinator
from coflow.params import MB, DclasParams

EDGES = ["e0", "e1", "e2", "e3"]
A, B = (1, 0), (2, 0)
SLOTS = {A: 0, B: 1}


def _round(c, kind, now, senders):
    fn = c.round if kind == "full" else c.round_incremental
    return fn(now, dict(SLOTS), EDGES, senders)


@pytest.mark.parametrize("kind", ["full", "incremental"])
def test_demotion_overrides_only_where_the_coflow_sends(kind):
    c = DclasCoordinator(DclasParams(K=8, E=10, Q1=10 * MB))
    # A sends on e0 and e1 (6 + 5 MB = 11 MB: queue 2, priority 6); its one registered flow
    # is from a host of e0; B (1 MB on e0) stays in queue 1
    c.observe("e0", {0: 6 * MB, 1: 1 * MB})
    c.observe("e1", {0: 5 * MB, 1: 0})
    for e in ("e2", "e3"):
        c.observe(e, {0: 0, 1: 0})
    senders = {A: frozenset({"e0"}), B: frozenset({"e0"})}
    r0 = _round(c, kind, 0.0, senders)
    assert r0.queues == {A: 2, B: 1}
    assert r0.overrides == {"e0": {A: 6}, "e1": {A: 6}, "e2": {}, "e3": {}}
    # e2 starts sending A, unannounced: the round that first reads its bytes gives it the override
    c.observe("e2", {0: 1000})
    r1 = _round(c, kind, 1.0, senders)
    assert r1.overrides == {"e0": {A: 6}, "e1": {A: 6}, "e2": {A: 6}, "e3": {}}
    if kind == "incremental":
        assert r1.changed == ["e2"]
    # a flow of A from a host of e3 is added (the API's AddFlows): e3 gets the override in the
    # next round, before its first byte
    senders = {A: frozenset({"e0", "e3"}), B: senders[B]}
    r2 = _round(c, kind, 2.0, senders)
    assert r2.overrides == {"e0": {A: 6}, "e1": {A: 6}, "e2": {A: 6}, "e3": {A: 6}}
    if kind == "incremental":
        assert r2.changed == ["e3"]
    # senders unknown (None): the rule before, every edge whose local queue differs
    r3 = _round(c, kind, 3.0, None)
    assert r3.overrides == {e: {A: 6} for e in EDGES}


@pytest.mark.parametrize("kind", ["full", "incremental"])
def test_restarted_edge_keeps_its_override(kind):
    """An edge that counted the coflow before its switch restarted still gets the override
    while its fresh count is 0 (the offset says it sent there)."""
    c = DclasCoordinator(DclasParams(K=8, E=10, Q1=10 * MB))
    c.observe("e0", {0: 6 * MB, 1: 0})
    c.observe("e1", {0: 5 * MB, 1: 0})
    senders = {A: frozenset(), B: frozenset()}
    assert _round(c, kind, 0.0, senders).overrides["e1"] == {A: 6}
    c.switch_reset("e1")
    c.observe("e1", {0: 0, 1: 0})
    r = _round(c, kind, 1.0, senders)
    assert r.sizes[A] == 11 * MB and r.overrides["e1"] == {A: 6} and r.overrides["e2"] == {}


def test_fifo_lm_overrides_only_where_the_coflow_sends():
    from coflow.sched import make_scheduler
    sched = make_scheduler("fifo-lm", {"heavy_bytes": str(10 * MB)})
    co = DclasCoordinator(DclasParams(K=8))
    co.observe("e0", {0: 6 * MB, 1: 0})
    co.observe("e1", {0: 5 * MB, 1: 0})
    # A counted on e0 and e1; B counted nowhere yet, registered from e2: groups {A heavy, B}
    r = co.fifo_lm_round(1.0, dict(SLOTS), EDGES, sched, {A: frozenset(), B: frozenset({"e2"})})
    assert r.overrides == {"e0": {A: 7}, "e1": {A: 7}, "e2": {B: 7}, "e3": {}}
    r = co.fifo_lm_round(1.0, dict(SLOTS), EDGES, sched, None)   # the rule before: every edge
    assert r.overrides == {e: {A: 7, B: 7} for e in EDGES}


P4INFO_MISSING = "build/coflow.p4info.txt missing: run `make p4` (the Controller needs the P4Info)"


@pytest.mark.parametrize("mode", ["dclas", "fifo-lm"])
def test_controller_writes_overrides_where_the_coflow_sends(mode):
    """The daemon hands the coordinator its registered senders (each flow's source host ->
    its edge) and writes what the round gives, on 3 emulated edges (bench/p4rt_emu.py): A is
    registered from hosts of l0 and l1 and counted on l0 only; l2 holds none of its senders
    and gets no override (before: every edge); a flow added from l2's host (AddFlows) gives
    l2 the override in the next round."""
    import os
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p4info, bmv2 = (os.path.join(root, "build", f) for f in ("coflow.p4info.txt", "coflow.json"))
    if not os.path.exists(p4info):
        pytest.skip(P4INFO_MISSING)
    sys.path.insert(0, os.path.join(root, "bench"))
    from p4rt_emu import EmulatorThread

    from coflow import topology as T
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl import daemon as D
    from coflow.ctl import model as M
    topo = T.leafspine(3, 1, 1)
    emu = EmulatorThread([s.device_id for s in topo.switches]).start()
    reg = CoflowRegistry([h.name for h in topo.hosts])
    host = {s: [h.name for h in topo.hosts if h.switch == s][0] for s in ("l0", "l1", "l2")}
    a = reg.register([(host["l0"], host["l1"], None), (host["l1"], host["l0"], None)]).cid
    c = D.Controller(topo, mode, p4info, bmv2, {s.name: emu.addresses[s.device_id] for s in topo.switches},
                     registry=reg, settings={"audit_s": "0", "telemetry_s": "0", "push": "0",
                                             **({"Q1": "1000"} if mode == "dclas" else {})})
    A = (a.external, a.internal)
    try:
        c.start(loop=False)
        c.round()
        slot = c.slots.slot[A]
        dev = next(s.device_id for s in topo.switches if s.name == "l0")
        emu.call(lambda: emu.emu.devices[dev].bump_counter(c.codec.counter_id[M.C_COFLOW_BYTES], slot, 5000, 1))
        c.round()

        def held(edge):
            return {dict(e.match)["external_id"] for e in c.agents[edge].actual.table(M.T_OVERRIDE)}
        if mode == "dclas":   # 5,000 B: queue 2; l0 decides it itself, l1 (a sender) overrides
            assert c._queues[A] == 2
            assert held("l0") == set() and held("l1") == {A[0]}
        else:                 # FIFO-LM: an override wherever A sends (counted on l0, registered l1)
            assert held("l0") == {A[0]} and held("l1") == {A[0]}
        assert held("l2") == set()
        reg.add_flows(a, [(host["l2"], host["l0"], None)])
        c.round()
        assert held("l2") == {A[0]}
    finally:
        c.stop()
        emu.stop()
        reg.close()

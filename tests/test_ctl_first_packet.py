"""Order from the first packet (issue 27): a coflow registered in a scheduled mode gets its
queue class in the same Write as its slot entry, and the API's Register (which waits in
``Controller.wait_installed``) answers only once both are on the edges, so the first packet
the application sends is already served in its place in the order."""
import os

import pytest

from coflow import topology as T
from coflow.ctl import model as M
from coflow.ctl import translate as TR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(ROOT, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(ROOT, "build", "coflow.json")

needs_build = pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                                 reason="build/coflow.p4info.txt missing: run `make p4`")


def _controller(mode):
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl.daemon import Controller
    from coflow.ctl.switch import SwitchAgent
    t = T.bigswitch(4)
    reg = CoflowRegistry([h.name for h in t.hosts])
    c = Controller(t, mode, P4INFO, BMV2_JSON, {s.name: "127.0.0.1:1" for s in t.switches},
                   registry=reg, settings={"link_mbps": "10"})
    c._unsubscribe = reg.subscribe(c._on_registry)
    for a in c.agents.values():     # as if connected and primary, holding nothing yet
        a.state = SwitchAgent.MASTER
        a.actual = M.SwitchState()
    return c, reg


@needs_build
@pytest.mark.parametrize("mode", ["sebf", "sincronia"])
def test_register_waits_for_the_queue_class_not_only_the_slot(mode):
    c, reg = _controller(mode)
    try:
        c.registry.register([("h0", "h1", 5_000_000)])
        small = reg.register([("h2", "h1", 1_000)])
        cid = (small.cid.external, small.cid.internal)
        with c._mu:
            c._refresh_coflows()                     # the round's first step: slots
            slot = TR.slot_entity(cid, c.slots.slot[cid])
        for a in c.agents.values():                  # only the slot entry reached the switch
            a.actual.add(slot)
        assert not c.wait_installed(small.cid, timeout=0.05)   # no order yet: not classed
        with c._mu:
            c._compute_rates(1000.0)                 # the same round: order -> override
            desired = c._desired()
        sw = c.edges[0]
        assert desired[sw].entities[slot.key] == slot
        ovr = TR.override_entity(cid, 7)             # the smaller coflow: first, priority 7
        assert desired[sw].entities[ovr.key] == ovr
        for name, a in c.agents.items():             # the round's one Write per switch
            a.actual = desired[name].copy()
        assert c.wait_installed(small.cid, timeout=0.05)
        stale = TR.override_entity(cid, 3)
        for a in c.agents.values():                  # a stale class is not the coflow's class
            a.actual.entities[stale.key] = stale
        assert not c.wait_installed(small.cid, timeout=0.05)
    finally:
        c.stop()
        reg.close()


@needs_build
def test_dclas_needs_only_the_slot():
    """D-CLAS decides a new coflow's queue in the data plane (queue 1): the slot suffices."""
    c, reg = _controller("dclas")
    try:
        rec = reg.register([("h2", "h1", None)])
        cid = (rec.cid.external, rec.cid.internal)
        with c._mu:
            c._refresh_coflows()
            slot = TR.slot_entity(cid, c.slots.slot[cid])
        for a in c.agents.values():
            a.actual.add(slot)
        assert c.wait_installed(rec.cid, timeout=0.05)
    finally:
        c.stop()
        reg.close()

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


def _controller(mode, **settings):
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl.daemon import Controller
    from coflow.ctl.switch import SwitchAgent
    t = T.bigswitch(4)
    reg = CoflowRegistry([h.name for h in t.hosts])
    c = Controller(t, mode, P4INFO, BMV2_JSON, {s.name: "127.0.0.1:1" for s in t.switches},
                   registry=reg, settings={"link_mbps": "10", **settings})
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


@needs_build
@pytest.mark.parametrize("mode", ["sebf", "sincronia"])
@pytest.mark.parametrize("promote", ["0", "1"])
def test_a_coflow_still_sending_is_not_promoted(mode, promote):
    """Three coflows on one receiver, ordered small, medium, large: classes 7, 6, 5. The small
    one leaves: with ``promote_active=0`` (the default) the two still sending keep 6 and 5 on
    every edge (their queued segments would be overtaken); with 1 they rise to 7 and 6."""
    c, reg = _controller(mode, promote_active=promote)
    try:
        recs = [reg.register([(f"h{i}", "h3", size)])
                for i, size in enumerate((1_000, 2_000_000, 8_000_000))]
        cids = [(r.cid.external, r.cid.internal) for r in recs]

        def round_():
            with c._mu:
                c._refresh_coflows()
                c._compute_rates(1000.0)
                return c._desired()

        round_()
        assert c._prio == dict(zip(cids, (7, 6, 5)))
        reg.unregister(recs[0].cid)
        desired = round_()
        want = (6, 5) if promote == "0" else (7, 6)
        assert c._prio == dict(zip(cids[1:], want))
        for sw in c.edges:
            d = desired[sw].entities
            for cid, pr in zip(cids[1:], want):
                assert d[TR.override_entity(cid, pr).key] == TR.override_entity(cid, pr)
    finally:
        c.stop()
        reg.close()


@needs_build
@pytest.mark.parametrize("hold", ["0", "0.5"])
def test_a_meter_is_lowered_only_after_its_sender_slowed(hold):
    """SEBF, one sender: a large coflow alone gets the link; a small one arriving on the same
    uplink takes it first, cutting the large one's rate. With ``meter_hold_s`` 0.5 the large
    flow's meter keeps the full rate in that round and the rounds within 0.5 s (its sender hears
    of the cut on the rate stream first), the controller asks for a round when the hold ends,
    and from then the meter has the lower rate; with 0 it drops in the same round."""
    c, reg = _controller("sebf", meter_hold_s=hold)
    try:
        reg.register([("h0", "h1", 5_000_000)])

        def cir(now):
            with c._mu:
                c._refresh_coflows()
                c._compute_rates(now)
                d = c._desired()
            return {k[2]: v.cir for sw in c.edges for k, v in d[sw].entities.items()
                    if k[0] == "meter"}
        full = cir(1000.0)
        (idx,) = full
        reg.register([("h0", "h2", 10_000)])
        cut = cir(1000.1)
        if hold == "0":
            assert cut[idx] < full[idx]
            return
        assert cut[idx] == full[idx] and c._next_event <= 1000.6 + 1e-9
        assert cir(1000.4)[idx] == full[idx]
        assert cir(1000.6)[idx] < full[idx]
    finally:
        c.stop()
        reg.close()


@needs_build
@pytest.mark.parametrize("pace_hold", ["0", "0.3"])
def test_a_pace_is_lowered_only_after_the_pace_hold_and_its_meter_after_that(pace_hold):
    """SEBF, paced senders: a small coflow arriving on a large one's uplink cuts the large
    flow's rate. With ``pace_hold_s`` 0.3 (and ``meter_hold_s`` 0.5) the rate stream keeps
    telling the large flow's sender its old rate until 0.3 s after the cut, its meter keeps the
    old rate until 0.5 s after that (0.8 s), and the controller asks for a round at each end;
    with 0 the stream has the cut at once (the meter still 0.5 s later). A small coflow gone
    within the hold is never seen by the sender at all."""
    c, reg = _controller("sebf", meter_hold_s="0.5", pace_hold_s=pace_hold)
    try:
        big = reg.register([("h0", "h1", 5_000_000)])
        key = str(big.cid)

        def at(now):
            with c._mu:
                c._refresh_coflows()
                c._compute_rates(now)
                d = c._desired()
            c._publish_raises()          # as a round does once its writes are done
            cir = {k[2]: v.cir for sw in c.edges for k, v in d[sw].entities.items() if k[0] == "meter"}
            (flow,) = c.rate_board.snapshot()[2][key].flows
            return flow.rate_Bps, cir

        pace0, cir0 = at(1000.0)
        (idx,) = cir0
        small = reg.register([("h0", "h2", 10_000)])
        pace, cir = at(1000.1)
        if pace_hold == "0":
            assert pace < pace0 and cir[idx] == cir0[idx] and c._next_event <= 1000.6 + 1e-9
            return
        assert pace == pace0 and cir[idx] == cir0[idx] and c._next_event <= 1000.4 + 1e-9
        pace, cir = at(1000.3)
        assert pace == pace0 and cir[idx] == cir0[idx]
        pace, cir = at(1000.4)                       # the pace hold is over: the sender slows
        assert pace < pace0 and cir[idx] == cir0[idx] and c._next_event <= 1000.9 + 1e-9
        pace1 = pace
        pace, cir = at(1000.9)                       # and then its meter
        assert pace == pace1 and cir[idx] < cir0[idx]
        # a pause shorter than the hold never reaches the sender
        reg.unregister(small.cid)
        pace, _ = at(1001.0)
        assert pace == pace0
        brief = reg.register([("h0", "h3", 10_000)])
        assert at(1001.1)[0] == pace0
        reg.unregister(brief.cid)
        assert at(1001.2)[0] == pace0
    finally:
        c.stop()
        reg.close()


@needs_build
def test_a_raised_pace_is_streamed_only_after_its_meter_is_written():
    """Make before break, upwards: a flow whose rate rises (the small coflow ahead of it gone)
    hears of it only once the round's writes, its raised meter among them, are done (a sender
    told first would speed up into its old meter and lose segments to it); a lowered pace is
    streamed at once (the sender slows before its meter)."""
    c, reg = _controller("sebf")
    try:
        big = reg.register([("h0", "h1", 5_000_000)])
        key = str(big.cid)

        def pace():
            (flow,) = c.rate_board.snapshot()[2][key].flows
            return flow.rate_Bps

        def compute(now):
            with c._mu:
                c._refresh_coflows()
                c._compute_rates(now)
                c._desired()

        compute(1000.0)
        full = pace()
        small = reg.register([("h0", "h2", 10_000)])
        compute(1000.1)
        low = pace()
        assert low < full                        # lowered: streamed before the writes
        reg.unregister(small.cid)
        compute(1000.2)
        assert pace() == low                     # raised: not before the writes...
        c._publish_raises()
        assert pace() == full                    # ...but right after them
    finally:
        c.stop()
        reg.close()

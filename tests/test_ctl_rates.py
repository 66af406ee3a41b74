"""Rate modes (pure): registry records -> the core's View -> rates, priorities and meters."""
import numpy as np
import pytest

from coflow import topology as T
from coflow.api.registry import CoflowRegistry
from coflow.ctl import model as M
from coflow.ctl import translate as TR
from coflow.ctl.rates import build_view, plan
from coflow.sched import make_scheduler

LINK = 1.25e6  # 10 Mb/s in bytes/s


@pytest.fixture
def reg():
    t = T.bigswitch(4)
    r = CoflowRegistry([h.name for h in t.hosts])
    yield t, r
    r.close()


def hp(t):
    return {h.name: h.index for h in t.hosts}


def test_view_matches_registry(reg):
    t, r = reg
    a = r.register([("h0", "h1", 1_000_000), ("h2", "h1", 500_000)])
    r.update(a.cid, sent={0: 400_000})
    r.register([("h3", "h0", None)])
    v, (cf, src, dst), cids = build_view(r.list(), hp(t), LINK, 10.0, {}, unknown_size=10**9)
    assert cids == [(1, 0), (2, 0)]
    assert v.src.tolist() == [0, 2, 3] and v.dst.tolist() == [1, 1, 0]
    assert v.remaining.tolist() == [600_000, 500_000, 10**9]
    assert v.cf_sent.tolist() == [400_000, 0] and v.cf_lo.tolist() == [0, 2, 3]
    assert v.caps.tolist() == [LINK] * 8
    assert (cf[2], src[2], dst[2]) == (1, 3, 0)
    r.update(a.cid, sent={0: 1_000_000, 1: 500_000})  # finished: out of the view
    v, _, cids = build_view(r.list(), hp(t), LINK, 10.0, {}, unknown_size=10**9)
    assert cids == [(2, 0)]


def test_sebf_hand_checked(reg):
    """A: h0->h1 1 MB (Γ = 0.8 s); B: h0->h2 2 MB and h3->h2 2 MB (Γ = 1.6 s). SEBF serves A
    first at the full link; B's h0 flow gets nothing (h0's uplink is A's), and MADD gives B
    nothing (its bottleneck h0 is full); backfill then gives h3->h2 the whole free path."""
    t, r = reg
    r.register([("h0", "h1", 1_000_000)])
    r.register([("h0", "h2", 2_000_000), ("h3", "h2", 2_000_000)])
    s = make_scheduler("sebf")
    p = plan("sebf", s, r.list(), hp(t), LINK, 100.0, {}, 10**9)
    rates = {(c, a, b): x for c, a, b, x in p.flows}
    assert rates[((1, 0), "h0", "h1")] == pytest.approx(LINK)
    assert rates[((2, 0), "h0", "h2")] == pytest.approx(0.0, abs=1e-6)
    assert rates[((2, 0), "h3", "h2")] == pytest.approx(LINK)
    assert p.prio == {(1, 0): 7, (2, 0): 6}
    ctl = TR.CtlSettings(link_mbps=10)
    out = TR.meter_entities(t, p.flows, {(1, 0): 0, (2, 0): 1}, ctl)
    meters = {m.index: m.cir for m in M.SwitchState.of(out["s0"]).of_kind("meter")}
    # one meter per flow from the pool; payload rates as frame rates (x 1514/1440)
    assert meters == {0: 1_314_237, 1: 12_500, 2: 1_314_237}  # paused flow: the 1% floor


def test_same_rates_as_the_core_directly(reg):
    """The controller's view gives the core the same inputs as a hand-built View."""
    from helpers import view   # tests/ is on sys.path (pytest's rootdir conftest)
    t, r = reg
    flows = [[(0, 1, 3e5), (2, 1, 1e5)], [(0, 3, 2e5)], [(1, 2, 5e5), (3, 0, 1e5)]]
    for cf in flows:
        r.register([(f"h{a}", f"h{b}", int(x)) for a, b, x in cf])
    for name in ("sebf", "hug", "utopia"):
        got = plan(name, make_scheduler(name), r.list(), hp(t), LINK, 0.0, {}, 10**9)
        v = view(4, flows, [LINK] * 4, [LINK] * 4)
        v.cf_id = np.array([256, 512, 768])
        want = make_scheduler(name).allocate(v).rates
        assert np.allclose([f[3] for f in got.flows], want), name


def test_priorities_by_mode(reg):
    t, r = reg
    r.register([("h0", "h1", 3_000_000)])
    r.register([("h2", "h3", 1_000_000)])
    sebf = plan("sebf", make_scheduler("sebf"), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    assert sebf.prio == {(2, 0): 7, (1, 0): 6}  # smaller bottleneck first
    hug = plan("hug", make_scheduler("hug"), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    assert hug.prio == {}
    fai = plan("fai", make_scheduler("fai", {"K": "8"}), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    assert fai.prio == {(1, 0): 7, (2, 0): 7}  # nothing sent yet: queue 1
    ut = plan("utopia", make_scheduler("utopia"), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    assert ut.prio == {(2, 0): 7, (1, 0): 6}
    sin = plan("sincronia", make_scheduler("sincronia"), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    assert sin.prio == {(2, 0): 7, (1, 0): 6}


def test_sincronia_bssi_order_reaches_the_queues_not_sebfs(reg):
    """A: h0 -> h1, h2, h3, 1 MB each (Γ = 3 MB on h0's uplink = 2.4 s); B: h1 -> h2, 2.5 MB
    (Γ = 2 s). SEBF serves B first. BSSI: the most loaded link is h2's downlink (1 + 2.5 MB);
    of the coflows on it, the one with the smallest weight / demand there goes last: B (1/2.5
    < A's 1/1); so A first. The controller's priorities follow each scheduler's own order."""
    t, r = reg
    r.register([("h0", "h1", 1_000_000), ("h0", "h2", 1_000_000), ("h0", "h3", 1_000_000)])
    r.register([("h1", "h2", 2_500_000)])
    sin = plan("sincronia", make_scheduler("sincronia"), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    assert sin.alloc.order.tolist() == [0, 1]
    assert sin.prio == {(1, 0): 7, (2, 0): 6}
    sebf = plan("sebf", make_scheduler("sebf"), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    assert sebf.prio == {(2, 0): 7, (1, 0): 6}


def test_any_scheduler_that_says_an_order_reaches_the_queues(reg):
    """The controller reads the order (or queues) from the Allocation, not from the mode's
    name: a scheduler it has never heard of, which serves coflows in reverse registration
    order, gets its order onto the priorities 7, 6, ... saturating at 1; one that says
    queues gets them through hw_priority; one that says neither gets no override."""
    from coflow.ctl.rates import priorities
    from coflow.sched.base import Allocation, Scheduler

    class Reverse(Scheduler):
        def allocate(self, v):
            return Allocation(np.zeros(v.nflows), order=np.arange(v.ncoflows)[::-1].copy())

    t, r = reg
    for d in range(1, 4):
        r.register([("h0", f"h{d}", 1000)])
    for i in range(6):
        r.register([("h1", "h2", 1000 + i)])
    p = plan("whatever", Reverse(), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    assert p.prio == {(9 - k, 0): max(1, 7 - k) for k in range(9)}
    cids = [(1, 0), (2, 0), (3, 0)]
    assert priorities(Allocation(np.zeros(3), queue=np.array([1, 3, 8])), cids)[0] == \
        {(1, 0): 7, (2, 0): 5, (3, 0): 0}
    assert priorities(Allocation(np.zeros(3)), cids)[0] == {}


def test_sebf_memory_carries_starvation_clock(reg):
    t, r = reg
    r.register([("h0", "h1", 10_000_000)])
    r.register([("h0", "h1", 20_000_000)])
    mem = {}
    s = make_scheduler("sebf", {"T": "2", "delta": "0.2"})
    t0 = max(rec.registered_at for rec in r.list())  # the View's clock is time.time()
    p1 = plan("sebf", s, r.list(), hp(t), LINK, t0, mem, 10**9)
    assert p1.next_event == pytest.approx(t0 + 2.0)  # the next starvation check
    rates = {c: x for c, _, _, x in p1.flows}
    assert rates[(2, 0)] == 0.0
    p2 = plan("sebf", s, r.list(), hp(t), LINK, t0 + 2.0, mem, 10**9)  # T later: B starved
    rates = {c: x for c, _, _, x in p2.flows}
    assert rates[(2, 0)] > 0 and p2.next_event == pytest.approx(t0 + 2.2)


def test_rate_snapshot_is_what_each_flow_is_paced_at(reg):
    """Per registered coflow, its active flows under their API flow ids at the plan's rate
    (at least the meters' floor), limited where a meter holds them; the class from the
    order. A coflow whose flows are all done is listed with none."""
    from coflow.ctl.rates import rate_snapshot
    t, r = reg
    r.register([("h0", "h1", 1_000_000)])
    b = r.register([("h3", "h2", 2_000_000), ("h0", "h2", 2_000_000)])
    done = r.register([("h1", "h3", 100)])
    r.update(done.cid, sent={0: 100})
    p = plan("sebf", make_scheduler("sebf"), r.list(), hp(t), LINK, 100.0, {}, 10**9)
    snap = rate_snapshot(p, r.list(), lambda c: c != (1, 0), floor_Bps=1000.0)
    assert list(snap) == ["1.0", "2.0", "3.0"]
    a1 = snap["1.0"]
    assert a1.priority == 7 and [(f.flow_id, f.src, f.dst, f.limited) for f in a1.flows] == \
        [(0, "h0", "h1", False)]                      # no meter holds it: not limited
    assert a1.flows[0].rate_Bps == pytest.approx(LINK)
    b2 = snap["2.0"]
    # flow 1 (h0 -> h2) is paused behind 1.0 on h0's uplink: the floor; flow 0 backfills
    assert [(f.flow_id, f.src, f.dst, f.limited) for f in b2.flows] == \
        [(0, "h3", "h2", True), (1, "h0", "h2", True)]
    assert b2.flows[0].rate_Bps == pytest.approx(LINK) and b2.flows[1].rate_Bps == 1000.0
    assert b2.priority == 6 and snap["3.0"].flows == () and snap["3.0"].priority is None
    assert str(b.cid) == "2.0"


def test_pace_headroom_scales_what_senders_are_told_within_the_meter(reg):
    """``pace_headroom`` h: the stream tells each flow its rate (floor included) times 1 + h,
    the meters stay at the rate times 1 + meter_headroom, and h above meter_headroom (a
    paced sender that would meet its meter) is refused on one line."""
    from coflow.ctl.rates import rate_snapshot
    t, r = reg
    r.register([("h0", "h1", 1_000_000)])
    r.register([("h3", "h2", 2_000_000), ("h0", "h2", 2_000_000)])
    p = plan("sebf", make_scheduler("sebf"), r.list(), hp(t), LINK, 100.0, {}, 10**9)
    base = rate_snapshot(p, r.list(), lambda c: True, floor_Bps=1000.0)
    more = rate_snapshot(p, r.list(), lambda c: True, floor_Bps=1000.0, pace_factor=1.2)
    for k in base:
        assert [f.rate_Bps * 1.2 for f in base[k].flows] == \
            pytest.approx([f.rate_Bps for f in more[k].flows])
        assert base[k].priority == more[k].priority
    assert TR.split_settings({"meter_headroom": "0.3", "pace_headroom": "0.2"})[0].pace_headroom == 0.2
    for bad in ("0.4", "-0.1", "nan"):
        with pytest.raises(ValueError, match="pace_headroom"):
            TR.split_settings({"meter_headroom": "0.3", "pace_headroom": bad})


def test_size_caps_keep_large_coflows_out_of_the_top_classes(reg):
    """Aalo's thresholds on each coflow's total size (Q1 = 1 kB, E = 10): 500 B may take 7,
    5 kB at most 6, 2 MB at most 3; unknown size 1. A large coflow first in the order is capped
    without pushing the ones behind it down (they pass it), and with the caps no coflow still
    sending rises (the next round starts from the order's own classes)."""
    from coflow.ctl.rates import priorities, size_caps
    from coflow.sched.base import Allocation
    t, r = reg
    big = r.register([("h0", "h1", 2_000_000)])
    mid = r.register([("h2", "h1", 5_000)])
    tiny = r.register([("h3", "h2", 500)])
    unk = r.register([("h3", "h0", None)])
    p = plan("sebf", make_scheduler("sebf"), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    caps = size_caps(p.view, p.cids, 1000)
    cids = [(x.cid.external, x.cid.internal) for x in (big, mid, tiny, unk)]
    assert [caps[c] for c in cids] == [3, 6, 7, 1]
    order = Allocation(np.zeros(0), order=np.arange(4))        # big first, as SEBF never would
    prio, order_prio = priorities(order, cids, {}, caps)
    assert order_prio == {cids[0]: 7, cids[1]: 6, cids[2]: 5, cids[3]: 4}
    assert prio == {cids[0]: 3, cids[1]: 6, cids[2]: 5, cids[3]: 1}
    prio2, _ = priorities(Allocation(np.zeros(0), order=np.arange(1, 4)), cids, order_prio, caps)
    assert prio2 == {cids[1]: 6, cids[2]: 5, cids[3]: 1}             # big gone: nobody rises
    p2 = plan("sebf", make_scheduler("sebf"), r.list(), hp(t), LINK, 0.0, {}, 10**9,
              prev_prio={}, class_q1_bytes=1000)
    assert p2.prio[cids[0]] <= 3 and p2.prio[cids[3]] == 1 and p2.prio[cids[2]] == 7


def test_class_span_keeps_the_orders_tail_out_of_the_largest_coflows_class(reg):
    """Hand-checked (Q1 = 1 kB): nine 5 kB coflows (cap 6) ahead of a 2 MB one (cap 3) in the
    order. By the order alone (span 7) the tail of the small ones runs out of classes and
    shares class 1 with the large one; with span 1 each stays within one class of its size's
    class (5 or 6) and the large one within one of its own (2), below all of them."""
    from coflow.ctl.rates import priorities, size_caps
    from coflow.sched.base import Allocation
    t, r = reg
    small = [r.register([(f"h{i % 3}", f"h{(i % 3) + 1}", 5_000)]) for i in range(9)]
    big = r.register([("h0", "h3", 2_000_000)])
    recs = small + [big]
    p = plan("sebf", make_scheduler("sebf"), r.list(), hp(t), LINK, 0.0, {}, 10**9)
    cids = [(x.cid.external, x.cid.internal) for x in recs]
    caps = size_caps(p.view, p.cids, 1000)
    assert [caps[c] for c in cids] == [6] * 9 + [3]
    order = Allocation(np.zeros(0), order=np.array([p.cids.index(c) for c in cids]))
    wide, _ = priorities(order, p.cids, {}, caps, span=7)
    assert [wide[c] for c in cids] == [6, 6, 5, 4, 3, 2, 1, 1, 1, 1]
    narrow, _ = priorities(order, p.cids, {}, caps, span=1)
    assert [narrow[c] for c in cids] == [6, 6, 5, 5, 5, 5, 5, 5, 5, 2]
    with pytest.raises(ValueError, match="class_span"):
        TR.split_settings({"class_span": "8"})


def test_class_span_bounds_every_class_and_raises_no_coflow_still_sending():
    """Property, 300 random histories of orders and caps: with span s every coflow's class is
    in [max(1, cap - s), cap]; span 7 is the caps alone; and across rounds (the previous
    round's order classes kept, caps fixed by size) no coflow present in both rounds rises."""
    from coflow.ctl.rates import priorities
    from coflow.sched.base import Allocation
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 16))
        cids = [(i, 0) for i in range(n)]
        caps = {c: int(rng.integers(1, 8)) for c in cids}
        span = int(rng.integers(0, 8))
        prev: dict = {}
        last: dict = {}
        live = list(cids)
        for _round in range(4):
            perm = rng.permutation(len(live))
            alloc = Allocation(np.zeros(0), order=perm)
            prio, order_prio = priorities(alloc, live, prev, caps, span)
            alone, _ = priorities(alloc, live, prev, caps, 7)
            for c in live:
                assert max(1, caps[c] - span) <= prio[c] <= caps[c]
                if span == 7:
                    assert prio[c] == alone[c] == min(order_prio[c], caps[c])
                if c in last:
                    assert prio[c] <= last[c], (c, last[c], prio[c])
            last, prev = prio, order_prio
            if len(live) > 1:
                live = [c for c in live if rng.random() > 0.2] or live[:1]


def test_meter_hold_lowers_a_meter_only_after_its_sender_slowed():
    """Hand-checked (hold 0.5 s): a rate cut keeps the meter at the old rate until 0.5 s after
    the cut, whatever further cuts come meanwhile, then follows; a raise is immediate (and ends
    a hold below it); a new flow has nothing to hold; 0 = no hold at all."""
    from coflow.ctl.rates import MeterHold
    h = MeterHold(0.5)
    k = ["a", "b"]
    r, nxt = h.apply(k, np.array([10.0, 4.0]), 0.0)
    assert r.tolist() == [10.0, 4.0] and nxt == float("inf")
    r, nxt = h.apply(k, np.array([5.0, 4.0]), 1.0)          # a cut: held at 10 until 1.5
    assert r.tolist() == [10.0, 4.0] and nxt == 1.5
    r, nxt = h.apply(k, np.array([2.0, 4.0]), 1.2)          # a further cut inside the hold
    assert r.tolist() == [10.0, 4.0] and nxt == 1.5
    r, nxt = h.apply(k, np.array([2.0, 4.0]), 1.5)          # the hold is over: follow
    assert r.tolist() == [2.0, 4.0] and nxt == float("inf")
    r, _ = h.apply(k, np.array([1.0, 4.0]), 2.0)
    assert r.tolist() == [2.0, 4.0]
    r, nxt = h.apply(k, np.array([8.0, 4.0]), 2.1)          # a raise: at once, no hold left
    assert r.tolist() == [8.0, 4.0] and nxt == float("inf")
    r, _ = h.apply(["c"], np.array([3.0]), 2.2)             # gone flows forgotten, a new one free
    assert r.tolist() == [3.0]
    z = MeterHold(0.0)
    z.apply(k, np.array([10.0, 4.0]), 0.0)
    assert z.apply(k, np.array([1.0, 1.0]), 0.1)[0].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="meter_hold_s"):
        TR.split_settings({"meter_hold_s": "-1"})
    with pytest.raises(ValueError, match="pace_hold_s"):
        TR.split_settings({"pace_hold_s": "nan"})


def test_meter_headroom_above_the_paced_rate():
    """A meter passes its flow's rate times 1 + meter_headroom (frame bytes), so a sender paced
    at the rate never reaches it; 0 (the default) is the rate exactly."""
    s0 = TR.CtlSettings(link_mbps=10, min_rate_frac=0)
    s1 = TR.CtlSettings(link_mbps=10, min_rate_frac=0, meter_headroom=0.1)
    m0, m1 = TR.meter_config(3, 100_000, s0), TR.meter_config(3, 100_000, s1)
    assert m0.cir == m0.pir == round(100_000 * 1514 / 1440)
    assert m1.cir == m1.pir == round(100_000 * 1514 / 1440 * 1.1)
    with pytest.raises(ValueError, match="meter_headroom"):
        TR.split_settings({"meter_headroom": "-0.1"})
    assert TR.split_settings({"meter_headroom": "0.25"})[0].meter_headroom == 0.25


def test_rate_audit_by_hand():
    """Achieved vs set rate per pair, over the intervals in which the flow was sending."""
    from coflow.ctl.rates import RateAudit
    a = RateAudit()
    k, j = ((1, 0), 0, 1), ((1, 0), 2, 3)
    a.set_rates({k: 1000.0, j: 1000.0}, 0.0)
    a.observe(k, 1.0, 900, 100_000)      # first reading: its start, not a rate interval
    a.observe(j, 1.0, 500, 100_000)
    a.observe(k, 2.0, 1900, 100_000)     # 1000 B in 1 s at 1000 B/s
    a.observe(j, 2.0, 1000, 100_000)     # 500 B: half its rate
    a.set_rates({k: 2000.0, j: 1000.0}, 2.5)
    a.observe(k, 3.0, 3400, 100_000)     # 0.5 s at 1000 + 0.5 s at 2000 = 1500 B expected
    a.observe(j, 3.0, 99_000, 100_000)   # its last segments: not counted
    s = a.summary(min_expected=0)
    assert s["flows"] == 2
    assert a.flows(min_expected=0) == [(2500, 2500.0), (500, 1000.0)]
    assert s["achieved_over_set"] == pytest.approx(3000 / 3500)
    assert s["within_10pct"] == 0.5 and s["median"] == pytest.approx(0.75)
    a.forget_except(set())               # coflow gone: its figures stay in the totals
    assert a.summary(min_expected=0)["flows"] == 2


@pytest.mark.parametrize("seed", range(6))
def test_view_cached_over_shared_snapshots_equals_fresh(seed):
    """build_view with its per-record cache over the registry's shared snapshots
    (list_shared: an unchanged coflow is the same object, its arrays reused without a
    compare) and the closed loop's measured bytes (the same dict while a coflow's readings
    do not change, a new one when they do) gives, round after round, exactly the View a
    fresh build from copied records gives."""
    import random
    rng = random.Random(seed)
    t = T.bigswitch(6)
    hosts = [h.name for h in t.hosts]
    r = CoflowRegistry(hosts)
    cache: dict = {}
    measured: dict = {}
    hits = 0
    try:
        for step in range(40):
            recs = r.list()
            x = rng.random()
            if x < 0.25 or not recs:
                pairs = rng.sample([(a, b) for a in hosts for b in hosts if a != b], rng.randrange(1, 6))
                r.register([(a, b, rng.choice([None, 10**5, 10**6])) for a, b in pairs])
            elif x < 0.35:
                r.unregister(rng.choice(recs).cid)
            elif x < 0.6:
                rec = rng.choice(recs)
                r.update(rec.cid, sent={rng.randrange(len(rec.flows)): rng.randrange(2 * 10**5)})
            elif x < 0.85:   # a coflow's readings change: a new dict (as FlowProgress.measured)
                rec = rng.choice(recs)
                c = (rec.cid.external, rec.cid.internal)
                measured[c] = {i: rng.randrange(3 * 10**5) for i in
                               rng.sample(range(len(rec.flows)), rng.randrange(1, len(rec.flows) + 1))}
            live = {(x.cid.external, x.cid.internal) for x in r.list()}
            measured = {c: m for c, m in measured.items() if c in live}
            shared = r.list_shared()
            v, arrs, cids = build_view(shared, hp(t), LINK, 10.0 + step, {}, 10**9, cache, measured)
            w, arrs_w, cids_w = build_view(r.list(), hp(t), LINK, 10.0 + step, {}, 10**9, None,
                                           {c: dict(m) for c, m in measured.items()})
            assert cids == cids_w, (seed, step)
            for name in ("src", "dst", "sent", "remaining", "cf", "cf_lo", "cf_id", "cf_sent", "cf_total"):
                assert np.array_equal(getattr(v, name), getattr(w, name)), (seed, step, name)
            for a, b in zip(arrs, arrs_w):
                assert np.array_equal(a, b)
            hits += sum(1 for ra in cache.values() if ra.merged is not None)
        assert hits > 0   # the merge cache was exercised
    finally:
        r.close()

"""Work conservation on measured demand: the core's :func:`coflow.sched.conserve.conserve` (any
scheduler's Allocation, clamped to the flows' demand caps, the rest backfilled) and the
controller's :class:`coflow.ctl.demand.GrantLedger` (caps from readings, the claims' clock)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from coflow.ctl.demand import CAP_LOWER, DEMAND_PROBE, DEMAND_WINDOW, GrantLedger, overheld
from coflow.sched import REGISTRY, make_scheduler
from coflow.sched.conserve import conserve

from helpers import view

RATE_MODES = sorted(n for n, i in REGISTRY.items() if i.fabric is not None and i.fabric.enforce == "meters")
TOL = 1e-6


def test_rate_modes_are_found():
    assert {"sebf", "hug"} <= set(RATE_MODES)


def test_liar_capped_the_honest_coflow_behind_gets_the_rest():
    """SEBF puts the coflow that declared 1 KB first with the whole receiver's link; once it is
    seen sending at a tenth of that, the coflow behind it gets the other nine tenths."""
    v = view(3, [[(0, 2, 1_000)], [(1, 2, 400_000)]], [1.0] * 3, [1.0] * 3)
    alloc = make_scheduler("sebf").allocate(v)
    assert alloc.rates.tolist() == pytest.approx([1.0, 0.0])
    out = conserve(v, alloc, np.array([0.1, np.inf]))
    assert out.tolist() == pytest.approx([0.1, 0.9])
    assert alloc.rates.tolist() == pytest.approx([1.0, 0.0])   # the Allocation is not modified


def test_no_order_max_min_backfill():
    """HUG (no order): two coflows share port 0's uplink; one capped at a quarter of its share
    -> the other takes the rest."""
    v = view(3, [[(0, 1, 10.0)], [(0, 2, 10.0)]], [1.0] * 3, [1.0] * 3)
    alloc = make_scheduler("hug").allocate(v)
    assert alloc.order is None
    assert alloc.rates.tolist() == pytest.approx([0.5, 0.5])
    out = conserve(v, alloc, np.array([0.125, np.inf]))
    assert out.tolist() == pytest.approx([0.125, 0.875])


def test_no_caps_is_the_allocation_itself():
    v = view(3, [[(0, 2, 1_000)], [(1, 2, 400_000)]], [1.0] * 3, [1.0] * 3)
    alloc = make_scheduler("sebf").allocate(v)
    assert conserve(v, alloc, None) is alloc.rates
    assert conserve(v, alloc, np.full(2, np.inf)) is alloc.rates
    with pytest.raises(ValueError, match="3 caps for 2 flows"):
        conserve(v, alloc, np.ones(3))


@st.composite
def capped_instances(draw):
    P = draw(st.integers(2, 5))
    C = draw(st.integers(1, 5))
    coflows = []
    for _ in range(C):
        n = draw(st.integers(1, 4))
        pairs = draw(st.lists(st.tuples(st.integers(0, P - 1), st.integers(0, P - 1)), min_size=n,
                              max_size=n, unique=True))
        coflows.append([(s, d, draw(st.floats(0.05, 20.0))) for s, d in pairs])
    nf = sum(len(c) for c in coflows)
    caps = draw(st.lists(st.one_of(st.just(np.inf), st.floats(0.0, 1.5)), min_size=nf, max_size=nf))
    up = draw(st.lists(st.sampled_from([1.0, 2.0, 0.5]), min_size=P, max_size=P))
    down = draw(st.lists(st.sampled_from([1.0, 2.0, 0.5]), min_size=P, max_size=P))
    return view(P, coflows, up, down), np.array(caps)


@pytest.mark.parametrize("name", RATE_MODES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=capped_instances())
def test_capacity_caps_and_work_conservation(name, inst):
    v, cap = inst
    alloc = make_scheduler(name).allocate(v)
    out = conserve(v, alloc, cap)
    P = v.ports
    # capacity never exceeded
    assert (np.bincount(v.src, out, P) <= v.cap_up * (1 + TOL) + TOL).all()
    assert (np.bincount(v.dst, out, P) <= v.cap_down * (1 + TOL) + TOL).all()
    # no flow below min(its rate, its cap): the head of an order keeps what it had
    assert (out >= np.minimum(alloc.rates, cap) - TOL).all()
    if not np.isfinite(cap).any():
        assert out is alloc.rates          # nothing capped: the scheduler's own allocation
        assert conserve(v, alloc, cap, spare=False) is alloc.rates
        return
    rem_up = v.cap_up - np.bincount(v.src, out, P)
    rem_down = v.cap_down - np.bincount(v.dst, out, P)
    served = np.ones(v.nflows, bool) if alloc.order is None else np.isin(v.cf, alloc.order)
    # work conserving: every flow the scheduler serves (in its order, or any without one) has a
    # saturated link; the coflows the order leaves out get nothing more
    for f in np.flatnonzero(served):
        assert min(rem_up[v.src[f]], rem_down[v.dst[f]]) <= 1e-6 * 2, (name, f, out, cap)
    assert (out[~served] == alloc.rates[~served]).all()
    # the caps alone (no spare): no flow above its cap, every served flow below its cap has a
    # saturated link, and the spare goes only to flows at their caps
    hard = conserve(v, alloc, cap, spare=False)
    assert (hard <= cap + TOL).all()
    assert (hard >= np.minimum(alloc.rates, cap) - TOL).all()
    h_up = v.cap_up - np.bincount(v.src, hard, P)
    h_down = v.cap_down - np.bincount(v.dst, hard, P)
    for f in np.flatnonzero(served & (hard < cap - TOL)):
        assert min(h_up[v.src[f]], h_down[v.dst[f]]) <= 1e-6 * 2, (name, f, hard, cap)
    below = hard < cap - TOL
    assert out[below] == pytest.approx(hard[below], abs=TOL)
    assert (out >= hard - TOL).all()


def test_every_flow_capped_the_spare_goes_back_in_order():
    """SEBF: both coflows capped below the link (the first at a tenth, the second at a fifth):
    the second takes its cap, the rest goes back to the first in the order, none idles."""
    v = view(3, [[(0, 2, 1_000)], [(1, 2, 400_000)]], [1.0] * 3, [1.0] * 3)
    alloc = make_scheduler("sebf").allocate(v)
    assert conserve(v, alloc, np.array([0.1, 0.2]), spare=False).tolist() == pytest.approx([0.1, 0.2])
    assert conserve(v, alloc, np.array([0.1, 0.2])).tolist() == pytest.approx([0.8, 0.2])


def test_a_capped_flow_behind_gets_up_to_its_cap():
    """SEBF: the first coflow capped at a tenth, the second capped at half the link: the
    second gets its half (a capped flow behind is backfilled up to its cap, not left at 0)."""
    v = view(3, [[(0, 2, 1_000)], [(1, 2, 400_000)]], [1.0] * 3, [1.0] * 3)
    alloc = make_scheduler("sebf").allocate(v)
    assert conserve(v, alloc, np.array([0.1, 0.5]), spare=False).tolist() == pytest.approx([0.1, 0.5])


# the ledger ---------------------------------------------------------------------------------
K = ((1, 0), 0, 1)


def ledger():
    return GrantLedger(headroom=1.0, min_Bps=1_000.0, uncap_Bps=1_000_000.0)


def feed(led, rate, per_read, reads, t0=0.0, dt=0.1, sent0=0, ready=False):
    """``reads`` readings ``dt`` apart, the flow sending ``per_read`` bytes each; returns the
    caps after each."""
    t, sent, caps = t0, sent0, []
    led.set_rates({K: rate}, t)
    for _ in range(reads):
        t += dt
        sent += per_read
        led.observe(K, t, sent, ready)
        caps.append(led.cap(K))
    return caps, t, sent


def test_a_flow_using_its_rate_is_never_capped():
    caps, _, _ = feed(ledger(), 500_000.0, 48_000, 10)     # 96 % of 50,000 B per read
    assert all(c == np.inf for c in caps)
    caps, _, _ = feed(ledger(), 500_000.0, 26_000, 10)     # 52 %: a paced TCP's shortfall
    assert all(c == np.inf for c in caps)


def test_a_flow_at_a_tenth_is_capped_after_its_first_interval_then_probes_back():
    led = ledger()
    caps, t, sent = feed(led, 500_000.0, 5_000, 4)
    assert caps[0] == np.inf                 # its start: not judged
    assert caps[1] == np.inf                 # one short reading: not yet
    assert caps[2] == pytest.approx(100_000.0)    # 50 KB/s used x 2
    assert caps[3] == pytest.approx(100_000.0)
    assert led.capped() == 1 and led.caps_version == 1
    # the core gives it its cap; it now uses what the cap allows -> doubled per read
    led.set_rates({K: 100_000.0}, t)
    per = int(DEMAND_PROBE * 100_000.0 * 0.1) + 100
    caps2, t, sent = feed(led, 100_000.0, per, 1, t0=t, sent0=sent)
    assert caps2 == [pytest.approx(200_000.0)]
    seen = []
    for _ in range(5):                       # it keeps using 90 % of whatever it is allowed
        cap = led.cap(K)
        if cap == np.inf:
            break
        (c,), t, sent = feed(led, cap, int(0.9 * cap * 0.1), 1, t0=t, sent0=sent)
        seen.append(c)
    assert seen == [pytest.approx(400_000.0), pytest.approx(800_000.0), np.inf]


def test_a_ready_flow_is_never_capped_and_loses_its_cap_once_ready():
    """A flow whose every byte is ready to send (``Flow.ready``) and that uses a tenth of its
    rate is held back by the network, not by its application: no cap, however long. A capped
    flow that its application then marks ready loses its cap at the next reading."""
    led = ledger()
    caps, t, sent = feed(led, 500_000.0, 5_000, 10, ready=True)
    assert all(c == np.inf for c in caps) and led.capped() == 0 and led.caps_version == 0
    led = ledger()
    _, t, sent = feed(led, 500_000.0, 5_000, 3)
    assert led.cap(K) == pytest.approx(100_000.0)
    (c,), t, sent = feed(led, 100_000.0, 5_000, 1, t0=t, sent0=sent, ready=True)
    assert c == np.inf and led.capped() == 0 and led.caps_version == 2
    # its grant is still held (the time claim check judges a ready flow like any other)
    assert led.held(K, t) > 0


def test_ready_pairs_need_every_flow_of_the_pair_ready():
    from coflow.api.records import CoflowId, CoflowRecord, FlowSpec
    from coflow.ctl.demand import ready_pairs
    hp = {"h0": 0, "h1": 1, "h2": 2}
    rec = CoflowRecord(CoflowId(1, 0), [FlowSpec("h0", "h1", 10, True), FlowSpec("h0", "h2", 10),
                                        FlowSpec("h2", "h1", None, True)], 0.0)
    assert ready_pairs(rec, hp) == {(0, 1), (2, 1)}


def test_a_policed_sender_does_not_talk_its_cap_down():
    """A capped flow that reaches only part of its cap (its meter polices an unpaced TCP) keeps
    its cap; only one far below it (a quarter) is lowered."""
    led = ledger()
    _, t, sent = feed(led, 500_000.0, 5_000, 3)
    assert led.cap(K) == pytest.approx(100_000.0)
    for frac in (0.6, 0.4, 0.3):
        (c,), t, sent = feed(led, 100_000.0, int(frac * 100_000.0 * 0.1), 1, t0=t, sent0=sent)
        assert c == pytest.approx(100_000.0), frac
    # far below it: lowered once the readings it ran faster at have left the window
    caps, t, sent = feed(led, 100_000.0, int(0.5 * CAP_LOWER * 100_000.0 * 0.1), DEMAND_WINDOW + 1,
                         t0=t, sent0=sent)
    assert caps[0] == pytest.approx(100_000.0)
    assert caps[-1] == pytest.approx(25_000.0)


def test_a_flow_stalled_after_running_keeps_the_cap_of_its_pace():
    """A flow that ran at 90 % of its rate, then stalls for two readings (TCP recovering from a
    loss), is capped at the rate it ran at (x 1 + headroom), not at its stall's trickle."""
    led = ledger()
    _, t, sent = feed(led, 500_000.0, 45_000, 3)
    caps, t, sent = feed(led, 500_000.0, 1_000, 2, t0=t, sent0=sent)
    assert caps[-1] == pytest.approx(900_000.0)


def test_one_short_reading_between_full_ones_is_not_capped():
    led = ledger()
    t, sent = 0.0, 0
    for per in (50_000, 20_000, 50_000, 20_000, 50_000, 20_000):
        (c,), t, sent = feed(led, 500_000.0, per, 1, t0=t, sent0=sent)
        assert c == np.inf


def test_a_flow_finishing_keeps_a_cap_of_its_pace_and_tiny_rates_are_not_judged():
    """A flow's end (its last bytes, then nothing) is judged as any shortfall: capped at twice
    what it ran at, no lower; a flow that declared a segment and trickles is capped near its
    trickle; a rate too small to show a shortfall (a few segments per reading) is not judged."""
    led = ledger()
    _, t, sent = feed(led, 500_000.0, 45_000, 3)
    caps, _, _ = feed(led, 500_000.0, 0, 2, t0=t, sent0=sent)
    assert caps[-1] == pytest.approx(900_000.0)
    led = ledger()      # 1,500 B a read, whatever it declared
    caps, _, _ = feed(led, 500_000.0, 1_500, 3)
    assert caps[1] == np.inf and caps[2] == pytest.approx(30_000.0)
    led = ledger()
    caps, _, _ = feed(led, 10_000.0, 10, 5)   # a rate of 1 KB per read: too little to judge
    assert all(c == np.inf for c in caps)


def test_grant_held_counts_from_the_first_byte():
    led = ledger()
    led.set_rates({K: 100_000.0}, 0.0)
    led.observe(K, 1.0, 0)             # a second granted, nothing sent: not held yet
    assert led.held(K, 1.0) == 0.0
    led.observe(K, 1.5, 100)
    assert led.held(K, 2.5) == pytest.approx(100_000.0)
    assert led.held_pairs((1, 0), 2.5) == {(0, 1): pytest.approx(100_000.0)}
    led.forget_except(set())
    assert led.cids() == [] and led.held(K) == 0.0


class _F:
    def __init__(self, src, dst, size_bytes):
        self.src, self.dst, self.size_bytes = src, dst, size_bytes


class _R:
    def __init__(self, flows):
        self.flows = flows


def test_overheld_bound():
    hp = {"a": 0, "b": 1}
    rec = _R([_F("a", "b", 1_000)])
    limit = 2 * 1_000 * 1.25 + 64 * 1024 + 250_000
    assert overheld(rec, {(0, 1): limit - 1}, hp, 0.25, 64 * 1024, 250_000, 2.0) is None
    assert overheld(rec, {(0, 1): limit + 1}, hp, 0.25, 64 * 1024, 250_000, 2.0) == ((0, 1), limit + 1, 1_000)
    # an honest paced sender at 3/4 of its rate: 1.5 MB declared, 2 MB of rate held
    big = _R([_F("a", "b", 1_500_000)])
    assert overheld(big, {(0, 1): 2_050_000}, hp, 0.25, 64 * 1024, 95_000, 2.0) is None
    # an unknown size claims nothing; a negative margin turns the check off
    assert overheld(_R([_F("a", "b", None)]), {(0, 1): 1e12}, hp, 0.25, 0, 0) is None
    assert overheld(rec, {(0, 1): 1e12}, hp, 0.25, -1, 0) is None


def test_an_application_limited_flow_holds_a_grant_that_follows_its_use():
    """An honest sender writing 300 KB at a tenth of its 1 MB/s rate (3 s), alone on its link
    (the core gives it the spare above its cap): capped near what it uses, the grant it holds
    grows with its cap, and its claim does not run out (counted at its full rate, 3 MB, it
    would have: the time check would distrust an honest coflow)."""
    led = ledger()
    led.uncap_Bps = 10e6
    hp = {"a": 0, "b": 1}
    rec = _R([_F("a", "b", 300_000)])
    t, sent = 0.0, 0
    led.set_rates({K: 1e6}, t)
    for _ in range(30):
        t += 0.1
        sent += 10_000
        led.observe(K, t, sent)
    assert led.cap(K) == pytest.approx(200_000.0)
    held = led.held_pairs((1, 0), t)
    assert held[(0, 1)] < 1e6
    assert overheld(rec, held, hp, 0.25, 64 * 1024, 0.5 * 1e6, 2.0) is None


@pytest.mark.parametrize("key,value,msg", [
    ("conserve", "2", "setting conserve: must be 0 or 1, got 2"),
    ("demand_headroom", "0", "setting demand_headroom: must be > 0, got 0.0"),
    ("demand_headroom", "nan", "setting demand_headroom: must be > 0, got nan"),
    ("claim_time_factor", "0.5", "setting claim_time_factor: must be 0 (off) or >= 1, got 0.5"),
    ("claim_slack_s", "-1", "setting claim_slack_s: must be >= 0 seconds, got -1.0"),
    ("conserve", "yes", "setting conserve: cannot read 'yes' as int"),
])
def test_settings_refuse_bad_values(key, value, msg):
    from coflow.ctl.settings import split_settings
    with pytest.raises(ValueError) as e:
        split_settings({key: value})
    assert str(e.value) == msg


def test_work_conservation_is_on_and_the_time_check_opt_in():
    """Work conservation is on by default (a flow registered ready is not capped, so a fabric
    that holds flows back costs nothing: docs/explanation/design.md); the time claim check is
    off (on the fat-tree it distrusted an honest coflow the network held back); a factor >= 1
    turns it on."""
    from coflow.ctl.settings import split_settings
    s, _ = split_settings({})
    assert s.conserve == 1 and s.claim_time_factor == 0 and s.claim_slack_s > 0
    s, _ = split_settings({"conserve": "0"})
    assert s.conserve == 0
    s, _ = split_settings({"conserve": "1", "claim_time_factor": "2"})
    assert s.conserve == 1 and s.claim_time_factor == 2

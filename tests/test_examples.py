"""Hand-checked examples from the seed papers and small cases checked by hand."""
import numpy as np
import pytest

from coflow.params import DclasParams, MB, hw_priority
from coflow.sched import NAMES, make_scheduler
from coflow.sched.isolation import correlation, drf_progress, drf_rates, utopia_min_alloc
from coflow.sched.ordered import bssi_order
from coflow.sched.primitives import gamma, madd_ordered, waterfill
from coflow.sim import simulate, isolation_times

from helpers import view, workload

BIG = 1e12  # an uncontended link


def varys_fig1():
    """[VARYS] Fig. 1/2: 3 ingress ports of 1 unit/time; egress uncontended.
    C1: 1 unit at P1, 2 at P2, 4 at P3.  C2: 2 units at P1, 2 at P2."""
    wl = workload(6, [[(0, 3, 1), (1, 4, 2), (2, 5, 4)], [(0, 3, 2), (1, 4, 2)]])
    caps = np.array([1, 1, 1, BIG, BIG, BIG] + [BIG] * 6, dtype=float)
    return wl, caps


def avg_cct(name, wl, caps, **kw):
    r = simulate(wl, make_scheduler(name, kw or None), caps, check=True)
    return float(np.mean(r.finish - wl.arrival)), r


def test_varys_toy_fair_is_4():
    wl, caps = varys_fig1()
    avg, r = avg_cct("fair", wl, caps)
    assert avg == pytest.approx(4.0)
    assert list(r.finish) == pytest.approx([4.0, 4.0])


@pytest.mark.parametrize("name", ["sebf", "utopia", "sincronia", "tcf"])
def test_varys_toy_optimum_is_3(name):
    wl, caps = varys_fig1()
    avg, r = avg_cct(name, wl, caps)
    assert avg == pytest.approx(3.0)  # C2 at 2, C1 at 4


def test_varys_toy_fifo_is_4():
    # FIFO serves C1 first (same arrival, lower id): as bad as fair sharing on average
    wl, caps = varys_fig1()
    avg, _ = avg_cct("fifo", wl, caps)
    assert avg == pytest.approx(4.0)


def test_madd_gamma_by_hand():
    # flows 0->1:2, 0->2:2, 3->1:1 on unit ports: ingress 0 carries 4, egress 1 carries 3 -> Γ=4
    D = np.zeros((1, 8))
    D[0, 0] = 4; D[0, 3] = 1; D[0, 4 + 1] = 3; D[0, 4 + 2] = 2
    assert gamma(D, np.ones(8))[0] == pytest.approx(4.0)
    v = view(4, [[(0, 1, 2), (0, 2, 2), (3, 1, 1)]], [1] * 4, [1] * 4)
    r = madd_ordered(v, np.array([0]), v.remaining, v.caps.copy())
    assert list(r) == pytest.approx([0.5, 0.5, 0.25])  # r_ij = d_ij / Γ: all finish at Γ


def test_madd_priority_inversion_utopia_fig3():
    """[UTOPIA] Fig. 3: A=<100,0,0>, B=<50,150,0>, C=<0,180,180> Mb on 1 Gbps links, A>B>C.
    MADD gives B nothing (link 1 is A's), so C takes link 2."""
    v = utopia_view()
    r = madd_ordered(v, np.array([0, 1, 2]), v.remaining, v.caps.copy())
    a, b1, b2, c2, c3 = r
    assert a == pytest.approx(1e9) and b1 == 0 and b2 == 0
    assert c2 == pytest.approx(1e9) and c3 == pytest.approx(1e9)


def utopia_view():
    G = 1e9  # 1 Gbps in bits; demands in Mb -> 1e6 bits: a 100 Mb flow alone takes 100 ms
    caps_up = [G, G, G] + [BIG] * 5
    return view(8, [[(0, 3, 100e6)], [(0, 4, 50e6), (1, 5, 150e6)], [(1, 6, 180e6), (2, 7, 180e6)]],
                caps_up, [BIG] * 8)


def test_utopia_worked_example():
    v = utopia_view()
    order = np.array([0, 1, 2])  # DRF completion order A, B, C
    rates, rem = utopia_min_alloc(v, order)
    G = 1e9
    # S_3 = <150, 330, 180>: alone it takes 330 ms with minimum allocation <5/11, 1, 6/11>
    D3 = v.link_demand(v.remaining).sum(axis=0)[:3]
    assert list(D3) == pytest.approx([150e6, 330e6, 180e6])
    assert (D3 / G).max() == pytest.approx(0.330)
    assert list(D3 / D3.max()) == pytest.approx([5 / 11, 1, 6 / 11])
    a, b1, b2, c2, c3 = rates
    assert a == pytest.approx(G) and b2 == pytest.approx(G)
    assert b1 == 0 and c2 == 0
    assert c3 == pytest.approx(6 / 11 * G)
    # the unused 5/11 of link 3 goes to C in the backfill stage
    alloc = make_scheduler("utopia").allocate(v)
    assert alloc.rates[4] == pytest.approx(G)


def test_utopia_orders_by_drf_completion():
    v = utopia_view()
    c, dbar = correlation(v.link_demand(v.remaining), v.caps)
    Pstar = drf_progress(c)
    assert Pstar == pytest.approx(0.5)  # link 2: 1/3 + 1 + ... -> sum c = 2
    assert list(dbar / Pstar) == pytest.approx([0.2, 0.3, 0.36])  # DRF CCTs: A < B < C


def test_hug_example_drf_progress_two_thirds():
    """[DISS] Fig. 7.1/7.4: d_A = <1/2, 1>, d_B = <1, 1/6> on two unit links.
    DRF: P_A = P_B = 2/3, a_A = <1/3, 2/3>, a_B = <2/3, 1/9>; 2/9 of link 2 unused."""
    v = view(6, [[(0, 2, 0.5), (1, 3, 1.0)], [(0, 4, 1.0), (1, 5, 1 / 6)]], [1, 1] + [BIG] * 4, [BIG] * 6)
    rates, Pstar, _ = drf_rates(v)
    assert Pstar == pytest.approx(2 / 3)
    assert list(rates) == pytest.approx([1 / 3, 2 / 3, 2 / 3, 1 / 9])
    link2 = rates[1] + rates[3]
    assert 1 - link2 == pytest.approx(2 / 9)
    # progress of each coflow = min over links of allocation / demand
    assert min(rates[0] / 0.5, rates[1] / 1.0) == pytest.approx(2 / 3)
    assert min(rates[2] / 1.0, rates[3] / (1 / 6)) == pytest.approx(2 / 3)
    # HUG (strategy-proof): A may not exceed P* = 2/3 of any link; B's spare use of link 2 is
    # capped at 2/3 as well, so link 2 ends at 2/3 + 2/3 > 1 -> capacity binds: total 1
    hug = make_scheduler("hug").allocate(v).rates
    assert hug[1] <= 2 / 3 + 1e-9 and hug[3] <= 2 / 3 + 1e-9
    assert hug[1] + hug[3] == pytest.approx(1.0)
    wc = make_scheduler("hug", {"work_conserving": "true"}).allocate(v).rates
    assert wc[1] + wc[3] == pytest.approx(1.0)
    assert make_scheduler("drf").allocate(v).rates[1] + make_scheduler("drf").allocate(v).rates[3] == pytest.approx(7 / 9)


def test_hug_three_coflows_progress_two_fifths():
    """[DISS] 7.x: adding d_C = <1, 0> to the example gives P* = 2/5."""
    v = view(8, [[(0, 2, 0.5), (1, 3, 1.0)], [(0, 4, 1.0), (1, 5, 1 / 6)], [(0, 6, 1.0)]], [1, 1] + [BIG] * 6, [BIG] * 8)
    _, Pstar, _ = drf_rates(v)
    assert Pstar == pytest.approx(2 / 5)


def test_waterfill_by_hand():
    # flow 0 crosses links 0 and 2, flow 1 crosses links 0 and 1; link 1 (0.2) caps flow 1,
    # so flow 0 takes the rest of link 0 (max-min: 0.8 and 0.2)
    rem = np.array([1.0, 0.2, 10.0])
    r = waterfill([np.array([0, 0]), np.array([2, 1])], rem)
    assert list(r) == pytest.approx([0.8, 0.2])
    assert list(rem) == pytest.approx([0.0, 0.0, 9.2])


def test_dclas_thresholds_and_queue_map():
    p = DclasParams()
    assert p.thresholds()[:3] == [10 * MB, 100 * MB, 1000 * MB]
    assert p.queue_of(0) == 1 and p.queue_of(10 * MB - 1) == 1 and p.queue_of(10 * MB) == 2
    assert p.queue_of(1e30) == 10
    assert p.queue_weights()[:3] == [10, 9, 8]
    p8 = DclasParams(K=8)
    assert [hw_priority(q) for q in (1, 8)] == [7, 0]  # BMv2 serves priority 7 first
    assert p8.ranges()[0] == (0, 10 * MB - 1, 1) and p8.ranges()[-1][2] == 8


def test_dclas_demotion_at_next_tick():
    """One coflow, one flow on a 1 MB/s link: it crosses Q1 = 1 MB at t=1.0 s; with Δ=0.3 the
    coordinator sees it at the next tick, 1.2 s."""
    wl = workload(2, [[(0, 1, 3 * MB)]])
    s = make_scheduler("dclas-strict", {"Q1": str(MB), "delta": "0.3", "K": "3"})
    seen = []
    orig = s.allocate

    def spy(v):
        a = orig(v)
        seen.append((round(v.now, 6), int(a.queue[0])))
        return a
    s.allocate = spy
    r = simulate(wl, s, float(MB))
    assert r.finish[0] == pytest.approx(3.0)
    assert (0.0, 1) in seen and (1.2, 2) in seen
    assert all(q == 1 for t, q in seen if t < 1.2)


def test_dclas_small_coflow_overtakes_big_one():
    """A small coflow arriving during a big one finishes first under D-CLAS, not under FIFO."""
    wl = workload(2, [[(0, 1, 100 * MB)], [(0, 1, 1 * MB)]], arrivals=[0.0, 20.0])
    cap = 2 * MB  # bytes/s
    d = simulate(wl, make_scheduler("dclas"), cap).finish
    f = simulate(wl, make_scheduler("fifo"), cap).finish
    assert d[1] < d[0] and f[1] > f[0]
    assert d[1] - 20.0 < 1.0  # near its isolation time of 0.5 s (weighted 10:9 sharing)


def test_fifo_lm_heavy_coflow_is_multiplexed():
    # coflow 1 (heavy once it sent > 2 MB) shares with coflow 2 instead of blocking it
    wl = workload(2, [[(0, 1, 10 * MB)], [(0, 1, 1 * MB)]], arrivals=[0.0, 2.0])
    s = make_scheduler("fifo-lm", {"heavy_bytes": str(2 * MB)})
    r = simulate(wl, s, float(MB))
    assert r.finish[1] == pytest.approx(4.0)  # 1 MB at half of 1 MB/s
    s2 = make_scheduler("fifo-lm", {"heavy_bytes": str(100 * MB)})
    r2 = simulate(wl, s2, float(MB))
    assert r2.finish[1] == pytest.approx(11.0)  # light: pure FIFO, waits for coflow 1


def test_fai_deallocates_to_bottleneck_and_reallocates():
    # coflow A: flows 0->2 and 1->2... keep it simple: A has flows 0->2 and 1->3; port 1 is
    # shared with coflow B's flow 1->4, so A's 1->3 flow is its bottleneck
    v = view(5, [[(0, 2, 10), (1, 3, 10)], [(1, 4, 10)]], [1] * 5, [1] * 5)
    v.remaining = None
    a = make_scheduler("fai").allocate(v)
    r = a.rates
    # Aalo-like start: both in Q1, FIFO: A takes ports 0 and 1 fully; MBAB: A's flows have equal
    # bytes sent and min bw 1 -> unchanged.  B gets nothing on port 1 (strict FIFO in queue).
    assert r[0] == pytest.approx(1) and r[1] == pytest.approx(1) and r[2] == pytest.approx(0)


def test_bssi_by_hand():
    # one port; coflow 0 has 3 units, coflow 1 has 1 unit: smallest goes first
    D = np.array([[3.0, 0], [1.0, 0]])
    assert list(bssi_order(D)) == [1, 0]


def test_varys_deadline_admission():
    # two identical coflows on one port, each needs 1 s alone; deadline 1.5 s each:
    # the first is admitted, the second cannot meet it on what is left and is rejected
    wl = workload(2, [[(0, 1, MB)], [(0, 1, MB)]])
    wl.deadline = np.array([1.5, 1.5])
    r = simulate(wl, make_scheduler("varys-deadline"), float(MB), check=True)
    assert list(r.admitted) == [True, False]
    assert r.finish[0] <= 1.5 + 1e-9


def test_isolation_time():
    wl = workload(3, [[(0, 1, 4), (0, 2, 2), (2, 1, 1)]])
    assert isolation_times(wl, np.ones(3), np.ones(3))[0] == pytest.approx(6.0)


def test_reschedule_per_coflow_idles_a_finished_flows_bandwidth():
    """One coflow, flows 0->1 (1 byte) and 0->2 (2 bytes) sharing uplink 0 of capacity 1.
    Per-flow fairness gives each 1/2; the first finishes at t=2.  Rescheduled at every flow
    completion the second then runs at 1 and finishes at 3; rescheduled only at coflow events
    (CoflowSim's convention) it keeps 1/2 and finishes at 4.  A second coflow arriving at t=2.5
    (its own ports) is a rescheduling point: the first coflow's flow is then raised to 1 and
    finishes at 2.5 + 0.75 = 3.25."""
    wl = workload(3, [[(0, 1, 1.0), (0, 2, 2.0)]])
    assert simulate(wl, make_scheduler("fair"), 1.0).finish[0] == pytest.approx(3.0)
    r = simulate(wl, make_scheduler("fair"), 1.0, reschedule="coflow")
    assert r.finish[0] == pytest.approx(4.0) and r.events == 1
    wl2 = workload(5, [[(0, 1, 1.0), (0, 2, 2.0)], [(3, 4, 1.0)]], arrivals=[0.0, 2.5])
    r2 = simulate(wl2, make_scheduler("fair"), 1.0, reschedule="coflow")
    assert r2.finish.tolist() == pytest.approx([3.25, 3.5]) and r2.events == 3  # 0, 2.5, 3.25
    with pytest.raises(ValueError, match="reschedule"):
        simulate(wl, make_scheduler("fair"), 1.0, reschedule="sometimes")


def test_reschedule_per_coflow_falls_back_to_flow_completions():
    """Per-flow priority serves one of a coflow's two flows on a shared uplink at a time: no
    coflow can finish at those rates, so the next rescheduling point is the first flow's
    completion (not a deadlock).  Flows of 1 and 2 bytes: SRTF finishes them at 1 and 3."""
    wl = workload(3, [[(0, 1, 1.0), (0, 2, 2.0)]])
    r = simulate(wl, make_scheduler("pfp"), 1.0, reschedule="coflow")
    assert r.finish[0] == pytest.approx(3.0) and r.events == 2


def test_reschedule_per_coflow_late_in_a_long_trace():
    """At t = 1e12 s a float's resolution is ~1.2e-4 s: the 1e-5 s a coflow has left when
    another arrives rounds away (t + dt == t).  The step must still finish it (it once looped
    on zero-length steps)."""
    T = 1e12
    wl = workload(4, [[(0, 1, 1.0 + 1e-5)], [(2, 3, 1.0)]], arrivals=[T, T + 1.0])
    for mode in ("flow", "coflow"):
        r = simulate(wl, make_scheduler("fair"), 1.0, reschedule=mode)
        assert r.finish[0] == pytest.approx(T + 1.0, abs=1e-3) and r.finish[1] == pytest.approx(T + 2.0, abs=1e-3)


def test_pfp_preemption_cascade_by_hand():
    """Per-flow SRTF on links of capacity 1, run by the simulator's event-driven pfp.  At t=0
    flow A 0->1 (4 bytes) and flow B 2->3 (6 bytes) run.  At t=1 a coflow arrives with C 0->3
    (2 bytes): C (2) is before A (3 left) and B (5 left), so it pre-empts both; A's downlink 1
    and B's uplink 2 go idle.  C finishes at 3; A (3 left) and B (5 left) resume: A at 6, B
    at 8.  Every time by hand; the scheduler asked at every event gives the same."""
    wl = workload(4, [[(0, 1, 4.0)], [(2, 3, 6.0)], [(0, 3, 2.0)]], arrivals=[0.0, 0.0, 1.0])
    for inc in (True, False):
        r = simulate(wl, make_scheduler("pfp"), 1.0, incremental=inc, check=True)
        assert r.finish.tolist() == pytest.approx([6.0, 8.0, 3.0])
        assert r.events == 4 and r.max_overload == 0.0  # t = 0, 1, 3, 6
    with pytest.raises(ValueError, match="no incremental form"):
        simulate(wl, make_scheduler("pfp"), np.array([1.0, 1, 1, 1, 1, 1, 1, 2]), incremental=True)
    with pytest.raises(ValueError, match="no incremental form"):
        simulate(wl, make_scheduler("fair"), 1.0, incremental=True)


def test_pfp_many_ports_fall_back_to_asking_allocate(monkeypatch):
    """Past INCREMENTAL_MAX_PAIRS (its per-pair state would not fit) pfp runs the generic
    loop: the same result, and asking for the event-driven loop is an error."""
    import coflow.sim as simmod
    wl = workload(4, [[(0, 1, 4.0)], [(2, 3, 6.0)], [(0, 3, 2.0)]], arrivals=[0.0, 0.0, 1.0])
    monkeypatch.setattr(simmod, "INCREMENTAL_MAX_PAIRS", 15)
    called = []
    import coflow.sim_pfp as pfpmod
    monkeypatch.setattr(pfpmod, "simulate_incremental", lambda *a: called.append(1))
    r = simulate(wl, make_scheduler("pfp"), 1.0)
    assert not called and r.finish.tolist() == pytest.approx([6.0, 8.0, 3.0])
    with pytest.raises(ValueError, match="4 ports"):
        simulate(wl, make_scheduler("pfp"), 1.0, incremental=True)


def test_pfp_event_driven_limits_and_progress(capsys, monkeypatch):
    """The event-driven loop keeps the simulator's contract: it gives up past ``max_events``
    and prints progress lines without a terminal."""
    import coflow.sim as simmod
    wl = workload(3, [[(0, 1, 1.0), (0, 2, 2.0), (1, 2, 3.0)], [(2, 0, 1.0)]], arrivals=[0.0, 0.5])
    n = simulate(wl, make_scheduler("pfp"), 1.0, incremental=False).events
    for inc in (True, False):
        assert simulate(wl, make_scheduler("pfp"), 1.0, max_events=n, incremental=inc).events == n
        with pytest.raises(simmod.SimError, match=f"more than {n - 1} events"):
            simulate(wl, make_scheduler("pfp"), 1.0, max_events=n - 1, incremental=inc)
    import coflow.simbase
    monkeypatch.setattr(coflow.simbase, "LOG_EVERY_S", 0.0)
    r = simulate(wl, make_scheduler("pfp"), 1.0, progress=True, label="pfp-test")
    assert np.all(np.isfinite(r.finish))
    assert "pfp-test: t=" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["flow", "coflow"])
@pytest.mark.parametrize("name", NAMES)
def test_flows_without_bytes_are_done_on_arrival(name, mode):
    """A reducer of 0 MB (valid in a trace) gives flows without bytes: they have nothing to
    send, so they are done when they arrive, and a coflow of only such flows finishes on
    arrival (CCT 0).  Every scheduler, both modes: 150 of them on one link used to make the
    simulator give up (one per zero-length step), and MADD-based schedulers never gave them a
    rate (no flow could progress)."""
    wl = workload(3, [[(0, 1, 0.0), (0, 2, 2.0)], [(1, 2, 0.0)], [(0, 1, 0.0)] * 150], arrivals=[0.0, 0.5, 0.7])
    r = simulate(wl, make_scheduler(name), 1.0, reschedule=mode, check=True)
    if name == "virtual-cluster":  # a reservation runs a coflow at d / D: it ends at its deadline
        assert 2.0 <= r.finish[0] <= 2.0 * 2 and r.finish.tolist()[1:] == pytest.approx([0.5, 0.7])
        return
    assert r.finish.tolist() == pytest.approx([2.0, 0.5, 0.7])


def test_pfp_equal_bytes_go_by_flow_order():
    """A tie in remaining bytes goes to the earlier flow (SRTF by (remaining, position)), also
    when the earlier one is a waiting flow that a finished flow just unblocked and the later
    one arrives at that instant.  Uplink 0, capacity 1: X (0->1, 1 byte) runs, B (0->2, 2
    bytes) waits; at t=1 X finishes and A (0->2, 2 bytes) arrives: B runs (done at 3), then A
    (done at 5)."""
    wl = workload(3, [[(0, 1, 1.0), (0, 2, 2.0)], [(0, 2, 2.0)]], arrivals=[0.0, 1.0])
    for inc in (True, False):
        r = simulate(wl, make_scheduler("pfp"), 1.0, incremental=inc)
        assert r.finish.tolist() == pytest.approx([3.0, 5.0])


def _fai_view():
    # A (id 1, queue 1): flows 0->2, 1->3; B (id 2, already demoted to queue 2): flow 4->3.
    v = view(5, [[(0, 2, 10), (1, 3, 10)], [(4, 3, 10)]], [1] * 5, [1] * 5)
    v.remaining = None
    v.memory["queue"] = {2: 2}
    return v


@pytest.mark.parametrize("reading,expect", [
    # Aalo's weighted queues (10:9): on downlink 3 A's 1->3 gets 10/19 and B 9/19; MBAB: A's
    # flows sent the same and 1->3 has the least rate -> 0->2 is cut from 1 to 10/19; the
    # share reallocation finds A's downlink 3 full and adds nothing
    ({}, [10 / 19, 10 / 19, 9 / 19]),
    ({"detect": "min-bw"}, [10 / 19, 10 / 19, 9 / 19]),
    ({"detect": "min-bytes"}, [1, 10 / 19, 9 / 19]),  # least bytes: flow 0->2 (first), rate 1
    ({"detect": "none"}, [1, 10 / 19, 9 / 19]),
    ({"realloc": "greedy"}, [1, 10 / 19, 9 / 19]),  # 0->2 takes back up0/dn2's 9/19
    ({"realloc": "maxmin"}, [1, 10 / 19, 9 / 19]),
    # Algorithm 1 read literally: queue 1 owns 10/55 of every link, queue 2 9/55; then A adds
    # the least residual per flow over its links (downlink 3: 1 - 19/55 = 36/55) to both flows
    ({"init": "static"}, [46 / 55, 46 / 55, 9 / 55]),
    ({"init": "static", "realloc": "none"}, [10 / 55, 10 / 55, 9 / 55]),
])
def test_fai_readings_by_hand(reading, expect):
    a = make_scheduler("fai", reading).allocate(_fai_view())
    assert a.rates == pytest.approx(expect)


def test_psp_splits_each_link_per_coflow_then_per_flow():
    # downlink 0: coflow A's three flows (from 0, 1, 2) and coflow B's one (from 1): PS-P gives
    # each coflow half of it, A's flows 1/6 each; per-flow fairness gives all four 1/4
    a = make_scheduler("psp").allocate(view(3, [[(0, 0, 1), (1, 0, 1), (2, 0, 1)], [(1, 0, 1)]], [1] * 3, [1] * 3))
    assert a.rates == pytest.approx([1 / 6, 1 / 6, 1 / 6, 1 / 2])
    wl = workload(3, [[(0, 0, 1), (1, 0, 1), (2, 0, 1)], [(1, 0, 1)]])
    r = simulate(wl, make_scheduler("psp"), 1.0, check=True)
    assert list(r.finish) == pytest.approx([4.0, 2.0])  # B alone at 1/2; A at 1/6 then 1/3
    assert list(simulate(wl, make_scheduler("fair"), 1.0).finish) == pytest.approx([4.0, 4.0])


def test_dclas_uncoordinated_demotes_on_a_senders_own_bytes():
    # A (t=0): 0->0 and 1->1, 10 bytes each; B (t=1): 0->2, 1 byte; Q1 = 3, strict queues, no
    # coordination delay.  Globally A crosses 3 bytes at t=1.5 (2 bytes/s): B runs 1.5..2.5.
    # Sender 0 alone sees A cross 3 bytes at t=3: B runs 3..4.  A ends at 11 in both.
    wl = workload(3, [[(0, 0, 10), (1, 1, 10)], [(0, 2, 1)]], [0.0, 1.0])
    kw = {"Q1": "3", "delta": "0", "strict": "true"}
    glob = simulate(wl, make_scheduler("dclas", kw), 1.0, check=True)
    loc = simulate(wl, make_scheduler("dclas-local", kw), 1.0, check=True)
    assert list(glob.finish) == pytest.approx([11.0, 2.5])
    assert list(loc.finish) == pytest.approx([11.0, 4.0])


def test_virtual_cluster_reserves_the_hose_and_admits_less_than_varys():
    # A: 0->1, 2 bytes, deadline 4: reserves 0.5 on uplink 0 (and downlink 1).  B: 0->0 and
    # 1->0, 1 byte each, deadline 2: downlink 0 needs 2/2 = 1, so a virtual cluster reserves 1
    # on every port B uses, uplink 0 included, where only 0.5 is left: rejected.  Varys only
    # needs 1/2 on uplink 0 and admits it.
    wl = workload(2, [[(0, 1, 2)], [(0, 0, 1), (1, 0, 1)]])
    wl.deadline = np.array([4.0, 2.0])
    vc = simulate(wl, make_scheduler("virtual-cluster"), 1.0, check=True)
    vy = simulate(wl, make_scheduler("varys-deadline"), 1.0, check=True)
    assert list(vc.admitted) == [True, False] and list(vy.admitted) == [True, True]
    assert vc.finish[0] == pytest.approx(4.0)  # at exactly d / D inside its reservation
    assert vy.finish[1] <= 2.0 + 1e-9

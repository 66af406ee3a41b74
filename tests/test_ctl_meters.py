"""Per-flow meters (issue 20, defect 3) and the rate modes' closed loop (defect 1), pure parts:
the meter pool (no two live flows share an index, release and reuse, exhaustion -> neither
meter nor override, counted), burst sizing, payload <-> frame conversion, and the progress
read from ``flow_bytes`` fed to the scheduler. The live tests are in
``tests/test_ctl_live_closed_loop.py``."""
import os
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from coflow import topology as T
from coflow.ctl import model as M
from coflow.ctl import translate as TR
from coflow.ctl.desired import DesiredBook
from coflow.ctl.rates import FlowProgress, plan
from coflow.dataplane import constants as C
from coflow.sched import make_scheduler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(ROOT, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(ROOT, "build", "coflow.json")
S = TR.CtlSettings(link_mbps=100, min_rate_frac=0)


# conversion -----------------------------------------------------------------------------------

def test_overhead_constants_are_the_headers_of_a_tagged_tcp_segment():
    assert C.FRAME_OVERHEAD_BYTES == 14 + 20 + 8 + 20 + 12 == 74
    assert C.MAX_FRAME_BYTES == 1514 and C.TCP_MSS_BYTES == 1440
    assert C.TCP_MSS_BYTES + C.FRAME_OVERHEAD_BYTES == C.MAX_FRAME_BYTES


def test_payload_from_a_flow_bytes_reading():
    # 100 full segments and a 500-byte tail, as flow_bytes counts them (frames, no FCS)
    frames = 100 * 1514 + (500 + 74)
    assert TR.payload_bytes(frames, 101) == 100 * 1440 + 500
    assert TR.payload_bytes(0, 0) == 0
    assert TR.payload_bytes(74, 1) == 0  # a pure ACK of the sender (tagged socket)
    assert TR.payload_bytes(60, 1) == 0  # never negative


def test_frame_rate_is_payload_rate_of_full_segments():
    assert TR.frame_rate(1440.0) == pytest.approx(1514.0)
    s = TR.CtlSettings(link_mbps=10)
    assert TR.frame_rate(s.link_payload_Bps) == pytest.approx(s.link_Bps)
    # what a meter passes in a second at that rate, read back as payload: the scheduler's rate
    segs = TR.frame_rate(144_000.0) / 1514
    assert TR.payload_bytes(int(round(segs * 1514)), int(round(segs))) == 144_000


# bursts -----------------------------------------------------------------------------------------

@given(rate=st.floats(0, 1e10), rtt=st.floats(1, 1e6), buf=st.integers(3028, 10**8),
       frac=st.floats(0.01, 1))
def test_burst_is_rtt_times_rate_clamped(rate, rtt, buf, frac):
    if buf * frac < 2 * 1514:
        return
    s = TR.CtlSettings(rtt_us=rtt, port_buffer_bytes=buf, burst_buffer_frac=frac)
    b = TR.burst_bytes(rate, s)
    lo, hi = 2 * 1514, int(buf * frac)
    assert lo <= b <= hi
    want = rate * rtt / 1e6
    if lo < want < hi:
        assert b == pytest.approx(want, abs=1)
    assert TR.burst_bytes(rate * 2, s) >= b  # monotone in the rate


def test_burst_examples():
    s = TR.CtlSettings(rtt_us=2000, port_buffer_bytes=100_000, burst_buffer_frac=0.5)
    assert TR.burst_bytes(1_000, s) == 3028                # 2 B of RTT: two frames
    assert TR.burst_bytes(10_000_000, s) == 20_000          # 2 ms of 10 MB/s
    assert TR.burst_bytes(1e9, s) == 50_000                 # half the port buffer


# the pool ---------------------------------------------------------------------------------------

def test_pool_take_release_reuse():
    p = TR.MeterPool(3)
    assert [p.take("e0", ("a", i, 0)) for i in range(3)] == [0, 1, 2]
    assert p.take("e0", ("a", 3, 0)) is None                # exhausted
    assert p.take("e1", ("a", 3, 0)) == 0                   # pools are per switch
    assert p.take("e0", ("a", 1, 0)) == 1                   # a flow keeps its index
    p.release(("a", 1, 0))
    assert p.take("e0", ("b", 0, 0)) is None                # held until the next round
    p.commit()
    assert p.take("e0", ("b", 0, 0)) == 1 and p.owner[("e0", 1)] == ("b", 0, 0)
    p.release(("a", 0, 0))
    p.release(("a", 2, 0))
    p.commit()
    q = p.copy()
    assert [p.take("e0", ("c", i, 0)) for i in range(2)] == [0, 2]
    assert q.index_of == {k: v for k, v in p.index_of.items() if k[0] != "c"}


def _world(rng, ctx, cids, flows, pool_size):
    """One random round: arrivals, departures, flows finishing (registration order kept)."""
    r = rng.random()
    if r < 0.45 or not cids:
        cid = (rng.randrange(1 << 20), 0)
        if cid not in flows:
            n = rng.randrange(1, 6)
            flows[cid] = [(a, (a + rng.randrange(1, 16)) % 16) for a in rng.sample(range(16), n)]
            cids.append(cid)
    elif r < 0.7:
        cid = rng.choice(cids)
        cids.remove(cid)
        del flows[cid]
    else:
        cid = rng.choice(cids)
        if len(flows[cid]) > 1:
            flows[cid].pop(rng.randrange(len(flows[cid])))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pool_size=st.integers(1, 12))
def test_no_two_live_flows_share_an_index_and_exhaustion_is_all_or_nothing(seed, pool_size):
    rng = random.Random(seed)
    topo = T.fattree(4)
    ctx = TR.MeterContext(topo, meters=pool_size)
    cids: list = []
    flows: dict = {}
    book = DesiredBook(ctx.switches)
    for _ in range(30):
        for _ in range(rng.randrange(1, 3)):
            _world(rng, ctx, cids, flows, pool_size)
        cf, src, dst = [], [], []
        for k, c in enumerate(cids):
            for a, b in flows[c]:
                cf.append(k)
                src.append(a)
                dst.append(b)
        u = ctx.update(list(cids), np.array(cf, np.int64), np.array(src, np.int64),
                       np.array(dst, np.int64), np.full(len(cf), 1e5), None, S)
        state = ctx.state()
        seen: dict = {}
        for sw, ents in state.items():
            for e in ents.values():
                if isinstance(e, M.TableEntry):
                    k = (sw, dict(e.params)["index"])
                    assert k not in seen, (k, seen[k], e)   # no two live flows share an index
                    seen[k] = e
                    assert 0 <= k[1] < pool_size
        for c in cids:
            pairs = {(ctx.switches[ctx.edge_of[a]], a, b) for a, b in flows[c]}
            got = {(sw, a, b) for a, b, sw, _ in ctx.flows(c)}
            if ctx.metered(c):
                assert got == pairs and c not in ctx.unmetered   # every pair metered...
            else:
                assert got == set() and ctx.unmetered[c] == len({(a, b) for a, b in flows[c]})
        assert set(ctx.unmetered) <= set(cids)
        # the book never sees a key claimed by two components (released indices are held;
        # a free index's lingering config leaves before its next owner's arrives): it raises
        # on one; and what it holds is the context's state (lingering configs included)
        u.apply(book)
        assert {sw: st_.entities for sw, st_ in book.states.items() if st_.entities} == \
            {sw: d for sw, d in state.items() if d}


def test_exhausted_pool_unmeters_the_coflow_then_meters_it_when_freed():
    topo = T.bigswitch(8)
    ctx = TR.MeterContext(topo, meters=3)
    a, b = (1, 0), (2, 0)
    # a: 2 pairs, b: 2 pairs; 3 meters: b gets none (all or nothing), counted
    cf, src, dst = np.array([0, 0, 1, 1]), np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7])
    ctx.update([a, b], cf, src, dst, np.full(4, 1e5), None, S)
    assert ctx.metered(a) and not ctx.metered(b)
    assert ctx.unmetered == {b: 2} and ctx.unmetered_flows == 2 and ctx.pool.in_use() == 2
    assert all(dict(e.match)["external_id"] == 1 for ents in ctx.state().values()
               for e in ents.values() if isinstance(e, M.TableEntry))
    # a's second flow finishes: its index is held one round, then b fits
    ctx.update([a, b], cf[[0, 2, 3]], src[[0, 2, 3]], dst[[0, 2, 3]], np.full(3, 1e5), None, S)
    assert not ctx.metered(b) and ctx.pool.in_use() == 1
    ctx.update([a, b], cf[[0, 2, 3]], src[[0, 2, 3]], dst[[0, 2, 3]], np.full(3, 1e5), None, S)
    assert ctx.metered(b) and ctx.unmetered == {}
    assert sorted(i for _, _, _, i in ctx.flows(b)) == [1, 2]


@pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                    reason="build/coflow.p4info.txt missing: run `make p4`")
def test_controller_gives_no_override_without_a_meter():
    """Pool of 2: SEBF orders three one-flow coflows, the third gets no meter, hence no
    override (fair class), and is counted in the metrics and the status."""
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl.daemon import Controller
    t = T.bigswitch(4)
    reg = CoflowRegistry([h.name for h in t.hosts])
    c = Controller(t, "sebf", P4INFO, BMV2_JSON, {s.name: "127.0.0.1:1" for s in t.switches},
                   registry=reg, settings={"link_mbps": "10"})
    try:
        c._meter_ctx = TR.MeterContext(t, meters=2)
        recs = [reg.register([("h0", f"h{d}", 1000 * d)]) for d in (1, 2, 3)]
        with c._mu:
            c._refresh_coflows()
            c._compute_rates(1000.0)
        cids = [(r.cid.external, r.cid.internal) for r in recs]
        assert c._prio == {cids[0]: 7, cids[1]: 6}          # the third: no override
        assert c._meter_ctx.unmetered == {cids[2]: 1}
        text = c.metrics.exposition().decode()
        assert "coflow_ctl_unmetered_coflows 1.0" in text and "coflow_ctl_unmetered_flows 1.0" in text
        assert "coflow_ctl_meters_in_use 2.0" in text
        st_ = c.status()
        assert st_["meters"]["unmetered_coflows"] == 1 and st_["meters"]["in_use"] == 2
        assert [x["metered"] for x in st_["coflows"]] == [True, True, False]
        assert st_["coflows"][2]["override_prio"] is None
        desired = c._desired()["s0"]
        assert {dict(e.match)["external_id"] for e in desired.table(M.T_OVERRIDE)} == \
            {cids[0][0], cids[1][0]}
        assert {dict(e.match)["external_id"] for e in desired.table(M.T_FLOW_METER)} == \
            {cids[0][0], cids[1][0]}
    finally:
        c.stop()
        reg.close()


# the closed loop (pure part) -------------------------------------------------------------------

def test_progress_readings_become_bytes_sent():
    from types import SimpleNamespace as NS
    from coflow.api.registry import CoflowId, FlowSpec
    pr = FlowProgress()
    hp = {"h0": 0, "h1": 1, "h2": 2}
    rec = NS(cid=CoflowId(5, 1), flows=[FlowSpec("h0", "h1", 3000), FlowSpec("h0", "h1", 2000),
                                        FlowSpec("h2", "h1", None)])
    cid = (5, 1)
    assert pr.observe(cid, 0, 1, ("s0", 4), 4 * 1514, 4)         # 4 full segments: 5760 B
    assert not pr.observe(cid, 0, 1, ("s0", 4), 4 * 1514, 4)     # no change: no new version
    # in flow order, up to sizes; a flow with a known size stays one segment short of it (the
    # counters see what left the edge, not what arrived): 3000 - 1440, 2000 - 1440
    assert pr.measured([rec], hp) == {cid: {0: 1560, 1: 560}}
    pr.observe(cid, 2, 1, ("s0", 5), 1514 + 574, 2)
    assert pr.measured([rec], hp)[cid][2] == 1940                # unknown size: all of it
    # the counter goes back to 0 (a restarted switch, entries re-inserted with a reset)
    pr.observe(cid, 0, 1, ("s0", 4), 1514, 1)
    assert pr.sent(cid)[(0, 1)] == 5760 + 1440
    # metered again on another index: the old one's bytes stay counted
    pr.observe(cid, 0, 1, ("s0", 9), 1514, 1)
    assert pr.sent(cid)[(0, 1)] == 5760 + 1440 + 1440
    pr.forget_except(set())
    assert pr.measured([rec], hp) == {}


def test_measured_progress_drives_sebf_order_and_finishes_flows():
    """The core gets the measured bytes as sent: a large coflow that drained below a smaller
    one is served first (SEBF); a flow whose bytes were all counted stays in the view one
    segment short of its size (it leaves when its application says so), so its coflow keeps
    its place in the order while its last packets are on their way."""
    from types import SimpleNamespace as NS
    from coflow.api.registry import CoflowId, FlowSpec
    hp = {"h0": 0, "h1": 1, "h2": 2, "h3": 3}
    big = NS(cid=CoflowId(1, 0), admitted=True, registered_at=0.0, sent_bytes={},
             flows=[FlowSpec("h0", "h1", 100_000), FlowSpec("h0", "h2", 10_000)])
    small = NS(cid=CoflowId(2, 0), admitted=True, registered_at=0.0, sent_bytes={},
               flows=[FlowSpec("h2", "h3", 60_000)])
    s = make_scheduler("sebf")
    p = plan("sebf", s, [big, small], hp, 1e6, 0.0, {}, 10**9)
    assert p.prio == {(2, 0): 7, (1, 0): 6}
    pr = FlowProgress()
    pr.observe((1, 0), 0, 1, ("s0", 0), 70_000 // 1440 * 1514 + 1514, 70_000 // 1440 + 1)
    pr.observe((1, 0), 0, 2, ("s0", 1), 7 * 1514, 7)   # 10,080 >= 10,000 counted
    p = plan("sebf", s, [big, small], hp, 1e6, 0.0, {}, 10**9,
             measured=pr.measured([big, small], hp))
    assert p.prio == {(1, 0): 7, (2, 0): 6}
    assert [(c, a, b) for c, a, b, _ in p.flows] == [((1, 0), "h0", "h1"), ((1, 0), "h0", "h2"),
                                                     ((2, 0), "h2", "h3")]
    assert p.view.remaining[0] == 100_000 - (70_000 // 1440 + 1) * 1440
    assert p.view.remaining[1] == 1440                 # counted in full: one segment short
    # the application's own Update finishes it
    big.sent_bytes = {1: 10_000}
    p = plan("sebf", s, [big, small], hp, 1e6, 0.0, {}, 10**9,
             measured=pr.measured([big, small], hp))
    assert [(c, a, b) for c, a, b, _ in p.flows] == [((1, 0), "h0", "h1"), ((2, 0), "h2", "h3")]


def test_measured_progress_moves_fai_queues():
    """Fai's queues come from bytes sent: with the data plane's counts (no Update) a coflow
    that crossed Q1 (10 MiB; at the full 1 MB/s, at t = 10.49 s) is demoted at that tick;
    open loop (nothing sent as far as the controller knows) it stays in queue 1."""
    from types import SimpleNamespace as NS
    from coflow.api.registry import CoflowId, FlowSpec
    hp = {"h0": 0, "h1": 1, "h2": 2, "h3": 3}
    recs = [NS(cid=CoflowId(1, 0), admitted=True, registered_at=0.0, sent_bytes={},
               flows=[FlowSpec("h0", "h1", 50 << 20)]),
            NS(cid=CoflowId(2, 0), admitted=True, registered_at=0.0, sent_bytes={},
               flows=[FlowSpec("h2", "h3", 50 << 20)])]
    pr = FlowProgress()
    n = (10_500_000 // 1440) + 1                    # 10.5 MB of payload by t = 10.5 s
    pr.observe((1, 0), 0, 1, ("s0", 0), n * 1514, n)
    for measured, want in ((None, 7), (pr.measured(recs, hp), 6)):
        s = make_scheduler("fai", {"K": "8"})
        mem: dict = {}
        p = plan("fai", s, recs, hp, 1e6, 0.0, mem, 10**9)
        assert p.prio == {(1, 0): 7, (2, 0): 7}
        p = plan("fai", s, recs, hp, 1e6, 10.5, mem, 10**9, measured=measured)
        assert p.prio == {(1, 0): want, (2, 0): 7}


def test_counter_read_request():
    """The closed loop's per-index read (entities added in place) is the request built entity
    by entity (index 0 included: an empty but present Index); without indices, one wildcard
    entity with only the counter id."""
    from types import SimpleNamespace
    from coflow.ctl.codec import Codec
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    codec = SimpleNamespace(counter_id={"c": 318_000_123})
    for idx in ([0], [0, 1, 4095], list(range(300))):
        r = pb.ReadRequest()
        r.device_id = 7
        for i in idx:
            e = pb.Entity()
            e.counter_entry.counter_id = 318_000_123
            e.counter_entry.index.index = i
            r.entities.append(e)
        got = Codec.counter_read_request(codec, 7, "c", idx)
        assert got == r and got.SerializeToString() == r.SerializeToString()
        assert got.entities[0].counter_entry.HasField("index")
    w = Codec.counter_read_request(codec, 7, "c")
    assert len(w.entities) == 1 and not w.entities[0].counter_entry.HasField("index")
    assert w.entities[0].counter_entry.counter_id == 318_000_123 and w.device_id == 7


def test_seeded_indices_are_kept_for_live_flows_and_freed_for_done_ones():
    """A restarted controller adopts the indices the switch holds: a live flow keeps its index
    (same entry: no write, no counter reset), a finished one's index is freed."""
    topo = T.bigswitch(4)
    ctx = TR.MeterContext(topo, meters=8)
    assert ctx.pool.seed("s0", ((1, 0), 0, 1), 5) and ctx.pool.seed("s0", ((1, 0), 2, 3), 6)
    assert not ctx.pool.seed("s0", ((2, 0), 0, 1), 5)      # taken
    assert not ctx.pool.seed("s0", ((2, 0), 0, 1), 8)      # out of range
    ctx.update([(1, 0)], np.array([0]), np.array([0]), np.array([1]), np.array([1e5]), None, S)
    assert ctx.flows((1, 0)) == [(0, 1, "s0", 5)]
    assert ctx.pool.index_of == {((1, 0), 0, 1): ("s0", 5)}   # 6 released (held a round)
    ctx.update([(1, 0)], np.array([0]), np.array([0]), np.array([1]), np.array([1e5]), None, S)
    assert 6 in ctx.pool._free["s0"]


@pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                    reason="build/coflow.p4info.txt missing: run `make p4`")
@pytest.mark.parametrize("frac", [1.0, 0.9, 0.5])
def test_rate_modes_share_rate_capacity_frac_of_the_payload_capacity(frac):
    """``rate_capacity_frac`` (issue 27): SEBF gives a coflow alone on its links the capacity
    the controller shares, this fraction of the link's payload capacity; its meter's CIR is
    that rate's frame rate (no headroom here)."""
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl.daemon import Controller
    t = T.bigswitch(4)
    reg = CoflowRegistry([h.name for h in t.hosts])
    c = Controller(t, "sebf", P4INFO, BMV2_JSON, {s.name: "127.0.0.1:1" for s in t.switches},
                   registry=reg, settings={"link_mbps": "10", "rate_capacity_frac": str(frac)})
    try:
        reg.register([("h0", "h1", 10_000_000)])
        with c._mu:
            c._refresh_coflows()
            c._compute_rates(1000.0)
        s = c.ctl
        assert s.rate_capacity_Bps == pytest.approx(frac * s.link_payload_Bps)
        (m,) = [e for e in c._desired()["s0"].entities.values() if isinstance(e, M.MeterConfig)]
        assert m.cir == TR.meter_config(0, frac * s.link_payload_Bps, s).cir
    finally:
        c.stop()
        reg.close()


@pytest.mark.parametrize("meters", [True, False])
def test_a_released_meter_keeps_its_config_until_its_index_is_taken_again(meters):
    """Hand-checked: a departing coflow's flow_meter entries are deleted but its meters are
    not reset (nothing points at them; the config lingers, MeterPool.linger); the next owner
    of the index writes its own config over it: one MODIFY instead of a reset and a write.
    Without meters (queues enforcement) nothing lingers in the book."""
    topo = T.bigswitch(4)
    ctx = TR.MeterContext(topo, meters=2)
    book = DesiredBook(ctx.switches)
    [sw] = ctx.switches
    have = M.SwitchState()

    def round_(cids, cf, src, dst, rate):
        u = ctx.update(cids, np.array(cf), np.array(src), np.array(dst), np.array(rate), None, S)
        u.apply(book, meters=meters)
        ops = M.diff_keys(book.state(sw), have, book.dirty[sw])
        M.apply_ops_inplace(have, ops)
        book.synced(sw)
        return sorted((op.type, op.entity.key[0]) for op in ops)
    a, b, c = (1, 0), (2, 0), (3, 0)
    ops = round_([a], [0], [0], [1], [1e5])          # a: index 0
    assert ops == sorted([("MODIFY", "counter"), ("INSERT", "table")] +
                         ([("MODIFY", "meter")] if meters else []))
    m0 = TR.meter_config(0, 1e5, S)
    assert (have.entities.get(m0.key) == m0) is meters
    ops = round_([], [], [], [], [])                 # a leaves: no meter reset
    assert ops == [("DELETE", "table")]
    assert (have.entities.get(m0.key) == m0) is meters
    assert ctx.pool.linger == {(sw, 0): m0} and ctx.state() == {sw: {m0.key: m0}}
    round_([b], [0], [2], [3], [2e5])                # b: index 1 (0 is at the back)
    assert ctx.pool.index_of[(b, 2, 3)] == (sw, 1)
    ops = round_([b, c], [0, 1], [2, 0], [3, 2], [2e5, 3e5])   # c takes index 0 again
    assert ctx.pool.index_of[(c, 0, 2)] == (sw, 0) and ctx.pool.linger == {}
    assert ops == sorted([("MODIFY", "counter"), ("INSERT", "table")] +
                         ([("MODIFY", "meter")] if meters else []))
    m0c = TR.meter_config(0, 3e5, S)
    assert (have.entities.get(m0c.key) == m0c) is meters
    if not meters:
        assert not any(k[0] == "meter" for k in have.entities)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), fcs=st.sampled_from([0, 4]))
def test_every_meter_is_meter_config_of_its_pair_rate(seed, fcs):
    """Over rounds of arrivals, departures and rate changes (many flows at the same rate, as
    the coflows behind others at 0), each meter the context holds is exactly
    ``meter_config(its index, the sum of its pair's flow rates)``: the configs computed once
    per rate within a round are each meter's own."""
    rng = random.Random(seed)
    t = T.leafspine(2, 3, 2)
    nh = len(t.hosts)
    s = TR.CtlSettings(link_mbps=100, min_rate_frac=rng.choice([0.0, 0.01]))
    ctx = TR.MeterContext(t, meters=64, fcs_bytes=fcs)
    live: dict = {}
    nxt = 1
    checked = 0
    for _ in range(8):
        for _ in range(rng.randrange(1, 3)):
            if live and rng.random() < 0.3:
                live.pop(rng.choice(sorted(live)))
            else:
                fl = []
                for _ in range(rng.randrange(1, 7)):
                    a = rng.randrange(nh)
                    fl.append((a, (a + rng.randrange(1, nh)) % nh))
                live[(nxt, 0)] = fl
                nxt += 1
        cids = sorted(live)
        cf, src, dst, rate = [], [], [], []
        for k, c in enumerate(cids):
            for a, b in live[c]:
                cf.append(k)
                src.append(a)
                dst.append(b)
                rate.append(rng.choice([0.0, 0.0, 1e4, 2.5e5, rng.random() * 1e7]))
        ctx.update(cids, np.array(cf), np.array(src), np.array(dst), np.array(rate), None, s)
        pair_rate: dict = {}
        for k, a, b, r in zip(cf, src, dst, rate):
            pair_rate[(cids[k], a, b)] = pair_rate.get((cids[k], a, b), 0.0) + r
        state = ctx.state()
        for c in cids:
            for a, b, sw, idx in ctx.flows(c):
                want = TR.meter_config(idx, pair_rate[(c, a, b)], s, fcs)
                assert state[sw][want.key] == want, (seed, c, a, b)
                checked += 1
    assert checked > 0


def _reference():
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import reference_translate
    return reference_translate


@settings(max_examples=200, deadline=None)
@given(rates=st.lists(st.one_of(st.just(0.0), st.floats(0, 1e11), st.integers(0, 10**10).map(float)),
                      min_size=1, max_size=40),
       floor=st.sampled_from([0.0, 0.01, 0.3]), headroom=st.sampled_from([0.0, 0.1, 0.4]),
       peak=st.sampled_from([1.0, 1.5, 4.0]), rtt=st.floats(1, 1e6), fcs=st.sampled_from([0, 4]),
       mbps=st.sampled_from([1, 10, 100, 1000, 100000]))
def test_meter_params_bit_identical_to_the_scalar_reference(rates, floor, headroom, peak, rtt, fcs, mbps):
    """meter_params (one vector pass over a round's meters) gives, meter by meter, exactly the
    scalar config the translation computed one at a time before (tests/reference_translate.py);
    meter_config (built on it) too."""
    ref = _reference()
    s = TR.CtlSettings(link_mbps=mbps, min_rate_frac=floor, meter_headroom=headroom,
                       meter_peak_bursts=peak, rtt_us=rtt)
    cir, burst, pk = TR.meter_params(np.array(rates), s, fcs)
    for i, r in enumerate(rates):
        want = ref.meter_config_reference(i, r, s, fcs)
        assert (int(cir[i]), int(burst[i]), int(cir[i]), int(pk[i])) == want[2:], (r, want)
        assert TR.meter_config(i, r, s, fcs) == want


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_meter_update_equals_the_per_meter_reference(seed):
    """Over random rounds (arrivals, departures, flows finishing, rates moving, often below the
    floor), the vectorised update leaves every switch's meter components holding what the
    per-meter reference context holds (same pool decisions), and its patches name only
    meters whose config changed (the reference names every meter whose rate moved)."""
    ref = _reference()
    rng = random.Random(seed)
    t = T.leafspine(2, 3, 2)
    nh = len(t.hosts)
    s = TR.CtlSettings(link_mbps=100, min_rate_frac=0.01)
    a, b = TR.MeterContext(t, meters=64), ref.MeterContextReference(t, meters=64)
    live: dict = {}
    nxt = 1
    b_prev: dict = {}
    for _ in range(10):
        for _ in range(rng.randrange(0, 3)):
            if live and rng.random() < 0.3:
                live.pop(rng.choice(sorted(live)))
            else:
                fl = []
                for _ in range(rng.randrange(1, 7)):
                    x = rng.randrange(nh)
                    fl.append((x, (x + rng.randrange(1, nh)) % nh))
                live[(nxt, 0)] = fl
                nxt += 1
        cids = sorted(live)
        cf, src, dst, rate = [], [], [], []
        for k, c in enumerate(cids):
            for x, y in live[c]:
                cf.append(k)
                src.append(x)
                dst.append(y)
                # mostly tiny moves under the floor (the configs stay), some real ones
                rate.append(rng.choice([0.0, rng.random() * 1e3, rng.random() * 1e4, rng.random() * 1e7]))
        args = (cids, np.array(cf, dtype=np.int64), np.array(src, dtype=np.int64),
                np.array(dst, dtype=np.int64), np.array(rate))
        ua, ub = a.update(*args, None, s), b.update(*args, None, s)
        assert a.state() == b.state(), seed
        pa = sum(len(ks) for *_, ks in ua.patches)
        pb_ = sum(len(ks) for *_, ks in ub.patches)
        assert pa <= pb_
        for _comp, sw, ents, ks in ua.patches:   # a patched meter's config really changed
            for k in ks:
                old = b_prev.get(sw, {}).get(k)
                assert old is None or old != ents[k], (seed, k)
        b_prev = {sw: dict(d) for sw, d in b.state().items()}


def test_a_rate_move_below_the_floor_writes_nothing():
    """Hand-checked: two flows at 1 KB/s and 2 KB/s (both under the 1% floor of 100 Mb/s,
    125 KB/s) move to 3 KB/s and 0: their meters keep their configs, no patch; one moving to
    1 MB/s gets a new config and a patch of exactly its key."""
    t = T.leafspine(2, 3, 2)
    s = TR.CtlSettings(link_mbps=100, min_rate_frac=0.01)
    ctx = TR.MeterContext(t, meters=16)
    cids = [(1, 0)]
    cf, src, dst = np.array([0, 0, 0]), np.array([0, 1, 2]), np.array([3, 2, 0])
    u = ctx.update(cids, cf, src, dst, np.array([1e3, 2e3, 5e3]), None, s)
    assert len(u.sets) and not u.patches
    before = ctx.state()
    u = ctx.update(cids, cf, src, dst, np.array([3e3, 0.0, 5e3]), None, s)
    assert u.patches == [] and u.sets == [] and ctx.state() == before
    u = ctx.update(cids, cf, src, dst, np.array([3e3, 0.0, 1e6]), None, s)
    (comp, sw, ents, ks), = u.patches
    assert comp == ("meters", (1, 0)) and len(ks) == 1
    assert ents[ks[0]] == TR.meter_config(ks[0][2], 1e6, s)

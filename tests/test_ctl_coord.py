"""Global D-CLAS coordination (pure): sums of edge counters -> global queues -> the overrides
each edge needs, with hand-checked numbers (K=8, E=10, Q1=10 MB: queue 2 from 10 MB, queue 3
from 100 MB; BMv2 priority = 8 - queue)."""
from coflow.ctl.coord import DclasCoordinator, cf_number
from coflow.params import MB, DclasParams

EDGES = ["e0", "e1", "e2"]
A, B, C, D = (1, 0), (2, 0), (3, 0), (4, 1)
SLOTS = {A: 0, B: 1, C: 2, D: 3}


def coordinator():
    c = DclasCoordinator(DclasParams(K=8))
    c.observe("e0", {0: 6 * MB, 1: 50 * MB, 2: 120 * MB, 3: 4 * MB})
    c.observe("e1", {0: 5 * MB, 1: 60 * MB, 2: 1 * MB, 3: 5 * MB})
    c.observe("e2", {0: 0, 1: 0, 2: 0, 3: 0})
    return c


def test_global_sizes_and_queues():
    r = coordinator().round(1.0, SLOTS, EDGES)
    assert r.sizes == {A: 11 * MB, B: 110 * MB, C: 121 * MB, D: 9 * MB}
    assert r.queues == {A: 2, B: 3, C: 3, D: 1}


def test_overrides_only_where_local_differs():
    r = coordinator().round(1.0, SLOTS, EDGES)
    # A: 11 MB -> queue 2 (prio 6); every edge is locally in queue 1 (6, 5, 0 MB)
    # B: 110 MB -> queue 3 (prio 5); e0 (50 MB) and e1 (60 MB) are locally in queue 2, e2 in 1
    # C: 121 MB -> queue 3; e0 already decides queue 3 locally (120 MB): no override there
    # D: 9 MB: below Q1 everywhere: nothing to coordinate
    assert r.overrides == {"e0": {A: 6, B: 5},
                           "e1": {A: 6, B: 5, C: 5},
                           "e2": {A: 6, B: 5, C: 5}}


def test_threshold_edges_exact():
    c = DclasCoordinator(DclasParams(K=8))
    c.observe("e0", {0: 10 * MB - 1})
    assert c.round(0.0, {A: 0}, ["e0"]).queues[A] == 1
    c.observe("e0", {0: 10 * MB})
    r = c.round(0.01, {A: 0}, ["e0"])
    assert r.queues[A] == 2 and r.overrides == {"e0": {}}  # the edge decides the same itself


def test_switch_restart_keeps_global_size():
    c = coordinator()
    c.round(1.0, SLOTS, EDGES)
    c.switch_reset("e1")  # e1 lost its counters: 5, 60, 1, 5 MB become offsets
    c.observe("e1", {0: 1 * MB, 1: 0, 2: 0, 3: 1 * MB})
    r = c.round(1.01, SLOTS, EDGES)
    assert r.sizes[A] == 12 * MB and r.sizes[B] == 110 * MB and r.sizes[D] == 10 * MB
    assert r.queues[D] == 2  # 4 + 5 + 1 = 10 MB: crossed Q1 with the offset
    # e1's fresh counts are what its data plane decides on: local queue 1 -> overrides there
    assert r.overrides["e1"][B] == 5 and r.overrides["e1"][D] == 6


def test_queues_never_promote():
    c = coordinator()
    assert c.round(1.0, SLOTS, EDGES).queues[B] == 3
    c.slot_reset(1)  # e.g. counters zeroed; the coflow keeps its queue (Aalo never promotes)
    assert c.round(1.01, SLOTS, EDGES).queues[B] == 3


def test_forget_and_reassign():
    c = coordinator()
    c.round(1.0, SLOTS, EDGES)
    c.forget(B)
    c.slot_reset(1)
    r = c.round(1.01, {(9, 0): 1}, EDGES)
    assert r.sizes == {(9, 0): 0} and r.queues == {(9, 0): 1}


def test_seed_queue_from_read_back_override():
    c = DclasCoordinator(DclasParams(K=8))
    c.seed_queue(A, 4)  # an override of priority 4 read back after a controller restart
    c.observe("e0", {0: 1000})
    r = c.round(0.0, {A: 0}, ["e0"])
    assert r.queues[A] == 4 and r.overrides == {"e0": {A: 4}}


def test_cf_number():
    assert cf_number((1, 0)) == 256 and cf_number((7, 255)) == 7 * 256 + 255


def test_round_matches_per_edge_reference_on_random_counts():
    """The vectorised round equals the definition: global size = sum over edges (offsets
    included), an override wherever the edge's own count puts the coflow in another queue."""
    import random
    from coflow.params import hw_priority
    rng = random.Random(3)
    p = DclasParams(K=8, Q1=1000.5)  # fractional thresholds: nbytes >= 1000.5 <=> >= 1001
    c = DclasCoordinator(p)
    edges = ["e0", "e1", "e2"]
    slots = {(i + 1, 0): i for i in range(30)}
    for step in range(20):
        for e in edges:
            c.observe(e, {s: rng.choice([0, 1000, 1001, rng.randrange(10**9)]) for s in slots.values()})
        if step == 7:
            c.switch_reset("e1")
        r = c.round(float(step), slots, edges)
        for cid, s in slots.items():
            size = sum(c.offset.get((e, s), 0) + c.last.get((e, s), 0) for e in edges)
            assert r.sizes[cid] == size
            q = r.queues[cid]
            for e in edges:
                want = q > 1 and p.queue_of(c.last.get((e, s), 0)) != q
                assert (cid in r.overrides[e]) == want
                if want:
                    assert r.overrides[e][cid] == hw_priority(q)


def test_fifo_lm_dense_groups_from_global_sizes():
    """FIFO-LM coordination (hand-checked): registered coflows in CoflowId order, heavy from the
    global size (heavy_bytes = 10 MB). A (ext 1) is heavy (11 MB over two edges although each edge
    saw less than 10 MB), so it joins the next light coflow's group; ids 3 and 4 have finished
    (gaps), which the data plane's own rank (ext - oldest) would count."""
    from coflow.sched import make_scheduler
    sched = make_scheduler("fifo-lm", {"heavy_bytes": str(10 * MB)})
    a, b, c, d = (1, 0), (2, 0), (5, 0), (6, 0)
    co = DclasCoordinator(DclasParams(K=8))
    co.observe("e0", {0: 6 * MB, 1: 1 * MB, 2: 0, 3: 0})
    co.observe("e1", {0: 5 * MB, 1: 0, 2: 12 * MB, 3: 0})
    r = co.fifo_lm_round(1.0, {a: 0, b: 1, c: 2, d: 3}, ["e0", "e1"], sched)
    assert r.sizes == {a: 11 * MB, b: 1 * MB, c: 12 * MB, d: 0}
    # groups: {A (heavy), B}, {C (heavy), D} -> 0, 0, 1, 1 -> priorities 7, 7, 6, 6 on every edge
    assert r.queues == {a: 1, b: 1, c: 2, d: 2}
    assert r.overrides == {"e0": {a: 7, b: 7, c: 6, d: 6}, "e1": {a: 7, b: 7, c: 6, d: 6}}
    # nothing heavy: pure FIFO, one group each; the 8th and later share priority 1
    co2 = DclasCoordinator(DclasParams(K=8))
    cids = [(10 + 2 * i, 0) for i in range(9)]                     # ids with gaps
    r2 = co2.fifo_lm_round(0.0, {x: i for i, x in enumerate(cids)}, ["e0"], sched)
    assert [r2.overrides["e0"][x] for x in cids] == [7, 6, 5, 4, 3, 2, 1, 1, 1]
    assert co2.fifo_lm_round(0.0, {}, ["e0"], sched).overrides == {"e0": {}}

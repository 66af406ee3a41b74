"""The incremental D-CLAS round (:meth:`DclasCoordinator.round_incremental`) against the full one
(:meth:`DclasCoordinator.round`, the reference), on random histories of counter readings,
switch restarts, slot (re)assignments, forgotten coflows, seeded queues and edge sets: after every
round the global sizes, the queues and every edge's overrides are equal, every edge whose
overrides differ from the last round's is named in ``changed``, and every edge not named holds
the very dict it held (what lets the controller skip it without looking)."""
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from coflow.ctl.coord import DclasCoordinator
from coflow.params import MB, DclasParams, hw_priority

EDGES = [f"e{i}" for i in range(6)]


def _nonempty(ovr: dict, edges) -> dict:
    return {e: dict(ovr.get(e, {})) for e in edges if ovr.get(e)}


def _history(seed: int, rounds: int = 40, params: DclasParams | None = None):
    rng = random.Random(seed)
    p = params or DclasParams(K=8, E=10, Q1=10 * MB)
    full, inc = DclasCoordinator(p), DclasCoordinator(p)
    cids = [(i + 1, i % 3) for i in range(10)]
    slots = {c: i for i, c in enumerate(cids[:6])}
    edges = list(EDGES)
    prev_ovr: dict | None = None
    prev_objs: dict = {}
    scale = [MB // 4, 3 * MB, 40 * MB, 700 * MB]
    # registered senders: cid -> frozenset of edges (None for the whole history: unknown, the
    # rule before; or from a random round on)
    unknown_from = rng.choice([0, rounds // 2, rounds + 1, rounds + 1])
    senders = {c: frozenset(rng.sample(EDGES, rng.randint(0, 2))) for c in cids}
    for r in range(rounds):
        for _ in range(rng.randint(0, 4)):
            x = rng.random()
            both = (full, inc)
            if x < 0.55:   # readings of one edge: some slots grow, perhaps a lot
                e = rng.choice(edges)
                counts = {}
                for s in rng.sample(sorted(slots.values()), rng.randint(0, len(slots))):
                    counts[s] = full.local_bytes(e, s) + rng.randint(0, rng.choice(scale))
                for c in both:
                    c.observe(e, counts)
            elif x < 0.62:   # a switch restart: its counts become offsets
                e = rng.choice(edges)
                for c in both:
                    c.switch_reset(e)
            elif x < 0.72:   # a coflow leaves or arrives (slot released / assigned and reset)
                if slots and rng.random() < 0.5:
                    gone = rng.choice(sorted(slots))
                    del slots[gone]
                    for c in both:
                        c.forget(gone)
                else:
                    free = [c for c in cids if c not in slots]
                    if free:
                        new = rng.choice(free)
                        used = set(slots.values())
                        s = min(i for i in range(16) if i not in used)
                        slots[new] = s
                        for c in both:
                            c.slot_reset(s)
            elif x < 0.76 and slots:   # a queue read back from a switch (controller restart)
                cid, q = rng.choice(sorted(slots)), rng.randint(1, 8)
                for c in both:
                    c.seed_queue(cid, q)
            elif x < 0.79:   # an edge joins or leaves
                if len(edges) > 2 and rng.random() < 0.5:
                    drop = rng.choice(edges)   # one edge (a choice per element could drop them all)
                    edges = [e for e in edges if e != drop]
                else:
                    edges = sorted(set(edges) | {rng.choice(EDGES + ["e6", "e7"])})
                prev_ovr = None
            elif x < 0.90:   # a coflow's registered senders change (a flow added, or gone)
                cid = rng.choice(cids)
                e = rng.choice(EDGES + ["e6", "e7"])
                senders[cid] = senders[cid] ^ {e} if rng.random() < 0.7 else frozenset(senders[cid])
        now = float(r)
        snd = None if r >= unknown_from else dict(senders)
        a = full.round(now, dict(slots), edges, snd)
        b = inc.round_incremental(now, dict(slots), edges, snd)
        assert b.sizes == a.sizes
        assert b.queues == a.queues
        assert _nonempty(b.overrides, edges) == _nonempty(a.overrides, edges)
        assert set(b.overrides) >= set(edges)
        if b.changed is not None and prev_ovr is not None:
            named = set(b.changed)
            for e in edges:
                if e not in named:   # skipped: the same object, and nothing changed there
                    assert b.overrides[e] is prev_objs[e]
                    assert dict(b.overrides[e]) == prev_ovr.get(e, {})
        prev_ovr = {e: dict(b.overrides[e]) for e in edges}
        prev_objs = {e: b.overrides[e] for e in edges}
        # every change reaches the caller through a new dict: old ones are never modified
        yield a, b, full, edges, dict(slots), snd


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9))
def test_incremental_round_equals_full_round(seed):
    for _ in _history(seed):
        pass


def _sends(c: DclasCoordinator, e: str, slot: int, cid, snd) -> bool:
    return (c.local_bytes(e, slot) > 0 or c.offset.get((e, slot), 0) > 0
            or snd is None or e in snd.get(cid, ()))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9))
def test_effective_class_is_the_global_queue_wherever_the_coflow_sends(seed):
    """After every round, for every (edge, coflow) where the coflow sends: the data plane's
    class (the override if the edge holds one, else its own decision from its count) is the
    global queue's; where it does not send, no override (the Writes the rule saves)."""
    for a, _, c, edges, slots, snd in _history(seed):
        for cid, s in slots.items():
            want = hw_priority(a.queues[cid])
            for e in edges:
                ovr = a.overrides[e].get(cid)
                if _sends(c, e, s, cid, snd):
                    local = hw_priority(c.p.queue_of(c.local_bytes(e, s)))
                    assert (local if ovr is None else ovr) == want, (e, cid)
                else:
                    assert ovr is None, (e, cid)


def test_history_exercises_demotions_and_skips():
    """The random histories are not vacuous: overrides appear and go, and rounds skip edges."""
    seen_ovr = skipped = changed_some = 0
    spared = registered_only = 0   # (edge, demoted coflow) pairs the rule spares / reaches
    for seed in range(8):
        for a, b, c, edges, slots, snd in _history(seed):
            seen_ovr += sum(len(v) for v in a.overrides.values())
            if b.changed is not None:
                skipped += len(a.overrides) - len(b.changed)
                changed_some += bool(b.changed)
            for cid, s in slots.items():
                if a.queues[cid] > 1 and snd is not None:
                    for e in edges:
                        counted = c.local_bytes(e, s) > 0 or c.offset.get((e, s), 0) > 0
                        spared += not counted and e not in snd.get(cid, ())
                        registered_only += not counted and cid in a.overrides[e]
    assert seen_ovr > 100 and skipped > 100 and changed_some > 10
    assert spared > 50 and registered_only > 20


def test_steady_round_names_no_edge_and_keeps_objects():
    """Hand-checked: A at 11 MB over two edges (queue 2, prio 6, override on both); a round
    with nothing observed names no edge; a reading on e1 that keeps A's queue changes nothing;
    one that moves e1 locally to queue 2 drops e1's override only."""
    c = DclasCoordinator(DclasParams(K=8, E=10, Q1=10 * MB))
    A = (1, 0)
    c.observe("e0", {0: 6 * MB})
    c.observe("e1", {0: 5 * MB})
    r0 = c.round_incremental(0.0, {A: 0}, ["e0", "e1"])
    assert r0.changed is None and r0.queues == {A: 2}
    assert r0.overrides == {"e0": {A: 6}, "e1": {A: 6}}
    e0, e1 = r0.overrides["e0"], r0.overrides["e1"]
    r1 = c.round_incremental(1.0, {A: 0}, ["e0", "e1"])
    assert r1.changed == [] and r1.overrides["e0"] is e0 and r1.overrides["e1"] is e1
    c.observe("e1", {0: 6 * MB})
    r2 = c.round_incremental(2.0, {A: 0}, ["e0", "e1"])
    assert r2.changed == [] and r2.sizes == {A: 12 * MB}
    c.observe("e1", {0: 10 * MB})
    r3 = c.round_incremental(3.0, {A: 0}, ["e0", "e1"])
    assert r3.changed == ["e1"] and r3.overrides["e1"] == {} and r3.overrides["e0"] is e0
    assert e1 == {A: 6}   # the dict handed out before was not modified
    assert np.array_equal(c._inc.sizes, [16 * MB])

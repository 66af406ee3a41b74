"""The incremental desired state (per-component book + diff of the changed keys only) produces
exactly the writes of the from-scratch path (every switch's state rebuilt, full diff), on random
histories of coflow arrivals, departures, rate changes, flows finishing, D-CLAS demotions,
static changes and failed writes."""
import functools
import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coflow import topology as T
from coflow.ctl import model as M
from coflow.ctl import translate as TR
from coflow.ctl.desired import DesiredBook
from coflow.params import DclasParams

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(ROOT, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(ROOT, "build", "coflow.json")

TOPO = T.fattree(4)
ROUTES = T.routes(TOPO)
EDGES = [s.name for s in TOPO.edge_switches()]
SWITCHES = [s.name for s in TOPO.switches]
S = TR.CtlSettings(link_mbps=100)


@functools.lru_cache(maxsize=None)
def static_for(fifo_base):
    return {n: M.SwitchState.of(e).entities for n, e in
            TR.static_state(TOPO, ROUTES, "sebf", DclasParams(K=8), 4, 10**7, fifo_base).items()}


class World:
    """Coflows with flows and rates, slots, per-edge overrides: the inputs of both paths."""

    def __init__(self, rng):
        self.rng = rng
        self.slots = TR.SlotTable(size=16)
        self.flows = {}  # cid -> [(src, dst)]
        self.rates = {}  # cid -> [rate]
        self.ovr = {e: {} for e in EDGES}
        self.fifo_base = 0
        self.next_ext = 1

    def arrive(self):
        cid = (self.next_ext, self.rng.randrange(3))
        self.next_ext += 1
        if self.slots.assign(cid) is None:
            return
        n = self.rng.randrange(1, 14)  # > 8 pairs on an edge sometimes: shared flow slots
        fl = []
        for _ in range(n):
            a = self.rng.randrange(16)
            fl.append((a, (a + self.rng.randrange(1, 16)) % 16))
        self.flows[cid] = fl
        self.rates[cid] = [float(self.rng.choice([0, 1e4, 2e5, 1e6, 3e6])) for _ in fl]

    def depart(self):
        if self.flows:
            cid = self.rng.choice(sorted(self.flows))
            del self.flows[cid], self.rates[cid]
            self.slots.release(cid)
            for o in self.ovr.values():
                o.pop(cid, None)

    def rerate(self):
        for cid in self.rng.sample(sorted(self.flows), min(2, len(self.flows))):
            r = self.rates[cid]
            for i in self.rng.sample(range(len(r)), max(1, len(r) // 3)):
                r[i] = float(self.rng.choice([0, 5e4, 7e5, 2e6]))

    def finish_flow(self):
        cands = [c for c, f in self.flows.items() if len(f) > 1]
        if cands:
            cid = self.rng.choice(sorted(cands))
            i = self.rng.randrange(len(self.flows[cid]))
            del self.flows[cid][i], self.rates[cid][i]

    def demote(self):
        if self.flows:
            cid = self.rng.choice(sorted(self.flows))
            for e in self.rng.sample(EDGES, 3):
                if self.rng.random() < 0.3:
                    self.ovr[e].pop(cid, None)
                else:
                    self.ovr[e][cid] = self.rng.randrange(1, 8)

    def restatic(self):
        self.fifo_base = self.rng.randrange(4)

    def arrays(self):
        cids = sorted(self.flows)
        cf, src, dst, rate = [], [], [], []
        for k, c in enumerate(cids):
            for (a, b), r in zip(self.flows[c], self.rates[c]):
                cf.append(k)
                src.append(a)
                dst.append(b)
                rate.append(r)
        return cids, np.array(cf, dtype=np.int64), np.array(src, dtype=np.int64), \
            np.array(dst, dtype=np.int64), np.array(rate)


def reference(w: World, pool: TR.MeterPool) -> dict:
    """From scratch: every switch's desired state rebuilt (fresh translation caches; the meter
    indices are the pool's: a copy of the incremental path's assignments)."""
    cids, cf, src, dst, rate = w.arrays()
    meters = TR.meter_entities_arrays(TR.MeterContext(TOPO, pool=pool.copy()), cids, cf, src, dst,
                                      rate, w.slots.slot, S)
    static = static_for(w.fifo_base)
    slot_ents = TR.slot_entities(w.slots.slot)
    out = {}
    for sw in SWITCHES:
        st_ = M.SwitchState.of(static[sw].values())
        if sw in EDGES:
            st_.update(slot_ents)
            st_.update(TR.override_entity(c, p) for c, p in w.ovr[sw].items())
        st_.merge_keyed(meters.get(sw, {}))
        out[sw] = st_
    return out


def initial_switch(rng) -> M.SwitchState:
    """What a switch holds when first read back: foreign entries, a default, stale entries."""
    return M.SwitchState.of([
        M.TableEntry("Some.foreign_table", (("x", rng.randrange(9)),), "a", ()),
        TR.config_entity("fair"),
        TR.override_entity((999, 0), 3),
        TR.meter_config(4095, 1e5, S),
    ])


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_incremental_writes_equal_full_rebuild(seed):
    rng = random.Random(seed)
    w = World(rng)
    book = DesiredBook(SWITCHES)
    ctx = TR.MeterContext(TOPO)
    act_inc = {sw: initial_switch(random.Random(seed + i)) for i, sw in enumerate(SWITCHES)}
    act_ref = {sw: st_.copy() for sw, st_ in act_inc.items()}
    in_sync = {sw: False for sw in SWITCHES}
    events = [w.arrive, w.arrive, w.arrive, w.depart, w.rerate, w.rerate, w.finish_flow,
              w.demote, w.demote, w.restatic]
    inc_ops = 0
    last_ovr = {}
    for step in range(25):
        for _ in range(rng.randrange(1, 4)):
            rng.choice(events)()
        # incremental path (as Controller._compute_rates and _desired hand components over)
        cids, cf, src, dst, rate = w.arrays()
        u = ctx.update(cids, cf, src, dst, rate, w.slots.slot, S)
        u.apply(book)
        static = static_for(w.fifo_base)
        slot_ents = {e.key: e for e in TR.slot_entities(w.slots.slot)}
        for sw in SWITCHES:
            book.set("static", sw, static[sw])
        book.set_many("slots", EDGES, slot_ents)  # the same on every edge: compared once
        for i, sw in enumerate(EDGES):
            full = {e.key: e for e in (TR.override_entity(c, p) for c, p in w.ovr[sw].items())}
            if i % 2:
                book.set("overrides", sw, full)
            else:  # only the changes, removals by absence (as the D-CLAS path hands them)
                old = last_ovr.get(sw, {})
                ch = [k for k, v in full.items() if old.get(k) != v] + [k for k in old if k not in full]
                book.set("overrides", sw, {k: full[k] for k in ch if k in full}, changed=ch)
            last_ovr[sw] = full
        ref = reference(w, ctx.pool)
        for sw in SWITCHES:
            assert book.state(sw).entities == ref[sw].entities, (seed, step, sw)
            if in_sync[sw]:
                ops = M.diff_keys(book.state(sw), act_inc[sw], book.dirty[sw])
            else:
                ops = M.diff(book.state(sw), act_inc[sw])
            ops_ref = M.diff(ref[sw], act_ref[sw])
            assert ops == ops_ref, (seed, step, sw)
            if in_sync[sw]:
                inc_ops += len(ops)
            if rng.random() < 0.05:
                # the write failed: the cache is read back (the switch may hold part of it)
                part = M.apply_ops(act_ref[sw], ops_ref[: len(ops_ref) // 2])
                act_inc[sw], act_ref[sw] = part.copy(), part
                in_sync[sw] = False
                continue
            M.apply_ops_inplace(act_inc[sw], ops)
            act_ref[sw] = M.apply_ops(act_ref[sw], ops_ref)
            book.synced(sw)
            in_sync[sw] = True
            assert M.diff(ref[sw], act_ref[sw]) == []
    assert inc_ops > 0  # the incremental path did write


def test_book_rejects_a_key_claimed_twice():
    book = DesiredBook(["s"])
    e = TR.override_entity((1, 0), 3)
    book.set("a", "s", {e.key: e})
    with pytest.raises(ValueError, match="claimed"):
        book.set("b", "s", {e.key: TR.override_entity((1, 0), 4)})


def test_book_dirty_keys_hand_checked():
    book = DesiredBook(["s"])
    a, b = TR.override_entity((1, 0), 3), TR.override_entity((2, 0), 5)
    assert book.set("o", "s", {a.key: a, b.key: b}) == 2
    assert book.dirty["s"] == {a.key, b.key}
    book.synced("s")
    b2 = TR.override_entity((2, 0), 6)
    comp = {a.key: a, b.key: b2}
    assert book.set("o", "s", comp) == 1 and book.dirty["s"] == {b.key}
    assert book.set("o", "s", comp) == 0  # the same mapping again: skipped
    book.set("o", "s", {a.key: a})  # b gone
    assert book.dirty["s"] == {b.key} and b.key not in book.state("s").entities
    have = M.SwitchState.of([a, b2])
    assert M.diff_keys(book.state("s"), have, book.dirty["s"]) == [M.Op("DELETE", b2)]


def test_meter_patches_only_changed_rates():
    """Rates move, flows stay: the translation reports only the meters whose rate changed."""
    ctx = TR.MeterContext(TOPO)
    cids = [(1, 0), (2, 0)]
    cf, src, dst = np.array([0, 0, 1]), np.array([0, 1, 4]), np.array([5, 6, 9])
    slots = {(1, 0): 3, (2, 0): 4}
    u = ctx.update(cids, cf, src, dst, np.array([1e5, 2e5, 3e5]), slots, S)
    assert not u.patches and {c for c, _, _ in u.sets} == {("flow_meter", (1, 0)), ("meters", (1, 0)),
                                                           ("flow_meter", (2, 0)), ("meters", (2, 0))}
    u = ctx.update(cids, cf, src, dst, np.array([1e5, 2.5e5, 3e5]), slots, S)
    assert u.sets == []
    [(comp, sw, ents, keys)] = u.patches
    # each pair its own meter from the pool: (1, 0)'s pairs got e0's indices 0 and 1
    assert comp == ("meters", (1, 0)) and sw == "e0" and keys == [("meter", M.M_FLOW, 1)]
    assert ents[keys[0]] == TR.meter_config(1, 2.5e5, S)
    u = ctx.update(cids[1:], cf[2:] - 1, src[2:], dst[2:], np.array([3e5]), slots, S)
    assert {(c, sw, len(e)) for c, sw, e in u.sets} == {(("flow_meter", (1, 0)), "e0", 0),
                                                       (("meters", (1, 0)), "e0", 0)}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pool=st.sampled_from([2, 3, 5, 4096]))
def test_meter_read_set_kept_incrementally_equals_the_rebuild(seed, pool):
    """The closed loop's read set (switch -> index -> (cid, src, dst, flow_meter entry)), kept
    by the meter context as coflows are built and dropped, equals the one rebuilt from the pool
    after every round, on random histories of arrivals, departures, flows that change or
    finish, and pools small enough to leave coflows unmetered; its versions move whenever a
    switch's set changes."""
    rng = random.Random(seed)
    ctx = TR.MeterContext(TOPO, meters=pool)
    hosts = len(ctx.names)
    live: dict = {}
    nxt = 1
    saw = {"unmetered": 0, "nonempty": 0}
    if pool <= 3:   # a coflow with more pairs at one edge than its pool: never metered
        live[(nxt, 0)] = [(0, b) for b in range(1, 5)]
        nxt += 1
    for _step in range(15):
        for _ in range(0 if _step == 0 and pool <= 3 else rng.randrange(1, 4)):
            r = rng.random()
            if r < 0.4 or not live:
                live[(nxt, 0)] = [(a, (a + rng.randrange(1, hosts)) % hosts)
                                  for a in rng.sample(range(hosts), rng.randrange(1, 5))]
                nxt += 1
            elif r < 0.65:
                del live[rng.choice(sorted(live))]
            else:   # a flow finishes or a new one joins the coflow
                c = rng.choice(sorted(live))
                if len(live[c]) > 1 and rng.random() < 0.5:
                    live[c].pop(rng.randrange(len(live[c])))
                else:
                    a = rng.randrange(hosts)
                    live[c].append((a, (a + rng.randrange(1, hosts)) % hosts))
        cids = sorted(live)
        cf = [k for k, c in enumerate(cids) for _ in live[c]]
        src = [a for c in cids for a, _ in live[c]]
        dst = [b for c in cids for _, b in live[c]]
        before = {sw: (ctx.read_version.get(sw, 0), dict(d)) for sw, d in ctx.read_set.items()}
        ctx.update(cids, np.array(cf, dtype=np.int64), np.array(src, dtype=np.int64),
                   np.array(dst, dtype=np.int64), np.full(len(cf), 1e5), None, S)
        inc = {sw: d for sw, d in ctx.read_set.items() if d}
        assert inc == ctx.read_set_rebuilt(), (seed, _step)
        for sw, d in inc.items():
            assert ctx.read_indices(sw) == tuple(sorted(d))
        for sw, (v, d) in before.items():   # a switch whose set changed has a new version
            if ctx.read_set.get(sw, {}) != d:
                assert ctx.read_version[sw] != v, (seed, _step, sw)
        saw["unmetered"] += bool(ctx.unmetered)
        saw["nonempty"] += bool(inc)
    assert saw["nonempty"] > 0
    if pool <= 3:
        assert saw["unmetered"] > 0, saw


needs_build = pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                                 reason="build/coflow.p4info.txt missing: run `make p4` "
                                        "(the Controller needs the P4Info for its codec)")


@needs_build
@pytest.mark.parametrize("mode", ["sebf", "dclas", "dclas-inc", "sincronia"])
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_controller_round_writes_equal_full_rebuild(mode, seed):
    """The Controller's own code (registry events -> _refresh_coflows -> rates or D-CLAS
    coordination -> _desired -> the write phase's diff) against the from-scratch path fed the
    same inputs (its own scheduler instance, fresh translation caches). ``dclas-inc``: the
    coordinator's incremental round, as the daemon runs it (``_desired`` visits only the edges
    it names), against the full round of a copy of the coordinator; edges observed at random."""
    import copy

    from coflow.api.registry import CoflowRegistry
    from coflow.ctl.daemon import Controller
    from coflow.ctl.rates import plan
    from coflow.sched import make_scheduler
    rng = random.Random(seed)
    inc = mode == "dclas-inc"
    mode = "dclas" if inc else mode
    t = T.leafspine(2, 2, 3)
    hosts = [h.name for h in t.hosts]
    reg = CoflowRegistry(hosts)
    c = Controller(t, mode, P4INFO, BMV2_JSON, {s.name: "127.0.0.1:1" for s in t.switches},
                   registry=reg, settings={"link_mbps": "10", "Q1": "1000"} if mode == "dclas"
                   else {"link_mbps": "10", "class_q1_bytes": "150000"})
    try:
        c._unsubscribe = reg.subscribe(c._on_registry)
        ref_sched = make_scheduler("dclas" if mode == "dclas" else mode)
        ref_mem: dict = {}
        ref_prev: dict = {}    # the order's classes of the last round (no promotion)
        static = {n: M.SwitchState.of(e) for n, e in TR.static_state(
            t, c.routes, mode, c.dclas_params, c.ctl.fair_prio, c.heavy_bytes, 0).items()}
        act = {sw: M.SwitchState() for sw in c.agents}
        act_ref = {sw: M.SwitchState() for sw in c.agents}
        first = {sw: True for sw in c.agents}
        written = {}
        read_sets = 0
        for step in range(12):
            for _ in range(rng.randrange(1, 3)):
                live = reg.list()
                r = rng.random()
                if r < 0.35 or not live:
                    pairs = rng.sample([(a, b) for a in hosts for b in hosts if a != b],
                                       rng.randrange(1, 6))
                    reg.register([(a, b, rng.choice([None, 10**5, 10**6])) for a, b in pairs])
                elif r < 0.5:
                    reg.unregister(rng.choice(live).cid)
                else:
                    rec = rng.choice(live)
                    reg.update(rec.cid, sent={i: rng.randrange(0, 2 * 10**5) for i in
                                              rng.sample(range(len(rec.flows)), 1)})
            now = 1000.0 + step
            with c._mu:
                if c._registry_dirty:
                    c._refresh_coflows()
                if mode == "dclas":
                    for e in c.edges:
                        if not inc or rng.random() < 0.6:
                            c.coord.observe(e, {s: rng.choice([0, 500, 5000, 10**6])
                                                for s in c.slots.slot.values()})
                    snd = c._senders    # the registry's senders, as the daemon's round passes them
                    if inc:
                        overrides = copy.deepcopy(c.coord).round(now, dict(c.slots.slot), c.edges,
                                                                 snd).overrides
                        res = c.coord.round_incremental(now, dict(c.slots.slot), c.edges, snd)
                        c._overrides, c._ovr_changed = res.overrides, res.changed
                    else:
                        res = c.coord.round(now, dict(c.slots.slot), c.edges, snd)
                        c._overrides = res.overrides
                        overrides = res.overrides
                else:
                    c._compute_rates(now)
                    # the closed loop's read set, kept incrementally, is the one rebuilt from
                    # the pool: the same pairs, indices and entries on every switch
                    ctx = c._meter_ctx
                    inc = {sw: d for sw, d in ctx.read_set.items() if d}
                    assert inc == ctx.read_set_rebuilt(), (seed, step)
                    for sw in inc:
                        assert ctx.read_indices(sw) == tuple(sorted(inc[sw])), (seed, step, sw)
                    read_sets += bool(inc)
                desired = c._desired()
            if mode != "dclas":
                p = plan(mode, ref_sched, c._records, c.host_port, c.ctl.link_payload_Bps, now,
                         ref_mem, c.ctl.unknown_size_bytes, None, prev_prio=ref_prev,
                         class_q1_bytes=c.ctl.class_q1_bytes)
                ref_prev = p.order_prio or {}
                ref_ctx = TR.MeterContext(t, pool=c._meter_ctx.pool.copy())
                meters = TR.meter_entities_arrays(ref_ctx, p.cids, p.cf, p.src, p.dst,
                                                  p.rates, c.slots.slot, c.ctl)
                if mode == "sincronia":   # no rate control: flow_meter entries only (counting)
                    meters = {sw: {k: e for k, e in d.items() if k[0] != "meter"}
                              for sw, d in meters.items()}
                # a coflow the pool could not meter entirely gets no override (fair class)
                overrides = {e: {k: v for k, v in p.prio.items() if k not in ref_ctx.unmetered}
                             for e in c.edges}
            else:
                meters = {}
            for sw in c.agents:
                ref = static[sw].copy()
                if sw in c.edges:
                    ref.update(TR.slot_entities(c.slots.slot))
                    ref.update(TR.override_entity(k, v) for k, v in overrides[sw].items())
                ref.merge_keyed(meters.get(sw, {}))
                assert desired[sw].entities == ref.entities, (seed, step, sw)
                ops = M.diff(desired[sw], act[sw]) if first[sw] else \
                    M.diff_keys(desired[sw], act[sw], c.book.dirty[sw])
                ops_ref = M.diff(ref, act_ref[sw])
                assert ops == ops_ref, (seed, step, sw)
                if not first[sw]:
                    for op in ops:
                        k = op.entity.key
                        kind = k[1] if k[0] == "table" else k[0]
                        written[kind] = written.get(kind, 0) + 1
                M.apply_ops_inplace(act[sw], ops)
                act_ref[sw] = M.apply_ops(act_ref[sw], ops_ref)
                c.book.synced(sw)
                first[sw] = False
        # not vacuous: later rounds rewrote overrides, and meters in the rate mode
        assert written.get(M.T_OVERRIDE, 0) > 0 and written.get(M.T_SLOT, 0) > 0, written
        if mode == "sebf":
            assert written.get("meter", 0) > 0 and written.get(M.T_FLOW_METER, 0) > 0, written
        if mode != "dclas":
            assert read_sets > 0
        if mode == "sincronia":
            assert written.get("meter", 0) == 0 and written.get(M.T_FLOW_METER, 0) > 0, written
    finally:
        c.stop()
        reg.close()


def test_book_changed_keys_with_removals_by_absence():
    book = DesiredBook(["s"])
    a, b = TR.override_entity((1, 0), 3), TR.override_entity((2, 0), 5)
    book.set("o", "s", {a.key: a}, changed=[a.key])  # a first call may name its keys too
    book.set("o", "s", {b.key: b}, changed=[b.key, TR.override_key((1, 0))])
    assert book.state("s").entities == {b.key: b} and book.dirty["s"] == {a.key, b.key}
    assert TR.override_key((2, 0)) == b.key

"""Runtime dynamics ([AALO] section 5): multi-wave coflows, restarted tasks and DAGs of coflows.

The trace syntax is in :mod:`coflow.trace` (``wave=N``, ``restart=1``, ``after=IDS``,
``pipe=IDS`` after a line's reducers; traces/README.md).  Every trace line is one *unit* of the
workload the simulator runs: a coflow's wave, or a whole single-wave coflow.  This module holds

- :func:`build_dynamics`: a trace's release rules as arrays (:class:`Dynamics`), with the
  CoflowIds the coflow API would give (``next_cid`` / ``CidAllocator`` of
  :mod:`coflow.api.registry`: a new DAG gets ``next.0``, a child ``parent.(1 + max sibling)``);
- :class:`Releaser`: the release state machine every driver uses (the simulator, the
  emulation's driver), told when units finish, saying which units start and when;
- :func:`dynamic_records` / :func:`critical_path`: per-coflow and per-job report records
  (job completion time, JCT, beside CCT);
- the generators: :func:`split_waves` (Aalo's multi-wave workloads, Table 4's wave mixes) and
  :func:`tpcds_dags` (a seeded TPC-DS-like query DAG workload standing in for the Cloudera
  benchmark's 20 queries).

Semantics (one precise reading of [AALO] 5.1-5.2, used by every driver):

- A coflow *starts* when its wave 1 is released; it is *complete* when its last wave's flows
  have all finished and every Finishes-Before parent is complete.
- Wave 1 of a coflow is released at the latest of: its line's arrival, the completion of every
  Starts-After parent (barrier), the start of every Finishes-Before parent (pipelined: the
  child "can coexist with" the parent).
- Wave N >= 2 is released when wave N-1's flows have all finished, not before its line's
  arrival.  It keeps the coflow's CoflowId: schedulers see one coflow whose bytes sent keep
  growing across waves ("how much a coflow has sent always increases", [AALO] 5.2), whose
  arrival is the coflow's, and whose flows are the current wave's.  Clairvoyant schedulers see a
  wave's sizes only once it is released, as Varys would (it is registered then: ``AddFlows``).
  A restarted task (``restart=1``) is a wave ("treated like a new wave in a coflow").
- A DAG child is shown to the schedulers when it is released (registered), with the CoflowId
  rule above and its release time as arrival (the controller's ``registered_at``).
- Finishes-Before: the child's flows may finish before the parent's; the child is complete
  only when its parents are (its CCT runs to the later of the two), and its own Starts-After
  children wait for that.
- CCT of a coflow = completion - start (waves included); a job is a connected DAG (one
  external CoflowId), or a coflow on its own; JCT = the completion of its last coflow - the
  arrival of its first.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from .api.registry import CidAllocator
from .dataplane.constants import CoflowId
from .params import MB
from .tracemodel import NARROW_FLOWS, SHORT_BYTES, CoflowSpec, Trace, Workload

INF = float("inf")


@dataclass
class Dynamics:
    """A workload's release rules.  Units are the trace's lines (the workload's coflows);
    coflows (0..N-1) are the trace's distinct ids in order of their first line."""

    coflow: np.ndarray          # unit -> coflow
    prev_unit: np.ndarray       # unit -> the previous wave's unit, -1 for wave 1
    next_unit: np.ndarray       # unit -> the next wave's unit, -1 for the last wave
    first_unit: np.ndarray      # coflow -> its wave-1 unit
    restart: np.ndarray         # unit -> a restarted-task wave
    ids: np.ndarray             # coflow -> trace id
    after: list[tuple[int, ...]]    # coflow -> Starts-After parents (coflows)
    pipe: list[tuple[int, ...]]     # coflow -> Finishes-Before parents (coflows)
    cid: list[CoflowId]         # coflow -> CoflowId the API would give
    job: np.ndarray             # coflow -> job (its external CoflowId)
    order: np.ndarray           # coflows in registration order (topological, file order on ties)
    view_id: np.ndarray         # unit -> the id schedulers see (cf_id)

    @property
    def ncoflows(self) -> int:
        return len(self.ids)

    @property
    def has_edges(self) -> bool:
        return any(self.after) or any(self.pipe)

    def units_of(self, c: int) -> list[int]:
        u, out = int(self.first_unit[c]), []
        while u >= 0:
            out.append(u)
            u = int(self.next_unit[u])
        return out

    def children(self) -> tuple[list[list[int]], list[list[int]]]:
        ca: list[list[int]] = [[] for _ in range(self.ncoflows)]
        cp: list[list[int]] = [[] for _ in range(self.ncoflows)]
        for c in range(self.ncoflows):
            for p in self.after[c]:
                ca[p].append(c)
            for p in self.pipe[c]:
                cp[p].append(c)
        return ca, cp


def build_dynamics(specs: list[CoflowSpec]) -> Dynamics:
    """The release rules of a parsed trace's lines (validated by :func:`coflow.trace.parse_trace`)."""
    U = len(specs)
    index: dict[int, int] = {}
    first: list[int] = []
    coflow = np.zeros(U, dtype=np.int64)
    prev = np.full(U, -1, dtype=np.int64)
    nxt = np.full(U, -1, dtype=np.int64)
    last: dict[int, int] = {}
    for u, s in enumerate(specs):
        if s.wave == 1:
            index[s.id] = len(first)
            first.append(u)
        else:
            p = last[s.id]
            prev[u], nxt[p] = p, u
        coflow[u] = index[s.id]
        last[s.id] = u
    N = len(first)
    after = [tuple(index[p] for p in specs[first[c]].after) for c in range(N)]
    pipe = [tuple(index[p] for p in specs[first[c]].pipe) for c in range(N)]
    # registration order: topological (parents first), file order on ties
    indeg = [len(after[c]) + len(pipe[c]) for c in range(N)]
    kids: list[list[int]] = [[] for _ in range(N)]
    for c in range(N):
        for p in after[c] + pipe[c]:
            kids[p].append(c)
    ready = [c for c in range(N) if indeg[c] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        c = heapq.heappop(ready)
        order.append(c)
        for k in kids[c]:
            indeg[k] -= 1
            if indeg[k] == 0:
                heapq.heappush(ready, k)
    if len(order) != N:  # parse_trace rejects cycles; a hand-built trace may not have been parsed
        raise ValueError("the coflows' dependencies have a cycle")
    # jobs: connected components of the DAG edges
    comp = list(range(N))

    def find(x: int) -> int:
        while comp[x] != x:
            comp[x] = comp[comp[x]]
            x = comp[x]
        return x
    for c in range(N):
        for p in after[c] + pipe[c]:
            comp[find(c)] = find(p)
    alloc = CidAllocator()
    cid: list[CoflowId] = [CoflowId(0)] * N
    ext_of: dict[int, int] = {}
    for c in order:
        parents = after[c] + pipe[c]
        if parents:
            cid[c] = alloc.register(parent=cid[parents[0]])
        elif find(c) in ext_of:
            cid[c] = alloc.register(external=ext_of[find(c)])
        else:
            cid[c] = alloc.register()
        ext_of.setdefault(find(c), cid[c].external)
    ids = np.array([specs[first[c]].id for c in range(N)], dtype=np.int64)
    dyn = Dynamics(coflow=coflow, prev_unit=prev, next_unit=nxt, first_unit=np.array(first, dtype=np.int64),
                   restart=np.array([s.restart for s in specs], dtype=bool), ids=ids, after=after, pipe=pipe,
                   cid=cid, job=np.array([x.external for x in cid], dtype=np.int64),
                   order=np.array(order, dtype=np.int64), view_id=np.zeros(U, dtype=np.int64))
    # schedulers see the trace ids (as for plain traces) unless the trace has DAG edges; then the
    # packed CoflowId (external << 8 | internal, as the controller builds its views), so that
    # ties break by external, then internal id ([AALO] 5.1)
    packed = np.array([(x.external << 8) | x.internal for x in cid], dtype=np.int64)
    dyn.view_id = (packed if dyn.has_edges else ids)[coflow]
    return dyn


class Releaser:
    """The release state machine of one run (module doc).  ``arrival``: each unit's line
    arrival (s).  ``empty``: units without bytes (done as soon as they are released).

    A driver calls :meth:`due` at time ``t`` for the units to start now (in release order),
    :meth:`done` when units' flows have all finished, and reads :attr:`next_time` for the next
    timed release.  ``start`` / ``complete`` hold each coflow's start and completion times
    (nan until then); ``released`` each unit's release time."""

    def __init__(self, dyn: Dynamics, arrival: np.ndarray, empty: np.ndarray):
        self.dyn = dyn
        self.arrival = np.asarray(arrival, dtype=float)
        self.empty = np.asarray(empty, dtype=bool)
        N, U = dyn.ncoflows, len(dyn.coflow)
        self.kids_after, self.kids_pipe = dyn.children()
        self.wait = [len(dyn.after[c]) + len(dyn.pipe[c]) for c in range(N)]
        self.hold = [1 + len(dyn.pipe[c]) for c in range(N)]
        self.start = np.full(N, np.nan)
        self.complete = np.full(N, np.nan)
        self.released = np.full(U, np.nan)
        self.unit_done = np.full(U, np.nan)
        #: the arrival schedulers see per unit (a wave: its coflow's start; else its release)
        self.view_arrival = np.zeros(U)
        self._heap: list[tuple[float, int, int]] = []
        self._seq = 0
        for c in range(N):
            if self.wait[c] == 0:
                u = int(dyn.first_unit[c])
                self._push(float(self.arrival[u]), u)

    def _push(self, t: float, u: int) -> None:
        heapq.heappush(self._heap, (t, self._seq, u))
        self._seq += 1

    @property
    def next_time(self) -> float:
        return self._heap[0][0] if self._heap else INF

    @property
    def pending(self) -> bool:
        return bool(self._heap)

    def due(self, t: float, cf_sent: np.ndarray | None = None) -> list[int]:
        """Release every unit due by ``t``; returns those with bytes, in release order.
        ``cf_sent`` (per unit): a wave starts from its coflow's bytes sent so far."""
        out = []
        d = self.dyn
        while self._heap and self._heap[0][0] <= t + 1e-12:
            u = heapq.heappop(self._heap)[2]
            c = int(d.coflow[u])
            self.released[u] = t
            p = int(d.prev_unit[u])
            if p < 0:
                self.start[c] = t
                self.view_arrival[u] = t
                for ch in self.kids_pipe[c]:
                    self._unblock(ch, t)
            else:
                self.view_arrival[u] = self.view_arrival[p]
                if cf_sent is not None:
                    cf_sent[u] = cf_sent[p]
            if self.empty[u]:
                self.done([u], t)
            else:
                out.append(u)
        return out

    def _unblock(self, c: int, t: float) -> None:
        self.wait[c] -= 1
        if self.wait[c] == 0:
            u = int(self.dyn.first_unit[c])
            self._push(max(float(self.arrival[u]), t), u)

    def done(self, units, t: float) -> None:
        """Units whose flows have all finished at ``t``."""
        d = self.dyn
        for u in units:
            u = int(u)
            self.unit_done[u] = t
            n = int(d.next_unit[u])
            if n >= 0:
                self._push(max(float(self.arrival[n]), t), n)
            else:
                self._hold(int(d.coflow[u]), t)

    def _hold(self, c: int, t: float) -> None:
        self.hold[c] -= 1
        if self.hold[c] == 0:
            self.complete[c] = t
            for ch in self.kids_after[c]:
                self._unblock(ch, t)
            for ch in self.kids_pipe[c]:
                self._hold(ch, t)


# Records: CCT and JCT ---------------------------------------------------------------------------

def critical_path(dyn: Dynamics, arrival: np.ndarray, iso: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower bounds under any schedule, per coflow: (start, completion), from each unit's line
    arrival and isolation time ``iso`` (its bytes at full port rate, alone): waves one after the
    other, Starts-After parents complete before the start, Finishes-Before parents started before
    the start and complete before the completion.  A job's JCT is at least
    max(completion bound) - its arrival: the DAG's critical path of isolation times."""
    N = dyn.ncoflows
    s_lb, f_lb = np.zeros(N), np.zeros(N)
    for c in dyn.order.tolist():
        us = dyn.units_of(c)
        s = float(arrival[us[0]])
        for p in dyn.after[c]:
            s = max(s, f_lb[p])
        for p in dyn.pipe[c]:
            s = max(s, s_lb[p])
        e = s + float(iso[us[0]])
        for u in us[1:]:
            e = max(e, float(arrival[u])) + float(iso[u])
        for p in dyn.pipe[c]:
            e = max(e, f_lb[p])
        s_lb[c], f_lb[c] = s, e
    return s_lb, f_lb


def dynamic_records(wl: Workload, admitted: np.ndarray, start: np.ndarray, complete: np.ndarray,
                    iso: np.ndarray) -> tuple[list[dict], list[dict]]:
    """(coflow records, job records) in the report schema for a dynamic workload: one coflow
    record per trace coflow (its waves merged) with the keys of plain records plus
    ``coflow_id``, ``job``, ``waves``, ``restarted_bytes``, ``after``, ``pipe``; one job record
    per job: ``job``, ``coflows``, ``ids``, ``arrival_s``, ``finish_s``, ``jct_s``,
    ``critical_path_s``, ``levels`` (the DAG's depth, 1 for a lone coflow)."""
    dyn: Dynamics = wl.dynamics  # type: ignore[assignment]
    cof = wl.coflow_of_flow()
    ubytes = np.bincount(cof, wl.size, wl.ncoflows)
    ulen = np.zeros(wl.ncoflows)
    if wl.nflows:
        np.maximum.at(ulen, cof, wl.size)
    uwidth = np.diff(wl.flow_lo)
    s_lb, f_lb = critical_path(dyn, wl.arrival, iso)
    recs = []
    for c in range(dyn.ncoflows):
        us = dyn.units_of(c)
        b = float(ubytes[us].sum())
        length = float(ulen[us].max())
        width = int(uwidth[us].sum())
        ok = bool(admitted[us].all()) and np.isfinite(complete[c])
        arr = float(start[c]) if np.isfinite(start[c]) else float(wl.arrival[us[0]])
        short, narrow = length < SHORT_BYTES, width <= NARROW_FLOWS
        recs.append({
            "id": int(dyn.ids[c]), "arrival_s": arr,
            "finish_s": float(complete[c]) if ok else None,
            "cct_s": float(complete[c] - arr) if ok else None,
            "isolation_s": float(iso[us].sum()), "bytes": b, "width": width, "length_bytes": length,
            "bin": ("S" if short else "L") + ("N" if narrow else "W"),
            "admitted": bool(admitted[us].all()),
            "coflow_id": str(dyn.cid[c]), "job": int(dyn.job[c]), "waves": len(us),
            "restarted_bytes": float(sum(ubytes[u] for u in us if dyn.restart[u])),
            "after": [int(dyn.ids[p]) for p in dyn.after[c]], "pipe": [int(dyn.ids[p]) for p in dyn.pipe[c]],
        })
    jobs: dict[int, list[int]] = {}
    depth = np.zeros(dyn.ncoflows, dtype=np.int64)
    for c in dyn.order.tolist():
        jobs.setdefault(int(dyn.job[c]), []).append(c)
        depth[c] = 1 + max((int(depth[p]) for p in dyn.after[c] + dyn.pipe[c]), default=0)
    out = []
    for j, cs in sorted(jobs.items()):
        arr = min(float(wl.arrival[dyn.first_unit[c]]) for c in cs if not dyn.after[c] and not dyn.pipe[c])
        ok = all(recs[c]["finish_s"] is not None for c in cs)
        fin = max(float(complete[c]) for c in cs) if ok else None
        out.append({"job": j, "coflows": len(cs), "ids": [int(dyn.ids[c]) for c in cs], "arrival_s": arr,
                    "finish_s": fin, "jct_s": fin - arr if fin is not None else None,
                    "critical_path_s": float(max(f_lb[c] for c in cs) - arr),
                    "levels": int(max(depth[c] for c in cs))})
    return recs, out


def plain_jobs(coflows: list[dict]) -> list[dict]:
    """Job records of a trace without dynamics: one job per coflow, JCT = CCT."""
    return [{"job": c["id"], "coflows": 1, "ids": [c["id"]], "arrival_s": c["arrival_s"],
             "finish_s": c["finish_s"], "jct_s": c["cct_s"], "critical_path_s": c["isolation_s"], "levels": 1}
            for c in coflows]


# Generators ------------------------------------------------------------------------------------

#: [AALO] Table 4: fraction of coflows with 1, 2, 3, 4 waves for max waves = 1, 2, 4.
TABLE4_MIXES: dict[int, tuple[float, ...]] = {1: (1.0,), 2: (0.90, 0.10), 4: (0.81, 0.09, 0.04, 0.06)}


def _largest_remainder(fracs: tuple[float, ...], n: int) -> list[int]:
    raw = [f * n for f in fracs]
    cnt = [int(math.floor(x)) for x in raw]
    for i in sorted(range(len(raw)), key=lambda i: cnt[i] - raw[i])[: n - sum(cnt)]:
        cnt[i] += 1
    return cnt


def split_waves(tr: Trace, max_waves: int | None = None, mix: tuple[float, ...] | None = None) -> Trace:
    """Aalo's multi-wave workload ([AALO] 7.3): each coflow's mappers (its senders) split into
    waves while all its reducers stay active; wave w carries its mappers' share of every
    reducer's bytes, so under the ``split`` convention the waves' flows are exactly the coflow's
    flows, only released one wave after another.  Deterministic.

    ``max_waves=K``: the paper's knob, a cap on concurrent senders per wave, S = ceil(largest
    mapper count / K); a coflow with M mappers gets ceil(M / S) waves (at most K).
    ``mix=(f1, f2, ...)``: fractions of coflows with 1, 2, ... waves (e.g. Table 4's
    ``TABLE4_MIXES[4]``), met exactly (largest remainders): the coflows with the most mappers
    get the most waves; a coflow never has more waves than mappers."""
    if tr.dynamic:
        raise ValueError("split_waves: the trace already has waves or DAG edges")
    if (max_waves is None) == (mix is None):
        raise ValueError("split_waves: give exactly one of max_waves and mix")
    C = len(tr.coflows)
    if max_waves is not None:
        if not isinstance(max_waves, int) or max_waves < 1:
            raise ValueError(f"max_waves must be an integer >= 1, got {max_waves!r}")
        S = math.ceil(max((len(c.mappers) for c in tr.coflows), default=1) / max_waves)
        nw = [math.ceil(len(c.mappers) / S) for c in tr.coflows]
    else:
        fr = tuple(float(x) for x in mix)  # type: ignore[union-attr]
        if not fr or any(not (f >= 0) for f in fr) or abs(sum(fr) - 1) > 1e-3:
            raise ValueError(f"mix must be fractions >= 0 summing to 1, got {mix!r}")
        cnt = _largest_remainder(fr, C)
        rank = sorted(range(C), key=lambda k: (-len(tr.coflows[k].mappers), k))
        nw = [1] * C
        pos = 0
        for w in range(len(fr), 0, -1):
            for k in rank[pos: pos + cnt[w - 1]]:
                nw[k] = min(w, len(tr.coflows[k].mappers))
            pos += cnt[w - 1]
    out = []
    for c, W in zip(tr.coflows, nw):
        M = len(c.mappers)
        for w, chunk in enumerate(np.array_split(np.asarray(c.mappers), W), start=1):
            share = len(chunk) / M
            out.append(CoflowSpec(c.id, c.arrival_ms, chunk.tolist(), [(p, mb * share) for p, mb in c.reducers],
                                  wave=w))
    return Trace(tr.ports, out, tr.path)


def wave_mix(tr: Trace) -> list[float]:
    """Fraction of coflows with 1, 2, ... waves (Table 4's rows)."""
    n: dict[int, int] = {}
    for c in tr.coflows:
        n[c.id] = max(n.get(c.id, 0), c.wave)
    top = max(n.values(), default=1)
    return [sum(1 for v in n.values() if v == w) / max(1, len(n)) for w in range(1, top + 1)]


def tpcds_dags(queries: int = 20, ports: int = 16, seed: int = 1, load: float = 0.5,
               barrier_fraction: float = 0.5, capacity_bps: float = 1e9) -> Trace:
    """A seeded TPC-DS-like workload of query DAGs, standing in for the Cloudera benchmark's 20
    TPC-DS queries of [AALO] 7.4 (not available here).

    Each query is a star join as TPC-DS's reporting queries are (e.g. query 42: ``store_sales``
    joined with ``date_dim`` and ``item``, grouped and sorted; [AALO] Fig 4), compiled into
    shuffle stages the way Shark / Spark plans them; every shuffle is one coflow:

    - the fact-table scan's shuffle F (a DAG root): wide (P/2..P mappers and reducers), heavy
      tailed, 100 MB x Pareto(1.2), at most 20 GB;
    - J = 1..4 joins (probabilities 0.3, 0.3, 0.25, 0.15); join j reads the previous stage's
      output (F, then join j-1's) and a dimension table's shuffle D_j (a root: 1..3 mappers,
      1..50 MB); its output, a fraction U(0.05, 0.5) of its inputs, is shuffled to the next stage
      as coflow J_j, from the previous stage's reducers to P/4..P reducers;
    - the aggregation's shuffle A (group-by + order-by): U(0.01, 0.1) of the last join's output
      to 1..4 reducers.

    Edges: J_j and A depend on the coflows their stage reads; each edge is Starts-After (a
    barrier: sort-merge or hash build needs all its input) with probability ``barrier_fraction``,
    else Finishes-Before (pipelined).  So every DAG has J + 2 levels.  Queries arrive as a
    Poisson process whose rate puts the offered load (bytes over the fabric's capacity) at
    ``load``; a query's coflows carry its arrival.  Ids 1, 2, ... query after query, parents
    first."""
    if queries < 1 or ports < 2:
        raise ValueError("queries must be >= 1 and ports >= 2")
    if not 0 <= barrier_fraction <= 1:
        raise ValueError("barrier_fraction must be in [0, 1]")
    if not load > 0:
        raise ValueError("load must be > 0")
    rng = np.random.default_rng(seed)
    P = ports

    def ports_(lo: int, hi: int) -> list[int]:
        n = int(rng.integers(max(1, lo), max(1, hi) + 1))
        return sorted(rng.choice(P, size=min(n, P), replace=False).tolist())

    def spread(total_mb: float, reducers: list[int]) -> list[tuple[int, float]]:
        w = rng.uniform(0.5, 1.5, size=len(reducers))
        mbs = np.maximum(np.round(total_mb * w / w.sum(), 3), 0.001)
        return list(zip(reducers, mbs.tolist()))

    qs = []
    total = 0.0
    for _ in range(queries):
        J = int(rng.choice([1, 2, 3, 4], p=[0.3, 0.3, 0.25, 0.15]))
        lines: list[tuple[str, list[int], list[tuple[int, float]], list[str]]] = []  # key, mappers, reducers, parents
        f_mb = min(100.0 * (1 + rng.pareto(1.2)), 20000.0)
        f_red = ports_(P // 2, P)
        lines.append(("F", ports_(P // 2, P), spread(f_mb, f_red), []))
        prev, prev_red, prev_mb = "F", f_red, f_mb
        for j in range(1, J + 1):
            d_mb = float(rng.uniform(1.0, 50.0))
            lines.append((f"D{j}", ports_(1, 3), spread(d_mb, prev_red), []))
            out_mb = float(rng.uniform(0.05, 0.5)) * (prev_mb + d_mb)
            red = ports_(P // 4, P)
            lines.append((f"J{j}", list(prev_red), spread(out_mb, red), [prev, f"D{j}"]))
            prev, prev_red, prev_mb = f"J{j}", red, out_mb
        a_mb = float(rng.uniform(0.01, 0.1)) * prev_mb
        lines.append(("A", list(prev_red), spread(a_mb, ports_(1, 4)), [prev]))
        qs.append(lines)
        total += sum(mb for ln in lines for _, mb in ln[2]) * MB
    duration = total / (load * capacity_bps / 8.0 * P)
    gaps = rng.exponential(duration / queries, size=queries)
    gaps[0] = 0.0
    t_ms = np.round(np.cumsum(gaps) * 1000.0).astype(int)
    specs = []
    nid = 1
    for lines, t in zip(qs, t_ms.tolist()):
        idof = {}
        for key, m, r, parents in lines:
            idof[key] = nid
            after: list[int] = []
            pipe: list[int] = []
            for p in parents:
                (after if rng.random() < barrier_fraction else pipe).append(idof[p])
            specs.append(CoflowSpec(nid, int(t), m, r, after=tuple(after), pipe=tuple(pipe)))
            nid += 1
    return Trace(P, specs, "<tpcds-like>")

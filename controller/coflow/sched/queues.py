"""Non-clairvoyant, queue-based schedulers: Aalo's D-CLAS (weighted and strict), Baraat's FIFO-LM
and Fai's bottleneck-aware reallocation.  None of them reads flow sizes or remaining bytes.

D-CLAS ([AALO] section 4.2-4.4, Pseudocode 1; [DISS] section 6.5): K queues, coflow in queue i
while its bytes sent across the cluster are in [Q_i^lo, Q_i^hi), Q_{i+1}^hi = E * Q_i^hi, new
coflows in queue 1; FIFO by CoflowId within a queue; max-min across a coflow's flows; weighted
sharing across queues with weight K - i + 1, excess to unsaturated queues in proportion to
weight.  Sizes are coordinated every Δ: a demotion takes effect at the first coordination tick
(a multiple of Δ) after the coflow's global bytes cross the threshold.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..params import DclasParams, FifoLmParams, MB
from .base import COORDINATED, INF, METERS, Allocation, Fabric, Scheduler, View, register
from . import kernels
from .primitives import REL_TOL, greedy, ordered_waterfill, scratch
from .ordered import fifo_order


def _tick_after(t: float, delta: float) -> float:
    if delta <= 0:
        return t
    return math.ceil(t / delta - 1e-9) * delta


def dclas_queues(v: View, p: DclasParams) -> np.ndarray:
    """Current 1-based queue of every active coflow, as coordinated (see module doc)."""
    mem = v.memory
    Q = mem.setdefault("queue", {})
    due = mem.setdefault("due", {})
    ids = v.cf_id.tolist()
    out = np.fromiter((Q.get(i, 1) for i in ids), dtype=np.int64, count=len(ids))
    limit = v.now + 1e-9
    now_due = [k for k, i in enumerate(ids) if i in due and due[i] <= limit]
    if now_due:
        # every due coflow's queue at once (never promoted, at most K); elementwise the same
        # arithmetic as one searchsorted per coflow
        thr = np.array(p.thresholds())
        kd = np.asarray(now_due, dtype=np.int64)
        lq = 1 + np.searchsorted(thr, np.asarray(v.cf_sent, dtype=float)[kd] * (1 + 1e-12), side="right")
        q = np.minimum(np.maximum(out[kd], lq), p.K)
        out[kd] = q
        for k, x in zip(now_due, q.tolist()):
            i = ids[k]
            Q[i] = x
            del due[i]
    return out


def _upper_thresholds(p: DclasParams) -> np.ndarray:
    """Upper threshold of each queue 1..K (the same Python arithmetic as p.thresholds()), inf
    for queue K; cached per parameter object."""
    hi = _HI_Q.get(p)
    if hi is None:
        hi = _HI_Q[p] = np.array([p.Q1 * p.E ** (q - 1) for q in range(1, p.K + 1)] + [INF])
    return hi


_HI_Q: dict = {}


def dclas_next_demotion(v: View, p: DclasParams, queues: np.ndarray, rates: np.ndarray) -> float:
    """Schedule the coordination tick at which each coflow's next demotion is seen."""
    mem = v.memory
    due = mem["due"]
    if v.ncoflows == 0:
        return INF
    # per coflow: CROSSED its queue's threshold (demoted at the next tick, or when already
    # due), GROWING towards it (t = the tick at which it crosses), or nothing due
    t, state = kernels.dclas_demotion_times(
        np.ascontiguousarray(v.cf_lo, dtype=np.int64), np.ascontiguousarray(rates, dtype=float),
        np.ascontiguousarray(queues, dtype=np.int64), np.ascontiguousarray(v.cf_sent, dtype=float),
        _upper_thresholds(p), int(p.K), float(v.now), float(p.delta))
    tick = None
    nxt = INF
    for i, s, tk in zip(v.cf_id.tolist(), state.tolist(), t.tolist()):
        if s == kernels.Demotion.NONE:
            due.pop(i, None)
            continue
        if s == kernels.Demotion.CROSSED:
            if tick is None:
                tick = _tick_after(v.now, p.delta)
            tk = due.get(i, tick)
        due[i] = tk
        if tk < nxt:
            nxt = tk
    return float(nxt)


def queue_order(v: View, queues: np.ndarray) -> np.ndarray:
    """Queue first (1 = highest), then FIFO by arrival and CoflowId."""
    return np.lexsort((v.cf_id, v.cf_arrival, queues))


def dense_threshold(P: int) -> int:
    """Coflows with at least this many flows take the kernels' dense path (a P x P count
    matrix costs about as much as P^2 / 8 flows)."""
    return max(64, P * P // 8)


def weighted_queues(v: View, queues: np.ndarray, weights: list[float], rounds: int = 4,
                    dense_min: int | None = None) -> np.ndarray:
    """Weighted sharing across queues, FIFO inside a queue, max-min inside a coflow.

    Each link's residual capacity is split among the queues that still have a flow able to use
    it, in proportion to the queue weights; each queue serves its coflows FIFO on its share.
    What a queue cannot use is split again among the others (``rounds`` times), and a final
    strict-priority pass hands out anything left, so the allocation is work-conserving.
    ``rounds=0`` is strict priority across queues.  One compiled kernel
    (:func:`coflow.sched.kernels.queue_fill`); the tests check it against a step-by-step numpy
    reference (tests/reference_sched.py)."""
    if v.nflows == 0:
        return np.zeros(0)
    order = queue_order(v, queues)
    K = int(queues.max()) + 1
    wq = np.zeros(K)
    for q in np.unique(queues).tolist():
        wq[q] = float(weights[q - 1])
    dm = dense_threshold(v.ports) if dense_min is None else dense_min
    buf = scratch(v.nflows)[1]
    fl = v.kernel_flows()
    qs = kernels.QueueShare(np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(queues, dtype=np.int64),
                            wq, int(rounds))
    caps = np.ascontiguousarray(v.caps, dtype=float)
    if rounds == 0:
        return kernels.queue_fill(fl, qs, caps, REL_TOL, int(dm), buf)
    slot, cache = dense_counts(v, fl, int(dm))
    return kernels.queue_fill_slots(fl, qs, slot, cache.counts(), caps, REL_TOL, buf)


class DenseCounts:
    """The dense coflows' flow-count matrices (:func:`coflow.sched.kernels.dense_sync`), kept
    in the driver's memory between calls: a coflow's matrix changes only when some of its flows
    finish, so each call subtracts those instead of counting every flow again."""

    def __init__(self, P: int):
        self.P = P
        self.MT = np.zeros((0, P, P), dtype=np.int32)
        self.rs = np.zeros((0, P), dtype=np.int64)
        self.cs = np.zeros((0, P), dtype=np.int64)
        self.keys: list[np.ndarray] = []
        self.n: list[int] = []
        self.of: dict = {}  # CoflowId -> slot
        self.free: list[int] = []

    def slot_for(self, cid, nflows: int) -> int:
        s = self.of.get(cid)
        if s is None:
            if not self.free:
                S = self.MT.shape[0]
                grow = max(4, S)
                P = self.P
                self.MT = np.concatenate([self.MT, np.zeros((grow, P, P), dtype=np.int32)])
                self.rs = np.concatenate([self.rs, np.zeros((grow, P), dtype=np.int64)])
                self.cs = np.concatenate([self.cs, np.zeros((grow, P), dtype=np.int64)])
                self.keys += [np.zeros(0, dtype=np.int64) for _ in range(grow)]
                self.n += [-1] * grow
                self.free = list(range(S + grow - 1, S - 1, -1))
            s = self.of[cid] = self.free.pop()
            self.n[s] = -1
        if self.keys[s].size < nflows:
            self.keys[s] = np.empty(nflows, dtype=np.int64)
            self.n[s] = -1
        return s

    def counts(self):
        """The matrices as the kernels take them (:class:`coflow.sched.kernels.Counts`)."""
        return kernels.Counts(self.MT, self.rs, self.cs)

    def release_except(self, live: set) -> None:
        for cid in [c for c in self.of if c not in live]:
            self.free.append(self.of.pop(cid))


def dense_counts(v: View, fl, dense_min: int) -> tuple[np.ndarray, DenseCounts]:
    """Slot per coflow (-1: per-flow path) and the up-to-date count matrices of the coflows
    with at least ``dense_min`` flows (``fl``: the view's :meth:`View.kernel_flows`)."""
    cf_lo = fl.cf_lo
    cache = v.memory.get("dense_counts")
    if cache is None or cache.P != v.ports:
        cache = v.memory["dense_counts"] = DenseCounts(v.ports)
    sizes = np.diff(cf_lo)
    slot = np.full(v.ncoflows, -1, dtype=np.int64)
    dense = np.flatnonzero(sizes >= dense_min).tolist()
    ids = v.cf_id.tolist()
    cache.release_except({ids[k] for k in dense})
    for k in dense:
        s = cache.slot_for(ids[k], int(cf_lo[k + 1] - cf_lo[k]))
        cache.n[s] = kernels.dense_sync(cache.counts(), s, cache.keys[s], cache.n[s], fl, k)
        slot[k] = s
    return slot, cache


@register("dclas")
class Dclas(Scheduler):
    """Aalo D-CLAS: K queues, exponentially spaced thresholds, weighted sharing across queues."""

    fabric = Fabric(COORDINATED, "dclas", twin="dclas-strict", default=True)   # the TM's queues are strict

    Params = DclasParams

    def rates_for(self, v: View, queues: np.ndarray) -> np.ndarray:
        if self.params.strict:
            return weighted_queues(v, queues, self.params.queue_weights(), rounds=0)
        return weighted_queues(v, queues, self.params.queue_weights())

    def allocate(self, v: View) -> Allocation:
        q = dclas_queues(v, self.params)
        rates = self.rates_for(v, q)
        nxt = dclas_next_demotion(v, self.params, q, rates)
        return Allocation(rates, queue=q, next_event=nxt)


@register("dclas-strict")
class DclasStrict(Dclas):
    """D-CLAS with strict priority across queues, as CoflowSim's DARK."""

    @dataclass(frozen=True)
    class Params(DclasParams):
        strict: bool = True


@register("fifo-lm")
class FifoLm(Scheduler):
    """Baraat FIFO-LM: FIFO by CoflowId; a coflow whose bytes sent exceed the heavy threshold is
    multiplexed: it shares (max-min) with the next light coflow instead of blocking it."""

    fabric = Fabric(COORDINATED, "fifo-lm", default=True)

    Params = FifoLmParams

    def configure(self, coflow_bytes: np.ndarray) -> None:
        if self.params.heavy_bytes is None and len(coflow_bytes):
            self.heavy = float(np.percentile(coflow_bytes, self.params.heavy_percentile))
        else:
            self.heavy = self.params.heavy_bytes if self.params.heavy_bytes is not None else 10 * MB

    def groups(self, v: View) -> np.ndarray:
        """Priority group per coflow: light coflows close a group; heavies join the next one."""
        if not hasattr(self, "heavy"):
            self.configure(np.zeros(0))
        order = fifo_order(v)
        heavy = v.cf_sent >= self.heavy
        g = np.empty(v.ncoflows, dtype=np.int64)
        cur = 0
        pending = []
        for k in order.tolist():
            if heavy[k]:
                pending.append(k)
            else:
                for h in pending:
                    g[h] = cur
                pending = []
                g[k] = cur
                cur += 1
        for h in pending:
            g[h] = cur
        return g

    def allocate(self, v: View) -> Allocation:
        g = self.groups(v)
        buf = scratch(v.nflows)[1]
        gorder = np.argsort(g, kind="stable").astype(np.int64)
        rates = kernels.group_fill(v.kernel_flows(), gorder, g, v.caps.copy(), REL_TOL, buf)
        # Map groups onto 8 hardware queues for reporting: group 0 -> queue 1, ..., capped at 8.
        return Allocation(rates, queue=np.minimum(g + 1, 8))


#: Fai's readings where its text is ambiguous (README "Known gaps", REPRODUCTION.md "Fai, settled")
FAI_INIT = ("wfq", "static")
FAI_DETECT = ("mbab", "min-bw", "min-bytes", "none")
FAI_REALLOC = ("share", "greedy", "maxmin", "literal", "none")


def fai_static_init(v: View, q: np.ndarray, order: np.ndarray, weights: list[float]) -> np.ndarray:
    """[FAI] Algorithm 1 read literally: on every link each of the K queues owns
    capacity * w_i / W (W over all K queues, empty or not); inside a queue coflows take the
    queue's share FIFO, a coflow's flows on a link splitting what is left of it equally (a flow
    runs at the smaller of its two links' splits). Nothing a queue leaves is lent to another
    here: Algorithm 3 hands leftovers out."""
    W = float(sum(weights))
    qbw = np.outer(np.asarray(weights, dtype=float) / W, v.caps)  # K x 2P
    rates = np.zeros(v.nflows)
    kernels.fai_static_init(np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(v.cf_lo, dtype=np.int64),
                            v.src, v.dst, v.ports, np.ascontiguousarray(q, dtype=np.int64), qbw, rates)
    return rates


@register("fai")
class Fai(Scheduler):
    """Fai: Aalo-like queues, then MBAB bottleneck detection (rate deallocation) and strict-
    priority reallocation of what is left ([FAI] Algorithms 1-3)."""

    fabric = Fabric(METERS)

    @dataclass(frozen=True)
    class Params(DclasParams):
        #: Alg. 1: ``wfq`` (queues share each link by weight, what one leaves goes to the others:
        #: Aalo's work-conserving weighted sharing) or ``static`` (each queue owns w_i / W of
        #: every link, empty queues included; leftovers wait for Alg. 3)
        init: str = "wfq"
        #: Alg. 2: ``mbab`` (the paper's), ``min-bw`` / ``min-bytes`` (its Fig. 4a strawmen:
        #: the flow with the least rate / least bytes sent is the bottleneck), ``none``. The
        #: coflow's flows are cut to the bottleneck's rate (never raised)
        detect: str = "mbab"
        #: Alg. 3: ``share`` (each coflow in strict priority adds to all its flows the least
        #: residual per flow over its links), ``greedy`` (flow by flow, each adds
        #: min(residual up, residual down)), ``maxmin`` (max-min over the coflow's flows on the
        #: residual), ``literal`` (every flow adds the least residual of the coflow's links,
        #: not divided among the flows that share a link: EXCEEDS link capacity, kept so that
        #: the property tests show it), ``none``
        realloc: str = "share"
        #: scheduling epoch (s): 0 = recompute at every event the driver has; > 0 = also at
        #: every multiple of it (with the simulator's per-coflow mode: only then, at arrivals
        #: and at departures)
        epoch: float = 0.0

        def __post_init__(self):
            super().__post_init__()
            for f, ok in (("init", FAI_INIT), ("detect", FAI_DETECT), ("realloc", FAI_REALLOC)):
                if getattr(self, f) not in ok:
                    raise ValueError(f"{f} must be one of {', '.join(ok)}, not {getattr(self, f)!r}")
            if self.epoch < 0:
                raise ValueError("epoch must be >= 0")

    def allocate(self, v: View) -> Allocation:
        p = self.params
        q = dclas_queues(v, p)
        P = v.ports
        order = queue_order(v, q)
        # Alg. 1: initial allocation
        if p.init == "static":
            rates = fai_static_init(v, q, order, p.queue_weights())
        else:
            rates = weighted_queues(v, q, p.queue_weights())
        # Alg. 2: bottleneck detection.  MBAB: F_min = flows with the fewest bytes sent; if one
        # of them also has the coflow's minimum rate, that flow is the bottleneck: every flow of
        # the coflow is cut to that rate (it cannot finish earlier anyway).
        if p.detect == "min-bytes" or (p.detect != "none" and np.any(np.diff(v.cf_lo) == 0)):
            for k in order.tolist():
                s = v.flows_of(k)
                r = rates[s]
                if r.size == 0:
                    continue
                sent = v.sent[s]
                if p.detect == "min-bw":
                    bw = r.min()
                elif p.detect == "min-bytes":
                    bw = r[int(np.argmin(sent))]
                else:
                    fmin = sent <= sent.min() * (1 + 1e-12) + 1e-9
                    mbw = r.min()
                    if not (r[fmin] <= mbw * (1 + 1e-12)).any():
                        continue
                    bw = mbw
                rates[s] = np.minimum(r, bw)
        elif p.detect != "none" and v.nflows:
            # every coflow at once (each coflow's cut reads only its own flows)
            lo = v.cf_lo[:-1]
            cf = v.cf
            mbw = np.minimum.reduceat(rates, lo)
            if p.detect == "min-bw":
                cut = np.ones(v.ncoflows, dtype=bool)
            else:
                smin = np.minimum.reduceat(v.sent, lo)
                hit = (v.sent <= smin[cf] * (1 + 1e-12) + 1e-9) & (rates <= mbw[cf] * (1 + 1e-12))
                cut = np.logical_or.reduceat(hit, lo)
            rates = np.where(cut[cf], np.minimum(rates, mbw[cf]), rates)
        used = np.concatenate([np.bincount(v.src, rates, P), np.bincount(v.dst, rates, P)])
        rem = np.maximum(v.caps - used, 0.0)
        # Alg. 3: reallocation in strict priority
        if p.realloc == "maxmin":
            ordered_waterfill(v, order, rem, rates=rates)
        elif p.realloc == "greedy":
            rank = np.empty(v.ncoflows, dtype=np.int64)
            rank[order] = np.arange(v.ncoflows)
            greedy(v, np.argsort(rank[v.cf], kind="stable"), rem, rates)
        elif p.realloc in ("share", "literal") and v.nflows:
            tol = np.maximum(v.caps, 1.0) * REL_TOL
            kernels.fai_share_realloc(np.ascontiguousarray(order, dtype=np.int64),
                                      np.ascontiguousarray(v.cf_lo, dtype=np.int64), v.src, v.dst, P, rem, tol,
                                      rates, p.realloc == "share")
        nxt = dclas_next_demotion(v, p, q, rates)
        if p.epoch > 0:
            nxt = min(nxt, (math.floor(v.now / p.epoch + 1e-9) + 1) * p.epoch)
        return Allocation(rates, queue=q, next_event=nxt)


@register("dclas-local")
class DclasLocal(Scheduler):
    """Uncoordinated D-CLAS ([AALO] section 7.2's 15.8x baseline): each sender queues a coflow by
    the bytes the coflow has sent from that sender alone, with no coordinator."""

    Params = DclasParams

    def allocate(self, v: View) -> Allocation:
        p = self.params
        mem = v.memory
        P = v.ports
        # bytes each sender has sent per coflow: what it sent at the rates it was given since
        # the last call (a daemon's own count), never more than the coflow's global bytes (in
        # the simulator's per-coflow mode a flow can finish between calls)
        local: dict = mem.setdefault("local_sent", {})
        last_t, last_keys, last_rate = mem.get("local_last", (v.now, [], np.zeros(0)))
        dt = v.now - last_t
        if dt > 0:
            for key, r in zip(last_keys, last_rate.tolist()):
                local[key] = local.get(key, 0.0) + r * dt
        if v.nflows == 0:
            mem["local_last"] = (v.now, [], np.zeros(0))
            return Allocation(np.zeros(0), queue=np.zeros(0, dtype=np.int64))
        ids = v.cf_id.tolist()
        # one pseudo-coflow per (coflow, sender), flows grouped by it (stable: coflow order kept)
        order = np.lexsort((v.src, v.cf))
        gkey = np.asarray(v.cf, dtype=np.int64)[order] * P + v.src[order]
        start = np.r_[True, gkey[1:] != gkey[:-1]]
        g_lo = np.r_[np.flatnonzero(start), gkey.size].astype(np.int64)
        g_cf = np.asarray(v.cf, dtype=np.int64)[order][start]
        g_src = v.src[order][start]
        keys = [(ids[k], s) for k, s in zip(g_cf.tolist(), g_src.tolist())]
        sent = np.array([local.get(key, 0.0) for key in keys])
        tot = np.bincount(g_cf, sent, v.ncoflows)  # clamp to the coflow's global bytes
        over = (tot > v.cf_sent * (1 + 1e-12)) & (tot > 0)
        if over.any():
            scale = np.where(over, v.cf_sent / np.where(tot > 0, tot, 1.0), 1.0)
            m = over[g_cf]
            sent[m] *= scale[g_cf][m]
            for j in np.flatnonzero(m).tolist():
                local[keys[j]] = float(sent[j])
        thr = np.array(p.thresholds())
        # (a sender within 1e-9 of a threshold has crossed it: the next step would round to nothing)
        q = np.minimum(1 + np.searchsorted(thr, sent * (1 + 1e-9), side="right"), p.K).astype(np.int64)
        sub = View(now=v.now, ports=P, cap_up=v.cap_up, cap_down=v.cap_down, src=v.src[order], dst=v.dst[order],
                   sent=v.sent[order], cf=np.repeat(np.arange(g_lo.size - 1), np.diff(g_lo)),
                   reducer=v.reducer[order], cf_id=(v.cf_id[g_cf] * P + g_src).astype(np.int64),
                   cf_arrival=v.cf_arrival[g_cf], cf_sent=sent, cf_lo=g_lo,
                   memory=mem.setdefault("sub", {}))
        w = p.queue_weights()
        r_sub = weighted_queues(sub, q, w, rounds=0 if p.strict else 4)
        rates = np.empty(v.nflows)
        rates[order] = r_sub
        g_rate = np.add.reduceat(r_sub, g_lo[:-1]) if r_sub.size else np.zeros(0)
        mem["local_last"] = (v.now, keys, g_rate)
        # the next local demotion at these rates
        hi = _upper_thresholds(p)[q - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            t_cross = np.where((g_rate > 0) & np.isfinite(hi), (hi - sent) / g_rate, INF)
        step = 1e-9 * max(1.0, v.now)  # never a step that rounds to nothing
        nxt = float(v.now + max(float(t_cross.min()), step)) if t_cross.size else INF
        cq = np.ones(v.ncoflows, dtype=np.int64)
        np.maximum.at(cq, g_cf, q)
        return Allocation(rates, queue=cq, next_event=nxt)

"""Clairvoyant coflow orderings with MADD rates and backfilling: FIFO, SCF, NCF, TCF, Varys SEBF
(with starvation freedom), Varys deadline admission, and Sincronia's BSSI ordering.

Varys ([VARYS] section 5.3 / [DISS] section 5.5): SEBF orders coflows by Γ, the MADD bottleneck
time (Eq. 1); ``allocBandwidth`` gives each coflow in order r_ij = d_ij / Γ on what is left
(Pseudocode 1); unused bandwidth is then backfilled in the same order, flows of a coflow sharing
it in their r_ij ratios.  Starvation freedom: every T, coflows that got nothing during the last T
are served together as one MADD coflow for δ.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import INF, METERS, QUEUES, Allocation, Fabric, Scheduler, View, register
from .primitives import coflow_rates, gamma, madd_ordered, ordered_waterfill, greedy


def madd_backfill(v: View, order: np.ndarray, backfill: bool = True, tau: np.ndarray | None = None,
                  rem: np.ndarray | None = None) -> np.ndarray:
    rem = v.caps.copy() if rem is None else rem
    rates = madd_ordered(v, order, v.remaining, rem, tau)
    if backfill:
        ordered_waterfill(v, order, rem, weights=v.remaining, rates=rates)
    return rates


def fifo_order(v: View) -> np.ndarray:
    return np.lexsort((v.cf_id, v.cf_arrival))


@dataclass(frozen=True)
class DeadlineParams:
    """The deadline schedulers' parameters: experimental deadline = Γ_empty * (1 + U(0, x)), at
    least ``min_deadline`` ([VARYS] 7.1), drawn from a generator seeded by ``seed``."""
    x: float = 1.0
    min_deadline: float = 0.2
    seed: int = 1


def _deadlines_for_newcomers(v: View, m: dict, dl: dict, D, params) -> None:
    """Deadlines of the coflows new in ``v`` (into ``dl``): the trace's if given, else the
    experimental one, arrival + max(min_deadline, Gamma x (1 + U(0, x))), drawn from the
    scheduler's own generator (``m["rng"]``, seeded by ``params.seed``)."""
    rng = m.setdefault("rng", np.random.default_rng(params.seed))
    for k, i in enumerate(v.cf_id.tolist()):
        if i not in dl:
            if v.cf_deadline is not None and np.isfinite(v.cf_deadline[k]):
                dl[i] = float(v.cf_deadline[k])
            else:
                g0 = float(gamma(D[k], v.caps))
                dl[i] = v.cf_arrival[k] + max(params.min_deadline, g0 * (1 + rng.uniform(0, params.x)))


class _Ordered(Scheduler):
    """Order coflows by a key, then MADD + backfill."""

    clairvoyant = True

    @dataclass(frozen=True)
    class Params:
        backfill: bool = True

    def key(self, v: View) -> np.ndarray:
        raise NotImplementedError

    def order(self, v: View) -> np.ndarray:
        return np.lexsort((v.cf_id, v.cf_arrival, self.key(v)))

    def allocate(self, v: View) -> Allocation:
        order = self.order(v)
        return Allocation(madd_backfill(v, order, self.params.backfill), order=order)


@register("fifo")
class Fifo(_Ordered):
    """Coflow FIFO (Orchestra-style): arrival order, MADD inside a coflow, backfill."""

    def order(self, v):
        return fifo_order(v)


@register("scf")
class Scf(_Ordered):
    """Smallest (shortest) coflow first: the coflow whose largest remaining flow is smallest."""

    def key(self, v):
        m = np.zeros(v.ncoflows)
        np.maximum.at(m, v.cf, v.remaining)
        return m


@register("ncf")
class Ncf(_Ordered):
    """Narrowest coflow first: fewest unfinished flows."""

    def key(self, v):
        return np.diff(v.cf_lo).astype(float)


@register("tcf")
class Tcf(_Ordered):
    """Total-size coflow first: smallest remaining bytes."""

    def key(self, v):
        return np.bincount(v.cf, weights=v.remaining, minlength=v.ncoflows)


def sebf_key(v: View) -> np.ndarray:
    return gamma(v.link_demand(v.remaining), v.caps)


@register("sebf")
class Sebf(_Ordered):
    """Varys: smallest effective bottleneck first, MADD rates, backfill, starvation freedom (T, δ)."""

    fabric = Fabric(METERS, default=True)

    @dataclass(frozen=True)
    class Params:
        T: float = 2.0  # [VARYS] EC2 default
        delta: float = 0.2
        starvation: bool = True
        backfill: bool = True

    def key(self, v):
        return sebf_key(v)

    def allocate(self, v: View) -> Allocation:
        p = self.params
        order = self.order(v)
        if not p.starvation or p.T <= 0:
            return Allocation(madd_backfill(v, order, p.backfill), order=order)
        m = v.memory
        last = m.setdefault("last_served", {})  # coflow id -> last time it had a positive rate
        m.setdefault("period_start", v.now)
        ids = v.cf_id.tolist()
        for i, a in zip(ids, v.cf_arrival.tolist()):
            last.setdefault(i, a)
        delta_until = m.get("delta_until", -INF)
        if v.now >= delta_until and v.now - m["period_start"] >= p.T - 1e-12:
            starved = [k for k, i in enumerate(ids) if v.now - last[i] >= p.T - 1e-12]
            m["period_start"] = v.now
            if starved:
                m["starved"] = set(ids[k] for k in starved)
                delta_until = m["delta_until"] = v.now + p.delta
        if v.now < delta_until - 1e-12:
            # δ interval: the starved set, as one collective MADD coflow, then backfill.
            st = np.array([i in m["starved"] for i in ids])
            rem = v.caps.copy()
            sel = st[v.cf]
            rates = np.zeros(v.nflows)
            # the starved coflows' rows of the demand matrix (kept for the ordering below); the
            # other rows as zeros, so the column sums are those of the masked flows exactly
            D = np.where(st[:, None], v.link_demand(v.remaining), 0.0).sum(axis=0)
            g = gamma(D, rem)
            if np.isfinite(g) and g > 0:
                rates[sel] = v.remaining[sel] / g
                rem -= D / g
                np.maximum(rem, 0, out=rem)
            ordered_waterfill(v, order, rem, weights=v.remaining, rates=rates)
            nxt = delta_until
        else:
            rates = madd_backfill(v, order, p.backfill)
            nxt = m["period_start"] + p.T
        served = coflow_rates(v, rates) > 0
        for k in np.flatnonzero(served).tolist():
            last[ids[k]] = v.now
        return Allocation(rates, next_event=nxt, order=order)


@register("varys-deadline")
class VarysDeadline(Scheduler):
    """Varys admission control: admit iff Γ <= deadline on what admitted coflows leave; admitted
    coflows get r_ij = d_ij / (time to deadline) in arrival order, then backfill."""

    clairvoyant = True

    @dataclass(frozen=True)
    class Params(DeadlineParams):
        backfill: bool = True

    def allocate(self, v: View) -> Allocation:
        m = v.memory
        dl = m.setdefault("deadline", {})
        adm = m.setdefault("admitted", {})
        ids = v.cf_id.tolist()
        D = v.link_demand(v.remaining)
        caps = v.caps
        _deadlines_for_newcomers(v, m, dl, D, self.params)
        # minimum rates of already admitted coflows (τ = time left to deadline)
        rem = caps.copy()
        for k, i in enumerate(ids):
            if adm.get(i):
                left = max(dl[i] - v.now, 1e-9)
                rem -= D[k] / left
        np.maximum(rem, 0, out=rem)
        for k, i in enumerate(ids):
            if i not in adm:
                g = float(gamma(D[k], rem))
                ok = g <= dl[i] - v.now + 1e-9
                adm[i] = bool(ok)
                if ok:
                    rem -= D[k] / max(dl[i] - v.now, 1e-9)
                    np.maximum(rem, 0, out=rem)
        admitted = np.array([adm[i] for i in ids], dtype=bool)
        order = fifo_order(v)
        order = order[admitted[order]]
        tau = np.array([max(dl[i] - v.now, 1e-9) for i in ids])
        rates = madd_ordered(v, order, v.remaining, v.caps.copy(), tau)
        if self.params.backfill:
            rem2 = v.caps.copy() - np.concatenate([np.bincount(v.src, rates, v.ports), np.bincount(v.dst, rates, v.ports)])
            np.maximum(rem2, 0, out=rem2)
            ordered_waterfill(v, order, rem2, weights=v.remaining, rates=rates)
        return Allocation(rates, admitted=admitted, order=order)


def bssi_order(D: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Sincronia's Bottleneck-Select-Scale-Iterate. ``D``: (C x L) remaining demand per link.
    Returns coflow indices, first to be served first."""
    C = D.shape[0]
    w = np.ones(C) if w is None else w.astype(float).copy()
    alive = np.ones(C, dtype=bool)
    load = D.sum(axis=0)
    out = np.empty(C, dtype=np.int64)
    for pos in range(C - 1, -1, -1):
        b = int(np.argmax(load))
        db = D[:, b]
        cand = alive & (db > 0)
        if not cand.any():
            # no remaining coflow touches any loaded link: order the rest by index (arrival)
            rest = np.flatnonzero(alive)
            out[: pos + 1] = rest
            break
        ratio = np.full(C, np.inf)
        ratio[cand] = w[cand] / db[cand]
        s = int(np.argmin(ratio))  # the coflow that goes last
        out[pos] = s
        alive[s] = False
        w[alive] -= w[s] * db[alive] / db[s]
        np.maximum(w, 0, out=w)
        load -= D[s]
    return out


@register("sincronia")
class Sincronia(Scheduler):
    """Sincronia: BSSI ordering (beyond the seeds), then MADD + backfill or greedy rates."""

    fabric = Fabric(QUEUES, default=True)   # order only, no rate control (its deployment)

    clairvoyant = True

    @dataclass(frozen=True)
    class Params:
        rates: str = "madd"  # or "greedy"

    def allocate(self, v: View) -> Allocation:
        order = bssi_order(v.link_demand(v.remaining))
        if self.params.rates == "greedy":
            rank = np.empty(v.ncoflows, dtype=np.int64)
            rank[order] = np.arange(v.ncoflows)
            forder = np.lexsort((v.remaining, rank[v.cf]))
            return Allocation(greedy(v, forder, v.caps.copy()), order=order)
        if self.params.rates != "madd":
            raise ValueError("sincronia: rates must be 'madd' or 'greedy'")
        return Allocation(madd_backfill(v, order), order=order)


@register("virtual-cluster")
class VirtualCluster(Scheduler):
    """Virtual Cluster reservation ([VARYS] section 7.3, Oktopus's hose model): a coflow reserves
    one rate B on every port it uses, B = its most loaded port's bytes / time to deadline; it is
    admitted iff every one of those ports still has B unreserved. Admitted coflows run at
    r_ij = d_ij / (time to deadline) inside their reservation, with no backfill."""

    clairvoyant = True

    Params = DeadlineParams

    def allocate(self, v: View) -> Allocation:
        m = v.memory
        dl = m.setdefault("deadline", {})
        adm = m.setdefault("admitted", {})
        resv = m.setdefault("reservation", {})  # CoflowId -> (links, B)
        ids = v.cf_id.tolist()
        D = v.link_demand(v.remaining)
        caps = v.caps
        _deadlines_for_newcomers(v, m, dl, D, self.params)
        live = set(ids)
        for i in [i for i in resv if i not in live]:
            del resv[i]
        free = caps.copy()
        for links, B in resv.values():
            free[links] -= B
        for k, i in enumerate(ids):
            if i in adm:
                continue
            links = np.flatnonzero(D[k] > 0)
            B = float(D[k].max()) / max(dl[i] - v.now, 1e-9)
            ok = bool(links.size) and bool(np.all(free[links] >= B * (1 - 1e-9)))
            adm[i] = ok
            if ok:
                resv[i] = (links, B)
                free[links] -= B
        admitted = np.array([adm[i] for i in ids], dtype=bool)
        order = fifo_order(v)
        order = order[admitted[order]]
        # d_ij / (time to deadline), never above the reservation B on any link: a coflow whose
        # bytes grew after admission (a later wave) or whose deadline passed runs at B
        tau = np.array([max(dl[i] - v.now, float(D[k].max()) / resv[i][1] if i in resv else 1e-9, 1e-9)
                        for k, i in enumerate(ids)])
        rem = v.caps.copy()
        rates = madd_ordered(v, order, v.remaining, rem, tau)
        # a later wave on a port outside the reservation: what it needs there is not reserved;
        # it gets what the others leave (max-min), so it still finishes
        idle = admitted & (coflow_rates(v, rates) <= 0)
        if idle.any():
            ordered_waterfill(v, order, rem, rates=rates, eligible=idle[v.cf])
        return Allocation(rates, admitted=admitted)

"""Isolation-oriented schedulers: DRF, HUG ([DISS] Ch. 7, Algorithm 6) and Utopia ([UTOPIA]).

Correlation vector of coflow k: d_k^i = (bytes coflow k still has on link i / capacity of link
i), normalised so that its largest component is 1 ([DISS] section 7.2).  DRF/HUG's optimal
isolation is P* = 1 / max_i sum_k d_k^i (Eq. 7.2) and coflow k is guaranteed a_k^i = P* d_k^i.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import INF, METERS, Allocation, Fabric, Scheduler, View, register
from . import kernels
from .primitives import REL_TOL, ordered_waterfill, pair_waterfill


def correlation(D: np.ndarray, caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(C x L) demand in bytes -> (correlation vectors, bottleneck time d̄_k in seconds)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(D > 0, D / caps, 0.0)
    dbar = t.max(axis=1) if t.size else np.zeros(0)
    c = np.where(dbar[:, None] > 0, t / np.where(dbar[:, None] > 0, dbar[:, None], 1), 0.0)
    return c, dbar


def drf_progress(c: np.ndarray) -> float:
    """P* = 1 / max_i sum_k c_k^i."""
    s = c.sum(axis=0).max() if c.size else 0.0
    return 1.0 / s if s > 0 else INF


def drf_rates(v: View) -> tuple[np.ndarray, float, np.ndarray]:
    """DRF rates: flow (i, j) of coflow k gets P* * d_ij / d̄_k (bytes/s), so every link of the
    coflow gets a_k^i = P* c_k^i of its capacity.  Returns (rates, P*, d̄)."""
    D = v.link_demand(v.remaining)
    c, dbar = correlation(D, v.caps)
    Pstar = drf_progress(c)
    if not np.isfinite(Pstar):
        return np.zeros(v.nflows), Pstar, dbar
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(dbar[v.cf] > 0, Pstar * v.remaining / dbar[v.cf], 0.0)
    return r, Pstar, dbar


@register("drf")
class Drf(Scheduler):
    """DRF over coflows' correlation vectors (elastic demands): optimal isolation, not work-conserving."""

    clairvoyant = True

    @dataclass(frozen=True)
    class Params:
        pass

    def allocate(self, v: View) -> Allocation:
        return Allocation(drf_rates(v)[0])


@register("hug")
class Hug(Scheduler):
    """HUG: DRF stage, then spare capacity shared by max-min with every coflow's use of a link
    capped at P* (strategy-proof); ``work_conserving=true`` drops the caps (cooperative setting)."""

    fabric = Fabric(METERS, default=True)

    clairvoyant = True

    @dataclass(frozen=True)
    class Params:
        work_conserving: bool = False

    def allocate(self, v: View) -> Allocation:
        if self.params.work_conserving:
            # cooperative: DRF stage, then leftovers max-min over all flows
            rates, Pstar, _ = drf_rates(v)
            if not np.isfinite(Pstar):
                return Allocation(rates)
            P = v.ports
            used = np.concatenate([np.bincount(v.src, rates, P), np.bincount(v.dst, rates, P)])
            rem = np.maximum(v.caps - used, 0.0)
            add = pair_waterfill(v, rem)
            return Allocation(rates + add)
        # the DRF stage and the capped second stage's residuals in one compiled pass, then the
        # second stage's water-fill over each flow's 4 links (the tests check both against a
        # step-by-step numpy reference, tests/reference_sched.py)
        cf = np.ascontiguousarray(v.cf, dtype=np.int64)
        rates, Pstar, all_rem = kernels.hug_prepare(
            v.src, v.dst, cf, np.ascontiguousarray(v.remaining, dtype=float),
            np.ascontiguousarray(v.caps, dtype=float), v.ports, v.ncoflows)
        if not np.isfinite(Pstar):
            return Allocation(rates)
        P, C = v.ports, v.ncoflows
        if C * P * P <= min(DENSE_CELLS_PER_FLOW * v.nflows, DENSE_MAX_CELLS):
            # few wide coflows (the FB trace's busy hours): count matrices, same rates
            sc = v.memory.get("hug_scratch")
            if sc is None or sc.shape[1] < C or sc.shape[2] != P:
                sc = v.memory["hug_scratch"] = np.zeros((2, max(C, 16), P, P), dtype=np.int32)
            return Allocation(kernels.hug_fill_dense(v.src, v.dst, cf, P, C, all_rem, REL_TOL, rates, sc))
        return Allocation(kernels.hug_fill(v.src, v.dst, cf, P, C, all_rem, REL_TOL, rates))


# HUG's second stage takes the dense kernel when the coflows' P x P count matrices have at most
# this many cells per flow: a cell costs a few sequential operations, a flow in the per-flow
# lists a scattered write and two sorted lookups (on the FB trace's busy hours, 10-13 coflows
# of 5-20k flows each, the dense kernel measured 2.2 ms per call against 4.5-5.5 ms)
DENSE_CELLS_PER_FLOW = 8
# ... and at most this many cells (two int32 matrices of this size: 128 MiB)
DENSE_MAX_CELLS = 1 << 24


def utopia_min_alloc(v: View, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Utopia Algorithm 1, ``allocBandwidth``: for coflow k in order, super-coflow S_k = sum of
    the first k coflows; pair (i, j) of S_k needs D_k^ij / D̄_k; coflow k gets what earlier
    coflows have not already given that pair, capped by the residuals R_i, R_j (Eq. 7).
    Returns (rates, residual capacity per link)."""
    P = v.ports
    caps = v.caps
    rem = caps.copy()
    rates = np.zeros(v.nflows)
    pair_dem = np.zeros(P * P)
    pair_rate = np.zeros(P * P)
    link_dem = np.zeros(2 * P)
    key = v.src.astype(np.int64) * P + v.dst
    for k in order.tolist():
        s = v.flows_of(k)
        if s.stop == s.start:
            continue
        ks, d = key[s], v.remaining[s]
        np.add.at(pair_dem, ks, d)
        np.add.at(link_dem, v.src[s], d)
        np.add.at(link_dem, P + v.dst[s], d)
        Dbar = (link_dem / caps).max()
        if Dbar <= 0:
            continue
        want = np.maximum(pair_dem[ks] / Dbar - pair_rate[ks], 0.0)
        # share a pair's increment among coflow k's flows on that pair by size
        pd_k = np.bincount(ks - ks.min(), weights=d)[ks - ks.min()]
        want = want * np.where(pd_k > 0, d / pd_k, 0)
        up, dn = v.src[s], P + v.dst[s]
        lu = np.bincount(up, want, 2 * P)
        ld = np.bincount(dn, want, 2 * P)
        tot = lu + ld
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(tot > 0, np.minimum(1.0, rem / tot), 1.0)
        scale = np.minimum(f[up], f[dn])
        r = want * scale
        rates[s] = r
        np.add.at(pair_rate, ks, r)
        rem -= np.bincount(up, r, 2 * P) + np.bincount(dn, r, 2 * P)
        np.maximum(rem, 0, out=rem)
    return rates, rem


@register("utopia")
class Utopia(Scheduler):
    """Utopia: order by virtual finish time under HUG/DRF progress (dV/dt = P*, V_k^F = V(t_A) +
    d̄_k), super-coflow minimum allocation (Eq. 7), then Varys-style backfill."""

    fabric = Fabric(METERS)

    clairvoyant = True

    @dataclass(frozen=True)
    class Params:
        backfill: bool = True

    def allocate(self, v: View) -> Allocation:
        m = v.memory
        D = v.link_demand(v.remaining)
        c, dbar = correlation(D, v.caps)
        Pstar = drf_progress(c)
        Vt = m.get("V", 0.0) + m.get("Pstar", 0.0) * (v.now - m.get("t", v.now))
        VF = m.setdefault("VF", {})
        for k, i in enumerate(v.cf_id.tolist()):
            if i not in VF:
                VF[i] = Vt + float(dbar[k])
        m["V"], m["t"], m["Pstar"] = Vt, v.now, (Pstar if np.isfinite(Pstar) else 0.0)
        vf = np.array([VF[i] for i in v.cf_id.tolist()])
        order = np.lexsort((v.cf_id, v.cf_arrival, vf))
        rates, rem = utopia_min_alloc(v, order)
        if self.params.backfill:
            ordered_waterfill(v, order, rem, weights=v.remaining, rates=rates)
        return Allocation(rates, order=order)


def psp_guarantee(v: View) -> np.ndarray:
    """PS-P's guaranteed rates ([DISS] section 7.2, FairCloud's proportional sharing at the
    network: every coflow using a link gets an equal share of it, split equally among its flows
    on that link).  A flow crossing uplink u and downlink d gets min(share_u, share_d), so no link
    is loaded above its capacity."""
    P, L = v.ports, 2 * v.ports
    if v.nflows == 0:
        return np.zeros(0)
    cf = np.asarray(v.cf, dtype=np.int64)
    up, dn = cf * L + v.src, cf * L + P + v.dst
    n = np.bincount(np.concatenate([up, dn]), minlength=v.ncoflows * L)  # flows per (coflow, link)
    m = np.bincount(np.flatnonzero(n) % L, minlength=L)  # coflows per link
    caps = v.caps
    with np.errstate(divide="ignore", invalid="ignore"):
        share_up = caps[v.src] / m[v.src] / n[up]
        share_dn = caps[P + v.dst] / m[P + v.dst] / n[dn]
    return np.minimum(share_up, share_dn)


@register("psp")
class Psp(Scheduler):
    """PS-P (HUG's baseline): per-coflow fair share on every link, equal among the coflow's flows
    there; spare capacity then shared by per-flow max-min (work-conserving, as FairCloud's PS-P)."""

    @dataclass(frozen=True)
    class Params:
        work_conserving: bool = True

    def allocate(self, v: View) -> Allocation:
        rates = psp_guarantee(v)
        if not self.params.work_conserving or v.nflows == 0:
            return Allocation(rates)
        P = v.ports
        used = np.concatenate([np.bincount(v.src, rates, P), np.bincount(v.dst, rates, P)])
        rem = np.maximum(v.caps - used, 0.0)
        return Allocation(rates + pair_waterfill(v, rem))

"""Test oracles for the scheduler core: slow, step-by-step numpy/Python versions of the compiled
or vectorised code paths in :mod:`coflow.sched`.  The property tests check that the real
implementations agree with these (bit-identical where stated).  They live here, not in the
package, so that the core writes every algorithm once."""
from __future__ import annotations

import numpy as np

from coflow.params import DclasParams
from coflow.sched.base import Allocation, INF, View
from coflow.sched.isolation import Hug, drf_rates
from coflow.sched.primitives import REL_TOL, coflow_rates, ordered_waterfill, pair_waterfill, waterfill
from coflow.sched.queues import FifoLm, _tick_after, queue_order


def greedy_reference(v, order_flows: np.ndarray, rem: np.ndarray, rates: np.ndarray | None = None,
                     chunk: int = 4096) -> np.ndarray:
    """:func:`coflow.sched.primitives.greedy` step by step in numpy/Python."""
    P = v.ports
    if rates is None:
        rates = np.zeros(v.nflows)
    up, down = rem[:P], rem[P:]
    tol_u = np.maximum(up, 1.0) * REL_TOL
    tol_d = np.maximum(down, 1.0) * REL_TOL
    for c0 in range(0, len(order_flows), chunk):
        if not (up > tol_u).any() or not (down > tol_d).any():
            break
        ch = order_flows[c0:c0 + chunk]
        cand = ch[(up[v.src[ch]] > tol_u[v.src[ch]]) & (down[v.dst[ch]] > tol_d[v.dst[ch]])]
        for f in cand.tolist():
            s, d = v.src[f], v.dst[f]
            r = min(up[s], down[d])
            if r <= tol_u[s] or r <= tol_d[d]:
                continue
            rates[f] += r
            up[s] -= r
            down[d] -= r
    np.maximum(rem, 0.0, out=rem)
    return rates


def hug_allocate_reference(s: Hug, v: View) -> Allocation:
    """:meth:`coflow.sched.isolation.Hug.allocate` step by step in numpy."""
    rates, Pstar, _ = drf_rates(v)
    if not np.isfinite(Pstar):
        return Allocation(rates)
    P, C = v.ports, v.ncoflows
    caps = v.caps
    used = np.concatenate([np.bincount(v.src, rates, P), np.bincount(v.dst, rates, P)])
    rem = np.maximum(caps - used, 0.0)
    if s.params.work_conserving:
        # cooperative: hand out leftovers max-min over all flows
        add = pair_waterfill(v, rem)
        return Allocation(rates + add)
    # per-(coflow, link) virtual links with capacity P* * cap - what DRF already gave
    k_up = v.cf * (2 * P) + v.src
    k_dn = v.cf * (2 * P) + P + v.dst
    usage = np.bincount(k_up, rates, C * 2 * P) + np.bincount(k_dn, rates, C * 2 * P)
    vcap = np.tile(Pstar * caps, C) - usage
    vcap = np.maximum(vcap, 0.0)
    all_rem = np.concatenate([rem, vcap])
    off = 2 * P
    add = waterfill([v.src, v.dst + P, k_up + off, k_dn + off], all_rem)
    return Allocation(rates + add)


def dclas_queues_reference(v: View, p: DclasParams) -> np.ndarray:
    """:func:`coflow.sched.queues.dclas_queues` with one searchsorted per due coflow."""
    mem = v.memory
    Q = mem.setdefault("queue", {})
    due = mem.setdefault("due", {})
    ids = v.cf_id.tolist()
    out = np.fromiter((Q.get(i, 1) for i in ids), dtype=np.int64, count=len(ids))
    limit = v.now + 1e-9
    thr = np.array(p.thresholds())
    for k, i in enumerate(ids):
        if i in due and due[i] <= limit:
            q = max(int(out[k]), 1 + int(np.searchsorted(thr, v.cf_sent[k] * (1 + 1e-12), side="right")))
            q = min(q, p.K)
            Q[i] = q
            del due[i]
            out[k] = q
    return out


def dclas_next_demotion_reference(v: View, p: DclasParams, queues: np.ndarray, rates: np.ndarray) -> float:
    """:func:`coflow.sched.queues.dclas_next_demotion` as a per-coflow loop."""
    mem = v.memory
    due = mem["due"]
    R = coflow_rates(v, rates)
    nxt = INF
    for k, i in enumerate(v.cf_id.tolist()):
        q = int(queues[k])
        if q >= p.K:
            due.pop(i, None)
            continue
        hi = p.Q1 * p.E ** (q - 1)
        if v.cf_sent[k] >= hi * (1 - 1e-12):
            t = due.get(i, _tick_after(v.now, p.delta))
        elif R[k] > 0:
            t = _tick_after(v.now + (hi - v.cf_sent[k]) / R[k], p.delta)
        else:
            due.pop(i, None)
            continue
        due[i] = t
        nxt = min(nxt, t)
    return nxt


def weighted_queues_reference(v: View, queues: np.ndarray, weights: list[float], rounds: int = 4) -> np.ndarray:
    """:func:`coflow.sched.queues.weighted_queues` step by step (numpy + per-coflow fills)."""
    if rounds == 0:
        return ordered_waterfill(v, queue_order(v, queues), v.caps.copy())
    P = v.ports
    rem = v.caps.copy()
    tol = np.maximum(v.caps, 1.0) * REL_TOL
    rates = np.zeros(v.nflows)
    order = queue_order(v, queues)
    K = int(queues.max()) + 1 if queues.size else 1
    per_q = {int(q): order[queues[order] == q] for q in np.unique(queues)}
    wq = np.zeros(K)
    for q in per_q:
        wq[q] = float(weights[q - 1])
    fq = queues[v.cf]
    kup = fq * (2 * P) + v.src
    kdn = fq * (2 * P) + P + v.dst
    for _ in range(rounds):
        usable = (rem[v.src] > tol[v.src]) & (rem[P + v.dst] > tol[P + v.dst])
        if not usable.any():
            break
        u = usable.astype(float)
        pres = (np.bincount(kup, u, K * 2 * P) + np.bincount(kdn, u, K * 2 * P)).reshape(K, 2 * P) > 0
        wl = pres * wq[:, None]
        Wlink = wl.sum(axis=0)
        share = wl * np.where(Wlink > 0, rem / np.where(Wlink > 0, Wlink, 1.0), 0.0)
        used = np.zeros(2 * P)
        for q, ordq in per_q.items():
            if not pres[q].any():
                continue
            sh = share[q].copy()
            ordered_waterfill(v, ordq, sh, rates=rates)
            used += share[q] - sh
        rem -= used
        np.maximum(rem, 0, out=rem)
        if used.sum() <= tol.sum():
            break
    ordered_waterfill(v, order, rem, rates=rates)
    return rates


def fifo_lm_allocate_reference(s: FifoLm, v: View) -> Allocation:
    """:meth:`coflow.sched.queues.FifoLm.allocate` step by step in numpy."""
    g = s.groups(v)
    P = v.ports
    rem = v.caps.copy()
    rates = np.zeros(v.nflows)
    fg = g[v.cf]
    order_g = np.argsort(fg, kind="stable")
    bounds = np.flatnonzero(np.r_[True, fg[order_g][1:] != fg[order_g][:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:]):
        idx = order_g[a:b]
        ok = (rem[v.src[idx]] > 0) & (rem[P + v.dst[idx]] > 0)
        idx = idx[ok]
        if idx.size:
            rates[idx] += pair_waterfill(v, rem, idx)
        if not (rem[:P] > 0).any() or not (rem[P:] > 0).any():
            break
    # Map groups onto 8 hardware queues for reporting: group 0 -> queue 1, ..., capped at 8.
    return Allocation(rates, queue=np.minimum(g + 1, 8))


def check_rates_reference(rem: np.ndarray, rates: np.ndarray) -> tuple[float, bool]:
    """:func:`coflow.sched.kernels.check_rates` in numpy: (min over rate > 0 of rem / rate,
    every rate finite and >= 0)."""
    ok = bool(np.all((rates >= 0) & (rates < INF)))
    pos = (rates > 0) & (rates < INF)
    with np.errstate(over="ignore"):
        return (float((rem[pos] / rates[pos]).min()) if pos.any() else INF), ok


def advance_compact_reference(rem, sent, rates, dt, fin_before, pos, cf_moved, src, dst, red, cnt):
    """:func:`coflow.sched.kernels.advance_compact` flow by flow (the accumulation order of the
    per-coflow bytes moved is the flows' order).  Same in-place contract; returns the new length."""
    keep = []
    for f in range(rem.shape[0]):
        r, p = rates[f], pos[f]
        if r > 0:
            if rem[f] <= fin_before * r:
                cf_moved[p] += rem[f]
                cnt[p] -= 1
                continue
            moved = r * dt
            rem[f] -= moved
            sent[f] += moved
            cf_moved[p] += moved
        keep.append(f)
    n = len(keep)
    for a in (src, dst, red, rem, sent, pos):
        a[:n] = a[keep]
    return n


def madd_coflows_reference(order: np.ndarray, D: np.ndarray, rem: np.ndarray, tau: np.ndarray | None):
    """Varys's allocBandwidth per coflow, in numpy, coflow by coflow (what
    kernels.madd_coflows compiles): 1/Γ per coflow; ``rem`` updated in place."""
    rates_cf = np.zeros(D.shape[0])
    tol = np.maximum(rem, 1.0) * REL_TOL
    for k in order:
        d = D[k]
        nz = d > 0
        if not nz.any():
            continue
        r = rem[nz]
        if (r <= tol[nz]).any():
            continue
        g = (d[nz] / r).max()
        if tau is not None and np.isfinite(tau[k]):
            if tau[k] < g * (1 - 1e-9):
                continue
            g = tau[k]
        rates_cf[k] = 1.0 / g
        rem[nz] -= d[nz] / g
    np.maximum(rem, 0.0, out=rem)
    return rates_cf


def coflow_finish_in_reference(cf_lo, rem, rates):
    """Every coflow's finish time at these rates (max over its flows of rem / rate; inf if a
    flow with bytes has no rate), the minimum over coflows, and whether every rate is finite
    and >= 0: what kernels.coflow_finish_in computes with its early exits."""
    ok = bool(np.all((rates >= 0) & (rates < np.inf)))
    best = np.inf
    with np.errstate(over="ignore"):
        for k in range(len(cf_lo) - 1):
            m = 0.0
            for f in range(cf_lo[k], cf_lo[k + 1]):
                r = rates[f]
                if not (r >= 0.0 and r < np.inf):
                    m = np.inf
                elif r > 0:
                    m = max(m, rem[f] / r)
                elif rem[f] > 0:
                    m = np.inf
            best = min(best, m)
    return best, ok

"""MADD (Varys) and the per-link demand sums it and SEBF use.

Compiled (numba); moved out of the former single ``kernels.py`` unchanged (results bit-identical).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def madd_coflows(order, D, rem, rel_tol, tau, use_tau):
    """Varys's ``allocBandwidth`` per coflow (:func:`coflow.sched.primitives.madd_ordered`): for
    each coflow in ``order`` with demand ``D[k]`` (2P) whose links all have more than their
    tolerance left, Γ = max over its links of demand / residual (or ``tau[k]`` where
    ``use_tau`` and it is finite and at least Γ), 1 / Γ into the result and demand / Γ off
    ``rem`` (in place; clipped at 0 at the end)."""
    L = rem.shape[0]
    tol = np.empty(L)
    for l in range(L):
        tol[l] = max(rem[l], 1.0) * rel_tol
    out = np.zeros(D.shape[0])
    for c in range(order.shape[0]):
        k = order[c]
        anyd = False
        blocked = False
        g = 0.0
        for l in range(L):
            d = D[k, l]
            if d > 0:
                anyd = True
                if rem[l] <= tol[l]:
                    blocked = True
                    break
                q = d / rem[l]
                if q > g:
                    g = q
        if not anyd or blocked:
            continue
        if use_tau and np.isfinite(tau[k]):
            if tau[k] < g * (1 - 1e-9):
                continue  # cannot meet: no minimum allocation (admission control prevents this)
            g = tau[k]
        out[k] = 1.0 / g
        for l in range(L):
            d = D[k, l]
            if d > 0:
                rem[l] -= d / g
    for l in range(L):
        if rem[l] < 0.0:
            rem[l] = 0.0
    return out


@njit(cache=True)
def link_demand(cf, src, dst, w, P, C):
    """(C x 2P): ``w`` summed per coflow and link (uplink src, downlink P + dst), each cell in
    flow order (as ``np.bincount``)."""
    L = 2 * P
    m = np.zeros((C, L))
    n = src.shape[0]
    if n == 0:
        return m
    # consecutive flows mostly share a downlink (traces list a reducer's flows together): its
    # running sum stays in a register while (coflow, downlink) does not change, the same
    # additions in the same order without a store-to-load round trip per flow
    cur_c = cf[0]
    cur_d = dst[0]
    acc = 0.0
    for f in range(n):
        c = cf[f]
        d = dst[f]
        if c != cur_c or d != cur_d:
            m[cur_c, P + cur_d] = acc
            cur_c = c
            cur_d = d
            acc = m[c, P + d]
        m[c, src[f]] += w[f]
        acc += w[f]
    m[cur_c, P + cur_d] = acc
    return m


@njit(cache=True)
def segment_sum(lo, x):
    """Sum of ``x`` over each segment lo[k]:lo[k+1] (per-coflow totals of per-flow values)."""
    out = np.zeros(lo.shape[0] - 1)
    for k in range(lo.shape[0] - 1):
        acc = 0.0
        for f in range(lo[k], lo[k + 1]):
            acc += x[f]
        out[k] = acc
    return out

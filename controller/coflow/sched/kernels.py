"""Compiled inner loops (numba) of the rate computations and the simulator's event step.

They are the hot paths of :mod:`coflow.sched.primitives` and :mod:`coflow.sim`: loops over flows
or links that numpy would do in many passes with temporaries.  Each kernel is the only
implementation of its step; the modules above call it.
"""
from __future__ import annotations

import heapq

import numpy as np
from numba import njit

INF = np.inf


@njit(cache=True)
def fill(src, dst, w, idx, P, rem, rel_tol, N, C, rates):
    """Weighted max-min over the big switch for the flows ``idx``; adds their rates to ``rates``.

    Progressive filling: every unfrozen flow f runs at w_f * λ; a flow freezes when the first
    of its two links saturates.  So only the 2P link levels (the λ at which each link
    saturated) matter, and they are found from the per-(uplink, downlink) weight sums: each
    round costs O(P) plus O(P) per saturated link, whatever the number of flows.  A flow's
    rate is w_f * min(level(uplink), level(downlink)).  ``rem`` (2P) is updated in place.
    ``N`` and ``C`` are zeroed (P x P) scratch matrices, left zeroed on return."""
    W = np.zeros(2 * P)
    Wc = np.zeros(2 * P)  # flow counts: a link is live while it carries an unfrozen flow
    for k in range(idx.shape[0]):
        f = idx[k]
        N[src[f], dst[f]] += w[f]
        C[src[f], dst[f]] += 1.0
        W[src[f]] += w[f]
        W[P + dst[f]] += w[f]
        Wc[src[f]] += 1.0
        Wc[P + dst[f]] += 1.0
    tol = np.empty(2 * P)
    for l in range(2 * P):
        tol[l] = max(rem[l], 1.0) * rel_tol
    level = np.full(2 * P, INF)
    alive = Wc > 0.5
    sat = np.zeros(2 * P, dtype=np.bool_)
    lam = 0.0
    while True:
        step = INF
        anyl = False
        for l in range(2 * P):
            if alive[l] and Wc[l] > 0.5:
                anyl = True
                s = max(rem[l], 0.0) / W[l]
                if s < step:
                    step = s
        if not anyl:
            break
        lam += step
        for l in range(2 * P):
            sat[l] = False
            if alive[l] and Wc[l] > 0.5:
                rem[l] -= W[l] * step
                if rem[l] <= tol[l]:
                    sat[l] = True
                    level[l] = lam
        for i in range(P):
            if sat[i]:
                for j in range(P):
                    if alive[P + j] and C[i, j] > 0:
                        old = W[P + j]
                        W[P + j] -= N[i, j]
                        Wc[P + j] -= C[i, j]
                        if Wc[P + j] > 0.5 and W[P + j] <= 1e-9 * old:
                            # cancellation: recount the downlink's unfrozen weight exactly
                            acc = 0.0
                            for i2 in range(P):
                                if alive[i2] and i2 != i:
                                    acc += N[i2, j]
                            W[P + j] = acc
                alive[i] = False
                W[i] = 0.0
                Wc[i] = 0.0
        for j in range(P):
            if sat[P + j]:
                for i in range(P):
                    if alive[i] and C[i, j] > 0:
                        old = W[i]
                        W[i] -= N[i, j]
                        Wc[i] -= C[i, j]
                        if Wc[i] > 0.5 and W[i] <= 1e-9 * old:
                            acc = 0.0
                            for j2 in range(P):
                                if alive[P + j2] and j2 != j:
                                    acc += N[i, j2]
                            W[i] = acc
                alive[P + j] = False
                W[P + j] = 0.0
                Wc[P + j] = 0.0
    for l in range(2 * P):
        if rem[l] < 0:
            rem[l] = 0.0
    for k in range(idx.shape[0]):
        f = idx[k]
        N[src[f], dst[f]] = 0.0
        C[src[f], dst[f]] = 0.0
        a = level[src[f]]
        b = level[P + dst[f]]
        rates[f] += w[f] * (a if a < b else b)


@njit(cache=True)
def pair_levels(src, dst, w, P, rem, rel_tol):
    """Weighted max-min rates of all the flows (see :func:`fill`)."""
    rates = np.zeros(src.shape[0])
    fill(src, dst, w, np.arange(src.shape[0]), P, rem, rel_tol, np.zeros((P, P)), np.zeros((P, P)), rates)
    return rates


@njit(cache=True)
def ordered_fill(order, cf_lo, src, dst, w, eligible, P, rem, rel_tol, rates):
    """Strict priority across coflows in ``order``; weighted max-min inside each coflow over
    its eligible flows (w > 0) whose two links still have capacity.  Adds to ``rates``."""
    N = np.zeros((P, P))
    C = np.zeros((P, P))
    tol = np.empty(2 * P)
    for l in range(2 * P):
        tol[l] = max(rem[l], 1.0) * rel_tol
    buf = np.empty(src.shape[0], dtype=np.int64)
    for c in range(order.shape[0]):
        upfree = False
        for i in range(P):
            if rem[i] > tol[i]:
                upfree = True
                break
        dnfree = False
        for j in range(P):
            if rem[P + j] > tol[P + j]:
                dnfree = True
                break
        if not (upfree and dnfree):
            break
        k = order[c]
        n = 0
        for f in range(cf_lo[k], cf_lo[k + 1]):
            if eligible[f] and w[f] > 0 and rem[src[f]] > tol[src[f]] and rem[P + dst[f]] > tol[P + dst[f]]:
                buf[n] = f
                n += 1
        if n > 0:
            fill(src, dst, w, buf[:n], P, rem, rel_tol, N, C, rates)


@njit(cache=True)
def min_time_to_finish(rem, rates):
    m = INF
    for f in range(rem.shape[0]):
        if rates[f] > 0:
            t = rem[f] / rates[f]
            if t < m:
                m = t
    return m


@njit(cache=True)
def advance(rem, sent, rates, dt, fin_before, pos, cf_moved):
    """Advance every flow by ``dt`` at its rate.  Flows whose time to finish is at most
    ``fin_before`` finish now: they are credited exactly their remaining bytes.  Adds the bytes
    moved per coflow position into ``cf_moved``; returns the finished-flow mask."""
    n = rem.shape[0]
    fin = np.zeros(n, dtype=np.bool_)
    for f in range(n):
        r = rates[f]
        if r <= 0:
            continue
        if rem[f] <= fin_before * r:
            moved = rem[f]
            fin[f] = True
        else:
            moved = r * dt
        rem[f] -= moved
        sent[f] += moved
        cf_moved[pos[f]] += moved
    return fin


@njit(cache=True)
def compact(fin, src, dst, red, cof, rem, sent, size, pos, cnt):
    """Drop finished flows from the simulator's active arrays in one pass, in place.  Decrements
    the per-coflow flow counts ``cnt``.  Returns the new length (callers slice ``[:n]``)."""
    k = 0
    for f in range(fin.shape[0]):
        if fin[f]:
            cnt[pos[f]] -= 1
            continue
        if k != f:
            src[k] = src[f]
            dst[k] = dst[f]
            red[k] = red[f]
            cof[k] = cof[f]
            rem[k] = rem[f]
            sent[k] = sent[f]
            size[k] = size[f]
            pos[k] = pos[f]
        k += 1
    return k


@njit(cache=True)
def waterfill_links(links, w, rem, rel_tol):
    """Weighted max-min by progressive filling for flows that each cross ``links.shape[1]``
    arbitrary links (row f lists flow f's links).  Used where links are not just a port's
    uplink and downlink, e.g. HUG's per-(coflow, link) caps.  ``rem`` updated in place.

    Event-driven: every link's projected saturation level (level now + residual / unfrozen
    weight) sits in a heap; popping the lowest saturates that link and freezes its flows, which
    changes the weight of their other links, whose projections are pushed again.  Each flow
    is frozen once, so the cost is O(n k log L) whatever the number of distinct levels."""
    n, k = links.shape
    L = rem.shape[0]
    deg = np.zeros(L + 1, dtype=np.int64)
    W = np.zeros(L)
    for f in range(n):
        if w[f] > 0:
            for h in range(k):
                deg[links[f, h] + 1] += 1
                W[links[f, h]] += w[f]
    start = np.cumsum(deg)
    fill_at = start[:-1].copy()
    adj = np.empty(start[-1], dtype=np.int64)
    for f in range(n):
        if w[f] > 0:
            for h in range(k):
                l = links[f, h]
                adj[fill_at[l]] = f
                fill_at[l] += 1
    tol = np.empty(L)
    for l in range(L):
        tol[l] = max(rem[l], 1.0) * rel_tol
    last = np.zeros(L)  # level at which rem[l] was last brought up to date
    done = np.zeros(L, dtype=np.bool_)
    frozen = np.zeros(n, dtype=np.bool_)
    rate = np.zeros(n)
    heap = [(0.0, np.int64(0))]
    heap.pop()
    for l in range(L):
        if W[l] > 0:
            heapq.heappush(heap, (max(rem[l], 0.0) / W[l], np.int64(l)))
    lam = 0.0
    while len(heap) > 0:
        p, l = heapq.heappop(heap)
        if done[l] or W[l] <= 0:
            continue
        cur = last[l] + max(rem[l], 0.0) / W[l]
        if cur > p * (1 + 1e-12) + 1e-300:
            continue  # stale entry: a fresher one is in the heap
        if cur > lam:
            lam = cur
        rem[l] -= W[l] * (lam - last[l])
        last[l] = lam
        done[l] = True
        for a in range(start[l], start[l + 1]):
            f = adj[a]
            if frozen[f]:
                continue
            frozen[f] = True
            rate[f] = w[f] * lam
            for h in range(k):
                m = links[f, h]
                if m == l or done[m]:
                    continue
                rem[m] -= W[m] * (lam - last[m])
                last[m] = lam
                W[m] -= w[f]
                if W[m] > 1e-12 * w[f]:
                    heapq.heappush(heap, (lam + max(rem[m], 0.0) / W[m], m))
                else:
                    W[m] = 0.0
        W[l] = 0.0
    for l in range(L):
        if rem[l] < tol[l]:
            rem[l] = max(rem[l], 0.0)
    return rate

"""Max-min water-filling kernels: the general and unit-weight fills, pair levels, the ordered (backfill) fill, the heap-based link water-fill and the greedy fill.

Compiled (numba). Kernels over coflows take their flows as one :class:`Flows` (a named tuple
of arrays: numba passes it as a struct, as fast as the arrays it replaces).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit


INF = np.inf


class Flows(NamedTuple):
    """The flows over a big switch of P ports, grouped by coflow, as the kernels take them."""
    P: int  # ports: uplinks 0..P-1, downlinks P..2P-1 (link P + dst)
    cf_lo: np.ndarray  # int64 (C + 1): coflow k's flows are cf_lo[k]:cf_lo[k + 1]
    src: np.ndarray  # per flow: its uplink
    dst: np.ndarray  # per flow: its downlink (port)


@njit(cache=True)
def fill(src, dst, w, idx, P, rem, rel_tol, N, C, rates):
    """Weighted max-min over the big switch for the flows ``idx``; adds their rates to ``rates``.

    Progressive filling: every unfrozen flow f runs at w_f * λ; a flow freezes when the first
    of its two links saturates.  So only the 2P link levels (the λ at which each link
    saturated) matter, and they are found from the per-(uplink, downlink) weight sums: each
    round costs O(P) plus O(P) per saturated link, whatever the number of flows.  A flow's
    rate is w_f * min(level(uplink), level(downlink)).  ``rem`` (2P) is updated in place.
    ``N`` (float) and ``C`` (int32) are zeroed (P x P) scratch matrices, left zeroed on return:
    the weight and flow count per (downlink, uplink), downlink-major as traces list a reducer's flows; with
    many flows they are cleared whole (a scattered clear per flow costs a quarter of a large
    fill)."""
    W = np.zeros(2 * P)
    Wc = np.zeros(2 * P)  # flow counts: a link is live while it carries an unfrozen flow
    n = idx.shape[0]
    if n > 0:
        # a downlink's sums stay in registers while consecutive flows share it (same additions,
        # same order)
        cur = dst[idx[0]]
        aw = 0.0
        ac = 0.0
        for k in range(n):
            f = idx[k]
            d = dst[f]
            i = src[f]
            if d != cur:
                W[P + cur] = aw
                Wc[P + cur] = ac
                cur = d
                aw = W[P + d]
                ac = Wc[P + d]
            x = w[f]
            N[d, i] += x
            C[d, i] += 1
            W[i] += x
            Wc[i] += 1.0
            aw += x
            ac += 1.0
        W[P + cur] = aw
        Wc[P + cur] = ac
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
                    if alive[P + j] and C[j, i] > 0:
                        old = W[P + j]
                        W[P + j] -= N[j, i]
                        Wc[P + j] -= C[j, i]
                        if Wc[P + j] > 0.5 and W[P + j] <= 1e-9 * old:
                            # cancellation: recount the downlink's unfrozen weight exactly
                            acc = 0.0
                            for i2 in range(P):
                                if alive[i2] and i2 != i:
                                    acc += N[j, i2]
                            W[P + j] = acc
                alive[i] = False
                W[i] = 0.0
                Wc[i] = 0.0
        for j in range(P):
            if sat[P + j]:
                for i in range(P):
                    if alive[i] and C[j, i] > 0:
                        old = W[i]
                        W[i] -= N[j, i]
                        Wc[i] -= C[j, i]
                        if Wc[i] > 0.5 and W[i] <= 1e-9 * old:
                            acc = 0.0
                            for j2 in range(P):
                                if alive[P + j2] and j2 != j:
                                    acc += N[j2, i]
                            W[i] = acc
                alive[P + j] = False
                W[P + j] = 0.0
                Wc[P + j] = 0.0
    for l in range(2 * P):
        if rem[l] < 0:
            rem[l] = 0.0
    many = idx.shape[0] * 8 > P * P
    if many:
        N[:, :] = 0.0
        C[:, :] = 0
    for k in range(idx.shape[0]):
        f = idx[k]
        if not many:
            N[dst[f], src[f]] = 0.0
            C[dst[f], src[f]] = 0
        a = level[src[f]]
        b = level[P + dst[f]]
        rates[f] += w[f] * (a if a < b else b)


@njit(cache=True, inline='always')
def _capacity_left(rem, tol, P):
    """Some uplink (links 0..P-1) and some downlink (P..2P-1) still have more than ``tol``
    capacity left: otherwise no further flow can get a rate."""
    upfree = False
    for i in range(P):
        if rem[i] > tol[i]:
            upfree = True
            break
    if not upfree:
        return False
    for j in range(P):
        if rem[P + j] > tol[P + j]:
            return True
    return False


# inlined into its callers: as a plain call, _dense_fill measured ~5% slower than with the loop
# written out in place
@njit(cache=True, inline='always')
def _unit_levels(NT, W, P, rem, rel_tol, level):
    """:func:`fill`'s level loop for unit weights: ``W`` (2P) holds the flow counts per link
    (consumed), ``NT`` the counts per (downlink, uplink); writes the saturation level of every
    link into ``level`` (inf where none); ``rem`` updated in place."""
    tol = np.empty(2 * P)
    for l in range(2 * P):
        tol[l] = max(rem[l], 1.0) * rel_tol
        level[l] = INF
    act = np.empty(2 * P, dtype=np.int64)
    na = 0
    for l in range(2 * P):
        if W[l] > 0.5:
            act[na] = l
            na += 1
    alive = W > 0.5
    sat = np.zeros(2 * P, dtype=np.bool_)
    lam = 0.0
    while na > 0:
        step = INF
        for t in range(na):
            l = act[t]
            s = max(rem[l], 0.0) / W[l]
            if s < step:
                step = s
        lam += step
        for t in range(na):
            l = act[t]
            rem[l] -= W[l] * step
            if rem[l] <= tol[l]:
                sat[l] = True
                level[l] = lam
        # act is ascending: saturated uplinks first, then downlinks, each in index order
        for t in range(na):
            i = act[t]
            if i >= P:
                break
            if sat[i]:
                for j in range(P):
                    if alive[P + j] and NT[j, i] != 0:
                        W[P + j] -= NT[j, i]
                alive[i] = False
                W[i] = 0.0
        for t in range(na):
            l = act[t]
            if l < P or not sat[l]:
                continue
            j = l - P
            for i in range(P):
                if alive[i] and NT[j, i] != 0:
                    W[i] -= NT[j, i]
            alive[l] = False
            W[l] = 0.0
        m = 0
        for t in range(na):
            l = act[t]
            sat[l] = False
            if alive[l] and W[l] > 0.5:
                act[m] = l
                m += 1
        na = m
    for l in range(2 * P):
        if rem[l] < 0:
            rem[l] = 0.0


@njit(cache=True)
def fill_unit(src, dst, idx, P, rem, rel_tol, NT, rates):
    """:func:`fill` with every weight 1 (max-min fairness): the per-link weights are flow
    counts, so one int32 count matrix ``NT`` (downlink x uplink, zeroed, left zeroed) does for
    both of fill's matrices and the result is bit-identical to fill's.  Links without
    unfrozen flows are dropped from the scan (they take no part in any later step)."""
    W = np.zeros(2 * P)
    if idx.shape[0] * 8 > P * P:
        # many flows: link counts from the matrix's sums (the per-flow += on a link shared by
        # consecutive flows is a serial dependency chain)
        for k in range(idx.shape[0]):
            f = idx[k]
            NT[dst[f], src[f]] += 1
        for j in range(P):
            x = 0
            for i in range(P):
                m = NT[j, i]
                x += m
                W[i] += m
            W[P + j] = x
    else:
        for k in range(idx.shape[0]):
            f = idx[k]
            NT[dst[f], src[f]] += 1
            W[src[f]] += 1.0
            W[P + dst[f]] += 1.0
    level = np.empty(2 * P)
    _unit_levels(NT, W, P, rem, rel_tol, level)
    for k in range(idx.shape[0]):
        f = idx[k]
        a = level[src[f]]
        b = level[P + dst[f]]
        rates[f] += (a if a < b else b)
    if idx.shape[0] * 8 > P * P:
        NT[:, :] = 0
    else:
        for k in range(idx.shape[0]):
            f = idx[k]
            NT[dst[f], src[f]] = 0


@njit(cache=True)
def pair_levels_unit(src, dst, P, rem, rel_tol):
    """Max-min fair rates of all the flows (unit weights; :func:`fill_unit` without an index
    list, link counts from the count matrix's row and column sums)."""
    n = src.shape[0]
    NT = np.zeros((P, P), dtype=np.int32)
    for f in range(n):
        NT[dst[f], src[f]] += 1
    W = np.zeros(2 * P)
    for j in range(P):
        x = 0
        for i in range(P):
            m = NT[j, i]
            x += m
            W[i] += m
        W[P + j] = x
    level = np.empty(2 * P)
    _unit_levels(NT, W, P, rem, rel_tol, level)
    rates = np.empty(n)
    for f in range(n):
        a = level[src[f]]
        b = level[P + dst[f]]
        rates[f] = (a if a < b else b)
    return rates


@njit(cache=True)
def pair_levels(src, dst, w, P, rem, rel_tol):
    """Weighted max-min rates of all the flows (see :func:`fill`)."""
    rates = np.zeros(src.shape[0])
    unit = True
    for f in range(w.shape[0]):
        if w[f] != 1.0:
            unit = False
            break
    if unit:
        fill_unit(src, dst, np.arange(src.shape[0]), P, rem, rel_tol, np.zeros((P, P), dtype=np.int32), rates)
    else:
        fill(src, dst, w, np.arange(src.shape[0]), P, rem, rel_tol, np.zeros((P, P)), np.zeros((P, P), dtype=np.int32),
             rates)
    return rates


@njit(cache=True)
def ordered_fill(fl, order, w, eligible, rem, rel_tol, rates):
    """Strict priority across coflows in ``order``; weighted max-min inside each coflow over
    its eligible flows (w > 0) whose two links still have capacity.  Adds to ``rates``."""
    P, cf_lo, src, dst = fl.P, fl.cf_lo, fl.src, fl.dst
    N = np.zeros((P, P))
    C = np.zeros((P, P), dtype=np.int32)
    tol = np.empty(2 * P)
    for l in range(2 * P):
        tol[l] = max(rem[l], 1.0) * rel_tol
    buf = np.empty(src.shape[0], dtype=np.int64)
    for c in range(order.shape[0]):
        if not _capacity_left(rem, tol, P):
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
def _hless(key, a, b):
    return key[a] < key[b] or (key[a] == key[b] and a < b)


@njit(cache=True)
def _hup(heap, hpos, key, i):
    x = heap[i]
    while i > 0:
        p = (i - 1) >> 1
        if _hless(key, x, heap[p]):
            heap[i] = heap[p]
            hpos[heap[i]] = i
            i = p
        else:
            break
    heap[i] = x
    hpos[x] = i


@njit(cache=True)
def _hdown(heap, hpos, key, i, n):
    x = heap[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _hless(key, heap[c + 1], heap[c]):
            c += 1
        if _hless(key, heap[c], x):
            heap[i] = heap[c]
            hpos[heap[i]] = i
            i = c
        else:
            break
    heap[i] = x
    hpos[x] = i


@njit(cache=True, inline='always')
def _heap_push_or_lower(heap, hpos, key, m, x, hn):
    """Link m into the indexed heap at key x, or its key lowered to x if it is there with a
    higher one; returns the heap's size."""
    i = hpos[m]
    if i < 0:
        key[m] = x
        heap[hn] = m
        hpos[m] = hn
        hn += 1
        _hup(heap, hpos, key, hn - 1)
    elif x < key[m]:
        key[m] = x
        _hup(heap, hpos, key, i)
    return hn


@njit(cache=True, inline='always')
def _heap_pop_top(heap, hpos, key, hn):
    """Remove the heap's top (heap[0]); returns the new size."""
    hpos[heap[0]] = -1
    hn -= 1
    if hn > 0:
        heap[0] = heap[hn]
        hpos[heap[0]] = 0
        _hdown(heap, hpos, key, 0, hn)
    return hn


@njit(cache=True, inline='always')
def _saturate(l, lam, rem, last, W, done):
    """Link l saturates: the fill level rises to its saturation level if that is higher;
    its residual is brought up to date at that level. Returns the level."""
    cur = last[l] + max(rem[l], 0.0) / W[l]
    if cur > lam:
        lam = cur
    rem[l] -= W[l] * (lam - last[l])
    last[l] = lam
    done[l] = True
    return lam


@njit(cache=True, inline='always')
def _heap_of_projections(W, rem, L, key, proj, heap, hpos):
    """Every link l < L with weight W[l] > 0 into the indexed heap, keyed (and projected) at
    its saturation level rem[l] / W[l] from level 0; returns the heap's size."""
    hn = 0
    for l in range(L):
        if W[l] > 0:
            key[l] = max(rem[l], 0.0) / W[l]
            proj[l] = key[l]
            heap[hn] = l
            hpos[l] = hn
            hn += 1
            _hup(heap, hpos, key, hn - 1)
    return hn


@njit(cache=True)
def waterfill_links(links, w, rem, rel_tol):
    """Weighted max-min by progressive filling for flows that each cross ``links.shape[1]``
    arbitrary links (row f lists flow f's links).  Used where links are not just a port's
    uplink and downlink, e.g. HUG's per-(coflow, link) caps.  ``rem`` updated in place.

    Event-driven: every link's projected saturation level (level now + residual / unfrozen
    weight) is the key of an indexed heap (one entry per link, ties by link index); popping the
    lowest saturates that link and freezes its flows, which changes the weight of their other
    links, whose projections are recomputed once per saturation.  Each flow is frozen once.

    Lazy keys: freezing a flow lowers its other links' weights, which can only postpone their
    saturation, so a link's heap key is left as a lower bound of its projection (``proj``) and
    the link is re-seated only when it reaches the top with a stale key (or moved up at once in
    the rare case rounding made the new projection smaller).  The link popped is the same as
    with exact keys: the least (projection, link index), since every other key is at most its
    link's projection; and the projections are the same floating-point expressions.  A link
    whose weight changes at every saturation costs one heap move when it gets near the top, not
    one per saturation."""
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
    key = np.full(L, INF)  # heap key: at most the link's projection
    proj = np.full(L, INF)  # the link's projected saturation level
    heap = np.empty(L, dtype=np.int64)
    hpos = np.full(L, -1, dtype=np.int64)
    hn = _heap_of_projections(W, rem, L, key, proj, heap, hpos)
    lam = 0.0
    touched = np.zeros(L, dtype=np.bool_)
    tl = np.empty(L, dtype=np.int64)
    lastw = np.zeros(L)
    while hn > 0:
        l = heap[0]
        if key[l] != proj[l] and not done[l] and W[l] > 0:
            key[l] = proj[l]  # stale: its projection is later than its key
            _hdown(heap, hpos, key, 0, hn)
            continue
        hn = _heap_pop_top(heap, hpos, key, hn)
        if done[l] or W[l] <= 0:
            continue
        lam = _saturate(l, lam, rem, last, W, done)
        nt = 0
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
                lastw[m] = w[f]
                if not touched[m]:
                    touched[m] = True
                    tl[nt] = m
                    nt += 1
        # one fresh projection per link whose weight changed (not one per frozen flow)
        for t in range(nt):
            m = tl[t]
            touched[m] = False
            if W[m] > 1e-12 * lastw[m]:
                x = lam + max(rem[m], 0.0) / W[m]
                proj[m] = x
                hn = _heap_push_or_lower(heap, hpos, key, m, x, hn)
            else:
                W[m] = 0.0
        W[l] = 0.0
    for l in range(L):
        if rem[l] < tol[l]:
            rem[l] = max(rem[l], 0.0)
    return rate


@njit(cache=True)
def greedy_fill(order_flows, src, dst, P, rem, rel_tol, rates, chunk):
    """Strict per-flow priority (:func:`coflow.sched.primitives.greedy`): each flow in
    ``order_flows`` takes min(Rem(up), Rem(down)) unless one of them is at most its tolerance;
    every ``chunk`` flows the scan stops if every uplink or every downlink is full."""
    tol = np.empty(2 * P)
    for l in range(2 * P):
        tol[l] = max(rem[l], 1.0) * rel_tol
    for c in range(order_flows.shape[0]):
        if c % chunk == 0:
            if not _capacity_left(rem, tol, P):
                break
        f = order_flows[c]
        s = src[f]
        d = P + dst[f]
        r = rem[s] if rem[s] < rem[d] else rem[d]
        if r <= tol[s] or r <= tol[d]:
            continue
        rates[f] += r
        rem[s] -= r
        rem[d] -= r
    for l in range(2 * P):
        if rem[l] < 0:
            rem[l] = 0.0

"""HUG: the progress-equalising fill and its work-conserving second phase (sparse and dense forms).

Compiled (numba); moved out of the former single ``kernels.py`` unchanged (results bit-identical).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .waterfill import INF, _hdown, _heap_of_projections, _heap_pop_top, _heap_push_or_lower, _saturate
from .step import _SLACK, _TINY

@njit(cache=True)
def hug_prepare(src, dst, cf, remaining, caps, P, C):
    """HUG's DRF stage and the residuals of its second stage's links (same arithmetic as
    :func:`coflow.sched.isolation.drf_rates` and the numpy reference of ``Hug.allocate``: each
    per-cell sum adds the flows in order; the up- and downlink sums, which never share a cell,
    are taken in the same pass).  Returns (DRF rates, P*, residual capacity of the 2P physical
    links followed by the C*2P virtual (coflow, link) caps, see :func:`hug_fill`)."""
    n = src.shape[0]
    L = 2 * P
    D = np.zeros(C * L)
    # flows come in runs sharing a downlink (a reducer's flows): that cell's running sum stays
    # in a register during a run (the same additions in the same order)
    cd = -1
    ad = 0.0
    for f in range(n):
        x = remaining[f]
        D[cf[f] * L + src[f]] += x
        c = cf[f] * L + P + dst[f]
        if c != cd:
            if cd >= 0:
                D[cd] = ad
            cd = c
            ad = D[c]
        ad += x
    if cd >= 0:
        D[cd] = ad
    dbar = np.zeros(C)
    t = np.zeros(C * L)
    for k in range(C):
        m = 0.0
        for l in range(L):
            d = D[k * L + l]
            x = d / caps[l] if d > 0 else 0.0
            t[k * L + l] = x
            if x > m:
                m = x
        dbar[k] = m
    colsum = np.zeros(L)
    for k in range(C):
        for l in range(L):
            colsum[l] += (t[k * L + l] / dbar[k]) if dbar[k] > 0 else 0.0
    smax = 0.0
    for l in range(L):
        if colsum[l] > smax:
            smax = colsum[l]
    pstar = 1.0 / smax if smax > 0 else INF
    rates = np.zeros(n)
    allrem = np.empty(L + C * L)
    if not pstar < INF:
        return rates, pstar, allrem
    used = np.zeros(L)
    usage = np.zeros(C * L)
    cd = -1
    cu = -1
    ad = 0.0
    au = 0.0
    for f in range(n):
        db = dbar[cf[f]]
        r = pstar * remaining[f] / db if db > 0 else 0.0
        rates[f] = r
        used[src[f]] += r
        usage[cf[f] * L + src[f]] += r
        d = P + dst[f]
        c = cf[f] * L + d
        if d != cu:
            if cu >= 0:
                used[cu] = au
            cu = d
            au = used[d]
        au += r
        if c != cd:
            if cd >= 0:
                usage[cd] = ad
            cd = c
            ad = usage[c]
        ad += r
    if cu >= 0:
        used[cu] = au
    if cd >= 0:
        usage[cd] = ad
    for l in range(L):
        allrem[l] = max(caps[l] - used[l], 0.0)
    for k in range(C):
        for l in range(L):
            allrem[L + k * L + l] = max(pstar * caps[l] - usage[k * L + l], 0.0)
    return rates, pstar, allrem


@njit(cache=True, inline='always')
def _hug_retouch(tl, nt, touched, W, rem, lam, key, proj, dirty, heap, hpos, hn):
    """After a saturation at level ``lam``: the links ``tl[:nt]`` whose weight changed get their
    projection recomputed and their heap key lowered if it must be (or are marked dirty: see
    :func:`waterfill_links`); links left without unfrozen flows get weight 0.  Returns the
    heap's size."""
    for t in range(nt):
        m = tl[t]
        touched[m] = False
        if W[m] > 1e-12:
            i = hpos[m]
            r = max(rem[m], 0.0)
            # the new projection lam + r / W can fall below the key (by rounding) only if
            # r < (key - lam) * W (with margin); otherwise it is computed when needed
            bnd = (key[m] - lam) * W[m]
            if i >= 0 and not (r < bnd * _SLACK or bnd < _TINY):
                dirty[m] = True
                continue
            x = lam + r / W[m]
            proj[m] = x
            dirty[m] = False
            hn = _heap_push_or_lower(heap, hpos, key, m, x, hn)
        else:
            W[m] = 0.0
    return hn


@njit(cache=True, inline='always')
def _hug_top(heap, hpos, key, proj, dirty, last, rem, W, done, hn):
    """The heap's top link if it saturates next: (link, new heap size); (-1, size) when the
    top's key was stale (re-keyed and pushed down) or the link has nothing left to freeze."""
    l = heap[0]
    if not done[l] and W[l] > 0:
        if dirty[l]:
            # the expression waterfill_links evaluates at the link's last change
            # (last[l] is the level of that change)
            proj[l] = last[l] + max(rem[l], 0.0) / W[l]
            dirty[l] = False
        if key[l] != proj[l]:
            key[l] = proj[l]  # stale (see waterfill_links)
            _hdown(heap, hpos, key, 0, hn)
            return -1, hn
    hn = _heap_pop_top(heap, hpos, key, hn)
    if done[l] or W[l] <= 0:
        return -1, hn
    return l, hn


@njit(cache=True)
def _hug_rates(src, dst, cf, P, level, base, rem, tol):
    """Each flow's rate: ``base`` plus the least saturation level of its 4 links (0 if none
    saturated); residuals within tolerance clamped at 0."""
    n = src.shape[0]
    P2 = 2 * P
    rate = np.empty(n)
    for f in range(n):
        v = P2 + cf[f] * P2
        x = level[src[f]]
        y = level[P + dst[f]]
        x = x if x < y else y
        y = level[v + src[f]]
        x = x if x < y else y
        y = level[v + P + dst[f]]
        x = x if x < y else y
        rate[f] = base[f] + (x if x < INF else 0.0)
    for l in range(rem.shape[0]):
        if rem[l] < tol[l]:
            rem[l] = max(rem[l], 0.0)
    return rate


@njit(cache=True)
def hug_fill(src, dst, cf, P, C, rem, rel_tol, base):
    """:func:`waterfill_links` for HUG's second stage, unit weights, without a links matrix:
    flow f crosses uplink src[f], downlink P + dst[f] and its coflow's two virtual links
    2P + cf[f] * 2P + src[f] and 2P + cf[f] * 2P + P + dst[f] (``rem``: 2P + C * 2P residuals,
    updated in place).  Same steps and results as :func:`waterfill_links` (same heap order,
    same floating-point expressions), organised so that no step touches per-flow memory at
    random:

    - the flows of a link come from two counting sorts (by uplink, by downlink), taken in
      coflow order, so that a virtual link's flows are one run inside its port's list (its
      start recorded during the sort, its length its flow count); each entry holds the flow's
      other port and its coflow, all that freezing it needs;
    - a flow is frozen by the first of its links to saturate, so it is still unfrozen when
      link l saturates iff none of its other links has saturated before (no per-flow flag);
    - its rate is then the level at which that first link saturated, i.e. the least
      saturation level of its 4 links, computed in one pass at the end.

    With unit weights the link weights are flow counts (exact in any order) and a link's
    residual is brought up to date once per saturation, so the order in which a link's flows
    are frozen does not change any value.  Returns ``base`` (the DRF stage's rates) plus each
    flow's water-fill rate."""
    n = src.shape[0]
    L = rem.shape[0]
    P2 = 2 * P
    sorted_cf = True
    for f in range(1, n):
        if cf[f] < cf[f - 1]:
            sorted_cf = False
            break
    byc = np.empty(0, dtype=np.int64)
    if not sorted_cf:
        byc = np.argsort(cf, kind="mergesort")
    W = np.zeros(L)
    start_s = np.zeros(P + 1, dtype=np.int64)
    start_d = np.zeros(P + 1, dtype=np.int64)
    for f in range(n):
        s0 = src[f]
        d0 = dst[f]
        start_s[s0 + 1] += 1
        start_d[d0 + 1] += 1
        v = P2 + cf[f] * P2
        W[v + s0] += 1.0
        W[v + P + d0] += 1.0
    for i in range(P):
        W[i] = start_s[i + 1]
        W[P + i] = start_d[i + 1]
        start_s[i + 1] += start_s[i]
        start_d[i + 1] += start_d[i]
    at_s = start_s[:P].copy()
    at_d = start_d[:P].copy()
    last_s = np.full(P, -1, dtype=np.int64)
    last_d = np.full(P, -1, dtype=np.int64)
    # list entries: coflow << 32 | the flow's other port
    ent_s = np.empty(n, dtype=np.int64)
    ent_d = np.empty(n, dtype=np.int64)
    vstart = np.zeros(L, dtype=np.int64)
    for b in range(n):
        f = b if sorted_cf else byc[b]
        c = cf[f]
        s0 = src[f]
        d0 = dst[f]
        a = at_s[s0]
        ent_s[a] = (c << 32) | d0
        at_s[s0] = a + 1
        if last_s[s0] != c:
            last_s[s0] = c
            vstart[P2 + c * P2 + s0] = a
        a = at_d[d0]
        ent_d[a] = (c << 32) | s0
        at_d[d0] = a + 1
        if last_d[d0] != c:
            last_d[d0] = c
            vstart[P2 + c * P2 + P + d0] = a
    runlen = W.copy()  # a virtual link's run length is its initial flow count
    tol = np.empty(L)
    for l in range(L):
        tol[l] = max(rem[l], 1.0) * rel_tol
    last = np.zeros(L)
    done = np.zeros(L, dtype=np.bool_)
    level = np.full(L, INF)  # saturation level of each link
    key = np.full(L, INF)  # heap key: at most the link's projection
    proj = np.full(L, INF)  # the link's projected saturation level, unless dirty
    dirty = np.zeros(L, dtype=np.bool_)  # proj not computed since the link's last change
    heap = np.empty(L, dtype=np.int64)
    hpos = np.full(L, -1, dtype=np.int64)
    hn = _heap_of_projections(W, rem, L, key, proj, heap, hpos)
    lam = 0.0
    touched = np.zeros(L, dtype=np.bool_)
    tl = np.empty(L, dtype=np.int64)
    links = np.empty(4, dtype=np.int64)
    mask = (1 << 32) - 1
    while hn > 0:
        l, hn = _hug_top(heap, hpos, key, proj, dirty, last, rem, W, done, hn)
        if l < 0:
            continue
        lam = _saturate(l, lam, rem, last, W, done)
        level[l] = lam
        # the flows of link l: a port's whole list, or a virtual link's run in it
        if l < P2:
            h0 = l
            a0 = -1
        else:
            k0 = (l - P2) // P2
            h0 = l - P2 - k0 * P2
            a0 = vstart[l]
        if h0 < P:
            ent = ent_s
            port = h0
            a1 = start_s[port + 1]
            if a0 < 0:
                a0 = start_s[port]
        else:
            ent = ent_d
            port = h0 - P
            a1 = start_d[port + 1]
            if a0 < 0:
                a0 = start_d[port]
        if l >= P2:
            a1 = a0 + int(runlen[l])
        by_src = h0 < P
        nt = 0
        for a in range(a0, a1):
            e = ent[a]
            o = e & mask
            v = P2 + (e >> 32) * P2
            if by_src:
                links[0] = port
                links[1] = P + o
                links[2] = v + port
                links[3] = v + P + o
            else:
                links[0] = o
                links[1] = P + port
                links[2] = v + o
                links[3] = v + P + port
            frozen = False
            for h in range(4):
                m = links[h]
                if m != l and done[m]:
                    frozen = True
                    break
            if frozen:
                continue
            for h in range(4):
                m = links[h]
                if m == l:
                    continue
                rem[m] -= W[m] * (lam - last[m])
                last[m] = lam
                W[m] -= 1.0
                if not touched[m]:
                    touched[m] = True
                    tl[nt] = m
                    nt += 1
        hn = _hug_retouch(tl, nt, touched, W, rem, lam, key, proj, dirty, heap, hpos, hn)
        W[l] = 0.0
    return _hug_rates(src, dst, cf, P, level, base, rem, tol)


@njit(cache=True)
def hug_fill_dense(src, dst, cf, P, C, rem, rel_tol, base, scratch):
    """:func:`hug_fill` for few, wide coflows: the flows of each coflow counted in a P x P
    matrix (and its transpose), so that a saturating link freezes its flows by scanning matrix
    rows (its coflow's row for a virtual link, every coflow's row for a port) instead of
    per-flow lists, and nothing is sorted.  ``scratch``: int32 (2, >= C, P, P), overwritten.
    Costs O(C * P^2) memory and time per call instead of O(flows): :func:`coflow.sched.isolation.Hug` takes it when C * P^2 is at most a few
    times the flow count.  The flows a saturation freezes, the links they touch and every
    floating-point step are the same as :func:`hug_fill`'s (a link's residual is brought up to
    date once per saturation, its weight is a count), so the rates are bit-identical.  (The
    per-link update is written out in each loop, as in :func:`hug_fill`: as an inlined helper
    both kernels measured twice as slow.)"""
    n = src.shape[0]
    L = rem.shape[0]
    P2 = 2 * P
    M = scratch[0, :C]  # [coflow, uplink, downlink]
    MT = scratch[1, :C]  # [coflow, downlink, uplink]
    M[:, :, :] = 0
    W = np.zeros(L)
    for f in range(n):
        M[cf[f], src[f], dst[f]] += 1
    for c in range(C):
        for u in range(P):
            for d in range(P):
                MT[c, d, u] = M[c, u, d]
    for c in range(C):
        v = P2 + c * P2
        for u in range(P):
            x = 0
            for d in range(P):
                x += M[c, u, d]
            W[v + u] = x
            W[u] += x
        for d in range(P):
            x = 0
            for u in range(P):
                x += MT[c, d, u]
            W[v + P + d] = x
            W[P + d] += x
    tol = np.empty(L)
    for l in range(L):
        tol[l] = max(rem[l], 1.0) * rel_tol
    last = np.zeros(L)
    done = np.zeros(L, dtype=np.bool_)
    level = np.full(L, INF)
    key = np.full(L, INF)
    proj = np.full(L, INF)
    dirty = np.zeros(L, dtype=np.bool_)
    heap = np.empty(L, dtype=np.int64)
    hpos = np.full(L, -1, dtype=np.int64)
    hn = _heap_of_projections(W, rem, L, key, proj, heap, hpos)
    lam = 0.0
    touched = np.zeros(L, dtype=np.bool_)
    tl = np.empty(L, dtype=np.int64)
    while hn > 0:
        l, hn = _hug_top(heap, hpos, key, proj, dirty, last, rem, W, done, hn)
        if l < 0:
            continue
        lam = _saturate(l, lam, rem, last, W, done)
        level[l] = lam
        if l < P2:
            h0 = l
            c0, c1 = 0, C
        else:
            c0 = (l - P2) // P2
            h0 = l - P2 - c0 * P2
            c1 = c0 + 1
        nt = 0
        for c in range(c0, c1):
            v = P2 + c * P2
            if h0 < P:
                # uplink h0 (a port, or coflow c's share of it): the row of M
                u = h0
                if l < P2 and done[v + u]:
                    continue  # coflow c's flows on u were frozen by its virtual link
                row = M[c, u]
                ka = 0  # flows frozen: all cross the other uplink-side link
                for d in range(P):
                    k = row[d]
                    if k == 0 or done[P + d] or done[v + P + d]:
                        continue
                    ka += k
                    for m in (P + d, v + P + d):
                        rem[m] -= W[m] * (lam - last[m])
                        last[m] = lam
                        W[m] -= k
                        if not touched[m]:
                            touched[m] = True
                            tl[nt] = m
                            nt += 1
                if ka > 0:
                    m = u if l >= P2 else v + u
                    rem[m] -= W[m] * (lam - last[m])
                    last[m] = lam
                    W[m] -= ka
                    if not touched[m]:
                        touched[m] = True
                        tl[nt] = m
                        nt += 1
            else:
                d = h0 - P
                if l < P2 and done[v + P + d]:
                    continue
                row = MT[c, d]
                ka = 0
                for u in range(P):
                    k = row[u]
                    if k == 0 or done[u] or done[v + u]:
                        continue
                    ka += k
                    for m in (u, v + u):
                        rem[m] -= W[m] * (lam - last[m])
                        last[m] = lam
                        W[m] -= k
                        if not touched[m]:
                            touched[m] = True
                            tl[nt] = m
                            nt += 1
                if ka > 0:
                    m = P + d if l >= P2 else v + P + d
                    rem[m] -= W[m] * (lam - last[m])
                    last[m] = lam
                    W[m] -= ka
                    if not touched[m]:
                        touched[m] = True
                        tl[nt] = m
                        nt += 1
        hn = _hug_retouch(tl, nt, touched, W, rem, lam, key, proj, dirty, heap, hpos, hn)
        W[l] = 0.0
    return _hug_rates(src, dst, cf, P, level, base, rem, tol)

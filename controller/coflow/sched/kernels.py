"""Compiled inner loops (numba) of the rate computations and the simulator's event step.

They are the hot paths of :mod:`coflow.sched.primitives` and :mod:`coflow.sim`: loops over flows
or links that numpy would do in many passes with temporaries.  Each kernel is the only
implementation of its step; the modules above call it.
"""
from __future__ import annotations

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
def ordered_fill(order, cf_lo, src, dst, w, eligible, P, rem, rel_tol, rates):
    """Strict priority across coflows in ``order``; weighted max-min inside each coflow over
    its eligible flows (w > 0) whose two links still have capacity.  Adds to ``rates``."""
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


# x / r < m (real) implies x < m * r; the product, rounded, times this slack stays above m * r,
# so a flow that passes no test below cannot have a time to finish under m: the scans divide
# only for the few flows that may lower the minimum (division is the loops' slowest step), and
# the minimum is still the exact min over x / r.
_SLACK = 1.0 + 2.0 ** -40
_TINY = 1e-280  # below this the product may have lost its relative accuracy (underflow): divide


@njit(cache=True, inline='always')
def _may_beat(x, r, m):
    b = m * r
    return x < b * _SLACK or b < _TINY


@njit(cache=True)
def dclas_demotion_times(cf_lo, rates, queues, sent, hi_q, K, now, delta):
    """The numeric part of :func:`coflow.sched.queues.dclas_next_demotion` in one pass: per
    coflow, its rate (the sum of its flows' rates, as :func:`segment_sum`), then state 2 if it
    has crossed its queue's upper threshold ``hi_q[q - 1]`` (q < K), 1 if it is growing towards
    it (the coordination tick at which it crosses goes into ``t``), 0 otherwise (nothing due)."""
    C = queues.shape[0]
    t = np.full(C, INF)
    state = np.zeros(C, dtype=np.int8)
    for k in range(C):
        acc = 0.0
        for f in range(cf_lo[k], cf_lo[k + 1]):
            acc += rates[f]
        q = queues[k]
        if q >= K:
            continue
        hi = hi_q[q - 1]
        if sent[k] >= hi * (1 - 1e-12):
            state[k] = 2
        elif acc > 0:
            state[k] = 1
            x = now + (hi - sent[k]) / acc
            t[k] = np.ceil(x / delta - 1e-9) * delta if delta > 0 else x
    return t, state


@njit(cache=True)
def check_rates(rem, rates):
    """One pass over the simulator's rates: (time until the first flow finishes, all rates
    finite and >= 0)."""
    m = INF
    ok = True
    for f in range(rem.shape[0]):
        r = rates[f]
        if not (r >= 0.0 and r < INF):
            ok = False
        elif r > 0 and _may_beat(rem[f], r, m):
            t = rem[f] / r
            if t < m:
                m = t
    return m, ok


@njit(cache=True)
def coflow_finish_in(cf_lo, rem, rates):
    """(Time until the first coflow finishes at these rates: min over coflows of the max over
    its flows of rem / rate, inf for a coflow with a flow that has bytes and no rate; all rates
    finite and >= 0.)"""
    best = INF
    ok = True
    for k in range(cf_lo.shape[0] - 1):
        m = 0.0
        for f in range(cf_lo[k], cf_lo[k + 1]):
            r = rates[f]
            if not (r >= 0.0 and r < INF):
                ok = False
                m = INF
            elif m >= best:
                # this coflow cannot finish first any more: only the rates' check is left
                continue
            elif r > 0:
                t = rem[f] / r
                if t > m:
                    m = t
            elif rem[f] > 0:
                m = INF
        if m < best:
            best = m
    return best, ok


@njit(cache=True)
def advance_compact(rem, sent, rates, dt, fin_before, pos, cf_moved, src, dst, red, cnt):
    """Advance every flow by ``dt`` at its rate and drop finished flows from the active arrays
    (in place) in the same pass.  Flows whose time to finish is at most ``fin_before`` finish
    now: they are credited exactly their remaining bytes.  Adds the bytes moved per coflow
    position into ``cf_moved`` and decrements the per-coflow flow counts ``cnt`` for finished
    flows.  Returns the new length (callers slice ``[:n]``).

    Flows come grouped by coflow: the running per-coflow sum stays in a register while ``pos``
    does not change (the same additions in the same order as ``cf_moved[p] += moved`` per
    flow, without a store-to-load round trip per flow)."""
    n = rem.shape[0]
    k = 0
    cur = -1
    acc = 0.0
    dec = 0
    for f in range(n):
        r = rates[f]
        p = pos[f]
        if p != cur:
            if cur >= 0:
                cf_moved[cur] = acc
                cnt[cur] -= dec
            cur = p
            acc = cf_moved[p]
            dec = 0
        if r > 0:
            x = rem[f]
            if x <= fin_before * r:
                acc += x
                dec += 1
                continue
            moved = r * dt
            rem[f] = x - moved
            sent[f] += moved
            acc += moved
        if k != f:
            src[k] = src[f]
            dst[k] = dst[f]
            red[k] = red[f]
            rem[k] = rem[f]
            sent[k] = sent[f]
            pos[k] = p
        k += 1
    if cur >= 0:
        cf_moved[cur] = acc
        cnt[cur] -= dec
    return k


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


# Queue-based max-min (D-CLAS, Fai) ---------------------------------------------------------------
#
# Inside a coflow every flow has weight 1, so :func:`fill` only ever sees integer weights: its
# per-link weights are flow counts, exact in floating point whatever the summation order.  A
# coflow with many flows is therefore handled as a dense (P x P) matrix of flow counts per
# (uplink, downlink) pair: the link weights come from the matrix (O(P^2), not O(flows)), the
# water-fill runs on link levels only, and the flows' rates are written once at the end
# (rate += min(level(uplink), level(downlink)) per fill, in the same order as before).  The
# arithmetic is the same as :func:`fill`'s, step by step, so the rates are bit-identical.


@njit(cache=True)
def _restricted_counts(MT, rs, cs, P, e, W):
    """W[l] = flows of the count matrix (``MT``: its transpose, downlink x uplink; ``rs``/``cs``:
    its row and column sums) on link l whose two links are both in ``e``.  Integer counts:
    exact in any order, so each sum runs over the ineligible or the eligible side, whichever
    is smaller."""
    nbu = 0
    nbd = 0
    for i in range(P):
        if not e[i]:
            nbu += 1
        if not e[P + i]:
            nbd += 1
    # uplinks: sums over downlinks (rows of MT), vectorised over uplinks
    if nbd <= P - nbd:
        for i in range(P):
            W[i] = rs[i]
        for j in range(P):
            if not e[P + j]:
                for i in range(P):
                    W[i] -= MT[j, i]
    else:
        for i in range(P):
            W[i] = 0.0
        for j in range(P):
            if e[P + j]:
                for i in range(P):
                    W[i] += MT[j, i]
    for i in range(P):
        if not e[i]:
            W[i] = 0.0
    # downlinks: sums over uplinks within each row of MT
    for j in range(P):
        if not e[P + j]:
            W[P + j] = 0.0
        elif nbu <= P - nbu:
            x = cs[j]
            for i in range(P):
                if not e[i]:
                    x -= MT[j, i]
            W[P + j] = x
        else:
            x = 0
            for i in range(P):
                if e[i]:
                    x += MT[j, i]
            W[P + j] = x


@njit(cache=True)
def _dense_fill(MT, rs, cs, P, rem, rel_tol, e, lv):
    """:func:`fill` (unit weights) for the flows counted in ``M`` whose two links are in ``e``.
    Writes the link levels into ``lv`` (0 on links outside ``e``, so that min(level(up),
    level(down)) is each flow's rate, 0 for flows not eligible).  Returns False if no flow is
    eligible (nothing done).  Same steps as :func:`fill`; links without unfrozen flows are
    dropped from the scan (they take no part in any later step)."""
    W = np.empty(2 * P)
    _restricted_counts(MT, rs, cs, P, e, W)
    any_flow = False
    for l in range(2 * P):
        if W[l] > 0.5:
            any_flow = True
            break
    if not any_flow:
        return False
    level = np.empty(2 * P)
    _unit_levels(MT, W, P, rem, rel_tol, level)
    for l in range(2 * P):
        lv[l] = level[l] if e[l] else 0.0
    return True


@njit(cache=True)
def _ordered_units(seg, cf_lo, src, dst, P, rem, rel_tol, rates, slot, MT, rs, cs, NT, buf,
                   rec_lv, rec_slot, nrec):
    """:func:`ordered_fill` (unit weights, every flow eligible) over the coflows ``seg``; dense
    coflows (``slot[k] >= 0``) record their levels in ``rec_lv`` instead of writing rates.
    Returns the new record count."""
    tol = np.empty(2 * P)
    for l in range(2 * P):
        tol[l] = max(rem[l], 1.0) * rel_tol
    e = np.empty(2 * P, dtype=np.bool_)
    eu = np.empty(2 * P, dtype=np.uint8)
    for c in range(seg.shape[0]):
        if not _capacity_left(rem, tol, P):
            break
        k = seg[c]
        s = slot[k]
        if s >= 0:
            for l in range(2 * P):
                e[l] = rem[l] > tol[l]
            if _dense_fill(MT[s], rs[s], cs[s], P, rem, rel_tol, e, rec_lv[nrec]):
                rec_slot[nrec] = s
                nrec += 1
        else:
            # the flows whose two links still have capacity: one table lookup per link and a
            # branch-free append (most coflows past the first few are mostly blocked)
            for l in range(2 * P):
                eu[l] = rem[l] > tol[l]
            n = 0
            for f in range(cf_lo[k], cf_lo[k + 1]):
                buf[n] = f
                n += eu[src[f]] & eu[P + dst[f]]
            if n > 0:
                fill_unit(src, dst, buf[:n], P, rem, rel_tol, NT, rates)
    return nrec


@njit(cache=True)
def queue_fill(order, cfq, wq, cf_lo, src, dst, P, caps, rel_tol, rounds, dense_min, buf):
    """D-CLAS rates (:func:`coflow.sched.queues.weighted_queues`): ``rounds`` rounds of weighted
    sharing across queues (each link's residual split among the queues with a usable flow on
    it, in proportion to ``wq[queue]``; FIFO by ``order`` inside a queue, max-min inside a
    coflow), then strict priority in ``order`` for what is left.  ``rounds=0`` is strict
    priority across queues.  ``order`` lists the coflows queue first (``cfq`` ascending).
    With ``rounds > 0`` coflows with at least ``dense_min`` flows use the dense path (see
    above); with strict priority every coflow is filled at most once and the flow path is
    faster.  ``buf`` is a scratch array of at least the number of flows."""
    C = cf_lo.shape[0] - 1
    slot = np.full(C, -1, dtype=np.int64)
    nd = 0
    for k in range(C):
        if rounds > 0 and cf_lo[k + 1] - cf_lo[k] >= dense_min:
            slot[k] = nd
            nd += 1
    MT = np.zeros((nd, P, P), dtype=np.int32)
    rs = np.zeros((nd, P), dtype=np.int64)
    cs = np.zeros((nd, P), dtype=np.int64)
    for k in range(C):
        s = slot[k]
        if s >= 0:
            _count_matrix(MT[s], rs[s], cs[s], src, dst, cf_lo[k], cf_lo[k + 1], P)
    return queue_fill_slots(order, cfq, wq, cf_lo, src, dst, P, caps, rel_tol, rounds, slot, MT, rs, cs, buf)


@njit(cache=True)
def _count_matrix(MT, rs, cs, src, dst, lo, hi, P):
    """Count matrix (transposed: downlink x uplink) of the flows lo:hi and its row and column
    sums, from scratch."""
    MT[:, :] = 0
    rs[:] = 0
    # flows are grouped by reducer (downlink): fill the transpose row by row
    for f in range(lo, hi):
        MT[dst[f], src[f]] += 1
    for j in range(P):
        x = 0
        for i in range(P):
            m = MT[j, i]
            x += m
            rs[i] += m
        cs[j] = x


@njit(cache=True)
def dense_sync(MT, rs, cs, keys, ncached, src, dst, lo, hi, P):
    """Bring a cached count matrix (``MT``, ``rs``, ``cs`` as :func:`_count_matrix`) of a
    coflow's flows up to date with its flows lo:hi now.  ``keys[:ncached]`` lists the flows
    (dst * P + src) the matrix counts, in order.  If the flows now are a subsequence of those
    (flows only finished: the simulator and the controller keep their order), the flows gone
    are subtracted (one merge pass); otherwise (``ncached < 0``, flows added or reordered) the
    matrix is rebuilt.  Integer counts: the result is the matrix of the flows lo:hi either way.
    ``keys`` must hold at least hi - lo entries.  Returns the new count (hi - lo)."""
    if ncached == hi - lo:
        # the usual case: no flow of the coflow finished.  One branch-free pass (vectorised)
        kk = keys[:ncached]
        dd = dst[lo:hi]
        ss = src[lo:hi]
        diff = 0
        for t in range(ncached):
            diff |= kk[t] ^ (np.int64(dd[t]) * P + ss[t])
        if diff == 0:
            return ncached
    j = 0
    w = 0
    ok = ncached >= 0
    if ok:
        for f in range(lo, hi):
            kf = dst[f] * P + src[f]
            while j < ncached and keys[j] != kf:
                g = keys[j]
                d = g // P
                u = g - d * P
                MT[d, u] -= 1
                rs[u] -= 1
                cs[d] -= 1
                j += 1
            if j == ncached:
                ok = False
                break
            keys[w] = kf
            w += 1
            j += 1
    if ok:
        while j < ncached:
            g = keys[j]
            d = g // P
            u = g - d * P
            MT[d, u] -= 1
            rs[u] -= 1
            cs[d] -= 1
            j += 1
        return w
    _count_matrix(MT, rs, cs, src, dst, lo, hi, P)
    for f in range(lo, hi):
        keys[f - lo] = dst[f] * P + src[f]
    return hi - lo


@njit(cache=True)
def queue_fill_slots(order, cfq, wq, cf_lo, src, dst, P, caps, rel_tol, rounds, slot, MT, rs, cs, buf):
    """:func:`queue_fill` with the dense coflows' count matrices given: coflow k with
    ``slot[k] >= 0`` takes the dense path with ``MT[slot[k]]`` (its flows' count matrix,
    transposed) and its sums ``rs``/``cs`` (see :func:`dense_sync`, which keeps them across
    events)."""
    C = cf_lo.shape[0] - 1
    nf = src.shape[0]
    K = wq.shape[0]
    rates = np.zeros(nf)
    NT = np.zeros((P, P), dtype=np.int32)
    nd = 0
    for k in range(C):
        if slot[k] >= 0:
            nd += 1
    rec_lv = np.empty((nd * (rounds + 1) + 1, 2 * P))
    rec_slot = np.empty(nd * (rounds + 1) + 1, dtype=np.int64)
    nrec = 0
    rem = caps.copy()
    tolg = np.empty(2 * P)
    for l in range(2 * P):
        tolg[l] = max(caps[l], 1.0) * rel_tol
    # queue segments of ``order``
    qa = np.empty(C + 1, dtype=np.int64)
    nseg = 0
    for c in range(C):
        if c == 0 or cfq[order[c]] != cfq[order[c - 1]]:
            qa[nseg] = c
            nseg += 1
    qa[nseg] = C
    pres = np.zeros((K, 2 * P), dtype=np.bool_)
    eg = np.empty(2 * P, dtype=np.bool_)
    Wt = np.empty(2 * P)
    wlink = np.empty(2 * P)
    share = np.empty((K, 2 * P))
    used = np.empty(2 * P)
    sh = np.empty(2 * P)
    tsum = 0.0
    for l in range(2 * P):
        tsum += tolg[l]
    for _ in range(rounds):
        for l in range(2 * P):
            eg[l] = rem[l] > tolg[l]
        pres[:, :] = False
        anyu = False
        for k in range(C):
            q = cfq[k]
            s = slot[k]
            if s >= 0:
                _restricted_counts(MT[s], rs[s], cs[s], P, eg, Wt)
                for l in range(2 * P):
                    if Wt[l] > 0.5:
                        pres[q, l] = True
                        anyu = True
            else:
                for f in range(cf_lo[k], cf_lo[k + 1]):
                    if eg[src[f]] and eg[P + dst[f]]:
                        pres[q, src[f]] = True
                        pres[q, P + dst[f]] = True
                        anyu = True
        if not anyu:
            break
        for l in range(2 * P):
            acc = 0.0
            for q in range(K):
                acc += (wq[q] if pres[q, l] else 0.0)
            wlink[l] = acc
        for q in range(K):
            for l in range(2 * P):
                wl = wq[q] if pres[q, l] else 0.0
                share[q, l] = wl * (rem[l] / wlink[l] if wlink[l] > 0 else 0.0)
        for l in range(2 * P):
            used[l] = 0.0
        for g in range(nseg):
            q = cfq[order[qa[g]]]
            anyp = False
            for l in range(2 * P):
                if pres[q, l]:
                    anyp = True
                    break
            if not anyp:
                continue
            for l in range(2 * P):
                sh[l] = share[q, l]
            nrec = _ordered_units(order[qa[g]:qa[g + 1]], cf_lo, src, dst, P, sh, rel_tol, rates,
                                  slot, MT, rs, cs, NT, buf, rec_lv, rec_slot, nrec)
            for l in range(2 * P):
                used[l] += share[q, l] - sh[l]
        usum = 0.0
        for l in range(2 * P):
            rem[l] -= used[l]
            if rem[l] < 0:
                rem[l] = 0.0
            usum += used[l]
        if usum <= tsum:
            break
    nrec = _ordered_units(order, cf_lo, src, dst, P, rem, rel_tol, rates, slot, MT, rs, cs, NT,
                          buf, rec_lv, rec_slot, nrec)
    # dense coflows: each flow adds min(level(up), level(down)) of every fill, in order
    if nrec > 0:
        recs = np.empty(nrec, dtype=np.int64)
        for k in range(C):
            s = slot[k]
            if s < 0:
                continue
            m = 0
            for r in range(nrec):
                if rec_slot[r] == s:
                    recs[m] = r
                    m += 1
            if m == 0:
                continue
            for f in range(cf_lo[k], cf_lo[k + 1]):
                acc = rates[f]
                a0 = src[f]
                b0 = P + dst[f]
                for x in range(m):
                    a = rec_lv[recs[x], a0]
                    b = rec_lv[recs[x], b0]
                    acc += (a if a < b else b)
                rates[f] = acc
    return rates


@njit(cache=True)
def group_fill(gorder, cg, cf_lo, src, dst, P, rem, rel_tol, buf):
    """FIFO-LM rates: strict priority across groups of coflows, max-min over all the flows of
    a group (unit weights).  ``gorder`` lists the coflows by group (``cg``), stable; a group's
    flows take part if both their links still have capacity (> 0) when the group's turn comes;
    stops once every uplink or every downlink is full.  ``rem`` updated in place."""
    nf = src.shape[0]
    rates = np.zeros(nf)
    NT = np.zeros((P, P), dtype=np.int32)
    no_tol = np.zeros(2 * P)  # a group's turn ends the fill only when one side is exactly full
    C = gorder.shape[0]
    c = 0
    while c < C:
        g = cg[gorder[c]]
        n = 0
        while c < C and cg[gorder[c]] == g:
            k = gorder[c]
            for f in range(cf_lo[k], cf_lo[k + 1]):
                if rem[src[f]] > 0 and rem[P + dst[f]] > 0:
                    buf[n] = f
                    n += 1
            c += 1
        if n > 0:
            fill_unit(src, dst, buf[:n], P, rem, rel_tol, NT, rates)
        if not _capacity_left(rem, no_tol, P):
            break
    return rates


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


# ---------------------------------------------------------------------------------------------
# Per-flow priority (pfp) as an event-driven greedy matching.
#
# With one capacity c on every link, the greedy of :func:`greedy_fill` in (remaining bytes,
# position) order gives each flow c or nothing: a flow runs iff no running flow before it in
# that order shares its uplink or its downlink, so the running flows are a matching of uplinks
# to downlinks (at most P of them).  Between events the waiting flows keep their bytes and the
# running flows only move forward in the order, which keeps the matching as it is.  So the
# matching is kept from one event to the next and repaired only where it can have changed: at
# links that a finished flow freed and at new flows.  Candidates are examined in (remaining,
# position) order; one runs if neither of its links holds a running flow before it, and then
# pre-empts the flows after it on its links, which frees their other link in turn.
#
# The waiting flows of each (uplink, downlink) pair are kept in a heap; ``pk_s``/``pt_s`` hold
# each pair's first flow (key and index) by uplink, ``pk_d``/``pt_d`` the same by downlink.  A
# freed link's next flow is then the first, over the P pairs through that link, of those pairs'
# first flows that may run at their other link: one pass over P entries, whatever the number
# of waiting flows.  The pass keeps those flows (a small heap per link); if the one chosen has
# lost its other link by the time its turn comes, the link's next is taken from that list.
# :func:`pfp_rates` is the same kernel from an empty matching (the
# scheduler's rates for one View); :func:`pfp_run` is the simulator's event loop around it.

PFP_WAIT = 1
PFP_RUN = 2
PFP_DONE = 3
# slots of the counters array shared by the kernels below
PC_ACTIVE, PC_OPEN, PC_ZERO_STEPS, PC_EVENTS, PC_BAD = 0, 1, 2, 3, 4


@njit(cache=True, inline='always')
def _ph_push(heap, lo, hn, hpos, rem, q, f):
    """Segment heap ``q`` (``heap[lo[q]:lo[q+1]]``, ``hn[q]`` entries, by (rem, index)) gets
    flow f."""
    h = heap[lo[q]:lo[q + 1]]
    n = hn[q]
    h[n] = f
    hpos[f] = n
    hn[q] = n + 1
    _hup(h, hpos, rem, n)


@njit(cache=True, inline='always')
def _ph_remove(heap, lo, hn, hpos, rem, q, f):
    """Flow f leaves segment heap ``q`` (nothing if it is not there)."""
    i = hpos[f]
    if i < 0:
        return
    h = heap[lo[q]:lo[q + 1]]
    n = hn[q] - 1
    hn[q] = n
    hpos[f] = -1
    if i < n:
        x = h[n]
        h[i] = x
        hpos[x] = i
        _hup(h, hpos, rem, i)
        _hdown(h, hpos, rem, hpos[x], n)


@njit(cache=True, inline='always')
def _pair_first(p, P, heap, lo, hn, rem, pk_s, pt_s, pk_d, pt_d):
    """Refresh pair p's (= uplink * P + downlink) first waiting flow in both views."""
    s = p // P
    d = p - s * P
    f = -1
    k = INF
    if hn[p] > 0:
        f = heap[lo[p]]
        k = rem[f]
    pk_s[p] = k
    pt_s[p] = f
    pk_d[d * P + s] = k
    pt_d[d * P + s] = f


@njit(cache=True, inline='always')
def _pfp_wait(f, P, src, dst, rem, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d):
    p = src[f] * P + dst[f]
    _ph_push(heap, lo, hn, hpos, rem, p, f)
    if heap[lo[p]] == f:
        _pair_first(p, P, heap, lo, hn, rem, pk_s, pt_s, pk_d, pt_d)


@njit(cache=True, inline='always')
def _pfp_unwait(f, P, src, dst, rem, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d):
    if hpos[f] < 0:
        return
    p = src[f] * P + dst[f]
    top = heap[lo[p]] == f
    _ph_remove(heap, lo, hn, hpos, rem, p, f)
    if top:
        _pair_first(p, P, heap, lo, hn, rem, pk_s, pt_s, pk_d, pt_d)


@njit(cache=True, inline='always')
def _cpush(ck, cf, cq, n, k, f, q):
    """Candidate heap (by key k, then flow f; q: the freed link it is the next flow of, or -1),
    grown when full."""
    if n == ck.shape[0]:
        m = 2 * n + 64
        ck2 = np.empty(m)
        cf2 = np.empty(m, dtype=np.int64)
        cq2 = np.empty(m, dtype=np.int64)
        ck2[:n] = ck[:n]
        cf2[:n] = cf[:n]
        cq2[:n] = cq[:n]
        ck, cf, cq = ck2, cf2, cq2
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if ck[p] > k or (ck[p] == k and cf[p] > f):
            ck[i] = ck[p]
            cf[i] = cf[p]
            cq[i] = cq[p]
            i = p
        else:
            break
    ck[i] = k
    cf[i] = f
    cq[i] = q
    return ck, cf, cq, n + 1


@njit(cache=True, inline='always')
def _cpop(ck, cf, cq, n):
    """The candidate heap's first entry (flow, link) and its new size."""
    f0 = cf[0]
    q0 = cq[0]
    n -= 1
    if n > 0:
        k = ck[n]
        f = cf[n]
        q = cq[n]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and (ck[c + 1] < ck[c] or (ck[c + 1] == ck[c] and cf[c + 1] < cf[c])):
                c += 1
            if ck[c] < k or (ck[c] == k and cf[c] < f):
                ck[i] = ck[c]
                cf[i] = cf[c]
                cq[i] = cq[c]
                i = c
            else:
                break
        ck[i] = k
        cf[i] = f
        cq[i] = q
    return f0, q0, n


@njit(cache=True, inline='always')
def _lsift(h, n, i, rem):
    """Sift entry i of the binary heap h[:n] of flows (by (rem, index)) down."""
    x = h[i]
    kx = rem[x]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        y = h[c]
        if c + 1 < n:
            z = h[c + 1]
            if rem[z] < rem[y] or (rem[z] == rem[y] and z < y):
                c += 1
                y = z
        if rem[y] < kx or (rem[y] == kx and y < x):
            h[i] = y
            i = c
        else:
            break
    h[i] = x


@njit(cache=True, inline='always')
def _pfp_pick(q, P, src, dst, state, sel, thr, rem, lst, nl):
    """The first of the flows listed for free link q (the heap ``lst[q, :nl[q]]``) that waits
    and may run at its other link now (it is before the other link's running flow, whose key
    is ``thr``), or -1; flows before it that no longer may are dropped from the list."""
    h = lst[q]
    n = nl[q]
    while n > 0:
        f = h[0]
        o = P + dst[f] if q < P else src[f]
        k = rem[f]
        t = thr[o]
        if state[f] == PFP_WAIT and (k < t or (k == t and f < sel[o])):
            nl[q] = n
            return f
        n -= 1
        if n > 0:
            h[0] = h[n]
            _lsift(h, n, 0, rem)
    nl[q] = 0
    return -1


@njit(cache=True, inline='always')
def _pfp_next(q, P, src, dst, state, sel, thr, rem, pk_s, pt_s, pk_d, pt_d, lst, nl):
    """The first waiting flow through link q, just freed, that may run at its other link now,
    or -1.  One pass over the P pairs through q lists the pairs' first flows that may run
    (``lst[q]``, a heap); later calls for q in the same repair (:func:`_pfp_pick`) only drop
    from that list: while q stays free a pair through q can only lose that chance (its other link is
    taken by a flow before it), and a pair whose other link is freed meanwhile is found from
    that link."""
    if q < P:
        base = q * P
        ks = pk_s
        ts = pt_s
        other = P
    else:
        base = (q - P) * P
        ks = pk_d
        ts = pt_d
        other = 0
    n = 0
    for o in range(P):
        k = ks[base + o]
        if k == INF:
            continue
        t = thr[other + o]
        if k > t:
            continue
        f = ts[base + o]
        if k == t and f > sel[other + o]:
            continue
        lst[q, n] = f
        n += 1
    h = lst[q]
    for i in range(n // 2 - 1, -1, -1):
        _lsift(h, n, i, rem)
    nl[q] = n
    return _pfp_pick(q, P, src, dst, state, sel, thr, rem, lst, nl)


@njit(cache=True)
def pfp_settle(P, src, dst, cof, rem, state, sel, thr, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d, lst, nl, nwait,
               cnt, newf, opened, buf):
    """Repair the matching: ``sel[l]`` is the running flow on link l (uplinks 0..P-1,
    downlinks P..2P-1) or -1; ``newf`` are flows just added (waiting, in their pairs' heaps);
    ``opened[:cnt[PC_OPEN]]`` are links freed since the last call.  ``state`` per flow
    (PFP_WAIT / PFP_RUN); ``nwait`` counts each coflow's waiting flows.  ``buf``: scratch,
    returned (it may grow).
    Afterwards a flow runs iff no running flow before it in (rem, index) order shares a link.

    Candidates are taken in (rem, index) order, so when one is examined the decisions about
    every flow before it are final; a freed link's next flow is a candidate tagged with the
    link, and if it cannot run (its other link was taken since) the link's next one is."""
    ck, cf, cq = buf
    n = 0
    # without the pairs' heaps (pfp_rates: an empty matching, all flows new) no flow is
    # pre-empted and no link freed; kept safe if a caller breaks the order anyway
    heaps = lo.shape[0] > 1
    # the new flows in (rem, index) order (a stable sort of ascending indices), merged with
    # the heap of the freed links' candidates
    m = newf.shape[0]
    new = newf
    nk = thr[:0]
    if m > 0:
        nk = np.empty(m)
        for i in range(m):
            nk[i] = rem[newf[i]]
        srt = np.argsort(nk, kind="mergesort")
        new = newf[srt]
        nk = nk[srt]
    jn = 0
    for i in range(cnt[PC_OPEN]):
        q = opened[i]
        if sel[q] < 0 and heaps:
            f = _pfp_next(q, P, src, dst, state, sel, thr, rem, pk_s, pt_s, pk_d, pt_d, lst, nl)
            if f >= 0:
                ck, cf, cq, n = _cpush(ck, cf, cq, n, rem[f], f, q)
    cnt[PC_OPEN] = 0
    while n > 0 or jn < m:
        if jn < m and (n == 0 or nk[jn] < ck[0] or (nk[jn] == ck[0] and new[jn] < cf[0])):
            f = new[jn]
            q = -1
            jn += 1
        else:
            f, q, n = _cpop(ck, cf, cq, n)
        if state[f] == PFP_WAIT:
            s = src[f]
            d = P + dst[f]
            gs = sel[s]
            gd = sel[d]
            if (gs < 0 or _hless(rem, f, gs)) and (gd < 0 or _hless(rem, f, gd)):
                _pfp_unwait(f, P, src, dst, rem, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d)
                state[f] = PFP_RUN
                nwait[cof[f]] -= 1
                sel[s] = f
                sel[d] = f
                thr[s] = rem[f]
                thr[d] = rem[f]
                for j in range(2):
                    g = gs if j == 0 else gd
                    if g < 0 or (j == 1 and g == gs):
                        continue
                    # pre-empted: waits again at its bytes now; its other link is free
                    state[g] = PFP_WAIT
                    nwait[cof[g]] += 1
                    if heaps:
                        _pfp_wait(g, P, src, dst, rem, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d)
                    o = P + dst[g] if j == 0 else src[g]
                    if sel[o] == g:
                        sel[o] = -1
                        thr[o] = INF
                        h = -1
                        if heaps:
                            h = _pfp_next(o, P, src, dst, state, sel, thr, rem, pk_s, pt_s, pk_d, pt_d, lst, nl)
                        if h >= 0:
                            ck, cf, cq, n = _cpush(ck, cf, cq, n, rem[h], h, o)
                continue
        if q >= 0 and sel[q] < 0 and heaps:
            # it cannot run (its other link was taken since): the freed link's next flow
            h = _pfp_pick(q, P, src, dst, state, sel, thr, rem, lst, nl)
            if h >= 0:
                ck, cf, cq, n = _cpush(ck, cf, cq, n, rem[h], h, q)
    return ck, cf, cq


def pfp_buffers():
    return (np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))


class PfpState:
    """Every flow's and link's state for :func:`pfp_arrive` / :func:`pfp_run` (the arguments
    they share, in order: :meth:`args`)."""

    def __init__(self, P: int, src, dst, cof, size, C: int):
        F = src.shape[0]
        if F >= 2 ** 31:
            raise ValueError(f"{F} flows: the event-driven pfp indexes flows with int32")
        self.P = P
        # int32: a flow's links and coflow (the 10x trace has 14.7M flows)
        self.src = np.ascontiguousarray(src, dtype=np.int32)
        self.dst = np.ascontiguousarray(dst, dtype=np.int32)
        self.cof = np.ascontiguousarray(cof, dtype=np.int32)
        self.rem = np.array(size, dtype=float)
        self.state = np.zeros(F, dtype=np.int8)
        self.sel = np.full(2 * P, -1, dtype=np.int64)
        self.thr = np.full(2 * P, INF)  # key (remaining bytes) of the running flow per link
        self.lo = np.zeros(P * P + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.src * P + self.dst, minlength=P * P), out=self.lo[1:])
        self.heap = np.empty(F, dtype=np.int32)
        self.hn = np.zeros(P * P, dtype=np.int64)
        self.hpos = np.full(F, -1, dtype=np.int32)
        self.pk_s = np.full(P * P, INF)
        self.pt_s = np.full(P * P, -1, dtype=np.int64)
        self.pk_d = np.full(P * P, INF)
        self.pt_d = np.full(P * P, -1, dtype=np.int64)
        self.nwait = np.zeros(C, dtype=np.int64)
        self.nact = np.zeros(C, dtype=np.int64)
        self.cnt = np.zeros(8, dtype=np.int64)

    def args(self):
        return (self.P, self.src, self.dst, self.cof, self.rem, self.state, self.sel, self.thr, self.heap, self.lo,
                self.hn, self.hpos, self.pk_s, self.pt_s, self.pk_d, self.pt_d, self.nwait, self.nact,
                self.cnt)


@njit(cache=True)
def pfp_rates(P, cap, src, dst, rem, buf):
    """pfp's rates for one set of flows with capacity ``cap`` on every link: :func:`pfp_settle`
    from an empty matching (every flow a candidate; none is pre-empted, so the pairs' heaps
    are not needed)."""
    n = src.shape[0]
    state = np.full(n, PFP_WAIT, dtype=np.int8)
    sel = np.full(2 * P, -1, dtype=np.int64)
    lo = np.zeros(1, dtype=np.int64)
    hn = np.zeros(1, dtype=np.int64)
    heap = np.empty(0, dtype=np.int32)
    hpos = np.full(n, -1, dtype=np.int32)
    pk = np.empty(0)
    pt = np.empty(0, dtype=np.int64)
    cof = np.zeros(n, dtype=np.int32)
    nwait = np.zeros(1, dtype=np.int64)
    cnt = np.zeros(8, dtype=np.int64)
    lst = np.empty((0, 0), dtype=np.int64)
    buf = pfp_settle(P, src, dst, cof, rem, state, sel, np.full(2 * P, INF), heap, lo, hn, hpos, pk, pt, pk, pt,
                     lst, pt, nwait, cnt,
                     np.arange(n), np.empty(0, dtype=np.int64), buf)
    rates = np.zeros(n)
    for f in range(n):
        if state[f] == PFP_RUN:
            rates[f] = cap
    return rates, buf


@njit(cache=True)
def pfp_arrive(newf, P, src, dst, cof, rem, state, sel, thr, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d,
               nwait, nact, cnt):
    """Flows ``newf`` arrive (flows with bytes: the simulator counts flows without any done on
    arrival): waiting, in their pairs' heaps."""
    for i in range(newf.shape[0]):
        f = newf[i]
        state[f] = PFP_WAIT
        _pfp_wait(f, P, src, dst, rem, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d)
        k = cof[f]
        nact[k] += 1
        nwait[k] += 1
    cnt[PC_ACTIVE] += newf.shape[0]


@njit(cache=True)
def pfp_run(P, src, dst, cof, rem, state, sel, thr, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d, nwait, nact, cnt,
            cap, finish, opened, newf, buf, t, t_arr, cf_lo, cf_hi, per_coflow, rtol, max_steps, check):
    """The simulator's event loop (:func:`coflow.sim.simulate`) for pfp with capacity ``cap``
    on every link, the same steps in the same arithmetic: repair the matching (the
    scheduler's rates), time to the next completion (a flow's, or with ``per_coflow`` a whole
    coflow's and failing that a flow's), advance the running flows, finish those due.  Returns
    at the next arrival (``t_arr``), when no flow is active, or after ``max_steps`` events:
    (t, status, buf); status 0 = returned normally, 1 = max_steps, 2 = stuck at t (zero-length
    steps), 3 = no flow can progress and nothing is pending.  ``finish`` gets coflow finish
    times; ``cnt[PC_EVENTS]`` counts events; with ``check`` ``cnt[PC_BAD]`` counts links found
    over capacity (two running flows) and running flows without both their links."""
    run = np.empty(P, dtype=np.int64)
    lst = np.empty((2 * P, P), dtype=np.int64)
    nl = np.zeros(2 * P, dtype=np.int64)
    nonew = np.empty(0, dtype=np.int64)
    cmax = np.full(cf_hi - cf_lo, -1.0)
    touched = np.empty(P, dtype=np.int64)
    steps = 0
    first = True
    while cnt[PC_ACTIVE] > 0:
        if steps >= max_steps:
            return t, 1, buf
        buf = pfp_settle(P, src, dst, cof, rem, state, sel, thr, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d,
                         lst, nl, nwait, cnt, newf if first else nonew, opened, buf)
        first = False
        steps += 1
        cnt[PC_EVENTS] += 1
        nr = 0
        for s in range(P):
            f = sel[s]
            if f >= 0:
                run[nr] = f
                nr += 1
        if check:
            for s in range(P):
                f = sel[s]
                if f >= 0 and (state[f] != PFP_RUN or src[f] != s or sel[P + dst[f]] != f):
                    cnt[PC_BAD] += 1
                g = sel[P + s]
                if g >= 0 and (state[g] != PFP_RUN or dst[g] != s or sel[src[g]] != g):
                    cnt[PC_BAD] += 1
        dt_c = INF
        if per_coflow:
            nt = 0
            for i in range(nr):
                f = run[i]
                k = cof[f] - cf_lo
                x = rem[f] / cap
                if cmax[k] < 0:
                    cmax[k] = x
                    touched[nt] = k
                    nt += 1
                elif x > cmax[k]:
                    cmax[k] = x
            for j in range(nt):
                k = touched[j]
                if nwait[cf_lo + k] == 0 and cmax[k] < dt_c:
                    dt_c = cmax[k]
                cmax[k] = -1.0
        if dt_c == INF:
            for i in range(nr):
                x = rem[run[i]] / cap
                if x < dt_c:
                    dt_c = x
        t_next = min(t + dt_c, t_arr)
        if t_next == INF:
            return t, 3, buf
        dt = t_next - t
        if dt <= 0:
            cnt[PC_ZERO_STEPS] += 1
            if cnt[PC_ZERO_STEPS] > 100:
                return t, 2, buf
        else:
            cnt[PC_ZERO_STEPS] = 0
        fin_before = dt_c * (1 + max(rtol, 1e-9)) + 1e-12 if t + dt_c <= t_next else -1.0
        if per_coflow:
            fin_before = max(dt, dt_c if t + dt_c <= t_next else 0.0) * (1 + 1e-9) + 1e-12
        no = cnt[PC_OPEN]
        for i in range(nr):
            f = run[i]
            x = rem[f]
            if x <= fin_before * cap:
                state[f] = PFP_DONE
                s = src[f]
                d = P + dst[f]
                sel[s] = -1
                sel[d] = -1
                thr[s] = INF
                thr[d] = INF
                opened[no] = s
                opened[no + 1] = d
                no += 2
                cnt[PC_ACTIVE] -= 1
                k = cof[f]
                nact[k] -= 1
                if nact[k] == 0:
                    finish[k] = t_next
            else:
                y = x - cap * dt
                rem[f] = y
                thr[src[f]] = y
                thr[P + dst[f]] = y
        cnt[PC_OPEN] = no
        t = t_next
        if t_arr <= t + 1e-12:
            break
    return t, 0, buf

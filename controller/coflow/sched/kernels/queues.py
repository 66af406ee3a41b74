"""Queue-based schedulers (D-CLAS, FIFO-LM, Fai): demotion times, per-queue fills with dense count caches, group fills.

Compiled (numba). The flows come as one :class:`~coflow.sched.kernels.waterfill.Flows`, the
queues as one :class:`QueueShare` and the dense coflows' count matrices as one :class:`Counts`
(named tuples of arrays: numba passes each as a struct, as fast as the arrays it replaces).
"""
from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

import numpy as np
from numba import njit

from .waterfill import INF, _capacity_left, _unit_levels, fill_unit


class Demotion(IntEnum):
    """Per coflow, what :func:`dclas_demotion_times` found (its ``state``, int8)."""
    NONE = 0  # nothing due (the lowest queue, or no rate)
    GROWING = 1  # growing towards its queue's upper threshold: crosses it at ``t``
    CROSSED = 2  # has crossed it: demoted at the next coordination tick


class QueueShare(NamedTuple):
    """D-CLAS's queues for :func:`queue_fill`."""
    order: np.ndarray  # int64: the coflows, queue first (``cfq`` ascending), FIFO inside a queue
    cfq: np.ndarray  # int64 per coflow: its queue (1 = highest)
    wq: np.ndarray  # float per queue: its weight
    rounds: int  # rounds of weighted sharing across queues (0: strict priority)


class Counts(NamedTuple):
    """Flow-count matrices of the dense coflows, one per slot (see :func:`dense_sync`)."""
    MT: np.ndarray  # int32 (S, P, P): flows per (downlink, uplink)
    rs: np.ndarray  # int64 (S, P): flows per uplink (MT's column sums)
    cs: np.ndarray  # int64 (S, P): flows per downlink (MT's row sums)


class _Scratch(NamedTuple):
    """:func:`queue_fill_slots`'s buffers for :func:`_ordered_units`."""
    NT: np.ndarray  # int32 (P, P), zeroed: fill_unit's count matrix
    buf: np.ndarray  # int64, at least the number of flows: a coflow's eligible flows
    rec_lv: np.ndarray  # float (records, 2P): link levels of the dense coflows' fills
    rec_slot: np.ndarray  # int64 (records): the dense coflow (slot) of each record


@njit(cache=True)
def dclas_demotion_times(cf_lo, rates, queues, sent, hi_q, K, now, delta):
    """The numeric part of :func:`coflow.sched.queues.dclas_next_demotion` in one pass: per
    coflow, its rate (the sum of its flows' rates, as :func:`segment_sum`), then its
    :class:`Demotion` state: CROSSED if it has crossed its queue's upper threshold
    ``hi_q[q - 1]`` (q < K), GROWING if it is growing towards it (the coordination tick at which
    it crosses goes into ``t``), NONE otherwise."""
    C = queues.shape[0]
    t = np.full(C, INF)
    state = np.full(C, Demotion.NONE, dtype=np.int8)
    for k in range(C):
        acc = 0.0
        for f in range(cf_lo[k], cf_lo[k + 1]):
            acc += rates[f]
        q = queues[k]
        if q >= K:
            continue
        hi = hi_q[q - 1]
        if sent[k] >= hi * (1 - 1e-12):
            state[k] = Demotion.CROSSED
        elif acc > 0:
            state[k] = Demotion.GROWING
            x = now + (hi - sent[k]) / acc
            t[k] = np.ceil(x / delta - 1e-9) * delta if delta > 0 else x
    return t, state


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
def _ordered_units(seg, fl, slot, dm, rem, rel_tol, rates, scr, nrec):
    """:func:`ordered_fill` (unit weights, every flow eligible) over the coflows ``seg``; dense
    coflows (``slot[k] >= 0``, counted in ``dm``) record their levels in ``scr.rec_lv`` instead
    of writing rates.  Returns the new record count."""
    P, cf_lo, src, dst = fl.P, fl.cf_lo, fl.src, fl.dst
    MT, rs, cs = dm.MT, dm.rs, dm.cs
    NT, buf, rec_lv, rec_slot = scr.NT, scr.buf, scr.rec_lv, scr.rec_slot
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
def queue_fill(fl, qs, caps, rel_tol, dense_min, buf):
    """D-CLAS rates (:func:`coflow.sched.queues.weighted_queues`) of the flows ``fl``:
    ``qs.rounds`` rounds of weighted sharing across queues (each link's residual split among
    the queues with a usable flow on it, in proportion to ``qs.wq[queue]``; FIFO by
    ``qs.order`` inside a queue, max-min inside a coflow), then strict priority in ``order``
    for what is left.  ``rounds=0`` is strict priority across queues.  With ``rounds > 0``
    coflows with at least ``dense_min`` flows use the dense path (see above); with strict
    priority every coflow is filled at most once and the flow path is faster.  ``buf`` is a
    scratch array of at least the number of flows."""
    P, cf_lo, rounds = fl.P, fl.cf_lo, qs.rounds
    C = cf_lo.shape[0] - 1
    slot = np.full(C, -1, dtype=np.int64)
    nd = 0
    for k in range(C):
        if rounds > 0 and cf_lo[k + 1] - cf_lo[k] >= dense_min:
            slot[k] = nd
            nd += 1
    dm = Counts(np.zeros((nd, P, P), dtype=np.int32), np.zeros((nd, P), dtype=np.int64),
                np.zeros((nd, P), dtype=np.int64))
    for k in range(C):
        s = slot[k]
        if s >= 0:
            _count_matrix(dm.MT[s], dm.rs[s], dm.cs[s], fl, cf_lo[k], cf_lo[k + 1])
    return queue_fill_slots(fl, qs, slot, dm, caps, rel_tol, buf)


@njit(cache=True)
def _count_matrix(MT, rs, cs, fl, lo, hi):
    """Count matrix (transposed: downlink x uplink) of the flows lo:hi and its row and column
    sums, from scratch."""
    P, src, dst = fl.P, fl.src, fl.dst
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
def dense_sync(dm, s, keys, ncached, fl, k):
    """Bring slot ``s`` of the cached count matrices ``dm`` (as :func:`_count_matrix`) of coflow
    k's flows up to date with its flows now (lo:hi, from ``fl.cf_lo``).  ``keys[:ncached]`` lists the flows
    (dst * P + src) the matrix counts, in order.  If the flows now are a subsequence of those
    (flows only finished: the simulator and the controller keep their order), the flows gone
    are subtracted (one merge pass); otherwise (``ncached < 0``, flows added or reordered) the
    matrix is rebuilt.  Integer counts: the result is the matrix of the flows lo:hi either way.
    ``keys`` must hold at least hi - lo entries.  Returns the new count (hi - lo)."""
    P, src, dst = fl.P, fl.src, fl.dst
    lo, hi = fl.cf_lo[k], fl.cf_lo[k + 1]
    MT, rs, cs = dm.MT[s], dm.rs[s], dm.cs[s]
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
    _count_matrix(MT, rs, cs, fl, lo, hi)
    for f in range(lo, hi):
        keys[f - lo] = dst[f] * P + src[f]
    return hi - lo


@njit(cache=True)
def queue_fill_slots(fl, qs, slot, dm, caps, rel_tol, buf):
    """:func:`queue_fill` with the dense coflows' count matrices given: coflow k with
    ``slot[k] >= 0`` takes the dense path with ``dm.MT[slot[k]]`` (its flows' count matrix,
    transposed) and its sums ``dm.rs``/``dm.cs`` (see :func:`dense_sync`, which keeps them
    across events)."""
    P, cf_lo, src, dst = fl.P, fl.cf_lo, fl.src, fl.dst
    order, cfq, wq, rounds = qs.order, qs.cfq, qs.wq, qs.rounds
    MT, rs, cs = dm.MT, dm.rs, dm.cs
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
    scr = _Scratch(NT, buf, rec_lv, rec_slot)
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
            nrec = _ordered_units(order[qa[g]:qa[g + 1]], fl, slot, dm, sh, rel_tol, rates, scr, nrec)
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
    nrec = _ordered_units(order, fl, slot, dm, rem, rel_tol, rates, scr, nrec)
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
def group_fill(fl, gorder, cg, rem, rel_tol, buf):
    """FIFO-LM rates of the flows ``fl``: strict priority across groups of coflows, max-min over
    all the flows of a group (unit weights).  ``gorder`` lists the coflows by group (``cg``),
    stable; a group's flows take part if both their links still have capacity (> 0) when the
    group's turn comes; stops once every uplink or every downlink is full.  ``rem`` updated in
    place."""
    P, cf_lo, src, dst = fl.P, fl.cf_lo, fl.src, fl.dst
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
def fai_share_realloc(order, cf_lo, src, dst, P, rem, tol, rates, divide):
    """[FAI] Algorithm 3 (:class:`coflow.sched.queues.Fai`, ``realloc=share|literal``): the
    coflows in strict priority ``order``; each adds to all its flows the least, over the links
    its flows cross, of the link's residual divided by the number of its flows there
    (``divide``; ``literal``: not divided), unless that is within the links' least tolerance;
    residuals updated (and kept >= 0). ``rates`` and ``rem`` are updated in place."""
    n = np.zeros(2 * P, dtype=np.int64)
    for k in order:
        lo, hi = cf_lo[k], cf_lo[k + 1]
        if hi == lo:
            continue
        for f in range(lo, hi):
            n[src[f]] += 1
            n[P + dst[f]] += 1
        add = INF
        tmin = INF
        for f in range(lo, hi):
            for j in range(2):
                l = np.int64(src[f]) if j == 0 else np.int64(P + dst[f])
                if n[l] > 0:
                    per = rem[l] / n[l] if divide else rem[l]
                    if per < add:
                        add = per
                    if tol[l] < tmin:
                        tmin = tol[l]
        if add > tmin:
            for f in range(lo, hi):
                rates[f] += add
            for f in range(lo, hi):
                for j in range(2):
                    l = np.int64(src[f]) if j == 0 else np.int64(P + dst[f])
                    if n[l] > 0:
                        rem[l] -= n[l] * add
                        if rem[l] < 0:
                            rem[l] = 0.0
                        n[l] = 0
        for f in range(lo, hi):
            n[src[f]] = 0
            n[P + dst[f]] = 0


@njit(cache=True)
def fai_static_init(order, cf_lo, src, dst, P, cfq, qbw, rates):
    """[FAI] Algorithm 1 read literally (:func:`coflow.sched.queues.fai_static_init`): per link,
    queue i owns ``qbw[i - 1, link]``; the coflows in ``order`` each take, on every link, what is
    left of their queue's share split equally among their flows there (a flow: the smaller of
    its two links' splits); the queue's share is then reduced by what they took."""
    L = 2 * P
    n = np.zeros(L, dtype=np.int64)
    acc = np.zeros(L)
    for k in order:
        lo, hi = cf_lo[k], cf_lo[k + 1]
        if hi == lo:
            continue
        q = cfq[k] - 1
        for f in range(lo, hi):
            n[src[f]] += 1
            n[P + dst[f]] += 1
        for f in range(lo, hi):
            u, d = np.int64(src[f]), np.int64(P + dst[f])
            su = max(qbw[q, u], 0.0) / n[u]
            sd = max(qbw[q, d], 0.0) / n[d]
            r = su if su < sd else sd
            rates[f] = r
            acc[u] += r
            acc[d] += r
        for f in range(lo, hi):
            for j in range(2):
                l = np.int64(src[f]) if j == 0 else np.int64(P + dst[f])
                if n[l] > 0:
                    qbw[q, l] -= acc[l]
                    acc[l] = 0.0
                    n[l] = 0

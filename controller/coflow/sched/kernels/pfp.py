"""PFP (shortest remaining first with pre-emption): the matching kernel that the scheduler and the simulator's event loop share.

Compiled (numba). The matching's state is one :class:`Matching` (a named tuple of arrays: numba
passes it to the kernels as a struct, as fast as the separate arrays it replaces).
"""
from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

import numpy as np
from numba import njit

from .waterfill import INF, _hdown, _hless, _hup

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
# scheduler's rates for one View); :func:`coflow.sim_pfp.pfp_run` is the simulator's event loop
# around it.


class FlowState(IntEnum):
    """A flow's state in the matching (``Matching.state``, int8)."""
    IDLE = 0  # not arrived yet
    WAIT = 1
    RUN = 2
    DONE = 3


class Counter(IntEnum):
    """Slots of ``Matching.cnt``, the counters the kernels share."""
    ACTIVE = 0  # flows waiting or running
    OPEN = 1  # links freed since the last repair (listed in ``Matching.opened``)
    ZERO_STEPS = 2  # consecutive zero-length steps
    EVENTS = 3  # events run
    BAD = 4  # matching violations found (``check``)


class Matching(NamedTuple):
    """Every flow's and link's state of the PFP matching (numba passes it as one struct).
    Links: uplinks 0..P-1, downlinks P..2P-1; pairs: uplink * P + downlink."""
    P: int
    src: np.ndarray  # int32 per flow: uplink
    dst: np.ndarray  # int32 per flow: downlink (port)
    cof: np.ndarray  # int32 per flow: coflow
    rem: np.ndarray  # float per flow: remaining bytes (the key, with the flow's index)
    state: np.ndarray  # int8 per flow: FlowState
    sel: np.ndarray  # int64 per link: its running flow, or -1
    thr: np.ndarray  # float per link: the running flow's key (inf if none)
    heap: np.ndarray  # int32: each pair's waiting flows, a heap in heap[lo[p]:lo[p + 1]]
    lo: np.ndarray  # int64 per pair + 1: start of its heap segment (one entry: no pair heaps)
    hn: np.ndarray  # int64 per pair: size of its heap
    hpos: np.ndarray  # int32 per flow: position in its pair's heap, or -1
    pk_s: np.ndarray  # float per pair, by uplink: the first waiting flow's key (inf if none)
    pt_s: np.ndarray  # int64 per pair, by uplink: the first waiting flow, or -1
    pk_d: np.ndarray  # float per pair, by downlink (downlink * P + uplink): as pk_s
    pt_d: np.ndarray  # int64 per pair, by downlink: as pt_s
    nwait: np.ndarray  # int64 per coflow: waiting flows
    nact: np.ndarray  # int64 per coflow: flows waiting or running
    cnt: np.ndarray  # int64 counters (Counter)
    opened: np.ndarray  # int64 (2P): links freed since the last repair, cnt[Counter.OPEN] of them
    lst: np.ndarray  # int64 (2P, P) scratch of the repair: the candidates listed per freed link
    nl: np.ndarray  # int64 (2P): the number listed


def matching(P: int, src, dst, cof, size, C: int) -> Matching:
    """The empty matching over every flow of a workload (none arrived)."""
    F = src.shape[0]
    if F >= 2 ** 31:
        raise ValueError(f"{F} flows: the event-driven pfp indexes flows with int32")
    # int32: a flow's links and coflow (the 10x trace has 14.7M flows)
    src = np.ascontiguousarray(src, dtype=np.int32)
    dst = np.ascontiguousarray(dst, dtype=np.int32)
    lo = np.zeros(P * P + 1, dtype=np.int64)
    np.cumsum(np.bincount(src * P + dst, minlength=P * P), out=lo[1:])
    return Matching(
        P=P, src=src, dst=dst, cof=np.ascontiguousarray(cof, dtype=np.int32), rem=np.array(size, dtype=float),
        state=np.zeros(F, dtype=np.int8), sel=np.full(2 * P, -1, dtype=np.int64), thr=np.full(2 * P, INF),
        heap=np.empty(F, dtype=np.int32), lo=lo, hn=np.zeros(P * P, dtype=np.int64),
        hpos=np.full(F, -1, dtype=np.int32),
        pk_s=np.full(P * P, INF), pt_s=np.full(P * P, -1, dtype=np.int64),
        pk_d=np.full(P * P, INF), pt_d=np.full(P * P, -1, dtype=np.int64),
        nwait=np.zeros(C, dtype=np.int64), nact=np.zeros(C, dtype=np.int64), cnt=np.zeros(8, dtype=np.int64),
        opened=np.empty(2 * P, dtype=np.int64), lst=np.empty((2 * P, P), dtype=np.int64),
        nl=np.zeros(2 * P, dtype=np.int64))


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
        if state[f] == FlowState.WAIT and (k < t or (k == t and f < sel[o])):
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
def pfp_settle(m, newf, buf):
    """Repair the matching ``m``: ``sel[l]`` is the running flow on link l or -1; ``newf`` are
    flows just added (waiting, in their pairs' heaps); ``opened[:cnt[Counter.OPEN]]`` are links
    freed since the last call.  ``state`` per flow (FlowState.WAIT / RUN); ``nwait`` counts
    each coflow's waiting flows.  ``buf``: scratch, returned (it may grow).
    Afterwards a flow runs iff no running flow before it in (rem, index) order shares a link.

    Candidates are taken in (rem, index) order, so when one is examined the decisions about
    every flow before it are final; a freed link's next flow is a candidate tagged with the
    link, and if it cannot run (its other link was taken since) the link's next one is."""
    # unpacked once here: the inlined helpers take the arrays (a field read in each helper costs
    # a reference count update per call)
    P, src, dst, cof, rem, state, sel, thr = m.P, m.src, m.dst, m.cof, m.rem, m.state, m.sel, m.thr
    heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d = m.heap, m.lo, m.hn, m.hpos, m.pk_s, m.pt_s, m.pk_d, m.pt_d
    lst, nl, nwait, cnt, opened = m.lst, m.nl, m.nwait, m.cnt, m.opened
    ck, cf, cq = buf
    n = 0
    # without the pairs' heaps (pfp_rates: an empty matching, all flows new) no flow is
    # pre-empted and no link freed; kept safe if a caller breaks the order anyway
    heaps = lo.shape[0] > 1
    # the new flows in (rem, index) order (a stable sort of ascending indices), merged with
    # the heap of the freed links' candidates
    nnew = newf.shape[0]
    new = newf
    nk = thr[:0]
    if nnew > 0:
        nk = np.empty(nnew)
        for i in range(nnew):
            nk[i] = rem[newf[i]]
        srt = np.argsort(nk, kind="mergesort")
        new = newf[srt]
        nk = nk[srt]
    jn = 0
    for i in range(cnt[Counter.OPEN]):
        q = opened[i]
        if sel[q] < 0 and heaps:
            f = _pfp_next(q, P, src, dst, state, sel, thr, rem, pk_s, pt_s, pk_d, pt_d, lst, nl)
            if f >= 0:
                ck, cf, cq, n = _cpush(ck, cf, cq, n, rem[f], f, q)
    cnt[Counter.OPEN] = 0
    while n > 0 or jn < nnew:
        if jn < nnew and (n == 0 or nk[jn] < ck[0] or (nk[jn] == ck[0] and new[jn] < cf[0])):
            f = new[jn]
            q = -1
            jn += 1
        else:
            f, q, n = _cpop(ck, cf, cq, n)
        if state[f] == FlowState.WAIT:
            s = src[f]
            d = P + dst[f]
            gs = sel[s]
            gd = sel[d]
            if (gs < 0 or _hless(rem, f, gs)) and (gd < 0 or _hless(rem, f, gd)):
                _pfp_unwait(f, P, src, dst, rem, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d)
                state[f] = FlowState.RUN
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
                    state[g] = FlowState.WAIT
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


@njit(cache=True)
def pfp_rates(P, cap, src, dst, rem, buf):
    """pfp's rates for one set of flows with capacity ``cap`` on every link: :func:`pfp_settle`
    from an empty matching (every flow a candidate; none is pre-empted, so the pairs' heaps
    are not needed)."""
    n = src.shape[0]
    pk = np.empty(0)
    pt = np.empty(0, dtype=np.int64)
    m = Matching(P, src, dst, np.zeros(n, dtype=np.int32), rem, np.full(n, FlowState.WAIT, dtype=np.int8),
                 np.full(2 * P, -1, dtype=np.int64), np.full(2 * P, INF),
                 np.empty(0, dtype=np.int32), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
                 np.full(n, -1, dtype=np.int32), pk, pt, pk, pt,
                 np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(8, dtype=np.int64),
                 np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.int64), pt)
    buf = pfp_settle(m, np.arange(n), buf)
    rates = np.zeros(n)
    state = m.state
    for f in range(n):
        if state[f] == FlowState.RUN:
            rates[f] = cap
    return rates, buf

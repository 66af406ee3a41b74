"""The simulator's event step: rate checks, each coflow's finish horizon, and advancing flows by dt.

Compiled (numba). The simulator's active flows come as one :class:`ActiveFlows` (a named tuple
of arrays: numba passes it as a struct, as fast as the arrays it replaces).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .waterfill import INF

# x / r < m (real) implies x < m * r; the product, rounded, times this slack stays above m * r,
# so a flow that passes no test below cannot have a time to finish under m: the scans divide
# only for the few flows that may lower the minimum (division is the loops' slowest step), and
# the minimum is still the exact min over x / r.
_SLACK = 1.0 + 2.0 ** -40
_TINY = 1e-280  # below this the product may have lost its relative accuracy (underflow): divide


class ActiveFlows(NamedTuple):
    """The simulator's active flows (``coflow.sim._Active``), grouped by coflow position."""
    src: np.ndarray  # per flow: uplink
    dst: np.ndarray  # per flow: downlink (port)
    red: np.ndarray  # per flow: reducer group
    rem: np.ndarray  # per flow: bytes left
    sent: np.ndarray  # per flow: bytes sent
    pos: np.ndarray  # per flow: its coflow's position among the active coflows
    cnt: np.ndarray  # per coflow position: its flows left


@njit(cache=True, inline='always')
def _may_beat(x, r, m):
    b = m * r
    return x < b * _SLACK or b < _TINY


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
def advance_compact(a, rates, dt, fin_before, cf_moved):
    """Advance every flow of ``a`` (:class:`ActiveFlows`) by ``dt`` at its rate and drop finished
    flows from its arrays (in place) in the same pass.  Flows whose time to finish is at most
    ``fin_before`` finish now: they are credited exactly their remaining bytes.  Adds the bytes moved per coflow
    position into ``cf_moved`` and decrements the per-coflow flow counts ``cnt`` for finished
    flows.  Returns the new length (callers slice ``[:n]``).

    Flows come grouped by coflow: the running per-coflow sum stays in a register while ``pos``
    does not change (the same additions in the same order as ``cf_moved[p] += moved`` per
    flow, without a store-to-load round trip per flow)."""
    src, dst, red, rem, sent, pos, cnt = a.src, a.dst, a.red, a.rem, a.sent, a.pos, a.cnt
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

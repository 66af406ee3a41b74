"""Work conservation on measured demand: what a flow leaves of its rate goes to the others.

A scheduler's Allocation assumes every flow can use the rate it gets. In a fabric a flow may not:
its application writes slowly, its TCP is recovering from a loss, its receiver reads slowly, or
its sender declared less than it sends and its meter cut it back. :func:`conserve` takes each
flow's *demand cap* (bytes/s: how much it has shown it can use; ``inf`` = no limit seen) and
turns any scheduler's Allocation into a work-conserving one:

1. every flow's rate is clamped to its cap;
2. the capacity that frees goes to the flows below their caps, each up to its cap, in the
   scheduler's own service order when it says one (``Allocation.order``: strict priority
   across coflows, max-min inside one, as Varys backfills), and max-min over all of them
   otherwise (HUG, DRF: no order);
3. what is left once every flow that could take more is at its cap (every flow on a port
   capped, say) goes to the same flows as in 2, above their caps: a cap moves capacity to
   the flows that can use it and never leaves a port idle that the Allocation filled. A
   capped flow given more than its cap this way shows its demand at the next reading.

It names no scheduler and changes nothing when no flow is capped (the simulator's flows always
have infinite demand, so its results do not depend on it). The controller measures the caps
(:mod:`coflow.ctl.demand`); docs/explanation/design.md says why the rate modes conserve work this
way.
"""
from __future__ import annotations

import numpy as np

from .base import Allocation, View
from .primitives import REL_TOL, ordered_waterfill, pair_waterfill


def conserve(v: View, alloc: Allocation, cap: np.ndarray | None, spare: bool = True) -> np.ndarray:
    """Per-flow rates: ``alloc.rates`` clamped to ``cap`` (bytes/s per flow of ``v``; None or
    all ``inf``: ``alloc.rates`` itself, untouched), the freed capacity backfilled in
    ``alloc.order`` (or max-min without an order), first to the flows below their caps up to
    their caps, then (``spare``) what no flow below its cap could take to the same flows
    without caps."""
    rates = alloc.rates
    if cap is None or rates.size == 0:
        return rates
    cap = np.asarray(cap, dtype=float)
    if cap.shape != rates.shape:
        raise ValueError(f"conserve: {cap.size} caps for {rates.size} flows")
    capped = np.isfinite(cap)
    if not capped.any():
        return rates
    cap = np.where(capped, np.maximum(cap, 0.0), np.inf)
    out = np.minimum(rates, cap)
    full = np.concatenate([v.cap_up, v.cap_down]).astype(float)
    rem = full - np.concatenate([np.bincount(v.src, out, v.ports), np.bincount(v.dst, out, v.ports)])
    np.maximum(rem, 0.0, out=rem)
    # the flows a backfill may serve: the order's coflows (coflows the order leaves out get
    # nothing more, as in the scheduler's own allocation), every flow without an order
    served = np.ones(rates.size, bool) if alloc.order is None else np.isin(v.cf, alloc.order)
    # 2: each round fills the flows below their caps from what the clamped rates leave; the
    # flows it pushes past their caps are set at their caps and the round is done again
    # without them (a flow past its cap with more capacity is at its cap with less: at most
    # one round per capped flow)
    open_ = served & (out < cap)
    while open_.any() and (rem > REL_TOL * full).any():
        left = rem.copy()
        add = _fill(v, alloc, left, open_)
        over = open_ & (out + add > cap * (1 + REL_TOL))
        if not over.any():
            out += add
            rem = left
            break
        out[over] = cap[over]
        rem = full - np.concatenate([np.bincount(v.src, out, v.ports), np.bincount(v.dst, out, v.ports)])
        np.maximum(rem, 0.0, out=rem)
        open_ &= ~over
    # 3: what is left goes to the served flows regardless of caps
    if spare and served.any() and (rem > REL_TOL * full).any():
        out += _fill(v, alloc, rem, served)
    return out


def _fill(v: View, alloc: Allocation, rem: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Per-flow additions filling ``rem`` (updated in place) for the ``eligible`` flows: in
    ``alloc.order`` when there is one, max-min otherwise."""
    if alloc.order is not None:
        return ordered_waterfill(v, alloc.order, rem, eligible=eligible)
    add = np.zeros(v.nflows)
    idx = np.flatnonzero(eligible)
    add[idx] = pair_waterfill(v, rem, idx)
    return add

"""Work conservation on measured demand: what a flow leaves of its rate goes to the others.

A scheduler's Allocation assumes every flow can use the rate it gets. In a fabric a flow may not:
its application writes slowly, its TCP is recovering from a loss, its receiver reads slowly, or
its sender declared less than it sends and its meter cut it back. :func:`conserve` takes each
flow's *demand cap* (bytes/s: how much it has shown it can use; ``inf`` = no limit seen) and
turns any scheduler's Allocation into a work-conserving one:

1. every flow's rate is clamped to its cap;
2. the capacity that frees goes to the flows without a cap, in the scheduler's own service
   order when it says one (``Allocation.order``: strict priority across coflows, max-min inside
   one, as Varys backfills), and max-min over all of them otherwise (HUG, DRF: no order).

It names no scheduler and changes nothing when no flow is capped (the simulator's flows always
have infinite demand, so its results do not depend on it). The controller measures the caps
(:mod:`coflow.ctl.demand`); docs/explanation/design.md says why the rate modes conserve work this
way.
"""
from __future__ import annotations

import numpy as np

from .base import Allocation, View
from .primitives import REL_TOL, ordered_waterfill, pair_waterfill


def conserve(v: View, alloc: Allocation, cap: np.ndarray | None) -> np.ndarray:
    """Per-flow rates: ``alloc.rates`` clamped to ``cap`` (bytes/s per flow of ``v``; None or
    all ``inf``: ``alloc.rates`` itself, untouched), the freed capacity backfilled to the
    uncapped flows in ``alloc.order`` (or max-min without an order)."""
    rates = alloc.rates
    if cap is None or rates.size == 0:
        return rates
    cap = np.asarray(cap, dtype=float)
    if cap.shape != rates.shape:
        raise ValueError(f"conserve: {cap.size} caps for {rates.size} flows")
    capped = np.isfinite(cap)
    if not capped.any():
        return rates
    out = np.minimum(rates, np.where(capped, np.maximum(cap, 0.0), np.inf))
    free = ~capped
    if not free.any():
        return out
    P = v.ports
    rem = np.concatenate([v.cap_up, v.cap_down]).astype(float)
    rem -= np.concatenate([np.bincount(v.src, out, P), np.bincount(v.dst, out, P)])
    np.maximum(rem, 0.0, out=rem)
    if not (rem > REL_TOL * np.concatenate([v.cap_up, v.cap_down])).any():
        return out
    if alloc.order is not None:
        # the order's coflows first; coflows the order leaves out get nothing more (as in the
        # scheduler's own allocation)
        return ordered_waterfill(v, alloc.order, rem, rates=out, eligible=free)
    idx = np.flatnonzero(free)
    out[idx] += pair_waterfill(v, rem, idx)
    return out

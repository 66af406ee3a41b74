"""Flow-level baselines: per-flow fairness and per-flow prioritisation ([VARYS] section 2.3)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Allocation, Scheduler, View, register
from . import kernels
from .primitives import concurrency_mask, greedy, pair_waterfill


@register("fair")
class Fair(Scheduler):
    """Per-flow max-min fairness (TCP-like fair sharing on every link)."""

    @dataclass(frozen=True)
    class Params:
        #: CoflowSim's Constants.MAX_CONCURRENT_FLOWS (Hadoop's default of 5 parallel copies per
        #: reducer). 0 = no cap: every flow sends at once.
        max_concurrent: int = 0

    def allocate(self, v: View) -> Allocation:
        rem = v.caps.copy()
        if self.params.max_concurrent > 0:
            ok = np.flatnonzero(concurrency_mask(v, self.params.max_concurrent))
            rates = np.zeros(v.nflows)
            rates[ok] = pair_waterfill(v, rem, ok)
        else:
            rates = pair_waterfill(v, rem)
        return Allocation(rates)


@register("pfp")
class PerFlowPriority(Scheduler):
    """Per-flow prioritisation: shortest remaining flow first (pFabric/PDQ-style), greedy rates."""

    clairvoyant = True

    @dataclass(frozen=True)
    class Params:
        pass

    def allocate(self, v: View) -> Allocation:
        order = self.order(v)
        rates = greedy(v, order, v.caps.copy())
        if v.fid is not None:
            v.memory["srtf"] = (v.fid[order], rates[order] > 0)
        return Allocation(rates)

    @staticmethod
    def order(v: View) -> np.ndarray:
        """Flows by remaining bytes, ties by position.  With stable flow ids (``v.fid``) it is
        carried from the previous call (:func:`coflow.sched.kernels.srtf_order`, O(n): only
        the flows that moved and the new ones are sorted), otherwise sorted from scratch."""
        last = v.memory.get("srtf")
        if last is not None and v.fid is not None and v.nflows:
            top = int(v.fid[-1]) + 1
            fmap = v.memory.get("srtf_map")
            if fmap is None or fmap.shape[0] < top:
                fmap = v.memory["srtf_map"] = np.full(max(top, 2 * (0 if fmap is None else fmap.shape[0])), -1, dtype=np.int64)
            order, ok = kernels.srtf_order(last[0], last[1], np.ascontiguousarray(v.fid, dtype=np.int64),
                                           np.ascontiguousarray(v.remaining, dtype=float), fmap)
            if ok:
                return order
        return np.lexsort((np.arange(v.nflows), v.remaining))

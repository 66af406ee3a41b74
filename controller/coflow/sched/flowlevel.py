"""Flow-level baselines: per-flow fairness and per-flow prioritisation ([VARYS] section 2.3)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Allocation, Scheduler, View, register
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
        order = np.lexsort((np.arange(v.nflows), v.remaining))
        return Allocation(greedy(v, order, v.caps.copy()))

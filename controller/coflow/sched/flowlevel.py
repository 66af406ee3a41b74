"""Flow-level baselines: per-flow fairness and per-flow prioritisation ([VARYS] section 2.3)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import FAIR, Allocation, Fabric, Scheduler, View, register
from . import kernels
from .primitives import REL_TOL, concurrency_mask, greedy, pair_waterfill


@register("fair")
class Fair(Scheduler):
    """Per-flow max-min fairness (TCP-like fair sharing on every link)."""

    fabric = Fabric(FAIR, default=True)   # the switches' fair sharing: the baseline

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
    """Per-flow prioritisation: shortest remaining flow first (pFabric/PDQ-style), greedy rates.

    With one capacity on every link (the simulator's and the fabric's usual case) the greedy
    is :func:`coflow.sched.kernels.pfp_settle`, which the simulator also runs event by event
    (``incremental``: it keeps the matching of running flows between events and repairs it
    where flows finished or arrived); with unequal capacities it is the generic greedy."""

    clairvoyant = True
    incremental = True

    @dataclass(frozen=True)
    class Params:
        pass

    def allocate(self, v: View) -> Allocation:
        caps = v.caps
        rem = v.remaining
        assert rem is not None  # clairvoyant: the driver gives the remaining bytes
        if v.nflows and caps.min() == caps.max() > REL_TOL:  # (below it the greedy grants nothing)
            rates, _ = kernels.pfp_rates(v.ports, float(caps[0]), np.ascontiguousarray(v.src, dtype=np.int32),
                                         np.ascontiguousarray(v.dst, dtype=np.int32),
                                         np.ascontiguousarray(rem, dtype=float), kernels.pfp_buffers())
            return Allocation(rates)
        order = np.lexsort((np.arange(v.nflows), rem))
        return Allocation(greedy(v, order, caps.copy()))

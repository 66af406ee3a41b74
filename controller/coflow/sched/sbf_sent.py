"""Smallest bottleneck first, on bytes sent: a small non-clairvoyant ordering, the worked example of
docs/how-to/add-a-scheduler.md (one file: this one, plus its tests).

Like SEBF ([VARYS] 5.3) it orders coflows by a bottleneck, max over links of bytes / capacity,
but of the bytes a coflow's unfinished flows have *sent* on each link, not of what remains: it
needs no flow sizes, and a coflow that has used its busiest link least goes first (least attained
service, as Aalo's D-CLAS, without its queues).  Rates: strict priority in that order, max-min
among a coflow's flows on what is left (:func:`~coflow.sched.primitives.ordered_waterfill`).
The order is revised every ``delta`` seconds (and at every arrival and completion), as bytes
sent move; ties go to the earlier coflow.

In the fabric it runs as a queues-only mode: the controller maps its order onto the 8 strict
priority queues through override entries, with no rate control (``Fabric(QUEUES)``), as it does
Sincronia's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import QUEUES, Allocation, Fabric, Scheduler, View, register
from .primitives import gamma, ordered_waterfill


@register("sbf-sent")
class SbfSent(Scheduler):
    """Smallest bottleneck first on bytes sent (non-clairvoyant; the how-to's example)."""

    clairvoyant = False
    fabric = Fabric(QUEUES)

    @dataclass(frozen=True)
    class Params:
        delta: float = 0.1  # seconds between two revisions of the order

        def __post_init__(self):
            if not self.delta > 0:
                raise ValueError("delta must be > 0")

    def order(self, v: View) -> np.ndarray:
        """Active coflow positions, smallest bottleneck of bytes sent first (then arrival, id)."""
        bottleneck = gamma(v.link_demand(v.sent), v.caps)
        return np.lexsort((v.cf_id, v.cf_arrival, bottleneck))

    def allocate(self, v: View) -> Allocation:
        order = self.order(v)
        rates = ordered_waterfill(v, order, v.caps.copy())
        return Allocation(rates, order=order, next_event=v.now + self.params.delta)

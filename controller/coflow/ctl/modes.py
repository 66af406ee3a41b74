"""One object per controller mode: what the mode runs and how the controller's round treats it.

The controller asks its :class:`ModePolicy` (``policy.coordinated``, ``policy.rate``, ...) instead
of testing the mode's name, and builds the mode's scheduler and its D-CLAS / FIFO-LM parameters
here, once.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dataplane.constants import ENFORCEMENT, MODES, NUM_PRIOS, RATE_MODES, SCHEDULER_OF
from ..params import MB, DclasParams
from ..sched.base import Scheduler, make_scheduler

#: modes whose rounds read the edges' per-coflow byte counters and install overrides from the
#: global sizes (D-CLAS queues, FIFO-LM groups)
COORDINATED = ("dclas", "fifo-lm")
#: modes whose scheduler is built on D-CLAS's queues (the switch's range table follows them)
DCLAS_QUEUES = ("dclas", "fai")


@dataclass(frozen=True)
class ModePolicy:
    name: str
    sched: Scheduler
    dclas_params: DclasParams      # the range table's thresholds (the mode's own, or the default)
    heavy_bytes: int | None        # FIFO-LM's heavy threshold (None: nothing is ever heavy)

    @property
    def coordinated(self) -> bool:
        """Rounds every Δ: read counters, coordinate, override queues (dclas, fifo-lm)."""
        return self.name in COORDINATED

    @property
    def rate(self) -> bool:
        """Rounds on the scheduler's events: rates into meters, order into overrides."""
        return self.name in RATE_MODES

    @property
    def meters(self) -> bool:
        """A rate mode whose rates the meters enforce (``ENFORCEMENT``); the others' meters
        only count (no MeterConfig is written)."""
        return ENFORCEMENT.get(self.name) == "meters"

    @property
    def dclas(self) -> bool:
        return self.name == "dclas"

    @property
    def fifo_lm(self) -> bool:
        return self.name == "fifo-lm"


def mode_policy(mode: str, sched_settings: dict[str, str] | None = None) -> ModePolicy:
    """The policy of ``mode`` with the scheduler's settings (``K`` defaults to the switch's
    queues for the modes built on D-CLAS's queues)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; modes: {', '.join(MODES)}")
    settings = dict(sched_settings or {})
    if mode in DCLAS_QUEUES:
        settings.setdefault("K", str(NUM_PRIOS))  # the switch has 8 queues
    sched = make_scheduler(SCHEDULER_OF[mode], settings)
    dclas_params = sched.params if mode in DCLAS_QUEUES else DclasParams(K=NUM_PRIOS)
    heavy = None
    if mode == "fifo-lm":
        hb = sched.params.heavy_bytes
        heavy = int(hb) if hb is not None else 10 * MB
    return ModePolicy(mode, sched, dclas_params, heavy)

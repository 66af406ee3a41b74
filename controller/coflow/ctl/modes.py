"""One object per controller mode: what the mode runs and how the controller's round treats it.

A mode is a scheduler that declares how it runs in the fabric (``fabric = Fabric(...)`` on its
class, :class:`coflow.sched.base.Fabric`); the lists below are derived from those declarations
(:mod:`coflow.sched.deploy`) when this module is imported.  The controller asks its
:class:`ModePolicy` (``policy.coordinated``, ``policy.rate``, ...) instead of testing the mode's
name, and builds the mode's scheduler and its D-CLAS / FIFO-LM parameters here, once.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dataplane.constants import NUM_PRIOS, PIPELINE_CODE
from ..params import MB, DclasParams
from ..sched import REGISTRY
from ..sched import deploy as D
from ..sched.base import Fabric, Scheduler, make_scheduler

#: every controller mode (a scheduler's name)
MODES = D.modes()
#: the scheduled modes: the controller runs the scheduler core on the registered coflows at its
#: events and the data plane runs the ``rate`` pipeline mode
RATE_MODES = D.rate_modes()
#: modes whose rounds read the edges' per-coflow byte counters and install overrides from the
#: global sizes (D-CLAS queues, FIFO-LM groups)
COORDINATED = D.coordinated_modes()
#: the P4 mode code each mode runs
MODE_CODE = {m: PIPELINE_CODE[D.pipeline(m)] for m in MODES}


def dclas_queues(mode: str) -> bool:
    """Whether the mode's scheduler is built on D-CLAS's queues (its parameters are D-CLAS's:
    the switch's range table follows them, and ``K`` defaults to the switch's queues)."""
    return issubclass(REGISTRY[mode].params_cls, DclasParams)


@dataclass(frozen=True)
class ModePolicy:
    name: str
    sched: Scheduler
    dclas_params: DclasParams      # the range table's thresholds (the mode's own, or the default)
    heavy_bytes: int | None        # FIFO-LM's heavy threshold (None: nothing is ever heavy)

    @property
    def fabric(self) -> Fabric:
        return D.fabric(self.name)

    @property
    def coordinated(self) -> bool:
        """Rounds every Δ: read counters, coordinate, override queues (dclas, fifo-lm)."""
        return self.name in D.coordinated_modes()

    @property
    def rate(self) -> bool:
        """Rounds on the scheduler's events: rates into meters, order into overrides."""
        return self.name in D.rate_modes()

    @property
    def meters(self) -> bool:
        """A rate mode whose rates the meters enforce; the others' meters only count (no
        MeterConfig is written)."""
        return D.metered(self.name)

    @property
    def dclas(self) -> bool:
        """The data plane demotes by D-CLAS's thresholds (the ``dclas`` pipeline mode)."""
        return D.pipeline(self.name) == "dclas"

    @property
    def fifo_lm(self) -> bool:
        """The data plane runs FIFO-LM's groups (the ``fifo-lm`` pipeline mode)."""
        return D.pipeline(self.name) == "fifo-lm"


def mode_policy(mode: str, sched_settings: dict[str, str] | None = None) -> ModePolicy:
    """The policy of ``mode`` with the scheduler's settings (``K`` defaults to the switch's
    queues for the modes built on D-CLAS's queues)."""
    D.fabric(mode)      # raises ValueError on an unknown mode
    settings = dict(sched_settings or {})
    dq = dclas_queues(mode)
    if dq:
        settings.setdefault("K", str(NUM_PRIOS))  # the switch has 8 queues
    sched = make_scheduler(mode, settings)
    dclas_params = sched.params if dq else DclasParams(K=NUM_PRIOS)
    heavy = None
    if D.pipeline(mode) == "fifo-lm":
        hb = sched.params.heavy_bytes
        heavy = int(hb) if hb is not None else 10 * MB
    return ModePolicy(mode, sched, dclas_params, heavy)

"""Every list of modes the fabric's drivers use, derived from the schedulers' own declarations
(``clairvoyant`` and :class:`~coflow.sched.base.Fabric` on each class): the controller's modes
and their P4 pipeline modes (:mod:`coflow.ctl.modes`), the emulation's defaults, its simulator
twins and which modes register flow sizes (:mod:`coflow.emu`).  No driver names a scheduler.

A mode is a scheduler's registered name.  Modes are listed by enforcement (fair, coordinated,
metered, queues only), then in registration order.  These are functions of the registry as it
is now, so a scheduler registered later (a test's, a plugin's) is a mode from then on.
"""
from __future__ import annotations

from . import REGISTRY
from .base import COORDINATED, ENFORCEMENTS, METERS, QUEUES, Fabric, SchedulerInfo


def _info(mode: str) -> SchedulerInfo:
    info = REGISTRY.get(mode)
    if info is None or info.fabric is None:
        raise ValueError(f"unknown mode {mode!r}; modes: {', '.join(modes())}")
    return info


def modes() -> tuple[str, ...]:
    """Every scheduler that runs in the fabric."""
    fab = [(ENFORCEMENTS.index(i.fabric.enforce), k, n) for k, (n, i) in enumerate(REGISTRY.items())
           if i.fabric is not None]
    return tuple(n for _, _, n in sorted(fab))


def fabric(mode: str) -> Fabric:
    f = _info(mode).fabric
    assert f is not None
    return f


def enforcement(mode: str) -> str:
    return fabric(mode).enforce


def pipeline(mode: str) -> str:
    """The P4 pipeline mode it runs (``fair``, ``dclas``, ``fifo-lm``, ``rate``)."""
    p = fabric(mode).pipeline
    assert p is not None
    return p


def rate_modes() -> tuple[str, ...]:
    """The scheduled modes: rounds on the scheduler's events, its order into overrides, its
    rates into meters where it is metered."""
    return tuple(m for m in modes() if enforcement(m) in (METERS, QUEUES))


def coordinated_modes() -> tuple[str, ...]:
    """Rounds every Δ: read the edges' counters, run the scheduler on the global sizes."""
    return tuple(m for m in modes() if enforcement(m) == COORDINATED)


def metered(mode: str) -> bool:
    """Its rates are enforced by meters (and the emulation's senders pace at them)."""
    return enforcement(mode) == METERS


def default_modes() -> tuple[str, ...]:
    """The modes ``make run`` and ``coflow emu run`` emulate unless told which, in order."""
    return tuple(m for m in modes() if fabric(m).default)


def sim_twin(mode: str) -> str:
    """The simulator scheduler the emulation runs beside the mode."""
    return fabric(mode).twin or mode


def clairvoyant(mode: str) -> bool:
    """Whether its flows are registered with their sizes (the scheduler reads what remains)."""
    return bool(_info(mode).clairvoyant)

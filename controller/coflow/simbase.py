"""What the simulator's two event loops share (the generic loop of :mod:`coflow.sim` and pfp's
event-driven loop, :mod:`coflow.sim_pfp`): the result, the error, the arrivals at an event and
the progress output.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .trace import Workload

# progress line period (s) when stderr is not a terminal
LOG_EVERY_S = float(os.environ.get("COFLOW_PROGRESS_S", "60"))


class SimError(RuntimeError):
    pass


@dataclass
class SimResult:
    finish: np.ndarray  # absolute seconds (nan if rejected / unfinished)
    admitted: np.ndarray  # bool
    events: int
    wall_s: float
    max_overload: float  # max over events of (link load / capacity) - 1; <= ~0 when feasible
    #: a workload with runtime dynamics (waves, DAGs): per trace coflow, its start and its
    #: completion (absolute s, nan if never); ``finish`` above is then per unit (trace line)
    start: np.ndarray | None = None
    complete: np.ndarray | None = None
    released: np.ndarray | None = None  # per unit: its release time (nan if never)


def arrivals(wl: Workload, cof: np.ndarray, nxt: int, t: float, finish: np.ndarray):
    """The coflows nxt..j-1 that arrive at t (within 1e-12 s): returns (j, their flows that have
    bytes to send, whether each of those coflows has any).  A flow without bytes has nothing to
    send: it is done when it arrives, and a coflow with only such flows finishes on arrival
    (CCT 0, written into ``finish``).  The flows come as a slice when all have bytes (the usual
    case), else as indices."""
    C = wl.ncoflows
    j = nxt
    while j < C and wl.arrival[j] <= t + 1e-12:
        j += 1
    lo, hi = int(wl.flow_lo[nxt]), int(wl.flow_lo[j])
    z = wl.size[lo:hi] > 0
    fl = slice(lo, hi) if z.all() else np.flatnonzero(z) + lo
    nonempty = np.bincount(cof[fl] - nxt, minlength=j - nxt) > 0
    new = np.arange(nxt, j)
    finish[new[~nonempty]] = wl.arrival[new[~nonempty]]
    return j, fl, nonempty


def progress_bar(progress: bool, total: int, desc: str):
    """A simulation's progress (coflow.progress): a bar on a terminal, a line when it starts and
    one when it ends in a log; None without ``progress``."""
    if not progress:
        return None
    from .progress import phase
    return phase(desc, total, "coflow", leave=False)

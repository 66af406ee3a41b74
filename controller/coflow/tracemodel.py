"""The data a trace is: its lines (:class:`CoflowSpec`, :class:`Trace`), its text form (the
writer) and its expansion into flows (:class:`Workload`), with the conventions and bins every
reader of them shares.  :mod:`coflow.trace` reads, expands, generates and scales traces and
re-exports all of these; :mod:`coflow.dynamics` builds its release rules on them.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from .params import MB

# Flow-expansion conventions ------------------------------------------------------------------
#: CoflowSim's CoflowBenchmarkTraceProducer: every reducer's MB is split evenly over all the
#: coflow's mappers, one flow per (mapper, reducer); 1 MB = 2^20 bytes.
SPLIT = "split"
#: Alternative: one flow per distinct (mapper port, reducer port) pair, the reducer's bytes split
#: over mapper *ports* in proportion to how many mappers sit on each port; 1 MB = 10^6 bytes
#: (the SI reading of "MB").  This is what one TCP connection per host pair carries in the
#: emulation, and it shows how sensitive results are to the unstated MB unit.
PAIRS = "pairs"
CONVENTIONS = (SPLIT, PAIRS)

SHORT_BYTES = 5 * MB  # short: longest flow < 5 MB ([VARYS] Table 4)
NARROW_FLOWS = 50  # narrow: at most 50 flows
BINS = ("SN", "LN", "SW", "LW")


@dataclass
class CoflowSpec:
    """One trace line: a coflow as the trace describes it (before expansion into flows)."""

    id: int
    arrival_ms: float
    mappers: list[int]
    reducers: list[tuple[int, float]]  # (port, MB)
    line: int = 0
    wave: int = 1  # runtime dynamics (module doc): wave number within the coflow
    restart: bool = False  # the wave re-runs restarted tasks
    after: tuple[int, ...] = ()  # Starts-After parents (coflow ids)
    pipe: tuple[int, ...] = ()  # Finishes-Before parents (coflow ids)

    @property
    def dynamic(self) -> bool:
        return self.wave != 1 or bool(self.after) or bool(self.pipe)

    @property
    def total_mb(self) -> float:
        return sum(mb for _, mb in self.reducers)


@dataclass
class Trace:
    ports: int
    coflows: list[CoflowSpec]
    path: str = "<memory>"

    @property
    def dynamic(self) -> bool:
        """Whether any line has waves or DAG edges (runtime dynamics)."""
        return any(c.dynamic for c in self.coflows)

    def write(self, path: str) -> None:
        write_trace(self, path)


# Writing ------------------------------------------------------------------------------------

def format_trace(tr: Trace) -> str:
    out = [f"{tr.ports} {len(tr.coflows)}"]
    for c in tr.coflows:
        arr = int(c.arrival_ms) if float(c.arrival_ms).is_integer() else repr(c.arrival_ms)
        red = " ".join(f"{p}:{_fmt_mb(mb)}" for p, mb in c.reducers)
        ann = ""
        if c.wave != 1:
            ann += f" wave={c.wave}"
        if c.restart:
            ann += " restart=1"
        if c.after:
            ann += " after=" + ",".join(map(str, c.after))
        if c.pipe:
            ann += " pipe=" + ",".join(map(str, c.pipe))
        out.append(f"{c.id} {arr} {len(c.mappers)} {' '.join(map(str, c.mappers))} {len(c.reducers)} {red}{ann}")
    return "\n".join(out) + "\n"


def _fmt_mb(mb: float) -> str:
    s = f"{mb:.6f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def write_trace(tr: Trace, path: str) -> None:
    """Atomic write: a failure leaves no partial output file."""
    text = format_trace(tr)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".trace-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# Flow expansion ------------------------------------------------------------------------------

@dataclass
class Workload:
    """A trace expanded into flows, as flat arrays (struct of arrays) for speed.

    Flows of coflow ``k`` are ``flow_lo[k]:flow_lo[k+1]``.  ``reducer`` numbers a flow's reducer
    within its coflow (used by CoflowSim's per-reducer concurrent-flow cap)."""

    ports: int
    ids: np.ndarray  # coflow id per coflow
    arrival: np.ndarray  # seconds
    flow_lo: np.ndarray  # len C+1
    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray  # bytes (float64)
    reducer: np.ndarray  # global reducer-group id per flow
    convention: str = SPLIT
    deadline: np.ndarray | None = None  # seconds after arrival, or inf
    #: release rules of a trace with waves or DAG edges (:class:`coflow.dynamics.Dynamics`);
    #: then each "coflow" here is one trace line (a unit: a wave, or a single-wave coflow) and
    #: ``arrival`` the line's arrival, the earliest its flows may start
    dynamics: Any = None

    @property
    def ncoflows(self) -> int:
        return len(self.ids)

    @property
    def nflows(self) -> int:
        return len(self.src)

    def coflow_of_flow(self) -> np.ndarray:
        return np.repeat(np.arange(self.ncoflows), np.diff(self.flow_lo))

    def subset(self, n: int) -> "Workload":
        """The first ``n`` coflows."""
        if self.dynamics is not None:
            raise ValueError("a workload with waves or DAG edges cannot be cut by units: cut the trace "
                             "(coflow.trace.closed_prefix, or --first before expansion)")
        hi = int(self.flow_lo[n])
        return Workload(self.ports, self.ids[:n], self.arrival[:n], self.flow_lo[: n + 1], self.src[:hi],
                        self.dst[:hi], self.size[:hi], self.reducer[:hi], self.convention,
                        None if self.deadline is None else self.deadline[:n])

"""Model types shared by every driver (simulator, controller, tests) and the scheduler registry.

A scheduler is called with a :class:`View` (the active coflows and their flows, what each has
sent, what remains where the scheduler may know it, the fabric's port capacities and the time)
and returns an :class:`Allocation` (a rate per flow, a queue per coflow for queue-based
policies, and the next time it wants to be asked again).

Fabric model ([DISS] section 2.2.3, [VARYS] section 2.2): one non-blocking switch whose only
contended links are port i's uplink (link i) and downlink (link P + i).

Schedulers that keep memory between calls (Varys's starvation clock, Utopia's virtual time,
D-CLAS's last coordinated sizes) keep it in ``view.memory``, a dict owned by the driver, so the
scheduler object itself stays a pure function of its inputs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

INF = float("inf")


@dataclass
class View:
    now: float
    ports: int
    cap_up: np.ndarray  # bytes/s per port uplink
    cap_down: np.ndarray  # bytes/s per port downlink
    # active flows, grouped contiguously by coflow; coflows in arrival order
    src: np.ndarray
    dst: np.ndarray
    sent: np.ndarray  # bytes sent per flow
    cf: np.ndarray  # coflow position (0..C-1) per flow
    reducer: np.ndarray  # reducer-group id per flow (CoflowSim's concurrency cap)
    # active coflows
    cf_id: np.ndarray
    cf_arrival: np.ndarray
    cf_sent: np.ndarray  # bytes sent by the whole coflow (global, as coordinated)
    cf_lo: np.ndarray  # CSR offsets into the flow arrays, len C+1
    remaining: np.ndarray | None = None  # bytes per flow; None for non-clairvoyant schedulers
    cf_deadline: np.ndarray | None = None  # absolute seconds, inf where none
    cf_total: np.ndarray | None = None  # total bytes per coflow (clairvoyant only)
    memory: dict = field(default_factory=dict)
    _demand: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def nflows(self) -> int:
        return len(self.src)

    @property
    def ncoflows(self) -> int:
        return len(self.cf_id)

    @property
    def caps(self) -> np.ndarray:
        """Capacity per link: uplinks 0..P-1, downlinks P..2P-1."""
        return np.concatenate([self.cap_up, self.cap_down])

    def flows_of(self, k: int) -> slice:
        return slice(int(self.cf_lo[k]), int(self.cf_lo[k + 1]))

    def kernel_flows(self):
        """The flows as the compiled kernels take them (:class:`coflow.sched.kernels.Flows`)."""
        from . import kernels
        return kernels.Flows(int(self.ports), np.ascontiguousarray(self.cf_lo, dtype=np.int64), self.src, self.dst)

    def link_demand(self, per_flow: np.ndarray) -> np.ndarray:
        """(C x 2P) matrix: ``per_flow`` summed per coflow and link (in flow order, one compiled
        pass).  The remaining bytes' matrix is kept for the rest of the call: schedulers ask for
        it more than once (SEBF's order, then MADD).  Do not modify the result."""
        if per_flow is self.remaining and self._demand is not None:
            return self._demand
        from . import kernels
        m = kernels.link_demand(np.ascontiguousarray(self.cf, dtype=np.int64), self.src, self.dst,
                                np.ascontiguousarray(per_flow, dtype=float), self.ports, self.ncoflows)
        if per_flow is self.remaining:
            self._demand = m
        return m


@dataclass
class Allocation:
    rates: np.ndarray  # bytes/s per active flow
    queue: np.ndarray | None = None  # 1-based queue per active coflow (1 = highest priority)
    #: the scheduler's service order: active coflow positions, first served first (ordered
    #: schedulers say it here, so every driver maps it onto priority queues the same way:
    #: the controller's rate modes via ``ctl.rates.priorities``); None = no order
    order: np.ndarray | None = None
    next_event: float = INF  # absolute time at which the scheduler wants to be called again
    admitted: np.ndarray | None = None  # per coflow, for admission-controlled schedulers


# What the fabric's drivers need to know -------------------------------------------------------

#: How the switches carry out a scheduler's Allocation (:attr:`Fabric.enforce`):
#: no per-coflow state, every tagged coflow in one class (per-flow fair sharing)
FAIR = "fair"
#: the edges demote coflows by their bytes sent in the data plane (D-CLAS's range table,
#: FIFO-LM's groups); every Δ the controller sums the edges' counters, runs the scheduler on the
#: global sizes and overrides the queues where an edge's local decision differs
COORDINATED = "coordinated"
#: the scheduler's rates in meters at the sender edges, the senders paced at them (its order,
#: if it gives one, as overrides on the 8 strict queues); rounds on the scheduler's events
METERS = "meters"
#: only the scheduler's order (or queues) as overrides on the 8 strict queues, no rate control
#: (Sincronia's deployment: the meters are left unconfigured and only count each flow's bytes)
QUEUES = "queues"
ENFORCEMENTS = (FAIR, COORDINATED, METERS, QUEUES)
#: the P4 program's pipeline mode each enforcement runs (define.p4 ``Mode_t``, by name); the
#: coordinated ones name theirs (``dclas`` or ``fifo-lm``)
PIPELINE_OF = {FAIR: "fair", METERS: "rate", QUEUES: "rate"}
PIPELINES = ("fair", "dclas", "fifo-lm", "rate")


@dataclass(frozen=True)
class Fabric:
    """How a scheduler runs in the fabric, declared once on its own class (``fabric =
    Fabric(...)``, not inherited by subclasses); a scheduler without one runs in the simulator
    only.  The controller runs it as a mode of the scheduler's name, and every driver derives
    its lists from these declarations (:mod:`coflow.sched.deploy`): the controller's modes and
    their P4 pipeline modes, which modes have rounds, meters, paced senders or coordination,
    the emulation's defaults and its simulator twins.  docs/how-to/add-a-scheduler.md walks
    through one."""

    enforce: str                    # one of ENFORCEMENTS
    #: the P4 pipeline mode (PIPELINES); None: the enforcement's (PIPELINE_OF)
    pipeline: str | None = None
    #: the simulator scheduler the emulation compares it with (its TM's strict queues: D-CLAS's
    #: twin is dclas-strict); None: itself
    twin: str | None = None
    #: ``make run`` / ``coflow emu run`` emulate it unless told which modes to run
    default: bool = False

    def __post_init__(self):
        if self.enforce not in ENFORCEMENTS:
            raise ValueError(f"Fabric.enforce: {self.enforce!r} is not one of {', '.join(ENFORCEMENTS)}")
        want = PIPELINE_OF.get(self.enforce)
        pipe = self.pipeline if self.pipeline is not None else want
        if pipe not in PIPELINES or (want is not None and pipe != want) or (want is None and pipe in ("fair", "rate")):
            raise ValueError(f"Fabric.pipeline: {self.enforce} enforcement cannot run the {pipe!r} pipeline mode"
                             + ("" if want is None else f" (it runs {want!r})"))
        object.__setattr__(self, "pipeline", pipe)


# Registry --------------------------------------------------------------------------------------

@dataclass
class SchedulerInfo:
    name: str
    factory: Callable[..., "Scheduler"]
    params_cls: type
    clairvoyant: bool
    doc: str
    fabric: Fabric | None = None    # how it runs in the fabric (None: the simulator only)


REGISTRY: dict[str, SchedulerInfo] = {}


class Scheduler:
    name = "?"
    #: whether it reads what remains of each flow (``View.remaining``): the simulator passes it,
    #: the emulation registers flows with their sizes, the controller asks the API for them
    clairvoyant = False
    #: the simulator may run it in its event-driven form (:func:`coflow.sim._simulate_incremental`),
    #: which keeps the scheduler's state between events instead of calling allocate()
    incremental = False
    #: how it runs in the fabric (:class:`Fabric`); read from the class itself, never inherited
    fabric: Fabric | None = None
    Params: type = type(None)

    def __init__(self, params=None):
        self.params = params if params is not None else self.Params()

    def allocate(self, v: View) -> Allocation:  # pragma: no cover - interface
        raise NotImplementedError


def register(name: str):
    def deco(cls):
        if name in REGISTRY:
            raise ValueError(f"scheduler {name!r} registered twice ({REGISTRY[name].factory.__module__} "
                             f"and {cls.__module__})")
        cls.name = name
        fabric = cls.__dict__.get("fabric")     # a subclass (dclas-strict) is not its parent's mode
        if fabric is not None and not isinstance(fabric, Fabric):
            raise TypeError(f"scheduler {name}: fabric must be a Fabric, not {type(fabric).__name__}")
        REGISTRY[name] = SchedulerInfo(name, cls, cls.Params, cls.clairvoyant,
                                       (cls.__doc__ or "").strip().split("\n")[0], fabric)
        return cls
    return deco


def _coerce(value: str, typ: Any, name: str):
    t = typ if isinstance(typ, type) else None
    s = str(typ)
    try:
        if t is bool or s == "bool":
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if t is int or s == "int":
            return int(value)
        if "tuple" in s:
            if "None" in s and value.lower() == "none":
                return None
            return tuple(float(x) for x in value.split(","))
        if t is float or s == "float" or "float" in s:
            if "None" in s and value.lower() == "none":
                return None
            return float(value)
        return value
    except ValueError:
        raise ValueError(f"parameter {name}: cannot read {value!r} as {s}") from None


def make_scheduler(name: str, settings: dict[str, str] | None = None) -> Scheduler:
    """Build a scheduler by CLI name with ``key=value`` overrides of its paper-default params."""
    if name not in REGISTRY:
        raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(sorted(REGISTRY))}")
    info = REGISTRY[name]
    params = info.params_cls()
    if settings:
        fields = {f.name: f for f in dataclasses.fields(params)}
        kw = {}
        for k, v in settings.items():
            if k not in fields:
                raise ValueError(f"scheduler {name}: unknown parameter {k!r}; known: {', '.join(fields)}")
            kw[k] = _coerce(v, fields[k].type, k)
        params = dataclasses.replace(params, **kw)
    return info.factory(params)


def params_dict(s: Scheduler) -> dict:
    p = s.params
    return dataclasses.asdict(p) if dataclasses.is_dataclass(p) and not isinstance(p, type) else {}

"""Experiment plan (pure): trace -> scaled trace -> per-host flow schedule; flow records -> CCT.

Scaling. An emulated fabric runs at a few Mb/s per link (20 BMv2 processes share 2 cores), so a
trace recorded at 1 Gbit/s is replayed with ``coflow trace scale`` logic (:func:`coflow.trace.scale`):
ports folded onto the fabric's hosts (port p -> host index p mod H), every byte count times
``bytes_factor`` and every arrival time times ``time_factor``. Defaults:

- ``bytes_factor`` so that the first N coflows' bytes keep all H host links busy for
  ``work_s`` seconds at the emulated link rate (``total bytes * bf / (H * rate) = work_s``);
- ``time_factor`` so that the arrivals span ``work_s / load`` seconds (``load`` > 1 compresses
  the trace's idle time: the scheduling question is what happens under contention).

Every D-CLAS threshold and the FIFO-LM heavy threshold are byte counts: they are scaled by the same
``bytes_factor`` (a coflow in Aalo's queue i in the trace is in queue i in the emulation), and
the simulator beside the emulation runs the same scaled workload at the same link rate with the
same scaled parameters, so the two normalized CCTs are comparable.

Flows: one per (mapper host, reducer host) pair (the trace's ``pairs`` convention: a real TCP
connection per host pair). A flow whose mapper and reducer fold onto the same host never crosses
the fabric and is dropped, in the emulation and in the simulator alike; a coflow left without
flows is dropped too (counted in the plan).

Bins (SN/LN/SW/LW) are those of the *unscaled* coflows (short = longest flow < 5 MB), so the
per-bin table means what it means for the trace.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import trace as T
from ..params import MB

#: Frames one port's priority queues may hold in all (see coflow.emu.fabric): the buffer of a
#: commodity datacenter switch port (a few hundred KB, ~200 MTU frames) scaled in frames. With
#: ECN marking at ``ECN_FRAMES`` the queues stay near that depth; the rest absorbs bursts and the
#: minimum windows of many flows (measured: 237 of 501,814 frames dropped under fair). Without
#: marking, 32 frames were the default: deeper drop-tail queues put seconds of queueing on a
#: path, past the RTO ceiling, and TCP retransmitted spuriously (mininet/README.md, issue 19).
QUEUE_BUDGET = 256

#: Offered load while the coflows arrive: their arrivals are compressed to span work / LOAD
#: seconds (``--load``). Below 1, as a datacenter runs: at 2 (the default before issue 19) the
#: arrivals offered twice what the links carry, every port's queue overflowed whatever the
#: marking (measured under fair: 7.0% of segments retransmitted, 6,360 TM drops; at 0.8: 1.2%,
#: 251), and small coflows waited seconds in full FIFOs.
LOAD = 0.8

#: Pooled connections opened per host pair before a mode (``--connections pool``, the default):
#: at most this many flows of a pair run at once without opening a connection (measured: with 4,
#: no connection was opened during a mode of the default run).
POOL_PER_PAIR = 4

#: Queue depth, in MTU frames, above which a switch port marks ECN-capable frames CE
#: (``ecn_threshold_bytes``, p4src/include/control/ecn_marker.p4); 0 = no marking.
ECN_FRAMES = 20

#: The rate modes' meters: peak burst = this many committed bursts; what lies between is
#: ECN-marked instead of dropped (``meter_peak_bursts``, flow_meter.p4), so that a TCP flow
#: above its rate slows down on a mark before the meter drops (only with ``ecn_frames`` > 0).
METER_PEAK_BURSTS = 4
#: With paced senders (``--pacing``, the default), a metered mode's meters pass this much more
#: than the flow's rate (``meter_headroom``), and the senders pace PACE_HEADROOM above it
#: (``pace_headroom``): a cooperating sender never meets the meter, one that does not pace is
#: held to just above its rate. The pace's headroom was chosen while the senders paced with
#: Linux's SO_MAX_PACING_RATE and reached less than their pace (mininet/README.md "Fifth pass":
#: paced flows 0.81x -> 0.83x (SEBF) and 0.87x -> 0.95x (HUG) of their rates); with the agents'
#: own pacing ("Sixth pass") they reach 0.97x and 1.07x of the controller's rate, inside it.
METER_HEADROOM = 0.2
PACE_HEADROOM = 0.1
#: With paced senders, a flow's meter is lowered this many round trips after its rate
#: (``meter_hold_s``): the sender hears of the lower rate first and slows, then the policer
#: tightens (a meter lowered first dropped the segments in flight: multi-second timeouts).
METER_HOLD_RTTS = 4
#: With paced senders, a flow's pace is lowered this many round trips after its rate
#: (``pace_hold_s``; its meter METER_HOLD_RTTS after that): a small coflow that takes a port
#: for its short life (a few hundred ms, registration to unregistration) pauses nobody's
#: sender. Linux commits a paced segment's gap as it leaves, so a pause at the meters' floor
#: (1% of the link, 1.2 s a segment at 1 Mb/s) cost a 17 KB flow 2.2 s after a 210-byte
#: coflow held its receiver's port for 0.21 s (mininet/README.md).
PACE_HOLD_RTTS = 4
#: Ordered modes: a coflow's class is at least its size's class (``class_q1_bytes``) minus this
#: (``class_span``): a burst of coflows larger than the 7 classes left its tail in class 1 with
#: the 68 MB coflow's backlog (coflows 40-50 of the default run, 20 KB each, 1-2.7 s slower than
#: under D-CLAS; mininet/README.md "Fourth pass").
CLASS_SPAN = 1
#: With paced senders, the rate modes' scheduler shares this fraction of each host link's
#: payload capacity (``rate_capacity_frac``): the links also carry the ACKs of the flows coming
#: the other way (chosen with Linux's pacing, whose first 10 segments were unpaced: paced flows
#: achieved 0.54x of rates filling the payload capacity, 0.68x of rates filling 90% of it). With
#: the agents' pacing, sebf-only runs at 0.9 / 0.95 / 1.0: average CCT 1.75 / 1.69 / 1.62 s,
#: the 68 MB coflow 53.5 / 53.5 / 53.3 s (its bottleneck link is full either way), paced flows
#: 0.97 / 0.93 / 0.89 of their rates (mininet/README.md "Sixth pass"): kept.
RATE_CAPACITY_FRAC = 0.9
#: Every class of a strict-priority TM is guaranteed this fraction of its port (``--class-floor``,
#: HTB ``rate``; spare bandwidth still goes by priority), so that no class is starved into
#: retransmission timeouts (measured under FIFO-LM: 3,096 -> 1,168 timeouts, gain over fair
#: 0.36x -> 0.86x).
CLASS_FLOOR = 0.02

#: TCP payload per MTU-sized Ethernet frame with the 8-byte CoflowId option: MSS 1460 - 8.
PAYLOAD_PER_FRAME = 1452
FRAME_BYTES = 1514


class PlanError(ValueError):
    """A bad experiment parameter: ``field: problem`` on one line."""

    def __init__(self, fieldname: str, problem: str):
        self.field = fieldname
        super().__init__(f"{fieldname}: {problem}")


@dataclass(frozen=True)
class Flow:
    index: int          # flow id within its coflow (order of registration with the API)
    src: str            # host names
    dst: str
    bytes: int


@dataclass(frozen=True)
class PlannedCoflow:
    index: int          # position in the plan (0..)
    trace_id: int       # the trace's coflow id
    arrival_s: float    # scaled, relative to the start of the run
    flows: tuple[Flow, ...]
    bin: str            # SN/LN/SW/LW of the unscaled coflow
    unscaled_bytes: float

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.flows)


@dataclass
class Plan:
    hosts: list[str]                    # host names, index = folded trace port
    rate_bps: float                     # emulated link rate, bit/s
    bytes_factor: float
    time_factor: float
    coflows: list[PlannedCoflow]
    dropped_local_flows: int = 0
    dropped_coflows: list[int] = field(default_factory=list)  # trace ids
    trace_path: str = ""
    #: a trace with waves or DAG edges (coflow.dynamics): each planned "coflow" is a trace line
    #: (a unit: a wave or a single-wave coflow), released by these rules; None for plain traces
    dynamics: Any = None

    @property
    def span_s(self) -> float:
        return self.coflows[-1].arrival_s if self.coflows else 0.0

    @property
    def total_bytes(self) -> int:
        return sum(c.bytes for c in self.coflows)

    @property
    def work_s(self) -> float:
        """Seconds the plan's bytes keep every host link busy at the link rate."""
        return self.total_bytes / (len(self.hosts) * self.rate_bps / 8) if self.hosts else 0.0

    def workload(self) -> T.Workload:
        """The same flows as a simulator workload (ports = host indices)."""
        idx = {h: i for i, h in enumerate(self.hosts)}
        src, dst, size, red, lo = [], [], [], [], [0]
        rid = {}
        for c in self.coflows:
            for f in c.flows:
                src.append(idx[f.src])
                dst.append(idx[f.dst])
                size.append(float(f.bytes))
                red.append(rid.setdefault((c.index, f.dst), len(rid)))
            lo.append(len(src))
        return T.Workload(
            ports=len(self.hosts),
            ids=np.array([c.trace_id for c in self.coflows], dtype=np.int64),
            arrival=np.array([c.arrival_s for c in self.coflows], dtype=np.float64),
            flow_lo=np.array(lo, dtype=np.int64),
            src=np.array(src, dtype=np.int32), dst=np.array(dst, dtype=np.int32),
            size=np.array(size, dtype=np.float64), reducer=np.array(red, dtype=np.int64),
            convention=T.PAIRS, dynamics=self.dynamics)

    def heavy_bytes(self, percentile: float = 80.0) -> int:
        """FIFO-LM's heavy threshold: the percentile of the plan's coflow sizes (as the
        simulator derives it from a workload)."""
        sizes = [c.bytes for c in self.coflows]
        return int(np.percentile(sizes, percentile)) if sizes else 0

    def per_host(self) -> dict[str, list[tuple[PlannedCoflow, Flow]]]:
        """What each mapper host sends: (coflow, flow) in arrival order."""
        out: dict[str, list] = {h: [] for h in self.hosts}
        for c in self.coflows:
            for f in c.flows:
                out[f.src].append((c, f))
        return out

    def summary(self) -> dict:
        return {"coflows": len(self.coflows), "flows": sum(len(c.flows) for c in self.coflows),
                "bytes": self.total_bytes, "span_s": self.span_s, "work_s": self.work_s,
                "bytes_factor": self.bytes_factor, "time_factor": self.time_factor,
                "rate_bps": self.rate_bps, "hosts": len(self.hosts),
                "dropped_local_flows": self.dropped_local_flows,
                "dropped_coflows": list(self.dropped_coflows), "trace": self.trace_path}


def auto_factors(tr: T.Trace, first: int, hosts: int, rate_bps: float, work_s: float,
                 load: float) -> tuple[float, float]:
    """(bytes_factor, time_factor) for the first ``first`` coflows (see the module doc)."""
    sub = tr.coflows[:first]
    if not sub:
        raise PlanError("coflows", "the trace has no coflows")
    total = sum(c.total_mb for c in sub) * 1e6          # pairs convention: MB = 10^6 bytes
    if total <= 0:
        raise PlanError("trace", "the selected coflows carry no bytes")
    bf = work_s * hosts * rate_bps / 8 / total
    span = sub[-1].arrival_ms / 1000.0
    tf = (work_s / load) / span if span > 0 else 1.0
    return bf, tf


def build_plan(tr: T.Trace, hosts: list[str], first: int, rate_bps: float,
               bytes_factor: float | None = None, time_factor: float | None = None,
               work_s: float = 60.0, load: float = 2.0) -> Plan:
    """Scale the first ``first`` coflows of ``tr`` onto ``hosts`` (index = folded port)."""
    if not hosts:
        raise PlanError("hosts", "the topology has no hosts")
    if not isinstance(first, int) or first < 1:
        raise PlanError("coflows", f"must be an integer >= 1, got {first!r}")
    if not (rate_bps > 0 and math.isfinite(rate_bps)):
        raise PlanError("rate", f"must be > 0, got {rate_bps!r}")
    if not work_s > 0:
        raise PlanError("work", f"must be > 0, got {work_s!r}")
    if not load > 0:
        raise PlanError("load", f"must be > 0, got {load!r}")
    for n, v in (("bytes-factor", bytes_factor), ("time-scale", time_factor)):
        if v is not None and not (v > 0 and math.isfinite(v)):
            raise PlanError(n, f"must be > 0, got {v!r}")
    first = min(first, len(tr.coflows))
    bf, tf = auto_factors(tr, first, len(hosts), rate_bps, work_s, load)
    bf = bytes_factor if bytes_factor is not None else bf
    tf = time_factor if time_factor is not None else tf
    H = len(hosts)
    scaled = T.scale(tr, H, bf, tf, first)
    unscaled = T.scale(tr, H, 1.0, 1.0, first)
    bins = T.coflow_bins(T.expand(unscaled, T.PAIRS))
    out, dropped_flows, dropped = [], 0, []
    for k, c in enumerate(scaled.coflows):
        mp, cnt = np.unique(np.asarray(c.mappers), return_counts=True)
        flows = []
        for rport, mb in c.reducers:
            for m, n in zip(mp.tolist(), cnt.tolist()):
                nbytes = int(round(mb * 1e6 * n / cnt.sum()))
                if m == rport:
                    dropped_flows += 1
                    continue
                flows.append(Flow(len(flows), hosts[m], hosts[rport], max(1, nbytes)))
        if not flows and not scaled.dynamic:
            dropped.append(c.id)
            continue   # (a unit of a dynamic trace stays, empty: done when released)
        out.append(PlannedCoflow(len(out), c.id, c.arrival_ms / 1000.0, tuple(flows), str(bins[k]),
                                 unscaled.coflows[k].total_mb * 1e6))
    if out:  # the run starts with the first coflow
        t0 = out[0].arrival_s
        out = [PlannedCoflow(c.index, c.trace_id, c.arrival_s - t0, c.flows, c.bin, c.unscaled_bytes)
               for c in out]
    dyn = None
    if scaled.dynamic:
        from ..dynamics import build_dynamics
        dyn = build_dynamics(scaled.coflows)
    return Plan(list(hosts), float(rate_bps), bf, tf, out, dropped_flows, dropped, tr.path, dyn)


def dclas_q1(plan: Plan) -> float:
    """Aalo's Q1 (10 MB) times the plan's bytes factor: D-CLAS's first threshold, and the
    ordered modes' size caps (``class_q1_bytes``)."""
    return 10 * MB * plan.bytes_factor


def scaled_mode_settings(mode: str, plan: Plan, K: int = 8) -> dict[str, str]:
    """Scheduler settings for the controller and the simulator: byte thresholds times the
    plan's bytes factor, for the schedulers whose parameters have them (D-CLAS's queues: K and
    Q1, for dclas, dclas-strict, fai, ...; FIFO-LM's heavy bytes)."""
    from ..params import DclasParams, FifoLmParams
    from ..sched import REGISTRY
    params = REGISTRY[mode].params_cls
    s: dict[str, str] = {}
    if issubclass(params, DclasParams):
        s["K"] = str(K)
        s["Q1"] = repr(dclas_q1(plan))
    if issubclass(params, FifoLmParams):
        s["heavy_bytes"] = str(plan.heavy_bytes())
    return s


# --- results ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FlowRecord:
    """What a receiver reported for one flow (absolute wall-clock seconds)."""

    coflow: int
    flow: int
    bytes: int
    t_done: float


def coflow_ccts(plan: Plan, t0: float, records: list[FlowRecord]) -> list[float | None]:
    """CCT per planned coflow: completion of its last flow - its arrival (t0 + arrival_s).

    A coflow is complete when every one of its flows has a record with all its bytes; otherwise
    its CCT is None. Records naming unknown coflows/flows are ignored; a flow reported twice
    counts once (its first complete record)."""
    done: dict[tuple[int, int], float] = {}
    for r in records:
        if not 0 <= r.coflow < len(plan.coflows):
            continue
        c = plan.coflows[r.coflow]
        if not 0 <= r.flow < len(c.flows) or r.bytes < c.flows[r.flow].bytes:
            continue
        key = (r.coflow, r.flow)
        if key not in done or r.t_done < done[key]:
            done[key] = r.t_done
    out: list[float | None] = []
    for c in plan.coflows:
        ts = [done.get((c.index, f.index)) for f in c.flows]
        if any(t is None for t in ts):
            out.append(None)
        else:
            out.append(max(max(ts) - (t0 + c.arrival_s), 0.0))
    return out


def dynamic_report_records(plan: Plan, start, complete,
                           registered: dict[int, str] | None = None) -> tuple[list[dict], list[dict]]:
    """(coflow records, job records) of a dynamic plan's replay in the simulator's report schema
    (coflow.dynamics.dynamic_records): ``start`` / ``complete`` per trace coflow, seconds after
    the run's start (the driver's :class:`coflow.dynamics.Releaser`); ``registered``: unit ->
    the CoflowId the API gave (replaces the offline one in ``coflow_id``)."""
    from ..dynamics import dynamic_records
    wl = plan.workload()
    recs, jobs = dynamic_records(wl, np.ones(wl.ncoflows, dtype=bool), np.asarray(start, dtype=float),
                                 np.asarray(complete, dtype=float), _iso(plan, wl))
    for c, r in enumerate(recs):
        live = (registered or {}).get(int(plan.dynamics.first_unit[c]))
        if live is not None:
            r["coflow_id"] = live
    return recs, jobs


def _iso(plan: Plan, wl: T.Workload) -> np.ndarray:
    cap = plan.rate_bps / 8 * PAYLOAD_PER_FRAME / FRAME_BYTES
    from ..sim import isolation_times
    return isolation_times(wl, np.full(wl.ports, cap), np.full(wl.ports, cap))


def coflow_report_records(plan: Plan, ccts: list[float | None]) -> list[dict]:
    """Per-coflow records in the simulator's report schema (coflow.report)."""
    wl = plan.workload()
    iso = _iso(plan, wl)
    out = []
    for c, cct in zip(plan.coflows, ccts):
        sizes = [f.bytes for f in c.flows]
        out.append({
            "id": c.trace_id, "arrival_s": c.arrival_s,
            "finish_s": None if cct is None else c.arrival_s + cct,
            "cct_s": cct, "isolation_s": float(iso[c.index]), "bytes": float(sum(sizes)),
            "width": len(sizes), "length_bytes": float(max(sizes)), "bin": c.bin,
            "admitted": True,
        })
    return out

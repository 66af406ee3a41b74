"""Event-driven fluid simulator over a non-blocking big switch.

Rates are piecewise constant: the scheduler is asked for an :class:`Allocation` at every coflow
arrival, every flow completion and every epoch the scheduler asks for (D-CLAS coordination
ticks, Varys's T/δ).  Between events every flow advances at its rate.  No fixed time step.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .sched import kernels
from .sched.base import INF, Scheduler, View
from .sched.primitives import REL_TOL
from . import simbase
from .simbase import SimError, SimResult, arrivals, progress_bar  # noqa: F401 (SimError, SimResult: re-exported)
from .trace import Workload, coflow_bins

GBPS = 1e9 / 8  # 1 Gbit/s in bytes/s
COFLOWSIM_BPS = 1024 * 1048576 / 8  # CoflowSim's Constants.RACK_BITS_PER_SEC in bytes/s
RESCHEDULE = ("flow", "coflow")
# the event-driven loop keeps 8 words per (uplink, downlink) pair: up to 4096 ports (1 GB)
INCREMENTAL_MAX_PAIRS = 1 << 24


def _horizon(per_coflow: bool, rem: np.ndarray, rates: np.ndarray, cf_lo: np.ndarray) -> tuple[float, bool]:
    """Time until the next completion at these rates (a flow's, or with ``per_coflow`` a whole
    coflow's: if no coflow can finish at these rates, e.g. per-flow priority leaves flows of
    every coflow waiting, the first flow's) and whether every rate is finite and >= 0."""
    if per_coflow:
        dt, ok = kernels.coflow_finish_in(cf_lo, rem, rates)
        if dt < INF or not ok:
            return dt, ok
    return kernels.check_rates(rem, rates)


def isolation_times(wl: Workload, cap_up: np.ndarray, cap_down: np.ndarray) -> np.ndarray:
    """Each coflow's isolation time: max over its ports of bytes / capacity (the lower bound on
    its CCT under any schedule)."""
    P, C = wl.ports, wl.ncoflows
    cof = wl.coflow_of_flow()
    up = np.bincount(cof * P + wl.src, wl.size, C * P).reshape(C, P) / cap_up
    dn = np.bincount(cof * P + wl.dst, wl.size, C * P).reshape(C, P) / cap_down
    return np.maximum(up.max(axis=1, initial=0), dn.max(axis=1, initial=0))


def simulate(wl: Workload, sched: Scheduler, capacity: float = GBPS, progress: bool = False,
             check: bool = False, max_events: int = 50_000_000, label: str = "",
             rtol: float = 0.0, reschedule: str = "flow", incremental: bool | None = None) -> SimResult:
    """Run ``sched`` over ``wl``.  ``capacity``: bytes/s of every uplink and downlink (or an
    array of 2P per-link capacities).  ``check``: verify capacities at every event.

    ``rtol`` batches completions: flows that would finish within ``rtol`` (relative) of the
    next completion finish together with it, their few last bytes credited at once.  0 (the
    default) is exact; 1e-3 bounds each flow's completion-time error by 0.1% of the time to its
    completion and cuts the event count on wide traces.

    ``reschedule``: ``"flow"`` (the default, exact) asks the scheduler again at every flow
    completion; ``"coflow"`` only at coflow arrivals, coflow departures and the scheduler's own
    epochs, as CoflowSim's coflow schedulers do: a finished flow's bandwidth idles until the
    next of those, and the simulation jumps from one to the next (the first coflow to finish at
    the current rates is the one whose slowest flow finishes first; when no coflow can finish
    at the current rates, at the first flow completion instead).

    ``incremental``: schedulers that have an event-driven form (``sched.incremental``: pfp,
    with one capacity on every link) run in it, which keeps their state between events and
    touches only the flows that start, stop or finish (:func:`_simulate_incremental`); None
    (the default) uses it where it applies, False never.  Both give the same result.

    A workload with runtime dynamics (``wl.dynamics``: waves, restarted tasks, DAGs of coflows;
    :mod:`coflow.dynamics`) runs in the generic loop: each unit (a trace line) joins the active
    set when the shared :class:`~coflow.dynamics.Releaser` releases it, with its coflow's id,
    arrival and bytes sent so far; the result then carries each trace coflow's ``start`` and
    ``complete`` and each unit's ``released``.  Plain workloads take the loop as before."""
    if reschedule not in RESCHEDULE:
        raise ValueError(f"reschedule must be one of {', '.join(RESCHEDULE)}, not {reschedule!r}")
    per_coflow = reschedule == "coflow"
    t0 = time.perf_counter()
    P, C = wl.ports, wl.ncoflows
    caps = np.broadcast_to(np.asarray(capacity, dtype=float), (2 * P,)).copy() if np.ndim(capacity) else np.full(2 * P, float(capacity))
    # (the greedy grants nothing below its relative tolerance: capacities that small take the
    # generic loop, which reports that no flow can progress)
    dyn = wl.dynamics
    can = (getattr(sched, "incremental", False) and 0 < P * P <= INCREMENTAL_MAX_PAIRS
           and caps.min() == caps.max() > REL_TOL and dyn is None)
    if incremental and not can:
        raise ValueError(f"{sched.name} has no incremental form for these capacities and {P} ports")
    if can and incremental is not False:
        from .sim_pfp import simulate_incremental
        return simulate_incremental(wl, sched, float(caps[0]), progress, check, max_events, label, rtol,
                                     per_coflow, t0)
    cap_up, cap_down = caps[:P], caps[P:]
    cof = wl.coflow_of_flow()
    cf_sent = np.zeros(C)
    cf_total = np.bincount(cof, wl.size, C)
    finish = np.full(C, np.nan)
    admitted = np.ones(C, dtype=bool)
    deadline_abs = None if wl.deadline is None else wl.arrival + wl.deadline
    if hasattr(sched, "configure"):
        sched.configure(cf_total)
    memory: dict = {}
    act = _Active()
    nxt = 0
    t = 0.0 if C == 0 else float(wl.arrival[0])
    events = 0
    zero_steps = 0
    max_over = -1.0
    bar = progress_bar(progress, C, label or sched.name)
    clair = sched.clairvoyant
    # without a terminal (logs, CI), long runs print a progress line every ``LOG_EVERY_S``
    log_at = t0 + simbase.LOG_EVERY_S if progress and not sys.stderr.isatty() else INF
    # runtime dynamics (coflow.dynamics): units (waves, DAG coflows) start when released
    rel = None
    ids_v, arr_v = wl.ids, wl.arrival
    if dyn is not None:
        from .dynamics import Releaser
        rel = Releaser(dyn, wl.arrival, cf_total <= 0)
        ids_v, arr_v = dyn.view_id, rel.view_arrival
        nxt = C
        t = rel.next_time if rel.pending else 0.0
    while nxt < C or act.rem.size or (rel is not None and rel.pending):
        # arrivals at t
        if rel is not None:
            if rel.next_time <= t + 1e-12:
                units = rel.due(t, cf_sent)
                if units:
                    act.add_units(wl, np.asarray(units, dtype=np.int64))
            if act.rem.size == 0:
                if rel.pending:
                    t = max(t, rel.next_time)
                    continue
                break
        elif nxt < C and wl.arrival[nxt] <= t + 1e-12:
            j, fl, nonempty = arrivals(wl, cof, nxt, t, finish)
            act.add(wl, cof, np.arange(nxt, j)[nonempty], fl)
            nxt = j
        if act.rem.size == 0:
            if nxt < C:
                t = float(wl.arrival[nxt])
                continue
            break
        events += 1
        if not events & 255 and time.perf_counter() >= log_at:
            log_at = time.perf_counter() + simbase.LOG_EVERY_S
            done = int(np.isfinite(finish).sum() + (~admitted).sum())
            print(f"{label or sched.name}: t={t:.1f} s simulated, {done}/{C} coflows done, {events} events, "
                  f"{act.rem.size} active flows, {time.perf_counter() - t0:.0f} s wall", file=sys.stderr, flush=True)
        if events > max_events:
            raise SimError(f"more than {max_events} events: giving up")
        # ask the scheduler
        cf_lo = act.cf_lo()
        acf = act.acf
        v = View(
            now=t, ports=P, cap_up=cap_up, cap_down=cap_down,
            src=act.src, dst=act.dst, sent=act.sent, cf=act.pos, reducer=act.red,
            cf_id=ids_v[acf], cf_arrival=arr_v[acf], cf_sent=cf_sent[acf], cf_lo=cf_lo,
            remaining=act.rem if clair else None,
            cf_deadline=None if deadline_abs is None else deadline_abs[acf],
            cf_total=cf_total[acf] if clair else None,
            memory=memory,
        )
        alloc = sched.allocate(v)
        rates = np.ascontiguousarray(alloc.rates, dtype=float)
        if rates.shape != (act.rem.size,):
            raise SimError(f"{sched.name}: invalid rates at t={t:.6f}")
        dt_c, ok = _horizon(per_coflow, act.rem, rates, cf_lo)
        if not ok:
            raise SimError(f"{sched.name}: invalid rates at t={t:.6f}")
        if check:
            load = np.concatenate([np.bincount(act.src, rates, P), np.bincount(act.dst, rates, P)])
            max_over = max(max_over, float((load / caps).max() - 1.0))
        # admission (Varys's deadline mode rejects coflows)
        if alloc.admitted is not None and not alloc.admitted.all():
            rej = acf[~alloc.admitted]
            admitted[rej] = False
            rates = act.admit(alloc.admitted, rates)
            if bar is not None:
                bar.update(len(rej))
            if act.rem.size == 0:
                continue
            cf_lo = act.cf_lo()
            dt_c = _horizon(per_coflow, act.rem, rates, cf_lo)[0]
        # the next event: a completion, an arrival or the scheduler's own
        t_arr = float(wl.arrival[nxt]) if nxt < C else (INF if rel is None else rel.next_time)
        t_ev = alloc.next_event if alloc.next_event > t else INF
        t_next = min(t + dt_c, t_arr, t_ev)
        if alloc.next_event <= t:
            t_next = t  # the scheduler asked to be called again now
        if t_next == INF:
            raise SimError(f"{sched.name}: no flow can progress at t={t:.6f} and nothing is pending")
        dt = t_next - t
        if dt <= 0:
            zero_steps += 1
            if zero_steps > 100:
                raise SimError(f"{sched.name}: stuck at t={t:.6f}")
        else:
            zero_steps = 0
        # flows due at t + dt_c finish now (within float precision, or ``rtol``)
        fin_before = dt_c * (1 + max(rtol, 1e-9)) + 1e-12 if t + dt_c <= t_next else -1.0
        if per_coflow:
            # flows finish wherever they reach their last byte in the interval (at least the
            # time to the coflow completion that ends it: dt itself can round to 0 late in a
            # long trace)
            fin_before = max(dt, dt_c if t + dt_c <= t_next else 0.0) * (1 + 1e-9) + 1e-12
        # advance
        cf_moved = act.advance(rates, dt, fin_before)
        cf_sent[act.acf] += cf_moved
        t = t_next
        gone = act.drop_finished()
        if gone is not None:
            finish[gone] = t
            if rel is not None:
                rel.done(gone, t)
            if bar is not None:
                bar.update(gone.size)
    if bar is not None:
        bar.close()
    if rel is not None:
        finish = rel.unit_done   # every unit that finished (also those without bytes)
        return SimResult(finish, admitted, events, time.perf_counter() - t0, max_over, rel.start, rel.complete,
                         rel.released)
    return SimResult(finish, admitted, events, time.perf_counter() - t0, max_over)


class _Active:
    """The active flows as compact arrays (struct of arrays), kept sorted by coflow index, which
    is arrival order, and compacted when flows complete: no per-event gathers from the
    workload's arrays. ``acf``: the active coflows, ascending; ``pos``: each flow's position in
    ``acf``; ``cnt``: flows per active coflow. Every change of the arrays happens here."""

    __slots__ = ("src", "dst", "red", "rem", "sent", "acf", "pos", "cnt")

    def __init__(self):
        z_i, z_f = np.zeros(0, dtype=np.int64), np.zeros(0)
        self.src, self.dst, self.red = z_i.astype(np.int32), z_i.astype(np.int32), z_i
        self.rem, self.sent = z_f, z_f
        self.acf, self.pos, self.cnt = z_i, z_i, z_i

    def cf_lo(self) -> np.ndarray:
        lo = np.zeros(self.acf.size + 1, dtype=np.int64)
        np.cumsum(self.cnt, out=lo[1:])
        return lo

    def add(self, wl: Workload, cof: np.ndarray, coflows: np.ndarray, fl) -> None:
        """Coflows ``coflows`` arrive with their flows ``fl`` (a slice or index array)."""
        acf = np.concatenate([self.acf, coflows])
        self._append(wl, acf, fl, np.searchsorted(acf, cof[fl]))

    def _append(self, wl: Workload, acf: np.ndarray, fl, pos: np.ndarray) -> None:
        """The active set becomes ``acf``, with the flows ``fl`` of ``wl`` appended at
        positions ``pos`` (indices into ``acf``)."""
        self.acf = acf
        self.src = np.concatenate([self.src, wl.src[fl]])
        self.dst = np.concatenate([self.dst, wl.dst[fl]])
        self.red = np.concatenate([self.red, wl.reducer[fl]])
        sizes = wl.size[fl]
        self.rem = np.concatenate([self.rem, sizes])
        self.sent = np.concatenate([self.sent, np.zeros(sizes.size)])
        self.pos = np.concatenate([self.pos, pos])
        self.cnt = np.bincount(self.pos, minlength=self.acf.size)

    def add_units(self, wl: Workload, units: np.ndarray) -> None:
        """Units ``units`` (a workload with dynamics: released in this order, any index order)
        start with their flows that have bytes; they take the next positions."""
        parts = [np.arange(a, b) for a, b in zip(wl.flow_lo[units].tolist(), wl.flow_lo[units + 1].tolist())]
        parts = [p[wl.size[p] > 0] for p in parts]
        fl = np.concatenate(parts)
        local = np.repeat(np.arange(units.size), [p.size for p in parts])
        self._append(wl, np.concatenate([self.acf, units]), fl, self.acf.size + local)

    def admit(self, admitted: np.ndarray, rates: np.ndarray) -> np.ndarray:
        """Keep the admitted coflows (a mask over ``acf``); returns their flows' rates."""
        keep = admitted[self.pos]
        self.acf = self.acf[admitted]
        self.src, self.dst, self.red = self.src[keep], self.dst[keep], self.red[keep]
        self.rem, self.sent = self.rem[keep], self.sent[keep]
        self.pos = (np.cumsum(admitted) - 1)[self.pos[keep]]
        self.cnt = np.bincount(self.pos, minlength=self.acf.size)
        return rates[keep]

    def advance(self, rates: np.ndarray, dt: float, fin_before: float) -> np.ndarray:
        """Every flow moves ``rates * dt``; flows due within ``fin_before`` finish and are
        dropped in the same pass (``cnt`` counts what is left). Returns bytes moved per coflow."""
        cf_moved = np.zeros(self.acf.size)
        a = kernels.ActiveFlows(self.src, self.dst, self.red, self.rem, self.sent, self.pos, self.cnt)
        n = kernels.advance_compact(a, rates, dt, fin_before, cf_moved)
        if n < self.rem.size:
            self.src, self.dst, self.red = self.src[:n], self.dst[:n], self.red[:n]
            self.rem, self.sent, self.pos = self.rem[:n], self.sent[:n], self.pos[:n]
        return cf_moved

    def drop_finished(self) -> np.ndarray | None:
        """Coflows left without flows leave the arrays; returns them (None if none did)."""
        gone = self.cnt == 0
        if not gone.any():
            return None
        done = self.acf[gone]
        self.acf = self.acf[~gone]
        self.cnt = self.cnt[~gone]
        self.pos = (np.cumsum(~gone) - 1)[self.pos]
        return done


def _iso(wl: Workload, capacity) -> np.ndarray:
    P = wl.ports
    caps = np.broadcast_to(np.asarray(capacity, dtype=float), (2 * P,)) if np.ndim(capacity) else np.full(2 * P, float(capacity))
    return isolation_times(wl, caps[:P], caps[P:])


def job_records(wl: Workload, res: SimResult, capacity, coflows: list[dict] | None = None) -> list[dict]:
    """One record per job (``coflow.dynamics``): a DAG of coflows, or a coflow on its own (then
    JCT = CCT). ``coflows``: this run's :func:`coflow_records`, if already made."""
    from .dynamics import dynamic_records, plain_jobs
    if wl.dynamics is None:
        return plain_jobs(coflows if coflows is not None else coflow_records(wl, res, capacity))
    assert res.start is not None and res.complete is not None
    return dynamic_records(wl, res.admitted, res.start, res.complete, _iso(wl, capacity))[1]


def coflow_records(wl: Workload, res: SimResult, capacity) -> list[dict]:
    """One record per coflow of the trace (a multi-wave coflow's waves merged into one)."""
    iso = _iso(wl, capacity)
    if wl.dynamics is not None:
        from .dynamics import dynamic_records
        assert res.start is not None and res.complete is not None
        return dynamic_records(wl, res.admitted, res.start, res.complete, iso)[0]
    cof = wl.coflow_of_flow()
    total = np.bincount(cof, wl.size, wl.ncoflows)
    length = np.zeros(wl.ncoflows)
    np.maximum.at(length, cof, wl.size)
    width = np.diff(wl.flow_lo)
    bins = coflow_bins(wl)
    out = []
    for k in range(wl.ncoflows):
        fin = res.finish[k]
        ok = bool(res.admitted[k]) and np.isfinite(fin)
        out.append({
            "id": int(wl.ids[k]),
            "arrival_s": float(wl.arrival[k]),
            "finish_s": float(fin) if ok else None,
            "cct_s": float(fin - wl.arrival[k]) if ok else None,
            "isolation_s": float(iso[k]),
            "bytes": float(total[k]),
            "width": int(width[k]),
            "length_bytes": float(length[k]),
            "bin": str(bins[k]),
            "admitted": bool(res.admitted[k]),
        })
    return out

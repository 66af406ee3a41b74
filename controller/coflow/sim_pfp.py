"""The simulator's PFP event loop (the event-driven form of :class:`coflow.sched.flowlevel.Pfp`).

It keeps the PFP matching of :mod:`coflow.sched.kernels.pfp` between events: arrivals join it
(:func:`pfp_arrive`), completions free their links (:func:`pfp_run`), and a
:class:`coflow.sched.kernels.pfp.Matching` holds its state. Only :mod:`coflow.sim` runs it; the
scheduler's rates for one view come from :func:`coflow.sched.kernels.pfp.pfp_rates`, the same
kernel from an empty matching.
"""
from __future__ import annotations

import sys
import time
from enum import IntEnum
from typing import NamedTuple

import numpy as np
from numba import njit

from .sched.kernels.waterfill import INF
from .sched.kernels.pfp import Counter, FlowState, Matching, _pfp_wait, matching, pfp_buffers, pfp_settle
from . import simbase   # simbase.LOG_EVERY_S read at run time (tests and users may change it)
from .simbase import SimError, SimResult, arrivals, progress_bar
from .sched.base import Scheduler
from .trace import Workload


class RunStatus(IntEnum):
    """Why :func:`pfp_run` returned (its second value)."""
    RETURNED = 0      # at the next arrival, or no flow active
    MAX_STEPS = 1     # after max_steps events: call again
    STUCK = 2         # zero-length steps at t
    NO_PROGRESS = 3   # no flow can progress and nothing is pending


class RunConfig(NamedTuple):
    """What stays fixed over a simulation of :func:`pfp_run`."""
    cap: float  # bytes/s of every link
    per_coflow: bool  # CoflowSim's convention: the next event is a coflow completion
    rtol: float  # completions within this relative time finish together
    check: bool  # count matching violations into cnt[Counter.BAD]
    finish: np.ndarray  # per coflow: its finish time (written when its last flow finishes)


@njit(cache=True)
def pfp_arrive(m: Matching, newf):
    """Flows ``newf`` arrive (flows with bytes: the simulator counts flows without any done on
    arrival): waiting, in their pairs' heaps."""
    P, src, dst, cof, rem, state = m.P, m.src, m.dst, m.cof, m.rem, m.state
    heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d = m.heap, m.lo, m.hn, m.hpos, m.pk_s, m.pt_s, m.pk_d, m.pt_d
    for i in range(newf.shape[0]):
        f = newf[i]
        state[f] = FlowState.WAIT
        _pfp_wait(f, P, src, dst, rem, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d)
        k = cof[f]
        m.nact[k] += 1
        m.nwait[k] += 1
    m.cnt[Counter.ACTIVE] += newf.shape[0]


@njit(cache=True)
def pfp_run(m: Matching, cfg: RunConfig, newf, buf, t, t_arr, cf_lo, cf_hi, max_steps):
    """The simulator's event loop (:func:`coflow.sim.simulate`) for pfp with capacity
    ``cfg.cap`` on every link, the same steps in the same arithmetic: repair the matching (the
    scheduler's rates), time to the next completion (a flow's, or with ``per_coflow`` a whole
    coflow's and failing that a flow's), advance the running flows, finish those due.  Returns
    at the next arrival (``t_arr``), when no flow is active, or after ``max_steps`` events:
    (t, RunStatus, buf).  ``cfg.finish`` gets coflow finish times; ``cnt[Counter.EVENTS]``
    counts events; with ``check`` ``cnt[Counter.BAD]`` counts links found over capacity (two
    running flows) and running flows without both their links."""
    P, src, dst, cof, rem, state, sel, thr = m.P, m.src, m.dst, m.cof, m.rem, m.state, m.sel, m.thr
    nwait, nact, cnt, opened = m.nwait, m.nact, m.cnt, m.opened
    cap, per_coflow, rtol, check, finish = cfg.cap, cfg.per_coflow, cfg.rtol, cfg.check, cfg.finish
    run = np.empty(P, dtype=np.int64)
    nonew = np.empty(0, dtype=np.int64)
    cmax = np.full(cf_hi - cf_lo, -1.0)
    touched = np.empty(P, dtype=np.int64)
    steps = 0
    first = True
    while cnt[Counter.ACTIVE] > 0:
        if steps >= max_steps:
            return t, RunStatus.MAX_STEPS, buf
        buf = pfp_settle(m, newf if first else nonew, buf)
        first = False
        steps += 1
        cnt[Counter.EVENTS] += 1
        nr = 0
        for s in range(P):
            f = sel[s]
            if f >= 0:
                run[nr] = f
                nr += 1
        if check:
            for s in range(P):
                f = sel[s]
                if f >= 0 and (state[f] != FlowState.RUN or src[f] != s or sel[P + dst[f]] != f):
                    cnt[Counter.BAD] += 1
                g = sel[P + s]
                if g >= 0 and (state[g] != FlowState.RUN or dst[g] != s or sel[src[g]] != g):
                    cnt[Counter.BAD] += 1
        dt_c = INF
        if per_coflow:
            nt = 0
            for i in range(nr):
                f = run[i]
                k = cof[f] - cf_lo
                x = rem[f] / cap
                if cmax[k] < 0:
                    cmax[k] = x
                    touched[nt] = k
                    nt += 1
                elif x > cmax[k]:
                    cmax[k] = x
            for j in range(nt):
                k = touched[j]
                if nwait[cf_lo + k] == 0 and cmax[k] < dt_c:
                    dt_c = cmax[k]
                cmax[k] = -1.0
        if dt_c == INF:
            for i in range(nr):
                x = rem[run[i]] / cap
                if x < dt_c:
                    dt_c = x
        t_next = min(t + dt_c, t_arr)
        if t_next == INF:
            return t, RunStatus.NO_PROGRESS, buf
        dt = t_next - t
        if dt <= 0:
            cnt[Counter.ZERO_STEPS] += 1
            if cnt[Counter.ZERO_STEPS] > 100:
                return t, RunStatus.STUCK, buf
        else:
            cnt[Counter.ZERO_STEPS] = 0
        fin_before = dt_c * (1 + max(rtol, 1e-9)) + 1e-12 if t + dt_c <= t_next else -1.0
        if per_coflow:
            fin_before = max(dt, dt_c if t + dt_c <= t_next else 0.0) * (1 + 1e-9) + 1e-12
        no = cnt[Counter.OPEN]
        for i in range(nr):
            f = run[i]
            x = rem[f]
            if x <= fin_before * cap:
                state[f] = FlowState.DONE
                s = src[f]
                d = P + dst[f]
                sel[s] = -1
                sel[d] = -1
                thr[s] = INF
                thr[d] = INF
                opened[no] = s
                opened[no + 1] = d
                no += 2
                cnt[Counter.ACTIVE] -= 1
                k = cof[f]
                nact[k] -= 1
                if nact[k] == 0:
                    finish[k] = t_next
            else:
                y = x - cap * dt
                rem[f] = y
                thr[src[f]] = y
                thr[P + dst[f]] = y
        cnt[Counter.OPEN] = no
        t = t_next
        if t_arr <= t + 1e-12:
            break
    return t, RunStatus.RETURNED, buf


def simulate_incremental(wl: Workload, sched: Scheduler, cap: float, progress: bool, check: bool,
                          max_events: int, label: str, rtol: float, per_coflow: bool, t0: float) -> SimResult:
    """:func:`simulate` for a scheduler with an event-driven form (pfp): the event loop runs
    compiled (:func:`pfp_run`) between coflow arrivals, over state kept for
    every flow of the workload.  An event costs O(P) plus the repair's cascade (O(log n) heap
    steps per flow started or pre-empted) instead of O(active flows); an arrival adds O(C), and
    in CoflowSim's convention an event costs O(C) more while a flow without bytes waits."""
    P, C = wl.ports, wl.ncoflows
    cof_all = wl.coflow_of_flow()
    m = matching(P, wl.src, wl.dst, cof_all, wl.size, C)
    cnt = m.cnt
    finish = np.full(C, np.nan)
    cfg = RunConfig(cap=float(cap), per_coflow=bool(per_coflow), rtol=float(rtol), check=bool(check), finish=finish)
    buf = pfp_buffers()
    nothing = np.empty(0, dtype=np.int64)
    bar = progress_bar(progress, C, label or sched.name)
    log_at = t0 + simbase.LOG_EVERY_S if progress and not sys.stderr.isatty() else INF
    nxt = 0
    done = 0
    t = 0.0 if C == 0 else float(wl.arrival[0])
    chunk = 20_000
    while True:
        newf = nothing
        if nxt < C and wl.arrival[nxt] <= t + 1e-12:
            j, fl, _ = arrivals(wl, cof_all, nxt, t, finish)
            newf = np.arange(fl.start, fl.stop, dtype=np.int64) if isinstance(fl, slice) else fl.astype(np.int64)
            pfp_arrive(m, newf)
            nxt = j
        if cnt[Counter.ACTIVE] == 0:
            if nxt < C:
                t = float(wl.arrival[nxt])
                continue
            break
        t_arr = float(wl.arrival[nxt]) if nxt < C else INF
        while True:
            # the generic loop gives up when event max_events + 1 would start
            budget = max(0, max_events - int(cnt[Counter.EVENTS]))
            t, status, buf = pfp_run(m, cfg, newf, buf, t, t_arr, 0, nxt, min(chunk, budget))
            newf = nothing
            if status == RunStatus.MAX_STEPS and budget <= chunk:
                raise SimError(f"more than {max_events} events: giving up")
            if bar is not None or time.perf_counter() >= log_at:
                now_done = int(np.isfinite(finish[:nxt]).sum())
                if bar is not None and now_done > done:
                    bar.update(now_done - done)
                done = now_done
            if time.perf_counter() >= log_at:
                log_at = time.perf_counter() + simbase.LOG_EVERY_S
                print(f"{label or sched.name}: t={t:.1f} s simulated, {done}/{C} coflows done, "
                      f"{int(cnt[Counter.EVENTS])} events, {int(cnt[Counter.ACTIVE])} active flows, "
                      f"{time.perf_counter() - t0:.0f} s wall", file=sys.stderr, flush=True)
            if status == RunStatus.STUCK:
                raise SimError(f"{sched.name}: stuck at t={t:.6f}")
            if status == RunStatus.NO_PROGRESS:
                raise SimError(f"{sched.name}: no flow can progress at t={t:.6f} and nothing is pending")
            if status == RunStatus.RETURNED:
                break
    if bar is not None:
        bar.close()
    events = int(cnt[Counter.EVENTS])
    # with one flow per link at the link's capacity, a link is exactly full or empty: the check
    # is that the running flows form a matching (pfp_run counts violations)
    max_over = (1.0 if cnt[Counter.BAD] else 0.0) if check and events else -1.0
    return SimResult(finish, np.ones(C, dtype=bool), events, time.perf_counter() - t0, max_over)

"""The simulator's PFP event loop (the event-driven form of :class:`coflow.sched.flowlevel.Pfp`).

It keeps the PFP matching of :mod:`coflow.sched.kernels.pfp` between events: arrivals join it
(:func:`pfp_arrive`), completions free their links (:func:`pfp_run`), and :class:`PfpState`
holds its buffers. Only :mod:`coflow.sim` runs it; the scheduler's rates for one view come from
:func:`coflow.sched.kernels.pfp.pfp_rates`, the same kernel from an empty matching.
"""
from __future__ import annotations

import sys
import time

import numpy as np
from numba import njit

from .sched.kernels.waterfill import INF
from .sched.kernels.pfp import (PC_ACTIVE, PC_BAD, PC_EVENTS, PC_OPEN, PC_ZERO_STEPS, PFP_DONE, PFP_RUN,
                                PFP_WAIT, _pfp_wait, pfp_buffers, pfp_settle)
from . import sim as _sim   # _sim.LOG_EVERY_S read at run time (tests and users may change it)
from .sim import SimError, SimResult, _arrivals, _progress_bar
from .sched.base import Scheduler
from .trace import Workload

#: What :func:`pfp_run` returned for (its second value).
RUN_RETURNED = 0      # at the next arrival, or no flow active
RUN_MAX_STEPS = 1     # after max_steps events: call again
RUN_STUCK = 2         # zero-length steps at t
RUN_NO_PROGRESS = 3   # no flow can progress and nothing is pending


class PfpState:
    """Every flow's and link's state for :func:`pfp_arrive` / :func:`pfp_run` (the arguments
    they share, in order: :meth:`args`)."""

    def __init__(self, P: int, src, dst, cof, size, C: int):
        F = src.shape[0]
        if F >= 2 ** 31:
            raise ValueError(f"{F} flows: the event-driven pfp indexes flows with int32")
        self.P = P
        # int32: a flow's links and coflow (the 10x trace has 14.7M flows)
        self.src = np.ascontiguousarray(src, dtype=np.int32)
        self.dst = np.ascontiguousarray(dst, dtype=np.int32)
        self.cof = np.ascontiguousarray(cof, dtype=np.int32)
        self.rem = np.array(size, dtype=float)
        self.state = np.zeros(F, dtype=np.int8)
        self.sel = np.full(2 * P, -1, dtype=np.int64)
        self.thr = np.full(2 * P, INF)  # key (remaining bytes) of the running flow per link
        self.lo = np.zeros(P * P + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.src * P + self.dst, minlength=P * P), out=self.lo[1:])
        self.heap = np.empty(F, dtype=np.int32)
        self.hn = np.zeros(P * P, dtype=np.int64)
        self.hpos = np.full(F, -1, dtype=np.int32)
        self.pk_s = np.full(P * P, INF)
        self.pt_s = np.full(P * P, -1, dtype=np.int64)
        self.pk_d = np.full(P * P, INF)
        self.pt_d = np.full(P * P, -1, dtype=np.int64)
        self.nwait = np.zeros(C, dtype=np.int64)
        self.nact = np.zeros(C, dtype=np.int64)
        self.cnt = np.zeros(8, dtype=np.int64)

    def args(self):
        return (self.P, self.src, self.dst, self.cof, self.rem, self.state, self.sel, self.thr, self.heap, self.lo,
                self.hn, self.hpos, self.pk_s, self.pt_s, self.pk_d, self.pt_d, self.nwait, self.nact,
                self.cnt)


@njit(cache=True)
def pfp_arrive(newf, P, src, dst, cof, rem, state, sel, thr, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d,
               nwait, nact, cnt):
    """Flows ``newf`` arrive (flows with bytes: the simulator counts flows without any done on
    arrival): waiting, in their pairs' heaps."""
    for i in range(newf.shape[0]):
        f = newf[i]
        state[f] = PFP_WAIT
        _pfp_wait(f, P, src, dst, rem, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d)
        k = cof[f]
        nact[k] += 1
        nwait[k] += 1
    cnt[PC_ACTIVE] += newf.shape[0]


@njit(cache=True)
def pfp_run(P, src, dst, cof, rem, state, sel, thr, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d, nwait, nact, cnt,
            cap, finish, opened, newf, buf, t, t_arr, cf_lo, cf_hi, per_coflow, rtol, max_steps, check):
    """The simulator's event loop (:func:`coflow.sim.simulate`) for pfp with capacity ``cap``
    on every link, the same steps in the same arithmetic: repair the matching (the
    scheduler's rates), time to the next completion (a flow's, or with ``per_coflow`` a whole
    coflow's and failing that a flow's), advance the running flows, finish those due.  Returns
    at the next arrival (``t_arr``), when no flow is active, or after ``max_steps`` events:
    (t, status, buf), status one of the RUN_* codes above.  ``finish`` gets coflow finish
    times; ``cnt[PC_EVENTS]`` counts events; with ``check`` ``cnt[PC_BAD]`` counts links found
    over capacity (two running flows) and running flows without both their links."""
    run = np.empty(P, dtype=np.int64)
    lst = np.empty((2 * P, P), dtype=np.int64)
    nl = np.zeros(2 * P, dtype=np.int64)
    nonew = np.empty(0, dtype=np.int64)
    cmax = np.full(cf_hi - cf_lo, -1.0)
    touched = np.empty(P, dtype=np.int64)
    steps = 0
    first = True
    while cnt[PC_ACTIVE] > 0:
        if steps >= max_steps:
            return t, RUN_MAX_STEPS, buf
        buf = pfp_settle(P, src, dst, cof, rem, state, sel, thr, heap, lo, hn, hpos, pk_s, pt_s, pk_d, pt_d,
                         lst, nl, nwait, cnt, newf if first else nonew, opened, buf)
        first = False
        steps += 1
        cnt[PC_EVENTS] += 1
        nr = 0
        for s in range(P):
            f = sel[s]
            if f >= 0:
                run[nr] = f
                nr += 1
        if check:
            for s in range(P):
                f = sel[s]
                if f >= 0 and (state[f] != PFP_RUN or src[f] != s or sel[P + dst[f]] != f):
                    cnt[PC_BAD] += 1
                g = sel[P + s]
                if g >= 0 and (state[g] != PFP_RUN or dst[g] != s or sel[src[g]] != g):
                    cnt[PC_BAD] += 1
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
            return t, RUN_NO_PROGRESS, buf
        dt = t_next - t
        if dt <= 0:
            cnt[PC_ZERO_STEPS] += 1
            if cnt[PC_ZERO_STEPS] > 100:
                return t, RUN_STUCK, buf
        else:
            cnt[PC_ZERO_STEPS] = 0
        fin_before = dt_c * (1 + max(rtol, 1e-9)) + 1e-12 if t + dt_c <= t_next else -1.0
        if per_coflow:
            fin_before = max(dt, dt_c if t + dt_c <= t_next else 0.0) * (1 + 1e-9) + 1e-12
        no = cnt[PC_OPEN]
        for i in range(nr):
            f = run[i]
            x = rem[f]
            if x <= fin_before * cap:
                state[f] = PFP_DONE
                s = src[f]
                d = P + dst[f]
                sel[s] = -1
                sel[d] = -1
                thr[s] = INF
                thr[d] = INF
                opened[no] = s
                opened[no + 1] = d
                no += 2
                cnt[PC_ACTIVE] -= 1
                k = cof[f]
                nact[k] -= 1
                if nact[k] == 0:
                    finish[k] = t_next
            else:
                y = x - cap * dt
                rem[f] = y
                thr[src[f]] = y
                thr[P + dst[f]] = y
        cnt[PC_OPEN] = no
        t = t_next
        if t_arr <= t + 1e-12:
            break
    return t, RUN_RETURNED, buf


def simulate_incremental(wl: Workload, sched: Scheduler, cap: float, progress: bool, check: bool,
                          max_events: int, label: str, rtol: float, per_coflow: bool, t0: float) -> SimResult:
    """:func:`simulate` for a scheduler with an event-driven form (pfp): the event loop runs
    compiled (:func:`pfp_run`) between coflow arrivals, over state kept for
    every flow of the workload.  An event costs O(P) plus the repair's cascade (O(log n) heap
    steps per flow started or pre-empted) instead of O(active flows); an arrival adds O(C), and
    in CoflowSim's convention an event costs O(C) more while a flow without bytes waits."""
    P, C = wl.ports, wl.ncoflows
    cof_all = wl.coflow_of_flow()
    st = PfpState(P, wl.src, wl.dst, cof_all, wl.size, C)
    args = st.args()
    cnt = st.cnt
    finish = np.full(C, np.nan)
    opened = np.empty(2 * P, dtype=np.int64)
    buf = pfp_buffers()
    nothing = np.empty(0, dtype=np.int64)
    bar = _progress_bar(progress, C, label or sched.name)
    log_at = t0 + _sim.LOG_EVERY_S if progress and not sys.stderr.isatty() else INF
    nxt = 0
    done = 0
    t = 0.0 if C == 0 else float(wl.arrival[0])
    chunk = 20_000
    while True:
        newf = nothing
        if nxt < C and wl.arrival[nxt] <= t + 1e-12:
            j, fl, _ = _arrivals(wl, cof_all, nxt, t, finish)
            newf = np.arange(fl.start, fl.stop, dtype=np.int64) if isinstance(fl, slice) else fl.astype(np.int64)
            pfp_arrive(newf, *args)
            nxt = j
        if cnt[PC_ACTIVE] == 0:
            if nxt < C:
                t = float(wl.arrival[nxt])
                continue
            break
        t_arr = float(wl.arrival[nxt]) if nxt < C else INF
        while True:
            # the generic loop gives up when event max_events + 1 would start
            budget = max(0, max_events - int(cnt[PC_EVENTS]))
            t, status, buf = pfp_run(*args, cap, finish, opened, newf, buf, t, t_arr, 0, nxt, per_coflow,  # type: ignore[call-arg]
                                             rtol, min(chunk, budget), check)
            newf = nothing
            if status == RUN_MAX_STEPS and budget <= chunk:
                raise SimError(f"more than {max_events} events: giving up")
            if bar is not None or time.perf_counter() >= log_at:
                now_done = int(np.isfinite(finish[:nxt]).sum())
                if bar is not None and now_done > done:
                    bar.update(now_done - done)
                done = now_done
            if time.perf_counter() >= log_at:
                log_at = time.perf_counter() + _sim.LOG_EVERY_S
                print(f"{label or sched.name}: t={t:.1f} s simulated, {done}/{C} coflows done, "
                      f"{int(cnt[PC_EVENTS])} events, {int(cnt[PC_ACTIVE])} active flows, "
                      f"{time.perf_counter() - t0:.0f} s wall", file=sys.stderr, flush=True)
            if status == RUN_STUCK:
                raise SimError(f"{sched.name}: stuck at t={t:.6f}")
            if status == RUN_NO_PROGRESS:
                raise SimError(f"{sched.name}: no flow can progress at t={t:.6f} and nothing is pending")
            if status == RUN_RETURNED:
                break
    if bar is not None:
        bar.close()
    events = int(cnt[PC_EVENTS])
    # with one flow per link at the link's capacity, a link is exactly full or empty: the check
    # is that the running flows form a matching (pfp_run counts violations)
    max_over = (1.0 if cnt[PC_BAD] else 0.0) if check and events else -1.0
    return SimResult(finish, np.ones(C, dtype=bool), events, time.perf_counter() - t0, max_over)

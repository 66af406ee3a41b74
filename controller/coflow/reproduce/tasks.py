"""One task of a sweep: (workload, scheduler, parameters, rescheduling mode) -> a small summary.

A task is a JSON-able dict; its content hash (with the FB trace's digest and :data:`VERSION`)
names its cached result, so an interrupted sweep resumes and a re-run reuses what is done.
``kind: sim`` runs the fluid simulator; ``kind: snapshot`` asks the scheduler once with every
coflow of the workload active at t = 0 (HUG's instantaneous progress and utilisation, [DISS]
Fig. 7.12).
"""
from __future__ import annotations

import hashlib
import json
import time

import numpy as np

from ..sched import make_scheduler
from ..sched.base import View
from ..sim import isolation_times, simulate
from ..trace import coflow_bins
from . import workloads

#: bump when a change of the code changes task results (invalidates every cached result)
VERSION = 1
GBPS = 1.25e8  # bytes/s of every port, as the seeds' simulators (1 Gbit/s)


def task_key(task: dict) -> str:
    blob = json.dumps({"task": task, "v": VERSION, "data": workloads.digest(task["workload"])}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def label(task: dict) -> str:
    p = ",".join(f"{k}={v}" for k, v in sorted(task.get("params", {}).items()))
    return (f"{task['scheduler']}{'[' + p + ']' if p else ''} on {json.dumps(task['workload'], sort_keys=True)}"
            f" ({task.get('reschedule', 'flow')})")


def _r(x: np.ndarray) -> list:
    return [None if not np.isfinite(v) else float(f"{v:.9g}") for v in np.asarray(x, dtype=float).tolist()]


def run_task(task: dict) -> dict:
    t0 = time.perf_counter()
    wl = workloads.build(task["workload"])
    sched = make_scheduler(task["scheduler"], {k: str(v) for k, v in task.get("params", {}).items()} or None)
    if task.get("kind", "sim") == "snapshot":
        out = snapshot(wl, sched)
    else:
        caps = np.full(wl.ports, GBPS)
        r = simulate(wl, sched, GBPS, reschedule=task.get("reschedule", "flow"), check=bool(task.get("check")))
        iso = isolation_times(wl, caps, caps)
        if getattr(wl, "dynamics", None) is not None:
            # waves and DAGs (coflow.dynamics): per trace coflow (waves merged) and per job
            from ..dynamics import dynamic_records
            assert r.start is not None and r.complete is not None  # a dynamic workload's result has them
            recs, jobs = dynamic_records(wl, r.admitted, r.start, r.complete, iso)
            nan = float("nan")
            out = {"cct": _r(np.array([nan if c["cct_s"] is None else c["cct_s"] for c in recs])),
                   "admitted": [bool(c["admitted"]) for c in recs], "deadline": None,
                   "iso": _r(np.array([c["isolation_s"] for c in recs])), "bins": [c["bin"] for c in recs],
                   "jct": _r(np.array([nan if j["jct_s"] is None else j["jct_s"] for j in jobs])),
                   "critical_path": _r(np.array([j["critical_path_s"] for j in jobs])),
                   "events": int(r.events), "max_overload": float(r.max_overload)}
        else:
            out = {"cct": _r(r.finish - wl.arrival), "admitted": [bool(a) for a in r.admitted],
                   "deadline": None if wl.deadline is None else _r(wl.deadline),
                   "iso": _r(iso), "bins": coflow_bins(wl).tolist(),
                   "events": int(r.events), "max_overload": float(r.max_overload)}
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    return out


def snapshot(wl, sched) -> dict:
    """Every coflow active at once, nothing sent: one allocation. Progress of coflow k = min
    over the links it uses of (its rate there / capacity) / d_k^i, d_k its correlation vector
    ([DISS] section 7.2); utilisation = the rates' sum over the uplinks' total capacity."""
    P, C = wl.ports, wl.ncoflows
    cof = wl.coflow_of_flow()
    cap = np.full(P, GBPS)
    v = View(now=0.0, ports=P, cap_up=cap, cap_down=cap, src=wl.src, dst=wl.dst, sent=np.zeros(wl.nflows),
             cf=cof, reducer=wl.reducer, cf_id=wl.ids, cf_arrival=np.zeros(C), cf_sent=np.zeros(C),
             cf_lo=wl.flow_lo, remaining=wl.size.copy() if sched.clairvoyant else None,
             cf_total=np.bincount(cof, wl.size, C) if sched.clairvoyant else None, memory={})
    if hasattr(sched, "configure"):
        sched.configure(np.bincount(cof, wl.size, C))
    rates = sched.allocate(v).rates
    L = 2 * P
    link_of = lambda flow_link: cof * L + flow_link  # noqa: E731
    a = (np.bincount(link_of(wl.src), rates, C * L) + np.bincount(link_of(P + wl.dst), rates, C * L)).reshape(C, L) / GBPS
    d = (np.bincount(link_of(wl.src), wl.size, C * L) + np.bincount(link_of(P + wl.dst), wl.size, C * L)).reshape(C, L)
    d = d / d.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        prog = np.where(d > 0, a / d, np.inf).min(axis=1)
    load = np.concatenate([np.bincount(wl.src, rates, P), np.bincount(wl.dst, rates, P)])
    return {"progress": _r(prog), "utilisation": float(rates.sum() / (P * GBPS)),
            "max_overload": float((load / GBPS).max() - 1.0), "coflows": C}

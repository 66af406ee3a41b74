"""Sweeps on Dask: tasks (workload, scheduler, parameters) -> summaries, cached by content hash.

A ``LocalCluster`` of ``workers`` single-threaded worker processes by default, or any running
Dask scheduler by address (``tcp://HOST:8786``), so a sweep that outgrows one machine runs on
many. Results are cached under ``cache_dir`` as ``<hash>.json`` (written atomically when a task
ends): an interrupted sweep resumes where it stopped and a re-run reuses what is done. A failed
task is reported with its parameters and the sweep goes on. No process pool of our own: Dask
schedules, retries lost workers and moves the results.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

from ..progress import phase
from .tasks import label, run_task, task_key


class SweepError(RuntimeError):
    pass


def _dask():
    try:
        import dask  # noqa: F401
        from dask import distributed
    except ImportError:
        raise SweepError("dask and distributed are not installed: pip install -e '.[sweep]' "
                         "(or make venv, whose extras include them)") from None
    return distributed


@dataclass
class SweepResult:
    results: dict  # key -> summary
    failed: dict  # key -> one-line error
    ran: int = 0
    cached: int = 0
    wall_s: float = 0.0
    engine: dict = field(default_factory=dict)


def local_cluster(workers: int):
    """A ``LocalCluster`` of ``workers`` single-threaded worker processes, without a dashboard.
    ``dashboard_address=None`` alone only hides the dashboard: the scheduler's HTTP server (health,
    metrics) still binds port 8787 and warns "Port 8787 is already in use" when another
    cluster (a second sweep, a user's notebook) holds it. On port 0 it takes a free port quietly."""
    distributed = _dask()
    return distributed.LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                                    dashboard_address=":0", scheduler_kwargs={"dashboard": False},
                                    silence_logs=40)


def cost_class(task: dict) -> int:
    """The order tasks are submitted in (highest first): the FB trace, generated and dynamic
    traces, small ones, and the FB trace in Fai's load scheme (the costliest) last."""
    w = task["workload"]
    if w.get("kind") == "fb":
        # Fai's load scheme (every coflow at once) last: on a machine shared with others a sweep
        # cut short still has every other figure
        return -1 if "load" in w else 2
    return 1 if w.get("kind") in ("gen", "fb-waves", "tpcds") else 0


def _write_atomic(path: str, obj) -> None:
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_cached(cache_dir: str, key: str):
    p = os.path.join(cache_dir, key + ".json")
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def run_sweep(tasks: list[dict], workers: int = 2, scheduler: str | None = None,
              cache_dir: str = "out/reproduce/cache", progress: bool = True, timeout: float | None = None,
              use_cache: bool = True) -> SweepResult:
    """Run every task not already in the cache; returns every task's summary by key."""
    t0 = time.perf_counter()
    keys = [task_key(t) for t in tasks]
    uniq: dict[str, dict] = {}
    for k, t in zip(keys, tasks):
        uniq.setdefault(k, t)
    out = SweepResult({}, {})
    pending = []
    for k, t in uniq.items():
        c = load_cached(cache_dir, k) if use_cache else None
        if c is not None:
            out.results[k] = c
            out.cached += 1
        else:
            pending.append((k, t))
    if pending:
        distributed = _dask()
        if scheduler:
            client = distributed.Client(scheduler, timeout=30)
            cluster = None
        else:
            cluster = local_cluster(workers)
            client = distributed.Client(cluster)
        try:
            out.engine = {"scheduler": scheduler or f"LocalCluster({workers} workers)",
                          "workers": len(client.scheduler_info().get("workers", {}))}
            # the costliest tasks first (longest-processing-time first keeps both workers busy to the
            # end), but the FB trace in Fai's load scheme last
            pending.sort(key=lambda kt: -cost_class(kt[1]))
            futs = {client.submit(run_task, t, key=f"coflow-task-{k}", pure=False, priority=len(pending) - i): (k, t)
                    for i, (k, t) in enumerate(pending)}
            bar = None
            if progress:
                bar = phase("sweep", len(futs), "task")
            for fut in distributed.as_completed(list(futs), timeout=timeout):
                k, t = futs[fut]
                try:
                    r = fut.result()
                except Exception as e:  # noqa: BLE001 - a failed task is reported, the sweep goes on
                    msg = f"{type(e).__name__}: {e}".splitlines()[0]
                    out.failed[k] = msg
                    line = f"sweep: task failed: {label(t)}: {msg}"
                    if bar is not None:
                        bar.write(line)
                    else:
                        print(line, file=sys.stderr)
                else:
                    _write_atomic(os.path.join(cache_dir, k + ".json"), r)
                    out.results[k] = r
                    out.ran += 1
                if bar is not None:
                    bar.update(1)
            if bar is not None:
                bar.close()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    out.wall_s = time.perf_counter() - t0
    return out

"""Workloads of the seeds' experiments, built from a small JSON-able spec (the catalog's data).

Every spec is a dict with a ``kind``:

- ``fb``: the Facebook coflow-benchmark trace (``$FB_TRACE``, else ``../shared/traces/
  FB2010-1Hr-150-0.txt`` beside the checkout). Options: ``load`` + ``seed``: Fai's load scheme
  ([FAI] section IV-A: ``load`` coflows arrive per 10 ms time slot, a Poisson process, the
  trace's order kept); ``deadline_x`` + ``deadline_seed``: Varys's deadlines ([VARYS] 7.1:
  isolation time x (1 + U(0, x)), at least 200 ms); ``first``: only the first N coflows.
- ``gen``: :func:`coflow.trace.generate` (the FB-like generator) with its arguments.
- ``light``: Aalo Fig. 13's light-tailed coflows: ``coflows`` coflows whose structure (width
  bins SN/LN/SW/LW as in the FB trace, the generator's) is kept and whose total size is
  U(0, ``x_mb``] (``dist: uniform``) or exactly ``x_mb`` (``dist: fixed``), spread evenly
  over its flows, Poisson arrivals at offered ``load``.
- ``fb-waves`` (``max_waves`` 1, 2 or 4) and ``tpcds`` (``queries``, ``ports``, ``seed``,
  ``load``): Aalo's multi-wave coflows and DAGs of coflows (:mod:`coflow.dynamics`, where the
  checkout has it).
- ``shuffle``: one coflow alone (MADD, [DISS] Fig. 4.6): two receivers, sender 0 sends ``n``
  units to each, ``n`` other senders one unit to each (see :func:`madd_shuffle`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os

import numpy as np

from ..params import MB
from ..trace import CoflowSpec, Trace, Workload, expand, generate, read_trace

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


class WorkloadError(ValueError):
    pass


def fb_trace_path() -> str:
    env = os.environ.get("FB_TRACE")
    if env:
        return env
    return os.path.join(REPO, "..", "shared", "traces", "FB2010-1Hr-150-0.txt")


@functools.lru_cache(maxsize=4)
def _file_digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def digest(spec: dict) -> str:
    """What the workload's content depends on besides the spec (the FB trace's bytes)."""
    if spec.get("kind") in ("fb", "fb-waves"):
        p = fb_trace_path()
        if not os.path.exists(p):
            raise WorkloadError(f"{p}: the FB trace is not there (set FB_TRACE)")
        return _file_digest(p)
    return ""


def describe(spec: dict) -> str:
    k = spec["kind"]
    if k == "fb":
        s = "FB trace (526 coflows, 150 ports)"
        if "first" in spec:
            s = f"FB trace, first {spec['first']} coflows"
        if "load" in spec:
            s += f", Fai's load scheme: {spec['load']} coflows per 10 ms (Poisson, seed {spec.get('seed', 1)})"
        if "deadline_x" in spec:
            s += f", deadlines Γ·(1+U(0,{spec['deadline_x']:g})) ≥ 200 ms (seed {spec.get('deadline_seed', 1)})"
        return s
    if k == "gen":
        return ("generated FB-like trace (`coflow trace gen --coflows {coflows} --ports {ports} --load {load} "
                "--seed {seed}`)".format(**{"load": 0.6, "seed": 1, **spec}))
    if k == "light":
        return (f"{spec['coflows']} coflows on {spec['ports']} ports, sizes "
                + (f"U(0, {spec['x_mb']:g} MB]" if spec["dist"] == "uniform" else f"fixed {spec['x_mb']:g} MB")
                + f", seed {spec['seed']}")
    if k == "fb-waves":
        return (f"FB trace split into waves with Aalo's Table 4 mix for at most {spec['max_waves']} waves "
                f"(`coflow.dynamics.split_waves`)")
    if k == "tpcds":
        return (f"{spec['queries']} generated TPC-DS-like query DAGs on {spec['ports']} ports, load "
                f"{spec.get('load', 0.5)}, seed {spec['seed']} (`coflow.dynamics.tpcds_dags`: a stand-in for the "
                f"Cloudera benchmark's 20 TPC-DS queries, not available here)")
    if k == "shuffle":
        return (f"one shuffle, N={spec['n']}: two receivers, sender 0 sends N MB to each, N other senders "
                f"1 MB to each (a stand-in: the figure's shuffle is not in the text)")
    raise WorkloadError(f"unknown workload kind {k!r}")


def madd_shuffle(n: int) -> Workload:
    """A skewed shuffle with two receivers (ports 1 and 2): sender 0 sends n units to each, and
    n other senders (ports 1..n) send one unit to each. Every receiver and sender 0 carry 2n
    units: MADD finishes at 2n. Per-flow fairness gives each receiver's n + 1 flows 1/(n+1):
    the small flows end at n + 1, when sender 0's two flows have sent one unit each (its uplink
    2/(n+1) busy); they then share its uplink at 1/2 and end at 3n - 1. Fair / MADD =
    1.5 - 1/(2n): 1.495 at n = 100, the ratio [DISS] Fig. 4.6 prints (the figure's shuffle is
    not in the text; this family, found by searching small shuffles, gives the printed number).
    """
    src = [0, 0] + [i for i in range(1, n + 1) for _ in (1, 2)]
    dst = [1, 2] + [j for _ in range(1, n + 1) for j in (1, 2)]
    size = [float(n) * MB] * 2 + [float(MB)] * (2 * n)
    m = len(src)
    return Workload(n + 1, np.array([1]), np.array([0.0]), np.array([0, m]), np.array(src, dtype=np.int32),
                    np.array(dst, dtype=np.int32), np.array(size), np.arange(m, dtype=np.int64))


def light_trace(coflows: int, ports: int, x_mb: float, dist: str, seed: int, load: float = 0.6) -> Trace:
    base = generate(coflows, ports, load=load, seed=seed)
    rng = np.random.default_rng(seed + 10_000)
    out = []
    for c in base.coflows:
        total = float(x_mb) if dist == "fixed" else float(rng.uniform(0, x_mb)) or x_mb * 1e-6
        per = total / len(c.reducers)
        out.append(CoflowSpec(c.id, c.arrival_ms, c.mappers, [(p, round(per, 6)) for p, _ in c.reducers]))
    # arrivals rescaled so that the offered load is ``load`` again
    tot = sum(sum(mb for _, mb in c.reducers) for c in out) * MB
    dur = tot / (load * ports * 1.25e8)
    span = max(out[-1].arrival_ms, 1) / 1000.0
    f = dur / span
    out = [CoflowSpec(c.id, int(round(c.arrival_ms * f)), c.mappers, c.reducers) for c in out]
    return Trace(ports, out, "<light>")


@functools.lru_cache(maxsize=8)
def _build(spec_json: str) -> Workload:
    spec = json.loads(spec_json)
    k = spec.get("kind")
    if k == "fb":
        p = fb_trace_path()
        if not os.path.exists(p):
            raise WorkloadError(f"{p}: the FB trace is not there (set FB_TRACE)")
        tr = read_trace(p)
        if "first" in spec:
            tr = Trace(tr.ports, tr.coflows[: int(spec["first"])], tr.path)
        wl = expand(tr)
        if "load" in spec:
            rng = np.random.default_rng(int(spec.get("seed", 1)))
            gaps = rng.exponential(0.010 / float(spec["load"]), wl.ncoflows)
            gaps[0] = 0.0
            wl.arrival = np.cumsum(gaps)
        if "deadline_x" in spec:
            from ..sim import isolation_times
            caps = np.full(wl.ports, 1.25e8)
            iso = isolation_times(wl, caps, caps)
            rng = np.random.default_rng(int(spec.get("deadline_seed", 1)))
            wl.deadline = np.maximum(0.2, iso * (1 + rng.uniform(0, float(spec["deadline_x"]), wl.ncoflows)))
        return wl
    if k == "gen":
        args = {a: spec[a] for a in ("coflows", "ports", "load", "tail", "seed") if a in spec}
        args["ncoflows"] = args.pop("coflows")
        return expand(generate(**args))
    if k == "light":
        return expand(light_trace(int(spec["coflows"]), int(spec["ports"]), float(spec["x_mb"]), spec["dist"],
                                  int(spec["seed"]), float(spec.get("load", 0.6))))
    if k == "shuffle":
        return madd_shuffle(int(spec["n"]))
    if k in ("fb-waves", "tpcds"):
        try:
            from .. import dynamics as D
        except ImportError:
            raise WorkloadError(f"workload {k}: runtime dynamics (coflow.dynamics) are not in this checkout") from None
        if k == "fb-waves":
            p = fb_trace_path()
            if not os.path.exists(p):
                raise WorkloadError(f"{p}: the FB trace is not there (set FB_TRACE)")
            return expand(D.split_waves(read_trace(p), mix=D.TABLE4_MIXES[int(spec["max_waves"])]))
        return expand(D.tpcds_dags(queries=int(spec["queries"]), ports=int(spec["ports"]), seed=int(spec["seed"]),
                                   load=float(spec.get("load", 0.5))))
    raise WorkloadError(f"unknown workload kind {k!r}")


def build(spec: dict) -> Workload:
    """The workload of ``spec`` (cached per process: tasks of one sweep share it)."""
    return _build(json.dumps(spec, sort_keys=True))

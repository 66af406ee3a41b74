"""Measures, verdicts and REPRODUCTION.md.

``evaluate(entry, outputs)`` turns the task summaries of one catalog entry into its rows (the
paper's number, ours, the verdict and its reason); the result is saved as
``results/reproduce/NAME.json``. ``render(results_dir)`` writes REPRODUCTION.md from those
summaries alone, so a test can check that the committed document is what the command renders
(as README's tables, :mod:`coflow.results`).

Metric expressions (lists, first element the operator; labels are the entry's runs):
``avg_ratio a b`` (a's average CCT / b's), ``p95_ratio a b``, ``bin_avg_ratio a b BIN``,
``coflow_ratio_mean a b`` (mean over coflows of a's CCT / b's: Fai's and Utopia's per-coflow
normalization), ``coflow_ratio_pct_ge a b x``, ``met_pct a`` (coflows admitted and done by
their deadline, %), ``met_of_admitted_pct a``, ``slowdown a`` (CCT / isolation time: min, max,
avg, sd), ``slowdown_avg a``, ``snap_pct a key`` / ``snap_min a key`` (snapshot tasks),
``max_overload [a...]``, ``runs_avg_ratio [a...] [b...]`` (mean of a's average CCTs / b's),
and ``mean | max | list | spread [expr...]``, ``div | sub e1 e2``, ``jump_at [expr...] [x...]``
(the x after the largest rise), ``ordered [expr...]`` (1 if increasing).
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

SCHEMA = 1
DOC = "REPRODUCTION.md"


class MetricError(ValueError):
    pass


def _cct(o: dict) -> np.ndarray:
    return np.array([np.nan if x is None else x for x in o["cct"]], dtype=float)


def _done(o: dict) -> np.ndarray:
    c = _cct(o)
    return np.isfinite(c) & np.array(o["admitted"], dtype=bool)


def _avg(o):
    c = _cct(o)
    return float(np.mean(c[_done(o)]))


def _p95(o):
    c = _cct(o)
    return float(np.percentile(c[_done(o)], 95))


def _slow(o):
    c, iso = _cct(o), np.array(o["iso"], dtype=float)
    m = _done(o) & (iso > 0)
    return c[m] / iso[m]


def value(expr, out: dict):
    """Evaluate a metric expression over ``out`` (run label -> task summary)."""
    if isinstance(expr, (int, float)):
        return expr
    op, *a = expr
    run = lambda lab: out[lab] if lab in out else (_ for _ in ()).throw(MetricError(f"run {lab!r} missing"))  # noqa: E731
    if op == "avg_s":
        return _avg(run(a[0]))
    if op == "p95_s":
        return _p95(run(a[0]))
    if op == "avg_ratio":
        return _avg(run(a[0])) / _avg(run(a[1]))
    if op == "avg_jct_ratio":
        x, y = (np.array([np.nan if v is None else v for v in run(lab)["jct"]], dtype=float) for lab in a[:2])
        return float(np.nanmean(x) / np.nanmean(y))
    if op == "p95_ratio":
        return _p95(run(a[0])) / _p95(run(a[1]))
    if op == "bin_avg_ratio":
        x, y = run(a[0]), run(a[1])
        m = np.array(x["bins"]) == a[2]
        return float(np.nanmean(_cct(x)[m]) / np.nanmean(_cct(y)[m]))
    if op in ("coflow_ratio_mean", "coflow_ratio_pct_ge"):
        x, y = _cct(run(a[0])), _cct(run(a[1]))
        m = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
        r = x[m] / y[m]
        return float(r.mean()) if op == "coflow_ratio_mean" else float(100 * np.mean(r >= a[2] * (1 - 1e-9)))
    if op in ("met_pct", "met_of_admitted_pct", "met_pct_bin"):
        o = run(a[0])
        c, d = _cct(o), np.array(o["deadline"], dtype=float)
        adm = np.array(o["admitted"], dtype=bool)
        met = adm & np.isfinite(c) & (c <= d * (1 + 1e-9) + 1e-9)
        if op == "met_pct_bin":
            m = np.array(o["bins"]) == a[1]
            return float(100 * met[m].mean())
        return float(100 * met.mean()) if op == "met_pct" else float(100 * met.sum() / max(1, adm.sum()))
    if op == "slowdown":
        s = _slow(run(a[0]))
        return [float(s.min()), float(s.max()), float(s.mean()), float(s.std())]
    if op == "slowdown_avg":
        return float(_slow(run(a[0])).mean())
    if op == "snap_pct":
        return 100 * float(run(a[0])[a[1]])
    if op == "snap_min":
        return float(np.nanmin(np.array(run(a[0])[a[1]], dtype=float)))
    if op == "max_overload":
        return max(float(run(lab)["max_overload"]) for lab in a[0])
    if op == "runs_avg_s":
        return float(np.mean([_avg(run(x)) for x in a[0]]))
    if op == "runs_avg_ratio":
        return float(np.mean([_avg(run(x)) for x in a[0]]) / np.mean([_avg(run(y)) for y in a[1]]))
    if op in ("mean", "max", "list", "spread", "ordered"):
        vs = [value(e, out) for e in a[0]]
        if op == "mean":
            return float(np.mean(vs))
        if op == "max":
            return float(np.max(vs))
        if op == "spread":
            return float(max(vs) / min(vs))
        if op == "ordered":
            return int(all(x < y for x, y in zip(vs, vs[1:])))
        return vs
    if op == "div":
        return value(a[0], out) / value(a[1], out)
    if op == "sub":
        return value(a[0], out) - value(a[1], out)
    if op == "best":  # the name whose expression is largest, and that value
        vs = [value(e, out) for e in a[0]]
        j = int(np.argmax(vs))
        return f"{a[1][j]} ({fmt(vs[j])})"
    if op == "jump_at":
        vs = [value(e, out) for e in a[0]]
        j = int(np.argmax(np.diff(vs)))
        return a[1][j + 1]
    raise MetricError(f"unknown metric {op!r}")


def fmt(v, kind: str = "x") -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if kind == "list":
        return " / ".join(fmt(x) for x in v)
    if kind == "list%":
        return " / ".join(fmt(x, "%") for x in v)
    if kind == "stats":
        return " / ".join(f"{x:.2f}" for x in v)
    if kind == "%":
        return f"{v:.1f}%"
    if kind == "s":
        return f"{v:.2f} s"
    if kind == "over":
        return f"{v:.0%} above capacity"
    if kind == "pts":
        return f"{v:+.1f} pts"
    if kind == "K":
        return f"K = {v}"
    if kind == "bool":
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(v)
    if abs(v) >= 100:
        return f"{v:,.0f}x"
    if kind == "x3":
        return f"{v:.3f}x"
    return f"{v:.2f}x" if kind == "x" else f"{v:.3g}"


_OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        "==": lambda a, b: a == b}


def kind_of(expr) -> str:
    """How a metric's value reads: percentages, seconds, overload or a ratio."""
    op = expr[0] if isinstance(expr, list) and expr and isinstance(expr[0], str) else ""
    if op.startswith("met") or op in ("snap_pct", "coflow_ratio_pct_ge"):
        return "%"
    if op in ("avg_s", "p95_s", "runs_avg_s"):
        return "s"
    if op == "max_overload":
        return "over"
    if op == "snap_min":
        return "g"
    if op == "list":
        return "list"
    return "x"


def _because(row: dict, because: dict) -> dict:
    return {k: fmt(x, kind_of(row.get("because", {}).get(k))) for k, x in because.items()}


def verdict(row: dict, v, because: dict) -> str:
    why = row.get("why", "")
    try:
        why = why.format(**_because(row, because))
    except (KeyError, IndexError, ValueError):
        pass
    if v is None:
        return "not run: " + (row.get("_missing") or "a task failed")
    if "expect" in row:
        num = v[2] if isinstance(v, list) else v  # stats rows: judged on the average
        e = row["expect"]
        if "tol_abs" in row:
            dev, ok = num - e, abs(num - e) <= row["tol_abs"]
            tol = f"{row['tol_abs']:g} pts"
            d = f"{dev:+.1f} pts"
        else:
            dev = num / e - 1
            ok = abs(dev) <= row["tol"]
            tol = f"{row['tol']:.0%}"
            d = f"{dev:+.0%}"
        if ok:
            return f"within {tol} ({d})" + (f"; {why}" if why and row.get("why_always") else "")
        return f"differs ({d}, beyond {tol})" + (f": {why}" if why else "")
    if "claim" in row:
        op, x = row["claim"]
        ok = _OPS[op](v, x)
        return ("the paper's claim holds" if ok else "the claim does not hold") + f" ({op} {fmt(x, row.get('fmt', 'x')) if row.get('fmt') not in ('bool', 'K') else x})" \
            + (f": {why}" if why and not ok else "")
    if "claim_each" in row:
        lo, hi = row["claim_each"]
        n = sum(lo <= x <= hi for x in v)
        return (f"{n} of {len(v)} loads in [{lo}, {hi}]" + ("" if n == len(v) else f": {why}" if why else ""))
    return f"reported{': ' + why if why else ''}"


def _labels(expr) -> set:
    """Every string an expression names (its run labels among them)."""
    if isinstance(expr, str):
        return {expr}
    if isinstance(expr, list):
        return set().union(*(_labels(x) for x in expr)) if expr else set()
    return set()


def evaluate(entry: dict, outputs: dict, failed: set[str]) -> list[dict]:
    rows = []
    for row in entry["rows"]:
        try:
            v = value(row["value"], outputs)
            because = {k: value(e, outputs) for k, e in row.get("because", {}).items()}
        except (MetricError, KeyError, ValueError, ZeroDivisionError, IndexError):
            v, because = None, {}
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        if v is None:
            lost = sorted((_labels(row["value"]) & set(entry["runs"])) - set(outputs))
            row = {**row, "_missing": ("failed: " if set(lost) & failed else "no result yet (not run in this session): ")
                   + ", ".join(lost) if lost else "a measure could not be computed"}
        rows.append({"what": row["what"].format(**_because(row, because)) if because else
                     row["what"].replace("{ravg}", "-").replace("{ov}", "-"),
                     "paper": row["paper"], "ours": fmt(v, row.get("fmt", "x")), "value": v,
                     "verdict": verdict(row, v, because)})
    return rows


def summary(entry: dict, rows: list[dict], run: dict) -> dict:
    from .workloads import describe
    return {"schema": SCHEMA, "kind": "repro", "name": entry["name"], "paper": entry["paper"],
            "figure": entry["figure"], "seed": entry["seed"], "workload": describe(entry["workload"]),
            "reschedule": entry["reschedule"], "note": entry.get("note", ""),
            "schedulers": sorted({(r["scheduler"], json.dumps(r.get("params", {}), sort_keys=True))
                                  for r in entry["runs"].values()}),
            "runs": len(entry["runs"]), "rows": rows, "run": run}


# the document ------------------------------------------------------------------------------------

HEAD = """# Reproduction: the seeds' evaluation, figure by figure

Rendered by `coflow reproduce --render` from the summaries in `results/reproduce/` (which
`coflow reproduce NAME...` / `--all` write after running the experiments on Dask); a test fails
when this file differs from what the command renders. `coflow reproduce --list` lists the
experiments; the catalog (`controller/coflow/reproduce/catalog.py`) holds each one's paper,
figure, seed text, workload, schedulers, parameters and the paper's numbers
(`../shared/docs/seeds-digest.md` sections 4-10).

Conventions: 1 Gbit/s ports, the `split` convention (CoflowSim's), the simulator's
rescheduling mode given per figure (`coflow`: CoflowSim's, rates recomputed at coflow arrivals,
departures and scheduler epochs, which the seeds' simulators used; `flow`: exact). Verdicts: a
number is *within N%* of the paper's (N given per row) or *differs*, with the reason measured
where we have one; a qualitative claim *holds* or *does not hold*.
"""


def render_entry(s: dict) -> str:
    cmd = f"`coflow reproduce {s['name']}`"
    out = [f"## {s['name']}: {s['paper']}, {s['figure']}", "",
           f"Seed: `../shared/seeds/{s['seed'].split()[0]}*` ({s['seed']}). Workload: {s['workload']}. "
           f"Rescheduling: `{s['reschedule']}`. {s['runs']} runs. {s['note']}".rstrip(), "",
           f"Run: {_machine(s['run'])}.", "",
           "| | paper | ours | command | verdict |", "|---|---|---|---|---|"]
    for r in s["rows"]:
        out.append(f"| {r['what']} | {r['paper']} | {r['ours']} | {cmd} | {r['verdict']} |")
    return "\n".join(out) + "\n"


def _machine(run: dict) -> str:
    load = (run.get("loadavg_1_5_15") or [None])[0]
    return (f"{run.get('date')}, {run.get('cpus')}-core {run.get('cpu_model')}, load {load if load is None else round(load, 1)}"
            f" at save, commit {run.get('commit') or '?'}, {run.get('engine', '?')}, "
            f"sweep of {run.get('ran', 0)} tasks run / {run.get('cached', 0)} from the cache in {run.get('wall_s', 0):.0f} s; "
            f"this experiment's tasks took {run.get('tasks_wall_s', 0):,.0f} s of worker time when they ran")


def load_summaries(results_dir: str) -> dict:
    out: dict = {}
    if not os.path.isdir(results_dir):
        return out
    for f in sorted(os.listdir(results_dir)):
        if f.endswith(".json") and not f.startswith("_"):
            p = os.path.join(results_dir, f)
            try:
                with open(p) as fh:
                    s = json.load(fh)
            except json.JSONDecodeError as e:
                raise MetricError(f"{p}:{e.lineno}: not JSON: {e.msg}") from None
            if not isinstance(s, dict) or s.get("kind") != "repro" or s.get("schema") != SCHEMA:
                raise MetricError(f"{p}: not a reproduction summary (kind repro, schema {SCHEMA})")
            out[s["name"]] = s
    return out


#: wall-time budget of `coflow reproduce --all --workers 2` from an empty cache on this 2-core
#: machine (the issue's target: under 60 minutes)
BUDGET_ALL_S = 3600.0


def run_time(sums: dict, order: list[str]) -> str:
    """The "Run time" paragraph: the wall time of the whole catalog when every summary comes from
    one ``--all`` run from an empty cache, against :data:`BUDGET_ALL_S`; else why there is none."""
    runs = [sums[n]["run"] for n in order if n in sums]
    key = lambda r: (r.get("commit"), r.get("wall_s"), r.get("ran"), r.get("cached"), r.get("engine"))  # noqa: E731
    if len(runs) < len(order) or len({key(r) for r in runs}) != 1 or runs[0].get("cached"):
        return ("Run time: these summaries do not all come from one `coflow reproduce --all` from an empty "
                "cache, so no wall time of the whole catalog is given here (`make bench-sweep "
                "SWEEP_ARGS=--reproduce-all` measures one).")
    r = runs[0]
    wall, work = r["wall_s"], sum(x.get("tasks_wall_s", 0.0) for x in runs)
    start = r.get("loadavg_start")
    return (f"Run time: every summary comes from one `coflow reproduce --all` on {r.get('engine')} from an empty "
            f"cache: {r.get('ran')} tasks in **{wall / 60:.0f} min** of wall time (budget {BUDGET_ALL_S / 60:.0f} min, "
            f"the issue's target: {'within' if wall <= BUDGET_ALL_S else 'over'}), {work / 60:.0f} min of worker time "
            f"summed over the experiments (a task that two experiments share counts twice); load average "
            + (f"{start[0]:.1f} at the start and " if start else "")
            + f"{(r.get('loadavg_1_5_15') or [0])[0]:.1f} at the end on this {r.get('cpus')}-core machine, "
            "shared with other jobs.")


def render(results_dir: str, order: list[str]) -> str:
    sums = load_summaries(results_dir)
    parts = [HEAD, run_time(sums, order), "", "## Index", "",
             "| experiment | paper | figure | rows | verdicts: within / holds | differs / does not hold |",
             "|---|---|---|---:|---:|---:|"]
    body = []
    missing = []
    for name in order:
        s = sums.get(name)
        if s is None:
            missing.append(name)
            continue
        good = sum(r["verdict"].startswith(("within", "the paper's claim holds")) for r in s["rows"])
        bad = sum(r["verdict"].startswith(("differs", "the claim does not hold")) for r in s["rows"])
        parts.append(f"| [{name}](#{_anchor(s)}) | {s['paper']} | {s['figure']} | {len(s['rows'])} | {good} | {bad} |")
        body.append(render_entry(s))
    if missing:
        parts += ["", "Not yet run (no summary in `results/reproduce/`): " + ", ".join(f"`{m}`" for m in missing) + "."]
    extra = sorted(set(sums) - set(order))
    if extra:
        parts += ["", "Summaries of experiments no longer in the catalog: " + ", ".join(extra) + "."]
    return "\n".join(parts) + "\n\n" + "\n".join(body)


def _anchor(s: dict) -> str:
    import re
    t = f"{s['name']}: {s['paper']}, {s['figure']}".lower()
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")

"""One report for every driver: the JSON schema shared by the simulator and the emulation,
summaries per bin and percentile, comparison tables and plots (CCT CDFs, per-bin bars)."""
from __future__ import annotations

import json
import os
import tempfile

import numpy as np

from .trace import BINS


def _p95(x: np.ndarray) -> float | None:
    return float(np.percentile(x, 95)) if x.size else None


def summarize(coflows: list[dict]) -> dict:
    done = [c for c in coflows if c["cct_s"] is not None]
    cct = np.array([c["cct_s"] for c in done])
    iso = np.array([c["isolation_s"] for c in done])
    with np.errstate(divide="ignore", invalid="ignore"):
        slow = np.where(iso > 0, cct / iso, 1.0)
    per_bin = {}
    for b in BINS:
        x = np.array([c["cct_s"] for c in done if c["bin"] == b])
        per_bin[b] = {"count": int(x.size), "avg_cct_s": float(x.mean()) if x.size else None, "p95_cct_s": _p95(x)}
    return {
        "coflows": len(coflows),
        "completed": len(done),
        "rejected": sum(1 for c in coflows if not c.get("admitted", True)),
        "avg_cct_s": float(cct.mean()) if cct.size else None,
        "p95_cct_s": _p95(cct),
        "avg_slowdown": float(slow.mean()) if slow.size else None,
        "per_bin": per_bin,
    }


def summarize_jobs(jobs: list[dict]) -> dict:
    """Job completion time (JCT): a job is a DAG of coflows or a coflow on its own
    (coflow.dynamics); added to a report's summary beside the CCT keys."""
    jct = np.array([j["jct_s"] for j in jobs if j["jct_s"] is not None])
    return {"jobs": len(jobs), "jobs_completed": int(jct.size),
            "avg_jct_s": float(jct.mean()) if jct.size else None, "p95_jct_s": _p95(jct)}


def make_report(scheduler: str, params: dict, ports: int, coflows: list[dict], wall_s: float,
                jobs: list[dict] | None = None, **extra) -> dict:
    """The report. ``jobs``: job records (coflow.dynamics); without them every coflow is its own
    job (JCT = CCT)."""
    if jobs is None:
        from .dynamics import plain_jobs
        jobs = plain_jobs(coflows)
    rep = {"scheduler": scheduler, "params": _jsonable(params), "ports": ports, "coflows": coflows,
           "summary": {**summarize(coflows), **summarize_jobs(jobs)}, "jobs": jobs, "wall_s": wall_s}
    rep.update(extra)
    return rep


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    return x


def write_json(obj, path: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".report-")
    with os.fdopen(fd, "w") as f:
        json.dump(_jsonable(obj), f, indent=1)
    os.replace(tmp, path)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def compare_table(reports: dict[str, dict], baseline: str) -> dict:
    """Normalized improvement = baseline CCT / scheduler CCT (>1: faster than the baseline),
    for avg and p95, overall and per bin ([VARYS] 7.1 "factor of improvement"); ``jct_avg`` /
    ``jct_p95``: the same over job completion times."""
    base = reports[baseline]["summary"]
    rows = {}
    for name, rep in reports.items():
        s = rep["summary"]
        row = {"avg": ratio(base["avg_cct_s"], s["avg_cct_s"]), "p95": ratio(base["p95_cct_s"], s["p95_cct_s"]),
               "avg_cct_s": s["avg_cct_s"], "p95_cct_s": s["p95_cct_s"], "wall_s": rep.get("wall_s"),
               "rejected": s.get("rejected", 0)}
        # job completion time (coflow.dynamics): the same ratio over JCT (None in older reports)
        row["jct_avg"] = ratio(base.get("avg_jct_s"), s.get("avg_jct_s"))
        row["jct_p95"] = ratio(base.get("p95_jct_s"), s.get("p95_jct_s"))
        row["avg_jct_s"] = s.get("avg_jct_s")
        for b in BINS:
            row[f"{b}_avg"] = ratio(base["per_bin"][b]["avg_cct_s"], s["per_bin"][b]["avg_cct_s"])
            row[f"{b}_p95"] = ratio(base["per_bin"][b]["p95_cct_s"], s["per_bin"][b]["p95_cct_s"])
        rows[name] = row
    return {"baseline": baseline, "rows": rows}


def format_table(table: dict, extra_cols: dict[str, dict] | None = None) -> str:
    cols = ["avg", "p95"] + [f"{b}_avg" for b in BINS]
    head = f"{'scheduler':<15}{'avg CCT s':>11}" + "".join(f"{c:>9}" for c in cols) + f"{'wall s':>9}"
    if extra_cols:
        head += "".join(f"{k:>12}" for k in extra_cols)
    lines = [f"normalized improvement over {table['baseline']} (baseline CCT / scheduler CCT; >1 is faster)", head]
    f = lambda x: f"{x:9.2f}" if x is not None else f"{'-':>9}"
    for name, r in table["rows"].items():
        s = f"{name:<15}{(r['avg_cct_s'] or 0):11.3f}" + "".join(f(r[c]) for c in cols) + f"{(r['wall_s'] or 0):9.1f}"
        if extra_cols:
            s += "".join(f"{(extra_cols[k].get(name) if extra_cols[k].get(name) is not None else float('nan')):12.2f}" for k in extra_cols)
        lines.append(s)
    return "\n".join(lines)


def plot_reports(reports: dict[str, dict], outdir: str, baseline: str | None = None, title: str = "") -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(outdir, exist_ok=True)
    paths = []
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, rep in reports.items():
        x = np.sort([c["cct_s"] for c in rep["coflows"] if c["cct_s"] is not None])
        if x.size:
            ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("CCT (s)")
    ax.set_ylabel("fraction of coflows")
    ax.set_title(title or "CCT CDF")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:      # no completed coflow anywhere: no lines, no legend
        ax.legend(fontsize=7)
    p = os.path.join(outdir, "cct_cdf.png")
    fig.tight_layout()
    fig.savefig(p, dpi=120)
    plt.close(fig)
    paths.append(p)
    names = [n for n in reports if n != baseline]
    if baseline and baseline in reports and names:   # the baseline alone: nothing to compare
        tab = compare_table(reports, baseline)
        fig, ax = plt.subplots(figsize=(7, 4))
        groups = list(BINS) + ["ALL"]
        wbar = 0.8 / max(1, len(names))
        for i, n in enumerate(names):
            r = tab["rows"][n]
            vals = [r[f"{b}_avg"] or 0 for b in BINS] + [r["avg"] or 0]
            ax.bar(np.arange(len(groups)) + i * wbar, vals, wbar, label=n)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(np.arange(len(groups)) + 0.4 - wbar / 2)
        ax.set_xticklabels(groups)
        ax.set_ylabel(f"avg CCT improvement over {baseline}")
        ax.set_yscale("log")
        ax.legend(fontsize=7, ncol=2)
        ax.set_title(title or "per-bin improvement")
        fig.tight_layout()
        p = os.path.join(outdir, "per_bin.png")
        fig.savefig(p, dpi=120)
        plt.close(fig)
        paths.append(p)
    return paths


def markdown_table(table: dict) -> str:
    """The comparison table in Markdown (for README.md)."""
    cols = ["avg", "p95"] + [f"{b}_avg" for b in BINS]
    f = lambda x: f"{x:.2f}" if x is not None else "-"
    out = ["| scheduler | avg CCT (s) | " + " | ".join(c.replace("_avg", " avg") for c in cols) + " | wall (s) |",
           "|---|---:|" + "---:|" * len(cols) + "---:|"]
    for name, r in table["rows"].items():
        out.append(f"| {name} | {r['avg_cct_s']:.3f} | " + " | ".join(f(r[c]) for c in cols) + f" | {r['wall_s']:.1f} |")
    return "\n".join(out)

"""Where and when a run's numbers come from: the machine, HEAD and whether the checkout was
modified (``provenance``, read when a run starts and written into its JSON), for the summaries
:mod:`coflow.results` saves and every runner that records its own code (the emulation, the
simulator comparison, the P4 and PTF benches, ``coflow reproduce``).
"""
from __future__ import annotations

import os
import platform
import subprocess
import time


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(cwd: str = ".") -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() or None


def git_dirty(cwd: str = ".") -> bool | None:
    """Whether tracked files other than docs and saved results (``*.md``, ``results/``, which
    the runs themselves rewrite) differ from HEAD (None: not a git checkout)."""
    try:
        r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/",
                            ":(top,exclude)results", ":(top,exclude,glob)**/*.md"], cwd=cwd,
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(r.stdout.strip()) if r.returncode == 0 else None


def provenance(cwd: str | None = None) -> dict:
    """The code a run ran: HEAD and whether tracked files were modified, read when the run
    starts and written into its JSON (``provenance``), so that a summary saved later names the
    run's commit, not the one checked out at save time."""
    cwd = cwd or os.path.dirname(os.path.abspath(__file__))
    return {"commit": git_commit(cwd), "dirty": git_dirty(cwd)}


def run_info(source_path: str, doc: dict | None = None) -> dict:
    """The machine and moment a run's numbers come from (read when the summary is saved, which
    ``make results`` does right after the run); the commit from the run's own ``provenance``
    when its JSON ``doc`` has one (marked ``+modified`` when tracked files differed from it),
    else HEAD at save time (``commit_at``: "run" or "save")."""
    try:
        load: list[float | None] = list(os.getloadavg())
    except OSError:
        load = [None, None, None]
    return {"date": time.strftime("%Y-%m-%d", time.gmtime(os.path.getmtime(source_path))),
            "cpus": os.cpu_count(), "cpu_model": cpu_model(),
            "loadavg_1_5_15": [round(x, 2) if x is not None else None for x in load],
            **_commit_of(source_path, doc)}


def _commit_of(source_path: str, doc: dict | None) -> dict:
    pv = doc.get("provenance") if isinstance(doc, dict) else None
    if isinstance(pv, dict) and pv.get("commit"):
        return {"commit": pv["commit"] + ("+modified" if pv.get("dirty") else ""),
                "commit_at": "run"}
    return {"commit": git_commit(os.path.dirname(os.path.abspath(source_path)) or "."),
            "commit_at": "save"}

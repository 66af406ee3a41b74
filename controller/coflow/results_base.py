"""What every summary and table of :mod:`coflow.results` shares: the summary schema, the error,
a cell's formatting and the line naming the machine and commit a run's numbers come from.
"""
from __future__ import annotations

SCHEMA = 1


class ResultsError(ValueError):
    pass


def _f(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _machine(run: dict) -> str:
    load = run.get("loadavg_1_5_15") or [None]
    return (f"{run.get('date')}, {run.get('cpus')}-core {run.get('cpu_model')}, load {_f(load[0], '{:.1f}')}"
            f" at save, commit {run.get('commit') or '?'}"
            + (" at save time" if run.get("commit_at") == "save" else ""))

"""`coflow reproduce`: the seeds' evaluation, figure by figure, on a Dask cluster.

    coflow reproduce --list                      # one experiment a line, its name first
    coflow reproduce NAME... [--workers N | --scheduler tcp://HOST:8786]
    coflow reproduce --all [--workers 2]
    coflow reproduce --render [--check]          # REPRODUCTION.md from results/reproduce/ only

The catalog (:mod:`.catalog`) is data; each experiment's runs become sweep tasks
(:mod:`.tasks`) run on Dask (:mod:`.sweep`), cached by content hash under
``out/reproduce/cache``; each experiment's measured rows and verdicts are saved as
``results/reproduce/NAME.json`` and REPRODUCTION.md is rendered from those (:mod:`.render`).
"""
from __future__ import annotations

import difflib
import os
import sys
import time

from ..provenance import cpu_model, git_commit
from . import catalog as C
from . import render as R

DEFAULT_RESULTS = os.path.join("results", "reproduce")
DEFAULT_CACHE = os.path.join("out", "reproduce", "cache")


class ReproduceError(ValueError):
    pass


def entry_tasks(entry: dict) -> dict[str, dict]:
    """Run label -> task."""
    out = {}
    for lab, r in entry["runs"].items():
        t = {"workload": r.get("workload", entry["workload"]), "scheduler": r["scheduler"],
             "params": r.get("params", {}), "reschedule": r.get("reschedule", entry["reschedule"]),
             "kind": r.get("kind", "sim")}
        if r.get("check"):
            t["check"] = True
        out[lab] = t
    return out


def list_lines() -> list[str]:
    return [f"{e['name']}  {e['paper']}, {e['figure']} ({len(e['runs'])} runs)" for e in C.CATALOG]


def reproduce(names: list[str], workers: int = 2, scheduler: str | None = None, results_dir: str = DEFAULT_RESULTS,
              cache_dir: str = DEFAULT_CACHE, progress: bool = True, doc: str | None = R.DOC) -> dict:
    from .sweep import run_sweep
    from .tasks import task_key
    try:
        load0: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load0 = None
    entries = [C.BY_NAME[n] for n in names]
    per = {e["name"]: entry_tasks(e) for e in entries}
    tasks = [t for ts in per.values() for t in ts.values()]
    res = run_sweep(tasks, workers=workers, scheduler=scheduler, cache_dir=cache_dir, progress=progress)
    load: list[float | None]
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = [None, None, None]
    run = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "cpus": os.cpu_count(), "cpu_model": cpu_model(),
           "loadavg_1_5_15": load, "loadavg_start": load0, "commit": git_commit(), "engine": res.engine.get("scheduler", "cache only"),
           "ran": res.ran, "cached": res.cached, "wall_s": round(res.wall_s, 1)}
    os.makedirs(results_dir, exist_ok=True)
    for e in entries:
        keys = {lab: task_key(t) for lab, t in per[e["name"]].items()}
        outputs = {lab: res.results[k] for lab, k in keys.items() if k in res.results}
        failed = {lab for lab, k in keys.items() if k in res.failed}
        rows = R.evaluate(e, outputs, failed)
        s = R.summary(e, rows, {**run, "tasks_wall_s": round(sum(o.get("wall_s", 0.0) for o in outputs.values()), 1)})
        from ..report import write_json
        write_json(s, os.path.join(results_dir, e["name"] + ".json"))
        for r in rows:
            print(f"{e['name']}: {r['what']}: paper {r['paper']}, ours {r['ours']}: {r['verdict']}")
    if doc:
        text = R.render(results_dir, [e["name"] for e in C.CATALOG])
        with open(doc, "w") as f:
            f.write(text)
        print(f"{doc}: rendered from {results_dir}/")
    print(f"reproduce: {len(tasks)} tasks ({res.ran} run, {res.cached} from the cache, {len(res.failed)} failed) "
          f"in {res.wall_s:.1f} s on {res.engine.get('scheduler', 'the cache')}")
    return {"failed": res.failed, "wall_s": res.wall_s, "ran": res.ran, "cached": res.cached}


def cmd_reproduce(args) -> int:
    from .sweep import SweepError
    from .workloads import WorkloadError
    if args.list:
        print("\n".join(list_lines()))
        return 0
    if args.render:
        text = R.render(args.results, [e["name"] for e in C.CATALOG])
        if args.check:
            try:
                with open(args.doc) as f:
                    old = f.read()
            except FileNotFoundError:
                old = ""
            if old != text:
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), args.doc,
                                                           "rendered from " + args.results))
                print(f"{args.doc}: differs from what {args.results}/ renders (run `coflow reproduce --render`)",
                      file=sys.stderr)
                return 1
            return 0
        with open(args.doc, "w") as f:
            f.write(text)
        print(f"{args.doc}: rendered from {args.results}/")
        return 0
    names = [e["name"] for e in C.CATALOG] if args.all else args.names
    if not names:
        raise ReproduceError("name one or more experiments (coflow reproduce --list), or --all")
    unknown = [n for n in names if n not in C.BY_NAME]
    if unknown:
        raise ReproduceError(f"unknown experiment {unknown[0]!r}; `coflow reproduce --list` lists them")
    if args.workers < 1:
        raise ReproduceError("--workers must be >= 1")
    try:
        r = reproduce(names, args.workers, args.scheduler, args.results, args.cache, not args.quiet, args.doc)
    except (SweepError, WorkloadError) as e:
        print(f"coflow reproduce: {e}", file=sys.stderr)
        return 2
    return 1 if r["failed"] else 0


def add_commands(sub) -> None:
    p = sub.add_parser("reproduce", help="the seeds' experiments, figure by figure, on Dask (REPRODUCTION.md)")
    p.add_argument("names", nargs="*", help="experiments (see --list)")
    p.add_argument("--list", action="store_true", help="one experiment a line, its name first")
    p.add_argument("--all", action="store_true", help="every experiment of the catalog")
    p.add_argument("--workers", type=int, default=2, help="local Dask workers (LocalCluster); default 2")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="a running Dask scheduler instead of a LocalCluster")
    p.add_argument("--results", default=DEFAULT_RESULTS, help="where the summaries go (default results/reproduce)")
    p.add_argument("--cache", default=DEFAULT_CACHE, help="task results by content hash (default out/reproduce/cache)")
    p.add_argument("--doc", default=R.DOC, help="the rendered document (default REPRODUCTION.md)")
    p.add_argument("--render", action="store_true", help="only render the document from the summaries")
    p.add_argument("--check", action="store_true", help="with --render: exit 1 (and a diff) if the document differs")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(fn=cmd_reproduce)

"""The ``coflow`` command: traces, simulator, comparisons (and, later, controller and emulation)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import warnings

from . import trace as T

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLED_TRACE = os.path.join(REPO, "traces", "fb-like-120x16.txt")
DEFAULT_SCHEDULERS = "fair,fifo,sebf,dclas,dclas-strict,fifo-lm,hug,utopia,fai,sincronia"


class UsageError(Exception):
    pass


def _settings(items: list[str] | None) -> dict[str, dict[str, str]]:
    """``--set k=v`` (all schedulers) or ``--set sched.k=v`` (one scheduler)."""
    out: dict[str, dict[str, str]] = {}
    for it in items or []:
        if "=" not in it:
            raise UsageError(f"--set {it!r}: expected key=value")
        k, v = it.split("=", 1)
        sched, _, key = k.rpartition(".")
        out.setdefault(sched or "*", {})[key] = v
    return out


def _for(settings: dict, name: str, strict: bool = False) -> dict[str, str]:
    """The settings for scheduler ``name``.  Unscoped keys apply where the scheduler has that
    parameter (all of them when ``strict``, so that an unknown key is reported)."""
    from .sched import REGISTRY
    if strict:
        return {**settings.get("*", {}), **settings.get(name, {})}
    d = {}
    fields = {f.name for f in dataclasses.fields(REGISTRY[name].params_cls)}
    for k, v in settings.get("*", {}).items():
        if k in fields:
            d[k] = v
    d.update(settings.get(name, {}))
    return d


def _capacity(args) -> float:
    from .sim import COFLOWSIM_BPS
    if getattr(args, "coflowsim_rate", False):
        return COFLOWSIM_BPS
    if args.link_gbps <= 0:
        raise UsageError("--link-gbps must be > 0")
    return args.link_gbps * 1e9 / 8


def _load(args) -> T.Workload:
    tr = T.read_trace(args.trace, allow_unsorted=getattr(args, "allow_unsorted", False))
    if tr.dynamic and getattr(args, "first", None):   # waves / DAGs: cut whole coflows and jobs
        tr = T.Trace(tr.ports, T.closed_prefix(tr.coflows, args.first), tr.path)
    wl = T.expand(tr, args.convention)
    if getattr(args, "first", None) and wl.dynamics is None:
        wl = wl.subset(min(args.first, wl.ncoflows))
    return wl


def run_one(wl, name: str, settings: dict[str, str], capacity: float, progress: bool, rtol: float = 0.0,
            reschedule: str = "flow") -> dict:
    from .report import make_report
    from .sched import make_scheduler, params_dict
    from .sim import coflow_records, job_records, simulate

    s = make_scheduler(name, settings)
    res = simulate(wl, s, capacity, progress=progress, label=name, rtol=rtol, reschedule=reschedule)
    recs = coflow_records(wl, res, capacity)
    return make_report(name, params_dict(s), wl.ports, recs, res.wall_s, jobs=job_records(wl, res, capacity, recs),
                       events=res.events,
                       capacity_Bps=capacity, convention=wl.convention, rtol=rtol, reschedule=reschedule)


# Subcommands -----------------------------------------------------------------------------------

def cmd_trace_stats(args):
    tr = T.read_trace(args.file, allow_unsorted=args.allow_unsorted)
    st = T.stats(T.expand(tr, args.convention))
    if args.json:
        print(json.dumps(st, indent=1))
        return 0
    print(f"{args.file}: {st['ports']} ports, {st['coflows']} coflows, {st['flows']} flows "
          f"({st['convention']}), {st['bytes'] / 2**30:.2f} GiB, arrivals over {st['span_s']:.1f} s, "
          f"widest coflow {st['max_width']} flows")
    if "jobs" in st:
        print(f"runtime dynamics: {st['trace_coflows']} coflows in {st['lines']} lines (up to {st['waves_max']} "
              f"waves), {st['jobs']} jobs, {st['after_edges']} Starts-After and {st['pipe_edges']} "
              f"Finishes-Before edges; counts and bins below are per line")
    print(f"{'bin':<5}{'coflows':>9}{'% coflows':>11}{'% bytes':>10}")
    for b in T.BINS:
        x = st["bins"][b]
        print(f"{b:<5}{x['coflows']:>9}{x['pct_coflows']:>10.1f}%{x['pct_bytes']:>9.2f}%")
    print("short = longest flow < 5 MB (2^20 B); narrow = at most 50 flows")
    return 0


def cmd_trace_check(args):
    tr = T.read_trace(args.file, allow_unsorted=args.allow_unsorted)
    print(f"{args.file}: ok ({tr.ports} ports, {len(tr.coflows)} coflows)")
    return 0


def cmd_trace_gen(args):
    tr = T.generate(args.coflows, args.ports, args.load, args.tail, args.seed, args.link_gbps * 1e9)
    tr.write(args.output)
    print(f"wrote {args.output}: {len(tr.coflows)} coflows on {tr.ports} ports (seed {args.seed})")
    return 0


def cmd_trace_scale(args):
    tr = T.read_trace(args.file, allow_unsorted=args.allow_unsorted)
    out = T.scale(tr, args.ports, args.bytes_factor, args.time_factor, args.first)
    out.write(args.output)
    print(f"wrote {args.output}: {len(out.coflows)} coflows on {out.ports} ports "
          f"(bytes x{args.bytes_factor:g}, time x{args.time_factor:g}); preserved: coflow order, ids, "
          f"total bytes per coflow (scaled), arrival times (scaled); mappers/reducers on one port merged")
    return 0


def cmd_trace_waves(args):
    from . import dynamics as D
    tr = T.read_trace(args.file, allow_unsorted=args.allow_unsorted)
    if args.table4 is not None:
        mix = D.TABLE4_MIXES[args.table4]
    elif args.mix:
        try:
            mix = tuple(float(x) for x in args.mix.split(","))
        except ValueError:
            raise UsageError(f"--mix {args.mix!r}: expected fractions like 0.9,0.1") from None
    else:
        mix = None
    if (mix is None) == (args.max_waves is None):
        raise UsageError("give one of --max-waves, --mix, --table4")
    out = D.split_waves(tr, max_waves=args.max_waves, mix=mix)
    out.write(args.output)
    got = ", ".join(f"{w}: {100 * f:.1f}%" for w, f in enumerate(D.wave_mix(out), 1))
    print(f"wrote {args.output}: {len(tr.coflows)} coflows in {len(out.coflows)} waves (coflows by waves: {got})")
    return 0


def cmd_trace_dag(args):
    from .dynamics import tpcds_dags
    tr = tpcds_dags(args.queries, args.ports, args.seed, args.load, args.barrier_fraction, args.link_gbps * 1e9)
    tr.write(args.output)
    print(f"wrote {args.output}: {args.queries} TPC-DS-like query DAGs, {len(tr.coflows)} coflows on "
          f"{tr.ports} ports (seed {args.seed})")
    return 0


def cmd_sim(args):
    from .report import plot_reports, write_json
    wl = _load(args)
    settings = _settings(args.set)
    rep = run_one(wl, args.scheduler, _for(settings, args.scheduler, strict=True), _capacity(args), not args.quiet, args.rtol,
                  args.reschedule)
    rep["trace"] = args.trace
    if args.json:
        write_json(rep, args.json)
    if args.plots:
        plot_reports({args.scheduler: rep}, args.plots)
    s = rep["summary"]
    print(f"{args.scheduler}: {s['completed']}/{s['coflows']} coflows, avg CCT {s['avg_cct_s']:.4f} s, "
          f"p95 {s['p95_cct_s']:.4f} s, avg slowdown {s['avg_slowdown']:.3f}, {rep['events']} events, "
          f"{rep['wall_s']:.2f} s wall")
    return 0


def cmd_compare(args):
    from .report import compare_table, format_table, plot_reports, write_json
    from .sched import REGISTRY
    wl = _load(args)
    names = [n.strip() for n in args.schedulers.split(",") if n.strip()]
    if args.baseline not in names:
        names = [args.baseline] + names
    for n in names:
        if n not in REGISTRY:
            raise UsageError(f"unknown scheduler {n!r}; known: {', '.join(sorted(REGISTRY))}")
    settings = _settings(args.set)
    known = {f.name for n in names for f in dataclasses.fields(REGISTRY[n].params_cls)}
    for k in settings.get("*", {}):
        if k not in known:
            raise UsageError(f"--set {k}: no parameter of that name in {', '.join(names)}")
    for sc in settings:
        if sc != "*" and sc not in names:
            raise UsageError(f"--set {sc}.*: {sc} is not among the compared schedulers")
    cap = _capacity(args)
    from .provenance import provenance
    pv = provenance()     # the code this comparison runs (a summary saved later names it)
    reports = {}
    for i, n in enumerate(names, 1):
        if not args.quiet:
            print(f"[{i}/{len(names)}] {n} ...", file=sys.stderr, flush=True)
        reports[n] = run_one(wl, n, _for(settings, n), cap, not args.quiet, args.rtol, args.reschedule)
    table = compare_table(reports, args.baseline)
    print(format_table(table))
    if getattr(args, "markdown", False):
        from .report import markdown_table
        print(markdown_table(table))
    out = {"trace": args.trace, "convention": wl.convention, "capacity_Bps": cap, "table": table,
           "reports": reports, "provenance": pv}
    if args.json:
        write_json(out, args.json)
        print(f"JSON: {args.json}")
    if args.plots:
        for p in plot_reports(reports, args.plots, args.baseline, os.path.basename(args.trace)):
            print(f"plot: {p}")
    return 0


def cmd_report(args):
    """Comparison table (and plots) from JSON reports written by ``coflow sim`` (or the emulation)."""
    from .report import compare_table, format_table, markdown_table, plot_reports, write_json
    reports = {}
    for path in args.reports:
        with open(path) as f:
            rep = json.load(f)
        if isinstance(rep, dict) and isinstance(rep.get("reports"), dict):  # a `coflow compare` file
            reports.update(rep["reports"])
            continue
        if not isinstance(rep, dict) or "scheduler" not in rep or "summary" not in rep or "coflows" not in rep:
            raise UsageError(f"{path}: not a coflow report (needs scheduler, summary, coflows)")
        reports[rep.get("label") or rep["scheduler"]] = rep
    if args.baseline not in reports:
        raise UsageError(f"baseline {args.baseline!r} is not among the reports ({', '.join(reports)})")
    reports = {args.baseline: reports[args.baseline], **{k: v for k, v in reports.items() if k != args.baseline}}
    table = compare_table(reports, args.baseline)
    print(markdown_table(table) if args.markdown else format_table(table))
    if args.json:
        write_json({"table": table}, args.json)
    if args.plots:
        for p in plot_reports(reports, args.plots, args.baseline):
            print(f"plot: {p}")
    return 0


def cmd_schedulers(args):
    from .sched import REGISTRY
    for n in sorted(REGISTRY):
        info = REGISTRY[n]
        ps = ", ".join(f"{f.name}={f.default!r}" for f in dataclasses.fields(info.params_cls))
        print(f"{n:<16}{'clairvoyant' if info.clairvoyant else 'non-clairvoyant':<17}{info.doc}")
        if ps:
            print(f"{'':<16}params: {ps}")
    return 0


def cmd_run(args):
    """Main job: the Mininet/BMv2 emulation (``coflow emu run`` with the run's options) when the
    P4 toolchain, Mininet and root are there; otherwise one line saying why, then the fluid
    simulator comparison on the bundled FB-like trace."""
    why = "--sim-only given" if args.sim_only else None
    if why is None:
        try:
            from .emu.cli import preflight
            why = preflight()
        except ImportError as e:
            why = f"emulation not importable ({e})"
    if why is None:
        from .emu.cli import run_main
        return run_main(args)
    trace = args.trace or BUNDLED_TRACE
    print(f"coflow run: Mininet/BMv2 emulation skipped: {why}; running the fluid simulator on "
          f"{os.path.relpath(trace)}", file=sys.stderr)
    ns = argparse.Namespace(trace=trace, convention=T.SPLIT, first=None, allow_unsorted=False,
                            schedulers=args.schedulers, baseline="fair", set=None, link_gbps=1.0,
                            coflowsim_rate=False, json=args.json, plots=args.plots, quiet=False, rtol=0.0, reschedule="flow",
                            markdown=args.markdown)
    return cmd_compare(ns)


# Parser ----------------------------------------------------------------------------------------

def _sim_common(p):
    p.add_argument("--trace", required=True, help="coflow-benchmark trace file")
    p.add_argument("--convention", choices=T.CONVENTIONS, default=T.SPLIT,
                   help="trace line -> flows: split (CoflowSim: reducer MB split over mappers, MB=2^20) or pairs")
    p.add_argument("--first", type=int, help="only the first N coflows")
    p.add_argument("--allow-unsorted", action="store_true", help="accept unsorted arrivals (warn and sort)")
    p.add_argument("--set", action="append", metavar="[SCHED.]KEY=VALUE",
                   help="scheduler parameter, e.g. --set K=8 or --set sebf.T=1 (repeatable)")
    p.add_argument("--link-gbps", type=float, default=1.0, help="port rate, Gbit/s (default 1)")
    p.add_argument("--coflowsim-rate", action="store_true", help="ports of 1024*2^20 bit/s, as CoflowSim")
    p.add_argument("--rtol", type=float, default=0.0, help="batch completions within this relative time (0 = exact)")
    p.add_argument("--reschedule", choices=("flow", "coflow"), default="flow",
                   help="ask the scheduler at every flow completion (flow, exact) or only at coflow "
                        "arrivals, departures and its epochs, as CoflowSim (coflow)")
    p.add_argument("--json", help="write the JSON report here")
    p.add_argument("--plots", help="write plots (PNG) into this directory")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="coflow", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    tr = sub.add_parser("trace", help="coflow-benchmark traces").add_subparsers(dest="tcmd", required=True)
    p = tr.add_parser("stats", help="counts, bytes and SN/LN/SW/LW bins")
    p.add_argument("file")
    p.add_argument("--convention", choices=T.CONVENTIONS, default=T.SPLIT)
    p.add_argument("--allow-unsorted", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_trace_stats)
    p = tr.add_parser("check", help="validate a trace (exit 2 on the first error)")
    p.add_argument("file")
    p.add_argument("--allow-unsorted", action="store_true")
    p.set_defaults(fn=cmd_trace_check)
    p = tr.add_parser("gen", help="seeded FB-like synthetic trace")
    p.add_argument("--coflows", type=int, default=200)
    p.add_argument("--ports", type=int, default=40)
    p.add_argument("--load", type=float, default=0.6, help="offered load as a fraction of fabric capacity")
    p.add_argument("--tail", type=float, default=1.2, help="Pareto shape of long flows (smaller = heavier)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--link-gbps", type=float, default=1.0)
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(fn=cmd_trace_gen)
    p = tr.add_parser("scale", help="map a trace onto fewer ports, scale bytes and time")
    p.add_argument("file")
    p.add_argument("--ports", type=int, required=True)
    p.add_argument("--bytes-factor", type=float, default=1.0)
    p.add_argument("--time-factor", type=float, default=1.0)
    p.add_argument("--first", type=int)
    p.add_argument("--allow-unsorted", action="store_true")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(fn=cmd_trace_scale)
    p = tr.add_parser("waves", help="split coflows into waves: Aalo's multi-wave workloads (docs/reference/traces.md)")
    p.add_argument("file")
    p.add_argument("--max-waves", type=int, help="cap concurrent senders at ceil(max mappers / K): at most K waves")
    p.add_argument("--mix", help="fractions of coflows with 1, 2, ... waves, e.g. 0.9,0.1")
    p.add_argument("--table4", type=int, choices=(1, 2, 4), help="Aalo Table 4's mix for max waves 1, 2 or 4")
    p.add_argument("--allow-unsorted", action="store_true")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(fn=cmd_trace_waves)
    p = tr.add_parser("dag", help="seeded TPC-DS-like query DAGs of coflows (docs/reference/traces.md)")
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--ports", type=int, default=16)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--load", type=float, default=0.5, help="offered load as a fraction of fabric capacity")
    p.add_argument("--barrier-fraction", type=float, default=0.5, help="share of Starts-After edges (else pipelined)")
    p.add_argument("--link-gbps", type=float, default=1.0)
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(fn=cmd_trace_dag)

    p = sub.add_parser("sim", help="simulate one scheduler on a trace")
    _sim_common(p)
    p.add_argument("--scheduler", required=True)
    p.set_defaults(fn=cmd_sim)

    p = sub.add_parser("compare", help="simulate several schedulers; normalized improvement table")
    _sim_common(p)
    p.add_argument("--baseline", default="fair")
    p.add_argument("--schedulers", default=DEFAULT_SCHEDULERS)
    p.add_argument("--markdown", action="store_true", help="also print the table in Markdown")
    p.set_defaults(fn=cmd_compare)

    p = sub.add_parser("report", help="comparison table from JSON reports")
    p.add_argument("reports", nargs="+")
    p.add_argument("--baseline", default="fair")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--json")
    p.add_argument("--plots")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("schedulers", help="list schedulers and their parameters")
    p.set_defaults(fn=cmd_schedulers)

    p = sub.add_parser("run", help="the main job (see README): emulation, else the simulator")
    p.add_argument("--trace", default=None, help="emulation: the FB trace in ../shared/traces, else "
                   "the bundled one; simulator: the bundled FB-like trace")
    p.add_argument("--schedulers", default=DEFAULT_SCHEDULERS, help="simulator fallback: schedulers")
    p.add_argument("--json", default="out/run/compare.json")
    p.add_argument("--plots", default="out/run")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--sim-only", action="store_true", help="skip the emulation")
    p.add_argument("--topo", default="fattree:4", help="emulation: topology (fattree:K, leafspine:L,S,H, bigswitch:H, file)")
    p.add_argument("--modes", default=None, help="emulation: modes in order (default: the schedulers that declare it, "
                   "coflow.sched.deploy.default_modes)")
    p.add_argument("--coflows", type=int, default=None, help="emulation: the first N coflows")
    p.add_argument("--rate-mbps", type=float, default=None, help="emulation: link rate, Mb/s")
    p.add_argument("--time-scale", type=float, default=None, help="emulation: arrival time factor")
    p.add_argument("--timeout", type=float, default=None, help="emulation: per-mode timeout, s")
    p.add_argument("--connections", choices=("per-flow", "pool"), default=None,
                   help="emulation: one TCP connection per flow, or pooled connections per host pair")
    p.add_argument("--pacing", choices=("on", "off"), default=None,
                   help="emulation: senders paced at the metered modes' rates (default on)")
    p.set_defaults(fn=cmd_run)

    # Subcommands of the other parts (topologies, coflow API, controller, emulation) live beside
    # their code: each such module defines add_commands(subparsers).
    import importlib
    import importlib.util
    for mod in PLUGIN_MODULES:
        try:
            present = importlib.util.find_spec(mod) is not None
        except ModuleNotFoundError as e:   # the parent package is not there (yet)
            if not mod.startswith(str(e.name)):
                raise
            present = False
        if present:
            importlib.import_module(mod).add_commands(sub)
    return ap


PLUGIN_MODULES = ("coflow.topology", "coflow.results", "coflow.api.cli", "coflow.ctl.cli", "coflow.emu.cli",
                  "coflow.reproduce")


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = lambda m, *a, **k: print(f"warning: {m}", file=sys.stderr)
            return args.fn(args)
    except T.TraceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (UsageError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as e:
        print(f"error: invalid JSON: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`coflow ... | head`): no message; stdout to /dev/null so that
        # the interpreter's own flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:
        print(f"error: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""``coflow emu ...``: the Mininet/BMv2 emulation (added to the ``coflow`` CLI through add_commands).

    coflow emu run    [--topo fattree:4] [--trace F] [--modes fair,dclas,...] [--coflows N]
                      [--rate-mbps R] [--time-scale X] [--bytes-scale Y] [--work S] [--load L]
                      [--timeout S] [--out DIR] [--set k=v] [--no-sim]
    coflow emu plan   (the same options): print the scaled trace and the run's size, run nothing
    coflow emu clean  remove what a crashed run left (its simple_switch_grpc processes, veths)
"""
from __future__ import annotations

import os
import sys


def _common(p) -> None:
    from .plan import CLASS_FLOOR, ECN_FRAMES, LOAD, POOL_PER_PAIR, QUEUE_BUDGET
    p.add_argument("--topo", default="fattree:4",
                   help="fattree:K, leafspine:L,S,H, bigswitch:H or a topology file (default fattree:4)")
    p.add_argument("--trace", default="", help="trace (default: the FB trace in ../shared/traces, "
                   "else the bundled traces/fb-like-120x16.txt)")
    p.add_argument("--modes", default=None, help="comma-separated modes, run in order (default: the "
                   "schedulers that declare it, coflow.sched.deploy.default_modes)")
    p.add_argument("--coflows", type=int, default=60, help="the first N coflows of the trace (default 60)")
    p.add_argument("--rate-mbps", type=float, default=1.0, help="every link's rate, Mb/s (default 1)")
    p.add_argument("--work", type=float, default=40.0,
                   help="bytes scaled so the coflows keep every host link busy this many seconds (default 40)")
    p.add_argument("--load", type=float, default=LOAD,
                   help=f"arrivals compressed to span work/load seconds (default {LOAD}: the "
                        "offered load while coflows arrive)")
    p.add_argument("--bytes-scale", type=float, help="bytes factor (overrides --work)")
    p.add_argument("--time-scale", type=float, help="arrival time factor (overrides --load)")
    p.add_argument("--timeout", type=float, help="per-mode timeout, s (default 60 + 3 x (span + work))")
    p.add_argument("--weighted-dclas", action="store_true",
                   help="D-CLAS with Aalo's weighted queues in the TM (default strict)")
    p.add_argument("--queue-budget", type=int, default=QUEUE_BUDGET,
                   help=f"frames all queues of one port may hold (default {QUEUE_BUDGET})")
    p.add_argument("--ecn-frames", type=int, default=ECN_FRAMES,
                   help=f"switch ports mark ECN-capable frames CE above this queue depth, in MTU "
                        f"frames (default {ECN_FRAMES}; 0 = no marking, drop-tail only)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="controller/scheduler setting for every mode (repeatable)")
    p.add_argument("--connections", choices=("per-flow", "pool"), default="pool",
                   help="a pool per host pair opened before each mode and reused, as shuffle "
                        "services keep theirs (default), or one TCP connection per flow, opened "
                        "when it starts")
    p.add_argument("--pool-per-pair", type=int, default=POOL_PER_PAIR,
                   help=f"pooled connections opened per host pair (default {POOL_PER_PAIR}; more "
                        "on demand)")
    p.add_argument("--pool-overflow", choices=("wait", "open"), default="wait",
                   help="with a pool, a flow that finds its host pair's connections busy waits "
                        "for one (default: bounded connections per host pair, as shuffle "
                        "services bound their fetches) or opens another")
    p.add_argument("--pacing", choices=("on", "off"), default="on",
                   help="in the metered modes (sebf, hug, ...), the agents pace every flow at the "
                        "rate the controller streams (WatchRates; a token bucket per flow) and the "
                        "meters get headroom above it (default on); off: the meters alone police")
    p.add_argument("--tcp", action="append", default=[], metavar="SYSCTL=VALUE",
                   help="a net.ipv4 TCP sysctl of every host, over the defaults (coflow.emu.switch."
                        "TCP_SYSCTLS), e.g. tcp_rto_max_ms=8000, tcp_rto_min_us=1000000 (repeatable)")
    p.add_argument("--class-floor", type=float, default=CLASS_FLOOR,
                   help="strict-priority TMs: every class is guaranteed this fraction of its port "
                        "(HTB rate; spare bandwidth still by priority), so no class starves "
                        f"into timeouts (default {CLASS_FLOOR}; 0: pure strict priority)")
    p.add_argument("--out", default="out/emu", help="reports and plots (default out/emu)")


def config_from_args(args):
    from .plan import CLASS_FLOOR, POOL_PER_PAIR, PlanError
    from .runner import DEFAULT_MODES, EmuConfig
    settings = {}
    for it in args.set:
        if "=" not in it:
            raise PlanError("set", f"{it!r}: expected key=value")
        k, v = it.split("=", 1)
        settings[k] = v
    tcp = {}
    for it in getattr(args, "tcp", []) or []:
        k, sep, v = it.partition("=")
        if not sep or not k.startswith("tcp_") or not v:
            raise PlanError("tcp", f"{it!r}: expected tcp_<sysctl>=value (a net.ipv4.tcp_* sysctl)")
        tcp[k] = v
    return EmuConfig(topology=args.topo, trace=args.trace, tcp_sysctls=tcp,
                     modes=(tuple(m.strip() for m in args.modes.split(",") if m.strip())
                            if args.modes is not None else DEFAULT_MODES),
                     coflows=args.coflows, rate_mbps=args.rate_mbps, work_s=args.work, load=args.load,
                     bytes_factor=args.bytes_scale, time_scale=args.time_scale,
                     mode_timeout_s=args.timeout, weighted_dclas=args.weighted_dclas,
                     queue_budget=args.queue_budget, ecn_frames=args.ecn_frames, out_dir=args.out, settings=settings,
                     simulate=not getattr(args, "no_sim", False),
                     log_level=getattr(args, "switch_log", "off"),
                     keep_run_dir=getattr(args, "keep", False),
                     connections=getattr(args, "connections", "per-flow"),
                     pool_per_pair=getattr(args, "pool_per_pair", POOL_PER_PAIR),
                     pool_overflow=getattr(args, "pool_overflow", "wait"),
                     pacing=getattr(args, "pacing", "on") == "on",
                     class_floor=getattr(args, "class_floor", CLASS_FLOOR))


def preflight() -> str | None:
    """Why the emulation cannot run here (None if it can): every reason, in one line."""
    from ..dataplane.toolchain import discover
    from ..sysdeps import mininet_missing
    why = []
    tc = discover()
    if not tc.complete:
        why.append("P4 toolchain not found: missing " + ", ".join(tc.missing()))
    mn = mininet_missing()
    if mn:
        why.append(mn)
    if os.geteuid() != 0:
        why.append("Mininet needs root")
    return "; ".join(why) or None


def cmd_run(args) -> int:
    from .runner import Experiment
    why = preflight()
    if why:
        print(f"coflow emu: cannot run: {why}", file=sys.stderr)
        return 3
    import warnings
    warnings.filterwarnings("ignore", category=ResourceWarning)   # Mininet's host pipes
    exp = Experiment(config_from_args(args))
    try:
        exp.run()
    except KeyboardInterrupt:
        print("coflow emu: interrupted; everything stopped", file=sys.stderr)
        return 130
    return 0


def run_main(args) -> int:
    """``coflow run`` (``make run``) with the emulation: its options on top of the emu defaults."""
    ns = build_run_namespace(args)
    return cmd_run(ns)


def build_run_namespace(args):
    import argparse
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers()
    r = sub.add_parser("run")
    _common(r)
    ns = ap.parse_args(["run"])
    ns.no_sim, ns.switch_log, ns.keep = False, "off", False
    for src, dst in (("trace", "trace"), ("topo", "topo"), ("modes", "modes"), ("coflows", "coflows"),
                     ("rate_mbps", "rate_mbps"), ("time_scale", "time_scale"), ("timeout", "timeout"),
                     ("connections", "connections"), ("pacing", "pacing")):
        v = getattr(args, src, None)
        if v is not None:
            setattr(ns, dst, v)
    if getattr(args, "plots", None):
        ns.out = args.plots
    return ns


def cmd_plan(args) -> int:
    from .runner import load_topology, make_plan, mode_timeout
    cfg = config_from_args(args)
    cfg.validate()
    t = load_topology(cfg.topology)
    plan = make_plan(cfg, t)
    s = plan.summary()
    print(f"{os.path.basename(plan.trace_path)}: {s['coflows']} coflows, {s['flows']} flows on "
          f"{s['hosts']} hosts of {t.name}; bytes x{s['bytes_factor']:.3g}, time x{s['time_factor']:.3g}; "
          f"{s['bytes'] / 1e6:.2f} MB in all, arrivals over {s['span_s']:.1f} s, "
          f"work {s['work_s']:.1f} s at {cfg.rate_mbps:g} Mb/s; per-mode timeout {mode_timeout(cfg, plan):.0f} s")
    if s["dropped_local_flows"] or s["dropped_coflows"]:
        print(f"dropped: {s['dropped_local_flows']} flows whose mapper and reducer share a host, "
              f"{len(s['dropped_coflows'])} coflows left without flows")
    if args.verbose:
        for c in plan.coflows:
            print(f"  {c.trace_id:>5} t={c.arrival_s:8.3f}s {len(c.flows):>4} flows {c.bytes:>10} B {c.bin}")
    return 0


def cmd_clean(args) -> int:
    import signal
    from .fabric import cleanup_interfaces, stray_switches
    from .runner import load_topology
    pids = stray_switches()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    gone = cleanup_interfaces(load_topology(args.topo))
    print(f"coflow emu clean: killed {len(pids)} simple_switch_grpc, removed {len(gone)} interfaces")
    if args.mininet:
        from ..sysdeps import mininet_missing
        if mininet_missing():
            print(f"coflow emu clean: --mininet: {mininet_missing()}", file=sys.stderr)
            return 3
        from mininet.clean import cleanup
        cleanup()
    return 0


def add_commands(sub) -> None:
    p = sub.add_parser("emu", help="Mininet/BMv2 emulation: replay a trace on a fabric, measure CCT")
    esub = p.add_subparsers(dest="ecmd", required=True)
    r = esub.add_parser("run", help="run the modes one after another on one fabric")
    _common(r)
    r.add_argument("--no-sim", action="store_true", help="skip the simulator comparison")
    r.add_argument("--switch-log", default="off", help="BMv2 --log-level (default off)")
    r.add_argument("--keep", action="store_true", help="keep the run directory (logs)")
    r.set_defaults(fn=cmd_run)
    r = esub.add_parser("plan", help="print the scaled trace plan and exit")
    _common(r)
    r.add_argument("-v", "--verbose", action="store_true")
    r.set_defaults(fn=cmd_plan)
    r = esub.add_parser("clean", help="kill stray emulation switches, delete the fabric's veths")
    r.add_argument("--topo", default="fattree:4")
    r.add_argument("--mininet", action="store_true", help="also run Mininet's own cleanup (mn -c)")
    r.set_defaults(fn=cmd_clean)

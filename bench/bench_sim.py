#!/usr/bin/env python3
"""Simulator benchmark: wall time and peak memory of every scheduler on the FB trace and on a
generated trace 10x larger, each run in its own process (peak RSS is per run).

Figures are also reported as ratios against the `fair` baseline measured in the same run.
With COFLOWSIM_CMD set (a command template with {sched} and {trace}, see README), CoflowSim runs
side by side and the speed-up over it is reported.  A benchmark, not a test: nothing asserts.
"""
import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = "fair,pfp,fifo,scf,ncf,tcf,sebf,dclas,dclas-strict,fifo-lm,drf,hug,utopia,fai,sincronia"


def run(cmd, timeout):
    """Run one command; wall time, and its own peak RSS from /usr/bin/time when available
    (RUSAGE_CHILDREN would give the maximum over all runs so far)."""
    timer = ["/usr/bin/time", "-f", "MAXRSS_KB %M"] if os.path.exists("/usr/bin/time") else []
    t0 = time.perf_counter()
    rss_kb = None
    try:
        p = subprocess.run(timer + cmd, capture_output=True, text=True, timeout=timeout)
        ok = p.returncode == 0
        err = [l for l in p.stderr.splitlines() if not l.startswith("MAXRSS_KB ")]
        for l in p.stderr.splitlines():
            if l.startswith("MAXRSS_KB "):
                rss_kb = int(l.split()[1])
        tail = (p.stdout.strip().splitlines() + err)[-1:] or [""]
    except subprocess.TimeoutExpired:
        ok, tail = False, [f"timeout after {timeout} s"]
    wall = time.perf_counter() - t0
    if rss_kb is None:
        rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"ok": ok, "wall_s": wall, "peak_rss_mb": rss_kb / 1024.0, "last_line": tail[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trace", default=os.path.join(REPO, "..", "shared", "traces", "FB2010-1Hr-150-0.txt"))
    ap.add_argument("--schedulers", default=DEFAULT)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--skip-10x", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    coflow = os.path.join(os.path.dirname(sys.executable), "coflow")
    traces = []
    if os.path.exists(a.trace):
        traces.append(("fb", a.trace))
    else:
        print(f"bench: FB trace not found at {a.trace}: skipping it", file=sys.stderr)
    if not a.skip_10x:
        big = os.path.join(a.out, "gen-10x.txt")
        if not os.path.exists(big):
            subprocess.run([coflow, "trace", "gen", "--coflows", "5260", "--ports", "150", "--seed", "10", "-o", big], check=True)
        traces.append(("gen10x", big))
    results = {}
    for tname, path in traces:
        for s in a.schedulers.split(","):
            print(f"bench: {tname} {s} ...", file=sys.stderr, flush=True)
            r = run([coflow, "sim", "--trace", path, "--scheduler", s, "--quiet",
                     "--json", os.path.join(a.out, f"{tname}-{s}.json")], a.timeout)
            results[f"{tname}/{s}"] = r
            print(f"  {r['wall_s']:8.1f} s  {r['peak_rss_mb']:7.0f} MB  {'ok' if r['ok'] else 'FAILED'}  {r['last_line']}", flush=True)
            tmpl = os.environ.get("COFLOWSIM_CMD")
            if tmpl and tname == "fb":
                c = run(shlex.split(tmpl.format(sched=s.upper(), trace=path)), a.timeout)
                results[f"{tname}/{s}/coflowsim"] = c
                print(f"  coflowsim {c['wall_s']:8.1f} s -> speed-up {c['wall_s'] / r['wall_s']:.1f}x", flush=True)
        base = results.get(f"{tname}/fair")
        if base:
            for s in a.schedulers.split(","):
                r = results.get(f"{tname}/{s}")
                if r:
                    r["wall_vs_fair"] = r["wall_s"] / base["wall_s"]
    with open(os.path.join(a.out, "bench.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"bench: {os.path.join(a.out, 'bench.json')}")


if __name__ == "__main__":
    main()

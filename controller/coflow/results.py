"""README results from runs: small JSON summaries under ``results/`` and the tables made from them.

Every results table in README.md sits between ``<!-- results:NAME -->`` and
``<!-- /results:NAME -->`` and is rendered from ``results/NAME.json`` and nothing else:

    coflow results save --kind sim out/fb/compare.json -o results/sim-fb.json   # after a run
    coflow results readme             # rewrite README.md's tables from results/*.json
    coflow results readme --check     # exit 1 (and a diff) when README.md differs

A summary keeps what its table shows (normalized CCT rows and, for the emulation, the TCP
counters and the simulator's table on the same scaled flows) plus where and when the run
happened (machine, load, commit), so that a timing column always says which run it is from.
``make results`` reruns the simulator comparisons and saves them; ``make results-emu`` saves
the last ``make run`` (``out/run/compare.json``).
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import platform
import re
import subprocess
import sys
import time

from .trace import BINS

SCHEMA = 1
BLOCK = re.compile(r"(<!-- results:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)


class ResultsError(ValueError):
    pass


# where and when ---------------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit(cwd: str) -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() or None


def run_info(source_path: str) -> dict:
    """The machine and moment a run's numbers come from (read when the summary is saved, which
    ``make results`` does right after the run)."""
    try:
        load: list[float | None] = list(os.getloadavg())
    except OSError:
        load = [None, None, None]
    return {"date": time.strftime("%Y-%m-%d", time.gmtime(os.path.getmtime(source_path))),
            "cpus": os.cpu_count(), "cpu_model": _cpu_model(),
            "loadavg_1_5_15": [round(x, 2) if x is not None else None for x in load],
            "commit": _git_commit(os.path.dirname(os.path.abspath(source_path)) or ".")}


# summaries --------------------------------------------------------------------------------------

ROW_KEYS = ("avg_cct_s", "p95_cct_s", "avg", "p95", "wall_s") + tuple(f"{b}_avg" for b in BINS)


def _rows(table: dict) -> dict:
    try:
        return {name: {k: r.get(k) for k in ROW_KEYS} for name, r in table["rows"].items()}
    except (KeyError, AttributeError, TypeError) as e:
        raise ResultsError(f"not a comparison table: {e}") from None


def summarize_sim(cmp: dict, source_path: str, command: str) -> dict:
    """Summary of ``coflow compare --json`` output."""
    for k in ("trace", "table"):
        if k not in cmp:
            raise ResultsError(f"{source_path}: no {k!r}: not the JSON of `coflow compare`")
    return {"schema": SCHEMA, "kind": "sim", "command": command,
            "trace": os.path.basename(cmp["trace"]), "convention": cmp.get("convention"),
            "capacity_Bps": cmp.get("capacity_Bps"), "coflows": _coflow_count(cmp),
            "baseline": cmp["table"]["baseline"], "rows": _rows(cmp["table"]),
            "run": run_info(source_path)}


def _coflow_count(cmp: dict) -> int | None:
    reps = cmp.get("reports") or {}
    for r in reps.values():
        return r.get("summary", {}).get("coflows")
    return None


def summarize_emu(cmp: dict, source_path: str, command: str) -> dict:
    """Summary of the emulation's ``out/run/compare.json`` (``make run``)."""
    for k in ("plan", "table", "reports", "config"):
        if k not in cmp:
            raise ResultsError(f"{source_path}: no {k!r}: not the JSON of `make run`'s emulation")
    tcp = {m: r.get("tcp") for m, r in cmp["reports"].items() if r.get("tcp") is not None}
    regime = {m: r.get("regime") for m, r in cmp["reports"].items() if r.get("regime") is not None}
    # rate modes: the controller's meter pool and closed loop (rounds that read flow_bytes)
    meters = {m: (r.get("controller") or {}).get("meters") for m, r in cmp["reports"].items()
              if isinstance((r.get("controller") or {}).get("meters"), dict)}
    # how each mode's schedule reached the packets (queues, meters, paced senders)
    enforcement = {m: r["enforcement"] for m, r in cmp["reports"].items() if r.get("enforcement")}
    pacing = {m: r["pacing"] for m, r in cmp["reports"].items() if r.get("pacing")}
    audit = {m: (r.get("controller") or {}).get("rate_audit") for m, r in cmp["reports"].items()
             if isinstance((r.get("controller") or {}).get("rate_audit"), dict)}
    cfg = cmp["config"]
    return {"schema": SCHEMA, "kind": "emu", "command": command, "topology": cmp.get("topology"),
            "plan": cmp["plan"], "rate_mbps": cfg.get("rate_mbps"),
            "baseline": cmp["table"]["baseline"], "rows": _rows(cmp["table"]),
            "sim_rows": _rows(cmp["sim_table"]) if "sim_table" in cmp else None,
            "tcp": tcp, "regime": regime, "meters": meters, "enforcement": enforcement,
            "pacing": pacing, "rate_audit": audit, "run": run_info(source_path)}


SUMMARIZERS = {"sim": summarize_sim, "emu": summarize_emu}


# rendering --------------------------------------------------------------------------------------

def _f(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _machine(run: dict) -> str:
    load = run.get("loadavg_1_5_15") or [None]
    return (f"{run.get('date')}, {run.get('cpus')}-core {run.get('cpu_model')}, load {_f(load[0], '{:.1f}')}"
            f" at save, commit {run.get('commit') or '?'}")


def render_sim(s: dict) -> str:
    cols = ["avg", "p95"] + [f"{b}_avg" for b in BINS]
    out = [f"`{s['command']}` ({s['trace']}, {s.get('coflows') or '?'} coflows, "
           f"`{s.get('convention')}` convention); normalized = {s['baseline']}'s CCT / the scheduler's "
           f"(>1 is faster). `wall (s)`: the simulation's own wall time in that run "
           f"({_machine(s['run'])}).", "",
           "| scheduler | avg CCT (s) | " + " | ".join(c.replace("_avg", " avg") for c in cols) + " | wall (s) |",
           "|---|---:|" + "---:|" * len(cols) + "---:|"]
    for name, r in s["rows"].items():
        out.append(f"| {name} | {_f(r['avg_cct_s'], '{:.3f}')} | " + " | ".join(_f(r[c]) for c in cols)
                   + f" | {_f(r['wall_s'], '{:.1f}')} |")
    return "\n".join(out) + "\n"


def render_emu(s: dict) -> str:
    p = s["plan"]
    out = [f"`{s['command']}`: {s.get('topology')}, {p.get('coflows')} coflows / {p.get('flows')} flows "
           f"at {_f(s.get('rate_mbps'), '{:g}')} Mb/s ({_machine(s['run'])}). Normalized = "
           f"{s['baseline']}'s CCT / the mode's; `sim`: the fluid simulator on the same scaled flows.", "",
           "| mode | avg CCT (s) | avg | p95 | SN avg | LN avg | LW avg | sim avg | sim p95 | "
           "retransmitted / sent segments | SYN retransmissions / connections | TCP timeouts | "
           "ECN marks | time before first byte, median share of CCT | enforcement | meter RED drops |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    sim = s.get("sim_rows") or {}
    for name, r in s["rows"].items():
        sr = sim.get(name, {})
        t = (s.get("tcp") or {}).get(name) or {}
        retx, sent = t.get("RetransSegs"), t.get("OutSegs")
        g = (s.get("regime") or {}).get(name) or {}
        if g.get("connections") is not None:     # with pooled connections: the warm-up's too
            syn, conns = g.get("syn_retrans"), g.get("connections")
        else:
            syn, conns = t.get("TCPSynRetrans"), t.get("ActiveOpens") or p.get("flows")
        share = g.get("before_first_byte_share") or {}
        bfb = share.get("median")
        seg = (f"{retx:,} / {sent:,} ({100 * retx / sent:.1f}%)" if retx is not None and sent else "-")
        if g.get("spurious_retrans_segs") is not None and seg != "-":   # received twice: no loss
            seg += f", {g['spurious_retrans_segs']:,} D-SACKed"
        m = (s.get("meters") or {}).get(name)
        parts = [(s.get("enforcement") or {}).get(name)]
        pc = (s.get("pacing") or {}).get(name)
        if pc and pc.get("flows"):
            parts.append(f"{pc.get('paced', 0):,} of {pc['flows']:,} flows paced")
        au = (s.get("rate_audit") or {}).get(name)
        if au and au.get("flows"):
            parts.append(f"achieved / set rate {au['achieved_over_set']:.2f} (median flow "
                         f"{au['median']:.2f}, {au['within_10pct']:.0%} within 10%)")
        if m:
            parts.append((f"closed loop: {m.get('progress_reads', 0):,} reads of the switches' flow counters"
                          if m.get("closed_loop") else "open loop")
                         + (f"; {m['unmetered_coflows']} coflows unmetered" if m.get("unmetered_coflows") else ""))
        rc = "; ".join(x for x in parts if x) or "-"
        synr = (f"{syn:,} / {conns:,} ({100 * syn / conns:.1f}%)" if syn is not None and conns else "-")
        out.append(f"| {name} | {_f(r['avg_cct_s'])} | {_f(r['avg'])} | {_f(r['p95'])} | {_f(r.get('SN_avg'))} | "
                   f"{_f(r.get('LN_avg'))} | {_f(r.get('LW_avg'))} | {_f(sr.get('avg'))} | {_f(sr.get('p95'))} | "
                   f"{seg} | {synr} | {_f(t.get('TCPTimeouts'), '{:,}')} | {_f(g.get('ecn_marked'), '{:,}')} | "
                   f"{_f(bfb, '{:.0%}')} | {rc} | {_f(g.get('meter_red_drops'), '{:,}')} |")
    return "\n".join(out) + "\n"


RENDERERS = {"sim": render_sim, "emu": render_emu}


def load_summary(path: str) -> dict:
    try:
        with open(path) as f:
            s = json.load(f)
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing (run `make results`, or remove its block from README.md)") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}:{e.lineno}: not JSON: {e.msg}") from None
    if not isinstance(s, dict) or s.get("kind") not in RENDERERS or s.get("schema") != SCHEMA:
        raise ResultsError(f"{path}: not a results summary (kind sim|emu, schema {SCHEMA})")
    return s


def render_readme(text: str, results_dir: str) -> str:
    """``text`` with every results block re-rendered from ``results_dir``."""
    def sub(m: re.Match) -> str:
        s = load_summary(os.path.join(results_dir, m.group("name") + ".json"))
        return m.group(1) + RENDERERS[s["kind"]](s) + m.group(4)
    return BLOCK.sub(sub, text)


def blocks(text: str) -> list[str]:
    return [m.group("name") for m in BLOCK.finditer(text)]


# CLI --------------------------------------------------------------------------------------------

def cmd_save(args) -> int:
    try:
        with open(args.source) as f:
            cmp = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ResultsError(f"{args.source}: {e}") from None
    s = SUMMARIZERS[args.kind](cmp, args.source, args.command)
    from .report import write_json
    write_json(s, args.out)
    print(f"results: {args.out}")
    return 0


def cmd_readme(args) -> int:
    with open(args.readme) as f:
        old = f.read()
    new = render_readme(old, args.results)
    if args.check:
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       args.readme, "rendered from " + args.results))
            print(f"{args.readme}: results tables differ from {args.results}/ (run `coflow results readme`)",
                  file=sys.stderr)
            return 1
        return 0
    if new != old:
        with open(args.readme, "w") as f:
            f.write(new)
    print(f"{args.readme}: {len(blocks(new))} results tables from {args.results}/"
          + ("" if new != old else " (unchanged)"))
    return 0


def add_commands(sub) -> None:
    p = sub.add_parser("results", help="README results tables from small JSON summaries (results/)")
    rs = p.add_subparsers(dest="rcmd", required=True)
    s = rs.add_parser("save", help="summarize a run's JSON into results/NAME.json")
    s.add_argument("source", help="coflow compare --json output, or make run's out/run/compare.json")
    s.add_argument("--kind", choices=sorted(SUMMARIZERS), required=True)
    s.add_argument("--command", required=True, help="the command that made the run (shown with the table)")
    s.add_argument("-o", "--out", required=True)
    s.set_defaults(fn=cmd_save)
    r = rs.add_parser("readme", help="rewrite README.md's results blocks from results/*.json")
    r.add_argument("--readme", default="README.md")
    r.add_argument("--results", default="results")
    r.add_argument("--check", action="store_true", help="exit 1 with a diff if README.md differs")
    r.set_defaults(fn=cmd_readme)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="coflow")
    add_commands(ap.add_subparsers(dest="cmd", required=True))
    args = ap.parse_args(["results", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.fn(args)
    except ResultsError as e:
        print(f"coflow results: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

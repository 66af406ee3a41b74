"""README results from runs: small JSON summaries under ``results/`` and the tables made from them.

Every results table in README.md sits between ``<!-- results:NAME -->`` and
``<!-- /results:NAME -->`` and is rendered from ``results/NAME.json`` and nothing else; a block
``NAME+VIEW`` renders another view of the same summary (``sim-fb+what``: the figures README's
prose discusses, so that no figure there is written by hand):

    coflow results save --kind sim out/fb/compare.json -o results/sim-fb.json   # after a run
    coflow results readme             # rewrite README.md's tables from results/*.json
    coflow results readme --check     # exit 1 (and a diff) when README.md differs

A summary keeps what its table shows (normalized CCT rows and, for the emulation, the TCP
counters and the simulator's table on the same scaled flows) plus where and when the run
happened (machine, load, commit), so that a timing column always says which run it is from.
``make results`` reruns the simulator comparisons and saves them; ``make results-emu`` saves
the last ``make run`` (``out/run/compare.json``); a full passing ``make ptf`` and every ``make
bench-p4`` save theirs (``results/p4-ptf.json``, ``results/p4-bench.json``: README's "P4 data
plane").
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import statistics
import sys
from typing import Any

from .provenance import cpu_model, git_commit, git_dirty, provenance, run_info  # noqa: F401 (re-exported)
from .results_base import SCHEMA, ResultsError, _f, _machine  # noqa: F401 (re-exported)
from .results_scale import (  # noqa: F401 (the scale benchmark's summaries, re-exported)
    SCALE_ALONE, SCALE_DIGEST, SCALE_FULL, SCALE_KEYS, plot_scale, render_scale, render_scale_digest,
    render_scale_incremental, summarize_scale)
from .trace import BINS

BLOCK = re.compile(r"(<!-- results:(?P<name>[\w.-]+(?:\+\w+)?) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)


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
            "run": run_info(source_path, cmp)}


def _coflow_count(cmp: dict) -> int | None:
    reps = cmp.get("reports") or {}
    for r in reps.values():
        return r.get("summary", {}).get("coflows")
    return None


def _need_emu(cmp: dict, source_path: str) -> None:
    for k in ("plan", "table", "reports", "config"):
        if k not in cmp:
            raise ResultsError(f"{source_path}: no {k!r}: not the JSON of `make run`'s emulation")


#: what runs must share to be summarized together: the same flows at the same rate, and the
#: same modes
_SAME_RUN = (("plan", "coflows"), ("plan", "flows"), ("plan", "bytes"), ("config", "rate_mbps"))


def _run_brief(cmp: dict, source_path: str) -> dict:
    """One run's figures for the table across runs: each mode's gain and average CCT, the share
    of its segments retransmitted and its paced flows' achieved / set rate."""
    rows = _rows(cmp["table"])
    retx, paced = {}, {}
    for m, r in cmp["reports"].items():
        t = r.get("tcp") or {}
        if t.get("RetransSegs") is not None and t.get("OutSegs"):
            retx[m] = t["RetransSegs"] / t["OutSegs"]
        au = (r.get("controller") or {}).get("rate_audit")
        if isinstance(au, dict) and au.get("flows"):
            paced[m] = au.get("achieved_over_set")
    return {"gain": {m: r["avg"] for m, r in rows.items()},
            "avg_cct_s": {m: r["avg_cct_s"] for m, r in rows.items()},
            "retrans": retx, "paced": paced, "run": run_info(source_path, cmp)}


def _check_same(first: tuple, other: tuple) -> None:
    (a, pa), (b, pb) = first, other
    for sec, key in _SAME_RUN:
        if (a.get(sec) or {}).get(key) != (b.get(sec) or {}).get(key):
            raise ResultsError(f"{pb}: {sec}.{key} is {(b.get(sec) or {}).get(key)!r}, {pa} has "
                               f"{(a.get(sec) or {}).get(key)!r}: runs summarized together must run the same flows")
    if set(a["table"]["rows"]) != set(b["table"]["rows"]):
        raise ResultsError(f"{pb}: modes {sorted(b['table']['rows'])}, {pa} has {sorted(a['table']['rows'])}")


def summarize_emu(cmp: dict, source_path: str, command: str, also: tuple = ()) -> dict:
    """Summary of the emulation's ``out/run/compare.json`` (``make run``); ``also``: more runs
    of the same build and flows, ``(compare JSON, path)`` each, whose gains, retransmissions and
    paced rates are kept beside the first's (``runs``: the table across runs)."""
    _need_emu(cmp, source_path)
    runs = [_run_brief(cmp, source_path)]
    for other, path in also:
        _need_emu(other, path)
        _check_same((cmp, source_path), (other, path))
        runs.append(_run_brief(other, path))
        if runs[-1]["run"]["commit"] != runs[0]["run"]["commit"]:
            raise ResultsError(f"{path}: commit {runs[-1]['run']['commit']}, {source_path} has "
                               f"{runs[0]['run']['commit']}: runs summarized together must be one build's")
    tcp = {m: r.get("tcp") for m, r in cmp["reports"].items() if r.get("tcp") is not None}
    regime = {m: r.get("regime") for m, r in cmp["reports"].items() if r.get("regime") is not None}
    from .emu.runner import meter_red_drops
    for m, g in regime.items():      # runs before the runner counted a metered mode's none as 0
        if g.get("meter_red_drops") is None:
            regime[m] = dict(g, meter_red_drops=meter_red_drops(cmp["reports"][m].get("controller")))
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
            "pacing": pacing, "rate_audit": audit, "run": runs[0]["run"],
            "runs": [{k: v for k, v in r.items() if k != "run"} | {"date": r["run"]["date"]} for r in runs]}


def _need(d: dict, keys: tuple, source_path: str, what: str) -> None:
    for k in keys:
        if k not in d:
            raise ResultsError(f"{source_path}: no {k!r}: not the JSON of `{what}`")


def summarize_ptf(res: dict, source_path: str, command: str) -> dict:
    """Summary of ``make ptf``'s ``out/ptf/summary.json`` (ptf-tests/runner.py --summary): a
    full run that passed (a selection or a failure is no figure for README)."""
    _need(res, ("rc", "ran", "passed", "failed", "seconds", "switch"), source_path, "make ptf")
    if res["rc"] != 0 or res["failed"]:
        raise ResultsError(f"{source_path}: the run failed ({res['failed']} failed, exit {res['rc']}): not saved")
    if res.get("selected"):
        raise ResultsError(f"{source_path}: only {' '.join(res['selected'])} ran: save a full `make ptf`")
    return {"schema": SCHEMA, "kind": "ptf", "command": command,
            **{k: res[k] for k in ("ran", "passed", "failed", "seconds", "switch")},
            "skipped": res.get("skipped") or 0, "weighted": res.get("weighted"), "run": run_info(source_path, res)}


def summarize_bench_p4(res: dict, source_path: str, command: str) -> dict:
    """Summary of ``make bench-p4``'s ``out/bench/bench_p4.json`` (p4src/bench/bench_p4.py --json)."""
    _need(res, ("median_pps", "median_cpu_us_per_pkt", "ratio_pps", "ratio_cpu", "target_pps_ratio",
                "rounds", "switch"), source_path, "make bench-p4")
    return {"schema": SCHEMA, "kind": "bench-p4", "command": command,
            **{k: res[k] for k in ("median_pps", "median_cpu_us_per_pkt", "ratio_pps", "ratio_cpu",
                                   "target_pps_ratio", "rounds", "switch")},
            "pps": res.get("pps"), "round_ratios_pps": res.get("round_ratios_pps"),
            "round_ratios_cpu": res.get("round_ratios_cpu"), "frame_bytes": res.get("frame_bytes"),
            "trial_s": res.get("trial_s"),
            "loadavg": [res.get("loadavg_start"), res.get("loadavg_end")], "run": run_info(source_path, res)}


def summarize_sweep(res: dict, source_path: str, command: str) -> dict:
    """Summary of ``make bench-sweep``'s ``out/bench/bench_sweep.json`` (bench/bench_sweep.py)."""
    _need(res, ("runs", "judged", "loadavg_start"), source_path, "make bench-sweep")
    for w in ("1", "2"):
        if w not in res["runs"]:
            raise ResultsError(f"{source_path}: no run with {w} worker(s): not a full `make bench-sweep`")
    return {"schema": SCHEMA, "kind": "sweep", "command": command, "grid": res.get("grid"),
            "runs": res["runs"], "judged": res["judged"], "reproduce_all": res.get("reproduce_all"),
            "targets": res.get("targets"), "loadavg": [res["loadavg_start"], res.get("loadavg_end")],
            "run": run_info(source_path, res)}


SUMMARIZERS = {"sim": summarize_sim, "emu": summarize_emu, "scale": summarize_scale, "ptf": summarize_ptf,
               "bench-p4": summarize_bench_p4, "sweep": summarize_sweep}


# rendering --------------------------------------------------------------------------------------


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
    runs = s.get("runs") or []
    if len(runs) > 1:
        out += ["", f"Across {len(runs)} runs of this build and these flows (the table above is the first): "
                "median, and in brackets the lowest and highest.", "",
                "| mode | avg over " + s["baseline"] + " | avg CCT (s) | retransmitted segments | "
                "paced flows' achieved / set rate |", "|---|---:|---:|---:|---:|"]
        for name in s["rows"]:
            out.append(f"| {name} | {_spread([r['gain'].get(name) for r in runs])} | "
                       f"{_spread([r['avg_cct_s'].get(name) for r in runs])} | "
                       f"{_spread([r['retrans'].get(name) for r in runs], '{:.1%}')} | "
                       f"{_spread([r['paced'].get(name) for r in runs])} |")
    return "\n".join(out) + "\n"


def _spread(xs: list, fmt: str = "{:.2f}") -> str:
    """``median [lowest-highest]`` of the runs that have the figure (- when none)."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return fmt.format(statistics.median(xs)) + (f" [{fmt.format(min(xs))}-{fmt.format(max(xs))}]" if len(xs) > 1 else "")


def gains(s: dict) -> tuple[dict, int]:
    """Each mode's gain over the baseline: the median across ``runs`` when there are several,
    else the table's; and how many runs it is from."""
    runs = s.get("runs") or []
    if len(runs) > 1:
        return ({m: statistics.median(v) for m in s["rows"]
                 if (v := [r["gain"][m] for r in runs if r["gain"].get(m) is not None])}, len(runs))
    return {m: r["avg"] for m, r in s["rows"].items() if r.get("avg") is not None}, 1


def _switch(sw: dict) -> str:
    lm = sw.get("logging_macros")
    build = "build unknown" if lm is None else f"logging macros compiled {'in' if lm else 'out'}"
    return f"BMv2 {sw.get('version') or '?'} `simple_switch_grpc` ({build})"


def render_ptf(s: dict) -> str:
    w = s.get("weighted") or {}
    shares = "/".join(f"{x:.3f}" for x in w.get("shares") or [])
    return (f"`{s['command']}`: {s['ran']} PTF tests against {_switch(s['switch'])} with "
            f"`--priority-queues 8`: {s['passed']} passed, {s['failed']} failed"
            + (f", {s['skipped']} skipped" if s.get("skipped") else "")
            + f", in {s['seconds']:.0f} s ({_machine(s['run'])})"
            + (f"; weighted sharing 3:2:1 at an HTB-shaped port measured {shares} over "
               f"{w.get('window')} departures" if shares else "") + ".\n")


def render_bench_p4(s: dict) -> str:
    pps, cpu = s["median_pps"], s["median_cpu_us_per_pkt"]
    load = s.get("loadavg") or [None]
    ok = "met" if s["ratio_pps"] >= s["target_pps_ratio"] else "missed"
    rr = lambda k: (f" (rounds: {', '.join(f'{x:.2f}' for x in s[k])})" if s.get(k) else "")  # noqa: E731
    out = [f"`{s['command']}`: `coflow.p4` against a minimal L3 program (`p4src/bench/l3fwd.p4`) on the "
           f"same {_switch(s['switch'])}, {s['rounds']} rounds of {_f(s.get('trial_s'), '{:g}')} s trials, the "
           f"programs alternated; each ratio is the median of the rounds' own ratios ({_machine(s['run'])}; "
           f"load average {_f(load[0] and load[0][0], '{:.1f}')} at the start). **The target (>= "
           f"{s['target_pps_ratio']:.2f}x) is on the packet rate**, the highest rate forwarded with <= 1% loss: "
           f"{ok}. The switch's CPU time per packet is the pipeline's own cost; the rate also "
           "depends on the sender and the veths, the same for both programs.", "",
           "| | l3fwd (median) | coflow (median) | coflow vs l3fwd |", "|---|---:|---:|---|",
           f"| packets/s (<= 1% loss) | {pps['l3fwd']:,} | {pps['coflow']:,} | **{s['ratio_pps']:.2f}x**"
           f"{rr('round_ratios_pps')} |",
           f"| switch CPU per packet (us) | {cpu['l3fwd']:.1f} | {cpu['coflow']:.1f} | {s['ratio_cpu']:.2f}x "
           f"(l3fwd's / coflow's){rr('round_ratios_cpu')} |"]
    return "\n".join(out) + "\n"


def render_sweep(s: dict) -> str:
    one, two, j = s["runs"]["1"], s["runs"]["2"], s["judged"]
    t = s.get("targets") or {"speedup": 1.8, "overhead": 0.05}
    load = s.get("loadavg") or [None, None]
    ok = lambda b: "met" if b else "missed"  # noqa: E731
    out = (f"`{s['command']}` ({_machine(s['run'])}; load average {_f(load[0] and load[0][0], '{:.1f}')} at the "
           f"start, {_f(load[1] and load[1][0], '{:.1f}')} at the end): the Fig. 12 grid ({one['tasks']} tasks) took "
           f"{one['wall_s']:.0f} s on 1 worker and {two['wall_s']:.0f} s on 2, a speed-up of **{j['speedup']:.2f}x** "
           f"(target >= {t['speedup']}x: {ok(j.get('speedup_ok'))}"
           + (f", but confounded by the machine's load: the same tasks' own times summed to "
              f"{j['task_work_ratio']:.2f}x with 2 workers of those with 1, so per unit of task work 2 workers "
              f"were {j['speedup_per_work']:.2f}x faster" if j.get("confounded") else "")
           + f"); the engine kept {j.get('concurrency_2', 0):.2f} "
           f"tasks running at once with 2 workers, and the median task took {one['task_wall_median_s']:.2f} s alone "
           f"and {two['task_wall_median_s']:.2f} s beside the other worker. Engine overhead: "
           f"{1000 * j['overhead_per_task_s']:.1f} ms per task, {100 * j['overhead_share_of_median']:.1f}% of the "
           f"median task (target < {100 * t['overhead']:.0f}%: {ok(j.get('overhead_ok'))}).")
    ra = s.get("reproduce_all")
    if ra:
        out += (f" `coflow reproduce --all --workers {ra['workers']}` from an empty cache: {ra['wall_s'] / 60:.0f} min "
                f"(budget {ra['budget_s'] / 60:.0f} min: {'within' if ra['within_budget'] else 'over'}).")
    return out + "\n"


RENDERERS = {"sim": render_sim, "emu": render_emu, "scale": render_scale, "ptf": render_ptf,
             "bench-p4": render_bench_p4, "sweep": render_sweep}


# views: the figures README's prose discusses ------------------------------------------------------

#: the seeds' numbers these views compare with ([VARYS], [DISS], [AALO]; ../shared/docs/seeds-digest.md)
SEEDS_SEBF_OVER_FAIR = (2.16, 3.66)
SEEDS_FIFO_OVER_SEBF = (3.33, 5.65)
AALO_FIFO_LM_OVER_DCLAS = 18.6


def render_sim_what(s: dict) -> str:
    """README's "What we see" on a simulator comparison: each figure read from the summary."""
    rows, base = s["rows"], s["baseline"]

    def r(n: str, k: str) -> Any:
        return (rows.get(n) or {}).get(k)
    out = []
    if r("sebf", "avg"):
        lo, hi = SEEDS_SEBF_OVER_FAIR
        v = r("sebf", "avg")
        out.append(f"SEBF+MADD reaches {v:.2f}x over {base} avg, "
                   f"{'inside' if lo <= v <= hi else 'outside'} the seeds' {lo}x-{hi}x range")
        near = [n for n in ("sincronia", "utopia") if r(n, "avg")]
        if near:
            gap = max(abs(1 - r(n, "avg") / v) for n in near)
            out[-1] += f"; {' and '.join(n.capitalize() for n in near)} {'are' if len(near) > 1 else 'is'} within {gap:.0%} of it"
        if r("fifo", "avg_cct_s") and r("sebf", "avg_cct_s"):
            lo, hi = SEEDS_FIFO_OVER_SEBF
            out[-1] += (f", and FIFO's average CCT is {r('fifo', 'avg_cct_s') / r('sebf', 'avg_cct_s'):.1f}x SEBF's "
                        f"(seeds: {lo}x-{hi}x)")
    d, ds = "dclas", "dclas-strict"
    if r(d, "avg") and r(ds, "avg"):
        out.append(f"D-CLAS reaches {r(d, 'avg'):.2f}x avg with Aalo's weighted queues ({r(d, 'p95'):.2f}x at p95) "
                   f"and {r(ds, 'avg'):.2f}x with strict priority across queues ({r(ds, 'p95'):.2f}x at p95); with "
                   f"strict priority the small coflows gain {r(ds, 'SN_avg'):.1f}x (SN) and {r(ds, 'LN_avg'):.1f}x (LN), "
                   f"the wide ones {r(ds, 'SW_avg'):.2f}x (SW) and {r(ds, 'LW_avg'):.2f}x (LW)")
    if r("fifo-lm", "avg_cct_s") and r(ds, "avg_cct_s"):
        out.append(f"FIFO-LM (Baraat)'s average CCT is {r('fifo-lm', 'avg_cct_s') / r(ds, 'avg_cct_s'):.1f}x "
                   f"dclas-strict's (Aalo reports {AALO_FIFO_LM_OVER_DCLAS}x) and it is at {r('fifo-lm', 'avg'):.2f}x "
                   f"of {base} on average")
    if r("fai", "avg"):
        out.append(f"Fai is at {r('fai', 'avg'):.2f}x avg and {r('fai', 'p95'):.2f}x at p95")
    return f"What we see (`{s['command']}`'s table): " + "; ".join(out) + ".\n"


def render_emu_what(s: dict) -> str:
    """The figures README discusses under the emulation's table: the modes ranked, retransmissions
    (and how many of them D-SACKed), and each mode's emulated gain against the simulator's."""
    rows, base = s["rows"], s["baseline"]
    gain, n = gains(s)
    modes = sorted((m for m in gain if m != base), key=lambda m: -gain[m])
    out = [("In this run" if n == 1 else f"Over {n} runs (medians)") + ", ranked by average CCT over "
           + base + ": " + ", ".join(f"{m} {gain[m]:.2f}x" for m in modes)]
    retx = []
    for m in rows:
        t = (s.get("tcp") or {}).get(m) or {}
        g = (s.get("regime") or {}).get(m) or {}
        if t.get("RetransSegs") is not None and t.get("OutSegs"):
            share = t["RetransSegs"] / t["OutSegs"]
            ds = g.get("spurious_retrans_segs")
            retx.append(f"{m} {share:.1%}" + (f" ({ds / t['RetransSegs']:.0%} of them D-SACKed)"
                                               if ds is not None and t["RetransSegs"] else ""))
    if retx:
        out.append(("segments retransmitted" if n == 1 else "in the first run, segments retransmitted")
                   + ": " + ", ".join(retx))
    sim = s.get("sim_rows") or {}
    both = [m for m in modes if (sim.get(m) or {}).get("avg") is not None]
    if both:
        out.append("emulated vs simulated gain: " + ", ".join(f"{m} {gain[m]:.2f}x vs {sim[m]['avg']:.2f}x"
                                                                for m in both))
    return "; ".join(out) + ".\n"


VIEWS = {("sim", "what"): render_sim_what, ("emu", "what"): render_emu_what,
         ("scale", "digest"): render_scale_digest, ("scale", "incremental"): render_scale_incremental}


def load_summary(path: str) -> dict:
    try:
        with open(path) as f:
            s = json.load(f)
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing (run `make results`, or remove its block from README.md)") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}:{e.lineno}: not JSON: {e.msg}") from None
    if not isinstance(s, dict) or s.get("kind") not in RENDERERS or s.get("schema") != SCHEMA:
        raise ResultsError(f"{path}: not a results summary (kind {'|'.join(RENDERERS)}, schema {SCHEMA})")
    return s


def render_readme(text: str, results_dir: str) -> str:
    """``text`` with every results block re-rendered from ``results_dir``."""
    def sub(m: re.Match) -> str:
        name, _, view = m.group("name").partition("+")
        path = os.path.join(results_dir, name + ".json")
        s = load_summary(path)
        fn = VIEWS.get((s["kind"], view)) if view else RENDERERS[s["kind"]]
        if fn is None:
            raise ResultsError(f"{path}: no view {view!r} of a {s['kind']!r} summary "
                               f"(views: {', '.join(f'{k}+{v}' for k, v in VIEWS) or 'none'})")
        return m.group(1) + fn(s) + m.group(4)
    return BLOCK.sub(sub, text)


def blocks(text: str) -> list[str]:
    return [m.group("name") for m in BLOCK.finditer(text)]


def summaries_used(text: str) -> set[str]:
    """The summaries (``results/NAME.json``) the blocks of ``text`` render."""
    return {b.partition("+")[0] for b in blocks(text)}


# CLI --------------------------------------------------------------------------------------------

def _load_run(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ResultsError(f"{path}: {e}") from None


def cmd_save(args) -> int:
    first, *more = args.source
    if more and args.kind != "emu":
        raise ResultsError(f"--kind {args.kind} summarizes one run; several only with --kind emu")
    cmp = _load_run(first)
    if more:
        s = summarize_emu(cmp, first, args.command, also=tuple((_load_run(p), p) for p in more))
    else:
        s = SUMMARIZERS[args.kind](cmp, first, args.command)
    from .report import write_json
    write_json(s, args.out)
    if args.kind == "scale" and plot_scale(s, os.path.splitext(args.out)[0] + ".png"):
        print(f"results: {os.path.splitext(args.out)[0]}.png")
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
    s.add_argument("source", nargs="+",
                   help="coflow compare --json output, make run's out/run/compare.json, "
                        "make bench-scale's out/bench/bench_scale.json, make ptf's "
                        "out/ptf/summary.json or make bench-p4's out/bench/bench_p4.json; with "
                        "--kind emu several runs of one build (the first's table in full, "
                        "every run's gains beside it as median and range)")
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

"""The controller scale benchmark's summaries (``make bench-scale``, bench/bench_scale.py): what
:mod:`coflow.results` keeps of a run, its README tables (the default rows, the digest and
incremental views) and its plot.
"""
from __future__ import annotations


from .provenance import run_info
from .results_base import SCHEMA, ResultsError, _f, _machine


SCALE_KEYS = ("mode", "round", "variant", "edges", "coflows", "switch", "placement", "median_ms",
              "p99_ms", "cpu_median_ms", "read_median_ms", "compute_median_ms", "write_median_ms",
              "placement_source", "sender_edges_mean")


#: bench-scale variants that are the default (push) without one change: variant -> the change
SCALE_ALONE = ("readall", "reset", "copyrec", "scalarcfg", "alledges", "digestall")


#: the variant each of SCALE_ALONE is set against (``push`` unless named here)
_SCALE_ALONE_BASE = {"digestall": "digest"}


_SCALE_ALONE_WHAT = {"readall": "closed-loop read on its clock (`readall`: every round reads)",
                     "reset": "released meters left configured (`reset`: reset at release)",
                     "copyrec": "registry's shared snapshots (`copyrec`: every record copied each round)",
                     "scalarcfg": "moved meters in one vector pass, rewritten only if their config "
                                  "changed (`scalarcfg`: one at a time, all patched)",
                     "alledges": "overrides only where a coflow sends (`alledges`: wherever the "
                                 "local queue differs)",
                     "digestall": "the same on report digests (`digestall` against `digest`)"}


#: the digest comparison's variants (bench_scale.bench_dclas_digest): the default path, and
#: D-CLAS on the edges' report digests
SCALE_DIGEST = ("poll", "digest")


#: D-CLAS's full round (every edge and coflow in every round: the code before the incremental
#: round) beside each default: ``full`` is ``push`` without it (bench_dclas), ``pollfull``
#: ``poll`` and ``digestfull`` ``digest`` (the digest comparison)
SCALE_FULL = {"full": ("push",), "pollfull": ("poll",), "digestfull": ("digest",)}


def _short(x):
    """Timings to 3 significant digits (a summary stays small)."""
    if isinstance(x, float):
        return float(f"{x:.3g}")
    return x


def summarize_scale(res: dict, source_path: str, command: str) -> dict:
    """Summary of ``make bench-scale``'s ``out/bench/bench_scale.json`` (and its plot, written
    next to the summary as PNG when matplotlib is there): the phases only for the default
    variant's rows (``push``), what the ratios need for the others."""
    rows = res.get("rows")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ResultsError(f"{source_path}: no 'rows': not the JSON of `make bench-scale`")
    for i, r in enumerate(rows):
        for k in ("mode", "edges", "coflows", "switch", "median_ms", "p99_ms", "cpu_median_ms"):
            if k not in r:
                raise ResultsError(f"{source_path}: row {i} has no {k!r}")
    return {"schema": SCHEMA, "kind": "scale", "command": command,
            "rows": [{k: _short(r.get(k)) for k in (SCALE_KEYS + ("updates_per_round",)
                                                    if r.get("variant") in ("push", None) + SCALE_ALONE
                                                    + SCALE_DIGEST + tuple(SCALE_FULL)
                                                    else SCALE_KEYS[:10]) if r.get(k) is not None}
                     for r in rows],
            "bmv2_idle": res.get("bmv2_idle"), "emulated_idle": res.get("emulated_idle"),
            "validation": [{k: _short(v) for k, v in r.items()} for r in res.get("validation") or []],
            "startup": [{k: _short(v) for k, v in r.items()} for r in res.get("startup") or []],
            "dclas_queues": {k: _short(v) for k, v in (res.get("dclas_queues") or {}).items()} or None,
            "codec_encode": {k: _short(v) for k, v in (res.get("codec_encode") or {}).items()} or None,
            "meters_all_move": {k: _short(v) for k, v in (res.get("meters_all_move") or {}).items()} or None,
            "p4info": res.get("p4info"),
            "loadavg": [res.get("loadavg_start"), res.get("loadavg_end")],
            "run": run_info(source_path, res)}


def _round_key(r: dict):
    """A row's round, with its coflows' placement on the edges when it is not every coflow on
    every edge (bench_scale ``--placements``: ``fb``, the FB trace's coflow widths)."""
    pl = r.get("placement")
    return r.get("round") if pl in (None, "all") else f"{r.get('round')} @{pl}"


def _scale_label(r: dict) -> str:
    pl = r.get("placement")
    where = "" if pl in (None, "all") else " (FB widths)" if pl == "fb" else f" ({pl})"
    return f"{r['mode']} {r.get('round') or ''}".strip() + where


def _default_rows(rows: list) -> list:
    """Per round, size and switch kind: the controller's default I/O (``push``; else
    ``after``, else the only row)."""
    best: dict = {}
    rank = {"push": 0, "after": 1, None: 2}
    for r in rows:
        k = (r["mode"], _round_key(r), r["edges"], r["coflows"], r["switch"])
        v = rank.get(r.get("variant"), 3)
        if v < 3 and (k not in best or v < best[k][0]):
            best[k] = (v, r)
    return [r for _, r in best.values()]


def render_scale(s: dict) -> str:
    """Rounds vs edges (the controller's default I/O: ``push``, pushed counters where the
    edges push, falling back to polling), then each change's ratio."""
    rows = s["rows"]
    after = _default_rows(rows)
    out = [f"`{s['command']}` ({_machine(s['run'])}; load average "
           f"{_f((s.get('loadavg') or [None])[0] and s['loadavg'][0][0], '{:.1f}')} at the start). "
           "Wall time of `Controller.round()` (median, p99), the controller process's CPU time "
           "(median), the phases' medians, and the shortest Δ the loop holds (the round's p99); "
           "the controller's default I/O (`push`: pushed counters where the edges push them, "
           "BMv2 polled).", "",
           "| round | edges | coflows | switches | median (ms) | p99 (ms) | CPU (ms) | read / compute / write (ms) | min Δ (ms) |",
           "|---|---:|---:|---|---:|---:|---:|---|---:|"]
    for r in sorted(after, key=lambda r: (r["mode"], _round_key(r) or "", r["coflows"], r["edges"], r["switch"])):
        out.append(f"| {_scale_label(r)} | {r['edges']:,} | {r['coflows']:,} | {r['switch']} | "
                   f"{_f(r['median_ms'])} | {_f(r['p99_ms'])} | {_f(r['cpu_median_ms'])} | "
                   f"{_f(r.get('read_median_ms'))} / {_f(r.get('compute_median_ms'))} / "
                   f"{_f(r.get('write_median_ms'))} | {_f(r.get('min_delta_ms', r['p99_ms']), '{:.0f}')} |")
    placed = sorted({(r["edges"], r["placement_source"], r.get("sender_edges_mean")) for r in after
                     if r.get("placement_source")}, key=lambda x: x[0])
    if placed:
        out += ["", "(FB widths): each coflow on as many edges as its FB width, widths from " + "; ".join(
            f"{src} at {n:,} edges ({_f(m, '{:.1f}')} sender edges per coflow on average)" for n, src, m in placed)
            + "."]
    base = {(r["mode"], _round_key(r), r["edges"], r["coflows"], r["switch"]): r
            for r in rows if r.get("variant") == "before"}
    ratios = []
    for r in rows:
        b = base.get((r["mode"], _round_key(r), r["edges"], r["coflows"], r["switch"]))
        if b is None or r.get("variant") in ("before", None) or not b["median_ms"] or not b["cpu_median_ms"]:
            continue
        ratios.append((r, r["median_ms"] / b["median_ms"], r["cpu_median_ms"] / b["cpu_median_ms"]))
    if ratios:
        out += ["", "Each change alone, against `before` (grpc futures, every answer decoded) in "
                "the same run, variants alternated in blocks of rounds: median wall / median CPU ratio (< 1 is faster).", "",
                "| round | edges | coflows | switches | aio | skip | after (both) | push |",
                "|---|---:|---:|---|---|---|---|---|"]
        keyed: dict = {}
        for r, w, c in ratios:
            k = (_scale_label(r), r["edges"], r["coflows"], r["switch"])
            keyed.setdefault(k, {})[r["variant"]] = f"{w:.2f} / {c:.2f}"
        for k in sorted(keyed, key=lambda k: (k[0], k[2], k[1], k[3])):
            v = keyed[k]
            out.append(f"| {k[0]} | {k[1]:,} | {k[2]:,} | {k[3]} | {v.get('aio', '-')} | "
                       f"{v.get('skip', '-')} | {v.get('after', '-')} | {v.get('push', '-')} |")
    # the closed loop's metered pairs kept incrementally (push) against rebuilt every round
    # (rebuild), same run
    # (in rounds that have a readall row, rebuild reads in every round as readall does: that
    # is its baseline there)
    reb = {(r["mode"], _round_key(r), r["edges"], r["coflows"], r["switch"]): r
           for r in rows if r.get("variant") == "rebuild"}
    readall = {(r["mode"], _round_key(r), r["edges"], r["coflows"], r["switch"]): r
               for r in rows if r.get("variant") == "readall"}
    inc = [(readall.get(k, r), reb[k]) for r in rows if r.get("variant") == "push"
           for k in [(r["mode"], _round_key(r), r["edges"], r["coflows"], r["switch"])] if k in reb]
    if inc:
        out += ["", "The closed loop's metered pairs kept incrementally (`push`, the default; in "
                "`churn`, `readall`: the default reading in every round, as `rebuild` does) against "
                "rebuilt from the meter pool every round (`rebuild`, the code before), same run, "
                "variants alternated in blocks of rounds:", "",
                "| round | edges | coflows | switches | rebuild: median / p99 / CPU (ms) | "
                "incremental: median / p99 / CPU (ms) | median / CPU ratio |",
                "|---|---:|---:|---|---|---|---|"]
        for r, b in sorted(inc, key=lambda x: (_scale_label(x[0]), x[0]["coflows"], x[0]["edges"])):
            out.append(f"| {_scale_label(r)} | {r['edges']:,} | {r['coflows']:,} | {r['switch']} | "
                       f"{_f(b['median_ms'])} / {_f(b['p99_ms'])} / {_f(b['cpu_median_ms'])} | "
                       f"{_f(r['median_ms'])} / {_f(r['p99_ms'])} / {_f(r['cpu_median_ms'])} | "
                       f"{r['median_ms'] / b['median_ms']:.2f} / "
                       f"{r['cpu_median_ms'] / b['cpu_median_ms']:.2f} |")
    with_ = {(r.get("variant"), r["mode"], _round_key(r), r["edges"], r["coflows"], r["switch"]): r
             for r in rows if r.get("variant") in ("push", *_SCALE_ALONE_BASE.values())}
    alone = [(r, with_[k]) for r in rows if r.get("variant") in SCALE_ALONE
             for k in [(_SCALE_ALONE_BASE.get(r["variant"], "push"), r["mode"], _round_key(r), r["edges"],
                        r["coflows"], r["switch"])] if k in with_]
    if alone:
        out += ["", "Each of issue 29's later changes alone: the default (`push`; `digest` for "
                "`digestall`) against it without that change, same run, variants alternated in blocks of rounds "
                "(updates: per round, all edges):", "",
                "| round | edges | coflows | switches | change | without: median / p99 / CPU (ms), updates "
                "| with: median / p99 / CPU (ms), updates | median / CPU ratio |",
                "|---|---:|---:|---|---|---|---|---|"]
        for b, r in sorted(alone, key=lambda x: (_scale_label(x[0]), x[0]["coflows"], x[0]["edges"],
                                                 x[0]["switch"], x[0]["variant"])):
            out.append(f"| {_scale_label(r)} | {r['edges']:,} | {r['coflows']:,} | {r['switch']} | "
                       f"{_SCALE_ALONE_WHAT[b['variant']]} | "
                       f"{_f(b['median_ms'])} / {_f(b['p99_ms'])} / {_f(b['cpu_median_ms'])}, "
                       f"{_f(b.get('updates_per_round'), '{:.0f}')} | "
                       f"{_f(r['median_ms'])} / {_f(r['p99_ms'])} / {_f(r['cpu_median_ms'])}, "
                       f"{_f(r.get('updates_per_round'), '{:.0f}')} | "
                       f"{r['median_ms'] / b['median_ms']:.2f} / {r['cpu_median_ms'] / b['cpu_median_ms']:.2f} |")
    dq = s.get("dclas_queues")
    if dq:
        out += ["", f"The D-CLAS round's queue decision (the core's `dclas_queues`, {dq['coflows']:,} coflows "
                f"due): {_f(dq['vectorised_us'], '{:.0f}')} us vectorised against "
                f"{_f(dq['loop_us'], '{:.0f}')} us for the per-coflow loop it replaced "
                f"({dq['ratio']:.2f}x, same run, median per call)."]
    ce = s.get("codec_encode")
    if ce:
        out += ["", f"The write phase's client work for one SEBF churn round ({ce['updates']:,} updates "
                f"over 8 edges, encoded and serialised): {_f(ce['codec_ms'])} ms with the codec against "
                f"{_f(ce['reference_ms'])} ms for the generic encoder it replaced ({ce['ratio']:.2f}x, same "
                f"run, median; {'the same bytes' if ce.get('identical_bytes') else 'BYTES DIFFER'})."]
    mm = s.get("meters_all_move")
    if mm:
        out += ["", f"The meter translation of a round in which every flow's rate moves ({mm['flows']:,} "
                f"flows, 8 edges: a starvation interval, a reordering): {_f(mm['vector_ms'])} ms in one "
                f"vector pass, {mm['vector_patched']:,} meters rewritten (their configs changed), against "
                f"{_f(mm['reference_ms'])} ms and {mm['reference_patched']:,} meters patched for the "
                f"per-meter update it replaced ({mm['ratio']:.2f}x, same run, median; "
                f"{'the same meters' if mm.get('same_state') else 'STATES DIFFER'})."]
    val = s.get("validation") or []
    if val:
        out += ["", "The emulation against BMv2, the same rounds at the same N (emulated / BMv2; "
                "`before`: polled, every answer decoded):", "",
                "| round | variant | edges | coflows | BMv2 median / CPU (ms) | emulated median / CPU (ms) "
                "| median ratio | CPU ratio | emulator processes |",
                "|---|---|---:|---:|---|---|---:|---:|---:|"]
        for v in val:
            out.append(f"| {v['mode']} {v['round']} | {v['variant']} | {v['edges']:,} | {v['coflows']:,} | "
                       f"{_f(v['bmv2_median_ms'])} / {_f(v['bmv2_cpu_ms'])} | "
                       f"{_f(v['emulated_median_ms'])} / {_f(v['emulated_cpu_ms'])} | "
                       f"{v['median_ratio']:.2f} | {v['cpu_ratio']:.2f} | {_f(v.get('emu_procs'), '{:.0f}')} |")
    st = s.get("startup") or []
    if st:
        out += ["", "The controller's start (connect, arbitrate, pipeline push, read back, first "
                "round; D-CLAS, 100 coflows, emulated edges) with grpc's synchronous StreamChannel "
                "(`threads`: two threads per switch) and with every stream on one asyncio loop "
                "(`aio`, the default), then 20 steady rounds:", "",
                "| edges | streams | start (s) | controller CPU (s) | threads | steady round median / p99 (ms) |",
                "|---:|---|---:|---:|---:|---|"]
        for r in sorted(st, key=lambda r: (r["edges"], r["stream"])):
            out.append(f"| {r['edges']:,} | {r['stream']} | {_f(r['startup_s'])} | "
                       f"{_f(r['controller_cpu_s'])} | {r['threads']} | "
                       f"{_f(r['steady_median_ms'])} / {_f(r['steady_p99_ms'])} |")
    return "\n".join(out) + "\n"


def plot_scale(s: dict, path: str) -> bool:
    """Median round time vs edges (log-log), one line per round kind and coflow count."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    lines: dict = {}
    for r in _default_rows(s["rows"]):
        lines.setdefault((_scale_label(r), r["coflows"], r["switch"]), []).append((r["edges"], r["median_ms"]))
    if not lines:   # no default-path rows (a digest comparison alone): no curve to plot
        return False
    placed = any(r.get("placement") not in (None, "all") for r in s["rows"])
    fig, ax = plt.subplots(figsize=(9.5, 4.5) if placed else (7, 4.5))
    colors: dict = {}
    for (label, c, sw), pts in sorted(lines.items()):
        pts.sort()
        # one colour per round kind and coflow count; placements (FB widths) dotted, BMv2 squares
        base = label.replace(" (FB widths)", "")
        col = colors.setdefault((base, c), f"C{len(colors) % 10}")
        style = ("s" if sw != "emulated" else "o") + (":" if "(FB widths)" in label else
                                                      "--" if sw != "emulated" else "-")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=col,
                label=f"{label}, {c} coflows" + (f" ({sw})" if sw != "emulated" else ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("edge switches")
    ax.set_ylabel("round, median (ms)")
    ax.grid(True, which="both", alpha=0.3)
    if placed:   # many lines: the legend beside the axes
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def render_scale_digest(s: dict) -> str:
    """The D-CLAS rounds on the edges' report digests (``digest``) against the default path
    (``poll``: BMv2 polled, the emulated edges' pushed counters) in the same run, on the same
    controller, switches and traffic, variants alternated in blocks of rounds."""
    rows = [r for r in s["rows"] if r.get("variant") in SCALE_DIGEST]
    by: dict = {}
    for r in rows:
        by.setdefault((r["mode"], _round_key(r), r["edges"], r["coflows"], r["switch"]), {})[r["variant"]] = r
    out = [f"`{s['command']}` ({_machine(s['run'])}; load average "
           f"{_f((s.get('loadavg') or [None])[0] and s['loadavg'][0][0], '{:.1f}')} at the start). "
           "`poll`: the default path (BMv2 polled; the emulated edges push their counters); "
           "`digest`: the report digests (setting `digest=1`). Median / p99 wall and median CPU "
           "(ms), the phases' medians, updates written per round; ratio digest / poll.", "",
           "| round | edges | coflows | switches | poll: median / p99 / CPU | poll: read / compute / write "
           "| digest: median / p99 / CPU | digest: read / compute / write | updates poll / digest "
           "| median / p99 ratio |",
           "|---|---:|---:|---|---|---|---|---|---|---|"]
    for k in sorted(by, key=lambda k: (k[0], k[1] or "", k[3], k[2], k[4])):
        p, d = by[k].get("poll"), by[k].get("digest")
        if p is None or d is None:
            continue

        def cols(r):
            return (f"{_f(r['median_ms'])} / {_f(r['p99_ms'])} / {_f(r['cpu_median_ms'])}",
                    f"{_f(r.get('read_median_ms'))} / {_f(r.get('compute_median_ms'))} / "
                    f"{_f(r.get('write_median_ms'))}")
        pc, dc = cols(p), cols(d)
        out.append(f"| {_scale_label(p)} | {k[2]:,} | {k[3]:,} | {k[4]} | {pc[0]} | {pc[1]} | {dc[0]} | "
                   f"{dc[1]} | {_f(p.get('updates_per_round'), '{:.0f}')} / "
                   f"{_f(d.get('updates_per_round'), '{:.0f}')} | "
                   f"{d['median_ms'] / p['median_ms']:.2f} / {d['p99_ms'] / p['p99_ms']:.2f} |")
    return "\n".join(out) + "\n"


def render_scale_incremental(s: dict) -> str:
    """D-CLAS's incremental round against its full round (``full``, ``digestfull``: the code
    before, same run, same controller and switches, variants alternated in blocks of rounds)."""
    by: dict = {}
    for r in s["rows"]:
        by.setdefault((r["mode"], _round_key(r), r["edges"], r["coflows"], r["switch"]), {})[r.get("variant")] = r
    out = [f"`{s['command']}` ({_machine(s['run'])}; load average "
           f"{_f((s.get('loadavg') or [None])[0] and s['loadavg'][0][0], '{:.1f}')} at the start). "
           "D-CLAS's incremental round (the default) against its full round (every edge and "
           "coflow in every round, the code before) on the same path: `push` (the emulated "
           "edges' pushed counters) against `full`, and in the digest comparison `poll` "
           "against `pollfull` and `digest` (report digests) against `digestfull`. Median / "
           "p99 wall and median CPU (ms), the phases' medians (read / "
           "compute / write), updates written per round; ratio incremental / full.", "",
           "| round | edges | coflows | switches | path | full: median / p99 / CPU | full: read / compute / write "
           "| incremental: median / p99 / CPU | incremental: read / compute / write | updates "
           "| median / CPU ratio |",
           "|---|---:|---:|---|---|---|---|---|---|---|---|"]

    def cols(r):
        return (f"{_f(r['median_ms'])} / {_f(r['p99_ms'])} / {_f(r['cpu_median_ms'])}",
                f"{_f(r.get('read_median_ms'))} / {_f(r.get('compute_median_ms'))} / "
                f"{_f(r.get('write_median_ms'))}")
    for k in sorted(by, key=lambda k: (k[0], k[1] or "", k[3], k[2], k[4])):
        for fv, incs in SCALE_FULL.items():
            b = by[k].get(fv)
            r = next((by[k][v] for v in incs if v in by[k]), None)
            if b is None or r is None or not b["median_ms"] or not b["cpu_median_ms"]:
                continue
            bc, rc = cols(b), cols(r)
            out.append(f"| {_scale_label(r)} | {k[2]:,} | {k[3]:,} | {k[4]} | {r['variant']} | {bc[0]} | "
                       f"{bc[1]} | {rc[0]} | {rc[1]} | {_f(r.get('updates_per_round'), '{:.0f}')} | "
                       f"{r['median_ms'] / b['median_ms']:.2f} / {r['cpu_median_ms'] / b['cpu_median_ms']:.2f} |")
    return "\n".join(out) + "\n"

"""README's results tables are rendered from results/*.json, and nothing else (issue 18)."""
import json
import os
import re

import pytest

from coflow import results as R

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# the pages whose results tables `make readme` renders (the Makefile's RESULTS_PAGES)
PAGES = ("README.md", os.path.join("docs", "reference", "results.md"),
         os.path.join("docs", "experiments", "2026-11-26-controller.md"))   # ctl-scale


@pytest.mark.parametrize("page", PAGES)
def test_readme_equals_what_the_command_writes(page):
    text = open(os.path.join(REPO, page)).read()
    assert R.blocks(text), page
    assert R.render_readme(text, os.path.join(REPO, "results")) == text, \
        f"{page}'s results tables differ from results/: run `make readme`"


def test_landing_page_and_results_page_have_the_simulator_tables():
    assert "sim-fb" in R.blocks(open(os.path.join(REPO, "README.md")).read())
    names = R.blocks(open(os.path.join(REPO, PAGES[1])).read())
    assert {"sim-fb", "sim-bundled", "emu-fattree"} <= set(names), names


def test_every_summary_is_used_and_small():
    text = "".join(open(os.path.join(REPO, p)).read() for p in PAGES)
    files = sorted(f[:-5] for f in os.listdir(os.path.join(REPO, "results")) if f.endswith(".json"))
    # blocks of other renderers name their JSON in the begin marker (the Tofino slot sweep's)
    others = re.findall(r"<!-- [\w-]+:begin \([^)]*\bresults/([\w.-]+)\.json\) -->", text)
    assert files == sorted(R.summaries_used(text) | set(others))
    for f in files:
        assert os.path.getsize(os.path.join(REPO, "results", f + ".json")) < 64 * 1024


def _cmp(tmp_path):
    row = {"avg_cct_s": 2.0, "p95_cct_s": 4.0, "avg": 1.5, "p95": 2.0, "wall_s": 0.25,
           "SN_avg": 3.0, "LN_avg": 2.0, "SW_avg": 1.25, "LW_avg": 1.0}
    base = dict(row, avg_cct_s=3.0, avg=1.0, p95=1.0, SN_avg=1.0, LN_avg=1.0, SW_avg=1.0, LW_avg=1.0)
    cmp = {"trace": "/x/t.txt", "convention": "split", "table": {"baseline": "fair",
           "rows": {"fair": base, "sebf": row}}, "reports": {"fair": {"summary": {"coflows": 7}}}}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cmp))
    return cmp, str(p)


def test_sim_summary_renders_its_rows_and_its_run(tmp_path):
    cmp, path = _cmp(tmp_path)
    s = R.summarize_sim(cmp, path, "coflow compare --trace t.txt")
    out = R.render_sim(s)
    assert "| sebf | 2.000 | 1.50 | 2.00 | 3.00 | 2.00 | 1.25 | 1.00 | 0.2 |" in out
    assert "t.txt, 7 coflows" in out and f"{os.cpu_count()}-core" in out and "`coflow compare --trace t.txt`" in out


def test_a_summary_names_the_runs_commit_not_the_one_at_save(tmp_path):
    """A run's JSON carries the code it ran (``provenance``: HEAD and whether tracked files
    were modified, read when it started); the summary names that commit, marked when the tree
    was modified. A JSON without it falls back to HEAD at save time, and says so."""
    cmp, path = _cmp(tmp_path)
    cmp["provenance"] = {"commit": "abc1234", "dirty": False}
    s = R.summarize_sim(cmp, path, "c")
    assert s["run"]["commit"] == "abc1234" and s["run"]["commit_at"] == "run"
    assert "commit abc1234 |" not in R.render_sim(s) and "commit abc1234)" in R.render_sim(s)
    cmp["provenance"]["dirty"] = True
    assert R.summarize_sim(cmp, path, "c")["run"]["commit"] == "abc1234+modified"
    del cmp["provenance"]
    s = R.summarize_sim(cmp, path, "c")
    assert s["run"]["commit_at"] == "save" and "at save time" in R.render_sim(s)
    pv = R.provenance()
    assert pv["commit"] == R.git_commit(REPO) and isinstance(pv["dirty"], bool)


def test_only_code_makes_a_tree_modified(tmp_path):
    """A run rewrites README.md and results/ itself: those do not mark its commit modified;
    any other tracked file does."""
    import subprocess
    g = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    g("init", "-q")
    (tmp_path / "results").mkdir()
    for f in ("README.md", "results/x.json", "code.py"):
        (tmp_path / f).write_text("a\n")
    g("add", "-A")
    g("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x")
    assert R.git_dirty(str(tmp_path)) is False
    (tmp_path / "README.md").write_text("b\n")
    (tmp_path / "results" / "x.json").write_text("b\n")
    assert R.git_dirty(str(tmp_path)) is False
    (tmp_path / "code.py").write_text("b\n")
    assert R.git_dirty(str(tmp_path)) is True
    assert R.git_dirty(str(tmp_path / "results")) is True     # from any folder of the checkout


def test_a_changed_table_is_found(tmp_path):
    cmp, path = _cmp(tmp_path)
    (tmp_path / "results").mkdir()
    s = R.summarize_sim(cmp, path, "c")
    (tmp_path / "results" / "x.json").write_text(json.dumps(s))
    text = "a\n<!-- results:x -->\nstale\n<!-- /results:x -->\nb\n"
    new = R.render_readme(text, str(tmp_path / "results"))
    assert new != text and "stale" not in new and new.startswith("a\n") and new.endswith("b\n")
    assert R.render_readme(new, str(tmp_path / "results")) == new


@pytest.mark.parametrize("content,msg", [
    (None, "missing"),
    ("{not json", ":1: not JSON"),
    ('{"kind": "other", "schema": 1}', "not a results summary"),
    ("[1, 2]", "not a results summary"),
])
def test_bad_summaries_give_one_line(tmp_path, content, msg):
    if content is not None:
        (tmp_path / "x.json").write_text(content)
    with pytest.raises(R.ResultsError, match=msg):
        R.render_readme("<!-- results:x -->\n<!-- /results:x -->\n", str(tmp_path))


def test_save_rejects_a_json_that_is_not_a_run(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"hello": 1}')
    assert R.main(["save", "--kind", "sim", str(p), "--command", "c", "-o", str(tmp_path / "o.json")]) == 2
    assert R.main(["save", "--kind", "emu", str(p), "--command", "c", "-o", str(tmp_path / "o.json")]) == 2
    assert not (tmp_path / "o.json").exists()


def test_check_mode_fails_on_a_stale_readme(tmp_path, capsys):
    cmp, path = _cmp(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text(json.dumps(R.summarize_sim(cmp, path, "c")))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:x -->\nold\n<!-- /results:x -->\n")
    args = ["readme", "--readme", str(readme), "--results", str(tmp_path / "results")]
    assert R.main(args + ["--check"]) == 1
    assert R.main(args) == 0
    assert R.main(args + ["--check"]) == 0


def test_emu_summary_renders_the_regime(tmp_path):
    row = {"avg_cct_s": 2.0, "p95_cct_s": 4.0, "avg": 1.5, "p95": 2.0, "wall_s": 90.0,
           "SN_avg": 3.0, "LN_avg": 2.0, "SW_avg": None, "LW_avg": 1.0}
    cmp = {"plan": {"coflows": 3, "flows": 40}, "config": {"rate_mbps": 1.0}, "topology": "fattree-k4",
           "table": {"baseline": "fair", "rows": {"fair": row}},
           "sim_table": {"baseline": "fair", "rows": {"fair": dict(row, avg=1.2, p95=1.1)}},
           "reports": {"fair": {"tcp": {"RetransSegs": 10, "OutSegs": 1000, "TCPSynRetrans": 2,
                                        "ActiveOpens": 40, "TCPTimeouts": 3},
                                "regime": {"before_first_byte_share": {"median": 0.25}}},
                       "sebf": {"controller": {"meters": {"closed_loop": True, "progress_reads": 1234,
                                                          "unmetered_coflows": 2}}}}}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cmp))
    out = R.render_emu(R.summarize_emu(cmp, str(p), "make run"))
    assert ("| fair | 2.00 | 1.50 | 2.00 | 3.00 | 2.00 | 1.00 | 1.20 | 1.10 | 10 / 1,000 (1.0%) | "
            "2 / 40 (5.0%) | 3 | - | 25% | - |") in out
    # pooled connections: the regime's connections (warm-up included) and ECN marks
    pooled = json.loads(json.dumps(cmp))
    pooled["reports"]["fair"]["tcp"]["ActiveOpens"] = 0
    pooled["reports"]["fair"]["regime"].update(connections=480, syn_retrans=3, ecn_marked=12345)
    out = R.render_emu(R.summarize_emu(pooled, str(p), "make run"))
    assert "| 10 / 1,000 (1.0%) | 3 / 480 (0.6%) | 3 | 12,345 | 25% | - |" in out
    s = R.summarize_emu(dict(cmp, table={"baseline": "fair", "rows": {"fair": row, "sebf": row}}), str(p), "r")
    assert "| closed loop: 1,234 reads of the switches' flow counters; 2 coflows unmetered |" in R.render_emu(s)
    # issue 27: the enforcement each mode used, its paced flows and the meters' RED drops
    enf = json.loads(json.dumps(cmp))
    enf["reports"]["sebf"].update(enforcement="meters", pacing={"flows": 40, "paced": 38},
                                  regime={"meter_red_drops": 1234})
    enf["reports"]["fair"]["regime"]["spurious_retrans_segs"] = 4
    enf["reports"]["sebf"]["controller"]["rate_audit"] = {"flows": 9, "achieved_over_set": 0.97,
                                                          "median": 0.99, "within_10pct": 0.8}
    enf["reports"]["fair"]["enforcement"] = "one FIFO class"
    s = R.summarize_emu(dict(enf, table={"baseline": "fair", "rows": {"fair": row, "sebf": row}}), str(p), "r")
    out = R.render_emu(s)
    assert "| 25% | one FIFO class | - |" in out and "| 10 / 1,000 (1.0%), 4 D-SACKed |" in out
    assert ("| meters; 38 of 40 flows paced; achieved / set rate 0.97 (median flow 0.99, 80% within "
            "10%); closed loop: 1,234 reads of the switches' flow counters; "
            "2 coflows unmetered | 1,234 |") in out


# make ptf / make bench-p4 (README's "P4 data plane", issue 26) ------------------------------------

SWITCH = {"binary": "/opt/p4/bin/simple_switch_grpc", "version": "1.15.5", "logging_macros": True}


def _ptf_run(tmp_path, **kw):
    res = {"rc": 0, "seconds": 41.3, "selected": [], "ran": 38, "passed": 38, "failed": 0, "skipped": 0,
           "weighted": {"window": 94, "shares": [0.495, 0.336, 0.168]}, "switch": SWITCH, **kw}
    p = tmp_path / "summary.json"
    p.write_text(json.dumps(res))
    return res, str(p)


def test_ptf_summary_renders_counts_switch_and_shares(tmp_path):
    res, path = _ptf_run(tmp_path)
    out = R.render_ptf(R.summarize_ptf(res, path, "make ptf"))
    assert out.startswith("`make ptf`: 38 PTF tests against BMv2 1.15.5 `simple_switch_grpc` (logging macros compiled in)")
    assert "38 passed, 0 failed, in 41 s" in out and "measured 0.495/0.336/0.168 over 94 departures" in out


@pytest.mark.parametrize("change,msg", [
    ({"rc": 1, "failed": 2, "passed": 36}, "the run failed"),
    ({"selected": ["test_dclas"]}, "only test_dclas ran"),
])
def test_ptf_summary_refuses_a_partial_or_failed_run(tmp_path, change, msg):
    res, path = _ptf_run(tmp_path, **change)
    with pytest.raises(R.ResultsError, match=msg):
        R.summarize_ptf(res, path, "make ptf")
    assert R.main(["save", "--kind", "ptf", path, "--command", "c", "-o", str(tmp_path / "o.json")]) == 2
    assert not (tmp_path / "o.json").exists()


def test_bench_p4_summary_says_which_ratio_the_target_is_about(tmp_path):
    res = {"frame_bytes": 256, "loss": 0.01, "trial_s": 1.5, "rounds": 3,
           "pps": {"l3fwd": [10000, 11000, 9000], "coflow": [9400, 9000, 9800]},
           "median_pps": {"l3fwd": 10000, "coflow": 9400}, "median_cpu_us_per_pkt": {"l3fwd": 30.0, "coflow": 52.6},
           "ratio_pps": 0.94, "ratio_cpu": 0.57, "target_pps_ratio": 0.85, "round_ratios_pps": [0.94, 0.82, 1.09], "switch": dict(SWITCH, logging_macros=False),
           "loadavg_start": [4.0, 3.0, 2.0], "loadavg_end": [4.5, 3.0, 2.0]}
    p = tmp_path / "b.json"
    p.write_text(json.dumps(res))
    out = R.render_bench_p4(R.summarize_bench_p4(res, str(p), "make bench-p4"))
    assert "**The target (>= 0.85x) is on the packet rate**" in out and ": met." in out
    assert "| packets/s (<= 1% loss) | 10,000 | 9,400 | **0.94x** (rounds: 0.94, 0.82, 1.09) |" in out
    assert "| switch CPU per packet (us) | 30.0 | 52.6 | 0.57x (l3fwd's / coflow's) |" in out
    assert "logging macros compiled out" in out and "load average 4.0 at the start" in out
    res["ratio_pps"] = 0.80
    assert ": missed." in R.render_bench_p4(R.summarize_bench_p4(res, str(p), "make bench-p4"))
    del res["ratio_cpu"]
    with pytest.raises(R.ResultsError, match="no 'ratio_cpu'"):
        R.summarize_bench_p4(res, str(p), "make bench-p4")


def test_ptf_runner_reads_counts_and_the_weighted_shares(tmp_path):
    """runner.py's reading of ptf's output (the summary's source), on a fake ptf."""
    import sys
    sys.path.insert(0, os.path.join(REPO, "ptf-tests"))
    try:
        import runner
    finally:
        sys.path.pop(0)
    fake = tmp_path / "ptf.py"
    fake.write_text("print('weighted window 94 departures: prio 7: 0.495, prio 6: 0.336, prio 5: 0.168')\n"
                    "print('Ran 38 tests in 41.2s')\nprint('OK (skipped=1)')\n")
    rc, line, counts = runner.run_ptf([sys.executable, str(fake)], dict(os.environ))
    assert rc == 0 and line == "ptf: 37 passed, 0 failed, 1 skipped"
    assert counts == {"ran": 38, "passed": 37, "failed": 0, "skipped": 1,
                      "weighted": {"window": 94, "shares": [0.495, 0.336, 0.168]}}


def test_sweep_summary_renders_speedup_overhead_and_load(tmp_path):
    run = lambda w, wall, s, med: {"workers": w, "tasks": 41, "ran": 41, "failed": 0, "startup_s": 1.0,  # noqa: E731
                                   "wall_s": wall, "task_wall_sum_s": s, "task_wall_median_s": med}
    res = {"grid": "full", "loadavg_start": [1.3, 0.7, 1.2], "loadavg_end": [5.5, 2.5, 1.7],
           "targets": {"speedup": 1.8, "overhead": 0.05},
           "runs": {"1": run(1, 98.63, 98.54, 2.255), "2": run(2, 95.47, 190.36, 4.593)},
           "judged": {"speedup": 1.03, "speedup_ok": False, "concurrency_2": 1.99, "overhead_per_task_s": 0.0022,
                      "overhead_share_of_median": 0.001, "overhead_ok": True}}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(res))
    out = R.render_sweep(R.summarize_sweep(res, str(p), "make bench-sweep"))
    assert "load average 1.3 at the start, 5.5 at the end" in out
    assert "took 99 s on 1 worker and 95 s on 2, a speed-up of **1.03x** (target >= 1.8x: missed)" in out
    assert "the median task took 2.25 s alone and 4.59 s beside the other worker" in out
    assert "2.2 ms per task, 0.1% of the median task (target < 5%: met)" in out
    del res["runs"]["2"]
    with pytest.raises(R.ResultsError, match="no run with 2 worker"):
        R.summarize_sweep(res, str(p), "make bench-sweep")


def test_views_render_the_prose_figures_and_an_unknown_view_is_one_line(tmp_path):
    cmp, path = _cmp(tmp_path)
    cmp["table"]["rows"].update({
        "fifo": dict(cmp["table"]["rows"]["sebf"], avg_cct_s=10.0, avg=0.3),
        "dclas": dict(cmp["table"]["rows"]["sebf"], avg=1.2, p95=1.5),
        "dclas-strict": dict(cmp["table"]["rows"]["sebf"], avg_cct_s=2.5, avg=1.25, p95=3.0, SN_avg=30.0,
                             LN_avg=40.0, SW_avg=2.0, LW_avg=1.1),
        "fifo-lm": dict(cmp["table"]["rows"]["sebf"], avg_cct_s=7.5, avg=0.4)})
    d = tmp_path / "results"
    d.mkdir()
    (d / "x.json").write_text(json.dumps(R.summarize_sim(cmp, path, "c")))
    text = R.render_readme("<!-- results:x+what -->\n<!-- /results:x+what -->\n", str(d))
    assert "SEBF+MADD reaches 1.50x over fair avg, outside the seeds' 2.16x-3.66x range" in text
    assert "FIFO's average CCT is 5.0x SEBF's" in text and "D-CLAS reaches 1.20x avg" in text
    assert "small coflows gain 30.0x (SN) and 40.0x (LN), the wide ones 2.00x (SW) and 1.10x (LW)" in text
    assert "FIFO-LM (Baraat)'s average CCT is 3.0x dclas-strict's" in text
    assert R.summaries_used(text) == {"x"}
    with pytest.raises(R.ResultsError, match="no view 'nope' of a 'sim' summary"):
        R.render_readme("<!-- results:x+nope -->\n<!-- /results:x+nope -->\n", str(d))


def test_scale_digest_view_pairs_poll_and_digest(tmp_path):
    """bench-scale's digest comparison (issue 29): each round's `poll` and `digest` rows side by
    side with their phases and the digest / poll ratios; rows of other variants are left out."""
    def row(v, med, p99, read, write, upd):
        return {"mode": "dclas", "round": "demotions", "variant": v, "edges": 8, "coflows": 100,
                "switch": "bmv2", "median_ms": med, "p99_ms": p99, "cpu_median_ms": med / 2,
                "read_median_ms": read, "compute_median_ms": 0.5, "write_median_ms": write,
                "updates_per_round": upd}
    res = {"rows": [row("poll", 8.0, 10.0, 4.0, 3.0, 39.0), row("digest", 4.0, 6.0, 0.1, 3.2, 40.0),
                    row("push", 1.0, 1.0, 1.0, 1.0, 1.0)], "loadavg_start": [1.0, 1.0, 1.0]}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(res))
    s = R.summarize_scale(res, str(p), "make bench-scale-digest")
    out = R.render_scale_digest(s)
    assert ("| dclas demotions | 8 | 100 | bmv2 | 8.00 / 10.00 / 4.00 | 4.00 / 0.50 / 3.00 | "
            "4.00 / 6.00 / 2.00 | 0.10 / 0.50 / 3.20 | 39 / 40 | 0.50 / 0.60 |") in out
    assert out.count("| dclas") == 1
    assert R.VIEWS[("scale", "digest")] is R.render_scale_digest


def test_scale_incremental_view_pairs_each_path_with_its_full_round(tmp_path):
    """D-CLAS's incremental round against its full round (issue 29): `push` beside `full`,
    `poll` beside `pollfull`, `digest` beside `digestfull`, with phases and the incremental /
    full ratios (median wall, median CPU); a path without its full round is left out."""
    def row(v, med, cpu, comp, edges=1024):
        return {"mode": "dclas", "round": "steady", "variant": v, "edges": edges, "coflows": 100,
                "switch": "emulated", "median_ms": med, "p99_ms": med * 2, "cpu_median_ms": cpu,
                "read_median_ms": 1.0, "compute_median_ms": comp, "write_median_ms": 0.5,
                "updates_per_round": 0.0}
    res = {"rows": [row("push", 3.0, 4.0, 1.0), row("full", 6.0, 5.0, 2.0),
                    row("poll", 2.0, 2.0, 0.5), row("pollfull", 4.0, 8.0, 1.0),
                    row("digest", 1.0, 1.0, 0.1, edges=8)], "loadavg_start": [1.0, 1.0, 1.0]}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(res))
    s = R.summarize_scale(res, str(p), "bench")
    out = R.render_scale_incremental(s)
    assert ("| dclas steady | 1,024 | 100 | emulated | push | 6.00 / 12.00 / 5.00 | 1.00 / 2.00 / 0.50 | "
            "3.00 / 6.00 / 4.00 | 1.00 / 1.00 / 0.50 | 0 | 0.50 / 0.80 |") in out
    assert ("| dclas steady | 1,024 | 100 | emulated | poll | 4.00 / 8.00 / 8.00 | 1.00 / 1.00 / 0.50 | "
            "2.00 / 4.00 / 2.00 | 1.00 / 0.50 / 0.50 | 0 | 0.50 / 0.25 |") in out
    assert out.count("| dclas") == 2   # digest at 8 edges has no digestfull: left out
    assert R.VIEWS[("scale", "incremental")] is R.render_scale_incremental


def test_scale_placements_kept_apart_and_alledges_against_push(tmp_path):
    """bench-scale's D-CLAS placements (issue 29): the `fb` rows (FB-trace widths) are their own
    rows, labelled, never merged with the `all` rows of the same round; `alledges` (overrides on
    every edge whose local queue differs, the rule before) is set against `push` in the table of
    changes alone, per placement."""
    def row(v, pl, med, upd):
        return {"mode": "dclas", "round": "demotions", "variant": v, "edges": 1024, "coflows": 100,
                "switch": "emulated", "placement": pl, "median_ms": med, "p99_ms": med * 2,
                "cpu_median_ms": med, "read_median_ms": 1.0, "compute_median_ms": 2.0,
                "write_median_ms": med - 3, "updates_per_round": upd,
                "placement_source": "FB2010-1Hr-150-0.txt" if pl == "fb" else None,
                "sender_edges_mean": 31.3 if pl == "fb" else 1024.0}
    res = {"rows": [row("push", "all", 500.0, 5120), row("alledges", "all", 500.0, 5120),
                    row("push", "fb", 20.0, 150), row("alledges", "fb", 400.0, 5120),
                    row("digest", "fb", 10.0, 100), row("digestall", "fb", 300.0, 4000)],
           "loadavg_start": [1.0, 1.0, 1.0]}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(res))
    s = R.summarize_scale(res, str(p), "bench")
    assert {r["placement"] for r in s["rows"]} == {"all", "fb"}
    assert [r.get("placement_source") for r in s["rows"] if r["variant"] == "push"] == \
        [None, "FB2010-1Hr-150-0.txt"]
    out = R.render_scale(s)
    assert "| dclas demotions | 1,024 | 100 | emulated | 500.00 |" in out
    assert "| dclas demotions (FB widths) | 1,024 | 100 | emulated | 20.00 |" in out
    assert ("| dclas demotions (FB widths) | 1,024 | 100 | emulated | overrides only where a coflow sends "
            "(`alledges`: wherever the local queue differs) | 400.00 / 800.00 / 400.00, "
            "5120 | 20.00 / 40.00 / 20.00, 150 | 0.05 / 0.05 |") in out
    assert "5120 | 500.00 / 1000.00 / 500.00, 5120 | 1.00 / 1.00 |" in out
    assert "widths from FB2010-1Hr-150-0.txt at 1,024 edges (31.3 sender edges per coflow on average)" in out
    # digestall is set against digest (not push)
    assert ("the same on report digests (`digestall` against `digest`) | 300.00 / 600.00 / 300.00, 4000 | "
            "10.00 / 20.00 / 10.00, 100 | 0.03 / 0.03 |") in out


def _emu_run(tmp_path, name, gains, retx, paced=None, commit="abc123", **plan):
    """A `make run` compare.json with one row per mode (avg gain over fair as given)."""
    rows = {m: {"avg_cct_s": 3.0 / g, "p95_cct_s": 1.0, "avg": g, "p95": 1.0, "wall_s": 1.0,
                "SN_avg": None, "LN_avg": None, "SW_avg": None, "LW_avg": None} for m, g in gains.items()}
    reports = {m: {"tcp": {"RetransSegs": retx[m], "OutSegs": 1000}} for m in gains}
    for m, v in (paced or {}).items():
        reports[m]["controller"] = {"rate_audit": {"flows": 10, "achieved_over_set": v, "median": v,
                                                   "within_10pct": 0.5}}
    cmp = {"plan": {"coflows": 60, "flows": 1682, "bytes": 1e8, **plan}, "config": {"rate_mbps": 1.0},
           "topology": "fattree-k4", "table": {"baseline": "fair", "rows": rows}, "reports": reports,
           "provenance": {"commit": commit, "dirty": False}}
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(cmp))
    return str(p)


def test_emu_runs_together_give_median_and_range(tmp_path):
    """Three runs of one build: the first's table in full, then each mode's median gain with the
    lowest and highest (hand-checked), and the prose view ranks by the medians."""
    a = _emu_run(tmp_path, "a", {"fair": 1.0, "dclas": 1.65, "sebf": 1.46}, {"fair": 10, "dclas": 5, "sebf": 2},
                 paced={"sebf": 0.85})
    b = _emu_run(tmp_path, "b", {"fair": 1.0, "dclas": 1.19, "sebf": 1.28}, {"fair": 12, "dclas": 7, "sebf": 4},
                 paced={"sebf": 0.95})
    c = _emu_run(tmp_path, "c", {"fair": 1.0, "dclas": 1.40, "sebf": 1.29}, {"fair": 11, "dclas": 6, "sebf": 3},
                 paced={"sebf": 0.90})
    out = tmp_path / "results"
    out.mkdir()
    rc = R.main(["save", "--kind", "emu", a, b, c, "-o", str(out / "e.json"), "--command", "make run"])
    assert rc == 0
    s = json.loads((out / "e.json").read_text())
    assert len(s["runs"]) == 3 and s["rows"]["dclas"]["avg"] == 1.65    # the table: the first run
    text = R.render_emu(s)
    assert "Across 3 runs of this build" in text
    assert "| dclas | 1.40 [1.19-1.65] | 2.14 [1.82-2.52] | 0.6% [0.5%-0.7%] | - |" in text
    assert "| sebf | 1.29 [1.28-1.46] | 2.33 [2.05-2.34] | 0.3% [0.2%-0.4%] | 0.90 [0.85-0.95] |" in text
    what = R.render_emu_what(s)
    assert what.startswith("Over 3 runs (medians), ranked by average CCT over fair: dclas 1.40x, sebf 1.29x")
    # one run: as before, no table across runs
    R.main(["save", "--kind", "emu", a, "-o", str(out / "one.json"), "--command", "make run"])
    one = json.loads((out / "one.json").read_text())
    assert "Across" not in R.render_emu(one)
    assert R.render_emu_what(one).startswith("In this run, ranked by average CCT over fair: dclas 1.65x, sebf 1.46x")


@pytest.mark.parametrize("kw, msg", [
    ({"commit": "def456"}, "commit def456, .* has abc123: runs summarized together must be one build's"),
    ({"coflows": 50}, "plan.coflows is 50, .* has 60: runs summarized together must run the same flows"),
    ({"gains": {"fair": 1.0, "dclas": 1.2}}, r"modes \['dclas', 'fair'\], .* has \['dclas', 'fair', 'sebf'\]"),
])
def test_emu_runs_that_differ_are_refused_in_one_line(tmp_path, capsys, kw, msg):
    g = {"fair": 1.0, "dclas": 1.5, "sebf": 1.3}
    a = _emu_run(tmp_path, "a", g, {m: 1 for m in g})
    gains = kw.pop("gains", g)
    b = _emu_run(tmp_path, "b", gains, {m: 1 for m in gains}, **kw)
    assert R.main(["save", "--kind", "emu", a, b, "-o", str(tmp_path / "e.json"), "--command", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert re.search(msg, err) and "\n" not in err, err
    assert not (tmp_path / "e.json").exists()
    assert R.main(["save", "--kind", "sim", a, b, "-o", str(tmp_path / "s.json"), "--command", "x"]) == 2
    assert "several only with --kind emu" in capsys.readouterr().err


def test_a_metered_mode_without_red_drops_shows_0_not_unknown(tmp_path):
    """Runs saved before the runner counted a metered mode's absent METER_RED as 0 (the
    telemetry lists nonzero reasons only): the summary says 0 for sebf, unknown for sincronia."""
    p = _emu_run(tmp_path, "a", {"fair": 1.0, "sebf": 1.3, "sincronia": 1.2}, {"fair": 1, "sebf": 1, "sincronia": 1})
    cmp = json.loads(open(p).read())
    for m in ("sebf", "sincronia"):
        cmp["reports"][m].update(regime={"meter_red_drops": None},
                                 controller={"mode": m, "dataplane": {"drops": {"NOT_IPV4": 4}}})
    s = R.summarize_emu(cmp, p, "make run")
    assert s["regime"]["sebf"]["meter_red_drops"] == 0 and s["regime"]["sincronia"]["meter_red_drops"] is None

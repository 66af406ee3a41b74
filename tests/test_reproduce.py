"""`coflow reproduce` (issue 26): the catalog, its measures and verdicts, REPRODUCTION.md, the
sweep's cache and failures. The Dask cluster path is in tests/test_reproduce_cluster.py."""
import json
import os
import sys

import numpy as np
import pytest

from coflow.reproduce import catalog as C
from coflow.reproduce import entry_tasks, list_lines
from coflow.reproduce import render as R
from coflow.reproduce.tasks import run_task, task_key

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_reproduction_md_equals_what_the_command_renders():
    text = open(os.path.join(REPO, "REPRODUCTION.md")).read()
    assert R.render(os.path.join(REPO, "results", "reproduce"), [e["name"] for e in C.CATALOG]) == text, \
        "REPRODUCTION.md differs from results/reproduce/: run `coflow reproduce --render`"


def test_every_committed_summary_is_an_experiment_of_the_catalog_and_small():
    d = os.path.join(REPO, "results", "reproduce")
    for f in os.listdir(d):
        assert f[:-5] in C.BY_NAME, f
        assert os.path.getsize(os.path.join(d, f)) < 64 * 1024


def test_the_catalog_holds_every_figure_the_issue_lists():
    names = {e["name"] for e in C.CATALOG}
    assert {"varys-fig11-deadlines", "varys-sec532-orderings", "varys-fig9-sim", "varys-sec74-fifo",
            "aalo-sec72-uncoordinated", "aalo-sec72-fifo-lm", "aalo-fig12-sensitivity", "aalo-fig13-light-tailed",
            "aalo-fig14b-interval", "hug-table7.3-slowdown", "hug-fig7.12-utilisation", "hug-fig7.14-cct",
            "utopia-fig5a", "utopia-fig4b", "utopia-fig5b", "fai-fig5a", "fai-fig4a", "fai-readings",
            "madd-fig4.6", "aalo-fig10-multiwave", "aalo-fig11-dags"} <= names
    lines = list_lines()
    assert len(lines) == len(C.CATALOG) and [ln.split()[0] for ln in lines] == [e["name"] for e in C.CATALOG]


OPS = {"avg_s", "p95_s", "avg_ratio", "avg_jct_ratio", "p95_ratio", "bin_avg_ratio", "coflow_ratio_mean", "coflow_ratio_pct_ge", "met_pct",
       "met_of_admitted_pct", "met_pct_bin", "slowdown", "slowdown_avg", "snap_pct", "snap_min", "max_overload", "runs_avg_s", "runs_avg_ratio",
       "mean", "max", "list", "spread", "ordered", "div", "sub", "jump_at", "best"}
KEYS = {"SN", "LN", "SW", "LW", "utilisation", "progress"}


def _labels(expr, out):
    """Run labels an expression reads (every string that is neither an operator nor a key)."""
    if isinstance(expr, str):
        if expr not in OPS | KEYS:
            out.add(expr)
    elif isinstance(expr, list):
        for x in (expr[:2] if expr and expr[0] == "best" else expr):  # best's last argument: display names
            _labels(x, out)
    return out


@pytest.mark.parametrize("entry", C.CATALOG, ids=lambda e: e["name"])
def test_every_row_reads_runs_of_its_entry(entry):
    for field in ("name", "paper", "figure", "seed", "workload", "reschedule", "runs", "rows"):
        assert field in entry
    assert os.path.exists(os.path.join(REPO, "..", "shared", "seeds")) is False or any(
        f.startswith(entry["seed"][:3]) for f in os.listdir(os.path.join(REPO, "..", "shared", "seeds")))
    runs = set(entry["runs"])
    for row in entry["rows"]:
        used = _labels(row["value"], set())
        for e in row.get("because", {}).values():
            _labels(e, used)
        assert used and used <= runs, (row["what"], used - runs)
        assert ("expect" in row) + ("claim" in row) + ("claim_each" in row) <= 1
    for t in entry_tasks(entry).values():
        assert task_key(t) == task_key(json.loads(json.dumps(t)))


def out(cct, arrival_ok=True, **kw):
    n = len(cct)
    return {"cct": cct, "admitted": kw.pop("admitted", [True] * n), "deadline": kw.pop("deadline", None),
            "iso": kw.pop("iso", [1.0] * n), "bins": kw.pop("bins", ["SN"] * n), "max_overload": 0.0, **kw}


def test_measures_by_hand():
    o = {"a": out([2.0, 4.0, 6.0]), "b": out([1.0, 1.0, 4.0]), "c": out([1.0, 2.0, 3.0])}
    assert R.value(["avg_ratio", "a", "b"], o) == pytest.approx(4.0 / 2.0)
    assert R.value(["coflow_ratio_mean", "a", "b"], o) == pytest.approx((2 + 4 + 1.5) / 3)
    assert R.value(["coflow_ratio_pct_ge", "b", "c", 1.0], o) == pytest.approx(100 * 2 / 3)
    assert R.value(["slowdown", "a"], o) == pytest.approx([2, 6, 4, np.std([2, 4, 6])])
    assert R.value(["jump_at", [["avg_ratio", "a", "c"], ["avg_ratio", "a", "b"], ["avg_ratio", "a", "a"]],
                    [1, 2, 3]], o) == 2  # 2.0 -> 2.0 -> 1.0: no rise is larger than the first step (0)
    assert R.value(["jump_at", [1.0, 1.5, 3.0, 3.1], [1, 2, 3, 4]], o) == 3
    assert R.value(["spread", [1.0, 1.2, 0.8]], o) == pytest.approx(1.5)
    assert R.value(["ordered", [1.0, 2.0, 3.0]], o) == 1 and R.value(["ordered", [1.0, 3.0, 2.0]], o) == 0
    d = {"v": out([1.0, 3.0, 2.0, None], deadline=[2.0, 2.0, 2.0, 2.0], admitted=[True, True, True, False])}
    assert R.value(["met_pct", "v"], d) == pytest.approx(50.0)  # 1.0 and 2.0 meet; 3.0 late; one rejected
    assert R.value(["met_of_admitted_pct", "v"], d) == pytest.approx(100 * 2 / 3)
    with pytest.raises(R.MetricError, match="missing"):
        R.value(["avg_ratio", "a", "zz"], o)


def test_verdicts():
    assert R.verdict({"expect": 2.0, "tol": 0.1}, 2.1, {}) == "within 10% (+5%)"
    v = R.verdict({"expect": 2.0, "tol": 0.1, "why": "because {x}", "because": {}}, 3.0, {"x": 1.234})
    assert v == "differs (+50%, beyond 10%): because 1.23x"
    assert R.verdict({"expect": 75, "tol_abs": 10}, 70.0, {}) == "within 10 pts (-5.0 pts)"
    assert R.verdict({"claim": ["<", 1.5]}, 1.45, {}).startswith("the paper's claim holds")
    assert R.verdict({"claim": ["==", 2], "fmt": "K", "why": "w"}, 3, {}).startswith("the claim does not hold")
    assert R.verdict({"expect": 1.0, "tol": 0.1}, None, {}) == "not run: a task failed"


def test_a_task_runs_the_simulator_and_its_key_follows_its_content():
    t = {"workload": {"kind": "shuffle", "n": 4}, "scheduler": "fair", "params": {}, "reschedule": "flow"}
    r = run_task(t)
    assert r["cct"][0] == pytest.approx((3 * 4 - 1) * (1 << 20) / 1.25e8)  # fair: 3n - 1 units of 1 MB
    assert task_key(t) != task_key({**t, "scheduler": "sebf"}) and task_key(t) == task_key(dict(t))
    s = run_task({**t, "scheduler": "hug", "kind": "snapshot"})
    assert s["utilisation"] > 0 and s["max_overload"] <= 1e-9


def test_the_doc_check_fails_on_a_changed_summary(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    e = C.BY_NAME["madd-fig4.6"]
    rows = R.evaluate(e, {"fair": out([3.0]), "madd": out([2.0]), "fair10": out([2.9]), "madd10": out([2.0])}, set())
    assert rows[0]["ours"] == "1.500x" and rows[0]["verdict"].startswith("within")
    (d / "madd-fig4.6.json").write_text(json.dumps(R.summary(e, rows, {"date": "x"})))
    doc = R.render(str(d), [x["name"] for x in C.CATALOG])
    assert "| MADD over fair sharing, N = 100 | 1.495x | 1.500x |" in doc and "Not yet run" in doc
    rows[0]["ours"] = "9.999x"
    (d / "madd-fig4.6.json").write_text(json.dumps(R.summary(e, rows, {"date": "x"})))
    assert R.render(str(d), [x["name"] for x in C.CATALOG]) != doc


@pytest.mark.parametrize("content,msg", [("{bad", ":1: not JSON"), ('{"kind": "sim"}', "not a reproduction summary")])
def test_bad_summaries_give_one_line(tmp_path, content, msg):
    (tmp_path / "x.json").write_text(content)
    with pytest.raises(R.MetricError, match=msg):
        R.render(str(tmp_path), [])


def test_without_dask_the_command_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    from coflow import cli
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    rc = cli.main(["reproduce", "madd-fig4.6", "--cache", str(tmp_path / "c"), "--results", str(tmp_path / "r"),
                   "--doc", str(tmp_path / "d.md"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "dask and distributed are not installed" in err
    assert not (tmp_path / "r").exists() or not os.listdir(tmp_path / "r")


def test_cached_results_are_reused_without_dask(tmp_path, monkeypatch):
    """A re-run finds every task in the cache: nothing is submitted (dask not even imported)."""
    from coflow.reproduce.sweep import _write_atomic, run_sweep
    t = {"workload": {"kind": "shuffle", "n": 3}, "scheduler": "fair", "params": {}, "reschedule": "flow"}
    _write_atomic(str(tmp_path / (task_key(t) + ".json")), {"cct": [1.0]})
    monkeypatch.setitem(sys.modules, "dask", None)
    r = run_sweep([t, dict(t)], cache_dir=str(tmp_path), progress=False)
    assert r.cached == 1 and r.ran == 0 and r.results[task_key(t)] == {"cct": [1.0]}


def test_unknown_experiment_is_a_one_line_error(capsys):
    from coflow import cli
    assert cli.main(["reproduce", "nope"]) == 2
    assert "unknown experiment 'nope'" in capsys.readouterr().err


def test_sweep_bench_judges_speedup_and_overhead_by_hand():
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_sweep", os.path.join(REPO, "bench", "bench_sweep.py"))
    b = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(b)
    j = b.judge({"1": {"wall_s": 100.0, "task_wall_sum_s": 98.0, "ran": 40, "task_wall_median_s": 2.0},
                 "2": {"wall_s": 56.0, "task_wall_sum_s": 110.0}})
    assert j["speedup"] == pytest.approx(1.79) and not j["speedup_ok"]  # 1.8x is the target
    assert j["concurrency_2"] == pytest.approx(1.96)
    assert j["task_work_ratio"] == pytest.approx(1.12) and j["speedup_per_work"] == pytest.approx(2.0)
    assert not j["confounded"]
    j2 = b.judge({"1": {"wall_s": 190.0, "task_wall_sum_s": 190.0, "ran": 41, "task_wall_median_s": 4.4},
                  "2": {"wall_s": 76.0, "task_wall_sum_s": 150.0}})     # the machine got quieter
    assert j2["speedup"] == pytest.approx(2.5) and j2["confounded"] and j2["speedup_per_work"] == pytest.approx(1.97)
    assert j["overhead_per_task_s"] == pytest.approx(0.05) and j["overhead_share_of_median"] == pytest.approx(0.025)
    assert j["overhead_ok"]
    assert not b.judge({"1": {"wall_s": 100.0, "task_wall_sum_s": 90.0, "ran": 40, "task_wall_median_s": 2.0}})["overhead_ok"]
    assert len(b.grid_tasks("full")) == 41 and len(b.grid_tasks("small")) == 7


def test_a_local_cluster_is_quiet_when_port_8787_is_taken():
    """Two sweeps at once (or a user's notebook on Dask's default port): the second cluster's
    scheduler must not warn "Port 8787 is already in use" (the HTTP server takes a free port,
    no dashboard)."""
    import socket
    import warnings
    pytest.importorskip("distributed")
    from coflow.reproduce.sweep import local_cluster
    holder = socket.socket()
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", 8787))
            holder.listen(1)
        except OSError:
            pass                      # taken already (another cluster): the case under test
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with local_cluster(1) as cluster:
                assert cluster.scheduler.http_server.port != 8787
    finally:
        holder.close()
    msgs = [str(w.message) for w in caught]
    assert not [m for m in msgs if "already in use" in m], msgs


def test_run_time_is_given_only_for_one_all_run_from_an_empty_cache():
    run = {"commit": "abc", "wall_s": 3000.0, "ran": 263, "cached": 0, "engine": "LocalCluster(2 workers)",
           "loadavg_1_5_15": [4.0, 3.0, 2.0], "loadavg_start": [1.5, 1.0, 1.0], "cpus": 2}
    sums = {"a": {"run": dict(run, tasks_wall_s=4000.0)}, "b": {"run": dict(run, tasks_wall_s=2000.0)}}
    line = R.run_time(sums, ["a", "b"])
    assert "263 tasks in **50 min** of wall time (budget 60 min, the issue's target: within), 100 min" in line
    assert "load average 1.5 at the start and 4.0 at the end on this 2-core machine" in line
    sums["b"]["run"]["wall_s"] = 3700.0                    # another run
    assert "do not all come from one" in R.run_time(sums, ["a", "b"])
    sums = {k: {"run": dict(run, wall_s=3700.0, tasks_wall_s=1.0)} for k in "ab"}
    assert "(budget 60 min, the issue's target: over)" in R.run_time(sums, ["a", "b"])
    assert "do not all come from one" in R.run_time(sums, ["a", "b", "c"])        # one not run
    sums = {k: {"run": dict(run, cached=5, tasks_wall_s=1.0)} for k in "ab"}
    assert "do not all come from one" in R.run_time(sums, ["a", "b"])             # a warm cache

"""The coflow command end to end on small traces: JSON schema, compare table, report parser."""
import json

import pytest

from coflow.cli import main

TRACE = "8 3\n1 0 2 0 1 2 2:3.0 3:1.5\n2 10 1 3 1 0:20.0\n3 20 3 4 5 6 2 7:1.0 1:60.0\n"


@pytest.fixture
def trace(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text(TRACE)
    return str(p)


def test_sim_json_schema(trace, tmp_path):
    js = tmp_path / "o.json"
    assert main(["sim", "--trace", trace, "--scheduler", "sebf", "--json", str(js), "--quiet",
                 "--plots", str(tmp_path / "plots")]) == 0
    rep = json.loads(js.read_text())
    for k in ("scheduler", "params", "ports", "coflows", "summary", "wall_s"):
        assert k in rep
    assert rep["params"]["T"] == 2.0 and rep["ports"] == 8
    c = rep["coflows"][0]
    for k in ("id", "arrival_s", "finish_s", "cct_s", "isolation_s", "bytes", "width", "length_bytes", "bin"):
        assert k in c
    assert c["cct_s"] >= c["isolation_s"] > 0
    s = rep["summary"]
    for k in ("avg_cct_s", "p95_cct_s", "avg_slowdown", "per_bin"):
        assert k in s
    assert set(s["per_bin"]) == {"SN", "LN", "SW", "LW"}
    assert (tmp_path / "plots" / "cct_cdf.png").exists()


def test_compare_and_report(trace, tmp_path, capsys):
    js = tmp_path / "c.json"
    assert main(["compare", "--trace", trace, "--schedulers", "sebf,dclas", "--json", str(js), "--quiet",
                 "--plots", str(tmp_path / "p")]) == 0
    out = json.loads(js.read_text())
    rows = out["table"]["rows"]
    assert set(rows) == {"fair", "sebf", "dclas"} and rows["fair"]["avg"] == pytest.approx(1.0)
    assert rows["sebf"]["avg"] == pytest.approx(out["reports"]["fair"]["summary"]["avg_cct_s"] /
                                                 out["reports"]["sebf"]["summary"]["avg_cct_s"])
    assert (tmp_path / "p" / "per_bin.png").exists()
    # report rebuilds the same table from per-scheduler JSONs
    paths = []
    for n, rep in out["reports"].items():
        p = tmp_path / f"{n}.json"
        p.write_text(json.dumps(rep))
        paths.append(str(p))
    capsys.readouterr()
    assert main(["report", *paths, "--markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("| scheduler") and "| sebf |" in md
    assert main(["report", str(js), "--markdown"]) == 0  # a whole `coflow compare` file
    assert capsys.readouterr().out == md


def test_compare_rejects_unknown_setting(trace):
    assert main(["compare", "--trace", trace, "--schedulers", "sebf", "--set", "bogus=1", "--quiet"]) == 2
    assert main(["compare", "--trace", trace, "--schedulers", "sebf", "--set", "dclas.K=8", "--quiet"]) == 2
    assert main(["compare", "--trace", trace, "--schedulers", "sebf,dclas", "--set", "K=8", "--quiet"]) == 0


@pytest.mark.parametrize("content", ["{not json", "[]", '{"scheduler": "x"}'])
def test_report_malformed(content, tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_text(content)
    assert main(["report", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")


def test_report_missing_file(tmp_path):
    assert main(["report", str(tmp_path / "nope.json")]) == 2


def test_trace_stats_and_gen(tmp_path, capsys):
    out = tmp_path / "g.txt"
    assert main(["trace", "gen", "--coflows", "30", "--ports", "10", "-o", str(out)]) == 0
    assert main(["trace", "stats", str(out), "--json"]) == 0
    st = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert st["coflows"] == 30 and st["ports"] == 10
    assert main(["trace", "check", str(out)]) == 0


def test_sim_reschedule_option(trace, tmp_path, capsys):
    """--reschedule coflow is recorded in the report; an unknown value is a one-line usage
    error (exit 2) and writes nothing."""
    js = tmp_path / "c.json"
    assert main(["sim", "--trace", trace, "--scheduler", "dclas", "--reschedule", "coflow", "--json", str(js), "--quiet"]) == 0
    rep = json.loads(js.read_text())
    assert rep["reschedule"] == "coflow" and all(c["cct_s"] >= c["isolation_s"] * (1 - 1e-9) for c in rep["coflows"])
    bad = tmp_path / "bad.json"
    with pytest.raises(SystemExit) as e:
        main(["sim", "--trace", trace, "--scheduler", "dclas", "--reschedule", "sometimes", "--json", str(bad)])
    assert e.value.code == 2 and not bad.exists()
    assert "--reschedule" in capsys.readouterr().err


def test_plots_of_the_baseline_alone_warn_nothing(trace, tmp_path):
    """`compare` of the baseline alone (as `make run --modes fair` plots it): a CDF, no per-bin
    plot (nothing to compare) and no matplotlib warning about a legend without labels."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["compare", "--trace", trace, "--schedulers", "fair", "--quiet",
                     "--plots", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "cct_cdf.png").exists() and not (tmp_path / "p" / "per_bin.png").exists()
    assert not [w for w in caught if "legend" in str(w.message) or "artists" in str(w.message)], \
        [str(w.message) for w in caught]

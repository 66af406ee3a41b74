"""Trace reader/writer: strict validation (one-line file:line errors, exit 2, no output) and the
flow-expansion conventions."""

import numpy as np
import pytest

from coflow import trace as T
from coflow.cli import main
from coflow.params import MB

GOOD = "4 2\n1 0 2 0 1 2 2:3.0 3:1.5\n2 10 1 3 1 0:2.0\n"


def test_roundtrip(tmp_path):
    tr = T.parse_trace(GOOD)
    p = tmp_path / "t.txt"
    tr.write(str(p))
    tr2 = T.read_trace(str(p))
    assert tr2.ports == 4 and [c.id for c in tr2.coflows] == [1, 2]
    assert tr2.coflows[0].reducers == [(2, 3.0), (3, 1.5)]
    assert T.format_trace(tr2) == T.format_trace(tr)


def test_split_convention():
    wl = T.expand(T.parse_trace(GOOD), T.SPLIT)
    # coflow 1: 2 mappers x 2 reducers; each reducer's MB split evenly over mappers, MB = 2^20
    assert wl.nflows == 4 + 1
    assert list(wl.size[:4]) == [1.5 * MB, 1.5 * MB, 0.75 * MB, 0.75 * MB]
    assert list(wl.src[:4]) == [0, 1, 0, 1] and list(wl.dst[:4]) == [2, 2, 3, 3]
    assert wl.arrival[1] == pytest.approx(0.010)


def test_pairs_convention_merges_ports_and_uses_si_mb():
    tr = T.parse_trace("4 1\n1 0 3 0 0 1 1 2:3.0\n")
    wl = T.expand(tr, T.PAIRS)
    assert wl.nflows == 2
    assert sorted(zip(wl.src.tolist(), wl.size.tolist())) == [(0, 2e6), (1, 1e6)]


def test_expand_both_conventions_by_hand():
    """Every flow array of two coflows, flows reducer after reducer: repeated mapper ports, a
    reducer of 0 MB, reducer ids running on across coflows, flow_lo per coflow."""
    tr = T.parse_trace("4 2\n1 0 3 0 0 1 2 2:3.0 3:0\n2 5 1 3 1 0:1.0\n")
    wl = T.expand(tr, T.SPLIT)
    assert wl.src.tolist() == [0, 0, 1, 0, 0, 1, 3]
    assert wl.dst.tolist() == [2, 2, 2, 3, 3, 3, 0]
    assert wl.size.tolist() == [MB, MB, MB, 0.0, 0.0, 0.0, MB]
    assert wl.reducer.tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert wl.flow_lo.tolist() == [0, 6, 7]
    wl = T.expand(tr, T.PAIRS)
    assert wl.src.tolist() == [0, 1, 0, 1, 3]
    assert wl.dst.tolist() == [2, 2, 3, 3, 0]
    assert wl.size.tolist() == [2e6, 1e6, 0.0, 0.0, 1e6]
    assert wl.reducer.tolist() == [0, 0, 1, 1, 2]
    assert wl.flow_lo.tolist() == [0, 4, 5]
    assert (wl.src.dtype, wl.dst.dtype, wl.size.dtype, wl.reducer.dtype) == (np.int32, np.int32, np.float64, np.int64)


def test_bins():
    text = "200 4\n" \
        "1 0 1 0 1 1:4.0\n" \
        "2 0 1 0 1 1:6.0\n" \
        + "3 0 10 " + " ".join(map(str, range(10))) + " 6 " + " ".join(f"{p}:1.0" for p in range(10, 16)) + "\n" \
        + "4 0 10 " + " ".join(map(str, range(10))) + " 6 " + " ".join(f"{p}:100.0" for p in range(10, 16)) + "\n"
    wl = T.expand(T.parse_trace(text))
    assert list(T.coflow_bins(wl)) == ["SN", "LN", "SW", "LW"]


BAD = [
    ("", "header"),
    ("4\n", "header"),
    ("x 1\n1 0 1 0 1 1:1\n", "ports"),
    ("4 2\n1 0 1 0 1 1:1\n", "coflows"),  # wrong count
    ("4 1\n1 abc 1 0 1 1:1\n", "arrival"),  # non-numeric
    ("4 1\n1 0 1 0 1 1:-2\n", "reducer[0].MB"),  # negative size
    ("4 1\n1 0 1 0 1 1:nan\n", "reducer[0].MB"),  # NaN size
    ("4 1\n1 0 1 7 1 1:1\n", "mapper[0]"),  # port out of range
    ("4 1\n1 0 1 0 1 4:1\n", "reducer[0].port"),
    ("4 1\n1 0 1 -1 1 1:1\n", "mapper[0]"),
    ("4 2\n1 0 1 0 1 1:1\n1 5 1 0 1 1:1\n", "id"),  # duplicate id
    ("4 2\n1 5 1 0 1 1:1\n2 3 1 0 1 1:1\n", "arrival"),  # unsorted
    ("4 1\n1 0 3 0 1\n", "mappers"),  # truncated mapper list
    ("4 1\n1 0 1 0 2 1:1\n", "reducers"),  # truncated reducers
    ("4 1\n1 0\n", "line"),  # truncated line
    ("4 1\n1 0 1 0 1 1:1 2:1\n", "line"),  # extra fields
    ("4 1\n1 0 1 0 1 1-1\n", "reducer[0]"),  # bad reducer token
    ("4 1\n1 0 0 1 1:1\n", "#mappers"),
    ("4 1\n1 0 1 0 0\n", "#reducers"),
    ("4 1\n1 0 1 0 1 1:inf\n", "reducer[0].MB"),
    ("4 1\n1 -5 1 0 1 1:1\n", "arrival"),
]


@pytest.mark.parametrize("text,field", BAD)
def test_malformed_one_line_error(text, field, tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(T.TraceError) as ei:
        T.read_trace(str(p))
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"{p}:"), msg
    assert f": {field}: " in msg, msg
    assert ei.value.field == field


def test_error_names_the_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("4 3\n1 0 1 0 1 1:1\n2 1 1 0 1 1:1\n3 2 1 9 1 1:1\n")
    with pytest.raises(T.TraceError) as ei:
        T.read_trace(str(p))
    assert ei.value.line == 4 and str(ei.value).startswith(f"{p}:4: mapper[0]:")


def test_not_utf8(tmp_path):
    p = tmp_path / "bin.txt"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(T.TraceError):
        T.read_trace(str(p))


def test_unsorted_accepted_with_warning():
    text = "4 2\n1 5 1 0 1 1:1\n2 3 1 0 1 1:1\n"
    with pytest.warns(UserWarning, match="not sorted"):
        tr = T.parse_trace(text, allow_unsorted=True)
    assert [c.id for c in tr.coflows] == [2, 1]


@pytest.mark.parametrize("text,field", BAD[:6])
def test_cli_exit_2_and_no_output(text, field, tmp_path, capsys):
    src = tmp_path / "bad.txt"
    src.write_text(text)
    out = tmp_path / "out.txt"
    rc = main(["trace", "scale", str(src), "--ports", "2", "-o", str(out)])
    assert rc == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(src) in err[0]


def test_cli_sim_bad_trace_writes_no_json(tmp_path, capsys):
    src = tmp_path / "bad.txt"
    src.write_text("4 1\n1 0 1 0 1 1:nan\n")
    js = tmp_path / "o.json"
    assert main(["sim", "--trace", str(src), "--scheduler", "fair", "--json", str(js), "--quiet"]) == 2
    assert not js.exists()


def test_cli_bad_settings(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text(GOOD)
    assert main(["sim", "--trace", str(p), "--scheduler", "dclas", "--set", "K=zero", "--quiet"]) == 2
    assert main(["sim", "--trace", str(p), "--scheduler", "dclas", "--set", "nokey=1", "--quiet"]) == 2
    assert main(["sim", "--trace", str(p), "--scheduler", "nosuch", "--quiet"]) == 2
    assert main(["sim", "--trace", str(p), "--scheduler", "dclas", "--set", "E=0.5", "--quiet"]) == 2


def test_generate_is_seeded_and_fb_like():
    a = T.format_trace(T.generate(300, 20, seed=3))
    b = T.format_trace(T.generate(300, 20, seed=3))
    c = T.format_trace(T.generate(300, 20, seed=4))
    assert a == b and a != c
    st = T.stats(T.expand(T.parse_trace(a)))
    assert st["bins"]["SN"]["pct_coflows"] > 35
    assert st["bins"]["LW"]["pct_bytes"] > 50  # heavy tail: long-wide carry most bytes
    T.parse_trace(a)  # what we write, we read


def test_scale_preserves_bytes_and_order():
    tr = T.generate(50, 30, seed=5)
    sc = T.scale(tr, 8, bytes_factor=0.5, time_factor=2.0)
    assert sc.ports == 8 and [c.id for c in sc.coflows] == [c.id for c in tr.coflows]
    for a, b in zip(tr.coflows, sc.coflows):
        assert b.total_mb == pytest.approx(a.total_mb * 0.5)
        assert b.arrival_ms == pytest.approx(a.arrival_ms * 2.0)
        assert all(0 <= p < 8 for p in b.mappers)
    T.parse_trace(T.format_trace(sc))


def test_fb_trace_stats(fb_trace):
    wl = T.expand(T.read_trace(fb_trace))
    st = T.stats(wl)
    assert st["coflows"] == 526 and st["ports"] == 150
    assert st["flows"] == 706_397
    # bins as the seeds describe the FB trace: about half short-narrow, LW carries ~99% of bytes
    assert 45 < st["bins"]["SN"]["pct_coflows"] < 65
    assert st["bins"]["LW"]["pct_bytes"] > 95

"""bench-scale's D-CLAS placements (issue 29): ``fb`` puts each coflow on as many distinct edges as
its FB-trace width (distinct mapper racks; a seeded synthetic trace's widths when the trace is
missing, and the rows say which), one registered flow from a host of each; ``all`` is one flow
per coflow, counted on every edge."""
import importlib.util
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
_spec = importlib.util.spec_from_file_location("bench_scale", os.path.join(REPO, "bench", "bench_scale.py"))
B = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(B)


def test_trace_widths_are_distinct_mapper_racks(tmp_path):
    tr = tmp_path / "t.txt"
    # coflow 1: mappers on racks 0, 0, 3 (width 2); coflow 2: racks 1, 2, 4, 5 (width 4)
    tr.write_text("8 2\n1 0 3 0 0 3 1 6:1.0\n2 10 4 1 2 4 5 1 7:2.0\n")
    w, src = B.coflow_widths(200, str(tr))
    assert src == "t.txt" and set(w) == {2, 4}
    w2, src2 = B.coflow_widths(200, str(tmp_path / "missing.txt"))
    assert src2.startswith("synthetic") and "seed" in src2
    assert w2 == B.coflow_widths(200, str(tmp_path / "missing.txt"))[0]   # seeded
    assert min(w2) >= 1 and max(w2) > 2


@pytest.mark.parametrize("trace", ["fb", "synthetic"])
def test_fb_placement_senders_on_distinct_edges(tmp_path, trace):
    path = B.FB_TRACE if trace == "fb" else str(tmp_path / "none.txt")
    if trace == "fb" and not os.path.exists(path):
        pytest.skip("the FB trace is not in ../shared/traces")
    topo = B.topology(64, 100)
    flows, where, src = B.placement(topo, 100, "fb", path)
    edge_of = {h.name: h.switch for h in topo.hosts}
    widths, _ = B.coflow_widths(100, path)
    assert src == (os.path.basename(path) if trace == "fb" else src) and src
    for fl, es, w in zip(flows, where, widths):
        assert len(es) == len(set(es)) == min(w, 64)
        assert [edge_of[f[0]] for f in fl] == es           # one flow from a host of each
        assert len({(f[0], f[1]) for f in fl}) == len(fl)  # distinct pairs (the API's rule)
    assert sum(map(len, where)) < 100 * 64 / 2            # far from every coflow on every edge
    flows_all, where_all, src_all = B.placement(topo, 100, "all")
    assert where_all is None and src_all is None and all(len(f) == 1 for f in flows_all)
    with pytest.raises(ValueError, match="placement 'x'"):
        B.placement(topo, 3, "x")

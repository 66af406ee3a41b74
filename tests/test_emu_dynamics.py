"""Live emulation of runtime dynamics: a small DAG with a two-wave coflow replayed on a k=4
fat-tree of BMv2 switches under Mininet, through the real controller and coflow API.

Coflow 1 has two waves (h0 -> h8, then h1 -> h8); coflow 2 starts after coflow 1 (Starts-After)
and coflow 3 is pipelined behind coflow 2 (Finishes-Before).  Checked: every flow's bytes
arrive; wave 2 starts only when wave 1 is done, coflow 2 only when coflow 1 is complete, coflow
3 with coflow 2 and completes no earlier; the API gave the DAG Aalo's CoflowIds (one external id,
internal ids 0, 1, 2), the waves kept theirs; the report has JCT beside CCT.

Skips with a one-line reason without the P4 toolchain, root or Mininet.
"""
import os
import subprocess

import pytest

from live import REPO, emu_marks

pytestmark = emu_marks()

RATE_BPS = 2e6
# sizes in kB (bytes factor 1e-3 on the trace's MB, pairs convention: 1 MB = 10^6 B)
TRACE = """16 4
1 0 1 0 1 8:120
1 0 1 1 1 8:60 wave=2
2 0 1 2 1 9:60 after=1
3 0 1 3 1 10:20 pipe=2
"""


def dag_plan(tmp_path):
    from coflow import trace as T
    from coflow.emu import plan as P
    p = tmp_path / "dag.txt"
    p.write_text(TRACE)
    return P.build_plan(T.read_trace(str(p)), [f"h{i}" for i in range(16)], 10, RATE_BPS,
                        bytes_factor=1e-3, time_factor=1.0)


def test_emulation_replays_a_dag(tmp_path):
    from coflow.emu.runner import EmuConfig, Experiment
    p4json = os.path.join(REPO, "build", "coflow.json")
    if not os.path.exists(p4json):
        subprocess.run(["make", "-C", REPO, "--no-print-directory", "p4"], check=True)
    plan = dag_plan(tmp_path)
    cfg = EmuConfig(topology="fattree:4", modes=("sebf",), rate_mbps=RATE_BPS / 1e6, connections="per-flow",
                    mode_timeout_s=45.0, out_dir=str(tmp_path / "out"), progress=False, simulate=True)
    out = Experiment(cfg, plan=plan).run()
    rep = out["reports"]["sebf"]
    assert not rep["timed_out"], f"timed out; errors: {rep['errors'][:3]}"
    assert rep["error_count"] == 0, rep["errors"][:3]
    recs = {c["id"]: c for c in rep["coflows"]}
    assert sorted(recs) == [1, 2, 3] and all(c["cct_s"] is not None for c in recs.values()), recs
    assert recs[1]["waves"] == 2 and recs[1]["bytes"] == 180_000
    # the live CoflowIds: one DAG, Aalo's rule (the waves keep coflow 1's)
    ids = {i: c["coflow_id"] for i, c in recs.items()}
    ext = {v.split(".")[0] for v in ids.values()}
    assert len(ext) == 1 and [ids[i].split(".")[1] for i in (1, 2, 3)] == ["0", "1", "2"], ids
    # release order: coflow 2 after coflow 1 completes; 3 with 2; 3 completes no earlier than 2
    eps = 0.02
    assert recs[2]["arrival_s"] >= recs[1]["finish_s"] - eps
    assert recs[3]["arrival_s"] <= recs[2]["arrival_s"] + 0.5
    assert recs[3]["finish_s"] >= recs[2]["finish_s"] - eps
    # every flow is in the timeline, wave 2's flow dispatched after wave 1's was received
    fl = rep["flows"]
    assert len(fl) == 4
    (job,) = rep["jobs"]
    assert job["jct_s"] >= job["critical_path_s"] * 0.9 and rep["summary"]["avg_jct_s"] == pytest.approx(job["jct_s"])
    assert job["jct_s"] >= recs[1]["cct_s"] + recs[2]["cct_s"] - eps
    # the simulator beside it replays the same DAG
    sim = out["sim_reports"]["sebf"]
    assert sim["summary"]["jobs"] == 1 and sim["summary"]["jobs_completed"] == 1

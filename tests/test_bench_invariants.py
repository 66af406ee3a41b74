"""The benchmarks' invariants, quick: each fast path the benchmarks time against its reference
gives the same answer (the full checks run in `make bench-scale` / `make bench-ctl`, which exit
1 when one breaks), and the benchmarks do exit 1 then."""
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(ROOT, "build", "coflow.p4info.txt")


def load(name):
    path = os.path.join(ROOT, "bench", f"{name}.py")
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location(f"bench_{name}_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def scale():
    return load("bench_scale")


def test_dclas_queues_fast_path_equals_its_reference(scale):
    r = scale.queues_micro(ncoflows=40, reps=5)
    assert r["same_queues"] is True


def test_the_queues_check_sees_a_wrong_fast_path(scale, monkeypatch):
    import coflow.sched.queues as Q
    real = Q.dclas_queues
    monkeypatch.setattr(Q, "dclas_queues", lambda v, p: real(v, p) + 1)
    assert scale.queues_micro(ncoflows=10, reps=2)["same_queues"] is False


def test_meter_translation_equals_its_reference(scale):
    r = scale.meters_micro(rounds=3)
    assert r["same_state"] is True


@pytest.mark.skipif(not os.path.exists(P4INFO), reason="build/coflow.p4info.txt missing (make p4: needs p4c)")
def test_codec_encoding_equals_its_reference(scale, monkeypatch):
    from types import SimpleNamespace
    monkeypatch.setattr(scale, "_ARGS", SimpleNamespace(p4info=P4INFO))
    r = scale.codec_micro(reps=2)
    assert r["identical_bytes"] is True


def test_a_broken_invariant_is_named(scale):
    assert scale.broken_invariants({"dclas_queues": {"same_queues": True}}) == []
    got = scale.broken_invariants({"codec_encode": {"identical_bytes": False},
                                   "meters_all_move": {"same_state": True}})
    assert got == ["codec_encode: identical_bytes is False (the fast path and its reference disagree)"]


def test_bench_ctl_exits_1_when_the_rounds_part(monkeypatch, tmp_path, capsys):
    ctl = load("bench_ctl")
    (tmp_path / "p4info.txt").write_text("")
    (tmp_path / "bmv2.json").write_text("{}")
    fake = {"coflows": 1, "flows": 1, "writes_identical_to_from_scratch": False,
            "mismatched_rounds": 2, "first_mismatches": ["round 3: e0: ..."]}
    phase = {k: {"median_ms": 1.0, "p99_ms": 1.0, "max_ms": 1.0} for k in
             ("total", "cpu", "view", "allocate", "priorities", "translate", "desired", "diff",
              "gc", "base_total", "base_cpu", "encode")}
    phase.update({"updates_per_round": 1.0, "speedup_vs_from_scratch (median)": 1.0})
    fake.update(progress_rounds=phase, churn_rounds=phase)
    monkeypatch.setattr(ctl, "bench_sebf", lambda *a: fake)
    rc = ctl.main(["--skip-codec", "--skip-dclas", "--p4info", str(tmp_path / "p4info.txt"),
                   "--json", str(tmp_path / "bmv2.json"), "--out", str(tmp_path / "out.json")])
    assert rc == 1
    cap = capsys.readouterr()
    assert "MISMATCH round 3: e0" in cap.out
    assert "bench-ctl: FAILED" in cap.err
    fake["writes_identical_to_from_scratch"] = True
    fake["first_mismatches"] = []
    assert ctl.main(["--skip-codec", "--skip-dclas", "--p4info", str(tmp_path / "p4info.txt"),
                     "--json", str(tmp_path / "bmv2.json"), "--out", str(tmp_path / "out.json")]) == 0


@pytest.mark.skipif(not os.path.exists(P4INFO), reason="build/coflow.p4info.txt missing (make p4: needs p4c)")
def test_codec_before_side_reads_the_p4info_serialised(tmp_path):
    """The codec benchmark's "before" side (PyPI's p4runtime modules, pure-Python protobuf)
    reads the P4Info serialised: their text parser fails on its map field on every protobuf."""
    import subprocess
    from coflow.ctl.codec import Codec
    binfo = tmp_path / "p4info.bin"
    binfo.write_bytes(Codec.from_file(P4INFO).h.p4info.SerializeToString())
    code = ("import sys\n"
            "from p4.config.v1 import p4info_pb2\n"
            "from google.protobuf import text_format\n"
            "m = p4info_pb2.P4Info(); m.ParseFromString(open(sys.argv[1], 'rb').read())\n"
            "print(len(m.tables), m.HasField('type_info'))\n"
            "try:\n"
            "    text_format.Merge(open(sys.argv[2]).read(), p4info_pb2.P4Info())\n"
            "except AttributeError as e:\n"
            "    print('text:', e)\n")
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    r = subprocess.run([sys.executable, "-c", code, str(binfo), P4INFO], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    first, *rest = r.stdout.splitlines()
    assert int(first.split()[0]) > 5 and first.endswith("True")
    assert rest and "GetEntryClass" in rest[0]   # why the child does not read the text

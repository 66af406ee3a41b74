"""The sweep on a Dask cluster started apart from it (issue 26): a `dask scheduler` and two
`dask worker` processes on loopback, a small sweep with one failing task, bounded in time and
cleaned up. The LocalCluster path is `coflow reproduce`'s default (bench/bench_sweep.py)."""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow  # starts three processes

distributed = pytest.importorskip("distributed", reason="dask/distributed not installed (pip install -e '.[sweep]')")

from coflow.reproduce.sweep import run_sweep  # noqa: E402
from coflow.reproduce.tasks import task_key  # noqa: E402

BIN = os.path.dirname(sys.executable)
DEADLINE_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster(tmp_path):
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    dask = os.path.join(BIN, "dask")
    procs = []
    log = open(tmp_path / "dask.log", "w")
    try:
        procs.append(subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                                      stdout=log, stderr=log, start_new_session=True))
        for i in range(2):
            procs.append(subprocess.Popen([dask, "worker", addr, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                                           "--host", "127.0.0.1", "--name", f"w{i}", "--local-directory", str(tmp_path / f"w{i}")],
                                          stdout=log, stderr=log, start_new_session=True))
        t0 = time.monotonic()
        with distributed.Client(addr, timeout=30) as c:
            while len(c.scheduler_info()["workers"]) < 2:
                assert time.monotonic() - t0 < 60, "two workers did not join in 60 s: " + (tmp_path / "dask.log").read_text()[-2000:]
                time.sleep(0.2)
        yield addr
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
        log.close()


def test_sweep_on_a_separately_started_cluster(cluster, tmp_path, capsys):
    good = [{"workload": {"kind": "shuffle", "n": n}, "scheduler": s, "params": {}, "reschedule": "flow"}
            for n in (3, 5) for s in ("fair", "sebf")]
    bad = {"workload": {"kind": "shuffle", "n": 3}, "scheduler": "no-such-scheduler", "params": {"x": 1},
           "reschedule": "flow"}
    cache = str(tmp_path / "cache")
    t0 = time.monotonic()
    r = run_sweep(good + [bad], scheduler=cluster, cache_dir=cache, progress=False, timeout=DEADLINE_S)
    assert time.monotonic() - t0 < DEADLINE_S
    assert r.ran == 4 and set(r.failed) == {task_key(bad)} and r.engine["workers"] == 2
    err = capsys.readouterr().err
    assert "task failed: no-such-scheduler[x=1] on" in err and "unknown scheduler" in err  # names its parameters
    fair3 = r.results[task_key(good[0])]["cct"][0]
    assert fair3 == pytest.approx((3 * 3 - 1) * (1 << 20) / 1.25e8)
    assert sorted(os.listdir(cache)) == sorted(task_key(t) + ".json" for t in good)
    # a re-run reuses what is done; the failed task is tried again (and fails again)
    r2 = run_sweep(good + [bad], scheduler=cluster, cache_dir=cache, progress=False, timeout=DEADLINE_S)
    assert r2.cached == 4 and r2.ran == 0 and set(r2.failed) == {task_key(bad)}


def test_reproduce_command_by_scheduler_address(cluster, tmp_path):
    out = subprocess.run([os.path.join(BIN, "coflow"), "reproduce", "madd-fig4.6", "--scheduler", cluster, "--quiet",
                          "--cache", str(tmp_path / "c"), "--results", str(tmp_path / "r"), "--doc", str(tmp_path / "d.md")],
                         capture_output=True, text=True, timeout=DEADLINE_S)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "4 tasks (4 run, 0 from the cache, 0 failed)" in out.stdout
    assert "| MADD over fair sharing, N = 100 | 1.495x | 1.495x |" in (tmp_path / "d.md").read_text()

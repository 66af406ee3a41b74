"""``coflow ctl``: argument errors (one line, exit 2), and a live run: the daemon with the API and
/metrics + /status, driven through the API client, stopped with SIGTERM."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from coflow.dataplane import toolchain

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COFLOW = [sys.executable, "-m", "coflow.cli"]
TOPO = os.path.join(REPO, "topologies", "bigswitch-16.json")
P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")
P4INFO_ANY = os.path.abspath(__file__)  # argument errors are found before the file is read


def run(*args, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "controller"))
    return subprocess.run(COFLOW + list(args), capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("args,msg", [
    (["--mode", "dclas", "--set", "K=12"], "error: D-CLAS K=12: the switch has 8 queues"),
    (["--mode", "dclas", "--switch", "zz=127.0.0.1:1"], "error: --switch: no switch named zz"),
    (["--mode", "sebf", "--set", "bogus=1"], "error: scheduler sebf: unknown parameter 'bogus'"),
    (["--mode", "sebf", "--set", "link_mbps=fast"], "error: setting link_mbps: cannot read 'fast'"),
    (["--mode", "fair", "--set", "noequals"], "error: --set 'noequals': expected KEY=VALUE"),
    (["--mode", "wfq"], "error: unknown mode 'wfq'; modes: fair, dclas, fifo-lm, sebf,"),
    (["--mode", "dclas-strict"], "error: unknown mode 'dclas-strict'"),   # a simulator-only scheduler
])
def test_run_argument_errors(args, msg, capsys):
    from coflow.cli import main  # in-process: the errors come before any switch is contacted
    assert main(["ctl", "run", "--topo", TOPO, "--p4info", P4INFO_ANY, "--json", P4INFO_ANY, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(msg), err


def test_run_bad_topology(tmp_path, capsys):
    from coflow.cli import main
    bad = tmp_path / "t.json"
    bad.write_text('{"format": "coflow-topology/1"}')
    assert main(["ctl", "run", "--topo", str(bad), "--mode", "fair"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(bad) in err and len(err.strip().splitlines()) == 1


def test_status_errors(tmp_path, capsys):
    from coflow.cli import main
    from coflow.ctl.bmv2 import free_port
    assert main(["ctl", "status", "--file", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err
    assert main(["ctl", "status", "--address", f"127.0.0.1:{free_port()}", "--timeout", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: http://")


@pytest.mark.live
@pytest.mark.skipif(not toolchain.discover().simple_switch_grpc,
                    reason="ctl cli live test: simple_switch_grpc not found (toolchain.discover())")
@pytest.mark.skipif(not os.path.exists(P4INFO), reason="ctl cli live test: build/ missing (make p4)")
def test_run_live(tmp_path):
    from coflow.api.client import CoflowClient
    from coflow.ctl.bmv2 import Bmv2, free_port
    sw = Bmv2(1).start()  # bigswitch-16's s0 has device id 1
    api, metrics = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    status_file = tmp_path / "status.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "controller"))
    proc = subprocess.Popen(COFLOW + ["ctl", "run", "--topo", TOPO, "--mode", "sebf",
                                      "--set", "link_mbps=100", "--switch", f"s0={sw.address}",
                                      "--api", api, "--metrics", metrics,
                                      "--status-file", str(status_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert json.loads(line)["controller"] == "running", proc.stderr.read() if not line else line
        cli = CoflowClient(api)
        cid = cli.register(flows=[("h0", "h1", 10_000_000), ("h2", "h1", 5_000_000)])
        deadline = time.time() + 10
        while time.time() < deadline:
            st = json.load(urllib.request.urlopen(f"http://{metrics}/status", timeout=2))
            if st["coflows"] and st["coflows"][0]["override_prio"] == 7 \
                    and st["switches"]["s0"]["entities"] > 40:
                break
            time.sleep(0.1)
        assert st["coflows"][0]["cid"] == cid and st["switches"]["s0"]["state"] == "master"
        r = run("ctl", "status", "--address", metrics)
        assert r.returncode == 0 and json.loads(r.stdout)["mode"] == "sebf"
        text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=2).read().decode()
        assert 'coflow_ctl_round_seconds_bucket{le="0.005",phase="write"}' in text
        assert 'coflow_ctl_switch_primary{switch="s0"} 1.0' in text
        time.sleep(1.2)
        assert json.loads(status_file.read_text())["mode"] == "sebf"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=10) == 0, proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
            sw.stop()

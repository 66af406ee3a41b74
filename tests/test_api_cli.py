"""``coflow api ...`` commands (JSON output, one-line errors, exit codes), the standalone server
process, and the proto build helper (cache, read-only fallback, concurrent first use)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coflow.api import proto
from coflow.api.registry import CoflowRegistry
from coflow.api.server import serve
from coflow.cli import main

REPO = Path(__file__).resolve().parents[1]
HOSTS = [f"h{i}" for i in range(4)]


@pytest.fixture
def server(tmp_path):
    reg = CoflowRegistry(HOSTS)
    s = serve(reg, "127.0.0.1:0", [f"unix:{tmp_path}/api.sock"])
    yield reg, s.coflow_addresses[0], f"unix:{tmp_path}/api.sock"
    s.stop(None)


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_client_commands(server, capsys):
    reg, addr, unix = server
    rc, out, err = run(capsys, "api", "register", "--address", addr, "--flow", "h0:h1:1000", "--flow", "h2:h1")
    assert rc == 0 and err == ""
    d = json.loads(out)
    assert d["coflow_id"] == "1.0" and [f["size_bytes"] for f in d["flows"]] == [1000, None]
    rc, out, _ = run(capsys, "api", "register", "--address", unix, "--flow", "h3:h0:5", "--parent", "1.0")
    assert rc == 0 and json.loads(out)["coflow_id"] == "1.1"
    rc, out, _ = run(capsys, "api", "register", "--address", addr, "--flow", "h2:h0:5", "--parent", "1.1",
                     "--parent", "1.0")                    # a child of two coflows
    assert rc == 0 and json.loads(out)["coflow_id"] == "1.2" and json.loads(out)["parents"] == ["1.1", "1.0"]
    rc, out, _ = run(capsys, "api", "add-flows", "1.0", "--address", addr, "--flow", "h3:h1:7")
    assert rc == 0 and len(json.loads(out)["flows"]) == 3
    rc, out, _ = run(capsys, "api", "update", "1.0", "--address", addr, "--size", "1=20", "--sent", "0=999")
    d = json.loads(out)
    assert rc == 0 and d["total_bytes"] == 1027 and d["sent_bytes"] == 999
    rc, out, err = run(capsys, "api", "add-flows", "1.0", "--address", addr, "--flow", "h2:h0::ready")
    assert err == ""
    assert rc == 0 and [f["ready"] for f in json.loads(out)["flows"]] == [False, False, False, True]
    rc, out, _ = run(capsys, "api", "update", "1.0", "--address", addr, "--ready", "0=1", "--ready", "3=0")
    assert rc == 0 and [f["ready"] for f in json.loads(out)["flows"]] == [True, False, False, False]
    rc, out, _ = run(capsys, "api", "status", "1.0", "--address", unix)
    assert rc == 0 and json.loads(out) == reg.get("1.0").to_dict()
    rc, out, _ = run(capsys, "api", "list", "--address", addr)
    assert rc == 0 and [x["coflow_id"] for x in json.loads(out)] == ["1.0", "1.1", "1.2"]
    assert reg.get("1.0").flows[0].ready is True
    assert run(capsys, "api", "unregister", "1.2", "--address", addr)[0] == 0
    rc, out, _ = run(capsys, "api", "unregister", "1.1", "--address", addr)
    assert rc == 0 and json.loads(out)["coflow_id"] == "1.1"
    assert [r.cid.internal for r in reg.list()] == [0]


@pytest.mark.parametrize("argv,line", [
    (["register", "--flow", "h0:h1:1000", "--flow", "h2:h1:-5"], "error: INVALID_ARGUMENT: flows[1].size_bytes: must be >= 0"),
    (["register", "--flow", "h0:h9"], "error: INVALID_ARGUMENT: flows[0].dst: unknown host 'h9' (not in the topology)"),
    (["register", "--flow", "h0:h1", "--parent", "8.0"], "error: NOT_FOUND: parent: coflow 8.0 was never registered"),
    (["register", "--flow", "h0:h1", "--parent", "1.0", "--parent", "1.0"], "error: INVALID_ARGUMENT: parents[1]: 1.0 is listed twice"),
    (["register", "--flow", "h0:h1:5", "--deadline", "0"], "error: INVALID_ARGUMENT: deadline_s: "),
    (["status", "1.x"], "error: INVALID_ARGUMENT: coflow_id: '1.x' is not a CoflowId"),
    (["status", "4.0"], "error: NOT_FOUND: coflow_id: coflow 4.0 is not registered"),
    (["unregister", "4.0"], "error: NOT_FOUND: coflow_id: "),
    (["update", "4.0", "--size", "0=1"], "error: NOT_FOUND: coflow_id: "),
    (["update", "1.0"], "error: INVALID_ARGUMENT: sizes: nothing to update: give sizes, sent_bytes and/or ready"),
    (["add-flows", "1.0", "--flow", "h0:h1"], "error: INVALID_ARGUMENT: flows[0]: duplicate flow h0->h1"),
    # caught by the CLI before any call
    (["register", "--flow", "h0"], "error: --flow 'h0': expected SRC:DST[:SIZE_BYTES][:ready]"),
    (["register", "--flow", "h0:h1:5:yes"], "error: --flow 'h0:h1:5:yes': the fourth part is 'ready' or nothing, not 'yes'"),
    (["update", "1.0", "--ready", "0=true"], "error: --ready '0=true': expected FLOW_ID=1 or FLOW_ID=0"),
    (["update", "1.0", "--ready", "5=1"], "error: INVALID_ARGUMENT: ready[5]: unknown flow id 5"),
    (["register", "--flow", "h0:h1:1k"], "error: --flow 'h0:h1:1k': SIZE_BYTES '1k' is not an integer"),
    (["update", "1.0", "--sent", "x=1"], "error: --sent 'x=1': expected FLOW_ID=BYTES (integers)"),
])
def test_client_errors_are_one_line_exit_2(server, capsys, argv, line):
    reg, addr, _ = server
    reg.register([("h0", "h1")])
    before = reg.snapshot()
    rc, out, err = run(capsys, "api", *argv, "--address", addr)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(line), err
    assert reg.snapshot() == before


def test_no_server_exit_2(tmp_path, capsys):
    rc, out, err = run(capsys, "api", "list", "--address", f"unix:{tmp_path}/none.sock", "--timeout", "2")
    assert rc == 2 and err.startswith("error: UNAVAILABLE: ") and err.count("\n") == 1


def _wait_line(p, timeout=60):
    t0 = time.time()
    line = p.stdout.readline()
    assert time.time() - t0 < timeout
    return line


@pytest.mark.slow
def test_serve_process(tmp_path):
    """`coflow api serve` standalone: topology hosts, unix socket, SQLite db kept across a restart."""
    topo = REPO / "topologies" / "leafspine-2x2x4.json"
    if not topo.exists():
        pytest.skip(f"{topo} not found")
    db, sock = tmp_path / "reg.sqlite", tmp_path / "api.sock"
    cmd = [sys.executable, "-m", "coflow.cli", "api", "serve", "--topo", str(topo), "--db", str(db),
           "--address", "127.0.0.1:0", "--unix", str(sock)]
    coflow = [sys.executable, "-m", "coflow.cli", "api"]
    for round_ in range(2):
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            info = json.loads(_wait_line(p))
            assert info["listening"][1] == f"unix:{sock}" and info["hosts"] == 8 and info["coflows"] == round_
            tcp = info["listening"][0]
            r = subprocess.run(coflow + ["register", "--address", f"unix:{sock}", "--flow", "h0:h7:100"],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)["coflow_id"] == f"{round_ + 1}.0"
            r = subprocess.run(coflow + ["list", "--address", tcp], capture_output=True, text=True, timeout=60)
            assert [x["coflow_id"] for x in json.loads(r.stdout)] == [f"{i + 1}.0" for i in range(round_ + 1)]
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        assert p.returncode == 0, p.stderr.read()
        assert not sock.exists()


@pytest.mark.parametrize("argv,msg", [
    (["--hosts", "h0,h1", "--db", "{junk}"], "not a coflow registry database"),
    (["--topo", "{missing}"], "missing.json"),
    ([], "give --topo FILE (or --hosts h0,h1,...)"),
    (["--hosts", "h0,h1", "--unix", "/nonexistent-coflow-dir/api.sock"], "does not exist"),
    (["--hosts", "h0,h1", "--admit-gbps", "-1"], "--admit-gbps must be > 0"),
    (["--hosts", "h0,h1", "--lease-s", "-1"], "--lease-s must be in [0, 86400]"),
    (["--hosts", "h0,h1", "--apps", "{missing}"], "cannot read the apps file"),
    (["--hosts", "h0,h1", "--apps", "{junk}"], "not JSON"),
    (["--hosts", "h0,h1", "--tls-cert", "{junk}"], "--tls-cert and --tls-key go together"),
    (["--hosts", "h0,h1", "--tls-cert", "{missing}", "--tls-key", "{missing}"], "--tls-cert"),
    (["--hosts", "h0,h1", "--apps", "{apps}", "--address", "0.0.0.0:0"], "in clear"),
])
def test_serve_errors(tmp_path, capsys, argv, msg):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00garbage" * 100)
    apps = tmp_path / "apps.json"
    apps.write_text(json.dumps({"format": "coflow-apps/1", "apps": [{"name": "a", "token_sha256": "0" * 64}]}))
    argv = [a.format(junk=junk, missing=tmp_path / "missing.json", apps=apps) for a in argv]
    rc, out, err = run(capsys, "api", "serve", "--address", "127.0.0.1:0", *argv)
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and msg in err, err


# The proto build helper -------------------------------------------------------------------------

def test_no_generated_code_in_the_repo():
    tracked = subprocess.run(["git", "ls-files", "controller/coflow/api"], cwd=REPO, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    names = tracked.stdout.split()
    assert "controller/coflow/api/coflow.proto" in names
    assert not [n for n in names if n.endswith("_pb2.py") or n.endswith("_pb2_grpc.py")]


def test_build_helper_out_dir(tmp_path):
    r = subprocess.run([sys.executable, "-m", "coflow.api.proto", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = Path(r.stdout.strip())
    assert d.parent == tmp_path and d.name == proto.cache_key()
    assert (d / proto.GEN_PACKAGE / "coflow_pb2.py").is_file()
    assert "CoflowServiceStub" in (d / proto.GEN_PACKAGE / "coflow_pb2_grpc.py").read_text()


FALLBACK = r"""
import sys
from pathlib import Path
from coflow.api import proto
bad, good = sys.argv[1], sys.argv[2]
proto.cache_roots = lambda: [Path(bad), Path(good)]
pb2, grpc_mod = proto.load()
print(Path(pb2.__file__).parents[1])
"""


def test_read_only_checkout_falls_back(tmp_path):
    """An unwritable first root (here: a path below a regular file, which fails even for root)
    falls through to the next one."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    good = tmp_path / "tmpcache"
    r = subprocess.run([sys.executable, "-c", FALLBACK, str(blocker / "cache"), str(good)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == good / proto.cache_key()


def test_existing_build_in_read_only_root_is_used(tmp_path):
    root = tmp_path / "ro"
    r = subprocess.run([sys.executable, "-m", "coflow.api.proto", "--out", str(root)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    built = root / proto.cache_key() / proto.GEN_PACKAGE / "coflow_pb2.py"
    mtime = built.stat().st_mtime_ns
    # first root: the complete build (never rewritten); second root unusable: loading must not need it
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = subprocess.run([sys.executable, "-c", FALLBACK, str(root), str(blocker / "x")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == root / proto.cache_key() and built.stat().st_mtime_ns == mtime


def test_no_usable_cache_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = subprocess.run([sys.executable, "-c", FALLBACK, str(blocker / "a"), str(blocker / "b")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "cannot build the coflow API stubs in any cache directory" in r.stderr


def test_concurrent_first_use(tmp_path):
    env = dict(os.environ, COFLOW_PROTO_CACHE=str(tmp_path / "cache"))
    code = "from coflow.api.client import CoflowClient; from coflow.api import proto; print(proto.ensure_built())"
    ps = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in ps]
    assert all(p.returncode == 0 for p in ps), [e for _, e in outs]
    assert {o.strip() for o, _ in outs} == {str(tmp_path / "cache" / proto.cache_key())}
    assert sorted(os.listdir(tmp_path / "cache")) == [proto.cache_key()]   # no scratch dirs left


def test_cache_key_follows_the_proto(tmp_path, monkeypatch):
    k = proto.cache_key()
    alt = tmp_path / "coflow.proto"
    alt.write_text(proto.PROTO.read_text() + "\n// changed\n")
    monkeypatch.setattr(proto, "PROTO", alt)
    assert proto.cache_key() != k


def test_tokens_over_the_cli(tmp_path, capsys):
    """new-token prints a token and its apps entry; a server with it answers the CLI's calls
    with the token and refuses them without (one line, exit 2)."""
    rc, out, _ = run(capsys, "api", "new-token", "spark")
    d = json.loads(out)
    assert rc == 0 and d["app"]["name"] == "spark" and len(d["app"]["token_sha256"]) == 64
    from coflow.api.auth import Identities
    ids = Identities.parse({"format": "coflow-apps/1", "apps": [d["app"]]})
    reg = CoflowRegistry(HOSTS)
    s = serve(reg, "127.0.0.1:0", identities=ids)
    addr = s.coflow_addresses[0]
    try:
        rc, out, err = run(capsys, "api", "register", "--address", addr, "--flow", "h0:h1:5",
                           "--token", d["token"], "--lease-s", "60", "--request-id", "k1")
        assert rc == 0 and json.loads(out)["owner"] == "spark" and json.loads(out)["lease_s"] == 60
        rc, out, err = run(capsys, "api", "keepalive", "--address", addr, "--token", d["token"], "1.0", "7.0")
        assert rc == 0 and json.loads(out) == {"renewed": ["1.0"], "not_found": ["7.0"]}
        rc, out, err = run(capsys, "api", "list", "--address", addr)
        assert rc == 2 and err.startswith("error: UNAUTHENTICATED: authorization: ") and err.count("\n") == 1
    finally:
        s.stop(None)


def test_certs_command_writes_a_ca_and_what_it_signs(tmp_path, capsys):
    from cryptography import x509
    rc, out, _err = run(capsys, "api", "certs", str(tmp_path / "tls"), "--name", "api", "--san", "10.0.0.5",
                        "--client", "ctl")
    assert rc == 0
    paths = json.loads(out)
    assert set(paths) == {"server", "ctl"}
    ca = x509.load_pem_x509_certificate((tmp_path / "tls" / "ca.crt").read_bytes())
    srv = x509.load_pem_x509_certificate((tmp_path / "tls" / "api.crt").read_bytes())
    assert srv.issuer == ca.subject
    sans = srv.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.5"]
    for key in ("ca.key", "api.key", "ctl.key"):
        assert (tmp_path / "tls" / key).stat().st_mode & 0o077 == 0, key


def test_new_token_into_an_apps_file(tmp_path, capsys):
    import hashlib

    from coflow.api.auth import Identities
    apps = str(tmp_path / "apps.json")
    rc, tok, _ = run(capsys, "api", "new-token", "spark", "--apps", apps, "--max-coflows", "8")
    assert rc == 0
    rc, tok2, _ = run(capsys, "api", "new-token", "ops", "--apps", apps, "--admin")
    assert rc == 0
    doc = json.load(open(apps))
    assert [a["name"] for a in doc["apps"]] == ["spark", "ops"]
    assert doc["apps"][0]["token_sha256"] == hashlib.sha256(tok.strip().encode()).hexdigest()
    assert doc["apps"][0]["max_coflows"] == 8 and doc["apps"][1]["admin"] is True
    Identities.parse(doc, apps)
    rc, _out, err = run(capsys, "api", "new-token", "spark", "--apps", apps)
    assert rc == 2 and "already" in err

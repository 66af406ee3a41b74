"""Toolchain discovery: env var, PATH, /opt/p4/bin."""
import os
import stat

from coflow.dataplane import toolchain


def _exe(path):
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_env_var_wins(tmp_path):
    a = _exe(tmp_path / "my-p4c")
    env = {"P4C": a, "PATH": ""}
    assert toolchain.find_tool("p4c-bm2-ss", env, dirs=()) == a


def test_env_var_pointing_nowhere_is_missing(tmp_path):
    env = {"SIMPLE_SWITCH_GRPC": str(tmp_path / "absent"), "PATH": ""}
    assert toolchain.find_tool("simple_switch_grpc", env, dirs=()) is None


def test_path_then_default_dir(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    optdir = tmp_path / "opt"
    optdir.mkdir()
    p = _exe(bindir / "p4c-bm2-ss")
    o = _exe(optdir / "simple_switch_grpc")
    env = {"PATH": str(bindir)}
    tc = toolchain.discover(env, dirs=(str(optdir),))
    assert tc.p4c == p and tc.simple_switch_grpc == o and tc.complete
    assert tc.simple_switch_cli is None


def test_non_executable_ignored(tmp_path):
    f = tmp_path / "p4c-bm2-ss"
    f.write_text("x")
    os.chmod(f, 0o644)
    assert toolchain.find_tool("p4c-bm2-ss", {"PATH": str(tmp_path)}, dirs=()) is None


def test_check_reports_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(toolchain, "DEFAULT_DIRS", (str(tmp_path),))
    monkeypatch.delenv("P4C", raising=False)
    monkeypatch.delenv("SIMPLE_SWITCH_GRPC", raising=False)
    # main() uses discover() with the module default dirs, patched above
    monkeypatch.setattr(toolchain, "discover", lambda: toolchain.Toolchain(None, None, None))
    assert toolchain.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "p4c-bm2-ss" in out and "simple_switch_grpc" in out and out.count("\n") == 1


def test_ptf_test_count(tmp_path):
    """ptf-tests/count_tests.py (the skip line's count) counts runTest classes, inherited too."""
    import importlib.util
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("count_tests",
                                                  os.path.join(root, "ptf-tests", "count_tests.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (tmp_path / "test_a.py").write_text(
        "class _Base:\n    def runTest(self): pass\n"
        "class A(_Base): pass\n"
        "class B:\n    def runTest(self): pass\n"
        "class Helper: pass\n")
    (tmp_path / "notatest.py").write_text("class C:\n    def runTest(self): pass\n")
    assert mod.count(str(tmp_path)) == 2
    assert mod.count(os.path.join(root, "ptf-tests")) >= 20


def test_switch_ports_are_never_handed_out_twice(monkeypatch):
    """Two switches of one network namespace must not share a Thrift port: the kernel's free
    port (bind to 0 on the host) can repeat, and a port bound inside a namespace looks free."""
    from coflow.dataplane import bmv2
    picks = iter([40001, 40001, 40002, 40001, 40003])
    monkeypatch.setattr(bmv2, "free_port", lambda: next(picks))
    monkeypatch.setattr(bmv2, "_handed_out", set())
    assert [bmv2._unique_port() for _ in range(3)] == [40001, 40002, 40003]

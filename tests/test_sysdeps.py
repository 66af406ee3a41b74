"""coflow.sysdeps: what is missing, when it installs, and the one line it prints."""
import io
import os

import pytest

from coflow import sysdeps


def test_a_namespace_folder_is_not_a_package(tmp_path, monkeypatch):
    (tmp_path / "fakepkg_ns").mkdir()
    (tmp_path / "fakepkg_real").mkdir()
    (tmp_path / "fakepkg_real" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    why = sysdeps.real_package_missing("fakepkg_ns")
    assert why and "without __init__.py" in why and str(tmp_path) in why
    assert sysdeps.real_package_missing("fakepkg_real") is None
    assert "not installed" in sysdeps.real_package_missing("no_such_package_xyz")


def test_need_checks_programs_and_modules(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert sysdeps.Need("x", "y", programs=("sh",)).missing()
    assert not sysdeps.Need("x", "y", module="json").missing()
    assert sysdeps.Need("x", "y", module="no_such_package_xyz").missing()


NEED = sysdeps.Need("pkg-a", "testing", module="no_such_package_xyz")


def _fake(monkeypatch, why_not, install_ok=True, fixes=True):
    calls = []
    state = {"missing": [NEED]}
    monkeypatch.setattr(sysdeps, "missing", lambda needs=sysdeps.NEEDS: list(state["missing"]))
    monkeypatch.setattr(sysdeps, "can_install", lambda: why_not)

    def install(pkgs, log, out=None):
        calls.append(pkgs)
        if fixes:
            state["missing"] = []
        return install_ok
    monkeypatch.setattr(sysdeps, "install", install)
    return calls


def test_ensure_installs_as_root_with_one_line(monkeypatch, tmp_path):
    calls = _fake(monkeypatch, None)
    out = io.StringIO()
    assert sysdeps.ensure(str(tmp_path / "apt.log"), out) == []
    assert calls == [["pkg-a"]]
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sysdeps: installing Debian packages pkg-a")


@pytest.mark.parametrize("why", ["not root", "no apt-get", "COFLOW_SYSTEM_INSTALL=0"])
def test_ensure_without_install_says_what_is_missing(monkeypatch, tmp_path, why):
    calls = _fake(monkeypatch, why)
    out = io.StringIO()
    assert sysdeps.ensure(str(tmp_path / "apt.log"), out) == [NEED]
    assert calls == []
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and f"missing pkg-a ({why})" in lines[0] and "skip" in lines[0]


def test_ensure_reports_a_failed_install(monkeypatch, tmp_path):
    _fake(monkeypatch, None, install_ok=False, fixes=False)
    out = io.StringIO()
    assert sysdeps.ensure(str(tmp_path / "apt.log"), out) == [NEED]
    assert "apt-get failed" in out.getvalue().splitlines()[-1]


def test_can_install_honours_the_switch(monkeypatch):
    monkeypatch.setenv(sysdeps.INSTALL_VAR, "0")
    assert sysdeps.can_install() == "COFLOW_SYSTEM_INSTALL=0"
    monkeypatch.setenv(sysdeps.INSTALL_VAR, "1")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert sysdeps.can_install() == "not root"


def test_apt_waits_for_the_dpkg_lock():
    cmd = sysdeps.apt_command(["install", "-y", "mininet"], 600)
    assert cmd[0] == "apt-get"
    i = cmd.index("-o")
    assert cmd[i + 1] == "DPkg::Lock::Timeout=600"
    assert i < cmd.index("install")           # an option before the command, as apt-get reads them
    assert cmd[-2:] == ["-y", "mininet"]


def test_lock_wait_from_the_environment(monkeypatch):
    monkeypatch.delenv(sysdeps.LOCK_WAIT_VAR, raising=False)
    assert sysdeps.lock_wait_s() == sysdeps.LOCK_WAIT_S
    monkeypatch.setenv(sysdeps.LOCK_WAIT_VAR, "30")
    assert sysdeps.lock_wait_s() == 30
    monkeypatch.setenv(sysdeps.LOCK_WAIT_VAR, "-3")
    assert sysdeps.lock_wait_s() == sysdeps.LOCK_WAIT_S


def test_lock_holder_names_another_process(tmp_path):
    import subprocess
    import sys
    lock = tmp_path / "lock-frontend"
    lock.write_text("")
    assert sysdeps.lock_holder((str(lock),)) is None
    code = ("import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.lockf(f, fcntl.LOCK_EX); "
            "print('locked', flush=True); time.sleep(30)")
    p = subprocess.Popen([sys.executable, "-c", code, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        assert sysdeps.lock_holder((str(tmp_path / "absent"), str(lock))) == (str(lock), p.pid)
    finally:
        p.kill()
        p.wait()
    assert sysdeps.lock_holder((str(lock),)) is None     # asking took nothing


def test_install_says_it_waits_and_passes_the_timeout(monkeypatch, tmp_path):
    import subprocess
    runs = []

    class Done:
        returncode = 0
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: runs.append(cmd) or Done())
    monkeypatch.setattr(sysdeps, "lock_holder", lambda: ("/var/lib/dpkg/lock-frontend", 4242))
    monkeypatch.setenv(sysdeps.LOCK_WAIT_VAR, "120")
    out = io.StringIO()
    assert sysdeps.install(["mininet"], str(tmp_path / "apt.log"), out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sysdeps: waiting up to 120 s for the package")
    assert "pid 4242" in lines[0]
    assert runs and all("DPkg::Lock::Timeout=120" in r for r in runs)
    monkeypatch.setattr(sysdeps, "lock_holder", lambda: None)
    out = io.StringIO()
    runs.clear()
    assert sysdeps.install(["mininet"], str(tmp_path / "apt.log"), out)
    assert out.getvalue() == "" and "DPkg::Lock::Timeout=120" in runs[0]

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

    def install(pkgs, log):
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

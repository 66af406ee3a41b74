"""The lock files (requirements/*.txt) against pyproject.toml and against what is installed:
every dependency range of the project has its pin in the lock, every pin carries hashes, the
running environment holds exactly the locked versions, and requirements/check.py refuses a
malformed lock and a differing environment, each in one line."""
import importlib.util
import os
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQ = os.path.join(ROOT, "requirements")
DEV = os.path.join(REQ, "dev.txt")
SHELL = os.path.join(REQ, "shell.txt")

_spec = importlib.util.spec_from_file_location("lockcheck", os.path.join(REQ, "check.py"))
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def pins(path):
    out = {}
    for name, version, marker, _ in check.read_lock(path):
        out.setdefault(canonicalize_name(name), []).append((version, marker))
    return out


def project_requirements():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        proj = tomllib.load(f)["project"]
    reqs = list(proj["dependencies"])
    for extra in proj["optional-dependencies"].values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def in_file(path):
    with open(path) as f:
        return [Requirement(line.split("#")[0].strip()) for line in f if line.split("#")[0].strip()]


@pytest.mark.parametrize("lock,reqs", [
    (DEV, lambda: project_requirements() + in_file(os.path.join(REQ, "build.in"))),
    (SHELL, lambda: in_file(os.path.join(REQ, "shell.in"))),
], ids=["dev", "shell"])
def test_every_requirement_is_locked_within_its_range(lock, reqs):
    locked = pins(lock)
    bad = []
    for r in reqs():
        got = locked.get(canonicalize_name(r.name))
        if not got:
            bad.append(f"{r}: not in {os.path.relpath(lock, ROOT)}")
            continue
        for version, _ in got:
            if not r.specifier.contains(version, prereleases=True):
                bad.append(f"{r}: locked at {version}")
    assert not bad, "re-lock with `make lock-compile LOCK_UPGRADE=`:\n" + "\n".join(bad)


@pytest.mark.parametrize("lock", [DEV, SHELL], ids=["dev", "shell"])
def test_every_pin_has_hashes(lock):
    with open(lock) as f:
        lines = f.read().splitlines()
    pinned = [i for i, line in enumerate(lines) if check.PIN.match(line.strip())]
    assert pinned
    for i in pinned:
        assert lines[i + 1].strip().startswith("--hash=sha256:"), lines[i]


def test_protobuf_major_is_bounded():
    """protobuf's next major is untested: the range stops before it, and the lock is inside."""
    (version, _), = pins(DEV)["protobuf"]
    spec = next(r for r in project_requirements() if r.name == "protobuf").specifier
    assert spec.contains(version)
    assert not spec.contains("8.0.0")


def test_this_environment_is_the_lock():
    bad, n = check.differences(DEV)
    assert n > 50
    assert not bad, "\n".join(bad)


def test_check_reports_a_differing_version(tmp_path, capsys):
    import numpy
    lock = tmp_path / "lock.txt"
    lock.write_text("# header\nnumpy==0.0.1 \\\n    --hash=sha256:00\n"
                    f"numpy=={numpy.__version__} ; python_version < '3'\n"
                    "no-such-package-anywhere==1.0\n")
    assert check.main([str(lock)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"lock check: {lock}:2: numpy==0.0.1 is locked but {numpy.__version__} is installed"
    assert err[1] == f"lock check: {lock}:5: no-such-package-anywhere==1.0 is locked but not installed"
    assert err[2].startswith("lock check: 2 of 2 locked packages differ")   # the marker line: skipped


@pytest.mark.parametrize("text,where", [
    ("numpy>=1.0\n", ":1: not a 'name==version' pin"),
    ("# only a comment\n", ": no pins"),
    ("numpy==1.0\n-e .\n", ":2: not a 'name==version' pin"),
])
def test_check_refuses_a_malformed_lock(tmp_path, capsys, text, where):
    lock = tmp_path / "lock.txt"
    lock.write_text(text)
    assert check.main([str(lock)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and where in err[0] and str(lock) in err[0]


def test_check_missing_file(tmp_path, capsys):
    assert check.main([str(tmp_path / "nope.txt")]) == 2
    assert "No such file" in capsys.readouterr().err

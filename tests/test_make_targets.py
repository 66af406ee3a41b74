"""Every make target that `make help` lists runs to its end at a tiny size (`make smoke`, and
`make test` through this file), so that a target that crashes on a fresh install fails CI.

The targets run one after the other in a scratch copy of the repository (tests must not touch
results/, README.md or build/ of the tree under test), with this run's venv. A target whose
tools are missing here (p4c, simple_switch_grpc, bf-p4c, root, etcd, the FB trace) skips
with the reason; a target listed in `make help` with neither a smoke size nor a stated reason
to be left out fails the first test."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.dirname(os.path.dirname(sys.executable))
SHARED = os.path.abspath(os.path.join(ROOT, "..", "shared"))
FB_TRACE = os.environ.get("FB_TRACE", os.path.join(SHARED, "traces", "FB2010-1Hr-150-0.txt"))

#: target -> (make variables for its smoke size, what it needs here), in the order they run
SMOKE: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "readme": ([], ()),
    "docs": ([], ()),
    "docs-ref": ([], ()),
    "run": (["RUN_ARGS=--sim-only --schedulers sebf,dclas --json out/run/sim.json --plots out/run/plots"], ()),
    "results": (["FB_TRACE=/nonexistent/FB.txt"], ()),
    "reproduce": (["FIGS=varys-sec74-fifo", "REPRODUCE_ARGS=--workers 1 --quiet"], ("fb",)),
    "bench-sweep": (["SWEEP_ARGS=--grid tiny --workers 1,2"], ("fb",)),
    "bench": (["BENCH_ARGS=--trace traces/fb-like-120x16.txt --schedulers sebf --skip-10x "
               "--reschedule coflow --timeout 120",
               "SWEEP_ARGS=--grid tiny --workers 1,2"], ("fb",)),
    "p4": ([], ("p4c",)),
    "bench-ctl": (["CTL_ARGS=--rounds 6"], ("p4c", "bmv2")),
    "bench-scale": (["SCALE_ARGS=--edges 8,16 --coflows 20 --modes dclas,sebf --rounds 2 "
                     "--variants after --bmv2-max 8 --emulated-min 16 --placements all"], ("p4c", "bmv2")),
    "bench-scale-digest": (["SCALE_ARGS=--coflows 20 --rounds 2"], ("p4c", "bmv2")),
    "bench-scale-senders": (["SCALE_ARGS=--edges 16 --large 16 --coflows 20 --large-rounds 2 --rounds 2 "
                             "--bmv2-max 8 --emulated-min 9"], ("p4c", "bmv2", "fb")),
    "bench-p4": (["P4_BENCH_ARGS=--seconds 0.3 --rounds 1"], ("p4c", "bmv2", "root")),
    "ptf": (["PTF_TESTS=test_routing", "P4_SAVE=0"], ("p4c", "bmv2", "root")),
    "bench-failover": (["FAILOVER_ARGS=--kills 1"], ("p4c", "bmv2", "root", "etcd")),
    "p4-tofino": ([], ("bf-p4c",)),
    "p4-tofino-fit": ([], ("bf-p4c",)),
    "p4-tofino-sweep": (["TOFINO_SWEEP_BITS=15"], ("bf-p4c",)),
    "stop": ([], ()),
    "clean": ([], ()),
}

#: targets `make help` lists that this file does not run, and why
LEFT_OUT = {
    "test": "CI's own command (this file runs inside it)",
    "test-fast": "a subset of make test",
    "lint": "CI runs it before make test",
    "smoke": "this file",
    "lock": "re-resolves from PyPI, then runs make test and make smoke itself",
    "lock-compile": "re-resolves from PyPI (tests/test_lock.py checks the lock it writes)",
    "shell": "needs a running controller: tests/test_ctl_shell.py drives it against one",
    "results-emu": "saves a make run emulation's compare.json; tests/test_results.py saves such files",
}


def help_targets() -> list[str]:
    out = subprocess.run(["make", "--no-print-directory", "-s", "help"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        if not line.startswith("make "):
            continue
        head = line[5:].split(" - ")[0]
        for part in head.split("|"):
            m = re.match(r"\s*(?:make\s+)?([a-z][a-z0-9-]*)", part)
            if m and m.group(1) not in found:
                found.append(m.group(1))
    return found


def missing(need: str) -> str | None:
    from coflow.dataplane import toolchain
    if need == "fb":
        return None if os.path.exists(FB_TRACE) else f"FB trace not found at {FB_TRACE}"
    if need == "p4c":
        return None if toolchain.discover().p4c else "p4c-bm2-ss not found (make p4 needs it)"
    if need == "bmv2":
        return None if toolchain.discover().simple_switch_grpc else "simple_switch_grpc not found"
    if need == "bf-p4c":
        return None if toolchain.find_tofino_compiler() else toolchain.tofino_missing_reason()
    if need == "root":
        return None if os.geteuid() == 0 else "needs root (network namespaces)"
    if need == "etcd":
        return None if shutil.which("etcd") else "etcd not installed (Debian package etcd-server)"
    raise AssertionError(need)


def test_every_help_target_has_a_smoke_size_or_a_reason():
    listed = help_targets()
    assert {"run", "test", "bench", "bench-ctl", "reproduce"} <= set(listed), listed
    unknown = [t for t in listed if t not in SMOKE and t not in LEFT_OUT]
    assert not unknown, f"make help lists {unknown}: give each a smoke size in SMOKE or a reason in LEFT_OUT"
    stale = [t for t in list(SMOKE) + list(LEFT_OUT) if t not in listed]
    assert not stale, f"not in make help any more: {stale}"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A scratch copy of the repository (with .git: results record the commit), build/ kept."""
    dst = tmp_path_factory.mktemp("smoke") / "repo"
    shutil.copytree(ROOT, dst, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".venv-*", "out", "site", ".pytest_cache", ".hypothesis", "__pycache__"))
    # the venv is this run's: the copy's install inputs must never look newer than its stamp,
    # or make would reinstall the project editable from the copy (and the venv would import
    # a tree that is deleted after the test)
    for f in ("pyproject.toml", "requirements/dev.txt", "requirements/shell.txt"):
        os.utime(dst / f, (0, 0))
    return str(dst)


def _venv_imports_this_tree() -> str:
    r = subprocess.run([sys.executable, "-c", "import coflow, os; print(os.path.dirname(coflow.__file__))"],
                       capture_output=True, text=True, cwd="/", timeout=60)
    return r.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("target", list(SMOKE))
def test_target_runs_at_smoke_size(tree, target):
    variables, needs = SMOKE[target]
    for need in needs:
        why = missing(need)
        if why:
            pytest.skip(f"make {target}: {why}")
    env = dict(os.environ, FB_TRACE=FB_TRACE, COFLOW_SYSTEM_INSTALL="0")
    env.pop("MAKEFLAGS", None)
    env.pop("MAKELEVEL", None)
    cmd = ["make", "--no-print-directory", target, f"VENV={VENV}", f"SHARED={SHARED}",
           f"SHELL_VENV={os.path.join(ROOT, '.venv-shell')}", *variables]
    r = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env, timeout=900)
    tail = (r.stdout[-2500:] + "\n--- stderr ---\n" + r.stderr[-2500:])
    assert r.returncode == 0, f"make {target} exited {r.returncode}:\n{tail}"
    assert "Traceback (most recent call last)" not in r.stdout + r.stderr, tail
    assert _venv_imports_this_tree() == os.path.join(ROOT, "controller", "coflow"), \
        f"make {target} reinstalled the venv from the scratch copy"

"""A bare machine: no Mininet and no P4 toolchain (issue 18).

Each check runs in a subprocess started the way a user's pytest or CLI starts (``python -c`` in
the repository root, so the repository's own ``mininet/`` folder is on ``sys.path`` as it is
under ``python -m pytest``) with:

- every installed Mininet hidden by a meta-path finder (a namespace stand-in, such as the
  repository's ``mininet/`` folder, stays findable: that is the trap being checked);
- the P4 tools pointed at paths that do not exist (``$P4C``, ``$SIMPLE_SWITCH_GRPC``, ...) and
  ``/opt/p4/bin`` taken off ``PATH``.

Checked: the whole suite is collected (as many tests as without the hiding, no error), the tests
that need Mininet or the toolchain skip with their reasons, ``coflow run`` falls back to the
simulator with its one line, and no module of the package imports Mininet at module level except
the one that defines the Mininet node classes.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow   # each test starts Python subprocesses

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(REPO, "controller", "coflow")

#: Hides every regular ``mininet`` package; a namespace portion (a folder without __init__.py)
#: is still found, as it would be on a machine without Mininet.
HIDE_MININET = r'''
import importlib.abc, importlib.machinery, os, sys
class _NoMininet(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "mininet":
            return None
        dirs = [p for p in sys.path
                if not os.path.isfile(os.path.join(p or ".", "mininet", "__init__.py"))]
        spec = importlib.machinery.PathFinder.find_spec(name, dirs)
        if spec is None:
            raise ModuleNotFoundError("No module named 'mininet'", name="mininet")
        return spec
sys.meta_path.insert(0, _NoMininet())
'''


def bare_env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("P4C", "SIMPLE_SWITCH_GRPC", "SIMPLE_SWITCH_CLI", "BF_P4C"):
        env[var] = "/nonexistent/bare-machine/" + var.lower()
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith("/opt/p4"))
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_py(code: str, hide: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    prelude = HIDE_MININET if hide else ""
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=REPO, env=bare_env() if hide else None,
                          capture_output=True, text=True, timeout=timeout)


COLLECT = ("import sys, pytest\n"
           "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', 'tests']))\n")


def collected(out: str) -> int:
    m = re.search(r"^(\d+) tests? collected", out, re.M)
    assert m, out[-2000:]
    return int(m.group(1))


def test_the_hiding_works_and_the_repository_folder_is_not_mininet():
    r = run_py("from coflow.sysdeps import mininet_missing\n"
               "from coflow.dataplane.toolchain import discover\n"
               "print(repr(mininet_missing())); print(discover().missing())\n")
    assert r.returncode == 0, r.stderr
    why, missing = r.stdout.splitlines()
    # the repository's mininet/ folder is found as a namespace package, and is not taken for Mininet
    assert "Mininet is not installed" in why and "without __init__.py" in why, why
    assert "p4c-bm2-ss" in missing and "simple_switch_grpc" in missing


def test_everything_is_collected_on_a_bare_machine():
    full = run_py(COLLECT, hide=False)
    bare = run_py(COLLECT)
    assert bare.returncode == 0, bare.stdout[-3000:] + bare.stderr[-2000:]
    assert "error" not in bare.stdout.lower().split("collected")[-1], bare.stdout[-3000:]
    assert collected(bare.stdout) == collected(full.stdout)


def test_tests_that_need_mininet_or_p4_skip_with_their_reasons():
    files = ["tests/test_emu_integration.py", "tests/test_ctl_live_p4rt.py", "tests/test_emu_plan.py",
             "tests/test_emu_agent.py"]
    r = run_py("import sys, pytest\n"
               f"sys.exit(pytest.main(['-q', '-rs', '-p', 'no:cacheprovider', *{files!r}]))\n")
    out = r.stdout
    assert r.returncode == 0, out[-3000:] + r.stderr[-2000:]
    skips = [l for l in out.splitlines() if l.startswith("SKIPPED [")]
    emu = [l for l in skips if "test_emu_integration" in l]
    assert emu and all("Mininet is not installed" in l and "P4 toolchain not found" in l for l in emu), skips
    live = [l for l in skips if "test_ctl_live_p4rt" in l]
    assert live and all("simple_switch_grpc" in l for l in live), skips
    # the plan and agent tests do not need Mininet: they ran
    assert not [l for l in skips if "test_emu_plan" in l or "test_emu_agent" in l], skips
    # the loud per-reason summary (tests/conftest.py) counts them
    assert re.search(r"^SKIPPED +\d+: .*Mininet is not installed", out, re.M), out[-2000:]


def test_coflow_run_falls_back_to_the_simulator_with_one_line(tmp_path):
    trace = tmp_path / "tiny.txt"
    trace.write_text("4 3\n1 0 2 0 1 1 2:1.0\n2 10 1 2 2 0:0.5 1:0.5\n3 20 1 3 1 0:2.0\n")
    out = tmp_path / "compare.json"
    r = run_py("import sys\nfrom coflow.cli import main\n"
               f"sys.exit(main(['run', '--trace', {str(trace)!r}, '--schedulers', 'fair,dclas', "
               f"'--json', {str(out)!r}, '--plots', {str(tmp_path)!r}]))\n")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [l for l in r.stderr.splitlines() if "emulation skipped" in l]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("coflow run: Mininet/BMv2 emulation skipped: ")
    assert "P4 toolchain not found" in lines[0] and "Mininet is not installed" in lines[0]
    assert "Traceback" not in r.stderr
    rep = json.loads(out.read_text())
    assert rep   # the simulator's comparison was written


def _module_level_imports(tree: ast.Module):
    """Import statements executed when the module is imported (not inside a def)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        else:
            stack.extend(ast.iter_child_nodes(node))


def test_only_the_node_classes_import_mininet_at_module_level():
    offenders = []
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            tree = ast.parse(open(path).read(), path)
            for node in _module_level_imports(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""])
                if any(n == "mininet" or n.startswith("mininet.") for n in names):
                    offenders.append(f"{os.path.relpath(path, REPO)}:{node.lineno}")
    assert offenders and all(o.startswith("controller/coflow/emu/nodes.py:") for o in offenders), offenders

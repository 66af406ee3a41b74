"""System packages the emulation and the tests use, found or installed on first use.

``make test`` and ``make run`` call ``python -m coflow.sysdeps ensure`` first. It checks each
:data:`NEEDS` entry (a Python module that must be a *real* package, or programs on PATH) and,
when something is missing:

- as root on a machine with ``apt-get``, by default, it installs the missing Debian packages
  (``--no-install-recommends``; one line saying so, apt's own output in a log file);
- otherwise, or with ``COFLOW_SYSTEM_INSTALL=0``, it prints one line naming what is missing,
  and the tests that need it skip with that reason (``tests/conftest.py``).

It never fails the make target: a machine without these packages still runs every test that
does not need them. Only the standard library is used, so it runs before the venv exists.

:func:`mininet_missing` is the one check of Mininet in the package: the repository's own
``mininet/`` folder (notes and a script, no ``__init__.py``) is a *namespace* package when the
repository root is on ``sys.path`` (``python -m pytest``, ``python -c``), so ``import mininet``
succeeds there and only ``mininet.node`` fails. A namespace package is never taken for Mininet.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

#: ``COFLOW_SYSTEM_INSTALL=0`` turns the apt step off (default on: root + apt-get installs).
INSTALL_VAR = "COFLOW_SYSTEM_INSTALL"


@dataclass(frozen=True)
class Need:
    """One Debian package, what it is for, and how to tell it is there."""

    package: str
    purpose: str
    module: str | None = None          # a Python package that must be importable (real, not namespace)
    programs: tuple[str, ...] = ()     # programs that must be on PATH

    def missing(self) -> bool:
        if self.module and real_package_missing(self.module):
            return True
        return any(shutil.which(p) is None for p in self.programs)


NEEDS: tuple[Need, ...] = (
    Need("mininet", "the Mininet emulation (make run, emulation tests)", module="mininet"),
    Need("ethtool", "NIC offloads off on emulated hosts", programs=("ethtool",)),
    Need("iproute2", "namespaces, veths and the emulated traffic manager", programs=("ip", "tc")),
    Need("procps", "per-namespace TCP settings", programs=("sysctl",)),
    Need("python3-thrift", "BMv2's simple_switch_CLI", module="thrift"),
)


def real_package_missing(name: str) -> str | None:
    """Why the top-level package ``name`` is not usable here (None if it is). A namespace
    package (a folder without ``__init__.py`` that happens to be on ``sys.path``) does not count."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as e:
        return f"{name} is not importable ({e})"
    if spec is None:
        return f"{name} is not installed"
    if spec.origin in (None, "namespace"):
        where = ", ".join(spec.submodule_search_locations or ())
        return f"{name} is not installed (only a folder without __init__.py: {where})"
    return None


def mininet_missing() -> str | None:
    """Why Mininet cannot be used by this Python (None if it can)."""
    why = real_package_missing("mininet")
    if why:
        return f"Mininet is not installed (Debian package mininet; {why})"
    return None


def missing(needs: tuple[Need, ...] = NEEDS) -> list[Need]:
    return [n for n in needs if n.missing()]


def can_install() -> str | None:
    """Why this process cannot install Debian packages (None if it can)."""
    if os.environ.get(INSTALL_VAR, "1") == "0":
        return f"{INSTALL_VAR}=0"
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("apt-get") is None:
        return "no apt-get"
    return None


def _apt(args: list[str], log) -> int:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run(["apt-get", *args], stdout=log, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, env=env).returncode


def install(packages: list[str], log_path: str) -> bool:
    """``apt-get install`` the packages (``apt-get update`` once and retry if that fails)."""
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    with open(log_path, "ab") as log:
        cmd = ["install", "-y", "-q", "--no-install-recommends", *packages]
        if _apt(cmd, log) == 0:
            return True
        return _apt(["update", "-q"], log) == 0 and _apt(cmd, log) == 0


def ensure(log_path: str, out=sys.stderr) -> list[Need]:
    """Install what is missing when allowed; one line either way. Returns what is still missing."""
    miss = missing()
    if not miss:
        return []
    names = " ".join(n.package for n in miss)
    why_not = can_install()
    if why_not is None:
        print(f"sysdeps: installing Debian packages {names} (first use; {INSTALL_VAR}=0 to skip; "
              f"log {log_path})", file=out, flush=True)
        ok = install([n.package for n in miss], log_path)
        importlib.invalidate_caches()
        miss = missing(tuple(miss))
        if not miss:
            return []
        why_not = (f"installed, but not visible to {sys.executable}" if ok
                   else f"apt-get failed, see {log_path}")
    print(f"sysdeps: missing {' '.join(n.package for n in miss)} ({why_not}): "
          + "; ".join(f"{n.package} is for {n.purpose}" for n in miss)
          + "; the tests that need them skip", file=out)
    return miss


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("ensure", help="install missing Debian packages when root with apt (one line)")
    e.add_argument("--log", default=os.path.join("out", "sysdeps-apt.log"))
    sub.add_parser("check", help="list each need and whether it is there; exit 1 if any is missing")
    args = ap.parse_args(argv)
    if args.cmd == "ensure":
        ensure(args.log)
        return 0
    miss = missing()
    for n in NEEDS:
        print(f"{n.package:<15} {'MISSING' if n in miss else 'ok':<8} {n.purpose}")
    return 1 if miss else 0


if __name__ == "__main__":
    sys.exit(main())

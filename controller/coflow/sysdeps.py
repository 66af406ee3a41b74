"""System packages the emulation and the tests use, found or installed on first use.

``make test`` and ``make run`` call ``python -m coflow.sysdeps ensure`` first. It checks each
:data:`NEEDS` entry (a Python module that must be a *real* package, or programs on PATH) and,
when something is missing:

- as root on a machine with ``apt-get``, by default, it installs the missing Debian packages
  (``--no-install-recommends``; one line saying so, apt's own output in a log file); when
  another package manager holds dpkg's lock (unattended upgrades on a fresh cloud machine), apt
  waits for it up to :data:`LOCK_WAIT_S` (``-o DPkg::Lock::Timeout``, ``COFLOW_APT_LOCK_WAIT_S``
  to change it) and one more line says that it is waiting and for whom;
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
#: How long apt waits for dpkg's lock held by another package manager (seconds).
LOCK_WAIT_S = 600
LOCK_WAIT_VAR = "COFLOW_APT_LOCK_WAIT_S"
#: The locks apt and dpkg take (fcntl write locks); the frontend lock is apt's, taken first.
DPKG_LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")


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
    Need("etcd-server", "HA across machines (coflow ctl run --etcd) and its tests", programs=("etcd",)),
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


def lock_wait_s() -> int:
    """The lock wait: ``$COFLOW_APT_LOCK_WAIT_S`` when it is a whole number >= 0, else the default."""
    v = os.environ.get(LOCK_WAIT_VAR, "")
    return int(v) if v.isdigit() else LOCK_WAIT_S


def apt_command(args: list[str], lock_wait: int) -> list[str]:
    """The apt-get command line: it waits up to ``lock_wait`` s for dpkg's lock instead of
    failing at once with "Could not get lock" (apt >= 1.9.11: ``DPkg::Lock::Timeout``)."""
    return ["apt-get", "-o", f"DPkg::Lock::Timeout={int(lock_wait)}", *args]


def lock_holder(paths: tuple[str, ...] = DPKG_LOCKS) -> tuple[str, int] | None:
    """(lock file, pid) of a process holding one of dpkg's locks, or None. Asks with F_GETLK,
    which takes nothing: a lock that is free stays free."""
    import fcntl
    import struct
    fmt = "hhqqi4x"                    # struct flock on Linux x86-64 / arm64
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            req = struct.pack(fmt, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            l_type, _, _, _, pid = struct.unpack(fmt, fcntl.fcntl(fd, fcntl.F_GETLK, req))
        except OSError:
            continue
        finally:
            os.close(fd)
        if l_type != fcntl.F_UNLCK:
            return path, pid
    return None


def waiting_line(holder: tuple[str, int], lock_wait: int) -> str:
    path, pid = holder
    return (f"sysdeps: waiting up to {lock_wait} s for the package manager's lock ({path} held by "
            f"pid {pid}, {_comm(pid)}; {LOCK_WAIT_VAR} to change)")


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() or "?"
    except OSError:
        return "?"


def _apt(args: list[str], log, lock_wait: int) -> int:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run(apt_command(args, lock_wait), stdout=log, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, env=env).returncode


def install(packages: list[str], log_path: str, out=sys.stderr) -> bool:
    """``apt-get install`` the packages (``apt-get update`` once and retry if that fails),
    waiting for dpkg's lock (one line when another process holds it)."""
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    wait = lock_wait_s()
    holder = lock_holder()
    if holder is not None:
        print(waiting_line(holder, wait), file=out, flush=True)
    with open(log_path, "ab") as log:
        cmd = ["install", "-y", "-q", "--no-install-recommends", *packages]
        if _apt(cmd, log, wait) == 0:
            return True
        return _apt(["update", "-q"], log, wait) == 0 and _apt(cmd, log, wait) == 0


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
        ok = install([n.package for n in miss], log_path, out)
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

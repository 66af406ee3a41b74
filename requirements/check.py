#!/usr/bin/env python3
"""Refuse an environment whose installed versions differ from a lock file.

    python requirements/check.py requirements/dev.txt

Reads the lock (``name==version`` lines as ``uv pip compile`` writes them, with environment
markers), keeps the lines whose marker holds in this interpreter, and compares each with the
version this interpreter imports (the first distribution on sys.path: a venv's own package
before a system one). Exit 0 and one summary line when all match; exit 1 and one line per
difference otherwise. Only the standard library and pip's vendored ``packaging``."""
from __future__ import annotations

import re
import sys
from importlib import metadata

try:
    from packaging.markers import Marker
    from packaging.utils import canonicalize_name
except ImportError:  # a venv with pip only: pip vendors packaging
    from pip._vendor.packaging.markers import Marker  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?\s*$")


class LockError(ValueError):
    """A line of the lock that is neither a pin, a hash, a comment nor blank."""


def read_lock(path: str) -> list[tuple[str, str, str | None, int]]:
    """(name, version, marker or None, line number) of every pin in the lock."""
    pins = []
    with open(path) as f:
        for no, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#") or line.startswith("--hash="):
                continue
            m = PIN.match(line)
            if m is None:
                raise LockError(f"{path}:{no}: not a 'name==version' pin: {line[:80]}")
            pins.append((m.group(1), m.group(3), m.group(4), no))
    if not pins:
        raise LockError(f"{path}: no pins")
    return pins


def differences(path: str) -> tuple[list[str], int]:
    """One line per locked package whose installed version differs (or is missing), and how
    many pins apply to this interpreter."""
    out, n = [], 0
    for name, version, marker, no in read_lock(path):
        if marker and not Marker(marker).evaluate():
            continue
        n += 1
        try:
            have = metadata.version(canonicalize_name(name))
        except metadata.PackageNotFoundError:
            out.append(f"{path}:{no}: {name}=={version} is locked but not installed")
            continue
        if have != version:
            out.append(f"{path}:{no}: {name}=={version} is locked but {have} is installed")
    return out, n


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check.py LOCKFILE", file=sys.stderr)
        return 2
    try:
        bad, n = differences(argv[0])
    except (OSError, LockError) as e:
        print(f"lock check: {e}", file=sys.stderr)
        return 2
    for line in bad:
        print(f"lock check: {line}", file=sys.stderr)
    if bad:
        print(f"lock check: {len(bad)} of {n} locked packages differ from {argv[0]} "
              "(rm -rf the venv and run make again)", file=sys.stderr)
        return 1
    print(f"lock check: {n} packages installed exactly as {argv[0]} locks them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

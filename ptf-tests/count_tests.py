#!/usr/bin/env python3
"""Print how many PTF tests ptf-tests/ holds (no ptf, scapy or toolchain needed).

A test is a class in a ptf-tests/test_*.py file whose name does not start with "_" and that
defines or inherits runTest. Used by `make test` for its skip line when the toolchain is absent.
"""
import ast
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _has_run(c: ast.ClassDef, classes: dict, seen: tuple = ()) -> bool:
    """``c`` defines runTest, or inherits it from a class of the same file."""
    if any(isinstance(f, ast.FunctionDef) and f.name == "runTest" for f in c.body):
        return True
    for b in c.bases:
        name = getattr(b, "id", None)
        if name in classes and name not in seen:
            if _has_run(classes[name], classes, seen + (c.name,)):
                return True
    return False


def count(directory: str = HERE) -> int:
    n = 0
    for path in sorted(glob.glob(os.path.join(directory, "test_*.py"))):
        tree = ast.parse(open(path).read(), path)
        classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}

        n += sum(1 for name, c in classes.items() if not name.startswith("_") and _has_run(c, classes))
    return n


if __name__ == "__main__":
    print(count(sys.argv[1] if len(sys.argv) > 1 else HERE))

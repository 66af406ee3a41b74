"""The code's shape, checked by ``make lint``: no import circle among a package's modules, and no
Python file outside the tests over :data:`MAX_LINES` lines.

Imports are read from the source (``ast``), every one of them: at module level, inside functions
(the lazy imports a driver uses to keep start-up light) and under ``TYPE_CHECKING``.  A lazy
import is still a dependency, so a circle through one counts.  Each arrow goes from a module to
the module it names: ``from .sched import base`` points at ``sched/base.py``, ``from .sched import
REGISTRY`` at ``sched/__init__.py``.  A package's ``__init__`` importing its own submodules (to
register them, to re-export their names) is how a package is assembled, not a circle, and is
left out; a submodule importing its package's ``__init__`` is kept.

``python -m coflow.devtools.layout [--max-lines N] [--package DIR ...] [--files PATH ...]``
prints every circle and every long file and exits 1 if it found any.
"""
from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from collections.abc import Iterable

MAX_LINES = 800


def _module_name(root: str, path: str) -> str:
    """``root/a/b.py`` -> ``pkg.a.b`` and ``root/a/__init__.py`` -> ``pkg.a``, where ``pkg`` is
    ``root``'s own name."""
    rel = os.path.relpath(path, os.path.dirname(os.path.abspath(root)))
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(root: str) -> dict[str, str]:
    """Every module of the package at ``root`` (a directory with ``__init__.py``): name -> path."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "_")))   # _gen: generated stubs
        if "__init__.py" not in files:
            dirs[:] = []
            continue
        for f in sorted(files):
            if f.endswith(".py"):
                p = os.path.join(d, f)
                out[_module_name(root, p)] = p
    return out


def _imports(path: str, name: str, is_pkg: bool) -> Iterable[tuple[str, str | None]]:
    """(module, attribute) for every import in ``path``: attribute is the name a ``from`` import
    takes (which may be a submodule), None for ``import x.y``."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    pkg = name if is_pkg else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                yield mod, a.name


def graph(root: str) -> dict[str, set[str]]:
    """module -> the package's modules it imports."""
    mods = modules(root)
    g: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        is_pkg = path.endswith("__init__.py")
        for mod, attr in _imports(path, m, is_pkg):
            if attr is not None and f"{mod}.{attr}" in mods:
                target = f"{mod}.{attr}"
            elif mod in mods:
                target = mod
            else:   # ``import a.b.c`` or a name outside the package: its longest known prefix
                parts = mod.split(".")
                while parts and ".".join(parts) not in mods:
                    parts.pop()
                if not parts:
                    continue
                target = ".".join(parts)
            if target == m or (is_pkg and target.startswith(m + ".")):
                continue    # a package's __init__ assembling itself
            g[m].add(target)
    return g


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted; one
    circle per component, however many loops it holds."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        # iterative DFS: a deep package must not hit the recursion limit
        work = [(v, iter(sorted(g[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def cycle_path(g: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One loop through the component's first module, for the message (a -> b -> a): the
    shortest way back to it (breadth first, inside the component)."""
    start, members = comp[0], set(comp)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(g[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp


def long_files(paths: Iterable[str], max_lines: int = MAX_LINES) -> list[tuple[str, int]]:
    out = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            n = sum(1 for _ in f)
        if n > max_lines:
            out.append((p, n))
    return out


def tracked_python(repo: str) -> list[str]:
    """The repository's Python files outside ``tests/`` (git's list when there is one)."""
    try:
        r = subprocess.run(["git", "-C", repo, "ls-files", "*.py"], capture_output=True, text=True, check=True)
        files = r.stdout.split()
    except (OSError, subprocess.CalledProcessError):
        files = [os.path.relpath(os.path.join(d, f), repo) for d, _, fs in os.walk(repo)
                 for f in fs if f.endswith(".py") and "/." not in d]
    return [os.path.join(repo, f) for f in files if not f.startswith("tests/") and os.path.exists(os.path.join(repo, f))]


def main(argv: list[str] | None = None) -> int:
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    p = argparse.ArgumentParser(prog="python -m coflow.devtools.layout", description=__doc__.split("\n\n")[0])
    p.add_argument("--package", action="append", help="package directory to check for import circles "
                   "(default: controller/coflow)")
    p.add_argument("--files", nargs="*", help="files to check for length (default: git's Python files outside tests/)")
    p.add_argument("--max-lines", type=int, default=MAX_LINES)
    args = p.parse_args(argv)
    bad = 0
    for root in args.package or [os.path.join(repo, "controller", "coflow")]:
        g = graph(root)
        for comp in circles(g):
            bad += 1
            print(f"import circle: {' -> '.join(cycle_path(g, comp))}"
                  + (f" (component: {', '.join(comp)})" if len(comp) > 2 else ""))
    files = args.files if args.files is not None else tracked_python(repo)
    for path, n in long_files(files, args.max_lines):
        bad += 1
        print(f"too long: {os.path.relpath(path)}: {n} lines (at most {args.max_lines}; split it along a seam)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

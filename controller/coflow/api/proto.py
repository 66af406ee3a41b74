"""Compile ``coflow.proto`` with grpcio-tools into a cache directory and import the result.

Generated code is never committed: the first import of :func:`load` compiles the proto (about a
tenth of a second) into a directory keyed by a hash of the proto, the grpcio-tools version and
the protobuf runtime version, so a changed proto or an upgraded toolchain regenerates. Cache
roots, first usable wins:

1. ``$COFLOW_PROTO_CACHE`` when set,
2. ``<repo>/build/proto`` when the package runs from a source checkout,
3. ``<tmp>/coflow-proto-<uid>`` (a read-only checkout falls back here).

A root is usable when it already holds a complete build for this key (even read-only), or when
a build can be written into it. Builds are written into a scratch directory and renamed into
place, so concurrent first imports (several Mininet hosts starting clients at once) never see a
half-written module.

The generated modules live in a private top-level package, ``coflow_v1_gen``, loaded from the
cache by path (``sys.path`` is not touched). They are plain descriptor-based modules, so they
work with protobuf's upb and pure-Python implementations alike (so do the P4Runtime stubs,
:mod:`coflow.dataplane.p4rt_gen`, built into the same cache roots).

``python -m coflow.api.proto [--out DIR]`` builds ahead of time (e.g. at install time) and prints
the directory.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

PROTO = Path(__file__).with_name("coflow.proto")
GEN_PACKAGE = "coflow_v1_gen"
#: bump when the layout of the generated directory changes
LAYOUT = "1"
_MARKER = ".complete"

_lock = threading.Lock()
_loaded: tuple[ModuleType, ModuleType] | None = None


class ProtoBuildError(RuntimeError):
    pass


def dist_versions(*dists: str) -> str:
    """``name=version,...`` of installed distributions (``?`` when missing): part of a cache key."""
    from importlib.metadata import PackageNotFoundError, version
    out = []
    for dist in dists:
        try:
            out.append(f"{dist}={version(dist)}")
        except PackageNotFoundError:
            out.append(f"{dist}=?")
    return ",".join(out)


def _versions() -> str:
    return dist_versions("grpcio-tools", "grpcio", "protobuf")


def cache_key() -> str:
    h = hashlib.sha256()
    h.update(PROTO.read_bytes())
    h.update(f"\0{_versions()}\0{LAYOUT}".encode())
    return h.hexdigest()[:16]


def cache_roots() -> list[Path]:
    roots = []
    env = os.environ.get("COFLOW_PROTO_CACHE")
    if env:
        roots.append(Path(env))
    repo = Path(__file__).resolve().parents[3]
    if (repo / "pyproject.toml").is_file() and (repo / "controller" / "coflow").is_dir():
        roots.append(repo / "build" / "proto")
    uid = os.getuid() if hasattr(os, "getuid") else 0
    roots.append(Path(tempfile.gettempdir()) / f"coflow-proto-{uid}")
    return roots


def _complete(d: Path) -> bool:
    return (d / _MARKER).is_file() and (d / GEN_PACKAGE / "coflow_pb2.py").is_file() \
        and (d / GEN_PACKAGE / "coflow_pb2_grpc.py").is_file()


def _trusted(root: Path) -> bool:
    """Code is imported from the cache: skip a shared-tmp root that another user owns."""
    try:
        st = root.stat()
    except OSError:   # missing or unreachable: creating it reports the real problem
        return True
    return not hasattr(os, "getuid") or st.st_uid == os.getuid() or not str(root).startswith(tempfile.gettempdir())


def ensure_built() -> Path:
    """The directory holding ``coflow_v1_gen/`` for the current proto, building it if needed."""
    return build_in_cache(cache_key(), _complete, _build, "the coflow API stubs", ProtoBuildError)


def build_in_cache(key: str, complete, build, what: str, error=ProtoBuildError) -> Path:
    """``root/key`` in the first usable cache root: an existing complete build
    (``complete(d)``), else one made by ``build(d)`` (which writes a scratch directory beside
    ``d`` and renames it onto ``d``). Raises ``error`` naming every root that could not serve."""
    errors = []
    for root in cache_roots():
        d = root / key
        if not _trusted(root):
            errors.append(f"{root}: owned by another user")
            continue
        if complete(d):
            return d
        try:
            root.mkdir(parents=True, exist_ok=True)
            if d.exists() and not complete(d):
                shutil.rmtree(d)
            d.parent.mkdir(parents=True, exist_ok=True)
            return build(d)
        except OSError as e:
            errors.append(f"{root}: {e.strerror or e}")
    raise error(f"cannot build {what} in any cache directory: " + "; ".join(errors))


def _build(d: Path) -> Path:
    """Compile into a scratch directory beside ``d`` and rename it onto ``d`` (which must not exist)."""
    try:
        from grpc_tools import protoc
        import grpc_tools
    except ImportError:
        raise ProtoBuildError("grpcio-tools is not installed: it compiles coflow.proto "
                              "(pip install -e '.[ctl]', or `make venv`)") from None
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=d.parent))
    try:
        src = scratch / "src" / GEN_PACKAGE
        out = scratch / "out"
        src.mkdir(parents=True)
        (out / GEN_PACKAGE).mkdir(parents=True)
        shutil.copyfile(PROTO, src / "coflow.proto")
        include = Path(grpc_tools.__file__).with_name("_proto")
        args = ["grpc_tools.protoc", f"-I{scratch / 'src'}", f"-I{include}",
                f"--python_out={out}", f"--grpc_python_out={out}", f"{GEN_PACKAGE}/coflow.proto"]
        rc = protoc.main(args)
        if rc != 0:
            raise ProtoBuildError(f"{PROTO}: grpc_tools.protoc failed with exit code {rc}")
        (out / GEN_PACKAGE / "__init__.py").write_text(
            '"""Generated from controller/coflow/api/coflow.proto by coflow.api.proto; do not edit."""\n')
        (out / _MARKER).write_text(_versions() + "\n")
        try:
            os.rename(out, d)
        except OSError:
            if not _complete(d):   # lost a race to a concurrent builder that has not finished?
                raise
        return d
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def load_package(d: Path, name: str) -> None:
    """Register the generated top-level package ``d/name`` by path (``sys.path`` untouched)."""
    if name in sys.modules:
        return
    pkg_dir = d / name
    spec = importlib.util.spec_from_file_location(
        name, pkg_dir / "__init__.py", submodule_search_locations=[str(pkg_dir)])
    assert spec is not None and spec.loader is not None
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[name] = pkg
    try:
        spec.loader.exec_module(pkg)
    except BaseException:
        del sys.modules[name]
        raise


def _import_from(d: Path) -> tuple[ModuleType, ModuleType]:
    load_package(d, GEN_PACKAGE)
    pb2 = importlib.import_module(f"{GEN_PACKAGE}.coflow_pb2")
    pb2_grpc = importlib.import_module(f"{GEN_PACKAGE}.coflow_pb2_grpc")
    return pb2, pb2_grpc


def load() -> tuple[ModuleType, ModuleType]:
    """``(coflow_pb2, coflow_pb2_grpc)``, compiled on first use."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _import_from(ensure_built())
        return _loaded


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m coflow.api.proto", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="build into this directory (default: the first usable cache root)")
    args = ap.parse_args(argv)
    try:
        if args.out:
            d = Path(args.out) / cache_key()
            if not _complete(d):
                d.parent.mkdir(parents=True, exist_ok=True)
                if d.exists():
                    shutil.rmtree(d)
                _build(d)
        else:
            d = ensure_built()
    except (OSError, ProtoBuildError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Find the P4 toolchain: p4c-bm2-ss and simple_switch_grpc (and simple_switch_CLI), and the
open-source Tofino compiler (bf-p4c, or its p4c-barefoot binary) for ``make p4-tofino``.

Order: the environment variable (P4C, SIMPLE_SWITCH_GRPC, SIMPLE_SWITCH_CLI), then PATH,
then /opt/p4/bin. ``python -m coflow.dataplane.toolchain --check`` exits 0 when both required
tools are found and otherwise prints one line saying what is missing (the Makefile's skip line).
It also builds the one ``simple_switch_grpc`` command line that the tests, the controller's
benchmarks and the Mininet switch class start.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass

DEFAULT_DIRS = ("/opt/p4/bin",)

TOOLS = {
    # name: environment variable
    "p4c-bm2-ss": "P4C",
    "simple_switch_grpc": "SIMPLE_SWITCH_GRPC",
    "simple_switch_CLI": "SIMPLE_SWITCH_CLI",
    "bf-p4c": "BF_P4C",            # the Tofino compiler's driver ...
    "p4c-barefoot": "BF_P4C",      # ... or its backend binary
}
TOFINO_COMPILERS = ("bf-p4c", "p4c-barefoot")
REQUIRED = ("p4c-bm2-ss", "simple_switch_grpc")


def free_port() -> int:
    """A TCP port the kernel considers free on 127.0.0.1 (bind to 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def switch_command(binary: str, device_id: int, interfaces: dict[int, str], thrift_port: int,
                   grpc: int | str, ipc: str, log_level: str = "off", log_file: str | None = None,
                   priority_queues: int = 8, extra: tuple[str, ...] | list[str] = (),
                   target_extra: tuple[str, ...] | list[str] = ()) -> list[str]:
    """``simple_switch_grpc`` without a pipeline (the controller pushes it over P4Runtime), with
    its own device id, Thrift port and notifications socket (several switches share a host),
    ``--priority-queues`` and gRPC on ``grpc`` (a port on 127.0.0.1, or an address such as
    ``unix:/path``). ``log_level`` off unless asked: BMv2 formats every message otherwise.
    ``target_extra``: simple_switch_grpc's own options (after ``--``), e.g. its gRPC server's TLS
    (``--grpc-server-ssl --grpc-server-cacert F --grpc-server-cert F --grpc-server-key F
    [--grpc-server-with-client-auth]``: :func:`grpc_tls_args`)."""
    addr = f"127.0.0.1:{grpc}" if isinstance(grpc, int) else grpc
    cmd = [binary, "--device-id", str(device_id), "--thrift-port", str(thrift_port),
           "--notifications-addr", f"ipc://{ipc}", "--log-level", log_level]
    if log_file and log_level != "off":
        cmd += ["--log-file", log_file, "--log-flush"]
    for port, ifname in sorted(interfaces.items()):
        cmd += ["-i", f"{port}@{ifname}"]
    return cmd + [*extra, "--no-p4", "--", "--grpc-server-addr", addr, "--priority-queues", str(priority_queues),
                  *target_extra]


def grpc_tls_args(ca: str, cert: str, key: str, client_auth: bool = False) -> list[str]:
    """simple_switch_grpc's options for a P4Runtime server over TLS (PEM files)."""
    return ["--grpc-server-ssl", "--grpc-server-cacert", ca, "--grpc-server-cert", cert,
            "--grpc-server-key", key] + (["--grpc-server-with-client-auth"] if client_auth else [])


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_tool(name: str, env: dict[str, str] | None = None,
              dirs: tuple[str, ...] = DEFAULT_DIRS) -> str | None:
    """Absolute path of ``name`` or None."""
    env = dict(os.environ) if env is None else env
    var = TOOLS.get(name)
    if var and env.get(var):
        cand = env[var]
        if os.sep not in cand:
            cand = shutil.which(cand, path=env.get("PATH", "")) or cand
        return os.path.abspath(cand) if _executable(cand) else None
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return os.path.abspath(found)
    for d in dirs:
        cand = os.path.join(d, name)
        if _executable(cand):
            return cand
    return None


@dataclass(frozen=True)
class Toolchain:
    p4c: str | None
    simple_switch_grpc: str | None
    simple_switch_cli: str | None

    @property
    def complete(self) -> bool:
        return bool(self.p4c and self.simple_switch_grpc)

    def missing(self) -> list[str]:
        return [n for n, p in (("p4c-bm2-ss", self.p4c),
                               ("simple_switch_grpc", self.simple_switch_grpc)) if not p]


def find_tofino_compiler(env: dict[str, str] | None = None,
                         dirs: tuple[str, ...] = DEFAULT_DIRS) -> str | None:
    """bf-p4c (else p4c-barefoot): ``$BF_P4C``, then PATH, then ``dirs``."""
    for name in TOFINO_COMPILERS:
        path = find_tool(name, env, dirs)
        if path:
            return path
    return None


def tofino_missing_reason() -> str:
    return ("bf-p4c not found (set BF_P4C, or put bf-p4c / p4c-barefoot on PATH or in "
            + ", ".join(DEFAULT_DIRS) + ")")


def bmv2_build(binary: str | None = None) -> dict:
    """What a benchmark or a PTF summary says about the switch it ran: the binary, its
    ``--version``, and whether BMv2's logging macros are compiled in (their per-packet format
    strings, e.g. "Applying table", are in the binary only then; such a build is slower per
    packet even at ``--log-level off``, p4src/README.md)."""
    path = binary or find_tool("simple_switch_grpc")
    out: dict = {"binary": path, "version": None, "logging_macros": None}
    if not path:
        return out
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
        out["version"] = (r.stdout or r.stderr).strip().splitlines()[0] if (r.stdout or r.stderr).strip() else None
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        with open(path, "rb") as f:
            out["logging_macros"] = b"Applying table" in f.read()
    except OSError:
        pass
    return out


def discover(env: dict[str, str] | None = None, dirs: tuple[str, ...] = DEFAULT_DIRS) -> Toolchain:
    return Toolchain(find_tool("p4c-bm2-ss", env, dirs),
                     find_tool("simple_switch_grpc", env, dirs),
                     find_tool("simple_switch_CLI", env, dirs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 0 if p4c-bm2-ss and simple_switch_grpc are found, else print why")
    ap.add_argument("--print", dest="tool", choices=sorted(TOOLS) + ["tofino"],
                    help="print the path of one tool (exit 1 if absent); tofino: bf-p4c or "
                         "p4c-barefoot")
    args = ap.parse_args(argv)
    tc = discover()
    if args.tool:
        path = find_tofino_compiler() if args.tool == "tofino" else find_tool(args.tool)
        if not path:
            return 1
        print(path)
        return 0
    if args.check:
        if tc.complete:
            return 0
        print("P4 toolchain not found: missing " + ", ".join(tc.missing())
              + " (looked in $P4C/$SIMPLE_SWITCH_GRPC, PATH, " + ", ".join(DEFAULT_DIRS) + ")")
        return 1
    for name, path in (("p4c-bm2-ss", tc.p4c), ("simple_switch_grpc", tc.simple_switch_grpc),
                       ("simple_switch_CLI", tc.simple_switch_cli)):
        print(f"{name}: {path or 'not found'}")
    return 0 if tc.complete else 1


if __name__ == "__main__":
    sys.exit(main())

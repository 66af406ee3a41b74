"""The one way this project starts a BMv2 ``simple_switch_grpc``: :class:`Bmv2`.

The controller's tests and benchmarks (``coflow.ctl.bmv2``), the Mininet switch class
(``coflow.emu.nodes.BMv2Switch``) and the PTF testbed start their switches through it. A switch
runs ``--no-p4`` (the controller pushes the pipeline over P4Runtime) with ``--priority-queues 8``,
its own device id, Thrift port and notifications socket, gRPC on a free 127.0.0.1 port or, inside
a network namespace of its own, on a unix socket (the namespace's loopback is not ours, the
filesystem is shared), and ``--log-level off`` unless a log file is asked for. ``restart()`` keeps
the gRPC address, device id and interfaces: a controller sees the same switch come back empty.
The process runs in a session of its own and is stopped as a process group.
"""
from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import tempfile
import time

from . import toolchain
from .toolchain import free_port

_seq = itertools.count()
_handed_out: set[int] = set()


def _unique_port() -> int:
    """A free port (:func:`free_port`) this process has not handed out before: the kernel may
    give one port twice to back-to-back picks while no switch has bound it yet, and a port bound
    inside a network namespace looks free from the host (two switches of one namespace would
    then share a Thrift port)."""
    while True:
        p = free_port()
        if p not in _handed_out:
            _handed_out.add(p)
            return p


class Bmv2:
    """One ``simple_switch_grpc --no-p4`` process; ``start()`` / ``stop()`` / ``restart()``."""

    def __init__(self, device_id: int, interfaces: dict[int, str] | None = None,
                 grpc_port: int | None = None, netns: str | None = None,
                 log_file: str | None = None, binary: str | None = None, *,
                 log_level: str | None = None, nice: int = 0, run_dir: str | None = None,
                 name: str | None = None, tag: str = "coflow-ctl", extra_args: tuple[str, ...] = (),
                 target_args: tuple[str, ...] = ()):
        self.device_id = device_id
        self.interfaces = dict(interfaces or {})
        self.netns = netns
        self.grpc_port = None if netns else (grpc_port or _unique_port())
        self.log_file = log_file
        self.log_level = log_level or ("info" if log_file else "off")
        self.nice = nice
        self.extra_args = tuple(extra_args)   # more simple_switch_grpc options (before --no-p4)
        self.target_args = tuple(target_args)  # its target options (after --), e.g. gRPC TLS
        self.name = name or f"bmv2-{device_id}"
        self.run_dir = run_dir or tempfile.gettempdir()
        found = binary or toolchain.find_tool("simple_switch_grpc")
        if not found:
            raise RuntimeError("simple_switch_grpc not found (toolchain.discover())")
        self.binary: str = found
        self.proc: subprocess.Popen | None = None
        self.thrift_port = 0
        stem = f"{tag}-{os.getpid()}-{next(_seq)}-{self.name}-{device_id}"
        self.ipc = os.path.join(self.run_dir, stem + ".ipc")
        self.sock = os.path.join(self.run_dir, stem + ".sock")

    @property
    def address(self) -> str:
        return f"unix:{self.sock}" if self.grpc_port is None else f"127.0.0.1:{self.grpc_port}"

    def command(self) -> list[str]:
        if not self.thrift_port:
            self.thrift_port = _unique_port()
        cmd = toolchain.switch_command(self.binary, self.device_id, self.interfaces, self.thrift_port,
                                       self.address, self.ipc, log_level=self.log_level,
                                       log_file=self.log_file, extra=self.extra_args,
                                       target_extra=self.target_args)
        if self.nice:
            # every thread inherits it (nice is per thread on Linux)
            cmd = ["nice", "-n", str(self.nice)] + cmd
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        return cmd

    def start(self, timeout: float = 20.0, stdout_path: str | None = None) -> "Bmv2":
        """Start the process and wait until its gRPC server accepts connections. Its output goes
        to ``stdout_path`` (appended) when given, else nowhere."""
        if self.grpc_port is None and os.path.exists(self.sock):
            os.unlink(self.sock)
        cmd = self.command()
        out = open(stdout_path, "ab") if stdout_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            if stdout_path:
                out.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout
        while not self._listening():
            if self.proc.poll() is not None:
                where = f"; see {stdout_path}" if stdout_path else f": {' '.join(cmd)}"
                raise RuntimeError(f"{self.name}: simple_switch_grpc (device {self.device_id}) exited "
                                   f"with {self.proc.returncode}{where}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name}: simple_switch_grpc (device {self.device_id}) did "
                                   f"not open {self.address} within {timeout:.0f} s")
            time.sleep(0.05)
        return self

    def _listening(self) -> bool:
        try:
            if self.grpc_port is None:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(0.2)
                    s.connect(self.sock)
                return True
            with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=0.2):
                return True
        except OSError:
            return False

    def _signal(self, p: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, kill: bool = False) -> None:
        """Stop the process group (SIGTERM, SIGKILL after 5 s; at once with ``kill``)."""
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            self._signal(p, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._signal(p, signal.SIGKILL)
                p.wait(timeout=5)
        for path in (self.ipc, self.sock):
            try:
                os.unlink(path)
            except OSError:
                pass

    def restart(self, kill: bool = True, timeout: float = 20.0, stdout_path: str | None = None) -> "Bmv2":
        self.stop(kill=kill)
        return self.start(timeout, stdout_path)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

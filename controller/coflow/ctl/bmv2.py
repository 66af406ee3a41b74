"""Start and stop simple_switch_grpc processes for tests and benchmarks (no Mininet).

A switch started here has no data-plane interfaces unless given some (BMv2 runs with zero
ports), its own free gRPC and Thrift ports (bound to port 0 first), a unique device id and a
unique notifications socket, ``--log-level off`` and ``--priority-queues 8``. The toolchain is
found through :mod:`coflow.dataplane.toolchain`.
"""
from __future__ import annotations

import itertools
import os
import socket
import subprocess
import tempfile
import time

from ..dataplane import toolchain
from ..dataplane.toolchain import free_port

_seq = itertools.count()


class Bmv2:
    """One ``simple_switch_grpc --no-p4`` process; ``start()``/``stop()``/``restart()``.

    ``restart()`` keeps the gRPC port, device id and interfaces: a controller sees the same
    switch come back empty (no pipeline, no state)."""

    def __init__(self, device_id: int, interfaces: dict[int, str] | None = None,
                 grpc_port: int | None = None, netns: str | None = None,
                 log_file: str | None = None, binary: str | None = None):
        self.device_id = device_id
        self.interfaces = dict(interfaces or {})
        self.netns = netns
        # in a namespace of its own the switch's loopback is not ours: gRPC on a unix socket
        # (the filesystem is shared)
        self.grpc_port = None if netns else (grpc_port or free_port())
        self.log_file = log_file
        self.binary = binary or toolchain.find_tool("simple_switch_grpc")
        if not self.binary:
            raise RuntimeError("simple_switch_grpc not found (toolchain.discover())")
        self.proc: subprocess.Popen | None = None
        self.ipc = os.path.join(tempfile.gettempdir(),
                                f"coflow-ctl-{os.getpid()}-{next(_seq)}-{device_id}.ipc")

        self.sock = os.path.join(tempfile.gettempdir(),
                                 f"coflow-ctl-{os.getpid()}-{next(_seq)}-{device_id}.sock")

    @property
    def address(self) -> str:
        return f"unix:{self.sock}" if self.grpc_port is None else f"127.0.0.1:{self.grpc_port}"

    def command(self) -> list[str]:
        cmd = toolchain.switch_command(self.binary, self.device_id, self.interfaces, free_port(),
                                       self.address, self.ipc,
                                       log_level="info" if self.log_file else "off",
                                       log_file=self.log_file)
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        return cmd

    def start(self, timeout: float = 20.0) -> "Bmv2":
        if self.grpc_port is None and os.path.exists(self.sock):
            os.unlink(self.sock)
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"simple_switch_grpc (device {self.device_id}) exited with "
                                   f"{self.proc.returncode}: {' '.join(self.command())}")
            if self._listening():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"simple_switch_grpc (device {self.device_id}) did not open "
                           f"{self.address} within {timeout} s")

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

    def stop(self, kill: bool = False) -> None:
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            if kill:
                p.kill()
            else:
                p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        for path in (self.ipc, self.sock):
            try:
                os.unlink(path)
            except OSError:
                pass

    def restart(self, kill: bool = True, timeout: float = 20.0) -> "Bmv2":
        self.stop(kill=kill)
        return self.start(timeout)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def _sh(*cmd, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


class Fabric:
    """A topology's switches as BMv2 processes in one network namespace of our own, wired
    with veths as the topology says; each host is the far end of a veth (``<host>-eth0``,
    left in the namespace, addressless: tests send and receive raw frames on it). Needs root.
    ``with Fabric(topo) as f:`` always deletes the namespace (and with it every veth)."""

    def __init__(self, topo, netns: str | None = None, device_offset: int = 0):
        self.topo = topo
        self.netns = netns or f"cfctl{os.getpid() % 100000}x{next(_seq)}"
        self.device_offset = device_offset
        self.switches: dict[str, Bmv2] = {}

    def _ip(self, *args, check=True):
        return _sh("ip", "-n", self.netns, *args, check=check)

    def _veth(self, a: str, b: str) -> None:
        self._ip("link", "add", a, "type", "veth", "peer", "name", b)
        for dev in (a, b):
            self._ip("link", "set", dev, "mtu", "1600", "up")
            _sh("ip", "netns", "exec", self.netns, "ethtool", "-K", dev, "tx", "off", "rx", "off",
                "sg", "off", "tso", "off", "gso", "off", "gro", "off", check=False)

    def start(self) -> "Fabric":
        self.stop()
        _sh("ip", "netns", "add", self.netns)
        try:
            for key in ("all", "default"):
                _sh("ip", "netns", "exec", self.netns, "sysctl", "-q", "-w",
                    f"net.ipv6.conf.{key}.disable_ipv6=1")
            self._ip("link", "set", "lo", "up")
            for h in self.topo.hosts:
                self._veth(f"{h.switch}-eth{h.port}", h.intf)
            for l in self.topo.links:
                self._veth(f"{l.a}-eth{l.a_port}", f"{l.b}-eth{l.b_port}")
            for s in self.topo.switches:
                ifs = {p: s.intf(p) for p in s.ports
                       if self.topo.neighbor(s.name, p) is not None}
                self.switches[s.name] = Bmv2(s.device_id + self.device_offset, ifs,
                                             netns=self.netns).start()
        except BaseException:
            self.stop()
            raise
        return self

    def addrs(self) -> dict[str, str]:
        return {n: b.address for n, b in self.switches.items()}

    def stop(self) -> None:
        for b in self.switches.values():
            b.stop()
        self.switches = {}
        if self.netns in _sh("ip", "netns", "list", check=False).stdout.split():
            _sh("ip", "netns", "del", self.netns, check=False)

    def exec(self, *cmd, timeout: float = 60, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.netns, *cmd], capture_output=True,
                              text=True, timeout=timeout, input=input)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

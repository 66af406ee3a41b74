"""Mininet node classes: a BMv2 ``simple_switch_grpc`` switch and an emulated end host.

Imported only where a fabric is started (:meth:`coflow.emu.fabric.Fabric.start`): this is the one
module of the package that imports Mininet at module level.

:class:`BMv2Switch` runs one ``simple_switch_grpc`` in the root namespace (Mininet switches live
there) with ``--priority-queues 8``, gRPC on 127.0.0.1 at a free port, its own device id,
Thrift port, notifications ipc address and log file, and ``--log-level off`` unless asked.
It starts without a program (``--no-p4``): the controller pushes the pipeline, routes and mode
over P4Runtime. ``restart()`` replaces the process (fresh tables, counters and registers) and
keeps the interfaces; ``stop()`` terminates it and removes its ipc socket.

:class:`EmuHost` turns off NIC offloads (rx, tx, sg, tso, gso, gro: BMv2 must see MTU-sized
frames), IPv6 (the pipeline drops non-IPv4) and sets :data:`coflow.emu.switch.TCP_SYSCTLS`.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time

from mininet.node import Host, Switch

from ..dataplane.toolchain import free_port, switch_command
from .switch import MARKER, OFFLOADS, TCP_SYSCTLS, _listening


class BMv2Switch(Switch):
    """One simple_switch_grpc process per Mininet switch (see the module doc)."""

    def __init__(self, name, device_id: int, sw_path: str, run_dir: str, log_level: str = "off",
                 nice: int = 0, **params):
        params.setdefault("dpid", "%016x" % device_id)
        Switch.__init__(self, name, **params)
        self.device_id = device_id
        self.sw_path = sw_path
        self.run_dir = run_dir
        self.log_level = log_level
        self.nice = nice
        self.grpc_port = 0
        self.thrift_port = 0
        self.ipc = os.path.join(run_dir, f"{MARKER}-{name}-{device_id}.ipc")
        self.log_file = os.path.join(run_dir, f"{name}.log")
        self.proc: subprocess.Popen | None = None

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def interfaces(self) -> dict[int, str]:
        return {p: intf.name for p, intf in self.intfs.items() if intf.name != "lo" and p > 0}

    def start(self, controllers=None, timeout: float = 30.0) -> None:
        self.grpc_port, self.thrift_port = free_port(), free_port()
        cmd = switch_command(self.sw_path, self.device_id, self.interfaces(), self.thrift_port,
                             self.grpc_port, self.ipc, self.log_level, self.log_file)
        if self.nice:
            # every thread of the process inherits it (nice is per thread on Linux)
            cmd = ["nice", "-n", str(self.nice)] + cmd
        out = open(os.path.join(self.run_dir, f"{self.name}.stdout"), "ab")
        try:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            out.close()
        deadline = time.monotonic() + timeout
        while not _listening(self.grpc_port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: simple_switch_grpc exited ({self.proc.returncode}); "
                                   f"see {self.run_dir}/{self.name}.stdout")
            if time.monotonic() > deadline:
                self.stop_process()
                raise RuntimeError(f"{self.name}: gRPC port {self.grpc_port} not up after {timeout:.0f} s")
            time.sleep(0.1)

    def stop_process(self) -> None:
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(5)
        try:
            os.unlink(self.ipc)
        except FileNotFoundError:
            pass

    def restart(self, timeout: float = 30.0) -> None:
        """A fresh process on the same interfaces (all P4 state gone)."""
        self.stop_process()
        self.start(timeout=timeout)

    def stop(self, deleteIntfs: bool = True) -> None:
        self.stop_process()
        Switch.stop(self, deleteIntfs)

    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None


class EmuHost(Host):
    """A Mininet host with NIC offloads and IPv6 off."""

    def config(self, **params):
        r = super().config(**params)
        for intf in self.intfList():
            if intf.name == "lo":
                continue
            args = " ".join(f"{o} off" for o in OFFLOADS)
            self.cmd(f"ethtool -K {intf.name} {args} >/dev/null 2>&1")
        for key in ("all", "default", "lo"):
            self.cmd(f"sysctl -qw net.ipv6.conf.{key}.disable_ipv6=1")
        for key, value in TCP_SYSCTLS.items():
            self.cmd(f"sysctl -qw net.ipv4.{key}={value}")
        return r

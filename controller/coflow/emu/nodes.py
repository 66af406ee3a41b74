"""Mininet node classes: a BMv2 ``simple_switch_grpc`` switch and an emulated end host.

Imported only where a fabric is started (:meth:`coflow.emu.fabric.Fabric.start`): this is the one
module of the package that imports Mininet at module level.

:class:`BMv2Switch` runs one ``simple_switch_grpc`` in the root namespace (Mininet switches live
there) with ``--priority-queues 8``, gRPC on 127.0.0.1 at a free port, its own device id,
Thrift port, notifications ipc address and log file, and ``--log-level off`` unless asked.
It starts without a program (``--no-p4``): the controller pushes the pipeline, routes and mode
over P4Runtime; its ports' transmit sockets get a send buffer of ``sndbuf`` bytes
(:mod:`coflow.dataplane.sockbuf`). ``restart()`` replaces the process (fresh tables, counters
and registers) and keeps the interfaces; ``stop()`` terminates it and removes its ipc socket.

:class:`EmuHost` turns off NIC offloads (rx, tx, sg, tso, gso, gro: BMv2 must see MTU-sized
frames), IPv6 (the pipeline drops non-IPv4) and sets :data:`coflow.emu.switch.TCP_SYSCTLS`.
"""
from __future__ import annotations

import os

from mininet.node import Host, Switch

from ..dataplane.bmv2 import Bmv2
from .switch import MARKER, OFFLOADS, TCP_SYSCTLS


class BMv2Switch(Switch):
    """A Mininet switch whose data plane is one :class:`coflow.dataplane.bmv2.Bmv2` process on
    the switch's interfaces (see the module doc)."""

    def __init__(self, name, device_id: int, sw_path: str, run_dir: str, log_level: str = "off",
                 nice: int = 0, sndbuf: int = 0, **params):
        params.setdefault("dpid", "%016x" % device_id)
        Switch.__init__(self, name, **params)
        self.device_id = device_id
        self.run_dir = run_dir
        self.sndbuf = sndbuf
        self.bmv2 = Bmv2(device_id, binary=sw_path, log_level=log_level, nice=nice, run_dir=run_dir,
                         log_file=os.path.join(run_dir, f"{name}.log") if log_level != "off" else None,
                         name=name, tag=MARKER)

    @property
    def grpc_addr(self) -> str:
        return self.bmv2.address

    def interfaces(self) -> dict[int, str]:
        return {p: intf.name for p, intf in self.intfs.items() if intf.name != "lo" and p > 0}

    def start(self, controllers=None, timeout: float = 30.0) -> None:
        self.bmv2.interfaces = self.interfaces()
        self.bmv2.start(timeout, stdout_path=os.path.join(self.run_dir, f"{self.name}.stdout"))
        if self.sndbuf:
            self.raise_sndbuf()

    def raise_sndbuf(self) -> None:
        """Every port's transmit socket gets a send buffer of ``sndbuf`` bytes, so that the
        traffic manager's queues on its egress veth, not the socket, bound what is queued
        (:mod:`coflow.dataplane.sockbuf`)."""
        from ..dataplane.sockbuf import SockBufError, raise_sndbuf
        want = len(self.bmv2.interfaces)
        pid = self.bmv2.pid
        if pid is None:
            raise RuntimeError(f"{self.name}: no switch process to raise the send buffers of")
        try:
            changed = raise_sndbuf(pid, self.sndbuf // 2)   # the kernel doubles it
        except SockBufError as e:
            raise RuntimeError(f"{self.name}: cannot raise its ports' send buffers: {e}") from None
        if len(changed) < want or any(b < self.sndbuf for _, b in changed):
            raise RuntimeError(f"{self.name}: {len(changed)} of {want} packet sockets got a "
                               f"{self.sndbuf}-byte send buffer ({changed})")

    def stop_process(self) -> None:
        self.bmv2.stop()

    def restart(self, timeout: float = 30.0) -> None:
        """A fresh process on the same interfaces (all P4 state gone)."""
        self.bmv2.stop()
        self.start(timeout=timeout)

    def stop(self, deleteIntfs: bool = True) -> None:
        self.bmv2.stop()
        Switch.stop(self, deleteIntfs)

    def pid(self) -> int | None:
        return self.bmv2.pid


class EmuHost(Host):
    """A Mininet host with NIC offloads and IPv6 off."""

    def config(self, tcp_sysctls=None, **params):
        r = super().config(**params)
        for intf in self.intfList():
            if intf.name == "lo":
                continue
            args = " ".join(f"{o} off" for o in OFFLOADS)
            self.cmd(f"ethtool -K {intf.name} {args} >/dev/null 2>&1")
        for key in ("all", "default", "lo"):
            self.cmd(f"sysctl -qw net.ipv6.conf.{key}.disable_ipv6=1")
        for key, value in {**TCP_SYSCTLS, **(tcp_sysctls or {})}.items():
            self.cmd(f"sysctl -qw net.ipv4.{key}={value}")
        return r

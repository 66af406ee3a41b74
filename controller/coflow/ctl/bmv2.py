"""BMv2 switches for the controller's tests and benchmarks (no Mininet).

:class:`Bmv2` (one ``simple_switch_grpc`` process, zero ports unless given some) is
:class:`coflow.dataplane.bmv2.Bmv2`, the one process class every driver uses; :class:`Fabric`
wires a topology's switches with veths in a network namespace of its own.
"""
from __future__ import annotations

import itertools
import os
import subprocess

from ..dataplane.bmv2 import Bmv2
from ..dataplane.toolchain import free_port

_seq = itertools.count()

__all__ = ["Bmv2", "Fabric", "free_port"]


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

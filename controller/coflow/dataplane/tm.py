"""Emulated traffic manager: a Linux HTB tree on a switch's egress interface.

BMv2 rate-limits each of its priority queues on its own (no shaper is shared by a port's
queues), so a backlog inside BMv2 cannot show strict priority. The backlog is built in Linux
instead, on the interface BMv2 transmits on::

    root 1: htb (default -> class of priority 0)
      1:1   parent class at the port rate (rate = ceil = port rate)
        1:10+p   one child per BMv2 priority p (7 = served first), pfifo leaf
    u32 filters: TOS & 0xe0 == p << 5  (DSCP class selector CS<p>, written by the pipeline)

strict:   children get a minimal guaranteed rate and HTB ``prio`` 7-p, so spare bandwidth goes
          to the highest backlogged priority first (HTB lends by prio level).
weighted: children get rate = port * w / sum(w) and quantum proportional to w, all at one prio
          level, so backlogged queues share the port in proportion to their weights.

Pure functions build the ``tc`` argument lists (tested without root); :func:`apply` and
:func:`clear` run them, optionally inside a network namespace. Shared by the PTF tests and the
Mininet fabric. The kernels here have only htb/tbf/pfifo/bfifo and the u32 filter.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Callable, Sequence

NUM_PRIOS = 8
STRICT = "strict"
WEIGHTED = "weighted"


def class_minor(prio: int) -> int:
    """HTB class minor of a priority's child (hex in tc syntax: 1:10 .. 1:17)."""
    return 0x10 + prio


def classid(prio: int) -> str:
    return f"1:{class_minor(prio):x}"


@dataclass(frozen=True)
class TmConfig:
    """One port's traffic manager.

    ``weights`` are per Aalo queue, queue 1 (= priority 7) first, like
    ``DclasParams.queue_weights()``; used by the weighted discipline only.
    """

    rate_kbit: int
    discipline: str = STRICT
    weights: tuple[float, ...] | None = None
    queues: int = NUM_PRIOS
    mtu: int = 1514                 # quantum unit (bytes): weighted quanta are mtu * w / min(w);
                                    # equal to the frame size, each DRR turn sends exactly w frames
    min_rate_kbit: int = 1          # strict: guaranteed rate of each child
    limit_pkts: int = 1000          # pfifo limit of each leaf

    def __post_init__(self):
        if self.rate_kbit <= 0:
            raise ValueError("rate_kbit must be > 0")
        if self.discipline not in (STRICT, WEIGHTED):
            raise ValueError(f"discipline must be {STRICT!r} or {WEIGHTED!r}")
        if not 1 <= self.queues <= NUM_PRIOS:
            raise ValueError("queues must be 1..8")
        if self.weights is not None:
            if len(self.weights) != self.queues or min(self.weights) <= 0:
                raise ValueError("weights must be `queues` positive numbers")
        if self.min_rate_kbit * self.queues > self.rate_kbit and self.discipline == STRICT:
            raise ValueError("port rate below the children's guaranteed rates")

    def queue_weights(self) -> list[float]:
        if self.weights is not None:
            return list(self.weights)
        # Aalo's evaluated default: queue i has weight K - i + 1
        return [float(self.queues - i) for i in range(self.queues)]

    def prios(self) -> list[int]:
        """The BMv2 priorities used, highest first (Aalo queue 1 .. queues)."""
        return [NUM_PRIOS - 1 - i for i in range(self.queues)]

    def child_rates_kbit(self) -> dict[int, int]:
        """Guaranteed rate of each priority's class."""
        if self.discipline == STRICT:
            return {p: self.min_rate_kbit for p in self.prios()}
        w = self.queue_weights()
        total = sum(w)
        return {p: max(1, int(self.rate_kbit * wi / total)) for p, wi in zip(self.prios(), w)}

    def child_quanta(self) -> dict[int, int]:
        if self.discipline == STRICT:
            return {p: self.mtu for p in self.prios()}
        w = self.queue_weights()
        lo = min(w)
        return {p: max(self.mtu, int(round(self.mtu * wi / lo))) for p, wi in zip(self.prios(), w)}


def _tc(netns: str | None) -> list[str]:
    return ["ip", "netns", "exec", netns, "tc"] if netns else ["tc"]


def htb_commands(dev: str, cfg: TmConfig, netns: str | None = None) -> list[list[str]]:
    """The tc commands that install ``cfg`` on ``dev`` (replacing any root qdisc)."""
    tc = _tc(netns)
    rate = f"{cfg.rate_kbit}kbit"
    lowest = min(cfg.prios())
    cmds = [
        tc + ["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb",
              "default", f"{class_minor(lowest):x}"],
        tc + ["class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
              "rate", rate, "ceil", rate, "quantum", str(cfg.mtu)],
    ]
    rates = cfg.child_rates_kbit()
    quanta = cfg.child_quanta()
    for p in cfg.prios():
        htb_prio = (NUM_PRIOS - 1 - p) if cfg.discipline == STRICT else 0
        cmds.append(tc + ["class", "add", "dev", dev, "parent", "1:1", "classid", classid(p),
                          "htb", "rate", f"{rates[p]}kbit", "ceil", rate,
                          "prio", str(htb_prio), "quantum", str(quanta[p])])
        cmds.append(tc + ["qdisc", "add", "dev", dev, "parent", classid(p),
                          "handle", f"{0x20 + p:x}:", "pfifo", "limit", str(cfg.limit_pkts)])
    for p in cfg.prios():
        cmds.append(tc + ["filter", "add", "dev", dev, "parent", "1:", "protocol", "ip",
                          "prio", "1", "u32", "match", "ip", "tos", f"0x{p << 5:02x}", "0xe0",
                          "flowid", classid(p)])
    return cmds


def clear_commands(dev: str, netns: str | None = None) -> list[list[str]]:
    return [_tc(netns) + ["qdisc", "del", "dev", dev, "root"]]


def stats_command(dev: str, netns: str | None = None) -> list[str]:
    return _tc(netns) + ["-s", "class", "show", "dev", dev]


Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]


def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True)


def apply(dev: str, cfg: TmConfig, netns: str | None = None, runner: Runner = _run) -> None:
    """Install the HTB tree on ``dev`` (needs CAP_NET_ADMIN)."""
    for cmd in htb_commands(dev, cfg, netns):
        runner(cmd)


def clear(dev: str, netns: str | None = None, runner: Runner | None = None) -> None:
    """Remove the tree; a device without one is not an error."""
    for cmd in clear_commands(dev, netns):
        if runner is not None:
            runner(cmd)
        else:
            subprocess.run(cmd, check=False, capture_output=True)


def class_stats(dev: str, netns: str | None = None) -> dict[str, dict[str, int]]:
    """Sent bytes/packets and drops per HTB class, parsed from ``tc -s class show``."""
    out = subprocess.run(stats_command(dev, netns), check=True, capture_output=True,
                         text=True).stdout
    return parse_class_stats(out)


def parse_class_stats(text: str) -> dict[str, dict[str, int]]:
    stats: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "class" and parts[1] == "htb":
            current = parts[2]
            stats[current] = {}
        elif current and parts[:1] == ["Sent"]:
            # Sent 1234 bytes 5 pkt (dropped 0, overlimits 0 requeues 0)
            stats[current]["bytes"] = int(parts[1])
            stats[current]["packets"] = int(parts[3])
            stats[current]["dropped"] = int(parts[6].rstrip(","))
    return stats

"""What the emulation's Mininet nodes share, without importing Mininet.

The node classes themselves (:mod:`coflow.emu.nodes`) subclass Mininet's and are imported only
by :meth:`coflow.emu.fabric.Fabric.start`, so that planning, the CLI and the tests import this
package on a machine without Mininet.

:func:`static_arp` fills every host's ARP table, since ARP never crosses the L3 fabric.
"""
from __future__ import annotations


#: Every process and file of an emulation run carries this marker (cleanup finds them by it).
MARKER = "coflow-emu"


OFFLOADS = ("rx", "tx", "sg", "tso", "gso", "gro")

#: TCP in every host namespace (all per-namespace sysctls):
#: (Congestion control is set per socket by the agents, cubic by default: a namespace may not
#: pick one outside the machine's tcp_allowed_congestion_control, "reno bbr" here.)
#: - tcp_rto_min_us 1000000 (Linux: 200 ms): the minimum scaled with the fabric. At 1 Mb/s a
#:   frame takes 12 ms a hop, a queue at the ECN threshold a quarter second a hop, so a loaded
#:   round trip is about a second, and 200 ms fires on segments that are only queued (measured:
#:   with a 256-frame budget and 200 ms, one segment in seven retransmitted with no TM drop;
#:   with 1 s, timeouts fell 4.6x: mininet/README.md).
#: - tcp_rto_max_ms 2000 (Linux: 120 s): a flow starved behind higher priorities retries at
#:   least every 2 s instead of backing off for minutes (measured before the cap: a flow idle
#:   for 230 s with RTO 115 s at the end of a run), so the port goes back to work soon after
#:   it frees up.
#: - tcp_ecn 1: connections negotiate ECN, so that a switch port over its marking threshold
#:   (``ecn_threshold_bytes``) slows senders down with CE marks instead of drops.
#: - tcp_no_metrics_save: no RTT/ssthresh carried from one connection (or mode) to the next.
#: - tcp_syn_retries / tcp_synack_retries / tcp_retries2 raised: with the RTO capped the
#:   default counts give up after 10-30 s (measured: "Connect call failed", "Connection reset by
#:   peer" in fair mode); a flow must wait for as long as the mode's timeout, never abort.
TCP_SYSCTLS = {"tcp_rto_min_us": "1000000", "tcp_rto_max_ms": "2000", "tcp_ecn": "1",
               "tcp_no_metrics_save": "1", "tcp_syn_retries": "127", "tcp_synack_retries": "127",
               "tcp_retries2": "120"}


def static_arp(hosts, topo) -> None:
    """Every host gets a permanent ARP entry for every other host of ``topo``."""
    for h in hosts:
        for other in topo.hosts:
            if other.name != h.name:
                h.cmd(f"ip neigh replace {other.ip} lladdr {other.mac} dev {h.name}-eth0 nud permanent")

"""The digest phase of `make bench-scale` (bench/bench_scale.py; ``--variants digest``): D-CLAS
on the edges' report digests against polling, on BMv2 driven by real packets (PacketOuts of
tagged frames), each variant's rounds after the digests drained and the queues settled.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


from scale_common import (  # noqa: E402
    BLOCK, FB_TRACE, Traffic, log, registered, run_rounds, set_variant,
    start_controller)


#: the digest comparison's D-CLAS thresholds (bench_dclas_digest): small enough that BMv2 is
#: driven by real packets (a level's bytes in one PacketOut of at most 48 KB)
DIGEST_Q1, DIGEST_E = 1500, 2


MAX_PACKET = 60_000


def tagged_frame(cid, length: int, dst_ip: str) -> bytes:
    """A UDP frame of ``length`` bytes carrying the CoflowId option (scapy)."""
    from scapy.all import IP, UDP, Ether, Raw, raw
    from coflow.dataplane import packet as pk
    p = Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / IP(
        src="10.255.0.1", dst=dst_ip, options=[pk.coflow_option(pk.CoflowId(*cid))]) / UDP()
    return raw(p / Raw(b"\0" * max(0, length - len(p))))


class PacketTraffic:
    """Traffic as the digest comparison drives it: BMv2 gets real packets (PacketOut on the
    controller's own stream, into ingress at CPU_PORT: counted, reported, then dropped for
    want of an egress interface), so both the polled counters and the digests see them; the
    emulated switches get counter writes, their stand-in for packets (bench/p4rt_emu.py turns
    a write that crosses a report step into a digest)."""

    def __init__(self, ctl, kind: str, dst_ip: str):
        self.ctl, self.kind, self.dst = ctl, kind, dst_ip
        self.count: dict = {}          # (edge, slot) -> bytes sent so far
        self.packets = 0

    def to(self, edge: str, targets: dict, cids: dict) -> None:
        """Bring (edge, slot)'s bytes up to ``targets[slot]``."""
        from coflow.ctl import model as M
        a = self.ctl.agents[edge]
        if self.kind != "bmv2":
            dev_vals = {}
            for slot, t in targets.items():
                if t > self.count.get((edge, slot), 0):
                    self.count[(edge, slot)] = t
                    dev_vals[slot] = (t, 1)
            if dev_vals:
                Traffic(self.ctl, {}).write_counters(edge, M.C_COFLOW_BYTES, dev_vals)
            return
        for slot, t in targets.items():
            left = t - self.count.get((edge, slot), 0)
            while left >= 64:
                n = min(left, MAX_PACKET)
                a.client.packet_out(tagged_frame(cids[slot], n, self.dst))
                self.packets += 1
                left -= n
                self.count[(edge, slot)] = t - left


def drain_digests(ctl, quiet_s: float = 0.5, limit_s: float = 60.0) -> None:
    """Wait until no digest list has arrived for ``quiet_s`` (the setup's traffic reports
    every coflow on every edge at once: thousands of lists before the first counted round)."""
    def n():
        return sum(a.digests.lists for a in ctl.agents.values() if a.digests is not None)
    end = time.monotonic() + limit_s
    last, since = n(), time.monotonic()
    while time.monotonic() < end and time.monotonic() - since < quiet_s:
        time.sleep(0.05)
        if n() != last:
            last, since = n(), time.monotonic()
    log(f"  {last} digest lists received in the setup")


#: the digest comparison's variants: the default path, the digests, and each with D-CLAS's full
#: round (the code before the incremental one)
DIGEST_VARIANTS = ("poll", "digest", "pollfull", "digestfull")


def settle(ctl, limit: int = 80) -> int:
    """Rounds until one writes nothing (at most ``limit``; returns how many ran): with digests
    the report steps of the coordinated slots grow with their queues two slots a round
    (DigestRounds.COARSEN_PER_ROUND), each a write to every edge; a steady round is one after
    they have all grown."""
    for k in range(1, limit + 1):
        r = ctl.round()
        ctl._collect_between_rounds()
        if r["updates"] == 0 and r["errors"] == 0:
            return k
    log(f"  still writing after {limit} settling rounds")
    return limit


def bench_dclas_digest(topo, addrs, sw, ncoflows, rounds, p4info, bmv2_json, routes_full,
                       variants=None, place: str = "all", trace_path: str = FB_TRACE) -> list:
    """The D-CLAS rounds on the edges' report digests (``digest``) against the default path on
    the same controller, switches and traffic (``poll``: BMv2 polled, the emulated switches'
    pushed counters), alternated in blocks as run_rounds does; D-CLAS thresholds DIGEST_Q1 x
    DIGEST_E^k so that BMv2 is driven by packets. ``steady``: every coordinated coflow has
    sent a packet on every edge; ``demotions``: before each round 5 coflows' bytes on one edge
    reach their next threshold."""
    from coflow.ctl.daemon import Controller
    from coflow.params import DclasParams
    reg, sends, source = registered(topo, ncoflows, place, trace_path)
    # emulated edges beyond 8: Q1 grows with the edges, so that the setup's 64 bytes per coflow
    # and edge stay below it (at 1,024 edges they are 64 KB: every coflow would start demoted
    # and the demotion rounds demote nothing); BMv2's packets need the small Q1
    nedges = sum(1 for s in topo.switches if s.edge)
    q1 = DIGEST_Q1 if sw.kind == "bmv2" else DIGEST_Q1 * max(1, nedges // 8)
    ctl = Controller(topo, "dclas", p4info, bmv2_json, addrs, registry=reg,
                     settings={"audit_s": "0", "telemetry_s": "0", "Q1": str(q1),
                               "E": str(DIGEST_E), "digest": "1"}, start_timeout=600)
    if ctl.digest is None:
        log("  the P4 program has no report digest: run `make p4`")
        ctl.stop()
        reg.close()
        return []
    startup = start_controller(ctl, routes_full)
    rows = []
    variants = tuple(variants or DIGEST_VARIANTS)
    try:
        ctl.round()
        slots = dict(ctl.slots.slot)
        cids = sorted(slots)
        by_slot = {slots[c]: c for c in cids}
        traffic = PacketTraffic(ctl, sw.kind, topo.hosts[-1].ip)
        for e in ctl.edges:   # 64 bytes per coflow and edge: 8 x 64 < Q1, nobody demoted yet
            # (the edges each coflow sends from: all, or its FB width's)
            traffic.to(e, {slots[c]: 64 for c in cids if sends[c] is None or e in sends[c]}, by_slot)
        drain_digests(ctl)
        set_variant(ctl, "digest")
        ctl.round()
        warm = settle(ctl)
        pids = sw.pids()
        out = {"steady": run_rounds(ctl, "steady", rounds, variants, pids)}
        th = [int(t) for t in DclasParams(K=8, E=DIGEST_E, Q1=q1).thresholds()]
        level = {c: 0 for c in cids}
        edges = ctl.edges

        def demote(i):
            ups: dict = {}
            for j in range(5):
                c = cids[(i * 5 + j) % len(cids)]
                level[c] = min(level[c] + 1, len(th))
                e = edges[i % len(edges)] if sends[c] is None else sends[c][i % len(sends[c])]
                ups.setdefault(e, {})[slots[c]] = th[level[c] - 1]
            for e, u in ups.items():
                traffic.to(e, u, by_slot)
        nd = min(rounds, len(cids) * len(th) // 5 // len(variants) * (BLOCK - 1) // BLOCK)
        out["demotions"] = run_rounds(ctl, "demotions", nd, variants, pids, demote)
        for scen, per in out.items():
            for v, s in per.items():
                rows.append({"mode": "dclas", "round": scen, "variant": v, "edges": len(ctl.edges),
                             "coflows": ncoflows, "coordinated": len(cids), "switch": sw.kind,
                             "placement": place, "placement_source": source,
                             "sender_edges_mean": statistics.fmean(
                                 len(ctl.edges) if sends[c] is None else len(sends[c]) for c in cids),
                             "dclas_Q1": q1, "dclas_E": DIGEST_E, "startup_s": startup,
                             "packets_sent": traffic.packets, "settle_rounds": warm,
                             "digest_polls": dict(ctl.digest.polls),
                             "digest_entries": ctl.digest.observed, **s})
    finally:
        ctl.stop()
        reg.close()
    return rows

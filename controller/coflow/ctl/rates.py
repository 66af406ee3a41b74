"""Rate modes (Varys SEBF+MADD, HUG, Utopia, Fai): registered coflows -> the core's View ->
Allocation -> per-flow rates and per-coflow priorities (pure; the daemon pushes them).

The View is the simulator's fabric model over the topology's hosts: one big switch whose port
i is the host of index i, uplink and downlink capacity = the host link rate. Flow sizes and
bytes sent come from the registry (Register / Update); flows of unknown size get
``unknown_size_bytes`` remaining (so a clairvoyant order puts them last). Scheduler memory
(Varys's starvation clock (T, δ), Utopia's virtual time) is a dict the caller keeps between
rounds, exactly as the simulator does.

Priorities: SEBF's order (smallest Γ first) and Utopia's virtual-finish order map to BMv2
priorities 7, 6, ..., saturating at 1; Fai's queues map through ``hw_priority``; HUG has no
order (every coflow at ``fair_prio``, isolation comes from the meters).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..params import hw_priority
from ..sched.base import Allocation, INF, Scheduler, View
from .translate import order_priorities


@dataclass
class RatePlan:
    cids: list  # active coflows (external, internal), registration order
    cf: np.ndarray  # per active flow: position in cids
    src: np.ndarray  # per active flow: host position (View port)
    dst: np.ndarray
    rates: np.ndarray  # bytes/s per active flow
    hosts: list  # host names by position
    prio: dict  # cid -> BMv2 priority (override); absent = fair_prio
    next_event: float = INF  # absolute time (time.time()) the scheduler wants to run again
    alloc: Allocation | None = None
    view: View | None = field(default=None, repr=False)

    @property
    def flows(self) -> list:
        """(cid, src host, dst host, rate bytes/s) per active flow."""
        h, c = self.hosts, self.cids
        return [(c[k], h[a], h[b], r) for k, a, b, r in
                zip(self.cf.tolist(), self.src.tolist(), self.dst.tolist(), self.rates.tolist())]


class _RecordArrays:
    """A record's flows as arrays, and its active part (remaining > 0, src != dst) for the View.
    The flow arrays are rebuilt only when its flow specs change (the registry's snapshots share
    the immutable FlowSpec objects: a list compare is an identity scan), the active part only
    when its bytes sent change too (Update), so a round costs the coflows that moved."""
    __slots__ = ("flows", "src", "dst", "size", "known", "valid", "sent_of", "unknown",
                 "a_src", "a_dst", "a_sent", "a_rem", "k", "csent")

    def __init__(self, rec, host_port):
        self.flows = list(rec.flows)
        n = len(rec.flows)
        self.src = np.fromiter((host_port[f.src] for f in rec.flows), np.int64, n)
        self.dst = np.fromiter((host_port[f.dst] for f in rec.flows), np.int64, n)
        self.size = np.fromiter((f.size_bytes if f.size_bytes is not None else -1
                                 for f in rec.flows), np.float64, n)
        self.known = self.size >= 0
        self.valid = self.src != self.dst
        self.sent_of = None

    def active(self, sb: dict, unknown: int) -> int:
        """Refresh the active part for bytes sent ``sb``; returns its flow count."""
        if self.sent_of is not None and self.unknown == unknown and self.sent_of == sb:
            return self.k
        n = len(self.flows)
        sent = np.zeros(n)
        for i, b in sb.items():
            if 0 <= i < n:
                sent[i] = b
        rem = np.where(self.known, self.size - sent, float(unknown))
        m = self.valid & (rem > 0)
        self.k = int(m.sum())
        self.a_src, self.a_dst, self.a_sent, self.a_rem = self.src[m], self.dst[m], sent[m], rem[m]
        self.csent = float(sum(sb.values()))
        self.sent_of = dict(sb)
        self.unknown = unknown
        return self.k


def build_view(records, host_port: dict, link_Bps: float, now: float, memory: dict,
               unknown_size: int, cache: dict | None = None) -> tuple[View, tuple, list]:
    """(View, (cf, src, dst) arrays per View flow, [cid] per View coflow). ``cache`` (a dict
    the caller keeps) holds each record's arrays between rounds."""
    cache = {} if cache is None else cache
    P = len(host_port)
    parts = []
    cids, ids, arr, csent, lo = [], [], [], [], [0]
    seen = set()
    for rec in records:
        if not getattr(rec, "admitted", True):
            continue
        c = (rec.cid.external, rec.cid.internal)
        seen.add(c)
        ra = cache.get(c)
        if ra is None or ra.flows != rec.flows:
            ra = cache[c] = _RecordArrays(rec, host_port)
        k = ra.active(rec.sent_bytes or {}, unknown_size)
        if k == 0:
            continue
        parts.append(ra)
        cids.append(c)
        ids.append((c[0] << 8) | c[1])
        arr.append(rec.registered_at)
        csent.append(ra.csent)
        lo.append(lo[-1] + k)
    if len(cache) > len(seen):
        for c in [c for c in cache if c not in seen]:
            del cache[c]
    if parts:
        src = np.concatenate([ra.a_src for ra in parts])
        dst = np.concatenate([ra.a_dst for ra in parts])
        sent = np.concatenate([ra.a_sent for ra in parts])
        remaining = np.concatenate([ra.a_rem for ra in parts])
        lo_a = np.asarray(lo, dtype=np.int64)
        cf_arr = np.repeat(np.arange(len(cids), dtype=np.int64), np.diff(lo_a))
    else:
        src = dst = cf_arr = np.zeros(0, np.int64)
        sent = remaining = np.zeros(0, np.float64)
        lo_a = np.zeros(1, np.int64)
    caps = np.full(P, float(link_Bps))
    csent_a = np.asarray(csent, dtype=float)
    v = View(now=now, ports=P, cap_up=caps, cap_down=caps.copy(), src=src, dst=dst,
             sent=sent, cf=cf_arr, reducer=np.arange(src.size, dtype=np.int64),
             cf_id=np.asarray(ids, dtype=np.int64), cf_arrival=np.asarray(arr, dtype=float),
             cf_sent=csent_a, cf_lo=lo_a, remaining=remaining,
             cf_deadline=np.full(len(cids), INF),
             cf_total=np.bincount(cf_arr, remaining, len(cids)) + csent_a, memory=memory)
    return v, (cf_arr, src, dst), cids


def priorities(mode: str, sched: Scheduler, v: View, alloc: Allocation, cids: list) -> dict:
    if not cids:
        return {}
    if mode == "sebf":
        order = sched.order(v)
        return order_priorities(cids[k] for k in order.tolist())
    if mode == "utopia":
        vf = v.memory.get("VF", {})
        key = np.array([vf.get(int(i), INF) for i in v.cf_id.tolist()])
        order = np.lexsort((v.cf_id, v.cf_arrival, key))
        return order_priorities(cids[k] for k in order.tolist())
    if mode == "fai" and alloc.queue is not None:
        return {c: hw_priority(min(int(q), 8)) for c, q in zip(cids, alloc.queue.tolist())}
    return {}  # hug: no order


def plan(mode: str, sched: Scheduler, records, host_port: dict, link_Bps: float, now: float,
         memory: dict, unknown_size: int, cache: dict | None = None,
         timings: dict | None = None) -> RatePlan:
    """``timings`` (optional): gets the seconds spent in ``view``, ``allocate``, ``priorities``."""
    t0 = time.perf_counter()
    v, (cf, src, dst), cids = build_view(records, host_port, link_Bps, now, memory, unknown_size,
                                         cache)
    hosts = sorted(host_port, key=host_port.get)
    t1 = time.perf_counter()
    if not cids:
        if timings is not None:
            timings.update(view=t1 - t0, allocate=0.0, priorities=0.0)
        return RatePlan([], cf, src, dst, np.zeros(0), hosts, {}, INF, None, v)
    alloc = sched.allocate(v)
    t2 = time.perf_counter()
    prio = priorities(mode, sched, v, alloc, cids)
    if timings is not None:
        timings.update(view=t1 - t0, allocate=t2 - t1, priorities=time.perf_counter() - t2)
    return RatePlan(cids, cf, src, dst, alloc.rates, hosts, prio, alloc.next_event, alloc, v)

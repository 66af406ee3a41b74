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
    """A record's flows as arrays, rebuilt only when its flow specs change (the registry's
    snapshots share the immutable FlowSpec objects, so their identities tell)."""
    __slots__ = ("ids", "src", "dst", "size", "known", "valid")

    def __init__(self, rec, host_port):
        self.ids = tuple(map(id, rec.flows))
        n = len(rec.flows)
        self.src = np.fromiter((host_port[f.src] for f in rec.flows), np.int64, n)
        self.dst = np.fromiter((host_port[f.dst] for f in rec.flows), np.int64, n)
        self.size = np.fromiter((f.size_bytes if f.size_bytes is not None else -1
                                 for f in rec.flows), np.float64, n)
        self.known = self.size >= 0
        self.valid = self.src != self.dst


def build_view(records, host_port: dict, link_Bps: float, now: float, memory: dict,
               unknown_size: int, cache: dict | None = None) -> tuple[View, tuple, list]:
    """(View, (cf, src, dst) arrays per View flow, [cid] per View coflow). ``cache`` (a dict
    the caller keeps) holds each record's flow arrays between rounds."""
    cache = {} if cache is None else cache
    P = len(host_port)
    parts_src, parts_dst, parts_sent, parts_rem, parts_cf = [], [], [], [], []
    cids, ids, arr, csent, lo = [], [], [], [], [0]
    seen = set()
    for rec in records:
        if not getattr(rec, "admitted", True):
            continue
        c = (rec.cid.external, rec.cid.internal)
        seen.add(c)
        ra = cache.get(c)
        if ra is None or len(ra.ids) != len(rec.flows) or ra.ids != tuple(map(id, rec.flows)):
            ra = cache[c] = _RecordArrays(rec, host_port)
        n = len(ra.ids)
        sent = np.zeros(n)
        sb = rec.sent_bytes or {}
        for i, b in sb.items():
            if 0 <= i < n:
                sent[i] = b
        rem = np.where(ra.known, ra.size - sent, float(unknown_size))
        m = ra.valid & (rem > 0)
        k = int(m.sum())
        if k == 0:
            continue
        parts_src.append(ra.src[m])
        parts_dst.append(ra.dst[m])
        parts_sent.append(sent[m])
        parts_rem.append(rem[m])
        parts_cf.append(np.full(k, len(cids), dtype=np.int64))
        cids.append(c)
        ids.append((c[0] << 8) | c[1])
        arr.append(rec.registered_at)
        csent.append(float(sum(sb.values())))
        lo.append(lo[-1] + k)
    for c in [c for c in cache if c not in seen]:
        del cache[c]
    cat = lambda parts, dt: np.concatenate(parts).astype(dt, copy=False) if parts else np.zeros(0, dt)  # noqa: E731
    src, dst = cat(parts_src, np.int64), cat(parts_dst, np.int64)
    cf_arr = cat(parts_cf, np.int64)
    remaining = cat(parts_rem, np.float64)
    caps = np.full(P, float(link_Bps))
    csent_a = np.asarray(csent, dtype=float)
    v = View(now=now, ports=P, cap_up=caps, cap_down=caps.copy(), src=src, dst=dst,
             sent=cat(parts_sent, np.float64), cf=cf_arr, reducer=np.arange(src.size, dtype=np.int64),
             cf_id=np.asarray(ids, dtype=np.int64), cf_arrival=np.asarray(arr, dtype=float),
             cf_sent=csent_a, cf_lo=np.asarray(lo, dtype=np.int64), remaining=remaining,
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
         memory: dict, unknown_size: int, cache: dict | None = None) -> RatePlan:
    v, (cf, src, dst), cids = build_view(records, host_port, link_Bps, now, memory, unknown_size,
                                         cache)
    hosts = sorted(host_port, key=host_port.get)
    if not cids:
        return RatePlan([], cf, src, dst, np.zeros(0), hosts, {}, INF, None, v)
    alloc = sched.allocate(v)
    return RatePlan(cids, cf, src, dst, alloc.rates, hosts,
                    priorities(mode, sched, v, alloc, cids), alloc.next_event, alloc, v)

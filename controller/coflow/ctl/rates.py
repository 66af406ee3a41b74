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
    flows: list  # (cid, src host, dst host, rate bytes/s) per active flow
    prio: dict  # cid -> BMv2 priority (override); absent = fair_prio
    next_event: float = INF  # absolute time (time.time()) the scheduler wants to run again
    alloc: Allocation | None = None
    view: View | None = field(default=None, repr=False)


def build_view(records, host_port: dict, link_Bps: float, now: float, memory: dict,
               unknown_size: int) -> tuple[View, list, list]:
    """(View, [(cid, src, dst)] per View flow, [cid] per View coflow)."""
    P = len(host_port)
    src, dst, sent, rem, cf, lo = [], [], [], [], [], [0]
    meta, cids, ids, arr, csent = [], [], [], [], []
    for rec in records:
        if not getattr(rec, "admitted", True):
            continue
        c = (rec.cid.external, rec.cid.internal)
        k = len(cids)
        n0 = len(src)
        sb = rec.sent_bytes or {}
        for i, f in enumerate(rec.flows):
            if f.src == f.dst:
                continue
            s = int(sb.get(i, 0))
            r = (f.size_bytes - s) if f.size_bytes is not None else unknown_size
            if r <= 0:
                continue  # finished
            src.append(host_port[f.src])
            dst.append(host_port[f.dst])
            sent.append(s)
            rem.append(r)
            cf.append(k)
            meta.append((c, f.src, f.dst))
        if len(src) == n0:
            continue
        cids.append(c)
        ids.append((c[0] << 8) | c[1])
        arr.append(rec.registered_at)
        csent.append(float(sum(sb.values())))
        lo.append(len(src))
    caps = np.full(P, float(link_Bps))
    cf_arr = np.asarray(cf, dtype=np.int64)
    remaining = np.asarray(rem, dtype=float)
    v = View(now=now, ports=P, cap_up=caps, cap_down=caps.copy(),
             src=np.asarray(src, dtype=np.int64), dst=np.asarray(dst, dtype=np.int64),
             sent=np.asarray(sent, dtype=float), cf=cf_arr,
             reducer=np.arange(len(src), dtype=np.int64),
             cf_id=np.asarray(ids, dtype=np.int64), cf_arrival=np.asarray(arr, dtype=float),
             cf_sent=np.asarray(csent, dtype=float), cf_lo=np.asarray(lo, dtype=np.int64),
             remaining=remaining, cf_deadline=np.full(len(cids), INF),
             cf_total=np.bincount(cf_arr, remaining, len(cids)) + np.asarray(csent, dtype=float),
             memory=memory)
    return v, meta, cids


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
         memory: dict, unknown_size: int) -> RatePlan:
    v, meta, cids = build_view(records, host_port, link_Bps, now, memory, unknown_size)
    if not cids:
        return RatePlan([], [], {}, INF, None, v)
    alloc = sched.allocate(v)
    rates = alloc.rates.tolist()
    flows = [(c, s, d, r) for (c, s, d), r in zip(meta, rates)]
    return RatePlan(cids, flows, priorities(mode, sched, v, alloc, cids), alloc.next_event,
                    alloc, v)

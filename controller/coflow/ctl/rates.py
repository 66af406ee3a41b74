"""Scheduled modes (Varys SEBF+MADD, HUG, Utopia, Fai, Sincronia): registered coflows -> the core's View ->
Allocation -> per-flow rates and per-coflow priorities (pure; the daemon pushes them).

The View is the simulator's fabric model over the topology's hosts: one big switch whose port
i is the host of index i, uplink and downlink capacity = the host link rate (in payload
bytes/s: ``CtlSettings.link_payload_Bps``). Flow sizes come from the registry (Register); bytes
sent from the registry (Update) and, closing the loop, from the data plane: ``measured``
(cid -> {flow index: payload bytes}, the controller's reading of the sender edges'
``flow_bytes`` counters, :class:`FlowProgress`), the larger of the two per flow; flows of unknown size get
``unknown_size_bytes`` remaining (so a clairvoyant order puts them last). Scheduler memory
(Varys's starvation clock (T, δ), Utopia's virtual time) is a dict the caller keeps between
rounds, exactly as the simulator does.

Priorities come from what the scheduler says in its Allocation (:func:`priorities`), never from
the mode's name: a service order (SEBF's smallest Γ first, Utopia's virtual finish, Sincronia's
BSSI) maps to BMv2 priorities 7, 6, ..., saturating at 1; queues (Fai's) map through
``hw_priority``; neither (HUG) leaves every coflow at ``fair_prio``, isolation coming from the
meters.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..params import hw_priority
from ..sched.base import Allocation, INF, Scheduler, View
from ..sched.conserve import conserve
from ..dataplane.constants import TCP_MSS_BYTES
from .translate import keep_classes, order_priorities


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
    #: ordered schedulers: each coflow's class from the order alone, before the size caps
    #: (the next round's ``prev_prio``: :func:`priorities`)
    order_prio: dict | None = None

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
                 "a_src", "a_dst", "a_sent", "a_rem", "k", "csent", "rflows", "sb_obj", "merged")

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
        # identity fast paths (the registry's shared snapshots and FlowProgress.measured hand
        # an unchanged coflow the same objects round after round, never modified): the
        # record's flow list, the bytes-sent dict last used, and the last merge
        # (registry's dict, measured dict, merged dict)
        self.rflows = rec.flows
        self.sb_obj = None
        self.merged = None

    def active(self, sb: dict, unknown: int) -> int:
        """Refresh the active part for bytes sent ``sb``; returns its flow count."""
        if self.sent_of is not None and self.unknown == unknown and (self.sb_obj is sb or self.sent_of == sb):
            self.sb_obj = sb
            return self.k
        n = len(self.flows)
        sent = np.zeros(n)
        if sb:
            idx = np.fromiter(sb.keys(), np.int64, len(sb))
            val = np.fromiter(sb.values(), np.float64, len(sb))
            ok = (idx >= 0) & (idx < n)
            sent[idx[ok]] = val[ok]
        rem = np.where(self.known, self.size - sent, float(unknown))
        m = self.valid & (rem > 0)
        self.k = int(m.sum())
        self.a_src, self.a_dst, self.a_sent, self.a_rem = self.src[m], self.dst[m], sent[m], rem[m]
        self.csent = float(sum(sb.values()))
        self.sent_of = dict(sb)
        self.sb_obj = sb
        self.unknown = unknown
        return self.k


def build_view(records, host_port: dict, link_Bps: float, now: float, memory: dict,
               unknown_size: int, cache: dict | None = None,
               measured: dict | None = None) -> tuple[View, tuple, list]:
    """(View, (cf, src, dst) arrays per View flow, [cid] per View coflow). ``cache`` (a dict
    the caller keeps) holds each record's arrays between rounds; ``measured`` (cid -> {flow
    index: bytes sent}, from the switches' counters) raises the registry's bytes sent."""
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
        if ra is None or (ra.rflows is not rec.flows and ra.flows != rec.flows):
            ra = cache[c] = _RecordArrays(rec, host_port)
        ra.rflows = rec.flows
        reg_sb = rec.sent_bytes
        sb = reg_sb or {}
        got = measured.get(c) if measured else None
        if got:
            if not sb:
                sb = got
            else:
                mg = ra.merged
                if mg is not None and mg[0] is reg_sb and mg[1] is got:
                    sb = mg[2]     # the same two dicts as last round: the same merge
                else:
                    sb = {i: max(sb.get(i, 0), got.get(i, 0)) for i in (sb.keys() | got.keys())}
                    ra.merged = (reg_sb, got, sb)
        k = ra.active(sb, unknown_size)
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


def size_caps(v: View, cids: list, q1_bytes: float) -> dict:
    """cid -> the highest priority a coflow's total size allows: Aalo's queues on what it
    will send in all (clairvoyant: sent + remaining, ``View.cf_total``), Q1 = ``q1_bytes``,
    E = 10, over the 7 classes 7..1 (``DclasParams(K=7)``); a coflow of unknown size gets 1.
    A coflow larger than Q1 never takes the top class, so that its backlog there (a strict
    class's queue holds seconds of its segments at these link rates) is not what a small
    newcomer waits behind; it is its class from the first packet, where D-CLAS reaches it by
    demotion."""
    from ..params import DclasParams
    p = DclasParams(K=7, Q1=float(q1_bytes))
    tot = v.cf_total.tolist()
    return {c: 8 - p.queue_of(t) for c, t in zip(cids, tot)}


def priorities(alloc: Allocation, cids: list, prev: dict | None = None,
               caps: dict | None = None, span: int = 7) -> tuple[dict, dict | None]:
    """(cid -> BMv2 priority, the order's classes before ``caps``) from what the scheduler said
    in its Allocation, whatever the scheduler: its queues (``alloc.queue``, 1 = highest)
    through ``hw_priority``, else its service order (``alloc.order``) through
    :func:`~coflow.ctl.translate.order_priorities` (7, 6, ..., saturating at 1) and, given
    last round's order classes ``prev``, through :func:`~coflow.ctl.translate.keep_classes`
    (no coflow of ``prev`` promoted), then each at most its cap in ``caps`` (:func:`size_caps`;
    a cap does not push the coflows behind it down: they may pass it), and at least its cap
    minus ``span`` (the class_span setting: when the order has more coflows than classes, the
    ones it ranks past the last class stay in their size's classes instead of all sharing class
    1 with the largest coflows; 7 = no such floor); neither (HUG) = no override
    (``fair_prio``)."""
    if not cids:
        return {}, None
    if alloc.queue is not None:
        return {c: hw_priority(min(max(int(q), 1), 8))
                for c, q in zip(cids, alloc.queue.tolist())}, None
    if alloc.order is not None:
        ranked = order_priorities(cids[k] for k in alloc.order.tolist())
        order = ranked if prev is None else keep_classes(ranked, prev)
        if not caps:
            return order, order
        out = {}
        for c, p in order.items():
            cap = caps.get(c)
            out[c] = p if cap is None else max(min(p, cap), cap - span, 1)
        return out, order
    return {}, None


def plan(mode: str, sched: Scheduler, records, host_port: dict, link_Bps: float, now: float,
         memory: dict, unknown_size: int, cache: dict | None = None,
         timings: dict | None = None, measured: dict | None = None,
         prev_prio: dict | None = None, class_q1_bytes: float = 0.0,
         class_span: int = 7, demand_cap=None) -> RatePlan:
    """``timings`` (optional): gets the seconds spent in ``view``, ``allocate``, ``priorities``;
    ``measured``: bytes sent read from the data plane (:func:`build_view`); ``prev_prio``: the
    previous plan's ``prio`` (ordered schedulers then promote no coflow still active:
    :func:`priorities`), None = classes by rank; ``class_q1_bytes`` > 0: ordered schedulers'
    classes capped by the coflows' sizes (:func:`size_caps`), each at least its cap minus
    ``class_span`` (:func:`priorities`); ``demand_cap`` ((cid, src pos, dst pos) -> bytes/s,
    ``inf`` = none): the flows' demand caps, the Allocation made work-conserving on them
    (:func:`coflow.sched.conserve.conserve`)."""
    t0 = time.perf_counter()
    v, (cf, src, dst), cids = build_view(records, host_port, link_Bps, now, memory, unknown_size,
                                         cache, measured)
    hosts = sorted(host_port, key=host_port.get)
    t1 = time.perf_counter()
    if not cids:
        if timings is not None:
            timings.update(view=t1 - t0, allocate=0.0, priorities=0.0)
        return RatePlan([], cf, src, dst, np.zeros(0), hosts, {}, INF, None, v)
    alloc = sched.allocate(v)
    rates = alloc.rates
    if demand_cap is not None:
        capv = np.fromiter((demand_cap((cids[k], a, b)) for k, a, b in
                            zip(cf.tolist(), src.tolist(), dst.tolist())), float, cf.size)
        rates = conserve(v, alloc, capv)
    t2 = time.perf_counter()
    caps = size_caps(v, cids, class_q1_bytes) if class_q1_bytes > 0 and alloc.order is not None \
        else None
    prio, order_prio = priorities(alloc, cids, prev_prio, caps, class_span)
    if timings is not None:
        timings.update(view=t1 - t0, allocate=t2 - t1, priorities=time.perf_counter() - t2)
    return RatePlan(cids, cf, src, dst, rates, hosts, prio, alloc.next_event, alloc, v,
                    order_prio)


def rate_snapshot(p: RatePlan, records, limited, floor_Bps: float = 0.0,
                  prio: dict | None = None, pace_factor: float = 1.0,
                  rates: np.ndarray | None = None) -> dict:
    """What the coflow API's WatchRates streams (:class:`coflow.api.rates.CoflowRates` per
    registered coflow, keyed by its id string): each active flow of the plan under its flow
    id, at the rate its sender should pace at (payload bytes/s: the scheduler's rate, at least
    the meters' floor ``floor_Bps``), ``limited`` where ``limited(cid)`` says a meter holds the
    coflow to its rates (times ``pace_factor``: 1 + ``pace_headroom``); the coflow's class
    from ``prio`` (default: the plan's); ``rates``: per active flow of the plan, the rates to
    pace at instead of the plan's (the controller's ``pace_hold_s``). A registered coflow
    with no active flow is listed without flows."""
    from ..api.rates import CoflowRates, FlowRate
    by_cid: dict = {}
    h = p.hosts
    rs = p.rates if rates is None else rates
    for k, a, b, r in zip(p.cf.tolist(), p.src.tolist(), p.dst.tolist(), rs.tolist()):
        by_cid.setdefault(p.cids[k], []).append((h[a], h[b], r))
    out: dict = {}
    for rec in records:
        c = (rec.cid.external, rec.cid.internal)
        flows = by_cid.get(c)
        fr: tuple = ()
        if flows:
            lim = bool(limited(c))
            fid = {(f.src, f.dst): i for i, f in enumerate(rec.flows)}
            fr = tuple(sorted((FlowRate(fid[(a, b)], a, b, max(float(r), floor_Bps) * pace_factor, lim)
                               for a, b, r in flows if (a, b) in fid), key=lambda x: x.flow_id))
        key = str(rec.cid)
        out[key] = CoflowRates(key, fr, (p.prio if prio is None else prio).get(c))
    return out


#: Bytes the switches' counters never take a flow's measured progress past its size minus this
#: (one full segment). A sender edge counts what *left* it, retransmissions included, not what
#: arrived: without the margin a flow whose last segment was still queued (or lost) counted as
#: finished, its coflow left the order and lost its priority, and its last packets waited in
#: the unordered class behind the ordered coflows (measured: 20 KB coflows taking 25-63 s under
#: SEBF while a 68 MB coflow held the top class). A flow leaves the order when its application
#: says so (Update or Unregister), never on the counters alone.
MEASURED_SHORT_BYTES = TCP_MSS_BYTES


def _short_of(measured: int, size) -> int:
    """``measured`` payload bytes of a flow of ``size`` bytes, kept MEASURED_SHORT_BYTES short.

    This holds a flow one segment short of a size that is *trusted*: the tail an honest flow's
    retransmissions and in-flight segments add stays within the claim margin
    (:func:`overrun`). A coflow whose bytes pass its sizes by more than the margin loses its
    sizes (the controller hands the core its flows with ``size_bytes=None``), and then this
    returns the measured bytes as they are: the one-segment floor no longer keeps a flow that
    declared 1 KB and sends 1 GB at one segment remaining, the top of SEBF's order."""
    if size is None:
        return measured
    return min(measured, max(0, int(size) - MEASURED_SHORT_BYTES))


def declared_pairs(rec, host_port: dict) -> dict:
    """(src pos, dst pos) -> the bytes coflow ``rec``'s flows on that host pair declare; None
    where one of them gave no size (the pair claims nothing)."""
    declared: dict = {}
    for f in rec.flows:
        k = (host_port[f.src], host_port[f.dst])
        if f.size_bytes is None:
            declared[k] = None
        elif k not in declared or declared[k] is not None:
            declared[k] = declared.get(k, 0) + int(f.size_bytes)
    return declared


def overrun(rec, pair_bytes: dict, host_port: dict, margin_frac: float, margin_bytes: int,
            factor: float = 1.0, slack_bytes: float = 0.0):
    """Whether coflow ``rec``'s measured bytes break its claims: the first host pair (src pos,
    dst pos) whose payload bytes (``pair_bytes``, :meth:`FlowProgress.sent`) exceed the sizes
    its flows on that pair declare (all of them known, :func:`declared_pairs`) x ``factor`` by
    more than ``margin_frac`` x that + ``margin_bytes`` + ``slack_bytes``, as ``(pair,
    measured, declared)``; None when every claim holds. A pair with a flow of unknown size
    claims nothing. (``factor`` and ``slack_bytes``: the time claim check,
    :func:`coflow.ctl.demand.overheld`.)"""
    if margin_bytes < 0 or not pair_bytes:
        return None
    declared = declared_pairs(rec, host_port)
    for pair, got in pair_bytes.items():
        d = declared.get(pair)
        if d is not None and got > factor * d * (1 + margin_frac) + margin_bytes + slack_bytes:
            return pair, got, d
    return None


def without_sizes(rec):
    """A copy of record ``rec`` whose flows declare no size (a coflow no longer trusted)."""
    from dataclasses import replace
    from ..api.registry import FlowSpec
    return replace(rec, flows=[FlowSpec(f.src, f.dst, None) for f in rec.flows])


class MeterHold:
    """Make-before-break for the policers of paced senders (``meter_hold_s``); the same rule
    holds the senders' own paces (``pace_hold_s``, applied first: the meters then follow the
    paces).

    A flow's new rate reaches its sender over the rate stream and its meter in the round's
    Write, in no guaranteed order: a meter lowered before the sender has slowed drops what the
    sender already sent at the old rate, and a TCP flow that loses its few segments in flight at
    such rates waits out its retransmission timeouts (measured: a 13 KB flow taking 7.6 s). So a
    meter goes down only ``hold_s`` after its flow's rate did (it keeps the old rate until then);
    it goes up at once. :meth:`apply` gives the rates to meter this round and when the earliest
    hold ends (a round must run then to lower it)."""

    def __init__(self, hold_s: float):
        self.hold_s = hold_s
        self._held: dict = {}   # flow key -> (rate kept, until)
        self._last: dict = {}   # flow key -> the scheduler's last rate

    def apply(self, keys: list, rates: np.ndarray, now: float) -> tuple[np.ndarray, float]:
        if self.hold_s <= 0:
            return rates, INF
        out = rates.copy()
        held: dict = {}
        last: dict = {}
        nxt = INF
        for j, (key, r) in enumerate(zip(keys, rates.tolist())):
            last[key] = r
            h = self._held.get(key)
            if h is None or now >= h[1] or h[0] <= r:
                prev = self._last.get(key)
                h = (prev, now + self.hold_s) if prev is not None and r < prev else None
            if h is not None:
                held[key] = h
                out[j] = h[0]
                nxt = min(nxt, h[1])
        self._held, self._last = held, last
        return out, nxt


class FlowProgress:
    """Bytes sent per flow, read from the data plane (the rate modes' closed loop).

    Every round the controller reads ``flow_bytes`` (frame bytes and packets that passed the
    meter) at the sender edges and hands each metered pair's reading to :meth:`observe`
    (``where``: the (switch, index) the pool gave the pair). A pair's payload bytes are
    ``base + payload_bytes(reading)``: ``base`` keeps what an earlier index of the same pair
    counted (a pair metered again after losing its meter) and what a counter held before it
    went back to 0 (a restarted switch, whose entries the controller re-inserts with a reset).
    :meth:`measured` spreads a pair's bytes over the coflow's flows on that pair, in flow
    order, each up to its size (the last one takes the excess), as the View's ``sent``."""

    def __init__(self, fcs_bytes: int = 0):
        self.fcs_bytes = fcs_bytes  # flow_bytes counts the FCS on Tofino (Target.fcs_bytes)
        self._pairs: dict = {}   # cid -> {(src pos, dst pos): [base, last, where]}
        self._cache: dict = {}   # cid -> (flows list, {pair: [flow indices]})
        self._ver: dict = {}     # cid -> its pairs' changes
        self._out: dict = {}     # cid -> (version, flows list, {flow index: bytes})
        self.version = 0         # bumped whenever a pair's bytes changed

    def observe(self, cid, src: int, dst: int, where, frame_bytes: int, packets: int) -> bool:
        """One reading; returns whether the pair's bytes changed."""
        from .translate import payload_bytes
        per = self._pairs.get(cid)
        if per is None:
            per = self._pairs[cid] = {}
        st = per.get((src, dst))
        if st is None:
            st = per[(src, dst)] = [0, 0, where]
        v = payload_bytes(frame_bytes, packets, self.fcs_bytes)
        if st[2] != where:       # a new index: the old one's bytes stay counted
            st[0] += st[1]
            st[1] = 0
            st[2] = where
        if v == st[1]:
            return False
        if v < st[1]:            # the counter went back (switch restart): keep what it had
            st[0] += st[1]
        st[1] = v
        self.version += 1
        self._ver[cid] = self._ver.get(cid, 0) + 1
        return True

    def pair_sent(self, cid, src: int, dst: int) -> int:
        """Payload bytes of one pair (0 before its first reading)."""
        st = self._pairs.get(cid, {}).get((src, dst))
        return 0 if st is None else st[0] + st[1]
    def cids(self) -> list:
        """The coflows with readings."""
        return list(self._pairs)

    def changes(self, cid) -> int:
        """How often a coflow's readings changed (a cheap "anything new?" test)."""
        return self._ver.get(cid, 0)

    def sent(self, cid) -> dict:
        """(src, dst) -> payload bytes of a coflow's pairs."""
        return {p: st[0] + st[1] for p, st in self._pairs.get(cid, {}).items()}

    def forget_except(self, live) -> None:
        for c in [c for c in self._pairs if c not in live]:
            del self._pairs[c]
            self._cache.pop(c, None)
            self._ver.pop(c, None)
            self._out.pop(c, None)

    def measured(self, records, host_port: dict) -> dict:
        """cid -> {flow index: payload bytes} for the coflows with readings (a coflow whose
        readings did not change since the last call gets the same dict object: the View's
        per-coflow arrays are then reused)."""
        out: dict = {}
        for rec in records:
            c = (rec.cid.external, rec.cid.internal)
            per = self._pairs.get(c)
            if not per:
                continue
            ver = self._ver.get(c, 0)
            prev = self._out.get(c)
            if prev is not None and prev[0] == ver and prev[1] is rec.flows:
                out[c] = prev[2]
                continue
            cached = self._cache.get(c)
            if cached is None or cached[0] is not rec.flows and cached[0] != rec.flows:
                groups: dict = {}
                for i, f in enumerate(rec.flows):
                    groups.setdefault((host_port[f.src], host_port[f.dst]), []).append(i)
                cached = self._cache[c] = (rec.flows, groups)
            groups = cached[1]
            got: dict = {}
            flows = rec.flows
            for pair, st in per.items():
                idx = groups.get(pair)
                if idx is None:
                    continue
                left = st[0] + st[1]
                if len(idx) == 1:  # the common case: one flow per host pair
                    got[idx[0]] = _short_of(left, flows[idx[0]].size_bytes)
                    continue
                last = len(idx) - 1
                for k, i in enumerate(idx):
                    size = flows[i].size_bytes
                    take = left if size is None or k == last else min(left, int(size))
                    got[i] = _short_of(take, size)
                    left -= take
            out[c] = got
            self._out[c] = (ver, rec.flows, got)
        return out


class RateAudit:
    """How closely each metered flow's sender kept to the rate the controller set (issue 27):
    per (coflow, src, dst) pair, the payload its sender edge passed (``flow_bytes``) against
    the integral of the rate the controller gave it (the paced rate: :func:`rate_snapshot`'s),
    over the intervals between two readings in which the flow was sending: it had sent before
    the interval and still had more than two segments left after it (a flow's last segments,
    its start and a flow waiting for its connection are not a rate). A paced sender's ratio is
    about 1; an unpaced one, held by its meter, sits below it (losses, backoff)."""

    def __init__(self):
        self._st: dict = {}   # key -> [t_rate, rate, expected_pending, bytes, t_read, exp, got]
        self._gone: list = []  # the states of coflows no longer registered

    def set_rates(self, rates: dict, now: float) -> None:
        """``rates``: key -> payload bytes/s from ``now`` on (pairs not listed: no rate)."""
        st = self._st
        for k, v in st.items():
            v[2] += v[1] * max(0.0, now - v[0])
            v[0], v[1] = now, float(rates.get(k, 0.0))
        for k, r in rates.items():
            if k not in st:
                st[k] = [now, float(r), 0.0, None, now, 0.0, 0.0]

    def observe(self, key, t: float, payload: int, size: int | None) -> None:
        v = self._st.get(key)
        if v is None:
            return
        exp = v[2] + v[1] * max(0.0, t - v[0])
        v[0], v[2] = t, 0.0
        prev = v[3]
        if prev is not None and prev > 0 and (size is None or payload < size - 2 * TCP_MSS_BYTES):
            v[5] += exp
            v[6] += max(0, payload - prev)
        v[3], v[4] = payload, t

    def forget_except(self, live) -> None:
        """Keep the pairs of coflows in ``live``; the others' figures go to the totals."""
        for k in [k for k in self._st if k[0] not in live]:
            self._gone.append(self._st.pop(k))

    def flows(self, min_expected: float = 4 * TCP_MSS_BYTES) -> list:
        """(achieved, expected) payload bytes per pair seen, live or gone, that had at least
        ``min_expected`` bytes of rate."""
        return [(v[6], v[5]) for v in list(self._st.values()) + self._gone if v[5] >= min_expected]

    def summary(self, min_expected: float = 4 * TCP_MSS_BYTES) -> dict:
        fl = self.flows(min_expected)
        if not fl:
            return {"flows": 0}
        r = np.array([g / e for g, e in fl])
        got, exp = sum(g for g, _ in fl), sum(e for _, e in fl)
        return {"flows": len(fl), "achieved_over_set": got / exp,
                "median": float(np.median(r)), "p10": float(np.percentile(r, 10)),
                "p90": float(np.percentile(r, 90)),
                "within_10pct": float(np.mean(np.abs(r - 1) <= 0.10))}

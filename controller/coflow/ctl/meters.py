"""The rate modes' entity family of :mod:`coflow.ctl.translate` (pure): rates -> meter configs and
``flow_meter`` entries at the senders' edges, the meter pool and the per-coflow meter context
(see translate's module doc, "What the rate modes enforce").
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from . import model as M

from ..dataplane.constants import (
    ASSIGNED_SLOTS, FLOW_SLOTS_PER_COFLOW)

from ..dataplane.constants import (FLOW_METERS, FRAME_OVERHEAD_BYTES,
                                   MAX_FRAME_BYTES, TCP_MSS_BYTES)

from .settings import CtlSettings, ip_int


# Meters --------------------------------------------------------------------------------------

def frame_rate(payload_Bps: float, fcs_bytes: int = 0) -> float:
    """Payload bytes/s -> the frame bytes/s a meter must pass for it: full-size tagged TCP
    segments carry ``TCP_MSS_BYTES`` of payload in ``MAX_FRAME_BYTES`` of frame
    (``FRAME_OVERHEAD_BYTES`` of Ethernet, IPv4, CoflowId option and TCP headers with
    timestamps; ``coflow.dataplane.constants``), plus ``fcs_bytes`` where the meters count the
    FCS (``Target.fcs_bytes``: 4 on Tofino, 0 on BMv2)."""
    return float(payload_Bps) * (MAX_FRAME_BYTES + fcs_bytes) / TCP_MSS_BYTES


def payload_bytes(frame_bytes: int, packets: int, fcs_bytes: int = 0) -> int:
    """A ``flow_bytes`` reading (frame bytes, packets) -> payload bytes: each packet carries
    ``FRAME_OVERHEAD_BYTES`` of headers (exact for data segments with timestamps; a SYN
    over-counts by its 8 extra option bytes, a segment without timestamps under-counts by 12)
    and, where the counter counts it, the FCS (``fcs_bytes``: ``Target.fcs_bytes``)."""
    return max(0, int(frame_bytes) - int(packets) * (FRAME_OVERHEAD_BYTES + fcs_bytes))


def burst_bytes(frame_Bps, s: CtlSettings, fcs_bytes: int = 0):
    """A meter's burst: one round trip of its (frame) rate, at least two maximum-size frames
    (a token bucket below one frame passes nothing, one frame serialises every burst) and at
    most ``burst_buffer_frac`` of the port buffer (a larger burst would be absorbed by no
    queue: the meter would let through what the port then drops). ``frame_Bps``: a number
    (an int is returned) or an array of them (an int64 array)."""
    hi = int(s.port_buffer_bytes * s.burst_buffer_frac)
    b = np.minimum(np.maximum(np.ceil(np.asarray(frame_Bps, dtype=np.float64) * s.rtt_us / 1e6)
                              .astype(np.int64), 2 * (MAX_FRAME_BYTES + fcs_bytes)), hi)
    return int(b) if b.ndim == 0 else b


def meter_params(rates_Bps: np.ndarray, s: CtlSettings, fcs_bytes: int = 0) -> tuple:
    """(cir, burst, peak burst) int64 arrays of the meters of flows whose scheduler rates are
    ``rates_Bps`` (payload bytes/s), one vector pass: :func:`meter_config`'s numbers (the
    translation computes a round's changed meters with it at once)."""
    r = np.asarray(rates_Bps, dtype=np.float64) * (MAX_FRAME_BYTES + fcs_bytes) / TCP_MSS_BYTES
    floor = s.min_rate_frac * s.link_Bps
    rate = np.maximum(np.maximum(r, floor), 1.0) * (1.0 + s.meter_headroom)
    cir = np.ceil(rate - 1e-6).astype(np.int64)  # (no 1-byte/s step from float noise)
    burst = burst_bytes(cir, s, fcs_bytes)
    if np.ndim(burst) == 0:
        burst = np.asarray([burst], dtype=np.int64).reshape(cir.shape)
    peak = np.maximum(burst, np.minimum((burst * s.meter_peak_bursts).astype(np.int64),
                                        s.port_buffer_bytes))
    if s.meter_headroom > 0 and s.meter_peak_bursts > 1:
        # paced senders: a connection's first PACING_FREE_SEGMENTS go out unpaced (Linux), so
        # the peak holds them (marked CE at worst, never RED)
        peak = np.maximum(peak, min(PACING_FREE_SEGMENTS * MAX_FRAME_BYTES, s.port_buffer_bytes))
    return cir, burst, peak


def meter_config(index: int, rate_Bps: float, s: CtlSettings, fcs_bytes: int = 0) -> M.MeterConfig:
    """MeterConfig for a bytes meter of one flow whose scheduler rate is ``rate_Bps`` payload
    bytes/s: cir = pir = :func:`frame_rate` of it in BYTES PER SECOND (P4Runtime's unit; the
    Thrift CLI would want bytes per microsecond), floored at ``min_rate_frac`` of the link;
    burst = :func:`burst_bytes` (rate x RTT, clamped to [2 frames, a share of the port
    buffer]); pburst = ``meter_peak_bursts`` bursts, at most the port buffer (YELLOW between
    the two: marked CE when ECN-capable); rates times 1 + ``meter_headroom`` (room above a
    paced sender's rate). Computed by :func:`meter_params`."""
    cir, burst, peak = meter_params(np.asarray([float(rate_Bps)]), s, fcs_bytes)
    c = int(cir[0])
    return M.MeterConfig(M.M_FLOW, index, c, int(burst[0]), c, int(peak[0]))


EMPTY: dict = {}  # a shared empty component (never mutated)
#: Linux TCP does not pace a connection's first 10 data segments (tcp_update_skb_after_send,
#: as sch_fq): a paced sender's meter must let them pass
PACING_FREE_SEGMENTS = 10


class MeterPool:
    """Meter indices 0..size-1 of each edge switch, handed out one per (coflow, src, dst) flow.

    ``take`` gives a flow the lowest free index of its sender's edge (the one it already holds,
    if any); ``release`` frees it. A released index is *held* until :meth:`commit` (the next
    round) and then goes to the back of the free list, so it is reused after every other free
    index: no round both removes and installs the same meter key (the desired-state book
    keeps components disjoint), and a late packet of a finished flow rarely meets a new owner
    (``flow_bytes`` of a reused index is zeroed when its entry is written, model.diff)."""

    def __init__(self, size: int = FLOW_METERS):
        if size < 1:
            raise ValueError("meter pool size must be >= 1")
        self.size = size
        self._free: dict = {}   # switch -> deque of free indices (lowest first, then released)
        self._held: list = []   # (switch, index) released this round
        self.index_of: dict = {}  # (cid, src, dst) -> (switch, index)
        self.owner: dict = {}     # (switch, index) -> (cid, src, dst)
        self.generation = 0       # counts commits that freed something
        # (switch, index) -> the MeterConfig a free index still holds on the switch (its last
        # owner's: nothing points at it, so it is left there, not reset, and the next owner's
        # config overwrites it: one write instead of a reset and a write); MeterContext fills it
        self.linger: dict = {}
        self.unlingered: list = []  # (switch, meter key) taken since MeterContext last looked

    def _q(self, sw) -> collections.deque:
        q = self._free.get(sw)
        if q is None:
            q = self._free[sw] = collections.deque(range(self.size))
        return q

    def available(self, sw) -> int:
        return len(self._q(sw))

    def take(self, sw, flow) -> int | None:
        """The flow's index on ``sw`` (taking the lowest free one); None when none is free."""
        got = self.index_of.get(flow)
        if got is not None:
            if got[0] == sw:
                return got[1]
            self.release(flow)  # (a host moved edge: not in a fixed topology)
        q = self._q(sw)
        if not q:
            return None
        i = q.popleft()
        self.index_of[flow] = (sw, i)
        self.owner[(sw, i)] = flow
        self._unlinger(sw, i)
        return i

    def _unlinger(self, sw, i: int) -> None:
        m = self.linger.pop((sw, i), None)
        if m is not None:
            self.unlingered.append((sw, m.key))

    def release(self, flow) -> None:
        got = self.index_of.pop(flow, None)
        if got is not None:
            del self.owner[got]
            self._held.append(got)

    def seed(self, sw, flow, index: int) -> bool:
        """Adopt an index read back from a switch (a restarted controller keeps its flows'
        meters, hence their ``flow_bytes``). False if it is taken or out of range."""
        q = self._q(sw)
        if not 0 <= index < self.size or flow in self.index_of or (sw, index) in self.owner:
            return False
        try:
            q.remove(index)
        except ValueError:
            return False
        self.index_of[flow] = (sw, index)
        self.owner[(sw, index)] = flow
        self._unlinger(sw, index)
        return True

    def commit(self) -> None:
        """The indices released since the last commit become free (at the back)."""
        if self._held:
            for sw, i in self._held:
                self._q(sw).append(i)
            self._held = []
            self.generation += 1

    def in_use(self) -> int:
        return len(self.index_of)

    def copy(self) -> "MeterPool":
        """An independent pool with the same assignments (a from-scratch translation that must
        pick the same indices: the tests' and the benchmark's reference)."""
        p = MeterPool(self.size)
        p._free = {sw: collections.deque(q) for sw, q in self._free.items()}
        p._held = list(self._held)
        p.index_of = dict(self.index_of)
        p.owner = dict(self.owner)
        p.generation = self.generation
        p.linger = dict(self.linger)
        p.unlingered = list(self.unlingered)
        return p


@dataclass
class MeterUpdate:
    """One round of meter translation as changes to desired-state components. Components are
    per coflow: ``("flow_meter", cid)`` and ``("meters", cid)`` on each switch (a coflow's
    meter indices are its own flows', from the pool, so components never share a key).
    ``sets``: (component, switch, entities) replacing a component (empty = gone), removals
    first; ``patches``: (component, switch, entities, changed keys) where only those keys'
    meter configs changed (rates moved). The entity dicts are the translator's own: meters are
    updated in place by later rounds.

    Meter configs of released indices stay on the switch (:attr:`MeterPool.linger`, the
    component ``("meters", FREE)`` of each edge): ``free_drop`` (before everything: the
    indices taken again this round, whose new owner's config replaces them) and ``free_add``
    (after everything: the configs of the indices released this round), both (component,
    switch, entities, changed keys). :meth:`apply` hands all of it to a book in that order."""
    sets: list
    patches: list
    free_drop: list = field(default_factory=list)
    free_add: list = field(default_factory=list)

    def apply(self, book, meters: bool = True) -> None:
        """Hand the round's changes to a :class:`~coflow.ctl.desired.DesiredBook`
        (``meters`` False: no MeterConfig at all, the flow_meter entries only)."""
        for comp, sw, ents, keys in self.free_drop if meters else ():
            book.set(comp, sw, ents, changed=keys)
        for comp, sw, ents in self.sets:
            if meters or comp[0] != "meters":
                book.set(comp, sw, ents)
        for comp, sw, ents, keys in self.patches:
            if meters or comp[0] != "meters":
                book.set(comp, sw, ents, changed=keys)
        for comp, sw, ents, keys in self.free_add if meters else ():
            book.set(comp, sw, ents, changed=keys)


#: the component of a switch's free meter indices' lingering configs (MeterPool.linger)
FREE = "free"


class _CoflowMeters:
    """One coflow's pairs and meters: flow -> pair, pair -> meter (positions in this coflow's
    flows, pairs and meters; one meter per pair) and its entities per switch, rebuilt only
    when its flows' hosts change."""
    __slots__ = ("key", "pinv", "npairs", "minv", "nmeters", "m_sw", "m_index", "fm", "meters",
                 "moff", "mrate", "mpar", "flows")


class MeterContext:
    """Per-topology state of the vectorised meter translation: hosts by position (the rate
    modes' port numbers), their addresses and edge switches, the meter pool, caches of entity
    objects (an unchanged pair or meter config is the same object round after round) and each
    coflow's pair/meter structure. A round whose flows are those of the previous one (only
    rates moved, the common case) costs two bincounts and the meters whose rate changed; a
    coflow that arrives, leaves or whose active flows change costs its own flows.

    Every (coflow, src, dst) pair of a coflow's active flows gets a meter index of its own at
    the sender's edge (:class:`MeterPool`, ``meters`` indices per edge: ``FLOW_METERS``, or
    ``metered_slots * FLOW_SLOTS_PER_COFLOW``), so each meter enforces exactly the rate the
    scheduler computed for that pair (flows of one coflow on the same host pair share the
    table key, hence one meter, at the sum of their rates). All or nothing per coflow: a
    coflow whose pairs do not all get an index (pool exhausted at an edge) gets no meter at
    all; it is listed in :attr:`unmetered` (cid -> its pairs) and the controller gives it no
    override either (fair class). Coflows are served in the order given (registration order);
    an unmetered coflow is tried again when indices are freed."""

    def __init__(self, topo, metered_slots: int = ASSIGNED_SLOTS, meters: int | None = None,
                 pool: MeterPool | None = None, fcs_bytes: int = 0):
        self.fcs_bytes = fcs_bytes  # the target's meters count the FCS (Target.fcs_bytes)
        self.pool = pool if pool is not None else MeterPool(
            meters if meters is not None else metered_slots * FLOW_SLOTS_PER_COFLOW)
        hosts = sorted(topo.hosts, key=lambda h: h.index)
        self.names = [h.name for h in hosts]
        self.pos = {h.name: i for i, h in enumerate(hosts)}
        self.ip = [ip_int(h.ip) for h in hosts]
        self.switches = sorted({h.switch for h in hosts})
        sw_idx = {n: i for i, n in enumerate(self.switches)}
        self.edge_of = np.array([sw_idx[h.switch] for h in hosts], dtype=np.int64)
        self._fm: dict = {}  # cid -> {(src, dst, index): flow_meter entry}
        self._cf: dict = {}  # cid -> _CoflowMeters (the coflows of the last round)
        self._glob = None  # (key, sel, inv, minv, npairs, nmeters, [(cid, _CoflowMeters)])
        self._mrate = None  # last round's rate per meter (global order)
        self._dropped: list = []  # (switch, MeterConfig) of the meters released this round
        # a released index's config is left on the switch (False: reset, the code before;
        # bench-scale's baseline)
        self.linger_released = True
        self._settings = None
        self._mpar = None  # last round's (cir, burst, peak) per meter (global order)
        self.unmetered: dict = {}  # cid -> pairs that got no meter (the whole coflow: none)
        # the closed loop's read set, kept incrementally (changed only by the coflows a round
        # builds or drops): switch -> {index: (cid, src, dst, flow_meter entry)} of every
        # metered pair, and a version per switch bumped whenever its set changes
        self.read_set: dict = {}
        self.read_version: dict = {}
        self._read_idx: dict = {}   # switch -> (version, sorted indices)

    @property
    def unmetered_flows(self) -> int:
        return sum(self.unmetered.values())

    def metered(self, cid) -> bool:
        return cid in self._cf

    def flows(self, cid) -> list:
        """[(src, dst, switch, index)] of a metered coflow's pairs (host positions)."""
        cm = self._cf.get(cid)
        return [] if cm is None else cm.flows

    def read_indices(self, sw) -> tuple:
        """The sorted meter indices of ``sw``'s read set (kept while its version is)."""
        v = self.read_version.get(sw, 0)
        got = self._read_idx.get(sw)
        if got is None or got[0] != v:
            got = self._read_idx[sw] = (v, tuple(sorted(self.read_set.get(sw, ()))))
        return got[1]

    def read_set_rebuilt(self) -> dict:
        """The read set rebuilt from the pool (every pair holding an index whose flow_meter
        entry this context made): what :attr:`read_set` must equal (the tests' reference)."""
        out: dict = {}
        for (cid, a, b), (sw, idx) in self.pool.index_of.items():
            e = self.flow_entry(cid, a, b, idx)
            if e is not None:
                out.setdefault(sw, {})[idx] = (cid, a, b, e)
        return out

    def _read_drop(self, cid, cm: _CoflowMeters) -> None:
        rs, ver = self.read_set, self.read_version
        for _a, _b, sw, i in cm.flows:
            d = rs.get(sw)
            got = None if d is None else d.get(i)
            if got is not None and got[0] == cid:
                del d[i]
                ver[sw] = ver.get(sw, 0) + 1

    def _read_add(self, cid, cm: _CoflowMeters) -> None:
        rs, ver, fm = self.read_set, self.read_version, self._fm[cid]
        for a, b, sw, i in cm.flows:
            d = rs.get(sw)
            if d is None:
                d = rs[sw] = {}
            d[i] = (cid, a, b, fm[(a, b, i)])
            ver[sw] = ver.get(sw, 0) + 1

    def flow_entry(self, cid, src: int, dst: int, index: int) -> M.TableEntry | None:
        """The flow_meter entry of a metered pair (None if there is none)."""
        per = self._fm.get(cid)
        return None if per is None else per.get((src, dst, index))

    def flow_meter(self, cid, src: int, dst: int, index: int) -> M.TableEntry:
        """The flow_meter entry (the same object while the coflow lives: a coflow whose flows
        change keeps the entries of its unchanged pairs)."""
        per = self._fm.get(cid)
        if per is None:
            per = self._fm[cid] = {}
        k = (src, dst, index)
        e = per.get(k)
        if e is None:
            # fields in name order (external_id < internal_id < ipv4_dst < ipv4_src), as
            # cid_key + sorted would give
            match = (("external_id", int(cid[0])), ("internal_id", int(cid[1])),
                     ("ipv4_dst", self.ip[dst]), ("ipv4_src", self.ip[src]))
            e = per[k] = M.TableEntry(M.T_FLOW_METER, match, M.A_SET_METER, (("index", int(index)),))
        return e

    def _coflow(self, cid, src, dst, old: _CoflowMeters | None) -> _CoflowMeters | None:
        """Pairs in order of first appearance, each with its own index from the pool (kept
        from ``old`` for pairs it had); None, holding nothing, when some pair gets none. The
        pairs ``old`` had and this one has not are released."""
        P = len(self.names)
        pool = self.pool
        pair = src * P + dst
        upair, first, inv = np.unique(pair, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # pairs in first-appearance order
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        psrc, pdst = src[first[order]].tolist(), dst[first[order]].tolist()
        names = self.switches
        pedge = [names[e] for e in self.edge_of[src[first[order]]].tolist()]
        keep = {(a, b) for a, b in zip(psrc, pdst)}
        if old is not None:
            for a, b, _, _ in old.flows:
                if (a, b) not in keep:
                    pool.release((cid, a, b))
        need: dict = {}
        for a, b, sw in zip(psrc, pdst, pedge):
            got = pool.index_of.get((cid, a, b))
            if got is None or got[0] != sw:
                need[sw] = need.get(sw, 0) + 1
        if any(pool.available(sw) < n for sw, n in need.items()):
            for a, b in keep:
                pool.release((cid, a, b))
            return None
        cm = _CoflowMeters()
        idx = [pool.take(sw, (cid, a, b)) for a, b, sw in zip(psrc, pdst, pedge)]
        cm.flows = list(zip(psrc, pdst, pedge, idx))
        cm.pinv = rank[inv.reshape(-1)]
        cm.npairs = cm.nmeters = len(idx)
        cm.minv = np.arange(cm.npairs, dtype=np.int64)
        cm.m_sw = pedge
        cm.m_index = idx
        fm: dict = {}
        for a, b, sw, i in cm.flows:
            e = self.flow_meter(cid, a, b, i)
            fm.setdefault(sw, {})[e.key] = e
        cm.fm = fm
        cm.meters = None
        cm.mrate = None
        cm.mpar = None
        return cm

    def update(self, cids: list, cf, src, dst, rate, slots: Mapping | None = None,
               s: CtlSettings | None = None) -> MeterUpdate:
        """Flows as arrays (coflow position in ``cids``, src and dst host positions, rate
        payload bytes/s) -> this round's :class:`MeterUpdate`. ``slots`` is not used (meters
        come from the pool, not from the counter slot; kept for the callers' signature)."""
        if s is None:
            s = CtlSettings()
        self.pool.commit()
        cf = np.asarray(cf, dtype=np.int64)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        rate = np.asarray(rate, dtype=float)
        retry = self.pool.generation if self.unmetered else -1
        key = (tuple(cids), cf.tobytes(), src.tobytes(), dst.tobytes(), retry)
        sets: list = []
        glob = self._glob
        if self._settings != s:
            self._settings = s
            glob = None
            for cm in self._cf.values():
                cm.mrate = cm.mpar = None  # every meter again
            self._mrate = self._mpar = None
        if glob is None or glob[0] != key:
            glob = self._global(key, cids, cf, src, dst, sets)
        _, sel, inv, minv, npairs, nmeters, members, moffs = glob
        r = rate if sel is None else rate[sel]
        prate = np.bincount(inv, weights=r, minlength=npairs)
        mrate = np.bincount(minv, weights=prate, minlength=nmeters)
        if glob is self._glob and self._mrate is not None and self._mpar is not None:
            prev, ppar = self._mrate, self._mpar  # the same coflows and flows as last round
        else:
            prev = np.full(nmeters, np.nan)  # NaN: a new or rebuilt coflow's meters
            ppar = np.full((3, nmeters), -1, dtype=np.int64)
            for _, cm in members:
                if cm.mrate is not None and cm.mpar is not None:
                    prev[cm.moff:cm.moff + cm.nmeters] = cm.mrate
                    ppar[:, cm.moff:cm.moff + cm.nmeters] = cm.mpar
        ch = np.flatnonzero(mrate != prev)
        patches: list = []
        mpar = ppar
        if ch.size:
            # the changed rates' meters in one vector pass; a meter is rewritten only when its
            # config changed (rates below the floor, or that round to the same byte/s, give
            # the same config: no new object, no patch, nothing for the book to compare)
            mpar = ppar.copy()
            mpar[:, ch] = meter_params(mrate[ch], s, self.fcs_bytes)
            moved = ch[(mpar[:, ch] != ppar[:, ch]).any(axis=0)]
            owner = np.searchsorted(moffs, moved, side="right") - 1
            by: dict = {}
            fresh: list = []
            fresh_k: set = set()
            new_m = mpar[:, moved].tolist()
            for i, k, cir, burst, peak in zip(moved.tolist(), owner.tolist(), *new_m):
                cid, cm = members[k]
                j = i - cm.moff
                m = M.MeterConfig(M.M_FLOW, cm.m_index[j], cir, burst, cir, peak)
                if cm.meters is None:   # new or rebuilt: all its meters (all moved from -1)
                    cm.meters = {}
                    fresh.append((cid, cm))
                    fresh_k.add(k)
                cm.meters.setdefault(cm.m_sw[j], {})[m.key] = m
                if k not in fresh_k:
                    by.setdefault((cid, cm.m_sw[j]), (cm, []))[1].append(m.key)
            for cid, cm in fresh:
                sets.extend((("meters", cid), sw, cm.meters[sw]) for sw in sorted(cm.meters))
            patches = [(("meters", cid), sw, cm.meters[sw], ks) for (cid, sw), (cm, ks) in by.items()]
        for _, cm in members:  # each coflow's own view of the rates, for a later rebuild
            cm.mrate = mrate[cm.moff:cm.moff + cm.nmeters]
            cm.mpar = mpar[:, cm.moff:cm.moff + cm.nmeters]
        self._glob = glob
        self._mrate = mrate
        self._mpar = mpar
        return MeterUpdate(sets, patches, *self._linger())

    def _linger(self) -> tuple:
        """(free_drop, free_add) of this round: the lingering configs of indices taken again,
        and the configs of the indices released this round (their meters left as they are)."""
        pool = self.pool
        drop: dict = {}
        for sw, k in pool.unlingered:
            drop.setdefault(sw, []).append(k)
        pool.unlingered = []
        add: dict = {}
        if not self.linger_released:
            self._dropped = []
        if self._dropped:
            owner, linger = pool.owner, pool.linger
            for sw, m in self._dropped:
                if (sw, m.index) not in owner:
                    linger[(sw, m.index)] = m
                    add.setdefault(sw, {})[m.key] = m
            self._dropped = []
        comp = ("meters", FREE)
        return ([(comp, sw, EMPTY, ks) for sw, ks in sorted(drop.items())],
                [(comp, sw, d, list(d)) for sw, d in sorted(add.items())])

    def _global(self, key, cids, cf, src, dst, sets: list) -> tuple:
        """The round's coflows: reuse the unchanged ones, build the new or changed ones (or
        leave them unmetered when the pool cannot meter all their pairs), drop the gone ones
        (their components emptied in ``sets``, first); concatenate their pair and meter maps."""
        n = cf.size
        if n and np.any(cf[1:] < cf[:-1]):
            order = np.argsort(cf, kind="stable")  # flows of a coflow together, in order
        else:
            order = None
        cfo = cf if order is None else cf[order]
        bounds = np.searchsorted(cfo, np.arange(len(cids) + 1))
        srco = src if order is None else src[order]
        dsto = dst if order is None else dst[order]
        members, inv_parts, minv_parts, spans = [], [], [], []
        new_cf: dict = {}
        built: list = []
        bl = bounds.tolist()
        seen: set = set()
        unmetered: dict = {}
        for k, cid in enumerate(cids):
            lo, hi = bl[k], bl[k + 1]
            if hi == lo or cid in seen:
                continue
            seen.add(cid)
            s_k, d_k = srco[lo:hi], dsto[lo:hi]
            ck = (s_k.tobytes(), d_k.tobytes())
            cm = self._cf.get(cid)
            if cm is None or cm.key != ck:
                old = cm
                cm = self._coflow(cid, s_k, d_k, old)
                if cm is None:
                    unmetered[cid] = int(np.unique(s_k * len(self.names) + d_k).size)
                    if old is not None:
                        built.append((cid, old, None))
                    continue
                cm.key = ck
                built.append((cid, old, cm))
            new_cf[cid] = cm
            members.append((cid, cm))
            inv_parts.append(cm.pinv)
            minv_parts.append(cm.minv)
            spans.append((lo, hi, cm.npairs, cm.nmeters))
        # components: gone coflows first (a key never passes between coflows in one round:
        # the pool holds released indices until the next)
        dropped = self._dropped
        for cid, cm in self._cf.items():
            if cid not in new_cf:
                for sw, d in (cm.meters or {}).items():
                    dropped.extend((sw, m) for m in d.values())
                self._read_drop(cid, cm)
                for a, b, _, _ in cm.flows:  # (held by the pool until the next round)
                    self.pool.release((cid, a, b))
                self._fm.pop(cid, None)
                sets.extend((("flow_meter", cid), sw, EMPTY) for sw in sorted(cm.fm))
                sets.extend((("meters", cid), sw, EMPTY) for sw in sorted(cm.meters or ()))
        for cid, old, cm in built:
            if old is not None and cm is not None:
                if old.meters:
                    now = set(zip(cm.m_sw, cm.m_index))
                    dropped.extend((sw, m) for sw, d in old.meters.items() for m in d.values()
                                   if (sw, m.index) not in now)
                sets.extend((("flow_meter", cid), sw, EMPTY) for sw in sorted(old.fm) if sw not in cm.fm)
                sw_now = set(cm.m_sw)
                sets.extend((("meters", cid), sw, EMPTY) for sw in sorted(old.meters or ())
                            if sw not in sw_now)
        for cid, old, _cm in built:
            if old is not None and self._cf.get(cid) is old:
                self._read_drop(cid, old)
        for cid, _old, cm in built:
            if cm is not None:
                self._read_add(cid, cm)
                sets.extend((("flow_meter", cid), sw, cm.fm[sw]) for sw in sorted(cm.fm))
        self._cf = new_cf
        self.unmetered = unmetered
        pool = self.pool
        if len(pool.index_of) != sum(len(cm.flows) for cm in new_cf.values()):
            # indices no current pair holds (adopted from a switch for flows that are done)
            held = {(cid, a, b) for cid, cm in new_cf.items() for a, b, _, _ in cm.flows}
            for fl in [fl for fl in pool.index_of if fl not in held]:
                pool.release(fl)
        if members:
            sp = np.array(spans, dtype=np.int64)
            nflows = sp[:, 1] - sp[:, 0]
            poff = np.cumsum(sp[:, 2]) - sp[:, 2]
            moffs = np.cumsum(sp[:, 3]) - sp[:, 3]
            for (_, cm), mo in zip(members, moffs.tolist()):
                cm.moff = mo
            inv = np.concatenate(inv_parts) + np.repeat(poff, nflows)
            minv = np.concatenate(minv_parts) + np.repeat(moffs, sp[:, 2])  # per pair
            npairs, nmeters = int(sp[:, 2].sum()), int(sp[:, 3].sum())
            if int(nflows.sum()) == n and order is None:
                sel = None  # every flow, in order
            else:
                sel = np.concatenate([np.arange(lo, hi) for lo, hi, _, _ in spans])
                if order is not None:
                    sel = order[sel]
        else:
            sel, inv, minv = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
            npairs = nmeters = 0
            moffs = np.zeros(0, np.int64)
        return (key, sel, inv, minv, npairs, nmeters, members, moffs)

    def state(self) -> dict:
        """Switch -> {key: entity} of every metered coflow (fresh dicts)."""
        out: dict = {}
        for cm in self._cf.values():
            for part in (cm.fm, cm.meters or {}):
                for sw, d in part.items():
                    out.setdefault(sw, {}).update(d)
        for (sw, _), m in self.pool.linger.items():   # free indices' configs, left in place
            out.setdefault(sw, {})[m.key] = m
        return out


def meter_entities_arrays(ctx: MeterContext, cids: list, cf, src, dst, rate, slots: Mapping | None,
                          s: CtlSettings) -> dict:
    """Vectorised :func:`meter_entities`: flows as arrays (coflow position in ``cids``, src and
    dst host positions, rate payload bytes/s). Returns switch -> {key: entity} (fresh dicts)."""
    ctx.update(cids, cf, src, dst, rate, slots, s)
    return {sw: d for sw, d in sorted(ctx.state().items())}


def meter_entities(topo, flows: Iterable, slots: Mapping | None, s: CtlSettings,
                   ctx: MeterContext | None = None) -> dict:
    """Per switch: flow_meter entries and meter configs for metered flows.

    ``flows``: (cid, src host name, dst host name, rate payload bytes/s). A meter sits at the
    sender's edge switch and meters one (coflow, src, dst) pair (the table's key), so flows of
    a coflow on the same host pair share it (their rates add); every pair has its own meter
    index from the pool (:class:`MeterContext`). ``slots`` is not used."""
    ctx = MeterContext(topo) if ctx is None else ctx
    cids, cpos = [], {}
    cf, src, dst, rate = [], [], [], []
    for cid, a, b, r in flows:
        if cid not in cpos:
            cpos[cid] = len(cids)
            cids.append(cid)
        cf.append(cpos[cid])
        src.append(ctx.pos[a])
        dst.append(ctx.pos[b])
        rate.append(float(r))
    return {sw: list(d.values())
            for sw, d in meter_entities_arrays(ctx, cids, cf, src, dst, rate, slots, s).items()}

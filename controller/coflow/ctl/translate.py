"""Translation: topology, mode, parameters and Allocations -> desired switch state (pure).

Everything here returns :mod:`coflow.ctl.model` values per switch name; nothing talks to a
switch. Units: rates in bytes per second (P4Runtime's MeterConfig unit for a bytes meter, and
the scheduler core's), bursts in bytes, counters in Ethernet frame bytes without FCS.
"""
from __future__ import annotations

import functools
import ipaddress
import math
from dataclasses import dataclass, fields
from typing import Iterable, Mapping

import numpy as np

from ..params import DclasParams, HW_QUEUES, hw_priority
from ..tofino.target import BMV2, Target, get_target  # noqa: F401 (the targets, by name)
from . import model as M

from ..dataplane.constants import (  # noqa: F401 (MODES, RATE_MODES: the ctl's public names)
    ASSIGNED_SLOTS, FLOW_SLOTS_PER_COFLOW, HASH_SLOT_BASE, MODE_CODE, MODES, RATE_MODES, SCHEDULER_OF)

NO_HEAVY = (1 << 64) - 1
MAX_FRAME = 1514              # Ethernet frame without FCS at MTU 1500
IP_PROTO_TCP = 6
# IP total length of the largest "control" segment: 20 (IP) + 20 (TCP) + 40 (options: timestamps
# and up to three SACK blocks) = 80; the next size up, 128, leaves room and holds no data segment
# worth the top class.
CONTROL_MAX_LEN = 127


@dataclass(frozen=True)
class CtlSettings:
    """Controller settings (``--set key=value`` keys the scheduler does not own).

    - ``link_mbps``: capacity of every host link in the rate modes' big-switch view (Mb/s,
      10^6 bit/s); the scheduler's rates are bytes/s of this.
    - ``fair_prio``: BMv2 priority of fair mode and of unordered coflows in the rate modes.
    - ``burst_ms`` / ``min_burst_bytes``: meter burst = max(rate * burst_ms, min_burst_bytes).
    - ``min_rate_frac``: floor of a meter's rate as a fraction of the link (a flow the schedule
      pauses keeps a trickle, so its TCP connection does not back off for seconds).
    - ``unknown_size_bytes``: remaining bytes assumed for a flow whose size the application did
      not give (clairvoyant schedulers order it last).
    - ``audit_s``: full read-back of every switch at this period (0 = only after a reconnect
      or a failed write).
    - ``telemetry_s``: the data plane's drop / collision counters are read from every switch
      at this period, outside the rounds (``coflow_dp_*`` metrics, ``dataplane`` in the
      status; 0 = never).
    - ``control_prio`` / ``control_max_len``: untagged TCP packets of at most this IP total
      length (the receivers' pure ACKs, SYN-ACKs, FINs) go in this class at the edges
      (``untagged_class``); ``control_max_len=0`` leaves them in the default class.
    """
    link_mbps: float = 10.0
    fair_prio: int = 4
    burst_ms: float = 20.0
    min_burst_bytes: int = 10 * MAX_FRAME
    min_rate_frac: float = 0.01
    unknown_size_bytes: int = 1 << 40
    audit_s: float = 5.0
    telemetry_s: float = 2.0
    control_prio: int = HW_QUEUES - 1
    control_max_len: int = CONTROL_MAX_LEN

    @property
    def link_Bps(self) -> float:
        return self.link_mbps * 1e6 / 8


def split_settings(settings: Mapping[str, str] | None) -> tuple[CtlSettings, dict[str, str]]:
    """(controller settings, scheduler settings) from one ``--set`` dict."""
    own = {f.name: f for f in fields(CtlSettings)}
    kw, rest = {}, {}
    for k, v in (settings or {}).items():
        if k in own:
            typ = own[k].type
            try:
                kw[k] = int(v) if typ in ("int", int) else float(v)
            except ValueError:
                raise ValueError(f"setting {k}: cannot read {v!r} as {typ}") from None
        else:
            rest[k] = v
    s = CtlSettings(**kw)
    if s.link_mbps <= 0:
        raise ValueError("setting link_mbps: must be > 0")
    if not 0 <= s.fair_prio < HW_QUEUES:
        raise ValueError(f"setting fair_prio: must be in 0..{HW_QUEUES - 1}")
    if not 0 <= s.control_prio < HW_QUEUES:
        raise ValueError(f"setting control_prio: must be in 0..{HW_QUEUES - 1}")
    if not 0 <= s.control_max_len < 1 << 16:
        raise ValueError("setting control_max_len: must be in 0..65535 (0 = off)")
    if s.burst_ms < 0 or s.min_burst_bytes < 1 or not 0 <= s.min_rate_frac <= 1:
        raise ValueError("settings burst_ms >= 0, min_burst_bytes >= 1, 0 <= min_rate_frac <= 1")
    return s, rest


def ip_int(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def cid_key(external: int, internal: int) -> tuple:
    return (("external_id", int(external)), ("internal_id", int(internal)))


# Static state ------------------------------------------------------------------------------

def routing_entities(switch, routes) -> list:
    """Members (one per next hop, id = its port), groups (one per distinct ECMP set, ids from
    1 in order of first use) and one LPM entry per route."""
    out_members, out_groups, out_routes = {}, {}, []
    smac = mac_int(switch.mac)
    for r in routes:
        for nh in r.next_hops:
            m = M.Member(M.P_ECMP, nh.port, M.A_NEXT_HOP,
                         M.params(port=nh.port, smac=smac, dmac=mac_int(nh.dmac)))
            prev = out_members.setdefault(nh.port, m)
            if prev != m:
                raise ValueError(f"{switch.name}: port {nh.port} has two next hops ({prev}, {m})")
        net = ipaddress.IPv4Network(r.prefix)
        match = (("ipv4_dst", (int(net.network_address), net.prefixlen)),)
        if len(r.next_hops) == 1:
            out_routes.append(M.TableEntry(M.T_ROUTING, match, member_id=r.next_hops[0].port))
        else:
            ports = tuple(sorted(nh.port for nh in r.next_hops))
            g = out_groups.get(ports)
            if g is None:
                g = out_groups[ports] = M.Group(M.P_ECMP, len(out_groups) + 1, ports, len(ports))
            out_routes.append(M.TableEntry(M.T_ROUTING, match, group_id=g.group_id))
    return list(out_members.values()) + list(out_groups.values()) + out_routes


def config_entity(mode: str, fair_prio: int = 4, heavy_bytes: int = NO_HEAVY,
                  fifo_base: int = 0, target: Target | str = BMV2) -> M.DefaultAction:
    """``heavy_bytes`` as the target compares it (bytes on bmv2, 64-byte units on Tofino)."""
    return M.DefaultAction(M.T_CONFIG, M.A_SET_CONFIG,
                           M.params(mode=MODE_CODE[mode], fair_prio=fair_prio,
                                    heavy_bytes=get_target(target).heavy_param(heavy_bytes),
                                    fifo_base=fifo_base))


def dclas_entities(p: DclasParams, target: Target | str = BMV2) -> list:
    """The range table from the shared parameter object: Aalo queue q -> hw_priority(q). The
    range is in the target's key units (bytes on bmv2; on Tofino 256 KiB steps, thresholds
    rounded to the nearest step: ``Target.dclas_ranges``)."""
    if p.K > HW_QUEUES:
        raise ValueError(f"D-CLAS K={p.K}: the switch has {HW_QUEUES} queues (set K<=8)")
    return [M.TableEntry(M.T_DCLAS, (("bytes", (lo, hi)),), M.A_DCLAS_QUEUE,
                         M.params(prio=hw_priority(q)), priority=1)
            for lo, hi, q in get_target(target).dclas_ranges(p.ranges())]


def control_class_entities(prio: int = HW_QUEUES - 1, max_len: int = CONTROL_MAX_LEN) -> list:
    """``untagged_class``: untagged TCP with IP total length <= ``max_len`` -> class ``prio``
    (none when ``max_len`` is 0). The DSCP key is left out (don't care): a host cannot promote
    its data this way, since a data segment is longer."""
    if max_len <= 0:
        return []
    return [M.TableEntry(M.T_UNTAGGED, (("dscp", (0, 0)), ("ip_len", (0, int(max_len))),
                                        ("protocol", (IP_PROTO_TCP, 0xFF))),
                         M.A_SET_CLASS, M.params(prio=int(prio)), priority=10)]


def static_state(topo, routes: Mapping[str, list], mode: str, dclas: DclasParams,
                 fair_prio: int = 4, heavy_bytes: int = NO_HEAVY, fifo_base: int = 0,
                 control_prio: int = HW_QUEUES - 1, control_max_len: int = CONTROL_MAX_LEN,
                 target: Target | str = BMV2) -> dict:
    """Per switch: routing (members, ECMP groups, LPM), port roles (switch-facing ports are
    fabric; unlisted ports are edges), the pipeline config, the D-CLAS thresholds and the
    control-segment class of untagged TCP (:func:`control_class_entities`)."""
    out = {}
    cfg = config_entity(mode, fair_prio, heavy_bytes, fifo_base, target)
    thresholds = dclas_entities(dclas, target) + control_class_entities(control_prio, control_max_len)
    for sw in topo.switches:
        ents = routing_entities(sw, routes.get(sw.name, []))
        ents += [M.TableEntry(M.T_PORT_ROLE, (("ingress_port", p),), M.A_SET_ROLE,
                              M.params(role=0)) for p in topo.fabric_ports(sw.name)]
        ents.append(cfg)
        ents += thresholds
        out[sw.name] = ents
    return out


# Coflow slots ----------------------------------------------------------------------------

class SlotTable:
    """CoflowId -> counter slot 0..511 (the same slot on every edge switch). The lowest free
    slot first; a released slot goes to the back of the free list (reused after every other
    free slot), so a late packet of a finished coflow rarely meets a new owner."""

    def __init__(self, size: int = ASSIGNED_SLOTS):
        self.size = size
        self.slot: dict = {}  # cid (external, internal) -> slot
        self._free = list(range(size - 1, -1, -1))  # pop() gives the lowest

    def assign(self, cid) -> int | None:
        """The coflow's slot (assigning one); None when all are taken (its packets hash)."""
        s = self.slot.get(cid)
        if s is not None:
            return s
        if not self._free:
            return None
        s = self._free.pop()
        self.slot[cid] = s
        return s

    def release(self, cid) -> int | None:
        s = self.slot.pop(cid, None)
        if s is not None:
            self._free.insert(0, s)
        return s

    def seed(self, cid, slot: int) -> bool:
        """Adopt an assignment read back from a switch (controller restart). False if taken."""
        if not 0 <= slot < self.size or slot not in self._free or cid in self.slot:
            return False
        self._free.remove(slot)
        self.slot[cid] = slot
        return True

    def __len__(self):
        return len(self.slot)


def slot_entities(slots: Mapping) -> list:
    """coflow_slot entries (installed on every edge switch)."""
    return [slot_entity(cid, s) for cid, s in sorted(slots.items(), key=lambda kv: kv[1])]


@functools.lru_cache(maxsize=1 << 16)
def slot_entity(cid, slot: int) -> M.TableEntry:
    """One ``coflow_slot`` entry (cached: the same cid and slot give the same object)."""
    return M.TableEntry(M.T_SLOT, cid_key(*cid), M.A_SET_SLOT, M.params(slot=slot))


@functools.lru_cache(maxsize=1 << 16)
def override_entity(cid, prio: int) -> M.TableEntry:
    """The ``coflow_override`` entry (cached: the same cid and priority give the same object)."""
    if not 0 <= prio < HW_QUEUES:
        raise ValueError(f"override priority {prio} outside 0..{HW_QUEUES - 1}")
    return M.TableEntry(M.T_OVERRIDE, cid_key(*cid), M.A_OVERRIDE_QUEUE, M.params(prio=prio))


def override_key(cid) -> tuple:
    """The key of a coflow's ``coflow_override`` entry (whatever its priority)."""
    return ("table", M.T_OVERRIDE, cid_key(*cid), 0)


def order_priorities(order: Iterable, top: int = 7, bottom: int = 1) -> dict:
    """Coflows in service order -> BMv2 priorities top, top-1, ..., saturating at ``bottom``
    (priority 0 stays for untagged background traffic)."""
    return {cid: max(bottom, top - r) for r, cid in enumerate(order)}


# Meters --------------------------------------------------------------------------------------

def meter_config(index: int, rate_Bps: float, s: CtlSettings) -> M.MeterConfig:
    """MeterConfig for a bytes meter: cir = pir = the rate in BYTES PER SECOND (P4Runtime's unit;
    the Thrift CLI would want bytes per microsecond), floored at ``min_rate_frac`` of the link;
    burst = max(rate * burst_ms, min_burst_bytes), at least one maximum-size frame."""
    floor = s.min_rate_frac * s.link_Bps
    rate = max(float(rate_Bps), floor, 1.0)
    cir = int(math.ceil(rate))
    burst = max(int(math.ceil(rate * s.burst_ms / 1e3)), int(s.min_burst_bytes), MAX_FRAME)
    return M.MeterConfig(M.M_FLOW, index, cir, burst, cir, burst)


EMPTY: dict = {}  # a shared empty component (never mutated)


@dataclass
class MeterUpdate:
    """One round of meter translation as changes to desired-state components. Components are
    per coflow: ``("flow_meter", cid)`` and ``("meters", cid)`` on each switch (a coflow's
    meter indices are its slot's, so components never share a key).
    ``sets``: (component, switch, entities) replacing a component (empty = gone), removals
    first; ``patches``: (component, switch, entities, changed keys) where only those keys'
    meter configs changed (rates moved). The entity dicts are the translator's own: meters are
    updated in place by later rounds."""
    sets: list
    patches: list


class _CoflowMeters:
    """One coflow's pairs and meters: flow -> pair, pair -> meter (positions in this coflow's
    flows, pairs and meters) and its entities per switch, rebuilt only when its flows' hosts
    or its slot change."""
    __slots__ = ("key", "pinv", "npairs", "minv", "nmeters", "m_sw", "m_index", "fm", "meters",
                 "moff", "mrate")


class MeterContext:
    """Per-topology state of the vectorised meter translation: hosts by position (the rate
    modes' port numbers), their addresses and edge switches, caches of entity objects (an
    unchanged pair or meter config is the same object round after round) and each coflow's
    pair/meter structure. A round whose flows and slots are those of the previous one (only
    rates moved, the common case) costs two bincounts and the meters whose rate changed; a
    coflow that arrives, leaves or whose active flows change costs its own flows."""

    def __init__(self, topo, metered_slots: int = ASSIGNED_SLOTS):
        self.metered_slots = metered_slots  # coflows in higher slots are not metered (Tofino)
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
        self._settings = None

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

    def meter(self, index: int, rate: float, s: CtlSettings) -> M.MeterConfig:
        # not cached: only meters whose rate changed get here, and a cache of every
        # (index, rate) seen would grow without bound (and lengthen garbage collections)
        return meter_config(index, rate, s)

    def _coflow(self, cid, slot: int, src, dst) -> _CoflowMeters:
        """Pairs in order of first appearance get flow slots 0..7 per (coflow, sender's edge),
        beyond 8 they share slot ``i mod 8``; meter index = slot * 8 + flow slot."""
        P = len(self.names)
        cm = _CoflowMeters()
        pair = src * P + dst
        upair, first, inv = np.unique(pair, return_index=True, return_inverse=True)
        psrc, pdst = src[first], dst[first]
        pedge = self.edge_of[psrc]
        order = np.lexsort((first, pedge))  # pairs by edge, then first appearance
        g = pedge[order]
        starts = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
        run_start = np.repeat(starts, np.diff(np.r_[starts, g.size]))
        rank = np.empty(g.size, dtype=np.int64)
        rank[order] = np.arange(g.size) - run_start
        pindex = slot * FLOW_SLOTS_PER_COFLOW + rank % FLOW_SLOTS_PER_COFLOW
        span = self.metered_slots * FLOW_SLOTS_PER_COFLOW
        umk, minv = np.unique(pedge * span + pindex, return_inverse=True)
        names = self.switches
        cm.pinv, cm.minv = inv.reshape(-1), minv.reshape(-1)
        cm.npairs, cm.nmeters = upair.size, umk.size
        cm.m_sw = [names[k // span] for k in umk.tolist()]
        cm.m_index = [k % span for k in umk.tolist()]
        fm: dict = {}
        ps, pd, pi, pe = psrc.tolist(), pdst.tolist(), pindex.tolist(), pedge.tolist()
        for k in np.argsort(first, kind="stable").tolist():  # first-appearance order
            e = self.flow_meter(cid, ps[k], pd[k], pi[k])
            fm.setdefault(names[pe[k]], {})[e.key] = e
        cm.fm = fm
        cm.meters = None
        cm.mrate = None
        return cm

    def update(self, cids: list, cf, src, dst, rate, slots: Mapping, s: CtlSettings) -> MeterUpdate:
        """Flows as arrays (coflow position in ``cids``, src and dst host positions, rate
        bytes/s) -> this round's :class:`MeterUpdate`. Coflows without a slot are not metered."""
        cf = np.asarray(cf, dtype=np.int64)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        rate = np.asarray(rate, dtype=float)
        ms = self.metered_slots
        slot_of = np.array([sl if 0 <= (sl := slots.get(c, -1)) < ms else -1 for c in cids],
                           dtype=np.int64)
        key = (tuple(cids), slot_of.tobytes(), cf.tobytes(), src.tobytes(), dst.tobytes())
        sets: list = []
        glob = self._glob
        if self._settings != s:
            self._settings = s
            glob = None
            for cm in self._cf.values():
                cm.mrate = None  # every meter again
            self._mrate = None
        if glob is None or glob[0] != key:
            glob = self._global(key, cids, cf, src, dst, slot_of, sets)
        _, sel, inv, minv, npairs, nmeters, members, moffs = glob
        r = rate if sel is None else rate[sel]
        prate = np.bincount(inv, weights=r, minlength=npairs)
        mrate = np.bincount(minv, weights=prate, minlength=nmeters)
        if glob is self._glob and self._mrate is not None:
            prev = self._mrate  # the same coflows and flows as last round
        else:
            prev = np.full(nmeters, np.nan)  # NaN: a new or rebuilt coflow's meters
            for _, cm in members:
                if cm.mrate is not None:
                    prev[cm.moff:cm.moff + cm.nmeters] = cm.mrate
        ch = np.flatnonzero(mrate != prev)
        patches: list = []
        if ch.size:
            mr = mrate.tolist()
            owner = np.searchsorted(moffs, ch, side="right") - 1
            by: dict = {}
            fresh: set = set()
            for i, k in zip(ch.tolist(), owner.tolist()):
                cid, cm = members[k]
                if cm.meters is None or k in fresh:  # new or rebuilt: all its meters, once
                    if k not in fresh:
                        fresh.add(k)
                        meters: dict = {}
                        for j in range(cm.nmeters):
                            m = self.meter(cm.m_index[j], mr[cm.moff + j], s)
                            meters.setdefault(cm.m_sw[j], {})[m.key] = m
                        cm.meters = meters
                        sets.extend((("meters", cid), sw, meters[sw]) for sw in sorted(meters))
                    continue
                j = i - cm.moff
                m = self.meter(cm.m_index[j], mr[i], s)
                cm.meters[cm.m_sw[j]][m.key] = m
                by.setdefault((cid, cm.m_sw[j]), (cm, []))[1].append(m.key)
            patches = [(("meters", cid), sw, cm.meters[sw], ks) for (cid, sw), (cm, ks) in by.items()]
        for _, cm in members:  # each coflow's own view of the rates, for a later rebuild
            cm.mrate = mrate[cm.moff:cm.moff + cm.nmeters]
        self._glob = glob
        self._mrate = mrate
        return MeterUpdate(sets, patches)

    def _global(self, key, cids, cf, src, dst, slot_of, sets: list) -> tuple:
        """The round's coflows: reuse the unchanged ones, build the new or changed ones, drop
        the gone ones (their components emptied in ``sets``, first); concatenate their pair
        and meter maps."""
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
        sl = slot_of.tolist()
        for k, cid in enumerate(cids):
            lo, hi = bl[k], bl[k + 1]
            slot = sl[k]
            if slot < 0 or hi == lo or cid in new_cf:
                continue
            s_k, d_k = srco[lo:hi], dsto[lo:hi]
            ck = (slot, s_k.tobytes(), d_k.tobytes())
            cm = self._cf.get(cid)
            if cm is None or cm.key != ck:
                old = cm
                cm = self._coflow(cid, slot, s_k, d_k)
                cm.key = ck
                built.append((cid, old, cm))
            new_cf[cid] = cm
            members.append((cid, cm))
            inv_parts.append(cm.pinv)
            minv_parts.append(cm.minv)
            spans.append((lo, hi, cm.npairs, cm.nmeters))
        # components: gone coflows first (a slot, hence meter keys, may pass to a new coflow)
        for cid, cm in self._cf.items():
            if cid not in new_cf:
                self._fm.pop(cid, None)
                sets.extend((("flow_meter", cid), sw, EMPTY) for sw in sorted(cm.fm))
                sets.extend((("meters", cid), sw, EMPTY) for sw in sorted(cm.meters or ()))
        for cid, old, cm in built:
            if old is not None:
                sets.extend((("flow_meter", cid), sw, EMPTY) for sw in sorted(old.fm) if sw not in cm.fm)
                sw_now = set(cm.m_sw)
                sets.extend((("meters", cid), sw, EMPTY) for sw in sorted(old.meters or ())
                            if sw not in sw_now)
        for cid, _old, cm in built:
            sets.extend((("flow_meter", cid), sw, cm.fm[sw]) for sw in sorted(cm.fm))
        self._cf = new_cf
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
        return out


def meter_entities_arrays(ctx: MeterContext, cids: list, cf, src, dst, rate, slots: Mapping,
                          s: CtlSettings) -> dict:
    """Vectorised :func:`meter_entities`: flows as arrays (coflow position in ``cids``, src and
    dst host positions, rate bytes/s). Returns switch -> {key: entity} (fresh dicts)."""
    ctx.update(cids, cf, src, dst, rate, slots, s)
    return {sw: d for sw, d in sorted(ctx.state().items())}


def meter_entities(topo, flows: Iterable, slots: Mapping, s: CtlSettings) -> dict:
    """Per switch: flow_meter entries and meter configs for metered flows.

    ``flows``: (cid, src host name, dst host name, rate bytes/s). A meter sits at the sender's
    edge switch and meters one (coflow, src, dst) pair (the table's key), so flows of a coflow
    on the same host pair share it (their rates add). Each (coflow, edge switch) has 8 flow
    slots: pairs get slots in order of first appearance; beyond 8, pairs share slot
    ``i mod 8`` and that meter enforces the sum of their rates. Coflows without an assigned
    counter slot are not metered."""
    ctx = MeterContext(topo)
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

"""Translation: topology, mode, parameters and Allocations -> desired switch state (pure).

Everything here returns :mod:`coflow.ctl.model` values per switch name; nothing talks to a
switch. Units: rates in bytes per second (P4Runtime's MeterConfig unit for a bytes meter, and
the scheduler core's), bursts in bytes, counters in Ethernet frame bytes without FCS.

What the rate modes enforce (p4src/README.md "Meters"): every (coflow, src, dst) pair of a
coflow's active flows gets a meter of its own at the sender's edge (an index from a pool,
:class:`MeterPool`), configured with the rate the scheduler computed for that pair (the sum of
its flows' rates), converted from the scheduler's **payload** bytes/s to **frame** bytes/s
(x ``MAX_FRAME_BYTES / TCP_MSS_BYTES`` = 1514/1440: full-size tagged TCP segments with
timestamps; :func:`frame_rate`); the scheduler sees each host link as ``link_payload_Bps``
(the link's frame rate x 1440/1514), so the meters of a saturated link add up to its frame
rate. Bursts are one RTT of the frame rate, clamped to [2 maximum frames, ``burst_buffer_frac``
x ``port_buffer_bytes``] (:func:`burst_bytes`). A floor of ``min_rate_frac`` of the link keeps a
paused flow's TCP alive, so a paused flow passes up to that trickle. A coflow that cannot
get a meter for every pair (pool exhausted) gets no meter and no override (fair class), and is
counted. Progress comes back through ``flow_bytes[index]`` (frame bytes and packets that passed
the meter): payload = bytes - packets x ``FRAME_OVERHEAD_BYTES`` (:func:`payload_bytes`).
"""
from __future__ import annotations

import functools
import ipaddress
from typing import Iterable, Mapping


from ..params import DclasParams, HW_QUEUES, hw_priority
from ..topology import layers
from ..tofino.target import BMV2, Target, get_target  # noqa: F401 (the targets, by name)
from . import model as M

from ..dataplane.constants import (  # noqa: F401 (HASH_SLOT_BASE: the ctl's public name)
    ASSIGNED_SLOTS, EPOCH_BITS, FLOW_SLOTS_PER_COFLOW, HASH_SLOT_BASE, SLOT_IDLE_EPOCHS)
from .modes import MODE_CODE, MODES, RATE_MODES  # noqa: F401 (MODES, RATE_MODES: the ctl's public names)

from ..dataplane.constants import (VQ_SHIFT)


# the controller's settings and the meters' family, each in a module of its own (re-exported)
from .settings import (  # noqa: E402,F401
    CONTROL_MAX_LEN, IP_PROTO_TCP, MAX_FRAME, NO_HEAVY, CtlSettings, cid_key, ip_int, mac_int, split_settings)
from .meters import *  # noqa: E402,F401,F403
from .meters import (  # noqa: E402,F401 (the private names the tests and the daemon use)
    FREE, PACING_FREE_SEGMENTS, _CoflowMeters)


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


ECMP_WINDOW_BITS = 16   # the selector's key: a 16-bit window of the 5-tuple's CRC-32
ECMP_WINDOW_STEP = 8    # windows at bits 0, 8, 16 (routing.p4)


#: the windows a switch may take: 0, 8, 16 (the top one ends at bit 31)
ECMP_SHIFTS = tuple(range(0, 32 - ECMP_WINDOW_BITS + 1, ECMP_WINDOW_STEP))


def ecmp_shift(layer: int) -> int:
    """The hash window of a switch in ``layer`` (topology.layers): 0, 8, 16, 0, ... A flow's
    choice at one layer is then independent of its choice at the next: with one hash for all,
    a fat-tree's aggregation repeats the edge's member index and half the cores idle
    (routing.p4, "ECMP polarization")."""
    return ECMP_SHIFTS[layer % len(ECMP_SHIFTS)]


def ecmp_window_entity(shift: int) -> M.DefaultAction:
    if shift not in ECMP_SHIFTS:
        raise ValueError(f"ECMP window shift must be one of {', '.join(map(str, ECMP_SHIFTS))}, "
                         f"got {shift!r}")
    return M.DefaultAction(M.T_ECMP_WINDOW, M.A_ECMP_WINDOW, M.params(shift=shift))


def config_entity(mode: str, fair_prio: int = 4, heavy_bytes: int = NO_HEAVY,
                  fifo_base: int = 0, target: Target | str = BMV2,
                  slot_idle_epochs: int = SLOT_IDLE_EPOCHS) -> M.DefaultAction:
    """``heavy_bytes`` as the target compares it (bytes on bmv2, 64-byte units on Tofino).
    ``managed`` is always 1: the controller writes this, so a controller is in charge, and a
    tagged coflow without a ``coflow_slot`` entry (one it did not register) is served at the
    lowest priority (p4src/README.md, "What a host can gain by lying")."""
    return M.DefaultAction(M.T_CONFIG, M.A_SET_CONFIG,
                           M.params(mode=MODE_CODE[mode], fair_prio=fair_prio,
                                    heavy_bytes=get_target(target).heavy_param(heavy_bytes),
                                    fifo_base=fifo_base, managed=1,
                                    slot_idle_epochs=slot_idle_epochs))


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


def vq_drain(link_mbps: float) -> int:
    """``set_vq``'s drain: the port's rate in (bytes << VQ_SHIFT) per microsecond (ecn_marker.p4)."""
    return max(1, round(link_mbps * 1e6 / 8 / 1e6 * (1 << VQ_SHIFT)))


def ecn_entities(topo, sw: str, link_mbps: float, threshold_bytes: int,
                 target: Target | str = BMV2) -> list:
    """ECN marking on every port of ``sw`` above ``threshold_bytes`` of queue (none when 0); the
    threshold in the target's unit (``Target.ecn_threshold_param``: bytes << VQ_SHIFT on bmv2,
    80-byte cells on Tofino)."""
    if threshold_bytes <= 0:
        return []
    p = M.params(drain_per_us=vq_drain(link_mbps),
                 threshold_level=get_target(target).ecn_threshold_param(threshold_bytes))
    return [M.TableEntry(M.T_ECN_PORT, (("egress_port", port),), M.A_SET_VQ, p)
            for port in topo.switch(sw).ports]


def static_state(topo, routes: Mapping[str, list], mode: str, dclas: DclasParams,
                 fair_prio: int = 4, heavy_bytes: int = NO_HEAVY, fifo_base: int = 0,
                 control_prio: int = HW_QUEUES - 1, control_max_len: int = CONTROL_MAX_LEN,
                 target: Target | str = BMV2, slot_idle_epochs: int = SLOT_IDLE_EPOCHS,
                 ecn_threshold_bytes: int = 0, link_mbps: float = 10.0) -> dict:
    """Per switch: routing (members, ECMP groups, LPM, the ECMP hash window of its layer), port roles (switch-facing ports are
    fabric; unlisted ports are edges), the pipeline config, the D-CLAS thresholds, the
    control-segment class of untagged TCP (:func:`control_class_entities`) and ECN marking
    (:func:`ecn_entities`)."""
    out = {}
    cfg = config_entity(mode, fair_prio, heavy_bytes, fifo_base, target, slot_idle_epochs)
    thresholds = dclas_entities(dclas, target) + control_class_entities(control_prio, control_max_len)
    layer = layers(topo)
    for sw in topo.switches:
        ents = routing_entities(sw, routes.get(sw.name, []))
        ents.append(ecmp_window_entity(ecmp_shift(layer[sw.name])))
        ents += [M.TableEntry(M.T_PORT_ROLE, (("ingress_port", p),), M.A_SET_ROLE,
                              M.params(role=0)) for p in topo.fabric_ports(sw.name)]
        ents.append(cfg)
        ents += thresholds
        ents += ecn_entities(topo, sw.name, link_mbps, ecn_threshold_bytes, target)
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


def slot_key(cid) -> tuple:
    """The key of a coflow's ``coflow_slot`` entry (whatever its slot)."""
    return ("table", M.T_SLOT, cid_key(*cid), 0)


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


def keep_classes(ranked: dict, prev: dict, bottom: int = 1) -> dict:
    """Priorities for an order that never *promote* a coflow still sending.

    ``ranked``: cid -> priority in service order (:func:`order_priorities`, ties allowed);
    ``prev``: what this function gave last round, for the coflows that had active flows then.
    A coflow's next segments in a higher class overtake its own still queued in the lower one,
    and the receiver's SACKs make the sender resend them (RACK: mininet/README.md, "Second
    pass"), so the classes are walked in order with three rules: a coflow of ``prev`` never
    rises above its class there (demotion is free: its next segments queue behind its earlier
    ones); a coflow never gets a higher priority than one ahead of it in the order; two
    coflows that ``ranked`` separates stay separated (one class apart) until ``bottom``. Within
    these, each gets the highest class it can: a newcomer ahead of every other coflow gets the
    top one. A coflow absent from ``prev`` (new, or with no active flow last round: nothing of
    it in flight) is placed afresh. What the rule costs: when a coflow ahead finishes, the ones
    behind keep their classes (their order among themselves is unchanged) and the class it
    leaves waits for the next newcomer."""
    out: dict = {}
    a_last = r_last = None
    for c, r in ranked.items():
        bound = r
        if a_last is not None:
            bound = min(bound, a_last if r == r_last else a_last - 1)
        p = prev.get(c)
        if p is not None:
            bound = min(bound, p)
        a_last = out[c] = max(bottom, bound)
        r_last = r
    return out

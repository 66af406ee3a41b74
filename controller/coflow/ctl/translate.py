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

import collections
import functools
import ipaddress
import math
from dataclasses import dataclass, field, fields
from typing import Iterable, Mapping

import numpy as np

from ..params import DclasParams, HW_QUEUES, hw_priority
from ..topology import layers
from ..tofino.target import BMV2, Target, get_target  # noqa: F401 (the targets, by name)
from . import model as M

from ..dataplane.constants import (  # noqa: F401 (MODES, RATE_MODES: the ctl's public names)
    ASSIGNED_SLOTS, EPOCH_BITS, FLOW_SLOTS_PER_COFLOW, HASH_SLOT_BASE, MODE_CODE, MODES, RATE_MODES,
    SCHEDULER_OF, SLOT_IDLE_EPOCHS)

from ..dataplane.constants import (ECN_MAX_THRESHOLD_BYTES, FLOW_METERS, FRAME_OVERHEAD_BYTES,
                                   MAX_FRAME_BYTES, TCP_MSS_BYTES, VQ_SHIFT)

NO_HEAVY = (1 << 64) - 1
MAX_FRAME = MAX_FRAME_BYTES   # Ethernet frame without FCS at MTU 1500
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
    - ``rtt_us``: the fabric's round-trip time (µs); a meter's burst is one RTT of its rate
      (what a TCP flow sends at once), at least two maximum-size frames;
    - ``port_buffer_bytes`` / ``burst_buffer_frac``: a burst is at most this share of the
      port's buffer (default: the emulation's 32 frames of queue budget, half of it).
    - ``progress_s``: rate modes' closed loop: every this often (at most) a round reads the
      sender edges' ``flow_bytes`` counters and feeds the flows' bytes sent to the scheduler
      (0 = open loop: bytes sent only from the API's Update).
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
    - ``meter_peak_bursts``: a meter's peak burst is this many committed bursts (at most the
      port buffer); what passes beyond the committed burst and within the peak one is YELLOW,
      and an ECN-capable YELLOW packet is marked CE (flow_meter.p4), so that TCP slows to its
      rate on a mark before the meter drops. 1 = one burst, nothing YELLOW.
    - ``meter_headroom``: a meter passes its flow's rate times 1 + this (the frame rate of the
      rate a sender is told to pace at, ``WatchRates``, plus headroom): a sender paced at its
      rate never meets the meter's limit, one that does not pace is held to just above it
      (marked CE in the YELLOW band, then dropped). 0 = exactly the rate. With headroom and a
      YELLOW band the peak burst also holds the 10 segments Linux sends unpaced.
    - ``rate_audit``: 1 = compare, at every reading of the closed loop, what each metered
      flow's sender edge passed with the rate the flow was given (``rates.RateAudit``,
      ``rate_audit`` in the status); 0 = off.
    - ``ecn_threshold_bytes``: every switch port marks ECN-capable packets CE while its queue
      holds more than this many bytes (``ecn_port``: a virtual queue draining at
      ``link_mbps`` on BMv2, :func:`ecn_entities`); 0 = no marking.
    - ``slot_idle_epochs``: a hashed counter slot whose owner sent nothing for this many data-
      plane epochs (about a second each, ``EPOCH_SECONDS`` on BMv2) is taken over by the next
      coflow hashing to it (``pipeline_config``; the P4 default is ``SLOT_IDLE_EPOCHS``).
    - ``round_aio``: 1 = the rounds' counter reads and writes go out on one asyncio loop
      (grpc.aio, :mod:`coflow.ctl.aio`); 0 = as grpc futures from the loop thread.
    - ``push``: 1 = the edges are asked to push the counters the rounds read (D-CLAS's
      ``coflow_bytes``, the closed loop's ``flow_bytes``) on the stream when they change; an
      edge that does (the emulated switches of ``make bench-scale``) is not polled, one that
      does not (BMv2) is; 0 = every edge polled.
    - ``digest``: 1 = D-CLAS rounds run on the threshold crossings the edges push as
      report digests (:mod:`coflow.ctl.digest`; each edge's count rounded down to its slot's
      report step) instead of polling ``coflow_bytes``; an edge is polled on a new connection,
      a missed digest list or a malformed digest, and every ``digest_resync_s`` (one edge per
      round). 0 = poll every round (exact counts).
    - ``digest_resync_s``: with ``digest``, every this often one edge's ``coflow_bytes`` is polled
      all the same (one edge per round), so that a digest the controller missed is made good.
    - ``tofino_shape_mbps``: Tofino: the traffic-manager plan shapes every port to this rate
      (0 = the port's own speed).
    - ``claim_margin_frac`` / ``claim_margin_bytes``: declared sizes are claims (rate modes):
      when the payload bytes the counters saw on a host pair of a coflow pass the sizes its
      flows there declare by more than ``frac`` x declared + ``bytes``, the controller stops
      trusting that coflow's sizes for the rest of its life (its flows are ordered as flows of
      unknown size, last; :func:`coflow.ctl.rates.overrun`). ``claim_margin_bytes < 0`` turns
      the check off.
    - ``rate_capacity_frac``: the rate modes' scheduler shares this fraction of each host link's
      payload capacity (``link_payload_Bps``); below 1 it leaves room for what a link carries
      besides the scheduled payload (the ACKs of the flows coming the other way, the segments
      Linux does not pace), so that paced rates are reachable. 1 = the whole payload capacity.
    - ``pace_headroom``: the rate a sender is told to pace at (``WatchRates``) is its rate
      times 1 + this (at most ``meter_headroom``, so that a paced sender never meets its meter):
      what a paced flow does not reach of its rate nobody else takes, and a sender pacing a
      little above it makes up the shortfall where the path has room (strict classes still
      order the coflows). 0 = exactly the rate.
    - ``class_q1_bytes``: ordered modes: > 0 caps each coflow's class by its total size on
      Aalo's thresholds from this Q1 (``rates.size_caps``: above Q1 never the top class, above
      10 x Q1 never the top two, ...), so that a large coflow alone does not fill the top
      class with a backlog that the next small coflow waits behind; 0 = the order alone.
    - ``meter_hold_s``: a flow's meter is lowered only this long after its rate was (it keeps
      the old rate meanwhile; raised at once), so that a paced sender has slowed before its
      policer tightens (``rates.MeterHold``); 0 = meters follow the rates at once.
    - ``class_span``: with ``class_q1_bytes``, a coflow's class is also at least its size's cap
      minus this many classes: when the order has more coflows than classes, the ones it ranks
      past the last class stay near their size's class (a 20 KB coflow in 4 or 5) instead of
      all sharing class 1 with the largest coflows' backlog; 7 = the order alone below the cap.
    - ``pace_hold_s``: the rate a paced sender is told (``WatchRates``) goes down only this long
      after its flow's rate did (raised at once); its meter then follows ``meter_hold_s``
      after the pace. Linux commits a paced segment's gap when the segment leaves (one
      segment-time at the rate then in force), so a pause to the meters' floor shorter than
      this would cost the flow a segment-time at the floor (about a second at 1% of 1 Mb/s)
      however soon its rate came back; a hold lets short pauses (a small coflow taking the
      port for a few hundred ms) go unseen by the sender, the priority classes still putting
      the small coflow first. 0 = senders follow the rates at once.
    - ``promote_active``: ordered modes (a scheduler that says an order): 0 = a coflow with
      active flows is never moved to a higher class (:func:`keep_classes`: no reordering of
      its own segments); 1 = classes by rank every round (:func:`order_priorities`), a coflow
      rising as the ones ahead of it finish.
    """
    link_mbps: float = 10.0
    fair_prio: int = 4
    rtt_us: float = 5000.0
    port_buffer_bytes: int = 32 * MAX_FRAME
    burst_buffer_frac: float = 0.5
    progress_s: float = 0.1
    min_rate_frac: float = 0.01
    unknown_size_bytes: int = 1 << 40
    audit_s: float = 5.0
    telemetry_s: float = 2.0
    control_prio: int = HW_QUEUES - 1
    control_max_len: int = CONTROL_MAX_LEN
    slot_idle_epochs: int = SLOT_IDLE_EPOCHS
    ecn_threshold_bytes: int = 0
    meter_peak_bursts: float = 1.0
    round_aio: int = 1
    push: int = 1
    digest: int = 0
    digest_resync_s: float = 1.0
    tofino_shape_mbps: float = 0.0   # Tofino: shape every port to this rate (0: port speed)
    meter_headroom: float = 0.0
    rate_audit: int = 0
    claim_margin_frac: float = 0.25
    claim_margin_bytes: int = 64 * 1024
    rate_capacity_frac: float = 1.0
    promote_active: int = 0
    pace_headroom: float = 0.0
    class_q1_bytes: float = 0.0
    meter_hold_s: float = 0.0
    pace_hold_s: float = 0.0
    class_span: int = 7

    @property
    def link_Bps(self) -> float:
        return self.link_mbps * 1e6 / 8

    @property
    def link_payload_Bps(self) -> float:
        """The link's capacity in TCP payload bytes/s (what the rate modes' scheduler shares):
        full-size segments, ``TCP_MSS_BYTES`` of every ``MAX_FRAME_BYTES``."""
        return self.link_Bps * TCP_MSS_BYTES / MAX_FRAME_BYTES

    @property
    def rate_capacity_Bps(self) -> float:
        """What the rate modes' scheduler shares of a host link: ``rate_capacity_frac`` of its
        payload capacity."""
        return self.link_payload_Bps * self.rate_capacity_frac


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
    if not 1 <= s.slot_idle_epochs < 1 << EPOCH_BITS:
        raise ValueError(f"setting slot_idle_epochs: must be in 1..{(1 << EPOCH_BITS) - 1}")
    if not (math.isfinite(s.pace_headroom) and 0 <= s.pace_headroom <= s.meter_headroom):
        raise ValueError(f"setting pace_headroom: must be in 0..meter_headroom "
                         f"({s.meter_headroom}), got {s.pace_headroom}")
    if not (math.isfinite(s.class_q1_bytes) and s.class_q1_bytes >= 0):
        raise ValueError(f"setting class_q1_bytes: must be >= 0 bytes (0 = no size caps), "
                         f"got {s.class_q1_bytes}")
    if not (math.isfinite(s.meter_hold_s) and s.meter_hold_s >= 0):
        raise ValueError(f"setting meter_hold_s: must be >= 0 seconds (0 = no hold), got {s.meter_hold_s}")
    if not 0 <= s.class_span <= 7:
        raise ValueError(f"setting class_span: must be in 0..7 classes, got {s.class_span}")
    if not (math.isfinite(s.pace_hold_s) and s.pace_hold_s >= 0):
        raise ValueError(f"setting pace_hold_s: must be >= 0 seconds (0 = no hold), got {s.pace_hold_s}")
    if s.promote_active not in (0, 1):
        raise ValueError(f"setting promote_active: must be 0 or 1, got {s.promote_active}")
    if not (math.isfinite(s.rate_capacity_frac) and 0 < s.rate_capacity_frac <= 1):
        raise ValueError(f"setting rate_capacity_frac: must be in (0, 1], got {s.rate_capacity_frac}")
    if not 0 <= s.min_rate_frac <= 1:
        raise ValueError("setting min_rate_frac: must be in 0..1")
    if not (math.isfinite(s.progress_s) and s.progress_s >= 0):
        raise ValueError(f"setting progress_s: must be >= 0 seconds (0 = open loop), got {s.progress_s}")
    if not (math.isfinite(s.rtt_us) and s.rtt_us > 0):
        raise ValueError(f"setting rtt_us: must be > 0 (microseconds), got {s.rtt_us}")
    if not (math.isfinite(s.burst_buffer_frac) and 0 < s.burst_buffer_frac <= 1):
        raise ValueError(f"setting burst_buffer_frac: must be in (0, 1], got {s.burst_buffer_frac}")
    if s.port_buffer_bytes * s.burst_buffer_frac < 2 * MAX_FRAME:
        raise ValueError(f"setting port_buffer_bytes: burst_buffer_frac x port_buffer_bytes must "
                         f"hold 2 frames ({2 * MAX_FRAME} B), got {s.port_buffer_bytes}")
    if not (math.isfinite(s.meter_peak_bursts) and s.meter_peak_bursts >= 1):
        raise ValueError(f"setting meter_peak_bursts: must be >= 1, got {s.meter_peak_bursts}")
    if not (math.isfinite(s.meter_headroom) and 0 <= s.meter_headroom <= 10):
        raise ValueError(f"setting meter_headroom: must be in 0..10 (a fraction of the rate), "
                         f"got {s.meter_headroom}")
    if not 0 <= s.ecn_threshold_bytes <= ECN_MAX_THRESHOLD_BYTES:
        raise ValueError(f"setting ecn_threshold_bytes: must be in 0..{ECN_MAX_THRESHOLD_BYTES} "
                         f"(0 = no marking), got {s.ecn_threshold_bytes}")
    if not (math.isfinite(s.claim_margin_frac) and s.claim_margin_frac >= 0):
        raise ValueError(f"setting claim_margin_frac: must be >= 0, got {s.claim_margin_frac}")
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

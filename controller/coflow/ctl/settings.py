"""The controller's own settings (``--set key=value`` keys the scheduler does not own), read and
checked in one place, and the small identity helpers (IPs, MACs, CoflowId keys) every entity
family of :mod:`coflow.ctl.translate` shares.
"""
from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, fields
from typing import Mapping


from ..params import HW_QUEUES

from ..dataplane.constants import (
    EPOCH_BITS, SLOT_IDLE_EPOCHS)

from ..dataplane.constants import (ECN_MAX_THRESHOLD_BYTES, MAX_FRAME_BYTES, TCP_MSS_BYTES)


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
      coflow hashing to it (``pipeline_config``; the P4 default is ``SLOT_IDLE_EPOCHS``). The
      Tofino program ignores it: its span is the constant ``SLOT_IDLE_EPOCHS`` epochs of 2^30 ns.
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
      A digest that the switch drops without a gap in ``list_id`` (Tofino's learn filter drops
      a digest whose entry it holds until ``learn_timeout`` clears it) is repaired only so:
      the edge's count stays stale for less than ``digest_resync_s`` + edges x the round
      interval (each edge's turn comes every edges rounds, and it is polled at the first turn
      ``digest_resync_s`` after its last poll). Polls that moved a count a report step or more
      past the digests' count are counted (``coflow_ctl_digest_resync_corrections_total``).
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
    - ``conserve``: rate modes with the closed loop: 1 (the default) = what a flow leaves of
      its rate goes to the others within a reading or two (:mod:`coflow.ctl.demand`,
      :func:`coflow.sched.conserve.conserve`): a flow whose sender used less than
      ``1 / (1 + demand_headroom)`` of its rate over two readings of ``flow_bytes``, and whose
      application did not register it *ready* (``Flow.ready``: every byte ready to send, so a
      shortfall is the network's), is capped at the fastest it used over its last few readings
      times ``1 + demand_headroom``; the capacity freed goes to the flows below their caps in
      the scheduler's order (max-min without one), what none of them can take back to the
      capped ones, and a capped flow that uses its cap has it doubled at every reading. 0 =
      every flow keeps its rate whether it uses it or not (a sender that does not use its
      grant holds the coflows behind it at the meters' floor). Why ready flows are not judged:
      on the emulated fat-tree, where congested core links hold flows back, judging every
      shortfall cost HUG about 15% of its average CCT (4.0 s against 3.45 s); the emulation
      registers its flows ready, and its caps do not move.
    - ``demand_headroom``: with ``conserve``, how far below its rate a flow may run before it
      is capped, and how much above what it used its cap is.
    - ``claim_slack_s`` / ``claim_time_factor``: the time claim check (rate modes): a coflow
      whose rates (a capped flow's up to its cap), from its first counted byte, allowed more
      than ``claim_time_factor`` x (its declared bytes x (1 + ``claim_margin_frac``) +
      ``claim_margin_bytes``) + this many seconds at the link's payload rate, on a host pair,
      is no longer trusted, as if its bytes had passed its claims
      (:func:`coflow.ctl.demand.overheld`). The factor covers what an honest TCP sender
      leaves of its rate (a paced one reaches about three quarters of it), the slack the
      round trips, readings and retransmission timeouts of a sender starting or recovering
      from a loss. Off with the byte check (``claim_margin_bytes < 0``) and with
      ``claim_time_factor`` 0 (the default: on the emulated fat-tree it did not fire on HUG's
      honest coflows and once on SEBF's, which then lost its rank). It is the only rule that
      holds a host to a readiness it claimed: turn it on (2) where hosts are not trusted. With
      both rules on, a liar's gain is bounded whatever rate it sends at, ready or not
      (docs/explanation/lying.md).
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
    conserve: int = 1
    demand_headroom: float = 1.0
    claim_slack_s: float = 0.5
    claim_time_factor: float = 0.0

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
    if s.conserve not in (0, 1):
        raise ValueError(f"setting conserve: must be 0 or 1, got {s.conserve}")
    if not (math.isfinite(s.demand_headroom) and s.demand_headroom > 0):
        raise ValueError(f"setting demand_headroom: must be > 0, got {s.demand_headroom}")
    if not (math.isfinite(s.claim_time_factor) and (s.claim_time_factor >= 1 or s.claim_time_factor == 0)):
        raise ValueError(f"setting claim_time_factor: must be 0 (off) or >= 1, got {s.claim_time_factor}")
    if not (math.isfinite(s.claim_slack_s) and s.claim_slack_s >= 0):
        raise ValueError(f"setting claim_slack_s: must be >= 0 seconds, got {s.claim_slack_s}")
    if not (math.isfinite(s.claim_margin_frac) and s.claim_margin_frac >= 0):
        raise ValueError(f"setting claim_margin_frac: must be >= 0, got {s.claim_margin_frac}")
    return s, rest


def ip_int(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def cid_key(external: int, internal: int) -> tuple:
    return (("external_id", int(external)), ("internal_id", int(internal)))

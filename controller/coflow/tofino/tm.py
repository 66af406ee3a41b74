"""Strict priority and weighted sharing between a port's queues on Tofino: the plan, and the
traffic-manager configuration each Tofino server takes for it.

On BMv2 the project emulates the traffic manager in Linux (``coflow.dataplane.tm``: HTB on the
DSCP the pipeline writes). On Tofino the pipeline puts a packet in queue ``qid`` = its class
(0..7, ``p4src/tna/include/control/stamp.p4``) and how a port's queues share it is
traffic-manager configuration, not P4; the defaults (bf-drivers ``traffic_mgr_sch_intf.h``:
every queue at one priority, DWRR weight 1023) serve them round-robin. This module turns the
per-mode plan the emulation uses (``coflow.emu.fabric.tm_for_mode``: a discipline, a queue
count, Aalo's weights) into one port's queue settings, :func:`queue_plan`:

- strict: queue ``qid`` gets scheduling priority ``qid`` (class 7 first, like BMv2's priority
  7); weighted: every queue one priority, DWRR weights (Aalo's, the largest 1023);
- no guaranteed (min) rates: strict priority decides; optionally the port shaped to a rate.

and from the plan the configuration of the two servers the controller supports (issued by
``coflow ctl run --target tofino`` whenever a switch comes up as primary, with the pipeline:
:class:`coflow.tofino.tmpush.TmPusher`):

- **Stratum**: the chassis config's ``vendor_config.tofino_config`` QoS section
  (``node_id_to_qos_config`` with one ``queue_configs`` per port, ``queue_mapping`` per queue;
  ``node_id_to_port_shaping_config``), :func:`stratum_vendor_config`. Fields as stratum/stratum
  ``stratum/hal/lib/common/common.proto`` (at f8f71301cb602ac663818f2b185d57771b27d8e2)
  declares them, generated the way stratum/fabric-tna ``util/gen-qos-config.py`` writes its
  ``vendor_config`` block; Stratum applies it with ``bf_tm_sched_q_priority_set``,
  ``bf_tm_sched_q_remaining_bw_priority_set``, ``bf_tm_sched_q_dwrr_weight_set`` and
  ``bf_tm_q_app_pool_usage_set`` (``stratum/hal/lib/barefoot/bf_sde_wrapper.cc``).
- **bf_switchd**: BF Runtime writes to the fixed ``tf1.tm`` tables, :func:`bfrt_tm_writes`
  (``tf1.tm.queue.sched_cfg`` per (pg_id, pg_queue), the queue of a port's qid from
  ``tf1.tm.port.cfg``; ``tf1.tm.queue.buffer`` for its buffer, as Stratum's queue mapping
  sets it; ``tf1.tm.port.sched_shaping`` / ``sched_cfg`` for shaping), as
  open-p4studio ``pkgsrc/bf-drivers/src/bf_rt/bf_rt_tm/bf_rt_tm_tf1.json`` (at
  1f97778f9ad5c8165bfce552fffe27c69887756b) declares them. :func:`bf_tm_calls` lists the same
  settings as bf-drivers' C API calls (``traffic_mgr_sch_intf.h``).

No Tofino server runs on these machines: the messages are pure functions of the plan, tested
against the field names and shapes of those references.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..dataplane.constants import NUM_PRIOS, TNA_CELL_BYTES

STRICT = "strict"
WEIGHTED = "weighted"
SCH_PRIO_MAX = 7          # BF_TM_SCH_PRIO_7
DWRR_WEIGHT_MAX = 1023    # bf_tm_sched_q_dwrr_weight_set's range
#: a queue's buffer: the egress application pool and dynamic share of fabric-tna's
#: gen-qos-config.py (EGRESS_APP_POOL_0, BAF 33 %), base_use_limit from the plan
QUEUE_POOL = 0
QUEUE_BAF_PERCENT = 33


@dataclass(frozen=True)
class QueueSched:
    qid: int                  # ig_tm_md.qid = the class (7 = Aalo queue 1)
    remaining_bw_priority: int
    dwrr_weight: int
    guaranteed_kbps: int = 0


@dataclass(frozen=True)
class PortQueuePlan:
    discipline: str
    queues: tuple             # QueueSched, qid 0..7
    shape_bps: int = 0        # port shaping rate (0: the port's own speed)
    shape_burst_bytes: int = 0
    queue_cells: int = 0      # each queue's base_use_limit in 80-byte cells (0: BAF share only)

    def strict_qids(self) -> list[int]:
        """The queues served by strict priority, highest first (empty when weighted)."""
        if self.discipline != STRICT:
            return []
        return [q.qid for q in sorted(self.queues, key=lambda q: -q.remaining_bw_priority)]


def queue_plan(discipline: str = STRICT, weights=None, nqueues: int = NUM_PRIOS) -> PortQueuePlan:
    """One port's queue settings. ``weights`` are per Aalo queue, queue 1 (qid 7) first, like
    ``DclasParams.queue_weights()`` (weighted only; default Aalo's K - i + 1)."""
    if discipline not in (STRICT, WEIGHTED):
        raise ValueError(f"discipline must be {STRICT!r} or {WEIGHTED!r}")
    if weights is None:
        weights = [float(nqueues - i) for i in range(nqueues)]
    weights = [float(w) for w in weights]
    if len(weights) != nqueues or min(weights) <= 0:
        raise ValueError(f"weights must be {nqueues} positive numbers")
    top = max(weights)
    out = []
    for qid in range(NUM_PRIOS):
        aalo = NUM_PRIOS - 1 - qid              # index into weights (Aalo queue aalo + 1)
        if discipline == STRICT:
            out.append(QueueSched(qid, qid, DWRR_WEIGHT_MAX))
        else:
            w = weights[aalo] if aalo < nqueues else min(weights)
            out.append(QueueSched(qid, 0, max(1, round(DWRR_WEIGHT_MAX * w / top))))
    return PortQueuePlan(discipline, tuple(out))


def plan_for_mode(mode: str, weighted_dclas: bool = False) -> PortQueuePlan:
    """The plan of a controller mode, by the emulation's rule (``tm_for_mode``)."""
    from ..emu.fabric import tm_for_mode
    p = tm_for_mode(mode, weighted_dclas)
    if p.queues == 1:
        return queue_plan(STRICT)           # one class in use: any discipline serves it
    return queue_plan(p.discipline, p.weights, p.queues)


def with_port(plan: PortQueuePlan, shape_mbps: float = 0.0, burst_bytes: int = 0,
              buffer_bytes: int = 0) -> PortQueuePlan:
    """The plan with the port shaped to ``shape_mbps`` (0: not shaped; burst at least one
    2 KB frame) and each queue allowed ``buffer_bytes`` of base buffer (in whole cells)."""
    if shape_mbps < 0 or burst_bytes < 0 or buffer_bytes < 0:
        raise ValueError("shaping rate, burst and buffer must be >= 0")
    rate = int(round(shape_mbps * 1e6))
    return replace(plan, shape_bps=rate, shape_burst_bytes=max(int(burst_bytes), 2048) if rate else 0,
                   queue_cells=math.ceil(int(buffer_bytes) / TNA_CELL_BYTES))


def bf_tm_calls(plan: PortQueuePlan, dev_port: int, dev: int = 0) -> list[tuple]:
    """The bf-drivers TM calls that set ``plan`` on one port, as (function, args...) tuples."""
    calls: list[tuple] = [("bf_tm_port_q_mapping_set", dev, dev_port, NUM_PRIOS, tuple(range(NUM_PRIOS)))]
    for q in plan.queues:
        calls.append(("bf_tm_sched_q_guaranteed_rate_set", dev, dev_port, q.qid,
                      False, 0, q.guaranteed_kbps))     # pps, burst_size, rate (kbps)
        calls.append(("bf_tm_sched_q_remaining_bw_priority_set", dev, dev_port, q.qid,
                      q.remaining_bw_priority))
        calls.append(("bf_tm_sched_q_dwrr_weight_set", dev, dev_port, q.qid, q.dwrr_weight))
    return calls


def as_dict(plan: PortQueuePlan) -> dict:
    return {"discipline": plan.discipline, "strict_order": plan.strict_qids(),
            "shape_bps": plan.shape_bps, "shape_burst_bytes": plan.shape_burst_bytes,
            "queue_cells": plan.queue_cells, "queues": [q.__dict__ for q in plan.queues]}


# Stratum: the chassis config's QoS section ------------------------------------------------

STRATUM_COMMIT = "f8f71301cb602ac663818f2b185d57771b27d8e2"
STRATUM_PACKAGE = "stratum.hal"
#: the messages and enums as stratum/stratum stratum/hal/lib/common/common.proto declares and
#: numbers them (the subset the QoS section uses), in its notation
#: (:func:`coflow.tofino.protodesc.parse`)
STRATUM_QOS_PROTO = """
message ChassisConfig { VendorConfig vendor_config = 7; }
message VendorConfig { TofinoConfig tofino_config = 2; }
message TofinoConfig {
  map<uint64, TofinoConfig.BfPortShapingConfig> node_id_to_port_shaping_config = 1;
  map<uint64, TofinoConfig.TofinoQosConfig> node_id_to_qos_config = 3; }
message TofinoConfig.PacketShape { uint64 rate_pps = 1; uint32 burst_packets = 2; }
message TofinoConfig.ByteShape { uint64 rate_bps = 1; uint32 burst_bytes = 2; }
message TofinoConfig.BfPortShapingConfig {
  map<uint32, TofinoConfig.BfPortShapingConfig.BfPerPortShapingConfig> per_port_shaping_configs = 1; }
message TofinoConfig.BfPortShapingConfig.BfPerPortShapingConfig {
  oneof shaping { TofinoConfig.PacketShape packet_shaping = 1; TofinoConfig.ByteShape byte_shaping = 2; } }
message TofinoConfig.TofinoQosConfig { repeated TofinoConfig.TofinoQosConfig.QueueConfig queue_configs = 6; }
message TofinoConfig.TofinoQosConfig.QueueConfig {
  oneof port_type { uint32 port = 1; uint32 sdk_port = 2; }
  repeated TofinoConfig.TofinoQosConfig.QueueConfig.QueueMapping queue_mapping = 3; }
message TofinoConfig.TofinoQosConfig.QueueConfig.QueueMapping {
  int32 queue_id = 1; TofinoConfig.TofinoQosConfig.SchedulingPriority priority = 2; uint32 weight = 3;
  uint32 minimum_guaranteed_cells = 4; TofinoConfig.TofinoQosConfig.ApplicationPool pool = 5;
  uint32 base_use_limit = 6; TofinoConfig.TofinoQosConfig.Baf baf = 7; uint32 hysteresis = 8; }
enum TofinoConfig.TofinoQosConfig.ApplicationPool {
  UNKNOWN_APP_POOL = 0; INGRESS_APP_POOL_0 = 1; INGRESS_APP_POOL_1 = 2; INGRESS_APP_POOL_2 = 3;
  INGRESS_APP_POOL_3 = 4; EGRESS_APP_POOL_0 = 5; EGRESS_APP_POOL_1 = 6; EGRESS_APP_POOL_2 = 7;
  EGRESS_APP_POOL_3 = 8; }
enum TofinoConfig.TofinoQosConfig.Baf {
  UNKNOWN_BAF = 0; BAF_1_POINT_5_PERCENT = 1; BAF_3_PERCENT = 2; BAF_6_PERCENT = 3; BAF_11_PERCENT = 4;
  BAF_20_PERCENT = 5; BAF_33_PERCENT = 6; BAF_50_PERCENT = 7; BAF_66_PERCENT = 8; BAF_80_PERCENT = 9;
  DISABLE_BAF = 10; }
enum TofinoConfig.TofinoQosConfig.SchedulingPriority {
  UNKNOWN_PRIO = 0; PRIO_0 = 1; PRIO_1 = 2; PRIO_2 = 3; PRIO_3 = 4; PRIO_4 = 5; PRIO_5 = 6; PRIO_6 = 7; PRIO_7 = 8; }
"""
#: Stratum's checks on a queue config (bf_chassis_manager.cc): at most this many mappings, in
#: ascending queue_id from 0
STRATUM_MAX_QUEUES_PER_PORT = 32

_stratum_schema = None


def stratum_schema():
    global _stratum_schema
    if _stratum_schema is None:
        from .protodesc import build, parse
        _stratum_schema = build("stratum/hal/lib/common/common.proto", STRATUM_PACKAGE,
                                *parse(STRATUM_QOS_PROTO, "tm.STRATUM_QOS_PROTO"))
    return _stratum_schema


def stratum_vendor_config(plan: PortQueuePlan, node_ports: dict):
    """A ``stratum.hal.ChassisConfig`` holding only ``vendor_config.tofino_config``: for every
    node id (the switch's P4Runtime device id) and each of its ports (singleton port ids,
    ``coflow.tofino.ports``) one ``queue_configs`` entry with a ``queue_mapping`` per queue in
    qid order (Stratum requires ascending ids from 0), and per-port byte shaping when the plan
    shapes."""
    sc = stratum_schema()
    cfg = sc["ChassisConfig"]()
    tof = cfg.vendor_config.tofino_config
    for node, ports in sorted(node_ports.items()):
        qos = tof.node_id_to_qos_config[int(node)]
        for port in sorted(ports):
            qc = qos.queue_configs.add(port=int(port))
            for q in sorted(plan.queues, key=lambda q: q.qid):
                qc.queue_mapping.add(
                    queue_id=q.qid, priority=f"PRIO_{q.remaining_bw_priority}",
                    weight=q.dwrr_weight, minimum_guaranteed_cells=0,
                    pool=f"EGRESS_APP_POOL_{QUEUE_POOL}", base_use_limit=plan.queue_cells,
                    baf=f"BAF_{QUEUE_BAF_PERCENT}_PERCENT", hysteresis=0)
        if plan.shape_bps:
            shp = tof.node_id_to_port_shaping_config[int(node)]
            for port in sorted(ports):
                bs = shp.per_port_shaping_configs[int(port)].byte_shaping
                bs.rate_bps = plan.shape_bps
                bs.burst_bytes = plan.shape_burst_bytes
    return cfg


def stratum_vendor_text(plan: PortQueuePlan, node_ports: dict) -> str:
    """:func:`stratum_vendor_config` in protobuf text format (``vendor_config { ... }``), the
    form of Stratum's chassis config file."""
    from google.protobuf import text_format
    return text_format.MessageToString(stratum_vendor_config(plan, node_ports))


def merge_chassis_config(chassis_text: str, vendor_text: str, where: str = "chassis config") -> str:
    """The operator's chassis config (text format, without a ``vendor_config``) with the QoS
    section appended, as fabric-tna's gen-qos-config.py output is meant to be, after
    :data:`PUSH_HEADER`."""
    import re
    bare = re.sub(r"#[^\n]*", "", chassis_text)
    m = re.search(r"^[ \t]*vendor_config\b", bare, re.M)
    if m:
        line = bare[:m.start()].count("\n") + 1
        raise ValueError(f"{where}:{line}: has a vendor_config already; the controller writes "
                         "its own (remove it, or merge its QoS section by hand)")
    return (PUSH_HEADER + chassis_text.rstrip("\n")
            + "\n# coflow: traffic-manager QoS (coflow.tofino.tm)\n" + vendor_text)


#: The first line of a pushed chassis config. Stratum tries the bytes as a binary OpenConfig
#: device first (SetUpRoot); these bytes cannot be one: '#' starts a group of field 4, ' ' is a
#: varint of field 4 (value 'c'), and 'o' (0x6f) has wire type 7, which does not exist, so the
#: binary parse fails and Stratum reads the text format.
PUSH_HEADER = "# coflow: chassis config with the controller's QoS section\n"


# bf_switchd: BF Runtime writes to the tf1.tm tables -----------------------------------------

TM_COMMIT = "1f97778f9ad5c8165bfce552fffe27c69887756b"
T_PORT_CFG = "tf1.tm.port.cfg"
T_QUEUE_SCHED_CFG = "tf1.tm.queue.sched_cfg"
T_QUEUE_BUFFER = "tf1.tm.queue.buffer"
T_PORT_SCHED_SHAPING = "tf1.tm.port.sched_shaping"
T_PORT_SCHED_CFG = "tf1.tm.port.sched_cfg"


#: Tofino 1: a device port's pipe is its bits above the 7-bit port number within the pipe
#: (128 ports per pipe; bf-drivers' DEV_PORT_TO_PIPE)
TOFINO1_PIPE_SHIFT = 7


def pipe_of(dev_port: int) -> int:
    """The pipe (Tofino 1) that device port ``dev_port`` belongs to."""
    return int(dev_port) >> TOFINO1_PIPE_SHIFT


@dataclass(frozen=True)
class TmWrite:
    """One BF Runtime table-entry MODIFY (the tf1.tm tables take no insert or delete).
    ``pipe``: the target's pipe_id, None for all pipes. The queue tables refuse all pipes, and
    their ``pg_id`` counts port groups within one pipe (bf-drivers,
    bf_rt_tm_table_impl.cpp ``BfRtTMTable::singlePipe_validate``: "PIPE_ALL is not allowed");
    the port tables, keyed by device port, take all pipes."""
    table: str
    key: tuple                # ((field, value), ...)
    data: tuple               # ((field, value), ...)
    pipe: int | None = None
    action: str | None = None   # a table with action specs (tf1.tm.queue.buffer's shared_pool)


def bfrt_tm_writes(plan: PortQueuePlan, port_cfg: dict) -> list:
    """The writes that set ``plan`` on ports ``port_cfg``: {dev_port: (pg_id,
    egress_qid_queues)} as the switch's ``tf1.tm.port.cfg`` gives them (qid i of the port is
    port-group queue ``egress_qid_queues[i]``; ``pg_id`` within the port's pipe, so each queue
    write goes to that pipe, :func:`pipe_of`). Strict: min and max priority = the queue's
    priority, DWRR weight 1023; weighted: priority 0, Aalo's weights; no min rate; scheduling
    enabled; the port shaped (kbit/s, bytes) when the plan says so. With ``queue_cells`` each
    queue's buffer as Stratum sets it (:func:`stratum_vendor_config`): ``tf1.tm.queue.buffer``'s
    action ``shared_pool`` in egress pool 0, ``pool_max_cells`` = the base use limit, dynamic
    BAF 33 %, no guaranteed cells, no hysteresis (the same settings bf-drivers'
    ``bf_tm_q_app_pool_usage_set`` takes from Stratum). Without, the SDK's defaults stay
    (``pool_max_cells`` 0 would take a queue out of the shared pool)."""
    out = []
    for dev_port in sorted(port_cfg):
        pg_id, qmap = port_cfg[dev_port]
        if len(qmap) < len(plan.queues):
            raise ValueError(f"dev_port {dev_port}: {len(qmap)} queues mapped, the plan has "
                             f"{len(plan.queues)}")
        for q in sorted(plan.queues, key=lambda q: q.qid):
            prio = str(q.remaining_bw_priority)
            out.append(TmWrite(T_QUEUE_SCHED_CFG, (("pg_id", int(pg_id)), ("pg_queue", int(qmap[q.qid]))),
                               (("min_priority", prio), ("max_priority", prio),
                                ("dwrr_weight", q.dwrr_weight), ("min_rate_enable", False),
                                ("max_rate_enable", False), ("scheduling_enable", True)),
                               pipe=pipe_of(dev_port)))
            if plan.queue_cells:
                out.append(TmWrite(T_QUEUE_BUFFER, (("pg_id", int(pg_id)), ("pg_queue", int(qmap[q.qid]))),
                                   (("guaranteed_cells", 0), ("hysteresis_cells", 0),
                                    ("pool_id", f"EG_APP_POOL_{QUEUE_POOL}"),
                                    ("pool_max_cells", plan.queue_cells),
                                    ("dynamic_baf", f"{QUEUE_BAF_PERCENT}%")),
                                   pipe=pipe_of(dev_port), action="shared_pool"))
        if plan.shape_bps:
            out.append(TmWrite(T_PORT_SCHED_SHAPING, (("dev_port", int(dev_port)),),
                               (("unit", "BPS"), ("provisioning", "UPPER"),
                                ("max_rate", math.ceil(plan.shape_bps / 1000)),
                                ("max_burst_size", plan.shape_burst_bytes))))
            out.append(TmWrite(T_PORT_SCHED_CFG, (("dev_port", int(dev_port)),),
                               (("max_rate_enable", True),)))
    return out

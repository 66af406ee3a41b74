"""The traffic manager configured by the controller on Tofino (issue 28): the plan's messages for
both servers, checked against the field names and shapes of the references (no registry package
ships Stratum's chassis config or BF Runtime's protos), and pushed to fake servers at every
bring-up as primary.

References (read, not copied):
- Stratum: stratum/stratum ``stratum/hal/lib/common/common.proto`` at
  f8f71301cb602ac663818f2b185d57771b27d8e2 (TofinoConfig, TofinoQosConfig); its checks in
  ``stratum/hal/lib/barefoot/bf_chassis_manager.cc`` (queue mappings in ascending order from 0,
  at most kMaxQueuesPerPort) and ``bf_sde_wrapper.cc`` (pool / BAF / priority must be known
  values); the root replace in ``stratum/hal/lib/common/yang_parse_tree_paths.cc``
  (``SetUpRoot``: bytes_val, a text-format ChassisConfig). The block's shape is the one
  stratum/fabric-tna ``util/gen-qos-config.py`` (``vendor_config``, ``queue_mapping``,
  ``per_port_shaping_configs``) writes.
- bf_switchd: p4lang/open-p4studio ``pkgsrc/bf-drivers/src/bf_rt/bf_rt_tm/bf_rt_tm_tf1.json``
  and ``pkgsrc/bf-drivers/src/bf_rt/proto/bfruntime.proto`` at
  1f97778f9ad5c8165bfce552fffe27c69887756b.
"""
from __future__ import annotations

import dataclasses
import json
import threading
import types
from concurrent import futures

import grpc
import pytest
from google.protobuf import text_format

from coflow.tofino import bfrt, ports, tm
from coflow.tofino.protodesc import field_table
from coflow.tofino.tmpush import TmPusher, gnmi_set_request

# --- the references' declarations, as read there ------------------------------------------

#: common.proto: message -> {field: (number, type)} (T_* are protobuf's FieldDescriptor types)
U32, U64, I32, ENUM = 13, 4, 5, 14
STRATUM_DECLARED = {
    "TofinoConfig": {"node_id_to_port_shaping_config": 1, "node_id_to_qos_config": 3},
    "TofinoConfig.ByteShape": {"rate_bps": (1, U64), "burst_bytes": (2, U32)},
    "TofinoConfig.BfPortShapingConfig": {"per_port_shaping_configs": 1},
    "TofinoConfig.BfPortShapingConfig.BfPerPortShapingConfig": {"packet_shaping": 1, "byte_shaping": 2},
    "TofinoConfig.TofinoQosConfig": {"queue_configs": 6},
    "TofinoConfig.TofinoQosConfig.QueueConfig": {"port": (1, U32), "sdk_port": (2, U32),
                                                 "queue_mapping": 3},
    "TofinoConfig.TofinoQosConfig.QueueConfig.QueueMapping": {
        "queue_id": (1, I32), "priority": 2, "weight": (3, U32), "minimum_guaranteed_cells": (4, U32),
        "pool": 5, "base_use_limit": (6, U32), "baf": 7, "hysteresis": (8, U32)},
    "VendorConfig": {"tofino_config": 2},
    "ChassisConfig": {"vendor_config": 7},
}
STRATUM_ENUM_VALUES = {"PRIO_0": 1, "PRIO_7": 8, "EGRESS_APP_POOL_0": 5, "BAF_33_PERCENT": 6}

#: bf_rt_tm_tf1.json, the tables the controller writes (ids, key and data fields as declared)
TF1_TM = {"tables": [
    {"name": "tf1.tm.port.cfg", "id": 4278517776,
     "key": [{"id": 1, "name": "dev_port", "mandatory": True, "match_type": "Exact",
              "type": {"type": "uint32"}}],
     "data": [{"mandatory": False, "singleton": {"id": 1, "name": "pg_id", "repeated": False,
                                                 "type": {"type": "uint8"}}},
              {"mandatory": False, "singleton": {"id": 2, "name": "pg_port_nr", "repeated": False,
                                                 "type": {"type": "uint8"}}},
              {"mandatory": False, "singleton": {"id": 5, "name": "egress_qid_queues",
                                                 "repeated": True, "type": {"type": "uint8"}}}]},
    {"name": "tf1.tm.queue.sched_cfg", "id": 4278517797,
     "key": [{"id": 1, "name": "pg_id", "mandatory": True, "match_type": "Exact", "type": {"type": "uint8"}},
             {"id": 2, "name": "pg_queue", "mandatory": True, "match_type": "Exact", "type": {"type": "uint8"}}],
     "data": [{"singleton": {"id": 2, "name": "min_rate_enable", "repeated": False, "type": {"type": "bool"}}},
              {"singleton": {"id": 1, "name": "min_priority", "repeated": False, "type": {
                  "type": "string", "choices": ["LOW", "0", "1", "2", "3", "4", "5", "6", "7", "HIGH"]}}},
              {"singleton": {"id": 5, "name": "max_rate_enable", "repeated": False, "type": {"type": "bool"}}},
              {"singleton": {"id": 4, "name": "max_priority", "repeated": False, "type": {
                  "type": "string", "choices": ["LOW", "0", "1", "2", "3", "4", "5", "6", "7", "HIGH"]}}},
              {"singleton": {"id": 3, "name": "dwrr_weight", "repeated": False, "type": {"type": "uint16"}}},
              {"singleton": {"id": 6, "name": "scheduling_enable", "repeated": False, "type": {"type": "bool"}}}]},
    {"name": "tf1.tm.port.sched_cfg", "id": 4278517782,
     "key": [{"id": 1, "name": "dev_port", "mandatory": True, "match_type": "Exact", "type": {"type": "uint32"}}],
     "data": [{"singleton": {"id": 1, "name": "max_rate_enable", "repeated": False, "type": {"type": "bool"}}}]},
    {"name": "tf1.tm.port.sched_shaping", "id": 4278517783,
     "key": [{"id": 1, "name": "dev_port", "mandatory": True, "match_type": "Exact", "type": {"type": "uint32"}}],
     "data": [{"singleton": {"id": 1, "name": "unit", "repeated": False,
                             "type": {"type": "string", "choices": ["PPS", "BPS"]}}},
              {"singleton": {"id": 2, "name": "provisioning", "repeated": False,
                             "type": {"type": "string", "choices": ["UPPER", "LOWER", "MIN_ERROR"]}}},
              {"singleton": {"id": 3, "name": "max_rate", "repeated": False, "type": {"type": "uint32"}}},
              {"singleton": {"id": 4, "name": "max_burst_size", "repeated": False, "type": {"type": "uint32"}}}]},
    {"name": "tf1.tm.queue.buffer", "id": 4278517796,
     "key": [{"id": 1, "name": "pg_id", "mandatory": True, "match_type": "Exact", "type": {"type": "uint8"}},
             {"id": 2, "name": "pg_queue", "mandatory": True, "match_type": "Exact", "type": {"type": "uint8"}}],
     "data": [{"singleton": {"id": 1, "name": "guaranteed_cells", "repeated": False, "type": {"type": "uint32"}}},
              {"singleton": {"id": 2, "name": "hysteresis_cells", "repeated": False, "type": {"type": "uint32"}}},
              {"singleton": {"id": 3, "name": "tail_drop_enable", "repeated": False, "type": {"type": "bool"}}}],
     "action_specs": [
         {"id": 1, "name": "shared_pool", "data": [
             {"singleton": {"id": 4, "name": "pool_id", "repeated": False, "type": {
                 "type": "string", "choices": ["EG_APP_POOL_0", "EG_APP_POOL_1", "EG_APP_POOL_2",
                                               "EG_APP_POOL_3"]}}},
             {"singleton": {"id": 5, "name": "pool_max_cells", "repeated": False, "type": {"type": "uint32"}}},
             {"singleton": {"id": 6, "name": "dynamic_baf", "repeated": False, "type": {
                 "type": "string", "choices": ["1.5%", "3%", "6%", "11%", "20%", "33%", "50%", "66%",
                                               "80%", "DISABLE"]}}}]},
         {"id": 2, "name": "buffer_only", "data": []}]},
]}
INFO = bfrt.BfrtInfo(TF1_TM)
#: the queue tables (keyed by port group and queue within one pipe)
QUEUE_TABLES = {INFO.table(t)[0] for t in ("tf1.tm.queue.sched_cfg", "tf1.tm.queue.buffer")}

#: bfruntime.proto: message -> {field: number}
BFRT_DECLARED = {
    "WriteRequest": {"target": 1, "client_id": 2, "updates": 3, "atomicity": 4, "p4_name": 5},
    "TargetDevice": {"device_id": 1, "pipe_id": 2, "direction": 3, "prsr_id": 4},
    "Update": {"type": 1, "entity": 2},
    "Entity": {"table_entry": 1},
    "TableEntry": {"table_id": 1, "key": 2, "data": 3, "is_default_entry": 4},
    "TableData": {"action_id": 1, "fields": 2},
    "DataField": {"field_id": 1, "stream": 2, "float_val": 3, "str_val": 4, "int_arr_val": 5,
                  "bool_arr_val": 6, "bool_val": 8},
    "KeyField": {"field_id": 1, "exact": 2},
    "KeyField.Exact": {"value": 1},
    "ReadRequest": {"target": 1, "client_id": 2, "entities": 3, "p4_name": 4},
    "StreamMessageRequest": {"client_id": 1, "subscribe": 2},
    "Subscribe": {"device_id": 2, "notifications": 3},
    "SetForwardingPipelineConfigRequest": {"device_id": 1, "client_id": 2, "action": 3, "config": 6},
    "GetForwardingPipelineConfigResponse": {"config": 1, "non_p4_config": 2},
    "NonP4Config": {"bfruntime_info": 1},
}


def test_stratum_messages_have_common_protos_numbers_and_types():
    sc = tm.stratum_schema()
    for msg, want in STRATUM_DECLARED.items():
        got = field_table(sc, msg)
        for name, w in want.items():
            num, typ = w if isinstance(w, tuple) else (w, None)
            assert name in got, (msg, name)
            assert got[name][0] == num, (msg, name, got[name])
            if typ is not None:
                assert got[name][1] == typ, (msg, name, got[name])
    qm = sc.descriptor("TofinoConfig.TofinoQosConfig.QueueConfig.QueueMapping")
    for name, number in STRATUM_ENUM_VALUES.items():
        field = {"PRIO": "priority", "EGRESS": "pool", "BAF": "baf"}[name.split("_")[0]]
        assert qm.fields_by_name[field].enum_type.values_by_name[name].number == number
    qc = sc.descriptor("TofinoConfig.TofinoQosConfig.QueueConfig")
    assert [f.name for f in qc.oneofs_by_name["port_type"].fields] == ["port", "sdk_port"]


def test_stratum_block_in_fabric_tnas_shape_parses():
    """A block written as fabric-tna's gen-qos-config.py writes it (less its remaining_priority,
    which this common.proto does not declare) parses with these declarations."""
    block = """
vendor_config {
  tofino_config {
    node_id_to_port_shaping_config { key: 1 value {
        per_port_shaping_configs { key: 260 value { byte_shaping { rate_bps: 1000000000 burst_bytes: 18000 } } } } }
    node_id_to_qos_config { key: 1 value {
        queue_configs { port: 260
          queue_mapping { queue_id: 0 priority: PRIO_0 weight: 1 minimum_guaranteed_cells: 0
                          pool: EGRESS_APP_POOL_3 base_use_limit: 80 baf: BAF_33_PERCENT hysteresis: 0 }
          queue_mapping { queue_id: 1 priority: PRIO_6 weight: 750 minimum_guaranteed_cells: 0
                          pool: EGRESS_APP_POOL_1 base_use_limit: 30 baf: BAF_33_PERCENT hysteresis: 0 } } } }
  }
}"""
    cfg = text_format.Parse(block, tm.stratum_schema()["ChassisConfig"]())
    q = cfg.vendor_config.tofino_config.node_id_to_qos_config[1].queue_configs[0]
    assert q.port == 260 and [m.queue_id for m in q.queue_mapping] == [0, 1]


def _stratum_rules(cfg, node, ports_, plan):
    """What Stratum's chassis manager and SDE wrapper require of a queue config."""
    pool = tm.stratum_schema().descriptor("TofinoConfig.TofinoQosConfig.QueueConfig.QueueMapping")
    qos = cfg.vendor_config.tofino_config.node_id_to_qos_config[node]
    assert sorted(qc.port for qc in qos.queue_configs) == sorted(ports_)
    for qc in qos.queue_configs:
        assert qc.WhichOneof("port_type") == "port"
        ids = [m.queue_id for m in qc.queue_mapping]
        assert ids == list(range(len(ids))) and len(ids) <= tm.STRATUM_MAX_QUEUES_PER_PORT
        for m, q in zip(qc.queue_mapping, sorted(plan.queues, key=lambda q: q.qid)):
            for f in ("pool", "baf", "priority"):
                assert getattr(m, f) != 0, f                      # UNKNOWN_* is refused
            assert pool.fields_by_name["priority"].enum_type.values_by_number[m.priority].name \
                == f"PRIO_{q.remaining_bw_priority}"
            assert m.weight == q.dwrr_weight and m.base_use_limit == plan.queue_cells


def test_stratum_qos_section_strict_and_weighted():
    strict = tm.with_port(tm.plan_for_mode("dclas"), buffer_bytes=48_000)
    cfg = tm.stratum_vendor_config(strict, {3: [1, 2, 5]})
    _stratum_rules(cfg, 3, [1, 2, 5], strict)
    prios = [m.priority for m in cfg.vendor_config.tofino_config.node_id_to_qos_config[3]
             .queue_configs[0].queue_mapping]
    assert prios == [i + 1 for i in range(8)]        # qid i -> PRIO_i: class 7 first
    assert strict.queue_cells == 600                 # 48,000 B in 80-byte cells
    assert not cfg.vendor_config.tofino_config.node_id_to_port_shaping_config
    weighted = tm.queue_plan(tm.WEIGHTED, [8, 7, 6, 5, 4, 3, 2, 1])
    cfg = tm.stratum_vendor_config(tm.with_port(weighted, shape_mbps=10), {1: [7]})
    _stratum_rules(cfg, 1, [7], tm.with_port(weighted, shape_mbps=10))
    qm = cfg.vendor_config.tofino_config.node_id_to_qos_config[1].queue_configs[0].queue_mapping
    assert {m.priority for m in qm} == {1} and qm[7].weight == 1023 and qm[0].weight == 128
    shp = cfg.vendor_config.tofino_config.node_id_to_port_shaping_config[1].per_port_shaping_configs[7]
    assert shp.WhichOneof("shaping") == "byte_shaping" and shp.byte_shaping.rate_bps == 10_000_000


CHASSIS = """description: "leaf1"
chassis { platform: PLT_GENERIC_BAREFOOT_TOFINO name: "leaf1" }
nodes { id: 1 slot: 1 index: 1 }
singleton_ports { id: 1 name: "1/0" slot: 1 port: 1 speed_bps: 100000000000 node: 1 }
"""


def test_chassis_config_merge_and_its_errors():
    plan = tm.plan_for_mode("fifo-lm")
    text = tm.merge_chassis_config(CHASSIS, tm.stratum_vendor_text(plan, {1: [1]}))
    assert text.startswith(tm.PUSH_HEADER + CHASSIS.rstrip())
    # Stratum tries the bytes as a binary proto first: they must not parse as any message
    from google.protobuf.message import DecodeError
    for cls in (tm.stratum_schema()["ChassisConfig"], bfrt.schema()["WriteRequest"]):
        with pytest.raises(DecodeError):
            cls.FromString(text.encode())
    cfg = text_format.Parse(text, tm.stratum_schema()["ChassisConfig"](), allow_unknown_field=True)
    _stratum_rules(cfg, 1, [1], plan)
    with pytest.raises(ValueError, match=r"leaf1.pb.txt:2: has a vendor_config"):
        tm.merge_chassis_config("nodes { id: 1 }\n  vendor_config { }\n", "x", "leaf1.pb.txt")
    # a vendor_config in a comment is not one
    assert tm.merge_chassis_config("# vendor_config {}\nnodes { id: 1 }\n", "v").endswith("v")


def test_bfrt_messages_have_bfruntime_protos_numbers():
    sc = bfrt.schema()
    for msg, want in BFRT_DECLARED.items():
        got = field_table(sc, msg)
        assert {n: got[n][0] for n in want} == want, msg
    upd = sc.descriptor("Update").fields_by_name["type"].enum_type
    assert upd.values_by_name["MODIFY"].number == 2
    act = sc.descriptor("SetForwardingPipelineConfigRequest").fields_by_name["action"].enum_type
    assert act.values_by_name["BIND"].number == 0


def test_bfrt_tm_writes_fit_the_tf1_tm_schema():
    plan = tm.with_port(tm.plan_for_mode("dclas"), shape_mbps=40, burst_bytes=9000)
    port_cfg = {132: (4, [8, 9, 10, 11, 12, 13, 14, 15]), 140: (5, list(range(8)))}
    writes = tm.bfrt_tm_writes(plan, port_cfg)
    for w in writes:
        bfrt.check_write(INFO, w)
    sched = {dict(w.key)["pg_queue"] + 100 * dict(w.key)["pg_id"]: dict(w.data)
             for w in writes if w.table == tm.T_QUEUE_SCHED_CFG}
    assert len(sched) == 16
    assert sched[415]["max_priority"] == "7" and sched[408]["min_priority"] == "0"   # qid 7, qid 0
    assert all(d["scheduling_enable"] and not d["min_rate_enable"] for d in sched.values())
    shaping = [dict(w.data) for w in writes if w.table == tm.T_PORT_SCHED_SHAPING]
    assert shaping == [{"unit": "BPS", "provisioning": "UPPER", "max_rate": 40_000,
                        "max_burst_size": 9000}] * 2
    with pytest.raises(ValueError, match="one target each"):
        bfrt.write_request(INFO, writes, device_id=0, client_id=1, p4_name="coflow_tna")
    reqs = bfrt.write_requests(INFO, writes, device_id=0, client_id=1, p4_name="coflow_tna")
    # the port tables to all pipes, the queue writes to the ports' pipe (132 >> 7 = 140 >> 7 = 1)
    assert [r.target.pipe_id for r in reqs] == [bfrt.PIPE_ALL, 1]
    assert [len(r.updates) for r in reqs] == [4, 16]
    req = reqs[1]
    e = req.updates[0].entity.table_entry
    assert req.updates[0].type == 2 and e.table_id == 4278517797
    assert [(f.field_id, f.exact.value) for f in e.key.fields] == [(1, b"\x04"), (2, b"\x08")]
    by_id = {f.field_id: f for f in e.data.fields}
    assert by_id[3].stream == (1023).to_bytes(2, "big") and by_id[4].str_val == "0"
    assert by_id[6].bool_val is True
    with pytest.raises(ValueError, match="queues mapped"):
        tm.bfrt_tm_writes(plan, {1: (0, [0, 1])})


@pytest.mark.parametrize("bad,msg", [
    (tm.TmWrite(tm.T_QUEUE_SCHED_CFG, (("pg_id", 1),), ()), "key fields"),
    (tm.TmWrite(tm.T_QUEUE_SCHED_CFG, (("pg_id", 1), ("pg_queue", 300)), ()), "not a uint8"),
    (tm.TmWrite(tm.T_QUEUE_SCHED_CFG, (("pg_id", 1), ("pg_queue", 3)), (("max_priority", "8"),)), "not one of"),
    (tm.TmWrite(tm.T_QUEUE_SCHED_CFG, (("pg_id", 1), ("pg_queue", 3)), (("dwrr_weight", 1 << 16),)), "uint16"),
    (tm.TmWrite(tm.T_QUEUE_SCHED_CFG, (("pg_id", 1), ("pg_queue", 3)), (("weight", 1),)), "no data field"),
    (tm.TmWrite("tf1.tm.nothing", (), ()), "no table"),
])
def test_bfrt_check_refuses_what_the_schema_does_not_allow(bad, msg):
    with pytest.raises(ValueError, match=msg):
        bfrt.check_write(INFO, bad)


# --- pushed to fake servers ------------------------------------------------------------------

def _server(handlers: dict):
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    by_service: dict = {}
    for path, h in handlers.items():
        svc, meth = path.strip("/").split("/")
        by_service.setdefault(svc, {})[meth] = h
    for svc, meths in by_service.items():
        srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(svc, meths),))
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    return srv, port


def test_stratum_push_replaces_the_root_with_the_merged_chassis_config(tmp_path):
    from pygnmi.spec.v080 import gnmi_pb2
    got = []

    def set_(req, ctx):
        got.append(req)
        return gnmi_pb2.SetResponse()
    srv, port = _server({"/gnmi.gNMI/Set": grpc.unary_unary_rpc_method_handler(
        set_, request_deserializer=gnmi_pb2.SetRequest.FromString,
        response_serializer=lambda m: m.SerializeToString())})
    try:
        (tmp_path / "leaf1.pb.txt").write_text(CHASSIS)
        plan = tm.plan_for_mode("dclas")
        p = TmPusher("stratum", plan, {"leaf1": [1]}, chassis_config=str(tmp_path))
        agent = types.SimpleNamespace(name="leaf1", address=f"127.0.0.1:{port}", device_id=1)
        p.apply(agent)
        p.apply(agent)                       # a restarted switch gets it again
    finally:
        srv.stop(0)
    assert len(got) == 2 and p.applied == {"leaf1": 2}
    rep = got[0].replace[0]
    assert not rep.path.elem and rep.val.WhichOneof("value") == "bytes_val"
    text = rep.val.bytes_val.decode()
    assert text.startswith(tm.PUSH_HEADER + CHASSIS.rstrip())
    cfg = text_format.Parse(text, tm.stratum_schema()["ChassisConfig"](), allow_unknown_field=True)
    _stratum_rules(cfg, 1, [1], plan)
    assert gnmi_set_request("x").replace[0].val.bytes_val == b"x"


def test_stratum_needs_a_chassis_config_and_reads_it_at_start(tmp_path):
    with pytest.raises(ValueError, match="--tofino-chassis-config: required"):
        TmPusher("stratum", tm.plan_for_mode("dclas"), {"s": [1]})
    with pytest.raises(ValueError, match="nope.pb.txt"):
        TmPusher("stratum", tm.plan_for_mode("dclas"), {"nope": [1]}, chassis_config=str(tmp_path))


class FakeBfrt:
    """bf_switchd's BF Runtime server as far as the TM push uses it: Subscribe on the stream,
    BIND, the fixed tables' BF-RT info, tf1.tm.port.cfg reads, writes recorded. ``port_cfg``:
    dev_port -> (pg_id within the port's pipe, its queues).

    Rules of the real server it enforces (open-p4studio bf-drivers, src/bf_rt/bf_rt_tm/):
    - a tf1.tm.queue.* table refuses a target of all pipes: the queue tables' entry calls
      validate the target with ``BfRtTMTable::singlePipe_validate`` (bf_rt_tm_table_impl.cpp:
      "PIPE_ALL is not allowed", BF_INVALID_ARG), and a queue's ``pg_id`` is a port group of
      that one pipe; the port tables (keyed by dev_port) take all pipes;
    - a pipe that does not exist is refused the same way (``bfTMPipeIsValid``): this fake's
      device has ``pipes`` pipes;
    - a table id it does not know is refused (src/bf_rt/proto/bf_rt_server_impl.cpp
      ``write_entry``: "Table not found for id"), and so is a data field id that is neither the
      table's nor the written action's (``BfRtTMTableData::getDataField``, called by every ``setValue``,
      bf_rt_tm_table_data_impl.cpp: "Invalid field_id"; an action's fields need its
      ``action_id``);
    - a value of another kind than the field's type is refused (``set_data_field`` in
      bf_rt_server_impl.cpp calls the setter of the value's kind, whose ``getDataField`` checks
      the type: a uint is a ``stream``, a bool a ``bool_val``, a string a ``str_val``), an
      integer wider than the field's width too (``BfRtTMTableData::setIntValue``:
      ``fieldTypeCompatibilityCheck``, ``boundsCheck``), and a string that is not one of the
      field's choices (e.g. ``BfRtTMQueueBufferTable::tableSetEntry``,
      bf_rt_tm_table_impl_queue.cpp: ``str_to_qbaf.at`` -> BF_INVALID_ARG)."""

    def __init__(self, port_cfg: dict, pipes: int = 4):
        self.port_cfg = port_cfg
        self.pipes = pipes
        self.binds: list = []
        self.writes: list = []
        sc = bfrt.schema()
        ser = lambda m: m.SerializeToString()  # noqa: E731

        def stream(it, ctx):
            for m in it:
                if m.WhichOneof("update") == "subscribe":
                    r = sc["StreamMessageResponse"]()
                    r.subscribe.device_id = m.subscribe.device_id
                    yield r

        def set_cfg(req, ctx):
            self.binds.append((req.action, [c.p4_name for c in req.config]))
            return sc["SetForwardingPipelineConfigResponse"]()

        def get_cfg(req, ctx):
            r = sc["GetForwardingPipelineConfigResponse"]()
            r.non_p4_config.bfruntime_info = json.dumps(TF1_TM).encode()
            return r

        def read(req, ctx):
            r = sc["ReadResponse"]()
            for ent in req.entities:
                dev = int.from_bytes(ent.table_entry.key.fields[0].exact.value, "big")
                if dev not in self.port_cfg:
                    continue
                out = r.entities.add().table_entry
                out.CopyFrom(ent.table_entry)
                pg, qs = self.port_cfg[dev]
                out.data.fields.add(field_id=1, stream=bytes([pg]))
                out.data.fields.add(field_id=5).int_arr_val.val.extend(qs)
            yield r

        tables = {t["id"]: t for t in TF1_TM["tables"]}

        def fields_of(t: dict, action_id: int) -> set:
            ids = {d["singleton"]["id"] for d in t.get("data", [])}
            for a in t.get("action_specs", []):
                if a["id"] == action_id:
                    ids |= {d["singleton"]["id"] for d in a["data"]}
            return ids

        def spec_of(t: dict, action_id: int, fid: int) -> dict:
            for d in t.get("data", []) + next((a["data"] for a in t.get("action_specs", [])
                                                if a["id"] == action_id), []):
                if d["singleton"]["id"] == fid:
                    return d["singleton"]["type"]
            return {}

        def value_error(typ: dict, f) -> str:
            kind, want = f.WhichOneof("value"), typ.get("type", "")
            if want.startswith("uint"):
                if kind != "stream":
                    return f"Incompatible type {kind} for field_id={f.field_id}"
                if int.from_bytes(f.stream, "big") >> int(want[4:]) or len(f.stream) > int(want[4:]) // 8:
                    return f"Bounds check failed for field_id={f.field_id}"
            elif want == "bool" and kind != "bool_val":
                return f"Incompatible type {kind} for field_id={f.field_id}"
            elif want == "string":
                if kind != "str_val":
                    return f"Incompatible type {kind} for field_id={f.field_id}"
                if "choices" in typ and f.str_val not in typ["choices"]:
                    return f"field_id={f.field_id}: value is out of range"
            return ""

        def write(req, ctx):
            pipe = req.target.pipe_id
            for u in req.updates:
                e = u.entity.table_entry
                tid = e.table_id
                if tid not in tables:
                    ctx.abort(grpc.StatusCode.NOT_FOUND, f"Table not found for id {tid}")
                if tid in QUEUE_TABLES and (pipe == bfrt.PIPE_ALL or pipe >= self.pipes):
                    ctx.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"{tables[tid]['name']}: invalid pipe_id {pipe:#x} (PIPE_ALL is not allowed)")
                bad = [f.field_id for f in e.data.fields
                       if f.field_id not in fields_of(tables[tid], e.data.action_id)]
                if bad:
                    ctx.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"{tables[tid]['name']}: Invalid field_id={bad[0]}")
                for f in e.data.fields:
                    why = value_error(spec_of(tables[tid], e.data.action_id, f.field_id), f)
                    if why:
                        ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{tables[tid]['name']}: {why}")
            self.writes.append(req)
            return sc["WriteResponse"]()
        h = grpc
        self.handlers = {
            "/bfrt_proto.BfRuntime/StreamChannel": h.stream_stream_rpc_method_handler(
                stream, sc["StreamMessageRequest"].FromString, ser),
            "/bfrt_proto.BfRuntime/SetForwardingPipelineConfig": h.unary_unary_rpc_method_handler(
                set_cfg, sc["SetForwardingPipelineConfigRequest"].FromString, ser),
            "/bfrt_proto.BfRuntime/GetForwardingPipelineConfig": h.unary_unary_rpc_method_handler(
                get_cfg, sc["GetForwardingPipelineConfigRequest"].FromString, ser),
            "/bfrt_proto.BfRuntime/Read": h.unary_stream_rpc_method_handler(
                read, sc["ReadRequest"].FromString, ser),
            "/bfrt_proto.BfRuntime/Write": h.unary_unary_rpc_method_handler(
                write, sc["WriteRequest"].FromString, ser),
        }


def test_bf_switchd_push_reads_port_groups_and_writes_every_queue():
    # ports of two pipes: 4 (pipe 0) and 132, 140 (pipe 1); pg 4 of pipe 0 is not pg 4 of pipe 1
    fake = FakeBfrt({4: (4, list(range(8))), 132: (4, list(range(8, 16))), 140: (5, list(range(8)))})
    srv, port = _server(fake.handlers)
    try:
        pm = ports.PortMap({"leaf1": {1: 132, 2: 140, 3: 4}})
        p = TmPusher("bf_switchd", tm.plan_for_mode("dclas"), {"leaf1": [1, 2, 3]}, pm, bfrt_port=port)
        agent = types.SimpleNamespace(name="leaf1", address="127.0.0.1:9559", device_id=1)
        p.apply(agent)
        with pytest.raises(RuntimeError, match="no dev_port"):
            TmPusher("bf_switchd", tm.plan_for_mode("dclas"), {"leaf1": [3]}, bfrt_port=port).apply(agent)
    finally:
        srv.stop(0)
    assert fake.binds[0] == (0, ["coflow_tna"])
    assert [w.target.pipe_id for w in fake.writes] == [0, 1]      # one Write per pipe
    got = {}
    for w in fake.writes:
        for u in w.updates:
            k, d = bfrt.decode_entry(INFO, tm.T_QUEUE_SCHED_CFG, u.entity.table_entry)
            got[(w.target.pipe_id, k["pg_id"], k["pg_queue"])] = d
    assert len(got) == 24
    assert got[(1, 4, 15)]["max_priority"] == "7" and got[(1, 5, 0)]["max_priority"] == "0"
    assert got[(0, 4, 7)]["max_priority"] == "7"


def test_fake_bf_runtime_refuses_queue_writes_to_all_pipes():
    """What the push did before: every write to all pipes. The real server refuses it, and so
    does the fake (the rule the push test relies on)."""
    fake = FakeBfrt({132: (4, list(range(8)))})
    srv, port = _server(fake.handlers)
    try:
        c = bfrt.BfrtClient(f"127.0.0.1:{port}", device_id=1, timeout=5)
        c.connect()
        w = tm.bfrt_tm_writes(tm.plan_for_mode("dclas"), {132: (4, list(range(8)))})
        with pytest.raises(bfrt.BfrtError, match="PIPE_ALL is not allowed"):
            c.write([dataclasses.replace(x, pipe=None) for x in w])
        with pytest.raises(bfrt.BfrtError, match="invalid pipe_id 0x4"):
            c.write([dataclasses.replace(x, pipe=4) for x in w])
        c.write(w)
        c.close()
    finally:
        srv.stop(0)
    assert [x.target.pipe_id for x in fake.writes] == [1]


def test_bf_switchd_without_a_server_is_one_clear_error():
    p = TmPusher("bf_switchd", tm.plan_for_mode("dclas"), {"s": [1]}, bfrt_port=1, timeout=0.5)
    with pytest.raises(bfrt.BfrtError, match="127.0.0.1:1"):
        p.apply(types.SimpleNamespace(name="s", address="127.0.0.1:9559", device_id=1))


def test_switch_agent_issues_the_tm_config_at_every_bring_up(monkeypatch):
    """The keeper pushes the pipeline when the switch lacks it (a restarted switch), then the
    TM configuration, on every bring-up as primary; a failing push fails the bring-up."""
    from coflow.ctl import switch as S
    events: list = []

    class FakeClient:
        cookie = None                                     # a fresh switch: no pipeline

        def __init__(self, *a, **kw):
            self.connected = False

        def connect(self, **kw):
            self.connected = True

        is_master = True

        def pipeline_cookie(self):
            return FakeClient.cookie

        def set_pipeline(self, p4info, dev, cookie):
            FakeClient.cookie = cookie
            events.append("pipeline")

        def close(self):
            self.connected = False
    monkeypatch.setattr(S, "P4RuntimeClient", FakeClient)
    monkeypatch.setattr(S.SwitchAgent, "read_state", lambda self: events.append("read") or "state")
    fail = threading.Event()

    def on_master(agent):
        events.append("tm")
        if fail.is_set():
            raise RuntimeError("BF Runtime down")
    a = S.SwitchAgent("s", "x:1", 1, 10, types.SimpleNamespace(h=None), "p", "d", 7,
                      on_master=on_master)
    a._bring_up()
    assert events == ["pipeline", "tm", "read"]
    a.client.close()                                      # the switch restarted: state lost
    FakeClient.cookie = None
    a._bring_up()
    assert events[3:] == ["pipeline", "tm", "read"]
    a.client.close()                                      # controller reconnects, pipeline kept
    a._bring_up()
    assert events[6:] == ["tm", "read"]
    assert a.status()["tm_configured"] == 3 and a.pipeline_pushes == 2
    a.client.close()
    fail.set()
    with pytest.raises(RuntimeError, match="BF Runtime down"):
        a._bring_up()
    assert events[-1] == "tm" and events.count("read") == 3     # not handed back: no read


# --- the declarations' notation (protodesc.parse) ------------------------------------------

def test_parse_reads_proto_notation_into_build_tables():
    from coflow.tofino.protodesc import parse
    fields, enums = parse("""
message A { uint32 x = 1; repeated A.B bs = 2; oneof pick { bytes raw = 3; A.E e = 4; }
            map<uint64, A.B> by_id = 5; }
message A.B { string s = 7; }
enum A.E { ZERO = 0; ONE = 1; }
""")
    assert fields == (("A", "x", 1, "uint32", "optional"), ("A", "bs", 2, "msg:A.B", "repeated"),
                      ("A", "raw", 3, "bytes", "optional", "pick"), ("A", "e", 4, "enum:A.E", "optional", "pick"),
                      ("A", "by_id", 5, "map:uint64:A.B", "optional"), ("A.B", "s", 7, "string", "optional"))
    assert enums == (("A.E", (("ZERO", 0), ("ONE", 1))),)


@pytest.mark.parametrize("text,msg", [
    ("message A { uint32 x 1; }", "line 1: = expected, not '1'"),
    ("message A { uint32 x = one; }", "line 1: a number expected, not 'one'"),
    ("message A {\n uint32 x = 1 }", "line 2: ; expected, not '}'"),
    ("message A { uint32 x = 1;", "ends where a name was due"),
    ("\nservice S { }", "line 2: 'message' or 'enum' expected, not 'service'"),
    ("message A { uint32 x = 1; } # c", "line 1: unexpected '#'"),
    ("message A { map<uint32 A> m = 1; }", "line 1: , expected, not 'A'"),
])
def test_parse_refuses_malformed_declarations_in_one_line(text, msg):
    from coflow.tofino.protodesc import parse
    with pytest.raises(ValueError) as e:
        parse(text, "t")
    assert str(e.value) == f"t: {msg}"


def test_bf_switchd_push_sets_every_queues_buffer_as_stratum_does():
    """The plan's buffer (``port_buffer_bytes`` in cells, pool 0, BAF 33 %) reaches bf_switchd
    through tf1.tm.queue.buffer's shared_pool action, per pipe, as the chassis config gives it
    to Stratum."""
    fake = FakeBfrt({4: (4, list(range(8))), 132: (4, list(range(8, 16)))})
    srv, port = _server(fake.handlers)
    plan = tm.with_port(tm.plan_for_mode("dclas"), buffer_bytes=32 * 1518)
    try:
        pm = ports.PortMap({"leaf1": {1: 132, 3: 4}})
        TmPusher("bf_switchd", plan, {"leaf1": [1, 3]}, pm, bfrt_port=port).apply(
            types.SimpleNamespace(name="leaf1", address="127.0.0.1:9559", device_id=1))
    finally:
        srv.stop(0)
    buf = {}
    tid = INFO.table("tf1.tm.queue.buffer")[0]
    for w in fake.writes:
        for u in w.updates:
            e = u.entity.table_entry
            if e.table_id == tid:
                k, d = bfrt.decode_entry(INFO, "tf1.tm.queue.buffer", e)
                buf[(w.target.pipe_id, k["pg_id"], k["pg_queue"])] = (e.data.action_id, d)
    assert len(buf) == 16 and plan.queue_cells == 608
    assert buf[(1, 4, 15)][0] == 1 and buf[(0, 4, 0)][0] == 1       # shared_pool
    assert buf[(1, 4, 15)][1] == {"guaranteed_cells": 0, "hysteresis_cells": 0}  # table fields
    stratum = tm.stratum_vendor_config(plan, {1: [1]})
    qm = stratum.vendor_config.tofino_config.node_id_to_qos_config[1].queue_configs[0].queue_mapping[0]
    e = next(u.entity.table_entry for w in fake.writes for u in w.updates if u.entity.table_entry.table_id == tid)
    by_id = {f.field_id: f for f in e.data.fields}
    assert int.from_bytes(by_id[5].stream, "big") == qm.base_use_limit == 608
    assert by_id[4].str_val == "EG_APP_POOL_0" and by_id[6].str_val == "33%"


def _field(e, fid: int):
    return next(f for f in e.data.fields if f.field_id == fid)


@pytest.mark.parametrize("mutate,msg", [
    (lambda e: setattr(e, "table_id", 4278517799), "Table not found for id 4278517799"),
    (lambda e: e.data.fields.add(field_id=9, bool_val=True), "Invalid field_id=9"),
    (lambda e: setattr(e.data, "action_id", 0), "Invalid field_id=4"),   # action fields, no action
    (lambda e: _field(e, 5).ClearField("stream") or setattr(_field(e, 5), "str_val", "608"),
     "Incompatible type str_val for field_id=5"),                         # pool_max_cells: uint32
    (lambda e: setattr(_field(e, 5), "stream", (1 << 32).to_bytes(5, "big")),
     "Bounds check failed for field_id=5"),
    (lambda e: setattr(_field(e, 6), "str_val", "34%"), "field_id=6: value is out of range"),
    (lambda e: setattr(_field(e, 1), "bool_val", True), "Incompatible type bool_val for field_id=1"),
])
def test_fake_bf_runtime_refuses_unknown_tables_and_fields(mutate, msg):
    fake = FakeBfrt({132: (4, list(range(8)))})
    srv, port = _server(fake.handlers)
    try:
        c = bfrt.BfrtClient(f"127.0.0.1:{port}", device_id=1, timeout=5)
        c.connect()
        plan = tm.with_port(tm.plan_for_mode("dclas"), buffer_bytes=8000)
        w = [x for x in tm.bfrt_tm_writes(plan, {132: (4, list(range(8)))}) if x.table == "tf1.tm.queue.buffer"]
        req = bfrt.write_request(c.info, w[:1], 1, 1, "coflow_tna")
        mutate(req.updates[0].entity.table_entry)
        with pytest.raises(bfrt.BfrtError, match=msg):
            c._unary("Write", req, bfrt.schema()["WriteResponse"])
        c.close()
    finally:
        srv.stop(0)

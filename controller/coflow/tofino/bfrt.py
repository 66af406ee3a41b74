"""A BF Runtime gRPC client for bf_switchd's fixed-function tables (the traffic manager's
``tf1.tm.*``): the messages, a schema check, and the few calls the controller needs.

No registry package ships BF Runtime's protos (Intel's ``bfrt_grpc`` Python client comes with
the SDE), so the messages are declared from open-p4studio
``pkgsrc/bf-drivers/src/bf_rt/proto/bfruntime.proto`` (at :data:`BFRT_COMMIT`) with protobuf's
descriptor API (:mod:`coflow.tofino.protodesc`): package ``bfrt_proto``, the field numbers of
:data:`BFRT_PROTO`. Table and field ids are not hard-coded: they come from the switch's BF-RT
info (``GetForwardingPipelineConfig``'s ``non_p4_config.bfruntime_info``, the JSON of
``bf_rt_tm_tf1.json``), which also gives every field's type, checked before a write
(:func:`check_write`).

The protocol, as the SDE's client does it: open ``StreamChannel`` and send ``Subscribe`` with
the device id (the server answers on the stream), ``SetForwardingPipelineConfig`` with action
``BIND`` to the P4 program, then ``Read`` / ``Write`` with that program's name.
"""
from __future__ import annotations

import json
import queue
import threading
from typing import Any

from .tm import TmWrite

BFRT_COMMIT = "1f97778f9ad5c8165bfce552fffe27c69887756b"
PACKAGE = "bfrt_proto"
SERVICE = "/bfrt_proto.BfRuntime/"
DEFAULT_PORT = 50052          # bf_switchd's BF Runtime gRPC server

#: the messages as bfruntime.proto declares them (the subset used here), in its notation
#: (:func:`coflow.tofino.protodesc.parse`)
BFRT_PROTO = """
message TargetDevice { uint32 device_id = 1; uint32 pipe_id = 2; uint32 direction = 3; uint32 prsr_id = 4; }
message WriteRequest {
  TargetDevice target = 1; uint32 client_id = 2; repeated Update updates = 3;
  WriteRequest.Atomicity atomicity = 4; string p4_name = 5; }
enum WriteRequest.Atomicity { CONTINUE_ON_ERROR = 0; ROLLBACK_ON_ERROR = 1; DATAPLANE_ATOMIC = 2; }
message WriteResponse { repeated Error status = 1; }
message ReadRequest {
  TargetDevice target = 1; uint32 client_id = 2; repeated Entity entities = 3; string p4_name = 4; }
message ReadResponse { repeated Entity entities = 1; repeated Error status = 2; }
message Update { Update.Type type = 1; Entity entity = 2; }
enum Update.Type {
  UNSPECIFIED = 0; INSERT = 1; MODIFY = 2; MODIFY_INC = 3; DELETE = 4; INSERT_OR_MODIFY = 5; RESET = 6; }
message Entity { oneof entity { TableEntry table_entry = 1; } }
message TableEntry {
  uint32 table_id = 1; oneof value { TableKey key = 2; } TableData data = 3; bool is_default_entry = 4; }
message TableData { uint32 action_id = 1; repeated DataField fields = 2; }
message DataField {
  uint32 field_id = 1;
  oneof value { bytes stream = 2; float float_val = 3; string str_val = 4;
                DataField.IntArray int_arr_val = 5; DataField.BoolArray bool_arr_val = 6; bool bool_val = 8; } }
message DataField.IntArray { repeated uint32 val = 1; }
message DataField.BoolArray { repeated bool val = 1; }
message TableKey { repeated KeyField fields = 1; }
message KeyField { uint32 field_id = 1; oneof match_type { KeyField.Exact exact = 2; } }
message KeyField.Exact { bytes value = 1; }
message Error { int32 canonical_code = 1; string message = 2; string space = 3; int32 code = 4; }
message StreamMessageRequest { uint32 client_id = 1; oneof update { Subscribe subscribe = 2; } }
message Subscribe { uint32 device_id = 2; Subscribe.Notifications notifications = 3; }
message Subscribe.Notifications {
  bool enable_learn_notifications = 1; bool enable_idletimeout_notifications = 2;
  bool enable_port_status_change_notifications = 3; }
message StreamMessageResponse { oneof update { Subscribe subscribe = 1; } }
message SetForwardingPipelineConfigRequest {
  uint32 device_id = 1; uint32 client_id = 2; SetForwardingPipelineConfigRequest.Action action = 3;
  repeated ForwardingPipelineConfig config = 6; }
enum SetForwardingPipelineConfigRequest.Action { BIND = 0; VERIFY = 1; }
message SetForwardingPipelineConfigResponse { uint32 set_forwarding_pipeline_config_response_type = 1; }
message ForwardingPipelineConfig { string p4_name = 1; bytes bfruntime_info = 2; }
message GetForwardingPipelineConfigRequest { uint32 device_id = 1; uint32 client_id = 2; }
message GetForwardingPipelineConfigResponse {
  repeated ForwardingPipelineConfig config = 1; NonP4Config non_p4_config = 2; }
message NonP4Config { bytes bfruntime_info = 1; }
"""

_schema = None


def schema():
    global _schema
    if _schema is None:
        from .protodesc import build, parse
        _schema = build("bfruntime.proto", PACKAGE, *parse(BFRT_PROTO, "bfrt.BFRT_PROTO"))
    return _schema


# BF-RT info (the JSON schema of the tables) -------------------------------------------------

_INT_BYTES = {"uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8}


class BfrtInfo:
    """Tables of a BF-RT info JSON by name: id, key fields, data fields (id, type, repeated)."""

    def __init__(self, doc: dict):
        self.tables: dict = {}
        self.actions: dict = {}     # table -> {action: (id, its data fields as ``data``)}
        for t in doc.get("tables", []):
            keys = {k["name"]: (k["id"], k["type"], bool(k.get("mandatory"))) for k in t.get("key", [])}
            self.tables[t["name"]] = (t["id"], keys, _singletons(t.get("data", [])))
            self.actions[t["name"]] = {a["name"]: (a["id"], _singletons(a.get("data", [])))
                                       for a in t.get("action_specs", [])}

    @classmethod
    def from_json(cls, blob) -> "BfrtInfo":
        try:
            return cls(json.loads(blob))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"BF-RT info: not a bfrt.json ({exc})") from None

    def merged(self, other: "BfrtInfo") -> "BfrtInfo":
        out = BfrtInfo({})
        out.tables = {**self.tables, **other.tables}
        out.actions = {**self.actions, **other.actions}
        return out

    def data_fields(self, table: str, action: str | None) -> tuple[int, dict]:
        """(action id or 0, the data fields a write of ``action`` may set: the table's own
        and the action's)."""
        _, _, data = self.table(table)
        if action is None:
            return 0, data
        acts = self.actions.get(table, {})
        if action not in acts:
            raise ValueError(f"{table}: no action {action!r} (actions: {sorted(acts)})")
        aid, adata = acts[action]
        return aid, {**data, **adata}

    def table(self, name: str):
        try:
            return self.tables[name]
        except KeyError:
            raise ValueError(f"BF-RT info has no table {name}") from None


def _singletons(fields) -> dict:
    out = {}
    for d in fields:
        s = d.get("singleton")
        if s:
            out[s["name"]] = (s["id"], s["type"], bool(s.get("repeated")))
    return out


def _check_value(where: str, typ: dict, v, repeated: bool = False):
    if repeated:
        if not isinstance(v, (list, tuple)):
            raise ValueError(f"{where}: a list expected")
        for x in v:
            _check_value(where, typ, x)
        return
    t = typ.get("type")
    if t in _INT_BYTES:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << (8 * _INT_BYTES[t]):
            raise ValueError(f"{where}: {v!r} is not a {t}")
    elif t == "bool":
        if not isinstance(v, bool):
            raise ValueError(f"{where}: {v!r} is not a bool")
    elif t == "string":
        if not isinstance(v, str) or ("choices" in typ and v not in typ["choices"]):
            raise ValueError(f"{where}: {v!r} is not one of {typ.get('choices')}")
    else:
        raise ValueError(f"{where}: type {t!r} not supported here")


def check_write(info: BfrtInfo, w: TmWrite) -> None:
    """The write names the table's key fields exactly, and data fields it has, with values of
    their types (ranges, string choices). ValueError otherwise."""
    _, keys, _ = info.table(w.table)
    _, data = info.data_fields(w.table, getattr(w, "action", None))
    names = [k for k, _ in w.key]
    if sorted(names) != sorted(keys) or len(set(names)) != len(names):
        raise ValueError(f"{w.table}: key fields {sorted(names)}, the table's are {sorted(keys)}")
    for k, v in w.key:
        _check_value(f"{w.table} key {k}", keys[k][1], v)
    for k, v in w.data:
        if k not in data:
            raise ValueError(f"{w.table}: no data field {k!r}")
        _check_value(f"{w.table} {k}", data[k][1], v, data[k][2])


def _int_bytes(typ: dict, v: int) -> bytes:
    return int(v).to_bytes(_INT_BYTES[typ["type"]], "big")


def _data_field(msg, fid: int, typ: dict, v) -> None:
    f = msg.fields.add(field_id=fid)
    t = typ["type"]
    if t == "bool":
        f.bool_val = bool(v)
    elif t == "string":
        f.str_val = v
    else:
        f.stream = _int_bytes(typ, v)


def _table_key(entry, keys: dict, key) -> None:
    for k, v in key:
        kid, ktyp, _ = keys[k]
        entry.key.fields.add(field_id=kid).exact.value = _int_bytes(ktyp, v)


#: BF_DEV_PIPE_ALL: a target of every pipe
PIPE_ALL = 0xFFFF


def write_request(info: BfrtInfo, writes, device_id: int, client_id: int, p4_name: str):
    """A ``WriteRequest`` of MODIFY updates (checked against ``info`` first), all to one
    target: the writes' common ``pipe`` (None: all pipes). ValueError when they differ
    (:func:`write_requests` splits them)."""
    sc = schema()
    req = sc["WriteRequest"](client_id=client_id, p4_name=p4_name)
    req.target.device_id = device_id
    pipes = {getattr(w, "pipe", None) for w in writes}
    if len(pipes) > 1:
        raise ValueError(f"writes to pipes {sorted(pipes, key=str)} in one request: one target each")
    pipe = pipes.pop() if pipes else None
    req.target.pipe_id = PIPE_ALL if pipe is None else pipe
    for w in writes:
        check_write(info, w)
        tid, keys, _ = info.table(w.table)
        aid, data = info.data_fields(w.table, getattr(w, "action", None))
        u = req.updates.add(type="MODIFY")
        e = u.entity.table_entry
        e.table_id = tid
        _table_key(e, keys, w.key)
        if aid:
            e.data.action_id = aid
        for k, v in w.data:
            fid, typ, _ = data[k]
            _data_field(e.data, fid, typ, v)
    return req


def write_requests(info: BfrtInfo, writes, device_id: int, client_id: int, p4_name: str) -> list:
    """One ``WriteRequest`` per target pipe of ``writes`` (all pipes first, then by pipe), each
    keeping the writes' order."""
    groups: dict = {}
    for w in writes:
        groups.setdefault(getattr(w, "pipe", None), []).append(w)
    order = sorted(groups, key=lambda p: -1 if p is None else p)
    return [write_request(info, groups[p], device_id, client_id, p4_name) for p in order]


def read_request(info: BfrtInfo, table: str, keys, device_id: int, client_id: int, p4_name: str):
    """A ``ReadRequest`` of one entry per key of ``table``."""
    sc = schema()
    req = sc["ReadRequest"](client_id=client_id, p4_name=p4_name)
    req.target.device_id = device_id
    req.target.pipe_id = PIPE_ALL           # the port tables read here take all pipes
    tid, kdef, _ = info.table(table)
    for key in keys:
        e = req.entities.add().table_entry
        e.table_id = tid
        _table_key(e, kdef, key)
    return req


def decode_entry(info: BfrtInfo, table: str, entry) -> tuple[dict, dict]:
    """(key, data) of a read-back ``TableEntry`` by field name."""
    tid, kdef, ddef = info.table(table)
    if entry.table_id != tid:
        raise ValueError(f"entry of table id {entry.table_id}, expected {table} ({tid})")
    kname = {i: n for n, (i, _, _) in kdef.items()}
    dname = {i: (n, t) for n, (i, t, _) in ddef.items()}
    key = {kname[f.field_id]: int.from_bytes(f.exact.value, "big") for f in entry.key.fields
           if f.field_id in kname}
    data: dict = {}
    for f in entry.data.fields:
        if f.field_id not in dname:
            continue
        n, t = dname[f.field_id]
        which = f.WhichOneof("value")
        if which == "stream":
            data[n] = int.from_bytes(f.stream, "big")
        elif which == "int_arr_val":
            data[n] = list(f.int_arr_val.val)
        elif which == "bool_val":
            data[n] = f.bool_val
        elif which == "str_val":
            data[n] = f.str_val
    return key, data


class BfrtError(RuntimeError):
    pass


class BfrtClient:
    """One client of one device: subscribe, bind to the P4 program, read and write."""

    def __init__(self, address: str, device_id: int = 0, client_id: int = 1,
                 p4_name: str = "coflow_tna", timeout: float = 5.0):
        self.address = address
        self.device_id = device_id
        self.client_id = client_id
        self.p4_name = p4_name
        self.timeout = timeout
        self._chan: Any = None
        self._stream: Any = None
        self._out: queue.Queue = queue.Queue()
        self._first: queue.Queue = queue.Queue()
        self.info: Any = None                # BfrtInfo once connected

    def _unary(self, method: str, req, resp_cls):
        call = self._chan.unary_unary(SERVICE + method, request_serializer=lambda m: m.SerializeToString(),
                                      response_deserializer=resp_cls.FromString)
        import grpc
        try:
            return call(req, timeout=self.timeout)
        except grpc.RpcError as e:   # the server's refusal, in one line
            raise BfrtError(f"{method} on {self.address}: {e.code().name}: {e.details()}") from None

    def connect(self) -> "BfrtClient":
        import grpc
        sc = schema()
        self._chan = grpc.insecure_channel(self.address)
        stream = self._chan.stream_stream(SERVICE + "StreamChannel",
                                          request_serializer=lambda m: m.SerializeToString(),
                                          response_deserializer=sc["StreamMessageResponse"].FromString)

        def requests():
            while True:
                m = self._out.get()
                if m is None:
                    return
                yield m

        self._stream = stream(requests())

        def reader():
            try:
                for msg in self._stream:
                    if msg.WhichOneof("update") == "subscribe":
                        self._first.put(msg)
            except Exception as exc:  # noqa: BLE001 - the stream ended: tell a waiting connect
                self._first.put(exc)
        threading.Thread(target=reader, daemon=True, name="bfrt-stream").start()
        sub = sc["StreamMessageRequest"](client_id=self.client_id)
        sub.subscribe.device_id = self.device_id
        sub.subscribe.notifications.SetInParent()
        self._out.put(sub)
        try:
            got = self._first.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise BfrtError(f"{self.address}: no answer to Subscribe within {self.timeout} s") from None
        if isinstance(got, Exception):
            self.close()
            raise BfrtError(f"{self.address}: {str(got).splitlines()[0]}")
        self._unary("SetForwardingPipelineConfig", sc["SetForwardingPipelineConfigRequest"](
            device_id=self.device_id, client_id=self.client_id, action="BIND",
            config=[sc["ForwardingPipelineConfig"](p4_name=self.p4_name)]),
            sc["SetForwardingPipelineConfigResponse"])
        resp = self._unary("GetForwardingPipelineConfig", sc["GetForwardingPipelineConfigRequest"](
            device_id=self.device_id, client_id=self.client_id),
            sc["GetForwardingPipelineConfigResponse"])
        if not resp.non_p4_config.bfruntime_info:
            self.close()
            raise BfrtError(f"{self.address}: no fixed-function (non-P4) BF-RT info")
        self.info = BfrtInfo.from_json(resp.non_p4_config.bfruntime_info)
        return self

    def read(self, table: str, keys) -> list[tuple[dict, dict]]:
        sc = schema()
        req = read_request(self.info, table, keys, self.device_id, self.client_id, self.p4_name)
        call = self._chan.unary_stream(SERVICE + "Read", request_serializer=lambda m: m.SerializeToString(),
                                       response_deserializer=sc["ReadResponse"].FromString)
        out = []
        for resp in call(req, timeout=self.timeout):
            for st in resp.status:
                if st.canonical_code:
                    raise BfrtError(f"Read {table}: {st.message or st.canonical_code}")
            for ent in resp.entities:
                out.append(decode_entry(self.info, table, ent.table_entry))
        return out

    def write(self, writes) -> None:
        """The writes, one Write per target pipe (:func:`write_requests`)."""
        sc = schema()
        for req in write_requests(self.info, writes, self.device_id, self.client_id, self.p4_name):
            resp = self._unary("Write", req, sc["WriteResponse"])
            bad = [st for st in resp.status if st.canonical_code]
            if bad:
                raise BfrtError(f"Write (pipe {req.target.pipe_id:#x}): {bad[0].message or bad[0].canonical_code}")

    def close(self) -> None:
        self._out.put(None)
        if self._chan is not None:
            self._chan.close()
            self._chan = None

"""One emulated switch's state with PI's semantics (bench/p4rt_emu.py serves many of them over
P4Runtime): the pipeline and its default entries, table entries, action-profile members and
groups, counters, meters and the report digest; writes checked and applied as PI does, reads
answered from the stored entities. No gRPC here: :class:`Device` takes and returns protobuf
messages, and :class:`P4Error` carries the canonical code a server answers with.
"""
from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "controller"))

from google.rpc import code_pb2  # noqa: E402

from coflow.dataplane.pb import p4info_pb2 as info  # noqa: E402
from coflow.dataplane.pb import p4runtime_pb2 as pb  # noqa: E402

_PIPELINES: dict = {}   # hash of (P4Info, device config) -> its parsed form, shared by devices
_EMPTY_METER: dict = {}  # (meter id, index) -> an unconfigured meter entry's ReadResponse bytes
_ZERO_COUNTER: dict = {}  # (counter id, index) -> a zero counter entry's ReadResponse bytes


class P4Error(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _canon(data: bytes) -> bytes:
    """P4Runtime's canonical bytestring (no leading zero bytes, at least one byte)."""
    s = data.lstrip(b"\x00")
    return s or b"\x00"


def _one(entity) -> bytes:
    """A serialised ReadResponse holding one entity (joined, they make one response)."""
    r = pb.ReadResponse()
    r.entities.add().CopyFrom(entity)
    return r.SerializeToString()


def _report_ids(p4info):
    """The ids the report digest's emulation needs (p4src report.p4), None without it."""
    dig = [d for d in p4info.digests if d.type_spec.struct.name == "report_digest_t"]
    tables = {t.preamble.name: t for t in p4info.tables}
    counters = {c.preamble.name: c.preamble.id for c in p4info.counters}
    step, slot = tables.get("CoflowIngress.report.report_step"), tables.get(
        "CoflowIngress.coflow_counter.coflow_slot")
    if not dig or step is None or slot is None:
        return None
    f = {m.name: m.id for m in slot.match_fields}
    return {"digest": dig[0].preamble.id, "step_table": step.preamble.id,
            "step_field": step.match_fields[0].id, "slot_table": slot.preamble.id,
            "ext_field": f["external_id"], "int_field": f["internal_id"],
            "counter": counters.get("CoflowIngress.coflow_counter.coflow_bytes")}


def _defaults(p4info, device_config: bytes) -> dict:
    """Each table's initial default action (one ReadResponse's bytes), from the BMv2 JSON (by
    name, as P4Info's)."""
    out: dict = {}
    try:
        js = json.loads(device_config)
    except (ValueError, UnicodeDecodeError):
        return out
    act_by_name = {a.preamble.name: a for a in p4info.actions}
    json_actions = {a["id"]: a for a in js.get("actions", [])}
    tid_by_name = {t.preamble.name: t.preamble.id for t in p4info.tables}
    for pipe in js.get("pipelines", []):
        for t in pipe.get("tables", []):
            tid = tid_by_name.get(t.get("name"))
            d = t.get("default_entry")
            if tid is None or not d:
                continue
            ja = json_actions.get(d.get("action_id"))
            if ja is None or ja["name"] not in act_by_name:
                continue
            a = act_by_name[ja["name"]]
            ent = pb.Entity()
            te = ent.table_entry
            te.table_id = tid
            te.is_default_action = True
            te.action.action.action_id = a.preamble.id
            for prm, val in zip(a.params, d.get("action_data", [])):
                ap = te.action.action.params.add()
                ap.param_id = prm.id
                ap.value = _canon(int(val, 16).to_bytes((prm.bitwidth + 7) // 8 or 1, "big"))
            out[tid] = _one(ent)
    return out


class Device:
    """One switch's P4Runtime state."""

    def __init__(self, device_id: int):
        self.device_id = device_id
        self.p4info = None
        self.cookie: int | None = None
        self.device_config = b""
        self.streams: dict = {}    # election id (int) -> asyncio.Queue of StreamMessageResponse
        self.primary: int | None = None
        self.writes = 0
        self.reads = 0
        self.subs: list = []        # [queue, ReadRequest, chunks last pushed] per subscription
        self.on_change = None       # fn(device): its counters changed (pushes are due)
        self._report = None         # report digest's ids (set_pipeline), None: no digest
        self._reset_state()

    # pipeline -------------------------------------------------------------------------------
    def _reset_state(self) -> None:
        self.tables: dict = {}     # table id -> {key: (entity bytes as one ReadResponse, ref)}
        self.defaults: dict = {}   # table id -> one ReadResponse's bytes
        self.members: dict = {}    # profile id -> {member id: bytes}
        self.groups: dict = {}     # profile id -> {group id: (bytes, member ids)}
        self.refs: dict = {}       # ("member"|"group", profile, id) -> references
        self.meters: dict = {}     # meter id -> {index: bytes} (configured ones)
        self.counters: dict = {}   # counter id -> {index: bytes} (written ones)
        self.digest_cfg: dict = {}  # digest id -> DigestEntry bytes (configured digests)
        self.digest_lists: dict = {}  # digest id -> list ids sent so far
        self._owner_cache = None    # (coflow_slot rows object id, len, slot -> (ext, int))

    def set_pipeline(self, config) -> None:
        """Install a pipeline; devices given the same one share its parsed form (P4Info
        schema, default actions)."""
        import hashlib
        h = hashlib.sha256(config.p4info.SerializeToString(deterministic=True))
        h.update(config.p4_device_config)
        key = h.digest()
        shared = _PIPELINES.get(key)
        if shared is None:
            p = info.P4Info()
            p.CopyFrom(config.p4info)
            schema = {
                "tables": {t.preamble.id: t for t in p.tables},
                "actions": {a.preamble.id: a for a in p.actions},
                "profiles": {a.preamble.id: a for a in p.action_profiles},
                "meters": {m.preamble.id: m for m in p.meters},
                "counters": {c.preamble.id: c for c in p.counters},
            }
            fields = {tid: {mf.id: mf for mf in t.match_fields} for tid, t in schema["tables"].items()}
            acts = {tid: {r.id for r in t.action_refs} for tid, t in schema["tables"].items()}
            shared = _PIPELINES[key] = (p, schema, fields, acts, _defaults(p, config.p4_device_config),
                                        bytes(config.p4_device_config))
        self.p4info, self.schema, self._fields, self._table_actions, defaults, self.device_config = shared
        self.cookie = config.cookie.cookie if config.HasField("cookie") else None
        self._report = _report_ids(self.p4info)
        self._reset_state()
        self.defaults = dict(defaults)
        self.changed()

    # write ----------------------------------------------------------------------------------
    def write(self, req) -> list:
        """Apply the updates in order; returns one (code, message) per update."""
        if self.p4info is None:
            raise P4Error(code_pb2.FAILED_PRECONDITION, "no forwarding pipeline config")
        out = []
        for u in req.updates:
            try:
                self._update(u.type, u.entity)
                out.append((code_pb2.OK, ""))
            except P4Error as e:
                out.append((e.code, str(e)))
        self.writes += 1
        return out

    def _update(self, typ, ent) -> None:
        kind = ent.WhichOneof("entity")
        if kind == "table_entry":
            self._table_write(typ, ent)
        elif kind == "action_profile_member":
            self._member_write(typ, ent)
        elif kind == "action_profile_group":
            self._group_write(typ, ent)
        elif kind == "meter_entry":
            self._meter_write(typ, ent)
        elif kind == "counter_entry":
            self._counter_write(typ, ent)
        elif kind == "digest_entry":
            self._digest_write(typ, ent)
        else:
            raise P4Error(code_pb2.UNIMPLEMENTED, f"{kind} writes are not supported")

    def _check_action(self, action, table_id: int | None = None) -> None:
        a = self.schema["actions"].get(action.action_id)
        if a is None:
            raise P4Error(code_pb2.INVALID_ARGUMENT, f"unknown action id {action.action_id}")
        if table_id is not None and action.action_id not in self._table_actions[table_id]:
            raise P4Error(code_pb2.INVALID_ARGUMENT, f"action {a.preamble.name} not in table {table_id}")
        want = {p.id: p.bitwidth for p in a.params}
        got = [p.param_id for p in action.params]
        if sorted(got) != sorted(want):
            raise P4Error(code_pb2.INVALID_ARGUMENT, f"action {a.preamble.name}: params {got}")
        for p in action.params:
            if int.from_bytes(p.value, "big") >> want[p.param_id]:
                raise P4Error(code_pb2.INVALID_ARGUMENT, f"action {a.preamble.name}: value too wide")

    def _table_key(self, te) -> tuple:
        fields = self._fields[te.table_id]
        ms = []
        for fm in te.match:
            mf = fields.get(fm.field_id)
            if mf is None:
                raise P4Error(code_pb2.INVALID_ARGUMENT, f"unknown match field {fm.field_id}")
            ms.append(fm.SerializeToString(deterministic=True))
        for mf in fields.values():
            if mf.match_type == info.MatchField.EXACT and not any(fm.field_id == mf.id for fm in te.match):
                raise P4Error(code_pb2.INVALID_ARGUMENT, f"missing exact match field {mf.name}")
        return tuple(sorted(ms)), te.priority

    def _table_write(self, typ, ent) -> None:
        te = ent.table_entry
        t = self.schema["tables"].get(te.table_id)
        if t is None:
            raise P4Error(code_pb2.NOT_FOUND, f"unknown table id {te.table_id}")
        if te.is_default_action:
            if typ != pb.Update.MODIFY:
                raise P4Error(code_pb2.INVALID_ARGUMENT, "a default entry can only be modified")
            self._check_action(te.action.action, te.table_id)
            self.defaults[te.table_id] = _one(ent)
            return
        rows = self.tables.setdefault(te.table_id, {})
        key = self._table_key(te)
        old = rows.get(key)
        if typ == pb.Update.DELETE:
            if old is None:
                raise P4Error(code_pb2.NOT_FOUND, "entry not found")
            self._unref(old[1])
            del rows[key]
            if self._report is not None and te.table_id == self._report["slot_table"]:
                self._report_version += 1
            return
        if typ == pb.Update.INSERT and old is not None:
            raise P4Error(code_pb2.ALREADY_EXISTS, "entry already exists")
        if typ == pb.Update.MODIFY and old is None:
            raise P4Error(code_pb2.NOT_FOUND, "entry not found")
        if typ == pb.Update.INSERT and len(rows) >= t.size > 0:
            raise P4Error(code_pb2.RESOURCE_EXHAUSTED, f"table {t.preamble.name} is full")
        which = te.action.WhichOneof("type")
        ref = None
        if which == "action":
            self._check_action(te.action.action, te.table_id)
        elif which in ("action_profile_member_id", "action_profile_group_id"):
            prof = t.implementation_id
            if which == "action_profile_member_id":
                ref = ("member", prof, te.action.action_profile_member_id)
                if ref[2] not in self.members.get(prof, {}):
                    raise P4Error(code_pb2.NOT_FOUND, f"member {ref[2]} does not exist")
            else:
                ref = ("group", prof, te.action.action_profile_group_id)
                if ref[2] not in self.groups.get(prof, {}):
                    raise P4Error(code_pb2.NOT_FOUND, f"group {ref[2]} does not exist")
        else:
            raise P4Error(code_pb2.INVALID_ARGUMENT, "entry without an action")
        if old is not None:
            self._unref(old[1])
        if ref is not None:
            self.refs[ref] = self.refs.get(ref, 0) + 1
        rows[key] = (_one(ent), ref)
        if self._report is not None and te.table_id == self._report["slot_table"]:
            self._report_version += 1

    def _unref(self, ref) -> None:
        if ref is not None:
            self.refs[ref] -= 1
            if not self.refs[ref]:
                del self.refs[ref]

    def _profile(self, pid: int):
        if pid not in self.schema["profiles"]:
            raise P4Error(code_pb2.NOT_FOUND, f"unknown action profile id {pid}")

    def _member_write(self, typ, ent) -> None:
        m = ent.action_profile_member
        self._profile(m.action_profile_id)
        rows = self.members.setdefault(m.action_profile_id, {})
        have = m.member_id in rows
        if typ == pb.Update.DELETE:
            if not have:
                raise P4Error(code_pb2.NOT_FOUND, f"member {m.member_id} not found")
            if self.refs.get(("member", m.action_profile_id, m.member_id)):
                raise P4Error(code_pb2.FAILED_PRECONDITION, f"member {m.member_id} is in use")
            del rows[m.member_id]
            return
        if typ == pb.Update.INSERT and have:
            raise P4Error(code_pb2.ALREADY_EXISTS, f"member {m.member_id} already exists")
        if typ == pb.Update.MODIFY and not have:
            raise P4Error(code_pb2.NOT_FOUND, f"member {m.member_id} not found")
        self._check_action(m.action)
        rows[m.member_id] = _one(ent)

    def _group_write(self, typ, ent) -> None:
        g = ent.action_profile_group
        self._profile(g.action_profile_id)
        prof = g.action_profile_id
        rows = self.groups.setdefault(prof, {})
        old = rows.get(g.group_id)
        if typ == pb.Update.DELETE:
            if old is None:
                raise P4Error(code_pb2.NOT_FOUND, f"group {g.group_id} not found")
            if self.refs.get(("group", prof, g.group_id)):
                raise P4Error(code_pb2.FAILED_PRECONDITION, f"group {g.group_id} is in use")
            for mid in old[1]:
                self._unref(("member", prof, mid))
            del rows[g.group_id]
            return
        if typ == pb.Update.INSERT and old is not None:
            raise P4Error(code_pb2.ALREADY_EXISTS, f"group {g.group_id} already exists")
        if typ == pb.Update.MODIFY and old is None:
            raise P4Error(code_pb2.NOT_FOUND, f"group {g.group_id} not found")
        mids = [mm.member_id for mm in g.members]
        have = self.members.get(prof, {})
        missing = [m for m in mids if m not in have]
        if missing and typ == pb.Update.INSERT:
            # as PI: the group is created, its members added in order up to the first one
            # that does not exist, and the update fails
            part = mids[:mids.index(missing[0])]
            e = pb.Entity()
            e.CopyFrom(ent)
            del e.action_profile_group.members[len(part):]
            for mid in part:
                r = ("member", prof, mid)
                self.refs[r] = self.refs.get(r, 0) + 1
            rows[g.group_id] = (_one(e), tuple(part))
        if missing:
            raise P4Error(code_pb2.NOT_FOUND, f"member {missing[0]} of group {g.group_id} does not exist")
        if old is not None:
            for mid in old[1]:
                self._unref(("member", prof, mid))
        for mid in mids:
            r = ("member", prof, mid)
            self.refs[r] = self.refs.get(r, 0) + 1
        rows[g.group_id] = (_one(ent), tuple(mids))

    def _indexed(self, kind: str, ident: int, index: int):
        obj = self.schema[kind].get(ident)
        if obj is None:
            raise P4Error(code_pb2.NOT_FOUND, f"unknown {kind[:-1]} id {ident}")
        if not 0 <= index < obj.size:
            raise P4Error(code_pb2.OUT_OF_RANGE, f"index {index} out of range for {obj.preamble.name}")
        return obj

    def _meter_write(self, typ, ent) -> None:
        me = ent.meter_entry
        if typ != pb.Update.MODIFY:
            raise P4Error(code_pb2.INVALID_ARGUMENT, "meter entries can only be modified")
        self._indexed("meters", me.meter_id, me.index.index)
        rows = self.meters.setdefault(me.meter_id, {})
        if me.HasField("config"):
            rows[me.index.index] = _one(ent)
        else:
            rows.pop(me.index.index, None)

    def _digest_write(self, typ, ent) -> None:
        d = ent.digest_entry
        if self._report is None or d.digest_id != self._report["digest"]:
            raise P4Error(code_pb2.NOT_FOUND, f"{d.digest_id} is not a valid digest id")
        have = d.digest_id in self.digest_cfg
        if typ == pb.Update.INSERT and have:
            raise P4Error(code_pb2.ALREADY_EXISTS, f"Digest {d.digest_id} already configured")
        if typ != pb.Update.INSERT and not have:
            raise P4Error(code_pb2.NOT_FOUND, f"Digest {d.digest_id} not configured")
        if typ == pb.Update.DELETE:
            del self.digest_cfg[d.digest_id]
        else:
            self.digest_cfg[d.digest_id] = d.SerializeToString()

    def _count_before(self, counter_id: int, index: int) -> int:
        old = self.counters.get(counter_id, {}).get(index)
        if old is None:
            return 0
        return pb.ReadResponse.FromString(old).entities[0].counter_entry.data.byte_count

    def _slot_owner(self, slot: int):
        """(external, internal) of the coflow_slot entry that gives ``slot``, or None."""
        rows = self.tables.get(self._report["slot_table"], {})
        c = self._owner_cache
        if c is None or c[0] is not rows or c[1] != self._report_version:
            own = {}
            for ent_bytes, _ in rows.values():
                te = pb.ReadResponse.FromString(ent_bytes).entities[0].table_entry
                m = {f.field_id: int.from_bytes(f.exact.value, "big") for f in te.match}
                s_ = int.from_bytes(te.action.action.params[0].value, "big")
                own[s_] = (m.get(self._report["ext_field"], 0), m.get(self._report["int_field"], 0))
            c = self._owner_cache = (rows, self._report_version, own)
        return c[2].get(slot)

    _report_version = 0

    def _report_crossing(self, counter_id: int, index: int, before: int, after: int) -> None:
        """report.p4 on a counter write: a digest when the count crosses a step multiple."""
        r = self._report
        if r is None or counter_id != r["counter"] or r["digest"] not in self.digest_cfg:
            return
        fm = pb.FieldMatch(field_id=r["step_field"])
        fm.exact.value = _canon(index.to_bytes(4, "big"))
        row = self.tables.get(r["step_table"], {}).get(((fm.SerializeToString(deterministic=True),), 0))
        if row is None:
            return
        te = pb.ReadResponse.FromString(row[0]).entities[0].table_entry
        mask = int.from_bytes(te.action.action.params[0].value, "big")
        if not (before ^ after) & mask:
            return
        own = self._slot_owner(index)
        if own is None or self.primary is None or self.primary not in self.streams:
            return
        n = self.digest_lists.get(r["digest"], 0) + 1
        self.digest_lists[r["digest"]] = n
        resp = pb.StreamMessageResponse()
        dl = resp.digest
        dl.digest_id = r["digest"]
        dl.list_id = n
        dl.timestamp = time.time_ns()
        st = dl.data.add().struct
        for v in (index, own[0], own[1], after):
            st.members.add().bitstring = _canon(int(v).to_bytes(8, "big"))
        self.streams[self.primary].put_nowait(resp)

    def _counter_write(self, typ, ent) -> None:
        ce = ent.counter_entry
        if typ != pb.Update.MODIFY:
            raise P4Error(code_pb2.INVALID_ARGUMENT, "counter entries can only be modified")
        if not ce.HasField("index"):
            raise P4Error(code_pb2.UNIMPLEMENTED, "wildcard counter writes are not supported")
        self._indexed("counters", ce.counter_id, ce.index.index)
        if self._report is not None and self.digest_cfg:
            self._report_crossing(ce.counter_id, ce.index.index,
                                  self._count_before(ce.counter_id, ce.index.index),
                                  ce.data.byte_count)
        e = pb.Entity()
        c = e.counter_entry
        c.counter_id = ce.counter_id
        c.index.index = ce.index.index
        c.data.byte_count = ce.data.byte_count
        c.data.packet_count = ce.data.packet_count
        self.counters.setdefault(ce.counter_id, {})[ce.index.index] = _one(e)
        self.changed()

    def changed(self) -> None:
        if self.subs and self.on_change is not None:
            self.on_change(self)

    def bump_counter(self, counter_id: int, index: int, nbytes: int, npackets: int) -> None:
        """What traffic would do: add to one counter (the benchmark's data plane)."""
        e = pb.Entity()
        old = self.counters.get(counter_id, {}).get(index)
        if old is not None:
            got = pb.ReadResponse.FromString(old).entities[0].counter_entry.data
            nbytes += got.byte_count
            npackets += got.packet_count
        c = e.counter_entry
        c.counter_id = counter_id
        c.index.index = index
        c.data.byte_count = nbytes
        c.data.packet_count = npackets
        if self._report is not None and self.digest_cfg:
            self._report_crossing(counter_id, index, self._count_before(counter_id, index), nbytes)
        self.counters.setdefault(counter_id, {})[index] = _one(e)
        self.changed()

    # read -----------------------------------------------------------------------------------
    @staticmethod
    def _empty_meter_bytes(mid: int, i: int) -> bytes:
        got = _EMPTY_METER.get((mid, i))
        if got is None:
            e = pb.Entity()
            e.meter_entry.meter_id = mid
            e.meter_entry.index.index = i
            got = _EMPTY_METER[(mid, i)] = _one(e)
        return got

    @staticmethod
    def _zero_counter_bytes(cid: int, i: int) -> bytes:
        got = _ZERO_COUNTER.get((cid, i))
        if got is None:
            e = pb.Entity()
            c = e.counter_entry
            c.counter_id = cid
            c.index.index = i
            c.data.SetInParent()
            got = _ZERO_COUNTER[(cid, i)] = _one(e)
        return got

    def read(self, req) -> bytes:
        """The serialised ReadResponse of every entity asked for."""
        self.reads += 1
        return b"".join(self.read_chunks(req))

    def read_chunks(self, req) -> list:
        """One serialised single-entity ReadResponse per entity read."""
        if self.p4info is None:
            raise P4Error(code_pb2.FAILED_PRECONDITION, "no forwarding pipeline config")
        out: list = []
        for ent in req.entities:
            kind = ent.WhichOneof("entity")
            if kind == "counter_entry":
                ce = ent.counter_entry
                cid = ce.counter_id
                rows = self.counters.get(cid, {})
                if ce.HasField("index"):
                    self._indexed("counters", cid, ce.index.index)
                    i = ce.index.index
                    out.append(rows.get(i) or self._zero_counter_bytes(cid, i))
                else:
                    if cid not in self.schema["counters"]:
                        raise P4Error(code_pb2.NOT_FOUND, f"unknown counter id {cid}")
                    out += [rows.get(i) or self._zero_counter_bytes(cid, i)
                            for i in range(self.schema["counters"][cid].size)]
            elif kind == "meter_entry":
                me = ent.meter_entry
                mid = me.meter_id
                rows = self.meters.get(mid, {})
                if me.HasField("index"):
                    self._indexed("meters", mid, me.index.index)
                    i = me.index.index
                    out.append(rows.get(i) or self._empty_meter_bytes(mid, i))
                else:
                    if mid not in self.schema["meters"]:
                        raise P4Error(code_pb2.NOT_FOUND, f"unknown meter id {mid}")
                    out += [rows.get(i) or self._empty_meter_bytes(mid, i)
                            for i in range(self.schema["meters"][mid].size)]
            elif kind == "table_entry":
                te = ent.table_entry
                if te.table_id not in self.schema["tables"]:
                    raise P4Error(code_pb2.NOT_FOUND, f"unknown table id {te.table_id}")
                if te.is_default_action:
                    d = self.defaults.get(te.table_id)
                    if d is not None:
                        out.append(d)
                    continue
                rows = self.tables.get(te.table_id, {})
                if len(te.match):
                    got = rows.get(self._table_key(te))
                    if got is not None:
                        out.append(got[0])
                else:
                    out += [v[0] for v in rows.values()]
            elif kind == "action_profile_member":
                m = ent.action_profile_member
                self._profile(m.action_profile_id)
                rows = self.members.get(m.action_profile_id, {})
                if m.member_id:
                    if m.member_id in rows:
                        out.append(rows[m.member_id])
                else:
                    out += list(rows.values())
            elif kind == "action_profile_group":
                g = ent.action_profile_group
                self._profile(g.action_profile_id)
                rows = self.groups.get(g.action_profile_id, {})
                if g.group_id:
                    if g.group_id in rows:
                        out.append(rows[g.group_id][0])
                else:
                    out += [v[0] for v in rows.values()]
            else:
                raise P4Error(code_pb2.UNIMPLEMENTED, f"{kind} reads are not supported")
        return out

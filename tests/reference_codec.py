"""Test oracle for the controller's P4Runtime encoder: :meth:`coflow.ctl.codec.Codec.encode_into`
as it was before its fast paths (issue 29: one generic pass per entity, every value through
:func:`~coflow.dataplane.p4rt.encode_value`). The property test and bench-scale's codec
micro-benchmark check that the codec writes the same bytes. It lives here, not in the package,
so that the controller encodes every entity one way."""
from __future__ import annotations

from coflow.ctl import model as M
from coflow.dataplane.p4rt import encode_value


def _action(codec, msg, action: str, params) -> None:
    msg.action_id = codec.action_id[action]
    pinfo = codec.aparams[action]
    for name, value in params:
        pid, bw = pinfo[name]
        p = msg.params.add()
        p.param_id = pid
        p.value = encode_value(value, bw)


def _match(codec, te, table: str, match) -> None:
    mt_ = codec._mt
    want = dict(match)
    for name, fid, bw, mt in codec.fields[table]:
        if name not in want:
            continue
        v = want[name]
        if mt == mt_.EXACT:
            fm = te.match.add()
            fm.field_id = fid
            fm.exact.value = encode_value(v, bw)
        elif mt == mt_.LPM:
            if v[1] == 0:
                continue
            fm = te.match.add()
            fm.field_id = fid
            fm.lpm.value = encode_value(v[0], bw)
            fm.lpm.prefix_len = v[1]
        elif mt == mt_.RANGE:
            if v[0] == 0 and v[1] == (1 << bw) - 1:
                continue
            fm = te.match.add()
            fm.field_id = fid
            fm.range.low = encode_value(v[0], bw)
            fm.range.high = encode_value(v[1], bw)
        elif mt == mt_.TERNARY:
            if v[1] == 0:
                continue
            fm = te.match.add()
            fm.field_id = fid
            fm.ternary.value = encode_value(v[0], bw)
            fm.ternary.mask = encode_value(v[1], bw)
        elif mt == mt_.OPTIONAL:
            if v is None:
                continue
            fm = te.match.add()
            fm.field_id = fid
            fm.optional.value = encode_value(v, bw)
        else:  # pragma: no cover
            raise ValueError(f"{table}.{name}: unsupported match type {mt}")
    unknown = set(want) - {f[0] for f in codec.fields[table]}
    if unknown:
        raise KeyError(f"table {table} has no match field(s) {sorted(unknown)}")


def encode_into_reference(codec, ent, e, key_only: bool = False) -> None:
    """The generic encoder, step by step (the fast one's oracle)."""
    if isinstance(e, M.TableEntry):
        te = ent.table_entry
        te.table_id = codec.table_id[e.table]
        _match(codec, te, e.table, e.match)
        if e.priority:
            te.priority = e.priority
        if not key_only:
            if e.action is not None:
                _action(codec, te.action.action, e.action, e.params)
            elif e.member_id is not None:
                te.action.action_profile_member_id = e.member_id
            elif e.group_id is not None:
                te.action.action_profile_group_id = e.group_id
    elif isinstance(e, M.DefaultAction):
        te = ent.table_entry
        te.table_id = codec.table_id[e.table]
        te.is_default_action = True
        if not key_only:
            _action(codec, te.action.action, e.action, e.params)
    elif isinstance(e, M.Member):
        m = ent.action_profile_member
        m.action_profile_id = codec.profile_id[e.profile]
        m.member_id = e.member_id
        if not key_only:
            _action(codec, m.action, e.action, e.params)
    elif isinstance(e, M.Group):
        g = ent.action_profile_group
        g.action_profile_id = codec.profile_id[e.profile]
        g.group_id = e.group_id
        if not key_only:
            for mid in e.members:
                mm = g.members.add()
                mm.member_id = mid
                mm.weight = 1
            if e.max_size:
                g.max_size = e.max_size
    elif isinstance(e, M.MeterConfig):
        me = ent.meter_entry
        me.meter_id = codec.meter_id[e.meter]
        me.index.index = e.index
        if not key_only:
            me.config.cir = e.cir
            me.config.cburst = e.cburst
            me.config.pir = e.pir
            me.config.pburst = e.pburst
    elif isinstance(e, M.CounterReset):
        ce = ent.counter_entry
        ce.counter_id = codec.counter_id[e.counter]
        ce.index.index = e.index
        ce.data.byte_count = 0
        ce.data.packet_count = 0
    else:
        raise TypeError(f"cannot encode {e!r}")


def add_updates_reference(codec, req, ops) -> None:
    """:meth:`coflow.ctl.codec.Codec.add_updates` on the reference encoder."""
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    U = pb.Update
    for op in ops:
        e = op.entity
        u = req.updates.add()
        if op.type == "DELETE":
            u.type = U.MODIFY if type(e) is M.MeterConfig else U.DELETE
            encode_into_reference(codec, u.entity, e, True)
        else:
            u.type = getattr(U, op.type)
            encode_into_reference(codec, u.entity, e)

"""Desired-state model: the diff (what to write, in which order) and the codec round trip."""
import os

import pytest

from coflow.ctl import model as M
from coflow.ctl import translate as TR

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")


def member(mid, port):
    return M.Member(M.P_ECMP, mid, M.A_NEXT_HOP, M.params(port=port, smac=1, dmac=2))


def route(ip, **kw):
    return M.TableEntry(M.T_ROUTING, (("ipv4_dst", (ip, 32)),), **kw)


def override(ext, prio):
    return TR.override_entity((ext, 0), prio)


def test_no_difference_no_writes():
    st = M.SwitchState.of([member(1, 1), route(5, member_id=1), override(7, 3)])
    assert M.diff(st, st.copy()) == []


def test_insert_order_members_groups_entries():
    want = M.SwitchState.of([route(9, group_id=1), override(7, 3),
                             M.Group(M.P_ECMP, 1, (1, 2), 2), member(2, 2), member(1, 1)])
    ops = M.diff(want, M.SwitchState())
    kinds = [op.entity.key[0] for op in ops]
    assert kinds == ["member", "member", "group", "table", "table"]
    assert all(op.type == "INSERT" for op in ops)


def test_delete_order_entries_groups_members():
    have = M.SwitchState.of([member(1, 1), member(2, 2), M.Group(M.P_ECMP, 1, (1, 2), 2),
                             route(9, group_id=1)])
    ops = M.diff(M.SwitchState(), have)
    assert [(op.type, op.entity.key[0]) for op in ops] == [
        ("DELETE", "table"), ("DELETE", "group"), ("DELETE", "member"), ("DELETE", "member")]


def test_ecmp_regroup_inserts_before_modify_before_deletes():
    """Route moves from member 1 to a new group {2,3}: new members, the group, the route
    MODIFY, and only then the old member's DELETE."""
    have = M.SwitchState.of([member(1, 1), route(9, member_id=1)])
    want = M.SwitchState.of([member(2, 2), member(3, 3), M.Group(M.P_ECMP, 1, (2, 3), 2),
                             route(9, group_id=1)])
    ops = [(op.type, op.entity.key[0]) for op in M.diff(want, have)]
    assert ops == [("INSERT", "member"), ("INSERT", "member"), ("INSERT", "group"),
                   ("MODIFY", "table"), ("DELETE", "member")]


def test_modify_changed_action_and_default_always_modify():
    have = M.SwitchState.of([override(7, 3)])
    want = M.SwitchState.of([override(7, 2), TR.config_entity("dclas")])
    ops = M.diff(want, have)
    assert [(o.type, o.entity.key[0]) for o in ops] == [("MODIFY", "table"), ("MODIFY", "default")]


def test_unmanaged_tables_and_defaults_left_alone():
    foreign = M.TableEntry("Some.other_table", (("x", 1),), "a", ())
    have = M.SwitchState.of([foreign, TR.config_entity("fair")])
    assert M.diff(M.SwitchState(), have) == []


def test_meters_modify_and_reset():
    s = TR.CtlSettings()
    m1, m2 = TR.meter_config(8, 1e5, s), TR.meter_config(9, 2e5, s)
    ops = M.diff(M.SwitchState.of([m1]), M.SwitchState.of([m2]))
    assert [(o.type, o.entity.key) for o in ops] == [("MODIFY", m1.key), ("DELETE", m2.key)]


def test_slot_insert_and_reassign_reset_counter_first():
    slot = lambda ext, s: TR.slot_entities({(ext, 0): s})[0]
    ops = M.diff(M.SwitchState.of([slot(1, 5)]), M.SwitchState())
    assert [(o.type, type(o.entity).__name__) for o in ops] == [("MODIFY", "CounterReset"),
                                                                ("INSERT", "TableEntry")]
    assert ops[0].entity.index == 5
    ops = M.diff(M.SwitchState.of([slot(1, 6)]), M.SwitchState.of([slot(1, 5)]))
    assert ops[0].entity == M.CounterReset(M.C_COFLOW_BYTES, 6) and ops[1].type == "MODIFY"
    # unchanged slot: no reset
    assert M.diff(M.SwitchState.of([slot(1, 5)]), M.SwitchState.of([slot(1, 5)])) == []


def test_a_full_table_makes_room_first_departures_deleted_before_arrivals():
    """The slot table full (every slot in use): a round in which one coflow leaves and one
    arrives on its freed slot deletes the departed entry before inserting the new one (BMv2
    answers RESOURCE_EXHAUSTED to an insert into a full table, failing the whole Write); a
    table entry's DELETE goes before every insert, a member's or group's after them (entries
    reference them). Checked on a table of the state's size: it never overflows."""
    slot = lambda ext, s: TR.slot_entities({(ext, 0): s})[0]   # noqa: E731
    size = 4
    have = M.SwitchState.of([slot(e, e) for e in range(size)] + [member(1, 1), route(9, member_id=1)])
    want = M.SwitchState.of([slot(e, e) for e in range(1, size)] + [slot(size, 0)] +
                            [member(2, 2), route(9, member_id=2)])
    ops = M.diff(want, have)
    assert [(o.type, o.entity.key[0]) for o in ops] == [
        ("DELETE", "table"), ("INSERT", "member"), ("MODIFY", "counter"), ("INSERT", "table"),
        ("MODIFY", "table"), ("DELETE", "member")]
    held = {k for k in have.entities if k[0] == "table" and k[1] == M.T_SLOT}
    for op in ops:
        k = op.entity.key
        if k[0] == "table" and k[1] == M.T_SLOT:
            (held.discard if op.type == "DELETE" else held.add)(k)
            assert len(held) <= size, op
    assert M.apply_ops(have, ops).entities == want.entities


def test_apply_ops_reaches_desired():
    have = M.SwitchState.of([member(1, 1), route(9, member_id=1), override(3, 1)])
    want = M.SwitchState.of([member(2, 2), route(9, member_id=2), override(4, 6),
                             TR.config_entity("sebf")])
    after = M.apply_ops(have, M.diff(want, have))
    assert after.entities == want.entities
    assert M.diff(want, after) == []


def test_conflicting_desired_entities_rejected():
    with pytest.raises(ValueError, match="conflicting"):
        M.SwitchState.of([override(7, 3), override(7, 2)])


# codec -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def codec():
    if not os.path.exists(P4INFO):
        pytest.skip(f"{P4INFO} missing: run `make p4` (needs p4c)")
    from coflow.ctl.codec import Codec
    return Codec.from_file(P4INFO)


def test_names_exist_in_p4info(codec):
    for t in M.MANAGED_TABLES + M.DEFAULT_TABLES:
        assert t in codec.table_id
    for a in (M.A_SET_ROLE, M.A_SET_CONFIG, M.A_NEXT_HOP, M.A_SET_SLOT, M.A_DCLAS_QUEUE,
              M.A_OVERRIDE_QUEUE, M.A_SET_METER):
        assert a in codec.action_id
    assert M.P_ECMP in codec.profile_id and M.M_FLOW in codec.meter_id
    for c in (M.C_COFLOW_BYTES, M.C_COLLISIONS, M.C_RED_DROPS, M.C_DROP_REASONS, M.C_QUEUE_DROP):
        assert c in codec.counter_id


def test_flow_bytes_counter_is_per_meter_in_p4info():
    """flow_bytes (issue 20): one packets-and-bytes entry per flow meter, as the meter array and
    meter_red_drops, so the pool's index addresses all three."""
    if not os.path.exists(P4INFO):
        pytest.skip(f"{P4INFO} missing: run `make p4` (needs p4c)")
    from coflow.dataplane.constants import FLOW_METERS
    from coflow.dataplane.p4rt import P4InfoHelper
    from coflow.dataplane.pb import p4info_pb2
    h = P4InfoHelper.from_file(P4INFO)
    fb, red = h.get("counters", M.C_FLOW_BYTES), h.get("counters", M.C_RED_DROPS)
    meter = h.get("meters", M.M_FLOW)
    assert fb.size == red.size == meter.size == FLOW_METERS
    assert fb.spec.unit == p4info_pb2.CounterSpec.BOTH


def test_diff_zeroes_flow_bytes_before_a_flow_meter_entry():
    """A pool index handed to a new flow starts at 0: the diff resets flow_bytes[index] right
    before inserting (or re-pointing) the flow_meter entry, not when the entry stays."""
    from coflow import topology as T
    ctx = TR.MeterContext(T.bigswitch(4))
    e = ctx.flow_meter((1, 0), 0, 1, 5)
    ops = M.diff(M.SwitchState.of([e]), M.SwitchState())
    assert ops == [M.Op("MODIFY", M.CounterReset(M.C_FLOW_BYTES, 5)), M.Op("INSERT", e)]
    moved = e._replace(params=(("index", 6),))
    ops = M.diff(M.SwitchState.of([moved]), M.SwitchState.of([e]))
    assert ops == [M.Op("MODIFY", M.CounterReset(M.C_FLOW_BYTES, 6)), M.Op("MODIFY", moved)]
    assert M.diff(M.SwitchState.of([e]), M.SwitchState.of([e])) == []


def test_codec_round_trip(codec):
    from coflow import topology as T
    from coflow.params import DclasParams
    t = T.fattree(4)
    st = TR.static_state(t, T.routes(t), "dclas", DclasParams(K=8))
    ents = st["e0"] + st["a0"] + TR.slot_entities({(7, 1): 3}) + [override(9, 2)]
    ents += [TR.meter_config(17, 125000.0, TR.CtlSettings())]
    fm = TR.meter_entities(t, [((7, 1), "h0", "h5", 1e5)], {(7, 1): 3}, TR.CtlSettings())
    ents += fm["e0"]
    seen = set()
    for e in ents:
        if e.key in seen:
            continue
        seen.add(e.key)
        assert codec.decode(codec.encode(e)) == e, e


def test_codec_omits_dont_care_range(codec):
    last = TR.dclas_entities(__import__("coflow.params", fromlist=["x"]).DclasParams(K=8))[-1]
    ent = codec.encode(last)
    assert len(ent.table_entry.match) == 1  # lo > 0: kept
    full = M.TableEntry(M.T_DCLAS, (("bytes", (0, (1 << 64) - 1)),), M.A_DCLAS_QUEUE,
                        M.params(prio=0), priority=1)
    ent = codec.encode(full)
    assert len(ent.table_entry.match) == 0
    assert codec.decode(ent) == full


def test_meter_delete_is_reset(codec):
    m = TR.meter_config(3, 1000, TR.CtlSettings())
    typ, ent = codec.encode_op(M.Op("DELETE", m))
    assert typ == "MODIFY" and not ent.meter_entry.HasField("config")
    assert codec.decode(ent) is None

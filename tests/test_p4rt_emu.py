"""bench/p4rt_emu.py, the emulated P4Runtime switch of `make bench-scale`: PI's semantics for the
entities the controller uses, checked by hand on a small P4Info built here (no P4 toolchain);
the write ordering of the controller's diff (members, groups, entries; deletes in reverse)
is what the emulator, like BMv2, requires. The comparison with BMv2 itself is in
tests/test_p4rt_emu_live.py."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from google.protobuf import text_format  # noqa: E402

from coflow.ctl import model as M  # noqa: E402
from coflow.ctl.codec import Codec  # noqa: E402
from coflow.dataplane.p4rt import P4InfoHelper, P4RuntimeClient, P4RuntimeError  # noqa: E402
from coflow.dataplane.pb import p4info_pb2 as info  # noqa: E402

T_EXACT, T_ROUTE, PROFILE = "Ing.t_exact", "Ing.t_route", "Ing.prof"
A_SET, A_HOP = "Ing.set_x", "Ing.hop"
CTR, MTR = "Ing.ctr", "Ing.mtr"
MANAGED = (T_EXACT, T_ROUTE)


def small_p4info():
    p = info.P4Info()

    def action(aid, name, params):
        a = p.actions.add()
        a.preamble.id, a.preamble.name, a.preamble.alias = aid, name, name.split(".")[-1]
        for i, (n, bw) in enumerate(params):
            pr = a.params.add()
            pr.id, pr.name, pr.bitwidth = i + 1, n, bw
    action(16000001, A_SET, [("x", 8)])
    action(16000002, A_HOP, [("port", 9)])
    t = p.tables.add()
    t.preamble.id, t.preamble.name, t.preamble.alias, t.size = 33000001, T_EXACT, "t_exact", 4
    mf = t.match_fields.add()
    mf.id, mf.name, mf.bitwidth, mf.match_type = 1, "k", 8, info.MatchField.EXACT
    t.action_refs.add().id = 16000001
    t = p.tables.add()
    t.preamble.id, t.preamble.name, t.preamble.alias, t.size = 33000002, T_ROUTE, "t_route", 64
    mf = t.match_fields.add()
    mf.id, mf.name, mf.bitwidth, mf.match_type = 1, "dst", 32, info.MatchField.LPM
    t.action_refs.add().id = 16000002
    t.implementation_id = 285000001
    ap = p.action_profiles.add()
    ap.preamble.id, ap.preamble.name, ap.preamble.alias = 285000001, PROFILE, "prof"
    ap.table_ids.append(33000002)
    ap.with_selector, ap.size = True, 16
    c = p.counters.add()
    c.preamble.id, c.preamble.name, c.preamble.alias, c.size = 302000001, CTR, "ctr", 16
    c.spec.unit = 3
    m = p.meters.add()
    m.preamble.id, m.preamble.name, m.preamble.alias, m.size = 335000001, MTR, "mtr", 8
    m.spec.unit = 1
    return p


def bmv2_json():
    """A BMv2 JSON fragment with t_exact's default action: set_x(7)."""
    return json.dumps({"actions": [{"name": A_SET, "id": 3, "runtime_data": [{"name": "x", "bitwidth": 8}]}],
                       "pipelines": [{"tables": [{"name": T_EXACT, "default_entry": {
                           "action_id": 3, "action_const": False, "action_data": ["0x07"]}}]}]})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("emu")
    pi, js = d / "small.p4info.txt", d / "small.json"
    pi.write_text(text_format.MessageToString(small_p4info()))
    js.write_text(bmv2_json())
    return str(pi), str(js)


@pytest.fixture
def emu():
    from p4rt_emu import EmulatorThread
    with EmulatorThread([1, 2]) as e:
        yield e


def client(emu, files, dev=1, eid=10, push=True):
    c = P4RuntimeClient(emu.addresses[dev], dev, eid, P4InfoHelper.from_file(files[0]))
    c.connect(timeout=5, require_master=False)
    if push:
        c.set_pipeline(files[0], files[1], cookie=42)
    return c


def test_arbitration_and_pipeline(emu, files):
    a = client(emu, files, push=False)
    assert a.is_master and a.pipeline_cookie() is None
    with pytest.raises(P4RuntimeError, match="FAILED_PRECONDITION"):
        a.read_table(T_EXACT)
    a.set_pipeline(files[0], files[1], cookie=42)
    assert a.pipeline_cookie() == 42
    b = client(emu, files, eid=5, push=False)
    assert not b.is_master and a.is_master
    with pytest.raises(P4RuntimeError, match="PERMISSION_DENIED"):
        b.insert(b.table_entry(T_EXACT, {"k": 1}, A_SET, {"x": 2}))
    assert b.read_table(T_EXACT) == []            # reads are open to a backup
    a.close()
    import time
    for _ in range(100):                          # the backup is told it is primary now
        if b.is_master:
            break
        time.sleep(0.02)
    assert b.is_master
    b.insert(b.table_entry(T_EXACT, {"k": 1}, A_SET, {"x": 2}))
    b.close()


def test_table_writes_continue_on_error_with_details(emu, files):
    c = client(emu, files)
    e1 = c.table_entry(T_EXACT, {"k": 1}, A_SET, {"x": 1})
    c.insert(e1)
    with pytest.raises(P4RuntimeError) as ei:
        c.write([("INSERT", e1), ("INSERT", c.table_entry(T_EXACT, {"k": 2}, A_SET, {"x": 2})),
                 ("MODIFY", c.table_entry(T_EXACT, {"k": 3}, A_SET, {"x": 3}))])
    d = ei.value.details
    assert len(d) == 2 and "code 6" in d[0] and "update 2: code 5" in d[1]  # ALREADY_EXISTS, NOT_FOUND
    got = sorted((x.table_entry.match[0].exact.value, x.table_entry.action.action.params[0].value)
                 for x in c.read_table(T_EXACT))
    assert got == [(b"\x01", b"\x01"), (b"\x02", b"\x02")]   # the good update in the middle applied
    c.modify(c.table_entry(T_EXACT, {"k": 1}, A_SET, {"x": 9}))
    c.delete(c.table_entry(T_EXACT, {"k": 2}))
    [only] = c.read_table(T_EXACT)
    assert only.table_entry.action.action.params[0].value == b"\x09"
    with pytest.raises(P4RuntimeError, match="code 5"):
        c.delete(c.table_entry(T_EXACT, {"k": 2}))
    # bad input: a clear error per update, nothing lost
    with pytest.raises(P4RuntimeError, match="value too wide|INVALID_ARGUMENT|code 3"):
        c.insert(c.table_entry(T_EXACT, {"k": 5}, A_SET, {"x": 1}))  # fine ...
        bad = c.table_entry(T_EXACT, {"k": 6}, A_SET, {"x": 1})
        bad.table_entry.action.action.params[0].value = b"\x01\x00"   # ... 9 bits for bit<8>
        c.insert(bad)
    c.insert(c.table_entry(T_EXACT, {"k": 7}, A_SET, {"x": 1}))
    c.insert(c.table_entry(T_EXACT, {"k": 8}, A_SET, {"x": 1}))
    with pytest.raises(P4RuntimeError, match="code 8"):   # RESOURCE_EXHAUSTED: size 4
        c.insert(c.table_entry(T_EXACT, {"k": 9}, A_SET, {"x": 1}))
    assert len(c.read_table(T_EXACT)) == 4
    c.close()


def test_default_action_from_the_json_then_modified(emu, files):
    c = client(emu, files)
    tid = c.p4info.table_id(T_EXACT)
    d = c.read_default_entity(tid).table_entry
    assert d.is_default_action and d.action.action.params[0].value == b"\x07"
    c.modify(c.table_entry(T_EXACT, action=A_SET, params={"x": 3}, default=True))
    assert c.read_default_entity(tid).table_entry.action.action.params[0].value == b"\x03"
    c.set_pipeline(files[0], files[1], cookie=43)  # a new pipeline resets everything
    assert c.read_default_entity(tid).table_entry.action.action.params[0].value == b"\x07"
    c.close()


def test_counters_and_meters(emu, files):
    c = client(emu, files)
    assert len(c.read(c.counter_entity(CTR))) == 16
    c.write_counter(CTR, 3, 1500, 1)
    assert c.read_counter(CTR, 3) == (1500, 1) and c.read_counter(CTR, 4) == (0, 0)
    with pytest.raises(P4RuntimeError, match="code 11"):  # OUT_OF_RANGE
        c.write_counter(CTR, 16, 1, 1)
    c.set_meter(MTR, 2, 1000, 100)
    cfg = c.read_meter(MTR, 2)
    assert (cfg.cir, cfg.cburst, cfg.pir, cfg.pburst) == (1000, 100, 1000, 100)
    got = c.read(c.meter_entity(MTR, 0))
    assert len(got) == 1 and not got[0].meter_entry.HasField("config")
    assert len(c.read(_wild_meter(c))) == 8
    c.modify(c.meter_entity(MTR, 2))                    # no config: reset
    assert not c.read(c.meter_entity(MTR, 2))[0].meter_entry.HasField("config")
    with pytest.raises(P4RuntimeError, match="code 3"):  # meters are only modified
        c.insert(c.meter_entity(MTR, 1, 10, 10))
    c.close()


def _wild_meter(c):
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    e = pb.Entity()
    e.meter_entry.meter_id = c.p4info.get_id("meters", MTR)
    return e


def _ops_states():
    """Two states of one switch: routes over members and an ECMP group; then other members."""
    hop = lambda port: M.params(port=port)  # noqa: E731
    a = M.SwitchState.of([
        M.Member(PROFILE, 1, A_HOP, hop(1)), M.Member(PROFILE, 2, A_HOP, hop(2)),
        M.Group(PROFILE, 10, (1, 2)),
        M.TableEntry(T_ROUTE, (("dst", (0x0A000001, 32)),), member_id=1),
        M.TableEntry(T_ROUTE, (("dst", (0x0A000002, 32)),), group_id=10),
        M.TableEntry(T_EXACT, (("k", 1),), A_SET, M.params(x=1)),
    ])
    b = M.SwitchState.of([
        M.Member(PROFILE, 3, A_HOP, hop(3)),
        M.TableEntry(T_ROUTE, (("dst", (0x0A000001, 32)),), member_id=3),
        M.TableEntry(T_EXACT, (("k", 1),), A_SET, M.params(x=2)),
    ])
    return a, b


def _apply(c, codec, ops):
    req = c.write_request()
    codec.add_updates(req, ops)
    c.write_raw(req.SerializeToString())


def _read_state(c, codec):
    st = M.SwitchState()
    for ent in c.read_many(codec.wildcard_reads(tables=(T_EXACT, T_ROUTE), defaults=(),
                                                profiles=(PROFILE,), meters=())):
        v = codec.decode(ent)
        st.entities[v.key] = v
    return st


def test_the_diffs_order_is_what_the_switch_needs(emu, files):
    """One Write per state change, in the diff's order: members before the groups and entries
    that use them, deletes in reverse. The emulator refuses a Write before its dependency, as
    BMv2 does (a mutation of model._ORDER / _DEL_ORDER fails here)."""
    c = client(emu, files)
    codec = Codec.from_file(files[0])
    a, b = _ops_states()
    _apply(c, codec, M.diff(a, M.SwitchState(), MANAGED))
    assert _read_state(c, codec).entities == a.entities
    _apply(c, codec, M.diff(b, a, MANAGED))
    assert _read_state(c, codec).entities == b.entities
    _apply(c, codec, M.diff(a, b, MANAGED))
    assert _read_state(c, codec).entities == a.entities
    c.close()


@pytest.mark.parametrize("case", ["group_first", "entry_first", "member_deleted_first", "group_deleted_first"])
def test_a_write_before_its_dependency_is_refused(emu, files, case):
    c = client(emu, files)
    codec = Codec.from_file(files[0])
    a, _ = _ops_states()
    ops = M.diff(a, M.SwitchState(), MANAGED)
    kinds = [o.entity.key[0] for o in ops]
    if case in ("group_first", "entry_first"):
        first = kinds.index("group") if case == "group_first" else \
            [i for i, o in enumerate(ops) if o.entity.key[:2] == ("table", T_ROUTE)][0]
        ops = [ops[first]] + ops[:first] + ops[first + 1:]
    else:
        _apply(c, codec, ops)
        ops = M.diff(M.SwitchState(), a, MANAGED)   # every delete, in the diff's order
        kinds = [o.entity.key[0] for o in ops]
        first = kinds.index("member" if case == "member_deleted_first" else "group")
        ops = [ops[first]] + ops[:first] + ops[first + 1:]
    with pytest.raises(P4RuntimeError, match="code (5|9)"):   # NOT_FOUND / FAILED_PRECONDITION
        _apply(c, codec, ops)
    c.close()


def test_bad_requests_get_a_status(emu, files):
    c = client(emu, files)
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    e = pb.Entity()
    e.table_entry.table_id = 12345
    with pytest.raises(P4RuntimeError, match="NOT_FOUND"):
        c.read(e)
    with pytest.raises(P4RuntimeError, match="code 5"):
        c.insert(e)
    bad = P4RuntimeClient(emu.addresses[1], 99, 10)   # no such device on this server
    with pytest.raises(P4RuntimeError):
        bad.connect(timeout=2)
    c.close()


def test_pushed_counters(emu, files):
    """The subscription extension: the current values at once, then only what changed."""
    import queue
    got: queue.Queue = queue.Queue()
    c = client(emu, files)
    c.on_event = lambda cl, kind, detail: got.put((kind, detail)) if kind == "other" else None
    c.write_counter(CTR, 2, 100, 1)
    c.subscribe([c.counter_entity(CTR)])
    from coflow.ctl import wire
    kind, any_msg = got.get(timeout=5)
    assert any_msg.type_url.endswith("/p4.v1.ReadResponse")
    first = wire.parse_counters_pb(any_msg.value)
    assert len(first) == 16 and first[2] == (100, 1) and first[3] == (0, 0)
    c.write_counter(CTR, 3, 7, 1)
    c.write_counter(CTR, 5, 9, 2)
    pushed: dict = {}
    while len(pushed) < 2:   # one push, or two when the emulator pushed between the writes
        _, any_msg = got.get(timeout=5)
        pushed.update(wire.parse_counters_pb(any_msg.value))
    assert pushed == {3: (7, 1), 5: (9, 2)}   # only the changes
    c.write_counter(CTR, 5, 9, 2)   # the same value again: nothing pushed
    c.set_meter(MTR, 1, 10, 10)     # not subscribed
    with pytest.raises(queue.Empty):
        got.get(timeout=0.1)
    c.close()

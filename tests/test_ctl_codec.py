"""The controller's writes (Codec.add_updates into a client's WriteRequest) are the
WriteRequest of Codec.encode_op's (type, entity) pairs, on every entity kind a round writes."""
import os
import random

import pytest

from coflow.ctl import model as M
from coflow.ctl import translate as TR

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")


@pytest.fixture(scope="module")
def codec():
    if not os.path.exists(P4INFO):
        pytest.skip(f"{P4INFO} missing: run `make p4` (needs p4c)")
    from coflow.ctl.codec import Codec
    return Codec.from_file(P4INFO)


def _by_encode_op(codec, ops, device_id=42, election=(1, 10)):
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    want = pb.WriteRequest()
    want.device_id = device_id
    want.election_id.high, want.election_id.low = election
    for op in ops:
        typ, ent = codec.encode_op(op)
        u = want.updates.add()
        u.type = getattr(pb.Update, typ)
        u.entity.CopyFrom(ent)
    return want


def test_write_request_of_a_round(codec):
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    from coflow.dataplane.p4rt import P4RuntimeClient
    ops = [M.Op("MODIFY", M.CounterReset(M.C_COFLOW_BYTES, 4)),
           M.Op("INSERT", TR.slot_entities({(7, 1): 4})[0]),
           M.Op("MODIFY", TR.override_entity((7, 1), 5)),
           M.Op("DELETE", TR.override_entity((8, 0), 3)),
           M.Op("DELETE", TR.meter_config(9, 1000, TR.CtlSettings())),
           M.Op("MODIFY", TR.meter_config(10, 250_000, TR.CtlSettings()))]
    c = P4RuntimeClient("127.0.0.1:1", device_id=42, election_id=(1 << 64) + 10)
    req = c.write_request()
    codec.add_updates(req, ops)
    got = pb.WriteRequest.FromString(req.SerializeToString())
    assert got == _by_encode_op(codec, ops)
    assert got.updates[3].type == pb.Update.DELETE and got.updates[4].type == pb.Update.MODIFY
    assert not got.updates[4].entity.meter_entry.HasField("config")  # meter "delete" = reset
    assert got.updates[0].entity.counter_entry.HasField("data")       # a reset writes zeros
    assert got.updates[1].entity.table_entry.match  # and every message is a fresh one
    assert c.write_request() == _by_encode_op(codec, [])


def test_add_updates_equals_encode_on_random_entities(codec):
    """Every entity kind the controller writes, random values (zeros included: proto3 omits
    zero scalars but keeps set submessages and oneof members), as INSERT, MODIFY and DELETE;
    each round trips through decode."""
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    rng = random.Random(11)
    ents = _random_entities(rng)
    ops = [M.Op(rng.choice(["INSERT", "MODIFY", "DELETE"]), e) for e in ents]
    req = pb.WriteRequest(device_id=42)
    req.election_id.high, req.election_id.low = 1, 10
    codec.add_updates(req, ops)
    assert req.SerializeToString() == _by_encode_op(codec, ops).SerializeToString()
    kinds = {type(e).__name__ for e in ents}
    assert {"TableEntry", "Member", "Group", "DefaultAction", "MeterConfig", "CounterReset"} <= kinds
    for op, u in zip(ops, req.updates):
        if op.type != "DELETE" and not isinstance(op.entity, M.CounterReset):
            back = codec.decode(u.entity)
            assert back == op.entity or (isinstance(op.entity, M.MeterConfig) and back is None
                                         and not any(op.entity[2:])), op


def _random_entities(rng, n=200):
    from coflow import topology as T
    from coflow.params import DclasParams
    s = TR.CtlSettings()
    t = T.fattree(4)
    ents = [e for ents in TR.static_state(t, T.routes(t), "dclas", DclasParams(K=8)).values()
            for e in ents]
    for _ in range(n):
        cid = (rng.choice([0, 1, rng.randrange(1 << 32)]), rng.randrange(256))
        ents += [TR.override_entity(cid, rng.randrange(8)),
                 TR.slot_entity(cid, rng.choice([0, rng.randrange(512)])),
                 M.TableEntry(M.T_FLOW_METER, (("external_id", cid[0]), ("internal_id", cid[1]),
                                               ("ipv4_dst", rng.randrange(1 << 32)),
                                               ("ipv4_src", rng.choice([0, rng.randrange(1 << 32)]))),
                              M.A_SET_METER, (("index", rng.choice([0, rng.randrange(4096)])),)),
                 TR.meter_config(rng.choice([0, rng.randrange(4096)]), rng.choice([0, rng.random() * 1e9]), s),
                 M.CounterReset(rng.choice([M.C_COFLOW_BYTES, M.C_FLOW_BYTES]),
                                rng.choice([0, rng.randrange(1024)]))]
    return ents


@pytest.mark.parametrize("seed", [3, 17, 2024])
def test_add_updates_bytes_equal_the_reference_encoder(codec, seed):
    """The encoder's fast paths (type dispatch, ints without encode_value's checks, no set built
    per table entry) write byte for byte what the generic encoder it replaced wrote
    (tests/reference_codec.py), on every entity kind, as INSERT, MODIFY and DELETE."""
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from reference_codec import add_updates_reference
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    rng = random.Random(seed)
    ents = _random_entities(rng)
    ops = [M.Op(rng.choice(["INSERT", "MODIFY", "DELETE"]), e) for e in ents]
    got, want = pb.WriteRequest(device_id=7), pb.WriteRequest(device_id=7)
    codec.add_updates(got, ops)
    add_updates_reference(codec, want, ops)
    assert len(got.updates) == len(ops)
    assert got.SerializeToString() == want.SerializeToString()


def test_encoder_rejects_what_the_p4info_does_not_allow(codec):
    """Malformed entities fail with the same errors as before: a match field the table lacks
    (KeyError naming it), a value wider than its field or negative (ValueError)."""
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    bad_field = M.TableEntry(M.T_FLOW_METER, (("external_id", 1), ("internal_id", 0),
                                              ("ipv4_dst", 1), ("ipv4_src", 2), ("vlan", 3)),
                             M.A_SET_METER, (("index", 1),))
    with pytest.raises(KeyError, match="vlan"):
        codec.add_updates(pb.WriteRequest(), [M.Op("INSERT", bad_field)])
    wide = M.TableEntry(M.T_FLOW_METER, (("external_id", 1), ("internal_id", 0),
                                         ("ipv4_dst", 1 << 32), ("ipv4_src", 2)),
                        M.A_SET_METER, (("index", 1),))
    with pytest.raises(ValueError, match="does not fit"):
        codec.add_updates(pb.WriteRequest(), [M.Op("INSERT", wide)])
    neg = M.TableEntry(M.T_FLOW_METER, (("external_id", 1), ("internal_id", 0),
                                        ("ipv4_dst", 1), ("ipv4_src", 2)),
                       M.A_SET_METER, (("index", -1),))
    with pytest.raises(ValueError, match="cannot encode"):
        codec.add_updates(pb.WriteRequest(), [M.Op("INSERT", neg)])

"""The serialised fast path (coflow.ctl.wire) agrees with the protobuf library."""
import os

import pytest

from coflow.ctl import model as M
from coflow.ctl import translate as TR
from coflow.ctl import wire

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")


def test_varint():
    assert wire.varint(0) == b"\x00" and wire.varint(127) == b"\x7f"
    assert wire.varint(300) == b"\xac\x02"
    assert wire._read_varint(wire.varint(2 ** 63 + 5), 0) == (2 ** 63 + 5, 10)


def test_parse_counter_bytes_matches_protobuf():
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    resp = pb.ReadResponse()
    want = {}
    for i, b in [(0, 0), (1, 1), (511, 2 ** 40 + 3), (1023, 12345), (7, 2 ** 63 - 1)]:
        e = resp.entities.add()
        e.counter_entry.counter_id = 311570068
        e.counter_entry.index.index = i
        e.counter_entry.data.byte_count = b
        e.counter_entry.data.packet_count = 99
        want[i] = b
    t = resp.entities.add()  # a non-counter entity is skipped
    t.table_entry.table_id = 5
    assert wire.parse_counter_bytes(resp.SerializeToString()) == want
    assert wire.parse_counter_bytes(pb.ReadResponse().SerializeToString()) == {}


def test_compiled_counter_parser_matches_protobuf():
    """The compiled walker agrees with protobuf on random responses (interleaved other
    entities, zero fields omitted, counts up to 2^63 - 1)."""
    import random
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    rng = random.Random(5)
    for trial in range(40):
        resp = pb.ReadResponse()
        want = {}
        for _ in range(rng.randrange(0, 120)):
            if rng.random() < 0.1:
                resp.entities.add().table_entry.table_id = rng.randrange(1, 1 << 32)
                continue
            e = resp.entities.add()
            e.counter_entry.counter_id = rng.choice([1, 311570068])
            i = rng.randrange(0, 1024)
            b = rng.choice([0, 1, rng.randrange(1 << 20), rng.randrange(1 << 62),
                            (1 << 63) - 1 if trial % 7 == 0 else 3])
            e.counter_entry.index.index = i
            e.counter_entry.data.byte_count = b
            e.counter_entry.data.packet_count = rng.randrange(1 << 30)
            want[i] = b
        raw = resp.SerializeToString()
        assert wire.parse_counter_bytes_fast(raw) == want == wire.parse_counter_bytes(raw)
    with pytest.raises(ValueError):  # malformed (wire type 7): the same error as the Python walker
        wire.parse_counter_bytes_fast(b"\x0f\x00")


@pytest.fixture(scope="module")
def codec():
    if not os.path.exists(P4INFO):
        pytest.skip(f"{P4INFO} missing: run `make p4` (needs p4c)")
    from coflow.ctl.codec import Codec
    return Codec.from_file(P4INFO)


def test_write_request_bytes_match_protobuf(codec):
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    from coflow.dataplane.p4rt import P4RuntimeClient
    cache = wire.EncodedCache(codec)
    ops = [M.Op("MODIFY", M.CounterReset(M.C_COFLOW_BYTES, 4)),
           M.Op("INSERT", TR.slot_entities({(7, 1): 4})[0]),
           M.Op("MODIFY", TR.override_entity((7, 1), 5)),
           M.Op("DELETE", TR.override_entity((8, 0), 3)),
           M.Op("DELETE", TR.meter_config(9, 1000, TR.CtlSettings())),
           M.Op("MODIFY", TR.meter_config(10, 250_000, TR.CtlSettings()))]
    c = P4RuntimeClient("127.0.0.1:1", device_id=42, election_id=(1 << 64) + 10)
    raw = c.write_header() + b"".join(cache.op(op) for op in ops)
    got = pb.WriteRequest.FromString(raw)
    want = pb.WriteRequest()
    want.device_id = 42
    want.election_id.high, want.election_id.low = 1, 10
    for op in ops:
        typ, ent = codec.encode_op(op)
        u = want.updates.add()
        u.type = getattr(pb.Update, typ)
        u.entity.CopyFrom(ent)
    assert got == want
    assert got.updates[3].type == pb.Update.DELETE and got.updates[4].type == pb.Update.MODIFY
    assert not got.updates[4].entity.meter_entry.HasField("config")  # meter "delete" = reset


def test_encoded_cache_bounded(codec):
    cache = wire.EncodedCache(codec, limit=3)
    for i in range(10):
        cache.entity(TR.override_entity((i, 0), 1))
    assert len(cache._full) <= 3


def test_fast_encoder_bytes_equal_protobuf(codec):
    """Every entity kind the controller writes, random values (zeros included: proto3 omits
    zero scalars but keeps set submessages and oneof members), full and key-only."""
    import random
    from coflow import topology as T
    from coflow.params import DclasParams
    rng = random.Random(11)
    fast = wire.FastEncoder(codec)
    s = TR.CtlSettings()
    t = T.fattree(4)
    ents = [e for ents in TR.static_state(t, T.routes(t), "dclas", DclasParams(K=8)).values()
            for e in ents]
    for _ in range(300):
        cid = (rng.choice([0, 1, rng.randrange(1 << 32)]), rng.randrange(256))
        ents += [TR.override_entity(cid, rng.randrange(8)),
                 TR.slot_entity(cid, rng.choice([0, rng.randrange(512)])),
                 M.TableEntry(M.T_FLOW_METER, (("external_id", cid[0]), ("internal_id", cid[1]),
                                               ("ipv4_dst", rng.randrange(1 << 32)),
                                               ("ipv4_src", rng.choice([0, rng.randrange(1 << 32)]))),
                              M.A_SET_METER, (("index", rng.choice([0, rng.randrange(4096)])),)),
                 TR.meter_config(rng.choice([0, rng.randrange(4096)]), rng.choice([0, rng.random() * 1e9]), s),
                 M.MeterConfig(M.M_FLOW, rng.randrange(4096), 0, 0, 0, 0),
                 M.CounterReset(M.C_COFLOW_BYTES, rng.choice([0, rng.randrange(1024)]))]
    kinds = set()
    for e in ents:
        for key_only in (False, True):
            if isinstance(e, M.CounterReset) and key_only:
                continue
            got = fast.entity(e, key_only)
            if got is None:
                assert isinstance(e, (M.Member, M.Group, M.DefaultAction)), e
                continue
            kinds.add(type(e).__name__ + (e.table if isinstance(e, M.TableEntry) else ""))
            assert got == codec.encode(e, key_only=key_only).SerializeToString(), (e, key_only)
    assert len(kinds) >= 8, kinds  # routing (member and group refs), roles, thresholds, ...
    assert fast.entity(M.TableEntry(M.T_SLOT, (("nope", 1),), M.A_SET_SLOT, ())) is None

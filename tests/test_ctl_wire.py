"""The compiled counter walker (coflow.ctl.wire) gives protobuf's result on random responses,
and falls back to protobuf on what it does not expect."""
import random

import pytest

from coflow.ctl import wire


def _response(rng, trial):
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    resp = pb.ReadResponse()
    for _ in range(rng.randrange(0, 120)):
        if rng.random() < 0.1:  # other entities are skipped
            resp.entities.add().table_entry.table_id = rng.randrange(1, 1 << 32)
            continue
        e = resp.entities.add()
        e.counter_entry.counter_id = rng.choice([1, 311570068])
        i = rng.choice([0, rng.randrange(0, 1024), rng.randrange(1 << 40)])
        if i or rng.random() < 0.5:  # index 0: an empty Index, or none at all
            e.counter_entry.index.index = i
        d = e.counter_entry.data
        d.byte_count = rng.choice([0, 1, rng.randrange(1 << 20), rng.randrange(1 << 62),
                                   (1 << 63) - 1 if trial % 7 == 0 else 3])
        d.packet_count = rng.choice([0, rng.randrange(1 << 30)])
    return resp.SerializeToString()


def test_compiled_walker_matches_protobuf():
    """Interleaved other entities, zero fields omitted, counts up to 2^63 - 1."""
    rng = random.Random(5)
    for trial in range(60):
        raw = _response(rng, trial)
        want = wire.parse_counters_pb(raw)
        assert wire._walk(raw) is not None or not raw
        assert wire.parse_counters_fast(raw) == want
        assert wire.parse_counter_bytes_fast(raw) == {i: b for i, (b, _) in want.items()}
        assert wire.parse_counter_packets_fast(raw) == {i: p for i, (_, p) in want.items()}
    assert wire.parse_counters_fast(b"") == {}


def test_reads_accumulate_into_out():
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    out = {7: (1, 1)}
    r = pb.ReadResponse()
    ce = r.entities.add().counter_entry
    ce.index.index, ce.data.byte_count, ce.data.packet_count = 3, 30, 2
    assert wire.parse_counters_fast(r.SerializeToString(), out) is out
    assert out == {7: (1, 1), 3: (30, 2)}


def test_negative_counts_and_malformed_responses_go_to_protobuf():
    from google.protobuf.message import DecodeError
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    r = pb.ReadResponse()
    ce = r.entities.add().counter_entry
    ce.index.index, ce.data.byte_count, ce.data.packet_count = 5, -1, 2 ** 63 - 1
    raw = r.SerializeToString()
    assert wire._walk(raw) is None  # a negative int64 (10-byte varint): protobuf decodes it
    assert wire.parse_counters_fast(raw) == {5: (-1, 2 ** 63 - 1)}
    assert wire.parse_counter_packets_fast(raw) == {5: 2 ** 63 - 1}
    for bad in (b"\x0f\x00", raw[:-1], b"\x0a\x80"):  # wire type 7, truncated, bad varint
        assert wire._walk(bad) is None
        with pytest.raises(DecodeError):
            wire.parse_counters_fast(bad)

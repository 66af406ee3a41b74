"""Counter reads decoded by a compiled walker of the protobuf wire format.

Everything else the controller sends and receives goes through the generated P4Runtime modules
(:mod:`coflow.dataplane.pb`, C protobuf; writes: :meth:`coflow.ctl.codec.Codec.add_updates`).
This module keeps the one path where protobuf is still clearly slower: turning a serialised
``ReadResponse`` of ``CounterEntry`` entities into index -> count. The C parser itself is fast
(0.07 ms for 1,024 entries), but reaching each entry's fields from Python makes wrapper objects
for ``Entity``, ``CounterEntry``, ``Index`` and ``CounterData``: ~0.6 us per entry.

Measured with ``make bench-ctl`` (section "P4Runtime codec": medians of 4 runs on a shared
2-core VM at load 2-3; ``before`` is the same decoding on PyPI's ``p4runtime`` modules with the
pure-Python protobuf, which the controller was tied to until the stubs were generated):

====================================  ===========  ===========  =============================
index -> (bytes, packets) of           before       upb          this walker (ratio to upb)
====================================  ===========  ===========  =============================
100 counters (D-CLAS: one edge)        1.7-6.9 ms   0.07-0.12    0.016-0.025 ms (0.14-0.23x)
1,024 counters                         20-59 ms     0.83-1.3     0.11-0.16 ms (0.08-0.13x)
4,096 counters (closed-loop wildcard)  143-214 ms   4.6-9.7      0.53-0.79 ms (0.07-0.12x)
====================================  ===========  ===========  =============================

Both bench-ctl targets read counters every round: the D-CLAS round (p99 target 10 ms, met with
little margin) reads 100 counters on each of 8 edges, and the rate modes' closed loop reads
``flow_bytes`` of every edge (a wildcard read of 4,096 counters per edge past 1,024 meters):
decoding 8 edges takes 37-78 ms with upb against 4-6 ms with the walker, in a read phase of
14-26 ms. (The hand-written encoder that used to live here is gone: building and serialising a
round's WriteRequest with upb, :meth:`~coflow.ctl.codec.Codec.add_updates`, costs 1.1-1.2x what
its cache of encoded bytes did when every entity was cached (once in 6 runs 2x), and 2.3-4.8x
less than the encoder itself for new entities.)

The walker takes ~1 s to compile (cached by numba on disk; :func:`warm_up` runs it before the
first round). Without numba, and on anything it does not expect (a malformed message, a
negative count or index), the response is decoded with protobuf instead, so results never
differ from protobuf's (the tests compare on random responses).
"""
from __future__ import annotations


def _numbers():
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    n = lambda m, f: getattr(pb, m).DESCRIPTOR.fields_by_name[f].number  # noqa: E731
    return {
        "resp_entities": n("ReadResponse", "entities"),
        "counter_entry": n("Entity", "counter_entry"),
        "ce_index": n("CounterEntry", "index"),
        "ce_data": n("CounterEntry", "data"),
        "index_index": n("Index", "index"),
        "data_bytes": n("CounterData", "byte_count"),
        "data_packets": n("CounterData", "packet_count"),
    }


N = _numbers()


def parse_counters_pb(resp: bytes, out: dict | None = None) -> dict:
    """index -> (byte_count, packet_count) of every CounterEntry of a serialised ReadResponse,
    with protobuf (the reference, and the fallback of the compiled walker)."""
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    out = {} if out is None else out
    for e in pb.ReadResponse.FromString(resp).entities:
        if e.WhichOneof("entity") != "counter_entry":
            continue
        ce = e.counter_entry
        d = ce.data
        out[ce.index.index] = (d.byte_count, d.packet_count)
    return out


try:  # the compiled walker
    import numpy as _np
    from numba import njit as _njit
except ImportError:  # pragma: no cover - numba is a dependency of the scheduler core
    _njit = None


if _njit is not None:
    @_njit(cache=True)
    def _varint(buf, pos):
        result = 0
        shift = 0
        while True:
            if pos >= buf.size or shift > 63:
                return -1, -1
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result, pos
            shift += 7

    @_njit(cache=True)
    def _skip(buf, pos, wt):
        if wt == 0:
            return _varint(buf, pos)[1]
        if wt == 2:
            ln, pos = _varint(buf, pos)
            if pos < 0:
                return -1
            return pos + ln
        if wt == 1:
            return pos + 8
        if wt == 5:
            return pos + 4
        return -1

    @_njit(cache=True)
    def _data(buf, pos, end, bytes_f, pk_f):
        """(byte_count, packet_count, ok) of the CounterData in buf[pos:end]."""
        nb = 0
        npk = 0
        while pos < end:
            key, pos = _varint(buf, pos)
            if pos < 0:
                return 0, 0, False
            fn = key >> 3
            if key & 7 == 0 and (fn == bytes_f or fn == pk_f):
                v, pos = _varint(buf, pos)
                if pos < 0:
                    return 0, 0, False
                if fn == bytes_f:
                    nb = v
                else:
                    npk = v
            else:
                pos = _skip(buf, pos, key & 7)
                if pos < 0:
                    return 0, 0, False
        return nb, npk, pos == end

    @_njit(cache=True)
    def _field(buf, pos, end, f):
        """The next length-delimited field ``f`` in buf[pos:end], other fields skipped:
        (1, its payload's start, its end); (0, end, end) when there is none left; (-1, ...)
        on a malformed message."""
        while pos < end:
            key, pos = _varint(buf, pos)
            if pos < 0:
                return -1, -1, -1
            if key >> 3 != f or key & 7 != 2:
                pos = _skip(buf, pos, key & 7)
                if pos < 0:
                    return -1, -1, -1
                continue
            ln, pos = _varint(buf, pos)
            if pos < 0:
                return -1, -1, -1
            return 1, pos, pos + ln
        return 0, pos, pos

    @_njit(cache=True)
    def _parse_counters(buf, ent_f, ce_f, idx_f, data_f, ii_f, bytes_f, pk_f,
                        out_idx, out_bytes, out_pk):
        """(index, byte_count, packet_count) of every CounterEntry of a ReadResponse into the
        out arrays; returns how many, or -1 on a malformed message or full arrays."""
        n = 0
        pos = 0
        end = buf.size
        while True:
            got, pos, e_end = _field(buf, pos, end, ent_f)   # an Entity
            if got < 0:
                return -1
            if got == 0:
                break
            while True:
                got, pos, c_end = _field(buf, pos, e_end, ce_f)   # its CounterEntry
                if got < 0:
                    return -1
                if got == 0:
                    break
                index = 0
                nbytes = 0
                npk = 0
                while pos < c_end:
                    key, pos = _varint(buf, pos)
                    if pos < 0:
                        return -1
                    fn = key >> 3
                    if key & 7 == 2 and (fn == idx_f or fn == data_f):
                        ln, pos = _varint(buf, pos)
                        if pos < 0:
                            return -1
                        if fn == idx_f:
                            index, _x, ok = _data(buf, pos, pos + ln, ii_f, -1)
                        else:
                            nbytes, npk, ok = _data(buf, pos, pos + ln, bytes_f, pk_f)
                        if not ok:
                            return -1
                        pos += ln
                    else:
                        pos = _skip(buf, pos, key & 7)
                        if pos < 0:
                            return -1
                if pos != c_end or n >= out_idx.size:
                    return -1
                out_idx[n] = index
                out_bytes[n] = nbytes
                out_pk[n] = npk
                n += 1
            if pos != e_end:
                return -1
        if pos != end:
            return -1
        return n


def _walk(resp: bytes):
    """(indices, byte counts, packet counts) as lists, or None: use protobuf."""
    if _njit is None or not resp:
        return None
    buf = _np.frombuffer(resp, dtype=_np.uint8)
    cap = len(resp) // 6 + 1  # an entry takes more than 6 bytes
    idx = _np.empty(cap, _np.int64)
    nb = _np.empty(cap, _np.int64)
    npk = _np.empty(cap, _np.int64)
    n = _parse_counters(buf, N["resp_entities"], N["counter_entry"], N["ce_index"], N["ce_data"],
                        N["index_index"], N["data_bytes"], N["data_packets"], idx, nb, npk)
    if n < 0 or (n and (idx[:n].min() < 0 or nb[:n].min() < 0 or npk[:n].min() < 0)):
        return None  # malformed, or a count >= 2^63 (wrapped negative in int64)
    return idx[:n].tolist(), nb[:n].tolist(), npk[:n].tolist()


def parse_counters_fast(resp: bytes, out: dict | None = None) -> dict:
    """index -> (byte_count, packet_count) of every CounterEntry of a serialised ReadResponse:
    :func:`parse_counters_pb`'s result, with the compiled walker."""
    out = {} if out is None else out
    got = _walk(resp)
    if got is None:
        return parse_counters_pb(resp, out) if resp else out
    out.update(zip(got[0], zip(got[1], got[2])))
    return out


def parse_counter_bytes_fast(resp: bytes, out: dict | None = None,
                             count: str = "data_bytes") -> dict:
    """index -> byte_count of every CounterEntry in a serialised ReadResponse
    (``count="data_packets"``: the packet counts)."""
    out = {} if out is None else out
    got = _walk(resp)
    if got is None:
        if resp:
            k = 0 if count == "data_bytes" else 1
            out.update((i, v[k]) for i, v in parse_counters_pb(resp).items())
        return out
    out.update(zip(got[0], got[1] if count == "data_bytes" else got[2]))
    return out


def parse_counter_packets_fast(resp: bytes, out: dict | None = None) -> dict:
    """index -> packet_count of every CounterEntry in a serialised ReadResponse."""
    return parse_counter_bytes_fast(resp, out, "data_packets")


def warm_up() -> None:
    """Compile (or load from numba's cache) the counter walker before the first round."""
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    r = pb.ReadResponse()
    ce = r.entities.add().counter_entry
    ce.index.index = 1
    ce.data.byte_count = 2
    ce.data.packet_count = 3
    assert parse_counters_fast(r.SerializeToString()) == {1: (2, 3)}

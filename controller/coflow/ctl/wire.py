"""The controller's hot path on the protobuf wire format, around pure-Python protobuf.

p4runtime 1.6.0's generated modules force the pure-Python protobuf implementation, which spends
about 40 us per counter entry parsing a ReadResponse (a 1024-entry wildcard read of
``coflow_bytes``: ~26 ms idle, ~50 ms on a loaded machine) and as much building messages. A
coordination round every 10 ms cannot afford that, so the two messages it sends every round
skip the generic machinery:

- counter reads: the ReadRequest is serialised once per slot set (with protobuf) and reused;
  the response is parsed by :func:`parse_counter_bytes`, a minimal walker of the wire format
  that only extracts (index, byte_count) of CounterEntry entities;
- writes: each Update is (type, entity bytes) where the entity bytes come from a cache of
  encoded model values (:class:`EncodedCache`); the WriteRequest is the cached header
  (device id, election id) followed by the updates, concatenated (protobuf permits fields in
  any order and repeated fields appended).

Field numbers come from the generated descriptors at import, and the tests check both paths
against the protobuf library.
"""
from __future__ import annotations

from ..dataplane import p4rt as _p4rt  # noqa: F401  (protobuf implementation first)


def _numbers():
    from p4.v1 import p4runtime_pb2 as pb
    n = lambda m, f: getattr(pb, m).DESCRIPTOR.fields_by_name[f].number  # noqa: E731
    return {
        "resp_entities": n("ReadResponse", "entities"),
        "counter_entry": n("Entity", "counter_entry"),
        "ce_index": n("CounterEntry", "index"),
        "ce_data": n("CounterEntry", "data"),
        "index_index": n("Index", "index"),
        "data_bytes": n("CounterData", "byte_count"),
        "wr_updates": n("WriteRequest", "updates"),
        "up_type": n("Update", "type"),
        "up_entity": n("Update", "entity"),
    }


N = _numbers()
UPDATE_TYPE = {"INSERT": 1, "MODIFY": 2, "DELETE": 3}


def varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf, start: int, end: int):
    """(field number, wire type, value or (start, end)) of one message's fields."""
    pos = start
    while pos < end:
        key, pos = _read_varint(buf, pos)
        fn, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _read_varint(buf, pos)
            yield fn, wt, v
        elif wt == 2:
            ln, pos = _read_varint(buf, pos)
            yield fn, wt, (pos, pos + ln)
            pos += ln
        elif wt == 1:
            yield fn, wt, None
            pos += 8
        elif wt == 5:
            yield fn, wt, None
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wt}")


def parse_counter_bytes(resp: bytes, out: dict | None = None) -> dict:
    """index -> byte_count of every CounterEntry in a serialised ReadResponse."""
    out = {} if out is None else out
    ent_f, ce_f = N["resp_entities"], N["counter_entry"]
    idx_f, data_f = N["ce_index"], N["ce_data"]
    for fn, wt, v in _fields(resp, 0, len(resp)):
        if fn != ent_f or wt != 2:
            continue
        for fn2, wt2, v2 in _fields(resp, *v):
            if fn2 != ce_f or wt2 != 2:
                continue
            index = nbytes = 0
            for fn3, wt3, v3 in _fields(resp, *v2):
                if fn3 == idx_f and wt3 == 2:
                    for fn4, wt4, v4 in _fields(resp, *v3):
                        if fn4 == N["index_index"] and wt4 == 0:
                            index = v4
                elif fn3 == data_f and wt3 == 2:
                    for fn4, wt4, v4 in _fields(resp, *v3):
                        if fn4 == N["data_bytes"] and wt4 == 0:
                            nbytes = v4
            out[index] = nbytes
    return out


def update_bytes(typ: str, entity: bytes) -> bytes:
    """One serialised ``Update`` as a WriteRequest field (tag, length, body)."""
    body = (varint(N["up_type"] << 3) + varint(UPDATE_TYPE[typ])
            + varint(N["up_entity"] << 3 | 2) + varint(len(entity)) + entity)
    return varint(N["wr_updates"] << 3 | 2) + varint(len(body)) + body


class EncodedCache:
    """Model value (hashable) -> serialised Entity, bounded (cleared when it grows past
    ``limit`` entries)."""

    def __init__(self, codec, limit: int = 200_000):
        self.codec = codec
        self.limit = limit
        self._full: dict = {}
        self._key: dict = {}

    def entity(self, value, key_only: bool = False) -> bytes:
        d = self._key if key_only else self._full
        b = d.get(value)
        if b is None:
            if len(d) >= self.limit:
                d.clear()
            b = d[value] = self.codec.encode(value, key_only=key_only).SerializeToString()
        return b

    def op(self, op) -> bytes:
        """A model Op as serialised Update bytes (a meter DELETE is a MODIFY without config)."""
        from . import model as M
        e = op.entity
        if op.type == "DELETE":
            typ = "MODIFY" if isinstance(e, M.MeterConfig) else "DELETE"
            return update_bytes(typ, self.entity(e, key_only=True))
        return update_bytes(op.type, self.entity(e))

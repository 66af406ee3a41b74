"""P4Info names and P4Runtime values, offline (no gRPC, no switch): the canonical bytestring
encoding of a field's value, and the name -> id lookup over a P4Info (:class:`P4InfoHelper`)
the client, the controller's codec and the Tofino tools share.  :mod:`coflow.dataplane.p4rt`
re-exports them.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from google.protobuf import text_format

try:  # the P4Info helper works without grpc / p4runtime stubs for offline tools and unit tests
    from coflow.dataplane.pb import p4info_pb2  # noqa: E402
except ImportError:  # pragma: no cover
    p4info_pb2 = None


def encode_value(value: Any, bitwidth: int) -> bytes:
    """Canonical P4Runtime bytestring: big-endian, no leading zero bytes (at least one byte).

    ``value`` may be an int, bytes, a dotted IPv4 address or a colon-separated MAC address.
    """
    if isinstance(value, bytes):
        value = int.from_bytes(value, "big")
    elif isinstance(value, str):
        if value.count(":") == 5:
            value = int(value.replace(":", ""), 16)
        elif value.count(".") == 3:
            value = int(ipaddress.IPv4Address(value))
        else:
            value = int(value, 0)
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"cannot encode {value!r}")
    if value >> bitwidth:
        raise ValueError(f"value {value:#x} does not fit in {bitwidth} bits")
    nbytes = max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(nbytes, "big")


def decode_value(data: bytes) -> int:
    return int.from_bytes(data, "big")


@dataclass
class _Entity:
    id: int
    name: str
    alias: str
    extra: Any = None


class P4InfoHelper:
    """Name -> id lookups from a P4Info (text or message).

    A name may be the fully qualified one ("CoflowIngress.routing.routing_v4"), the alias p4c
    chose, or any unique dotted suffix ("routing_v4", "routing.routing_v4").
    """

    KINDS = ("tables", "actions", "counters", "meters", "action_profiles", "registers",
             "direct_counters", "direct_meters")

    def __init__(self, p4info):
        self.p4info = p4info
        self._by_kind: dict[str, list[_Entity]] = {}
        for kind in self.KINDS:
            ents = []
            for obj in getattr(p4info, kind, []):
                pre = obj.preamble
                ents.append(_Entity(pre.id, pre.name, pre.alias, obj))
            self._by_kind[kind] = ents

    @classmethod
    def from_text(cls, text: str) -> "P4InfoHelper":
        if p4info_pb2 is None:
            raise RuntimeError("the p4runtime package is not installed (pip install .[p4])")
        msg = p4info_pb2.P4Info()
        text_format.Merge(text, msg)
        return cls(msg)

    @classmethod
    def from_file(cls, path: str) -> "P4InfoHelper":
        with open(path) as f:
            return cls.from_text(f.read())

    def _find(self, kind: str, name: str) -> _Entity:
        ents = self._by_kind[kind]
        for e in ents:
            if name in (e.name, e.alias):
                return e
        hits = [e for e in ents if e.name.endswith("." + name)]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise KeyError(f"no {kind[:-1]} named {name!r}")
        raise KeyError(f"{kind[:-1]} name {name!r} is ambiguous: {[e.name for e in hits]}")

    def get(self, kind: str, name: str):
        return self._find(kind, name).extra

    def get_id(self, kind: str, name: str) -> int:
        return self._find(kind, name).id

    def name_of(self, kind: str, ident: int) -> str:
        for e in self._by_kind[kind]:
            if e.id == ident:
                return e.name
        raise KeyError(f"no {kind[:-1]} with id {ident}")

    def names(self, kind: str) -> list[str]:
        return [e.name for e in self._by_kind[kind]]

    # convenience
    def table_id(self, name: str) -> int:
        return self.get_id("tables", name)

    def action_id(self, name: str) -> int:
        return self.get_id("actions", name)

    def match_field(self, table: str, field_name: str):
        for mf in self.get("tables", table).match_fields:
            if field_name in (mf.name, mf.name.split(".")[-1]):
                return mf
        raise KeyError(f"table {table!r} has no match field {field_name!r}")

    def action_param(self, action: str, param: str):
        for p in self.get("actions", action).params:
            if p.name == param:
                return p
        raise KeyError(f"action {action!r} has no parameter {param!r}")

    def size(self, kind: str, name: str) -> int:
        return self.get(kind, name).size

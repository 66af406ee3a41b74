"""Protobuf message classes from a table of fields, for servers whose protos no registry package
ships (Stratum's chassis config, Intel's BF Runtime): each module that needs one lists the
messages' fields with their numbers, types and labels as the reference ``.proto`` declares them
(citing it), and :func:`build` declares them with protobuf's descriptor API in a private pool.
No generated code and no hand-encoded bytes: serialization and text format are protobuf's.

A field is ``(message, name, number, type, label)``; ``message`` is the dotted path below the
package (``"TofinoConfig.ByteShape"``); ``type`` is a scalar (``uint32``, ``uint64``, ``int32``,
``bool``, ``string``, ``bytes``, ``float``), ``enum:Path``, ``msg:Path`` or
``map:<key scalar>:<value type>``; ``label`` is ``optional`` or ``repeated``; a sixth element
names the ``oneof`` the field belongs to. Enums are ``(path, ((name, number), ...))``.

The modules write those tables in the ``.proto``'s own notation, read by :func:`parse`: a
``message Path { ... }`` or ``enum Path { NAME = n; ... }`` per declared type (``Path`` the dotted
path below the package, so nested types are written out flat), fields as ``[repeated] type name =
number;`` with ``map<key, value>`` and ``oneof name { ... }`` as in proto3. A type that is not a
scalar is an enum when the text declares an enum of that path, else a message.
"""
from __future__ import annotations

import re

from google.protobuf import descriptor_pb2, descriptor_pool

F = descriptor_pb2.FieldDescriptorProto
SCALARS = {"uint32": F.TYPE_UINT32, "uint64": F.TYPE_UINT64, "int32": F.TYPE_INT32,
           "int64": F.TYPE_INT64, "bool": F.TYPE_BOOL, "string": F.TYPE_STRING,
           "bytes": F.TYPE_BYTES, "float": F.TYPE_FLOAT}
LABELS = {"optional": F.LABEL_OPTIONAL, "repeated": F.LABEL_REPEATED}


_TOKEN = re.compile(r"\s*(?:([A-Za-z_][\w.]*|\d+|[{}=;<>,])|(\S))")


def parse(text: str, where: str = "proto") -> tuple[tuple, tuple]:
    """The ``(fields, enums)`` tables of :func:`build` from declarations in ``.proto`` notation
    (the module docstring); a ``ValueError`` names the first token that does not fit."""
    toks: list[tuple[str, int]] = []
    for m in _TOKEN.finditer(text):
        if m.group(2):
            raise ValueError(f"{where}: line {text.count(chr(10), 0, m.start(2)) + 1}: "
                             f"unexpected {m.group(2)!r}")
        if m.group(1):
            toks.append((m.group(1), text.count("\n", 0, m.start(1)) + 1))
    pos = 0

    def take(want: str | None = None, what: str = "a name") -> str:
        nonlocal pos
        if pos >= len(toks):
            raise ValueError(f"{where}: ends where {want or what} was due")
        tok, line = toks[pos]
        if want is not None:
            ok = tok == want
        else:
            ok = tok.isdigit() if what == "a number" else (tok[0].isalpha() or tok[0] == "_")
        if not ok:
            raise ValueError(f"{where}: line {line}: {want or what} expected, not {tok!r}")
        pos += 1
        return tok

    def peek() -> str | None:
        return toks[pos][0] if pos < len(toks) else None

    raw: list[tuple] = []       # (message, name, number, type, label[, oneof]), type unresolved
    enums: list[tuple] = []
    while pos < len(toks):
        kind = take(what="a name")
        if kind not in ("message", "enum"):
            raise ValueError(f"{where}: line {toks[pos - 1][1]}: 'message' or 'enum' expected, "
                             f"not {kind!r}")
        path = take()
        take("{")
        if kind == "enum":
            values = []
            while peek() != "}":
                name = take()
                take("=")
                values.append((name, int(take(what="a number"))))
                take(";")
            take("}")
            enums.append((path, tuple(values)))
            continue
        oneof = None
        while True:
            if peek() == "}":
                take("}")
                if oneof is None:
                    break
                oneof = None
                continue
            if peek() == "oneof" and oneof is None:
                take("oneof")
                oneof = take()
                take("{")
                continue
            label = "optional"
            if peek() == "repeated":
                label = take("repeated")
            typ = take()
            if typ == "map":
                take("<")
                key = take()
                take(",")
                value = take()
                take(">")
                typ = f"map:{key}:{value}"
            name = take()
            take("=")
            number = int(take(what="a number"))
            take(";")
            raw.append((path, name, number, typ, label) + ((oneof,) if oneof else ()))
    declared_enums = {p for p, _ in enums}

    def resolve(typ: str) -> str:
        if typ in SCALARS or typ.startswith("map:"):
            return typ
        return ("enum:" if typ in declared_enums else "msg:") + typ
    fields = tuple((r[0], r[1], r[2], resolve(r[3])) + r[4:] for r in raw)
    return fields, tuple(enums)


def _message_class(desc):
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # protobuf < 4.22
        from google.protobuf import message_factory
        return message_factory.MessageFactory().GetPrototype(desc)
    return GetMessageClass(desc)


class Schema:
    """The message classes of one declared file: ``schema["TofinoConfig.ByteShape"]``."""

    def __init__(self, pool, package: str, paths):
        self.pool = pool
        self.package = package
        self._classes: dict = {}
        self.paths = tuple(paths)

    def descriptor(self, path: str):
        return self.pool.FindMessageTypeByName(f"{self.package}.{path}")

    def __getitem__(self, path: str):
        cls = self._classes.get(path)
        if cls is None:
            cls = self._classes[path] = _message_class(self.descriptor(path))
        return cls


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_")) + "Entry"


def build(file_name: str, package: str, fields, enums=()) -> Schema:
    """Declare the messages and enums in a private pool and return their :class:`Schema`."""
    fdp = descriptor_pb2.FileDescriptorProto(name=file_name, package=package, syntax="proto3")
    msgs: dict = {}

    def msg(path: str):
        m = msgs.get(path)
        if m is not None:
            return m
        parent, _, leaf = path.rpartition(".")
        m = (msg(parent).nested_type if parent else fdp.message_type).add(name=leaf)
        msgs[path] = m
        return m

    for path, values in enums:
        parent, _, leaf = path.rpartition(".")
        e = (msg(parent).enum_type if parent else fdp.enum_type).add(name=leaf)
        for n, v in values:
            e.value.add(name=n, number=v)
    oneofs: dict = {}
    for spec in fields:
        path, name, number, typ, label = spec[:5]
        m = msg(path)
        f = m.field.add(name=name, number=number, label=LABELS[label])
        if len(spec) > 5:
            key = (path, spec[5])
            if key not in oneofs:
                oneofs[key] = len(m.oneof_decl)
                m.oneof_decl.add(name=spec[5])
            f.oneof_index = oneofs[key]
        if typ in SCALARS:
            f.type = SCALARS[typ]
        elif typ.startswith("enum:"):
            f.type = F.TYPE_ENUM
            f.type_name = f".{package}.{typ[5:]}"
        elif typ.startswith("msg:"):
            f.type = F.TYPE_MESSAGE
            f.type_name = f".{package}.{typ[4:]}"
        elif typ.startswith("map:"):
            _, ktype, vtype = typ.split(":", 2)
            entry = m.nested_type.add(name=_camel(name))
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=SCALARS[ktype])
            v = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL)
            if vtype in SCALARS:
                v.type = SCALARS[vtype]
            else:
                v.type = F.TYPE_MESSAGE
                v.type_name = f".{package}.{vtype}"
            f.label = F.LABEL_REPEATED
            f.type = F.TYPE_MESSAGE
            f.type_name = f".{package}.{path}.{entry.name}"
        else:
            raise ValueError(f"{path}.{name}: unknown type {typ!r}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return Schema(pool, package, msgs)


def field_table(schema: Schema, path: str) -> dict:
    """{field name: (number, type name)} of a declared message (for tests against the cited
    tables)."""
    d = schema.descriptor(path)
    out = {}
    for f in d.fields:
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            k, v = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            tn = f"map<{k.type},{v.message_type.full_name if v.message_type else v.type}>"
        elif f.message_type is not None:
            tn = f.message_type.full_name
        elif f.enum_type is not None:
            tn = f.enum_type.full_name
        else:
            tn = f.type
        out[f.name] = (f.number, tn)
    return out

"""The ``p4_device_config`` bytes of a P4Runtime ``SetForwardingPipelineConfig`` for Tofino.

Two servers, two formats, both pure functions of the compiler's outputs (``make p4-tofino``
writes them to ``build/tofino/``: ``pipe/tofino.bin``, ``pipe/context.json``, ``bfrt.json``):

- **bf_switchd's P4Runtime server** (``bf_switchd --p4rt-server``; open-p4studio
  ``pkgsrc/bf-drivers/src/pi/pi_imp.c``, ``_pi_update_device_start``, at commit
  1f97778f9ad5c8165bfce552fffe27c69887756b): a sequence of chunks, each a 32-bit
  little-endian length (``retrieve_uint32``, host order on x86) then that many bytes: the
  program name (at most 100 bytes), ``tofino.bin``, ``context.json``, then the P4 pipeline
  name (at most 100 bytes) and, when that name is not empty, ``bfrt.json``. The server reads
  the pipeline name's length unconditionally, so a config without bf-rt info ends in a zero
  length (it never checks the total size).
- **Stratum** (``stratum/hal/lib/barefoot/bf.proto`` at commit
  4a4f9b1c0b50d7dbfd29a1f82653963c626c4d78): a serialized
  ``stratum.hal.barefoot.BfPipelineConfig`` {1 p4_name, 2 bfruntime_info (bfrt.json), 3
  repeated Profile {1 profile_name, 2 context (context.json), 3 binary (tofino.bin), 4 repeated
  pipe_scope}}. The message is declared here with protobuf's descriptor API under Stratum's
  package name and field numbers (no generated code, no hand-encoded bytes).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

PROGRAM_NAME = "coflow_tna"
PIPE_NAME = "pipe"                      # the Pipeline instance of coflow_tna.p4
P4INFO_NAME = f"{PROGRAM_NAME}.p4info.txt"
MAX_NAME = 100                          # pi_imp.c _PI_UPDATE_MAX_NAME_SIZE
SERVERS = ("bf_switchd", "stratum")


@dataclass(frozen=True)
class TofinoArtifacts:
    """What the compiler wrote for one program with one pipeline."""
    prog_name: str
    pipe_name: str
    tofino_bin: bytes
    context_json: bytes
    bfrt_json: bytes | None = None
    pipe_scope: tuple = field(default_factory=tuple)   # Stratum: empty = every pipe


def load_artifacts(build_dir: str, prog_name: str = PROGRAM_NAME,
                   pipe_name: str = PIPE_NAME) -> TofinoArtifacts:
    """Read ``<build_dir>/<pipe>/tofino.bin``, ``<pipe>/context.json`` and ``bfrt.json``."""
    pipe_dir = os.path.join(build_dir, pipe_name)
    need = [os.path.join(pipe_dir, "tofino.bin"), os.path.join(pipe_dir, "context.json")]
    missing = [p for p in need if not os.path.isfile(p)]
    if missing:
        raise ValueError("missing " + ", ".join(missing))
    with open(need[0], "rb") as f:
        binary = f.read()
    with open(need[1], "rb") as f:
        context = f.read()
    bfrt = None
    bfrt_path = os.path.join(build_dir, "bfrt.json")
    if os.path.isfile(bfrt_path):
        with open(bfrt_path, "rb") as f:
            bfrt = f.read()
    return TofinoArtifacts(prog_name, pipe_name, binary, context, bfrt)


# bf_switchd -----------------------------------------------------------------------------------

def _chunk(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


def _name(s: str, what: str) -> bytes:
    b = s.encode()
    if len(b) > MAX_NAME:
        raise ValueError(f"{what} {s!r}: longer than {MAX_NAME} bytes (bf_switchd refuses it)")
    return b


def bf_switchd_config(a: TofinoArtifacts) -> bytes:
    """bf_switchd ``--p4rt-server``'s device config: name, tofino.bin, context.json, pipeline
    name (empty when there is no bfrt.json), bfrt.json."""
    out = _chunk(_name(a.prog_name, "program name")) + _chunk(a.tofino_bin) + _chunk(a.context_json)
    if a.bfrt_json is None:
        return out + _chunk(b"")
    return out + _chunk(_name(a.pipe_name, "pipeline name")) + _chunk(a.bfrt_json)


def parse_bf_switchd_config(blob: bytes) -> TofinoArtifacts:
    """The inverse of :func:`bf_switchd_config`, reading as the server reads (for tests and
    for checking a config file)."""
    chunks: list[bytes] = []
    i = 0
    while i < len(blob):
        if i + 4 > len(blob):
            raise ValueError(f"truncated length at byte {i}")
        (n,) = struct.unpack_from("<I", blob, i)
        i += 4
        if i + n > len(blob):
            raise ValueError(f"chunk {len(chunks)} of {n} bytes runs past the end")
        chunks.append(blob[i:i + n])
        i += n
    if len(chunks) not in (4, 5) or (len(chunks) == 4 and chunks[3]) or (len(chunks) == 5 and not chunks[3]):
        raise ValueError(f"{len(chunks)} chunks: expected name, binary, context, pipe name[, bfrt]")
    return TofinoArtifacts(chunks[0].decode(), chunks[3].decode(), chunks[1], chunks[2],
                           chunks[4] if len(chunks) == 5 else None)


# Stratum --------------------------------------------------------------------------------------

#: (message, field, number, type, label) of stratum.hal.barefoot.BfPipelineConfig, as bf.proto
#: declares them (tests check the built descriptor against this table)
STRATUM_FIELDS = (
    ("BfPipelineConfig", "p4_name", 1, "string", "optional"),
    ("BfPipelineConfig", "bfruntime_info", 2, "bytes", "optional"),
    ("BfPipelineConfig", "profiles", 3, "Profile", "repeated"),
    ("BfPipelineConfig.Profile", "profile_name", 1, "string", "optional"),
    ("BfPipelineConfig.Profile", "context", 2, "bytes", "optional"),
    ("BfPipelineConfig.Profile", "binary", 3, "bytes", "optional"),
    ("BfPipelineConfig.Profile", "pipe_scope", 4, "uint32", "repeated"),
)
STRATUM_PACKAGE = "stratum.hal.barefoot"

_stratum_cls = None


def stratum_message_class():
    """``stratum.hal.barefoot.BfPipelineConfig`` built from :data:`STRATUM_FIELDS` in a private
    descriptor pool (so it never clashes with another copy of Stratum's protos)."""
    global _stratum_cls
    if _stratum_cls is not None:
        return _stratum_cls
    from google.protobuf import descriptor_pb2, descriptor_pool
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # protobuf < 4.22
        from google.protobuf import message_factory
        GetMessageClass = message_factory.MessageFactory().GetPrototype
    F = descriptor_pb2.FieldDescriptorProto
    types = {"string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32}
    labels = {"optional": F.LABEL_OPTIONAL, "repeated": F.LABEL_REPEATED}
    fdp = descriptor_pb2.FileDescriptorProto(name="stratum/hal/lib/barefoot/bf.proto",
                                             package=STRATUM_PACKAGE, syntax="proto3")
    top = fdp.message_type.add(name="BfPipelineConfig")
    nested = top.nested_type.add(name="Profile")
    for msg, fname, num, typ, label in STRATUM_FIELDS:
        m = top if msg == "BfPipelineConfig" else nested
        f = m.field.add(name=fname, number=num, label=labels[label])
        if typ in types:
            f.type = types[typ]
        else:
            f.type = F.TYPE_MESSAGE
            f.type_name = f".{STRATUM_PACKAGE}.BfPipelineConfig.{typ}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    _stratum_cls = GetMessageClass(pool.FindMessageTypeByName(f"{STRATUM_PACKAGE}.BfPipelineConfig"))
    return _stratum_cls


def stratum_config_message(a: TofinoArtifacts):
    cls = stratum_message_class()
    msg = cls(p4_name=a.prog_name, bfruntime_info=a.bfrt_json or b"")
    prof = msg.profiles.add(profile_name=a.pipe_name, context=a.context_json, binary=a.tofino_bin)
    prof.pipe_scope.extend(a.pipe_scope)
    return msg


def stratum_config(a: TofinoArtifacts) -> bytes:
    """Stratum's device config: a serialized ``BfPipelineConfig`` with one profile."""
    return stratum_config_message(a).SerializeToString(deterministic=True)


def parse_stratum_config(blob: bytes) -> TofinoArtifacts:
    msg = stratum_message_class().FromString(blob)
    if len(msg.profiles) != 1:
        raise ValueError(f"{len(msg.profiles)} profiles: this program has one pipeline")
    p = msg.profiles[0]
    return TofinoArtifacts(msg.p4_name, p.profile_name, p.binary, p.context,
                           msg.bfruntime_info or None, tuple(p.pipe_scope))


def device_config(a: TofinoArtifacts, server: str) -> bytes:
    if server == "bf_switchd":
        return bf_switchd_config(a)
    if server == "stratum":
        return stratum_config(a)
    raise ValueError(f"unknown Tofino P4Runtime server {server!r}; servers: {', '.join(SERVERS)}")


def write_device_config(build_dir: str, server: str, out: str | None = None) -> str:
    """Build the device config for ``server`` from ``build_dir`` and write it (default
    ``<build_dir>/device_config.<server>.bin``); returns the path."""
    blob = device_config(load_artifacts(build_dir), server)
    out = out or os.path.join(build_dir, f"device_config.{server}.bin")
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, out)
    return out

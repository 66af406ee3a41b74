"""The CoflowId IPv4 option: scapy layer, socket helpers and a pure-Python validator.

Encoding (8 bytes, so IHL = 7 when it is the only option; p4src/README.md has the picture)::

    byte 0    type 0x9e   copied=1, class=0, number=30 (RFC 4727 experimental)
    byte 1    length 8
    byte 2    stamp       S (bit 7): an edge switch decided | 4 reserved bits | priority (bits 2..0)
    byte 3    internal id (Aalo stage, 0..255)
    bytes 4-7 external id (Aalo job / DAG id, big-endian, 0..2^32-1)

The copied bit makes fragmentation copy the option into every fragment, so every fragment is
counted against its coflow. Senders leave the stamp byte 0; the first (edge) switch writes S=1 and
its priority (7 = served first) there and into DSCP (priority << 3); later hops follow the stamp.

The validator :func:`classify_ipv4` mirrors the P4 parser's rules (p4src/include/parser.p4) so
tests and tools agree with the switch on what is tagged, untagged or malformed.
"""
from __future__ import annotations

import errno
import socket
import struct
from dataclasses import dataclass

# Every constant shared with the P4 programs lives in .constants (one source, checked against them).
from .constants import (  # noqa: E402,F401 (re-exported: tools and PTF tests read them from here)
    ASSIGNED_SLOTS, DROP_BAD_IHL, DROP_BAD_VERSION, DROP_METER_RED, DROP_NO_ROUTE, DROP_NONE,
    DROP_NOT_IPV4, DROP_OPT_LEN, DROP_OPT_OVERFLOW, DROP_PARSER_OTHER, DROP_TOTAL_LEN, DROP_TRUNCATED,
    DROP_TTL, HASH_MUL_EXT, HASH_MUL_INT, HASH_SLOT_BASE, HASH_SLOT_BITS, HASH_SLOTS, IPOPT_COFLOW_LEN, IPOPT_COFLOW_NUMBER,
    IPOPT_COFLOW_TYPE, MAX_EXTERNAL, MAX_INTERNAL, MODE_DCLAS, MODE_FAIR, MODE_FIFO_LM, MODE_RATE,
    STAMPED_BIT, CoflowId, DropReason, P4Mode)


def option_bytes(cid: CoflowId, stamped: bool = False, prio: int = 0) -> bytes:
    """The 8 option bytes; what a sender passes to setsockopt(IPPROTO_IP, IP_OPTIONS)."""
    if not 0 <= prio <= 7:
        raise ValueError("prio must be 0..7")
    stamp = (STAMPED_BIT if stamped else 0) | prio
    return struct.pack("!BBBBI", IPOPT_COFLOW_TYPE, IPOPT_COFLOW_LEN, stamp, cid.internal, cid.external)


def decode_option(data: bytes) -> tuple[CoflowId, bool, int]:
    """Decode 8 option bytes into (CoflowId, stamped, prio). Raises ValueError if malformed."""
    if len(data) < IPOPT_COFLOW_LEN:
        raise ValueError("truncated CoflowId option")
    typ, length, stamp, internal, external = struct.unpack("!BBBBI", data[:IPOPT_COFLOW_LEN])
    if typ != IPOPT_COFLOW_TYPE:
        raise ValueError(f"option type 0x{typ:02x} is not 0x9e")
    if length != IPOPT_COFLOW_LEN:
        raise ValueError(f"CoflowId option length {length} != 8")
    return CoflowId(external, internal), bool(stamp & STAMPED_BIT), stamp & 0x7


# --- DSCP: the stamp the traffic manager reads, and the unprivileged fallback ----------------

def dscp_of_prio(prio: int) -> int:
    """DSCP the switch writes for a BMv2 priority: class selector CS<prio>."""
    if not 0 <= prio <= 7:
        raise ValueError("prio must be 0..7")
    return prio << 3


def tos_of_prio(prio: int) -> int:
    """The IPv4 TOS byte (DSCP << 2, ECN 0) carrying CS<prio>; what IP_TOS takes."""
    return dscp_of_prio(prio) << 2


def prio_of_tos(tos: int) -> int:
    return (tos >> 5) & 0x7


def set_socket_coflow(sock: socket.socket, cid: CoflowId, fallback_prio: int | None = None) -> str:
    """Tag every packet of ``sock`` with ``cid``; call before connect().

    Linux accepts an unknown option type from a socket only with CAP_NET_RAW (root, as Mininet
    hosts run); otherwise setsockopt fails with EINVAL/EPERM. Then, if ``fallback_prio`` is given,
    the socket's DSCP is set to CS<fallback_prio> with IP_TOS (no privilege needed): the edge's
    untagged_class table can map that DSCP to a class, but the packets carry no CoflowId, so they
    are neither counted per coflow nor metered. Returns "option", "dscp" or raises OSError.
    """
    try:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, option_bytes(cid))
        return "option"
    except OSError as exc:
        if fallback_prio is None or exc.errno not in (errno.EINVAL, errno.EPERM):
            raise
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos_of_prio(fallback_prio))
    return "dscp"


def hash_slot(cid: CoflowId) -> int:
    """The fallback counter slot the switch uses for a coflow without an assigned slot:
    HASH_SLOT_BASE + top 9 bits of (ext * 0x9E3779B1 + int * 0x85EBCA77) mod 2^32.

    Multiplicative (Fibonacci) hashing rather than a CRC: a CRC is linear over GF(2), and its low
    bits map consecutive (external, internal) grids onto few slots; this one spreads them."""
    mix = (cid.external * HASH_MUL_EXT + cid.internal * HASH_MUL_INT) & 0xFFFFFFFF
    return HASH_SLOT_BASE + (mix >> (32 - HASH_SLOT_BITS))


# --- validator mirroring the P4 parser ------------------------------------------------------

@dataclass(frozen=True)
class Classified:
    """What the switch's parser makes of a frame: drop reason (DROP_NONE if forwarded),
    the CoflowId if tagged, and the stamp it carried."""

    drop: int
    coflow: CoflowId | None = None
    stamped: bool = False
    prio: int = 0

    @property
    def tagged(self) -> bool:
        return self.coflow is not None


def classify_frame(frame: bytes) -> Classified:
    """Classify an Ethernet frame the way p4src/include/parser.p4 + sanity.p4 do
    (before routing; TTL is checked too)."""
    if len(frame) < 14:
        return Classified(DROP_TRUNCATED)
    if struct.unpack("!H", frame[12:14])[0] != 0x0800:
        return Classified(DROP_NOT_IPV4)
    return classify_ipv4(frame[14:], frame_len=len(frame))


def classify_ipv4(ip: bytes, frame_len: int | None = None) -> Classified:
    """Classify an IPv4 header (+ payload); ``frame_len`` is the whole frame's length
    (default: 14 + len(ip))."""
    if frame_len is None:
        frame_len = 14 + len(ip)
    if len(ip) < 20:
        return Classified(DROP_TRUNCATED)
    version, ihl = ip[0] >> 4, ip[0] & 0xF
    if version != 4:
        return Classified(DROP_BAD_VERSION)
    if ihl < 5:
        return Classified(DROP_BAD_IHL)
    cid, stamped, prio = None, False, 0
    bad_9e = False   # first option of type 0x9e, not ours, with a length no option can have
    if ihl > 5:
        if len(ip) < 22:
            return Classified(DROP_TRUNCATED)  # lookahead<bit<16>> runs out
        typ, length = ip[20], ip[21]
        if typ == IPOPT_COFLOW_TYPE and length == IPOPT_COFLOW_LEN:
            if len(ip) < 28:
                return Classified(DROP_TRUNCATED)
            if ihl == 6:
                return Classified(DROP_OPT_OVERFLOW)
            cid, stamped, prio = decode_option(ip[20:28])
        elif typ == IPOPT_COFLOW_TYPE:
            # someone else's option 30 when well formed (forwarded untagged); the sanity
            # control drops it after the parser walked the options area and the ports
            bad_9e = length < 2 or length > (ihl - 5) * 4
        if len(ip) < ihl * 4:
            return Classified(DROP_TRUNCATED)
    mf = (ip[6] >> 5) & 1
    frag = struct.unpack("!H", ip[6:8])[0] & 0x1FFF
    proto = ip[9]
    if mf == 0 and frag == 0 and proto in (6, 17) and len(ip) < ihl * 4 + 4:
        return Classified(DROP_TRUNCATED)
    if bad_9e:
        return Classified(DROP_OPT_LEN)
    total_len = struct.unpack("!H", ip[2:4])[0]
    if total_len < ihl * 4 or frame_len < 14 + total_len:
        return Classified(DROP_TOTAL_LEN)
    if ip[8] <= 1:
        return Classified(DROP_TTL)
    return Classified(DROP_NONE, cid, stamped, prio)


# --- scapy layer (optional dependency) ------------------------------------------------------

try:  # pragma: no cover - exercised when scapy is installed
    from scapy.fields import BitField, ByteField, IntField
    from scapy.layers.inet import IPOption

    class IPOption_Coflow(IPOption):
        """scapy layer for the CoflowId option; registered for option number 30, so
        ``IP(raw).options`` decodes it."""

        name = "IP Option CoflowId"
        option = IPOPT_COFLOW_NUMBER
        fields_desc = [
            BitField("copy_flag", 1, 1),
            BitField("optclass", 0, 2),
            BitField("option", IPOPT_COFLOW_NUMBER, 5),
            ByteField("length", IPOPT_COFLOW_LEN),
            BitField("stamped", 0, 1),
            BitField("reserved", 0, 4),
            BitField("prio", 0, 3),
            ByteField("internal", 0),
            IntField("external", 0),
        ]

        def coflow_id(self) -> CoflowId:
            return CoflowId(self.external, self.internal)

    HAVE_SCAPY = True
except ImportError:  # pragma: no cover
    HAVE_SCAPY = False
    IPOption_Coflow = None  # type: ignore[assignment]


def coflow_option(cid: CoflowId, stamped: bool = False, prio: int = 0):
    """A scapy IPOption_Coflow for ``cid`` (copied bit set)."""
    if not HAVE_SCAPY:
        raise RuntimeError("scapy is not installed (pip install .[p4])")
    return IPOption_Coflow(copy_flag=1, optclass=0, option=IPOPT_COFLOW_NUMBER,
                           stamped=int(stamped), prio=prio,
                           internal=cid.internal, external=cid.external)


def find_coflow_option(ip_pkt):
    """Return the IPOption_Coflow of a scapy IP packet, or None."""
    for opt in getattr(ip_pkt, "options", []) or []:
        if HAVE_SCAPY and isinstance(opt, IPOption_Coflow):
            return opt
    return None

"""The one Python source of every constant the controller shares with the P4 programs.

Names are the P4 names of ``p4src/include/define.p4`` and ``size.p4`` (and of the TNA program
where it has them); ``tests/test_constants.py`` parses the P4 sources and fails when a value here
differs from either program. Sizes are derived from sizes, as in size.p4.

Also here: the P4 mode code of each pipeline mode (``PIPELINE_CODE``), and the
:class:`CoflowId` (Aalo's ``external.internal``) with its one parse rule, used by the coflow API,
the packet tools and the traffic agents alike.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass

# CoflowId IPv4 option: copied=1, class=0, number=30 (RFC 4727 experimental) --------------------
IPOPT_COFLOW_NUMBER = 30
IPOPT_COPIED_BIT = 0x80
IPOPT_COFLOW_TYPE = IPOPT_COPIED_BIT | IPOPT_COFLOW_NUMBER      # 0x9e
IPOPT_COFLOW_LEN = 8
STAMPED_BIT = 0x80                  # stamp byte: an edge switch decided
COFLOW_EXT_BITS = 32                # coflow_ext_t
COFLOW_INT_BITS = 8                 # coflow_int_t
MAX_EXTERNAL = (1 << COFLOW_EXT_BITS) - 1
MAX_INTERNAL = (1 << COFLOW_INT_BITS) - 1

# Queues ---------------------------------------------------------------------------------------
PRIO_BITS = 3                       # standard_metadata.priority
NUM_PRIOS = 1 << PRIO_BITS          # --priority-queues 8
PRIO_HIGHEST = NUM_PRIOS - 1        # served first (Aalo's queue 1)
PRIO_LOWEST = 0
FIFO_LM_MAX_RANK = PRIO_HIGHEST - 1  # FIFO-LM ranks 0..6 on priorities 7..1

# Sizes (size.p4) ------------------------------------------------------------------------------
PORT_BITS = 9                       # port_t
MAX_PORTS = 1 << PORT_BITS
QUEUE_COUNTER_SIZE = MAX_PORTS * NUM_PRIOS
DROP_REASONS = 16
ASSIGNED_SLOTS = 512                # slots 0..511: controller-assigned (coflow_slot table)
HASH_SLOT_BITS = 9
HASH_SLOTS = 1 << HASH_SLOT_BITS    # slots 512..1023: hash(ext, int) fallback
HASH_SLOT_BASE = ASSIGNED_SLOTS
COFLOW_SLOTS = ASSIGNED_SLOTS + HASH_SLOTS
HASH_MUL_EXT = 0x9E3779B1           # v1model slot hash: 2^32 / golden ratio (Fibonacci hashing)
HASH_MUL_INT = 0x85EBCA77
FLOW_SLOTS_PER_COFLOW = 8           # meters per assigned slot (sizing only: a pool, FLOW_METERS)
FLOW_METERS = ASSIGNED_SLOTS * FLOW_SLOTS_PER_COFLOW
REPORT_TABLE_SIZE = ASSIGNED_SLOTS                 # report_step entries: assigned slots (report.p4)

# Slot lifecycle (define.p4, target_v1model.p4; coflow_counter.p4) ---------------------------
EPOCH_BITS = 16                     # epoch_t: the slot age clock wraps after 2^16 epochs
EPOCH_SHIFT = 20                    # v1model: ingress_global_timestamp (us) >> 20: 1.048576 s
SLOT_IDLE_EPOCHS = 8                # a hashed slot idle this many epochs is taken over
EPOCH_SECONDS = (1 << EPOCH_SHIFT) / 1e6    # v1model epoch length in seconds

# ECN marking (ecn_marker.p4) -----------------------------------------------------------------
VQ_SHIFT = 10                       # virtual queue level: bytes << VQ_SHIFT, in a bit<32>
ECN_NOT_ECT = 0                     # the IPv4 ECN field (RFC 3168)
ECN_CE = 3
ECN_ECT0 = 2                        # ECT(0); TNA's incremental checksum on marking (ecn_marker.p4)
ECN_PORT_TABLE_SIZE = 64            # size.p4
ECN_MAX_THRESHOLD_BYTES = (1 << (32 - VQ_SHIFT)) - 1   # the largest threshold a level can exceed

# Sizes of the TNA program (p4src/tna/include/size.p4; p4src/README.md "Tofino (TNA)") ---------
TNA_HASH_SLOT_BITS = 15
TNA_HASH_SLOTS = 1 << TNA_HASH_SLOT_BITS          # CRC-32 (zlib) slot hash, low 15 bits
TNA_ASSIGNED_SLOTS = TNA_HASH_SLOTS               # slots 0..32767: controller-assigned
TNA_HASH_SLOT_BASE = TNA_ASSIGNED_SLOTS           # hashed slots follow
TNA_COFLOW_SLOTS = TNA_ASSIGNED_SLOTS + TNA_HASH_SLOTS
TNA_SLOT_BITS = TNA_HASH_SLOT_BITS + 1            # slot index width
TNA_SLOT_CRC_POLY = 0x04C11DB7                    # slot hash: CRC-32 (zlib's), reflected
TNA_TAG_CRC_POLY = 0x1EDC6F41                     # owner tag: CRC-32C, reflected
TNA_CRC_INIT = 0xFFFFFFFF
TNA_CRC_XOR = 0xFFFFFFFF
TNA_METERED_SLOTS = ASSIGNED_SLOTS                # slots whose coflows have meters (as v1model)
TNA_FLOW_METERS = TNA_METERED_SLOTS * FLOW_SLOTS_PER_COFLOW
TNA_REPORT_SLOT_BITS = 9                          # slots 0..511 report (report.p4's slot test)
TNA_REPORT_TABLE_SIZE = 1 << TNA_REPORT_SLOT_BITS # report_step entries, = TNA_METERED_SLOTS
TNA_REPORT_DIGEST_TYPE = 1                        # ig_dprsr_md.digest_type of a report
TNA_BYTES_UNIT_SHIFT = 6                          # byte registers count 64-byte units (32 bits)
TNA_DCLAS_KEY_SHIFT = 12                          # D-CLAS range key = units[31:12]
TNA_DCLAS_KEY_BITS = 32 - TNA_DCLAS_KEY_SHIFT     # 20 bits: 5 PHV nibbles
TNA_UNITS_MAX = (1 << 32) - 1                     # a saturated byte register
TNA_ECMP_HASH_BITS = 16                           # ECMP selector hash: IDENTITY of the 16-bit window
TNA_ECMP_MAX_GROUP_SIZE = 64
TNA_ECMP_GROUPS = 1024 // TNA_ECMP_MAX_GROUP_SIZE  # ECMP_SELECTOR_SIZE / max group size
ETH_HEADER_BYTES = 14                             # frame bytes = IPv4 total length + 14
IPV4_MIN_HEADER_BYTES = 20
TNA_DROP_CTL = 1                                  # ig_dprsr_md.drop_ctl bit 0: drop
IPV4_OPT_MIN_LEN = 2                              # an option's type + length bytes
IPV4_OPT_WORDS = 10                               # TNA parser: options as 32-bit words (40 B)
TNA_EPOCH_SHIFT = 30                              # slot age clock unit: 2^30 ns (1.074 s)
TNA_CLOCK_TS_BITS = 18                            # MAC timestamp[47:30]: the clock's low bits
TNA_CLOCK_WRAP_STEP = 1 << TNA_CLOCK_TS_BITS      # a timestamp wrap (2^48 ns) in clock units
#                                                   the idle age is SLOT_IDLE_EPOCHS units (8.6 s)
TNA_MAX_COUNTED_IP_LEN = 1500                     # byte registers count min(total_len, this)
TNA_COUNTED_FCS_BYTES = 4                         # Tofino counters and meters count the FCS
TNA_CELL_BYTES = 80                               # Tofino 1 queue depth unit (ECN threshold)

# Rate modes: payload <-> frame bytes (p4src/README.md "Meters"). A tagged TCP segment's frame
# carries these headers besides its payload (Linux: timestamps on, net.ipv4.tcp_timestamps=1);
# the meters and flow_bytes count frames (without FCS on BMv2, with its 4 bytes on Tofino:
# coflow.tofino.target.Target.fcs_bytes), the scheduler counts payload.
IP_MTU = 1500
TCP_HEADER_BYTES = 20
TCP_TIMESTAMPS_BYTES = 12                         # NOP, NOP, timestamps (10)
FRAME_OVERHEAD_BYTES = (ETH_HEADER_BYTES + IPV4_MIN_HEADER_BYTES + IPOPT_COFLOW_LEN
                        + TCP_HEADER_BYTES + TCP_TIMESTAMPS_BYTES)   # 74 per packet
MAX_FRAME_BYTES = ETH_HEADER_BYTES + IP_MTU       # 1514
TCP_MSS_BYTES = MAX_FRAME_BYTES - FRAME_OVERHEAD_BYTES               # 1440 payload bytes


class P4Mode(enum.IntEnum):
    """``pipeline_config``'s mode (define.p4 ``enum bit<8> Mode_t``)."""

    FAIR = 0        # every tagged coflow in one class (fair_prio)
    DCLAS = 1       # Aalo D-CLAS: bytes sent -> queue (range table)
    FIFO_LM = 2     # Baraat FIFO-LM
    RATE = 3        # meters enforce the controller's rates, fair_prio class


MODE_FAIR, MODE_DCLAS, MODE_FIFO_LM, MODE_RATE = (int(m) for m in P4Mode)


class PortRole(enum.IntEnum):
    """define.p4 ``enum bit<1> PortRole_t``: an edge port faces a host (traffic enters the fabric there)."""

    FABRIC = 0
    EDGE = 1


ROLE_FABRIC, ROLE_EDGE = int(PortRole.FABRIC), int(PortRole.EDGE)


class DropReason(enum.IntEnum):
    """Index of the ``drop_reasons`` counter (define.p4 ``enum bit<8> DropReason_t``)."""

    NONE = 0
    NOT_IPV4 = 1        # EtherType is not IPv4
    BAD_VERSION = 2     # EtherType IPv4 but version != 4
    BAD_IHL = 3         # IHL < 5
    TRUNCATED = 4       # parser ran out of bytes
    OPT_LEN = 5         # CoflowId option with a length the parser cannot walk
    OPT_OVERFLOW = 6    # option does not fit inside IHL
    TOTAL_LEN = 7       # totalLen < IHL*4 or frame shorter than totalLen
    TTL = 8             # TTL <= 1
    NO_ROUTE = 9        # LPM miss
    METER_RED = 10      # flow meter coloured the packet RED
    PARSER_OTHER = 11   # any other parser error


(DROP_NONE, DROP_NOT_IPV4, DROP_BAD_VERSION, DROP_BAD_IHL, DROP_TRUNCATED, DROP_OPT_LEN,
 DROP_OPT_OVERFLOW, DROP_TOTAL_LEN, DROP_TTL, DROP_NO_ROUTE, DROP_METER_RED,
 DROP_PARSER_OTHER) = (int(d) for d in DropReason)
assert len(DropReason) <= DROP_REASONS

# Pipeline modes -> P4 mode codes -----------------------------------------------------------------
#: the code of each pipeline mode a controller mode runs (by name: a scheduler declares its
#: pipeline mode, ``coflow.sched.base.Fabric``; the controller's modes, ``coflow.ctl.modes``)
PIPELINE_CODE = {"fair": MODE_FAIR, "dclas": MODE_DCLAS, "fifo-lm": MODE_FIFO_LM, "rate": MODE_RATE}


# CoflowId -------------------------------------------------------------------------------------

class CoflowIdError(ValueError):
    """A malformed CoflowId; ``field`` names where it came from."""

    def __init__(self, field: str, msg: str):
        super().__init__(f"{field}: {msg}")
        self.field = field
        self.msg = msg


_CID_RE = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")


@dataclass(frozen=True, order=True)
class CoflowId:
    """Aalo's two-part coflow id: external (job / DAG, 32 bits) . internal (stage, 8 bits)."""

    external: int
    internal: int = 0

    def __post_init__(self):
        for name, v, hi in (("external", self.external, MAX_EXTERNAL),
                            ("internal", self.internal, MAX_INTERNAL)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
                raise ValueError(f"CoflowId.{name}: {v!r} is not an integer in [0, {hi}]")

    def __str__(self) -> str:
        return f"{self.external}.{self.internal}"

    @classmethod
    def parse(cls, s, field: str = "coflow_id") -> "CoflowId":
        """``"external.internal"``: decimal, no sign, no leading zeros, no spaces. Raises
        :class:`CoflowIdError` naming ``field``."""
        if isinstance(s, CoflowId):
            return s
        if not isinstance(s, str):
            raise CoflowIdError(field, f"expected a CoflowId string 'external.internal', got {type(s).__name__}")
        m = _CID_RE.fullmatch(s)
        if not m:
            shown = s if len(s) <= 40 else s[:37] + "..."
            raise CoflowIdError(field, f"{shown!r} is not a CoflowId 'external.internal' (e.g. '7.0')")
        e, i = int(m.group(1)), int(m.group(2))
        if e > MAX_EXTERNAL:
            raise CoflowIdError(field, f"external id {e} does not fit in {COFLOW_EXT_BITS} bits "
                                       f"(must be < {MAX_EXTERNAL + 1})")
        if i > MAX_INTERNAL:
            raise CoflowIdError(field, f"internal id {i} does not fit in {COFLOW_INT_BITS} bits "
                                       f"(must be < {MAX_INTERNAL + 1})")
        return cls(e, i)

"""What the translation layer is told about a target: ``bmv2`` (p4src/coflow.p4) or ``tofino``
(p4src/tna/coflow_tna.p4). One controller, one translation, two profiles.

Where the targets differ (p4src/README.md, "Tofino (TNA)", lists why):

- **slots**: ``bmv2`` 512 assigned + 512 hashed; ``tofino`` 32768 + 32768. The hashed slot is
  v1model's Fibonacci hash on ``bmv2`` and CRC-32's low 15 bits on ``tofino`` (no multiplier
  there); :meth:`Target.hash_slot` gives the switch's slot on both.
- **meters**: both have meters for slots 0..511 (index slot * 8 + flow slot); a Tofino coflow in
  a higher slot is counted and scheduled but not metered.
- **byte units**: the Tofino registers count 64-byte units in 32 bits, so ``heavy_bytes`` is
  written in units (:meth:`Target.heavy_param`) and the D-CLAS range key is a 20-bit slice
  (256 KiB quanta): :meth:`Target.dclas_ranges` rounds each threshold to the nearest quantum.
- **frame bytes**: Tofino's counters and meters count the 4-byte FCS, BMv2's do not
  (:attr:`Target.fcs_bytes`): the controller's payload conversion of ``flow_bytes`` and the
  meters' frame rates add it per packet (:meth:`Target.frame_overhead_bytes`).
- **ECN threshold**: bytes << 10 on BMv2 (its virtual queue), 80-byte cells on Tofino (the
  traffic manager's depth): :meth:`Target.ecn_threshold_param`.
"""
from __future__ import annotations

from dataclasses import dataclass

import math

from ..dataplane import constants as C
from ..dataplane.constants import CoflowId
from . import crc as _crc

U64_MAX = (1 << 64) - 1


@dataclass(frozen=True)
class Target:
    name: str
    assigned_slots: int
    hash_slot_base: int
    hash_slot_bits: int
    metered_slots: int
    bytes_unit_shift: int       # the data plane's byte registers count 2^shift bytes
    dclas_key_shift: int        # the D-CLAS key drops this many more low bits
    dclas_key_bits: int
    heavy_bits: int             # width of set_config's heavy_bytes
    fcs_bytes: int = 0          # bytes per frame the counters and meters count past the headers
    ecn_cell_bytes: int = 0     # 0: ECN threshold in bytes << VQ_SHIFT; else in cells of this

    @property
    def hash_slots(self) -> int:
        return 1 << self.hash_slot_bits

    @property
    def coflow_slots(self) -> int:
        return self.hash_slot_base + self.hash_slots

    @property
    def dclas_quantum(self) -> int:
        """Bytes per step of the D-CLAS range key."""
        return 1 << (self.bytes_unit_shift + self.dclas_key_shift)

    @property
    def dclas_key_max(self) -> int:
        return (1 << self.dclas_key_bits) - 1

    @property
    def no_heavy(self) -> int:
        return (1 << self.heavy_bits) - 1

    def hash_slot(self, cid) -> int:
        """The counter slot the switch uses for a coflow without an assigned slot."""
        ext, internal = (cid.external, cid.internal) if isinstance(cid, CoflowId) else cid
        if self.name == "bmv2":
            from ..dataplane.packet import hash_slot
            return hash_slot(CoflowId(int(ext), int(internal)))
        return self.hash_slot_base + (tofino_slot_crc(ext, internal) & (self.hash_slots - 1))

    def quantise(self, nbytes: int) -> int:
        """Bytes -> the nearest step of the D-CLAS key (ties up), capped at the key's max."""
        q = self.dclas_quantum
        if q == 1:
            return min(int(nbytes), self.dclas_key_max)
        return min((int(nbytes) + q // 2) // q, self.dclas_key_max + 1)

    def dclas_ranges(self, ranges) -> list[tuple[int, int, int]]:
        """``DclasParams.ranges()`` (lo, hi inclusive, queue; bytes) -> the same ranges in key
        steps: each threshold rounded to the nearest quantum; ranges that become empty, or lie
        past the key's range, are dropped (those queues are unreachable locally)."""
        out = []
        for lo, hi, q in ranges:
            klo = self.quantise(lo)
            khi = self.quantise(hi + 1) - 1 if hi < U64_MAX else self.dclas_key_max
            khi = min(khi, self.dclas_key_max)
            if klo <= khi:
                out.append((klo, khi, q))
        return out

    def heavy_param(self, heavy_bytes: int) -> int:
        """FIFO-LM's heavy threshold as the switch compares it (heavy once the count exceeds
        it): bytes on bmv2; on Tofino 64-byte units, rounded down (heavy within 64 bytes of
        the byte threshold), and at most the register's max (never heavy)."""
        h = min(int(heavy_bytes), U64_MAX)
        return min(h >> self.bytes_unit_shift, self.no_heavy)

    @property
    def frame_overhead_bytes(self) -> int:
        """Bytes a counted tagged TCP segment carries besides its payload."""
        return C.FRAME_OVERHEAD_BYTES + self.fcs_bytes

    @property
    def max_frame_bytes(self) -> int:
        """A full-size segment's frame as the counters and meters count it."""
        return C.MAX_FRAME_BYTES + self.fcs_bytes

    def ecn_threshold_param(self, threshold_bytes: int) -> int:
        """``set_vq.threshold_level`` for a queue depth of ``threshold_bytes``: bytes << VQ_SHIFT
        on BMv2, whole 80-byte cells on Tofino (marked once the depth exceeds it: rounded up)."""
        if self.ecn_cell_bytes:
            return min(math.ceil(int(threshold_bytes) / self.ecn_cell_bytes), (1 << 32) - 1)
        return int(threshold_bytes) << C.VQ_SHIFT

    def meter_slot_ok(self, slot: int) -> bool:
        return 0 <= slot < self.metered_slots


def tofino_slot_crc(external: int, internal: int) -> int:
    """CRC-32 (zlib's) of ``{external_id, internal_id}``: the TNA program's ``slot_hash``."""
    return _crc.crc(_crc.field_bytes((int(external), C.COFLOW_EXT_BITS),
                                     (int(internal), C.COFLOW_INT_BITS)),
                    C.TNA_SLOT_CRC_POLY, 32, True, C.TNA_CRC_INIT, C.TNA_CRC_XOR)


def tofino_tag(external: int, internal: int) -> int:
    """The slot-owner tag the TNA program stores: {1, CRC-32C(ext, int)[30:0]}."""
    c = _crc.crc(_crc.field_bytes((int(external), C.COFLOW_EXT_BITS),
                                  (int(internal), C.COFLOW_INT_BITS)),
                 C.TNA_TAG_CRC_POLY, 32, True, C.TNA_CRC_INIT, C.TNA_CRC_XOR)
    return (1 << 31) | (c & ((1 << 31) - 1))


BMV2 = Target("bmv2", assigned_slots=C.ASSIGNED_SLOTS, hash_slot_base=C.HASH_SLOT_BASE,
              hash_slot_bits=C.HASH_SLOT_BITS, metered_slots=C.ASSIGNED_SLOTS,
              bytes_unit_shift=0, dclas_key_shift=0, dclas_key_bits=64, heavy_bits=64)
TOFINO = Target("tofino", assigned_slots=C.TNA_ASSIGNED_SLOTS, hash_slot_base=C.TNA_HASH_SLOT_BASE,
                hash_slot_bits=C.TNA_HASH_SLOT_BITS, metered_slots=C.TNA_METERED_SLOTS,
                bytes_unit_shift=C.TNA_BYTES_UNIT_SHIFT, dclas_key_shift=C.TNA_DCLAS_KEY_SHIFT,
                dclas_key_bits=C.TNA_DCLAS_KEY_BITS, heavy_bits=32,
                fcs_bytes=C.TNA_COUNTED_FCS_BYTES, ecn_cell_bytes=C.TNA_CELL_BYTES)
TARGETS = {t.name: t for t in (BMV2, TOFINO)}


def get_target(target) -> Target:
    """A :class:`Target` from itself or its name."""
    if isinstance(target, Target):
        return target
    try:
        return TARGETS[target]
    except KeyError:
        raise ValueError(f"unknown target {target!r}; targets: {', '.join(TARGETS)}") from None

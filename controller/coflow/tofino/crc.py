"""The CRCs of the TNA program's ``Hash`` externs, computed as the switch computes them.

The switch hashes the concatenation of its field list, most significant bit first (a
``{bit<32> external_id, bit<8> internal_id}`` list is the 5 bytes external id big-endian,
then internal id). A ``CRCPolynomial(coeff, reversed, msb, extended, init, xor)`` with
``reversed=true`` is the reflected CRC of the Rocksoft model (input and output reflected):
with coeff 0x04C11DB7 and init = xor = 0xFFFFFFFF it is zlib's CRC-32 (open-p4studio
``p4_16_programs/tna_custom_hash`` checks its hash against Python's), with coeff 0x1EDC6F41
CRC-32C. ``msb`` and ``extended`` are false in the program; this module implements only that.
"""
from __future__ import annotations

import functools


def _reflect(v: int, width: int) -> int:
    r = 0
    for _ in range(width):
        r = (r << 1) | (v & 1)
        v >>= 1
    return r


@functools.lru_cache(maxsize=None)
def _table(poly: int, width: int, reflected: bool) -> tuple:
    mask = (1 << width) - 1
    out = []
    if reflected:
        rpoly = _reflect(poly, width)
        for b in range(256):
            c = b
            for _ in range(8):
                c = (c >> 1) ^ rpoly if c & 1 else c >> 1
            out.append(c & mask)
    else:
        top = 1 << (width - 1)
        for b in range(256):
            c = b << (width - 8)
            for _ in range(8):
                c = ((c << 1) ^ poly) if c & top else (c << 1)
            out.append(c & mask)
    return tuple(out)


def crc(data: bytes, poly: int, width: int = 32, reflected: bool = True,
        init: int = 0xFFFFFFFF, xor: int = 0xFFFFFFFF) -> int:
    """Rocksoft-model CRC of ``data`` (refin = refout = ``reflected``)."""
    mask = (1 << width) - 1
    t = _table(poly, width, reflected)
    c = init & mask
    if reflected:
        c = _reflect(c, width)
        for b in data:
            c = (c >> 8) ^ t[(c ^ b) & 0xFF]
    else:
        for b in data:
            c = ((c << 8) & mask) ^ t[((c >> (width - 8)) ^ b) & 0xFF]
    return (c ^ xor) & mask


def field_bytes(*fields: tuple[int, int]) -> bytes:
    """The bit string of a P4 field list ``(value, width)...``, msb first, as bytes (the total
    width must be a multiple of 8)."""
    total = sum(w for _, w in fields)
    if total % 8:
        raise ValueError(f"field list of {total} bits is not whole bytes")
    v = 0
    for value, width in fields:
        if not 0 <= value < 1 << width:
            raise ValueError(f"{value} does not fit in {width} bits")
        v = (v << width) | value
    return v.to_bytes(total // 8, "big")

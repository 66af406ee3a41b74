"""Test oracle for the slot age clock's arithmetic (p4src/include/slot_clock.p4), the way the
Tofino program's stateful ALUs evaluate it, and the program's earlier arithmetic for the
regression tests. tests/test_slot_clock_bmv2.py checks the compiled macros against it on
simple_switch; tests/test_tofino_regressions.py runs the TNA program's clock with it."""
from __future__ import annotations

MASK = 0xFFFFFFFF


def tick(last: int, wraps: int, ts: int, step: int) -> tuple[int, int, int]:
    """SLOT_CLOCK_TICK: the register pair {last, wraps} after a packet with timestamp bits ``ts``
    (exact compares: no operand reaches 2^31), and the count the packet gets (the one before).
    Returns (last, wraps, count)."""
    half = step >> 1
    count = wraps
    if last >= ts + half:
        return ts, (wraps + step) & MASK, count
    if ts <= last + half:
        return ts, wraps, count
    return last, wraps, count


def expire(now: int, span: int) -> int:
    """SLOT_CLOCK_EXPIRE: the clock at which a slot seen at ``now`` turns idle."""
    return (now + span) & MASK


def idle(now: int, expire: int) -> bool:
    """SLOT_CLOCK_IDLE: expire - now as a 32-bit two's complement number is <= 0 (the stateful
    ALU's "uus" compare)."""
    d = (expire - now) & MASK
    return d == 0 or d >= (1 << 31)


def old_tick(last: int, wraps: int, ts: int, step: int) -> tuple[int, int, int]:
    """The clock before the fix: any step back counted a wrap; the packet got the count before
    its own update. Returns (last, wraps, the packet's count)."""
    out = wraps
    if ts < last:
        wraps = (wraps + step) & MASK
    return ts, wraps, out


def old_idle(now: int, seen: int, span: int) -> bool:
    """The age test before the fix, ``now - seen >= span`` on bit<32>, as bf-p4c compiled it: one
    "geq.u" compare of the exact sum now - seen - span, which does not wrap."""
    return now - seen - span >= 0

"""The slot age clock's arithmetic (p4src/include/slot_clock.p4), compiled by p4c and run by
simple_switch: the harness p4src/test/slot_clock_harness.p4 applies the macros that the Tofino
program's stateful ALUs use to values carried in test packets (pcap files in, pcap files out:
``simple_switch --use-files``, no namespace or root). Skipped when p4c-bm2-ss or simple_switch
is missing.

Each packet carries the clock register's state before it: packet i+1 carries the state packet i's
answer must hold (the oracle's, tests/reference_clock.py), and every answer is checked against
it, so the compiled steps chain as the register would. What this proves is the macros' P4 value;
that bf-p4c gives each compare that value is argued in slot_clock.p4 (no subtraction wraps in the
tick's compares; the age compare is the sign of a 32-bit sum, bf-p4c's "uus" compare) and stays
unverified without bf-p4c.
"""
from __future__ import annotations

import os
import random
import struct
import subprocess
import time

import pytest

from coflow.dataplane import constants as C
from coflow.dataplane import toolchain

import reference_clock as R

scapy = pytest.importorskip("scapy.all")
from scapy.all import Ether, Raw, raw, rdpcap, wrpcap  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = os.path.join(REPO, "p4src", "test", "slot_clock_harness.p4")
ETHERTYPE = 0x88B5
FMT = "!IIIIIIIIB"          # clock_test_h: seq, step, last, wraps, ts, now, span, expire, idle
KEYS = ("seq", "step", "last", "wraps", "ts", "now", "span", "expire", "idle")
STEP = C.TNA_CLOCK_WRAP_STEP
SPAN = C.SLOT_IDLE_EPOCHS
NS = 1 << C.TNA_EPOCH_SHIFT          # one clock unit in ns
MASK = 0xFFFFFFFF


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    p4c = toolchain.find_tool("p4c-bm2-ss")
    ss = toolchain.find_tool("simple_switch")
    if p4c is None or ss is None:
        pytest.skip("p4c-bm2-ss or simple_switch not found (set P4C, or put them on PATH or in "
                    + ", ".join(toolchain.DEFAULT_DIRS) + ")")
    d = tmp_path_factory.mktemp("slot_clock")
    out = d / "harness.json"
    r = subprocess.run([p4c, "--std", "p4-16", "-o", str(out), HARNESS],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return ss, str(out), d


def _replay(harness, name: str, frames: list) -> list:
    ss, js, _ = harness
    for i, f in enumerate(frames):
        f.time = 1000 + i * 0.002            # the replay keeps the file's spacing
    wrpcap(name + "_in.pcap", frames)
    proc = subprocess.Popen([ss, "--use-files", "0", "-i", f"0@{name}",
                             "--thrift-port", str(toolchain.free_port()), js],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5 + len(frames) * 0.004)    # the output file is complete when it stops
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return rdpcap(name + "_out.pcap")


def run(harness, steps: list[dict]) -> list[dict]:
    """Each of ``steps`` (step, last, wraps, ts, span, expire) through the harness; its answer as a
    dict of clock_test_h, in the order of ``steps``. A frame lost in the replay is sent again."""
    _, _, d = harness
    size = struct.calcsize(FMT)
    answers: dict[int, dict] = {}
    for _ in range(4):
        todo = [i for i in range(len(steps)) if i not in answers]
        if not todo:
            break
        frames = []
        for i in todo:
            s = steps[i]
            pl = struct.pack(FMT, i, s["step"], s["last"], s["wraps"], s["ts"], 0, s["span"],
                             s["expire"], 0)
            frames.append(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02",
                                type=ETHERTYPE) / Raw(pl))
        run.n = getattr(run, "n", 0) + 1
        for p in _replay(harness, str(d / f"r{run.n}"), frames):
            a = dict(zip(KEYS, struct.unpack(FMT, raw(p)[14:14 + size])))
            answers[a["seq"]] = a
    assert len(answers) == len(steps), f"{len(steps) - len(answers)} frames never came back"
    return [answers[i] for i in range(len(steps))]


def chain(harness, ts_expire: list[tuple[int, int]], last: int, wraps: int) -> list[dict]:
    """The clock register through packets (ts, a slot's expiry): each packet carries the state
    the oracle gives after the one before; every answer must hold the oracle's next state (so the
    compiled steps chain as the register would) and the expiry the packet would store."""
    steps = []
    for ts, expire in ts_expire:
        steps.append({"step": STEP, "last": last, "wraps": wraps, "ts": ts, "expire": expire,
                      "span": SPAN})
        last, wraps, _ = R.tick(last, wraps, ts, STEP)
    got = run(harness, steps)
    for s, g in zip(steps, got):
        new_last, new_wraps, count = R.tick(s["last"], s["wraps"], s["ts"], STEP)
        assert (g["last"], g["wraps"], g["now"]) == (new_last, new_wraps, (count + s["ts"]) & MASK), g
        assert g["expire"] == R.expire(g["now"], SPAN), g
    return got


def test_compiled_macros_equal_the_oracle(harness):
    """Every answer equals tests/reference_clock.py: the register update on random states and
    timestamps, and the age compare on random and edge ages."""
    rnd = random.Random(28)
    steps, want = [], []
    edges = [0, 1, STEP // 2 - 1, STEP // 2, STEP // 2 + 1, STEP - 1]
    for _ in range(150):
        last = rnd.choice(edges + [rnd.randrange(STEP)])
        ts = rnd.choice(edges + [rnd.randrange(STEP)])
        wraps = rnd.choice([0, STEP, MASK + 1 - STEP, rnd.randrange(1 << 14) * STEP])
        new_last, new_wraps, count = R.tick(last, wraps, ts, STEP)
        now = (count + ts) & MASK
        expire = rnd.choice([now, (now + 1) & MASK, (now - 1) & MASK, 0, (now + SPAN) & MASK,
                             (now + (1 << 31)) & MASK, (now + (1 << 31) - 1) & MASK,
                             (now + (1 << 31) + 1) & MASK, rnd.randrange(1 << 32)])
        steps.append({"step": STEP, "last": last, "wraps": wraps, "ts": ts, "expire": expire,
                      "span": SPAN})
        want.append((new_last, new_wraps, now, int(R.idle(now, expire)), R.expire(now, SPAN)))
    got = run(harness, steps)
    assert [(g["last"], g["wraps"], g["now"], g["idle"], g["expire"]) for g in got] == want


def _clock_ts(t_ns: int) -> int:
    return (t_ns % (1 << 48)) >> C.TNA_EPOCH_SHIFT


def test_unordered_timestamps_keep_the_clock(harness):
    """A pipe's packets arrive a few ns out of order at every clock-unit boundary, before and
    across the timestamp's wrap (a late packet from before it after the first one past it):
    every packet's clock is its own timestamp's, unwrapped, but for the first packet past the
    wrap (one step, 78 h, behind) and the late one after it (one step ahead); a slot seen a
    unit ago is busy, and one idle since before the wrap is idle after it (but to the packet
    whose clock is behind). Fails on the clock that counted any step back as a wrap."""
    wrap = 1 << 48
    times = []
    for base in range(wrap - 40 * NS, wrap + 20 * NS, NS):
        times += [base + 5, base - 3]          # the second, stamped 8 ns earlier, comes later
    true_now = [(t >> C.TNA_EPOCH_SHIFT) & MASK for t in times]
    first, late = times.index(wrap + 5), times.index(wrap - 3)
    assert late == first + 1
    want_now = list(true_now)
    want_now[first] = (true_now[first] - STEP) & MASK
    want_now[late] = (true_now[late] + STEP) & MASK
    old_seen = true_now[times.index(wrap - 15 * NS + 5)]
    seen = [(n - 1) & MASK if t < wrap else old_seen for t, n in zip(times, true_now)]
    expire = [R.expire(x, SPAN) for x in seen]
    # the register as a pipe that saw a packet a unit earlier left it (count 0, no wrap yet)
    got = chain(harness, [(_clock_ts(t), e) for t, e in zip(times, expire)],
                _clock_ts(wrap - 41 * NS), 0)
    assert [g["now"] for g in got] == want_now
    want_idle = [int(t >= wrap and n - old_seen >= SPAN) for t, n in zip(times, true_now)]
    want_idle[first] = 0                       # its clock is behind: the slot looks busy
    want_idle[late] = 1                        # its clock is ahead: the slot looks idle
    assert [g["idle"] for g in got] == want_idle
    assert sum(want_idle) > 30 and 0 in want_idle[len(want_idle) // 2:]


def test_a_first_packet_anywhere_in_the_range_is_in_the_same_period(harness):
    """The register starts with last in the middle of the timestamp's range and a count of 0
    (config.p4's initial value, checked by tests/test_tofino_regressions.py): a first packet
    late in the range, or at 0, keeps the count, and a never-used slot (expiry 0) is idle."""
    start = (STEP // 2 - 1, 0)
    got = chain(harness, [(STEP - 5, 0), (STEP - 4, 0), (3, 0), (4, 0)], *start)
    assert [g["now"] for g in got] == [STEP - 5, STEP - 4, 3, STEP + 4]
    assert [g["idle"] for g in got] == [1, 1, 1, 1]
    got = chain(harness, [(0, 0), (1, 0)], *start)
    assert [g["now"] for g in got] == [0, 1] and [g["wraps"] for g in got] == [0, 0]


def test_the_clocks_own_wrap_leaves_no_slot_busy(harness):
    """The 32-bit clock wraps (after 146 years, or when the wrap count went wrong): a slot seen
    just before that is idle once its age reaches the span, and busy until then."""
    near = MASK + 1 - 3 - STEP                # 3 units before a timestamp wrap, a step below 2^32
    pkts = [((near + k) % STEP, R.expire((near + STEP) & MASK, SPAN)) for k in range(13)]
    # one step later (the count 2^32 - step): the clock crosses 2^32 at k = 3
    got = chain(harness, pkts, near % STEP, (MASK + 1 - STEP) & MASK)
    now = [((near + STEP + k) & MASK) for k in range(13)]
    now[3] = (now[3] - STEP) & MASK           # the first packet past a timestamp wrap
    assert [g["now"] for g in got] == now
    assert [g["idle"] for g in got] == [int(k >= SPAN) for k in range(13)]

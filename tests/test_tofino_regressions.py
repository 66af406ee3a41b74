"""Issue 28: one regression test per defect of the TNA program that no compile catches, each
failing on the program before the fix. Source- and model-level where that is enough (no
compiler needed); the ones that read bf-p4c's outputs (assembler, P4Info) skip with the reason
when bf-p4c is missing (the mechanism of tests/test_tofino_compile.py, whose build they share).

1. IPv4 header checksum: no parser residual; the deparser's field lists, evaluated on real
   headers (scapy builds them and computes the checksum: the oracle), give the right checksum
   for tagged / untagged packets with options at every IHL; egress's ECN rewrite (RFC 1624)
   too. With bf-p4c: no RESIDUAL parser checksum unit in the assembler output, deparser units
   in both gresses, and those units (their containers and what each holds, from the assembler
   output) evaluated on the same packets give scapy's checksum (P4Testgen's Tofino target
   computes no checksum: p4src/README.md). On the program before the fix this fails: a unit
   sums the parser's residual (``meta.ck_residual_tagged``), not the header's fields.
2. Traffic manager: ``coflow ctl run --target tofino`` builds a TM pusher (strict priority for
   the mode) for the server; Stratum without a chassis config is an error
   (tests/test_tofino_tm.py tests the messages and the pushes).
3. Slot ages across the 48-bit timestamp's wrap and across timestamps that reach the pipe out
   of order, with the program's clock and age test as the stateful ALU evaluates them
   (tests/reference_clock.py): an idle slot stays idle after the wrap, an active owner keeps
   its slot and an abandoned slot turns idle.
4. Ports: translated (``tna/PortId_t``, 32 bits) in Stratum's build, the SDK port's 9 bits in
   bf_switchd's (whose P4Runtime server translates nothing), in the source and in each compiled
   P4Info, each refused for the other server; the controller names them per server.
5. ECN depth in cells (no shift that wraps at 4.2 MB), the FCS in the controller's payload
   conversion per target, and the byte registers' count capped at the MTU.
6. The report shadow follows every counted packet of a reporting slot (not only once its step
   is written), the option's class and stamp are written only into a valid option, and egress
   queue bytes leave out the bridged header.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess

import pytest

from coflow.dataplane import constants as C

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TNA = os.path.join(REPO, "p4src", "tna")
BUILD = os.path.join(REPO, "build", "tofino")


def _src(rel: str) -> str:
    text = open(os.path.join(TNA, rel)).read()
    return re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", text, flags=re.S), flags=re.S)


def _cpp(rel: str) -> str:
    """The file through the C preprocessor (its macros expanded, comments gone)."""
    import shutil
    if shutil.which("cpp") is None:
        pytest.skip("cpp (the C preprocessor p4c uses) not found")
    r = subprocess.run(["cpp", "-P", "-D__TARGET_TOFINO__", os.path.join(TNA, rel)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _control(text: str, name: str) -> str:
    i = text.index(f"control {name}(")
    j = text.find("\ncontrol ", i + 1)
    k = text.find("\nparser ", i + 1)
    ends = [x for x in (j, k) if x > 0]
    return text[i:min(ends)] if ends else text[i:]


def _update_lists(block: str) -> list[list[str]]:
    return [[f.strip() for f in m.group(1).replace("\n", " ").split(",") if f.strip()]
            for m in re.finditer(r"\.update\(\s*\{(.*?)\}\s*\)", block, re.S)]


# --- 1. the IPv4 header checksum ----------------------------------------------------------

def test_no_parser_checksum_residual():
    """A Checksum's get() / subtract_all_and_deposit() in a TNA parser is a residual that
    subtracts everything extracted after it (bf-p4c p4include/tofino1_base.p4,
    parde/extract_parser.cpp): the header checksum must not come from one."""
    text = _src("include/parser.p4")
    assert not re.search(r"\.\s*(get|subtract_all_and_deposit)\s*\(", text), \
        "a TNA parser reads a Checksum residual"
    assert "residual" not in text.lower()


_IPV4 = ["version", "ihl", "dscp", "ecn", "total_len", "identification", "flag_rsvd", "flag_df",
         "flag_mf", "frag_offset", "ttl", "protocol", "hdr_checksum", "src_addr", "dst_addr"]
_W = {"version": 4, "ihl": 4, "dscp": 6, "ecn": 2, "total_len": 16, "identification": 16,
      "flag_rsvd": 1, "flag_df": 1, "flag_mf": 1, "frag_offset": 13, "ttl": 8, "protocol": 8,
      "hdr_checksum": 16, "src_addr": 32, "dst_addr": 32, "opt_type": 8, "opt_len": 8,
      "stamped": 1, "rsvd": 4, "prio": 3, "internal_id": 8, "external_id": 32, "data": 32}


def _csum(bits: str) -> int:
    assert len(bits) % 16 == 0, len(bits)
    s = sum(int(bits[i:i + 16], 2) for i in range(0, len(bits), 16))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _fields_of(raw_ip: bytes, tagged: bool) -> dict:
    """The PHV after the TNA parser: hdr.ipv4.*, hdr.coflow_opt.* (tagged), hdr.ipv4_opts[i].data
    for the option words extracted; headers not extracted are zero (the parser's implicit zero
    initialization)."""
    bits = "".join(f"{b:08b}" for b in raw_ip)
    out, pos = {}, 0
    for f in _IPV4:
        out[f"hdr.ipv4.{f}"] = int(bits[pos:pos + _W[f]], 2)
        pos += _W[f]
    ihl = out["hdr.ipv4.ihl"]
    words = ihl - 5
    for f in ("opt_type", "opt_len", "stamped", "rsvd", "prio", "internal_id", "external_id"):
        out[f"hdr.coflow_opt.{f}"] = 0
    if tagged:
        for f in ("opt_type", "opt_len", "stamped", "rsvd", "prio", "internal_id", "external_id"):
            out[f"hdr.coflow_opt.{f}"] = int(bits[pos:pos + _W[f]], 2)
            pos += _W[f]
        words -= 2
    for i in range(C.IPV4_OPT_WORDS):
        out[f"hdr.ipv4_opts[{i}].data"] = int(bits[pos:pos + 32], 2) if i < words else 0
        if i < words:
            pos += 32
    return out


def _eval_list(fields: list[str], values: dict) -> int:
    bits = ""
    for f in fields:
        assert f in values, f"{f}: not a header field (a parser residual or metadata?)"
        w = _W[f.rsplit(".", 1)[1]]
        bits += f"{values[f]:0{w}b}"
    return _csum(bits)


def _packets():
    from scapy.layers.inet import IP, TCP, IPOption
    out = []
    for ihl_extra in range(0, 9):                 # other option words after the CoflowId option
        opt = bytes([C.IPOPT_COFLOW_TYPE, 8, 0x80 | 5, 3]) + (123456).to_bytes(4, "big")
        other = bytes([1, 1, 1, 1]) * (ihl_extra - 1) + bytes([7, 3, 4, 0]) if ihl_extra else b""
        if len(opt + other) <= 40:
            p = IP(src="10.0.1.2", dst="10.1.0.3", ttl=17, tos=0x2e, id=4321,
                   options=[IPOption(opt + other)]) / TCP(sport=5001, dport=80) / (b"x" * 100)
            out.append((bytes(p), True))
    for nwords in range(0, 11):                   # untagged, with 0..10 option words
        other = bytes([1, 1, 1, 1]) * (nwords - 1) + bytes([7, 3, 4, 0]) if nwords else b""
        p = IP(src="10.0.2.2", dst="10.1.0.9", ttl=3, flags="DF",
               options=[IPOption(other)] if other else []) / TCP() / (b"y" * 33)
        out.append((bytes(p), False))
    return out


def _deparsed(raw: bytes, tagged: bool) -> tuple[bytes, int]:
    """The IPv4 header as the ingress pipeline leaves it (new class in DSCP, TTL - 1, the option
    stamped; the checksum field zero, not an input) and the checksum scapy computes for it."""
    from scapy.layers.inet import IP
    ihl = IP(raw).ihl
    hdr = bytearray(raw[:ihl * 4])
    hdr[1] = (5 << 5) | (hdr[1] & 3)
    hdr[8] -= 1
    if tagged:
        hdr[22] = 0x80 | 5
    hdr[10:12] = b"\0\0"
    want = IP(bytes(hdr) + raw[ihl * 4:])
    del want.chksum
    return bytes(hdr), IP(bytes(want)).chksum


def test_ingress_checksum_lists_give_the_header_checksum_at_every_ihl():
    """The deparser's two update lists, evaluated on the parsed fields of tagged and untagged
    packets with options at every IHL, give the checksum scapy computes (ingress recomputes it
    from the fields after rewriting DSCP, TTL and the stamp)."""
    dep = _control(_cpp("include/parser.p4"), "CoflowIngressDeparser")
    lists = _update_lists(dep)
    assert len(lists) == 2, dep
    tagged_list, untagged_list = lists
    assert any(f.startswith("hdr.coflow_opt.") for f in tagged_list)
    assert not any(f.startswith("hdr.coflow_opt.") for f in untagged_list)
    for raw, tagged in _packets():
        hdr, want = _deparsed(raw, tagged)
        got = _eval_list(tagged_list if tagged else untagged_list, _fields_of(hdr, tagged))
        assert got == want, (hdr[0] & 15, tagged, hex(got), hex(want))


def test_egress_ecn_rewrite_keeps_the_checksum_right():
    """ECT(0) / ECT(1) -> CE: the egress deparser sums {~HC, m' - m} (RFC 1624 eqn. 3), from
    ecn_marker.p4's ck_inv = ~hdr_checksum and ecn_delta = 1 (ECT(0)) / 2 (ECT(1))."""
    from scapy.layers.inet import IP, TCP, IPOption
    dep = _control(_cpp("include/parser.p4"), "CoflowEgressDeparser")
    assert _update_lists(dep) == [["meta.ck_inv", "meta.ecn_delta"]]
    marker = _src("include/control/ecn_marker.p4")
    assert re.search(r"meta\.ck_inv\s*=\s*~\s*hdr\.ipv4\.hdr_checksum", marker)
    assert re.search(r"hdr\.ipv4\.ecn\s*==\s*ECN_ECT0\)\s*\{\s*meta\.ecn_delta\s*=\s*1;\s*\}\s*"
                     r"else\s*\{\s*meta\.ecn_delta\s*=\s*2;", marker)
    for ecn in (1, 2):
        for opts in ([], [IPOption(bytes([C.IPOPT_COFLOW_TYPE, 8, 0x85, 1, 0, 0, 0, 9]))]):
            for tos_hi in (0, 0xfc, 0xb8):
                raw = bytes(IP(tos=tos_hi | ecn, ttl=60, options=opts) / TCP())
                hc = IP(raw).chksum
                delta = 1 if ecn == C.ECN_ECT0 else 2
                got = _csum(f"{~hc & 0xFFFF:016b}{delta:016b}")
                marked = IP(raw)
                marked.tos = tos_hi | C.ECN_CE
                del marked.chksum
                assert got == IP(bytes(marked)).chksum, (ecn, tos_hi, opts)


def _bfa(build: str) -> str:
    files = glob.glob(os.path.join(build, "**", "*.bfa"), recursive=True)
    assert files, f"no assembler output (.bfa) under {build}"
    return open(max(files, key=os.path.getsize)).read()


def test_compiled_parser_has_no_residual_and_deparsers_compute_the_checksums(tofino_build):
    """bf-p4c's assembler output: no parser checksum unit in RESIDUAL mode (the defect: two in
    the ingress parser, one in egress), and deparser checksum units in both gresses."""
    bfa = _bfa(tofino_build)
    assert not re.search(r"type:\s*RESIDUAL", bfa), "a parser checksum unit in residual mode"
    dep = [m.start() for m in re.finditer(r"^deparser (ingress|egress):", bfa, re.M)]
    assert len(dep) == 2, "deparser sections"
    for start in dep:
        section = bfa[start:bfa.find("\n", bfa.find("\n", start) + 1) + 20000]
        assert re.search(r"^\s+(full_|partial_)?checksum \d+:", section, re.M), section[:400]


_BFA_CONT = re.compile(r"^T?([BHW])\d+$")
_BFA_FIELD = re.compile(r"^(?:ingress|egress)::(\S+?)(?:\.(\d+)-(\d+))?(?: if .*)?$")


def _bfa_checksum_units(bfa: str, gress: str) -> list[list[tuple[int, list, int]]]:
    """The deparser's full checksum units of one gress in bf-p4c's assembler output, each as the
    list of its partial units' entries: (container bits, [(container lo bit, width, field,
    field lo bit)], swap mask). The containers' contents are read from the dictionary's
    comments (which field bits each container holds)."""
    i = bfa.index(f"\ndeparser {gress}:\n") + 1
    m = re.compile(r"^\S", re.M).search(bfa, bfa.index("\n", i) + 1)
    section = bfa[i:m.start()] if m else bfa[i:]
    holds: dict = {}            # container -> [(lo, width, field, field lo)], from the dictionary
    noted: dict = {}            # the same from the checksum entries' comments (containers not emitted)
    partial: dict = {}          # n -> [(container, swap)]
    full: dict = {}             # n -> [partial n]
    key = cont = None

    def part(lo: int, width: int, spec: str) -> None:
        fm = _BFA_FIELD.match(spec.strip())
        assert fm, spec
        into = holds if key == "dictionary" else noted
        into.setdefault(cont, []).append((lo, width, fm.group(1), int(fm.group(2) or 0)))

    for line in section.splitlines()[1:]:
        if re.match(r"^  \S", line):
            key, cont = line.strip().rstrip(":").strip(), None
            continue
        s = line.strip()
        em = re.match(r"^(?:- )?(T?[BHW]\d+): (\{[^}]*\}|\S+)(?:\s+#\s*(.*))?$", s)
        if em and key and (key == "dictionary" or key.startswith("partial_checksum ")):
            cont = em.group(1)
            if key != "dictionary":
                sm = re.search(r"swap: (\d+)", em.group(2))
                partial.setdefault(int(key.split()[1]), []).append((cont, int(sm.group(1)) if sm else 0))
            if em.group(3):
                part(0, {"B": 8, "H": 16, "W": 32}[_BFA_CONT.match(cont).group(1)], em.group(3))
            continue
        bm = re.match(r"^# - bit\[(\d+)(?:\.\.(\d+))?\]: (.*)$", s)
        if bm and cont:
            hi, lo = int(bm.group(1)), int(bm.group(2) or bm.group(1))
            part(lo, hi - lo + 1, bm.group(3))
        elif not s.startswith("#"):
            cont = None
        if key and key.startswith("full_checksum "):
            fm = re.match(r"^- partial_checksum (\d+):", s)
            if fm:
                full.setdefault(int(key.split()[1]), []).append(int(fm.group(1)))
    units = []
    for n in sorted(full):
        entries = []
        for p in full[n]:
            for c, swap in partial[p]:
                size = {"B": 8, "H": 16, "W": 32}[_BFA_CONT.match(c).group(1)]
                entries.append((size, holds.get(c) or noted[c], swap))
        units.append(entries)
    return units


def _eval_unit(entries, values: dict) -> int:
    """A deparser checksum unit on PHV values: each container's 16-bit halves (the low half
    first), byte-swapped where its swap mask has the half's bit (an 8-bit container sits in
    the low byte unless swapped), summed in ones' complement and inverted."""
    total = 0
    for size, parts, swap in entries:
        v = 0
        for lo, width, field, flo in parts:
            assert field in values, f"{field}: not a header field the test knows"
            v |= ((values[field] >> flo) & ((1 << width) - 1)) << lo
        for h in range(max(1, size // 16)):
            half = (v >> (16 * h)) & 0xFFFF
            if swap >> h & 1:
                half = ((half & 0xFF) << 8) | (half >> 8)
            total += half
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def test_compiled_checksum_units_give_the_header_checksum_at_every_ihl(tofino_build):
    """bf-p4c's own output as the oracle's input: the ingress deparser's two checksum units
    (.bfa: full_checksum / partial_checksum, their containers and what each holds), evaluated
    on the PHV of tagged and untagged packets with options at every IHL, give scapy's checksum;
    each container counts (leaving any one out breaks some packet); the egress unit gives the
    checksum after ECN marking. Absent option words read zero (the parser's zero
    initialization, assumed here as in the PHV)."""
    from scapy.layers.inet import IP, TCP
    units = _bfa_checksum_units(_bfa(tofino_build), "ingress")
    assert len(units) == 2, units

    def fields(unit):
        return {f for _, parts, _ in unit for _, _, f, _ in parts}
    tagged_unit = [u for u in units if any(f.startswith("hdr.coflow_opt.") for f in fields(u))]
    untagged_unit = [u for u in units if not any(f.startswith("hdr.coflow_opt.") for f in fields(u))]
    assert len(tagged_unit) == len(untagged_unit) == 1, [sorted(fields(u)) for u in units]
    packets = [(_deparsed(raw, tagged), tagged) for raw, tagged in _packets()]
    assert {h[0] & 15 for (h, _), t in packets if t} == set(range(7, 16))
    assert {h[0] & 15 for (h, _), t in packets if not t} == set(range(5, 16))
    for unit, tagged in ((tagged_unit[0], True), (untagged_unit[0], False)):
        mine = [(h, want) for (h, want), t in packets if t == tagged]
        for hdr, want in mine:
            got = _eval_unit(unit, _fields_of(hdr, tagged))
            assert got == want, (hdr[0] & 15, tagged, hex(got), hex(want))
        for k in range(len(unit)):
            less = unit[:k] + unit[k + 1:]
            assert any(_eval_unit(less, _fields_of(h, tagged)) != w for h, w in mine), (tagged, unit[k])
    egress = _bfa_checksum_units(_bfa(tofino_build), "egress")
    assert len(egress) == 1 and fields(egress[0]) == {"meta.ck_inv", "meta.ecn_delta"}, egress
    for ecn in (1, 2):                            # ECT(1), ECT(0)
        raw = bytes(IP(tos=0xb8 | ecn, ttl=60) / TCP())
        marked = IP(raw)
        marked.tos = 0xb8 | C.ECN_CE
        del marked.chksum
        values = {"meta.ck_inv": ~IP(raw).chksum & 0xFFFF, "meta.ecn_delta": 1 if ecn == C.ECN_ECT0 else 2}
        assert _eval_unit(egress[0], values) == IP(bytes(marked)).chksum, ecn


# --- 2. the traffic manager ---------------------------------------------------------------

def test_ctl_run_tofino_builds_a_tm_pusher_for_the_server(tmp_path):
    import argparse
    from coflow import topology as topo
    from coflow.ctl.cli import _tofino_tm
    from coflow.tofino import tm
    t = topo.load(os.path.join(REPO, "topologies", "bigswitch-16.json"))
    sw = t.switches[0].name
    args = argparse.Namespace(tofino_port_map=None, mode="dclas", tofino_server="bf_switchd",
                              tofino_chassis_config=None, tofino_bfrt_port=50052, weighted_dclas=False)
    got = _tofino_tm(args, t, {"tofino_shape_mbps": "100"})
    p = got["tm_pusher"]
    assert got["tofino_server"] == "bf_switchd" and p.server == "bf_switchd"
    assert p.plan.discipline == tm.STRICT and p.plan.strict_qids() == list(range(7, -1, -1))
    assert p.plan.shape_bps == 100_000_000 and p.switch_ports[sw] == sorted(t.switches[0].ports)
    args.weighted_dclas = True          # coflow ctl run --weighted-dclas
    w = _tofino_tm(args, t, {})["tm_pusher"].plan
    assert w.discipline == tm.WEIGHTED and w.queues == tm.plan_for_mode("dclas", weighted_dclas=True).queues
    assert w.strict_qids() == [] and len({q.dwrr_weight for q in w.queues}) > 1
    args.weighted_dclas = False
    args.tofino_server = "stratum"
    with pytest.raises(ValueError, match="--tofino-chassis-config: required"):
        _tofino_tm(args, t, {})
    cc = tmp_path / "cc.pb.txt"
    cc.write_text("nodes { id: 1 }\n")
    args.tofino_chassis_config = str(cc)
    assert "node_id_to_qos_config" in _tofino_tm(args, t, {})["tm_pusher"].stratum_text(sw, 1)


# --- 3. slot ages across the timestamp's wrap ---------------------------------------------

class _ProgramClock:
    """The slot clock and the hashed slots' age test as the program computes them, read from
    config.p4 and coflow_counter.p4 (the fixed program: the macros of p4src/include/slot_clock.p4,
    whose compiled P4 value tests/test_slot_clock_bmv2.py checks against the same oracle; the
    program before the fix: a wrap at any step back, the count before the update, an exact age
    compare). ``now(t_ns)`` for a pipe's packet stamped at t_ns, in arrival order;
    ``stored(now)`` what a packet of the owner writes into the slot; ``idle(now, stored)``."""

    def __init__(self):
        import reference_clock as R
        self.R = R
        config = _src("include/control/config.p4")
        counter = _src("include/control/coflow_counter.p4")
        self.shift = C.TNA_EPOCH_SHIFT
        self.step = C.TNA_CLOCK_WRAP_STEP
        tick = re.search(r"SLOT_CLOCK_TICK\(s\.last_ts,\s*s\.wraps,\s*meta\.ts_clock,\s*"
                         r"TNA_CLOCK_WRAP_STEP,\s*wraps\)\s*\}", config)
        self.fixed = bool(tick)
        if self.fixed:
            assert re.search(r"Register<clock_state_t,\s*bit<1>>\(1,\s*"
                             r"\{\(TNA_CLOCK_WRAP_STEP\s*>>\s*1\)\s*-\s*1,\s*0\}\)",
                             config), "the clock's register starts elsewhere"
            assert re.search(r"meta\.epoch\s*=\s*meta\.clock_wraps\s*\+\s*meta\.ts_clock", config)
            assert len(re.findall(r"s\.expire\s*=\s*SLOT_CLOCK_EXPIRE\(meta\.epoch,\s*"
                                  r"\(bit<32>\)SLOT_IDLE_EPOCHS\)", counter)) == 3
            assert "SLOT_CLOCK_IDLE(meta.epoch, s.expire)" in counter
            self.span = C.SLOT_IDLE_EPOCHS
            self.state = [(self.step >> 1) - 1, 0]
        else:
            assert "clock_tick" in config and re.search(r"meta\.ts_clock\s*<\s*s\.last_ts", config)
            self.span = C.SLOT_IDLE_EPOCHS << getattr(C, "TNA_IDLE_SHIFT", 0)
            self.state = [0, 0]

    def now(self, t_ns: int) -> int:
        ts = (t_ns % (1 << 48)) >> self.shift
        last, wraps = self.state
        if self.fixed:
            last, wraps, count = self.R.tick(last, wraps, ts, self.step)
            self.state = [last, wraps]
            return (count + ts) & 0xFFFFFFFF
        last, new_wraps, out = self.R.old_tick(last, wraps, ts, self.step)
        self.state = [last, new_wraps]
        return (out + ts) & 0xFFFFFFFF

    def stored(self, now: int) -> int:
        return self.R.expire(now, self.span) if self.fixed else now

    def idle(self, now: int, stored: int) -> bool:
        return self.R.idle(now, stored) if self.fixed else self.R.old_idle(now, stored, self.span)


def test_idle_slots_stay_idle_across_the_timestamp_wrap():
    clock = _ProgramClock()
    s = 10 ** 9
    wrap = 1 << 48
    # a pipe with traffic every 10 minutes (every 5 s around the wrap); a slot last used 30 s
    # before the timestamp wraps
    times = list(range(0, wrap - 40 * s, 600 * s)) + list(range(wrap - 40 * s, wrap + 60 * s, 5 * s)) \
        + list(range(wrap + 60 * s, wrap + 3600 * s, 600 * s))
    seen = None
    for t in times:
        c = clock.now(t)
        if seen is None and t >= wrap - 30 * s:
            seen = clock.stored(c)
    later = []
    for dt in (3700, 4000, 7000, 6 * 3600):      # packets arrive in time order
        later.append(clock.idle(clock.now(wrap + dt * s), seen))
    assert later == [True] * 4, "a slot idle since before the wrap looks busy after it"
    # a never-used slot (0) is free once the clock passed the idle age, before and after
    assert clock.idle(clock.now(wrap + 7 * 3600 * s), 0)
    # and a busy slot stays busy: last seen 1 s ago
    c = clock.now(wrap + 8 * 3600 * s)
    assert not clock.idle(clock.now(wrap + 8 * 3600 * s + s), clock.stored(c))


def test_unordered_timestamps_neither_free_nor_jam_slots():
    """Tofino stamps packets per port, and they reach the pipe's registers out of order: here,
    at every boundary of the clock's unit for 10 minutes, a packet stamped 500 ns past it arrives
    before one stamped 500 ns before it. An owner sending every second keeps its slot all along;
    once it stops, its slot turns idle after the idle age and stays idle. Fails on the clock that
    counted every step back as a 78-hour wrap: the owner's slot looked idle to the next probe,
    and once the count wrapped the clock fell below every stored clock and slots stayed busy."""
    clock = _ProgramClock()
    s = 10 ** 9
    unit = 1 << clock.shift
    t0 = 3600 * s // unit * unit
    stored = clock.stored(clock.now(t0))
    lost = 0
    second = 0
    for b in range(t0 + unit, t0 + 600 * s, unit):
        now = clock.now(b + 500)
        clock.now(b - 500)
        if (b - t0) // s != second:                   # the owner's packet, once a second
            second = (b - t0) // s
            lost += clock.idle(now, stored)
            stored = clock.stored(now)
        else:                                         # another coflow's probe would take it
            lost += clock.idle(now, stored)
    assert lost == 0, f"an active owner's slot looked idle {lost} times"
    end = t0 + 600 * s
    ages = []
    for a in range(1, 40):                            # probes after the owner stopped
        t = end + a * s
        now = clock.now(t + 500)
        clock.now(t - 500)
        ages.append(clock.idle(now, stored))
    assert True in ages, "the slot stays busy after its owner stopped"
    first = ages.index(True)
    assert 6 <= first + 1 <= 10 and all(ages[first:]), ages


# --- 4. ports ------------------------------------------------------------------------------

def test_ports_are_translated_in_the_source():
    meta = _src("include/metadata.p4")
    assert re.search(r'@p4runtime_translation\("tna/PortId_t",\s*32\)\s*type\s+bit<9>\s+tna_port_t', meta)
    assert re.search(r"set_next_hop\(tna_port_t port", _src("include/control/routing.p4"))
    assert re.search(r"meta\.ig_port:\s*exact\s*@name\(\"ingress_port\"\)", _src("include/control/config.p4"))
    assert re.search(r"meta\.eg_port:\s*exact\s*@name\(\"egress_port\"\)", _src("include/control/ecn_marker.p4"))


def test_ports_are_untranslated_in_bf_switchds_build():
    """bf_switchd's P4Runtime server translates nothing (ports.py): its build keeps 9 bits."""
    meta = _src("include/metadata.p4")
    m = re.search(r"#ifdef TNA_UNTRANSLATED_PORTS\s*\n\s*type\s+bit<9>\s+tna_port_t;\s*\n#else", meta)
    assert m, "no untranslated tna_port_t for bf_switchd's build"
    assert "-DTNA_UNTRANSLATED_PORTS" in open(os.path.join(REPO, "mk", "tofino.mk")).read()


def test_compiled_p4infos_carry_ports_as_each_server_needs(tofino_build):
    """build/tofino: translated (tna/PortId_t, 32 bits) for Stratum; build/tofino-bf_switchd: the
    SDK port's 9 bits, untranslated. Each is refused for the other server."""
    from coflow.dataplane.p4rt import P4InfoHelper
    from coflow.tofino import ports
    h = P4InfoHelper.from_file(os.path.join(tofino_build, "coflow_tna.p4info.txt"))
    nt = h.p4info.type_info.new_types["tna_port_t"]
    assert nt.translated_type.uri == "tna/PortId_t" and nt.translated_type.sdn_bitwidth == 32
    ports.check_build(h, "stratum")
    with pytest.raises(ValueError, match=r"port_role.ingress_port is translated.*build/tofino-bf_switchd"):
        ports.check_build(h, "bf_switchd")
    bf = P4InfoHelper.from_file(os.path.join(REPO, "build", "tofino-bf_switchd", "coflow_tna.p4info.txt"))
    ports.check_build(bf, "bf_switchd")
    with pytest.raises(ValueError, match=r"is untranslated, 9 bits; stratum needs the build in build/tofino "):
        ports.check_build(bf, "stratum")
    from coflow.tofino.p4info import compare_files
    v1 = os.path.join(REPO, "build", "coflow.p4info.txt")
    if os.path.exists(v1):   # make p4's: the bf_switchd build serves the controller as BMv2's does
        assert compare_files(v1, os.path.join(REPO, "build", "tofino-bf_switchd", "coflow_tna.p4info.txt")) == []


def test_check_build_reads_each_port_field():
    """A P4Info with one port field of the other kind is refused, naming that field."""
    from coflow.ctl import model as M
    from coflow.dataplane.p4rt import P4InfoHelper
    from coflow.tofino import ports

    def info(widths):
        tab = "".join(f"""tables {{ preamble {{ id: {i + 1} name: "{t}" }}
  match_fields {{ id: 1 name: "{f}" bitwidth: {w} match_type: EXACT {tn} }} }}
""" for i, (t, f, w, tn) in enumerate(widths[:2]))
        t, f, w, tn = widths[2]
        act = f"""actions {{ preamble {{ id: 9 name: "{t}" }} params {{ id: 1 name: "{f}" bitwidth: {w} {tn} }} }}
"""
        types = """type_info { new_types { key: "tna_port_t" value { translated_type {
  uri: "tna/PortId_t" sdn_bitwidth: 32 } } } }
"""
        return P4InfoHelper.from_text(tab + act + types)
    tr = 'type_name { name: "tna_port_t" }'
    good = [(M.T_PORT_ROLE, "ingress_port", 32, tr), (M.T_ECN_PORT, "egress_port", 32, tr),
            (M.A_NEXT_HOP, "port", 32, tr)]
    ports.check_build(info(good), "stratum")
    for i in range(3):
        bad = list(good)
        bad[i] = bad[i][:2] + (9, "")
        with pytest.raises(ValueError, match=f"{bad[i][1]} is untranslated, 9 bits"):
            ports.check_build(info(bad), "stratum")
    with pytest.raises(ValueError, match="unknown Tofino server"):
        ports.check_build(info(good), "tofino-model")
    with pytest.raises(ValueError, match="P4Info: no table CoflowIngress.config.port_role"):
        ports.check_build(P4InfoHelper.from_text(""), "bf_switchd")


def test_controller_names_ports_per_server(tmp_path):
    from coflow import topology as topo
    from coflow.ctl import model as M
    from coflow.ctl import translate as TR
    from coflow.tofino import ports
    t = topo.leafspine(2, 2, 2)
    st = TR.static_state(t, topo.routes(t), "dclas", __import__("coflow.params").params.DclasParams(K=8),
                         target="tofino", ecn_threshold_bytes=30_000)
    leaf = t.switches[0].name
    pm = ports.PortMap({leaf: {p: 128 + 8 * p for p in t.switches[0].ports}})
    bf = ports.apply(st, pm, "bf_switchd")[leaf]
    sr = ports.apply(st, pm, "stratum")[leaf]
    bf_ports = {dict(e.params)["port"] for e in bf if isinstance(e, M.Member)}
    sr_ports = {dict(e.params)["port"] for e in sr if isinstance(e, M.Member)}
    assert bf_ports == {128 + 8 * p for p in sr_ports} and sr_ports <= set(t.switches[0].ports)
    ecn = [dict(e.match)["egress_port"] for e in bf if getattr(e, "table", "") == M.T_ECN_PORT]
    assert ecn and all(p >= 128 for p in ecn)
    # the file form, and its errors
    f = tmp_path / "pm.json"
    f.write_text('{"format": "coflow-tofino-ports/1", "switches": {"%s": {"1": 132}}}' % leaf)
    assert ports.load(str(f), t).sdk_port(leaf, 1) == 132
    f.write_text('{"format": "coflow-tofino-ports/1", "switches": {"%s": {"1": 600}}}' % leaf)
    with pytest.raises(ValueError, match="SDK port 600"):
        ports.load(str(f), t)
    f.write_text('{"format": "coflow-tofino-ports/1", "switches": {"nope": {}}}')
    with pytest.raises(ValueError, match="'nope' is not in the topology"):
        ports.load(str(f), t)
    f.write_text('{"format": "x"')
    with pytest.raises(ValueError, match=r"pm.json:1: not JSON"):
        ports.load(str(f), t)


# --- 5. ECN depth, FCS, counted length ----------------------------------------------------

def test_ecn_depth_is_compared_in_cells_without_a_wrapping_shift():
    from coflow.tofino.target import BMV2, TOFINO
    marker = _src("include/control/ecn_marker.p4")
    assert not re.search(r"ecn_\w+\s*<<", marker), "the depth is shifted (wraps at 4.2 MB)"
    assert re.search(r"meta\.ecn_depth\s*=\s*\(bit<32>\)eg_intr_md\.enq_qdepth;", marker)
    # the largest Tofino 1 depth (19 bits of cells, 42 MB) fits; thresholds in cells, rounded up
    assert ((1 << 19) - 1) < 1 << 32
    assert TOFINO.ecn_threshold_param(30_000) == 375 and TOFINO.ecn_threshold_param(30_001) == 376
    assert BMV2.ecn_threshold_param(30_000) == 30_000 << C.VQ_SHIFT
    from coflow import topology as topo
    from coflow.ctl import translate as TR
    t = topo.leafspine(2, 2, 2)
    ents = TR.ecn_entities(t, t.switches[0].name, 10.0, 22_000_000, "tofino")
    assert {dict(e.params)["threshold_level"] for e in ents} == {275_000}


def test_fcs_is_in_tofinos_payload_conversion_and_meter_sizes():
    from coflow.ctl import translate as TR
    from coflow.ctl.rates import FlowProgress
    from coflow.tofino.target import BMV2, TOFINO
    assert (BMV2.fcs_bytes, TOFINO.fcs_bytes) == (0, C.TNA_COUNTED_FCS_BYTES) == (0, 4)
    n = 1000                                      # full-size segments, as each counter counts them
    for tg in (BMV2, TOFINO):
        frames = n * tg.max_frame_bytes
        assert TR.payload_bytes(frames, n, tg.fcs_bytes) == n * C.TCP_MSS_BYTES
        fp = FlowProgress(tg.fcs_bytes)
        fp.observe((1, 0), 0, 1, ("e", 0), frames, n)
        assert fp.sent((1, 0)) == {(0, 1): n * C.TCP_MSS_BYTES}
    # a meter passes the frame rate of the payload rate, FCS included on Tofino
    s = TR.CtlSettings(link_mbps=1000.0)
    rate = 5e7                                    # above the min_rate_frac floor
    for tg in (BMV2, TOFINO):
        cfg = TR.meter_config(0, rate, s, tg.fcs_bytes)
        assert cfg.cir == int(-(-rate * tg.max_frame_bytes // C.TCP_MSS_BYTES))
    from coflow import topology as topo
    import numpy as np
    ctx = TR.MeterContext(topo.leafspine(2, 2, 2), fcs_bytes=4)   # the context's own meters
    ctx.update([(1, 0)], np.array([0]), np.array([0]), np.array([1]), np.array([rate]), None, s)
    from coflow.ctl import model as M
    (m,) = [e for d in ctx.state().values() for e in d.values() if isinstance(e, M.MeterConfig)]
    assert m.cir == TR.meter_config(0, rate, s, 4).cir > TR.meter_config(0, rate, s).cir


def test_counted_length_is_capped_at_the_mtu():
    """A 64-byte frame claiming total_len 65,535 must not count ~1,000x its size in the byte
    registers: the count is min(total_len, TNA_MAX_COUNTED_IP_LEN) + 14."""
    sanity = _src("include/control/sanity.p4")
    counter = _src("include/control/coflow_counter.p4")
    assert re.search(r"meta\.ip_len\s*=\s*min\(hdr\.ipv4\.total_len,\s*\(bit<16>\)TNA_MAX_COUNTED_IP_LEN\)", sanity)
    m = re.search(r"meta\.frame_bytes\s*=\s*([^;]+);", counter)
    assert m and "total_len" not in m.group(1) and "meta.ip_len" in m.group(1)
    assert C.TNA_MAX_COUNTED_IP_LEN == C.IP_MTU
    units = (min(65535, C.TNA_MAX_COUNTED_IP_LEN) + C.ETH_HEADER_BYTES + 32) >> C.TNA_BYTES_UNIT_SHIFT
    assert units * 64 / 64 <= 25                  # <= 24x a minimum frame, not 1,024x


# --- 6. the report shadow, the option's stamp, egress byte counts --------------------------

def _enclosing_ifs(body: str, pos: int) -> list[str]:
    """The conditions of the ``if (...) {`` blocks of ``body`` that enclose ``pos``."""
    conds, depth = [], 0
    i = pos
    while i > 0:
        i -= 1
        if body[i] == "}":
            depth += 1
        elif body[i] == "{":
            if depth == 0:
                head = body[:i][body[:i].rfind(";") + 1:]       # the statement the brace opens
                m = re.search(r"if\s*\((.*)\)\s*$", head, re.S)
                if m:
                    conds.append(" ".join(m.group(1).split()))
            else:
                depth -= 1
    return conds


def test_report_shadow_follows_every_counted_packet_of_a_reporting_slot():
    """The shadow of coflow_bytes_reg (report_units_reg) is updated (and restarted) for every
    counted packet of a slot that report_step can name, whether the slot has a report_step
    entry yet or not: the slot's first digest is right whatever order the controller's
    writes land in (the controller also orders them: tests/test_ctl_sync.py). On the program
    before the fix the update sat under ``meta.report_on == 1``: a coflow whose slot entry
    landed before its step entry kept the previous owner's count in the shadow for its life."""
    rep = _control(_src("include/control/report.p4"), "Report")
    apply = rep[rep.index("apply {"):]
    calls = [m.start() for m in re.finditer(r"units_(add|restart)\.execute\(meta\.slot\)", apply)]
    assert len(calls) == 2
    for pos in calls:
        conds = _enclosing_ifs(apply, pos)
        assert not any("report_on" in c for c in conds), conds
        outer = " ".join(conds)
        for need in ("meta.decide == 1", "meta.route_miss == 0", "meta.slot_assigned == 1",
                     "meta.slot[TNA_SLOT_BITS - 1:TNA_REPORT_SLOT_BITS] == 0"):
            assert need in outer, (need, conds)
    # the crossing test (xor, mask, mark) still needs the step's entry
    for t in ("t_xor.apply()", "t_mask.apply()", "t_mark.apply()"):
        assert any("meta.report_on == 1" in c for c in _enclosing_ifs(apply, apply.index(t))), t
    # the shadow has one word per slot report_step can name, and the slot test matches its size
    assert C.TNA_REPORT_TABLE_SIZE == 1 << C.TNA_REPORT_SLOT_BITS == C.TNA_METERED_SLOTS
    size = _src("include/size.p4")
    assert re.search(r"#define TNA_REPORT_SLOT_BITS %d\b" % C.TNA_REPORT_SLOT_BITS, size)
    assert re.search(r"Register<tna_units_t, tna_slot_t>\(TNA_REPORT_TABLE_SIZE, 0\) report_units_reg", rep)


def test_stamp_writes_the_option_only_into_a_valid_option():
    """An untagged packet's coflow_opt is invalid, and bf-p4c may overlay an invalid header's
    PHV containers with fields the packet carries (mutually exclusive headers share
    containers): every action writing hdr.coflow_opt is applied only under
    ``hdr.coflow_opt.isValid()``. The program before the fix wrote prio and stamped in the
    actions every packet runs."""
    st = _control(_src("include/control/stamp.p4"), "Stamp")
    actions = dict(re.findall(r"action (\w+)\(\)\s*\{(.*?)\n    \}", st, re.S))
    writers = {a for a, b in actions.items() if re.search(r"hdr\.coflow_opt\.\w+\s*=", b)}
    assert writers, "the option's class and stamp are written somewhere"
    tables = dict(re.findall(r"table (\w+)\s*\{\s*actions = \{\s*(\w+);", st))
    apply = st[st.index("apply {"):]
    for t, a in tables.items():
        if a in writers:
            pos = apply.index(f"{t}.apply()")
            assert "hdr.coflow_opt.isValid()" in _enclosing_ifs(apply, pos), t
    # no other statement of the control writes the option
    outside = re.sub(r"action (\w+)\(\)\s*\{.*?\n    \}", "", st, flags=re.S)
    assert not re.search(r"hdr\.coflow_opt\.\w+\s*=", outside)


def test_egress_queue_bytes_leave_out_the_bridged_header():
    """Egress receives the bridged header in front of the frame and counts it: queue_deq takes
    it out (Counter.count's adjust_byte_count, a constant; bf-p4c's v1model translation does
    the same, arch/v1model.cpp AddAdjustByteCount), so enqueued and dequeued bytes of a queue
    compare. Ingress counters see no bridged header and take nothing out."""
    qs = _control(_src("include/control/queue_stats.p4"), "EgressQueueStats")
    assert re.search(r"queue_deq\.count\(meta\.queue_idx,\s*meta\.bridged\.minSizeInBytes\(\)\)", qs)
    stamp = _src("include/control/stamp.p4")
    assert re.search(r"queue_enq\.count\(meta\.queue_idx\);", stamp)

"""ECMP polarization on Tofino: the TNA program's per-switch hash window (``ecmp_window``,
``set_ecmp_window(shift)``; p4src/tna/include/control/routing.p4), checked on bf-p4c's own
outputs (skipped with the reason without bf-p4c, like tests/test_tofino_compile.py):

- the P4Info has the controller's table and action under v1model's names and widths;
- the compiled flow hash is zlib's CRC-32 of the 5-tuple (context.json's dynamic hash
  description), written whole into one PHV container (.bfa);
- the window table's compiled actions (.bfa: its constant entries and each action's ALU
  instructions, evaluated here) give v1model's ``(bit<16>)(flow_hash >> shift)``;
- the selector's hash is the window's bits (IDENTITY) and nothing else: the member is chosen
  from the window alone;
- through the compiled path, an edge (shift 0) and an aggregation switch (shift 8) choose
  independently (the polarization: with one window for both they always agree).

Without the compiler: every state change that ``decide`` gates also tests routing's miss
(``decide`` leaves it out so that routing may wait for its window without lengthening the
owner register's chain)."""
from __future__ import annotations

import glob
import os
import re
import struct
import zlib

import pytest

from coflow.dataplane import constants as C

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TNA = os.path.join(REPO, "p4src", "tna")
V1_P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")

T_WINDOW = "CoflowIngress.routing.ecmp_window"
A_WINDOW = "CoflowIngress.routing.set_ecmp_window"
T_KEY = "CoflowIngress.routing.t_ecmp_key"
T_HASH = "CoflowIngress.routing.t_flow_hash"
SELECTION = "CoflowIngress.routing.ecmp_select"
FIVE_TUPLE = ["hdr.ipv4.src_addr", "hdr.ipv4.dst_addr", "hdr.ipv4.protocol", "meta.l4_sport",
              "meta.l4_dport"]
#: the shifts the controller writes, one per fat-tree layer (edge, aggregation, core)
LAYER_SHIFTS = (0, 8, 16)


def _bfa(build: str) -> str:
    files = glob.glob(os.path.join(build, "**", "*.bfa"), recursive=True)
    assert files, f"no assembler output (.bfa) under {build}"
    return open(max(files, key=os.path.getsize)).read()


def _block(bfa: str, p4name: str, kind: str = r"\w+") -> str:
    """The .bfa block (a stage's table or attached table) whose ``p4: { name: ...}`` is p4name."""
    m = re.search(r"^  (" + kind + r") \S+( \d+)?:\n    p4: \{ name: " + re.escape(p4name) + r"[,} ]",
                  bfa, re.M)
    assert m, f"{p4name}: no {kind} block in the assembler output"
    end = re.compile(r"^(  \S|\S)", re.M).search(bfa, m.end())
    return bfa[m.start():end.start() if end else len(bfa)]


def _phv(bfa: str) -> dict:
    """Ingress field -> [(field lo bit, container, container lo bit, width)] from the .bfa's
    ``phv ingress:`` section (``meta.x: {  stage 1: W32 }``, ``meta.y.0-11: { ...: W9(0..11) }``)."""
    i = bfa.index("\nphv ingress:\n") + len("\nphv ingress:\n")
    out: dict = {}
    for line in bfa[i:].splitlines():
        if not line.startswith("  "):
            break
        m = re.match(r"^  (\S+?)(?:\.(\d+)-(\d+))?: \{\s*stage [\d.]+: (T?[BHW]\d+)(?:\((\d+)(?:\.\.(\d+))?\))?\s*\}", line)
        if not m:
            continue
        field, flo, cont = m.group(1), int(m.group(2) or 0), m.group(4)
        size = {"B": 8, "H": 16, "W": 32}[cont.lstrip("T")[0]]
        clo = int(m.group(5)) if m.group(5) else 0
        chi = int(m.group(6)) if m.group(6) else (clo if m.group(5) else size - 1)
        out.setdefault(field, []).append((flo, cont, clo, chi - clo + 1))
    return out


class _Phv:
    """Container values, read and written through the .bfa's field map."""

    def __init__(self, layout: dict):
        self.layout, self.c = layout, {}

    @staticmethod
    def size(cont: str) -> int:
        return {"B": 8, "H": 16, "W": 32}[cont.lstrip("T")[0]]

    def operand(self, text: str):
        """(container, lo bit in it, width) of an operand ``W32``, ``W33(0..15)``, ``W32(8)``
        (a source from bit 8, rotating), ``meta.x`` or ``meta.x(24..31)``."""
        m = re.match(r"^(\S+?)(?:\((\d+)(?:\.\.(\d+))?\))?$", text.strip())
        assert m, text
        name, a, b = m.group(1), m.group(2), m.group(3)
        if re.match(r"^T?[BHW]\d+$", name):
            size = self.size(name)
            lo = int(a or 0)
            return name, lo, (int(b) - lo + 1) if b else (size - lo if a is None else None)
        parts = self.layout.get(name)
        assert parts and len(parts) == 1 and parts[0][0] == 0, f"{name}: split field {parts}"
        _, cont, clo, width = parts[0]
        lo, hi = (int(a), int(b if b is not None else a)) if a is not None else (0, width - 1)
        assert hi < width, text
        return cont, clo + lo, hi - lo + 1

    def read(self, cont: str, lo: int, width: int) -> int:
        size, v = self.size(cont), self.c.get(cont, 0)
        return sum(((v >> ((lo + k) % size)) & 1) << k for k in range(width))

    def write(self, cont: str, lo: int, width: int, value: int) -> None:
        v = self.c.get(cont, 0)
        for k in range(width):
            v = (v & ~(1 << (lo + k))) | (((value >> k) & 1) << (lo + k))
        self.c[cont] = v

    def field(self, name: str) -> int:
        return self.read(*self.operand(name))

    def set_field(self, name: str, value: int) -> None:
        self.write(*self.operand(name), value)

    def run(self, instr: str) -> None:
        """One ALU instruction of the forms bf-p4c emits for a move (``set D, S``, and
        ``deposit-field D, S1(rot), S2`` where S2 is D's own container); any other form fails
        the test, to be taught here."""
        op, _, args = instr.partition(" ")
        ops = [a.strip() for a in re.split(r",\s*(?![^(]*\))", args)]
        if op == "set" and len(ops) == 2:
            d, s = self.operand(ops[0]), self.operand(ops[1])
            self.write(*d, self.read(s[0], s[1], d[2]))
        elif op == "deposit-field" and len(ops) == 3:
            d, s1, s2 = self.operand(ops[0]), self.operand(ops[1]), self.operand(ops[2])
            assert s2[0] == d[0], f"{instr}: a background other than the destination"
            self.write(*d, self.read(s1[0], s1[1], d[2]))
        else:
            raise AssertionError(f"ALU instruction this test does not know: {instr!r}")


def _actions(block: str) -> dict:
    """Action name -> (handle, [ALU instructions]) of a .bfa table block."""
    out: dict = {}
    for m in re.finditer(r"^      (\S+)\(\d+, \d+\):\n((?:      - .*\n)*)", block, re.M):
        lines = [ln[len("      - "):] for ln in m.group(2).splitlines()]
        handle = next(int(ln.split(":")[1], 16) for ln in lines if ln.startswith("handle:"))
        instrs = [ln for ln in lines if re.match(r"^[a-z][\w-]* ", ln) and ":" not in ln.split()[0]]
        out[m.group(1)] = (handle, instrs)
    return out


def _static_entries(block: str, key: str) -> dict:
    """Constant entries of a .bfa table block: key value -> action handle."""
    out = {}
    for m in re.finditer(r"- field_name: " + re.escape(key) + r"\n\s+value: \"(0x[0-9a-f]+)\"\n"
                         r"\s+action_handle: (0x[0-9a-f]+)", block):
        out[int(m.group(1), 16)] = int(m.group(2), 16)
    return out


class _Compiled:
    """The compiled ECMP path, as the .bfa describes it."""

    def __init__(self, build: str):
        bfa = _bfa(build)
        self.layout = _phv(bfa)
        key_tbl = _block(bfa, T_KEY)
        self.actions = _actions(key_tbl)
        by_handle = {h: name for name, (h, _) in self.actions.items()}
        self.entries = {v: by_handle[h] for v, h in _static_entries(key_tbl, "meta.ecmp_shift").items()}
        m = re.search(r"^    default_action: (\S+)", key_tbl, re.M)
        self.default = m.group(1)
        self.hash_tbl = _block(bfa, T_HASH)
        self.selection = _block(bfa, SELECTION, "selection")

    def key(self, flow_hash: int, shift: int) -> int:
        """meta.ecmp_key after t_ecmp_key, from a zeroed PHV (the parser's zero init)."""
        phv = _Phv(self.layout)
        phv.set_field("meta.flow_hash", flow_hash)
        for instr in self.actions[self.entries.get(shift, self.default)][1]:
            phv.run(instr)
        return phv.field("meta.ecmp_key")

    def selector_bits(self) -> list[tuple[int, int]]:
        """(selector hash bit, ecmp_key bit) of the selection's input hash."""
        xbar = self.selection[self.selection.index("input_xbar:"):]
        fields = set(re.findall(r"\d+: ([\w.]+)(?:\(\d+\.\.\d+\))?", xbar.split("hash")[0]))
        assert fields == {"meta.ecmp_key"}, f"the selector hashes {fields}, not the window alone"
        out = []
        for m in re.finditer(r"^\s+(\d+)\.\.(\d+): (\S+?)(?:\((\d+)\.\.(\d+)\))?$", xbar, re.M):
            a, b, field = int(m.group(1)), int(m.group(2)), m.group(3)
            assert field == "meta.ecmp_key", f"selector hash bits {a}..{b} from {m.group(0).strip()}"
            lo = int(m.group(4) or 0)
            out += [(a + k, lo + k) for k in range(b - a + 1)]
        return out


def _five_tuple_bytes(src: int, dst: int, proto: int, sport: int, dport: int) -> bytes:
    return struct.pack(">IIBHH", src, dst, proto, sport, dport)


# --- P4Info --------------------------------------------------------------------------------

def _window_objects(path: str):
    from coflow.dataplane.p4rt import P4InfoHelper
    info = P4InfoHelper.from_file(path).p4info
    table = next((t for t in info.tables if t.preamble.name == T_WINDOW), None)
    action = next((a for a in info.actions if a.preamble.name == A_WINDOW), None)
    assert table is not None and action is not None, f"{path}: {T_WINDOW} / {A_WINDOW} missing"
    return table, action


def test_window_table_in_the_p4info(tofino_build):
    """The controller's names and widths, as v1model's: a keyless one-entry table whose
    default action is set_ecmp_window(shift: 8 bits), compiled default 0."""
    table, action = _window_objects(os.path.join(tofino_build, "coflow_tna.p4info.txt"))
    assert list(table.match_fields) == [] and table.size == 1
    assert [r.id for r in table.action_refs] == [action.preamble.id]
    assert [(p.name, p.bitwidth) for p in action.params] == [("shift", 8)]
    default = table.initial_default_action
    assert default.action_id == action.preamble.id
    assert [int.from_bytes(a.value, "big") for a in default.arguments] == [0]
    if os.path.exists(V1_P4INFO):
        v1_table, v1_action = _window_objects(V1_P4INFO)
        assert [(p.name, p.bitwidth) for p in v1_action.params] == [("shift", 8)]
        assert list(v1_table.match_fields) == [] and v1_table.size == 1


# --- the compiled hash, window and selector ------------------------------------------------

def test_compiled_flow_hash_is_crc32_of_the_five_tuple(tofino_build):
    """context.json's description of the flow hash: zlib's CRC-32 (reflected 0x04C11DB7, init
    and final xor all ones) over src, dst, protocol, L4 ports in that order, as v1model's
    crc32; the .bfa's t_flow_hash writes all 32 bits of meta.flow_hash's container from it."""
    import json
    ctx = json.load(open(os.path.join(tofino_build, "pipe", "context.json")))
    calcs = [c for c in ctx.get("dynamic_hash_calculations", [])
             if c.get("name", "").startswith("CoflowIngress.routing.flow_hash")]
    assert len(calcs) == 1, [c.get("name") for c in ctx.get("dynamic_hash_calculations", [])]
    algo = [a for a in calcs[0]["algorithms"] if a.get("is_default", True)][0]
    assert algo["type"] == "crc" and int(algo["poly"], 16) & 0xFFFFFFFF == 0x04C11DB7
    assert int(algo["init"], 16) == C.TNA_CRC_INIT and int(algo["final_xor"], 16) == C.TNA_CRC_XOR
    assert algo["reverse"] is True
    fields = [f["name"] for f in calcs[0]["field_lists"][0]["fields"]]
    assert fields == FIVE_TUPLE, fields
    comp = _Compiled(tofino_build)
    (cont, clo, width), = [(c, lo, w) for _, c, lo, w in comp.layout["meta.flow_hash"]]
    assert (clo, width) == (0, 32)
    sets = re.findall(r"- set (\S+), hash_dist\([\d, ]+, 0\.\.31\)", comp.hash_tbl)
    assert sets in ([f"{cont}(0..31)"], ["meta.flow_hash"]), sets
    # the CRC those parameters describe is zlib's
    assert zlib.crc32(b"123456789") == 0xCBF43926


def test_compiled_window_is_the_shifted_hash(tofino_build):
    """t_ecmp_key as compiled (its constant entries on meta.ecmp_shift and each action's ALU
    instructions, run on the PHV map): ecmp_key = (bit<16>)(flow_hash >> shift), v1model's
    expression, for every shift the controller writes, 24, and >= 32 (0). A shift below 32
    that is not a multiple of 8 gives 0 on Tofino (p4src/README.md's differences)."""
    import random
    comp = _Compiled(tofino_build)
    assert set(LAYER_SHIFTS) <= set(comp.entries), comp.entries
    rng = random.Random(7)
    hashes = [0, 0xFFFFFFFF, 0x12345678, 0x80000001] + [rng.getrandbits(32) for _ in range(200)]
    for shift in list(range(0, 41)) + [255]:
        for h in hashes:
            v1model = (h >> shift) & 0xFFFF
            want = v1model if (shift % 8 == 0 or shift >= 32) else 0
            assert comp.key(h, shift) == want, (shift, hex(h), hex(comp.key(h, shift)))
    # the windows differ: no two shifts the controller writes give one key for all flows
    for a in LAYER_SHIFTS:
        for b in LAYER_SHIFTS:
            if a < b:
                assert any(comp.key(h, a) != comp.key(h, b) for h in hashes), (a, b)


def test_compiled_selector_hashes_the_window_alone(tofino_build):
    """The selection's input: meta.ecmp_key and nothing else, IDENTITY (selector hash bit i is
    window bit i), enough bits for the largest group (TNA_ECMP_MAX_GROUP_SIZE members)."""
    bits = _Compiled(tofino_build).selector_bits()
    assert bits, "the selector hashes nothing"
    assert all(a == b for a, b in bits), bits
    assert sorted(a for a, _ in bits) == list(range(len(bits)))
    assert 1 << len(bits) >= C.TNA_ECMP_MAX_GROUP_SIZE and len(bits) <= C.TNA_ECMP_HASH_BITS


def test_compiled_layers_choose_independently(tofino_build):
    """The polarization, through the compiled path (zlib's CRC-32, t_ecmp_key, the selector's
    hash bits): 192 cross-pod UDP flows from pod 0 (4 hosts x 48 source ports); an edge
    (shift 0) and an aggregation switch (shift 8) pick between 2 uplinks by the selector
    hash's low bit. With one window for both (the defect) they agree on every flow and half
    of the four edge-aggregation-core combinations are never used; with the windows, each
    combination carries about a quarter of the flows."""
    comp = _Compiled(tofino_build)
    low = min(a for a, _ in comp.selector_bits())
    flows = [(0x0A000000 | (e << 8) | h, 0x0A020002, 17, 40000 + p, 5001)
             for e in range(2) for h in (2, 3) for p in range(48)]
    combos: dict = {}
    for f in flows:
        crc = zlib.crc32(_five_tuple_bytes(*f))
        pick = tuple((comp.key(crc, s) >> low) & 1 for s in (0, 8))
        combos[pick] = combos.get(pick, 0) + 1
        assert (comp.key(crc, 0) >> low) & 1 == (crc >> low) & 1
    assert len(combos) == 4 and min(combos.values()) >= len(flows) // 8, combos
    same = {(b, b) for b in (0, 1)}
    assert sum(n for k, n in combos.items() if k in same) < len(flows), combos


# --- without the compiler ------------------------------------------------------------------

def _src(rel: str) -> str:
    text = open(os.path.join(TNA, rel)).read()
    return re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", text), flags=re.S)


def test_every_state_change_decide_gates_also_tests_the_route_miss():
    """decide leaves routing's miss out (coflow_tna.p4: routing waits for its window): each
    condition on decide outside the forward branch (the owner and byte registers, the report
    digest, the flow meter) tests route_miss == 0 too, so an unrouted packet counts nothing,
    as on v1model (whose decide includes the route)."""
    main = _src("coflow_tna.p4")
    i = main.index("control CoflowIngress(")
    body = main[i:main.index("control CoflowEgress(")]
    fwd = body.index("if (meta.forward == 1 && hdr.coflow_opt.isValid())")
    outside = body[:fwd]
    conds = re.findall(r"if \(([^{]*meta\.decide == 1[^{]*)\)\s*\{", outside)
    conds += re.findall(r"if \(([^{]*meta\.decide == 1[^{]*)\)\s*\{", _src("include/control/coflow_counter.p4"))
    conds += re.findall(r"if \(([^{]*meta\.decide == 1[^{]*)\)\s*\{", _src("include/control/report.p4"))
    assert len(conds) == 3, conds
    for c in conds:
        assert re.search(r"meta\.route_miss == 0", c), c
    assert re.search(r"if \(meta\.drop_reason == DropReason_t\.NONE\) \{\s*if \(meta\.route_miss == 0\) "
                     r"\{\s*meta\.forward = 1;", body), "forward must include the route"


def test_phv_evaluator_on_hand_checked_moves():
    """The evaluator above on forms bf-p4c emitted for other layouts of this program (a
    16-bit key as two bytes in one 32-bit container: ``deposit-field W33(0..31), W32(8),
    W33``; bf-asm's DepositField::encode rotates the source so that its bit 8 lands on the
    destination's bit 0), checked by hand."""
    phv = _Phv({"meta.flow_hash": [(0, "W32", 0, 32)], "meta.hi": [(0, "W33", 0, 8)],
                "meta.lo": [(0, "W33", 24, 8)], "meta.k": [(0, "H1", 0, 16)]})
    phv.set_field("meta.flow_hash", 0x12345678)
    phv.run("deposit-field W33(0..31), W32(8), W33")        # window 0: hi = h[15:8], lo = h[7:0]
    assert (phv.field("meta.hi"), phv.field("meta.lo")) == (0x56, 0x78)
    phv.run("deposit-field W33(0..31), W32(24), W33")       # window 16
    assert (phv.field("meta.hi"), phv.field("meta.lo")) == (0x12, 0x34)
    phv.run("set meta.k, meta.flow_hash(8..23)")
    assert phv.field("meta.k") == 0x3456
    phv.run("set meta.k(0..7), meta.flow_hash(24..31)")
    assert phv.field("meta.k") == 0x3412                    # the high byte kept
    with pytest.raises(AssertionError, match="does not know"):
        phv.run("add meta.k, meta.k, 1")

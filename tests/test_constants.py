"""One source for the constants Python and P4 share (issue 21).

Every ``const``, ``#define`` and serializable ``enum`` of the P4 programs (the v1model one,
``p4src/coflow.p4`` with ``p4src/include/``, and the TNA one under ``p4src/tna/`` when it is
there) is read here and compared with :mod:`coflow.dataplane.constants`: a P4 constant is either
equal to the Python constant of the same name, or in :data:`P4_ONLY` (with why). A constant added
on one side only, or changed on one side, fails this test.

The modes, port roles and drop reasons are serializable enums in P4 (``define.p4``: ``Mode_t``,
``PortRole_t``, ``DropReason_t``) and IntEnums in Python (:data:`P4_ENUMS`): every program must
declare each of them, with exactly the Python members and values.
"""
from __future__ import annotations

import ast
import enum
import operator
import os
import re

import pytest

from coflow.dataplane import constants as C

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4SRC = os.path.join(REPO, "p4src")

#: Constants that only the P4 programs use, and why.
P4_ONLY = {
    # protocol numbers the parser and tables match on; Python uses scapy's
    "ETHERTYPE_IPV4", "IP_PROTO_TCP", "IP_PROTO_UDP", "IP_PROTO_ICMP",
    # table, selector and register sizes the controller never indexes
    "PORT_ROLE_TABLE_SIZE", "ROUTING_TABLE_SIZE", "ECMP_SELECTOR_SIZE", "ECMP_HASH_WIDTH",
    "COFLOW_SLOT_TABLE_SIZE", "OVERRIDE_TABLE_SIZE", "DCLAS_TABLE_SIZE",
    "UNTAGGED_CLASS_TABLE_SIZE", "FLOW_METER_TABLE_SIZE", "FIFO_LM_TABLE_SIZE",
    # v1model digest receiver (BMv2's learn list id; P4Runtime names digests by their struct)
    "REPORT_DIGEST_RECEIVER",
    # meter colours: the target's encoding (v1model RED = 2, TNA RED = 3), read by P4 only
    "METER_GREEN", "METER_YELLOW", "METER_RED",
}

#: The serializable enums both programs share (define.p4) -> their Python IntEnum. Any other
#: serializable enum is compared with the IntEnum of its name without ``_t``.
P4_ENUMS = {"Mode_t": C.P4Mode, "PortRole_t": C.PortRole, "DropReason_t": C.DropReason}

_LIT = re.compile(r"\b(?:\d+[ws])?(0[xX][0-9a-fA-F_]+|0[bB][01_]+|\d[\d_]*)\b")
_CONST = re.compile(r"^\s*const\s+[\w<>\s]+?\s+([A-Z][A-Z0-9_]*)\s*=\s*([^;]+);", re.M)
_DEFINE = re.compile(r"^\s*#define\s+([A-Z][A-Z0-9_]*)[ \t]+([^\n/]+?)\s*(?:/[*/].*)?$", re.M)
_ENUM = re.compile(r"enum\s+bit<\d+>\s+(\w+)\s*\{([^}]*)\}", re.S)
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
        ast.BitOr: operator.or_, ast.BitAnd: operator.and_}


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def _eval(expr: str, names: dict[str, int]) -> int | None:
    """A P4 constant expression of literals, known names and + - * / << >> | & ( )."""
    py = _LIT.sub(lambda m: str(int(m.group(1).replace("_", ""), 0)), expr.strip())
    py = py.replace("/", "//")
    try:
        tree = ast.parse(py, mode="eval")
    except SyntaxError:
        return None

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name) and n.id in names:
            return names[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            return _OPS[type(n.op)](ev(n.left), ev(n.right))
        raise ValueError(ast.dump(n))
    try:
        return ev(tree)
    except (ValueError, KeyError):
        return None


def p4_constants(files: list[str]) -> tuple[dict[str, int], dict[str, dict[str, int]], list[str]]:
    """(constants, enums, unevaluated) of ``files`` in order (later files see earlier names)."""
    consts: dict[str, int] = {}
    enums: dict[str, dict[str, int]] = {}
    unevaluated: list[str] = []
    for path in files:
        text = _strip_comments(open(path).read())
        items = sorted([(m.start(), m.group(1), m.group(2)) for m in _CONST.finditer(text)]
                       + [(m.start(), m.group(1), m.group(2)) for m in _DEFINE.finditer(text)])
        for _, name, expr in items:
            v = _eval(expr, consts)
            if v is None:
                unevaluated.append(f"{os.path.relpath(path, REPO)}: {name} = {expr.strip()}")
            elif name in consts and consts[name] != v:
                unevaluated.append(f"{os.path.relpath(path, REPO)}: {name} defined twice ({consts[name]}, {v})")
            else:
                consts[name] = v
        for m in _ENUM.finditer(text):
            members = {}
            for part in m.group(2).split(","):
                if "=" in part:
                    k, _, expr = part.partition("=")
                    members[k.strip()] = _eval(expr, consts)
            enums[m.group(1)] = members
    return consts, enums, unevaluated


def python_enum(p4_name: str):
    py = P4_ENUMS.get(p4_name) or getattr(C, p4_name.removesuffix("_t"), None)
    return py if isinstance(py, type) and issubclass(py, enum.IntEnum) else None


def enum_differences(enums: dict[str, dict[str, int]]) -> list[str]:
    """What differs between a program's serializable enums and the Python IntEnums: a shared
    enum missing, a member missing or extra on either side, a different value."""
    out = [f"enum {n} missing (Python {py.__name__})" for n, py in P4_ENUMS.items() if n not in enums]
    for ename, members in sorted(enums.items()):
        py = python_enum(ename)
        if py is None:
            out.append(f"P4 enum {ename} has no Python IntEnum")
            continue
        want = {m.name: int(m) for m in py}
        for m in sorted(set(members) | set(want)):
            if members.get(m) != want.get(m):
                out.append(f"{ename}.{m}: P4 {members.get(m)} vs Python {py.__name__}.{m} {want.get(m)}")
    return out


def _program_files(main: str, inc_dir: str) -> list[str]:
    """The files a program includes, in include order (its ``#include "..."`` lines, recursively)."""
    seen: list[str] = []

    def walk(path):
        if path in seen or not os.path.exists(path):
            return
        seen.append(path)
        for inc in re.findall(r'^\s*#include\s+"([^"]+)"', open(path).read(), re.M):
            walk(os.path.normpath(os.path.join(os.path.dirname(path), inc)))
    walk(main)
    return seen[1:] + seen[:1]


def programs() -> dict[str, list[str]]:
    out = {"v1model": _program_files(os.path.join(P4SRC, "coflow.p4"), os.path.join(P4SRC, "include"))}
    tna_dir = os.path.join(P4SRC, "tna")
    if os.path.isdir(tna_dir):
        mains = [f for f in sorted(os.listdir(tna_dir)) if f.endswith(".p4")
                 and re.search(r"^\s*#include\s+<tna.p4>", open(os.path.join(tna_dir, f)).read(), re.M)]
        for f in mains:
            out[f"tna:{f}"] = _program_files(os.path.join(tna_dir, f), tna_dir)
    return out


def python_value(name: str):
    v = getattr(C, name, None)
    return int(v) if isinstance(v, (int, enum.IntEnum)) and not isinstance(v, bool) else None


@pytest.mark.parametrize("program", sorted(programs()))
def test_every_p4_constant_equals_python_or_is_p4_only(program):
    consts, enums, unevaluated = p4_constants(programs()[program])
    assert not unevaluated, unevaluated
    assert consts, "no constants found: is the parser broken?"
    differ = {n: (v, python_value(n)) for n, v in consts.items()
              if n not in P4_ONLY and python_value(n) != v}
    assert not differ, f"{program}: P4 value vs Python value (coflow.dataplane.constants): {differ}"
    differ = enum_differences(enums)
    assert not differ, f"{program}: P4 enum vs Python IntEnum (coflow.dataplane.constants): {differ}"


@pytest.mark.parametrize("program", sorted(programs()))
def test_modes_roles_and_drop_reasons_are_p4_enums(program):
    """No program keeps MODE_* / ROLE_* / DROP_* constants beside (or instead of) the enums."""
    consts, enums, _ = p4_constants(programs()[program])
    assert set(P4_ENUMS) <= set(enums), f"{program}: {sorted(set(P4_ENUMS) - set(enums))}"
    old = sorted(n for n in consts if re.match(r"(MODE|ROLE|DROP)_", n) and n != "DROP_REASONS")
    assert not old, f"{program}: constants that should be enum members: {old}"
    assert len(C.DropReason) <= consts["DROP_REASONS"], "drop_reasons counter too small"


def test_the_shared_names_exist_in_the_v1model_program():
    consts, enums, _ = p4_constants(programs()["v1model"])
    names = set(consts) | {f"{e.removesuffix('_t')}.{m}" for e, ms in enums.items() for m in ms}
    for n in ("IPOPT_COFLOW_TYPE", "IPOPT_COFLOW_LEN", "NUM_PRIOS", "QUEUE_COUNTER_SIZE", "ASSIGNED_SLOTS",
              "HASH_SLOT_BASE", "HASH_SLOTS", "HASH_SLOT_BITS", "COFLOW_SLOTS", "FLOW_SLOTS_PER_COFLOW",
              "FLOW_METERS", "DROP_REASONS", "PRIO_HIGHEST", "PRIO_LOWEST", "FIFO_LM_MAX_RANK",
              "EPOCH_BITS", "EPOCH_SHIFT", "SLOT_IDLE_EPOCHS"):
        assert n in names, n
    for p4_name, e in P4_ENUMS.items():
        for m in e:
            assert f"{p4_name.removesuffix('_t')}.{m.name}" in names, (p4_name, m.name)


def test_the_parser_reads_what_it_should(tmp_path):
    """The reader itself: literals with widths, derived sizes, enums, and a changed value."""
    p = tmp_path / "x.p4"
    p.write_text("/* const bit<8> HIDDEN = 1; */\nconst bit<32> A = 32w0x10;\n#define B 4\n"
                 "#define C (A * B)   /* derived */\nenum bit<8> Kind_t { X = 0, Y = 2 }\n"
                 "enum bit<1> Side_t {\n    L = 0,  /* left, */\n    R = B - 3   /* right = 1 */\n}\n")
    consts, enums, bad = p4_constants([str(p)])
    assert consts == {"A": 16, "B": 4, "C": 64} and not bad
    assert enums == {"Kind_t": {"X": 0, "Y": 2}, "Side_t": {"L": 0, "R": 1}}


def test_an_enum_that_differs_fails(tmp_path):
    """The enum comparison itself, on the real define.p4 and on mutated copies of it: a changed
    value, a missing member, an extra member and a missing enum are each reported."""
    define = _strip_comments(open(os.path.join(P4SRC, "include", "define.p4")).read())
    _, enums, _ = p4_constants([os.path.join(P4SRC, "include", "define.p4")])
    assert not enum_differences(enums)
    mutations = {
        "changed value": (re.compile(r"(METER_RED\s*=\s*)10"), r"\g<1>12", "DropReason_t.METER_RED"),
        "missing member": (re.compile(r",\s*RATE\s*=\s*3"), "", "Mode_t.RATE"),
        "extra member": (re.compile(r"(EDGE\s*=\s*1)"), r"\1, SPINE = 2", "PortRole_t.SPINE"),
        "missing enum": (re.compile(r"enum\s+bit<8>\s+Mode_t"), "enum bit<8> Modes_t", "Mode_t missing"),
    }
    for what, (pattern, repl, expect) in mutations.items():
        text, n = pattern.subn(repl, define)
        assert n == 1, what
        p = tmp_path / "define.p4"
        p.write_text(text)
        _, enums, _ = p4_constants([str(p)])
        differ = enum_differences(enums)
        assert any(expect in d for d in differ), (what, differ)


def test_python_sizes_are_derived_consistently():
    assert C.HASH_SLOTS == 1 << C.HASH_SLOT_BITS
    assert C.COFLOW_SLOTS == C.ASSIGNED_SLOTS + C.HASH_SLOTS and C.HASH_SLOT_BASE == C.ASSIGNED_SLOTS
    assert C.QUEUE_COUNTER_SIZE == C.MAX_PORTS * C.NUM_PRIOS
    assert C.FLOW_METERS == C.ASSIGNED_SLOTS * C.FLOW_SLOTS_PER_COFLOW
    # the rate modes' payload <-> frame conversion (p4src/README.md Meters): the headers of a
    # tagged TCP segment with timestamps, and what is left of a 1500-byte MTU for payload
    assert C.FRAME_OVERHEAD_BYTES == (C.ETH_HEADER_BYTES + C.IPV4_MIN_HEADER_BYTES + C.IPOPT_COFLOW_LEN
                                      + C.TCP_HEADER_BYTES + C.TCP_TIMESTAMPS_BYTES) == 74
    assert C.MAX_FRAME_BYTES == C.ETH_HEADER_BYTES + C.IP_MTU == 1514
    assert C.TCP_MSS_BYTES == C.MAX_FRAME_BYTES - C.FRAME_OVERHEAD_BYTES == 1440
    assert C.PIPELINE_CODE == {"fair": C.MODE_FAIR, "dclas": C.MODE_DCLAS, "fifo-lm": C.MODE_FIFO_LM,
                               "rate": C.MODE_RATE}
    # slot lifecycle: the idle age fits epoch_t, an epoch is about a second on v1model
    assert 1 <= C.SLOT_IDLE_EPOCHS < 1 << C.EPOCH_BITS
    assert C.EPOCH_SECONDS == (1 << C.EPOCH_SHIFT) / 1e6 and 0.5 < C.EPOCH_SECONDS < 2

"""The two P4Infos, checked against what the controller uses.

The controller names every P4 object it writes or reads in :mod:`coflow.ctl.model` (``T_*``
tables, ``A_*`` actions, ``P_*`` action profiles, ``C_*`` counters, ``M_*`` meters) and writes
every match field of its tables and every parameter of its actions. :func:`compare` checks that
each exists in both P4Infos (v1model ``build/coflow.p4info.txt``, TNA
``build/tofino/coflow_tna.p4info.txt``) with the same match kind, counter unit and meter unit,
compatible widths, and sizes the target's controller needs; a width that differs must be in
:data:`DIFFERENCES` (mirrored in p4src/README.md, "Tofino (TNA)"), with the largest value the
controller writes on Tofino fitting the TNA width.
"""
from __future__ import annotations

from ..dataplane import constants as C
from .target import TOFINO

#: (kind, P4 object, field or parameter) -> (TNA width, the largest value the controller writes
#: on Tofino, why). Width differences not listed here fail :func:`compare`.
def _differences():
    from coflow.dataplane.pb import p4info_pb2

    from ..ctl import model as M
    return {
        ("unit", M.C_COFLOW_BYTES, "unit"): (
            p4info_pb2.CounterSpec.BYTES, None,
            "bytes only, and for the assigned slots only: the controller reads byte_count of "
            "the slots it assigned; 64k packets-and-bytes entries do not fit a stage beside "
            "the byte registers (bmv2: packets and bytes of every slot)"),
        ("param", M.A_SET_CONFIG, "heavy_bytes"): (
            32, TOFINO.no_heavy,
            "64-byte units in 32 bits, the byte registers' unit (bmv2: bytes in 64 bits)"),
        ("param", M.A_SET_SLOT, "slot"): (
            C.TNA_SLOT_BITS, TOFINO.assigned_slots - 1,
            f"{C.TNA_COFLOW_SLOTS} slots need {C.TNA_SLOT_BITS} bits (bmv2: bit<32>)"),
        ("match", M.T_PORT_ROLE, "ingress_port"): (
            32, (1 << 32) - 1,
            "translated port (@p4runtime_translation(\"tna/PortId_t\", 32)): the server's port "
            "name, mapped to the SDK port (coflow.tofino.ports)"),
        ("match", M.T_ECN_PORT, "egress_port"): (
            32, (1 << 32) - 1, "translated port, as port_role.ingress_port"),
        ("param", M.A_NEXT_HOP, "port"): (
            32, (1 << 32) - 1, "translated port, as port_role.ingress_port"),
        ("match", M.T_DCLAS, "bytes"): (
            C.TNA_DCLAS_KEY_BITS, TOFINO.dclas_key_max,
            "range key = bytes_before[31:12] in 64-byte units: 256 KiB steps (a range key must "
            "fit 5 PHV nibbles); thresholds rounded to the nearest step"),
        ("match", M.T_REPORT, "slot"): (
            C.TNA_SLOT_BITS, C.TNA_REPORT_TABLE_SIZE - 1,
            "the slot index's width (bmv2: bit<32>); slots below TNA_REPORT_TABLE_SIZE report"),
        ("param", M.A_SET_STEP, "mask"): (
            32, (1 << 32) - 1,
            "~(step - 1) in 64-byte units, the byte registers' unit (bmv2: bytes in 64 bits)"),
    }


#: counters and meters: the smallest size the controller needs on Tofino, by name suffix
def _min_sizes():
    from ..ctl import model as M
    return {M.C_COFLOW_BYTES: TOFINO.assigned_slots, M.C_COLLISIONS: TOFINO.coflow_slots,
            M.C_RED_DROPS: C.TNA_FLOW_METERS, M.M_FLOW: C.TNA_FLOW_METERS,
            M.C_DROP_REASONS: C.DROP_REASONS, M.C_QUEUE_DROP: C.QUEUE_COUNTER_SIZE}


def controller_names() -> dict[str, list[str]]:
    """P4Info kind -> the names :mod:`coflow.ctl.model` gives."""
    from ..ctl import model as M
    kinds = {"T_": "tables", "A_": "actions", "P_": "action_profiles", "C_": "counters",
             "M_": "meters"}
    out: dict[str, list[str]] = {k: [] for k in kinds.values()}
    for attr, val in sorted(vars(M).items()):
        if isinstance(val, str) and attr[:2] in kinds and attr[2:].isupper() and "." in val:
            out[kinds[attr[:2]]].append(val)
    return out


def _get(helper, kind: str, name: str):
    try:
        return helper.get(kind, name)
    except KeyError:
        return None


def compare(v1, tna, differences=None) -> list[str]:
    """Problems (empty when the TNA P4Info serves the controller as the v1model one does).
    ``v1`` and ``tna`` are :class:`coflow.dataplane.p4rt.P4InfoHelper`."""
    diffs = _differences() if differences is None else differences
    sizes = _min_sizes() if differences is None else {}
    problems = []

    def width(kind, obj, fname, w1, w2, value_ok=True):
        if w1 == w2:
            return
        d = diffs.get((kind, obj, fname))
        if d is None:
            problems.append(f"{kind} {obj}.{fname}: {w1} bits (v1model) vs {w2} (TNA), not a documented difference")
        elif d[0] != w2:
            problems.append(f"{kind} {obj}.{fname}: TNA width {w2}, documented {d[0]}")
        elif d[1] >= 1 << w2:
            problems.append(f"{kind} {obj}.{fname}: the controller writes up to {d[1]}, past {w2} bits")

    names = controller_names()
    for kind, objs in names.items():
        for name in objs:
            a, b = _get(v1, kind, name), _get(tna, kind, name)
            if a is None or b is None:
                where = " and ".join(w for w, x in (("v1model", a), ("TNA", b)) if x is None)
                problems.append(f"{kind[:-1]} {name}: missing in {where}")
                continue
            if kind == "tables":
                fa = {m.name: m for m in a.match_fields}
                fb = {m.name: m for m in b.match_fields}
                for n in sorted(set(fa) | set(fb)):
                    if n not in fa or n not in fb:
                        problems.append(f"table {name}: match field {n} only in "
                                        + ("v1model" if n in fa else "TNA"))
                        continue
                    if fa[n].match_type != fb[n].match_type:
                        problems.append(f"table {name}.{n}: match type {fa[n].match_type} vs {fb[n].match_type}")
                    width("match", name, n, fa[n].bitwidth, fb[n].bitwidth)
            elif kind == "actions":
                pa = {p.name: p for p in a.params}
                pb = {p.name: p for p in b.params}
                if set(pa) != set(pb):
                    problems.append(f"action {name}: parameters {sorted(pa)} vs {sorted(pb)}")
                for n in sorted(set(pa) & set(pb)):
                    width("param", name, n, pa[n].bitwidth, pb[n].bitwidth)
            elif kind == "counters":
                d = diffs.get(("unit", name, "unit"))
                if a.spec.unit != b.spec.unit and (d is None or d[0] != b.spec.unit):
                    problems.append(f"counter {name}: unit {a.spec.unit} vs {b.spec.unit}")
            elif kind == "meters":
                if a.spec.unit != b.spec.unit:
                    problems.append(f"meter {name}: unit {a.spec.unit} vs {b.spec.unit}")
            elif kind == "action_profiles":
                if a.with_selector != b.with_selector:
                    problems.append(f"action profile {name}: with_selector differs")
            need = sizes.get(name)
            if need is not None and b.size < need:
                problems.append(f"{kind[:-1]} {name}: TNA size {b.size} < {need} the controller indexes")
    return problems


def compare_files(v1_path: str, tna_path: str) -> list[str]:
    from ..dataplane.p4rt import P4InfoHelper
    return compare(P4InfoHelper.from_file(v1_path), P4InfoHelper.from_file(tna_path))

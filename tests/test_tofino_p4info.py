"""The two P4Infos against what the controller uses (coflow.tofino.p4info).

The comparison itself is tested on P4Infos built here; the real check needs
build/coflow.p4info.txt (``make p4``) and build/tofino/coflow_tna.p4info.txt
(``make p4-tofino``) and skips with its reason when either is missing."""
from __future__ import annotations

import copy
import os

import pytest

from coflow.dataplane.p4rt import P4InfoHelper  # sets the protobuf implementation first
from coflow.dataplane.pb import p4info_pb2

from coflow.ctl import model as M
from coflow.dataplane.toolchain import find_tofino_compiler, tofino_missing_reason
from coflow.tofino import p4info as P

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V1_P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")
TNA_P4INFO = os.path.join(REPO, "build", "tofino", "coflow_tna.p4info.txt")


def synthetic() -> p4info_pb2.P4Info:
    """A P4Info holding every object the controller names, with a few fields each."""
    m = p4info_pb2.P4Info()
    ident = iter(range(1, 10_000))
    names = P.controller_names()
    for name in names["tables"]:
        t = m.tables.add()
        t.preamble.id, t.preamble.name = next(ident), name
        mf = t.match_fields.add(id=1, name="external_id", bitwidth=32,
                                match_type=p4info_pb2.MatchField.EXACT)
        if name == M.T_DCLAS:
            mf.name, mf.bitwidth, mf.match_type = "bytes", 64, p4info_pb2.MatchField.RANGE
    for name in names["actions"]:
        a = m.actions.add()
        a.preamble.id, a.preamble.name = next(ident), name
        a.params.add(id=1, name="prio", bitwidth=3)
        if name == M.A_SET_SLOT:
            a.params.add(id=2, name="slot", bitwidth=32)
    for name in names["counters"]:
        c = m.counters.add(size=1 << 20)
        c.preamble.id, c.preamble.name = next(ident), name
        c.spec.unit = p4info_pb2.CounterSpec.BOTH
    for name in names["meters"]:
        c = m.meters.add(size=1 << 20)
        c.preamble.id, c.preamble.name = next(ident), name
        c.spec.unit = p4info_pb2.MeterSpec.BYTES
    for name in names["action_profiles"]:
        c = m.action_profiles.add(size=1024, with_selector=True)
        c.preamble.id, c.preamble.name = next(ident), name
    return m


def test_the_controller_names_every_kind():
    names = P.controller_names()
    assert M.T_SLOT in names["tables"] and M.A_SET_CONFIG in names["actions"]
    assert M.C_COFLOW_BYTES in names["counters"] and M.M_FLOW in names["meters"]
    assert names["action_profiles"] == [M.P_ECMP]


def test_compare_finds_each_kind_of_difference():
    v1 = synthetic()
    assert P.compare(P4InfoHelper(v1), P4InfoHelper(copy.deepcopy(v1))) == []
    tna = copy.deepcopy(v1)
    # documented: the slot parameter narrower (and the values written fit)
    next(p for a in tna.actions if a.preamble.name == M.A_SET_SLOT for p in a.params
         if p.name == "slot").bitwidth = 16
    docs = {("param", M.A_SET_SLOT, "slot"): (16, (1 << 15) - 1, "slots")}
    assert P.compare(P4InfoHelper(v1), P4InfoHelper(tna), docs) == []
    # the values written do not fit
    bad = {("param", M.A_SET_SLOT, "slot"): (16, 1 << 16, "slots")}
    assert "past 16 bits" in P.compare(P4InfoHelper(v1), P4InfoHelper(tna), bad)[0]
    # undocumented width, match type, missing object, counter unit
    next(t for t in tna.tables if t.preamble.name == M.T_DCLAS).match_fields[0].bitwidth = 20
    next(t for t in tna.tables if t.preamble.name == M.T_SLOT).match_fields[0].match_type = \
        p4info_pb2.MatchField.TERNARY
    del tna.meters[:]
    next(c for c in tna.counters if c.preamble.name == M.C_COFLOW_BYTES).spec.unit = \
        p4info_pb2.CounterSpec.PACKETS
    problems = "\n".join(P.compare(P4InfoHelper(v1), P4InfoHelper(tna), docs))
    assert f"match {M.T_DCLAS}.bytes: 64 bits (v1model) vs 20 (TNA), not a documented" in problems
    assert f"table {M.T_SLOT}.external_id: match type" in problems
    assert f"meter {M.M_FLOW}: missing in TNA" in problems
    assert f"counter {M.C_COFLOW_BYTES}: unit" in problems


def test_documented_differences_are_the_readme_list():
    readme = open(os.path.join(REPO, "docs", "reference", "p4.md")).read()   # its generated differences list
    for (_kind, obj, fname), _doc in P._differences().items():
        assert f"`{obj.split('.')[-1]}.{fname}`" in readme, (obj, fname)


def test_both_p4infos_serve_the_controller():
    if not os.path.exists(TNA_P4INFO):
        if not find_tofino_compiler():
            pytest.skip(tofino_missing_reason())
        pytest.skip("build/tofino/coflow_tna.p4info.txt missing: run make p4-tofino")
    if not os.path.exists(V1_P4INFO):
        pytest.skip("build/coflow.p4info.txt missing: run make p4 (needs p4c-bm2-ss)")
    v1 = P4InfoHelper.from_file(V1_P4INFO).p4info
    tna = P4InfoHelper.from_file(TNA_P4INFO).p4info
    # what the v1model program has and the TNA one does not have yet (listed below, with why)
    # is left out; everything else must match, and a listed item the TNA program has by now
    # must leave the list
    def names(info):
        return {o.preamble.name for kind in ("counters", "meters", "tables", "actions")
                for o in getattr(info, kind)}

    def params(info):
        return {(a.preamble.name, p.name) for a in info.actions for p in a.params}
    assert set(NOT_YET_ON_TNA) <= names(v1) and not set(NOT_YET_ON_TNA) & names(tna)
    assert set(PARAMS_NOT_YET_ON_TNA) <= params(v1) and not set(PARAMS_NOT_YET_ON_TNA) & params(tna)
    for a in v1.actions:
        for i in reversed(range(len(a.params))):
            if (a.preamble.name, a.params[i].name) in PARAMS_NOT_YET_ON_TNA:
                del a.params[i]
    problems = [p for p in P.compare(P4InfoHelper(v1), P4InfoHelper(tna))
                if not any(f" {n}: missing in TNA" in p for n in NOT_YET_ON_TNA)]
    assert problems == [], "\n".join(problems)


#: Controller names the v1model program has and the TNA program does not have yet, with why
#: (each is ported by whoever owns p4src/tna/, who then removes it from here).
NOT_YET_ON_TNA: dict = {}


#: (action, parameter) the v1model program has and the TNA one does not have yet, with why
PARAMS_NOT_YET_ON_TNA: dict = {}


def test_tna_sources_declare_every_controller_name():
    """Without the compiler: each ``CoflowIngress.<instance>.<object>`` (or ``CoflowEgress``)
    the controller names is an instance in that control of coflow_tna.p4 whose control type
    declares the object (the P4Info names come from these), so a rename on one side fails here
    before any compile."""
    import re
    tna = os.path.join(REPO, "p4src", "tna")
    main = open(os.path.join(tna, "coflow_tna.p4")).read()
    bodies = {"CoflowIngress": main[main.index("control CoflowIngress("):main.index("control CoflowEgress(")],
              "CoflowEgress": main[main.index("control CoflowEgress("):]}
    instances = {top: dict((inst, typ) for typ, inst in re.findall(r"^\s*(\w+)\(\)\s+(\w+);", b, re.M))
                 for top, b in bodies.items()}
    controls = {}
    for root, _, files in os.walk(os.path.join(tna, "include")):
        for f in files:
            text = open(os.path.join(root, f)).read()
            for m in re.finditer(r"^control (\w+)\(", text, re.M):
                controls[m.group(1)] = text[m.start():]
    for objs in P.controller_names().values():
        for name in objs:
            if name in NOT_YET_ON_TNA:
                continue
            top, inst, obj = name.split(".")
            assert top in instances and inst in instances[top], name
            typ = instances[top][inst]
            assert re.search(rf"\b{obj}\b", controls[typ]), f"{name}: {obj} not in control {typ}"

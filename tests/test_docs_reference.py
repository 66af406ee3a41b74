"""The reference pages under docs/reference/ are what `make docs-ref` (python -m coflow.docgen)
writes from the code: the argparse parsers, coflow.proto, the P4Info files, the metrics and the
settings. A page edited by hand, or code changed without regenerating, fails here."""
import os

import pytest

from coflow import docgen

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = os.path.join(REPO, "docs", "reference")
FIX = "stale: run `make docs-ref` (python -m coflow.docgen) and commit docs/reference/"


def _committed(name: str) -> str:
    with open(os.path.join(REF, name)) as f:
        return f.read()


@pytest.mark.parametrize("name,make", [("cli.md", docgen.cli_page), ("api.md", docgen.api_page),
                                       ("metrics.md", docgen.metrics_page),
                                       ("settings.md", docgen.settings_page)])
def test_reference_page_is_generated(name, make):
    assert make() == _committed(name), f"docs/reference/{name} {FIX}"


@pytest.mark.parametrize("target", sorted(docgen.P4INFOS))
def test_p4_reference_section_is_this_build(target):
    """Each target's section of p4.md is its P4Info rendered. A target whose P4Info is not built
    on this machine (bf-p4c is on few) cannot be checked here: skipped, saying which and why."""
    rel, how = docgen.P4INFOS[target]
    committed = _committed("p4.md")
    begin, end = docgen.P4_BEGIN.format(target), docgen.P4_END.format(target)
    assert begin in committed and end in committed, f"docs/reference/p4.md: no {target} section ({FIX})"
    if not os.path.exists(os.path.join(REPO, rel)):
        pytest.skip(f"{rel} not built ({how} needs its compiler on this machine): "
                    f"the committed {target} section of docs/reference/p4.md is not checked")
    section = committed[committed.index(begin) + len(begin) + 1:committed.index(end)]
    assert section.rstrip() == docgen.p4_section(target, os.path.join(REPO, rel)).rstrip(), \
        f"docs/reference/p4.md's {target} section {FIX}"


def test_p4_reference_page_is_generated():
    """Outside the per-target sections (kept when their P4Info is not built), the page is the
    generator's: its intro and the targets' differences list."""
    page, _missing = docgen.p4_page(_committed("p4.md"))
    assert page == _committed("p4.md"), f"docs/reference/p4.md {FIX}"


def test_cli_reference_covers_every_subcommand():
    from coflow.cli import build_parser
    page = _committed("cli.md")

    def walk(p, path):
        for name, _h, sp in docgen._subparsers(p):
            yield f"{path} {name}"
            yield from walk(sp, f"{path} {name}")
    cmds = list(walk(build_parser(), "coflow"))
    assert len(cmds) > 30
    for c in cmds:
        assert f"`{c}`" in page, c


def test_api_reference_has_every_rpc_and_message():
    page = _committed("api.md")
    with open(docgen.PROTO) as f:
        text = f.read()
    import re
    for name in re.findall(r"^\s*rpc\s+(\w+)", text, re.M) + re.findall(r"^message\s+(\w+)", text, re.M):
        assert name in page, name


def test_proto_parser_reads_comments():
    p = docgen.parse_proto("// head\n\nsyntax = \"proto3\";\npackage a.b;\n// the service\nservice S {\n"
                           "  // does x\n  rpc X(Req) returns (stream Rep);\n}\n// a message\nmessage Req {\n"
                           "  // above\n  optional int64 n = 3;  // beside\n  map<string, int64> m = 4;\n}\n"
                           "enum E { A = 0; }\n")
    assert p["package"] == "a.b" and p["header"] == ["head", ""]
    assert p["services"][0]["items"] == [{"name": "X", "req": "Req", "resp": "stream Rep", "doc": "does x"}]
    fields = p["messages"][0]["items"]
    assert fields[0] == {"name": "n", "type": "optional int64", "number": "3", "doc": "above beside"}
    assert fields[1]["type"] == "map<string, int64>"
    assert p["messages"][0]["doc"] == ["a message"]


def test_every_controller_setting_is_documented():
    import dataclasses

    from coflow.ctl.translate import CtlSettings
    docs = docgen._ctl_setting_docs(CtlSettings.__doc__ or "")
    missing = [f.name for f in dataclasses.fields(CtlSettings) if not docs.get(f.name)]
    assert not missing, f"CtlSettings' docstring has no bullet for {missing}"


def test_metrics_are_found():
    names = {m["name"] for m in docgen.metrics()}
    assert {"coflow_ctl_round_seconds", "coflow_ctl_rounds_total", "coflow_dp_drops_total"} <= names

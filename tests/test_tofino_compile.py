"""``make p4-tofino`` with the open-source Tofino backend, and what its outputs must show: the
pipeline fits Tofino 1's 12 stages with >= 64k counter slots, the device configs build from
them, the controller's slot hash is the compiled hash, and docs/reference/results.md's fit table is
this build's. Skips with one reason when bf-p4c is not installed."""
from __future__ import annotations

import json
import os

import pytest

from coflow.dataplane import constants as C

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, "build", "tofino")


def test_outputs(tofino_build):
    for rel in ("coflow_tna.p4info.txt", "bfrt.json", "pipe/context.json", "pipe/tofino.bin",
                "pipe/logs/resources.json"):
        assert os.path.isfile(os.path.join(tofino_build, rel)), rel


def test_fits_twelve_stages_with_64k_slots(tofino_build):
    from coflow.tofino import fit
    rep = fit.load(tofino_build)
    assert rep.n_stages == 12 and 0 < len(rep.used_stages) <= 12
    assert C.TNA_COFLOW_SLOTS >= 1 << 16
    bfrt = json.load(open(os.path.join(tofino_build, "bfrt.json")))
    sizes = {t["name"].split(".")[-1]: t.get("size") for t in bfrt["tables"]}
    assert sizes.get("coflow_bytes_reg", 0) >= C.TNA_COFLOW_SLOTS, sizes
    assert sizes.get("coflow_owner_reg", 0) >= C.TNA_COFLOW_SLOTS


def test_device_configs_build(tofino_build):
    from coflow.tofino import device_config as dc
    a = dc.load_artifacts(tofino_build)
    assert dc.parse_bf_switchd_config(dc.bf_switchd_config(a)) == a
    assert dc.parse_stratum_config(dc.stratum_config(a)) == a


def test_readme_fit_table_is_this_build(tofino_build):
    from coflow.tofino import fit
    readme = open(os.path.join(REPO, "docs", "reference", "results.md")).read()
    table = fit.render(fit.load(tofino_build))
    i = readme.index(fit.BEGIN) + len(fit.BEGIN) + 1
    assert readme[i:readme.index(fit.END)] == table, \
        "docs/reference/results.md's fit table is stale: run make p4-tofino-fit"


def _dicts_with(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            yield obj
        for v in obj.values():
            yield from _dicts_with(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from _dicts_with(v, key)


def test_compiled_slot_hash_is_the_controllers(tofino_build):
    """context.json's description of the slot hash (dynamic hash calculations: algorithm
    polynomial, init, final xor, reflection) is the CRC coflow.tofino.target computes."""
    ctx = json.load(open(os.path.join(tofino_build, "pipe", "context.json")))
    calcs = [d for d in _dicts_with(ctx, "algorithms") if "slot_hash" in str(d.get("name", ""))]
    if not calcs:
        pytest.skip("context.json describes no dynamic hash named slot_hash")
    algos = [a for c in calcs for a in c["algorithms"] if a.get("type") == "crc"]
    assert algos, calcs[0].get("algorithms")
    a = algos[0]
    assert int(a["poly"], 16) & 0xFFFFFFFF == C.TNA_SLOT_CRC_POLY
    assert int(a["init"], 16) == C.TNA_CRC_INIT and int(a["final_xor"], 16) == C.TNA_CRC_XOR
    assert a["reverse"] is True and a["msb"] is False and a["extend"] is False


def test_report_digest_is_packed_on_its_digest_type(tofino_build):
    """The deparser's learning (digest) unit as bf-p4c compiled it (the .bfa): selected by
    ``ig_dprsr_md.digest_type``, and for TNA_REPORT_DIGEST_TYPE it packs the slot, the CoflowId
    and the count after the packet, in report_digest_t's order; the P4Info declares the
    digest with the widths the controller's DigestFormat reads (units: 64-byte)."""
    import re
    from coflow.ctl.digest import DigestFormat
    from coflow.dataplane.p4rt import P4InfoHelper
    text = open(os.path.join(tofino_build, "pipe", "coflow_tna.bfa")).read()
    i = text.index("  learning:")
    sec = text[i:text.index("context_json", i)]
    assert "select:" in sec and "digest_type" in sec.splitlines()[1]
    entry = sec.split(f"    {C.TNA_REPORT_DIGEST_TYPE}:", 1)[1]
    fields = re.findall(r"#\s*(?:bit\[[^]]*\]: )?(ingress::\S+)", entry)
    assert fields[1:6] == ["ingress::meta.slot", "ingress::hdr.coflow_opt.external_id",
                           "ingress::hdr.coflow_opt.internal_id", "ingress::meta.report_after",
                           "ingress::meta.report_port"], fields
    fmt = DigestFormat.from_p4info(P4InfoHelper.from_file(
        os.path.join(tofino_build, "coflow_tna.p4info.txt")).p4info, C.TNA_BYTES_UNIT_SHIFT)
    assert fmt.widths == (C.TNA_SLOT_BITS, 32, 8, 32, 16) and fmt.unit_shift == C.TNA_BYTES_UNIT_SHIFT

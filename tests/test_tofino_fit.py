"""The fit table from bf-p4c's resource logs (coflow.tofino.fit), on a small resources.json
written by hand in the compiler's format (p4c backends/tofino/compiler_interfaces/schemas/
resources_schema.py 2.4: resources.mau.mau_stages[*].rams.srams[*].usages[*].used_by, ...)."""
from __future__ import annotations

import json
import os

import pytest

from coflow.tofino import fit
from coflow.tofino.__main__ import main as tofino_main

SLOT = "CoflowIngress.coflow_counter.coflow_slot"
OWNER = "CoflowIngress.coflow_counter.tbl_owner_claim"
DCLAS = "CoflowIngress.dclas.dclas_thresholds"


def _use(table, used_for):
    return {"used_by": table, "used_for": used_for}


def _stage(n, srams=(), maprams=(), tcams=(), meters=(), stats=(), bits=(), gws=(), tables=()):
    return {
        "stage_number": n,
        "xbar_bytes": {"size": 128, "exact_size": 128, "ternary_size": 66, "bytes": []},
        "hash_bits": {"nBits": 52, "nFunctions": 8,
                      "bits": [{"hash_bit": i, "hash_function": 0, "used_by_table": t,
                                "used_for": "hash_dist", "usages": []} for i, t in enumerate(bits)]},
        "hash_distribution_units": {"nHashIds": 2, "nUnitIds": 3, "units": []},
        "rams": {"nRows": 8, "nColumns": 10,
                 "srams": [{"row": i // 10, "column": i % 10, "usages": [_use(t, f)]}
                           for i, (t, f) in enumerate(srams)]},
        "map_rams": {"nRows": 8, "nUnits": 6,
                     "maprams": [{"row": i, "unit_id": 0, "usages": [_use(t, f)]}
                                 for i, (t, f) in enumerate(maprams)]},
        "gateways": {"nRows": 8, "nUnits": 2,
                     "gateways": [{"row": i, "unit_id": 0, "usages": [_use(t, "gateway")]}
                                  for i, t in enumerate(gws)]},
        "stashes": {"nRows": 8, "nUnits": 2, "stashes": []},
        "meter_alus": {"nAlus": 4, "meters": [{"row": 2 * i + 1, "usages": [_use(t, f)]}
                                              for i, (t, f) in enumerate(meters)]},
        "statistic_alus": {"nAlus": 4, "stats": [{"row": 2 * i, "usages": [_use(t, "statistics_ram")]}
                                                 for i, t in enumerate(stats)]},
        "tcams": {"nRows": 12, "nColumns": 2,
                  "tcams": [{"row": i, "column": 0, "usages": [_use(t, "ternary_match")]}
                            for i, t in enumerate(tcams)]},
        "action_bus_bytes": {"size": 128, "bytes": []},
        "action_slots": [],
        "vliw": {"size": 32, "instructions": []},
        "logical_tables": {"size": 16, "ids": [{"id": i, "table_name": t} for i, t in enumerate(tables)]},
    }


def resources_doc():
    stages = [_stage(0, srams=[(SLOT, "match_entry_ram")] * 3, maprams=[], bits=[SLOT] * 10,
                     tables=[SLOT]),
              _stage(1, srams=[(OWNER, "stateful_ram")] * 2, maprams=[(OWNER, "stateful_ram")] * 2,
                     meters=[(OWNER, "stateful_ram")], stats=[OWNER], gws=[OWNER], tables=[OWNER]),
              _stage(2, tcams=[DCLAS] * 2, meters=[("CoflowIngress.routing.routing_v4", "select_ram")],
                     tables=[DCLAS])]
    stages += [_stage(n) for n in range(3, 12)]
    return {
        "program_name": "coflow_tna.p4", "run_id": "x", "build_date": "today",
        "compiler_version": "9.13.4", "schema_version": "2.4.2",
        "resources": {
            "parser": {"nParsers": 18, "parsers": []},
            "mau": {"nStages": 12, "mau_stages": stages},
            "deparser": [],
            "phv_containers": {"normal": [{"width": 8, "units": 64, "addresses": []},
                                          {"width": 16, "units": 96, "addresses": []},
                                          {"width": 32, "units": 64, "addresses": []}]},
        },
    }


def phv_doc():
    cont = [{"phv_number": n, "bit_width": w, "phv_mau_group_number": 0,
             "phv_deparser_group_number": 0, "container_type": "normal", "gress": "ingress",
             "slices": [{}]} for n, w in ((0, 32), (1, 32), (64, 8), (128, 16))]
    cont.append(dict(cont[0]))                       # the same container listed twice
    cont.append({**cont[1], "phv_number": 300, "container_type": "tagalong"})
    return {"containers": cont}


def test_totals_and_per_table():
    rep = fit.parse_resources(resources_doc(), phv_doc())
    assert rep.n_stages == 12 and rep.used_stages == [0, 1, 2]
    assert rep.used["sram"] == 5 and rep.available["sram"] == 12 * 80
    assert rep.used["map_ram"] == 2 and rep.available["map_ram"] == 12 * 48
    assert rep.used["tcam"] == 2 and rep.available["tcam"] == 12 * 24
    assert rep.used["stateful_alu"] == 1 and rep.used["meter_alu"] == 2
    assert rep.available["stateful_alu"] == 48
    assert rep.used["hash_bits"] == 10 and rep.available["hash_bits"] == 12 * 416
    assert rep.used["gateway"] == 1 and rep.used["logical_table"] == 3
    assert rep.per_table[SLOT]["sram"] == 3 and rep.per_table[SLOT]["stages"] == {0}
    assert rep.per_table[OWNER]["stateful_alu"] == 1 and rep.per_table[OWNER]["map_ram"] == 2
    assert rep.phv_used == {32: 2, 8: 1, 16: 1}
    assert rep.phv_available == {8: 64, 16: 96, 32: 64}
    assert rep.phv_bits == (2 * 32 + 8 + 16, 64 * 8 + 96 * 16 + 64 * 32)


def test_render_and_readme_update(tmp_path):
    rep = fit.parse_resources(resources_doc(), phv_doc())
    md = fit.render(rep)
    assert "MAU stages used: **3 of 12**" in md
    assert "| **total** | 3 | 5/960 (0.5%) |" in md
    assert "| coflow_counter.coflow_slot | 0 | 3 |" in md
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{fit.BEGIN}\nSTALE TABLE\n{fit.END}\nafter\n")
    assert fit.update_readme(str(readme), md)
    text = readme.read_text()
    assert "STALE TABLE" not in text and md in text and text.endswith(f"{fit.END}\nafter\n")
    assert not fit.update_readme(str(readme), md)
    (tmp_path / "bad.md").write_text("no markers")
    with pytest.raises(ValueError):
        fit.update_readme(str(tmp_path / "bad.md"), md)


def test_command_reads_a_build_dir(tmp_path, capsys):
    logs = tmp_path / "pipe" / "logs"
    logs.mkdir(parents=True)
    (logs / "resources.json").write_text(json.dumps(resources_doc()))
    assert tofino_main(["fit", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "of 12" in out and "PHV" in out and "allocation not logged" in out
    (logs / "phv.json").write_text(json.dumps(phv_doc()))
    assert tofino_main(["fit", str(tmp_path)]) == 0
    assert "allocation not logged" not in capsys.readouterr().out
    assert tofino_main(["fit", str(tmp_path / "none")]) == 2


def _sweep_dir(tmp_path):
    """build/tofino-sweep as make p4-tofino-sweep leaves it: 15 and 16 compiled (resources
    logged), 17 failed with the compiler's error in its log."""
    root = tmp_path / "sweep"
    for b in (15, 16):
        logs = root / str(b) / "pipe" / "logs"
        logs.mkdir(parents=True)
        (logs / "resources.json").write_text(json.dumps(resources_doc()))
        (root / str(b) / "pipe" / "tofino.bin").write_bytes(b"BIN")
    (root / "17").mkdir()
    (root / "17.log").write_text("compiling\n0 errors so far\nerror: could not fit in stage 4 with 1 "
                                 "entries along with 131072 entries of Register coflow_owner_reg\n")
    return root


def test_sweep_is_rendered_from_the_builds_json(tmp_path, capsys):
    from coflow.tofino import sweep
    root = _sweep_dir(tmp_path)
    doc = sweep.collect(str(root), [17, 15, 16], compiler="bf-p4c 9.13.4")
    assert [(r["slots"], r["fits"], r["stages"]) for r in doc["rows"]] == \
        [(65536, True, 3), (131072, True, 3), (262144, False, None)]
    assert doc["rows"][2]["error"].startswith("error: could not fit in stage 4")
    md = sweep.render(doc)
    assert "Largest slot count that fits: **131,072 slots** (16 hashed-slot bits) in 3 of 12 stages." in md
    assert "| 17 | 262,144 | no |  | error: could not fit in stage 4" in md
    readme = tmp_path / "R.md"
    readme.write_text(f"a\n{sweep.BEGIN}\n131,072 slots fit in 11 stages\n{sweep.END}\nb\n")
    out = tmp_path / "results" / "tofino_sweep.json"
    assert tofino_main(["sweep", str(root), "--bits", "15", "16", "17", "--json", str(out),
                        "--compiler", "bf-p4c 9.13.4", "--readme", str(readme)]) == 0
    capsys.readouterr()
    assert json.loads(out.read_text()) == json.loads(json.dumps(doc))
    assert "11 stages" not in readme.read_text() and md in readme.read_text()
    # rendering again from the JSON changes nothing; a bad JSON is one error
    assert tofino_main(["sweep-render", str(out), "--readme", str(readme)]) == 0
    assert "unchanged" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"rows": 1}')
    assert tofino_main(["sweep-render", str(tmp_path / "bad.json")]) == 2
    assert "not a coflow-tofino-sweep/1 document" in capsys.readouterr().err
    with pytest.raises(ValueError):
        sweep.collect(str(root), [])


def test_sweep_markers_missing_is_one_error_naming_them(tmp_path):
    from coflow.tofino import sweep
    readme = tmp_path / "R.md"
    readme.write_text(f"a\n{fit.BEGIN}\nthe fit table\n{fit.END}\n")
    with pytest.raises(ValueError, match=r"R\.md: no tofino-sweep markers \(<!-- tofino-sweep:begin"):
        sweep.update_readme(str(readme), "x\n")
    assert readme.read_text() == f"a\n{fit.BEGIN}\nthe fit table\n{fit.END}\n"


def test_readmes_slot_sweep_is_the_committed_sweeps_render():
    """docs/reference/results.md's sweep block is results/tofino_sweep.json rendered
    (``make p4-tofino-sweep`` writes it): no figure of the sweep is written by hand."""
    from coflow.tofino import sweep
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "results", "tofino_sweep.json")) as f:
        md = sweep.render(json.load(f))
    for rel in (os.path.join("docs", "reference", "results.md"),):
        with open(os.path.join(repo, rel)) as f:
            text = f.read()
        i = text.index(sweep.BEGIN) + len(sweep.BEGIN) + 1
        assert text[i:text.index(sweep.END)] == md, f"{rel}: run `make p4-tofino-sweep`"

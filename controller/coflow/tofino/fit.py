"""The fit table: bf-p4c's resource logs -> what the TNA program uses of a Tofino 1 pipe.

Input: ``<build>/pipe/logs/resources.json`` (bf-p4c's resources schema 2.x: ``resources.mau``
with ``nStages`` and per ``mau_stages`` entry the used ``rams.srams``, ``map_rams.maprams``,
``tcams.tcams``, ``meter_alus.meters``, ``statistic_alus.stats``, ``hash_bits.bits``,
``gateways.gateways``, ``logical_tables.ids``, each with the totals available, and usages naming
the P4 table) and, for PHV, ``<build>/pipe/logs/phv.json`` (``containers``: the allocated PHV
containers). ``mau.resources.log`` is rendered by the compiler from the same resources.json
(p4c ``backends/tofino/compiler_interfaces/tools/create_mau_resources.py``), so its totals are
these.

Counting: a RAM, TCAM, ALU, gateway or hash bit counts once in the total, and once for every
table that uses it (shared units, e.g. an ActionSelector's RAMs, appear under each user).
Stateful ALUs are the meter ALUs used by stateful (register) tables; the other meter ALUs
serve meters and selectors. A stage is used when it holds a logical table.

``python -m coflow.tofino fit build/tofino`` prints the table; ``--readme docs/reference/results.md``
rewrites the table between the README's ``<!-- fit-table -->`` markers.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

#: (key, heading) of the columns, in order
RESOURCES = (
    ("sram", "SRAM"),
    ("map_ram", "map RAM"),
    ("tcam", "TCAM"),
    ("stateful_alu", "stateful ALU"),
    ("meter_alu", "meter ALU (all)"),
    ("stats_alu", "stats ALU"),
    ("hash_bits", "hash bits"),
    ("gateway", "gateways"),
    ("logical_table", "logical tables"),
)
BEGIN = "<!-- fit-table:begin (python -m coflow.tofino fit build/tofino --readme docs/reference/results.md) -->"
END = "<!-- fit-table:end -->"


@dataclass
class FitReport:
    program: str
    compiler: str
    n_stages: int
    used_stages: list = field(default_factory=list)
    used: dict = field(default_factory=dict)          # resource -> units used (all stages)
    available: dict = field(default_factory=dict)     # resource -> units available (all stages)
    per_stage: dict = field(default_factory=dict)     # stage -> {resource: used}
    per_table: dict = field(default_factory=dict)     # table -> {resource: used, "stages": set}
    phv_used: dict = field(default_factory=dict)      # container width -> used containers
    phv_available: dict = field(default_factory=dict)  # container width -> containers

    @property
    def phv_bits(self) -> tuple[int, int]:
        return (sum(w * n for w, n in self.phv_used.items()),
                sum(w * n for w, n in self.phv_available.items()))


def _units(section: dict, items_key: str) -> list:
    return section.get(items_key, []) if section else []


def _users(unit: dict) -> list[str]:
    return sorted({u.get("used_by", "?") for u in unit.get("usages", [])})


def parse_resources(res: dict, phv: dict | None = None) -> FitReport:
    """A :class:`FitReport` from a resources.json document (and a phv.json one)."""
    mau = res["resources"]["mau"]
    rep = FitReport(res.get("program_name", "?"), res.get("compiler_version", "?"), mau["nStages"])
    for r, _ in RESOURCES:
        rep.used[r] = 0
        rep.available[r] = 0

    def credit(stage, resource, tables):
        rep.used[resource] += 1
        rep.per_stage.setdefault(stage, {}).setdefault(resource, 0)
        rep.per_stage[stage][resource] += 1
        for t in tables:
            d = rep.per_table.setdefault(t, {"stages": set()})
            d[resource] = d.get(resource, 0) + 1
            d["stages"].add(stage)

    for st in mau["mau_stages"]:
        s = st["stage_number"]
        rams, maps, tcams = st["rams"], st["map_rams"], st["tcams"]
        rep.available["sram"] += rams["nRows"] * rams["nColumns"]
        rep.available["map_ram"] += maps["nRows"] * maps["nUnits"]
        rep.available["tcam"] += tcams["nRows"] * tcams["nColumns"]
        meters, stats = st["meter_alus"], st["statistic_alus"]
        rep.available["stateful_alu"] += meters["nAlus"]
        rep.available["meter_alu"] += meters["nAlus"]
        rep.available["stats_alu"] += stats["nAlus"]
        hb, gw = st["hash_bits"], st["gateways"]
        rep.available["hash_bits"] += hb["nBits"] * hb["nFunctions"]
        rep.available["gateway"] += gw["nRows"] * gw["nUnits"]
        lt = st.get("logical_tables", {})
        rep.available["logical_table"] += lt.get("size", 16)
        for u in _units(rams, "srams"):
            credit(s, "sram", _users(u))
        for u in _units(maps, "maprams"):
            credit(s, "map_ram", _users(u))
        for u in _units(tcams, "tcams"):
            credit(s, "tcam", _users(u))
        for u in _units(meters, "meters"):
            credit(s, "meter_alu", _users(u))
            if any(x.get("used_for") == "stateful_ram" for x in u.get("usages", [])):
                credit(s, "stateful_alu", _users(u))
        for u in _units(stats, "stats"):
            credit(s, "stats_alu", _users(u))
        for b in _units(hb, "bits"):
            credit(s, "hash_bits", [b.get("used_by_table", "?")])
        for g in _units(gw, "gateways"):
            credit(s, "gateway", _users(g))
        ids = _units(lt, "ids")
        for t in ids:
            credit(s, "logical_table", [t.get("table_name", "?")])
        if ids:
            rep.used_stages.append(s)
    phv_avail = res["resources"].get("phv_containers", {}).get("normal", [])
    for c in phv_avail:
        rep.phv_available[c["width"]] = rep.phv_available.get(c["width"], 0) + c["units"]
    if phv is not None:
        seen = set()
        for c in phv.get("containers", []):
            if c.get("container_type", "normal") != "normal" or c["phv_number"] in seen:
                continue
            seen.add(c["phv_number"])
            rep.phv_used[c["bit_width"]] = rep.phv_used.get(c["bit_width"], 0) + 1
    rep.used_stages.sort()
    # resources.json lists the stages the program uses; Tofino 1's stages are alike, so the
    # pipe's capacity is a listed stage's times nStages
    listed = len(mau["mau_stages"])
    if listed and listed != rep.n_stages:
        for r in rep.available:
            rep.available[r] = rep.available[r] * rep.n_stages // listed
    return rep


def _compiler_made(name: str) -> bool:
    """Tables and gateways bf-p4c made from straight-line code and if-conditions
    (``tbl_<file><line>``, ``cond-N``, ``<table>-gateway``)."""
    return name.startswith(("tbl_", "cond-")) or name.endswith("-gateway")


def logs_dir(build_dir: str) -> str:
    for cand in (os.path.join(build_dir, "pipe", "logs"), os.path.join(build_dir, "logs"), build_dir):
        if os.path.isfile(os.path.join(cand, "resources.json")):
            return cand
    raise FileNotFoundError(f"no resources.json under {build_dir} (pipe/logs/; compile with "
                            "bf-p4c -g or --create-graphs: make p4-tofino)")


def load(build_dir: str) -> FitReport:
    d = logs_dir(build_dir)
    with open(os.path.join(d, "resources.json")) as f:
        res = json.load(f)
    phv = None
    if os.path.isfile(os.path.join(d, "phv.json")):
        with open(os.path.join(d, "phv.json")) as f:
            phv = json.load(f)
    return parse_resources(res, phv)


def _pct(u: int, a: int) -> str:
    return f"{u}/{a} ({100.0 * u / a:.1f}%)" if a else str(u)


def _short(name: str) -> str:
    return name.removeprefix("CoflowIngress.").removeprefix("CoflowEgress.")


def render(rep: FitReport, title: str | None = None) -> str:
    """Markdown: totals (used / available over the pipe), then one row per table."""
    lines = []
    if title:
        lines.append(title)
        lines.append("")
    stages = ", ".join(str(s) for s in rep.used_stages)
    lines.append(f"MAU stages used: **{len(rep.used_stages)} of {rep.n_stages}** (stages {stages}).")
    if rep.phv_available:
        ub, ab = rep.phv_bits
        per = ", ".join(f"{rep.phv_used.get(w, 0)}/{n} x {w}b" for w, n in sorted(rep.phv_available.items()))
        lines.append(f"PHV (normal containers): {per}; " + (f"{_pct(ub, ab)} of the bits." if rep.phv_used
                                                           else "allocation not logged (no phv.json)."))
    lines.append("")
    heads = [h for _, h in RESOURCES]
    lines.append("| table | stages | " + " | ".join(heads) + " |")
    lines.append("|---|---|" + "---|" * len(heads))
    lines.append("| **total** | " + str(len(rep.used_stages)) + " | "
                 + " | ".join(_pct(rep.used[r], rep.available[r]) for r, _ in RESOURCES) + " |")
    rows = {t: d for t, d in rep.per_table.items() if not _compiler_made(t)}
    made = [d for t, d in rep.per_table.items() if _compiler_made(t)]
    if made:
        rows[f"(compiler-made steps and gateways: {len(made)})"] = {
            "stages": set().union(*(d["stages"] for d in made)),
            **{r: sum(d.get(r, 0) for d in made) for r, _ in RESOURCES}}

    def srange(st):
        st = sorted(st)
        return f"{st[0]}" if len(st) == 1 else f"{st[0]}-{st[-1]}"
    for t in sorted(rows, key=lambda n: (n.startswith("("), min(rows[n]["stages"]), n)):
        d = rows[t]
        lines.append(f"| {_short(t)} | {srange(d['stages'])} | "
                     + " | ".join(str(d.get(r, 0) or "") for r, _ in RESOURCES) + " |")
    return "\n".join(lines) + "\n"


def update_readme(path: str, table: str, begin: str = BEGIN, end: str = END,
                  what: str = "fit-table") -> bool:
    """Replace the text between ``begin`` and ``end`` (the fit table's markers unless told, the
    slot sweep's for :mod:`.sweep`); True when it changed."""
    with open(path) as f:
        text = f.read()
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise ValueError(f"{path}: no {what} markers ({begin} ... {end})")
    new = text[:i + len(begin)] + "\n" + table + text[j:]
    if new != text:
        with open(path, "w") as f:
            f.write(new)
        return True
    return False

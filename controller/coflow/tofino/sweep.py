"""The slot sweep: which hashed-slot counts fit Tofino 1, from ``make p4-tofino-sweep``'s builds.

``make p4-tofino-sweep`` compiles the TNA program with ``-DTNA_HASH_SLOT_BITS=b`` for each ``b``
into ``build/tofino-sweep/<b>/`` (a fresh directory each time; the compiler's output in
``build/tofino-sweep/<b>.log``) and then runs ``python -m coflow.tofino sweep``, which reads them
(:func:`collect`: a build fits when bf-p4c wrote ``pipe/tofino.bin``; its stages from
``pipe/logs/resources.json``; else the compiler's first error line), writes
``results/tofino_sweep.json`` and renders it (:func:`render`) between the
``<!-- tofino-sweep:begin -->`` / ``<!-- tofino-sweep:end -->`` markers of
docs/reference/results.md. Nothing about the sweep is written by hand.
"""
from __future__ import annotations

import json
import os
import re

BEGIN = "<!-- tofino-sweep:begin (make p4-tofino-sweep: results/tofino_sweep.json) -->"
END = "<!-- tofino-sweep:end -->"
FORMAT = "coflow-tofino-sweep/1"


def _first_error(log_path: str) -> str | None:
    if not os.path.isfile(log_path):
        return None
    with open(log_path, errors="replace") as f:
        for line in f:
            s = line.strip()
            if re.search(r"\berror\b", s, re.I) and not re.match(r"^\d+ errors?\b", s):
                return s[:300]
    return None


def collect(sweep_dir: str, bits: list[int], compiler: str = "") -> dict:
    """The sweep's results: per hashed-slot bit count, whether it fit, in how many stages."""
    from .fit import load
    rows = []
    for b in sorted(bits):
        d = os.path.join(sweep_dir, str(b))
        row: dict = {"hashed_slot_bits": b, "slots": 2 << b, "fits": False, "stages": None,
               "error": None}
        if os.path.isfile(os.path.join(d, "pipe", "tofino.bin")):
            row["fits"] = True
            try:
                rep = load(d)
                row["stages"] = len(rep.used_stages)
                row["n_stages"] = rep.n_stages
            except (OSError, ValueError, KeyError):
                pass
        else:
            row["error"] = _first_error(os.path.join(sweep_dir, f"{b}.log")) or "no tofino.bin"
        rows.append(row)
    if not rows:
        raise ValueError(f"{sweep_dir}: no sweep builds")
    return {"format": FORMAT, "compiler": compiler, "rows": rows}


def validate(doc: dict, where: str = "sweep") -> dict:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("rows"), list):
        raise ValueError(f"{where}: not a {FORMAT} document")
    for i, r in enumerate(doc["rows"]):
        for k in ("hashed_slot_bits", "slots", "fits"):
            if k not in r:
                raise ValueError(f"{where}: row {i} has no {k!r}")
    return doc


def render(doc: dict) -> str:
    rows = validate(doc)["rows"]
    fit = [r for r in rows if r["fits"]]
    lines = []
    if fit:
        best = max(fit, key=lambda r: r["slots"])
        st = f" in {best['stages']} of {best.get('n_stages', 12)} stages" if best["stages"] else ""
        lines.append(f"Largest slot count that fits: **{best['slots']:,} slots** "
                     f"({best['hashed_slot_bits']} hashed-slot bits){st}.")
    else:
        lines.append("No slot count of the sweep fits.")
    if doc.get("compiler"):
        lines.append(f"Compiler: {doc['compiler']}.")
    lines.append("")
    lines.append("| hashed-slot bits | slots (assigned + hashed) | fits | stages | compiler's first error |")
    lines.append("|---|---|---|---|---|")
    for r in rows:
        err = (r.get("error") or "").replace("|", "\\|")
        lines.append(f"| {r['hashed_slot_bits']} | {r['slots']:,} | {'yes' if r['fits'] else 'no'} | "
                     f"{r['stages'] if r.get('stages') else ''} | {err} |")
    return "\n".join(lines) + "\n"


def update_readme(path: str, text: str) -> bool:
    """:func:`coflow.tofino.fit.update_readme` between the sweep's markers."""
    from .fit import update_readme as replace
    return replace(path, text, BEGIN, END, "tofino-sweep")


def write_json(doc: dict, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

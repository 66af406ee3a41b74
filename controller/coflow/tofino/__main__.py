"""``python -m coflow.tofino``: the Tofino target's commands.

    fit BUILD [--readme README]        fit table from BUILD/pipe/logs/resources.json (+ phv.json);
                                       --readme rewrites the table between its markers
    device-config BUILD --server S [-o OUT]   p4_device_config for bf_switchd or stratum
    compare-p4info V1MODEL_P4INFO TNA_P4INFO  what the controller uses, checked in both
    tm MODE [--weighted-dclas]         the traffic-manager queue plan of a mode (JSON)
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m coflow.tofino", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fit", help="fit table from bf-p4c's resource logs")
    p.add_argument("build", help="make p4-tofino's output directory (build/tofino)")
    p.add_argument("--readme", help="rewrite the table between this file's fit-table markers")
    p = sub.add_parser("device-config", help="the device config a Tofino P4Runtime server takes")
    p.add_argument("build")
    p.add_argument("--server", choices=("bf_switchd", "stratum"), required=True)
    p.add_argument("-o", "--out")
    p = sub.add_parser("compare-p4info", help="check both P4Infos against the controller's names")
    p.add_argument("v1model")
    p.add_argument("tna")
    p = sub.add_parser("tm", help="traffic-manager queue plan of a mode")
    p.add_argument("mode")
    p.add_argument("--weighted-dclas", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "fit":
            from . import fit
            rep = fit.load(a.build)
            table = fit.render(rep)
            if a.readme:
                changed = fit.update_readme(a.readme, table)
                print(f"{a.readme}: fit table {'updated' if changed else 'unchanged'}", file=sys.stderr)
            print(table, end="")
        elif a.cmd == "device-config":
            from .device_config import write_device_config
            print(write_device_config(a.build, a.server, a.out))
        elif a.cmd == "compare-p4info":
            from .p4info import compare_files
            problems = compare_files(a.v1model, a.tna)
            for pr in problems:
                print(pr)
            if problems:
                return 1
            print("P4Infos agree on everything the controller uses")
        elif a.cmd == "tm":
            from . import tm
            print(json.dumps(tm.as_dict(tm.plan_for_mode(a.mode, a.weighted_dclas)), indent=1))
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

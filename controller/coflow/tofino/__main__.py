"""``python -m coflow.tofino``: the Tofino target's commands.

    fit BUILD [--readme README]        fit table from BUILD/pipe/logs/resources.json (+ phv.json);
                                       --readme rewrites the table between its markers
    device-config BUILD --server S [-o OUT]   p4_device_config for bf_switchd or stratum
    compare-p4info V1MODEL_P4INFO TNA_P4INFO  what the controller uses, checked in both
    tm MODE [--weighted-dclas]         the traffic-manager queue plan of a mode (JSON)
       [--stratum NODE_ID:PORT,... | --bfrt DEV_PORT:PG_ID:Q0,Q1,...]   ... as Stratum's chassis
                                       config QoS section (text) or bf_switchd's tf1.tm writes
    sweep DIR --bits B... [--json OUT] [--readme README]...   the slot sweep's results (JSON),
                                       rendered between each README's tofino-sweep markers
    sweep-render JSON [--readme README]...   render a sweep JSON again
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
    p.add_argument("--stratum", metavar="NODE:PORT,...", help="Stratum QoS section for these ports")
    p.add_argument("--bfrt", metavar="DEV_PORT:PG_ID:QUEUES", action="append",
                   help="bf_switchd tf1.tm writes for a port (QUEUES: its pg_queue per qid)")
    p.add_argument("--shape-mbps", type=float, default=0.0)
    p = sub.add_parser("sweep", help="the slot sweep's results from make p4-tofino-sweep's builds")
    p.add_argument("dir")
    p.add_argument("--bits", type=int, nargs="+", required=True)
    p.add_argument("--compiler", default="")
    p.add_argument("--json", default=None)
    p.add_argument("--readme", action="append", default=[])
    p = sub.add_parser("sweep-render", help="render a sweep JSON into READMEs")
    p.add_argument("json")
    p.add_argument("--readme", action="append", default=[])
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
            plan = tm.with_port(tm.plan_for_mode(a.mode, a.weighted_dclas), a.shape_mbps)
            if a.stratum:
                node, _, ports = a.stratum.partition(":")
                print(tm.stratum_vendor_text(plan, {int(node): [int(x) for x in ports.split(",") if x]}),
                      end="")
            elif a.bfrt:
                cfg = {}
                for spec in a.bfrt:
                    dev, pg, qs = spec.split(":")
                    cfg[int(dev)] = (int(pg), [int(x) for x in qs.split(",")])
                print(json.dumps([{"table": w.table, "key": dict(w.key), "data": dict(w.data)}
                                  for w in tm.bfrt_tm_writes(plan, cfg)], indent=1))
            else:
                print(json.dumps(tm.as_dict(plan), indent=1))
        elif a.cmd in ("sweep", "sweep-render"):
            from . import sweep
            if a.cmd == "sweep":
                doc = sweep.collect(a.dir, a.bits, a.compiler)
                if a.json:
                    sweep.write_json(doc, a.json)
            else:
                with open(a.json) as f:
                    doc = sweep.validate(json.load(f), a.json)
            text = sweep.render(doc)
            for r in a.readme:
                changed = sweep.update_readme(r, text)
                print(f"{r}: slot sweep {'updated' if changed else 'unchanged'}", file=sys.stderr)
            print(text, end="")
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

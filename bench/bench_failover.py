#!/usr/bin/env python3
"""Failover of the controller across "machines" on etcd (`make bench-failover`).

Two `coflow ctl run --etcd` controllers in network namespaces of their own, a 3-member etcd
cluster on loopback addresses, a BMv2 leaf-spine (coflow.ctl.failover.Rig). ``--kills`` times:
register coflows, keep registering through whoever is primary, SIGKILL the primary; the
takeover is the time from the kill to the backup's first round written as primary; every
acknowledged coflow must be in the new primary's registry with a slot (lost = those missing).
Then one etcd member is killed while registering (no takeover expected, nothing lost).
Target: takeover < 2 s, 0 lost. The baseline in the same run: the primary's etcd lease (the
time a backup must wait for certain that the primary is gone), reported beside it.

Ends with one line: ``failover: takeover X s, acked N, lost M`` (X: median over the kills; N,
M: summed over the kills). JSON to --out. Needs root, etcd and `make p4`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--mode", default="dclas")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench", "failover.json"))
    a = ap.parse_args(argv)
    from coflow import topology as T
    from coflow.ctl.failover import Rig
    p4info = os.path.join(ROOT, "build", "coflow.p4info.txt")
    js = os.path.join(ROOT, "build", "coflow.json")
    for p in (p4info, js):
        if not os.path.exists(p):
            print(f"bench-failover: {p} missing (run `make p4`)", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("bench-failover: needs root (network namespaces)", file=sys.stderr)
        return 2
    t = T.leafspine(2, 2, 2)
    print(f"bench-failover: {a.kills} kills of the primary, {a.mode}, leaf-spine of "
          f"{len(t.switches)} BMv2, etcd x3, controllers in two namespaces", flush=True)
    rig = Rig(t, p4info, js, mode=a.mode, log=lambda s: print(s, flush=True)).start()
    kills, member = [], None
    try:
        for i in range(a.kills):
            print(f"[{i + 1}/{a.kills}] kill the primary", flush=True)
            kills.append(rig.kill_primary())
        print("[etcd] kill one member", flush=True)
        member = rig.kill_etcd_member(1)
    finally:
        rig.stop()
    took = [k["takeover_s"] for k in kills if k["takeover_s"] is not None]
    res = {"kills": kills, "etcd_member_kill": member, "lease_ttl_s": 1,
           "takeover_median_s": statistics.median(took) if took else None,
           "takeover_max_s": max(took) if took else None,
           "takeover_over_lease": (statistics.median(took) / 1.0) if took else None,
           "acked": sum(k["acked"] for k in kills), "lost": sum(k["lost"] for k in kills),
           "failed_takeovers": sum(k["takeover_s"] is None for k in kills)}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    x = f"{res['takeover_median_s']:.2f}" if took else "none"
    print(f"failover: takeover {x} s, acked {res['acked']}, lost {res['lost']}")
    return 0 if took and res["lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

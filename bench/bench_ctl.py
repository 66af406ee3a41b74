#!/usr/bin/env python3
"""Controller benchmarks (`make bench-ctl`).

1. SEBF+MADD round (Varys's scheduler round: 100 active coflows, 10k flows; Varys reports 17 ms):
   registry records -> the core's View -> Sebf.allocate -> priorities -> desired entities
   (overrides, flow_meter entries, meter configs). Target: < 5 ms. The protobuf encoding of
   the resulting writes is measured separately (it is P4Runtime client cost, not scheduling).
2. D-CLAS coordination round over the 8 edge switches of a k=4 fat-tree, 20 real
   simple_switch_grpc processes (no ports): read coflow_bytes of 100 coflows from every edge
   (parallel threads, one ReadRequest per edge), compute global queues with the core's D-CLAS,
   write the override differences (one Write per edge). Aalo reports 8 ms average, 19 ms p99;
   target p99 < 10 ms. Measured both in steady state (no queue changes: read + compute only)
   and with 5 coflows demoted per round (about 40 override writes spread over 8 edges).

Reports medians and p99 and the ratio to the targets; the JSON goes to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from types import SimpleNamespace as NS

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "controller"))

from coflow.dataplane import p4rt  # noqa: E402,F401  (protobuf implementation first)

import numpy as np  # noqa: E402


def pct(xs, q):
    return float(np.percentile(np.asarray(xs), q))


def summary(xs) -> dict:
    return {"n": len(xs), "median_ms": statistics.median(xs) * 1e3, "p99_ms": pct(xs, 99) * 1e3,
            "mean_ms": statistics.fmean(xs) * 1e3, "max_ms": max(xs) * 1e3}


def make_records(topo, ncoflows=100, nflows=10_000, seed=1):
    from coflow.api.registry import CoflowId, FlowSpec
    rng = np.random.default_rng(seed)
    hosts = [h.name for h in topo.hosts]
    per = np.full(ncoflows, nflows // ncoflows)
    recs = []
    now = time.time()
    for k in range(ncoflows):
        n = int(per[k])
        src = rng.integers(0, len(hosts), n)
        dst = (src + rng.integers(1, len(hosts), n)) % len(hosts)
        size = np.maximum(1000, rng.lognormal(13, 2, n)).astype(np.int64)
        flows = [FlowSpec(hosts[a], hosts[b], int(s)) for a, b, s in zip(src, dst, size)]
        recs.append(NS(cid=CoflowId(k + 1, 0), flows=flows, registered_at=now - (ncoflows - k) * 0.01,
                       sent_bytes={}, admitted=True))
    return recs


def bench_sebf(rounds: int) -> dict:
    from coflow import topology as T
    from coflow.ctl import model as M
    from coflow.ctl import translate as TR
    from coflow.ctl.codec import Codec
    from coflow.ctl.rates import plan
    from coflow.sched import make_scheduler
    topo = T.fattree(4)
    recs = make_records(topo)
    host_port = {h.name: i for i, h in enumerate(sorted(topo.hosts, key=lambda h: h.index))}
    ctl = TR.CtlSettings(link_mbps=1000)
    sched = make_scheduler("sebf")
    slots = {(r.cid.external, r.cid.internal): i for i, r in enumerate(recs)}
    mem: dict = {}
    t_alloc, t_plan, t_trans, t_total, t_state = [], [], [], [], []
    now = time.time()
    plan("sebf", sched, recs[:2], host_port, ctl.link_Bps, now, {}, ctl.unknown_size_bytes)  # JIT
    ctx = TR.MeterContext(topo)
    vcache: dict = {}
    desired = None
    rng = np.random.default_rng(7)
    for i in range(rounds + 2):
        # between rounds, as Update calls would: 5 coflows report progress on 20 flows each,
        # so the view, the rates and some meters change
        for r in rng.choice(len(recs), 5, replace=False).tolist():
            rec = recs[r]
            for f in rng.choice(len(rec.flows), 20, replace=False).tolist():
                rec.sent_bytes[f] = min(rec.flows[f].size_bytes - 1,
                                        rec.sent_bytes.get(f, 0) + rec.flows[f].size_bytes // 50)
        t0 = time.perf_counter()
        p = plan("sebf", sched, recs, host_port, ctl.link_Bps, now + i * 0.01, mem,
                 ctl.unknown_size_bytes, vcache)
        t1 = time.perf_counter()
        meters = TR.meter_entities_arrays(ctx, p.cids, p.cf, p.src, p.dst, p.rates, slots, ctl)
        ov = [TR.override_entity(c, pr) for c, pr in p.prio.items()]
        t2 = time.perf_counter()
        desired = {}
        for sw, keyed in meters.items():  # as Controller._desired builds it
            st = M.SwitchState.of(ov)
            st.merge_keyed(keyed)
            desired[sw] = st
        t3 = time.perf_counter()
        ta = time.perf_counter()
        sched.allocate(p.view)
        tb = time.perf_counter()
        if i >= 2:  # warm
            t_plan.append(t1 - t0)
            t_trans.append(t2 - t1)
            t_total.append(t2 - t0)
            t_state.append(t3 - t2)
            t_alloc.append(tb - ta)
        sys.stderr.write(f"\rsebf round {i + 1}/{rounds + 2}")
    sys.stderr.write("\n")
    # encoding cost of a full push of that state (first round) and of one round's changes
    codec = Codec.from_file(os.path.join(ROOT, "build", "coflow.p4info.txt")) \
        if os.path.exists(os.path.join(ROOT, "build", "coflow.p4info.txt")) else None
    enc = None
    if codec is not None:
        ops = [op for st in desired.values() for op in M.diff(st, M.SwitchState())]
        t0 = time.perf_counter()
        for op in ops:
            codec.encode_op(op)
        enc = {"updates": len(ops), "ms": (time.perf_counter() - t0) * 1e3}
    nflows = sum(len(r.flows) for r in recs)
    entities = sum(len(s) for s in desired.values())
    return {"coflows": len(recs), "flows": nflows, "desired_entities": entities,
            "allocate_only": summary(t_alloc), "plan (view+allocate+priorities)": summary(t_plan),
            "translate": summary(t_trans), "total (compute+translation)": summary(t_total),
            "desired state build (SwitchState per switch)": summary(t_state),
            "target_ms": 5.0, "varys_ms": 17.0,
            "ratio_to_target (median)": statistics.median(t_total) * 1e3 / 5.0,
            "encode_full_push": enc}


def bench_dclas(rounds: int, p4info: str, bmv2_json: str) -> dict:
    from coflow import topology as T
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl.bmv2 import Bmv2
    from coflow.ctl.daemon import Controller
    from coflow.params import MB
    topo = T.fattree(4)
    base = 9000 + os.getpid() % 1000
    from dataclasses import replace
    topo = T.Topology(topo.name, topo.kind, topo.params, topo.hosts,
                      [replace(s, device_id=s.device_id + base) for s in topo.switches], topo.links)
    sws = {}
    try:
        for s in topo.switches:
            sws[s.name] = Bmv2(s.device_id).start()
            sys.stderr.write(f"\rstarted {len(sws)}/{len(topo.switches)} switches")
        sys.stderr.write("\n")
        reg = CoflowRegistry([h.name for h in topo.hosts])
        hosts = [h.name for h in topo.hosts]
        for k in range(100):
            reg.register([(hosts[k % 16], hosts[(k + 5) % 16], None)])
        ctl = Controller(topo, "dclas", p4info, bmv2_json, {n: b.address for n, b in sws.items()},
                         registry=reg, settings={"audit_s": "0"})
        t0 = time.perf_counter()
        ctl.start(loop=False)
        startup = time.perf_counter() - t0
        ctl.round()
        edges = ctl.edges
        slots = dict(ctl.slots.slot)
        cids = sorted(slots)
        # every coflow has sent something on every edge (below Q1): realistic reads
        for e in edges:
            c = ctl.agents[e].client
            c.write([("MODIFY", _counter(c, slots[cid], 1000 + slots[cid])) for cid in cids])
        steady, busy = [], []
        for i in range(rounds):
            steady.append(ctl.round())
            sys.stderr.write(f"\rsteady round {i + 1}/{rounds}")
        sys.stderr.write("\n")
        level = {cid: 0 for cid in cids}
        for i in range(rounds):
            # demote 5 coflows a queue further: their bytes on one edge pass the next threshold
            c = ctl.agents[edges[i % len(edges)]].client
            ups = []
            for j in range(5):
                cid = cids[(i * 5 + j) % len(cids)]
                level[cid] = min(level[cid] + 1, 7)
                ups.append(("MODIFY", _counter(c, slots[cid], int(10 * MB * 10 ** (level[cid] - 1)))))
            c.write(ups)
            r = ctl.round()
            busy.append(r)
            sys.stderr.write(f"\rdemotion round {i + 1}/{rounds} ({r['updates']} updates)")
        sys.stderr.write("\n")
        # for the record: one wildcard read of all 1024 counters of one edge
        a = ctl.agents[edges[0]]
        tw = []
        for _ in range(5):
            t0 = time.perf_counter()
            a.client.read(a.client.counter_entity("coflow_bytes"))
            tw.append(time.perf_counter() - t0)
        ctl.stop()
        reg.close()

        def phases(rs):
            return {k: summary([r[f"{k}_s"] for r in rs]) for k in ("read", "compute", "write", "total")}
        st, bz = phases(steady), phases(busy)
        return {"switches": len(topo.switches), "edges": len(edges), "coflows": len(cids),
                "startup_s": startup, "steady": st, "with_demotions": bz,
                "updates_per_demotion_round": statistics.fmean(r["updates"] for r in busy),
                "target_p99_ms": 10.0, "aalo_avg_ms": 8.0, "aalo_p99_ms": 19.0,
                "ratio_to_target (p99, demotion rounds)": bz["total"]["p99_ms"] / 10.0,
                "ratio_to_target (p99, steady)": st["total"]["p99_ms"] / 10.0,
                "wildcard_read_1024_counters_ms": statistics.median(tw) * 1e3}
    finally:
        for b in sws.values():
            b.stop()


def _counter(client, index, nbytes):
    ent = client.counter_entity("coflow_bytes", index)
    ent.counter_entry.data.byte_count = nbytes
    ent.counter_entry.data.packet_count = 1
    return ent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--p4info", default=os.path.join(ROOT, "build", "coflow.p4info.txt"))
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "coflow.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench", "bench_ctl.json"))
    ap.add_argument("--skip-dclas", action="store_true")
    args = ap.parse_args(argv)
    res = {"protobuf": os.environ.get("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "?"),
           "sebf": bench_sebf(min(args.rounds, 100))}
    s = res["sebf"]["total (compute+translation)"]
    print(f"SEBF+MADD round, {res['sebf']['coflows']} coflows / {res['sebf']['flows']} flows: "
          f"median {s['median_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms "
          f"(target 5 ms: {s['median_ms'] / 5:.2f}x; Varys 17 ms)")
    for k in ("allocate_only", "plan (view+allocate+priorities)", "translate",
              "desired state build (SwitchState per switch)"):
        print(f"  {k}: median {res['sebf'][k]['median_ms']:.2f} ms, p99 {res['sebf'][k]['p99_ms']:.2f} ms")
    if res["sebf"]["encode_full_push"]:
        e = res["sebf"]["encode_full_push"]
        print(f"  (protobuf encoding of a full push, {e['updates']} updates: {e['ms']:.1f} ms)")
    from coflow.dataplane import toolchain
    if args.skip_dclas:
        pass
    elif not toolchain.discover().simple_switch_grpc or not os.path.exists(args.json):
        print("D-CLAS round: skipped (simple_switch_grpc or build/coflow.json missing)")
    else:
        d = res["dclas"] = bench_dclas(args.rounds, args.p4info, args.json)
        for label, key in (("steady (no queue change)", "steady"), ("5 demotions/round", "with_demotions")):
            ph = d[key]
            print(f"D-CLAS round, {d['edges']} edges / {d['switches']} BMv2 / {d['coflows']} coflows, "
                  f"{label}: median {ph['total']['median_ms']:.2f} ms, p99 {ph['total']['p99_ms']:.2f} ms "
                  f"(target p99 10 ms: {ph['total']['p99_ms'] / 10:.2f}x; Aalo 8 ms avg / 19 ms p99)")
            print("  " + ", ".join(f"{k} median {ph[k]['median_ms']:.2f} / p99 {ph[k]['p99_ms']:.2f} ms"
                                   for k in ("read", "compute", "write")))
        print(f"  demotion rounds wrote {d['updates_per_demotion_round']:.0f} updates on average; "
              f"a wildcard read of all 1024 counters of one edge takes "
              f"{d['wildcard_read_1024_counters_ms']:.1f} ms (pure-Python protobuf)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

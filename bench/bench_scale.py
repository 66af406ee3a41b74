#!/usr/bin/env python3
"""The controller at datacenter scale (`make bench-scale`): D-CLAS and SEBF rounds against N
edge switches, N in {8, 32, 128, 512, 1024}, with 100 and 1,000 coflows.

Switches: real BMv2 (simple_switch_grpc, no ports) up to ``--bmv2-max`` edges, emulated ones
(bench/p4rt_emu.py: a P4Runtime server holding many devices per process) at every N; where both
run, the same rounds on both validate the emulation (round time within 20 %). The fabric is a
leaf-spine of N leaves (the edges, 2 hosts each) and 2 spines; the static routing (one /32 per
host on every switch) is installed in full up to 32 edges and left out beyond (``--routes``): no
round writes it, and at 1,024 edges it would be 2 million entries to push before the first round.

Rounds, each ``Controller.round()`` itself (read, compute, write; wall and the controller
process's CPU time):
- ``dclas`` ``steady``: every coordinated coflow has sent something on every edge, nothing
  changes between rounds (read + compute);
- ``dclas`` ``demotions``: before each round (untimed) 5 coflows' counters on one edge pass the
  next threshold, so each round demotes 5 coflows (override writes on every edge that needs one);
- ``dclas`` ``busy``: before each round every edge's counters of every coflow grow (below Q1: no
  demotion), so every edge's answer changes (what the skip of unchanged answers cannot save);
- ``dclas`` ``steady_demoted``: steady rounds after the demotions (most coflows demoted, an
  override each on nearly every edge);
- ``sebf`` ``progress``: 5 coflows report bytes sent on 20 flows (the API's Update); the round
  reads the closed loop's counters (``flow_bytes`` of every edge with meters), recomputes SEBF
  and writes the meters whose rate moved;
- ``sebf`` ``churn``: the oldest coflow leaves and a new one arrives.
Variants, alternated in blocks of 4 rounds on the same controller and switches (the first round
of a block not counted: its caches were the previous variant's), so their ratios come from the
same minutes of the same machine: ``before`` (grpc futures, every answer decoded), ``aio`` (the
round's RPCs on one asyncio loop), ``skip`` (futures, an answer identical to the last one not
decoded), ``after`` (both), ``push`` (after, and the edges that push their counters on the
stream are not polled: the emulated ones; BMv2 does not push, so there it is ``after``; the
controller's default); SEBF also ``rebuild`` (push, with the closed loop's metered pairs rebuilt
from the meter pool every round and re-observed after every Write: the code before), ``copyrec``
(push, with every registry record copied in every round: the code before the rounds read the
registry's shared snapshots), ``scalarcfg`` (push, with each moved meter's config computed on its
own and patched even when unchanged: the code before the round's meters were computed in one
vector pass) and, in ``churn``, ``readall``
(push, with the closed loop's counters read in the event round too: the code before the read
had its own clock) and ``reset`` (push, with a released meter reset at once: the code before
its config was left in place until the index is taken again); the ``before`` .. ``after``
variants have neither of the last two changes, ``rebuild`` reads in every
round (its baseline in ``churn`` is ``readall``).

The ``digest`` variant (issue 29) is a comparison of its own (bench_dclas_digest): D-CLAS on the
edges' report digests against ``poll`` (the default path: BMv2 polled, the emulated switches'
pushed counters) on one controller with thresholds 1,500 x 2^k, the traffic real packets on BMv2
(PacketOuts into ingress at ``--cpu-port 255``) and counter writes on the emulated switches
(which turn a write that crosses a report step into a digest); rounds ``steady`` and
``demotions`` as above, rows with variants ``poll`` and ``digest``.

D-CLAS's coflows on the edges (``--placements``, each a controller of its own on fresh
switches): ``all``, every coflow counted on every edge (a coflow on every rack, the benchmark
before); ``fb``, each coflow on as many edges as its width in the FB trace (the distinct racks
of its mappers, drawn with a seeded RNG from ``--trace``; a seeded FB-like synthetic trace's
widths when the trace is missing; the rows say which in ``placement_source``), one registered
flow from a host of each. Variant ``alledges``: the default (push) with a demoted coflow's
override on every edge whose local queue differs (the rule before overrides went only where a
coflow sends, coflow.ctl.coord).

The closed loop's read of 4,096 ``flow_bytes`` counters per edge (rate modes, wildcard read) is
measured apart at every N (``closed_loop`` rows), in the same variants.

Writes out/bench/bench_scale.json: {"rows": [{"mode", "edges", "coflows", "switch", "median_ms",
"p99_ms", "cpu_median_ms", "round", "variant", phases, "min_delta_ms", "full_gc_in_rounds" (full
garbage collections inside the counted rounds), ...}], "dclas_queues": {the core's vectorised
D-CLAS queue decision against the per-coflow loop it replaced, same run}, "codec_encode": {a
churn round's writes encoded by the codec and by the generic encoder it replaced, same run},
"meters_all_move": {the meter translation of a round in which every rate moves, against the
per-meter update it replaced, same run}, ...}.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

VARIANTS = ("before", "aio", "skip", "after", "push", "full", "alledges", "digest")

# the phases' common ground and the digest phase, each in a module of its own (bench/)
from scale_common import (  # noqa: E402,F401 (re-exported: tests/test_bench_scale_placement.py)
    BLOCK, CPU_PORT, FB_TRACE, PLACEMENT_SEED, Switches, Traffic, coflow_widths, log, patient, pct, placement,
    proc_cpu, proc_rss_mb, registered, run_rounds, set_variant, start_controller, summarize, topology)
from scale_digest import DIGEST_VARIANTS, bench_dclas_digest  # noqa: E402


def bench_dclas(topo, addrs, sw, ncoflows, rounds, variants, p4info, bmv2_json, routes_full,
                place: str = "all", trace_path: str = FB_TRACE) -> list:
    from coflow.ctl import model as M
    from coflow.ctl.daemon import Controller
    from coflow.params import MB
    reg, sends, source = registered(topo, ncoflows, place, trace_path)
    ctl = Controller(topo, "dclas", p4info, bmv2_json, addrs, registry=reg,
                     settings={"audit_s": "0", "telemetry_s": "0"}, start_timeout=600)
    startup = start_controller(ctl, routes_full)
    rows = []
    traffic = Traffic(ctl, addrs)
    try:
        ctl.round()
        slots = dict(ctl.slots.slot)
        cids = sorted(slots)
        base = {cid: 1000 + slots[cid] for cid in cids}
        on = {e: [c for c in cids if sends[c] is None or e in sends[c]] for e in ctl.edges}
        on = {e: cs for e, cs in on.items() if cs}   # the edges each coflow sends from
        traffic.write_all(M.C_COFLOW_BYTES, {e: {slots[c]: (base[c], 1) for c in cs} for e, cs in on.items()})
        ctl.round()
        pids = sw.pids()
        out = {"steady": run_rounds(ctl, "steady", rounds, variants, pids)}
        bump = [0]

        def busy(i):
            bump[0] += 1
            traffic.write_all(M.C_COFLOW_BYTES, {e: {slots[c]: (base[c] + 100 * bump[0], 1 + bump[0])
                                                     for c in cs} for e, cs in on.items()})
        out["busy"] = run_rounds(ctl, "busy", max(5, rounds // 2), variants, pids, busy)
        level = {c: 0 for c in cids}
        edges = ctl.edges

        def demote(i):
            ups: dict = {}
            for j in range(5):
                c = cids[(i * 5 + j) % len(cids)]
                level[c] = min(level[c] + 1, 7)
                # on one edge (all: edge i; fb: one of the coflow's own sender edges)
                e = edges[i % len(edges)] if sends[c] is None else sends[c][i % len(sends[c])]
                ups.setdefault(e, {})[slots[c]] = (int(10 * MB * 10 ** (level[c] - 1)), 1)
            for e, u in ups.items():
                traffic.write_counters(e, M.C_COFLOW_BYTES, u)
        # every round demotes 5 coflows one level (7 at most): counted and uncounted rounds
        nd = min(rounds, len(cids) * 7 // 5 // len(variants) * (BLOCK - 1) // BLOCK)
        out["demotions"] = run_rounds(ctl, "demotions", nd, variants, pids, demote)
        # steady again, now that the demotions left most coflows demoted with an override on
        # nearly every edge (the case where a full D-CLAS round is O(edges x overrides))
        out["steady_demoted"] = run_rounds(ctl, "steady_demoted", rounds, variants, pids)
        rss = sum(proc_rss_mb(p) for p in pids)
        for scen, per in out.items():
            for v, s in per.items():
                rows.append({"mode": "dclas", "round": scen, "variant": v, "edges": len(ctl.edges),
                             "coflows": ncoflows, "coordinated": len(cids), "switch": sw.kind,
                             "placement": place, "placement_source": source,
                             "sender_edges_mean": statistics.fmean(
                                 len(ctl.edges) if sends[c] is None else len(sends[c]) for c in cids),
                             "switches_rss_mb": rss, "controller_rss_mb": proc_rss_mb(os.getpid()),
                             "startup_s": startup, **s})
    finally:
        traffic.close()
        ctl.stop()
        reg.close()
    return rows


def make_flows(hosts, n, rng, size_scale=1.0):
    from coflow.api.registry import FlowSpec  # noqa: F401
    h = len(hosts)
    n = min(n, h * (h - 1))
    pairs: dict = {}
    while len(pairs) < n:   # distinct (src, dst) pairs: the API takes one flow per pair
        a = rng.integers(0, h, n)
        b = (a + rng.integers(1, h, n)) % h
        for x, y in zip(a.tolist(), b.tolist()):
            if len(pairs) < n:
                pairs.setdefault((x, y), None)
    size = np.maximum(1000, rng.lognormal(13, 2, n) * size_scale).astype(np.int64)
    return [(hosts[a], hosts[b], int(s)) for (a, b), s in zip(pairs, size)]


def bench_sebf(topo, addrs, sw, ncoflows, rounds, variants, p4info, bmv2_json, routes_full,
               total_flows: int = 10_000) -> list:
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl.daemon import Controller
    hosts = [h.name for h in topo.hosts]
    rng = np.random.default_rng(1)
    reg = CoflowRegistry(hosts)
    per = max(1, total_flows // ncoflows)
    cids = [reg.register(make_flows(hosts, per, rng)).cid for _ in range(ncoflows)]
    ctl = Controller(topo, "sebf", p4info, bmv2_json, addrs, registry=reg,
                     settings={"audit_s": "0", "telemetry_s": "0", "link_mbps": "1000"},
                     start_timeout=600)
    startup = start_controller(ctl, routes_full)
    rows = []
    try:
        ctl.round()
        pids = sw.pids()
        live = list(cids)

        def progress(i):
            for k in rng.choice(len(live), min(5, len(live)), replace=False).tolist():
                rec = reg.get(live[k])
                n = len(rec.flows)
                fl = rng.choice(n, min(20, n), replace=False).tolist()
                reg.update(rec.cid, sent={f: min(rec.flows[f].size_bytes - 1,
                                                 rec.sent_bytes.get(f, 0) + rec.flows[f].size_bytes // 50)
                                          for f in fl})
        if "push" in variants:   # the incremental read set's, shared records' and vector
            variants = tuple(variants) + ("rebuild", "copyrec", "scalarcfg")   # meters' baselines
        # the closed loop's clock rounds: each reads the counters (what an API Update changed)
        out = {"progress": run_rounds(ctl, "progress", rounds, variants, pids, progress)}

        def churn(i):
            reg.unregister(live.pop(0))
            live.append(reg.register(make_flows(hosts, per, rng)).cid)
        if "push" in variants:   # baselines of the closed loop's read on its clock and of
            variants = tuple(variants) + ("readall", "reset")   # lingering meters, same run
            # (copyrec and scalarcfg were added for progress: their baselines here too)
        # the loop's answer to an arrival and a departure (an event round)
        out["churn"] = run_rounds(ctl, "churn", max(5, rounds // 2), variants, pids, churn, event=True)
        for scen, s_per in out.items():
            for v, s in s_per.items():
                rows.append({"mode": "sebf", "round": scen, "variant": v, "edges": len(ctl.edges),
                             "coflows": ncoflows, "flows": ncoflows * per, "switch": sw.kind,
                             "meters_in_use": ctl._meter_ctx.pool.in_use(),
                             "unmetered_coflows": len(ctl._meter_ctx.unmetered),
                             "startup_s": startup, **s})
    finally:
        ctl.stop()
        reg.close()
    return rows


def bench_closed_loop(topo, addrs, sw, rounds, variants, p4info, bmv2_json, total_flows=10_000) -> list:
    """The rate modes' closed-loop read of ``flow_bytes`` (a wildcard read of all 4,096 counters
    on every edge, decoded; or, in the ``push`` variant, what the edges pushed), on a controller
    that is started but not scheduling. 10k flows spread over the edges: every edge counts for
    10,000 / N meters. ``steady``: nothing changes between rounds; ``busy``: every one of those
    counters grows before each round (untimed)."""
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl import model as M
    from coflow.ctl import wire
    from coflow.ctl.daemon import Controller
    reg = CoflowRegistry([h.name for h in topo.hosts])
    ctl = Controller(topo, "sebf", p4info, bmv2_json, addrs, registry=reg,
                     settings={"audit_s": "0", "telemetry_s": "0"}, start_timeout=600)
    ctl.routes = {}
    patient(ctl)
    ctl.start(loop=False)
    rows = []
    try:
        agents = [ctl.agents[e] for e in ctl.edges]
        idx = {a.name: None for a in agents}
        per_edge = max(1, total_flows // len(agents))
        active = [int(x) for x in np.linspace(0, 4095, per_edge)]
        traffic = Traffic(ctl, addrs)
        step = [1]

        def write(k):
            traffic.write_all(M.C_FLOW_BYTES, {a.name: {i: (1514 * (i + k), i + k) for i in active}
                                               for a in agents})
        write(1)
        time.sleep(0.05)
        pids = sw.pids()
        for a in agents:
            a.take_pushed()
        for scen in ("steady", "busy"):
            got: dict = {v: [] for v in variants}
            cpu_sw = {v: 0.0 for v in variants}
            nr = rounds if scen == "steady" else max(5, rounds // 2)
            for i in range(nr * len(variants)):
                v = variants[i % len(variants)]
                set_variant(ctl, v)
                if scen == "busy":
                    step[0] += 1
                    write(step[0])
                    time.sleep(0.02)
                s0 = sum(proc_cpu(p) for p in pids)
                c0, t0 = time.process_time(), time.perf_counter()
                n = 0
                polled = agents
                if v == "push":
                    polled = []
                    for a in agents:
                        pc = a.take_pushed()
                        if pc is None:
                            polled.append(a)
                        else:
                            n += len(pc)
                for a, raw in ctl._read_raw(polled, M.C_FLOW_BYTES, idx):
                    if ctl._unchanged(a.name, ("closed-loop",), raw):
                        continue
                    counts: dict = {}
                    for resp in raw:
                        wire.parse_counters_fast(resp, counts)
                    n += len(counts)
                t1, c1 = time.perf_counter(), time.process_time()
                cpu_sw[v] += sum(proc_cpu(p) for p in pids) - s0
                got[v].append({"total_s": t1 - t0, "cpu_s": c1 - c0, "read_s": t1 - t0, "compute_s": 0.0,
                               "write_s": 0.0, "updates": n})
            for v in variants:
                s = summarize(got[v], pids, cpu_sw[v])
                s["counters_decoded_per_round"] = s.pop("updates_per_round")
                rows.append({"mode": "closed_loop", "round": scen, "variant": v, "edges": len(ctl.edges),
                             "coflows": 0, "flows": total_flows, "switch": sw.kind, **s})
        traffic.close()
    finally:
        ctl.stop()
        reg.close()
    return rows


def idle_bmv2_cost(n: int = 4, seconds: float = 5.0) -> dict:
    """Memory and CPU of idle BMv2 processes: ``n`` started with the coflow pipeline pushed."""
    from coflow.ctl.bmv2 import Bmv2
    from coflow.dataplane.p4rt import P4RuntimeClient
    args = _ARGS
    sws = []
    try:
        for k in range(n):
            b = Bmv2(7700 + k + os.getpid() % 100 * 10).start()
            c = P4RuntimeClient(b.address, b.device_id, 10)
            c.connect(timeout=10)
            c.set_pipeline(args.p4info, args.json)
            c.close()
            sws.append(b)
        time.sleep(1.0)
        pids = [b.proc.pid for b in sws]
        c0 = [proc_cpu(p) for p in pids]
        time.sleep(seconds)
        cpu = [(proc_cpu(p) - c) / seconds for p, c in zip(pids, c0)]
        rss = [proc_rss_mb(p) for p in pids]
        return {"switches": n, "rss_mb_median": statistics.median(rss),
                "cpu_frac_median": statistics.median(cpu), "seconds": seconds}
    finally:
        for b in sws:
            b.stop()


def queues_micro(ncoflows: int = 100, reps: int = 300) -> dict:
    """The D-CLAS round's queue decision (the core's ``dclas_queues``, every coflow due, as in
    a coordination tick) against the per-coflow loop it replaced (tests/reference_sched.py,
    the property tests' oracle), same run, alternated: median microseconds per call."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from reference_sched import dclas_queues_reference
    from coflow.ctl.coord import coordination_view
    from coflow.params import DclasParams
    from coflow.sched.queues import dclas_queues
    p = DclasParams(K=8)
    cids = [(k + 1, 0) for k in range(ncoflows)]
    sizes = [float(10 ** (k % 9)) for k in range(ncoflows)]
    t = {"vectorised": [], "loop": []}
    same = True
    for i in range(reps):
        got = {}
        for name, fn in (("vectorised", dclas_queues), ("loop", dclas_queues_reference)):
            v = coordination_view(float(i), cids, sizes, {})
            t0 = time.perf_counter()
            got[name] = fn(v, p)
            t[name].append(time.perf_counter() - t0)
        same = same and np.array_equal(np.asarray(got["vectorised"]), np.asarray(got["loop"]))
    out = {k: statistics.median(x) * 1e6 for k, x in t.items()}
    return {"coflows": ncoflows, "vectorised_us": out["vectorised"], "loop_us": out["loop"],
            "ratio": out["vectorised"] / out["loop"], "same_queues": same}


#: the micro-benchmarks' invariants: (result key, flag) that must be True
INVARIANTS = (("dclas_queues", "same_queues"), ("codec_encode", "identical_bytes"),
              ("meters_all_move", "same_state"))


def broken_invariants(res: dict) -> list[str]:
    """One line per invariant this run measured and found broken."""
    return [f"{k}: {flag} is False (the fast path and its reference disagree)"
            for k, flag in INVARIANTS if k in res and res[k].get(flag) is False]


def codec_micro(reps: int = 200) -> dict:
    """The write phase's client work for one SEBF churn round on 8 edges (100 coflows x 100
    flows): one departure's 100 flow_meter deletes, one arrival's 100 flow_meter inserts with
    their flow_bytes resets and 100 meter configs, a slot, its reset and an override per edge,
    as bench-scale's churn writes them; encoded and serialised by the codec (its fast paths)
    and by the generic encoder it replaced (tests/reference_codec.py, the property test's
    oracle), same run, alternated: median milliseconds per round."""
    import random
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from reference_codec import add_updates_reference
    from coflow.ctl import model as M
    from coflow.ctl import translate as TR
    from coflow.ctl.codec import Codec
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    codec = Codec.from_file(_ARGS.p4info)
    rng = random.Random(29)
    s = TR.CtlSettings(link_mbps=1000)
    per_edge: list = []
    for e in range(8):
        ops = []
        for j in range(12):   # ~100 flows over 8 edges, per coflow
            ops.append(M.Op("DELETE", M.TableEntry(M.T_FLOW_METER, (
                ("external_id", 21), ("internal_id", 0), ("ipv4_dst", 0x0a000000 + rng.randrange(16)),
                ("ipv4_src", 0x0a000000 + 2 * e + j % 2)), M.A_SET_METER, (("index", rng.randrange(4096)),))))
        for j in range(12):
            idx = rng.randrange(4096)
            ops.append(M.Op("MODIFY", M.CounterReset(M.C_FLOW_BYTES, idx)))
            ops.append(M.Op("INSERT", M.TableEntry(M.T_FLOW_METER, (
                ("external_id", 122), ("internal_id", 0), ("ipv4_dst", 0x0a000000 + rng.randrange(16)),
                ("ipv4_src", 0x0a000000 + 2 * e + j % 2)), M.A_SET_METER, (("index", idx),))))
            ops.append(M.Op("MODIFY", TR.meter_config(idx, rng.choice([0.0, rng.random() * 1e8]), s)))
        ops += [M.Op("MODIFY", M.CounterReset(M.C_COFLOW_BYTES, 77)),
                M.Op("INSERT", TR.slot_entity((122, 0), 77)),
                M.Op("INSERT", TR.override_entity((122, 0), 1)),
                M.Op("DELETE", TR.override_entity((21, 0), 5))]
        per_edge.append(ops)
    t: dict = {"codec": [], "reference": []}
    same = True
    for _ in range(reps):
        got: dict = {}
        for name in ("codec", "reference"):
            t0 = time.perf_counter()
            out = []
            for ops in per_edge:
                req = pb.WriteRequest(device_id=1)
                if name == "codec":
                    codec.add_updates(req, ops)
                else:
                    add_updates_reference(codec, req, ops)
                out.append(req.SerializeToString())
            t[name].append(time.perf_counter() - t0)
            got[name] = out
        same = same and got["codec"] == got["reference"]
    med = {k: statistics.median(x) * 1e3 for k, x in t.items()}
    return {"updates": sum(len(o) for o in per_edge), "codec_ms": med["codec"],
            "reference_ms": med["reference"], "ratio": med["codec"] / med["reference"],
            "identical_bytes": same}


def meters_micro(rounds: int = 40) -> dict:
    """The meter translation of a round in which every flow's rate moves a little (a
    starvation interval, a reordering: the SEBF rounds' slowest), 100 coflows x 100 flows on
    the 8-edge fabric: ``MeterContext.update`` against the per-meter update it replaced
    (tests/reference_translate.py, the property tests' oracle), each on its own context, same
    run: median milliseconds per round and the meter keys each patched."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from reference_translate import MeterContextReference
    from coflow.ctl import translate as TR
    topo = topology(8, 0)
    nh = len(topo.hosts)
    rng = np.random.default_rng(29)
    cids = [(k + 1, 0) for k in range(100)]
    cf = np.repeat(np.arange(100), 100)
    src = rng.integers(0, nh, cf.size)
    dst = (src + rng.integers(1, nh, cf.size)) % nh
    base = rng.lognormal(8, 3, cf.size)
    s = TR.CtlSettings(link_mbps=1000)
    ctxs = {"vector": TR.MeterContext(topo), "reference": MeterContextReference(topo)}
    for c in ctxs.values():
        c.update(cids, cf, src, dst, base, None, s)
    t: dict = {k: [] for k in ctxs}
    keys: dict = {}
    for i in range(rounds):
        r = base * (1 + 0.001 * (i + 1))
        for name, c in ctxs.items():
            t0 = time.perf_counter()
            u = c.update(cids, cf, src, dst, r, None, s)
            t[name].append(time.perf_counter() - t0)
            keys[name] = sum(len(k) for *_, k in u.patches)
    med = {k: statistics.median(x) * 1e3 for k, x in t.items()}
    same = ctxs["vector"].state() == ctxs["reference"].state()
    return {"flows": int(cf.size), "vector_ms": med["vector"], "reference_ms": med["reference"],
            "ratio": med["vector"] / med["reference"], "vector_patched": keys["vector"],
            "reference_patched": keys["reference"], "same_state": same}


def emu_cost(topo_edges: int, procs: int) -> dict:
    from p4rt_emu import EmulatedSwitches
    with EmulatedSwitches(list(range(1, topo_edges + 1)), procs) as e:
        time.sleep(0.5)
        return {"devices": topo_edges, "processes": procs,
                "rss_mb_total": sum(proc_rss_mb(p) for p in e.pids())}


def validation(rows: list) -> list:
    """The emulation against BMv2 where both ran (same N, round, variant, coflows): median wall
    and controller CPU, emulated / BMv2."""
    by: dict = {}
    for r in rows:
        if r.get("placement") in (None, "all"):   # the placement the validation is about
            by[(r["mode"], r.get("round"), r.get("variant"), r["edges"], r["coflows"], r["switch"])] = r
    out = []
    for (mode, rnd, v, n, c, kind), b in sorted(by.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        e = by.get((mode, rnd, v, n, c, "emulated"))
        if kind != "bmv2" or e is None or v not in ("before", "after"):
            continue
        out.append({"mode": mode, "round": rnd, "variant": v, "edges": n, "coflows": c,
                    "bmv2_median_ms": b["median_ms"], "emulated_median_ms": e["median_ms"],
                    "median_ratio": e["median_ms"] / b["median_ms"],
                    "bmv2_cpu_ms": b["cpu_median_ms"], "emulated_cpu_ms": e["cpu_median_ms"],
                    "cpu_ratio": e["cpu_median_ms"] / b["cpu_median_ms"],
                    "emu_procs": e.get("emu_procs")})
    return out


def bench_startup(n: int, base: int, args) -> list:
    """The controller's start (connect, arbitrate, pipeline, read back, first round) against
    ``n`` emulated edges with 100 coflows (D-CLAS), its threads, and 20 steady rounds after it:
    with grpc's synchronous StreamChannel per switch (two threads each) and with every stream a
    coroutine on one asyncio loop (the default), one after the other on the same switches."""
    import threading
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl.daemon import Controller
    topo = topology(n, base + 500)
    sw = Switches(topo, "emulated", 2)
    addrs = sw.start()
    out = []
    try:
        for stream in ("aio", "threads"):
            if stream == "threads" and n > args.startup_threads_max:
                continue
            hosts = [h.name for h in topo.hosts]
            reg = CoflowRegistry(hosts)
            for k in range(100):
                reg.register([(hosts[k % len(hosts)], hosts[(k + 5) % len(hosts)], None)])
            ctl = Controller(topo, "dclas", args.p4info, args.json, addrs, registry=reg,
                             settings={"audit_s": "0", "telemetry_s": "0"}, start_timeout=600)
            ctl.routes = {}
            patient(ctl)
            for a in ctl.agents.values():
                a.stream_aio = stream == "aio"
            log(f"N={n} start-up, streams: {stream}")
            c0, e0, t0 = proc_cpu(os.getpid()), sum(proc_cpu(p) for p in sw.pids()), time.perf_counter()
            try:
                ctl.start(loop=False)
                t1 = time.perf_counter()
                c1, e1 = proc_cpu(os.getpid()), sum(proc_cpu(p) for p in sw.pids())
                threads = len(os.listdir(f"/proc/{os.getpid()}/task"))
                rs = []
                for _ in range(20):
                    rs.append(ctl.round())
                    ctl._collect_between_rounds()
                tot = [r["total_s"] * 1e3 for r in rs]
                out.append({"edges": n, "stream": stream, "startup_s": t1 - t0,
                            "controller_cpu_s": c1 - c0, "switches_cpu_s": e1 - e0,
                            "threads": threads, "python_threads": threading.active_count(),
                            "steady_median_ms": statistics.median(tot), "steady_p99_ms": pct(tot, 99),
                            "steady_cpu_median_ms": statistics.median(r["cpu_s"] * 1e3 for r in rs)})
                log(f"  up in {t1 - t0:.1f} s, {threads} threads; steady round "
                    f"{statistics.median(tot):.2f} ms median")
            finally:
                ctl.stop()
                reg.close()
    finally:
        sw.stop()
    return out


_ARGS = None


def main(argv=None) -> int:
    global _ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", default="8,32,128,512,1024")
    ap.add_argument("--coflows", default="100,1000")
    ap.add_argument("--modes", default="dclas,sebf,closed_loop")
    ap.add_argument("--bmv2-max", type=int, default=32, help="BMv2 switches up to this many edges")
    ap.add_argument("--emulated-min", type=int, default=8, help="emulated switches from this many edges")
    ap.add_argument("--rounds", type=int, default=40, help="rounds per variant and scenario")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--large", type=int, default=512, help="from this many edges: --large-rounds, --large-variants")
    ap.add_argument("--large-rounds", type=int, default=8)
    ap.add_argument("--large-variants", default="before,after,push,full,alledges")
    ap.add_argument("--placements", default="all,fb",
                    help="D-CLAS: where the coflows send: all (every coflow on every edge), fb "
                         "(each on as many edges as its FB-trace width, --trace; a seeded synthetic "
                         "trace's widths when the trace is missing)")
    ap.add_argument("--trace", default=FB_TRACE, help="the FB trace whose coflow widths place `fb`")
    ap.add_argument("--digest-variants", default=",".join(DIGEST_VARIANTS),
                    help="the digest comparison's variants (variant `digest` of --variants runs it): "
                         "poll, digest, pollfull, digestfull, digestall (digest with overrides on "
                         "every edge whose local queue differs)")
    ap.add_argument("--digest-placements", default="all",
                    help="the digest comparison's placements (as --placements)")
    ap.add_argument("--emu-procs", type=int, default=0,
                    help="emulated-switch server processes (0: one per switch up to --emu-proc-max "
                         "switches, as BMv2 runs one process per switch; 2 beyond)")
    ap.add_argument("--emu-proc-max", type=int, default=34)
    ap.add_argument("--startup-edges", default="",
                    help="also measure the controller's start-up at these N (emulated), with "
                         "grpc's synchronous StreamChannel threads and with the streams on one "
                         "asyncio loop")
    ap.add_argument("--startup-threads-max", type=int, default=512,
                    help="the synchronous streams' start-up only up to this many edges")
    ap.add_argument("--routes", choices=("auto", "full", "none"), default="auto")
    ap.add_argument("--p4info", default=os.path.join(ROOT, "build", "coflow.p4info.txt"))
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "coflow.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench", "bench_scale.json"))
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of --out that this run does not measure again")
    args = ap.parse_args(argv)
    _ARGS = args
    sys.path.insert(0, os.path.join(ROOT, "controller"))
    from coflow.dataplane import toolchain
    if not (os.path.exists(args.p4info) and os.path.exists(args.json)):
        print("bench-scale: build/coflow.p4info.txt or build/coflow.json missing: run `make p4`")
        return 2
    have_bmv2 = bool(toolchain.discover().simple_switch_grpc) and args.bmv2_max > 0
    edges = [int(x) for x in args.edges.split(",") if x]
    coflows = [int(x) for x in args.coflows.split(",") if x]
    modes = [m for m in args.modes.split(",") if m]
    variants = tuple(v for v in args.variants.split(",") if v)
    import hashlib
    with open(args.p4info, "rb") as f:
        p4info_sha = hashlib.sha256(f.read()).hexdigest()[:12]
    res: dict = {"rows": [], "loadavg_start": os.getloadavg(), "cpus": os.cpu_count(),
                 "p4info": {"path": os.path.realpath(args.p4info), "sha256_12": p4info_sha},
                 "args": vars(args), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if have_bmv2:
        log("idle BMv2 cost")
        res["bmv2_idle"] = idle_bmv2_cost()
    elif args.bmv2_max <= 0:
        log("--bmv2-max 0: emulated switches only")
    else:
        log("simple_switch_grpc not found: emulated switches only")
    if "dclas" in modes:
        res["dclas_queues"] = queues_micro()
        log(f"dclas_queues: {res['dclas_queues']}")
    if "sebf" in modes:
        res["codec_encode"] = codec_micro()
        log(f"codec_encode: {res['codec_encode']}")
        res["meters_all_move"] = meters_micro()
        log(f"meters_all_move: {res['meters_all_move']}")
    base = 20000 + (os.getpid() % 100) * 1100
    out_path = args.out
    kept: list = []
    old_validation: list = []
    if args.append and os.path.exists(out_path):
        with open(out_path) as f:
            old = json.load(f)
        kept = old.get("rows", [])
        for k in ("bmv2_idle", "emulated_idle", "startup", "dclas_queues", "codec_encode",
                  "meters_all_move"):
            if k in old and k not in res:
                res[k] = old[k]
        old_validation = old.get("validation") or []
        res["earlier_runs"] = old.get("earlier_runs", []) + [
            {k: old.get(k) for k in ("started", "finished", "loadavg_start", "loadavg_end", "args")}]

    def key(r):
        return (r["mode"], r.get("round"), r.get("variant"), r["edges"], r["coflows"], r["switch"],
                r.get("placement") or "all")
    places = [x for x in args.placements.split(",") if x]
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    for n in edges:
        kinds = [k for k, ok in (("bmv2", have_bmv2 and n <= args.bmv2_max),
                                 ("emulated", n >= args.emulated_min)) if ok]
        routes_full = args.routes == "full" or (args.routes == "auto" and n <= 32)
        big = n >= args.large
        rounds = args.large_rounds if big else args.rounds
        vs = tuple(v for v in args.large_variants.split(",") if v) if big else variants
        topo = topology(n, base)
        for kind in kinds:
            procs = args.emu_procs or (len(topo.switches) if len(topo.switches) <= args.emu_proc_max else 2)
            sw = Switches(topo, kind, procs)
            log(f"N={n} edges, {len(topo.switches)} {kind} switches: starting")
            t0 = time.perf_counter()
            addrs = sw.start()
            log(f"  switches up in {time.perf_counter() - t0:.1f} s")
            try:
                for mode in modes:
                    for c in (coflows if mode != "closed_loop" else [0]):
                        log(f"N={n} {kind} {mode} coflows={c}")
                        if mode == "dclas":
                            vd = tuple(v for v in vs if v != "digest")
                            rows = []
                            for i, pl in enumerate(places if vd else []):
                                if i:   # fresh switches: the rounds before left their coflows'
                                    sw.stop()   # counters demoted and their overrides in place
                                    addrs = sw.start()
                                log(f"N={n} {kind} dclas coflows={c} placement={pl}")
                                rows += bench_dclas(topo, addrs, sw, c, rounds, vd, args.p4info,
                                                    args.json, routes_full, pl, args.trace)
                            if "digest" in vs:
                                if vd:   # fresh switches: the rounds above left their coflows'
                                    sw.stop()   # counters demoted (nothing would demote here)
                                    addrs = sw.start()
                                for i, pl in enumerate(x for x in args.digest_placements.split(",") if x):
                                    if i:
                                        sw.stop()
                                        addrs = sw.start()
                                    log(f"N={n} {kind} dclas coflows={c}: digest vs poll, placement={pl}")
                                    rows += bench_dclas_digest(
                                        topo, addrs, sw, c, rounds, args.p4info, args.json, routes_full,
                                        [x for x in args.digest_variants.split(",") if x], pl, args.trace)
                        elif mode == "sebf":
                            rows = bench_sebf(topo, addrs, sw, c, rounds, vs, args.p4info,
                                              args.json, routes_full)
                        else:
                            rows = bench_closed_loop(topo, addrs, sw, max(5, rounds // 2),
                                                     vs, args.p4info, args.json)
                        for r in rows:
                            r["loadavg"] = os.getloadavg()[0]
                            r["routes"] = "full" if routes_full else "none"
                            if kind == "emulated":
                                r["emu_procs"] = procs
                        res["rows"] += rows
                        new_keys = {key(r) for r in res["rows"]}
                        kept = [r for r in kept if key(r) not in new_keys]
                        for r in rows:
                            if r["variant"] == vs[-1]:
                                log(f"    {r['mode']} {r['round']} {r.get('placement') or ''}: median {r['median_ms']:.2f} ms, "
                                    f"p99 {r['p99_ms']:.2f} ms, cpu {r['cpu_median_ms']:.2f} ms "
                                    f"(read {r['read_median_ms']:.2f} / compute {r['compute_median_ms']:.2f}"
                                    f" / write {r['write_median_ms']:.2f})")
                        with open(out_path, "w") as f:
                            json.dump(dict(res, rows=kept + res["rows"]), f, indent=1)
            finally:
                sw.stop()
    for n in [int(x) for x in args.startup_edges.split(",") if x]:
        got = bench_startup(n, base, args)
        res.setdefault("startup", [])
        res["startup"] = [r for r in res["startup"] if r["edges"] != n] + got
        with open(out_path, "w") as f:
            json.dump(dict(res, rows=kept + res["rows"]), f, indent=1)
    measured = {(r["mode"], r.get("round"), r.get("variant"), r["edges"], r["coflows"]) for r in res["rows"]}
    res["rows"] = kept + res["rows"]

    def vkey(v):
        return (v["mode"], v["round"], v["variant"], v["edges"], v["coflows"])
    # the pairs this run measured, validated again; the earlier runs' entries kept as they were
    res["validation"] = [v for v in validation(res["rows"]) if vkey(v) in measured] + \
        [v for v in old_validation if vkey(v) not in measured]
    res["loadavg_end"] = os.getloadavg()
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {out_path}")
    broken = broken_invariants(res)
    for line in broken:
        print(f"bench-scale: FAILED: {line}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

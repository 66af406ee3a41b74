#!/usr/bin/env python3
"""Controller benchmarks (`make bench-ctl`).

1. SEBF+MADD round (Varys's scheduler round: 100 active coflows, 10k flows; Varys reports 17 ms;
   target < 5 ms): the controller's own round code (Controller._compute_rates: View, the core's
   Sebf.allocate, priorities, meter translation; _desired; the per-switch diff of the keys that
   changed) on a Controller that is never started (each switch's cache is in memory). Two kinds
   of rounds: progress updates (5 coflows report bytes sent on 20 flows each) and churn (the
   oldest coflow leaves, a new one of 100 flows arrives). Baseline in the same run: the
   from-scratch path (View, meters, every switch's desired state rebuilt, full diff), whose
   writes must be identical (checked every round). Wall and CPU time, GC time in the round; the
   encoding of the round's updates is reported apart (P4Runtime client cost).
2. D-CLAS coordination round over the 8 edge switches of a k=4 fat-tree, 20 real
   simple_switch_grpc processes (no ports): read coflow_bytes of 100 coflows from every edge
   (one ReadRequest per edge, all in flight together), compute global queues with the core's
   D-CLAS, write the override differences (one Write per edge, all in flight together). Aalo
   reports 8 ms average, 19 ms p99; target p99 < 10 ms. Measured in steady state (no queue
   changes: read + compute only) and with 5 coflows demoted per round (about 35-40 override
   writes over 7-8 edges; 140 such rounds at most: every coflow is then in the last queue).
   Wall and the controller process's CPU time per round. On the same switches: the rate modes'
   closed-loop read phase (flow_bytes of every edge in parallel, wildcard and by index).
3. The P4Runtime codec, before and after (issue 20), in one run: decoding a counter
   ReadResponse of 100 / 1,024 / 4,096 entries into index -> (bytes, packets), serialising the
   closed loop's per-index ReadRequest, and building + serialising a WriteRequest of a round's
   updates (flow_meter entries and meter configs: Codec.add_updates, as SwitchAgent.sync does).
   "upb": the generated stubs (coflow.dataplane.pb) on the C protobuf, in this process, the
   baseline of the ratios; "before": the same code on PyPI's p4.v1 modules with the pure-Python
   protobuf, in a subprocess (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python), what the controller
   ran until the stubs were generated; "wire": the compiled counter walker kept in
   coflow.ctl.wire (decoding only).

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

import numpy as np  # noqa: E402

from coflow.progress import phase  # noqa: E402


class GcClock:
    """Time the cyclic garbage collector spends (gc.callbacks), to attribute slow rounds."""

    def __init__(self):
        import gc
        self.total = 0.0
        self.pauses: list = []
        self._t0 = 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase, info):
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            d = time.perf_counter() - self._t0
            self.total += d
            self.pauses.append((info["generation"], d))

    def close(self):
        import gc
        gc.callbacks.remove(self._cb)


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


def bench_sebf(rounds: int, p4info: str, bmv2_json: str) -> dict:
    """The controller's own round code (Controller._compute_rates, _desired, the per-switch
    diff of the keys that changed), on a Controller that is never started: each switch's
    cache is an in-memory SwitchState that every round's ops are applied to. Baseline in the
    same run: the from-scratch path (View, meters, every switch's desired state rebuilt, full
    diff), which must produce exactly the same writes (checked every round)."""
    from coflow import topology as T
    from coflow.ctl import model as M
    from coflow.ctl.daemon import Controller
    from coflow.ctl.reference import FromScratch, controller_ops, first_difference
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    topo = T.fattree(4)
    ctl = Controller(topo, "sebf", p4info, bmv2_json, {s.name: "127.0.0.1:1" for s in topo.switches},
                     settings={"link_mbps": "1000", "audit_s": "0"})
    ctl._warm_up()
    recs = make_records(topo)
    spare = make_records(topo, ncoflows=rounds + 2, nflows=(rounds + 2) * 100, seed=2)
    for k, r in enumerate(spare):  # arrivals for the churn rounds: fresh ids
        r.cid = type(r.cid)(1000 + k, 0)
    ref = FromScratch(ctl)
    actual = {sw: M.SwitchState() for sw in ctl.agents}
    rng = np.random.default_rng(7)
    now = time.time()
    rows = {"updates": [], "churn": []}
    mismatches: list = []
    gcc = None

    def set_records(rs):
        ctl._records = list(rs)
        live = {(r.cid.external, r.cid.internal) for r in rs}
        for c in [c for c in ctl.slots.slot if c not in live]:
            ctl.slots.release(c)
        for c in sorted(live):
            ctl.slots.assign(c)

    def one_round(i):
        t = {}
        g0 = gcc.total if gcc is not None else 0.0
        c0, t0 = time.process_time(), time.perf_counter()
        ops = controller_ops(ctl, actual, now + i * 0.01, t)
        t3, c1 = time.perf_counter(), time.process_time()
        gc_in_round = (gcc.total - g0) if gcc is not None else 0.0
        n = sum(len(o) for o in ops.values())
        for o in ops.values():  # SwitchAgent._prepare's encoding (no client: no election id)
            if o:
                req = pb.WriteRequest(device_id=1)
                ctl.codec.add_updates(req, o)
                req.SerializeToString()
        t4 = time.perf_counter()
        # baseline and check: the same round from scratch (coflow.ctl.reference), full diff
        cb0, tb0 = time.process_time(), time.perf_counter()
        ops_b = ref.ops(now + i * 0.01)
        tb1, cb1 = time.perf_counter(), time.process_time()
        why = first_difference(ops, ops_b)
        if why is not None:
            mismatches.append(f"round {i}: {why}")
        ctl._collect_between_rounds()  # as the controller's loop does after every round
        t.update(total=t3 - t0, cpu=c1 - c0, encode=t4 - t3,
                 base_total=tb1 - tb0, base_cpu=cb1 - cb0, gc=gc_in_round)
        return t, n

    set_records(recs)
    _, n0 = one_round(0)  # first push (every entity)
    one_round(1)
    ctl._freeze_heap()  # as Controller.start does after the initial sync
    gcc = GcClock()
    with phase("sebf rounds (progress updates)", rounds, "round") as bar:
        for i in range(2, rounds + 2):
            # between rounds, as Update calls would: 5 coflows report progress on 20 flows
            # each, so the view, the rates and some meters change
            # (as the registry's snapshots do, an update is a new record: a record a round saw
            # is never modified)
            for r in rng.choice(len(recs), 5, replace=False).tolist():
                rec = recs[r]
                sent = dict(rec.sent_bytes)
                for f in rng.choice(len(rec.flows), 20, replace=False).tolist():
                    sent[f] = min(rec.flows[f].size_bytes - 1, sent.get(f, 0) + rec.flows[f].size_bytes // 50)
                recs[r] = NS(**dict(vars(rec), sent_bytes=sent))
            ctl._records = list(recs)
            rows["updates"].append(one_round(i))
            bar.update()
            bar.set_postfix(mismatched=len(mismatches))
    live = list(recs)
    with phase("sebf rounds (arrival + departure)", rounds // 2, "round") as bar:
        for j in range(rounds // 2):
            # churn: the oldest coflow leaves, a new one (100 flows) arrives
            live = live[1:] + [spare[j]]
            set_records(live)
            rows["churn"].append(one_round(rounds + 2 + j))
            bar.update()
            bar.set_postfix(mismatched=len(mismatches))
    ctl._pool.shutdown()
    ctl.registry.close()
    gcc.close()

    def phases(rs):
        keys = ("view", "allocate", "priorities", "translate", "desired", "diff", "total", "cpu",
                "encode", "base_total", "base_cpu", "gc")
        out = {k: summary([t[k] for t, _ in rs]) for k in keys}
        out["updates_per_round"] = statistics.fmean(n for _, n in rs)
        out["ratio_to_target (median)"] = out["total"]["median_ms"] / 5.0
        out["ratio_to_target (p99)"] = out["total"]["p99_ms"] / 5.0
        out["speedup_vs_from_scratch (median)"] = out["base_total"]["median_ms"] / out["total"]["median_ms"]
        return out
    return {"coflows": len(recs), "flows": sum(len(r.flows) for r in recs),
            "desired_entities": sum(len(s) for s in actual.values()), "first_push_updates": n0,
            "progress_rounds": phases(rows["updates"]), "churn_rounds": phases(rows["churn"]),
            "writes_identical_to_from_scratch": not mismatches, "mismatched_rounds": len(mismatches),
            "first_mismatches": mismatches[:5],
            "target_ms": 5.0, "varys_ms": 17.0}


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
        with phase("starting simple_switch_grpc", len(topo.switches), "switch") as bar:
            for s in topo.switches:
                sws[s.name] = Bmv2(s.device_id).start()
                bar.update()
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
        with phase("dclas steady rounds", rounds, "round") as bar:
            for _ in range(rounds):
                steady.append(ctl.round())
                ctl._collect_between_rounds()  # as the controller's loop does
                bar.update()
        level = {cid: 0 for cid in cids}
        # 100 coflows x 7 demotions each (queue 2..8) / 5 per round: 140 rounds of demotions
        ndemote = min(rounds, len(cids) * 7 // 5)
        bar = phase("dclas demotion rounds", ndemote, "round")
        for i in range(ndemote):
            # demote 5 coflows a queue further: their bytes on one edge pass the next threshold
            c = ctl.agents[edges[i % len(edges)]].client
            ups = []
            for j in range(5):
                cid = cids[(i * 5 + j) % len(cids)]
                level[cid] = min(level[cid] + 1, 7)
                ups.append(("MODIFY", _counter(c, slots[cid], int(10 * MB * 10 ** (level[cid] - 1)))))
            c.write(ups)
            r = ctl.round()
            ctl._collect_between_rounds()
            busy.append(r)
            bar.update()
            bar.set_postfix(updates=r["updates"])
        bar.close()
        # for the record: one wildcard read of all 1024 counters of one edge
        a = ctl.agents[edges[0]]
        tw = []
        for _ in range(5):
            t0 = time.perf_counter()
            a.client.read(a.client.counter_entity("coflow_bytes"))
            tw.append(time.perf_counter() - t0)
        # the rate modes' closed-loop read phase (Controller._read_progress's reads): flow_bytes
        # of every edge, all in flight together; 10k flows over 8 edges is ~1,250 meters per
        # edge, read with one wildcard entity (all 4,096), 100 per edge by index
        from coflow.ctl import model as M
        loop_read: dict = {"wildcard_4096_per_edge": [], "indices_100_per_edge": []}
        for kind, idx in (("wildcard_4096_per_edge", None),
                          ("indices_100_per_edge", tuple(range(0, 4000, 40)))):
            for _ in range(max(20, rounds // 5)):
                t0 = time.perf_counter()
                waits = [ctl.agents[e].read_counter_all_start(M.C_FLOW_BYTES, idx) for e in edges]
                for w in waits:
                    w()
                loop_read[kind].append(time.perf_counter() - t0)
        ctl.stop()
        reg.close()

        def phases(rs):
            return {k: summary([r[f"{k}_s"] for r in rs])
                    for k in ("read", "compute", "write", "total", "cpu")}
        st, bz = phases(steady), phases(busy)
        return {"switches": len(topo.switches), "edges": len(edges), "coflows": len(cids),
                "startup_s": startup, "steady": st, "with_demotions": bz,
                "updates_per_demotion_round": statistics.fmean(r["updates"] for r in busy),
                "target_p99_ms": 10.0, "aalo_avg_ms": 8.0, "aalo_p99_ms": 19.0,
                "ratio_to_target (p99, demotion rounds)": bz["total"]["p99_ms"] / 10.0,
                "ratio_to_target (p99, steady)": st["total"]["p99_ms"] / 10.0,
                "wildcard_read_1024_counters_ms": statistics.median(tw) * 1e3,
                "closed_loop_read_8_edges": {k: summary(v) for k, v in loop_read.items()}}
    finally:
        for b in sws.values():
            b.stop()


# --- 3. the P4Runtime codec, before (pure-Python protobuf) and after (upb) --------------------

CODEC_SIZES = (100, 1024, 4096)   # counters per ReadResponse: a D-CLAS read of 100 coflows; 1,024;
#                                   the closed loop's wildcard read of flow_bytes (4,096 meters)
CODEC_FLOWS = (100, 1000)         # flows per WriteRequest: 2 updates each (entry + meter config)


def _codec_inputs(pb, codec, seed=1):
    """The same messages in both processes (built with whichever protobuf runs)."""
    import random
    from coflow.ctl import model as M
    from coflow.ctl import translate as TR
    rng = random.Random(seed)
    cid = codec.counter_id[M.C_FLOW_BYTES]
    resps = {}
    for n in CODEC_SIZES:
        r = pb.ReadResponse()
        for i in range(n):
            ce = r.entities.add().counter_entry
            ce.counter_id = cid
            ce.index.index = i
            ce.data.byte_count = rng.randrange(1, 1 << 40)
            ce.data.packet_count = rng.randrange(1, 1 << 28)
        resps[n] = r.SerializeToString()
    s = TR.CtlSettings()
    ops = {}
    for nf in CODEC_FLOWS:
        o = []
        for k in range(nf):  # what a churn round writes: flow_meter entries and meter configs
            c = (rng.randrange(1 << 32), rng.randrange(256))
            e = M.TableEntry(M.T_FLOW_METER, (("external_id", c[0]), ("internal_id", c[1]),
                                              ("ipv4_dst", rng.randrange(1 << 32)),
                                              ("ipv4_src", rng.randrange(1 << 32))),
                             M.A_SET_METER, (("index", k % 4096),))
            m = TR.meter_config(k % 4096, rng.random() * 1e8, s)
            if k % 10 == 9:   # a departed flow: entry deleted, meter reset
                o += [M.Op("DELETE", e), M.Op("DELETE", m)]
            else:
                o += [M.Op("INSERT", e), M.Op("MODIFY", m)]
        ops[nf] = o
    return resps, ops


def _time(fn, reps: int, budget_s: float = 2.0) -> dict:
    fn()  # warm (caches, JIT)
    xs: list = []
    t_end = time.perf_counter() + budget_s
    while len(xs) < reps and (len(xs) < 3 or time.perf_counter() < t_end):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return {"n": len(xs), "median_ms": statistics.median(xs) * 1e3, "min_ms": min(xs) * 1e3}


def codec_protobuf_paths(p4info: str, reps: int, binary: bool = False) -> dict:
    """The controller's protobuf paths with whichever protobuf this process runs (``binary``:
    ``p4info`` is a serialised P4Info, not text)."""
    from coflow.ctl import model as M
    from coflow.ctl.codec import Codec
    from coflow.ctl.wire import parse_counters_pb
    from coflow.dataplane.pb import p4info_pb2, p4runtime_pb2 as pb
    from coflow.dataplane.p4rt import P4InfoHelper
    from google.protobuf.internal import api_implementation
    if binary:
        msg = p4info_pb2.P4Info()
        with open(p4info, "rb") as f:
            msg.ParseFromString(f.read())
        codec = Codec(P4InfoHelper(msg))
    else:
        codec = Codec.from_file(p4info)
    resps, ops = _codec_inputs(pb, codec)
    out: dict = {"protobuf": api_implementation.Type()}
    for n, raw in resps.items():
        out[f"decode_{n}"] = _time(lambda raw=raw: parse_counters_pb(raw), reps)
    idx = tuple(range(1024))
    out["read_request_1024"] = _time(
        lambda: codec.counter_read_request(7, M.C_FLOW_BYTES, idx).SerializeToString(), reps)
    for o in ops.values():
        def enc(o=o):
            req = pb.WriteRequest(device_id=7)
            req.election_id.high, req.election_id.low = 0, 10
            codec.add_updates(req, o)
            return req.SerializeToString()
        out[f"encode_{len(o)}_updates"] = _time(enc, reps)
    return out


def _codec_child(p4info: str) -> int:
    """`--codec-child`: the "before" side, PyPI's p4runtime modules on the pure-Python
    protobuf, standing in for coflow.dataplane.pb (the generated stubs are never loaded)."""
    import types
    if os.environ.get("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION") != "python":
        print("--codec-child needs PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python", file=sys.stderr)
        return 2
    from p4.config.v1 import p4info_pb2, p4types_pb2
    from p4.v1 import p4data_pb2, p4runtime_pb2
    import coflow.dataplane
    fake = types.ModuleType("coflow.dataplane.pb")
    fake.p4runtime_pb2, fake.p4data_pb2 = p4runtime_pb2, p4data_pb2
    fake.p4info_pb2, fake.p4types_pb2 = p4info_pb2, p4types_pb2
    sys.modules["coflow.dataplane.pb"] = fake
    coflow.dataplane.pb = fake  # type: ignore[attr-defined]
    # the P4Info comes serialised: the text parser of PyPI's p4runtime modules on the pure-Python
    # protobuf fails on its map field (type_info.structs: "no attribute 'GetEntryClass'", every
    # protobuf from 4.25 to 7 alike)
    res = codec_protobuf_paths(p4info, reps=5, binary=True)
    assert "coflow_p4rt_gen" not in sys.modules
    sys.stdout.write(json.dumps(res))
    return 0


class CodecUnavailable(RuntimeError):
    """The codec comparison cannot run with the protobuf installed (one line says why)."""


def bench_codec(p4info: str, reps: int = 40) -> dict:
    import subprocess
    from coflow.ctl import wire
    from coflow.ctl.codec import Codec
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    import tempfile
    upb = codec_protobuf_paths(p4info, reps)
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    with tempfile.NamedTemporaryFile(suffix=".p4info.bin") as binfo:
        binfo.write(Codec.from_file(p4info).h.p4info.SerializeToString())
        binfo.flush()
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--codec-child", "--p4info", binfo.name],
                           capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        import google.protobuf
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        raise CodecUnavailable(f"its \"before\" side (PyPI's p4runtime modules on the pure-Python protobuf "
                               f"{google.protobuf.__version__}) cannot run here: {last}")
    before = json.loads(r.stdout)
    wire.warm_up()
    resps, _ = _codec_inputs(pb, Codec.from_file(p4info))
    kept: dict = {}
    for n, raw in resps.items():
        assert wire.parse_counters_fast(raw) == wire.parse_counters_pb(raw)
        kept[f"decode_{n}"] = _time(lambda raw=raw: wire.parse_counters_fast(raw), reps)
    out: dict = {"upb": upb, "before": before, "wire": kept, "ratios_to_upb (median)": {}}
    for k, v in upb.items():
        if not isinstance(v, dict):
            continue
        row = {"before": before[k]["median_ms"] / v["median_ms"]}
        if k in kept:
            row["wire"] = kept[k]["median_ms"] / v["median_ms"]
        out["ratios_to_upb (median)"][k] = row
    return out


def print_codec(c: dict) -> None:
    print(f"P4Runtime codec, same run (medians; ratio to upb): before = PyPI's p4runtime modules on "
          f"{c['before']['protobuf']} protobuf (subprocess), upb = the generated stubs "
          f"({c['upb']['protobuf']}), wire = coflow.ctl.wire's compiled counter walker")
    for k, v in c["upb"].items():
        if not isinstance(v, dict):
            continue
        b, ratio = c["before"][k], c["ratios_to_upb (median)"][k]
        what = k.replace("decode_", "decode ReadResponse of ").replace("encode_", "WriteRequest of ")
        what = what.replace("read_request_", "ReadRequest of ") + (" counters" if k.startswith(("decode", "read")) else "")
        line = (f"  {what.replace('_', ' ')}: before {b['median_ms']:.3f} ms ({ratio['before']:.1f}x), "
                f"upb {v['median_ms']:.3f} ms (1x)")
        if "wire" in ratio:
            line += f", wire {c['wire'][k]['median_ms']:.3f} ms ({ratio['wire']:.2f}x)"
        print(line)


def _counter(client, index, nbytes):
    ent = client.counter_entity("coflow_bytes", index)
    ent.counter_entry.data.byte_count = nbytes
    ent.counter_entry.data.packet_count = 1
    return ent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200,
                    help="D-CLAS rounds; the SEBF rounds are min(this, 100) progress rounds and half "
                         "that many churn rounds")
    ap.add_argument("--p4info", default=os.path.join(ROOT, "build", "coflow.p4info.txt"))
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "coflow.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench", "bench_ctl.json"))
    ap.add_argument("--skip-dclas", action="store_true")
    ap.add_argument("--skip-sebf", action="store_true")
    ap.add_argument("--skip-codec", action="store_true")
    ap.add_argument("--codec-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.codec_child:
        return _codec_child(args.p4info)
    from coflow.dataplane import toolchain
    from google.protobuf.internal import api_implementation
    res = {"protobuf": api_implementation.Type(),
           "loadavg": os.getloadavg()}
    if args.skip_codec:
        pass
    elif not os.path.exists(args.p4info):
        print("P4Runtime codec: skipped (build/coflow.p4info.txt missing: run make p4)")
    else:
        try:
            res["codec"] = bench_codec(args.p4info)
        except CodecUnavailable as e:
            res["codec"] = {"skipped": str(e)}
            print(f"P4Runtime codec: skipped: {e}")
        else:
            print_codec(res["codec"])
    if args.skip_sebf:
        pass
    elif not os.path.exists(args.p4info) or not os.path.exists(args.json):
        print("SEBF round: skipped (build/coflow.p4info.txt missing: run make p4)")
    else:
        res["sebf"] = bench_sebf(min(args.rounds, 100), args.p4info, args.json)
        sb = res["sebf"]
        for label, key in (("progress updates", "progress_rounds"), ("arrival + departure", "churn_rounds")):
            ph = sb[key]
            s = ph["total"]
            print(f"SEBF+MADD round, {sb['coflows']} coflows / {sb['flows']} flows, {label}: "
                  f"median {s['median_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms, CPU median "
                  f"{ph['cpu']['median_ms']:.2f} ms (target 5 ms: {s['median_ms'] / 5:.2f}x median, "
                  f"{s['p99_ms'] / 5:.2f}x p99; Varys 17 ms); {ph['updates_per_round']:.0f} updates/round")
            print("  " + ", ".join(f"{k} {ph[k]['median_ms']:.2f}" for k in
                                   ("view", "allocate", "priorities", "translate", "desired", "diff"))
                  + f" ms (medians); garbage collection in the round: max {ph['gc']['max_ms']:.2f} ms")
            print(f"  from-scratch path (same run): median {ph['base_total']['median_ms']:.2f} ms, "
                  f"p99 {ph['base_total']['p99_ms']:.2f} ms, CPU {ph['base_cpu']['median_ms']:.2f} ms "
                  f"({ph['speedup_vs_from_scratch (median)']:.1f}x slower); encoding the round's "
                  f"updates (not in the target): {ph['encode']['median_ms']:.2f} ms")
        print(f"  writes identical to the from-scratch path (coflow.ctl.reference) in every round: "
              f"{sb['writes_identical_to_from_scratch']}")
        for line in sb["first_mismatches"]:
            print(f"  MISMATCH {line}")
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
                                   for k in ("read", "compute", "write", "cpu")))
        print(f"  demotion rounds wrote {d['updates_per_demotion_round']:.0f} updates on average; "
              f"a wildcard read of all 1024 counters of one edge takes "
              f"{d['wildcard_read_1024_counters_ms']:.1f} ms (P4RuntimeClient.read: protobuf, "
              f"{res['protobuf']})")
        for k, v in d["closed_loop_read_8_edges"].items():
            print(f"  rate modes' closed-loop read of flow_bytes, 8 edges in parallel, {k}: "
                  f"median {v['median_ms']:.2f} ms, p99 {v['p99_ms']:.2f} ms")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}")
    if "sebf" in res and not res["sebf"]["writes_identical_to_from_scratch"]:
        print(f"bench-ctl: FAILED: the incremental round's writes differ from the from-scratch "
              f"round's in {res['sebf']['mismatched_rounds']} rounds", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

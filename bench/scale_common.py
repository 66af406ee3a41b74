"""What every phase of `make bench-scale` (bench/bench_scale.py) runs on: the emulated or BMv2
switches and their topology, the controller started patiently and switched between the variants
compared, the traffic (counter writes standing in for packets), the rounds timed in alternating
blocks of variants and their summary, and where the coflows are placed (the FB trace's widths).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import replace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402


#: the FB trace (not committed: ../shared/traces), whose coflow widths place the ``fb`` placement
FB_TRACE = os.path.join(ROOT, "..", "shared", "traces", "FB2010-1Hr-150-0.txt")


PLACEMENT_SEED = 29


def pct(xs, q):
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def log(msg: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (and its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(parts[11]) + int(parts[12])) / tick


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def topology(edges: int, base: int):
    """A leaf-spine of ``edges`` leaves (2 hosts each) and 2 spines; beyond 32 leaves without
    the spines (a spine port per leaf would overflow port_role's 64 entries, and no round
    touches a spine)."""
    from coflow import topology as T
    t = T.leafspine(edges, 2, 2)
    sws = [replace(s, device_id=s.device_id + base) for s in t.switches]
    if edges > 32:
        return T.Topology(t.name + "-nospines", t.kind, t.params, t.hosts, [s for s in sws if s.edge], [])
    return T.Topology(t.name, t.kind, t.params, t.hosts, sws, t.links)


class Switches:
    """The fabric's switches: BMv2 processes or emulated devices; ``pids`` for CPU accounting."""

    def __init__(self, topo, kind: str, emu_procs: int):
        self.topo, self.kind, self.emu_procs = topo, kind, emu_procs
        self.bmv2: dict = {}
        self.emu = None

    def start(self) -> dict:
        if self.kind == "bmv2":
            from coflow.ctl.bmv2 import Bmv2
            for s in self.topo.switches:   # --cpu-port: the digest comparison's PacketOuts
                self.bmv2[s.name] = Bmv2(s.device_id, target_args=("--cpu-port", str(CPU_PORT))).start()
            return {n: b.address for n, b in self.bmv2.items()}
        from p4rt_emu import EmulatedSwitches
        self.emu = EmulatedSwitches([s.device_id for s in self.topo.switches], self.emu_procs).start()
        return {s.name: self.emu.addresses[s.device_id] for s in self.topo.switches}

    def pids(self) -> list:
        if self.kind == "bmv2":
            return [b.proc.pid for b in self.bmv2.values() if b.proc is not None]
        return self.emu.pids() if self.emu else []

    def stop(self) -> None:
        for b in self.bmv2.values():
            b.stop()
        self.bmv2 = {}
        if self.emu is not None:
            self.emu.stop()
            self.emu = None


def patient(ctl) -> None:
    """A thousand switches connecting at once on a loaded 2-core machine: no 1 s connect
    timeout (its retries would keep every switch reconnecting)."""
    for a in ctl.agents.values():
        a.connect_timeout = 60.0


def set_variant(ctl, variant: str) -> None:
    from coflow.ctl.aio import RoundIO
    # push and the variants that are push minus one change: the default I/O
    pushlike = variant in ("push", "rebuild", "readall", "reset", "copyrec", "scalarcfg", "full",
                           "alledges")
    want_aio = variant in ("aio", "after") or pushlike
    if want_aio and ctl.io is None:
        ctl.io = getattr(ctl, "_bench_io", None) or RoundIO()
        ctl._bench_io = ctl.io
    elif not want_aio and ctl.io is not None:
        ctl._bench_io = ctl.io
        ctl.io = None
    ctl.skip_unchanged = variant in ("skip", "after") or pushlike
    ctl.use_push = pushlike
    # digest (issue 29): the default I/O with D-CLAS on the edges' report digests; poll: the
    # default (push) on the same switches and traffic, its baseline (bench_dclas_digest)
    if variant in ("digest", "poll", "pollfull", "digestfull", "digestall"):
        ctl.io = getattr(ctl, "_bench_io", None) or RoundIO()
        ctl._bench_io = ctl.io
        ctl.skip_unchanged = ctl.use_push = True
        ctl.incremental_read_set = ctl.progress_on_clock = True
    want_digest = variant in ("digest", "digestfull", "digestall")
    # full / pollfull / digestfull: push / poll / digest with D-CLAS's full round (every edge
    # and coflow looked at in every round: the code before DclasCoordinator.round_incremental)
    ctl.incremental_coord = variant not in ("full", "pollfull", "digestfull")
    # alledges: push with a demoted coflow's override on every edge whose local queue differs
    # (the rule before overrides went only where the coflow sends; coflow.ctl.coord)
    # (digestall: the same on report digests, against ``digest``)
    ctl.overrides_where_sent = variant not in ("alledges", "digestall")
    if getattr(ctl, "digest", None) is not None and want_digest != ctl.use_digest:
        ctl.use_digest = want_digest
        for e in ctl.edges:   # a view the other variant left: the digest path polls first
            if ctl.agents[e].digests is not None:
                ctl.agents[e].digests.resync("variant")
    # rebuild: the default I/O (push) with the closed loop's metered pairs rebuilt from the
    # meter pool every round (the code before the read set was kept incrementally), read in
    # every round (as readall)
    ctl.incremental_read_set = variant != "rebuild"
    # readall: the default (push) with the closed loop read in every round, an arrival's or
    # departure's too (the code before the read had its own clock); only push reads on the
    # clock (the other variants are the code before it)
    ctl.progress_on_clock = variant in ("push", "reset", "copyrec", "scalarcfg")
    # reset: the default (push) with a released meter reset (the code before its config was
    # left in place until the index is taken again)
    ctl._meter_ctx.linger_released = variant in ("push", "readall", "rebuild", "copyrec", "scalarcfg")
    # copyrec: the default (push) with every registry record copied in every round (the code
    # before the rounds read the registry's shared snapshots, CoflowRegistry.list_shared: the
    # View's per-coflow arrays were then re-checked by comparing each coflow's bytes sent)
    ctl.shared_records = variant != "copyrec"
    # scalarcfg: the default (push) with the meter translation that computed each moved
    # meter's config on its own and patched it whether or not it changed (the code before
    # meter_params; tests/reference_translate.py, the property tests' oracle)
    ctx = ctl._meter_ctx
    ctx.__class__ = _reference_ctx() if variant == "scalarcfg" else _package_ctx()


def _reference_ctx():
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from reference_translate import MeterContextReference
    return MeterContextReference


def _package_ctx():
    from coflow.ctl.translate import MeterContext
    return MeterContext


def start_controller(ctl, routes_full: bool) -> float:
    """Start ``ctl`` without its loop (the static routes left out unless ``routes_full``);
    returns the seconds it took."""
    if not routes_full:
        ctl.routes = {}
    patient(ctl)
    t0 = time.perf_counter()
    ctl.start(loop=False)
    startup = time.perf_counter() - t0
    log(f"  controller up in {startup:.1f} s")
    return startup


class Traffic:
    """The benchmark's data plane: counter writes (the primary's, through the controller's own
    clients, as bench-ctl does), untimed, between rounds."""

    def __init__(self, ctl, addrs: dict):
        self.ctl = ctl

    def _request(self, edge: str, counter: str, values: dict):
        """The serialised WriteRequest setting ``values`` (index -> (bytes, packets)) of
        ``counter`` on ``edge``, as the controller's own client (the primary) sends it."""
        from coflow.dataplane.pb import p4runtime_pb2 as pb
        a = self.ctl.agents[edge]
        req = a.client.write_request()
        cid = self.ctl.codec.counter_id[counter]
        for idx, (nb, npk) in values.items():
            u = req.updates.add()
            u.type = pb.Update.MODIFY
            ce = u.entity.counter_entry
            ce.counter_id = cid
            ce.index.index = idx
            ce.data.byte_count = nb
            ce.data.packet_count = npk
        return a, req.SerializeToString()

    def write_counters(self, edge: str, counter: str, values: dict) -> None:
        """Counter writes need the primary: they go through the controller's own client (as
        bench-ctl does), outside the timed round."""
        a, req = self._request(edge, counter, values)
        with a.lock:
            a.client.write_raw(req, timeout=30)

    def write_all(self, counter: str, per_edge: dict) -> None:
        """Every edge's counter writes, in flight together."""
        waits = []
        for edge, values in per_edge.items():
            a, req = self._request(edge, counter, values)
            waits.append(a.client.write_raw_start(req, timeout=60))
        for w in waits:
            w()

    def close(self) -> None:
        pass


def summarize(rs: list, pids: list, cpu_sw: float) -> dict:
    tot = [r["total_s"] * 1e3 for r in rs]
    out = {"n": len(rs), "median_ms": statistics.median(tot), "p99_ms": pct(tot, 99),
           "cpu_median_ms": statistics.median(r["cpu_s"] * 1e3 for r in rs),
           "cpu_p99_ms": pct([r["cpu_s"] * 1e3 for r in rs], 99)}
    for ph in ("read", "compute", "write"):
        xs = [r[f"{ph}_s"] * 1e3 for r in rs]
        out[f"{ph}_median_ms"] = statistics.median(xs)
        out[f"{ph}_p99_ms"] = pct(xs, 99)
    out["updates_per_round"] = statistics.fmean(r["updates"] for r in rs)
    out["switch_cpu_per_round_ms"] = cpu_sw / max(1, len(rs)) * 1e3
    # the loop can hold a period of at least one round's worst-case (p99) time
    out["min_delta_ms"] = out["p99_ms"]
    return out


#: rounds per variant before switching to the next: the first round of each block is not
#: counted (its caches, the last answers and pushes seen, were another variant's; alternating
#: every round would measure each variant cold)
BLOCK = 4


def run_rounds(ctl, scenario, rounds: int, variants, pids, before_round=None, event=False) -> dict:
    """``rounds`` counted rounds per variant, variants alternated in blocks of :data:`BLOCK`
    (the first of each not counted); returns variant -> summary. ``event``: the rounds are
    the loop's answer to a registry event (rate modes: the closed loop's read only when
    overdue, ``Controller.progress_due(event=True)``), with the loop's clock round (its
    read) run untimed before the event when it is due, as the loop runs it between events."""
    import gc
    got: dict = {v: [] for v in variants}
    cpu_sw = {v: 0.0 for v in variants}
    gcs = {v: [0, 0.0] for v in variants}   # full collections inside counted rounds, seconds
    push0 = sum(a.push_cpu_s for a in ctl.agents.values())
    k = 0
    timing = {"on": False, "t": 0.0}

    def gc_cb(phase, info):
        if not timing["on"] or info.get("generation") != 2:
            return
        if phase == "start":
            timing["t"] = time.perf_counter()
        else:
            gcs[timing["v"]][0] += 1
            gcs[timing["v"]][1] += time.perf_counter() - timing["t"]
    gc.callbacks.append(gc_cb)
    while min(len(got[v]) for v in variants) < rounds:
        v = variants[(k // BLOCK) % len(variants)]
        counted = k % BLOCK != 0
        set_variant(ctl, v)
        if event and ctl.progress_on_clock and ctl.progress_due():
            ctl.round()        # the loop's clock round (the closed loop's read), between events
            ctl._collect_between_rounds()
        if before_round is not None:
            before_round(k)
            time.sleep(0.02)   # what the edges push after a change arrives before the round
        s0 = sum(proc_cpu(p) for p in pids)
        timing["on"], timing["v"] = counted, v
        r = ctl.round(progress=ctl.progress_due(event=True)) if event else ctl.round()
        timing["on"] = False
        if counted:
            cpu_sw[v] += sum(proc_cpu(p) for p in pids) - s0
            got[v].append(r)
        ctl._collect_between_rounds()
        k += 1
        if k % (len(variants) * BLOCK * 3) == 0:
            log(f"  {scenario}: {k} rounds")
    gc.callbacks.remove(gc_cb)
    out = {v: summarize(got[v], pids, cpu_sw[v]) for v in variants}
    for v in variants:
        out[v]["full_gc_in_rounds"], out[v]["full_gc_ms"] = gcs[v][0], gcs[v][1] * 1e3
    push_cpu = sum(a.push_cpu_s for a in ctl.agents.values())
    for v in variants:   # receiving pushes (stream threads, between rounds): per round
        out[v]["push_cpu_per_round_ms"] = (push_cpu - push0) * 1e3 / max(1, k)
    return out


def coflow_widths(n: int, trace_path: str = FB_TRACE, seed: int = PLACEMENT_SEED) -> tuple:
    """``n`` coflow widths (the number of distinct racks its mappers, the senders, sit on),
    drawn with a seeded RNG from the FB trace's coflows when the trace is there, else from a
    seeded FB-like synthetic trace (coflow.trace.generate, 150 ports); returns (widths, what
    they came from)."""
    import random
    from coflow import trace as TR
    if trace_path and os.path.exists(trace_path):
        tr = TR.read_trace(trace_path)
        source = os.path.basename(trace_path)
    else:
        tr = TR.generate(ncoflows=526, ports=150, seed=seed)
        source = f"synthetic (coflow.trace.generate, 526 coflows, 150 ports, seed {seed})"
    widths = [len(set(c.mappers)) for c in tr.coflows]
    rng = random.Random(seed)
    return [rng.choice(widths) for _ in range(n)], source


def placement(topo, ncoflows: int, how: str, trace_path: str = FB_TRACE) -> tuple:
    """The coflows' flows and the edges each sends from. ``all``: one registered flow each,
    every coflow counted on every edge (the benchmark before: a coflow on every rack); ``fb``:
    coflow k sends from w_k distinct edges (its FB width, at most N; raw rack counts of the
    trace's 150-rack cluster, not scaled with N: a job's mappers do not grow with the fabric),
    chosen by a seeded RNG, one registered flow from a host of each. Returns (flows per coflow,
    sender edges per coflow or None for every edge, what the widths came from)."""
    import random
    edges = [s.name for s in topo.edge_switches()]
    hosts_of = {e: [h.name for h in topo.hosts if h.switch == e] for e in edges}
    hosts = [h.name for h in topo.hosts]
    if how == "all":
        return ([[(hosts[k % len(hosts)], hosts[(k + 5) % len(hosts)], None)] for k in range(ncoflows)],
                None, None)
    if how != "fb":
        raise ValueError(f"placement {how!r}: all or fb")
    widths, source = coflow_widths(ncoflows, trace_path)
    rng = random.Random(PLACEMENT_SEED + 1)
    flows, where = [], []
    for w in widths:
        es = rng.sample(range(len(edges)), min(w, len(edges)))
        where.append([edges[i] for i in es])
        flows.append([(hosts_of[edges[i]][0], hosts_of[edges[(i + 1) % len(edges)]][-1], None) for i in es])
    return flows, where, source


def registered(topo, ncoflows: int, place: str, trace_path: str):
    """A registry with ``ncoflows`` coflows placed by ``placement``: (registry, cid -> the edges
    it sends from or None, where the widths came from)."""
    from coflow.api.registry import CoflowRegistry
    reg = CoflowRegistry([h.name for h in topo.hosts])
    flows, where, source = placement(topo, ncoflows, place, trace_path)
    sends = {}
    for k in range(ncoflows):
        r = reg.register(flows[k])
        sends[(r.cid.external, r.cid.internal)] = where[k] if where is not None else None
    return reg, sends, source


CPU_PORT = 255          # BMv2's --cpu-port: PacketOuts enter its ingress there

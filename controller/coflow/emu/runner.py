"""Experiment runner: one fabric, the modes one after another, emulated and simulated CCTs.

Per mode: fresh BMv2 processes (empty tables, counters, registers), the traffic manager of the
mode on every switch egress interface, a fresh controller process (:mod:`coflow.emu.ctlproc`:
pipeline, routes, roles, mode, and the coflow API on a unix socket), the replay
(:func:`coflow.emu.driver.drive`), then the controller stops and the agents abort anything left.
Afterwards the simulator runs the same scaled workload at the same link rate (payload rate of
MTU frames) with the same scaled parameters, and both go into one report.

Everything started is stopped on success, failure, timeout or Ctrl-C (SIGTERM too): agents,
controller, BMv2 processes, Mininet hosts and links, the run directory.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import topology as topo
from .. import trace as T
from ..report import compare_table, format_table, make_report, plot_reports, write_json
from . import plan as P
from .driver import AGENT_PORT, AgentPool, drive
from .fabric import QUEUE_BUDGET, SWITCH_NICE, Fabric, tm_for_mode
from .plan import ECN_FRAMES, LOAD, POOL_PER_PAIR

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FB_TRACE = os.path.join(os.path.dirname(REPO), "shared", "traces", "FB2010-1Hr-150-0.txt")
BUNDLED_TRACE = os.path.join(REPO, "traces", "fb-like-120x16.txt")
from ..sched import deploy as D  # noqa: E402 (the modes, their twins: the schedulers' declarations)
#: the modes ``coflow emu run`` and ``make run`` emulate by default, in order (the schedulers
#: that declare ``Fabric(default=True)``)
DEFAULT_MODES = D.default_modes()


def default_trace() -> str:
    env = os.environ.get("FB_TRACE")
    if env and os.path.exists(env):
        return env
    return FB_TRACE if os.path.exists(FB_TRACE) else BUNDLED_TRACE


CONNECTIONS = ("per-flow", "pool")


@dataclass
class EmuConfig:
    topology: str = "fattree:4"            # kind:param or a topology file
    trace: str = ""
    modes: tuple[str, ...] = DEFAULT_MODES
    coflows: int = 60
    rate_mbps: float = 1.0
    work_s: float = 40.0
    load: float = LOAD
    bytes_factor: float | None = None
    time_scale: float | None = None
    mode_timeout_s: float | None = None
    weighted_dclas: bool = False
    queue_budget: int = QUEUE_BUDGET
    ecn_frames: int = ECN_FRAMES           # ECN marking above this queue depth (0 = none)
    out_dir: str = "out/emu"
    log_level: str = "off"
    switch_nice: int = SWITCH_NICE
    settings: dict[str, str] = field(default_factory=dict)
    per_mode: dict[str, dict[str, str]] = field(default_factory=dict)   # mode -> extra settings
    simulate: bool = True
    progress: bool = True
    keep_run_dir: bool = False
    # "pool" (default): connections opened before the mode starts and reused, as Hadoop's and
    # Spark's shuffle services keep theirs (up to pool_per_pair per host pair; more are opened
    # on demand); "per-flow": one TCP connection per flow, opened when the flow starts
    connections: str = "pool"
    pool_per_pair: int = POOL_PER_PAIR
    # with a pool: a flow that finds the pair's connections busy waits for one ("wait", as a
    # shuffle service bounds its fetches per host) or opens another ("open")
    pool_overflow: str = "wait"
    # net.ipv4 TCP sysctls of every host over coflow.emu.switch.TCP_SYSCTLS (--tcp)
    tcp_sysctls: dict[str, str] = field(default_factory=dict)
    # metered modes: senders paced at the controller's rates (WatchRates), meters with headroom
    pacing: bool = True
    # strict TMs: every class guaranteed this fraction of the port (0: pure strict priority)
    class_floor: float = P.CLASS_FLOOR

    def validate(self) -> None:
        known = D.modes()
        bad = [m for m in self.modes if m not in known]
        if not self.modes:
            raise P.PlanError("modes", "no mode given")
        if bad:
            raise P.PlanError("modes", f"unknown mode(s) {', '.join(bad)}; known: {', '.join(known)}")
        if len(set(self.modes)) != len(self.modes):
            raise P.PlanError("modes", "a mode is listed twice")
        if not (isinstance(self.coflows, int) and self.coflows >= 1):
            raise P.PlanError("coflows", f"must be an integer >= 1, got {self.coflows!r}")
        if not self.rate_mbps > 0 or self.rate_mbps > 100:
            raise P.PlanError("rate", f"must be in (0, 100] Mb/s, got {self.rate_mbps!r}")
        if self.mode_timeout_s is not None and not self.mode_timeout_s > 0:
            raise P.PlanError("timeout", f"must be > 0, got {self.mode_timeout_s!r}")
        if self.queue_budget < 2:
            raise P.PlanError("queue-budget", f"must be >= 2 frames, got {self.queue_budget!r}")
        if not 0 <= self.ecn_frames <= self.queue_budget:
            raise P.PlanError("ecn-frames", f"must be in 0..queue-budget ({self.queue_budget}), "
                              f"got {self.ecn_frames!r}")
        if not 0 <= self.class_floor <= 1 / 8:
            raise P.PlanError("class-floor", f"must be in 0..0.125 (8 classes), got {self.class_floor!r}")
        if self.pool_overflow not in ("wait", "open"):
            raise P.PlanError("pool-overflow", f"must be wait or open, got {self.pool_overflow!r}")
        if self.connections not in CONNECTIONS:
            raise P.PlanError("connections", f"must be one of {', '.join(CONNECTIONS)}, got {self.connections!r}")
        if not (isinstance(self.pool_per_pair, int) and 1 <= self.pool_per_pair <= 64):
            raise P.PlanError("pool-per-pair", f"must be an integer in 1..64, got {self.pool_per_pair!r}")
        if self.log_level not in ("off", "trace", "debug", "info", "warn", "error", "critical"):
            raise P.PlanError("log-level", f"unknown level {self.log_level!r}")

    @property
    def rate_kbit(self) -> int:
        return int(round(self.rate_mbps * 1000))


def load_topology(spec: str) -> topo.Topology:
    """``fattree:4``, ``leafspine:2,2,4``, ``bigswitch:16`` or a topology file."""
    if os.path.exists(spec):
        return topo.load(spec)
    kind, _, arg = spec.partition(":")
    if kind not in topo.GENERATORS:
        raise P.PlanError("topology", f"{spec!r} is neither a file nor one of "
                          f"{', '.join(k + ':...' for k in topo.GENERATORS)}")
    try:
        nums = [int(x) for x in arg.split(",")] if arg else []
        return topo.GENERATORS[kind](*nums)
    except (TypeError, ValueError) as e:
        raise P.PlanError("topology", f"{spec}: {e}") from None


def make_plan(cfg: EmuConfig, t: topo.Topology) -> P.Plan:
    tr = T.read_trace(cfg.trace or default_trace(), allow_unsorted=True)
    hosts = [h.name for h in sorted(t.hosts, key=lambda h: h.index)]
    return P.build_plan(tr, hosts, cfg.coflows, cfg.rate_mbps * 1e6, cfg.bytes_factor,
                        cfg.time_scale, cfg.work_s, cfg.load)


def mode_timeout(cfg: EmuConfig, plan: P.Plan) -> float:
    if cfg.mode_timeout_s:
        return cfg.mode_timeout_s
    return 60.0 + 3.0 * (plan.span_s + plan.work_s)


#: Controller settings of every emulated mode (``--set`` overrides). ``audit_s=0``: no periodic
#: full read-back of the 20 switches; with the default 5 s audit the controller process used a
#: whole core at idle (pure-Python protobuf) and coflow API answers took 0.1-1.8 s instead of
#: 4 ms (measured), which the driver's registrations (and so every CCT) would inherit. The
#: controller still reads back after a reconnect or a failed write.
CTL_DEFAULTS = {"audit_s": "0"}


def meter_burst_settings(t, rate_mbps: float, queue_budget: int) -> dict[str, str]:
    """The rate modes' meter bursts for this fabric (``translate.burst_bytes``): the port
    buffer is the queue budget of full frames; the round-trip time is the longest host-to-host
    path's, each switch hop serialising a full frame one way and an ACK back at the link rate,
    plus ~1 ms of BMv2 per hop and direction (at 1 Mb/s on a k=4 fat-tree: 5 hops, 73 ms)."""
    from ..dataplane.constants import MAX_FRAME_BYTES
    from ..topology import paths
    hosts = sorted(t.hosts, key=lambda h: h.index)
    hops = max((len(p) for p in paths(t, hosts[0].name, hosts[-1].name)), default=1) \
        if len(hosts) > 1 else 1
    per_hop_us = (MAX_FRAME_BYTES + 66) * 8 / rate_mbps + 2000.0
    return {"rtt_us": f"{hops * per_hop_us:.0f}",
            "port_buffer_bytes": str(int(queue_budget) * MAX_FRAME_BYTES)}


def mode_settings(cfg: EmuConfig, mode: str, plan: P.Plan, fabric_topo=None) -> dict[str, str]:
    """``fabric_topo``: the fabric's topology, for the rate modes' meter bursts
    (:func:`meter_burst_settings`)."""
    from ..dataplane.constants import MAX_FRAME_BYTES
    rate = mode in D.rate_modes()
    s = P.scaled_mode_settings(mode, plan)
    s["link_mbps"] = repr(cfg.rate_mbps)
    s["ecn_threshold_bytes"] = str(cfg.ecn_frames * MAX_FRAME_BYTES)
    if fabric_topo is not None and rate:
        s.update(meter_burst_settings(fabric_topo, cfg.rate_mbps, cfg.queue_budget))
        if cfg.ecn_frames > 0:
            s["meter_peak_bursts"] = str(P.METER_PEAK_BURSTS)
    if rate:
        # ordered modes: classes capped by the coflows' sizes on D-CLAS's scaled thresholds
        # (measured: SEBF 1.60x -> 1.82x over fair, beside D-CLAS's 1.87x; mininet/README.md)
        s["class_q1_bytes"] = repr(P.dclas_q1(plan))
        s["class_span"] = str(P.CLASS_SPAN)
    if paced(cfg, mode):
        s["meter_headroom"] = repr(P.METER_HEADROOM)
        s["pace_headroom"] = repr(P.PACE_HEADROOM)
        if "rtt_us" in s:   # a meter is lowered only after its paced sender has slowed
            s["meter_hold_s"] = repr(P.METER_HOLD_RTTS * float(s["rtt_us"]) / 1e6)
            s["pace_hold_s"] = repr(P.PACE_HOLD_RTTS * float(s["rtt_us"]) / 1e6)
        s["rate_capacity_frac"] = repr(P.RATE_CAPACITY_FRAC)
    if D.metered(mode):
        s["rate_audit"] = "1"      # achieved vs set rate per flow, from flow_bytes
    s.update(CTL_DEFAULTS)
    s.update(cfg.settings)
    s.update(cfg.per_mode.get(mode, {}))
    return s


def paced(cfg: EmuConfig, mode: str) -> bool:
    """Whether the agents pace this mode's flows at the controller's rates (metered modes)."""
    return cfg.pacing and D.metered(mode)


def enforcement(cfg: EmuConfig, mode: str) -> str:
    """How a mode's schedule reaches the packets, in a few words (reports, README's table)."""
    from ..sched.base import COORDINATED, FAIR, QUEUES
    how = D.enforcement(mode)
    if how == FAIR:
        return "one FIFO class"
    if how == COORDINATED:
        return "8 strict queues (" + ("bytes-sent demotion" if D.pipeline(mode) == "dclas" else "FIFO groups") \
            + ", coordinated)"
    order = "order in 8 strict queues (classes capped by size, never raised while sending)"
    if how == QUEUES:
        return order + ", no rate control"
    return "order (if it gives one) in 8 strict queues + meters at the sender edges" \
        + (f" (+{P.METER_HEADROOM:.0%}), senders paced {P.PACE_HEADROOM:.0%} above the rates"
           if paced(cfg, mode) else " (policing)")


# --- the simulator beside the emulation -----------------------------------------------------------

def simulate_mode(plan: P.Plan, mode: str, weighted_dclas: bool = False, progress: bool = False,
                  extra: dict[str, str] | None = None) -> dict:
    """``extra``: the run's settings; those naming a parameter of the scheduler apply."""
    import dataclasses
    from ..sched import REGISTRY, make_scheduler, params_dict
    from ..sim import coflow_records, job_records, simulate
    name = D.sim_twin(mode)
    if weighted_dclas and D.pipeline(mode) == "dclas":
        name = mode         # Aalo's weighted queues in the TM: the scheduler itself
    settings = P.scaled_mode_settings(name, plan)
    known = {f.name for f in dataclasses.fields(REGISTRY[name].params_cls)}
    settings.update({k: v for k, v in (extra or {}).items() if k in known})
    wl = plan.workload()
    cap = plan.rate_bps / 8 * P.PAYLOAD_PER_FRAME / P.FRAME_BYTES
    s = make_scheduler(name, settings)
    res = simulate(wl, s, cap, progress=progress, label=f"sim {mode}")
    recs = coflow_records(wl, res, cap)
    if wl.dynamics is None:
        for r, c in zip(recs, plan.coflows):
            r["bin"] = c.bin
    return make_report(name, params_dict(s), wl.ports, recs, res.wall_s, jobs=job_records(wl, res, cap, recs),
                       label=f"sim-{mode}",
                       driver="sim", capacity_Bps=cap, convention=wl.convention)


# --- controller process ----------------------------------------------------------------------------

class ControllerProc:
    def __init__(self, topo_file: str, mode: str, p4info: str, bmv2_json: str,
                 switch_addrs: dict[str, str], api_sock: str, settings: dict[str, str], log: str):
        self.api_sock = api_sock
        cmd = [sys.executable, "-u", "-m", "coflow.emu.ctlproc", "--topo", topo_file, "--mode", mode,
               "--p4info", p4info, "--json", bmv2_json, "--api-unix", api_sock]
        for n, a in sorted(switch_addrs.items()):
            cmd += ["--switch", f"{n}={a}"]
        for k, v in sorted(settings.items()):
            cmd += ["--set", f"{k}={v}"]
        env = dict(os.environ)
        pkg = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env, start_new_session=True)
        self.status: dict | None = None

    def _log_tail(self, lines: int = 3) -> str:
        """The controller log's last lines, on one line (the run directory may be deleted)."""
        try:
            self.log.flush()
            with open(self.log.name, "rb") as f:
                tail = f.read()[-4000:].decode(errors="replace").strip().splitlines()[-lines:]
        except OSError as e:
            return f"(log unreadable: {e})"
        return " | ".join(t.strip() for t in tail) or "(empty log)"

    def wait_ready(self, timeout: float = 90.0) -> None:
        box: list = []
        th = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        th.start()
        th.join(timeout)
        if not box or not box[0]:
            exited = self.proc.poll()
            self.stop()
            why = (f"controller exited with {exited} before it was ready" if exited is not None
                   else f"controller not ready within {timeout:.0f} s")
            raise RuntimeError(f"{why} (see {self.log.name}): {self._log_tail()}")
        try:
            ev = json.loads(box[0])
        except json.JSONDecodeError:
            ev = {}
        if not isinstance(ev, dict) or ev.get("ev") != "ready":
            self.stop()
            raise RuntimeError(f"controller: unexpected first line {box[0][:200]!r} (see {self.log.name})")

    def stop(self) -> None:
        p = self.proc
        if p.poll() is None:
            try:
                out, _ = p.communicate(timeout=10)   # closes stdin: the controller stops
                for line in out.decode(errors="replace").splitlines():
                    try:
                        ev = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if ev.get("ev") == "status":
                        self.status = ev.get("status")
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        self.log.close()


# --- the experiment ---------------------------------------------------------------------------------

def _tm_drops(stats: dict) -> dict:
    """Packets sent and dropped by the leaves of every egress TM, in all and per class."""
    per: dict[str, dict[str, int]] = {}
    for d in stats.values():
        for k, c in d.items():
            if k == "1:1":
                continue
            row = per.setdefault(k, {"packets": 0, "dropped": 0})
            row["packets"] += c.get("packets", 0)
            row["dropped"] += c.get("dropped", 0)
    return {"packets": sum(r["packets"] for r in per.values()),
            "dropped": sum(r["dropped"] for r in per.values()), "per_class": per}


class Experiment:
    def __init__(self, cfg: EmuConfig, plan: P.Plan | None = None):
        """``plan``: a hand-built plan instead of the trace's (its hosts must be the topology's)."""
        cfg.validate()
        self.cfg = cfg
        self.t = load_topology(cfg.topology)
        self.plan = plan if plan is not None else make_plan(cfg, self.t)
        from ..provenance import provenance
        self.provenance = provenance()   # the code the run runs (a later save names it)
        unknown = set(self.plan.hosts) - {h.name for h in self.t.hosts}
        if unknown:
            raise P.PlanError("plan", f"hosts not in {self.t.name}: {', '.join(sorted(unknown))}")
        self.fabric: Fabric | None = None
        self.agents: AgentPool | None = None
        self.ctl: ControllerProc | None = None

    def _artifacts(self):
        from ..dataplane.toolchain import discover
        p4info = os.path.join(REPO, "build", "coflow.p4info.txt")
        bmv2 = os.path.join(REPO, "build", "coflow.json")
        if not (os.path.exists(p4info) and os.path.exists(bmv2)):
            if not discover().p4c:
                raise RuntimeError("build/coflow.json missing and p4c-bm2-ss not found")
            subprocess.run(["make", "-C", REPO, "--no-print-directory", "p4"], check=True)
        return p4info, bmv2

    def run(self) -> dict:
        cfg, plan = self.cfg, self.plan
        p4info, bmv2 = self._artifacts()
        os.makedirs(cfg.out_dir, exist_ok=True)
        self.fabric = Fabric(self.t, log_level=cfg.log_level, switch_nice=cfg.switch_nice,
                             tcp_sysctls=cfg.tcp_sysctls, queue_budget=cfg.queue_budget)
        run_dir = self.fabric.run_dir
        topo_file = os.path.join(run_dir, "topology.json")
        self.t.save(topo_file)
        old = signal.signal(signal.SIGTERM, _sigterm)
        reports: dict[str, dict] = {}
        try:
            _say(f"fabric: {self.t.name}, {len(self.t.switches)} BMv2 switches, {len(self.t.hosts)} hosts, "
                 f"{cfg.rate_mbps:g} Mb/s links; run dir {run_dir}")
            self.fabric.start()
            ips = {h.name: h.ip for h in self.t.hosts}
            self.agents = AgentPool({h.name: self.fabric.host(h.name) for h in self.t.hosts}, ips,
                                    run_dir, AGENT_PORT)
            self.agents.start()
            timeout = mode_timeout(cfg, plan)
            for i, mode in enumerate(cfg.modes):
                reports[mode] = self.run_mode(mode, i, p4info, bmv2, topo_file, timeout)
                write_json(reports[mode], os.path.join(cfg.out_dir, f"emu-{mode}.json"))
        finally:
            signal.signal(signal.SIGTERM, old)
            self.shutdown()
        return self.finish(reports)

    def run_mode(self, mode: str, i: int, p4info: str, bmv2: str, topo_file: str, timeout: float) -> dict:
        cfg, plan, fab = self.cfg, self.plan, self.fabric
        t_mode = time.monotonic()
        if i > 0:
            fab.restart_switches()
        links0 = fab.link_stats()
        tmp = tm_for_mode(mode, cfg.weighted_dclas)
        tmc = fab.apply_tm(tmp, cfg.rate_kbit, cfg.queue_budget, cfg.class_floor)
        sock = os.path.join(fab.run_dir, f"api-{mode}.sock")
        settings = mode_settings(cfg, mode, plan, self.t)
        self.ctl = ControllerProc(topo_file, mode, p4info, bmv2, fab.switch_addrs(), sock, settings,
                                  os.path.join(fab.run_dir, f"ctl-{mode}.log"))
        self.ctl.wait_ready()
        from ..api.client import CoflowClient
        client = CoflowClient(f"unix:{sock}")
        client.list()                      # connect before the clock starts
        pooled = cfg.connections == "pool"
        if pooled:                         # handshakes before the clock starts, as a shuffle service
            from .driver import warm_counts
            opened = self.agents.warm(warm_counts(plan, cfg.pool_per_pair))
            warm_tcp = self.agents.mark()      # the warm-up's counters; the mode's start here
            _say(f"    {mode}: {opened} pooled connections open "
                 f"({warm_tcp.get('TCPSynRetrans', 0)} SYN retransmissions in the warm-up)")
        else:
            warm_tcp = None
        pacing = paced(cfg, mode)
        if pacing:                         # every sender follows the controller's rates
            watching = self.agents.watch(f"unix:{sock}")
            _say(f"    {mode}: {watching}/{len(self.agents.procs)} agents pace at the controller's rates")
        try:
            _say(f"[{i + 1}/{len(cfg.modes)}] {mode}: {len(plan.coflows)} coflows, TM {tmp.discipline} x{tmp.queues}"
                 f" (limit {tmc.limit_pkts} frames), timeout {timeout:.0f} s")
            res = drive(plan, self.agents, lambda flows, **kw: client.register(flows=flows, **kw),
                        client.unregister, run=i + 1, clairvoyant=D.clairvoyant(mode),
                        timeout_s=timeout, progress=cfg.progress, label=mode, reuse=pooled,
                        wait=pooled and cfg.pool_overflow == "wait",
                        add_flows=client.add_flows, update=client.update)
        finally:
            client.close()
            if pacing:
                self.agents.watch("")
            tcp = self.agents.reset()
            try:
                bmv2_q = fab.queue_stats(p4info)
            except Exception as e:  # noqa: BLE001 - a diagnostic: never fail the mode for it
                bmv2_q = {"error": str(e)}
            ecn = bmv2_q.pop("ecn_marked", None)
            meter_marked = bmv2_q.pop("meter_marked", None)
            links = {k: v - links0.get(k, 0) for k, v in fab.link_stats().items()}
            if "enq" in bmv2_q:
                # frames the kernel handed towards the switches that never reached a queue
                links["lost_before_pipeline"] = links["rx_packets"] - sum(bmv2_q["enq"]) - sum(bmv2_q["pipeline_dropped"])
            self.ctl.stop()
            ctl_status, self.ctl = self.ctl.status, None
        tm_stats = _tm_drops(fab.tm_stats())
        ccts = P.coflow_ccts(plan, res.t0, res.records)
        timeline = res.timeline(plan)
        recs = P.coflow_report_records(plan, ccts)
        jobs = None
        if plan.dynamics is not None:   # waves / DAGs: one record per trace coflow, and the jobs
            recs, jobs = P.dynamic_report_records(plan, res.start, res.complete, res.registered)
        rep = make_report(mode, {**settings, "tm": asdict(tmc)}, len(plan.hosts), recs, res.wall_s, jobs=jobs,
                          label=f"emu-{mode}", driver="emu", topology=self.t.name,
                          plan=plan.summary(), timed_out=res.timed_out, errors=res.errors[:50],
                          error_count=len(res.errors), tm=tm_stats,
                          outstanding_flows=len(res.outstanding), outstanding=res.outstanding[:40],
                          dispatch_late_s={"max": max(res.late_s, default=0.0),
                                           "mean": float(np.mean(res.late_s)) if res.late_s else 0.0},
                          register_s={"max": max(res.register_s, default=0.0),
                                      "mean": float(np.mean(res.register_s)) if res.register_s else 0.0},
                          controller=_brief(ctl_status), mode_wall_s=time.monotonic() - t_mode,
                          stages=stage_summary(timeline), tcp=tcp, bmv2_queues=bmv2_q, links=links,
                          flows=timeline,
                          regime=regime_summary(tcp, timeline, ccts, plan, warm_tcp, ecn,
                                                _brief(ctl_status), meter_marked),
                          tcp_warmup=warm_tcp, enforcement=enforcement(cfg, mode),
                          pacing=pacing_summary(res.paced, len(res.sender_times)) if pacing else None)
        s, g = rep["summary"], rep["regime"]
        _say(f"    {mode}: {s['completed']}/{s['coflows']} coflows, avg CCT "
             f"{(s['avg_cct_s'] or float('nan')):.3f} s, p95 {(s['p95_cct_s'] or float('nan')):.3f} s, "
             f"{len(res.errors)} errors, TM drops {tm_stats['dropped']}/{tm_stats['packets'] + tm_stats['dropped']}"
             f"{', TIMED OUT' if res.timed_out else ''}")
        _say("    " + format_regime(g))
        for e in res.errors[:3]:
            _say(f"    error: {e}")
        return rep

    def shutdown(self) -> None:
        if self.agents is not None:
            try:
                self.agents.stop()
            except Exception:  # noqa: BLE001
                pass
            self.agents = None
        if self.ctl is not None:
            try:
                self.ctl.stop()
            except Exception:  # noqa: BLE001
                pass
            self.ctl = None
        if self.fabric is not None:
            self.fabric.stop()
            if not self.cfg.keep_run_dir:
                self.fabric.remove_run_dir()

    def finish(self, reports: dict[str, dict]) -> dict:
        cfg, plan = self.cfg, self.plan
        out = {"plan": plan.summary(), "config": {k: v for k, v in asdict(cfg).items()},
               "topology": self.t.name, "reports": reports,
               "provenance": getattr(self, "provenance", None)}
        from ..sched.base import FAIR
        # the baseline: the fair-sharing mode when it ran, else the first mode
        base = next((m for m in reports if D.enforcement(m) == FAIR), next(iter(reports)))
        emu_table = compare_table(reports, base)
        out["table"] = emu_table
        print(f"\nemulated: {self.t.name} (BMv2), {len(plan.coflows)} coflows of "
              f"{os.path.basename(plan.trace_path)}, {cfg.rate_mbps:g} Mb/s links")
        print(format_table(emu_table))
        if cfg.simulate:
            sims = {m: simulate_mode(plan, m, cfg.weighted_dclas,
                                     extra={**cfg.settings, **cfg.per_mode.get(m, {})})
                    for m in reports}
            for m, r in sims.items():
                write_json(r, os.path.join(cfg.out_dir, f"sim-{m}.json"))
            sim_table = compare_table(sims, base)
            out["sim_reports"] = sims
            out["sim_table"] = sim_table
            print(f"\nsimulated: big switch, same scaled trace, {cfg.rate_mbps:g} Mb/s ports "
                  f"({', '.join(f'{m}={D.sim_twin(m)}' for m in sims if D.sim_twin(m) != m)})")
            print(format_table(sim_table))
            out["emu_vs_sim"] = emu_vs_sim(emu_table, sim_table)
            print("\n" + format_emu_vs_sim(out["emu_vs_sim"]))
            plot_reports({f"sim-{m}": r for m, r in sims.items()}, os.path.join(cfg.out_dir, "sim"),
                         f"sim-{base}", "simulated CCT")
        paths = plot_reports({f"emu-{m}": r for m, r in reports.items()}, cfg.out_dir, f"emu-{base}",
                             f"emulated CCT ({self.t.name})")
        write_json(out, os.path.join(cfg.out_dir, "compare.json"))
        print(f"JSON: {os.path.join(cfg.out_dir, 'compare.json')}; plots: {', '.join(paths)}")
        return out


def emu_vs_sim(emu_table: dict, sim_table: dict) -> dict:
    rows = {}
    for m, r in emu_table["rows"].items():
        s = sim_table["rows"].get(m)
        if s is None:
            continue
        row = {}
        for k in ("avg", "p95"):
            e, v = r.get(k), s.get(k)
            row[k] = {"emu": e, "sim": v,
                      "diff": (e / v - 1.0) if e is not None and v not in (None, 0) else None}
        rows[m] = row
    return rows


def format_emu_vs_sim(rows: dict) -> str:
    f = lambda x: f"{x:9.2f}" if x is not None else f"{'-':>9}"
    g = lambda x: f"{100 * x:+8.0f}%" if x is not None else f"{'-':>9}"
    out = ["emulated vs simulated normalized CCT (improvement over fair)",
           f"{'mode':<10}{'emu avg':>9}{'sim avg':>9}{'diff':>9}{'emu p95':>9}{'sim p95':>9}{'diff':>9}"]
    for m, r in rows.items():
        out.append(f"{m:<10}{f(r['avg']['emu'])}{f(r['avg']['sim'])}{g(r['avg']['diff'])}"
                   f"{f(r['p95']['emu'])}{f(r['p95']['sim'])}{g(r['p95']['diff'])}")
    return "\n".join(out)


def pacing_summary(paced: dict, flows: int) -> dict:
    """Flows whose sender paced at a controller rate (``paced``: (coflow, flow) -> the rate it
    started at, None when no rate came in time) among the ``flows`` that finished sending."""
    rates = [r for r in paced.values() if r is not None]
    return {"flows": flows, "paced": len(rates), "no_rate_in_time": len(paced) - len(rates),
            "median_rate_Bps": float(np.median(rates)) if rates else None}


def regime_summary(tcp: dict, timeline: list[dict], ccts: list, plan,
                   warmup: dict | None = None, ecn_marked: int | None = None,
                   controller: dict | None = None, meter_marked: int | None = None) -> dict:
    """How much of a mode's time is TCP's loss recovery rather than scheduling: retransmitted
    segments over segments sent, SYN retransmissions per connection opened, RTO timeouts, and
    per coflow the share of its CCT spent before its first byte arrived (arrival -> the first of
    its flows connected: registration, dispatch and handshakes, where a lost SYN costs the
    initial RTO). With pooled connections (``warmup``: the hosts' counters over the warm-up,
    before the mode's clock) the connections and SYN retransmissions count those of the
    warm-up too (``warmup_connections``, ``warmup_syn_retrans`` apart); the segments are the
    mode's. ``ecn_marked``: frames the switches' ports marked CE (their queues past the
    threshold); ``meter_marked``: frames the sender edges' meters marked CE (YELLOW);
    ``controller`` (its brief status): the meters' RED drops (``meter_red_drops``)."""
    def ratio(a, b):
        return a / b if a is not None and b else None
    first: dict = {}
    for f in timeline:
        if f.get("connected") is not None:
            first[f["coflow"]] = min(first.get(f["coflow"], np.inf), f["connected"])
    shares = []
    for c, cct in zip(plan.coflows, ccts):
        if cct and c.trace_id in first:
            shares.append(min(1.0, max(0.0, first[c.trace_id] / cct)))
    sh = np.asarray(shares)
    w = warmup or {}
    syn = _add(tcp.get("TCPSynRetrans"), w.get("TCPSynRetrans"))
    conns = _add(tcp.get("ActiveOpens"), w.get("ActiveOpens"))
    return {"retrans_segs": tcp.get("RetransSegs"), "out_segs": tcp.get("OutSegs"),
            "retrans_ratio": ratio(tcp.get("RetransSegs"), tcp.get("OutSegs")),
            "syn_retrans": syn, "connections": conns,
            "syn_retrans_per_connection": ratio(syn, conns),
            "warmup_connections": w.get("ActiveOpens"), "warmup_syn_retrans": w.get("TCPSynRetrans"),
            "timeouts": tcp.get("TCPTimeouts"), "ecn_marked": ecn_marked, "meter_marked": meter_marked,
            "meter_red_drops": meter_red_drops(controller),
            # retransmissions of segments the receiver already had (D-SACK): no loss behind them
            "spurious_retrans_segs": tcp.get("TCPDSACKRecvSegs"), "spurious_rtos": tcp.get("TCPSpuriousRTOs"),
            "before_first_byte_share": ({"median": float(np.median(sh)), "mean": float(sh.mean()),
                                         "p95": float(np.percentile(sh, 95))} if sh.size else None)}


def meter_red_drops(controller: dict | None) -> int | None:
    """The meters' RED drops from the controller's brief: 0 where a metered mode's telemetry
    counted none (its drop counts list only nonzero reasons), None without meters or telemetry."""
    c = controller or {}
    dp = c.get("dataplane")
    if not isinstance(dp, dict):
        return None
    red = (dp.get("drops") or {}).get("METER_RED")
    metered = c.get("mode") in D.modes() and D.metered(c["mode"])
    return red if red is not None or not metered else 0


def _add(a, b):
    return None if a is None else a + (b or 0)


def format_regime(g: dict) -> str:
    pct = lambda x: "-" if x is None else f"{100 * x:.1f}%"
    b = g.get("before_first_byte_share") or {}
    return (f"regime: retransmitted {pct(g.get('retrans_ratio'))} of segments, "
            f"{pct(g.get('syn_retrans_per_connection'))} SYN retransmissions per connection "
            f"({g.get('connections', '-')} opened), "
            f"{g.get('timeouts') if g.get('timeouts') is not None else '-'} timeouts, "
            f"{g.get('ecn_marked') if g.get('ecn_marked') is not None else '-'} ECN marks"
            + (f" (+ {g['meter_marked']} by the meters)" if g.get("meter_marked") is not None else "")
            + (f", {g['meter_red_drops']} meter RED drops" if g.get("meter_red_drops") is not None else "")
            + (f", {g['spurious_retrans_segs']} retransmitted segments the receiver had (D-SACK)"
               if g.get("spurious_retrans_segs") is not None else "")
            + f"; time before a coflow's first byte: median {pct(b.get('median'))} of its CCT")


#: flows of at most this many bytes are "small" in :func:`stage_summary` (a few segments)
SMALL_FLOW_BYTES = 4096


def stage_summary(timeline: list[dict]) -> dict:
    """Median / p95 / max of each stage of a flow (s), for all flows and for small ones:
    ``dispatch`` (arrival -> the driver handed the send over: API registration and driver
    lateness), ``agent`` (-> the agent opened the socket), ``handshake`` (-> connected),
    ``transfer`` (-> the receiver had every byte)."""
    def stats(xs):
        if not xs:
            return None
        a = np.asarray(xs)
        return {"median": float(np.median(a)), "p95": float(np.percentile(a, 95)), "max": float(a.max())}
    out = {}
    for label, pick in (("all", lambda f: True), ("small", lambda f: f["bytes"] <= SMALL_FLOW_BYTES)):
        fl = [f for f in timeline if pick(f) and None not in (f["dispatched"], f["started"], f["connected"], f["received"])]
        out[label] = {"flows": len(fl),
                      "dispatch": stats([f["dispatched"] for f in fl]),
                      "agent": stats([f["started"] - f["dispatched"] for f in fl]),
                      "handshake": stats([f["connected"] - f["started"] for f in fl]),
                      "transfer": stats([f["received"] - f["connected"] for f in fl])}
    return out


def _brief(status) -> dict | None:
    """The controller's final status, without the per-switch detail."""
    if not isinstance(status, dict):
        return None
    out = {k: status[k] for k in ("mode", "rounds", "last_round") if k in status}
    sw = status.get("switches")
    if isinstance(sw, dict):
        vals = [v for v in sw.values() if isinstance(v, dict)]
        out["switches"] = len(sw)
        for k in ("writes", "write_errors", "reconnects", "pipeline_pushes"):
            out[k] = sum(int(v.get(k, 0) or 0) for v in vals)
        out["last_errors"] = sorted({v.get("last_error") for v in vals if v.get("last_error")})[:5]
    if isinstance(status.get("coflows"), list):
        out["coflows_left"] = len(status["coflows"])
    if isinstance(status.get("meters"), dict):
        # rate modes: the meter pool and the closed loop (rounds that read flow_bytes)
        out["meters"] = status["meters"]
    if isinstance(status.get("rate_audit"), dict):
        out["rate_audit"] = status["rate_audit"]     # achieved vs set rate (metered modes)
    cl = status.get("claims")
    if isinstance(cl, dict) and isinstance(cl.get("totals"), dict):
        # the claim checks and demand caps over the mode (rate modes; counts since start)
        out["claims"] = dict(cl["totals"])
    dp = status.get("dataplane")
    if isinstance(dp, dict) and dp:
        # the pipeline's own drop counters, summed over the switches (ctl.observe.Telemetry)
        snaps = [v for v in dp.values() if isinstance(v, dict)]
        drops: dict = {}
        for v in snaps:
            for reason, n in (v.get("drops") or {}).items():
                if n:
                    drops[reason] = drops.get(reason, 0) + int(n)
        out["dataplane"] = {"drops": drops,
                            "slot_collisions": sum(int(v.get("slot_collisions") or 0) for v in snaps),
                            "slot_takeovers": sum(int(v.get("slot_takeovers") or 0) for v in snaps),
                            "queue_drops": sum(int(n) for v in snaps for n in (v.get("queue_drops") or {}).values())}
    return out


def _sigterm(*_):
    raise KeyboardInterrupt


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)

"""The controller daemon: desired state from topology + mode + coflows, reconciled onto every
switch over P4Runtime; global D-CLAS coordination every Δ; rates for the rate modes.

Round (one thread, ``_loop``):
1. read (D-CLAS only): ``coflow_bytes[slot]`` of every registered coflow from every edge
   switch, in parallel threads, one ReadRequest per switch;
2. compute: the coordinator's global queues and overrides (D-CLAS), or the scheduler core's
   Allocation (rate modes, when the registry changed or the scheduler's next event is due);
3. write: per switch, desired = static (routes, ECMP, roles, config, thresholds) + coflow slots
   + overrides + meters; the diff against the switch's cached state goes out as one Write per
   switch, in parallel.
Switch (re)connections, pipeline pushes and read-backs happen in each switch's keeper thread
(:mod:`coflow.ctl.switch`); the loop is woken when one completes.
"""
from __future__ import annotations

import gc
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import topology as topo_mod
from ..sched.base import INF
from . import model as M
from . import translate as TR
from .codec import Codec
from .coord import DclasCoordinator

from .desired import DesiredBook
from .observe import Metrics, StatusServer, Telemetry
from .rates import (FlowProgress, MeterHold, RateAudit, plan as rate_plan, rate_snapshot)
from .switch import SwitchAgent, pipeline_cookie, sync_many
from .aio import RoundIO
from . import wire

from .modes import mode_policy
# the Controller's parts, each in a module of its own (mixins of one class, one state)
from .primary import Primary
from .reporting import Reporting
from .round_counters import CounterReads
from .round_progress import _RATES_TRACE, ClosedLoop

log = logging.getLogger(__name__)


def default_switch_addrs(topology, grpc_base: int = 50000, host: str = "127.0.0.1") -> dict:
    return {s.name: f"{host}:{grpc_base + s.device_id}" for s in topology.switches}


#: seconds an unregistered coflow keeps its slot entry (its connections' last packets)
SLOT_LINGER_S = 1.0


class Controller(Primary, CounterReads, ClosedLoop, Reporting):
    def __init__(self, topology, mode: str, p4info: str, bmv2_json: str, switch_addrs: dict,
                 registry=None, settings: dict | None = None, election_id: int = 10,
                 delta_s: float = 0.01, metrics_addr: str | None = None,
                 status_file: str | None = None, start_timeout: float = 30.0,
                 target: str = "bmv2", tofino_server: str | None = None, port_map=None,
                 tm_pusher=None, p4rt_tls=None, election=None):
        """``target``: ``bmv2`` or ``tofino`` (coflow.tofino.target): slot counts, D-CLAS key
        units and heavy_bytes units of the P4 program ``p4info`` describes; ``bmv2_json`` is
        then the device config to push (for Tofino built by coflow.tofino.device_config).
        Tofino: ``tofino_server`` (``bf_switchd`` / ``stratum``) and ``port_map``
        (coflow.tofino.ports) say how table entries name ports; ``tm_pusher``
        (coflow.tofino.tmpush.TmPusher) configures each switch's traffic manager whenever it
        comes up as primary.
        ``p4rt_tls``: :class:`coflow.dataplane.p4rt.ChannelTls` for every switch's channel
        (None: plaintext, the emulation's and the local default). ``election``:
        :class:`coflow.api.etcd.Election` (HA across machines): this controller writes to the
        switches and takes registry changes only while it holds the election, and its
        P4Runtime election id is derived from it (``election_id`` is then ignored)."""
        self.target = TR.get_target(target)
        if mode not in TR.MODES:
            raise ValueError(f"unknown mode {mode!r}; modes: {', '.join(TR.MODES)}")
        missing = [s.name for s in topology.switches if s.name not in switch_addrs]
        if missing:
            raise ValueError(f"no gRPC address for switch(es) {', '.join(missing)}")
        if delta_s <= 0:
            raise ValueError("delta_s must be > 0")
        self.topo = topology
        self.mode = mode
        self.p4info_path = os.path.abspath(p4info)
        self.bmv2_json_path = os.path.abspath(bmv2_json)
        self.ctl, sched_settings = TR.split_settings(settings)
        self.policy = mode_policy(mode, sched_settings)
        self.sched = self.policy.sched
        self.dclas_params = self.policy.dclas_params
        self.dclas_entities = TR.dclas_entities(self.dclas_params, self.target)  # validates K <= 8
        self.heavy_bytes = self.policy.heavy_bytes if self.policy.heavy_bytes is not None else TR.NO_HEAVY
        self.delta_s = delta_s
        self.election = election
        self.ha: dict = {"takeovers": 0, "became_primary_at": None, "first_round_at": None,
                         "takeover_s": None}
        self._ha_pending: float | None = None
        if election is not None:
            election.on_change = self._on_election
            election_id = election.election_id()
            if election.leader:
                self._ha_pending = election.became_leader_at or time.time()
        self.election_id = election_id
        self.codec = Codec.from_file(self.p4info_path)
        self.cookie = pipeline_cookie(self.p4info_path, self.bmv2_json_path)
        self.routes = topo_mod.routes(topology)
        self.edges = [s.name for s in topology.edge_switches()]
        self.host_port = {h.name: i for i, h in enumerate(sorted(topology.hosts, key=lambda h: h.index))}
        if registry is None:
            from ..api.registry import CoflowRegistry
            registry = CoflowRegistry([h.name for h in topology.hosts])
        self.registry = registry
        if getattr(registry, "shared", False) and registry.leader is None:
            registry.leader = self.is_primary    # only the primary takes changes
        self.metrics = Metrics()
        self._metric_children: dict = {}
        self._up_seen: dict = {}   # switch -> the coflow_ctl_switch_primary value last set
        # data-plane drop / collision counters, read every telemetry_s (observe.Telemetry)
        self.telemetry = Telemetry(
            self.codec, {s.name: ([port_map.sdk_port(s.name, p) for p in s.ports]
                                  if port_map is not None else s.ports)
                         for s in topology.switches},   # per-queue counters: SDK ports
            meter_switches=self.edges if self.policy.rate else (),
            collision_switches=self.edges,
            interval_s=self.ctl.telemetry_s, coflow_slots=self.target.coflow_slots,
            on_error=lambda name: self.metrics.read_errors.labels(name).inc())
        self.metrics.registry.register(self.telemetry)
        self.tofino_server = tofino_server
        self.port_map = port_map
        self.tm_pusher = tm_pusher
        self.metrics_addr = metrics_addr
        self.status_file = status_file
        self.start_timeout = start_timeout
        self.agents = {
            s.name: SwitchAgent(s.name, switch_addrs[s.name], s.device_id, election_id, self.codec,
                                self.p4info_path, self.bmv2_json_path, self.cookie,
                                on_change=self._switch_event,
                                on_master=tm_pusher.apply if tm_pusher is not None else None,
                                tls=p4rt_tls)
            for s in topology.switches}
        # model (guarded by _mu)
        self._mu = threading.RLock()
        self.slots = TR.SlotTable(self.target.assigned_slots)
        self.telemetry.in_use = self._telemetry_slots   # per-slot counters: the slots in use
        self._gone: dict = {}   # unregistered coflow -> when (monotonic): its slot lingers
        self.coord = DclasCoordinator(self.dclas_params)
        self.sched_memory: dict = {}
        self._records: list = []
        self._registry_dirty = True
        self._seeded = False
        self._overrides: dict = {e: {} for e in self.edges}  # switch -> {cid: prio}
        self._prio: dict = {}  # rate modes: cid -> prio
        self._plan_prio: dict = {}  # rate modes: last plan's classes (keep_classes)
        self._meter_hold = MeterHold(self.ctl.meter_hold_s)
        self._pace_hold = MeterHold(self.ctl.pace_hold_s)   # the same rule, for the senders
        self._next_event = INF
        self._rates_stale = True
        self._static_cache = None
        self._slot_cache: tuple = (None, {})
        self._ovr_cache: tuple = (None, {})  # rate modes: (prio dict, keyed override entities)
        self._ovr_src: dict = {}  # dclas: edge -> the override dict its component was built from
        self._view_cache: dict = {}
        self._meter_ctx = TR.MeterContext(topology, self.target.metered_slots,
                                          fcs_bytes=self.target.fcs_bytes)
        # the rates the coflow API's WatchRates streams (scheduled modes; serve(rates=...))
        from ..api.rates import RateBoard
        self.rate_board = RateBoard() if self.policy.rate else None
        # rate modes' closed loop: bytes sent per flow from the edges' flow_bytes counters
        self.progress = FlowProgress(self.target.fcs_bytes)
        # metered modes, rate_audit=1: achieved vs set rate per flow (issue 27)
        self.audit = RateAudit() if (self.ctl.rate_audit and self.policy.meters) else None
        self.ledger = self._grant_ledger()   # grants vs use: demand caps, the claims' clock
        self._audit_size: dict = {}   # (cid, src, dst) -> the flow's size (the audited pairs)
        self._progress_used = 0   # progress.version the last allocation used
        self.progress_reads = 0
        # the loop's rounds read the closed loop's counters on their own clock (every
        # progress_s): a round woken by the registry (an arrival, a departure) before the
        # read is due computes and writes without waiting for it (``progress_on_clock``;
        # False: every round reads, the code before; bench-scale's baseline)
        self.progress_on_clock = True
        self._progress_at = -INF   # time.monotonic() of the last closed-loop read
        # desired state per switch, kept incrementally (components + keys changed since each
        # switch's last successful sync)
        self.book = DesiredBook(self.agents)
        self._queues: dict = {}
        self._sizes: dict = {}
        self._round_lock = threading.Lock()  # one round at a time (loop, start, tests)
        self.rounds = 0
        self.last_round: dict = {}
        # threads
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=max(2, min(len(self.agents), 64)),
                                        thread_name_prefix="ctl-io")
        # the round's reads and writes: on one asyncio loop (``round_aio=1``, RoundIO) or as
        # grpc futures from the loop thread (0)
        self.io = RoundIO(p4rt_tls) if self.ctl.round_aio else None
        # per switch: (request, coordinator epoch / meter state, raw responses) of the last
        # counter read; an identical answer is not decoded again (``skip_unchanged``)
        self._raw_last: dict = {}
        self.skip_unchanged = True
        self.use_push = bool(self.ctl.push)   # read what the edges pushed (when they do)
        self._push_seen: dict = {}            # switch -> (push sequence, key) last observed
        # the closed loop's metered pairs kept by the meter context (False: rebuilt from the
        # pool every round and every pushed reading copied, as before; bench-scale's baseline)
        self.incremental_read_set = True
        self._obs_memo: dict = {}   # switch -> (read-set version, {index: (reading, entry)})
        if self.ctl.push:
            counter = (M.C_COFLOW_BYTES if self.policy.coordinated else
                       M.C_FLOW_BYTES if self.policy.rate and self.ctl.progress_s > 0 else None)
            for e in self.edges:
                self.agents[e].push_counter = counter
        # report digests (issue 29, setting ``digest``): D-CLAS rounds on pushed crossings
        self.digest = self._digest_rounds() if self.policy.dclas else None
        self.use_digest = bool(self.ctl.digest) and self.digest is not None
        # tests' reference: one switch's Write after the other (False: all in flight together)
        self.sequential_writes = False
        self._unsubscribe = None
        self._http: StatusServer | None = None
        self._last_status_write = 0.0
        self._last_audit = time.monotonic()
        # leases (coflow.api.registry): expired each round; renewed by traffic seen in counters
        self.leases_expired = 0
        self.leases_renewed_by_traffic = 0
        self._traffic_seen: dict = {}
        self._last_renew = 0.0
        self._health = None             # (grpc health servicer, service name, last status)
        # declared sizes are claims (rate modes): coflows whose bytes broke them, for good
        self.distrusted: dict = {}      # cid -> {"at", "pair", "measured_bytes", "declared_bytes"}
        self._claim_seen: dict = {}     # cid -> progress.changes(cid) at its last check
        self._desized: dict = {}        # cid -> (record, the record without sizes)
        # rounds read the registry's shared snapshots (CoflowRegistry.list_shared)
        self.shared_records = True
        # D-CLAS rounds at the cost of what changed (DclasCoordinator.round_incremental; False:
        # the full round over every edge and coflow, the code before: bench-scale's baseline)
        self.incremental_coord = True
        self._ovr_changed: list | None = None   # edges whose overrides changed (None: all)
        # coordinated modes' overrides only on the edges where a coflow sends (counted bytes or
        # a registered flow's sender; coflow.ctl.coord); False: on every edge whose local
        # decision differs (the rule before; bench-scale's ``alledges`` baseline)
        self.overrides_where_sent = True
        self._host_edge = {h.name: h.switch for h in topology.hosts}
        self._senders: dict = {}        # cid -> frozenset of its registered senders' edges
        self._senders_memo: dict = {}   # cid -> (record, that frozenset)

    # lifecycle ----------------------------------------------------------------------------
    def start(self, loop: bool = True) -> "Controller":
        """Connect to every switch, arbitrate, push the pipeline where needed, read back, adopt
        what the switches hold (slots, overrides: a restarted controller continues), install
        the static state, then start the loop. Returns once every switch is connected and every
        switch this controller is primary for holds the desired state (the fabric forwards).
        ``loop=False`` (benchmarks, tests): no background loop; call :meth:`round` yourself
        (switch reconnections still happen in the background)."""
        if self.metrics_addr:
            self._http = StatusServer(self.metrics_addr, self.metrics, self.status)
            self.metrics_addr = self._http.address
        for a in self.agents.values():
            a.start()
        if self.policy.rate:
            self._warm_up()  # while the switches connect
        elif self.policy.coordinated:
            wire.warm_up()  # the compiled counter walker
        self._unsubscribe = self.registry.subscribe(self._on_registry)
        deadline = time.monotonic() + self.start_timeout
        try:
            while True:
                states = {n: a.state for n, a in self.agents.items()}
                if all(s != SwitchAgent.DOWN for s in states.values()):
                    break
                if time.monotonic() > deadline:
                    down = [f"{n} ({self.agents[n].address}: {self.agents[n].last_error or 'no answer'})"
                            for n, s in states.items() if s == SwitchAgent.DOWN]
                    raise RuntimeError(f"switches not reachable within {self.start_timeout} s: "
                                       + "; ".join(down))
                time.sleep(0.02)
            self._seed_from_switches()
            self.round()
            bad = {n: a.last_error for n, a in self.agents.items()
                   if a.state == SwitchAgent.MASTER and a.actual is None}
            if bad:
                raise RuntimeError("initial sync failed: " + "; ".join(f"{n}: {e}" for n, e in bad.items()))
            self._freeze_heap()
        except BaseException:
            self.stop()
            raise
        if loop:
            self._thread = threading.Thread(target=self._loop, daemon=True, name="ctl-loop")
            self._thread.start()
            self.telemetry.start(self.agents)
        return self

    @staticmethod
    def _freeze_heap() -> None:
        """What exists after the initial sync (topology, routes, codec, JIT-compiled kernels,
        the switches' cached state) lives as long as the controller: move it out of the
        cyclic garbage collector's reach (``gc.freeze``), so that the full collections a
        round may trigger scan only what rounds create (a full scan of everything took
        up to 170 ms on this machine, a p99 round by itself)."""
        gc.collect()
        gc.freeze()

    @staticmethod
    def _collect_between_rounds() -> None:
        """Run the collections the allocator is about to trigger now, between rounds, rather
        than inside the next one: generation 0 when it is half full (1-3 ms), generation 1
        when the next generation-0 collection would bring it along (20-30 ms with the entities
        a churn of coflows leaves behind), generation 2 when that one would bring it along."""
        c0, c1, c2 = gc.get_count()
        t0, t1, t2 = gc.get_threshold()
        if t0 <= 0 or not gc.isenabled():
            return  # the embedding program manages collection itself
        if c2 > t2 or (c2 >= t2 - 1 and c1 >= t1 - 1 and c0 > t0 // 4):
            # a full collection (everything not frozen: 20-40 ms after a churn of coflows, the
            # p99 of a churn round by itself) is pending (CPython runs it at a generation-0
            # collection once its count passed the threshold, when enough long-lived objects
            # are new) or the next generation-1 collection would make it so
            gc.collect(2)
        elif c1 >= t1 - 1 and c0 > t0 // 4:
            gc.collect(1)
        elif c0 > t0 // 2:
            gc.collect(0)

    def _hand_back(self) -> None:
        """On a clean stop, rewrite pipeline_config with ``managed = 0`` on every switch this
        controller is primary for: no controller is in charge any more, so coflows it never
        registered get Aalo's fallback again instead of the lowest class (p4src/README.md,
        "What a host can gain by lying"). A crashed controller leaves ``managed = 1``."""
        static = self._static_cache[1] if self._static_cache is not None else {}
        for name, a in self.agents.items():
            if name not in static:
                continue
            for cfg in static[name].of_kind("default"):
                if cfg.table != M.T_CONFIG:
                    continue
                off = cfg._replace(params=tuple((k, 0 if k == "managed" else v) for k, v in cfg.params))
                with a.lock:
                    if a.state != a.MASTER or a.client is None:
                        continue
                    try:
                        req = a.client.write_request()
                        self.codec.add_updates(req, [M.Op("MODIFY", off)])
                        a.client.write_raw(req.SerializeToString(), timeout=2.0)
                    except Exception as e:  # noqa: BLE001 - a switch going away: nothing to hand back
                        log.warning("%s: could not hand pipeline_config back: %s", name, e)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self.rate_board is not None:
            self.rate_board.close()      # open rate streams end
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self.telemetry.stop()
        if self._unsubscribe is not None:
            try:
                self._unsubscribe()
            except Exception:  # noqa: BLE001
                pass
            self._unsubscribe = None
        self._hand_back()
        for a in self.agents.values():
            a.stop()
        self._pool.shutdown(wait=False)
        if self.io is not None:
            self.io.close()
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # the loop -----------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.policy.coordinated:
                timeout = self.delta_s
            else:
                # rate modes' closed loop: read the meters' counters every progress_s while
                # any meter is in use
                # (a floor of 5 ms: a round that fails before its read does not spin)
                top = max(0.005, self._progress_wait()) if (
                    self.policy.rate and self.ctl.progress_s > 0
                    and self._meter_ctx.pool.index_of) else 0.5
                timeout = min(top, max(0.0, self._next_event - time.time()))
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                # a shared registry: catch up with what the primary (or, after a takeover,
                # the previous one) committed; its events mark the registry dirty
                if getattr(self.registry, "shared", False):
                    self.registry.follow()
                # a round woken by the registry (an arrival, a departure, an Update) is
                # written without the closed loop's read unless that is overdue; the read
                # follows in the next round, on its clock
                self.round(progress=self.progress_due(event=self._registry_dirty))
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("controller round failed")
            self._collect_between_rounds()

    def _refresh_coflows(self) -> set:
        """Registry -> slots; returns the coflows whose slot is new."""
        self._registry_dirty = False
        self._rates_stale = True
        # the registry's shared snapshots (an unchanged coflow is the same record object as
        # in the last round: its cached arrays are reused without a compare; False: a fresh
        # copy of every record, the code before; bench-scale's baseline)
        shared = getattr(self.registry, "list_shared", None) if self.shared_records else None
        self._records = shared() if shared is not None else self.registry.list()
        live = {(r.cid.external, r.cid.internal) for r in self._records}
        # an unregistered coflow keeps its slot entry SLOT_LINGER_S longer: its connections'
        # last packets (FIN, final ACKs) are still classed as its own, not as unregistered
        now = time.monotonic()
        for cid in [c for c in self.slots.slot if c not in live]:
            gone = self._gone.setdefault(cid, now)
            if now - gone >= SLOT_LINGER_S:
                del self._gone[cid]
                self.slots.release(cid)
                self.coord.forget(cid)
        for cid in [c for c in self._gone if c in live or c not in self.slots.slot]:
            del self._gone[cid]
        self.progress.forget_except(live)
        for led in (self.audit, self.ledger):
            if led is not None:
                led.forget_except(live)
        for d in (self.distrusted, self._claim_seen, self._desized):
            for c in [c for c in d if c not in live]:
                del d[c]
        new = set()
        for cid in sorted(live):
            if cid not in self.slots.slot:
                s = self.slots.assign(cid)
                if s is not None:
                    self.coord.slot_reset(s)
                    new.add(cid)
        if self.digest is not None:
            self.digest.set_owners([self.agents[e] for e in self.edges], self.slots.slot)
        if self.policy.coordinated:
            self._senders = self._sender_edges()
        return new

    def round(self, progress: bool = True) -> dict:
        """One read / compute / write round; returns its timings (seconds: wall, and the
        process's CPU time as ``cpu_s``) and update count. ``progress``: rate modes: read the
        closed loop's counters in this round (the loop passes :meth:`progress_due`)."""
        with self._round_lock:
            return self._round(progress)

    def progress_due(self, event: bool = False) -> bool:
        """Whether a round now reads the closed loop's counters: ``progress_s`` has passed
        since the last read; for a round woken by a registry ``event`` (its changes are
        written before the read, which follows on its clock), only when the read is overdue,
        2 x ``progress_s`` since the last one (so a stream of events cannot starve it).
        Always with ``progress_on_clock`` off (every round reads)."""
        if not self.progress_on_clock:
            return True
        late = self.ctl.progress_s if event else 0.0
        return time.monotonic() - self._progress_at >= self.ctl.progress_s + late

    def _progress_wait(self) -> float:
        """Seconds until the closed loop's next read is due (0: due now)."""
        return max(0.0, self._progress_at + self.ctl.progress_s - time.monotonic())

    def _round(self, progress: bool = True) -> dict:
        t0 = time.perf_counter()
        c0 = time.process_time()
        if self.election is not None:
            self._sync_election_id()
        self._expire_leases()
        with self._mu:
            if self._registry_dirty or (self._gone and min(self._gone.values()) + SLOT_LINGER_S
                                        <= time.monotonic()):
                self._refresh_coflows()
        if self.policy.coordinated:
            t_read = self._read_counters()
        elif self.policy.rate and progress:
            t_read = self._read_progress()
        else:
            t_read = 0.0
        self._renew_by_traffic()
        t1 = time.perf_counter()
        with self._mu:
            if self.policy.coordinated:
                senders = self._senders if self.overrides_where_sent else None
                if self.policy.dclas:
                    rnd = self.coord.round_incremental if self.incremental_coord else self.coord.round
                    res = rnd(time.time(), dict(self.slots.slot), self.edges, senders)
                else:
                    res = self.coord.fifo_lm_round(time.time(), dict(self.slots.slot), self.edges,
                                                   self.sched, senders)
                self._overrides, self._ovr_changed = res.overrides, res.changed
                self._queues, self._sizes = res.queues, res.sizes
            elif self.policy.rate and (self._rates_due()):
                self._compute_rates()
            desired = self._desired()
        t2 = time.perf_counter()
        written, errors = self._write(desired)
        self._publish_raises()     # the paces raised this round: their meters are written
        t3 = time.perf_counter()
        if self._ha_pending is not None and errors == 0 and self.is_primary():
            # the first round written as the new primary: the takeover is complete
            self.ha["first_round_at"] = time.time()
            self.ha["takeover_s"] = self.ha["first_round_at"] - self._ha_pending
            self._ha_pending = None
        m = self._metric
        if self.policy.coordinated or t_read:
            m("round_seconds", "read").observe(t_read)
        m("round_seconds", "compute").observe(t2 - t1)
        m("round_seconds", "write").observe(t3 - t2)
        m("round_seconds", "total").observe(t3 - t0)
        m("rounds", self.mode).inc()
        self.rounds += 1
        self.last_round = {"read_s": t_read, "compute_s": t2 - t1, "write_s": t3 - t2,
                           "total_s": t3 - t0, "cpu_s": time.process_time() - c0,
                           "updates": written, "errors": errors, "at": time.time()}
        self._publish()
        return self.last_round

    # rate modes ---------------------------------------------------------------------------
    def _warm_up(self) -> None:
        """Run the scheduler once on a made-up view: the core's numba kernels compile on first
        use (about a second), which must not delay the first real coflow."""
        from types import SimpleNamespace as NS
        from ..api.registry import CoflowId, FlowSpec
        hosts = list(self.host_port)
        if len(hosts) < 2:
            return
        fake = [NS(cid=CoflowId(i + 1, 0), admitted=True, registered_at=time.time(), sent_bytes={},
                   flows=[FlowSpec(hosts[0], hosts[1], 1000 * (i + 1)),
                          FlowSpec(hosts[1], hosts[0], 500)]) for i in range(2)]
        rate_plan(self.mode, self.sched, fake, self.host_port, self.ctl.link_Bps, time.time(), {},
                  self.ctl.unknown_size_bytes)

    def _rates_due(self) -> bool:
        return (self._rates_stale or time.time() >= self._next_event
                or self.progress.version != self._progress_used)

    def _progress_from(self, ag, entries: dict, idx, got, how: tuple) -> None:
        """Feed one edge's flow_bytes reading (``got``: serialised responses, or index ->
        (bytes, packets) as pushed) to the closed loop, for the pairs of ``entries`` (index ->
        (cid, src, dst, flow_meter entry)) whose flow_meter entry the switch holds."""
        sw = ag.name
        actual = ag.actual
        if actual is None:
            return
        # the same answer for the same observable entries: nothing to observe again
        key = self._progress_key(ag, idx, how, entries)
        if how[0] == "push":
            if self._push_seen.get(sw) == key:
                return
            self._push_seen[sw] = key
            counts = got
        else:
            if self._unchanged(sw, key, got):
                return
            counts = {}
            for resp in got:
                wire.parse_counters_fast(resp, counts)
        have = actual.entities
        t_got = time.time()
        # per switch: index -> (reading, entry) last observed; the same reading of the same
        # held entry again would change nothing (observe is idempotent): not fed again
        memo = None
        if self.incremental_read_set and self.audit is None:   # (the audit wants every sample)
            ver = self._meter_ctx.read_version.get(sw, 0)
            got_memo = self._obs_memo.get(sw)
            if got_memo is None or got_memo[0] != ver:
                old = got_memo[1] if got_memo is not None else {}
                got_memo = self._obs_memo[sw] = (ver, {i: m for i, m in old.items()
                                                        if i in entries and entries[i][3] is m[1]})
            memo = got_memo[1]
        with self._mu:
            for i, (cid, a, b, e) in entries.items():
                c = counts.get(i)
                if c is None:
                    continue
                if memo is not None:
                    m = memo.get(i)
                    if m is not None and m[1] is e and m[0] == c:
                        continue
                if have.get(e.key) == e:
                    if memo is not None:
                        memo[i] = (c, e)
                    self.progress.observe(cid, a, b, (sw, i), c[0], c[1])
                    if self.audit is not None:
                        self.audit.observe((cid, a, b), t_got, self.progress.pair_sent(cid, a, b),
                                           self._audit_size.get((cid, a, b)))

    def _compute_rates(self, now: float | None = None, timings: dict | None = None) -> None:
        """The core's Allocation on the registered coflows -> priorities and meters, handed to
        the desired-state book (``timings``: seconds per phase, for the benchmark)."""
        self._progress_used = self.progress.version
        self._check_claims(now)
        records = self._claimed_records()
        measured = self.progress.measured(records, self.host_port) if self.progress.version else None
        p = rate_plan(self.mode, self.sched, records, self.host_port,
                      self.ctl.rate_capacity_Bps, time.time() if now is None else now,
                      self.sched_memory, self.ctl.unknown_size_bytes, self._view_cache, timings,
                      measured, None if self.ctl.promote_active else self._plan_prio,
                      self.ctl.class_q1_bytes, self.ctl.class_span, self._demand_cap())
        self._plan_prio = p.order_prio or {}
        if _RATES_TRACE:
            self._trace_rates(p)
        t0 = time.perf_counter()
        self._rates_stale = False
        self._next_event = p.next_event
        ctx = self._meter_ctx
        metering = self.policy.meters
        # a mode without rate control ("queues") keeps the flow_meter entries (they count each
        # flow's bytes for the closed loop) but writes no MeterConfig: every packet is GREEN
        t_now = time.time() if now is None else now
        prates = p.rates   # what the senders are told to pace at (the rate stream)
        if metering and (self._pace_hold.hold_s > 0 or self._meter_hold.hold_s > 0):
            cids = p.cids
            keys = [(cids[k], a, b) for k, a, b in zip(p.cf.tolist(), p.src.tolist(), p.dst.tolist())]
            # a sender's pace goes down only pace_hold_s after its flow's rate (a pause shorter
            # than that never reaches it: Linux commits each segment's pacing gap when it
            # leaves, so a pace at the floor delays the flow a segment-time at the floor,
            # however soon the rate comes back)
            prates, until = self._pace_hold.apply(keys, p.rates, t_now)
            self._next_event = min(self._next_event, until)
            # a meter goes down only meter_hold_s after its sender's pace (the sender slows first)
            mrates, until = self._meter_hold.apply(keys, prates, t_now)
            self._next_event = min(self._next_event, until)
        else:
            mrates = p.rates if metering else np.zeros(p.rates.size)
        self._ledger_rates(p, prates, t_now)
        u = ctx.update(p.cids, p.cf, p.src, p.dst, mrates, self.slots.slot, self.ctl)
        # no priority without enforcement: a coflow the pool could not meter gets no override
        # (it stays in the fair class) and is counted
        self._prio = {c: pr for c, pr in p.prio.items() if c not in ctx.unmetered} \
            if ctx.unmetered else p.prio
        if self.rate_board is not None:
            # built only when a stream reads it: the plan, records and priorities of this round
            # are not mutated later (each round makes new ones)
            unm = frozenset(ctx.unmetered) if metering else None
            floor = self.ctl.min_rate_frac * self.ctl.link_payload_Bps   # the meters' floor
            recs, prio = self._records, self._prio
            self._publish_paces(p, lambda r: rate_snapshot(
                p, recs, (lambda c: c not in unm) if metering else (lambda c: False), floor, prio,
                1.0 + self.ctl.pace_headroom, r), prates, time.time() if now is None else now)
        if self.audit is not None:
            floor = self.ctl.min_rate_frac * self.ctl.link_payload_Bps
            size = {}
            for rec in self._records:
                c = (rec.cid.external, rec.cid.internal)
                for f in rec.flows:
                    size[(c, self.host_port[f.src], self.host_port[f.dst])] = f.size_bytes
            rates = {}   # what each sender was told to pace at (after pace_hold_s)
            for k, a, b, r in zip(p.cf.tolist(), p.src.tolist(), p.dst.tolist(), prates.tolist()):
                c = p.cids[k]
                if c not in ctx.unmetered:
                    rates[(c, a, b)] = max(r, floor)
            self._audit_size = size
            self.audit.set_rates(rates, time.time() if now is None else now)
        self.metrics.unmetered_coflows.set(len(ctx.unmetered))
        self.metrics.unmetered_flows.set(ctx.unmetered_flows)
        self.metrics.meters_in_use.set(ctx.pool.in_use())
        u.apply(self.book, meters=metering)
        if timings is not None:
            timings["translate"] = time.perf_counter() - t0
        if p.alloc is not None and p.alloc.queue is not None:
            self._queues = {c: int(q) for c, q in zip(p.cids, p.alloc.queue.tolist())}
        else:
            self._queues = {c: 8 - pr for c, pr in p.prio.items()}

    # desired state ------------------------------------------------------------------------
    def _fifo_base(self) -> int:
        ext = [r.cid.external for r in self._records]
        return min(ext) if ext else 0

    def _static(self) -> dict:
        key = (self._fifo_base() if self.policy.fifo_lm else 0)
        cache = self._static_cache
        if cache is None or cache[0] != key:
            st = TR.static_state(self.topo, self.routes, self.mode, self.dclas_params,
                                 self.ctl.fair_prio, self.heavy_bytes, key,
                                 self.ctl.control_prio, self.ctl.control_max_len,
                                 target=self.target, slot_idle_epochs=self.ctl.slot_idle_epochs,
                                 ecn_threshold_bytes=self.ctl.ecn_threshold_bytes,
                                 link_mbps=self.ctl.link_mbps)
            if self.tofino_server is not None:
                from ..tofino import ports as tofino_ports
                st = tofino_ports.apply(st, self.port_map or tofino_ports.PortMap(),
                                        self.tofino_server)
            cache = (key, {n: M.SwitchState.of(ents) for n, ents in st.items()})
            self._static_cache = cache
        return cache[1]

    def _desired(self) -> dict:
        """Desired state per switch (the book's live objects). Only the components whose
        inputs changed are handed to the book (static key, slot assignments, overrides; the
        rate plan's meters in :meth:`_compute_rates`), and the book compares only those, so
        an unchanged switch costs identity checks."""
        static = self._static()
        slots_key = tuple(sorted(self.slots.slot.items()))
        if self._slot_cache[0] != slots_key:
            self._slot_cache = (slots_key, {e.key: e for e in TR.slot_entities(self.slots.slot)})
        slot_ents = self._slot_cache[1]
        ovr = None
        if self.policy.rate:
            if self._ovr_cache[0] is not self._prio and self._ovr_cache[0] != self._prio:
                self._ovr_cache = (self._prio, {e.key: e for e in (
                    TR.override_entity(c, p) for c, p in self._prio.items())})
            ovr = self._ovr_cache[1]
        book = self.book
        for name in self.agents:
            book.set("static", name, static[name].entities)
        book.set_many("slots", self.edges, slot_ents)
        if ovr is not None:
            book.set_many("overrides", self.edges, ovr)
        ovr_changed = 0
        if self.policy.coordinated:
            # an incremental round names the edges whose override dict changed (the others
            # hold the same object as last round); a full round: every edge compared
            for name in (self.edges if self._ovr_changed is None else self._ovr_changed):
                want = self._overrides.get(name, TR.EMPTY)
                old = self._ovr_src.get(name, TR.EMPTY)
                if old is not want and old != want:  # hand the book only the changed coflows
                    ents = {}
                    for c, p in want.items():
                        if old.get(c) != p:
                            e = TR.override_entity(c, p)
                            ents[e.key] = e
                    gone = [TR.override_key(c) for c in old if c not in want]
                    ovr_changed += book.set("overrides", name, ents, changed=list(ents) + gone)
                    self._ovr_src[name] = want
        if self.use_digest:   # report steps (new slots; grown ones only in a round without overrides)
            book.set_many("report", self.edges, self.digest.entities(
                self.slots.slot, self._queues, quiet=ovr_changed == 0))
            self.digest.requantise(self.coord)
        return {name: book.state(name) for name in self.agents}

    def _write(self, desired: dict) -> tuple[int, int]:
        """Per switch: the writes for the keys that changed since its last successful sync (all
        keys after a reconnect, an audit or a failed write), one Write per switch, all in flight
        together; a switch whose cache must be read back first syncs in a pool thread. Every
        ``audit_s`` each switch is read back in a pool thread (:meth:`SwitchAgent.refresh`),
        not inside the round; the round after it diffs everything against what was read."""
        if self.election is not None and not self.election.is_leader():
            return 0, 0       # a backup (or a primary cut off from etcd) writes nothing
        audit = self.ctl.audit_s > 0 and time.monotonic() - self._last_audit >= self.ctl.audit_s
        if audit:
            self._last_audit = time.monotonic()
        now, later = [], {}
        up = self._up_seen
        for name, st in desired.items():
            a = self.agents[name]
            if a.state != SwitchAgent.MASTER:
                v = 0.5 if a.state == SwitchAgent.BACKUP else 0
                if up.get(name) != v:   # a gauge set is a lock and a dict: only on changes
                    up[name] = v
                    self._metric("switch_up", name).set(v)
                continue
            if up.get(name) != 1:
                up[name] = 1
                self._metric("switch_up", name).set(1)
            if audit:  # read back in the background; a later round diffs against it
                self._pool.submit(a.refresh)
            dirty = self.book.dirty[name]
            if not dirty and a.in_sync:
                continue  # nothing changed on either side since the last sync
            if a.actual is None:
                later[name] = self._pool.submit(a.sync, st, None)
            else:
                now.append((a, st, dirty))
        if self.sequential_writes:
            results = {}
            for item in now:
                results.update(sync_many([item]))
        else:
            results = sync_many(now, self.io)
        for name, f in later.items():
            results[name] = f.result()
        written = errors = 0
        for name, (n, err) in results.items():
            if err is None:
                written += n
                self._metric("updates", name).inc(n)
                self.book.synced(name)
            else:
                errors += 1
                self.metrics.write_errors.labels(name).inc()
        return written, errors

"""Observability: Prometheus metrics and the JSON status, served over HTTP on one address.

``GET /metrics``: the Prometheus text format (prometheus_client, a registry of its own per
controller so several controllers can live in one process). ``GET /status``: the controller's
:meth:`~coflow.ctl.daemon.Controller.status` as JSON (what ``coflow ctl status`` prints).
Bind it to 127.0.0.1 (the default of ``--metrics``).

Data-plane telemetry (:class:`Telemetry`): the counters the P4 program keeps for an operator,
read from every switch over P4Runtime (CounterEntry reads; BMv2/PI serves no register reads)
every ``telemetry_s`` in a thread of its own, outside the rounds:
- ``drop_reasons[r]``: every pipeline drop by reason, named after :class:`DropReason`, the one
  table of define.p4's DropReason_t enum (``tests/test_constants.py`` holds them equal);
- ``slot_collisions[slot]``: packets of a coflow that found its hashed slot owned by another
  (the last index counts the packets that did not collide and is left out); at the edges,
  where a managed fabric counts per coflow;
- ``slot_takeovers[slot]``: packets that took a counter slot over from a previous owner (a
  hashed slot whose owner had been idle ``slot_idle_epochs``, or an assigned slot the controller
  re-assigned; the last index counts the others and is left out); read where the P4 program
  has it, at the edges;
- ``meter_red_drops[index]``: packets the flow meters coloured RED and the pipeline dropped
  (edges in the rate modes, the only place the meters run);
- ``queue_drop[port * 8 + priority]``: pipeline drops per egress queue, for the switch's ports.
Exported as ``coflow_dp_*_total`` counters (labels switch, reason / port, priority) and under
``dataplane`` in the status.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..dataplane.constants import COFLOW_SLOTS, NUM_PRIOS, DropReason
from . import model as M

# round phases take from ~0.1 ms (compute) to seconds (a full re-push after a restart)
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02,
           0.03, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        self.round_seconds = Histogram("coflow_ctl_round_seconds",
                                       "Controller round latency by phase (read counters, "
                                       "compute, write) and in total", ["phase"],
                                       buckets=BUCKETS, registry=r)
        self.rounds = Counter("coflow_ctl_rounds", "Controller rounds run", ["kind"], registry=r)
        self.write_errors = Counter("coflow_ctl_write_errors", "P4Runtime writes that failed",
                                    ["switch"], registry=r)
        self.read_errors = Counter("coflow_ctl_read_errors", "P4Runtime counter reads that failed",
                                   ["switch"], registry=r)
        self.updates = Counter("coflow_ctl_updates", "P4Runtime updates written", ["switch"],
                               registry=r)
        self.switch_up = Gauge("coflow_ctl_switch_primary",
                               "1 when this controller is the switch's primary, 0.5 backup, 0 down",
                               ["switch"], registry=r)
        self.coflows = Gauge("coflow_ctl_coflows", "Registered coflows by Aalo queue (1 = highest; "
                             "rate modes: by priority order rank)", ["queue"], registry=r)
        self.reconnects = Counter("coflow_ctl_reconnects", "Switch reconnections", ["switch"],
                                  registry=r)
        # rate modes: per-flow meters from a pool; a coflow that cannot get one per flow gets
        # neither meters nor an override (fair class)
        self.meters_in_use = Gauge("coflow_ctl_meters_in_use", "Flow meters the rate modes' "
                                   "pool has given out (all edges)", registry=r)
        self.unmetered_coflows = Gauge("coflow_ctl_unmetered_coflows", "Rate-mode coflows left "
                                       "without meters and override (meter pool exhausted)",
                                       registry=r)
        self.unmetered_flows = Gauge("coflow_ctl_unmetered_flows", "Flows (host pairs) of the "
                                     "unmetered coflows", registry=r)

        # leases (coflow.api.registry): coflows unregistered because nobody renewed them
        self.leases_expired = Counter("coflow_ctl_leases_expired", "Coflows unregistered because "
                                      "their lease ran out (their slots freed)", registry=r)

        self.sizes_distrusted = Counter("coflow_ctl_sizes_distrusted", "Coflows whose counted "
                                        "bytes passed their declared sizes by more than the "
                                        "margin: ordered as unknown sizes from then on", registry=r)
        self.grants_overheld = Counter("coflow_ctl_grants_overheld", "Coflows whose rates, held "
                                       "from their first byte, allowed more than their declared "
                                       "sizes need plus margin and slack: ordered as unknown "
                                       "sizes from then on", registry=r)
        self.demand_capped_flows = Gauge("coflow_ctl_demand_capped_flows", "Flows whose senders "
                                         "used less than their rates allowed, capped near what they "
                                         "used (the rest backfilled to the others)", registry=r)
        self.digest_corrections = Counter("coflow_ctl_digest_resync_corrections", "Polled "
                                          "coflow counts a report step per pipe or more past the "
                                          "count the edge's report digests gave (a digest lost, e.g. "
                                          "by the learn filter): what the resync poll repaired",
                                          ["switch"], registry=r)
        self.demand_cap_changes = Counter("coflow_ctl_demand_cap_changes", "Demand caps set, "
                                          "lowered, raised or lifted", registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class StatusServer:
    """/metrics and /status on ``host:port`` (port 0 picks one; ``address`` has the real one)."""

    def __init__(self, address: str, metrics: Metrics, status_fn):
        host, _, port = address.rpartition(":")
        metrics_ref, status_ref = metrics, status_fn

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                if self.path.startswith("/metrics"):
                    body, ctype = metrics_ref.exposition(), CONTENT_TYPE_LATEST
                elif self.path.startswith("/status"):
                    body = json.dumps(status_ref(), indent=1, default=str).encode()
                    ctype = "application/json"
                else:
                    self.send_error(404, "try /metrics or /status")
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer((host or "127.0.0.1", int(port)), Handler)
        self.httpd.daemon_threads = True
        self.address = f"{self.httpd.server_address[0]}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name="ctl-status-http")
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


#: reason index -> name, from the one table of define.p4's DropReason_t enum (NONE is no drop)
DROP_NAMES = {int(r): r.name for r in DropReason if r != DropReason.NONE}


class Telemetry:
    """The data plane's drop and collision counters of every switch, read over P4Runtime.

    ``poll(agents)`` reads each readable switch (primary or backup) with one ReadRequest per
    counter, all in flight together, and keeps the latest snapshot per switch; a switch that
    cannot be read keeps its previous snapshot and counts a read error. :meth:`record` is the
    one place a reading enters (the tests feed it directly). ``status()`` is the JSON form,
    :meth:`collect` the Prometheus one (a custom collector: the values are the switch's own
    counters, monotonic while the switch runs; a restarted switch starts again at 0, which
    Prometheus treats as a counter reset)."""

    COUNTERS = (M.C_DROP_REASONS, M.C_COLLISIONS, M.C_TAKEOVERS, M.C_RED_DROPS, M.C_QUEUE_DROP)
    #: the per-slot counters: read at the slots in use, the rest swept a window per poll
    SLOT_COUNTERS = (M.C_COLLISIONS, M.C_TAKEOVERS)
    #: slot indices past those in use read per poll (a target with no more slots reads them all)
    SWEEP = 4096

    def __init__(self, codec, switch_ports: dict, meter_switches=(), collision_switches=None,
                 interval_s: float = 2.0, on_error=None, coflow_slots: int = COFLOW_SLOTS,
                 in_use=None, sweep: int = SWEEP):
        """``in_use``: fn() -> the slots in use (the coflows' assigned and hashed slots), read
        at every poll; every other slot is read once every coflow_slots / ``sweep`` polls (a
        window of ``sweep`` a poll), its last value kept. None: every slot every poll."""
        self.codec = codec
        self.in_use = in_use
        self.sweep = max(1, int(sweep))
        self._window = 0                    # the sweep's next first index
        self._known: dict = {}              # (switch, counter) -> {index: last value read}
        # the target's slot count (the index past it, where there is one, counts non-collisions)
        self.coflow_slots = coflow_slots
        self.ports = {n: tuple(p) for n, p in switch_ports.items()}
        self.meter_switches = set(meter_switches)
        # None: every switch (a switch counts per coflow only where it decides: at edge ports,
        # or for a tagged packet no edge stamped)
        self.collision_switches = None if collision_switches is None else set(collision_switches)
        self.interval_s = interval_s
        self.on_error = on_error            # fn(switch name) for a failed read
        self._snap: dict = {}               # switch -> snapshot dict
        self._lock = threading.Lock()
        self._requests: dict = {}           # (switch, counter, device id) -> ReadRequest bytes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.polls = 0

    # reading -----------------------------------------------------------------------------
    def counters_of(self, name: str) -> dict:
        """counter -> indices to read on switch ``name`` (None: every index)."""
        out = {M.C_DROP_REASONS: tuple(DROP_NAMES),
               M.C_QUEUE_DROP: tuple(p * NUM_PRIOS + q for p in self.ports.get(name, ())
                                     for q in range(NUM_PRIOS))}
        if self.collision_switches is None or name in self.collision_switches:
            idx = self._slot_indices()
            out[M.C_COLLISIONS] = idx
            if M.C_TAKEOVERS in self.codec.counter_id:   # a program without it: not read
                out[M.C_TAKEOVERS] = idx
        if name in self.meter_switches:
            out[M.C_RED_DROPS] = None
        return out

    def _slot_indices(self) -> tuple | None:
        """The per-slot counters' indices this poll: the slots in use and the sweep's window
        (None: every index, a wildcard read)."""
        n = self.coflow_slots
        if self.in_use is None or n <= self.sweep:
            return None
        lo = self._window
        win = range(lo, min(lo + self.sweep, n))
        return tuple(sorted(set(win).union(i for i in self.in_use() if 0 <= i < n)))

    def _request(self, name: str, device_id: int, counter: str, indices) -> bytes:
        key = (name, counter, device_id, indices)
        req = self._requests.get(key)
        if req is None:
            if len(self._requests) > 256:   # windows and slot sets move: keep the cache small
                self._requests.clear()
            req = self._requests[key] = self.codec.counter_read_request(
                device_id, counter, indices).SerializeToString()
        return req

    def poll(self, agents) -> int:
        """Read every readable switch of ``agents`` (name -> SwitchAgent); returns how many
        were read completely."""
        from .wire import parse_counter_packets_fast
        waits = []
        for a in agents.values():
            if a.state not in (a.MASTER, a.BACKUP):
                continue
            c = a.client
            if c is None or not c.connected:
                continue
            try:
                started = {counter: c.read_raw_start(self._request(a.name, a.device_id, counter, idx),
                                                     timeout=2.0)
                           for counter, idx in self.counters_of(a.name).items() if idx != ()}
            except Exception:  # noqa: BLE001 - a switch going away: the keeper handles it
                self._error(a.name)
                continue
            waits.append((a.name, started))
        done = 0
        for name, started in waits:
            got = {}
            try:
                for counter, wait in started.items():
                    out: dict = {}
                    for resp in wait():
                        parse_counter_packets_fast(resp, out)
                    got[counter] = out
            except Exception:  # noqa: BLE001
                self._error(name)
                continue
            for counter in self.SLOT_COUNTERS:   # a partial read: merged into what is known
                if counter in got and self._slot_indices_partial():
                    known = self._known.setdefault((name, counter), {})
                    if any(v < known.get(i, 0) for i, v in got[counter].items()):
                        known.clear()            # the switch counts from 0 again (restarted)
                    known.update(got[counter])
                    got[counter] = known
            self.record(name, got)
            done += 1
        if self._slot_indices_partial():
            self._window = (self._window + self.sweep) % self.coflow_slots
        self.polls += 1
        return done

    def _slot_indices_partial(self) -> bool:
        return self.in_use is not None and self.coflow_slots > self.sweep

    def _error(self, name: str) -> None:
        if self.on_error is not None:
            self.on_error(name)

    def record(self, name: str, counts: dict, at: float | None = None) -> dict:
        """Turn one switch's reading (counter name -> {index: packets}) into its snapshot."""
        drops = counts.get(M.C_DROP_REASONS, {})
        coll = counts.get(M.C_COLLISIONS, {})
        take = counts.get(M.C_TAKEOVERS, {})
        red = counts.get(M.C_RED_DROPS, {})
        qd = counts.get(M.C_QUEUE_DROP, {})
        ports = self.ports.get(name, ())
        snap = {
            "read_at": time.time() if at is None else at,
            "drops": {DROP_NAMES[r]: int(drops.get(r, 0)) for r in sorted(DROP_NAMES)},
            "drops_total": int(sum(drops.get(r, 0) for r in DROP_NAMES)),
            # the last index counts the packets that did not collide (a discard index)
            "slot_collisions": int(sum(v for i, v in coll.items() if i < self.coflow_slots)),
            "collision_slots": {int(i): int(v) for i, v in sorted(coll.items())
                                if v and i < self.coflow_slots},
            # the same discard index as slot_collisions
            "slot_takeovers": int(sum(v for i, v in take.items() if i < self.coflow_slots)),
            "meter_red_drops": int(sum(red.values())),
            "red_drops_by_meter": {int(i): int(v) for i, v in sorted(red.items()) if v},
            "queue_drops": {f"{p}/{q}": int(qd.get(p * NUM_PRIOS + q, 0))
                            for p in ports for q in range(NUM_PRIOS)},
        }
        with self._lock:
            self._snap[name] = snap
        return snap

    def forget(self, name: str) -> None:
        with self._lock:
            self._snap.pop(name, None)
        for key in [k for k in self._known if k[0] == name]:
            del self._known[key]

    # views -------------------------------------------------------------------------------
    def status(self) -> dict:
        """switch -> snapshot (JSON), for ``/status`` and ``coflow ctl status``; the queue drops
        only where nonzero (the metrics list every queue)."""
        with self._lock:
            snaps = dict(self._snap)
        out = {}
        for name, s in sorted(snaps.items()):
            s = dict(s)
            s["queue_drops"] = {k: v for k, v in s["queue_drops"].items() if v}
            out[name] = s
        return out

    def red_drops_of(self, meters) -> int:
        """RED drops at the given (switch, meter index) pairs (a coflow's meters; an index the
        pool reused also carries its earlier owners' drops)."""
        with self._lock:
            return sum(self._snap.get(sw, {}).get("red_drops_by_meter", {}).get(i, 0)
                       for sw, i in meters)

    def red_drops_of_slot(self, slot: int, per_slot: int) -> int:
        """RED drops of a coflow's meters (indices slot * per_slot ..), summed over switches."""
        lo, hi = slot * per_slot, (slot + 1) * per_slot
        with self._lock:
            return sum(v for s in self._snap.values()
                       for i, v in s["red_drops_by_meter"].items() if lo <= i < hi)

    def collect(self):
        """prometheus_client custom collector."""
        with self._lock:
            snaps = dict(self._snap)
        drops = CounterMetricFamily("coflow_dp_drops", "Packets the P4 pipeline dropped, by "
                                    "reason (define.p4 DropReason_t)", labels=["switch", "reason"])
        coll = CounterMetricFamily("coflow_dp_slot_collisions", "Packets whose coflow found its "
                                   "hashed byte-counter slot owned by another coflow",
                                   labels=["switch"])
        take = CounterMetricFamily("coflow_dp_slot_takeovers", "Packets that took a byte-"
                                   "counter slot over from a previous owner (idle hashed slot "
                                   "or re-assigned slot)", labels=["switch"])
        red = CounterMetricFamily("coflow_dp_meter_red_drops", "Packets the flow meters coloured "
                                  "RED (dropped)", labels=["switch"])
        qd = CounterMetricFamily("coflow_dp_queue_drops", "Packets the pipeline dropped per "
                                 "egress queue (BMv2 priority, 7 served first)",
                                 labels=["switch", "port", "priority"])
        for name, s in sorted(snaps.items()):
            for reason, v in s["drops"].items():
                drops.add_metric([name, reason], v)
            coll.add_metric([name], s["slot_collisions"])
            take.add_metric([name], s.get("slot_takeovers", 0))
            red.add_metric([name], s["meter_red_drops"])
            for key, v in s["queue_drops"].items():
                port, prio = key.split("/")
                qd.add_metric([name, port, prio], v)
        return [drops, coll, take, red, qd]

    # background --------------------------------------------------------------------------
    def start(self, agents) -> None:
        if self.interval_s <= 0 or self._thread is not None:
            return
        self._stop.clear()

        def loop():
            while not self._stop.wait(self.interval_s):
                try:
                    self.poll(agents)
                except Exception:  # noqa: BLE001 - telemetry must never take the controller down
                    pass
        self._thread = threading.Thread(target=loop, daemon=True, name="ctl-telemetry")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

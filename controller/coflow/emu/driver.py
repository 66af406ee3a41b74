"""The driver: the jobs' master. Starts one traffic agent per host, and for every coflow at its
(scaled) arrival time registers it with the coflow API and hands its CoflowId and flows to the
mapper hosts' agents; collects the receivers' completion reports and unregisters finished
coflows.

Protocol (see :mod:`coflow.emu.agent`): the driver writes JSON commands to each agent's stdin
and reads JSON events from its stdout; a reader thread per agent feeds one queue. Agents run
inside the hosts' network namespaces (``host.popen``); the driver runs in the root namespace
and reaches the API over its unix socket (the filesystem is shared), as a job master would.

Registration: for a mode whose scheduler is clairvoyant (it says so on its class:
``coflow.sched.deploy.clairvoyant``) every flow is registered with its size; for the others
without. The coflow's arrival is its scheduled time
``t0 + arrival_s``: a driver running late is charged to the coflow's CCT.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..progress import phase
from .plan import FlowRecord, Plan

AGENT_PORT = 5001


class EventError(ValueError):
    pass


def parse_event(line: str, where: str = "agent") -> dict:
    """One agent event, validated (raises :class:`EventError` with ``where: field: problem``)."""
    try:
        ev = json.loads(line)
    except json.JSONDecodeError as e:
        raise EventError(f"{where}: json: invalid JSON ({e.msg})") from None
    if not isinstance(ev, dict) or not isinstance(ev.get("ev"), str):
        raise EventError(f"{where}: ev: missing event name")
    need = {"done": ("run", "coflow", "flow", "bytes", "t"), "sent": ("run", "coflow", "flow"),
            "ready": ("port",), "pong": ("seq",), "reset": ("cancelled",), "warm": ("count",),
            "mark": (), "watching": ("controller",),
            "error": ("where", "field", "message")}
    if ev["ev"] not in need:
        raise EventError(f"{where}: ev: unknown event {ev['ev']!r}")
    for k in need[ev["ev"]]:
        if k not in ev:
            raise EventError(f"{where}: {k}: missing in {ev['ev']!r} event")
        v = ev[k]
        if k in ("where", "field", "message", "controller"):
            if not isinstance(v, str):
                raise EventError(f"{where}: {k}: not a string")
        elif k == "t":
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise EventError(f"{where}: t: not a number")
        elif not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise EventError(f"{where}: {k}: not a non-negative integer: {v!r}")
    return ev


def send_commands(plan: Plan, k: int, cid: str, run: int, ips: dict[str, str],
                  port: int = AGENT_PORT, reuse: bool = False,
                  wait: bool = False) -> dict[str, list[dict]]:
    """The ``send`` commands of coflow ``k``, per mapper host (``reuse``: on pooled connections;
    ``wait``: a flow that finds them all busy waits for one)."""
    out: dict[str, list[dict]] = {}
    c = plan.coflows[k]
    for f in c.flows:
        cmd = {"op": "send", "run": run, "coflow": k, "flow": f.index, "cid": cid,
               "dst": ips[f.dst], "port": port, "bytes": f.bytes}
        if reuse:
            cmd["reuse"] = True
            if wait:
                cmd["wait"] = True
        out.setdefault(f.src, []).append(cmd)
    return out


def warm_counts(plan: Plan, per_pair: int) -> dict[str, dict[str, int]]:
    """Idle connections to open before a mode starts: per (mapper host, reducer host), as many
    as the pair's flows that may overlap (at most ``per_pair``; every coflow uses a pair once)."""
    n: dict[str, dict[str, int]] = {}
    for c in plan.coflows:
        for f in c.flows:
            d = n.setdefault(f.src, {})
            d[f.dst] = d.get(f.dst, 0) + 1
    return {s: {d: min(per_pair, k) for d, k in ds.items()} for s, ds in n.items()}


def registration(plan: Plan, k: int, clairvoyant: bool) -> list[tuple[str, str, int | None, bool]]:
    """The flows of coflow ``k`` as the API takes them (index = flow id): every one ready to
    send (the agents send from memory, as a shuffle's fetch reads a map output written before
    it: no sender waits on its application)."""
    return [(f.src, f.dst, f.bytes if clairvoyant else None, True) for f in plan.coflows[k].flows]


class AgentPool:
    """One agent process per host, started inside the host's namespace."""

    def __init__(self, hosts: dict, ips: dict[str, str], log_dir: str, port: int = AGENT_PORT):
        self.hosts, self.ips, self.port, self.log_dir = hosts, ips, port, log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.events: queue.Queue = queue.Queue()
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def start(self, timeout: float = 60.0) -> None:
        env = dict(os.environ)
        pkg = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for name, host in self.hosts.items():
            err = open(os.path.join(self.log_dir, f"agent-{name}.stderr"), "ab")
            p = host.popen([sys.executable, "-u", "-m", "coflow.emu.agent", "--host", name,
                            "--listen", f"{self.ips[name]}:{self.port}"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env)
            err.close()
            self.procs[name] = p
            th = threading.Thread(target=self._read, args=(name, p), daemon=True)
            th.start()
            self.threads.append(th)
        ready, deadline = set(), time.monotonic() + timeout
        while len(ready) < len(self.procs):
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(self.procs) - ready)
                raise RuntimeError(f"agents not ready after {timeout:.0f} s: {', '.join(missing)} "
                                   f"(see {self.log_dir}/agent-*.stderr)")
            try:
                name, ev = self.events.get(timeout=min(left, 1.0))
            except queue.Empty:
                for n, p in self.procs.items():
                    if p.poll() is not None:
                        raise RuntimeError(f"agent {n} exited ({p.returncode}); see "
                                           f"{self.log_dir}/agent-{n}.stderr") from None
                continue
            if ev.get("ev") == "ready":
                ready.add(name)

    def _read(self, name: str, p: subprocess.Popen) -> None:
        n = 0
        for raw in p.stdout:
            n += 1
            try:
                ev = parse_event(raw.decode("utf-8", "replace"), f"agent {name} line {n}")
            except EventError as e:
                self.errors.append(str(e))
                continue
            self.events.put((name, ev))

    def send(self, name: str, cmd: dict) -> None:
        p = self.procs[name]
        p.stdin.write((json.dumps(cmd, separators=(",", ":")) + "\n").encode())
        p.stdin.flush()

    def broadcast(self, cmd: dict) -> None:
        for name in self.procs:
            self.send(name, cmd)

    def warm(self, counts: dict[str, dict[str, int]], timeout: float = 60.0) -> int:
        """Every host opens its idle connections (:func:`warm_counts`) and says when; returns
        how many were opened. Done before a mode's clock starts: no handshake in a CCT."""
        want = 0
        for src, dsts in counts.items():
            for dst, k in sorted(dsts.items()):
                self.send(src, {"op": "warm", "dst": self.ips[dst], "port": self.port, "count": k})
                want += 1
        opened, answers, deadline = 0, 0, time.monotonic() + timeout
        while answers < want and time.monotonic() < deadline:
            try:
                name, ev = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if ev.get("ev") == "warm":
                answers += 1
                opened += int(ev["count"])
            elif ev.get("ev") == "error":
                self.errors.append(f"{name}: {ev['where']}: {ev['field']}: {ev['message']}")
        if answers < want:
            self.errors.append(f"warm-up: {want - answers} of {want} host pairs did not answer in {timeout:.0f} s")
        return opened

    def watch(self, api: str, timeout: float = 15.0) -> int:
        """Every agent follows the controller's rates at ``api`` and paces its flows (""
        stops); returns how many said their stream started (with ``api``)."""
        self.broadcast({"op": "watch", "api": api})
        if not api:
            return 0
        seen, deadline = set(), time.monotonic() + timeout
        while len(seen) < len(self.procs) and time.monotonic() < deadline:
            try:
                name, ev = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if ev.get("ev") == "watching":
                seen.add(name)
            elif ev.get("ev") == "error":
                self.errors.append(f"{name}: {ev['where']}: {ev['field']}: {ev['message']}")
        if len(seen) < len(self.procs):
            self.errors.append(f"watch: {len(self.procs) - len(seen)} agents did not start their "
                               f"rate stream in {timeout:.0f} s")
        return len(seen)

    def reset(self, timeout: float = 5.0) -> dict:
        """Abort every flow in progress on every agent; returns the TCP counters of all hosts
        since the previous reset or mark, summed, and the number of connections cancelled."""
        return self._collect({"op": "reset"}, "reset", timeout)

    def mark(self, timeout: float = 5.0) -> dict:
        """The TCP counters of all hosts since the previous reset or mark, summed; they restart
        from here (after a warm-up: its handshakes are not the mode's)."""
        return self._collect({"op": "mark"}, "mark", timeout)

    def _collect(self, cmd: dict, answer: str, timeout: float) -> dict:
        self.broadcast(cmd)
        total: dict = {"cancelled": 0} if answer == "reset" else {}
        seen, deadline = set(), time.monotonic() + timeout
        while len(seen) < len(self.procs) and time.monotonic() < deadline:
            try:
                name, ev = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if ev.get("ev") != answer:
                continue                      # late reports of the mode just aborted
            seen.add(name)
            if answer == "reset":
                total["cancelled"] += int(ev.get("cancelled", 0))
            for k, v in (ev.get("tcp") or {}).items():
                if isinstance(v, int):
                    total[k] = total.get(k, 0) + v
        total["agents_answered"] = len(seen)
        return total

    def stop(self) -> None:
        for name, p in self.procs.items():
            try:
                if p.poll() is None:
                    self.send(name, {"op": "quit"})
            except (BrokenPipeError, OSError, ValueError):
                pass
        for p in self.procs.values():
            try:
                p.wait(3)
            except subprocess.TimeoutExpired:
                p.kill()
                try:
                    p.wait(3)
                except subprocess.TimeoutExpired:
                    pass
        self.procs.clear()


@dataclass
class ModeResult:
    t0: float
    records: list[FlowRecord]
    registered: dict[int, str]            # coflow index -> CoflowId
    errors: list[str] = field(default_factory=list)
    timed_out: bool = False
    wall_s: float = 0.0
    late_s: list[float] = field(default_factory=list)   # dispatch lateness per coflow
    register_s: list[float] = field(default_factory=list)   # API round trip per registration
    sent: set = field(default_factory=set)                # (coflow, flow) whose sender finished
    outstanding: list = field(default_factory=list)       # at the end: flows without a report
    dispatched_at: dict = field(default_factory=dict)     # coflow index -> time its sends went out
    sender_times: dict = field(default_factory=dict)      # (coflow, flow) -> (t_start, t_conn, t_end)
    paced: dict = field(default_factory=dict)             # (coflow, flow) -> rate it was paced at (None: none)
    pace_range: dict = field(default_factory=dict)        # (coflow, flow) -> (lowest, last) paced rate
    tcp0: dict = field(default_factory=dict)              # (coflow, flow) -> its connection's TCP state at start
    # a dynamic plan (waves, DAGs): per trace coflow, its start and completion (s after t0), and
    # per unit its release (coflow.dynamics.Releaser); None for plain plans
    start: Any = None
    complete: Any = None
    released: Any = None

    def timeline(self, plan: Plan) -> list[dict]:
        """Per flow, seconds after its coflow's arrival: dispatched (the driver handed the
        send to the agent), started (the agent opened the socket), connected (handshake done),
        received (the receiver had every byte), closed (the sender saw the receiver close);
        for a paced flow, the rate (bytes/s) it started at, the lowest while sending and the last.
        Where a CCT goes: driver/API lateness, agent scheduling, the handshake, the transfer."""
        done = {(r.coflow, r.flow): r.t_done for r in self.records}
        out = []
        for k, c in enumerate(plan.coflows):
            a = self.t0 + c.arrival_s
            if self.released is not None and np.isfinite(self.released[k]):
                a = self.t0 + float(self.released[k])   # a wave or child: from its release
            d = self.dispatched_at.get(k)
            for f in c.flows:
                st = self.sender_times.get((k, f.index))
                rx = done.get((k, f.index))
                rel = lambda t, a=a: None if t is None else round(t - a, 6)  # noqa: E731
                rec = {"coflow": c.trace_id, "flow": f.index, "bytes": f.bytes,
                       "dispatched": rel(d), "started": rel(st and st[0]),
                       "connected": rel(st and st[1]), "received": rel(rx),
                       "closed": rel(st and st[2])}
                pr = self.pace_range.get((k, f.index))
                if pr is not None:
                    rec.update(pace_first=self.paced.get((k, f.index)), pace_min=pr[0], pace_last=pr[1])
                t0 = self.tcp0.get((k, f.index))
                if t0 is not None:
                    rec["tcp0"] = t0
                out.append(rec)
        return out


def _record_sent(res: ModeResult, name: str, ev: dict) -> None:
    res.sent.add((ev["coflow"], ev["flow"]))
    if "pace" in ev:
        res.paced[(ev["coflow"], ev["flow"])] = ev["pace"] if isinstance(ev["pace"], (int, float)) else None
        num = lambda x: x if isinstance(x, (int, float)) else None  # noqa: E731
        res.pace_range[(ev["coflow"], ev["flow"])] = (num(ev.get("pace_min")), num(ev.get("pace_last")))
    if isinstance(ev.get("tcp0"), dict):
        res.tcp0[(ev["coflow"], ev["flow"])] = ev["tcp0"]
    try:
        res.sender_times[(ev["coflow"], ev["flow"])] = (
            float(ev["t_start"]), float(ev.get("t_conn", ev["t_start"])), float(ev["t_end"]))
    except (KeyError, TypeError, ValueError):
        res.errors.append(f"{name}: sent event without times: {ev}")


def _unregister(fn, cid: str, trace_id: int, errors: list) -> None:
    try:
        fn(cid)
    except Exception as e:  # noqa: BLE001
        errors.append(f"coflow {trace_id}: unregister: {e}")


class _Dynamic:
    """The registrations of a dynamic plan (waves, DAGs; ``coflow.dynamics``): released units
    (the :class:`~coflow.dynamics.Releaser`, clocked in seconds after t0) become API calls.
    Wave 1 of a coflow: ``register(flows, parents=, external=)`` with the CoflowIds of its
    parents (Aalo's rule: the child gets ``job.(1 + max sibling)``), or the job's external id
    for a second root of a DAG, or nothing (a new DAG: ``next.0``).  A later wave (or restarted
    tasks): ``add_flows(cid, new pairs)`` under the coflow's CoflowId, and for host pairs the
    coflow already has, the flow grows (``update`` of its size, clairvoyant modes).  A unit
    whose parent's registration is still in flight waits for it."""

    def __init__(self, plan: Plan, clairvoyant: bool, register, add_flows, update):
        from ..dynamics import Releaser
        self.plan, self.dyn = plan, plan.dynamics
        self.clairvoyant = clairvoyant
        self.register, self.add_flows, self.update = register, add_flows, update
        arr = np.array([c.arrival_s for c in plan.coflows])
        self.rel = Releaser(self.dyn, arr, np.array([len(c.flows) == 0 for c in plan.coflows]))
        self.cid: dict[int, str] = {}          # coflow -> CoflowId
        self.inflight: set[int] = set()        # coflows whose registration is in flight
        self.job_ext: dict[int, int] = {}      # offline job -> live external id
        self.pairs: dict[int, dict] = {}       # coflow -> {(src, dst): [flow id, size]}
        self.ready: list[int] = []             # released units not submitted yet

    def last_wave(self, u: int) -> bool:
        return int(self.dyn.next_unit[u]) < 0

    def call(self, u: int):
        """The API call for unit ``u`` as (fn, args, kwargs), or None while it must wait."""
        d, c = self.dyn, int(self.dyn.coflow[u])
        flows = registration(self.plan, u, self.clairvoyant)
        if int(d.prev_unit[u]) < 0:
            parents = d.after[c] + d.pipe[c]
            if any(p in self.inflight for p in parents):
                return None
            known = [self.cid[p] for p in parents if p in self.cid]
            if known:
                return self._register, (c, flows), {"parents": known}
            job = int(d.job[c])
            if any(int(d.job[x]) == job for x in self.inflight):
                return None
            return self._register, (c, flows), ({"external": self.job_ext[job]} if job in self.job_ext else {})
        return self._extend, (c, flows), {}

    def _register(self, c: int, flows, **kw) -> str:
        cid = self.register(flows, **kw)
        self.pairs[c] = {(s, t): [i, b] for i, (s, t, b, *_) in enumerate(flows)}
        return cid

    def _extend(self, c: int, flows) -> str:
        cid, pairs = self.cid[c], self.pairs[c]
        new, grow = [], {}
        for s, t, b, *more in flows:
            if (s, t) in pairs:
                if b is not None:
                    pairs[(s, t)][1] = (pairs[(s, t)][1] or 0) + b
                    grow[pairs[(s, t)][0]] = pairs[(s, t)][1]
            else:
                pairs[(s, t)] = [len(pairs), b]
                new.append((s, t, b, *more))
        if new:
            self.add_flows(cid, new)
        if grow:
            self.update(cid, sizes=grow)
        return cid

    def registered(self, u: int, cid: str) -> None:
        c = int(self.dyn.coflow[u])
        self.inflight.discard(c)
        self.cid[c] = cid
        self.job_ext.setdefault(int(self.dyn.job[c]), int(cid.split(".")[0]))


def drive(plan: Plan, agents: AgentPool, register: Callable[..., str],
          unregister: Callable[[str], None], run: int, clairvoyant: bool, timeout_s: float,
          lead_s: float = 0.5, progress: bool = True, label: str = "", reuse: bool = False,
          wait: bool = False, add_flows: Callable | None = None, update: Callable | None = None) -> ModeResult:
    """Replay ``plan`` once. ``register(flows) -> cid`` and ``unregister(cid)`` reach the API.
    ``reuse``: flows go over the agents' pooled connections (opened before, :meth:`AgentPool.warm`).

    A dynamic plan (``plan.dynamics``: waves, DAGs) starts each wave or child when its
    predecessors allow (:class:`_Dynamic`): ``register(flows, parents=, external=)``,
    ``add_flows(cid, flows)`` and ``update(cid, sizes=)`` reach the API; a coflow is
    unregistered when its last wave's flows are done."""
    N = len(plan.coflows)
    bar = phase(label or "emu", N, "coflow") if progress else None
    # drain stale events of an earlier mode
    while True:
        try:
            agents.events.get_nowait()
        except queue.Empty:
            break
    t_start = time.monotonic()
    t0 = time.time() + lead_s
    res = ModeResult(t0, [], {})
    remaining = [len(c.flows) for c in plan.coflows]
    got: set[tuple[int, int]] = set()
    done = 0
    nxt = 0
    deadline = t0 + timeout_s
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="emu-register")
    unpool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="emu-unregister")
    pending: dict = {}                    # future -> (coflow index, submit time)
    dyn = _Dynamic(plan, clairvoyant, register, add_flows, update) if plan.dynamics is not None else None
    failed = 0

    def dispatch(k: int, cid: str) -> None:
        res.registered[k] = cid
        res.dispatched_at[k] = time.time()      # before the first send: agents start at once
        for host, cmds in send_commands(plan, k, cid, run, agents.ips, agents.port, reuse, wait).items():
            for cmd in cmds:
                agents.send(host, cmd)
        due = plan.coflows[k].arrival_s if dyn is None else float(dyn.rel.released[k])
        res.late_s.append(res.dispatched_at[k] - (t0 + due))

    try:
        while done < N:
            now = time.time()
            # registrations run in a small pool: one slow API answer does not hold back the
            # arrivals behind it
            if dyn is None:
                while nxt < N and t0 + plan.coflows[nxt].arrival_s <= now:
                    fut = pool.submit(register, registration(plan, nxt, clairvoyant))
                    pending[fut] = (nxt, time.time())
                    fut.add_done_callback(lambda f: agents.events.put(("driver", {"ev": "registered"})))
                    nxt += 1
            else:
                dyn.ready += dyn.rel.due(now - t0)
                waiting = []
                for u in dyn.ready:
                    call = dyn.call(u)
                    if call is None:
                        waiting.append(u)
                        continue
                    fn, a, kw = call
                    if int(plan.dynamics.prev_unit[u]) < 0:
                        dyn.inflight.add(int(plan.dynamics.coflow[u]))
                    fut = pool.submit(fn, *a, **kw)
                    pending[fut] = (u, time.time())
                    fut.add_done_callback(lambda f: agents.events.put(("driver", {"ev": "registered"})))
                dyn.ready = waiting
            for fut in [f for f in pending if f.done()]:
                k, t_sub = pending.pop(fut)
                try:
                    cid = fut.result()
                except Exception as e:  # noqa: BLE001 (the API refused: the coflow cannot run)
                    res.errors.append(f"coflow {plan.coflows[k].trace_id}: register: {e}")
                    remaining[k] = -1
                    done += 1
                    failed += 1
                    if dyn is not None:
                        dyn.inflight.discard(int(plan.dynamics.coflow[k]))
                    continue
                res.register_s.append(time.time() - t_sub)
                if dyn is not None:
                    dyn.registered(k, cid)
                dispatch(k, cid)
            if dyn is not None:
                # units without flows are done when released; the rest when their flows are
                done = failed + int(np.isfinite(dyn.rel.unit_done).sum())
                if (done < N and not pending and not dyn.ready and not dyn.rel.pending
                        and all(remaining[k] <= 0 for k in res.registered)):
                    break      # what is left waits on a unit that failed to register
            if now > deadline:
                res.timed_out = True
                break
            if dyn is not None:
                wait = max(0.0, min(0.2, t0 + dyn.rel.next_time - time.time()))
            else:
                wait = 0.2 if nxt >= N else max(0.0, min(0.2, t0 + plan.coflows[nxt].arrival_s - time.time()))
            try:
                name, ev = agents.events.get(timeout=wait)
            except queue.Empty:
                continue
            kind = ev["ev"]
            if kind == "error":
                res.errors.append(f"{name}: {ev['where']}: {ev['field']}: {ev['message']}")
            elif kind == "sent" and ev["run"] == run:
                _record_sent(res, name, ev)
            elif kind == "done" and ev["run"] == run:
                k, i = ev["coflow"], ev["flow"]
                if k >= N or i >= len(plan.coflows[k].flows) or (k, i) in got:
                    res.errors.append(f"{name}: unexpected flow report {k}.{i}")
                    continue
                got.add((k, i))
                res.records.append(FlowRecord(k, i, ev["bytes"], float(ev["t"])))
                remaining[k] -= 1
                if remaining[k] == 0:
                    done += 1
                    if bar is not None:
                        bar.update(1)
                    if dyn is not None:
                        t_last = max(r.t_done for r in res.records if r.coflow == k)
                        dyn.rel.done([k], t_last - t0)
                        if not dyn.last_wave(k):
                            continue   # the coflow goes on with its next wave
                    unpool.submit(_unregister, unregister, res.registered[k], plan.coflows[k].trace_id,
                                res.errors)
        # a sender reports after its receiver did: collect the last ones (for the timeline)
        grace = time.time() + 1.0
        while len(res.sender_times) < len(got) and time.time() < grace:
            try:
                name, ev = agents.events.get(timeout=0.05)
            except queue.Empty:
                continue
            if ev.get("ev") == "sent" and ev.get("run") == run:
                _record_sent(res, name, ev)
            elif ev.get("ev") == "error":
                res.errors.append(f"{name}: {ev['where']}: {ev['field']}: {ev['message']}")
    finally:
        for k in range(N):
            if remaining[k] > 0:
                for f in plan.coflows[k].flows:
                    if (k, f.index) not in got:
                        res.outstanding.append({"coflow": plan.coflows[k].trace_id, "flow": f.index,
                                                "src": f.src, "dst": f.dst, "bytes": f.bytes,
                                                "dispatched": k in res.registered,
                                                "sender_done": (k, f.index) in res.sent})
        pool.shutdown(wait=False, cancel_futures=True)   # registrations not answered yet
        unpool.shutdown(wait=True)                        # every finished coflow is unregistered
        if bar is not None:
            bar.close()
        res.wall_s = time.monotonic() - t_start
        if dyn is not None:
            res.start, res.complete, res.released = dyn.rel.start, dyn.rel.complete, dyn.rel.released
        res.errors.extend(agents.errors)
        agents.errors.clear()
    return res

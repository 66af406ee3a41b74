"""One switch as the controller sees it: a P4Runtime connection that comes back by itself.

A :class:`SwitchAgent` owns a :class:`~coflow.dataplane.p4rt.P4RuntimeClient` and a keeper
thread. The keeper connects (arbitration with the controller's election id; a backup stays
connected and waits), and once primary makes sure the pipeline is ours: the pipeline's cookie
(a hash of the P4Info and BMv2 JSON) tells a switch that already runs it (controller restart:
keep its state and counters, read it back) from one that does not (fresh or restarted switch:
push it; its state is then empty). When the stream breaks (the switch went away) or the switch
makes another controller primary, the keeper reconnects with backoff (50 ms doubling to 0.5 s,
and gRPC's own reconnect backoff is capped at 0.5 s too), so a restarted switch is primary-
connected, re-pushed and handed back to the controller well within 2 s of it listening again.

``actual`` is the controller's cache of what the switch holds: read back on (re)connect, updated
by every successful write, dropped (and read back again) after a failed one.
"""
from __future__ import annotations

import hashlib
import logging
import threading
import time

from ..dataplane.p4rt import P4RuntimeClient, P4RuntimeError
from . import model as M
from . import wire
from .codec import Codec

log = logging.getLogger(__name__)


def pipeline_cookie(p4info_path: str, bmv2_json_path: str) -> int:
    h = hashlib.sha256()
    for p in (p4info_path, bmv2_json_path):
        with open(p, "rb") as f:
            h.update(f.read())
    return int.from_bytes(h.digest()[:8], "big") >> 1  # < 2^63


class SwitchAgent:
    DOWN, BACKUP, MASTER = "down", "backup", "master"

    def __init__(self, name: str, address: str, device_id: int, election_id: int,
                 codec: Codec, p4info_path: str, bmv2_json_path: str, cookie: int,
                 on_change=None, connect_timeout: float = 1.0, on_master=None, tls=None):
        self.tls = tls      # coflow.dataplane.p4rt.ChannelTls (None: plaintext)
        # the StreamChannel on the process's shared asyncio loop (p4rt.stream_loop), not two
        # threads per switch (False: grpc's synchronous stream, as before; bench-scale compares)
        self.stream_aio = True
        self.name = name
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.codec = codec
        self.p4info_path = p4info_path
        self.bmv2_json_path = bmv2_json_path
        self.cookie = cookie
        self.on_change = on_change  # fn(agent, event) event in up|down|reset|backup
        self.connect_timeout = connect_timeout
        # fn(agent), after the pipeline check of every bring-up as primary (Tofino: the
        # traffic manager's configuration, coflow.tofino.tmpush); raising fails the bring-up
        self.on_master = on_master
        self._read_req: tuple = ((), b"")  # (indices, serialised ReadRequest)
        self._wild_req: dict = {}  # ("*", counter) -> serialised wildcard ReadRequest
        self.client: P4RuntimeClient | None = None
        self.state = self.DOWN
        self.actual: M.SwitchState | None = None
        self._in_sync = False  # actual == the state of the last successful sync
        self.lock = threading.RLock()  # serialises use of the client
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.generation = 0  # bumps on every (re)connection
        self.pipeline_pushes = 0
        self.on_master_done = 0   # bring-ups whose on_master (Tofino TM configuration) succeeded
        self.reconnects = 0
        self.last_error = ""
        self.write_errors = 0
        self.writes = 0
        self.table_writes: dict = {}   # table -> committed updates of its entries (a table's
        # entries in the cache changed since a reading when its count did)
        self.up_since: float | None = None
        # pushed counters: the counter this agent subscribes to on every (re)connection (None:
        # polled only); ``pushed`` holds its values as the switch pushed them (index ->
        # (bytes, packets)), None until the switch answered the subscription (BMv2 never does)
        self.push_counter: str | None = None
        self.pushed: dict | None = None
        self.push_seq = 0
        self.push_cpu_s = 0.0
        self._push_lock = threading.Lock()
        self._push_fresh: dict = {}  # what was pushed since the last take_pushed()
        # report digests (coflow.ctl.digest.DigestInbox; None: not asked for): configured on
        # every bring-up as primary, acked and merged from the stream's thread
        self.digests = None

    # lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._keeper, daemon=True,
                                        name=f"ctl-switch-{self.name}")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self.lock:
            if self.client is not None:
                self.client.close()
                self.client = None
            self.state = self.DOWN

    def rearbitrate(self, election_id: int) -> None:
        """Take ``election_id`` (HA: derived from the etcd election) for this and later
        connections, and send it to the switch now when connected (a higher id than the
        primary's makes this controller primary: the keeper then brings the switch up)."""
        with self.lock:
            self.election_id = election_id
            c = self.client
            if c is not None and c.connected:
                try:
                    c.arbitrate(election_id)
                except Exception as exc:  # noqa: BLE001 - the keeper reconnects with the new id
                    log.info("%s: re-arbitration failed: %s", self.name, exc)
        self._wake.set()

    def _event(self, client, kind, detail) -> None:
        """From the client's stream thread."""
        if client is not self.client:
            return
        if kind == "other":
            self._on_push(detail)
            return
        if kind == "digest":
            if self.digests is not None:
                self.digests.on_list(detail, ack=client.ack_digest)
            return
        if kind == "stream_error":
            log.info("%s: stream broke: %s", self.name, detail)
            self.state = self.DOWN
            self.up_since = None
            self._wake.set()
            if self.on_change:
                self.on_change(self, "down")
        elif kind == "mastership":
            # promoted (the primary went away) or demoted (a higher id arrived): the keeper
            # re-runs bring-up (pipeline check, read back) before writes continue
            self.state = self.DOWN if detail else self.BACKUP
            self._wake.set()
            if not detail and self.on_change:
                self.on_change(self, "backup")

    def _on_push(self, any_msg) -> None:
        """A pushed ReadResponse of counter entries (the stream's thread): merged into
        ``pushed``."""
        if not any_msg.type_url.endswith("/p4.v1.ReadResponse"):
            return
        t0 = time.thread_time()
        got = wire.parse_counters_fast(any_msg.value)
        with self._push_lock:
            if self.pushed is None:
                self.pushed = {}
            self.pushed.update(got)
            self._push_fresh.update(got)
            self.push_seq += 1
        self.push_cpu_s += time.thread_time() - t0

    def take_pushed(self) -> dict | None:
        """The entries pushed since the last call (index -> (bytes, packets)), or None when
        the switch does not push."""
        with self._push_lock:
            if self.pushed is None:
                return None
            got, self._push_fresh = self._push_fresh, {}
            return got

    def _subscribe(self, c) -> None:
        with self._push_lock:
            self._push_fresh = {}
            self.pushed = None     # until this connection's subscription is answered
        if self.push_counter is not None:
            c.subscribe([self.codec.counter_entity(self.push_counter)])

    def _enable_digests(self, c) -> None:
        """Configure the report digest (a fresh connection: the inbox asks for a poll first,
        nothing before it was reported). A switch that refuses it is polled."""
        if self.digests is None:
            return
        self.digests.connected()
        try:
            c.configure_digest(self.digests.fmt.digest_id)
        except Exception as exc:  # noqa: BLE001 - a switch without digests is polled
            log.warning("%s: report digest not enabled (%s): polled", self.name,
                        str(exc).splitlines()[0])
            self.digests.disable()

    def push_sequence(self) -> int | None:
        """The number of pushes received so far on this connection, None when the switch does
        not push (a cheap "anything new?" before :meth:`pushed_counts` copies them)."""
        with self._push_lock:
            return None if self.pushed is None else self.push_seq

    def pushed_counts(self, indices) -> tuple[int, dict] | None:
        """(sequence number, index -> (bytes, packets) of ``indices``, None: every pushed one)
        when the switch pushes its counters, else None (poll it)."""
        with self._push_lock:
            if self.pushed is None:
                return None
            p = self.pushed
            if indices is None:
                return self.push_seq, dict(p)
            return self.push_seq, {i: p.get(i, (0, 0)) for i in indices}

    def _keeper(self) -> None:
        backoff = 0.05
        while not self._stop.is_set():
            if self.state == self.MASTER or (self.state == self.BACKUP and self.client is not None
                                             and self.client.connected and not self.client.is_master):
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            try:
                self._bring_up()
                backoff = 0.05
                continue
            except Exception as exc:  # noqa: BLE001 - any failure: retry with backoff
                self.last_error = str(exc).splitlines()[0][:300]
                log.debug("%s: bring-up failed: %s", self.name, exc)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 0.5)

    #: switches brought up (connect, pipeline, read back) at once: a controller starting with
    #: a thousand switches would otherwise run a thousand bring-ups in parallel threads
    BRING_UP = threading.BoundedSemaphore(16)

    def _bring_up(self) -> None:
        with self.BRING_UP, self.lock:
            c = self.client
            if c is None or not c.connected:
                if c is not None:
                    c.close()
                c = P4RuntimeClient(self.address, self.device_id, self.election_id,
                                    self.codec.h, tls=self.tls, stream_aio=self.stream_aio)
                self.client = c
                c.connect(timeout=self.connect_timeout, require_master=False, on_event=self._event)
                self.generation += 1
                if self.generation > 1:
                    self.reconnects += 1
            if not c.is_master:
                self._subscribe(c)
                self.state = self.BACKUP
                self.actual = None
                self._in_sync = False
                if self.on_change:
                    self.on_change(self, "backup")
                return
            reset = False
            if c.pipeline_cookie() != self.cookie:
                c.set_pipeline(self.p4info_path, self.bmv2_json_path, cookie=self.cookie)
                self.pipeline_pushes += 1
                reset = True
            self._subscribe(c)
            self._enable_digests(c)
            if self.on_master is not None:
                self.on_master(self)
                self.on_master_done += 1
            self.actual = self.read_state()
            self._in_sync = False
            self.state = self.MASTER
            self.up_since = time.time()
        if self.on_change:
            self.on_change(self, "reset" if reset else "up")

    # state -------------------------------------------------------------------------------
    def read_state(self) -> M.SwitchState:
        """Everything the controller manages, read back in one ReadRequest."""
        with self.lock:
            got = self.client.read_many(self.codec.wildcard_reads())
        st = M.SwitchState()
        for ent in got:
            v = self.codec.decode(ent)
            if v is not None:
                st.entities[v.key] = v
        return st

    @property
    def in_sync(self) -> bool:
        """The cache holds the state of the last successful sync (an incremental diff is exact)."""
        return self._in_sync and self.actual is not None

    def sync(self, desired: M.SwitchState, changed=None) -> tuple[int, str | None]:
        """Write the difference between ``desired`` and the cached actual state in one Write.
        ``changed``: the keys of ``desired`` that changed since this agent's last successful
        sync (only those are compared when the cache still reflects that sync; None: all).
        Returns (updates written, error or None)."""
        return sync_many([(self, desired, changed)])[self.name]

    def _prepare(self, desired: M.SwitchState, changed) -> list:
        """[(ops, serialised WriteRequest)], the Writes to send one after the other
        (:func:`coflow.ctl.model.batches`; empty: nothing to write); the caller holds
        ``self.lock``."""
        if self.actual is None:
            self.actual = self.read_state()
            self._in_sync = False
        if changed is None or not self._in_sync:
            ops = M.diff(desired, self.actual)
        else:
            ops = M.diff_keys(desired, self.actual, changed)
        out = []
        for batch in M.batches(ops):
            req = self.client.write_request()
            self.codec.add_updates(req, batch)
            out.append((batch, req.SerializeToString()))
        return out

    def _commit(self, ops: list) -> None:
        M.apply_ops_inplace(self.actual, ops)
        self._in_sync = True
        if ops:
            self.writes += 1
            tw = self.table_writes
            for op in ops:
                k = op.entity.key
                if k[0] == "table":
                    tw[k[1]] = tw.get(k[1], 0) + 1

    def _failed(self, exc: P4RuntimeError) -> str:
        self.write_errors += 1
        self.last_error = str(exc).splitlines()[0][:300]
        self.actual = None  # partially applied: read back before the next diff
        self._in_sync = False
        if exc.code in ("UNAVAILABLE", "CANCELLED"):
            self.state = self.DOWN
            self._wake.set()
        elif exc.code == "PERMISSION_DENIED":
            self.state = self.BACKUP
            self._wake.set()
        return self.last_error

    def refresh(self) -> bool:
        """Audit without stalling the controller: read the switch back with no lock held, then
        install the result as the cache (the next sync makes a full diff against it) only if
        no write, failure or reconnection happened meanwhile. Returns whether it did."""
        with self.lock:
            if self.state != self.MASTER or self.client is None or self.actual is None:
                return False
            token = (self.client, self.generation, self.writes, self.write_errors)
        try:
            got = token[0].read_many(self.codec.wildcard_reads())
        except P4RuntimeError:
            return False  # the keeper or the next write notices a broken switch
        st = M.SwitchState()
        for ent in got:
            v = self.codec.decode(ent)
            if v is not None:
                st.entities[v.key] = v
        with self.lock:
            if self.actual is None or token != (self.client, self.generation, self.writes,
                                                self.write_errors):
                return False  # the switch changed under the read: the next audit retries
            self.actual = st
            self._in_sync = False
            return True

    def audit(self) -> None:
        """Drop the cache: the next sync reads the switch back first."""
        with self.lock:
            self.actual = None
            self._in_sync = False

    def read_counters(self, counter: str, indices) -> dict:
        """index -> byte count, one ReadRequest (allowed for a backup too)."""
        return self.read_counters_start(counter, indices)()

    def io_key(self) -> tuple:
        """Names the current connection (RoundIO replaces its channel when this changes)."""
        return (id(self.client), self.generation)

    def counter_request(self, counter: str, indices: tuple | None) -> bytes:
        """The serialised ReadRequest of ``indices`` of ``counter`` (None: every index), kept
        while they stay the same."""
        key = (counter, indices)
        got = self._wild_req.get(key)
        if got is None:
            if len(self._wild_req) > 8:
                self._wild_req.clear()
            got = self._wild_req[key] = self.codec.counter_read_request(
                self.device_id, counter, indices).SerializeToString()
        return got

    def readable(self) -> bool:
        c = self.client
        return (self.state in (self.MASTER, self.BACKUP) and c is not None and c.connected)

    def read_counters_start(self, counter: str, indices):
        """Start :meth:`read_counters` without waiting; returns the function that waits for it.
        The ReadRequest is serialised once per slot set."""
        idx = indices if isinstance(indices, tuple) else tuple(indices)
        if not idx:
            return dict
        with self.lock:
            c = self.client
            if c is None or not c.connected:
                raise P4RuntimeError(f"{self.name}: not connected", code="UNAVAILABLE")
        key = (counter, idx)
        if self._read_req[0] != key:
            self._read_req = (key, self.codec.counter_read_request(
                self.device_id, counter, idx).SerializeToString())
        wait = c.read_raw_start(self._read_req[1], timeout=2.0)

        def result() -> dict:
            out: dict = {}
            for resp in wait():
                wire.parse_counter_bytes_fast(resp, out)
            return out
        return result

    def read_counter_all_start(self, counter: str, indices: tuple | None = None):
        """A read of ``counter`` started without waiting: a wildcard read of every index (one
        entity with only the counter id), or of ``indices`` only (the request kept while the
        indices stay the same); the returned function waits and gives index -> (bytes,
        packets). Allowed for a backup too."""
        with self.lock:
            c = self.client
            if c is None or not c.connected:
                raise P4RuntimeError(f"{self.name}: not connected", code="UNAVAILABLE")
        if indices is None:
            key: tuple = ("*", counter)
            req = self._wild_req.get(key)
            if req is None:
                req = self._wild_req[key] = self.codec.counter_read_request(
                    self.device_id, counter).SerializeToString()
        else:
            key = (counter, indices)
            got = self._wild_req.get("idx")
            if got is None or got[0] != key:
                got = self._wild_req["idx"] = (key, self.codec.counter_read_request(
                    self.device_id, counter, indices).SerializeToString())
            req = got[1]
        wait = c.read_raw_start(req, timeout=2.0)

        def result() -> dict:
            out: dict = {}
            for resp in wait():
                wire.parse_counters_fast(resp, out)
            return out
        return result

    def status(self) -> dict:
        return {"address": self.address, "device_id": self.device_id, "state": self.state,
                "entities": None if self.actual is None else len(self.actual),
                "writes": self.writes, "write_errors": self.write_errors,
                "pipeline_pushes": self.pipeline_pushes, "reconnects": self.reconnects,
                **({"tm_configured": self.on_master_done} if self.on_master is not None else {}),
                "last_error": self.last_error, "up_since": self.up_since}


def sync_many(items, io=None) -> dict:
    """Sync several switches at once: ``items`` = [(agent, desired, changed)]. Each agent's
    diff and WriteRequests are prepared in this thread (holding its lock, as the keeper does
    for a reconnect), then every switch's first Write is in flight together and the answers are
    collected; a switch whose diff needs more than one Write (:func:`coflow.ctl.model.batches`)
    sends the next one when the one before succeeded, and none after a failure. A switch's
    cache is updated with each Write that succeeded, and its lock (hence its next sync) is held
    until its last answer. ``io``: a :class:`coflow.ctl.aio.RoundIO` sends the Writes on its
    asyncio loop; None: grpc futures. Returns name -> (updates written, error or None)."""
    out: dict = {}
    pending = []  # [agent, Writes left, updates written, wait or None] with the agent's lock held
    following: list = []  # the same, for the next Write
    try:
        for a, desired, changed in items:
            if a.state != a.MASTER:  # don't wait for the keeper's lock while it reconnects
                out[a.name] = (0, "not primary")
                continue
            a.lock.acquire()
            held = True
            try:
                if a.state != a.MASTER or a.client is None:
                    out[a.name] = (0, "not primary")
                    continue
                writes = a._prepare(desired, changed)
                if not writes:
                    a._commit([])
                    out[a.name] = (0, None)
                    continue
                wait = None if io is not None else a.client.write_raw_start(writes[0][1])
                pending.append([a, writes, 0, wait])
                held = False
            except P4RuntimeError as exc:
                out[a.name] = (0, a._failed(exc))
            finally:
                if held:
                    a.lock.release()
        while pending:
            if io is not None:
                errs = io.run("write", [(p[0].name, p[0].address, p[0].io_key(), p[1][0][1])
                                        for p in pending])
                for p, e in zip(pending, errs):
                    p[3] = _raiser(e)
            while pending:
                a, writes = pending[0][0], pending[0][1]
                try:
                    pending[0][3]()
                    a._commit(writes[0][0])
                    pending[0][2] += len(writes[0][0])
                    if len(writes) > 1:      # the next Write; the lock stays held
                        del writes[0]
                        pending[0][3] = (None if io is not None
                                         else a.client.write_raw_start(writes[0][1]))
                        following.append(pending.pop(0))
                        continue
                    out[a.name] = (pending[0][2], None)
                except P4RuntimeError as exc:
                    out[a.name] = (0, a._failed(exc))
                pending.pop(0)
                a.lock.release()
            pending, following = following, []
    finally:
        for p in pending + following:  # an unexpected error: leave no lock held, and read
            a = p[0]                   # back before the next diff (a Write may have been applied)
            a.actual = None
            a._in_sync = False
            a.lock.release()
    return out


def _raiser(err):
    """A wait function for an answer that is already there (RoundIO's)."""
    def wait():
        if err is not None:
            raise err
    return wait

"""etcd for controllers on different machines: a small synchronous client, the primary's
election, and a local etcd cluster for tests and benchmarks.

Client: etcd's v3 gRPC API through the generated stubs of **aetcd** (PyPI, maintained, built for
current protobuf: python-etcd3's old generated modules fail at import under protobuf >= 4,
"Descriptors cannot be created directly", the trap p4-notes describes for p4runtime). aetcd's
own ``Client`` is asyncio-only and talks to one endpoint; the controller is threaded and must
survive the loss of an etcd member, so :class:`Etcd` calls the same stubs over a synchronous
gRPC channel whose target lists every member (``ipv4:a:p,b:p,c:p``: gRPC's pick_first moves
to the next address when one fails) and retries a call that found its member gone.

Election (:class:`Election`): the primary holds ``<prefix>/leader``, put only if absent
(compare create_revision == 0) and attached to a lease of ``ttl`` seconds that it keeps alive
(every ttl/4). Backups watch the key and campaign the moment it is deleted (the lease ran out:
the primary died or lost etcd). The key's create revision grows with every new primary: it is
the **fencing token**. Registry writes compare it (a deposed primary's transactions fail) and
P4Runtime election ids are derived from it (:meth:`Election.election_id`), so the new
primary's id is above every earlier one's at the switches.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import zlib
from typing import Callable

import grpc

log = logging.getLogger(__name__)


def _rpc():
    from aetcd.rpc import kv_pb2, rpc_pb2, rpc_pb2_grpc
    return rpc_pb2, rpc_pb2_grpc, kv_pb2


def prefix_end(prefix: bytes) -> bytes:
    """etcd's range end of every key starting with ``prefix``."""
    b = bytearray(prefix)
    for i in range(len(b) - 1, -1, -1):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[:i + 1])
    return b"\0"


def parse_endpoints(endpoints) -> list[str]:
    """``"http://127.0.0.1:2379,127.0.0.2:2379"`` or a list -> ``["127.0.0.1:2379", ...]``."""
    if isinstance(endpoints, str):
        endpoints = endpoints.split(",")
    out = []
    for e in endpoints:
        e = e.strip()
        for scheme in ("http://", "https://"):
            if e.startswith(scheme):
                e = e[len(scheme):]
        host, sep, port = e.rstrip("/").rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"etcd endpoint {e!r}: expected HOST:PORT")
        out.append(f"{host}:{port}")
    if not out:
        raise ValueError("no etcd endpoint")
    return out


class EtcdError(RuntimeError):
    pass


class Etcd:
    """Synchronous etcd v3 client over every member (see the module docstring)."""

    ATTEMPT_S = 0.5
    RETRY = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN)

    def __init__(self, endpoints, timeout: float = 5.0):
        self.endpoints = parse_endpoints(endpoints)
        self.timeout = timeout
        pb, pbg, _ = _rpc()
        self.pb = pb
        opts = [("grpc.initial_reconnect_backoff_ms", 50), ("grpc.min_reconnect_backoff_ms", 50),
                ("grpc.max_reconnect_backoff_ms", 300), ("grpc.keepalive_time_ms", 1000),
                ("grpc.keepalive_timeout_ms", 1000), ("grpc.keepalive_permit_without_calls", 1)]
        self.channel = grpc.insecure_channel("ipv4:" + ",".join(self.endpoints), options=opts)
        self.kv = pbg.KVStub(self.channel)
        self.leases = pbg.LeaseStub(self.channel)
        self.watcher = pbg.WatchStub(self.channel)
        self._closed = False

    def close(self) -> None:
        self._closed = True
        self.channel.close()

    def _call(self, fn, req, timeout: float | None = None):
        """One unary call, retried (on the next member) while the cluster is unreachable,
        up to ``timeout``."""
        end = time.monotonic() + (timeout or self.timeout)
        delay = 0.02
        while True:
            left = end - time.monotonic()
            try:
                # short attempts: a call caught on a member that just died is retried on another
                # rather than waiting out the whole timeout
                return fn(req, timeout=max(min(left, self.ATTEMPT_S), 0.05), wait_for_ready=True)
            except grpc.RpcError as e:
                if e.code() not in self.RETRY or time.monotonic() + delay >= end or self._closed:
                    raise EtcdError(f"etcd {','.join(self.endpoints)}: {e.code().name}: {e.details()}") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    # KV -----------------------------------------------------------------------------------
    def get(self, key: bytes):
        """(KeyValue or None, revision)."""
        r = self._call(self.kv.Range, self.pb.RangeRequest(key=key))
        return (r.kvs[0] if r.kvs else None), r.header.revision

    def get_prefix(self, prefix: bytes):
        """([KeyValue], revision) of every key under ``prefix``, in key order."""
        r = self._call(self.kv.Range, self.pb.RangeRequest(key=prefix, range_end=prefix_end(prefix)))
        return list(r.kvs), r.header.revision

    def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        return self._call(self.kv.Put, self.pb.PutRequest(key=key, value=value, lease=lease)).header.revision

    def delete_prefix(self, prefix: bytes) -> int:
        return self._call(self.kv.DeleteRange, self.pb.DeleteRangeRequest(
            key=prefix, range_end=prefix_end(prefix))).header.revision

    def compare(self, key: bytes, target: str, value: int, result: str = "EQUAL"):
        C = self.pb.Compare
        c = C(key=key, result=getattr(C, result), target=getattr(C, target.upper()))
        setattr(c, {"CREATE": "create_revision", "MOD": "mod_revision", "VERSION": "version"}[target.upper()], value)
        return c

    def op_put(self, key: bytes, value: bytes, lease: int = 0):
        return self.pb.RequestOp(request_put=self.pb.PutRequest(key=key, value=value, lease=lease))

    def op_delete(self, key: bytes):
        return self.pb.RequestOp(request_delete_range=self.pb.DeleteRangeRequest(key=key))

    def op_get(self, key: bytes):
        return self.pb.RequestOp(request_range=self.pb.RangeRequest(key=key))

    def txn(self, compare, success, failure=()):
        """(succeeded, revision, responses)."""
        r = self._call(self.kv.Txn, self.pb.TxnRequest(compare=list(compare), success=list(success),
                                                       failure=list(failure)))
        return r.succeeded, r.header.revision, list(r.responses)

    # leases -------------------------------------------------------------------------------
    def grant(self, ttl: int) -> int:
        r = self._call(self.leases.LeaseGrant, self.pb.LeaseGrantRequest(TTL=int(ttl)))
        if r.error:
            raise EtcdError(f"lease grant: {r.error}")
        return r.ID

    def keepalive(self, lease: int, timeout: float | None = None) -> int:
        """Refresh a lease once; returns its TTL (0: it has expired)."""
        def call(req, timeout, wait_for_ready):
            for resp in self.leases.LeaseKeepAlive(iter([req]), timeout=timeout, wait_for_ready=wait_for_ready):
                return resp
            return self.pb.LeaseKeepAliveResponse(TTL=0)
        return self._call(call, self.pb.LeaseKeepAliveRequest(ID=lease), timeout).TTL

    def revoke(self, lease: int) -> None:
        try:
            self._call(self.leases.LeaseRevoke, self.pb.LeaseRevokeRequest(ID=lease), 1.0)
        except EtcdError as e:
            log.debug("lease revoke: %s", e)

    # watches ------------------------------------------------------------------------------
    def watch(self, key: bytes, on_events: Callable[[list, int], None], prefix: bool = False,
              start_revision: int = 0) -> Callable[[], None]:
        """Call ``on_events(events, revision)`` from a thread for every change of ``key`` (or
        every key under it) after ``start_revision``; reconnects (from the last revision seen)
        when its member goes away. Returns a function that stops it."""
        stop = threading.Event()
        state = {"rev": start_revision, "call": None}

        def requests():
            wr = self.pb.WatchCreateRequest(key=key, start_revision=state["rev"] + 1 if state["rev"] else 0)
            if prefix:
                wr.range_end = prefix_end(key)
            yield self.pb.WatchRequest(create_request=wr)
            stop.wait()

        def run():
            while not stop.is_set():
                try:
                    call = self.watcher.Watch(requests(), wait_for_ready=True)
                    state["call"] = call
                    for resp in call:
                        if resp.canceled:
                            break
                        if resp.events:
                            state["rev"] = resp.header.revision
                            try:
                                on_events(list(resp.events), resp.header.revision)
                            except Exception:  # noqa: BLE001 - a watcher must survive its callback
                                log.exception("etcd watch callback failed")
                except grpc.RpcError:
                    pass
                if not stop.is_set():
                    stop.wait(0.05)
        threading.Thread(target=run, daemon=True, name="etcd-watch").start()

        def cancel():
            stop.set()
            c = state["call"]
            if c is not None:
                c.cancel()
        return cancel


#: P4Runtime election ids: a primary's is above this, a backup's below it
PRIMARY_BASE = 1 << 40


class Election:
    """The primary's election (module docstring). ``on_change(leader: bool)`` is called from
    the election's threads when this controller becomes or stops being the primary."""

    def __init__(self, etcd: Etcd, prefix: str, name: str, ttl: int = 1,
                 on_change: Callable[[bool], None] | None = None):
        self.etcd = etcd
        self.key = (prefix.rstrip("/") + "/leader").encode()
        self.name = name
        self.ttl = max(1, int(ttl))
        self.on_change = on_change
        self.leader = False
        self.revision = 0            # the leader key's create revision while we hold it
        self.lease = 0
        self.became_leader_at: float | None = None
        self._lease_ok_until = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._cancel_watch: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None

    def election_id(self) -> int:
        """This controller's P4Runtime election id: PRIMARY_BASE + the fencing revision while
        primary (above every earlier primary's), a small id of its own as a backup."""
        if self.leader:
            return PRIMARY_BASE + self.revision
        return 1 + zlib.crc32(self.name.encode()) % (1 << 30)

    def is_leader(self) -> bool:
        """Primary, and its lease was renewed within its TTL (a primary cut off from etcd stops
        claiming it before the lease can have expired in the cluster)."""
        return self.leader and time.monotonic() < self._lease_ok_until

    def start(self) -> "Election":
        self._cancel_watch = self.etcd.watch(self.key, self._on_events)
        self._thread = threading.Thread(target=self._run, daemon=True, name="etcd-election")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop; a primary revokes its lease, so a backup takes over at once."""
        self._stop.set()
        self._wake.set()
        if self._cancel_watch is not None:
            self._cancel_watch()
        if self._thread is not None:
            self._thread.join(timeout=3)
        if self.lease:
            self.etcd.revoke(self.lease)
        self._set(False)

    def _on_events(self, events, revision) -> None:
        from aetcd.rpc import kv_pb2
        if any(e.type == kv_pb2.Event.DELETE for e in events):
            self._wake.set()          # the primary's key is gone: campaign now

    def _set(self, leader: bool) -> None:
        with self._lock:
            changed = leader != self.leader
            self.leader = leader
            if leader and changed:
                self.became_leader_at = time.time()
        if changed:
            log.info("etcd election %s: %s", self.key.decode(), "primary" if leader else "backup")
            if self.on_change is not None:
                try:
                    self.on_change(leader)
                except Exception:  # noqa: BLE001 - the election must keep its lease alive
                    log.exception("etcd election: on_change failed")

    def _campaign(self) -> None:
        e = self.etcd
        if not self.lease:
            self.lease = e.grant(self.ttl)
            self._lease_ok_until = time.monotonic() + self.ttl * 0.8
        ok, rev, resp = e.txn([e.compare(self.key, "CREATE", 0)],
                              [e.op_put(self.key, self.name.encode(), self.lease)],
                              [e.op_get(self.key)])
        if ok:
            self.revision = rev
            self._set(True)
            return
        kvs = resp[0].response_range.kvs if resp else []
        if kvs and kvs[0].lease == self.lease:      # ours already (a retried campaign)
            self.revision = kvs[0].create_revision
            self._set(True)
        elif self.leader:
            self._set(False)

    def _run(self) -> None:
        period = self.ttl / 4
        while not self._stop.is_set():
            try:
                if self.lease:
                    t0 = time.monotonic()
                    ttl = self.etcd.keepalive(self.lease, timeout=period * 2)
                    if ttl <= 0:        # expired: a new lease, and we are not primary any more
                        self.lease = 0
                        self._set(False)
                    else:
                        self._lease_ok_until = t0 + self.ttl * 0.8
                if not self.leader:
                    self._campaign()
            except EtcdError as ex:
                log.warning("etcd election: %s", ex)
                if self.leader and time.monotonic() >= self._lease_ok_until:
                    self._set(False)
            self._wake.wait(period)
            self._wake.clear()


class LocalCluster:
    """A 3-member (or n-member) etcd cluster on loopback addresses 127.0.0.1, .2, .3, ... for
    tests and benchmarks: member k listens for peers on 127.0.0.k:``peer_port`` and for clients
    on 127.0.0.k:``client_port`` (and on each of ``extra_client_hosts``, at ``client_port`` + k,
    for controllers in other network namespaces). Short heartbeats (50 ms) and elections
    (500 ms) let leases of 1 s be granted. ``kill(k)`` / ``start(k)`` one member."""

    def __init__(self, n: int = 3, client_port: int = 23790, peer_port: int = 23800,
                 data_dir: str | None = None, extra_client_hosts: tuple = (), token: str | None = None):
        binary = shutil.which("etcd")
        if not binary:
            raise RuntimeError("etcd not found (Debian package etcd-server; coflow.sysdeps installs it)")
        self.binary: str = binary
        self.n = n
        self.client_port, self.peer_port = client_port, peer_port
        self.dir = data_dir or tempfile.mkdtemp(prefix="coflow-etcd-")
        os.makedirs(self.dir, exist_ok=True)
        self.extra = tuple(extra_client_hosts)
        self.token = token or f"coflow-{os.getpid()}-{client_port}"
        self.procs: dict = {}

    def host(self, k: int) -> str:
        return f"127.0.0.{k + 1}"

    def endpoints(self, via: str | None = None) -> list[str]:
        """Client endpoints on loopback, or on ``via`` (one of ``extra_client_hosts``)."""
        if via is None:
            return [f"{self.host(k)}:{self.client_port}" for k in range(self.n)]
        return [f"{via}:{self.client_port + 1 + k}" for k in range(self.n)]

    def _cmd(self, k: int) -> list[str]:
        name = f"m{k}"
        cluster = ",".join(f"m{j}=http://{self.host(j)}:{self.peer_port}" for j in range(self.n))
        clients = [f"http://{self.host(k)}:{self.client_port}"] + \
            [f"http://{h}:{self.client_port + 1 + k}" for h in self.extra]
        return [self.binary, "--name", name, "--data-dir", os.path.join(self.dir, name),
                "--listen-peer-urls", f"http://{self.host(k)}:{self.peer_port}",
                "--initial-advertise-peer-urls", f"http://{self.host(k)}:{self.peer_port}",
                "--listen-client-urls", ",".join(clients),
                "--advertise-client-urls", clients[0],
                "--initial-cluster", cluster, "--initial-cluster-token", self.token,
                "--initial-cluster-state", "new", "--heartbeat-interval", "50",
                "--election-timeout", "500", "--log-level", "error", "--logger", "zap"]

    def start(self, k: int | None = None, timeout: float = 20.0) -> "LocalCluster":
        ks = range(self.n) if k is None else [k]
        for j in ks:
            log_path = os.path.join(self.dir, f"m{j}.log")
            with open(log_path, "ab") as out:
                self.procs[j] = subprocess.Popen(self._cmd(j), stdout=out, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL, start_new_session=True)
        c = Etcd(self.endpoints(), timeout=timeout)
        try:
            end = time.monotonic() + timeout
            while True:
                try:
                    c.put(b"/coflow-etcd-probe", b"1")
                    break
                except EtcdError:
                    if time.monotonic() > end:
                        raise RuntimeError(f"etcd cluster not up within {timeout} s (logs in {self.dir})") from None
                    time.sleep(0.1)
        finally:
            c.close()
        return self

    def leader(self) -> int | None:
        """The index of the member that leads the raft group now (None: none answers)."""
        pb, pbg, _ = _rpc()
        for k in sorted(self.procs):
            ch = grpc.insecure_channel(f"{self.host(k)}:{self.client_port}")
            try:
                r = pbg.MaintenanceStub(ch).Status(pb.StatusRequest(), timeout=1)
                if r.leader == r.header.member_id:
                    return k
            except grpc.RpcError:
                continue
            finally:
                ch.close()
        return None

    def kill(self, k: int) -> None:
        p = self.procs.pop(k, None)
        if p is not None and p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)

    def stop(self) -> None:
        for k in list(self.procs):
            self.kill(k)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

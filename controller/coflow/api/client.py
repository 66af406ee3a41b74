"""A small client for the coflow API (``coflow.v1.CoflowService``).

    from coflow.api.client import CoflowClient
    with CoflowClient("127.0.0.1:50051") as c:          # or "unix:/tmp/coflow-api.sock"
        cid = c.register([("h0", "h1", 10_000_000), ("h2", "h1", None)])
        c.update(cid, sizes={1: 5_000_000}, sent={0: 1_000_000})
        c.add_flows(cid, [("h3", "h1", 2_000_000)])
        print(c.status(cid))
        c.unregister(cid)

Register is idempotent: the client gives every Register a fresh request id and retries it,
with the same id, when the server was unavailable (a restarting controller) or the answer was
lost, up to ``retry_s``; the server returns the coflow the first attempt registered. With
``keepalive=True`` (the default) a background thread renews the leases of the coflows this
client registered and has not unregistered, every third of their lease (``KeepAlive``).

Every method raises :class:`CoflowApiError` (``code``: the gRPC status name, ``details``: the
server's one-line ``"<field>: <problem>"``) when the call fails; coflows are returned as dicts of
the shape of :meth:`coflow.api.registry.CoflowRecord.to_dict`.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Callable, Iterable, Mapping

import grpc

from . import proto
from .server import DEFAULT_ADDRESS, unix_address

pb2, pb2_grpc = proto.load()
log = logging.getLogger(__name__)


class CoflowApiError(Exception):
    """A failed API call: ``code`` (e.g. "INVALID_ARGUMENT"), ``details``, and ``field`` (the
    request field the server named, or None)."""

    def __init__(self, code: str, details: str):
        self.code = code
        self.details = " ".join(str(details).split())   # one line
        head, sep, _ = self.details.partition(": ")
        self.field = head if sep and " " not in head else None
        super().__init__(f"{code}: {self.details}")


def coflow_to_dict(c) -> dict:
    return {
        "coflow_id": c.coflow_id,
        "flows": [{"flow_id": f.flow_id, "src": f.src, "dst": f.dst,
                   "size_bytes": f.size_bytes if f.HasField("size_bytes") else None,
                   "sent_bytes": f.sent_bytes, "ready": f.ready} for f in c.flows],
        "registered_at": c.registered_at,
        "deadline_s": c.deadline_s if c.HasField("deadline_s") else None,
        "parent": c.parent or None,
        "parents": list(c.parents),
        "admitted": c.admitted,
        "clairvoyant": c.clairvoyant,
        "total_bytes": c.total_bytes if c.HasField("total_bytes") else None,
        "sent_bytes": c.sent_bytes,
        "lease_s": c.lease_s if c.HasField("lease_s") else None,
        "owner": c.owner or None,
    }


def rate_update_to_dict(m) -> dict:
    return {"coflow_id": m.coflow_id,
            "flows": [{"flow_id": f.flow_id, "src": f.src, "dst": f.dst,
                       "rate_bytes_per_s": f.rate_bytes_per_s, "limited": f.limited}
                      for f in m.flows],
            "priority": m.priority if m.HasField("priority") else None,
            "epoch": m.epoch, "controller": m.controller, "done": m.done, "at": m.at}


class RateStream:
    """An open WatchRates call: iterate for the updates (dicts of
    :func:`rate_update_to_dict`'s shape); :meth:`cancel` ends it from any thread. A failed or
    broken stream raises :class:`CoflowApiError` from the iteration (``UNAVAILABLE`` when the
    server went away, ``CANCELLED`` after :meth:`cancel`)."""

    def __init__(self, call):
        self._call = call

    def __iter__(self):
        try:
            for m in self._call:
                yield rate_update_to_dict(m)
        except grpc.RpcError as e:
            raise CoflowApiError(e.code().name, e.details() or "") from None

    def cancel(self) -> None:
        self._call.cancel()


def _flow_msgs(flows) -> list:
    out = []
    for i, f in enumerate(flows):
        try:
            if isinstance(f, Mapping):
                src, dst, size, ready = f.get("src"), f.get("dst"), f.get("size_bytes"), f.get("ready", False)
            else:
                f = tuple(f)
                if len(f) not in (2, 3, 4):
                    raise ValueError("expected (src, dst[, size_bytes[, ready]])")
                src, dst, size, ready = (*f, None, False)[:4] if len(f) == 2 else (*f, False)[:4]
            if not isinstance(ready, bool):
                raise ValueError(f"ready: {ready!r} is not a boolean")
            m = pb2.Flow(src=src, dst=dst, ready=ready)
            if size is not None:
                m.size_bytes = size
        except (TypeError, ValueError) as e:
            raise CoflowApiError("INVALID_ARGUMENT", f"flows[{i}]: {e}") from None
        out.append(m)
    return out


def _counts(m, name: str) -> dict:
    try:
        return {int(k) if isinstance(k, str) else k: v for k, v in dict(m or {}).items()}
    except (TypeError, ValueError) as e:
        raise CoflowApiError("INVALID_ARGUMENT", f"{name}: {e}") from None


#: status codes after which a Register with a request id is retried (the server may or may not
#: have registered it; the id makes the retry safe)
RETRY_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)


#: gRPC's reconnect backoff bounded to 1 s (its default grows 1.6x from 1 s to 120 s): a
#: restarted controller gives every coflow one lease to be renewed, and an application whose
#: channel waits out a long backoff step would let its coflows expire (measured: a 2 s lease
#: lost under load with the default)
RECONNECT_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                     ("grpc.max_reconnect_backoff_ms", 1000)]


class CoflowClient:
    def __init__(self, address: str = DEFAULT_ADDRESS, timeout: float = 10.0, retry_s: float = 10.0,
                 keepalive: bool = True, channel: "grpc.Channel | None" = None,
                 token: str | None = None, ca: bytes | str | None = None,
                 server_name: str | None = None):
        """``token``: the application's token (coflow.api.auth), sent with every call;
        ``ca``: the CA certificate (PEM bytes, or a file path) to check the server's TLS
        certificate against (TLS on when given); ``server_name``: the name the certificate must
        carry when it differs from the address's host."""
        if address.startswith("unix:") or address.startswith("/"):
            address = unix_address(address)
        self.address = address
        self.timeout = timeout
        self.retry_s = retry_s
        self._md = (("authorization", f"Bearer {token}"),) if token else None
        if channel is None:
            if ca is not None:
                if isinstance(ca, str):
                    with open(ca, "rb") as f:
                        ca = f.read()
                opts = RECONNECT_OPTIONS + ([("grpc.ssl_target_name_override", server_name)]
                                            if server_name else [])
                channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(ca), options=opts)
            else:
                channel = grpc.insecure_channel(address, options=RECONNECT_OPTIONS)
        self._channel = channel
        self._stub = pb2_grpc.CoflowServiceStub(self._channel)
        #: registry version after the last call
        self.version: int | None = None
        #: Register attempts retried (same request id)
        self.retries = 0
        self._keepalive = keepalive
        self._held: dict[str, float] = {}      # coflow id -> its lease (s), for the keep-alive thread
        self._held_lock = threading.Lock()
        self._ka_stop = threading.Event()
        self._ka_thread: threading.Thread | None = None

    def close(self):
        self._ka_stop.set()
        if self._ka_thread is not None:
            self._ka_thread.join(timeout=2)
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _rpc(self, method: str, request):
        try:
            reply = getattr(self._stub, method)(request, timeout=self.timeout, metadata=self._md)
        except grpc.RpcError as e:
            raise CoflowApiError(e.code().name, e.details() or "") from None
        self.version = reply.version
        return reply

    def register_coflow(self, flows, parent: str | None = None, deadline_s: float | None = None,
                        external: int | None = None, request_id: str | None = None,
                        lease_s: float | None = None, parents=None) -> dict:
        """Register; returns the whole coflow (``["coflow_id"]`` is its id). ``parents``: the
        parent stages' CoflowIds (``parent``: deprecated, one). ``request_id``:
        the idempotency key (a fresh one when None); retried with it on UNAVAILABLE /
        DEADLINE_EXCEEDED / CANCELLED for up to ``retry_s``."""
        req = pb2.RegisterRequest(flows=_flow_msgs(flows), parent=parent or "",
                                  parents=[str(p) for p in parents or ()],
                                  request_id=request_id or uuid.uuid4().hex)
        if deadline_s is not None:
            req.deadline_s = deadline_s
        if external is not None:
            req.external = external
        if lease_s is not None:
            req.lease_s = lease_s
        end = time.monotonic() + self.retry_s
        delay, attempt = 0.05, 0
        while True:
            try:
                reply = self._stub.Register(req, timeout=self.timeout, wait_for_ready=attempt > 0,
                                            metadata=self._md)
                break
            except grpc.RpcError as e:
                if e.code() not in RETRY_CODES or time.monotonic() + delay > end:
                    raise CoflowApiError(e.code().name, e.details() or "") from None
                self.retries += 1
                attempt += 1
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        self.version = reply.version
        d = coflow_to_dict(reply.coflow)
        if d["lease_s"] is not None:
            self._hold(d["coflow_id"], d["lease_s"])
        return d

    def register(self, flows: Iterable, parent: str | None = None, deadline_s: float | None = None,
                 external: int | None = None, request_id: str | None = None,
                 lease_s: float | None = None, parents=None) -> str:
        """``flows``: ``(src, dst)`` / ``(src, dst, size_bytes or None)`` tuples or dicts. Returns the CoflowId string."""
        return self.register_coflow(flows, parent, deadline_s, external, request_id, lease_s, parents)["coflow_id"]

    def keep_alive(self, cids: Iterable[str] = ()) -> tuple[list[str], list[str]]:
        """Renew leases; returns (renewed ids, ids no longer registered). Empty ``cids``: every
        coflow of this application (a server with identities)."""
        r = self._rpc("KeepAlive", pb2.KeepAliveRequest(coflow_ids=[str(c) for c in cids]))
        return list(r.renewed), list(r.not_found)

    def _hold(self, cid: str, lease_s: float):
        if not self._keepalive:
            return
        with self._held_lock:
            self._held[cid] = lease_s
            if self._ka_thread is None:
                self._ka_thread = threading.Thread(target=self._keepalive_loop, daemon=True,
                                                   name="coflow-keepalive")
                self._ka_thread.start()

    def _release(self, cid: str):
        with self._held_lock:
            self._held.pop(cid, None)

    def _keepalive_loop(self):
        while True:
            with self._held_lock:
                ids = list(self._held)
                period = min(self._held.values(), default=3.0) / 3
            if self._ka_stop.wait(max(period, 0.01)):
                return
            if not ids:
                continue
            try:
                _, gone = self.keep_alive(ids)
            except CoflowApiError:
                continue        # the server is away: try again next period
            for c in gone:
                self._release(c)

    def add_flows(self, cid: str, flows: Iterable) -> dict:
        return coflow_to_dict(self._rpc("AddFlows", pb2.AddFlowsRequest(coflow_id=str(cid), flows=_flow_msgs(flows))).coflow)

    def update(self, cid: str, sizes: Mapping[int, int] | None = None, sent: Mapping[int, int] | None = None,
               ready: Mapping[int, bool] | None = None) -> dict:
        """Set sizes, report bytes sent, mark flows ready to send (``ready``: flow id -> bool)."""
        try:
            req = pb2.UpdateRequest(coflow_id=str(cid), sizes=_counts(sizes, "sizes"), sent_bytes=_counts(sent, "sent_bytes"),
                                    ready=_counts(ready, "ready"))
        except (TypeError, ValueError) as e:
            raise CoflowApiError("INVALID_ARGUMENT", f"sizes: {e}") from None
        return coflow_to_dict(self._rpc("Update", req).coflow)

    def unregister(self, cid: str) -> dict:
        d = coflow_to_dict(self._rpc("Unregister", pb2.CoflowRequest(coflow_id=str(cid))).coflow)
        self._release(str(cid))
        return d

    def status(self, cid: str) -> dict:
        return coflow_to_dict(self._rpc("Status", pb2.CoflowRequest(coflow_id=str(cid))).coflow)

    def list(self) -> list[dict]:
        return [coflow_to_dict(c) for c in self._rpc("List", pb2.ListRequest()).coflows]

    def watch_rates(self, cid: str | None = None, src: str | None = None) -> RateStream:
        """The rates of coflow ``cid`` (or of every coflow; with ``src``, only the flows that
        host sends) as the controller changes them. No deadline: the stream lasts until the
        coflow is unregistered, the server goes away or :meth:`RateStream.cancel`."""
        return RateStream(self._stub.WatchRates(
            pb2.WatchRatesRequest(coflow_id=str(cid) if cid else "", src=src or "")))


class RateWatcher:
    """Follows a controller's rates for a host, across controller restarts: a thread keeps one
    WatchRates stream open (``src`` = the host), calls ``on_update(update)`` for each update
    (the first of every stream has ``coflow_id`` "" and names the controller: what the caller
    knew from an earlier stream is stale) and, when the stream breaks, ``on_error(error)`` and
    opens a new one after a backoff (0.1 s doubling to 1 s). :meth:`stop` ends it."""

    def __init__(self, address: str, src: str | None, on_update: Callable[[dict], None],
                 on_error: Callable[[Exception], None] | None = None):
        self.address, self.src = address, src
        self.on_update, self.on_error = on_update, on_error
        self.streams = 0                         # streams opened
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stream: RateStream | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="rate-watcher")

    def start(self) -> "RateWatcher":
        self._thread.start()
        return self

    def _run(self) -> None:
        backoff = 0.1
        with CoflowClient(self.address) as c:
            while not self._stop.is_set():
                with self._lock:
                    if self._stop.is_set():
                        break
                    self._stream = c.watch_rates(src=self.src)
                    self.streams += 1
                try:
                    for u in self._stream:
                        backoff = 0.1
                        try:
                            self.on_update(u)
                        except Exception:  # noqa: BLE001 - one bad update must not end the watch
                            log.exception("RateWatcher: on_update failed")
                    err: Exception = CoflowApiError("UNAVAILABLE", "stream ended")
                except CoflowApiError as e:
                    err = e
                if self._stop.is_set():
                    break
                if self.on_error is not None:
                    try:
                        self.on_error(err)
                    except Exception:  # noqa: BLE001 - the watcher must go on
                        log.exception("RateWatcher: on_error failed")
                self._stop.wait(backoff)
                backoff = min(1.0, backoff * 2)

    def stop(self, timeout: float = 2.0) -> None:
        with self._lock:
            self._stop.set()
            if self._stream is not None:
                self._stream.cancel()
        if self._thread.is_alive():
            self._thread.join(timeout)

"""The ``coflow.v1.CoflowService`` gRPC server over a :class:`~coflow.api.registry.CoflowRegistry`.

Served on 127.0.0.1 by default and, when asked, on ``unix:PATH`` sockets too: Mininet hosts live
in other network namespaces and reach the API through the shared filesystem. A rejected request
is answered with the :class:`~coflow.api.registry.ApiError`'s status code and
``"<field>: <problem>"`` as the details; nothing changes.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import threading
import time
from concurrent import futures

import grpc

from . import proto
from .rates import CoflowRates, RateBoard
from .registry import ApiError, CoflowRecord, CoflowRegistry, FlowSpec, parse_cid

log = logging.getLogger(__name__)
pb2, pb2_grpc = proto.load()

DEFAULT_ADDRESS = "127.0.0.1:50051"


def record_to_pb(rec: CoflowRecord):
    c = pb2.Coflow(coflow_id=str(rec.cid), registered_at=rec.registered_at,
                   parent=str(rec.parent) if rec.parent is not None else "", admitted=rec.admitted,
                   clairvoyant=rec.clairvoyant, sent_bytes=rec.total_sent, parents=[str(p) for p in rec.parents])
    for i, f in enumerate(rec.flows):
        fs = c.flows.add(flow_id=i, src=f.src, dst=f.dst, sent_bytes=rec.sent_bytes.get(i, 0), ready=f.ready)
        if f.size_bytes is not None:
            fs.size_bytes = f.size_bytes
    if rec.deadline_s is not None:
        c.deadline_s = rec.deadline_s
    if rec.clairvoyant:
        c.total_bytes = rec.total_bytes
    if rec.lease_s is not None:
        c.lease_s = rec.lease_s
    if rec.owner:
        c.owner = rec.owner
    return c


def _flows(msgs) -> list[FlowSpec]:
    return [FlowSpec(m.src, m.dst, m.size_bytes if m.HasField("size_bytes") else None, m.ready) for m in msgs]


#: seconds between a rate stream's checks that its client is still there and its coflows
#: still registered, when no rate changes
WATCH_POLL_S = 0.25


def rates_to_pb(cr: CoflowRates, epoch: int, controller: str, at: float, done: bool = False):
    m = pb2.RateUpdate(coflow_id=cr.cid, epoch=epoch, controller=controller, at=at, done=done)
    for f in cr.flows:
        m.flows.add(flow_id=f.flow_id, src=f.src, dst=f.dst, rate_bytes_per_s=f.rate_Bps,
                    limited=f.limited)
    if cr.priority is not None:
        m.priority = cr.priority
    return m


class CoflowServicer(pb2_grpc.CoflowServiceServicer):
    def __init__(self, registry: CoflowRegistry, after_register=None, rates: RateBoard | None = None,
                 identities=None):
        self.registry = registry
        # the controller's rates (WatchRates); None: no controller, or a mode that sets none
        self.rates = rates
        # coflow.api.auth.Identities: every call carries an application's token (None: the API
        # has no identities, as on the emulation's unix socket)
        self.identities = identities
        # called with the new record before Register answers: the controller waits there
        # until the coflow's slot is on the switches (Controller.wait_installed)
        self.after_register = after_register

    def _register(self, *a, **kw):
        rec = self.registry.register(*a, **kw)
        if self.after_register is not None:
            try:
                self.after_register(rec)
            except Exception:  # noqa: BLE001 - registered all the same; the wait is a courtesy
                log.exception("coflow API: after_register failed for %s", rec.cid)
        return rec

    def _call(self, context, fn, *a, **kw):
        self._app(context)
        try:
            rec = fn(*a, **kw)
        except ApiError as e:
            context.abort(getattr(grpc.StatusCode, e.code), e.details)
        except Exception as e:  # a database failure: the registry itself is unchanged
            log.exception("coflow API: %s failed", getattr(fn, "__name__", fn))
            context.abort(grpc.StatusCode.INTERNAL, f"registry: {type(e).__name__}: {e}")
        return pb2.CoflowReply(coflow=record_to_pb(rec), version=self.registry.version)

    def _app(self, context):
        """The calling application (None without identities); UNAUTHENTICATED without a valid
        token, before anything is read or changed."""
        if self.identities is None:
            return None
        from .auth import AuthError
        try:
            return self.identities.authenticate(context.invocation_metadata())
        except AuthError as e:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, e.details)

    def _owner(self, context):
        """The owner a change must match (None: no identities, or an admin application)."""
        app = self._app(context)
        return None if app is None or app.admin else app.name

    def Register(self, request, context):
        app = self._app(context)
        return self._call(context, self._register, _flows(request.flows), parent=request.parent or None,
                          parents=list(request.parents),
                          deadline_s=request.deadline_s if request.HasField("deadline_s") else None,
                          external=request.external if request.HasField("external") else None,
                          request_id=request.request_id or None,
                          lease_s=request.lease_s if request.HasField("lease_s") else None,
                          owner=app.name if app is not None else None)

    def AddFlows(self, request, context):
        return self._call(context, self.registry.add_flows, request.coflow_id, _flows(request.flows),
                          owner=self._owner(context))

    def Update(self, request, context):
        return self._call(context, self.registry.update, request.coflow_id, sizes=dict(request.sizes),
                          sent=dict(request.sent_bytes), ready=dict(request.ready), owner=self._owner(context))

    def Unregister(self, request, context):
        return self._call(context, self.registry.unregister, request.coflow_id, owner=self._owner(context))

    def KeepAlive(self, request, context):
        app = self._app(context)
        owner = self._owner(context)
        if app is not None and not request.coflow_ids:
            owner = app.name          # "every coflow of mine", an admin's too
        try:
            renewed, missing = self.registry.keep_alive(list(request.coflow_ids), owner=owner)
        except ApiError as e:
            context.abort(getattr(grpc.StatusCode, e.code), e.details)
        return pb2.KeepAliveReply(renewed=[str(r.cid) for r in renewed], not_found=missing,
                                  version=self.registry.version)

    def Status(self, request, context):
        return self._call(context, self.registry.get, request.coflow_id)

    def List(self, request, context):
        self._app(context)
        version, recs = self.registry.snapshot()
        return pb2.ListReply(coflows=[record_to_pb(r) for r in recs], version=version)

    def WatchRates(self, request, context):
        """Stream the rates of one coflow, or of every coflow (only the flows ``src`` sends,
        when given), as the controller changes them (see coflow.proto)."""
        board = self.rates
        if board is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED,
                          "WatchRates: this server has no scheduled mode: no rates to stream")
        one = None
        try:
            if request.coflow_id:
                one = str(self.registry.get(parse_cid(request.coflow_id, "coflow_id")).cid)
            if request.src and request.src not in self.registry.hosts:
                raise ApiError("INVALID_ARGUMENT", "src", f"unknown host {request.src!r}")
        except ApiError as e:
            context.abort(getattr(grpc.StatusCode, e.code), e.details)
        src = request.src or None
        gone = threading.Event()
        context.add_callback(gone.set)       # the client went away, or the server stops
        board._enter()
        try:
            epoch, at, rates = board.snapshot()
            yield pb2.RateUpdate(coflow_id="", epoch=epoch, controller=board.instance, at=at)
            sent: dict = {}                  # cid -> CoflowRates as last sent
            while not gone.is_set() and not board.closed:
                mine = board.host_view(src, rates) if src is not None else None
                for cid in ([one] if one else list(rates)):
                    cr = rates.get(cid)
                    if cr is None:
                        continue
                    if mine is not None:     # only this host's flows
                        cr = mine.get(cid)
                        if cr is None:
                            if cid not in sent:
                                continue     # nothing of this host's, never was
                            cr = CoflowRates(cid, (), rates[cid].priority)
                    if sent.get(cid) != cr:
                        sent[cid] = cr
                        yield rates_to_pb(cr, epoch, board.instance, at)
                # coflows no longer registered: a last message each (a single coflow's stream ends)
                for cid in [c for c in sent if c not in rates and c not in self.registry]:
                    del sent[cid]
                    yield rates_to_pb(CoflowRates(cid, ()), epoch, board.instance, time.time(),
                                      done=True)
                    if cid == one:
                        return
                if one and one not in self.registry:   # gone before its rates (or still listed)
                    yield rates_to_pb(CoflowRates(one, ()), epoch, board.instance, time.time(),
                                      done=True)
                    return
                epoch, at, rates = board.wait(epoch, WATCH_POLL_S)
        finally:
            board._leave()


def unix_address(path: str) -> str:
    return path if path.startswith("unix:") else "unix:" + os.path.abspath(path)


def start_reaper(registry: CoflowRegistry, interval_s: float = 0.25) -> threading.Event:
    """A thread that expires leases every ``interval_s`` (``coflow api serve``; the controller
    does it in its loop instead). Set the returned event to stop it."""
    stop = threading.Event()

    def run():
        while not stop.wait(interval_s):
            try:
                registry.expire()
            except Exception:  # noqa: BLE001 - a closed or failing database: try again later
                log.exception("coflow API: lease expiry failed")
                if registry._db is None and registry.db_path is not None:
                    return
    threading.Thread(target=run, daemon=True, name="coflow-lease-reaper").start()
    return stop


def _loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(registry: CoflowRegistry, address: str | None = DEFAULT_ADDRESS, extra_addresses=(),
          max_workers: int = 8, after_register=None, rates: RateBoard | None = None,
          max_streams: int = 64, tls: tuple[bytes, bytes] | None = None,
          identities=None) -> grpc.Server:
    """Start the service on ``address`` (``host:port``; port 0 picks a free one) and every
    ``extra_addresses`` entry (``unix:/path`` or ``host:port``). Returns the started server; its
    attribute ``coflow_addresses`` lists the bound addresses with real port numbers.
    Raises ``OSError`` when an address cannot be bound. ``after_register(record)`` runs before
    Register answers (the controller's :meth:`~coflow.ctl.daemon.Controller.wait_installed`).
    ``rates``: the controller's :class:`~coflow.api.rates.RateBoard`, streamed by WatchRates;
    each open stream holds a worker thread, so the pool has ``max_streams`` more of them.

    ``tls``: (certificate chain PEM, private key PEM): every TCP address serves TLS (unix
    sockets stay plaintext: local, guarded by the filesystem). ``identities``
    (:class:`coflow.api.auth.Identities`): every call must carry an application's token;
    refused on a plaintext TCP address that is not loopback (tokens in clear on a network).
    The server also serves gRPC's health service (``grpc.health.v1.Health``; the attribute
    ``coflow_health`` sets it: SERVING, or NOT_SERVING on a backup controller) and server
    reflection, both without identities."""
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection
    addrs = ([address] if address else []) + [unix_address(a) if a.startswith("unix:") or "/" in a else a
                                              for a in extra_addresses]
    if not addrs:
        raise ValueError("coflow API: no address to serve on")
    if identities is not None and tls is None:
        exposed = [a for a in addrs if not a.startswith("unix:") and not _loopback(a.rsplit(":", 1)[0])]
        if exposed:
            raise ValueError(f"coflow API: tokens would cross the network in clear on {', '.join(exposed)}: "
                             "give a TLS certificate and key, or listen on loopback / a unix socket")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers + (max_streams if rates else 0),
                                                    thread_name_prefix="coflow-api"),
                         options=[("grpc.so_reuseport", 0)])
    pb2_grpc.add_CoflowServiceServicer_to_server(
        CoflowServicer(registry, after_register, rates, identities=identities), server)
    hs = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(hs, server)
    service = pb2.DESCRIPTOR.services_by_name["CoflowService"].full_name
    for name in ("", service):
        hs.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection((service, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    creds = grpc.ssl_server_credentials([(tls[1], tls[0])]) if tls is not None else None
    bound = []
    for a in addrs:
        if a.startswith("unix:"):
            path = a[len("unix:"):]
            path = path[2:] if path.startswith("//") else path   # unix:///abs/path
            d = os.path.dirname(path)
            if d and not os.path.isdir(d):
                raise OSError(f"coflow API: cannot listen on {a}: directory {d} does not exist")
        try:
            if creds is not None and not a.startswith("unix:"):
                port = server.add_secure_port(a, creds)
            else:
                port = server.add_insecure_port(a)
        except RuntimeError as e:
            port = 0
            err = str(e)
        else:
            err = ""
        if not port:
            server.stop(None)
            raise OSError(f"coflow API: cannot listen on {a}{': ' + err if err else ' (address in use?)'}")
        if a.startswith("unix:"):
            bound.append(a)
        else:
            host = a.rsplit(":", 1)[0]
            bound.append(f"{host}:{port}")
    server.start()
    server.coflow_addresses = bound
    server.coflow_health = hs
    server.coflow_service = service
    return server

"""A thin P4Runtime client for the coflow pipeline on BMv2 (simple_switch_grpc).

Connect, become master (arbitration with an election id), push the pipeline
(SetForwardingPipelineConfig), write/read/delete table entries (exact, LPM, ternary, range,
optional), action-profile members and groups, read/write indirect counters and meter configs.
Names are resolved to ids from the P4Info text that p4c wrote next to the BMv2 JSON.

Uses grpcio and the P4Runtime stubs generated at first use from PyPI's ``p4runtime`` package
(:mod:`coflow.dataplane.pb`): they run on the C protobuf, unlike the package's own modules.

The client can keep an undo journal (``start_journal`` / ``undo``): every INSERT is undone by a
DELETE, every MODIFY of a table entry, default action or meter config and every DELETE of a table
entry by writing back what was read before.
The PTF tests' ``autocleanup`` decorator is built on it.
"""
from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable


try:  # the P4Info helper works without grpc / p4runtime stubs for offline tools and unit tests
    from coflow.dataplane.pb import p4info_pb2  # noqa: E402
except ImportError:  # pragma: no cover
    p4info_pb2 = None

# P4Info names and values (offline), and the client's entity builders, each in a module of its own
from .p4info import P4InfoHelper, _Entity, decode_value, encode_value  # noqa: E402,F401 (re-exported)
from .p4rt_entities import EntityBuilders, _pb  # noqa: E402


class P4RuntimeError(Exception):
    """A P4Runtime call failed; ``details`` lists the per-update errors when the server sent them."""

    def __init__(self, message: str, details: list[str] | None = None, code: str | None = None):
        super().__init__(message + ("".join("\n  " + d for d in details) if details else ""))
        self.details = details or []
        self.code = code  # the gRPC status name (e.g. PERMISSION_DENIED), when there is one


# --- the client ---------------------------------------------------------------------------

_files_cache: dict = {}
_files_lock = threading.Lock()


def _pipeline_files(p4info_path: str, device_config_path: str) -> tuple:
    """(P4InfoHelper, device config bytes), read once per file version: a controller pushing
    the same pipeline to a thousand switches parses the P4Info text once (~0.1 s each)."""
    key = []
    for p in (p4info_path, device_config_path):
        st = os.stat(p)
        key.append((os.path.abspath(p), st.st_mtime_ns, st.st_size))
    k = tuple(key)
    with _files_lock:
        got = _files_cache.get(k)
        if got is None:
            with open(device_config_path, "rb") as f:
                got = (P4InfoHelper.from_file(p4info_path), f.read())
            if len(_files_cache) > 8:
                _files_cache.clear()
            _files_cache[k] = got
    return got


@dataclass
class _Journal:
    undo: list = field(default_factory=list)  # (update_type, entity), applied in reverse


@dataclass(frozen=True)
class ChannelTls:
    """TLS for a P4Runtime channel: the CA that signed the switch's certificate (PEM), and for a
    switch that asks for client certificates (BMv2's ``--grpc-server-with-client-auth``) the
    controller's certificate and key; ``server_name``: the name the switch's certificate
    carries when the address's host is not in it."""
    root: bytes
    cert: bytes | None = None
    key: bytes | None = None
    server_name: str | None = None

    @classmethod
    def from_files(cls, ca: str, cert: str | None = None, key: str | None = None,
                   server_name: str | None = None) -> "ChannelTls":
        if bool(cert) != bool(key):
            raise ValueError("a client certificate and its key go together")

        def read(path, what):
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as e:
                raise ValueError(f"{what} {path}: {e.strerror}") from None
        return cls(read(ca, "CA certificate"), read(cert, "certificate") if cert else None,
                   read(key, "key") if key else None, server_name)

    def channel(self, address: str, options: list, aio: bool = False):
        """A secure channel to ``address`` (``aio``: a grpc.aio one, for an asyncio loop)."""
        import grpc
        creds = grpc.ssl_channel_credentials(self.root, self.key, self.cert)
        if self.server_name:
            options = [*options, ("grpc.ssl_target_name_override", self.server_name)]
        if aio:
            return grpc.aio.secure_channel(address, creds, options=options)
        return grpc.secure_channel(address, creds, options=options)


_STREAM_LOOP: list = []
_STREAM_LOOP_MU = threading.Lock()


def stream_loop():
    """The process's one asyncio loop (its own thread) that carries the StreamChannels of the
    clients made with ``stream_aio=True``: a controller of a thousand switches holds a thousand
    streams as coroutines on one thread, where grpc's synchronous streams take two threads each
    (the response iterator and the request consumer), and a blocked synchronous iterator wakes
    every 0.1 s (grpc's wait slices): thousands of threads waking ten times a second were the
    1,024-switch controller's start-up and round time."""
    import asyncio
    with _STREAM_LOOP_MU:
        if not _STREAM_LOOP or not _STREAM_LOOP[1].is_alive():
            loop = asyncio.new_event_loop()
            t = threading.Thread(target=loop.run_forever, daemon=True, name="p4rt-streams")
            t.start()
            _STREAM_LOOP[:] = [loop, t]
        return _STREAM_LOOP[0]


class _LoopQueue:
    """The request queue of a stream on :func:`stream_loop`: ``put`` from any thread."""

    def __init__(self, loop):
        import asyncio
        self.loop = loop
        self.q = asyncio.Queue()

    def put(self, item) -> None:
        try:
            self.loop.call_soon_threadsafe(self.q.put_nowait, item)
        except RuntimeError:   # the loop is gone (interpreter exit)
            pass


class P4RuntimeClient(EntityBuilders):
    """Synchronous P4Runtime client bound to one device (``tls``: :class:`ChannelTls`, or None
    for a plaintext channel). ``stream_aio``: its StreamChannel is a coroutine on the process's
    shared asyncio loop (:func:`stream_loop`) instead of two threads of its own; the events and
    the API are the same."""

    def __init__(self, address: str = "127.0.0.1:9559", device_id: int = 0,
                 election_id: int = 1, p4info: P4InfoHelper | None = None,
                 tls: ChannelTls | None = None, stream_aio: bool = False):
        self.tls = tls
        self.stream_aio = stream_aio
        self._aio_channel = None
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.p4info = p4info
        self.channel = None
        self.stub = None
        self._requests: queue.Queue = queue.Queue()
        self._responses: queue.Queue = queue.Queue()
        self._stream_thread = None
        self._journal: _Journal | None = None
        self.is_master = False
        self.stream_error: Exception | None = None
        self.on_event = None

    # connection and arbitration ------------------------------------------------------------
    # gRPC's default reconnect backoff grows to minutes; a controller must notice a restarted
    # switch within a second or two.
    CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100),
                       ("grpc.min_reconnect_backoff_ms", 100),
                       ("grpc.max_reconnect_backoff_ms", 500),
                       ("grpc.max_receive_message_length", 64 << 20))

    def connect(self, timeout: float = 10.0, require_master: bool = True,
                on_event=None) -> bool:
        """Open the channel and the stream, send the arbitration request, wait for the answer.

        Returns True when this client is the primary (master). With ``require_master`` (the
        default) a backup answer raises P4RuntimeError; otherwise the client stays connected as
        a backup and becomes primary when the server says so (``is_master``).
        ``on_event(client, kind, detail)`` is called from the stream thread on
        ``"mastership"`` changes (detail: bool) and ``"stream_error"`` (detail: the exception);
        the stream breaks when the switch goes away."""
        pb, _ = _pb()
        self.on_event = on_event
        self.is_master = False
        self.stream_error = None
        self._arb = queue.Queue()
        self._open_channel(timeout)
        if self.stream_aio:
            import asyncio
            loop = stream_loop()
            self._requests = _LoopQueue(loop)
            asyncio.run_coroutine_threadsafe(self._aio_stream(self._requests.q), loop)
        else:
            self._requests = queue.Queue()
            stream = self.stub.StreamChannel(iter(self._requests.get, None))
            self._stream = stream

            def pump():
                try:
                    for resp in stream:
                        self._on_stream(resp)
                except Exception as exc:  # noqa: BLE001 (stream closed: switch gone or close())
                    self._on_stream_error(exc)

            self._stream_thread = threading.Thread(target=pump, daemon=True, name="p4rt-stream")
            self._stream_thread.start()
        req = pb.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = self.election_id >> 64
        req.arbitration.election_id.low = self.election_id & ((1 << 64) - 1)
        self._requests.put(req)
        try:
            resp = self._arb.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise P4RuntimeError("no arbitration response") from None
        if isinstance(resp, Exception):
            self.close()
            raise P4RuntimeError(f"stream failed: {resp}")
        if resp.arbitration.status.code != 0 and require_master:
            self.close()
            raise P4RuntimeError(f"not master: {resp}")
        return self.is_master

    def _on_stream(self, resp) -> None:
        """One StreamMessageResponse (the stream's thread, or the shared loop's)."""
        if resp.HasField("arbitration"):
            master = resp.arbitration.status.code == 0
            changed = master != self.is_master
            self.is_master = master
            self._arb.put(resp)
            if changed and self.on_event is not None:
                self.on_event(self, "mastership", master)
        elif resp.HasField("other") and self.on_event is not None:
            self.on_event(self, "other", resp.other)
        elif resp.HasField("digest") and self.on_event is not None:
            self.on_event(self, "digest", resp.digest)   # a DigestList (ack_digest)
        else:
            self._responses.put(resp)

    def _on_stream_error(self, exc) -> None:
        self.stream_error = exc
        self.is_master = False
        self._arb.put(exc)
        if self.on_event is not None:
            self.on_event(self, "stream_error", exc)

    async def _aio_stream(self, q) -> None:
        """The StreamChannel as a coroutine on :func:`stream_loop` (``stream_aio``)."""
        import grpc
        pb, _ = _pb()
        try:
            if self.tls is not None:
                ch = self.tls.channel(self.address, list(self.CHANNEL_OPTIONS), aio=True)
            else:
                ch = grpc.aio.insecure_channel(self.address, options=list(self.CHANNEL_OPTIONS))
            self._aio_channel = ch
            method = ch.stream_stream("/p4.v1.P4Runtime/StreamChannel",
                                      request_serializer=pb.StreamMessageRequest.SerializeToString,
                                      response_deserializer=pb.StreamMessageResponse.FromString)

            async def requests():
                while True:
                    r = await q.get()
                    if r is None:
                        return
                    yield r
            async for resp in method(requests()):
                self._on_stream(resp)
        except BaseException as exc:  # noqa: BLE001 (stream closed: switch gone or close())
            self._on_stream_error(exc)
            if not isinstance(exc, Exception):
                raise

    def subscribe(self, entities) -> None:
        """Ask the switch to push ``entities`` (counter entries) on the stream whenever they
        change: a StreamMessageRequest whose ``other`` holds a ReadRequest of them. A switch
        that serves it answers with the entities' current values, then with the ones that
        changed, each as ``other`` = a ReadResponse (``on_event(client, "other", any)``);
        BMv2/PI ignores it (the caller keeps polling)."""
        pb, _ = _pb()
        req = pb.StreamMessageRequest()
        rr = pb.ReadRequest()
        rr.device_id = self.device_id
        rr.entities.extend(entities)
        req.other.Pack(rr)
        self._requests.put(req)

    def packet_out(self, payload: bytes) -> None:
        """A PacketOut on the stream (BMv2 started with ``--cpu-port P`` injects it into its
        ingress on port P; benchmarks use it as traffic)."""
        pb, _ = _pb()
        req = pb.StreamMessageRequest()
        req.packet.payload = payload
        self._requests.put(req)

    def ack_digest(self, digest_id: int, list_id: int) -> None:
        """Acknowledge a DigestList on the stream (DigestListAck): the server may then send
        the same data again (PI caches unacked samples for ``ack_timeout_ns``)."""
        pb, _ = _pb()
        req = pb.StreamMessageRequest()
        req.digest_ack.digest_id = digest_id
        req.digest_ack.list_id = list_id
        self._requests.put(req)

    def configure_digest(self, digest_id: int, max_timeout_ns: int = 0, max_list_size: int = 1,
                         ack_timeout_ns: int = 1_000_000_000) -> None:
        """Enable a digest: a DigestEntry INSERT (MODIFY when it is configured already, e.g.
        by this controller's previous run on the same pipeline). ``max_timeout_ns`` 0 with
        ``max_list_size`` 1: each digest is sent at once (PI's digest_mgr)."""
        pb, _ = _pb()

        def entity():
            e = pb.Entity()
            d = e.digest_entry
            d.digest_id = digest_id
            d.config.max_timeout_ns = max_timeout_ns
            d.config.max_list_size = max_list_size
            d.config.ack_timeout_ns = ack_timeout_ns
            return e
        try:
            self.write([("INSERT", entity())])
        except P4RuntimeError as exc:   # configured already (ALREADY_EXISTS): modify it
            try:
                self.write([("MODIFY", entity())])
            except P4RuntimeError:
                raise exc from None

    def arbitrate(self, election_id: int) -> None:
        """Send a new arbitration update on the open stream with ``election_id`` (a controller
        whose HA election changed its id); the answer arrives as a ``"mastership"`` event."""
        pb, _ = _pb()
        self.election_id = election_id
        req = pb.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = election_id >> 64
        req.arbitration.election_id.low = election_id & ((1 << 64) - 1)
        self._requests.put(req)

    def connect_reader(self, timeout: float = 10.0) -> None:
        """A channel for Read RPCs only: no stream, no arbitration, so it does not disturb the
        switch's primary controller (P4Runtime allows any client to read)."""
        self._open_channel(timeout)

    def _open_channel(self, timeout: float) -> None:
        import grpc
        _, pb_grpc = _pb()
        if self.tls is not None:
            self.channel = self.tls.channel(self.address, list(self.CHANNEL_OPTIONS))
        else:
            self.channel = grpc.insecure_channel(self.address, options=list(self.CHANNEL_OPTIONS))
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            self.channel.close()
            self.channel = None
            raise P4RuntimeError(f"{self.address}: not reachable within {timeout} s") from None
        self.stub = pb_grpc.P4RuntimeStub(self.channel)

    @property
    def connected(self) -> bool:
        return self.channel is not None and self.stream_error is None

    def close(self) -> None:
        self.on_event = None
        self._requests.put(None)
        if self._aio_channel is not None:
            import asyncio
            ch, self._aio_channel = self._aio_channel, None
            try:
                asyncio.run_coroutine_threadsafe(ch.close(), stream_loop())
            except RuntimeError:   # the loop is gone (interpreter exit)
                pass
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc):
        self.close()

    def _election(self, msg) -> None:
        msg.election_id.high = self.election_id >> 64
        msg.election_id.low = self.election_id & ((1 << 64) - 1)

    # pipeline -------------------------------------------------------------------------------
    def set_pipeline(self, p4info_path: str, bmv2_json_path: str, cookie: int | None = None) -> None:
        """Push the pipeline (VERIFY_AND_COMMIT: the switch's state is reset). ``cookie``
        (uint64) tags the config so that :meth:`pipeline_cookie` can tell later whether this
        exact pipeline is already installed."""
        pb, _ = _pb()
        helper, device_config = _pipeline_files(p4info_path, bmv2_json_path)
        self.p4info = helper
        req = pb.SetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        self._election(req)
        req.action = pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        req.config.p4info.CopyFrom(helper.p4info)
        req.config.p4_device_config = device_config
        if cookie is not None:
            req.config.cookie.cookie = cookie
        self._call(self.stub.SetForwardingPipelineConfig, req)

    def pipeline_cookie(self) -> int | None:
        """The cookie of the installed pipeline; None when there is no pipeline (or no cookie)."""
        pb, _ = _pb()
        req = pb.GetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.response_type = pb.GetForwardingPipelineConfigRequest.COOKIE_ONLY
        try:
            resp = self._call(self.stub.GetForwardingPipelineConfig, req)
        except P4RuntimeError:
            return None
        if not resp.config.HasField("cookie"):
            return None
        return resp.config.cookie.cookie

    def load_p4info(self, p4info_path: str) -> None:
        self.p4info = P4InfoHelper.from_file(p4info_path)

    # error handling -------------------------------------------------------------------------
    @staticmethod
    def _details(err) -> list[str]:
        try:
            from google.rpc import status_pb2
            from coflow.dataplane.pb import p4runtime_pb2
        except ImportError:  # pragma: no cover
            return []
        out = []
        for key, value in (err.trailing_metadata() or ()):
            if key != "grpc-status-details-bin":
                continue
            st = status_pb2.Status()
            st.ParseFromString(value)
            for i, detail in enumerate(st.details):
                e = p4runtime_pb2.Error()
                if detail.Unpack(e) and e.canonical_code != 0:
                    out.append(f"update {i}: code {e.canonical_code}: {e.message}")
        return out

    def _call(self, method, req):
        import grpc
        try:
            return method(req)
        except grpc.RpcError as err:
            raise P4RuntimeError(f"{method._method.decode() if hasattr(method, '_method') else 'rpc'}"
                                 f" failed: {err.code().name}: {err.details()}",
                                 self._details(err), code=err.code().name) from None

    # write / read ---------------------------------------------------------------------------
    def write(self, updates: Iterable[tuple[str, Any]]) -> None:
        """Write (type, entity) pairs atomically-ish in one request; type is INSERT/MODIFY/DELETE."""
        pb, _ = _pb()
        req = pb.WriteRequest()
        req.device_id = self.device_id
        self._election(req)
        ups = list(updates)
        inverse = []
        for typ, entity in ups:
            u = req.updates.add()
            u.type = getattr(pb.Update, typ)
            u.entity.CopyFrom(entity)
            if self._journal is not None:
                inverse.append(self._inverse(typ, entity))
        if not ups:
            return
        self._call(self.stub.Write, req)
        if self._journal is not None:
            self._journal.undo.extend(i for i in inverse if i is not None)

    def _inverse(self, typ: str, entity):
        kind = entity.WhichOneof("entity")
        if typ == "INSERT":
            return ("DELETE", entity)
        if typ == "MODIFY":
            if kind == "table_entry" and entity.table_entry.is_default_action:
                return ("MODIFY", self.read_default_entity(entity.table_entry.table_id))
            if kind == "meter_entry":
                prev = self.read_one(self._meter_key(entity.meter_entry))
                return ("MODIFY", prev) if prev is not None else None
            if kind == "table_entry":
                prev = self.read_one(self._table_key(entity.table_entry))
                return ("MODIFY", prev) if prev is not None else None
        if typ == "DELETE" and kind == "table_entry":
            prev = self.read_one(self._table_key(entity.table_entry))
            return ("INSERT", prev) if prev is not None else None
        return None  # counter writes and other deletes are not undone

    def _table_key(self, te):
        pb, _ = _pb()
        ent = pb.Entity()
        ent.table_entry.table_id = te.table_id
        ent.table_entry.match.extend(te.match)
        ent.table_entry.priority = te.priority
        return ent

    def _meter_key(self, me):
        pb, _ = _pb()
        ent = pb.Entity()
        ent.meter_entry.meter_id = me.meter_id
        ent.meter_entry.index.index = me.index.index
        return ent

    def insert(self, *entities) -> None:
        self.write(("INSERT", e) for e in entities)

    def modify(self, *entities) -> None:
        self.write(("MODIFY", e) for e in entities)

    def delete(self, *entities) -> None:
        self.write(("DELETE", e) for e in entities)

    def read(self, entity) -> list:
        return self.read_many([entity])

    def read_many(self, entities) -> list:
        """One ReadRequest with several (possibly wildcard) entities; every entity read back."""
        pb, _ = _pb()
        req = pb.ReadRequest()
        req.device_id = self.device_id
        req.entities.extend(entities)
        import grpc
        try:
            return [e for resp in self.stub.Read(req) for e in resp.entities]
        except grpc.RpcError as err:
            raise P4RuntimeError(f"Read failed: {err.code().name}: {err.details()}",
                                 code=err.code().name) from None

    # serialised requests in flight together (the controller's rounds; counter responses
    # are decoded by coflow.ctl.wire) -----------------------------------------------------
    def _raw(self, kind: str, method: str):
        key = (kind, method, id(self.channel))
        fn = self.__dict__.setdefault("_raw_methods", {}).get(key)
        if fn is None:
            make = self.channel.unary_stream if kind == "stream" else self.channel.unary_unary
            fn = self._raw_methods[key] = make(f"/p4.v1.P4Runtime/{method}")  # bytes in, bytes out
        return fn

    def read_raw(self, request: bytes, timeout: float | None = None) -> list[bytes]:
        """A serialised ReadRequest; returns the serialised ReadResponses."""
        import grpc
        try:
            return list(self._raw("stream", "Read")(request, timeout=timeout))
        except grpc.RpcError as err:
            raise P4RuntimeError(f"Read failed: {err.code().name}: {err.details()}",
                                 code=err.code().name) from None

    def write_request(self):
        """An empty WriteRequest with this client's device id and election id: add its
        ``updates`` and pass it serialised to :meth:`write_raw` / :meth:`write_raw_start`."""
        pb, _ = _pb()
        req = pb.WriteRequest()
        req.device_id = self.device_id
        self._election(req)
        return req

    def write_raw(self, request: bytes, timeout: float | None = None) -> None:
        import grpc
        try:
            self._raw("unary", "Write")(request, timeout=timeout)
        except grpc.RpcError as err:
            raise P4RuntimeError(f"Write failed: {err.code().name}: {err.details()}",
                                 self._details(err), code=err.code().name) from None

    def read_raw_start(self, request: bytes, timeout: float | None = None):
        """Start a serialised ReadRequest without waiting; returns a function that waits and
        returns the serialised ReadResponses (raising P4RuntimeError). Several reads to
        several switches started from one thread are in flight together."""
        import grpc
        call = self._raw("stream", "Read")(request, timeout=timeout)

        def wait() -> list[bytes]:
            try:
                return list(call)
            except grpc.RpcError as err:
                raise P4RuntimeError(f"Read failed: {err.code().name}: {err.details()}",
                                     code=err.code().name) from None
        return wait

    def write_raw_start(self, request: bytes, timeout: float | None = None):
        """Start a serialised Write without waiting; returns a function that waits for its
        answer (raising P4RuntimeError with the per-update details)."""
        import grpc
        fut = self._raw("unary", "Write").future(request, timeout=timeout)

        def wait() -> None:
            try:
                fut.result()
            except grpc.RpcError as err:
                raise P4RuntimeError(f"Write failed: {err.code().name}: {err.details()}",
                                     self._details(err), code=err.code().name) from None
        return wait

    def read_one(self, entity):
        got = self.read(entity)
        return got[0] if got else None

    # undo journal ---------------------------------------------------------------------------
    def start_journal(self) -> None:
        self._journal = _Journal()

    def undo(self) -> list[str]:
        """Undo every journaled write in reverse order; returns the errors (best effort)."""
        journal, self._journal = self._journal, None
        errors = []
        if journal is None:
            return errors
        for typ, entity in reversed(journal.undo):
            try:
                self.write([(typ, entity)])
            except P4RuntimeError as exc:
                errors.append(str(exc))
        return errors

    # high-level helpers (the entity builders: coflow.dataplane.p4rt_entities) -----------------
    def read_default_entity(self, table_id: int):
        pb, _ = _pb()
        ent = pb.Entity()
        ent.table_entry.table_id = table_id
        ent.table_entry.is_default_action = True
        got = self.read_one(ent)
        if got is None:
            raise P4RuntimeError(f"no default entry read for table {table_id}")
        return got

    def read_counter(self, counter: str, index: int) -> tuple[int, int]:
        """(bytes, packets) of one index of an indirect counter."""
        got = self.read_one(self.counter_entity(counter, index))
        if got is None:
            return 0, 0
        return got.counter_entry.data.byte_count, got.counter_entry.data.packet_count

    def write_counter(self, counter: str, index: int, byte_count: int = 0, packet_count: int = 0):
        ent = self.counter_entity(counter, index)
        ent.counter_entry.data.byte_count = byte_count
        ent.counter_entry.data.packet_count = packet_count
        self.modify(ent)

    def set_meter(self, meter: str, index: int, cir: int, cburst: int,
                  pir: int | None = None, pburst: int | None = None) -> None:
        self.modify(self.meter_entity(meter, index, cir, cburst,
                                      cir if pir is None else pir,
                                      cburst if pburst is None else pburst))

    def read_meter(self, meter: str, index: int):
        got = self.read_one(self.meter_entity(meter, index))
        return None if got is None else got.meter_entry.config

    def read_table(self, table: str) -> list:
        pb, _ = _pb()
        ent = pb.Entity()
        ent.table_entry.table_id = self._helper().table_id(table)
        return self.read(ent)

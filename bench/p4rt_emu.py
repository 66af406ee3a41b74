#!/usr/bin/env python3
"""Emulated edge switches for `make bench-scale`: a small P4Runtime server (grpcio's asyncio
server, the generated P4Runtime service stubs of coflow.dataplane.pb) that holds the state of
many devices in one process, as Aalo emulated its daemons.

What it serves is what the controller uses, with BMv2's (PI's) semantics:
- StreamChannel arbitration per device: the highest election id is primary (status OK), the
  others backup (ALREADY_EXISTS); every client is told when the primary changes; writes and
  pipeline pushes of a non-primary client answer PERMISSION_DENIED; reads are open to anyone.
- SetForwardingPipelineConfig (VERIFY_AND_COMMIT / COMMIT): the P4Info, the cookie, and the
  default actions of the BMv2 JSON; every table, profile, meter and counter is reset.
  GetForwardingPipelineConfig (COOKIE_ONLY or all).
- Write, CONTINUE_ON_ERROR as PI: the updates are applied one after the other, each error is
  reported in the status details (google.rpc.Status of p4.v1.Error, one per update) and the
  call fails with UNKNOWN when any did. Table entries (exact / LPM / ternary / range / optional
  matches, direct actions or action-profile members / groups; INSERT of an existing key
  ALREADY_EXISTS, MODIFY / DELETE of a missing one NOT_FOUND, table size RESOURCE_EXHAUSTED),
  default actions (MODIFY), action-profile members and groups (a group's members and an entry's
  member / group must exist: NOT_FOUND; a member or group still referenced cannot be deleted:
  FAILED_PRECONDITION), indirect meters (MODIFY with a config sets it, without one resets it)
  and indirect counters (MODIFY sets the count).
- Read: wildcard and exact reads of all of the above (a table's entries, its default action,
  a counter's or meter's every index or one, a profile's members / groups).
- Pushed counters (an extension BMv2 does not have; PI ignores the message): a client that
  arbitrated may send a StreamMessageRequest whose ``other`` holds a ReadRequest of counter
  entries; the device answers with their values, then, at most every ``push_period`` (2 ms),
  with the entries that changed, each time one ReadResponse in a StreamMessageResponse's
  ``other``.

- Report digests (issue 29, p4src report.p4): DigestEntry writes with PI's semantics (INSERT
  of a configured digest ALREADY_EXISTS, MODIFY / DELETE of an unconfigured one NOT_FOUND);
  once configured, a write of ``coflow_bytes[slot]`` (the benchmark's stand-in for traffic,
  below) that moves the count across a multiple of the slot's ``report_step`` step sends a
  DigestList {slot, the slot's CoflowId from ``coflow_slot``, the new count} to the primary's
  stream, list ids 1, 2, ... per digest as PI numbers them; acks are accepted and ignored.

No data plane: counters change only when written. The answers are protobuf messages of the
generated stubs; read answers are assembled from each entity's cached serialised
``ReadResponse`` (a concatenation of serialised messages is their merge, so the joined bytes
parse as one response with every entity), so an unchanged counter costs a bytes join.

Many devices share one process and one asyncio event loop (one listening port per device, the
request's device id picks the device); ``serve_many`` starts several such processes.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "controller"))

import grpc  # noqa: E402
from google.protobuf import any_pb2  # noqa: E402
from google.rpc import code_pb2, status_pb2  # noqa: E402

from coflow.dataplane.pb import p4runtime_pb2 as pb  # noqa: E402
from coflow.dataplane.pb import p4runtime_pb2_grpc as pb_grpc  # noqa: E402

from p4rt_device import Device, P4Error  # noqa: E402 (one switch's state: bench/p4rt_device.py)


def _abort_details(per_update: list) -> tuple:
    """grpc-status-details-bin trailing metadata as PI sends it: a google.rpc.Status whose
    details are one p4.v1.Error per update."""
    st = status_pb2.Status(code=code_pb2.UNKNOWN, message="Write failure.")
    for code, msg in per_update:
        err = pb.Error(canonical_code=code, message=msg)
        a = any_pb2.Any()
        a.Pack(err)
        st.details.append(a)
    return (("grpc-status-details-bin", st.SerializeToString()),)


_CODE = {v.value[0]: v for v in grpc.StatusCode}


class Emulator(pb_grpc.P4RuntimeServicer):
    """The P4Runtime service over many :class:`Device` s (the request's device id picks one)."""

    def __init__(self, device_ids):
        self.devices = {d: Device(d) for d in device_ids}
        self.write_log: list | None = None  # tests: (device id, serialised WriteRequest) in order
        self.write_delay = 0.0               # tests: seconds each Write takes
        self.in_flight: dict = {}            # device id -> Writes being handled
        self.max_in_flight: dict = {}        # device id -> the most at once
        # pushed counters: a subscribed device whose counters changed pushes the entries
        # that did at most this often (what a switch agent would do every few ms)
        self.push_period = 0.002
        self.serve_push = True   # False: ignore subscriptions, as BMv2 does
        self._due: set = set()
        self._push_task = None
        for d in self.devices.values():
            d.on_change = self._mark

    def _mark(self, dev: Device) -> None:
        self._due.add(dev)
        if self._push_task is None or self._push_task.done():
            self._push_task = asyncio.ensure_future(self._push_later())

    async def _push_later(self) -> None:
        await asyncio.sleep(self.push_period)
        due, self._due = self._due, set()
        for dev in due:
            for sub in list(dev.subs):
                self._push(dev, sub)

    @staticmethod
    def _push(dev: Device, sub: list) -> None:
        """Send a subscription the entries that changed since its last push (all, the first
        time) as one ReadResponse in a StreamMessageResponse's ``other``."""
        q, req, last = sub
        try:
            chunks = dev.read_chunks(req)
        except P4Error:
            return
        if last is not None and len(last) == len(chunks):
            changed = [c for c, o in zip(chunks, last) if c != o]
            if not changed:
                return
        else:
            changed = chunks
        sub[2] = chunks
        r = pb.StreamMessageResponse()
        r.other.type_url = "type.googleapis.com/p4.v1.ReadResponse"
        r.other.value = b"".join(changed)
        q.put_nowait(r)

    def _dev(self, device_id: int) -> Device:
        d = self.devices.get(device_id)
        if d is None:
            raise P4Error(code_pb2.NOT_FOUND, f"no device {device_id}")
        return d

    @staticmethod
    def _eid(msg) -> int:
        return (msg.election_id.high << 64) | msg.election_id.low

    def _check_primary(self, dev: Device, msg) -> None:
        if dev.primary is None or self._eid(msg) != dev.primary:
            raise P4Error(code_pb2.PERMISSION_DENIED, "not the primary controller")

    async def _abort(self, context, e: P4Error):
        await context.abort(_CODE[e.code], str(e))

    async def Write(self, request, context):
        d = request.device_id
        self.in_flight[d] = self.in_flight.get(d, 0) + 1
        self.max_in_flight[d] = max(self.max_in_flight.get(d, 0), self.in_flight[d])
        try:
            if self.write_delay:
                await asyncio.sleep(self.write_delay)
            return await self._write(request, context)
        finally:
            self.in_flight[d] -= 1

    async def _write(self, request, context):
        if self.write_log is not None:
            self.write_log.append((request.device_id, request.SerializeToString(deterministic=True)))
        try:
            dev = self._dev(request.device_id)
            self._check_primary(dev, request)
            if request.atomicity != pb.WriteRequest.CONTINUE_ON_ERROR:
                raise P4Error(code_pb2.UNIMPLEMENTED, "atomic write modes are not supported")
            res = dev.write(request)
        except P4Error as e:
            await self._abort(context, e)
        if any(c != code_pb2.OK for c, _ in res):
            context.set_trailing_metadata(_abort_details(res))
            await context.abort(grpc.StatusCode.UNKNOWN, "Write failure.")
        return pb.WriteResponse()

    async def Read(self, request, context):
        try:
            raw = self._dev(request.device_id).read(request)
        except P4Error as e:
            await self._abort(context, e)
        yield pb.ReadResponse.FromString(raw)

    async def SetForwardingPipelineConfig(self, request, context):
        try:
            dev = self._dev(request.device_id)
            self._check_primary(dev, request)
            if request.action not in (pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                                      pb.SetForwardingPipelineConfigRequest.COMMIT):
                raise P4Error(code_pb2.UNIMPLEMENTED, "only VERIFY_AND_COMMIT and COMMIT")
            dev.set_pipeline(request.config)
        except P4Error as e:
            await self._abort(context, e)
        return pb.SetForwardingPipelineConfigResponse()

    async def GetForwardingPipelineConfig(self, request, context):
        try:
            dev = self._dev(request.device_id)
            if dev.p4info is None:
                raise P4Error(code_pb2.FAILED_PRECONDITION, "no forwarding pipeline config")
        except P4Error as e:
            await self._abort(context, e)
        resp = pb.GetForwardingPipelineConfigResponse()
        if dev.cookie is not None:
            resp.config.cookie.cookie = dev.cookie
        if request.response_type == pb.GetForwardingPipelineConfigRequest.ALL:
            resp.config.p4info.CopyFrom(dev.p4info)
            resp.config.p4_device_config = dev.device_config
        elif request.response_type == pb.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE:
            resp.config.p4info.CopyFrom(dev.p4info)
        return resp

    async def Capabilities(self, request, context):
        return pb.CapabilitiesResponse(p4runtime_api_version="1.3.0")

    def _announce(self, dev: Device) -> None:
        """Every client of ``dev`` learns who is primary (PI does the same on a change)."""
        for eid, q in dev.streams.items():
            r = pb.StreamMessageResponse()
            a = r.arbitration
            a.device_id = dev.device_id
            a.election_id.high, a.election_id.low = dev.primary >> 64, dev.primary & ((1 << 64) - 1)
            a.status.code = code_pb2.OK if eid == dev.primary else code_pb2.ALREADY_EXISTS
            q.put_nowait(r)

    def _subscribe(self, other, q, mine) -> None:
        """A StreamMessageRequest's ``other`` holding a ReadRequest of counter entries: push
        them now and whenever they change (an extension; PI ignores such messages)."""
        if not self.serve_push or not other.type_url.endswith("/p4.v1.ReadRequest"):
            return
        req = pb.ReadRequest.FromString(other.value)
        dev = self.devices.get(req.device_id)
        if dev is None or not any(d is dev for d, _ in mine):
            return   # only a client that arbitrated for the device
        if any(e.WhichOneof("entity") != "counter_entry" for e in req.entities):
            return
        sub = [q, req, None]
        dev.subs.append(sub)
        self._push(dev, sub)

    async def StreamChannel(self, request_iterator, context):
        q: asyncio.Queue = asyncio.Queue()
        mine: list = []  # (device, election id) this stream arbitrated for

        async def reader():
            try:
                async for req in request_iterator:
                    if req.HasField("other"):
                        self._subscribe(req.other, q, mine)
                        continue
                    if not req.HasField("arbitration"):
                        continue  # packet-out, digest acks: no data plane here
                    arb = req.arbitration
                    dev = self.devices.get(arb.device_id)
                    if dev is None:
                        q.put_nowait(("abort", f"no device {arb.device_id}"))
                        return
                    eid = self._eid(arb)
                    if (dev, eid) not in mine:
                        if eid in dev.streams:
                            q.put_nowait(("abort", f"election id {eid} already in use"))
                            return
                        dev.streams[eid] = q
                        mine.append((dev, eid))
                    dev.primary = max(dev.streams)
                    self._announce(dev)
            finally:
                q.put_nowait(None)

        task = asyncio.ensure_future(reader())
        try:
            while True:
                msg = await q.get()
                if msg is None:
                    break
                if isinstance(msg, tuple):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, msg[1])
                yield msg
        finally:
            task.cancel()
            for dev in self.devices.values():
                if dev.subs:
                    dev.subs = [sub for sub in dev.subs if sub[0] is not q]
            for dev, eid in mine:
                dev.streams.pop(eid, None)
                old = dev.primary
                dev.primary = max(dev.streams) if dev.streams else None
                if dev.primary is not None and dev.primary != old:
                    self._announce(dev)


async def serve(ports: dict, ready=None, stop: asyncio.Event | None = None) -> None:
    """Serve the devices ``ports`` = {device id: port} (port 0: any free one; ``ready`` gets
    {device id: port} once listening) until ``stop`` is set."""
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 << 20),
                                      ("grpc.max_send_message_length", 64 << 20)])
    emu = Emulator(ports)
    pb_grpc.add_P4RuntimeServicer_to_server(emu, server)
    bound = {d: server.add_insecure_port(f"127.0.0.1:{p}") for d, p in ports.items()}
    await server.start()
    if ready is not None:
        ready(bound, emu)
    stop = stop or asyncio.Event()
    await stop.wait()
    await server.stop(0.5)


class EmulatorThread:
    """Emulated devices served from a thread of this process (tests): ``addresses`` (device id
    -> host:port) and ``emu`` (the :class:`Emulator`, to inspect the devices' state)."""

    def __init__(self, device_ids):
        import threading
        self.device_ids = list(device_ids)
        self.addresses: dict = {}
        self.emu: Emulator | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="p4rt-emu")
        self._loop = None
        self._stop = None

    def _run(self) -> None:
        async def main():
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(bound, emu):
                self.addresses = {d: f"127.0.0.1:{p}" for d, p in bound.items()}
                self.emu = emu
                self._ready.set()
            await serve({d: 0 for d in self.device_ids}, ready, self._stop)
        asyncio.run(main())

    def start(self) -> "EmulatorThread":
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("emulated switches did not start")
        return self

    def call(self, fn):
        """Run ``fn()`` on the server's loop (the devices' state is the loop's)."""
        async def wrap():
            return fn()
        return asyncio.run_coroutine_threadsafe(wrap(), self._loop).result(30)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


class EmulatedSwitches:
    """``len(device_ids)`` emulated switches in ``processes`` server processes (one asyncio
    event loop each), devices dealt round-robin; ``addresses``: device id -> host:port."""

    def __init__(self, device_ids, processes: int = 1, nice: int = 0):
        self.device_ids = list(device_ids)
        self.processes = max(1, min(processes, len(self.device_ids)))
        self.nice = nice
        self.procs: list = []
        self.addresses: dict = {}

    def start(self, timeout: float = 60.0) -> "EmulatedSwitches":
        for k in range(self.processes):
            ids = self.device_ids[k::self.processes]
            cmd = [sys.executable, os.path.abspath(__file__), "--devices", ",".join(map(str, ids))]
            if self.nice:
                cmd = ["nice", "-n", str(self.nice)] + cmd
            self.procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
        deadline = time.monotonic() + timeout
        try:
            for p in self.procs:
                line = p.stdout.readline()
                if not line.startswith("ready "):
                    raise RuntimeError(f"emulated switches did not start (exit {p.poll()})")
                for d, port in json.loads(line[6:]).items():
                    self.addresses[int(d)] = f"127.0.0.1:{port}"
                if time.monotonic() > deadline:
                    raise RuntimeError("emulated switches: start timed out")
        except BaseException:
            self.stop()
            raise
        return self

    def pids(self) -> list:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="emulated P4Runtime switches (bench-scale)")
    ap.add_argument("--devices", required=True, help="comma-separated device ids")
    ap.add_argument("--port-base", type=int, default=0, help="device i on port base+i (0: free ports)")
    args = ap.parse_args(argv)
    ids = [int(x) for x in args.devices.split(",") if x]
    ports = {d: (args.port_base + i if args.port_base else 0) for i, d in enumerate(ids)}

    async def run():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)

        def ready(bound, _emu):
            sys.stdout.write("ready " + json.dumps(bound) + "\n")
            sys.stdout.flush()
        await serve(ports, ready, stop)
    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The telemetry's per-slot counter reads on a Tofino-sized program, before and after reading
only the slots in use: bytes on the wire and time per edge poll.

A fake P4Runtime server on 127.0.0.1 answers ``Read`` as PI and Stratum do (a wildcard read:
one CounterEntry per index; an index read: that entry), for the two per-slot counters
(``slot_collisions``, ``slot_takeovers``: 65,536 entries each on TNA). The client is the
controller's own: :class:`coflow.ctl.observe.Telemetry` with ``in_use`` None (every index, the
behaviour before) or the slots of ``--coflows`` coflows (assigned and hashed) and the sweep's
window. Usage: ``python bench/telemetry_reads.py [--coflows 200] [--polls 20]``.
"""
from __future__ import annotations

import argparse
import random
import time
from concurrent import futures

import grpc

from coflow.ctl import model as M
from coflow.ctl.codec import Codec
from coflow.ctl.observe import Telemetry
from coflow.dataplane.p4rt import P4RuntimeClient  # noqa: F401 - sets the protobuf implementation
from coflow.dataplane.pb import p4runtime_pb2 as pb

SLOTS = 1 << 16
IDS = {M.C_DROP_REASONS: 11, M.C_COLLISIONS: 12, M.C_TAKEOVERS: 15, M.C_RED_DROPS: 13,
       M.C_QUEUE_DROP: 14}


class _Codec:
    counter_id = IDS
    counter_read_request = Codec.counter_read_request


def serve(stats: dict):
    def read(raw, ctx):
        req = pb.ReadRequest.FromString(raw)
        stats["req_bytes"] += len(raw)
        resp = pb.ReadResponse()
        for ent in req.entities:
            ce = ent.counter_entry
            idx = [ce.index.index] if ce.HasField("index") else range(SLOTS)
            for i in idx:
                e = resp.entities.add().counter_entry
                e.counter_id, e.index.index, e.data.packet_count = ce.counter_id, i, i % 3
        out = resp.SerializeToString()
        stats["resp_bytes"] += len(out)
        yield out
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("p4.v1.P4Runtime", {
        "Read": grpc.unary_stream_rpc_method_handler(read, lambda b: b, lambda b: b)}),))
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    return srv, port


class _Client:
    connected = True

    def __init__(self, port):
        self.ch = grpc.insecure_channel(f"127.0.0.1:{port}",
                                        options=[("grpc.max_receive_message_length", 1 << 30)])
        self.call = self.ch.unary_stream("/p4.v1.P4Runtime/Read", request_serializer=lambda b: b,
                                         response_deserializer=lambda b: b)

    def read_raw_start(self, request, timeout=None):
        it = self.call(request, timeout=30)
        return lambda: list(it)


class _Agent:
    MASTER, BACKUP = "master", "backup"

    def __init__(self, client):
        self.name, self.client, self.state, self.device_id = "e0", client, "master", 1


def run(in_use, polls: int, sweep: int) -> dict:
    stats = {"req_bytes": 0, "resp_bytes": 0}
    srv, port = serve(stats)
    try:
        t = Telemetry(_Codec(), {"e0": ()}, collision_switches=("e0",), coflow_slots=SLOTS,
                      in_use=in_use, sweep=sweep)
        # only the two per-slot counters (the others are a few hundred entries either way)
        t.counters_of = lambda name, f=t.counters_of: {k: v for k, v in f(name).items()
                                                        if k in Telemetry.SLOT_COUNTERS}
        agents = {"e0": _Agent(_Client(port))}
        t.poll(agents)   # warm up the channel
        stats.update(req_bytes=0, resp_bytes=0)
        t0 = time.perf_counter()
        for _ in range(polls):
            t.poll(agents)
        dt = (time.perf_counter() - t0) / polls
    finally:
        srv.stop(0)
    return {"ms_per_poll": dt * 1e3, "request_bytes": stats["req_bytes"] / polls,
            "response_bytes": stats["resp_bytes"] / polls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coflows", type=int, default=200)
    ap.add_argument("--polls", type=int, default=10)
    ap.add_argument("--sweep", type=int, default=Telemetry.SWEEP)
    a = ap.parse_args()
    rng = random.Random(1)
    used = rng.sample(range(SLOTS // 2), a.coflows) + rng.sample(range(SLOTS // 2, SLOTS), a.coflows)
    for name, in_use in (("every index (before)", None), ("in use + sweep (after)", lambda: used)):
        r = run(in_use, a.polls, a.sweep)
        print(f"{name}: {r['ms_per_poll']:.1f} ms per edge poll, request {r['request_bytes']:.0f} B, "
              f"response {r['response_bytes']:.0f} B")


if __name__ == "__main__":
    main()

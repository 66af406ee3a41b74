"""Data-plane telemetry (coflow.ctl.observe.Telemetry): drop reasons by name, slot collisions,
RED drops and per-queue drops, read over P4Runtime and exported as Prometheus counters and in
the controller's status. Pure: the readings are fed in directly or through fake switches that
answer with protobuf-serialised ReadResponses."""
import os
import re

import pytest

from coflow.ctl import model as M
from coflow.ctl import wire
from coflow.ctl.codec import Codec
from coflow.ctl.observe import DROP_NAMES, Metrics, Telemetry

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_drop_names_are_define_p4s_drop_reasons():
    """One table of names, equal to define.p4's enum DropReason_t (NONE is no drop)."""
    with open(os.path.join(REPO, "p4src", "include", "define.p4")) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    body = re.search(r"enum\s+bit<8>\s+DropReason_t\s*\{([^}]*)\}", text).group(1)
    p4 = {int(v): n for n, v in re.findall(r"(\w+)\s*=\s*(\d+)", body)}
    assert p4.pop(0) == "NONE"
    assert DROP_NAMES == p4


class FakeCodec:
    counter_id = {M.C_DROP_REASONS: 11, M.C_COLLISIONS: 12, M.C_RED_DROPS: 13,
                  M.C_QUEUE_DROP: 14}

    counter_read_request = Codec.counter_read_request


def telemetry(**kw):
    return Telemetry(FakeCodec(), {"s0": (1, 2), "s1": (3,)}, meter_switches=("s0",),
                     collision_switches=("s0",), **kw)


def reading():
    return {M.C_DROP_REASONS: {1: 4, 5: 2, 10: 7},
            M.C_COLLISIONS: {600: 3, 700: 1, 1024: 99},      # 1024: the no-collision index
            M.C_RED_DROPS: {8: 5, 9: 2, 40: 0},
            M.C_QUEUE_DROP: {1 * 8 + 7: 6, 2 * 8 + 0: 1}}


def test_status_names_every_reason_and_leaves_out_the_discard_index():
    t = telemetry()
    t.record("s0", reading(), at=12.5)
    st = t.status()
    s0 = st["s0"]
    assert s0["read_at"] == 12.5
    assert s0["drops"] == {"NOT_IPV4": 4, "BAD_VERSION": 0, "BAD_IHL": 0, "TRUNCATED": 0,
                           "OPT_LEN": 2, "OPT_OVERFLOW": 0, "TOTAL_LEN": 0, "TTL": 0,
                           "NO_ROUTE": 0, "METER_RED": 7, "PARSER_OTHER": 0}
    assert s0["drops_total"] == 13
    assert s0["slot_collisions"] == 4 and s0["collision_slots"] == {600: 3, 700: 1}
    assert s0["meter_red_drops"] == 7 and s0["red_drops_by_meter"] == {8: 5, 9: 2}
    assert s0["queue_drops"] == {"1/7": 6, "2/0": 1}           # nonzero queues only
    assert list(st) == ["s0"]                                   # s1 never read
    assert t.red_drops_of_slot(1, 8) == 7 and t.red_drops_of_slot(5, 8) == 0


def test_prometheus_exposition():
    m = Metrics()
    t = telemetry()
    m.registry.register(t)
    t.record("s0", reading())
    t.record("s1", {M.C_DROP_REASONS: {8: 1}})
    text = m.exposition().decode()
    lines = set(text.splitlines())
    assert 'coflow_dp_drops_total{reason="OPT_LEN",switch="s0"} 2.0' in lines
    assert 'coflow_dp_drops_total{reason="NOT_IPV4",switch="s0"} 4.0' in lines
    assert 'coflow_dp_drops_total{reason="TTL",switch="s1"} 1.0' in lines
    assert 'coflow_dp_drops_total{reason="TTL",switch="s0"} 0.0' in lines
    assert 'coflow_dp_slot_collisions_total{switch="s0"} 4.0' in lines
    assert 'coflow_dp_meter_red_drops_total{switch="s0"} 7.0' in lines
    assert 'coflow_dp_queue_drops_total{port="1",priority="7",switch="s0"} 6.0' in lines
    assert 'coflow_dp_queue_drops_total{port="2",priority="0",switch="s0"} 1.0' in lines
    assert 'coflow_dp_queue_drops_total{port="3",priority="5",switch="s1"} 0.0' in lines
    assert "# TYPE coflow_dp_drops_total counter" in lines
    # every reason of every switch read, every queue of the switch's ports
    assert sum(1 for ln in lines if ln.startswith("coflow_dp_drops_total{")) == 2 * len(DROP_NAMES)
    assert sum(1 for ln in lines if ln.startswith("coflow_dp_queue_drops_total{")) == 3 * 8
    assert not any("NONE" in ln for ln in lines)


def test_packet_counts_parsed_like_protobuf():
    from coflow.dataplane.pb import p4runtime_pb2 as pb
    resp = pb.ReadResponse()
    want = {}
    for i, p in [(0, 0), (3, 1), (1024, 2 ** 40 + 1), (9, 2 ** 63 - 1)]:
        e = resp.entities.add()
        e.counter_entry.counter_id = 5
        e.counter_entry.index.index = i
        e.counter_entry.data.byte_count = 12345
        e.counter_entry.data.packet_count = p
        want[i] = p
    raw = resp.SerializeToString()
    assert wire.parse_counter_packets_fast(raw) == want
    assert wire.parse_counters_pb(raw) == {i: (12345, p) for i, p in want.items()}
    assert wire.parse_counter_bytes_fast(raw) == {i: 12345 for i in want}


class FakeClient:
    """Answers every counter read from a table of packet counts; records the requests."""

    connected = True

    def __init__(self, counts, fail=False):
        self.counts, self.fail, self.requests = counts, fail, []

    def read_raw_start(self, request, timeout=None):
        from coflow.dataplane.pb import p4runtime_pb2 as pb
        req = pb.ReadRequest.FromString(request)
        self.requests.append(req)

        def wait():
            if self.fail:
                raise RuntimeError("switch went away")
            resp = pb.ReadResponse()
            for ent in req.entities:
                cid = ent.counter_entry.counter_id
                name = {v: k for k, v in FakeCodec.counter_id.items()}[cid]
                table = self.counts.get(name, {})
                idx = ([ent.counter_entry.index.index] if ent.counter_entry.HasField("index")
                       else range(1025))
                for i in idx:
                    e = resp.entities.add()
                    e.counter_entry.counter_id = cid
                    e.counter_entry.index.index = i
                    e.counter_entry.data.packet_count = table.get(i, 0)
            return [resp.SerializeToString()]
        return wait


class FakeAgent:
    MASTER, BACKUP, DOWN = "master", "backup", "down"

    def __init__(self, name, client, state="master", device_id=3):
        self.name, self.client, self.state, self.device_id = name, client, state, device_id


def test_poll_reads_each_switch_and_counts_errors():
    errors = []
    t = telemetry(on_error=errors.append)
    c0 = FakeClient(reading())
    c1 = FakeClient({M.C_QUEUE_DROP: {3 * 8 + 2: 9}})
    agents = {"s0": FakeAgent("s0", c0), "s1": FakeAgent("s1", c1, state="backup"),
              "s2": FakeAgent("s2", FakeClient({}), state="down")}
    assert t.poll(agents) == 2
    st = t.status()
    assert st["s0"]["drops"]["OPT_LEN"] == 2 and st["s0"]["slot_collisions"] == 4
    assert st["s0"]["meter_red_drops"] == 7 and st["s0"]["queue_drops"] == {"1/7": 6, "2/0": 1}
    assert st["s1"]["queue_drops"] == {"3/2": 9} and st["s1"]["meter_red_drops"] == 0
    assert st["s1"]["slot_collisions"] == 0
    assert "s2" not in st and errors == []
    # what was asked: the named reasons, every collision slot, the meters only where they run,
    # and the queues of the switch's own ports
    asked = {}
    for req in c0.requests:
        assert req.device_id == 3
        ids = {e.counter_entry.counter_id for e in req.entities}
        assert len(ids) == 1
        asked[ids.pop()] = [e.counter_entry.index.index if e.counter_entry.HasField("index")
                            else None for e in req.entities]
    ids = FakeCodec.counter_id
    assert asked[ids[M.C_DROP_REASONS]] == sorted(DROP_NAMES)
    assert asked[ids[M.C_COLLISIONS]] == [None] and asked[ids[M.C_RED_DROPS]] == [None]
    assert asked[ids[M.C_QUEUE_DROP]] == [p * 8 + q for p in (1, 2) for q in range(8)]
    assert {e.counter_entry.counter_id for r in c1.requests for e in r.entities} == \
        {ids[M.C_DROP_REASONS], ids[M.C_QUEUE_DROP]}       # no meters, no collisions on s1
    # a switch that fails keeps its last snapshot and counts an error
    c0.fail = True
    assert t.poll(agents) == 1
    assert errors == ["s0"] and t.status()["s0"]["drops"]["OPT_LEN"] == 2


@pytest.mark.parametrize("interval", [0.0, 0.02])
def test_background_thread_starts_only_with_a_period(interval):
    import time
    t = telemetry(interval_s=interval)
    agents = {"s0": FakeAgent("s0", FakeClient(reading()))}
    t.start(agents)
    try:
        time.sleep(0.3)
    finally:
        t.stop()
    assert (t.polls > 0) == (interval > 0)


class TakeoverCodec(FakeCodec):
    counter_id = {**FakeCodec.counter_id, M.C_TAKEOVERS: 15}


def test_slot_takeovers_read_where_the_program_has_them(monkeypatch):
    """slot_takeovers (coflow_counter.p4: packets that took a slot over from an idle or
    replaced owner) is read at the collision switches when the P4Info has it, shown in the
    status and exported; the discard index (1024) is left out. A P4Info without it (a program
    that predates it) is not asked for it, and the switch is still read."""
    counts = {**reading(), M.C_TAKEOVERS: {520: 2, 900: 1, 1024: 50}}
    t = Telemetry(TakeoverCodec(), {"s0": (1,)}, collision_switches=("s0",))
    monkeypatch.setattr(FakeCodec, "counter_id", TakeoverCodec.counter_id)  # FakeClient's ids
    c = FakeClient(counts)
    assert t.poll({"s0": FakeAgent("s0", c)}) == 1
    asked = {e.counter_entry.counter_id for r in c.requests for e in r.entities}
    assert TakeoverCodec.counter_id[M.C_TAKEOVERS] in asked
    monkeypatch.undo()
    assert t.status()["s0"]["slot_takeovers"] == 3
    m = Metrics()
    m.registry.register(t)
    assert 'coflow_dp_slot_takeovers_total{switch="s0"} 3.0' in m.exposition().decode().splitlines()
    old = telemetry()
    assert M.C_TAKEOVERS not in old.counters_of("s0") and M.C_COLLISIONS in old.counters_of("s0")
    old.record("s0", reading())
    assert old.status()["s0"]["slot_takeovers"] == 0


class SlotsClient(FakeClient):
    """A Tofino-sized switch: the per-slot counters have ``size`` indices; a wildcard read
    answers every one, as PI and Stratum do."""

    def __init__(self, counts, size):
        super().__init__(counts)
        self.size = size
        self.entries = 0

    def read_raw_start(self, request, timeout=None):
        from coflow.dataplane.pb import p4runtime_pb2 as pb
        req = pb.ReadRequest.FromString(request)
        self.requests.append(req)

        def wait():
            resp = pb.ReadResponse()
            for ent in req.entities:
                cid = ent.counter_entry.counter_id
                name = {v: k for k, v in FakeCodec.counter_id.items()}[cid]
                table = self.counts.get(name, {})
                idx = ([ent.counter_entry.index.index] if ent.counter_entry.HasField("index")
                       else range(self.size))
                for i in idx:
                    e = resp.entities.add()
                    e.counter_entry.counter_id = cid
                    e.counter_entry.index.index = i
                    e.counter_entry.data.packet_count = table.get(i, 0)
            self.entries += len(resp.entities)
            return [resp.SerializeToString()]
        return wait


def test_slot_counters_read_the_slots_in_use_and_sweep_the_rest():
    """Tofino's 65,536 slots: every poll reads the slots in use and a window of the rest; a
    collision anywhere is counted within coflow_slots / sweep polls, and a restarted switch's
    lower counts replace what was known."""
    n = 1 << 16
    in_use = [5, 50_000]
    t = Telemetry(FakeCodec(), {"s0": (1,)}, collision_switches=("s0",), coflow_slots=n,
                  in_use=lambda: in_use, sweep=4096)
    c = SlotsClient({M.C_COLLISIONS: {50_000: 3, 40_000: 2}}, n)
    agents = {"s0": FakeAgent("s0", c)}
    t.poll(agents)
    coll = [r for r in c.requests if r.entities[0].counter_entry.counter_id == 12]
    assert len(coll[0].entities) == 4096 + 1           # the window 0..4095 and slot 50,000
    assert t.status()["s0"]["slot_collisions"] == 3    # the slot in use at once
    for _ in range(n // 4096 - 1):
        t.poll(agents)
    assert t.status()["s0"]["slot_collisions"] == 5    # the sweep reached slot 40,000
    assert c.entries < 17 * (4096 + 2) + 16 * 8 + 16 * 64   # never a wildcard of 65,536
    c.counts = {M.C_COLLISIONS: {50_000: 1}}            # restarted: counting from 0 again
    t.poll(agents)
    assert t.status()["s0"]["slot_collisions"] == 1
    small = Telemetry(FakeCodec(), {"s0": (1,)}, collision_switches=("s0",), coflow_slots=1024,
                      in_use=lambda: in_use)
    assert small.counters_of("s0")[M.C_COLLISIONS] is None   # BMv2's 1,024: all, as before

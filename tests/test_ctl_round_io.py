"""The round's I/O path against emulated switches (bench/p4rt_emu.py, in this process): the
concurrent round (every switch's Write in flight together, on grpc.aio or as futures) sends
each switch exactly the Writes, in the same order, that the sequential one does, on random
histories of registrations, progress, departures and counter changes (hypothesis, like
tests/test_ctl_incremental.py); a switch never has two Writes in flight, and its cache is
updated only after its Write succeeded; an answer identical to the last one is not decoded
and changes nothing."""
import os
import random
import sys
import threading
import time
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coflow import topology as T
from coflow.ctl import daemon as D
from coflow.ctl import model as M

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
P4INFO = os.path.join(ROOT, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(ROOT, "build", "coflow.json")

pytestmark = pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                                reason="build/coflow.p4info.txt missing: run `make p4` "
                                       "(the Controller needs the P4Info for its codec)")


class Clock:
    """The daemon's clock, the same for both controllers (rates depend on time)."""

    def __init__(self):
        self.now = 1000.0

    def install(self, monkeypatch):
        fake = types.SimpleNamespace(time=lambda: self.now, perf_counter=time.perf_counter,
                                     process_time=time.process_time, monotonic=time.monotonic,
                                     sleep=time.sleep)
        monkeypatch.setattr(D, "time", fake)


def fabric(topo):
    from p4rt_emu import EmulatorThread
    e = EmulatorThread([s.device_id for s in topo.switches]).start()
    e.emu.write_log = []
    return e


def controller(topo, mode, emu, reg, how):
    """(push=0: what an edge pushes arrives when it does, so two fabrics' rounds could see
    different counts; polled reads are deterministic)"""
    c = D.Controller(topo, mode, P4INFO, BMV2_JSON,
                     {s.name: emu.addresses[s.device_id] for s in topo.switches}, registry=reg,
                     settings={"audit_s": "0", "telemetry_s": "0", "link_mbps": "10", "Q1": "1000",
                               "push": "0", "round_aio": "1" if how == "aio" else "0"} if mode == "dclas" else
                     {"audit_s": "0", "telemetry_s": "0", "link_mbps": "10", "push": "0",
                      "round_aio": "1" if how == "aio" else "0"})
    c.sequential_writes = how == "sequential"
    return c


def writes_by_device(emu):
    out: dict = {}
    for dev, req in emu.emu.write_log:
        out.setdefault(dev, []).append(req)
    return out


def bump(emu, dev, counter_id, slot, nbytes):
    emu.call(lambda: emu.emu.devices[dev].bump_counter(counter_id, slot, nbytes, 1))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["dclas", "sebf"])
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_concurrent_round_writes_what_the_sequential_one_does(mode, seed):
    with pytest.MonkeyPatch.context() as mp:
        clock = Clock()
        clock.install(mp)
        _concurrent_vs_sequential(mode, seed, clock)


def _concurrent_vs_sequential(mode, seed, clock):
    from coflow.api.registry import CoflowRegistry
    rng = random.Random(seed)
    topo = T.leafspine(3, 2, 2)
    hosts = [h.name for h in topo.hosts]
    hows = ("sequential", "aio", "futures")
    emus = {h: fabric(topo) for h in hows}
    regs = {h: CoflowRegistry(hosts) for h in hows}
    ctls = {h: controller(topo, mode, emus[h], regs[h], h) for h in hows}
    try:
        for h in hows:
            ctls[h].start(loop=False)
        cid_counter = ctls["sequential"].codec.counter_id[M.C_COFLOW_BYTES]
        edges = [s.device_id for s in topo.switches if s.name in ctls["sequential"].edges]
        for step in range(10):
            clock.now += 0.05
            for _ in range(rng.randrange(1, 4)):
                live = regs["sequential"].list()
                r = rng.random()
                if r < 0.4 or not live:
                    pairs = rng.sample([(a, b) for a in hosts for b in hosts if a != b], rng.randrange(1, 5))
                    flows = [(a, b, rng.choice([None, 10**5, 10**6])) for a, b in pairs]
                    for h in hows:
                        regs[h].register(flows)
                elif r < 0.55:
                    k = rng.randrange(len(live))
                    for h in hows:
                        regs[h].unregister(regs[h].list()[k].cid)
                elif r < 0.75 and mode == "sebf":
                    k = rng.randrange(len(live))
                    sent = {0: rng.randrange(0, 10**5)}
                    for h in hows:
                        regs[h].update(regs[h].list()[k].cid, sent=sent)
                elif mode == "dclas":
                    slots = sorted(set(ctls["sequential"].slots.slot.values()))
                    if slots:
                        dev, slot = rng.choice(edges), rng.choice(slots)
                        nb = rng.choice([500, 5000, 10**6, 10**8])
                        for h in hows:
                            bump(emus[h], dev, cid_counter, slot, nb)
            for h in hows:
                r = ctls[h].round()
                assert r["errors"] == 0, (h, step, r)
        seq = writes_by_device(emus["sequential"])
        assert sum(len(v) for v in seq.values()) > len(topo.switches)  # rounds wrote something
        for h in ("aio", "futures"):
            assert writes_by_device(emus[h]) == seq, h
        for h in hows:  # never two Writes in flight to one switch
            assert max(emus[h].emu.max_in_flight.values()) == 1
    finally:
        for h in hows:
            ctls[h].stop()
            regs[h].close()
            emus[h].stop()


@pytest.mark.parametrize("how", ["aio", "futures"])
def test_a_switch_gets_its_next_write_only_after_the_last_one_answered(how):
    """Two syncs of the same switch from two threads: the second Write leaves only once the
    first was answered and committed to the cache (the agent's lock spans prepare to commit)."""
    from coflow.ctl import translate as TR
    from coflow.ctl.aio import RoundIO
    from coflow.ctl.switch import sync_many
    topo = T.leafspine(1, 1, 2)
    emu = fabric(topo)
    emu.emu.write_delay = 0.2
    c = D.Controller(topo, "dclas", P4INFO, BMV2_JSON,
                     {s.name: emu.addresses[s.device_id] for s in topo.switches},
                     settings={"audit_s": "0", "telemetry_s": "0"})
    io = RoundIO() if how == "aio" else None
    try:
        c.start(loop=False)
        a = c.agents["l0"]
        emu.emu.max_in_flight.clear()
        base = a.actual.copy()
        s1 = base.copy()
        s1.update([TR.override_entity((1, 0), 3)])
        s2 = s1.copy()
        s2.update([TR.override_entity((2, 0), 5)])
        out = {}
        th = threading.Thread(target=lambda: out.update(first=sync_many([(a, s1, None)], io)))
        th.start()
        time.sleep(0.05)
        out["second"] = sync_many([(a, s2, None)], io)
        th.join()
        assert out["first"]["l0"] == (1, None)
        # the second diff was made against the first's committed result: one update, not two
        assert out["second"]["l0"] == (1, None)
        assert emu.emu.max_in_flight[a.device_id] == 1
        assert a.actual.entities == s2.entities
    finally:
        if io is not None:
            io.close()
        c.stop()
        emu.stop()


def test_an_unchanged_answer_is_not_decoded_and_a_changed_one_is():
    from coflow.api.registry import CoflowRegistry
    topo = T.leafspine(2, 1, 1)
    emu = fabric(topo)
    reg = CoflowRegistry([h.name for h in topo.hosts])
    reg.register([("h0", "h1", None), ("h1", "h0", None)])   # senders on both edges
    c = D.Controller(topo, "dclas", P4INFO, BMV2_JSON,
                     {s.name: emu.addresses[s.device_id] for s in topo.switches}, registry=reg,
                     settings={"audit_s": "0", "telemetry_s": "0", "Q1": "1000", "push": "0"})
    decoded = []
    real = D.wire.parse_counter_bytes_fast
    try:
        c.start(loop=False)
        D.wire.parse_counter_bytes_fast = lambda resp, out: decoded.append(1) or real(resp, out)
        c.round()
        n0 = len(decoded)
        c.round()
        assert len(decoded) == n0          # the same answers: nothing decoded
        [slot] = c.slots.slot.values()
        dev = topo.switches[0].device_id
        bump(emu, dev, c.codec.counter_id[M.C_COFLOW_BYTES], slot, 5000)
        c.round()
        assert len(decoded) == n0 + 1      # one edge changed: that one decoded
        assert c.coord.global_bytes(slot, c.edges) == 5000
        assert list(c._overrides["l1"].values()) == [6]   # demoted globally: l1 overrides
        c.skip_unchanged = False
        c.round()
        assert len(decoded) == n0 + 3      # off: both decoded again
    finally:
        D.wire.parse_counter_bytes_fast = real
        c.stop()
        reg.close()
        emu.stop()


@pytest.mark.parametrize("serve_push", [True, False])
def test_edges_that_push_are_not_polled_and_the_others_are(serve_push):
    """push=1: an edge that answers the subscription is read from what it pushed (no Read
    RPC), and the coordinator sees the same counts; one that ignores it (BMv2) is polled."""
    from coflow.api.registry import CoflowRegistry
    topo = T.leafspine(2, 1, 1)
    emu = fabric(topo)
    emu.emu.serve_push = serve_push
    reg = CoflowRegistry([h.name for h in topo.hosts])
    reg.register([("h0", "h1", None)])
    c = D.Controller(topo, "dclas", P4INFO, BMV2_JSON,
                     {s.name: emu.addresses[s.device_id] for s in topo.switches}, registry=reg,
                     settings={"audit_s": "0", "telemetry_s": "0", "Q1": "1000", "push": "1"})
    try:
        c.start(loop=False)
        c.round()
        deadline = time.monotonic() + 3
        while serve_push and time.monotonic() < deadline and any(
                c.agents[e].pushed is None for e in c.edges):
            time.sleep(0.01)
        assert all((c.agents[e].pushed is not None) == serve_push for e in c.edges)
        [slot] = c.slots.slot.values()
        dev = {s.name: s.device_id for s in topo.switches}
        reads0 = {e: emu.call(lambda e=e: emu.emu.devices[dev[e]].reads) for e in c.edges}
        bump(emu, dev["l0"], c.codec.counter_id[M.C_COFLOW_BYTES], slot, 7000)
        bump(emu, dev["l1"], c.codec.counter_id[M.C_COFLOW_BYTES], slot, 300)
        time.sleep(0.1)   # the pushes arrive
        c.round()
        assert c.coord.global_bytes(slot, c.edges) == 7300
        reads = {e: emu.call(lambda e=e: emu.emu.devices[dev[e]].reads) for e in c.edges}
        assert all((reads[e] == reads0[e]) == serve_push for e in c.edges), (reads0, reads)
    finally:
        c.stop()
        reg.close()
        emu.stop()


def test_streams_share_one_loop_and_a_switch_gone_is_noticed():
    """The switches' StreamChannels are coroutines on one asyncio loop (no stream threads per
    switch); the events still arrive: arbitration (every switch primary), and a switch that
    goes away breaks its stream, so its agent goes down (the keeper then reconnects)."""
    from coflow.ctl.switch import SwitchAgent
    topo = T.leafspine(3, 1, 1)
    emu = fabric(topo)
    c = D.Controller(topo, "dclas", P4INFO, BMV2_JSON,
                     {s.name: emu.addresses[s.device_id] for s in topo.switches},
                     settings={"audit_s": "0", "telemetry_s": "0"})
    try:
        c.start(loop=False)
        assert all(a.state == SwitchAgent.MASTER for a in c.agents.values())
        names = [t.name for t in threading.enumerate()]
        assert "p4rt-stream" not in names and names.count("p4rt-streams") == 1, names
        emu.stop()
        emu = None
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(a.state != SwitchAgent.DOWN for a in c.agents.values()):
            time.sleep(0.02)
        assert all(a.state == SwitchAgent.DOWN for a in c.agents.values())
    finally:
        c.stop()
        if emu is not None:
            emu.stop()


def test_the_synchronous_stream_still_works():
    """stream_aio=False (the benchmark's baseline): grpc's synchronous stream, same events."""
    from coflow.ctl.switch import SwitchAgent
    topo = T.leafspine(2, 1, 1)
    emu = fabric(topo)
    c = D.Controller(topo, "dclas", P4INFO, BMV2_JSON,
                     {s.name: emu.addresses[s.device_id] for s in topo.switches},
                     settings={"audit_s": "0", "telemetry_s": "0"})
    for a in c.agents.values():
        a.stream_aio = False
    try:
        c.start(loop=False)
        assert all(a.state == SwitchAgent.MASTER for a in c.agents.values())
        assert sum(t.name == "p4rt-stream" for t in threading.enumerate()) >= len(c.agents)
        c.round()
    finally:
        c.stop()
        emu.stop()


def _sebf_on_leafspine(**settings):
    """(emulated fabric, registry, SEBF controller) on a 2-leaf, 1-spine, 2-host leaf-spine;
    ``settings`` on top of no audit, no telemetry, 10 Mb/s."""
    from coflow.api.registry import CoflowRegistry
    topo = T.leafspine(2, 1, 2)
    emu = fabric(topo)
    reg = CoflowRegistry([h.name for h in topo.hosts])
    c = D.Controller(topo, "sebf", P4INFO, BMV2_JSON,
                     {s.name: emu.addresses[s.device_id] for s in topo.switches}, registry=reg,
                     settings={"audit_s": "0", "telemetry_s": "0", "link_mbps": "10", **settings})
    return emu, reg, c


@pytest.mark.parametrize("push", ["0", "1"])
def test_closed_loop_observes_again_only_what_can_have_changed(push):
    """The closed loop's readings are fed to FlowProgress again only when something they
    depend on changed: a counter (pushed or a different answer), the flow_meter entries the
    switch holds, or the read set; a round that only re-rates meters observes nothing again,
    and a counter that grows is seen."""
    emu, reg, c = _sebf_on_leafspine(push=push)
    seen = []
    real = c.progress.observe
    c.progress.observe = lambda *a: seen.append(a) or real(*a)
    try:
        c.start(loop=False)
        a = reg.register([("h0", "h2", 10**7), ("h1", "h2", 2 * 10**7)])
        c.round()     # slots, meters, flow_meter entries written
        time.sleep(0.1)
        c.round()     # the new entries are held: their (zeroed) counters observed
        time.sleep(0.1)
        n0 = len(seen)
        assert n0 > 0
        c.round()
        assert len(seen) == n0          # nothing changed: nothing observed again
        reg.update(a.cid, sent={0: 10**6})   # rates move: meter configs written only
        r = c.round()
        assert r["updates"] > 0
        time.sleep(0.1)
        c.round()
        assert len(seen) == n0          # no flow_meter entry written: nothing observed again
        cid = (a.cid.external, a.cid.internal)
        [(src, dst, sw, idx)] = [f for f in c._meter_ctx.flows(cid) if f[0] == 0]
        dev = {s.name: s.device_id for s in c.topo.switches}[sw]
        bump(emu, dev, c.codec.counter_id[M.C_FLOW_BYTES], idx, 1514 * 10)
        time.sleep(0.1)
        c.round()
        assert len(seen) > n0 and c.progress.pair_sent(cid, src, dst) == 1514 * 10 - 74   # 1 packet
        # another coflow's flow_meter entries are written on the same edges: only its pairs
        # are observed, not the first coflow's unchanged readings again
        n1 = len(seen)
        reg.register([("h0", "h3", 10**7), ("h1", "h3", 10**7)])
        for _ in range(3):
            c.round()
            time.sleep(0.1)
        assert len(seen) > n1 and all(x[0] != cid for x in seen[n1:]), seen[n1:]
    finally:
        c.stop()
        reg.close()
        emu.stop()


def test_an_arrival_is_written_before_the_closed_loop_read_which_keeps_its_clock():
    """Rate modes: a round woken by the registry (an arrival, a departure) computes and writes
    without the closed loop's read unless that is overdue (2 x progress_s since the last
    read: a stream of events cannot starve it); the read follows on its own clock. Hand-checked
    decisions, then the loop itself: the arrival's round reads nothing, a later clock round
    does."""
    emu, reg, c = _sebf_on_leafspine(progress_s="0.6")
    calls = []
    real_round = c.round

    def round_(progress=True):
        dirty = c._registry_dirty
        reads = c.progress_reads
        r = real_round(progress=progress)
        calls.append((dirty, progress, c.progress_reads - reads, r["updates"]))
        return r
    c.round = round_
    try:
        c.start(loop=False)
        reg.register([("h0", "h2", 10**7)])
        c.round()                         # meters in use from here on: the closed loop reads
        c.round()
        assert c.progress_reads == 1
        # hand-checked decisions against the last read's time
        now = time.monotonic()
        c._progress_at = now
        assert not c.progress_due() and not c.progress_due(event=True)
        c._progress_at = now - 0.7        # one period ago: due on the clock, not for an event
        assert c.progress_due() and not c.progress_due(event=True)
        c._progress_at = now - 1.3        # overdue: an event round reads too
        assert c.progress_due() and c.progress_due(event=True)
        c.progress_on_clock = False       # the code before: every round reads
        c._progress_at = time.monotonic()
        assert c.progress_due() and c.progress_due(event=True)
        c.progress_on_clock = True
        # a round told not to read writes the arrival and reads nothing
        reg.register([("h1", "h3", 10**7)])
        n = c.progress_reads
        r = c.round(progress=False)
        assert r["updates"] > 0 and c.progress_reads == n and r["read_s"] == 0.0
        # the loop: an arrival when the read is due (but not overdue) is written by a round
        # without a read; the read follows right after, in a clock round of its own
        c._progress_at = time.monotonic()
        calls.clear()
        c._thread = threading.Thread(target=c._loop, daemon=True)
        c._thread.start()
        time.sleep(0.1)                   # the loop waits for the clock (0.5 s more)
        c._progress_at = time.monotonic() - 0.7
        reg.register([("h2", "h0", 10**7)])
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and not any(x[2] for x in calls):
            time.sleep(0.05)
        event = [x for x in calls if x[0]]
        assert event and event[0][1] is False and event[0][2] == 0 and event[0][3] > 0, calls
        clock = [x for x in calls if x[2]]
        assert clock and not clock[0][0], calls     # the read: a clock round of its own
    finally:
        c.stop()
        reg.close()
        emu.stop()

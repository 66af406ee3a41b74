"""Traffic agent and driver protocol without Mininet: command/event/header validation (malformed
input answered with one error naming the field, the agent keeps running) and a real agent on
127.0.0.1 sending and receiving flows over TCP."""
import asyncio
import io
import json
import os
import socket
import time

import pytest

from coflow.emu import agent as A
from coflow.emu.driver import EventError, parse_event


def good(**kw):
    msg = {"op": "send", "run": 1, "coflow": 2, "flow": 0, "cid": "7.1", "dst": "10.0.0.2",
           "port": 5001, "bytes": 1000}
    msg.update(kw)
    return json.dumps(msg)


def test_parse_command_ok():
    assert A.parse_command(good())["bytes"] == 1000
    assert A.parse_command('{"op":"ping","seq":3}') == {"op": "ping", "seq": 3}
    assert A.parse_command('{"op":"reset"}') == {"op": "reset"}
    assert A.parse_command('{"op":"mark"}') == {"op": "mark"}
    assert A.parse_command('{"op":"quit"}') == {"op": "quit"}


@pytest.mark.parametrize("line,field", [
    ("not json", "json"),
    ("[1, 2]", "json"),
    ('{"op": "fly"}', "op"),
    ('{"seq": 1}', "op"),
    (good(cid=7), "cid"),
    (good(cid="7"), "cid"),
    (good(cid="7.256"), "cid"),
    (good(cid="-1.0"), "cid"),
    (good(cid="4294967296.0"), "cid"),
    (good(dst="10.0.0"), "dst"),
    (good(dst="host"), "dst"),
    (good(dst=None), "dst"),
    (good(port=0), "port"),
    (good(port=70000), "port"),
    (good(bytes=-1), "bytes"),
    (good(bytes=1.5), "bytes"),
    (good(bytes=True), "bytes"),
    (good(run="1"), "run"),
    ('{"op":"send","run":1,"coflow":2,"cid":"7.1","dst":"10.0.0.2","port":1,"bytes":1}', "flow"),
    ('{"op":"ping"}', "seq"),
])
def test_parse_command_malformed(line, field):
    with pytest.raises(A.MessageError) as e:
        A.parse_command(line)
    assert e.value.field == field
    assert "\n" not in str(e.value) and str(e.value).startswith(field + ":")


def test_header_roundtrip_and_malformed():
    h = A.HEADER.pack(A.MAGIC, 1, 2, 3, 4096)
    assert A.parse_header(h) == (1, 2, 3, 4096)
    with pytest.raises(ValueError, match="magic"):
        A.parse_header(b"XXXX" + h[4:])
    with pytest.raises(ValueError, match="bytes"):
        A.parse_header(h[:10])
    with pytest.raises(ValueError, match="more than"):
        A.parse_header(A.HEADER.pack(A.MAGIC, 1, 2, 3, A.MAX_BYTES + 1))


def test_parse_event():
    ev = parse_event('{"ev":"done","run":1,"coflow":0,"flow":2,"bytes":5,"t":12.5,"src":"10.0.0.1"}')
    assert ev["flow"] == 2
    assert parse_event('{"ev":"error","where":"stdin:1","field":"op","message":"m"}')["field"] == "op"
    assert parse_event('{"ev":"mark","tcp":{"ActiveOpens":3}}')["tcp"] == {"ActiveOpens": 3}
    for line, what in (("x", "json"), ('{"ev":1}', "ev"), ('{"ev":"boom"}', "unknown event"),
                       ('{"ev":"done","run":1,"coflow":0,"flow":2,"bytes":5}', "t: missing"),
                       ('{"ev":"done","run":1,"coflow":-1,"flow":2,"bytes":5,"t":1}', "coflow"),
                       ('{"ev":"done","run":1,"coflow":0,"flow":2,"bytes":5,"t":"now"}', "t: not a number"),
                       ('{"ev":"error","where":"x","field":3,"message":"m"}', "field")):
        with pytest.raises(EventError) as e:
            parse_event(line, "agent h3 line 9")
        assert str(e.value).startswith("agent h3 line 9: ") and what in str(e.value)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_agent_sends_and_receives_over_loopback():
    """Two commands to one agent that listens on 127.0.0.1: both flows arrive with every byte,
    malformed lines are answered with errors and do not stop the agent."""
    port = _free_port()
    r, w = os.pipe()
    out = io.StringIO()
    agent = A.Agent("h0", "127.0.0.1", port, out=out, tag=False)
    lines = [
        good(dst="127.0.0.1", port=port, coflow=0, flow=0, bytes=300_000),
        "garbage",
        good(dst="127.0.0.1", port=port, coflow=1, flow=0, bytes=0),
        good(dst="127.0.0.1", port=port, coflow=1, flow=1, bytes=70_000, cid="8.0"),
        good(dst="127.0.0.1", port=port, coflow=1, flow=2, bytes=1),
        '{"op":"ping","seq":5}',
    ]

    async def main():
        task = asyncio.ensure_future(agent.run(stdin=os.fdopen(r, "rb", buffering=0)))
        await asyncio.sleep(0.2)
        os.write(w, ("\n".join(lines) + "\n").encode())
        for _ in range(200):
            evs = [json.loads(x) for x in out.getvalue().splitlines()]
            if sum(e["ev"] == "done" for e in evs) >= 4 and sum(e["ev"] == "sent" for e in evs) >= 4:
                break
            await asyncio.sleep(0.05)
        os.write(w, b'{"op":"reset"}\n')
        for _ in range(100):
            if '"reset"' in out.getvalue():
                break
            await asyncio.sleep(0.05)
        os.write(w, b'{"op":"quit"}\n')
        await asyncio.wait_for(task, 5)

    asyncio.run(main())
    os.close(w)
    evs = [json.loads(x) for x in out.getvalue().splitlines()]
    assert evs[0] == {"ev": "ready", "host": "h0", "port": port}
    done = {(e["coflow"], e["flow"]): e["bytes"] for e in evs if e["ev"] == "done"}
    assert done == {(0, 0): 300_000, (1, 0): 0, (1, 1): 70_000, (1, 2): 1}
    errs = [e for e in evs if e["ev"] == "error"]
    assert len(errs) == 1 and errs[0]["where"] == "stdin:2" and errs[0]["field"] == "json"
    assert {"ev": "pong", "seq": 5} in evs
    assert all(e["tag"] == "none" for e in evs if e["ev"] == "sent")
    assert all(e["t_start"] <= e["t_conn"] <= e["t_end"] for e in evs if e["ev"] == "sent")
    (reset,) = [e for e in evs if e["ev"] == "reset"]
    # the namespace's TCP counters since the agent started: at least our 4 connections each way
    assert reset["cancelled"] == 0 and reset["tcp"]["ActiveOpens"] >= 4 and reset["tcp"]["PassiveOpens"] >= 4


class _Agent:
    """One agent on loopback fed through a pipe, its events read back: the tests below."""

    def __init__(self):
        self.port = _free_port()
        self.r, self.w = os.pipe()
        self.out = io.StringIO()
        self.agent = A.Agent("h0", "127.0.0.1", self.port, out=self.out, tag=False)
        self.task = None

    def evs(self) -> list:
        return [json.loads(x) for x in self.out.getvalue().splitlines()]

    def send(self, *lines: str) -> None:
        os.write(self.w, "".join(x + "\n" for x in lines).encode())

    async def start(self) -> None:
        self.task = asyncio.ensure_future(self.agent.run(stdin=os.fdopen(self.r, "rb", buffering=0)))
        await asyncio.sleep(0.2)

    async def until(self, pred, what: str, tries: int = 300) -> None:
        for _ in range(tries):
            if pred(self.evs()):
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}: {self.evs()}")

    async def quit(self) -> None:
        self.send('{"op":"quit"}')
        await asyncio.wait_for(self.task, 5)
        os.close(self.w)


def test_mark_restarts_the_tcp_counters():
    """``mark`` reports the counters since the start and restarts them: the reset after it
    counts only the connection opened after the mark (a warm-up's handshakes are not the
    mode's)."""
    h = _Agent()
    before = A.tcp_counters()["ActiveOpens"]

    async def main():
        await h.start()
        h.send(*(good(dst="127.0.0.1", port=h.port, coflow=0, flow=i, bytes=100) for i in range(4)))
        await h.until(lambda e: sum(x["ev"] == "sent" for x in e) == 4, "4 sends")
        h.send('{"op":"mark"}')
        await h.until(lambda e: any(x["ev"] == "mark" for x in e), "mark")
        h.send(good(dst="127.0.0.1", port=h.port, coflow=1, flow=0, bytes=100))
        await h.until(lambda e: sum(x["ev"] == "sent" for x in e) == 5, "the 5th send")
        h.send('{"op":"reset"}')
        await h.until(lambda e: any(x["ev"] == "reset" for x in e), "reset")
        await h.quit()

    asyncio.run(main())
    # the counters are the network namespace's: connections other processes opened meanwhile
    # (a loaded machine) are noise, bounded by what the kernel counted over the whole test
    noise = A.tcp_counters()["ActiveOpens"] - before - 5
    evs = h.evs()
    (mark,) = [e for e in evs if e["ev"] == "mark"]
    (reset,) = [e for e in evs if e["ev"] == "reset"]
    assert mark["tcp"]["ActiveOpens"] >= 4
    assert 1 <= reset["tcp"]["ActiveOpens"] <= 1 + max(2, noise)   # the one after the mark


def test_receiver_rejects_a_foreign_connection():
    port = _free_port()
    out = io.StringIO()
    agent = A.Agent("h1", "127.0.0.1", port, out=out, tag=False)

    async def main():
        srv = await asyncio.start_server(agent._serve, "127.0.0.1", port)
        rd, wr = await asyncio.open_connection("127.0.0.1", port)
        wr.write(b"GET / HTTP/1.0\r\n\r\n12345678")
        await wr.drain()
        await rd.read()
        wr.close()
        rd, wr = await asyncio.open_connection("127.0.0.1", port)   # truncated flow
        wr.write(A.HEADER.pack(A.MAGIC, 1, 0, 0, 1000) + bytes(10))
        wr.write_eof()
        await rd.read()
        wr.close()
        srv.close()

    asyncio.run(main())
    evs = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [e["field"] for e in evs] == ["header", "bytes"]
    assert "magic" in evs[0]["message"] and "after 10 of 1000 bytes" in evs[1]["message"]


# --- the driver loop with a fake agent pool (no Mininet) --------------------------------------

class FakePool:
    """Answers every send with the receiver's 'done' (after ``delay``), like agents that deliver
    instantly; ``lose`` flows never complete."""

    def __init__(self, ips, lose=()):
        import queue
        self.ips, self.port, self.events, self.errors = ips, 5001, queue.Queue(), []
        self.sent, self.lose = [], set(lose)

    def send(self, host, cmd):
        import time
        self.sent.append((host, cmd))
        if (cmd["coflow"], cmd["flow"]) not in self.lose:
            t = time.time()
            self.events.put((host, {"ev": "done", "run": cmd["run"], "coflow": cmd["coflow"],
                                    "flow": cmd["flow"], "bytes": cmd["bytes"], "t": t + 0.003}))
            self.events.put((host, {"ev": "sent", "run": cmd["run"], "coflow": cmd["coflow"],
                                    "flow": cmd["flow"], "t_start": t + 0.001, "t_conn": t + 0.002,
                                    "t_end": t + 0.004}))


def _tiny_plan():
    from coflow.emu import plan as P
    F = P.Flow
    cs = [P.PlannedCoflow(0, 10, 0.0, (F(0, "h0", "h1", 100), F(1, "h2", "h1", 50)), "SN", 150),
          P.PlannedCoflow(1, 11, 0.3, (F(0, "h1", "h3", 10),), "SN", 10)]
    return P.Plan(["h0", "h1", "h2", "h3"], 1e6, 1.0, 1.0, cs)


def test_drive_registers_dispatches_and_unregisters():
    from coflow.emu.driver import drive
    from coflow.emu.plan import coflow_ccts
    plan = _tiny_plan()
    pool = FakePool({h: f"10.0.0.{i + 1}" for i, h in enumerate(plan.hosts)})
    regs, unregs = [], []

    def register(flows):
        regs.append(flows)
        return f"{len(regs)}.0"

    res = drive(plan, pool, register, unregs.append, run=4, clairvoyant=True, timeout_s=10,
                lead_s=0.0, progress=False)
    assert not res.timed_out and res.errors == []
    # every flow registered ready (the agents send from memory)
    assert regs == [[("h0", "h1", 100, True), ("h2", "h1", 50, True)], [("h1", "h3", 10, True)]]
    assert res.registered == {0: "1.0", 1: "2.0"}
    assert sorted(unregs) == ["1.0", "2.0"]
    assert [(h, c["cid"], c["dst"], c["run"]) for h, c in pool.sent] == [
        ("h0", "1.0", "10.0.0.2", 4), ("h2", "1.0", "10.0.0.2", 4), ("h1", "2.0", "10.0.0.4", 4)]
    ccts = coflow_ccts(plan, res.t0, res.records)
    assert all(c is not None and 0 <= c < 0.5 for c in ccts)
    # the second coflow was sent at its arrival time, not before
    assert res.late_s[1] >= 0
    # the per-flow timeline: every stage in order, at the times the (fake) agents reported
    from coflow.emu.runner import stage_summary
    tl = res.timeline(plan)
    assert [(f["coflow"], f["flow"]) for f in tl] == [(10, 0), (10, 1), (11, 0)]
    for f in tl:
        assert 0 <= f["dispatched"] <= f["started"] <= f["connected"] <= f["received"] <= f["closed"]
        assert f["connected"] - f["started"] == pytest.approx(0.001, abs=1e-5)
    st = stage_summary(tl)
    assert st["all"]["flows"] == 3 and st["small"]["flows"] == 3
    assert st["all"]["transfer"]["median"] == pytest.approx(0.001, abs=1e-5)


def test_drive_times_out_and_reports_outstanding_flows():
    from coflow.emu.driver import drive
    plan = _tiny_plan()
    pool = FakePool({h: f"10.0.0.{i + 1}" for i, h in enumerate(plan.hosts)}, lose={(0, 1)})
    res = drive(plan, pool, lambda flows: "1.0", lambda cid: None, run=1, clairvoyant=False,
                timeout_s=0.8, lead_s=0.0, progress=False)
    assert res.timed_out
    assert res.outstanding == [{"coflow": 10, "flow": 1, "src": "h2", "dst": "h1", "bytes": 50,
                                "dispatched": True, "sender_done": False}]


def test_drive_counts_a_refused_registration_and_ignores_foreign_reports():
    from coflow.emu.driver import drive
    plan = _tiny_plan()
    pool = FakePool({h: f"10.0.0.{i + 1}" for i, h in enumerate(plan.hosts)})
    pool.events.put(("h1", {"ev": "done", "run": 99, "coflow": 0, "flow": 0, "bytes": 100, "t": 0.0}))

    def register(flows):
        if len(flows) == 2:
            raise RuntimeError("INVALID_ARGUMENT: flows[0].src: unknown host")
        return "5.0"

    res = drive(plan, pool, register, lambda cid: None, run=2, clairvoyant=False, timeout_s=5,
                lead_s=0.0, progress=False)
    assert not res.timed_out
    assert res.registered == {1: "5.0"}
    assert any("coflow 10: register: INVALID_ARGUMENT" in e for e in res.errors)
    assert all(r.coflow == 1 for r in res.records)      # the stale run-99 report was not counted


def test_tcp_counters_from_proc_files(tmp_path):
    (tmp_path / "netstat").write_text(
        "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPTimeouts TCPSynRetrans\n"
        "TcpExt: 0 3 4 7 11\n"
        "IpExt: InNoRoutes TCPSynRetrans\n"
        "IpExt: 1 999\n")
    (tmp_path / "snmp").write_text(
        "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
        "Tcp: RtoAlgorithm ActiveOpens PassiveOpens RetransSegs OutSegs\n"
        "Tcp: 1 20 21 5 1000\n")
    got = A.tcp_counters(str(tmp_path))
    assert got == {"ListenOverflows": 3, "ListenDrops": 4, "TCPTimeouts": 7, "TCPSynRetrans": 11,
                   "ActiveOpens": 20, "PassiveOpens": 21, "RetransSegs": 5, "OutSegs": 1000}
    # unreadable or truncated files: what can be read, never an exception
    (tmp_path / "snmp").write_text("Tcp: RtoAlgorithm ActiveOpens\n")
    assert A.tcp_counters(str(tmp_path))["TCPSynRetrans"] == 11
    assert A.tcp_counters(str(tmp_path / "missing")) == {}
    # this process's own namespace has the counters
    assert {"ActiveOpens", "RetransSegs"} <= set(A.tcp_counters())


def test_regime_summary_by_hand():
    """Retransmission and SYN ratios from the kernel counters; each coflow's share of its CCT
    before its first byte from the earliest connected flow (coflow 10: 0.5 s of 2 s; 11: 0.1 of
    1 s), a coflow without a CCT left out."""
    from coflow.emu.runner import format_regime, regime_summary
    plan = _tiny_plan()
    tcp = {"RetransSegs": 5, "OutSegs": 200, "TCPSynRetrans": 1, "ActiveOpens": 4, "TCPTimeouts": 2}
    tl = [{"coflow": 10, "flow": 0, "connected": 0.5}, {"coflow": 10, "flow": 1, "connected": 1.5},
          {"coflow": 11, "flow": 0, "connected": 0.1}]
    g = regime_summary(tcp, tl, [2.0, 1.0], plan)
    assert g["retrans_ratio"] == 0.025 and g["syn_retrans_per_connection"] == 0.25 and g["timeouts"] == 2
    assert g["before_first_byte_share"]["median"] == pytest.approx(0.175)
    assert g["before_first_byte_share"]["mean"] == pytest.approx(0.175)
    assert regime_summary(tcp, tl, [2.0, None], plan)["before_first_byte_share"]["median"] == 0.25
    assert regime_summary({}, [], [None, None], plan) == {
        "retrans_segs": None, "out_segs": None, "retrans_ratio": None, "syn_retrans": None,
        "connections": None, "syn_retrans_per_connection": None, "timeouts": None,
        "warmup_connections": None, "warmup_syn_retrans": None, "ecn_marked": None,
        "meter_marked": None, "meter_red_drops": None, "spurious_retrans_segs": None, "spurious_rtos": None,
        "before_first_byte_share": None}
    line = format_regime(g)
    assert "retransmitted 2.5% of segments" in line and "25.0% SYN" in line and "median 17.5%" in line
    # pooled connections: the warm-up's connections and SYN retransmissions count, its
    # segments do not (they are before the mode's clock)
    warm = {"ActiveOpens": 16, "TCPSynRetrans": 1, "RetransSegs": 99, "OutSegs": 100}
    w = regime_summary(tcp, tl, [2.0, 1.0], plan, warm, ecn_marked=7)
    assert (w["connections"], w["syn_retrans"], w["syn_retrans_per_connection"]) == (20, 2, 0.1)
    assert (w["warmup_connections"], w["warmup_syn_retrans"], w["ecn_marked"]) == (16, 1, 7)
    assert w["retrans_ratio"] == 0.025
    assert "(20 opened)" in format_regime(w) and "7 ECN marks" in format_regime(w)
    # the meters' RED drops, from the controller's telemetry (issue 27)
    r = regime_summary(tcp, tl, [2.0, 1.0], plan, controller={"dataplane": {"drops": {"METER_RED": 42}}})
    assert r["meter_red_drops"] == 42 and "42 meter RED drops" in format_regime(r)
    # a metered mode whose meters dropped nothing (its telemetry lists nonzero reasons only): 0;
    # a mode without meters: unknown
    none = {"dataplane": {"drops": {"NOT_IPV4": 3}}, "mode": "sebf"}
    assert regime_summary(tcp, tl, [2.0, 1.0], plan, controller=none)["meter_red_drops"] == 0
    assert regime_summary(tcp, tl, [2.0, 1.0], plan,
                          controller=dict(none, mode="sincronia"))["meter_red_drops"] is None
    m = regime_summary(tcp, tl, [2.0, 1.0], plan, ecn_marked=7, meter_marked=5)
    assert m["meter_marked"] == 5 and "7 ECN marks (+ 5 by the meters)" in format_regime(m)


def test_parse_warm_and_reuse():
    assert A.parse_command('{"op":"warm","dst":"10.0.0.2","port":5001,"count":3}') == {
        "op": "warm", "dst": "10.0.0.2", "port": 5001, "count": 3}
    assert A.parse_command(good())["reuse"] is False
    assert A.parse_command(good(reuse=True))["reuse"] is True
    assert A.parse_command(good(reuse=True, wait=True))["wait"] is True
    assert A.parse_command(good())["wait"] is False
    for line, field in ((good(reuse="yes"), "reuse"), (good(wait=1), "wait"),
                        ('{"op":"warm","dst":"x","port":5001,"count":3}', "dst"),
                        ('{"op":"warm","dst":"10.0.0.2","port":5001,"count":0}', "count"),
                        (f'{{"op":"warm","dst":"10.0.0.2","port":5001,"count":{A.MAX_WARM + 1}}}', "count")):
        with pytest.raises(A.MessageError) as e:
            A.parse_command(line)
        assert e.value.field == field


def test_pooled_connections_carry_flows_one_after_another():
    """warm opens 2 idle connections; 5 flows sent one at a time with reuse go over them (no new
    connection: the agent's pool still counts the 2 warm ones) and each arrives with every
    byte; a reset closes the pool."""
    h = _Agent()

    async def main():
        await h.start()
        h.send(f'{{"op":"warm","dst":"127.0.0.1","port":{h.port},"count":2}}')
        await h.until(lambda e: any(x["ev"] == "warm" for x in e), "warm")
        for i in range(5):
            h.send(good(dst="127.0.0.1", port=h.port, coflow=i, flow=0, bytes=20_000 * (i + 1),
                        reuse=True))
            await h.until(lambda e, i=i: sum(x["ev"] == "sent" for x in e) > i, f"flow {i}")
        opened = sum(h.agent.pooled.values())
        assert sum(len(c) for c in h.agent.idle.values()) == 2
        h.send('{"op":"reset"}')
        await h.until(lambda e: any(x["ev"] == "reset" for x in e), "reset")
        assert h.agent.idle == {}
        await h.quit()
        return opened

    opened = asyncio.run(main())
    e = h.evs()
    assert [x["count"] for x in e if x["ev"] == "warm"] == [2]
    assert {x["coflow"]: x["bytes"] for x in e if x["ev"] == "done"} == {i: 20_000 * (i + 1) for i in range(5)}
    assert not [x for x in e if x["ev"] == "error"]
    # the 2 warm connections; without the pool each flow would open one more
    assert opened == 2
    # a pooled flow's connection exists before it starts: no handshake in its time
    assert all(x["t_conn"] - x["t_start"] < 0.05 for x in e if x["ev"] == "sent")


@pytest.mark.parametrize("wait", [True, False])
def test_busy_pool_waits_or_opens(wait):
    """One pooled connection, 4 flows at once: with ``wait`` they take turns on it (the pool
    stays one connection, no flow fails); without, the 3 that find it busy open their own,
    which join the pool."""
    h = _Agent()

    async def main():
        await h.start()
        h.send(f'{{"op":"warm","dst":"127.0.0.1","port":{h.port},"count":1}}')
        await h.until(lambda e: any(x["ev"] == "warm" for x in e), "warm")
        h.send(*(good(dst="127.0.0.1", port=h.port, coflow=i, flow=0, bytes=200_000, reuse=True,
                      wait=wait) for i in range(4)))
        await h.until(lambda e: sum(x["ev"] == "sent" for x in e) == 4, "4 sends")
        pool = sum(len(c) for c in h.agent.idle.values())
        await h.quit()
        return pool

    pool = asyncio.run(main())
    e = h.evs()
    assert {x["coflow"]: x["bytes"] for x in e if x["ev"] == "done"} == {i: 200_000 for i in range(4)}
    assert not [x for x in e if x["ev"] == "error"]
    assert pool == (1 if wait else 4)
    if wait:   # one connection: the flows finished one after another, in the order sent
        sent = sorted((x for x in e if x["ev"] == "sent"), key=lambda x: x["t_end"])
        assert [x["coflow"] for x in sent] == [0, 1, 2, 3]


def test_warm_counts():
    from coflow.emu.driver import send_commands, warm_counts
    plan = _tiny_plan()
    assert warm_counts(plan, 4) == {"h0": {"h1": 1}, "h2": {"h1": 1}, "h1": {"h3": 1}}
    ips = {h: f"10.0.0.{i + 1}" for i, h in enumerate(plan.hosts)}
    cmds = send_commands(plan, 0, "1.0", 1, ips, reuse=True)
    assert all(c["reuse"] is True for cs in cmds.values() for c in cs)
    assert "reuse" not in send_commands(plan, 0, "1.0", 1, ips)["h0"][0]


def test_parse_watch():
    assert A.parse_command('{"op":"watch","api":"unix:/tmp/x.sock"}') == {"op": "watch", "api": "unix:/tmp/x.sock"}
    assert A.parse_command('{"op":"watch","api":""}') == {"op": "watch", "api": ""}
    for line in ('{"op":"watch"}', '{"op":"watch","api":3}', '{"op":"watch","api":"nowhere"}'):
        with pytest.raises(A.MessageError) as e:
            A.parse_command(line)
        assert e.value.field == "api"
    assert parse_event('{"ev":"watching","controller":"ab12"}')["controller"] == "ab12"


SO_MAX_PACING_RATE = 47           # asm-generic/socket.h
KERNEL_UNPACED = (0xFFFFFFFF, 2**64 - 1)   # ~0U written, ~0UL read back


def _kernel_pacing(sock) -> int:
    raw = sock.getsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, 8)
    return int.from_bytes(raw[:4], "little") if len(raw) == 4 else int.from_bytes(raw, "little")


def test_pacer_token_bucket_by_hand():
    """The pacer's arithmetic, checked by hand: 1,000 B/s with 3,000 bytes of burst."""
    p = A.Pacer(1000.0, 3000, now=0.0)
    assert p.take(1500, 0.0) == 0.0 and p.take(1500, 0.0) == 0.0    # the burst, at once
    assert p.take(1500, 0.0) == pytest.approx(1.5)                   # then 1,500 B take 1.5 s
    assert p.take(1500, 1.0) == pytest.approx(0.5)                   # 1,000 earned by t=1
    assert p.take(1500, 1.5) == 0.0 and p.tokens == pytest.approx(0.0)
    assert p.take(9000, 100.0) == 0.0 and p.tokens == 0.0            # idle: at most the burst
    p.set_rate(4000.0, 100.25)                                       # 250 earned at the old rate
    assert p.tokens == pytest.approx(250.0)
    assert p.take(1250, 100.25) == pytest.approx(0.25)               # 1,000 more at 4,000 B/s
    p.set_rate(None, 100.5)
    assert p.take(10**9, 100.5) == 0.0                               # unlimited
    p.set_rate(0.0, 101.0)                                           # 1,250 B still earned
    assert p.take(1000, 102.0) == 0.0
    assert p.take(1000, 103.0) == float("inf")                       # then held until a new rate


def test_pacer_charges_a_flow_start_against_its_first_burst():
    """The handshake and header pass the flow's meter before its payload: charged to the
    pacer, the first burst is that much short (its meter's bucket of two frames holds both)."""
    p = A.Pacer(1000.0, 3000, now=0.0)
    p.charge(300, 0.0)
    assert p.take(1500, 0.0) == 0.0
    assert p.take(1500, 0.0) == pytest.approx(0.3)                   # 300 B short of the burst
    p.charge(2000, 0.0)
    assert p.tokens == pytest.approx(-800.0)
    assert p.take(1500, 0.0) == pytest.approx(2.3)
    u = A.Pacer(None, 3000, now=0.0)                                 # unlimited: nothing charged
    u.charge(300, 0.0)
    assert u.take(10**9, 0.0) == 0.0


def test_pacer_rate_change_wakes_the_sender():
    async def main():
        p = A.Pacer(1.0, 10, asyncio.get_running_loop().time())
        t0 = time.monotonic()
        sleeper = asyncio.ensure_future(A.Agent._sleep(p, 30.0))
        await asyncio.sleep(0.05)
        p.set_rate(1e6, asyncio.get_running_loop().time())
        await asyncio.wait_for(sleeper, 2.0)
        return time.monotonic() - t0
    assert asyncio.run(main()) < 1.0


def _watching_agent(tmp_path, flows):
    """A coflow API (its rates published by hand on its board, as the controller does) and an
    agent watching it. ``flows``: {name: (rate B/s, limited)}, one 0 -> 1 flow each."""
    from coflow.api.rates import CoflowRates, FlowRate, RateBoard
    from coflow.api.registry import CoflowRegistry
    from coflow.api.server import serve
    reg = CoflowRegistry(["h0", "h1"])
    board = RateBoard()
    sock = f"unix:{tmp_path / 'api.sock'}"
    server = serve(reg, None, [sock], rates=board)
    cids = {name: str(reg.register([("h0", "h1", 3_000_000)]).cid) for name in flows}
    rates = {cids[n]: CoflowRates(cids[n], (FlowRate(0, "h0", "h1", r, lim),))
             for n, (r, lim) in flows.items()}
    board.publish(rates, 1.0)

    def close():
        server.stop(None)
        reg.close()
    return sock, board, cids, rates, close


def _run_watching(h, main, close):
    """Run ``main`` (an agent's flows), stop the API; (events, sent events by coflow, each
    flow's seconds from connected to acknowledged). No error event is allowed."""
    try:
        asyncio.run(main())
    finally:
        close()
    e = h.evs()
    assert not [x for x in e if x["ev"] == "error"], e
    sent = {x["coflow"]: x for x in e if x["ev"] == "sent"}
    return e, sent, {k: x["t_end"] - x["t_conn"] for k, x in sent.items()}


async def _start_watching(h, sock, pooled=1):
    await h.start()
    h.send(json.dumps({"op": "watch", "api": sock}))
    await h.until(lambda e: any(x["ev"] == "watching" for x in e), "watching")
    await asyncio.sleep(0.2)                 # the snapshot follows the hello
    if pooled:
        h.send(f'{{"op":"warm","dst":"127.0.0.1","port":{h.port},"count":{pooled}}}')
        await h.until(lambda e: any(x["ev"] == "warm" for x in e), "warm")


def test_agent_paces_each_flow_at_the_controllers_rate(tmp_path):
    """An agent watching a coflow API paces a flow at the flow's rate from its first byte and
    follows a change mid-flow: on loopback, 3 MB at 1 MB/s take about 2.9 s (the first two
    64 KB segments are the burst), the same flow unpaced a few ms; a rate raised to 20 MB/s
    half way cuts the rest short; a flow the controller does not limit is not paced. The
    kernel's pacing is never set on the pooled socket."""
    from coflow.api.rates import CoflowRates, FlowRate
    sock, board, cids, rates, close = _watching_agent(
        tmp_path, {"a": (1e6, True), "b": (1e6, True), "c": (1e6, False)})
    a, b, c = cids["a"], cids["b"], cids["c"]
    h = _Agent()
    seen = {}

    async def main():
        await _start_watching(h, sock)
        for k, cid in enumerate((a, b, c)):
            h.send(good(dst="127.0.0.1", port=h.port, coflow=k, flow=0, cid=cid, bytes=3_000_000,
                        reuse=True))
            if cid == b:                         # half way: the controller raises b's rate
                await asyncio.sleep(1.2)
                (p,) = h.agent.pacing.values()
                seen["during"] = p.rate
                board.publish({**rates, b: CoflowRates(b, (FlowRate(0, "h0", "h1", 2e7, True),))}, 2.0)
            await h.until(lambda e, k=k: sum(x["ev"] == "sent" for x in e) > k, f"flow {k}", tries=600)
            (idle,) = [w for conns in h.agent.idle.values() for _r, w in conns]
            seen[k] = _kernel_pacing(idle.get_extra_info("socket"))
        h.send('{"op":"watch","api":""}')
        await h.quit()

    e, sent, took = _run_watching(h, main, close)
    assert {x["coflow"]: x["bytes"] for x in e if x["ev"] == "done"} == {0: 3e6, 1: 3e6, 2: 3e6}
    assert sent[0]["pace"] == 1e6 and sent[1]["pace"] == 1e6 and sent[2]["pace"] is None
    # the range each was paced over while sending: b started at 1 MB/s and ended at 20 MB/s
    assert (sent[0]["pace_min"], sent[0]["pace_last"]) == (1e6, 1e6)
    assert (sent[1]["pace_min"], sent[1]["pace_last"]) == (1e6, 2e7)
    assert (sent[2]["pace_min"], sent[2]["pace_last"]) == (None, None)
    # each flow reports the state its pooled connection carried into it (TCP_INFO, read at
    # the right offsets: a window in segments, Linux's 200 ms minimum RTO, an RTT measured)
    t0 = [sent[k]["tcp0"] for k in range(3)]
    assert all(set(t) == {"rtt_ms", "cwnd", "ssthresh", "rto_ms", "backoff", "pacing_Bps"} for t in t0)
    assert all(1 <= t["cwnd"] <= 10_000 and 200 <= t["rto_ms"] <= 120_000 and 0 < t["rtt_ms"] < 1000
               and t["backoff"] == 0 for t in t0), t0
    assert 2.4 < took[0] < 4.0, took            # paced: ~2.9 s
    assert took[2] < 0.5, took                  # not limited: loopback speed
    assert 1.2 < took[1] < 0.8 * took[0], took  # 1 MB/s for 1.2 s, then 20 MB/s
    assert seen["during"] == 1e6
    assert all(seen[k] in KERNEL_UNPACED for k in range(3)), seen


def test_a_slow_paced_flow_does_not_delay_the_next_on_its_connection(tmp_path):
    """Two flows, one after the other on one pooled connection: 300 KB paced at 100 KB/s, then
    3 MB at 100 MB/s. The second takes loopback time. (Linux's own pacing, SO_MAX_PACING_RATE,
    charged the first flow's last segments to the second: about 1.3 s here.)"""
    sock, _board, cids, _rates, close = _watching_agent(
        tmp_path, {"slow": (1e5, True), "fast": (1e8, True)})
    h = _Agent()

    async def main():
        await _start_watching(h, sock)
        for k, name in enumerate(("slow", "fast")):
            h.send(good(dst="127.0.0.1", port=h.port, coflow=k, flow=0, cid=cids[name],
                        bytes=300_000 if name == "slow" else 3_000_000, reuse=True))
            await h.until(lambda e, k=k: sum(x["ev"] == "sent" for x in e) > k, name, tries=600)
        h.send('{"op":"watch","api":""}')
        await h.quit()

    _e, sent, took = _run_watching(h, main, close)
    assert sent[0]["pace"] == 1e5 and sent[1]["pace"] == 1e8
    assert 1.2 < took[0] < 3.0, took            # (300 KB - a 128 KB burst) at 100 KB/s: ~1.7 s
    assert took[1] < 0.4, took                  # 3 MB at 100 MB/s: 30 ms, nothing carried over


def test_a_paced_flow_builds_no_backlog_while_tcp_cannot_send(tmp_path):
    """The receiver reads nothing for its first 1.5 s (TCP's window closes): a flow paced at
    1 MB/s stops writing meanwhile instead of filling its socket with what it would then send
    at line rate, past its meter. 3 MB then take 1.5 s + ~2.9 s; with the stalled bytes
    queued in the socket, about 1.5 s less."""
    import threading
    sock, _board, cids, _rates, close = _watching_agent(tmp_path, {"a": (1e6, True)})
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(10)
    port = srv.getsockname()[1]

    def receiver():
        c, _ = srv.accept()
        with c:
            time.sleep(1.5)
            head = c.recv(A.HEADER.size, socket.MSG_WAITALL)
            n = A.parse_header(head)[3]
            while n > 0:
                got = c.recv(min(n, 1 << 20))
                if not got:
                    return
                n -= len(got)
            c.sendall(A.ACK)
    t = threading.Thread(target=receiver, daemon=True)
    t.start()
    h = _Agent()

    async def main():
        await _start_watching(h, sock, pooled=0)
        h.send(good(dst="127.0.0.1", port=port, coflow=0, flow=0, cid=cids["a"], bytes=3_000_000))
        await h.until(lambda e: any(x["ev"] == "sent" for x in e), "sent", tries=600)
        h.send('{"op":"watch","api":""}')
        await h.quit()

    def close_all():
        close()
        srv.close()
        t.join(5)
    _e, sent, took = _run_watching(h, main, close_all)
    assert sent[0]["pace"] == 1e6
    assert 3.9 < took[0] < 6.0, took

"""Leases and idempotent Register (issue 30, item 1): a retried Register returns the coflow of
its first attempt, durably; a coflow whose lease nobody renews is unregistered; the crash story
over real gRPC (200 concurrent Registers, the server killed mid-way with replies lost, clients
retrying, some clients dead): no duplicates, and no orphan outlives one lease."""
import sqlite3
import threading

import grpc
import pytest

from coflow.api.client import CoflowApiError, CoflowClient
from coflow.api.registry import ApiError, CoflowRegistry
from coflow.api.server import pb2, pb2_grpc, serve

HOSTS = [f"h{i}" for i in range(8)]


class Clock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


def mk(tmp_path=None, clk=None, **kw):
    clk = clk or Clock()
    db = str(tmp_path / "reg.sqlite") if tmp_path is not None else None
    return CoflowRegistry(HOSTS, db_path=db, lease_clock=clk, **kw), clk


# Idempotency ------------------------------------------------------------------------------------

def test_retry_with_the_same_request_id_returns_the_same_coflow(tmp_path):
    reg, _ = mk(tmp_path)
    a = reg.register([("h0", "h1", 10)], request_id="job-7/stage-0")
    v = reg.version
    b = reg.register([("h0", "h1", 10)], request_id="job-7/stage-0")
    assert a.cid == b.cid and reg.version == v and len(reg) == 1 and reg.replayed_total == 1
    c = reg.register([("h0", "h1", 10)], request_id="another")
    assert c.cid != a.cid and len(reg) == 2
    # another owner's key space: the same id is a different request
    d = reg.register([("h0", "h1", 10)], request_id="job-7/stage-0", owner="app-b")
    assert d.cid not in (a.cid, c.cid) and d.owner == "app-b"


def test_a_used_request_id_with_another_request_is_rejected(tmp_path):
    reg, _ = mk(tmp_path)
    reg.register([("h0", "h1", 10)], request_id="r1")
    before = (reg.snapshot(), reg.next_external)
    with pytest.raises(ApiError) as ei:
        reg.register([("h0", "h1", 11)], request_id="r1")
    assert ei.value.code == "INVALID_ARGUMENT" and ei.value.field == "request_id"
    assert "coflow 1.0" in ei.value.details
    assert (reg.snapshot(), reg.next_external) == before


def test_request_ids_and_leases_survive_a_restart(tmp_path):
    reg, clk = mk(tmp_path)
    a = reg.register([("h0", "h1", 10), ("h2", "h1")], request_id="r1", lease_s=5)
    reg.close()
    clk.t += 1000                                     # the controller was down a long time
    reg2, _ = mk(tmp_path, clk)
    b = reg2.register([("h0", "h1", 10), ("h2", "h1")], request_id="r1", lease_s=5)
    assert b.cid == a.cid and b.lease_s == 5 and len(reg2) == 1
    # a reopened registry gives every leased coflow one full lease from the reopening
    assert reg2.lease_remaining(a.cid) == pytest.approx(5)
    assert reg2.expire() == []
    clk.t += 5
    assert [r.cid for r in reg2.expire()] == [a.cid]
    reg2.close()
    reg3, _ = mk(tmp_path, clk)
    assert len(reg3) == 0 and reg3.expired_total == 0
    # its request id went with it: a retry now registers anew (the coflow ended)
    assert reg3.register([("h0", "h1", 10), ("h2", "h1")], request_id="r1").cid != a.cid
    reg3.close()


def test_an_old_database_gets_the_new_table(tmp_path):
    reg, _ = mk(tmp_path)
    reg.register([("h0", "h1", 10)])
    reg.close()
    db = sqlite3.connect(str(tmp_path / "reg.sqlite"))
    db.execute("DROP TABLE coflow_ext")              # as a database written before leases
    db.commit()
    db.close()
    reg2, _ = mk(tmp_path)
    assert [str(r.cid) for r in reg2.list()] == ["1.0"] and reg2.list()[0].lease_s is None
    reg2.register([("h0", "h1", 10)], request_id="x", lease_s=3)
    reg2.close()


# Leases -----------------------------------------------------------------------------------------

def test_expiry_unregisters_and_counts():
    reg, clk = mk(default_lease_s=10)
    events = []
    reg.subscribe(lambda ev, r: events.append((ev, str(r.cid))))
    a = reg.register([("h0", "h1", 10)])              # the default lease
    b = reg.register([("h2", "h3", 10)], lease_s=30)
    assert (a.lease_s, b.lease_s) == (10, 30)
    clk.t += 9
    assert reg.expire() == []
    clk.t += 1
    v = reg.version
    assert [r.cid for r in reg.expire()] == [a.cid]
    assert reg.version == v + 1 and reg.expired_total == 1 and a.cid not in reg
    assert events[-1] == ("unregister", "1.0")
    clk.t += 100
    assert [r.cid for r in reg.expire()] == [b.cid] and reg.expired_total == 2


def test_keepalive_update_and_add_flows_renew():
    reg, clk = mk()
    a = reg.register([("h0", "h1", 10)], lease_s=10)
    for step in range(5):                             # 50 s alive on renewals
        clk.t += 8
        if step % 3 == 0:
            assert [r.cid for r in reg.keep_alive([str(a.cid)])[0]] == [a.cid]
        elif step % 3 == 1:
            reg.update(a.cid, sent={0: step})
        else:
            reg.add_flows(a.cid, [(f"h{step}", "h7", 1)])
        assert reg.expire() == []
    clk.t += 10
    assert [r.cid for r in reg.expire()] == [a.cid]


def test_traffic_renews():
    reg, clk = mk()
    a = reg.register([("h0", "h1", 10)], lease_s=10)
    clk.t += 9
    assert reg.renew([(a.cid.external, a.cid.internal), (99, 0)]) == 1
    clk.t += 9
    assert reg.expire() == []
    clk.t += 1
    assert len(reg.expire()) == 1


def test_keepalive_reports_unknown_and_rejects_malformed():
    reg, clk = mk()
    a = reg.register([("h0", "h1", 10)], lease_s=10)
    renewed, gone = reg.keep_alive([str(a.cid), "5.0"])
    assert [r.cid for r in renewed] == [a.cid] and gone == ["5.0"]
    clk.t += 9
    for bad, field in ((["1.0", "x"], "coflow_ids[1]"), ([], "coflow_ids"), ("1.0", "coflow_ids")):
        with pytest.raises(ApiError) as ei:
            reg.keep_alive(bad)
        assert ei.value.code == "INVALID_ARGUMENT" and ei.value.field == field
    clk.t += 1.5                                       # the rejected calls renewed nothing
    assert len(reg.expire()) == 1


@pytest.mark.parametrize("kw,field", [
    (dict(lease_s=0), "lease_s"), (dict(lease_s=-1), "lease_s"), (dict(lease_s=float("nan")), "lease_s"),
    (dict(lease_s=float("inf")), "lease_s"), (dict(lease_s=1e9), "lease_s"), (dict(lease_s=True), "lease_s"),
    (dict(request_id=""), "request_id"), (dict(request_id="x" * 129), "request_id"),
    (dict(request_id="tab\there"), "request_id"), (dict(request_id="é"), "request_id")])
def test_malformed_lease_or_request_id(kw, field):
    reg, _ = mk()
    reg.register([("h0", "h1", 10)])
    before = (reg.snapshot(), reg.next_external)
    with pytest.raises(ApiError) as ei:
        reg.register([("h2", "h1", 10)], **kw)
    assert ei.value.code == "INVALID_ARGUMENT" and ei.value.field == field
    assert (reg.snapshot(), reg.next_external) == before


def test_a_backup_does_not_expire(tmp_path):
    clk = Clock()
    lead = {"ok": True}
    reg = CoflowRegistry(HOSTS, db_path=str(tmp_path / "s.sqlite"), shared=True,
                         leader=lambda: lead["ok"], lease_clock=clk)
    reg.register([("h0", "h1", 1)], lease_s=1)
    lead["ok"] = False
    clk.t += 5
    assert reg.expire() == [] and len(reg) == 1
    lead["ok"] = True
    assert len(reg.expire()) == 1
    reg.close()


# Over gRPC --------------------------------------------------------------------------------------

def test_keepalive_rpc_and_client_thread():
    clk = Clock()
    reg = CoflowRegistry(HOSTS, lease_clock=clk, default_lease_s=0.3)
    server = serve(reg, "127.0.0.1:0")
    addr = server.coflow_addresses[0]
    try:
        with CoflowClient(addr, timeout=5) as c:
            d = c.register_coflow([("h0", "h1", 5)])
            assert d["lease_s"] == 0.3
            assert c.keep_alive([d["coflow_id"], "9.0"]) == ([d["coflow_id"]], ["9.0"])
            with pytest.raises(CoflowApiError) as ei:
                c.keep_alive(["9.x"])
            assert ei.value.code == "INVALID_ARGUMENT" and ei.value.field == "coflow_ids[0]"
            # the client's own thread renews what it holds (every lease / 3 = 0.1 s, real time)
            ch = grpc.insecure_channel(addr)
            stub = pb2_grpc.CoflowServiceStub(ch)
            raw = stub.Register(pb2.RegisterRequest(flows=[pb2.Flow(src="h2", dst="h3")], lease_s=0.3),
                                timeout=5)                  # nobody renews this one
            ch.close()
            ev = threading.Event()
            for _ in range(20):
                clk.t += 0.05
                ev.wait(0.05)
                reg.expire()
            assert d["coflow_id"] in reg and raw.coflow.coflow_id not in reg
            assert reg.expired_total == 1
    finally:
        server.stop(None).wait()
        reg.close()


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_crash_mid_registration_no_duplicates_no_orphans(tmp_path):
    """200 Registers from 8 client threads against a server on SQLite; the server 'crashes'
    (stopped at once, registry closed) while 4 Registers are saved but unanswered (and the
    other threads' calls are in flight or arriving). A new
    server on the same file and port comes up; clients retry with their request ids. A quarter
    of the clients die at the crash and never come back. Then one lease passes with the live
    clients renewing: every acknowledged coflow is there once, every orphan is gone."""
    clk = Clock()
    db = str(tmp_path / "reg.sqlite")
    port = _free_port()
    addr = f"127.0.0.1:{port}"
    lease = 30.0
    crash = threading.Event()
    held = threading.Semaphore(0)
    hold_rids = {"t1-r5", "t3-r5", "t5-r5", "t7-r5"}    # threads 3 and 7 die at the crash
    n_held = len(hold_rids)
    lock = threading.Lock()

    def hold(rec):                        # the reply of some saved Registers waits for the crash
        if rec.request_id in hold_rids and not crash.is_set():
            held.release()
            crash.wait(10)

    reg = CoflowRegistry(HOSTS, db_path=db, lease_clock=clk, default_lease_s=lease)
    server = serve(reg, addr, max_workers=32, after_register=hold)
    acked: dict = {}                      # request id -> coflow id the client was told
    dead = set()
    errors = []
    per_thread = 25

    def client(t):
        c = CoflowClient(addr, timeout=15, retry_s=20 if t % 4 != 3 else 0, keepalive=False)
        try:
            for j in range(per_thread):
                rid = f"t{t}-r{j}"
                if crash.is_set() and t % 4 == 3:   # this client died with the controller
                    dead.add(rid)
                    return
                try:
                    cid = c.register([(f"h{t}", f"h{(t + j % 7 + 1) % 8}", 1000 + j)], request_id=rid)
                except CoflowApiError as e:
                    if t % 4 == 3:
                        dead.add(rid)
                        return
                    errors.append((rid, str(e)))
                    continue
                with lock:
                    acked[rid] = cid
        finally:
            c.close()

    threads = [threading.Thread(target=client, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for _ in range(n_held):
        assert held.acquire(timeout=30)
    # the crash: saved registrations whose replies never left
    saved_before = {str(r.cid) for r in reg.list()}
    server.stop(None)
    reg.close()
    crash.set()
    reg2 = CoflowRegistry(HOSTS, db_path=db, lease_clock=clk, default_lease_s=lease)
    server2 = serve(reg2, addr, max_workers=32)
    try:
        for th in threads:
            th.join(60)
        assert not any(th.is_alive() for th in threads)
        assert not errors, errors[:3]
        live = {str(r.cid): r for r in reg2.list()}
        # every acknowledged coflow exists, once per request id: retries made no duplicates
        assert set(acked.values()) <= set(live)
        assert len(set(acked.values())) == len(acked)
        by_rid: dict = {}
        for r in live.values():
            by_rid.setdefault(r.request_id, []).append(str(r.cid))
        assert all(len(v) == 1 for v in by_rid.values()), "a request id registered twice"
        assert all(by_rid[rid] == [cid] for rid, cid in acked.items())
        # the crash left orphans: saved, never acknowledged, their clients gone
        orphans = set(live) - set(acked.values())
        assert orphans <= saved_before
        assert {live[c].request_id for c in orphans} >= {"t3-r5", "t7-r5"}
        assert len(acked) + len(dead) >= 8 * per_thread - 2 * per_thread   # the dead stopped early
        # one lease later, with the live clients renewing, no orphan is left
        with CoflowClient(addr, timeout=5, keepalive=False) as c:
            for _ in range(3):
                clk.t += lease / 2
                renewed, gone = c.keep_alive(sorted(set(acked.values())))
                assert gone == [] and len(renewed) == len(acked)
                reg2.expire()
        left = {str(r.cid) for r in reg2.list()}
        assert left == set(acked.values())
        assert reg2.expired_total == len(orphans)
        print(f"acked {len(acked)}, dead clients' requests {len(dead)}, orphans {len(orphans)} "
              f"(expired one lease later), retries answered {reg2.replayed_total}")
    finally:
        server2.stop(None).wait()
        reg2.close()


def test_concurrent_retries_make_no_duplicates():
    """200 Registers from 8 threads, each sent three times with its request id: 200 coflows."""
    reg = CoflowRegistry(HOSTS)
    server = serve(reg, "127.0.0.1:0", max_workers=16)
    addr = server.coflow_addresses[0]
    got: dict = {}
    lock = threading.Lock()

    def worker(t):
        with CoflowClient(addr, timeout=10, keepalive=False) as c:
            for j in range(25):
                ids = {c.register([(f"h{t}", f"h{(t + 1) % 8}", j)], request_id=f"{t}/{j}")
                       for _ in range(3)}
                with lock:
                    got[f"{t}/{j}"] = ids
    ths = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    try:
        for th in ths:
            th.start()
        for th in ths:
            th.join(60)
        assert len(got) == 200 and all(len(v) == 1 for v in got.values())
        assert len(reg) == 200 and reg.replayed_total == 400 and reg.version == 200
    finally:
        server.stop(None).wait()
        reg.close()


# In the controller --------------------------------------------------------------------------------

def _controller(reg, mode="dclas"):
    import os
    from coflow import topology as T
    from coflow.ctl.daemon import Controller
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p4info, js = os.path.join(root, "build", "coflow.p4info.txt"), os.path.join(root, "build", "coflow.json")
    if not (os.path.exists(p4info) and os.path.exists(js)):
        pytest.skip("build/coflow.p4info.txt missing: run `make p4` (the Controller needs the P4Info)")
    t = T.leafspine(2, 2, 2)
    return Controller(t, mode, p4info, js, {s.name: "127.0.0.1:1" for s in t.switches}, registry=reg)


def test_controller_expires_leases_frees_slots_and_counts(monkeypatch):
    from coflow.ctl import daemon
    clk = Clock()
    reg = CoflowRegistry([f"h{i}" for i in range(4)], lease_clock=clk, default_lease_s=10)
    c = _controller(reg)
    try:
        c._unsubscribe = reg.subscribe(c._on_registry)
        a = reg.register([("h0", "h1", 10)])
        b = reg.register([("h2", "h3", 10)])
        with c._mu:
            c._refresh_coflows()
        ka, kb = (a.cid.external, a.cid.internal), (b.cid.external, b.cid.internal)
        assert ka in c.slots.slot and kb in c.slots.slot
        # b's traffic grows in the counters: renewed; a is silent
        clk.t += 6
        c._sizes = {kb: 5000}
        c._last_renew = 0.0
        c._renew_by_traffic()
        clk.t += 6
        assert c._expire_leases() == 1
        monkeypatch.setattr(daemon, "SLOT_LINGER_S", 0.0)
        with c._mu:
            c._refresh_coflows()
        assert ka not in c.slots.slot and kb in c.slots.slot
        st = c.status()
        assert st["leases"]["expired"] == 1 and st["leases"]["renewed_by_traffic"] == 1
        assert st["leases"]["default_lease_s"] == 10
        assert [x["cid"] for x in st["coflows"]] == [str(b.cid)]
        assert b"coflow_ctl_leases_expired_total 1.0" in c.metrics.exposition()
    finally:
        c.stop()

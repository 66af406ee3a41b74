"""Coflow registry: validation, CoflowId assignment, parent/child stages, multi-wave updates,
SQLite durability, events, thread safety, and Varys admission from the scheduler core."""
import sqlite3
import subprocess
import sys
import threading

import pytest

from coflow.api.admission import varys_admission
from coflow.api.registry import (ApiError, CoflowId, CoflowRegistry, FlowSpec, parse_cid,
                                 RegistryDbError)

HOSTS = [f"h{i}" for i in range(8)]


def state(r):
    v, recs = r.snapshot()
    return v, [x.to_dict() for x in recs], r.next_external


def rejects(r, code, field, fn, *a, **kw):
    """``fn`` fails with ``code`` naming ``field`` and leaves the registry as it was."""
    before = state(r)
    with pytest.raises(ApiError) as ei:
        fn(*a, **kw)
    e = ei.value
    assert e.code == code, e
    assert e.field == field, e
    assert str(e).startswith(field + ": ")
    assert state(r) == before
    return e


@pytest.fixture
def reg():
    return CoflowRegistry(HOSTS, max_flows_per_coflow=4)


# CoflowId ----------------------------------------------------------------------------------------

def test_coflow_id_parse_and_str():
    c = CoflowId.parse("7.3")
    assert c == CoflowId(7, 3) and str(c) == "7.3"
    assert CoflowId.parse(f"{2**32 - 1}.255") == CoflowId(2**32 - 1, 255)
    assert CoflowId(1, 2) < CoflowId(2, 0)


@pytest.mark.parametrize("s", ["", "7", "7.", ".0", "7.0.1", "-1.0", "7.-1", "+7.0", " 7.0", "7.0 ", "07.0", "7.01",
                               "7,0", "a.b", "7.256", f"{2**32}.0", "٣.0", "1e3.0"])
def test_coflow_id_malformed(s):
    with pytest.raises(ApiError) as ei:
        parse_cid(s, "parent")
    assert ei.value.code == "INVALID_ARGUMENT" and ei.value.field == "parent"


def test_coflow_id_range():
    with pytest.raises(ValueError):
        CoflowId(2**32, 0)
    with pytest.raises(ValueError):
        CoflowId(0, 256)
    with pytest.raises(ValueError):
        CoflowId(-1, 0)


# Registration and ids -----------------------------------------------------------------------------

def test_register_assigns_new_jobs_in_order(reg):
    a = reg.register([("h0", "h1", 100), ("h2", "h1")])
    b = reg.register([FlowSpec("h3", "h4", 5)])
    assert (str(a.cid), str(b.cid)) == ("1.0", "2.0")
    assert a.flows == [FlowSpec("h0", "h1", 100), FlowSpec("h2", "h1", None)]
    assert not a.clairvoyant and a.total_bytes is None
    assert b.clairvoyant and b.total_bytes == 5
    assert [str(r.cid) for r in reg.list()] == ["1.0", "2.0"]
    assert reg.version == 2


def test_parent_and_explicit_external_stages(reg):
    root = reg.register([("h0", "h1", 1)]).cid                     # 1.0
    other = reg.register([("h0", "h1", 1)]).cid                    # 2.0
    child = reg.register([("h1", "h2", 1)], parent=str(root))      # 1.1
    assert child.cid == CoflowId(1, 1) and child.parent == root
    stage = reg.register([("h1", "h2", 1)], external=1)           # 1.2, no parent
    assert stage.cid == CoflowId(1, 2) and stage.parent is None
    grandchild = reg.register([("h2", "h3", 1)], parent=child.cid, external=1)
    assert grandchild.cid == CoflowId(1, 3) and grandchild.parent == CoflowId(1, 1)
    assert reg.register([("h0", "h1")]).cid == CoflowId(3, 0)     # new jobs continue after 2
    # a finished parent is still a valid parent (DAG stages start after their parents end)
    reg.unregister(root)
    assert reg.register([("h0", "h1")], parent=root).cid == CoflowId(1, 4)
    assert other == CoflowId(2, 0)


def test_stage_ids_run_out(reg):
    root = reg.register([("h0", "h1")]).cid
    for _ in range(255):
        reg.register([("h0", "h1")], external=root.external)
    rejects(reg, "RESOURCE_EXHAUSTED", "external", reg.register, [("h0", "h1")], external=root.external)
    rejects(reg, "RESOURCE_EXHAUSTED", "parent", reg.register, [("h0", "h1")], parent=root)


def test_ids_are_never_reused(reg):
    a = reg.register([("h0", "h1")]).cid
    reg.unregister(a)
    assert reg.register([("h0", "h1")]).cid == CoflowId(2, 0)
    e = rejects(reg, "NOT_FOUND", "coflow_id", reg.get, a)
    assert "unregistered" in e.message


@pytest.mark.parametrize("call,code,field", [
    (lambda r: r.register([("h0", "h9", 1)]), "INVALID_ARGUMENT", "flows[0].dst"),
    (lambda r: r.register([("h0", "h1"), ("hx", "h1")]), "INVALID_ARGUMENT", "flows[1].src"),
    (lambda r: r.register([("", "h1")]), "INVALID_ARGUMENT", "flows[0].src"),
    (lambda r: r.register([("h0", "h1", 1), ("h2", "h1", -1)]), "INVALID_ARGUMENT", "flows[1].size_bytes"),
    (lambda r: r.register([("h0", "h1", 1.5)]), "INVALID_ARGUMENT", "flows[0].size_bytes"),
    (lambda r: r.register([("h0", "h1", True)]), "INVALID_ARGUMENT", "flows[0].size_bytes"),
    (lambda r: r.register([("h0", "h1", 2**63)]), "INVALID_ARGUMENT", "flows[0].size_bytes"),
    (lambda r: r.register([("h0", "h1"), ("h2", "h3"), ("h0", "h1")]), "INVALID_ARGUMENT", "flows[2]"),
    (lambda r: r.register([("h3", "h3")]), "INVALID_ARGUMENT", "flows[0].dst"),
    (lambda r: r.register([]), "INVALID_ARGUMENT", "flows"),
    (lambda r: r.register(None), "INVALID_ARGUMENT", "flows"),
    (lambda r: r.register([("h0",)]), "INVALID_ARGUMENT", "flows[0]"),
    (lambda r: r.register([(f"h{i}", "h7") for i in range(5)]), "INVALID_ARGUMENT", "flows"),
    (lambda r: r.register([("h0", "h1", 1)], deadline_s=0), "INVALID_ARGUMENT", "deadline_s"),
    (lambda r: r.register([("h0", "h1", 1)], deadline_s=-1.0), "INVALID_ARGUMENT", "deadline_s"),
    (lambda r: r.register([("h0", "h1", 1)], deadline_s=float("nan")), "INVALID_ARGUMENT", "deadline_s"),
    (lambda r: r.register([("h0", "h1", 1)], deadline_s=float("inf")), "INVALID_ARGUMENT", "deadline_s"),
    (lambda r: r.register([("h0", "h1", 1), ("h2", "h1")], deadline_s=1.0), "INVALID_ARGUMENT", "flows[1].size_bytes"),
    (lambda r: r.register([("h0", "h1")], parent="9.0"), "NOT_FOUND", "parent"),
    (lambda r: r.register([("h0", "h1")], parent="1.5"), "NOT_FOUND", "parent"),
    (lambda r: r.register([("h0", "h1")], parent="1.x"), "INVALID_ARGUMENT", "parent"),
    (lambda r: r.register([("h0", "h1")], external=9), "NOT_FOUND", "external"),
    (lambda r: r.register([("h0", "h1")], external=-1), "INVALID_ARGUMENT", "external"),
    (lambda r: r.register([("h0", "h1")], external=2**32), "INVALID_ARGUMENT", "external"),
    (lambda r: r.register([("h0", "h1")], parent="1.0", external=2), "INVALID_ARGUMENT", "external"),
    (lambda r: r.add_flows("1.0", [("h0", "h1")]), "INVALID_ARGUMENT", "flows[0]"),           # duplicate of flow 0
    (lambda r: r.add_flows("1.0", [("h4", "h5"), ("h4", "h5")]), "INVALID_ARGUMENT", "flows[1]"),
    (lambda r: r.add_flows("1.0", [("h4", "h5", -3)]), "INVALID_ARGUMENT", "flows[0].size_bytes"),
    (lambda r: r.add_flows("1.0", []), "INVALID_ARGUMENT", "flows"),
    (lambda r: r.add_flows("1.0", [("h4", "h5"), ("h5", "h6"), ("h6", "h7")]), "INVALID_ARGUMENT", "flows"),  # 2+3 > 4
    (lambda r: r.add_flows("3.0", [("h4", "h5")]), "NOT_FOUND", "coflow_id"),
    (lambda r: r.add_flows("3", [("h4", "h5")]), "INVALID_ARGUMENT", "coflow_id"),
    (lambda r: r.update("1.0", sizes={2: 5}), "INVALID_ARGUMENT", "sizes[2]"),
    (lambda r: r.update("1.0", sizes={-1: 5}), "INVALID_ARGUMENT", "sizes[-1]"),
    (lambda r: r.update("1.0", sizes={1: -5}), "INVALID_ARGUMENT", "sizes[1]"),
    (lambda r: r.update("1.0", sent={0: -1}), "INVALID_ARGUMENT", "sent_bytes[0]"),
    (lambda r: r.update("1.0", sizes={0: 5}, sent={1: "x"}), "INVALID_ARGUMENT", "sent_bytes[1]"),
    (lambda r: r.update("1.0"), "INVALID_ARGUMENT", "sizes"),
    (lambda r: r.update("1.0", ready={0: 1}), "INVALID_ARGUMENT", "ready[0]"),
    (lambda r: r.update("1.0", ready={2: True}), "INVALID_ARGUMENT", "ready[2]"),
    (lambda r: r.update("1.0", sizes={0: 5}, ready=[0]), "INVALID_ARGUMENT", "ready"),
    (lambda r: r.register([("h0", "h1", 1, "yes")]), "INVALID_ARGUMENT", "flows[0].ready"),
    (lambda r: r.register([("h0", "h1", 1, True, 0)]), "INVALID_ARGUMENT", "flows[0]"),
    (lambda r: r.add_flows("1.0", [("h4", "h5", None, 1)]), "INVALID_ARGUMENT", "flows[0].ready"),
    (lambda r: r.update("2.0", sizes={0: 1}), "NOT_FOUND", "coflow_id"),
    (lambda r: r.unregister("2.0"), "NOT_FOUND", "coflow_id"),
    (lambda r: r.unregister("01.0"), "INVALID_ARGUMENT", "coflow_id"),
    (lambda r: r.get("1.256"), "INVALID_ARGUMENT", "coflow_id"),
])
def test_rejected_requests_change_nothing(reg, call, code, field):
    reg.register([("h0", "h1", 10), ("h2", "h1")])   # 1.0
    rejects(reg, code, field, call, reg)


def test_messages_name_the_problem(reg):
    e = rejects(reg, "INVALID_ARGUMENT", "flows[0].dst", reg.register, [("h0", "nosuch")])
    assert "unknown host 'nosuch'" in e.message
    e = rejects(reg, "INVALID_ARGUMENT", "flows[1]", reg.register, [("h0", "h1"), ("h0", "h1")])
    assert "duplicate flow h0->h1" in e.message and "flows[0]" in e.message
    e = rejects(reg, "INVALID_ARGUMENT", "flows", reg.register, [(f"h{i}", "h7") for i in range(5)])
    assert "5 flows" in e.message and "limit of 4" in e.message


# Multi-wave updates --------------------------------------------------------------------------------

def test_multi_wave_add_flows_and_update(reg):
    c = reg.register([("h0", "h4"), ("h1", "h4")]).cid
    r = reg.add_flows(c, [("h2", "h4", 300)])          # second wave
    assert [f.src for f in r.flows] == ["h0", "h1", "h2"]   # flow ids 0, 1, 2 stable
    r = reg.update(c, sizes={0: 100, 1: 200}, sent={0: 50, 2: 300})
    assert r.clairvoyant and r.total_bytes == 600 and r.total_sent == 350
    assert r.remaining(0) == 50 and r.remaining(2) == 0
    # a restarted task: its flow's size grows, sent restarts from what the new attempt reports
    r = reg.update(c, sizes={0: 150}, sent={0: 0})
    assert r.flows[0] == FlowSpec("h0", "h4", 150) and r.sent_bytes[0] == 0
    assert reg.get(c).to_dict() == r.to_dict()
    assert reg.version == 4


def test_ready_flows_at_registration_and_by_update(reg):
    c = reg.register([("h0", "h4", 10, True), ("h1", "h4")]).cid
    r = reg.add_flows(c, [FlowSpec("h2", "h4", None, True)])
    assert [f.ready for f in r.flows] == [True, False, True]
    r = reg.update(c, ready={1: True, 2: False}, sizes={2: 7})
    assert [f.ready for f in r.flows] == [True, True, False] and r.flows[2].size_bytes == 7
    r = reg.update(c, sizes={0: 20})                  # a size change keeps the flow ready
    assert r.flows[0] == FlowSpec("h0", "h4", 20, True)
    assert [f["ready"] for f in reg.get(c).to_dict()["flows"]] == [True, True, False]


def test_returned_records_are_snapshots(reg):
    r = reg.register([("h0", "h1")])
    r.flows.append(FlowSpec("h5", "h6"))
    r.sent_bytes[0] = 99
    assert len(reg.get(r.cid).flows) == 1 and reg.get(r.cid).sent_bytes == {}


# Events ---------------------------------------------------------------------------------------------

def test_events_after_change_outside_the_lock(reg):
    seen = []

    def sub(event, rec):
        # called outside the state lock: reading the registry from a subscriber works
        seen.append((event, str(rec.cid), len(rec.flows), reg.version))
    unsub = reg.subscribe(sub)
    c = reg.register([("h0", "h1")]).cid
    reg.add_flows(c, [("h2", "h1")])
    reg.update(c, sent={0: 1})
    with pytest.raises(ApiError):
        reg.update(c, sent={9: 1})         # rejected: no event
    reg.unregister(c)
    assert seen == [("register", "1.0", 1, 1), ("add_flows", "1.0", 2, 2), ("update", "1.0", 2, 3),
                    ("unregister", "1.0", 2, 4)]
    unsub()
    reg.register([("h0", "h1")])
    assert len(seen) == 4


def test_failing_subscriber_does_not_fail_the_call(reg, caplog):
    reg.subscribe(lambda e, r: 1 / 0)
    got = []
    reg.subscribe(lambda e, r: got.append(e))
    assert reg.register([("h0", "h1")]).cid == CoflowId(1, 0)
    assert got == ["register"] and "subscriber" in caplog.text


def test_concurrent_registrations_get_distinct_ids_and_ordered_events():
    reg = CoflowRegistry(HOSTS)
    events = []
    reg.subscribe(lambda e, r: events.append(r.cid))
    barrier = threading.Barrier(8)
    out = []

    def worker(i):
        barrier.wait()
        for _ in range(25):
            out.append(reg.register([(f"h{i}", f"h{(i + 1) % 8}")]).cid)
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert len(set(out)) == 200 and reg.version == 200
    assert events == sorted(events)        # delivered in the order the changes happened
    assert {c.external for c in out} == set(range(1, 201))


# Durability -----------------------------------------------------------------------------------------

def test_reopen_rebuilds_coflows_and_next_ids(tmp_path):
    db = str(tmp_path / "reg.sqlite")
    r = CoflowRegistry(HOSTS, db_path=db)
    a = r.register([("h0", "h1", 10), ("h2", "h1")], deadline_s=None).cid
    b = r.register([("h3", "h1", 5)], parent=a, deadline_s=2.5).cid
    assert r.register([("h4", "h5")]).cid == CoflowId(2, 0)
    r.unregister("2.0")
    r.add_flows(a, [("h5", "h1")])
    r.update(a, sizes={1: 20}, sent={0: 7}, ready={1: True})
    r.add_flows(b, [("h6", "h1", 3, True)])
    before = state(r)
    r.close()
    r2 = CoflowRegistry(HOSTS, db_path=db)
    assert state(r2) == before
    assert [f.ready for f in r2.get(a).flows] == [False, True, False]
    assert [f.ready for f in r2.get(b).flows] == [False, True]
    assert r2.get(b).parent == a and r2.get(b).deadline_s == 2.5
    # same next ids: a new job continues after 2 (even though 2.0 was unregistered), a new stage of 1 after 1.1
    assert r2.register([("h0", "h1")]).cid == CoflowId(3, 0)
    assert r2.register([("h0", "h1")], external=1).cid == CoflowId(1, 2)
    assert r2.register([("h0", "h1")], parent="2.0").cid == CoflowId(2, 1)   # finished job still known
    assert r2.version == before[0] + 3
    r2.update(a, ready={1: False})
    r2.close()
    r3 = CoflowRegistry(HOSTS, db_path=db)
    assert [f.ready for f in r3.get(a).flows] == [False, False, False]
    r3.close()


def test_a_database_from_before_ready_flows_opens(tmp_path):
    """A registry database written before the flows' readiness was kept (no flow_ready table)
    opens with every flow not ready, and takes ready flows from then on."""
    import sqlite3
    db = str(tmp_path / "reg.sqlite")
    r = CoflowRegistry(HOSTS, db_path=db)
    a = r.register([("h0", "h1", 10, True)]).cid
    r.close()
    con = sqlite3.connect(db)
    con.execute("DROP TABLE flow_ready")
    con.commit()
    con.close()
    r2 = CoflowRegistry(HOSTS, db_path=db)
    assert r2.get(a).flows[0].ready is False
    r2.update(a, ready={0: True})
    r2.close()
    r3 = CoflowRegistry(HOSTS, db_path=db)
    assert r3.get(a).flows[0].ready is True
    r3.close()


def test_crash_without_close_keeps_committed_changes(tmp_path):
    db = str(tmp_path / "reg.sqlite")
    code = ("import os\nfrom coflow.api.registry import CoflowRegistry\n"
            f"r = CoflowRegistry({HOSTS!r}, db_path={db!r})\n"
            "c = r.register([('h0', 'h1', 1)]).cid\nr.update(c, sent={0: 1})\nos._exit(0)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    r = CoflowRegistry(HOSTS, db_path=db)
    assert [x.to_dict()["sent_bytes"] for x in r.list()] == [1] and r.version == 2
    r.close()


def test_reopen_keeps_every_parent(tmp_path):
    """A child of several parents keeps them all, in order, through a reopen (and its parent is
    the first); a registry that cannot say that would lose a DAG's barrier after a restart."""
    db = str(tmp_path / "reg.sqlite")
    r = CoflowRegistry(HOSTS, db_path=db)
    a = r.register([("h0", "h1", 10)]).cid
    b = r.register([("h2", "h3", 10)], external=1).cid
    c = r.register([("h4", "h5", 10)], parents=[str(b), str(a)]).cid
    assert c == CoflowId(1, 2) and r.get(c).parents == (b, a)
    before = state(r)
    r.close()
    r2 = CoflowRegistry(HOSTS, db_path=db)
    assert state(r2) == before
    assert r2.get(c).parents == (b, a) and r2.get(c).parent == b and r2.get(b).parents == ()
    assert r2.get(c).to_dict()["parents"] == ["1.1", "1.0"]
    r2.close()


def test_second_registry_on_the_same_db_is_refused(tmp_path):
    db = str(tmp_path / "reg.sqlite")
    r = CoflowRegistry(HOSTS, db_path=db)
    with pytest.raises(RegistryDbError, match="in use by another coflow registry"):
        CoflowRegistry(HOSTS, db_path=db)
    r.close()
    CoflowRegistry(HOSTS, db_path=db).close()


def _one_line(e):
    s = str(e.value)
    assert "\n" not in s
    return s


def test_corrupt_and_foreign_databases(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 200)
    with pytest.raises(RegistryDbError) as ei:
        CoflowRegistry(HOSTS, db_path=str(junk))
    assert _one_line(ei).startswith(f"{junk}: not a coflow registry database")
    assert junk.read_bytes() == b"this is not sqlite at all" * 200     # left untouched

    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE users (name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(RegistryDbError) as ei:
        CoflowRegistry(HOSTS, db_path=str(foreign))
    assert "not a coflow registry database" in _one_line(ei) and "users" in str(ei.value)

    other_fmt = tmp_path / "fmt.db"
    con = sqlite3.connect(other_fmt)
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    con.execute("INSERT INTO meta VALUES ('format', 'something-else/3')")
    con.commit()
    con.close()
    with pytest.raises(RegistryDbError, match="something-else/3"):
        CoflowRegistry(HOSTS, db_path=str(other_fmt))

    with pytest.raises(RegistryDbError, match="is a directory"):
        CoflowRegistry(HOSTS, db_path=str(tmp_path))


def test_database_from_another_topology(tmp_path):
    db = str(tmp_path / "reg.sqlite")
    r = CoflowRegistry(HOSTS, db_path=db)
    r.register([("h0", "h7")])
    r.close()
    with pytest.raises(RegistryDbError) as ei:
        CoflowRegistry(HOSTS[:4], db_path=db)
    assert "coflow 1.0 flow 0: host 'h7' is not in the topology" in _one_line(ei)


def test_failed_db_write_leaves_memory_unchanged(tmp_path):
    db = str(tmp_path / "reg.sqlite")
    r = CoflowRegistry(HOSTS, db_path=db)
    r.register([("h0", "h1")])
    before = state(r)
    r._db.execute("DROP TABLE flows")          # the next write fails inside its transaction
    with pytest.raises(sqlite3.Error):
        r.register([("h2", "h3")])
    assert state(r) == before
    r.close()


# Varys deadline admission (scheduler core) -------------------------------------------------------

class Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def test_varys_admission_hand_checked():
    """Hosts h0..h2 with 1 MB/s links, every deadline 1 s, all at t = 1000:
    A h0->h1 2 MB: Γ = 2 s > 1 s -> rejected.
    B h0->h1 0.5 MB: Γ = 0.5 s -> admitted; reserves 0.5 MB/s on h0 up and h1 down.
    C h2->h1 0.6 MB: h1 down has 0.5 MB/s left -> Γ = 1.2 s -> rejected.
    D h2->h1 0.4 MB: Γ = 0.8 s -> admitted (h1 down now has 0.1 MB/s left).
    E h0->h2 0.5 MB: h0 up has 0.5 MB/s left -> Γ = 1.0 s = deadline -> admitted.
    F (no deadline) h0->h1 10 MB: not admission-tested, reserves nothing.
    At t = 1001.5 B, D and E have passed their deadlines: C fits again."""
    clk = Clock(1000.0)
    hosts = ["h0", "h1", "h2"]
    reg = CoflowRegistry(hosts, admit=varys_admission(hosts, 1e6, clock=clk), clock=clk)
    e = rejects(reg, "FAILED_PRECONDITION", "deadline_s", reg.register, [("h0", "h1", 2_000_000)], deadline_s=1.0)
    assert "Γ on an idle fabric: 2 s" in e.message
    assert str(reg.register([("h0", "h1", 500_000)], deadline_s=1.0).cid) == "1.0"
    e = rejects(reg, "FAILED_PRECONDITION", "deadline_s", reg.register, [("h2", "h1", 600_000)], deadline_s=1.0)
    assert "1 admitted deadline coflow(s)" in e.message
    assert str(reg.register([("h2", "h1", 400_000)], deadline_s=1.0).cid) == "2.0"
    assert str(reg.register([("h0", "h2", 500_000)], deadline_s=1.0).cid) == "3.0"
    assert reg.register([("h0", "h1", 10_000_000)]).admitted        # no deadline: not tested
    clk.t = 1001.5
    assert str(reg.register([("h2", "h1", 600_000)], deadline_s=1.0).cid) == "5.0"


def test_varys_admission_counts_sent_bytes_and_checks_growth():
    clk = Clock(0.0)
    hosts = ["h0", "h1", "h2"]
    reg = CoflowRegistry(hosts, admit=varys_admission(hosts, {"h0": 1e6, "h1": 1e6, "h2": 2e6}, clock=clk), clock=clk)
    a = reg.register([("h0", "h1", 1_000_000)], deadline_s=2.0).cid          # reserves 0.5 MB/s
    # growing a deadline coflow re-runs admission: 2.5 MB in 2 s does not fit a 1 MB/s link
    rejects(reg, "FAILED_PRECONDITION", "deadline_s", reg.update, a, sizes={0: 2_500_000})
    rejects(reg, "FAILED_PRECONDITION", "deadline_s", reg.add_flows, a, [("h2", "h1", 1_600_000)])
    rejects(reg, "INVALID_ARGUMENT", "flows[0].size_bytes", reg.add_flows, a, [("h2", "h1")])
    assert reg.add_flows(a, [("h2", "h1", 400_000)]).total_bytes == 1_400_000   # h1 down: 0.7 MB/s
    # at t = 1 half of it is sent: the remaining 0.7 MB over 1 s still reserves 0.7 MB/s of h1 down
    clk.t = 1.0
    reg.update(a, sent={0: 500_000, 1: 200_000})
    rejects(reg, "FAILED_PRECONDITION", "deadline_s", reg.register, [("h2", "h1", 400_000)], deadline_s=1.0)
    assert reg.register([("h2", "h1", 300_000)], deadline_s=1.0).cid == CoflowId(2, 0)


def test_varys_admission_bad_config():
    with pytest.raises(ValueError):
        varys_admission(["h0", "h1"], 0)
    with pytest.raises(ValueError):
        varys_admission(["h0", "h1"], {"h0": 1.0})


def test_shared_registry_primary_writes_backup_follows_and_takes_over(tmp_path):
    """Two controllers on one database: only the leader writes; the other follows with events,
    and after a takeover continues the same coflows with fresh (never reused) ids."""
    db = str(tmp_path / "shared.sqlite")
    lead = {"a": True, "b": False}
    a = CoflowRegistry(HOSTS, db_path=db, shared=True, leader=lambda: lead["a"])
    b = CoflowRegistry(HOSTS, db_path=db, shared=True, leader=lambda: lead["b"])
    seen = []
    b.subscribe(lambda ev, rec: seen.append((ev, str(rec.cid))))
    assert b.follow() == 0
    c1 = a.register([("h0", "h1", 10)]).cid
    c2 = a.register([("h1", "h2", None)]).cid
    a.update(c1, sent={0: 4})
    assert b.follow() == 2 and b.follow() == 0
    assert seen == [("register", "1.0"), ("register", "2.0")]
    assert b.get(c1).sent_bytes == {0: 4}
    # the backup refuses changes, one line, and changes nothing
    with pytest.raises(ApiError) as e:
        b.register([("h0", "h2", 1)])
    assert e.value.code == "FAILED_PRECONDITION" and "backup" in _one_line(e)
    with pytest.raises(ApiError):
        b.unregister(c1)
    assert len(b) == 2 and len(a) == 2
    a.add_flows(c2, [("h2", "h3", 5)])
    a.unregister(c1)
    b.follow()
    assert seen[2:] == [("add_flows", "2.0"), ("unregister", "1.0")]
    # takeover: b writes; ids continue after a's (3, not 1 again); a follows
    lead.update(a=False, b=True)
    c3 = b.register([("h3", "h0", 7)]).cid
    assert c3 == CoflowId(3, 0)
    assert a.follow() == 1 and [str(r.cid) for r in a.list()] == ["2.0", "3.0"]
    b.update(c2, sizes={0: 100})
    a.follow()
    assert a.get(c2).flows[0].size_bytes == 100
    a.close()
    b.close()
    # an unshared registry still holds the database alone
    with pytest.raises(ValueError, match="shared=True needs a db_path"):
        CoflowRegistry(HOSTS, shared=True)


def test_shared_registry_keeps_its_state_when_the_database_is_damaged(tmp_path):
    db = str(tmp_path / "shared.sqlite")
    a = CoflowRegistry(HOSTS, db_path=db, shared=True)
    b = CoflowRegistry(HOSTS, db_path=db, shared=True, leader=lambda: False)
    a.register([("h0", "h1", 10)])
    b.follow()
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = 'other/9' WHERE key = 'format'")
    con.commit()
    con.close()
    with pytest.raises(RegistryDbError, match="not a coflow registry database"):
        b.follow()
    assert [str(r.cid) for r in b.list()] == ["1.0"]
    a.close()
    b.close()


@pytest.mark.parametrize("seed", range(4))
def test_list_shared_reuses_only_unchanged_records(seed, tmp_path):
    """``list_shared`` (the controller's rounds) equals ``list`` after every change; a record
    that did not change since the last call is the same object, one that changed (update,
    add_flows) or came back from the database is a new one, and a departed one is gone."""
    import random
    rng = random.Random(seed)
    r = CoflowRegistry(HOSTS, db_path=str(tmp_path / "reg.db") if seed % 2 else None)
    try:
        prev = {}
        changed = set()
        for step in range(60):
            recs = r.list()
            x = rng.random()
            if x < 0.3 or not recs:
                c = r.register([(HOSTS[rng.randrange(4)], HOSTS[4 + rng.randrange(4)], 1000)]).cid
                changed.add(c)
            elif x < 0.45:
                c = rng.choice(recs).cid
                r.unregister(c)
                changed.add(c)
            elif x < 0.75:
                c = rng.choice(recs).cid
                r.update(c, sent={0: rng.randrange(1000)})
                changed.add(c)
            elif x < 0.85:
                rec = rng.choice(recs)
                used = {(f.src, f.dst) for f in rec.flows}
                free = [(a, b) for a in HOSTS[:4] for b in HOSTS[4:] if (a, b) not in used]
                if free:
                    r.add_flows(rec.cid, [(*rng.choice(free), 10)])
                    changed.add(rec.cid)
            got = r.list_shared()
            assert [g.to_dict() for g in got] == [g.to_dict() for g in r.list()], (seed, step)
            for g in got:
                if g.cid in prev and g.cid not in changed:
                    assert g is prev[g.cid], (seed, step, g.cid)
                elif g.cid in prev:
                    assert g is not prev[g.cid], (seed, step, g.cid)
            prev = {g.cid: g for g in got}
            changed = set()
        assert len(r._shared_snaps) == len(r)     # departed coflows' snapshots are dropped
    finally:
        r.close()

"""The registry and the primary's election in etcd (issue 30, item 4), on a real 3-member etcd
cluster on loopback addresses (127.0.0.1-3; Debian's etcd-server, installed on first use):
backups follow the primary's coflows through a watch; a primary that dies (its lease runs
out) is replaced, the new one continues every acknowledged coflow with the same ids, a
deposed primary can no longer write (fencing), and losing one etcd member loses nothing.
Skips without the etcd binary."""
import os
import shutil
import threading
import time

import pytest
from live import wait_for

from coflow.api.registry import ApiError, RegistryDbError

pytestmark = pytest.mark.skipif(shutil.which("etcd") is None,
                                reason="etcd not found (Debian package etcd-server; `make sysdeps` installs it)")

HOSTS = [f"h{i}" for i in range(8)]
BASE = 31000 + os.getpid() % 400 * 20


@pytest.fixture(scope="module")
def cluster():
    from coflow.api.etcd import LocalCluster
    with LocalCluster(client_port=BASE, peer_port=BASE + 10) as c:
        yield c


_n = [0]


@pytest.fixture
def prefix():
    _n[0] += 1
    return f"/coflow/test-{os.getpid()}-{_n[0]}"


def node(cluster, prefix, name, clock=None):
    from coflow.api.etcd import Election, Etcd
    from coflow.api.etcd_registry import EtcdCoflowRegistry
    e = Etcd(cluster.endpoints())
    el = Election(e, prefix, name, ttl=1).start()
    kw = {"lease_clock": clock} if clock else {}
    reg = EtcdCoflowRegistry(HOSTS, e, prefix, election=el, **kw)
    return e, el, reg



def die(el):
    """A primary that dies: no more keep-alives, no revoke (its lease runs out in etcd)."""
    el._stop.set()
    el._wake.set()
    if el._cancel_watch:
        el._cancel_watch()


def test_backup_follows_and_takes_over(cluster, prefix):
    ea, a_el, a = node(cluster, prefix, "A")
    assert wait_for(a_el.is_leader)
    eb, b_el, b = node(cluster, prefix, "B")
    time.sleep(0.3)
    assert not b_el.is_leader() and b_el.election_id() < a_el.election_id()
    events = []
    b.subscribe(lambda ev, r: events.append((ev, str(r.cid))))
    acked = [str(a.register([("h0", "h1", 1000 + i)], request_id=f"r{i}", lease_s=30).cid) for i in range(5)]
    a.update(acked[0], sent={0: 7}, ready={0: True})
    a.unregister(acked[4])
    assert wait_for(lambda: b.follow() or len(b) == 4)
    assert [str(r.cid) for r in b.list()] == acked[:4] and b.get(acked[0]).sent_bytes == {0: 7}
    assert b.get(acked[0]).flows[0].ready and not b.get(acked[1]).flows[0].ready
    assert ("register", acked[0]) in events       # (5.0 came and went, maybe between two looks)
    with pytest.raises(ApiError) as ei:
        b.register([("h2", "h3", 1)])
    assert ei.value.code == "FAILED_PRECONDITION"
    # the primary dies; the backup's election wins once A's lease is gone
    t0 = time.monotonic()
    die(a_el)
    assert wait_for(b_el.is_leader, 5.0)
    took = time.monotonic() - t0
    print(f"takeover by election: {took:.3f} s (lease ttl 1 s)")
    assert took < 2.5
    assert b_el.election_id() > a_el.election_id()          # P4Runtime: above the old primary
    # fencing: before the new primary wrote anything (the registry's meta is as the deposed
    # one last saw it), the deposed primary's write fails on the election's revision alone
    v = b.version
    with pytest.raises(ApiError) as ei:
        a.leader = lambda: True                               # even if it believed it leads
        a._dirty.clear()
        a.register([("h5", "h6", 1)])
    assert ei.value.code == "FAILED_PRECONDITION"
    b.follow()
    assert b.version == v and len(b) == 4
    b.follow()
    assert [str(r.cid) for r in b.list()] == acked[:4]       # every acknowledged coflow
    # it continues: new ids after the old primary's, a retried Register finds its coflow
    assert str(b.register([("h2", "h3", 1)]).cid) == "6.0"
    assert str(b.register([("h0", "h1", 1001)], request_id="r1", lease_s=30).cid) == acked[1]
    for r in (a, b):
        r.close()
    b_el.stop()
    ea.close()
    eb.close()


def test_reopened_registry_is_the_same(cluster, prefix):
    e, el, a = node(cluster, prefix, "A")
    assert wait_for(el.is_leader)
    a.register([("h0", "h1", 5)], request_id="x", lease_s=9, owner="app")
    c = a.register([("h0", "h2", None)], parent=None)
    d = a.register([("h1", "h2", 1)], parent=str(c.cid))
    a.register([("h1", "h3", 1)], parents=[str(d.cid), str(c.cid)])      # a child of two coflows
    snap = (a.snapshot(), a.next_external)
    a.close()
    from coflow.api.etcd_registry import EtcdCoflowRegistry
    b = EtcdCoflowRegistry(HOSTS, e, prefix, election=el)
    assert (b.snapshot(), b.next_external) == snap
    assert b.get("2.2").parents == (d.cid, c.cid) and b.get("2.2").parent == d.cid
    assert b.register([("h0", "h1", 5)], request_id="x", lease_s=9, owner="app").cid == snap[0][1][0].cid
    b.close()
    el.stop()
    e.close()


@pytest.mark.slow
def test_losing_an_etcd_member_loses_nothing(cluster, prefix):
    """Registers from 4 threads while the etcd member leading the raft group is killed (and
    brought back): every
    acknowledged coflow is in the registry, none twice; the primary keeps its lease."""
    e, el, a = node(cluster, prefix, "A")
    assert wait_for(el.is_leader)
    acked, errors = [], []
    lock = threading.Lock()

    def worker(t):
        for j in range(25):
            end = time.monotonic() + 15
            while True:      # a client retries with its request id while etcd elects a leader
                try:
                    cid = a.register([(f"h{t}", f"h{t + 4}", j)], request_id=f"{t}/{j}")
                    break
                except Exception as ex:  # noqa: BLE001 - counted, retried
                    errors.append(ex)
                    if time.monotonic() > end:
                        cid = None
                        break
                    time.sleep(0.05)
            if cid is not None:
                with lock:
                    acked.append(str(cid.cid))
    ths = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in ths:
        th.start()
    time.sleep(0.1)
    t0 = time.monotonic()
    victim = cluster.leader()            # the raft leader: writes stall until a new one is elected
    assert victim is not None
    cluster.kill(victim)
    for th in ths:
        th.join(60)
    print(f"raft leader (member {victim}) killed: {len(acked)} acked, {len(errors)} failed "
          f"attempts retried; {time.monotonic() - t0:.2f} s to finish")
    assert len(acked) == 100
    cluster.start(victim)
    assert wait_for(el.is_leader, 5)        # the primary kept (or got back) its key
    from coflow.api.etcd_registry import EtcdCoflowRegistry
    fresh = EtcdCoflowRegistry(HOSTS, e, prefix)        # what etcd holds, read anew
    held = [str(r.cid) for r in fresh.list()]
    assert set(acked) <= set(held) and len(acked) == len(set(acked))
    assert len(held) == len(set(r.request_id for r in fresh.list()))      # no duplicate
    fresh.close()
    a.close()
    el.stop()
    e.close()


def test_damaged_registry_in_etcd(cluster, prefix):
    from coflow.api.etcd import Etcd
    from coflow.api.etcd_registry import EtcdCoflowRegistry
    e = Etcd(cluster.endpoints())
    e.put(f"{prefix}/meta".encode(), b"{not json")
    with pytest.raises(RegistryDbError) as ei:
        EtcdCoflowRegistry(HOSTS, e, prefix)
    assert prefix in str(ei.value) and "\n" not in str(ei.value)
    e.delete_prefix(f"{prefix}/".encode())
    e.put(f"{prefix}/coflows/0000000001.000".encode(), b"{}")
    with pytest.raises(RegistryDbError, match="without a meta key"):
        EtcdCoflowRegistry(HOSTS, e, prefix)
    e.close()

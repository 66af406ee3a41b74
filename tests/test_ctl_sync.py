"""The write phase (switch.sync_many) without switches: every Write in flight together, each
switch's cache updated only when its own Write succeeded, locks released on every path, the
incremental diff used only while the cache reflects the last sync."""
import pytest

from coflow.ctl import model as M
from coflow.ctl import translate as TR
from coflow.ctl.switch import SwitchAgent, sync_many
from coflow.dataplane.p4rt import P4RuntimeError


class FakeRequest(list):
    def SerializeToString(self):
        return b"H|" + b"".join(self)


class FakeCodec:
    def add_updates(self, req, ops):
        req.extend(f"{op.type} {op.entity.key}|".encode() for op in ops)


class FakeClient:
    def __init__(self, fail=None):
        self.fail = fail
        self.sent = []
        self.started = 0
        self.connected = True

    def write_request(self):
        return FakeRequest()

    def write_raw_start(self, req):
        self.started += 1
        self.sent.append(req)

        def wait():
            if self.fail:
                raise P4RuntimeError("Write failed", code=self.fail)
        return wait


def agent(name, client, actual, in_sync=True):
    a = SwitchAgent(name, "127.0.0.1:1", 1, 10, codec=FakeCodec(), p4info_path="",
                    bmv2_json_path="", cookie=1)
    a.client = client
    a.state = SwitchAgent.MASTER
    a.actual = actual
    a._in_sync = in_sync
    return a


def ovr(ext, prio):
    return TR.override_entity((ext, 0), prio)


def test_one_failed_write_leaves_the_others_committed():
    want = M.SwitchState.of([ovr(1, 3), ovr(2, 5)])
    ok = agent("ok", FakeClient(), M.SwitchState.of([ovr(1, 3)]))
    bad = agent("bad", FakeClient(fail="UNAVAILABLE"), M.SwitchState.of([ovr(1, 3)]))
    res = sync_many([(ok, want, {ovr(2, 5).key}), (bad, want, {ovr(2, 5).key})])
    assert res["ok"] == (1, None)
    assert res["bad"][0] == 0 and "Write failed" in res["bad"][1]
    assert ok.actual.entities == want.entities and ok.in_sync
    assert bad.actual is None and not bad.in_sync and bad.state == SwitchAgent.DOWN
    assert bad.write_errors == 1 and ok.writes == 1
    for a in (ok, bad):  # no lock left held
        assert a.lock.acquire(blocking=False)
        a.lock.release()
    assert ok.client.sent == [b"H|INSERT " + str(ovr(2, 5).key).encode() + b"|"]


def test_incremental_only_while_in_sync():
    """A stale managed entry outside the changed keys: the incremental diff trusts the cache
    (it reflects the last sync, which had no such entry); a cache that does not (read back)
    gets the full diff, which deletes it."""
    stale = ovr(9, 1)
    want = M.SwitchState.of([ovr(1, 3), ovr(2, 5)])
    a = agent("s", FakeClient(), M.SwitchState.of([ovr(1, 3), stale]), in_sync=True)
    assert a.sync(want, {ovr(2, 5).key}) == (1, None)
    assert stale.key in a.actual.entities
    b = agent("s", FakeClient(), M.SwitchState.of([ovr(1, 3), stale]), in_sync=False)
    assert b.sync(want, {ovr(2, 5).key}) == (2, None)  # the insert and the stale entry's delete
    assert b.actual.entities == want.entities and b.in_sync


def test_nothing_to_write_sends_nothing_and_marks_in_sync():
    want = M.SwitchState.of([ovr(1, 3)])
    a = agent("s", FakeClient(), want.copy(), in_sync=False)
    assert sync_many([(a, want, set())]) == {"s": (0, None)}
    assert a.client.started == 0 and a.in_sync


def test_not_primary_is_skipped_without_waiting():
    a = agent("s", FakeClient(), M.SwitchState())
    a.state = SwitchAgent.BACKUP
    assert sync_many([(a, M.SwitchState.of([ovr(1, 3)]), None)]) == {"s": (0, "not primary")}
    assert a.client.started == 0


def test_permission_denied_makes_a_backup():
    a = agent("s", FakeClient(fail="PERMISSION_DENIED"), M.SwitchState())
    n, err = a.sync(M.SwitchState.of([ovr(1, 3)]))
    assert n == 0 and err and a.state == SwitchAgent.BACKUP and a.actual is None


def test_unexpected_error_releases_every_lock():
    class Boom(FakeClient):
        def write_raw_start(self, req):
            raise RuntimeError("boom")
    first = agent("a", FakeClient(), M.SwitchState())
    second = agent("b", Boom(), M.SwitchState())
    with pytest.raises(RuntimeError):
        sync_many([(first, M.SwitchState.of([ovr(1, 3)]), None),
                   (second, M.SwitchState.of([ovr(1, 3)]), None)])
    for a in (first, second):
        assert a.lock.acquire(blocking=False)
        a.lock.release()
    assert first.actual is None and not first.in_sync  # its Write may have landed: read back


def test_collections_due_run_between_rounds(monkeypatch):
    """Hand-checked: the collection the allocator is about to trigger runs between rounds, the
    youngest generation that covers it: generation 0 past half its threshold, 1 when the next
    generation-0 collection would bring it along, 2 (full) when that one would bring it too
    or when it is pending already (its count past the threshold: CPython runs it at any
    generation-0 collection from then on); nothing when the program turned collection off."""
    import types
    from coflow.ctl import daemon as D
    got = []

    def fake(count, enabled=True):
        return types.SimpleNamespace(get_count=lambda: count, get_threshold=lambda: (700, 10, 10),
                                     isenabled=lambda: enabled, collect=got.append)
    for count, want in [((100, 0, 0), []), ((400, 0, 0), [0]), ((400, 9, 0), [1]),
                        ((100, 9, 0), []), ((400, 9, 9), [2]), ((400, 3, 9), [0]),
                        ((100, 0, 11), [2]), ((100, 9, 9), []),
                        ((400, 9, 9, False), [])]:
        got.clear()
        monkeypatch.setattr(D, "gc", fake(count[:3], *(count[3:] or (True,))))
        D.Controller._collect_between_rounds()
        assert got == want, (count, got)


# --- report_step before coflow_slot ---------------------------------------------------------
# A P4Runtime server may apply a batch's updates in any order (P4Runtime specification,
# "Batching and Ordering of Updates"; p4lang/p4runtime docs/v1/P4Runtime-Spec.adoc): a slot's
# report_step entry is written in a Write that succeeded before the Write that points a coflow
# at the slot, and deleted in one after the Write that stops pointing it there.

class OrderedClient(FakeClient):
    """Records when each Write starts and when its answer is taken; ``fail_at``: the Write (1,
    2, ...) that fails."""

    def __init__(self, fail_at=None):
        super().__init__()
        self.fail_at = fail_at
        self.log = []

    def write_raw_start(self, req):
        self.started += 1
        n = self.started
        self.sent.append(req)
        self.log.append(("start", n))

        def wait():
            self.log.append(("done", n))
            if n == self.fail_at:
                raise P4RuntimeError("Write failed", code="UNKNOWN")
        return wait


def _slot(ext, slot):
    return TR.slot_entity((ext, 0), slot)


def _report(slot, mask=0xFFFF0000):
    from coflow.ctl.digest import report_entity
    return report_entity(slot, mask)


def _writes(client):
    return [req.decode() for req in client.sent]


def test_report_step_is_written_in_a_write_before_the_coflow_slot():
    c = OrderedClient()
    a = agent("s", c, M.SwitchState.of([ovr(1, 3)]))
    want = M.SwitchState.of([ovr(1, 3), ovr(2, 5), _slot(7, 3), _report(3)])
    assert a.sync(want) == (4, None)       # report_step; reset, coflow_slot, override
    w = _writes(c)
    assert len(w) == 2, w
    assert "report_step" in w[0] and "coflow_slot" not in w[0]
    assert "coflow_slot" in w[1] and "report_step" not in w[1] and "override" in w[1]
    assert c.log == [("start", 1), ("done", 1), ("start", 2), ("done", 2)]
    assert a.actual.entities == want.entities and a.in_sync and a.writes == 2
    assert a.lock.acquire(blocking=False)
    a.lock.release()


def test_report_step_is_deleted_in_a_write_after_the_coflow_slot():
    c = OrderedClient()
    a = agent("s", c, M.SwitchState.of([_slot(7, 3), _report(3)]))
    assert a.sync(M.SwitchState.of([])) == (2, None)
    w = _writes(c)
    assert len(w) == 2 and "coflow_slot" in w[0] and "report_step" in w[1], w
    assert w[0].startswith("H|DELETE") and w[1].startswith("H|DELETE")


def test_a_slot_given_to_another_coflow_gets_its_step_first():
    c = OrderedClient()
    a = agent("s", c, M.SwitchState.of([_slot(7, 3), _report(3, 0xFFFF0000)]))
    assert a.sync(M.SwitchState.of([_slot(8, 3), _report(3, 0xFFFFF000)]))[1] is None
    w = _writes(c)
    assert len(w) == 2 and w[0].startswith("H|MODIFY") and "report_step" in w[0], w
    assert "report_step" not in w[1] and w[1].count("coflow_slot") == 2   # delete, insert


def test_no_coflow_slot_write_after_a_failed_report_step_write():
    """The report_step Write fails (in part or whole): the coflow_slot Write is not sent; the
    cache is read back before the next sync, which writes both again in order."""
    c = OrderedClient(fail_at=1)
    a = agent("s", c, M.SwitchState.of([]))
    n, err = a.sync(M.SwitchState.of([_slot(7, 3), _report(3)]))
    assert n == 0 and "Write failed" in err
    assert len(c.sent) == 1 and "report_step" in _writes(c)[0] and "coflow_slot" not in _writes(c)[0]
    assert a.actual is None and not a.in_sync
    assert a.lock.acquire(blocking=False)
    a.lock.release()


def test_a_failed_second_write_leaves_the_first_committed():
    c = OrderedClient(fail_at=2)
    a = agent("s", c, M.SwitchState.of([]))
    n, err = a.sync(M.SwitchState.of([_slot(7, 3), _report(3)]))
    assert n == 0 and "Write failed" in err and len(c.sent) == 2
    assert a.actual is None and a.write_errors == 1 and a.writes == 1


def test_writes_without_report_steps_beside_others_stay_one():
    c = OrderedClient()
    a = agent("s", c, M.SwitchState.of([_report(3, 0xFFFF0000), _slot(7, 3)]))
    assert a.sync(M.SwitchState.of([_report(3, 0xFFFFF000), _slot(7, 3)])) == (1, None)
    assert a.sync(M.SwitchState.of([_report(3, 0xFFFFF000), _slot(7, 3), ovr(1, 2)])) == (1, None)
    assert len(c.sent) == 2


def test_round_io_sends_the_writes_in_turn():
    """With a RoundIO (coflow.ctl.aio) the Writes go out through ``io.run``: each switch's
    second Write in a later call than its first, and none after a failed one."""
    class FakeIO:
        def __init__(self):
            self.calls = []

        def run(self, kind, items):
            self.calls.append([(name, req.decode()) for name, _, _, req in items])
            return [P4RuntimeError("Write failed", code="UNKNOWN") if name == "bad" else None
                    for name, _, _, _ in items]

    io = FakeIO()
    ok = agent("ok", FakeClient(), M.SwitchState.of([]))
    bad = agent("bad", FakeClient(), M.SwitchState.of([]))
    want = M.SwitchState.of([_slot(7, 3), _report(3)])
    res = sync_many([(ok, want, None), (bad, want, None)], io)
    assert res["ok"] == (3, None) and res["bad"][0] == 0
    assert [[n for n, _ in call] for call in io.calls] == [["ok", "bad"], ["ok"]]
    assert "report_step" in io.calls[0][0][1] and "coflow_slot" in io.calls[1][0][1]
    for a in (ok, bad):
        assert a.lock.acquire(blocking=False)
        a.lock.release()

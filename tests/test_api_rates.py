"""The coflow API's rate stream (WatchRates, issue 27) over real gRPC: what a sender learns as
the controller changes its rates, and the malformed and out-of-order cases: unknown coflow,
malformed id, unknown host, a server with no rates, a client that disconnects, a coflow
unregistered mid-stream, a controller restarted mid-stream. The controller's side is a
RateBoard published by hand here (the Controller publishes the same from its plan:
tests/test_ctl_rates.py::test_rate_snapshot_*)."""
import queue
import threading

import pytest
from live import wait_for

from coflow.api.client import CoflowApiError, CoflowClient, RateWatcher
from coflow.api.rates import CoflowRates, FlowRate, RateBoard
from coflow.api.registry import CoflowRegistry
from coflow.api.server import serve

HOSTS = [f"h{i}" for i in range(4)]


def _cr(cid, *flows, prio=None):
    return CoflowRates(cid, tuple(FlowRate(i, a, b, r, lim) for i, a, b, r, lim in flows), prio)


@pytest.fixture
def api(tmp_path):
    reg = CoflowRegistry(HOSTS)
    board = RateBoard()
    server = serve(reg, "127.0.0.1:0", rates=board)
    client = CoflowClient(server.coflow_addresses[0], timeout=5)
    yield reg, board, client, server
    client.close()
    server.stop(None)
    reg.close()


def _reader(stream):
    """The stream's updates in a queue, read by a thread (None at the end, or the error)."""
    q: queue.Queue = queue.Queue()

    def run():
        try:
            for u in stream:
                q.put(u)
            q.put(None)
        except CoflowApiError as e:
            q.put(e)
    threading.Thread(target=run, daemon=True).start()
    return q



def test_one_coflow_follows_the_controllers_changes_then_ends(api):
    reg, board, client, _ = api
    a = str(reg.register([("h0", "h1", 10_000), ("h2", "h1", 5_000)]).cid)
    board.publish({a: _cr(a, (0, "h0", "h1", 1000.0, True), (1, "h2", "h1", 2000.0, True), prio=7)}, 1.0)
    q = _reader(client.watch_rates(a))
    hello = q.get(timeout=5)
    assert hello["coflow_id"] == "" and hello["controller"] == board.instance and hello["epoch"] == 1
    u = q.get(timeout=5)
    assert u["coflow_id"] == a and u["priority"] == 7 and not u["done"]
    assert [(f["flow_id"], f["src"], f["dst"], f["rate_bytes_per_s"], f["limited"]) for f in u["flows"]] == \
        [(0, "h0", "h1", 1000.0, True), (1, "h2", "h1", 2000.0, True)]
    board.publish({a: _cr(a, (0, "h0", "h1", 1000.0, True), (1, "h2", "h1", 2000.0, True), prio=7)}, 2.0)
    board.publish({a: _cr(a, (1, "h2", "h1", 3000.0, True), prio=6)}, 3.0)   # flow 0 done, new rate
    u = q.get(timeout=5)      # the unchanged publication sent nothing: this is the change
    assert u["epoch"] == 2 and u["priority"] == 6 and u["at"] == 3.0
    assert [(f["flow_id"], f["rate_bytes_per_s"]) for f in u["flows"]] == [(1, 3000.0)]
    reg.unregister(a)
    board.publish({}, 4.0)
    u = q.get(timeout=5)
    assert u["coflow_id"] == a and u["done"] and u["flows"] == []
    assert q.get(timeout=5) is None                      # the stream ended cleanly
    assert wait_for(lambda: board.watchers == 0)


def test_a_host_sees_only_the_flows_it_sends(api):
    reg, board, client, _ = api
    a = str(reg.register([("h0", "h1", 10), ("h2", "h1", 10)]).cid)
    b = str(reg.register([("h2", "h3", 10)]).cid)
    q = _reader(client.watch_rates(src="h0"))
    assert q.get(timeout=5)["coflow_id"] == ""
    board.publish({a: _cr(a, (0, "h0", "h1", 100.0, True), (1, "h2", "h1", 200.0, True)),
                   b: _cr(b, (0, "h2", "h3", 300.0, True))}, 1.0)
    u = q.get(timeout=5)
    assert u["coflow_id"] == a and [f["flow_id"] for f in u["flows"]] == [0]
    # b never had a flow of h0's: nothing about it; a's h0 flow finishing is news
    board.publish({a: _cr(a, (1, "h2", "h1", 250.0, True)), b: _cr(b, (0, "h2", "h3", 1.0, True))}, 2.0)
    u = q.get(timeout=5)
    assert u["coflow_id"] == a and u["flows"] == []
    reg.unregister(b)
    reg.unregister(a)
    board.publish({}, 3.0)
    u = q.get(timeout=5)
    assert u["coflow_id"] == a and u["done"]
    with pytest.raises(queue.Empty):
        q.get(timeout=0.5)               # nothing about b, and the all-coflows stream stays open


def test_sincronia_style_unlimited_rates_and_the_class(api):
    """A mode without rate control streams its flows unlimited, with the coflow's class."""
    reg, board, client, _ = api
    a = str(reg.register([("h0", "h1", 10)]).cid)
    board.publish({a: _cr(a, (0, "h0", "h1", 5.0, False), prio=7)}, 1.0)
    q = _reader(client.watch_rates(a))
    q.get(timeout=5)
    u = q.get(timeout=5)
    assert u["priority"] == 7 and u["flows"][0]["limited"] is False


@pytest.mark.parametrize("kw, code, field", [
    ({"cid": "9.0"}, "NOT_FOUND", "coflow_id"),          # never registered
    ({"cid": "07.0"}, "INVALID_ARGUMENT", "coflow_id"),  # malformed
    ({"cid": "x"}, "INVALID_ARGUMENT", "coflow_id"),
    ({"src": "h99"}, "INVALID_ARGUMENT", "src"),          # unknown host
])
def test_malformed_watches_are_one_status_each(api, kw, code, field):
    reg, board, client, _ = api
    reg.register([("h0", "h1", 10)])
    with pytest.raises(CoflowApiError) as e:
        list(client.watch_rates(kw.get("cid"), kw.get("src")))
    assert e.value.code == code and e.value.field == field, e.value
    assert board.watchers == 0


def test_an_unregistered_coflow_is_not_found():
    reg = CoflowRegistry(HOSTS)
    server = serve(reg, "127.0.0.1:0", rates=RateBoard())
    try:
        a = str(reg.register([("h0", "h1", 10)]).cid)
        reg.unregister(a)
        with CoflowClient(server.coflow_addresses[0]) as c, pytest.raises(CoflowApiError) as e:
            list(c.watch_rates(a))
        assert e.value.code == "NOT_FOUND"
    finally:
        server.stop(None)
        reg.close()


def test_a_server_without_rates_says_so():
    reg = CoflowRegistry(HOSTS)
    server = serve(reg, "127.0.0.1:0")
    try:
        with CoflowClient(server.coflow_addresses[0]) as c, pytest.raises(CoflowApiError) as e:
            list(c.watch_rates())
        assert e.value.code == "UNIMPLEMENTED"
    finally:
        server.stop(None)
        reg.close()


def test_a_client_that_disconnects_frees_its_stream(api):
    """Cancelled, or its channel closed without a word: the server's handler ends (its worker
    thread is free again) and the other streams go on."""
    reg, board, client, server = api
    a = str(reg.register([("h0", "h1", 10)]).cid)
    s1 = client.watch_rates(a)
    q1 = _reader(s1)
    q1.get(timeout=5)
    other = CoflowClient(server.coflow_addresses[0])
    q2 = _reader(other.watch_rates())
    q2.get(timeout=5)
    assert wait_for(lambda: board.watchers == 2)
    s1.cancel()
    err = q1.get(timeout=5)
    assert isinstance(err, CoflowApiError) and err.code == "CANCELLED"
    assert wait_for(lambda: board.watchers == 1)
    other.close()                                        # the channel goes away
    assert wait_for(lambda: board.watchers == 0)
    # the service is unharmed
    board.publish({a: _cr(a, (0, "h0", "h1", 7.0, True))}, 1.0)
    q3 = _reader(client.watch_rates(a))
    assert q3.get(timeout=5)["coflow_id"] == "" and q3.get(timeout=5)["flows"][0]["rate_bytes_per_s"] == 7.0


def test_a_controller_restarted_mid_stream(tmp_path):
    """The server (controller) goes away mid-stream: the watcher hears of it at once
    (UNAVAILABLE or CANCELLED, not a hang), reconnects to the restarted one on the same
    address (same registry database: the coflow is still registered), learns the new
    controller's id from the first message and its rates after."""
    db = str(tmp_path / "reg.sqlite")
    sock = f"unix:{tmp_path / 'api.sock'}"
    reg = CoflowRegistry(HOSTS, db_path=db)
    board = RateBoard()
    server = serve(reg, None, [sock], rates=board)
    a = str(reg.register([("h0", "h1", 10)]).cid)
    board.publish({a: _cr(a, (0, "h0", "h1", 100.0, True))}, 1.0)
    got: queue.Queue = queue.Queue()
    errors: queue.Queue = queue.Queue()
    w = RateWatcher(sock, "h0", got.put, errors.put).start()
    try:
        assert got.get(timeout=5)["controller"] == board.instance
        assert got.get(timeout=5)["flows"][0]["rate_bytes_per_s"] == 100.0
        server.stop(None)                                 # the controller dies
        board.close()
        reg.close()
        err = errors.get(timeout=5)
        assert err.code in ("UNAVAILABLE", "CANCELLED"), err
        reg2 = CoflowRegistry(HOSTS, db_path=db)          # restarted: the same coflows
        board2 = RateBoard()
        server = serve(reg2, None, [sock], rates=board2)
        board2.publish({a: _cr(a, (0, "h0", "h1", 250.0, True))}, 2.0)
        hello = got.get(timeout=10)
        assert hello["coflow_id"] == "" and hello["controller"] == board2.instance != board.instance
        u = got.get(timeout=5)
        assert u["coflow_id"] == a and u["flows"][0]["rate_bytes_per_s"] == 250.0
        assert w.streams >= 2
        reg = reg2
    finally:
        w.stop()
        server.stop(None)
        reg.close()


def test_board_publishes_lazily_and_only_changes():
    b = RateBoard()
    calls = []

    def build():
        calls.append(1)
        return {"1.0": _cr("1.0")}
    assert b.publish(build, 1.0)
    assert calls == []                                    # nobody read it: nothing built
    e, at, r = b.snapshot()
    assert (e, at, list(r)) == (1, 1.0, ["1.0"]) and calls == [1]
    b.snapshot()
    assert calls == [1]                                   # built once per publication
    assert not b.publish({"1.0": _cr("1.0")}, 2.0)        # an equal dict: no new epoch
    assert b.snapshot()[0] == 1

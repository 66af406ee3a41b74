"""The coflow API over real gRPC, on 127.0.0.1 (free port) and on a unix socket: round trips,
every malformed-request class (status code + field in the message + registry unchanged), and the
generated code under both protobuf implementations."""
import os
import subprocess
import sys
import threading

import grpc
import pytest

from coflow.api.admission import varys_admission
from coflow.api.client import CoflowApiError, CoflowClient
from coflow.api.registry import CoflowRegistry
from coflow.api.server import pb2, pb2_grpc, serve

HOSTS = [f"h{i}" for i in range(8)]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Clock:
    t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture(params=["tcp", "unix"])
def api(request, tmp_path):
    """(registry, client, raw stub) with a server on a free TCP port or a unix socket."""
    clk = Clock()
    reg = CoflowRegistry(HOSTS, max_flows_per_coflow=16, clock=clk,
                         admit=varys_admission(HOSTS, 1e6, clock=clk))
    sock = str(tmp_path / "api.sock")
    if request.param == "tcp":
        server = serve(reg, "127.0.0.1:0")
        addr = server.coflow_addresses[0]
        assert addr.startswith("127.0.0.1:") and not addr.endswith(":0")
    else:
        server = serve(reg, None, [f"unix:{sock}"])
        addr = f"unix:{sock}"
        assert os.path.exists(sock)
    client = CoflowClient(addr, timeout=5)
    channel = grpc.insecure_channel(addr)
    stub = pb2_grpc.CoflowServiceStub(channel)
    yield reg, client, stub
    client.close()
    channel.close()
    server.stop(None).wait()
    reg.close()


def test_round_trip(api):
    reg, c, _ = api
    cid = c.register([("h0", "h1", 1000), ("h2", "h1", None)])
    assert cid == "1.0" and c.version == 1
    st = c.status(cid)
    assert st == reg.get(cid).to_dict()
    assert st["flows"][1] == {"flow_id": 1, "src": "h2", "dst": "h1", "size_bytes": None, "sent_bytes": 0, "ready": False}
    assert st["clairvoyant"] is False and st["total_bytes"] is None and st["parent"] is None
    child = c.register([("h1", "h3", 5)], parent=cid)
    assert child == "1.1" and c.status(child)["parent"] == "1.0"
    assert c.register([{"src": "h4", "dst": "h5", "size_bytes": 0}], external=1) == "1.2"
    d = c.add_flows(cid, [("h3", "h1", 7)])
    assert [f["flow_id"] for f in d["flows"]] == [0, 1, 2]
    d = c.update(cid, sizes={1: 500}, sent={0: 1000, 2: 3})
    assert d["clairvoyant"] and d["total_bytes"] == 1507 and d["sent_bytes"] == 1003
    assert [x["coflow_id"] for x in c.list()] == ["1.0", "1.1", "1.2"]
    assert c.list() == [r.to_dict() for r in reg.list()]
    gone = c.unregister(child)
    assert gone["coflow_id"] == "1.1"
    assert [x["coflow_id"] for x in c.list()] == ["1.0", "1.2"]
    assert c.version == reg.version == 6


def test_deadline_admission_over_grpc(api):
    reg, c, _ = api
    cid = c.register([("h0", "h1", 500_000)], deadline_s=1.0)
    assert c.status(cid)["deadline_s"] == 1.0 and c.status(cid)["admitted"]
    before = (reg.version, c.list())
    with pytest.raises(CoflowApiError) as ei:
        c.register([("h2", "h1", 600_000)], deadline_s=1.0)      # h1 down: 0.5 MB/s left -> Γ = 1.2 s
    assert ei.value.code == "FAILED_PRECONDITION" and ei.value.field == "deadline_s"
    assert "rejected by admission control" in ei.value.details
    assert (reg.version, c.list()) == before


def _raw(stub, method, **kw):
    req = {"Register": pb2.RegisterRequest, "AddFlows": pb2.AddFlowsRequest, "Update": pb2.UpdateRequest,
           "Unregister": pb2.CoflowRequest, "Status": pb2.CoflowRequest,
           "KeepAlive": pb2.KeepAliveRequest}[method](**kw)
    return getattr(stub, method)(req, timeout=5)


F = pb2.Flow

# (rpc, request fields, status code, field the message names)
MALFORMED = [
    ("unknown host", "Register", dict(flows=[F(src="h0", dst="h1"), F(src="h99", dst="h1")]), "INVALID_ARGUMENT", "flows[1].src"),
    ("negative size", "Register", dict(flows=[F(src="h0", dst="h1", size_bytes=1), F(src="h2", dst="h1", size_bytes=-1)]),
     "INVALID_ARGUMENT", "flows[1].size_bytes"),
    ("empty host", "Register", dict(flows=[F(src="h0")]), "INVALID_ARGUMENT", "flows[0].dst"),
    ("self-loop", "Register", dict(flows=[F(src="h4", dst="h4")]), "INVALID_ARGUMENT", "flows[0].dst"),
    ("duplicate flow", "Register", dict(flows=[F(src="h0", dst="h1"), F(src="h2", dst="h3"), F(src="h0", dst="h1", size_bytes=9)]),
     "INVALID_ARGUMENT", "flows[2]"),
    ("too many flows", "Register", dict(flows=[F(src=f"h{i}", dst=f"h{j}") for i in range(8) for j in range(8) if i != j][:17]),
     "INVALID_ARGUMENT", "flows"),
    ("empty flow list", "Register", dict(flows=[]), "INVALID_ARGUMENT", "flows"),
    ("zero deadline", "Register", dict(flows=[F(src="h0", dst="h1", size_bytes=1)], deadline_s=0.0), "INVALID_ARGUMENT", "deadline_s"),
    ("negative deadline", "Register", dict(flows=[F(src="h0", dst="h1", size_bytes=1)], deadline_s=-2.0), "INVALID_ARGUMENT", "deadline_s"),
    ("nan deadline", "Register", dict(flows=[F(src="h0", dst="h1", size_bytes=1)], deadline_s=float("nan")), "INVALID_ARGUMENT", "deadline_s"),
    ("deadline without sizes", "Register", dict(flows=[F(src="h0", dst="h1")], deadline_s=1.0), "INVALID_ARGUMENT", "flows[0].size_bytes"),
    ("unknown parent", "Register", dict(flows=[F(src="h0", dst="h1")], parent="42.0"), "NOT_FOUND", "parent"),
    ("parent stage never issued", "Register", dict(flows=[F(src="h0", dst="h1")], parent="1.7"), "NOT_FOUND", "parent"),
    ("malformed parent", "Register", dict(flows=[F(src="h0", dst="h1")], parent="1.0.0"), "INVALID_ARGUMENT", "parent"),
    ("unknown job", "Register", dict(flows=[F(src="h0", dst="h1")], external=77), "NOT_FOUND", "external"),
    # several parents (issue 26): the fixture's 1.0 is the only coflow
    ("unknown one of the parents", "Register", dict(flows=[F(src="h0", dst="h1")], parents=["1.0", "1.5"]),
     "NOT_FOUND", "parents[1]"),
    ("unknown sole parent", "Register", dict(flows=[F(src="h0", dst="h1")], parents=["42.0"]), "NOT_FOUND", "parents[0]"),
    ("parent is the coflow itself (a cycle)", "Register", dict(flows=[F(src="h0", dst="h1")], parents=["1.0", "1.1"]),
     "INVALID_ARGUMENT", "parents[1]"),
    ("parent given twice", "Register", dict(flows=[F(src="h0", dst="h1")], parents=["1.0", "1.0"]),
     "INVALID_ARGUMENT", "parents[1]"),
    ("parent and parents disagree", "Register", dict(flows=[F(src="h0", dst="h1")], parent="1.0", parents=["1.7", "1.0"]),
     "INVALID_ARGUMENT", "parent"),
    ("parents of two jobs", "Register", dict(flows=[F(src="h0", dst="h1")], parents=["1.0", "2.0"]),
     "INVALID_ARGUMENT", "parents[1]"),
    ("malformed one of the parents", "Register", dict(flows=[F(src="h0", dst="h1")], parents=["1.0", "1.x"]),
     "INVALID_ARGUMENT", "parents[1]"),
    ("parents and another job", "Register", dict(flows=[F(src="h0", dst="h1")], parents=["1.0"], external=3),
     "INVALID_ARGUMENT", "external"),
    ("external out of range", "Register", dict(flows=[F(src="h0", dst="h1")], external=2**32), "INVALID_ARGUMENT", "external"),
    ("negative external", "Register", dict(flows=[F(src="h0", dst="h1")], external=-1), "INVALID_ARGUMENT", "external"),
    ("unknown coflow add", "AddFlows", dict(coflow_id="5.0", flows=[F(src="h0", dst="h1")]), "NOT_FOUND", "coflow_id"),
    ("malformed coflow id", "AddFlows", dict(coflow_id="five", flows=[F(src="h0", dst="h1")]), "INVALID_ARGUMENT", "coflow_id"),
    ("empty coflow id", "Status", dict(coflow_id=""), "INVALID_ARGUMENT", "coflow_id"),
    ("coflow id internal too wide", "Status", dict(coflow_id="1.256"), "INVALID_ARGUMENT", "coflow_id"),
    ("coflow id external too wide", "Unregister", dict(coflow_id="4294967296.0"), "INVALID_ARGUMENT", "coflow_id"),
    ("coflow id with sign", "Unregister", dict(coflow_id="-1.0"), "INVALID_ARGUMENT", "coflow_id"),
    ("duplicate of an existing flow", "AddFlows", dict(coflow_id="1.0", flows=[F(src="h2", dst="h1")]), "INVALID_ARGUMENT", "flows[0]"),
    ("added flow unknown host", "AddFlows", dict(coflow_id="1.0", flows=[F(src="h3", dst="nope")]), "INVALID_ARGUMENT", "flows[0].dst"),
    ("added empty list", "AddFlows", dict(coflow_id="1.0", flows=[]), "INVALID_ARGUMENT", "flows"),
    ("added too many", "AddFlows", dict(coflow_id="1.0", flows=[F(src=f"h{i}", dst=f"h{j}") for i in range(3, 8)
                                                                 for j in range(8) if i != j][:15]), "INVALID_ARGUMENT", "flows"),
    ("update unknown flow", "Update", dict(coflow_id="1.0", sizes={2: 10}), "INVALID_ARGUMENT", "sizes[2]"),
    ("update negative size", "Update", dict(coflow_id="1.0", sizes={1: -10}), "INVALID_ARGUMENT", "sizes[1]"),
    ("update negative sent", "Update", dict(coflow_id="1.0", sent_bytes={0: -1}), "INVALID_ARGUMENT", "sent_bytes[0]"),
    ("update nothing", "Update", dict(coflow_id="1.0"), "INVALID_ARGUMENT", "sizes"),
    ("update unknown coflow", "Update", dict(coflow_id="9.9", sizes={0: 1}), "NOT_FOUND", "coflow_id"),
    ("unregister unknown", "Unregister", dict(coflow_id="2.0"), "NOT_FOUND", "coflow_id"),
    ("status unknown", "Status", dict(coflow_id="3.1"), "NOT_FOUND", "coflow_id"),
    # leases and request ids (issue 30)
    ("negative lease", "Register", dict(flows=[F(src="h0", dst="h1")], lease_s=-1.0), "INVALID_ARGUMENT", "lease_s"),
    ("zero lease", "Register", dict(flows=[F(src="h0", dst="h1")], lease_s=0.0), "INVALID_ARGUMENT", "lease_s"),
    ("nan lease", "Register", dict(flows=[F(src="h0", dst="h1")], lease_s=float("nan")), "INVALID_ARGUMENT", "lease_s"),
    ("request id too long", "Register", dict(flows=[F(src="h0", dst="h1")], request_id="r" * 129),
     "INVALID_ARGUMENT", "request_id"),
    ("request id not printable", "Register", dict(flows=[F(src="h0", dst="h1")], request_id="a\nb"),
     "INVALID_ARGUMENT", "request_id"),
    ("keepalive malformed id", "KeepAlive", dict(coflow_ids=["1.0", "x"]), "INVALID_ARGUMENT", "coflow_ids[1]"),
    ("keepalive nothing", "KeepAlive", dict(coflow_ids=[]), "INVALID_ARGUMENT", "coflow_ids"),
]


@pytest.mark.parametrize("name,method,fields,code,field", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_requests(api, name, method, fields, code, field):
    reg, c, stub = api
    c.register([("h0", "h1", 10), ("h2", "h1")])                # 1.0
    before = (reg.snapshot(), stub.List(pb2.ListRequest(), timeout=5))
    with pytest.raises(grpc.RpcError) as ei:
        _raw(stub, method, **fields)
    e = ei.value
    assert e.code() == getattr(grpc.StatusCode, code), (e.code(), e.details())
    assert e.details().startswith(field + ": "), e.details()
    assert "\n" not in e.details()
    after = (reg.snapshot(), stub.List(pb2.ListRequest(), timeout=5))
    assert after == before
    assert after[1].version == 1


def test_child_of_several_parents(api):
    """A child with a barrier on two coflows: ``parents`` over gRPC, the reply and Status list
    both, ``parent`` (deprecated) is the first; the deprecated field alone still works, and with
    both fields ``parent`` must be ``parents[0]``."""
    reg, c, stub = api
    root = c.register([("h0", "h1", 10)])
    a = c.register([("h2", "h3", 10)], parent=root)                       # the old field alone
    b = c.register([("h4", "h5", 10)], parents=[root])
    assert (root, a, b) == ("1.0", "1.1", "1.2") and c.status(a)["parents"] == ["1.0"]
    d = c.register_coflow([("h6", "h7", 10)], parents=[b, a])
    assert d["coflow_id"] == "1.3" and d["parents"] == ["1.2", "1.1"] and d["parent"] == "1.2"
    assert c.status("1.3") == reg.get("1.3").to_dict() == d
    r = _raw(stub, "Register", flows=[F(src="h0", dst="h2")], parent="1.1", parents=["1.1", "1.3"])
    assert r.coflow.coflow_id == "1.4" and list(r.coflow.parents) == ["1.1", "1.3"] and r.coflow.parent == "1.1"
    assert [x["parents"] for x in c.list()] == [[], ["1.0"], ["1.0"], ["1.2", "1.1"], ["1.1", "1.3"]]


def test_client_error_carries_code_and_field(api):
    _, c, _ = api
    with pytest.raises(CoflowApiError) as ei:
        c.register([("h0", "h1", 1), ("h2", "h1", -5)])
    assert ei.value.code == "INVALID_ARGUMENT" and ei.value.field == "flows[1].size_bytes"
    assert str(ei.value) == "INVALID_ARGUMENT: flows[1].size_bytes: must be >= 0"
    with pytest.raises(CoflowApiError) as ei:
        c.status("12.0")
    assert ei.value.code == "NOT_FOUND" and ei.value.field == "coflow_id"
    with pytest.raises(CoflowApiError) as ei:
        c.register([("h0", "h1", "big")])                      # caught before the wire
    assert ei.value.code == "INVALID_ARGUMENT" and ei.value.field == "flows[0]"


def test_unreachable_server_is_one_clean_error(tmp_path):
    with CoflowClient(f"unix:{tmp_path}/nobody.sock", timeout=2) as c:
        with pytest.raises(CoflowApiError) as ei:
            c.list()
    assert ei.value.code == "UNAVAILABLE" and "\n" not in str(ei.value)


def test_concurrent_clients(api):
    reg, c, _ = api
    addr = c.address
    errors = []

    def worker(i):
        try:
            with CoflowClient(addr, timeout=10) as cc:
                for j in range(10):
                    cid = cc.register([(f"h{i}", f"h{(i + j % 7 + 1) % 8}", j)])
                    cc.update(cid, sent={0: j})
        except Exception as e:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errors
    assert len(reg.list()) == 40 and reg.version == 80
    assert sorted(x["coflow_id"] for x in c.list()) == sorted(f"{i}.0" for i in range(1, 41))


def test_second_server_on_the_same_port_fails():
    reg = CoflowRegistry(HOSTS)
    s1 = serve(reg, "127.0.0.1:0")
    try:
        with pytest.raises(OSError, match="cannot listen on 127.0.0.1:"):
            serve(reg, s1.coflow_addresses[0])
        with pytest.raises(OSError, match="does not exist"):
            serve(reg, None, ["unix:/nonexistent-dir-coflow/api.sock"])
    finally:
        s1.stop(None)


PY_IMPL_SCRIPT = r"""
from coflow.dataplane.pb import p4runtime_pb2  # the controller's P4Runtime modules in the same process
from google.protobuf.internal import api_implementation
from coflow.api.registry import CoflowRegistry
from coflow.api.server import serve
from coflow.api.client import CoflowClient, CoflowApiError
reg = CoflowRegistry(["h0", "h1"])
s = serve(reg, "127.0.0.1:0")
with CoflowClient(s.coflow_addresses[0]) as c:
    cid = c.register([("h0", "h1", 5)])
    assert c.status(cid)["total_bytes"] == 5
    try:
        c.register([("h0", "h0")])
    except CoflowApiError as e:
        assert e.code == "INVALID_ARGUMENT" and e.field == "flows[0].dst"
    else:
        raise SystemExit("no error")
s.stop(None)
req = p4runtime_pb2.ReadRequest(device_id=1)
assert p4runtime_pb2.ReadRequest.FromString(req.SerializeToString()).device_id == 1
print("ok", api_implementation.Type())
"""


@pytest.mark.parametrize("impl", ["upb", "python"])
def test_api_and_p4runtime_modules_share_a_process(impl):
    """The coflow API's and the P4Runtime stubs (both generated here) work together under
    either protobuf implementation: nothing forces the pure-Python one any more."""
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=impl)
    out = subprocess.run([sys.executable, "-c", PY_IMPL_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == f"ok {impl}"


def test_generated_code_under_upb():
    from google.protobuf.internal import api_implementation
    if api_implementation.Type() != "upb":
        env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
        code = ("from google.protobuf.internal import api_implementation as a\n"
                "from coflow.api.server import pb2\n"
                "m = pb2.RegisterRequest(flows=[pb2.Flow(src='a', dst='b', size_bytes=-1)], deadline_s=1.5)\n"
                "m2 = pb2.RegisterRequest.FromString(m.SerializeToString())\n"
                "assert m2.flows[0].size_bytes == -1 and m2.HasField('deadline_s') and not m2.HasField('external')\n"
                "print(a.Type())\n")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == "upb"
    else:
        m = pb2.RegisterRequest(flows=[pb2.Flow(src="a", dst="b", size_bytes=-1)], deadline_s=1.5)
        m2 = pb2.RegisterRequest.FromString(m.SerializeToString())
        assert m2.flows[0].size_bytes == -1 and m2.HasField("deadline_s") and not m2.HasField("external")

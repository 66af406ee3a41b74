"""Identities, TLS, authorization and quotas on the coflow API (issue 30, item 3), and gRPC's
standard health and reflection services. Every unauthenticated or unauthorized call is
answered with its status code and one line, and changes nothing."""
import json

import grpc
import pytest

from coflow.api import certs
from coflow.api.auth import Identities, new_token, token_hash
from coflow.api.client import CoflowApiError, CoflowClient
from coflow.api.registry import CoflowRegistry
from coflow.api.server import pb2, pb2_grpc, serve

HOSTS = [f"h{i}" for i in range(8)]
TOK = {"a": "token-of-a", "b": "token-of-b", "ops": "token-of-ops"}


@pytest.fixture(scope="module")
def pki():
    ca = certs.make_ca("coflow test CA")
    return ca, certs.issue(ca, "coflow-api", sans=("127.0.0.1", "localhost"))


def apps_doc():
    return {"format": "coflow-apps/1", "apps": [
        {"name": "a", "token_sha256": token_hash(TOK["a"]), "max_coflows": 2, "max_flows": 3},
        {"name": "b", "token_sha256": token_hash(TOK["b"])},
        {"name": "ops", "token_sha256": token_hash(TOK["ops"]), "admin": True}]}


@pytest.fixture
def api(pki, tmp_path):
    ca, srv = pki
    ids = Identities.parse(apps_doc())
    reg = CoflowRegistry(HOSTS, quota=ids.quota, default_lease_s=60)
    sock = str(tmp_path / "api.sock")
    server = serve(reg, "127.0.0.1:0", [f"unix:{sock}"], tls=(srv.cert, srv.key), identities=ids)
    addr = server.coflow_addresses[0]
    clients = {n: CoflowClient(addr, timeout=5, token=t, ca=ca.cert, keepalive=False) for n, t in TOK.items()}
    clients["anon"] = CoflowClient(addr, timeout=5, ca=ca.cert, keepalive=False)
    clients["forged"] = CoflowClient(addr, timeout=5, token="not-a-token", ca=ca.cert, keepalive=False)
    clients["unix-a"] = CoflowClient(f"unix:{sock}", timeout=5, token=TOK["a"], keepalive=False)
    yield reg, clients, server, ca
    for c in clients.values():
        c.close()
    server.stop(None).wait()
    reg.close()


def state(reg):
    return reg.snapshot(), reg.next_external, {str(r.cid): reg.lease_remaining(r.cid) is not None
                                               for r in reg.list()}


def test_owner_recorded_over_tls_and_unix(api):
    reg, c, _, _ = api
    d = c["a"].register_coflow([("h0", "h1", 10)])
    assert d["owner"] == "a" and reg.get(d["coflow_id"]).owner == "a"
    d2 = c["unix-a"].register_coflow([("h2", "h1", 10)])       # the same identity on the unix socket
    assert d2["owner"] == "a"
    assert [x["owner"] for x in c["b"].list()] == ["a", "a"]    # every app reads all


CALLS = [
    ("Register", lambda cl: cl.register([("h4", "h5", 1)])),
    ("AddFlows", lambda cl: cl.add_flows("1.0", [("h6", "h7", 1)])),
    ("Update", lambda cl: cl.update("1.0", sizes={0: 99})),
    ("Unregister", lambda cl: cl.unregister("1.0")),
    ("Status", lambda cl: cl.status("1.0")),
    ("List", lambda cl: cl.list()),
    ("KeepAlive", lambda cl: cl.keep_alive(["1.0"])),
]


@pytest.mark.parametrize("who", ["anon", "forged"])
@pytest.mark.parametrize("name,call", CALLS, ids=[x[0] for x in CALLS])
def test_unauthenticated_changes_nothing(api, who, name, call):
    reg, c, _, _ = api
    c["a"].register([("h0", "h1", 10)])
    before = state(reg)
    with pytest.raises(CoflowApiError) as ei:
        call(c[who])
    assert ei.value.code == "UNAUTHENTICATED" and ei.value.field == "authorization", ei.value
    assert "\n" not in str(ei.value)
    assert state(reg) == before


def test_malformed_authorization_header(api):
    reg, c, server, ca = api
    ch = grpc.secure_channel(server.coflow_addresses[0], grpc.ssl_channel_credentials(ca.cert))
    stub = pb2_grpc.CoflowServiceStub(ch)
    try:
        for md in ((("authorization", "Basic abc"),), (("authorization", "Bearer "),),
                   (("authorization", f"Bearer {TOK['a']}"), ("authorization", f"Bearer {TOK['b']}"))):
            with pytest.raises(grpc.RpcError) as ei:
                stub.List(pb2.ListRequest(), metadata=md, timeout=5)
            assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert ei.value.details().startswith("authorization: ")
    finally:
        ch.close()


@pytest.mark.parametrize("name,call", [x for x in CALLS if x[0] in ("AddFlows", "Update", "Unregister", "KeepAlive")],
                         ids=["AddFlows", "Update", "Unregister", "KeepAlive"])
def test_an_app_changes_only_its_own_coflows(api, name, call):
    reg, c, _, _ = api
    assert c["a"].register([("h0", "h1", 10)]) == "1.0"
    before = state(reg)
    with pytest.raises(CoflowApiError) as ei:
        call(c["b"])
    assert ei.value.code == "PERMISSION_DENIED", ei.value
    assert state(reg) == before
    call(c["a"])                                   # the owner may
    if name != "Unregister":
        c["ops"].unregister("1.0")                 # and an admin may change anyone's


def test_keepalive_without_ids_renews_the_callers_coflows(api):
    reg, c, _, _ = api
    a1 = c["a"].register([("h0", "h1", 10)])
    b1 = c["b"].register([("h2", "h3", 10)])
    assert c["a"].keep_alive() == ([a1], [])
    assert c["b"].keep_alive() == ([b1], [])


def test_quota_of_coflows_and_flows(api):
    reg, c, _, _ = api
    c["a"].register([("h0", "h1", 10), ("h0", "h2", 10)])
    with pytest.raises(CoflowApiError) as ei:
        c["a"].register([("h3", "h4", 1), ("h3", "h5", 1)])          # 4 flows > 3
    assert ei.value.code == "RESOURCE_EXHAUSTED" and ei.value.field == "quota"
    c["a"].register([("h3", "h4", 1)])                                # 2 coflows, 3 flows
    before = state(reg)
    with pytest.raises(CoflowApiError) as ei:
        c["a"].register([("h5", "h6", 1)])                            # a 3rd coflow
    assert ei.value.code == "RESOURCE_EXHAUSTED" and "quota is 2" in ei.value.details
    with pytest.raises(CoflowApiError) as ei:
        c["a"].add_flows("1.0", [("h5", "h6", 1)])                    # a 4th flow
    assert ei.value.code == "RESOURCE_EXHAUSTED"
    assert state(reg) == before
    c["b"].register([("h5", "h6", 1)])                                # others are not limited by a's
    c["a"].unregister("1.0")
    c["a"].register([("h5", "h6", 1)])                                # room again


def test_plaintext_client_cannot_talk_to_the_tls_port(api):
    _, c, server, _ = api
    with CoflowClient(server.coflow_addresses[0], timeout=2, token=TOK["a"], keepalive=False) as cl:
        with pytest.raises(CoflowApiError) as ei:
            cl.list()
    assert ei.value.code == "UNAVAILABLE"


def test_tokens_never_in_clear_on_a_network():
    ids = Identities.parse(apps_doc())
    reg = CoflowRegistry(HOSTS)
    with pytest.raises(ValueError, match="in clear"):
        serve(reg, "0.0.0.0:0", identities=ids)
    s = serve(reg, "127.0.0.1:0", identities=ids)           # loopback: allowed
    s.stop(None).wait()


def test_health_and_reflection_without_identities(api):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
    _, _, server, ca = api
    ch = grpc.secure_channel(server.coflow_addresses[0], grpc.ssl_channel_credentials(ca.cert))
    try:
        h = health_pb2_grpc.HealthStub(ch)
        for svc in ("", "coflow.v1.CoflowService"):
            assert h.Check(health_pb2.HealthCheckRequest(service=svc), timeout=5).status == \
                health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as ei:
            h.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=5)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        server.coflow_health.set("coflow.v1.CoflowService", health_pb2.HealthCheckResponse.NOT_SERVING)
        assert h.Check(health_pb2.HealthCheckRequest(service="coflow.v1.CoflowService"), timeout=5).status == \
            health_pb2.HealthCheckResponse.NOT_SERVING
        r = reflection_pb2_grpc.ServerReflectionStub(ch)
        reqs = [reflection_pb2.ServerReflectionRequest(list_services=""),
                reflection_pb2.ServerReflectionRequest(file_containing_symbol="coflow.v1.CoflowService")]
        out = list(r.ServerReflectionInfo(iter(reqs), timeout=5))
        names = {s.name for s in out[0].list_services_response.service}
        assert {"coflow.v1.CoflowService", "grpc.health.v1.Health"} <= names
        from google.protobuf import descriptor_pb2
        fd = descriptor_pb2.FileDescriptorProto.FromString(out[1].file_descriptor_response.file_descriptor_proto[0])
        assert fd.package == "coflow.v1" and "KeepAlive" in [m.name for m in fd.service[0].method]
    finally:
        ch.close()


@pytest.mark.parametrize("doc,msg", [
    ({"apps": []}, "not a coflow apps file"),
    ({"format": "coflow-apps/1", "apps": []}, "non-empty"),
    ({"format": "coflow-apps/1", "apps": [{"name": "x"}]}, "apps[0].token_sha256"),
    ({"format": "coflow-apps/1", "apps": [{"name": "", "token_sha256": "0" * 64}]}, "apps[0].name"),
    ({"format": "coflow-apps/1", "apps": [{"name": "x", "token_sha256": "0" * 64, "max_coflows": -1}]},
     "apps[0].max_coflows"),
    ({"format": "coflow-apps/1", "apps": [{"name": "x", "token_sha256": "0" * 64, "admin": "yes"}]}, "apps[0].admin"),
    ({"format": "coflow-apps/1", "apps": [{"name": "x", "token_sha256": "0" * 64, "extra": 1}]}, "unknown key"),
    ({"format": "coflow-apps/1", "apps": [{"name": "x", "token_sha256": "0" * 64},
                                          {"name": "x", "token_sha256": "1" * 64}]}, "appears twice"),
])
def test_malformed_apps_files(tmp_path, doc, msg):
    p = tmp_path / "apps.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as ei:
        Identities.load(str(p))
    assert msg in str(ei.value) and str(p) in str(ei.value) and "\n" not in str(ei.value)
    p.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        Identities.load(str(p))


def test_new_token_matches_its_hash():
    t, h = new_token()
    assert len(t) >= 40 and h == token_hash(t)
    # never read as an option on a command line (1 in 64 drew a leading "-" before)
    assert not any(new_token()[0].startswith("-") for _ in range(2000))
    ids = Identities.parse({"format": "coflow-apps/1", "apps": [{"name": "x", "token_sha256": h}]})
    assert ids.authenticate([("authorization", f"Bearer {t}")]).name == "x"

"""Live (issue 30, item 3): the API's gRPC health status follows the controller's role: SERVING
on the primary, NOT_SERVING on a backup (whose API refuses changes), and the backup turns
SERVING when the primary stops. Two controllers on one BMv2 (zero ports). Skips without BMv2
or the P4 build."""
import os
import time



from live import BMV2_JSON, P4INFO, bmv2_marks

pytestmark = bmv2_marks()


def test_health_follows_the_role():
    from dataclasses import replace

    from grpc_health.v1 import health, health_pb2

    from coflow import topology as T
    from coflow.ctl.bmv2 import Bmv2
    from coflow.ctl.daemon import Controller
    from coflow.topology import Topology
    t = T.bigswitch(2)
    k = 1300 + os.getpid() % 500
    t = Topology(t.name, t.kind, t.params, t.hosts, [replace(s, device_id=s.device_id + k) for s in t.switches],
                 t.links)
    sw = Bmv2(t.switches[0].device_id).start()
    addrs = {t.switches[0].name: sw.address}
    svc = "coflow.v1.CoflowService"
    hp, hb = health.HealthServicer(), health.HealthServicer()

    def status(h):
        return h.Check(health_pb2.HealthCheckRequest(service=svc), None).status
    p = Controller(t, "dclas", P4INFO, BMV2_JSON, addrs, election_id=20).start()
    b = Controller(t, "dclas", P4INFO, BMV2_JSON, addrs, election_id=10).start()
    try:
        p.set_health(hp, svc)
        b.set_health(hb, svc)
        assert status(hp) == health_pb2.HealthCheckResponse.SERVING
        assert status(hb) == health_pb2.HealthCheckResponse.NOT_SERVING
        p.stop()
        end = time.monotonic() + 5
        while time.monotonic() < end and status(hb) != health_pb2.HealthCheckResponse.SERVING:
            time.sleep(0.05)
        assert status(hb) == health_pb2.HealthCheckResponse.SERVING
    finally:
        p.stop()
        b.stop()
        sw.stop()

"""Live (issue 30, item 3): P4Runtime channels over TLS where the switch offers it. A BMv2
started with ``--grpc-server-ssl`` and client authentication (certificates made for the test):
the controller with the CA and its client certificate becomes primary and installs its state;
one without TLS, or with TLS but no client certificate, never gets a channel (nothing written).
Skips loudly without the toolchain or the compiled pipeline."""
import os

import pytest

from coflow.dataplane import toolchain
from live import BMV2_JSON, P4INFO, bmv2_marks

pytestmark = bmv2_marks()


def test_p4runtime_over_mutual_tls(tmp_path):
    from dataclasses import replace

    from coflow import topology as T
    from coflow.api import certs
    from coflow.ctl.bmv2 import Bmv2
    from coflow.ctl.daemon import Controller
    from coflow.dataplane.p4rt import ChannelTls
    from coflow.topology import Topology
    ca = certs.make_ca("p4rt test CA")
    srv = certs.write(ca, certs.issue(ca, "switch", sans=("127.0.0.1", "localhost")), str(tmp_path), "switch")
    cli = certs.write(ca, certs.issue(ca, "controller", sans=(), client=True), str(tmp_path), "controller")
    t = T.bigswitch(2)
    k = 900 + os.getpid() % 500
    t = Topology(t.name, t.kind, t.params, t.hosts, [replace(s, device_id=s.device_id + k) for s in t.switches],
                 t.links)
    sw = Bmv2(t.switches[0].device_id, target_args=tuple(toolchain.grpc_tls_args(
        srv["ca"], srv["cert"], srv["key"], client_auth=True))).start()
    addrs = {t.switches[0].name: sw.address}
    try:
        for tls in (None, ChannelTls.from_files(cli["ca"])):     # plaintext; TLS without a client cert
            c = Controller(t, "dclas", P4INFO, BMV2_JSON, addrs, start_timeout=3, p4rt_tls=tls)
            with pytest.raises(RuntimeError, match="not reachable"):
                c.start()
        c = Controller(t, "sebf", P4INFO, BMV2_JSON, addrs, start_timeout=10,
                       p4rt_tls=ChannelTls.from_files(cli["ca"], cli["cert"], cli["key"]))
        c.start()
        try:
            ag = c.agents[t.switches[0].name]
            assert ag.state == ag.MASTER and ag.pipeline_pushes == 1
            c.registry.register([("h0", "h1", 1000)])
            c.round()
            assert len(ag.read_state().of_kind("meter")) == 1      # read back over TLS
        finally:
            c.stop()
    finally:
        sw.stop()

"""Report digests on BMv2 with the controller (issue 29): D-CLAS in digest mode (``digest=1``)
against two BMv2 edges driven by real packets (PacketOuts into ingress at ``--cpu-port``): the
controller enables the digest, writes the report steps, and a coflow whose bytes on one edge
pass Q1 is demoted from the digest BMv2 sent, with no counter read after the connections'
first polls; its override goes to the other edge. The PTF test ptf-tests/test_report.py
checks the digest itself packet by packet."""
import time

import pytest

from coflow import topology as T
from live import BMV2_JSON, P4INFO, bmv2_marks, offset_ids, wait_for

pytestmark = bmv2_marks()

CPU_PORT = 255


def _frame(cid, length, dst_ip):
    from scapy.all import IP, UDP, Ether, Raw, raw
    from coflow.dataplane import packet as pk
    p = Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / IP(
        src="10.255.0.1", dst=dst_ip, options=[pk.coflow_option(pk.CoflowId(*cid))]) / UDP()
    return raw(p / Raw(b"\0" * (length - len(p))))


@pytest.fixture
def fabric():
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl.bmv2 import Bmv2
    from coflow.ctl.daemon import Controller
    with open(P4INFO) as f:
        if "report_digest_t" not in f.read():
            pytest.skip("build/coflow.p4info.txt without the report digest: run `make p4`")
    topo = offset_ids(T.leafspine(2, 1, 2), 4100 + 10 * (time.time_ns() % 50))
    sws = [Bmv2(s.device_id, target_args=("--cpu-port", str(CPU_PORT))).start() for s in topo.switches]
    hosts = [h.name for h in topo.hosts]
    reg = CoflowRegistry(hosts)
    # a sends from both edges (hosts 0 and 3: e1 gets its override before its first byte)
    a = reg.register([(hosts[0], hosts[2], None), (hosts[3], hosts[1], None)]).cid
    b = reg.register([(hosts[1], hosts[3], None)]).cid
    ctl = Controller(topo, "dclas", P4INFO, BMV2_JSON,
                     {s.name: sw.address for s, sw in zip(topo.switches, sws)}, registry=reg,
                     settings={"audit_s": "0", "telemetry_s": "0", "Q1": "4096", "digest": "1",
                               "digest_resync_s": "1000"})
    try:
        ctl.start(loop=False)
        yield ctl, topo, (a, b)
    finally:
        ctl.stop()
        reg.close()
        for sw in sws:
            sw.stop()


def test_bmv2_digest_demotes_without_a_read(fabric):
    ctl, topo, (a, b) = fabric
    ctl.round()
    e0, e1 = ctl.edges
    ca = (a.external, a.internal)
    polls = dict(ctl.digest.polls)
    assert polls.get("connected") == 2 and "clock" not in polls
    dst = topo.hosts[-1].ip
    lists0 = ctl.agents[e0].digests.lists
    for _ in range(5):                          # 5 x 1000 bytes: past Q1 = 4096 on e0
        ctl.agents[e0].client.packet_out(_frame(ca, 1000, dst))
    step = ctl.digest.steps[ctl.slots.slot[ca]]
    assert 1000 >= step            # every packet crosses a step boundary: one digest each
    assert wait_for(lambda: ctl.agents[e0].digests.lists >= lists0 + 5)
    time.sleep(0.1)
    ctl.round()
    assert ctl.digest.polls == polls            # no Read: the digests were enough
    assert ctl._queues[ca] == 2 and ctl._queues[(b.external, b.internal)] == 1
    assert ca in ctl._overrides[e1] and ca not in ctl._overrides[e0]
    assert ctl.coord.local_bytes(e0, ctl.slots.slot[ca]) == 5000 & ~(step - 1)
    assert ctl.agents[e0].digests.errors == 0 and ctl.agents[e0].digests.missed == 0


def test_bmv2_digest_entry_semantics_equal_the_emulators():
    """The DigestEntry write sequence tests/test_ctl_digest_emu.py runs on the emulated switch,
    on BMv2 (PI): the same answers."""
    from coflow.ctl.bmv2 import Bmv2
    from test_ctl_digest_emu import digest_entry_sequence
    with open(P4INFO) as f:
        if "report_digest_t" not in f.read():
            pytest.skip("build/coflow.p4info.txt without the report digest: run `make p4`")
    sw = Bmv2(4700 + time.time_ns() % 100).start()
    try:
        digest_entry_sequence(sw.address, sw.device_id)
    finally:
        sw.stop()

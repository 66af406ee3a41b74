"""Live: ECMP across the layers of a k = 4 fat-tree of 20 BMv2 switches (a namespace of the
test's own), as the controller programs it.

Every switch runs the same program. With one hash for every switch, an aggregation switch took
the member index its edge had taken (equal group sizes, the same CRC of the same 5-tuple): every
cross-pod flow from pod 0 crossed core c0 or c3, none c1 or c2, and the fabric's core had half
its capacity (measured before routing.p4's per-switch hash window: 96 / 0 / 0 / 96 of 192).
Here the cores' ports that face pod 0 count the flows that reach them: each core carries a
fair share overall and from each of pod 0's edges, as independent choices per layer give.
Needs root and the P4 toolchain; skips loudly otherwise.
"""
import collections

import pytest

from live import BMV2_JSON, P4INFO, fabric_marks, fabric_of, io

pytestmark = fabric_marks()

FLOWS_PER_PAIR = 16


@pytest.fixture(scope="module")
def fabric():
    from coflow import topology as T
    yield from fabric_of(T.fattree(4), 400)


def test_cross_pod_flows_use_every_core(fabric):
    from scapy.all import IP, UDP, Ether, Raw, raw
    from coflow.ctl.daemon import Controller
    t, f = fabric
    ctl = Controller(t, "fair", P4INFO, BMV2_JSON, f.addrs())
    try:
        ctl.start()
        srcs, dsts = ["h0", "h1", "h2", "h3"], ["h4", "h8", "h12", "h13"]   # pod 0 -> pods 1-3
        sends, edge_of = [], {}
        for s in srcs:
            for d in dsts:
                hs, hd = t.host(s), t.host(d)
                for k in range(FLOWS_PER_PAIR):
                    n = len(sends)
                    p = Ether(src=hs.mac, dst=t.switch(hs.switch).mac) / \
                        IP(src=hs.ip, dst=hd.ip, id=n) / UDP(sport=20000 + 7 * n, dport=5001 + k % 3)
                    sends.append((hs.intf, raw(p / Raw(b"\x00" * 64))))
                    edge_of[n] = hs.switch
        cores = {f"c{c}": t.switch(f"c{c}").intf(1) for c in range(4)}   # core c's port to pod 0
        got = io(f, sends, list(cores.values()), timeout=5, expect=len(sends))[0]
        per_core = {c: len(got.get(i, [])) for c, i in cores.items()}
        per_edge = collections.Counter()
        for c, i in cores.items():
            for p in got.get(i, []):
                per_edge[(edge_of[p[IP].id], c)] += 1
        n = len(sends)
        assert sum(per_core.values()) == n, ("lost on the way up", per_core)
        # 256 flows over 4 cores: 64 each on average; a core below 40 or above 90 is a
        # (p < 1e-4) sign that the layers' choices are not independent
        assert all(40 <= v <= 90 for v in per_core.values()), per_core
        for e in ("e0", "e1"):   # each edge's 128 flows reach every core (32 each on average)
            assert all(per_edge[(e, c)] >= 12 for c in cores), (e, dict(per_edge))
    finally:
        ctl.stop()

"""Live (issue 30, item 4): controllers on two "machines" (network namespaces) sharing a
3-member etcd cluster on loopback addresses, BMv2 switches (coflow.ctl.failover.Rig). Killing
the primary: the backup writes its first round as primary within the bound (the 1 s lease +
1.5 s on a loaded 2-core machine; `make bench-failover` reports the medians), every
acknowledged coflow is kept, once, with a slot on the switches. Killing an etcd member: no
takeover, nothing lost. Needs root, etcd and the P4 build; skips loudly otherwise."""
import shutil

import pytest

from live import BMV2_JSON, P4INFO, fabric_marks

pytestmark = fabric_marks() + [pytest.mark.skipif(shutil.which("etcd") is None,
                                                  reason="etcd not found (Debian etcd-server)")]

BOUND_S = 2.5


def test_failover_across_namespaces():
    from coflow import topology as T
    from coflow.ctl.failover import Rig
    rig = Rig(T.leafspine(2, 2, 2), P4INFO, BMV2_JSON).start()
    try:
        k = rig.kill_primary(before=10)
        print("kill primary:", k)
        assert k["takeover_s"] is not None and k["takeover_s"] <= BOUND_S
        assert k["lost"] == 0 and k["duplicates"] == 0 and k["without_slot"] == 0 and k["acked"] >= 10
        m = rig.kill_etcd_member(0)
        print("kill etcd member:", m)
        assert m["primary_after"] == m["primary_before"]
        assert m["lost"] == 0 and m["acked_after_kill"] > 0
    finally:
        rig.stop()

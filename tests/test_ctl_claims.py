"""Declared sizes are claims (issue 30, item 2): a coflow whose counted bytes pass its declared
sizes by more than the margin loses its sizes for good and is ordered as a coflow of unknown
size (last), so declaring 1 KB and sending 1 GB no longer keeps one segment "remaining" at the
top of SEBF's order with the whole link's rate."""
import os

import pytest

from coflow.api.registry import CoflowRegistry
from coflow.ctl.rates import FlowProgress, overrun, plan, without_sizes
from coflow.dataplane.constants import TCP_MSS_BYTES
from coflow.sched import make_scheduler

HOSTS = ["h0", "h1", "h2", "h3"]
HP = {h: i for i, h in enumerate(HOSTS)}
LINK = 1.25e6          # payload bytes/s
OVH = 74               # header bytes per frame the payload conversion takes off


def observe_payload(fp, cid, src, dst, payload, packets=1000, where=("e0", 1)):
    fp.observe(cid, HP[src], HP[dst], where, payload + OVH * packets, packets)


def test_overrun_by_hand():
    reg = CoflowRegistry(HOSTS)
    r = reg.register([("h0", "h2", 10_000), ("h1", "h2", None)])
    limit = 10_000 * 1.25 + 65536                 # 78,036 bytes
    assert overrun(r, {(0, 2): int(limit)}, HP, 0.25, 65536) is None
    assert overrun(r, {(0, 2): int(limit) + 1}, HP, 0.25, 65536) == ((0, 2), int(limit) + 1, 10_000)
    assert overrun(r, {(1, 2): 10**12}, HP, 0.25, 65536) is None        # no size, no claim
    assert overrun(r, {(0, 2): 10**12}, HP, 0.25, -1) is None           # check off
    # two flows of one coflow on one pair (two waves): their sizes add up
    r2 = reg.register([("h0", "h3", 40_000)])
    r2 = reg.update(r2.cid, sizes={0: 40_000})
    assert overrun(r2, {(0, 3): 40_000 + 10_000 + 65536}, HP, 0.25, 65536) is None
    assert overrun(r2, {(0, 3): 40_000 + 10_001 + 65536}, HP, 0.25, 65536) is not None


def _order(records, measured, mem=None):
    p = plan("sebf", make_scheduler("sebf"), records, HP, LINK, 0.0, {} if mem is None else mem,
             1 << 40, None, None, measured)
    rate = {}
    for c, a, b, r in p.flows:
        rate[(c, a, b)] = r
    return p.prio, rate


def test_a_liar_keeps_the_top_until_its_sizes_are_dropped():
    """The defect, shown on the rate plan, then the remedy: L declares 1 KB on h0->h2 and sends
    1 GB; H (honest, 100 KB) shares h2's downlink."""
    reg = CoflowRegistry(HOSTS)
    L = reg.register([("h0", "h2", 1_000)])
    H = reg.register([("h1", "h2", 100_000)])
    lk, hk = (L.cid.external, L.cid.internal), (H.cid.external, H.cid.internal)
    fp = FlowProgress()
    observe_payload(fp, lk, "h0", "h2", 10**9)
    recs = reg.list()
    measured = fp.measured(recs, HP)
    # trusted: the one-segment floor keeps 1 GB "one segment short" of 1 KB: L first, whole link
    assert measured[lk] == {0: max(0, 1_000 - TCP_MSS_BYTES)}
    prio, rate = _order(recs, measured)
    assert prio[lk] > prio[hk]
    assert rate[(lk, "h0", "h2")] == pytest.approx(LINK)
    assert rate.get((hk, "h1", "h2"), 0.0) == pytest.approx(0.0)
    # the claim check fires, the controller hands the core L without sizes
    assert overrun(recs[0], fp.sent(lk), HP, 0.25, 65536) is not None
    recs2 = [without_sizes(recs[0]), recs[1]]
    measured2 = fp.measured(recs2, HP)
    assert measured2[lk] == {0: 10**9}               # counted as it is, no floor
    prio, rate = _order(recs2, measured2)
    assert prio[hk] > prio[lk]
    assert rate[(hk, "h1", "h2")] == pytest.approx(LINK)
    assert rate.get((lk, "h0", "h2"), 0.0) < 0.01 * LINK
    # the registry still holds what the application declared
    assert reg.get(L.cid).flows[0].size_bytes == 1_000


def test_an_honest_overshoot_within_the_margin_keeps_its_sizes():
    reg = CoflowRegistry(HOSTS)
    r = reg.register([("h0", "h2", 1_000_000)])
    k = (r.cid.external, r.cid.internal)
    fp = FlowProgress()
    observe_payload(fp, k, "h0", "h2", 1_200_000)    # 20 % retransmitted
    assert overrun(r, fp.sent(k), HP, 0.25, 65536) is None
    assert fp.measured([r], HP)[k] == {0: 1_000_000 - TCP_MSS_BYTES}


# In the controller (needs the P4Info for its codec) ------------------------------------------------

def _controller(reg, settings=None):
    from coflow import topology as T
    from coflow.ctl.daemon import Controller
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p4info, js = os.path.join(root, "build", "coflow.p4info.txt"), os.path.join(root, "build", "coflow.json")
    if not (os.path.exists(p4info) and os.path.exists(js)):
        pytest.skip("build/coflow.p4info.txt missing: run `make p4` (the Controller needs the P4Info)")
    t = T.leafspine(2, 2, 2)
    return Controller(t, "sebf", p4info, js, {s.name: "127.0.0.1:1" for s in t.switches}, registry=reg,
                      settings=settings or {"link_mbps": "10"})


def test_controller_distrusts_for_good_counts_and_reports():
    reg = CoflowRegistry(HOSTS)
    c = _controller(reg)
    try:
        c._unsubscribe = reg.subscribe(c._on_registry)
        L = reg.register([("h0", "h2", 10_000)])
        H = reg.register([("h1", "h2", 100_000)])
        lk, hk = (L.cid.external, L.cid.internal), (H.cid.external, H.cid.internal)
        with c._mu:
            c._refresh_coflows()
            c._compute_rates(1000.0)
        assert c._prio[lk] > c._prio[hk]
        # 70 KB counted: within 10 KB x 1.25 + 64 KiB, still trusted
        c.progress.observe(lk, 0, 2, ("l0", 1), 70_000 + OVH * 70, 70)
        with c._mu:
            c._compute_rates(1000.1)
        assert not c.distrusted and c._prio[lk] > c._prio[hk]
        # 10 MB counted: distrusted, ordered last
        c.progress.observe(lk, 0, 2, ("l0", 1), 10_000_000 + OVH * 7000, 7000)
        with c._mu:
            c._compute_rates(1000.2)
        assert lk in c.distrusted and c._prio[hk] > c._prio[lk]
        st = c.status()
        assert st["claims"]["distrusted"][str(L.cid)]["declared_bytes"] == 10_000
        assert st["claims"]["distrusted"][str(L.cid)]["pair"] == ["h0", "h2"]
        assert [x["sizes_trusted"] for x in st["coflows"]] == [False, True]
        assert b"coflow_ctl_sizes_distrusted_total 1.0" in c.metrics.exposition()
        # for the rest of its life: a larger declared size does not restore it
        reg.update(L.cid, sizes={0: 10**9})
        with c._mu:
            c._refresh_coflows()
            c._compute_rates(1000.3)
        assert lk in c.distrusted and c._prio[hk] > c._prio[lk]
        reg.unregister(L.cid)
        with c._mu:
            c._refresh_coflows()
        assert lk not in c.distrusted
        # the status keeps the count after the coflow left (a run's report reads it at its end)
        assert c.status()["claims"]["totals"]["distrusted_sent"] == 1
        from coflow.emu.runner import _brief
        assert _brief(c.status())["claims"] == {"distrusted_sent": 1, "distrusted_held": 0,
                                                 "cap_changes": 0}
    finally:
        c.stop()


def test_a_ready_flow_keeps_its_rate_a_flow_without_demand_is_capped():
    """With ``conserve`` on: two coflows on separate host pairs, each sending a tenth of its
    rate over several readings. The one whose application said every byte is ready (the
    network holds it back) keeps its rate and gets no cap; the other is capped, and its
    application marking it ready later lifts the cap."""
    reg = CoflowRegistry(HOSTS)
    c = _controller(reg, {"link_mbps": "10", "conserve": "1"})
    try:
        c._unsubscribe = reg.subscribe(c._on_registry)
        R = reg.register([("h0", "h2", 10_000_000, True)])
        A = reg.register([("h1", "h3", 10_000_000)])
        rk, ak = (R.cid.external, R.cid.internal), (A.cid.external, A.cid.internal)
        t = 1000.0
        with c._mu:
            c._refresh_coflows()
            c._compute_rates(t)
        sent = 0
        for _ in range(5):
            t += 0.1
            sent += 12_000            # ~a tenth of 10 Mb/s over 0.1 s
            c.progress.observe(rk, 0, 2, ("l0", 1), sent + OVH * (sent // 1000), sent // 1000)
            c.progress.observe(ak, 1, 3, ("l0", 2), sent + OVH * (sent // 1000), sent // 1000)
            c._observe_demand(t)
            with c._mu:
                c._compute_rates(t)
        led = c.ledger
        assert led.cap((rk, 0, 2)) == float("inf")
        assert led.cap((ak, 1, 3)) < 0.5 * c.ctl.link_payload_Bps
        assert c.status()["claims"]["totals"]["cap_changes"] == 1
        reg.update(A.cid, ready={0: True})
        with c._mu:
            c._refresh_coflows()
        t += 0.1
        sent += 12_000
        c.progress.observe(ak, 1, 3, ("l0", 2), sent + OVH * (sent // 1000), sent // 1000)
        c._observe_demand(t)
        assert led.cap((ak, 1, 3)) == float("inf")
    finally:
        c.stop()

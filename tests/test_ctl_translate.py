"""Translation (pure): topology -> routes/roles/config/thresholds, coflows -> slots, overrides,
meters (bytes per second), plus the controller settings parser."""
import pytest

from coflow import topology as T
from coflow.ctl import model as M
from coflow.ctl import translate as TR
from coflow.params import MB, DclasParams


@pytest.fixture(scope="module")
def ft():
    t = T.fattree(4)
    return t, TR.static_state(t, T.routes(t), "dclas", DclasParams(K=8))


def test_edge_switch_routing(ft):
    t, st = ft
    e0 = M.SwitchState.of(st["e0"])
    members = {m.member_id: dict(m.params) for m in e0.of_kind("member")}
    # e0: hosts h0, h1 on ports 1, 2; aggregation switches on ports 3, 4
    assert sorted(members) == [1, 2, 3, 4]
    assert members[1] == {"port": 1, "smac": TR.mac_int("02:00:00:00:00:01"),
                          "dmac": TR.mac_int(t.host("h0").mac)}
    assert members[3]["dmac"] == TR.mac_int(t.switch("a0").mac)
    groups = e0.of_kind("group")
    assert [(g.group_id, g.members, g.max_size) for g in groups] == [(1, (3, 4), 2)]
    routes = {dict(e.match)["ipv4_dst"]: e for e in e0.table(M.T_ROUTING)}
    assert len(routes) == 16
    assert routes[(TR.ip_int("10.0.0.1"), 32)].member_id == 1
    assert routes[(TR.ip_int("10.0.0.16"), 32)].group_id == 1


def test_core_switch_has_no_groups(ft):
    _, st = ft
    c0 = M.SwitchState.of(st["c0"])
    assert c0.of_kind("group") == []  # one path down from a core to every host
    assert len(c0.table(M.T_ROUTING)) == 16


def test_port_roles_fabric_only(ft):
    _, st = ft
    roles = lambda sw: sorted(dict(e.match)["ingress_port"] for e in M.SwitchState.of(st[sw]).table(M.T_PORT_ROLE))
    assert roles("e0") == [3, 4]          # host ports 1, 2 stay edges (the table default)
    assert roles("a0") == [1, 2, 3, 4]
    for e in M.SwitchState.of(st["e0"]).table(M.T_PORT_ROLE):
        assert dict(e.params) == {"role": 0}


def test_config_and_thresholds(ft):
    _, st = ft
    e0 = M.SwitchState.of(st["e0"])
    (cfg,) = e0.of_kind("default")
    assert dict(cfg.params) == {"mode": 1, "fair_prio": 4, "heavy_bytes": (1 << 64) - 1, "fifo_base": 0}
    th = sorted(e0.table(M.T_DCLAS), key=lambda e: dict(e.match)["bytes"])
    # hand-checked: Q1 = 10 MB = 10485760 B, x10 per queue, queue q -> priority 8 - q
    assert dict(th[0].match)["bytes"] == (0, 10 * MB - 1) and dict(th[0].params)["prio"] == 7
    assert dict(th[1].match)["bytes"] == (10 * MB, 100 * MB - 1) and dict(th[1].params)["prio"] == 6
    assert dict(th[7].match)["bytes"] == (10 ** 7 * MB, (1 << 64) - 1) and dict(th[7].params)["prio"] == 0
    assert len(th) == 8


def test_control_segments_class(ft):
    t, st = ft
    for sw in t.switches:
        (e,) = M.SwitchState.of(st[sw.name]).table(M.T_UNTAGGED)
        m = dict(e.match)
        # untagged TCP of IP length 0..127 (pure ACKs: 40-80), any DSCP -> the top class
        assert m == {"dscp": (0, 0), "ip_len": (0, 127), "protocol": (6, 0xFF)}
        assert dict(e.params) == {"prio": 7} and e.priority > 0
    off = TR.static_state(t, T.routes(t), "dclas", DclasParams(K=8), control_max_len=0)
    assert all(not M.SwitchState.of(ents).table(M.T_UNTAGGED) for ents in off.values())
    low = TR.static_state(t, T.routes(t), "fair", DclasParams(K=8), control_prio=5, control_max_len=100)
    (e,) = M.SwitchState.of(low["e0"]).table(M.T_UNTAGGED)
    assert dict(e.params) == {"prio": 5} and dict(e.match)["ip_len"] == (0, 100)


def test_dclas_k_above_8_rejected():
    with pytest.raises(ValueError, match="K=10"):
        TR.dclas_entities(DclasParams(K=10))


def test_fifo_lm_config():
    cfg = TR.config_entity("fifo-lm", 4, 10 * MB, 7)
    assert dict(cfg.params) == {"mode": 2, "fair_prio": 4, "heavy_bytes": 10 * MB, "fifo_base": 7}
    assert dict(TR.config_entity("hug").params)["mode"] == 3


def test_slot_table():
    s = TR.SlotTable(size=3)
    assert [s.assign((i, 0)) for i in range(4)] == [0, 1, 2, None]
    assert s.assign((1, 0)) == 1  # idempotent
    assert s.release((0, 0)) == 0
    assert s.assign((9, 0)) == 0
    s.release((1, 0)); s.release((2, 0))
    assert s.assign((10, 0)) == 1  # freed first, reused first
    t = TR.SlotTable(size=4)
    assert t.seed((5, 0), 2) and not t.seed((6, 0), 2) and not t.seed((5, 0), 3)
    assert t.assign((7, 0)) == 0 and t.assign((8, 0)) == 1 and t.assign((9, 0)) == 3


def test_order_priorities_saturate():
    assert TR.order_priorities("abcdefghi") == {"a": 7, "b": 6, "c": 5, "d": 4, "e": 3, "f": 2,
                                                "g": 1, "h": 1, "i": 1}


def test_override_priority_range():
    with pytest.raises(ValueError):
        TR.override_entity((1, 0), 8)


def test_meter_units_bytes_per_second():
    s = TR.CtlSettings(link_mbps=10)  # 1.25e6 B/s
    m = TR.meter_config(42, 250_000.0, s)  # 2 Mb/s
    assert (m.cir, m.pir) == (250_000, 250_000)  # bytes/s, not bytes/us (would be 0.25)
    assert m.cburst == m.pburst == max(int(250_000 * 0.020), 10 * 1514) == 15140
    big = TR.meter_config(1, 100e6, s)
    assert big.cburst == 2_000_000  # 20 ms of 100 MB/s
    floor = TR.meter_config(1, 0.0, s)
    assert floor.cir == 12_500  # 1% of the link: a paused flow keeps a trickle


def test_meter_entities_index_and_sharing():
    t = T.fattree(4)
    s = TR.CtlSettings(min_rate_frac=0)
    cid = (7, 2)
    flows = [(cid, "h0", "h5", 1000.0), (cid, "h0", "h5", 500.0),  # same pair: one meter, summed
             (cid, "h1", "h9", 300.0), (cid, "h2", "h3", 200.0)]
    out = TR.meter_entities(t, flows, {cid: 11}, s)
    assert sorted(out) == ["e0", "e1"]  # h0, h1 on e0; h2 on e1: the sender's edge
    e0 = M.SwitchState.of(out["e0"])
    fm = {(dict(e.match)["ipv4_src"], dict(e.match)["ipv4_dst"]): dict(e.params)["index"]
          for e in e0.table(M.T_FLOW_METER)}
    assert fm == {(TR.ip_int("10.0.0.1"), TR.ip_int("10.0.0.6")): 88,   # 11 * 8 + 0
                  (TR.ip_int("10.0.0.2"), TR.ip_int("10.0.0.10")): 89}
    meters = {m.index: m for m in e0.of_kind("meter")}
    assert (meters[88].cir, meters[89].cir) == (1500, 300)
    e1 = M.SwitchState.of(out["e1"])
    assert [m.index for m in e1.of_kind("meter")] == [88]  # per-switch meter arrays
    # no slot: not metered
    assert TR.meter_entities(t, flows, {}, s) == {}


def test_meter_pairs_beyond_eight_share_slots():
    t = T.bigswitch(16)
    s = TR.CtlSettings(min_rate_frac=0)
    cid = (1, 0)
    flows = [(cid, "h0", f"h{d}", 100.0 * d) for d in range(1, 11)]  # 10 pairs, one edge
    out = M.SwitchState.of(TR.meter_entities(t, flows, {cid: 0}, s)["s0"])
    idx = sorted(dict(e.params)["index"] for e in out.table(M.T_FLOW_METER))
    assert idx == [0, 0, 1, 1, 2, 3, 4, 5, 6, 7]
    meters = {m.index: m.cir for m in out.of_kind("meter")}
    assert meters[0] == 100 + 900 and meters[1] == 200 + 1000 and meters[7] == 800


def test_split_settings():
    ctl, rest = TR.split_settings({"link_mbps": "100", "K": "8", "fair_prio": "3"})
    assert ctl.link_Bps == 12.5e6 and ctl.fair_prio == 3 and rest == {"K": "8"}
    with pytest.raises(ValueError, match="link_mbps"):
        TR.split_settings({"link_mbps": "fast"})
    with pytest.raises(ValueError, match="fair_prio"):
        TR.split_settings({"fair_prio": "9"})
    ctl, _ = TR.split_settings({"control_prio": "6", "control_max_len": "0"})
    assert (ctl.control_prio, ctl.control_max_len) == (6, 0)
    with pytest.raises(ValueError, match="control_prio"):
        TR.split_settings({"control_prio": "8"})
    with pytest.raises(ValueError, match="control_max_len"):
        TR.split_settings({"control_max_len": "-1"})
    with pytest.raises(ValueError, match="control_max_len"):
        TR.split_settings({"control_max_len": "70000"})

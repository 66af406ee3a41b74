"""Emulation plan (no Mininet): trace slicing and scaling, per-host schedules, CCT from flow
records, configuration checks, traffic-manager choice per mode, the switch command line."""
import math

import numpy as np
import pytest

from coflow import trace as T
from coflow.dataplane import tm
from coflow.emu import plan as P
from coflow.emu.driver import registration, send_commands
from coflow.emu.fabric import QUEUE_BUDGET, tm_config, tm_for_mode
from coflow.emu.runner import EmuConfig, load_topology, mode_settings, simulate_mode
from coflow.dataplane.toolchain import switch_command

HOSTS = [f"h{i}" for i in range(4)]
TEXT = """8 4
1 0 1 0 1 1:1.0
2 1000 2 0 4 1 2:2.0
3 2000 2 1 5 2 1:0.5 3:1.5
4 3000 1 2 1 6:3.0
"""


def trace():
    return T.parse_trace(TEXT, "t.txt")


def test_plan_hand_checked():
    # explicit factors: bytes x 0.001 (1 MB = 10^6 B -> 1000 B), time x 0.5
    p = P.build_plan(trace(), HOSTS, 4, 1e6, bytes_factor=1e-3, time_factor=0.5)
    assert [c.trace_id for c in p.coflows] == [1, 2, 3]      # coflow 4: port 2 -> port 6 = host 2 -> host 2
    assert p.dropped_coflows == [4]
    c1, c2, c3 = p.coflows
    assert c1.arrival_s == 0 and c2.arrival_s == 0.5 and c3.arrival_s == 1.0
    assert [(f.src, f.dst, f.bytes) for f in c1.flows] == [("h0", "h1", 1000)]
    # mappers 0 and 4 fold onto host 0: one flow of all 2000 bytes
    assert [(f.src, f.dst, f.bytes) for f in c2.flows] == [("h0", "h2", 2000)]
    # mappers 1 and 5 fold onto host 1; reducer 1 is on host 1 too: that flow never leaves it
    assert [(f.src, f.dst, f.bytes) for f in c3.flows] == [("h1", "h3", 1500)]
    assert p.dropped_local_flows == 2
    assert [f.index for c in p.coflows for f in c.flows] == [0, 0, 0]
    assert p.total_bytes == 4500
    assert c1.bin == "SN"


def test_auto_factors_keep_work_and_load():
    tr = trace()
    bf, tf = P.auto_factors(tr, 4, 4, 1e6, work_s=10.0, load=2.0)
    total = (1.0 + 2.0 + 2.0 + 3.0) * 1e6
    assert math.isclose(bf * total / (4 * 1e6 / 8), 10.0)        # bytes keep 4 links busy 10 s
    assert math.isclose(3.0 * tf, 10.0 / 2.0)                     # arrivals span work / load
    # first N: only those coflows count
    bf2, tf2 = P.auto_factors(tr, 2, 4, 1e6, work_s=10.0, load=2.0)
    assert math.isclose(bf2 * 3.0e6 / (4 * 1e6 / 8), 10.0) and math.isclose(tf2 * 1.0, 5.0)


def test_plan_first_n_and_workload_match():
    p = P.build_plan(trace(), HOSTS, 2, 2e6, work_s=4.0, load=1.0)
    assert len(p.coflows) == 2
    wl = p.workload()
    assert wl.ncoflows == 2 and wl.nflows == 2
    assert list(wl.src) == [0, 0] and list(wl.dst) == [1, 2]
    assert wl.size.sum() == p.total_bytes
    assert math.isclose(p.work_s, p.total_bytes / (4 * 2e6 / 8))


def test_plan_bad_parameters_name_the_field():
    tr = trace()
    for kw, field in (({"first": 0}, "coflows"), ({"rate_bps": 0}, "rate"), ({"work_s": -1}, "work"),
                      ({"load": 0}, "load"), ({"bytes_factor": 0}, "bytes-factor"),
                      ({"time_factor": float("nan")}, "time-scale")):
        args = {"first": 4, "rate_bps": 1e6, **kw}
        with pytest.raises(P.PlanError) as e:
            P.build_plan(tr, HOSTS, **args)
        assert e.value.field == field and str(e.value).startswith(field + ":")
    with pytest.raises(P.PlanError, match="hosts"):
        P.build_plan(tr, [], 4, 1e6)


def test_scaled_thresholds():
    p = P.build_plan(trace(), HOSTS, 4, 1e6, bytes_factor=1e-3, time_factor=1.0)
    s = P.scaled_mode_settings("dclas", p)
    assert s["K"] == "8" and math.isclose(float(s["Q1"]), 10 * 2**20 * 1e-3)
    hb = P.scaled_mode_settings("fifo-lm", p)["heavy_bytes"]
    assert int(hb) == int(np.percentile([1000, 2000, 1500], 80))
    assert P.scaled_mode_settings("fair", p) == {}
    # by the scheduler's parameters, not its name: D-CLAS's strict twin and Fai (built on
    # D-CLAS's queues) scale theirs too; no thresholds, no settings
    assert P.scaled_mode_settings("dclas-strict", p) == s == P.scaled_mode_settings("fai", p)
    assert P.scaled_mode_settings("sebf", p) == {} == P.scaled_mode_settings("sbf-sent", p)
    cfg = EmuConfig(rate_mbps=2.0, settings={"fair_prio": "3"})
    assert mode_settings(cfg, "sebf", p) == {"link_mbps": "2.0", "audit_s": "0", "fair_prio": "3",
                                             "ecn_threshold_bytes": str(P.ECN_FRAMES * 1514),
                                             "meter_headroom": repr(P.METER_HEADROOM),
                                             "pace_headroom": repr(P.PACE_HEADROOM),
                                             "rate_capacity_frac": repr(P.RATE_CAPACITY_FRAC),
                                             "rate_audit": "1",
                                             "class_q1_bytes": repr(10 * 2**20 * 1e-3),
                                             "class_span": str(P.CLASS_SPAN)}
    # the ordered modes' size caps on D-CLAS's own scaled Q1, each within CLASS_SPAN of its
    # cap; none for D-CLAS or fair
    assert mode_settings(cfg, "sincronia", p)["class_q1_bytes"] == s["Q1"]
    assert mode_settings(cfg, "sincronia", p)["class_span"] == "1" == str(P.CLASS_SPAN)
    assert "class_span" not in mode_settings(cfg, "dclas", p)
    assert "class_q1_bytes" not in mode_settings(cfg, "dclas", p)
    assert "class_q1_bytes" not in mode_settings(cfg, "fair", p)
    assert P.RATE_CAPACITY_FRAC < 1      # paced rates leave room for the ACKs and unpaced segments
    # paced senders only in the metered modes, and only with pacing on
    unpaced = mode_settings(EmuConfig(rate_mbps=2.0, pacing=False), "sebf", p)
    assert "meter_headroom" not in unpaced and "rate_capacity_frac" not in unpaced
    assert "meter_headroom" not in mode_settings(cfg, "sincronia", p)
    assert "meter_headroom" not in mode_settings(cfg, "dclas", p)
    off = EmuConfig(ecn_frames=0)
    assert mode_settings(off, "fair", p)["ecn_threshold_bytes"] == "0"
    cfg = EmuConfig(settings={"audit_s": "5"})
    assert mode_settings(cfg, "fair", p)["audit_s"] == "5"
    # the rate modes' meter bursts come from the fabric: RTT of its longest path at the link
    # rate (k=4 fat-tree: 5 switch hops) and its queue budget; --set still wins
    from coflow import topology as topo
    from coflow.ctl.translate import split_settings
    ft = topo.fattree(4)
    cfg = EmuConfig(rate_mbps=1.0, settings={"port_buffer_bytes": "30000"})
    s = mode_settings(cfg, "sebf", p, ft)
    assert s["rtt_us"] == str(5 * ((1514 + 66) * 8 + 2000)) and s["port_buffer_bytes"] == "30000"
    assert split_settings(s)[0].rtt_us == 73_200.0
    assert "rtt_us" not in mode_settings(cfg, "dclas", p, ft)
    # with ECN marking, a meter's peak burst leaves room for marks; without, nothing is YELLOW
    assert s["meter_peak_bursts"] == str(P.METER_PEAK_BURSTS)
    assert "meter_peak_bursts" not in mode_settings(EmuConfig(ecn_frames=0), "sebf", p, ft)


def test_schedule_commands_and_registration():
    p = P.build_plan(trace(), HOSTS, 4, 1e6, bytes_factor=1e-3, time_factor=1.0)
    ips = {h: f"10.0.0.{i + 1}" for i, h in enumerate(HOSTS)}
    cmds = send_commands(p, 1, "7.0", 3, ips, 5001)
    assert cmds == {"h0": [{"op": "send", "run": 3, "coflow": 1, "flow": 0, "cid": "7.0",
                            "dst": "10.0.0.3", "port": 5001, "bytes": 2000}]}
    # every flow is ready to send (the agents send from memory): what a flow leaves of its rate
    # is the network's doing, and the controller's demand caps leave it alone
    assert registration(p, 2, clairvoyant=True) == [("h1", "h3", 1500, True)]
    assert registration(p, 2, clairvoyant=False) == [("h1", "h3", None, True)]
    per = p.per_host()
    assert [(c.trace_id, f.dst) for c, f in per["h0"]] == [(1, "h1"), (2, "h2")]
    assert per["h2"] == [] and per["h3"] == []


def _wide_plan():
    tr = T.parse_trace("4 2\n1 0 2 0 1 2 2:1.0 3:1.0\n2 500 1 2 1 3:0.5\n", "w.txt")
    return P.build_plan(tr, HOSTS, 2, 1e6, bytes_factor=1e-3, time_factor=1.0)


def test_cct_is_last_flow_minus_arrival():
    p = _wide_plan()
    c0, c1 = p.coflows
    assert len(c0.flows) == 4 and c1.arrival_s == 0.5
    t0 = 100.0
    recs = [P.FlowRecord(0, i, c0.flows[i].bytes, t0 + 1.0 + i) for i in range(4)]
    recs.append(P.FlowRecord(1, 0, c1.flows[0].bytes, t0 + 2.0))
    assert P.coflow_ccts(p, t0, recs) == [4.0, 1.5]


def test_cct_incomplete_short_duplicate_and_unknown_records():
    p = _wide_plan()
    c0 = p.coflows[0]
    t0 = 10.0
    recs = [P.FlowRecord(0, i, c0.flows[i].bytes, t0 + 1) for i in range(3)]   # flow 3 missing
    assert P.coflow_ccts(p, t0, recs)[0] is None
    recs.append(P.FlowRecord(0, 3, c0.flows[3].bytes - 1, t0 + 2))            # short: not done
    assert P.coflow_ccts(p, t0, recs)[0] is None
    recs.append(P.FlowRecord(0, 3, c0.flows[3].bytes, t0 + 3))
    recs.append(P.FlowRecord(0, 3, c0.flows[3].bytes, t0 + 9))                # duplicate: first counts
    recs += [P.FlowRecord(7, 0, 10, t0), P.FlowRecord(0, 9, 10, t0), P.FlowRecord(-1, 0, 1, t0)]
    assert P.coflow_ccts(p, t0, recs) == [3.0, None]


def test_report_records_follow_the_report_schema():
    p = _wide_plan()
    recs = P.coflow_report_records(p, [2.0, None])
    assert set(recs[0]) == {"id", "arrival_s", "finish_s", "cct_s", "isolation_s", "bytes", "width",
                            "length_bytes", "bin", "admitted"}
    assert recs[0]["cct_s"] == 2.0 and recs[1]["cct_s"] is None and recs[1]["finish_s"] is None
    cap = 1e6 / 8 * P.PAYLOAD_PER_FRAME / P.FRAME_BYTES
    # coflow 1: 2 mappers x 2 reducers of 500 B: each host sends 1000 B
    assert math.isclose(recs[0]["isolation_s"], 1000 / cap)


def test_simulator_beside_emulation_uses_the_same_flows():
    p = _wide_plan()
    rep = simulate_mode(p, "fair")
    assert rep["summary"]["completed"] == 2 and rep["label"] == "sim-fair"
    assert [c["bin"] for c in rep["coflows"]] == [c.bin for c in p.coflows]
    # coflow 2 (500 B, h2 -> h3) shares h3's downlink with coflow 1's flows: never faster than alone
    assert rep["coflows"][1]["cct_s"] >= rep["coflows"][1]["isolation_s"] - 1e-12
    rep = simulate_mode(p, "dclas")
    assert rep["scheduler"] == "dclas-strict"


def test_config_validation():
    EmuConfig().validate()
    for kw, field in (({"modes": ("fair", "nope")}, "modes"), ({"modes": ()}, "modes"),
                      ({"modes": ("fair", "fair")}, "modes"), ({"coflows": 0}, "coflows"),
                      ({"rate_mbps": 0}, "rate"), ({"mode_timeout_s": -1}, "timeout"),
                      ({"queue_budget": 1}, "queue-budget"), ({"log_level": "loud"}, "log-level"),
                      ({"ecn_frames": -1}, "ecn-frames"),
                      ({"ecn_frames": 300, "queue_budget": 256}, "ecn-frames")):
        with pytest.raises(P.PlanError) as e:
            EmuConfig(**kw).validate()
        assert e.value.field == field


def test_topology_spec():
    assert len(load_topology("fattree:4").switches) == 20
    assert len(load_topology("bigswitch:4").hosts) == 4
    assert len(load_topology("leafspine:2,2,2").hosts) == 4
    for bad in ("ring:3", "fattree:3", "fattree:x"):
        with pytest.raises(P.PlanError) as e:
            load_topology(bad)
        assert e.value.field == "topology"


def test_tm_per_mode():
    fair = tm_config(tm_for_mode("fair"), 1000)
    assert fair.queues == 1 and fair.limit_pkts == QUEUE_BUDGET
    for m in ("dclas", "fifo-lm", "sebf", "hug"):
        c = tm_config(tm_for_mode(m), 1000)
        assert c.discipline == "strict" and c.queues == 8 and c.limit_pkts == QUEUE_BUDGET // 2
    w = tm_config(tm_for_mode("dclas", weighted_dclas=True), 1000)
    assert w.discipline == "weighted" and w.weights == (8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0)


def test_switch_command_line():
    cmd = switch_command("/x/simple_switch_grpc", 7, {2: "e0-eth2", 1: "e0-eth1"}, 9001, 9002,
                         "/tmp/r/coflow-emu-e0-7.ipc")
    assert cmd[:9] == ["/x/simple_switch_grpc", "--device-id", "7", "--thrift-port", "9001",
                       "--notifications-addr", "ipc:///tmp/r/coflow-emu-e0-7.ipc", "--log-level", "off"]
    assert cmd[9:13] == ["-i", "1@e0-eth1", "-i", "2@e0-eth2"]
    assert cmd[13:] == ["--no-p4", "--", "--grpc-server-addr", "127.0.0.1:9002", "--priority-queues", "8"]
    assert "--log-file" not in cmd
    cmd = switch_command("s", 1, {}, 1, 2, "/tmp/i.ipc", log_level="trace", log_file="/tmp/s.log")
    assert cmd[cmd.index("--log-file") + 1] == "/tmp/s.log"


def test_tm_commands_classify_on_dscp_only():
    """The emulated TM has no classifier of its own for ACKs: the pipeline's control-segment
    class (untagged_class) marks them CS7, and the DSCP filters put them in the top class."""
    from coflow.emu.fabric import TOP_LIMIT, tm_commands
    cmds = tm_commands("e0-eth1", tm_config(tm_for_mode("dclas"), 1000))
    filters = [c for c in cmds if "filter" in c]
    assert len(filters) == 8 and all(c[c.index("match") + 1:c.index("match") + 2] == ["ip"] for c in filters)
    tos = {int(c[c.index("tos") + 1], 0): c[-1] for c in filters}
    assert tos[0xe0] == "1:17" and tos[0] == "1:10"     # CS7 (ACKs, queue 1) -> the top class
    limits = {c[c.index("parent") + 1]: int(c[-1]) for c in cmds if "pfifo" in c}
    top = max(TOP_LIMIT, QUEUE_BUDGET // 2)
    assert limits == {"1:17": top, "1:16": top, **{f"1:1{p}": QUEUE_BUDGET // 2 for p in range(6)}}


@pytest.mark.parametrize("budget", [2, 32, 256, 1000])
def test_switch_sockets_hold_every_frame_the_queues_hold(budget):
    """BMv2's transmit sockets are sized so that the TM's queues, not the socket, bound what a
    port holds (coflow.dataplane.sockbuf): every leaf's frames of either TM shape, at the
    true size of an MTU frame in a socket's buffer (measured 2,242 bytes), fit."""
    from coflow.emu.fabric import FRAME_TRUESIZE, leaf_limits, port_sndbuf, tm_commands
    assert FRAME_TRUESIZE >= 2242
    for mode in ("fair", "dclas"):
        cfg = tm_config(tm_for_mode(mode), 1000, budget)
        limits = leaf_limits(cfg)
        # the commands install exactly these limits
        installed = {c[c.index("parent") + 1]: int(c[-1]) for c in tm_commands("x", cfg) if "pfifo" in c}
        assert installed == {tm.classid(p): n for p, n in limits.items()}
        assert sum(limits.values()) * FRAME_TRUESIZE < port_sndbuf(budget)
    assert tm_commands("e0-eth1", tm_config(tm_for_mode("fair"), 1000)) == \
        tm.htb_commands("e0-eth1", tm_config(tm_for_mode("fair"), 1000))


@pytest.mark.parametrize("kw,field", [({"connections": "tcp"}, "connections"),
                                      ({"pool_per_pair": 0}, "pool-per-pair"),
                                      ({"pool_per_pair": 65}, "pool-per-pair")])
def test_connection_settings_are_checked(kw, field):
    from coflow.emu.plan import PlanError
    from coflow.emu.runner import EmuConfig
    with pytest.raises(PlanError) as e:
        EmuConfig(**kw).validate()
    assert e.value.field == field
    EmuConfig(connections="pool", pool_per_pair=4).validate()


def test_brief_sums_the_pipelines_drop_counters():
    from coflow.emu.runner import _brief
    st = {"mode": "dclas", "rounds": 3, "switches": {},
          "dataplane": {"e0": {"drops": {"TTL": 0, "NO_ROUTE": 2}, "slot_collisions": 1,
                               "slot_takeovers": 2, "queue_drops": {"1/0": 4}},
                        "e1": {"drops": {"NO_ROUTE": 1, "METER_RED": 5}, "slot_collisions": 0,
                               "slot_takeovers": 1, "queue_drops": {}}}}
    assert _brief(st)["dataplane"] == {"drops": {"NO_ROUTE": 3, "METER_RED": 5},
                                       "slot_collisions": 1, "slot_takeovers": 3, "queue_drops": 4}
    assert "dataplane" not in _brief({"mode": "fair"})


def test_tcp_sysctl_option_parses_and_rejects_in_one_line():
    import argparse
    from coflow.emu import cli as ecli
    ap = argparse.ArgumentParser()
    ecli._common(ap)
    cfg = ecli.config_from_args(ap.parse_args(["--tcp", "tcp_rto_max_ms=8000", "--tcp", "tcp_rto_min_us=1000000"]))
    assert cfg.tcp_sysctls == {"tcp_rto_max_ms": "8000", "tcp_rto_min_us": "1000000"}
    assert ecli.config_from_args(ap.parse_args([])).tcp_sysctls == {}
    assert ecli.config_from_args(ap.parse_args(["--ecn-frames", "0"])).ecn_frames == 0
    for bad in ("rto_max=1", "tcp_rto_max_ms", "tcp_rto_max_ms=", "ip_forward=1"):
        with pytest.raises(P.PlanError) as e:
            ecli.config_from_args(ap.parse_args(["--tcp", bad]))
        assert e.value.field == "tcp" and "\n" not in str(e.value)


def test_class_floor_guarantees_every_strict_class_a_share():
    """``--class-floor``: each strict class's HTB ``rate`` is the floor's share of the port (its
    ``ceil`` the port, its ``prio`` its priority), so no class starves outright; 0 keeps the
    minimal 1 kbit/s of pure strict priority."""
    from coflow.emu.fabric import tm_commands
    def classes(cfg):
        return {c[c.index("classid") + 1]: (c[c.index("rate") + 1], c[c.index("ceil") + 1], c[c.index("prio") + 1])
                for c in tm_commands("e0-eth1", cfg) if "class" in c and c[c.index("classid") + 1] != "1:1"}
    floored = classes(tm_config(tm_for_mode("sincronia"), 1000, class_floor=0.02))
    assert floored == {f"1:1{p}": ("20kbit", "1000kbit", str(7 - p)) for p in range(8)}
    pure = classes(tm_config(tm_for_mode("sincronia"), 1000))
    assert {r for r, _, _ in pure.values()} == {"1kbit"}
    assert EmuConfig().class_floor == P.CLASS_FLOOR > 0     # the emulation's default
    with pytest.raises(P.PlanError) as e:
        EmuConfig(modes=("fair",), class_floor=0.2).validate()
    assert e.value.field == "class-floor"

"""The how-to's example scheduler, sbf-sent (smallest bottleneck first on bytes sent; one file,
controller/coflow/sched/sbf_sent.py, declared ``Fabric(QUEUES)``), in every driver: the
simulator (hand-checked), the controller against emulated switches (bench/p4rt_emu.py: its
order becomes override priorities), and ``coflow emu plan`` with the emulation's simulator twin
(docs/how-to/add-a-scheduler.md)."""
import os
import sys
import time

import numpy as np
import pytest
from helpers import view, workload

from coflow.cli import main
from coflow.sched import deploy as D
from coflow.sched import make_scheduler
from coflow.sim import simulate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(ROOT, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(ROOT, "build", "coflow.json")
TRACE = os.path.join(ROOT, "traces", "fb-like-120x16.txt")


def test_order_is_the_smallest_bottleneck_of_bytes_sent():
    """Three coflows on 2 ports of 1 B/s: A sent 3 B from port 0, B 1 B from port 0 and 1 B from
    port 1 (bottleneck 1 s), C nothing: C, B, A; rates by strict priority in that order."""
    v = view(2, [[(0, 1, 5.0)], [(0, 1, 5.0), (1, 0, 5.0)], [(1, 0, 5.0)]], [1.0, 1.0], [1.0, 1.0],
             now=2.0, sent=[3.0, 1.0, 1.0, 0.0])
    a = make_scheduler("sbf-sent", {"delta": "0.5"}).allocate(v)
    assert a.order.tolist() == [2, 1, 0]
    assert a.rates.tolist() == [0.0, 1.0, 0.0, 1.0]   # C takes link 1->0, B gets 0->1 only, A waits
    assert a.next_event == 2.5 and a.queue is None


def test_simulator_hand_checked():
    """One link of 1 B/s. A (4 B) arrives at 0, B (1 B) at 1: A has sent 1 B, B none, so B goes
    first: B's CCT is 1 s (FIFO: 4 s; per-flow fairness: 2 s), A finishes at 5 s."""
    wl = workload(2, [[(0, 1, 4.0)], [(0, 1, 1.0)]], arrivals=[0.0, 1.0])
    r = simulate(wl, make_scheduler("sbf-sent"), 1.0)
    assert np.allclose(r.finish - wl.arrival, [5.0, 1.0])
    fifo = simulate(wl, make_scheduler("fifo"), 1.0)
    fair = simulate(wl, make_scheduler("fair"), 1.0)
    assert np.allclose(fifo.finish - wl.arrival, [4.0, 4.0]) and np.allclose(fair.finish - wl.arrival, [5.0, 2.0])


def test_simulator_revises_the_order_as_bytes_are_sent():
    """Two equal coflows on one link, revised every second: least attained first, so they take
    turns and finish within a second of each other (FIFO would finish one at 4 s, the other at 8 s)."""
    wl = workload(2, [[(0, 1, 4.0)], [(0, 1, 4.0)]])
    r = simulate(wl, make_scheduler("sbf-sent", {"delta": "1"}), 1.0)
    assert sorted(np.round(r.finish, 9).tolist()) == [7.0, 8.0]


def test_declared_for_the_fabric_not_clairvoyant_and_on_the_cli(capsys):
    assert "sbf-sent" in D.modes() and D.enforcement("sbf-sent") == "queues"
    assert "sbf-sent" in D.rate_modes() and not D.metered("sbf-sent") and not D.clairvoyant("sbf-sent")
    assert "sbf-sent" not in D.default_modes() and D.sim_twin("sbf-sent") == "sbf-sent"
    assert main(["schedulers"]) == 0
    assert "sbf-sent        non-clairvoyant" in capsys.readouterr().out
    with pytest.raises(ValueError, match="delta must be > 0"):
        make_scheduler("sbf-sent", {"delta": "0"})


def test_coflow_emu_plan_and_the_emulations_simulator_run_it(capsys, tmp_path):
    assert main(["emu", "plan", "--topo", "bigswitch:8", "--trace", TRACE, "--coflows", "12",
                 "--modes", "fair,sbf-sent"]) == 0
    assert "12 coflows" in capsys.readouterr().out
    assert main(["emu", "plan", "--topo", "bigswitch:8", "--trace", TRACE, "--modes", "sbf-sent,nope"]) == 2
    assert "unknown mode(s) nope" in capsys.readouterr().err
    from coflow.emu import runner as R
    from coflow.emu.driver import registration
    cfg = R.EmuConfig(topology="bigswitch:8", trace=TRACE, coflows=12, modes=("sbf-sent",))
    cfg.validate()
    plan = R.make_plan(cfg, R.load_topology(cfg.topology))
    assert all(size is None for _, _, size, _ready in registration(plan, 0, D.clairvoyant("sbf-sent")))
    rep = R.simulate_mode(plan, "sbf-sent")      # the emulation's simulated twin
    assert rep["scheduler"] == "sbf-sent" and len(rep["coflows"]) == len(plan.coflows)
    assert all(np.isfinite(c["cct_s"]) for c in rep["coflows"])
    assert "no rate control" in R.enforcement(cfg, "sbf-sent")


@pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                    reason="build/coflow.p4info.txt missing: run `make p4` (the Controller needs the P4Info)")
def test_controller_on_emulated_switches_installs_its_order_as_override_priorities():
    """Two coflows from h0 (registered without sizes, as the emulation registers a
    non-clairvoyant mode's); A has sent more on its busiest link, so B is served first: B's
    override has the higher priority, on the edge both send from, and no meter is configured
    (queues only).  When B's bytes sent pass A's, B goes below A."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from p4rt_emu import EmulatorThread

    from coflow import topology as T
    from coflow.api.registry import CoflowRegistry
    from coflow.ctl import daemon as CD
    from coflow.ctl import model as M
    topo = T.leafspine(2, 1, 2)
    emu = EmulatorThread([s.device_id for s in topo.switches]).start()
    reg = CoflowRegistry([h.name for h in topo.hosts])
    c = CD.Controller(topo, "sbf-sent", P4INFO, BMV2_JSON, {s.name: emu.addresses[s.device_id] for s in topo.switches},
                      registry=reg, settings={"audit_s": "0", "telemetry_s": "0", "link_mbps": "10", "push": "0"})
    try:
        c.start(loop=False)
        assert c.policy.rate and not c.policy.meters and c.policy.sched.name == "sbf-sent"
        a = reg.register([("h0", "h2", None)])
        b = reg.register([("h0", "h3", None)])
        reg.update(a.cid, sent={0: 4_000_000})
        c.round()
        edge = next(s.name for s in topo.switches if any(h.switch == s.name and h.name == "h0" for h in topo.hosts))

        def prio():
            st = c.agents[edge].read_state()
            return {dict(e.match)["external_id"]: dict(e.params)["prio"] for e in st.table(M.T_OVERRIDE)}, st
        got, st = prio()
        assert got[b.cid.external] > got[a.cid.external], got
        assert not st.of_kind("meter")          # queues only: no MeterConfig written
        reg.update(b.cid, sent={0: 8_000_000})
        time.sleep(0.15)                        # past delta: the scheduler's next event
        c.round()
        got, _ = prio()
        assert got[b.cid.external] < got[a.cid.external], got
    finally:
        c.stop()
        reg.close()
        emu.stop()

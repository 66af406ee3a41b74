"""The controller's incremental rate round writes exactly what the from-scratch round
(coflow.ctl.reference.FromScratch) writes, round after round, over random histories of arrivals,
departures, progress reported by the applications, counter readings (honest and lying), time
passing and a meter pool that runs out, with every rule of the round switched on (size caps,
class span, class memory, pace and meter holds, a rate capacity below the link, claims).

Each rule is then dropped from one side (the reference's ``rules``, or the controller's own
step) and the writes must part: a rule the history does not exercise, or a check that cannot
see it, fails here. Needs build/coflow.p4info.txt (``make p4``) and skips, saying so, without."""
from __future__ import annotations

import os
import random
from dataclasses import replace

import pytest

from coflow import topology as T
from coflow.api.registry import CoflowId, CoflowRecord, FlowSpec
from coflow.ctl import model as M
from coflow.ctl import translate as TR
from coflow.ctl.rates import MeterHold
from coflow.ctl.reference import RULES, FromScratch, controller_ops, first_difference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(ROOT, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(ROOT, "build", "coflow.json")

pytestmark = pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                                reason="build/coflow.p4info.txt missing (make p4: needs p4c)")

TOPO = T.fattree(4)
HOSTS = [h.name for h in sorted(TOPO.hosts, key=lambda h: h.index)]

#: every rule of the round on, at the emulation's scale (1 Mb/s links: bytes of KB, holds of a
#: few rounds)
SETTINGS = {"link_mbps": "1", "audit_s": "0", "class_q1_bytes": "40000", "class_span": "2",
            "meter_hold_s": "0.15", "pace_hold_s": "0.1", "rate_capacity_frac": "0.9",
            "claim_margin_frac": "0.25", "claim_margin_bytes": "4000", "promote_active": "0",
            "conserve": "1", "claim_time_factor": "2"}

#: the modes each rule shows in (a rule a mode does not use cannot part its writes)
SHOWS_IN = {"claims": "sebf", "time_claims": "sebf", "conserve": "sebf", "measured": "sebf", "class_memory": "sebf", "size_caps": "sebf",
            "pace_hold": "sebf", "meter_hold": "sebf", "unmetered": "sebf",
            "metering": "sincronia"}


def make_controller(mode: str, settings=None, meters: int = 4):
    from coflow.ctl.daemon import Controller
    ctl = Controller(TOPO, mode, P4INFO, BMV2_JSON, {s.name: "127.0.0.1:1" for s in TOPO.switches},
                     settings=dict(SETTINGS if settings is None else settings))
    # a small pool (4 meter indices per edge): coflows go unmetered and come back
    ctl._meter_ctx = TR.MeterContext(TOPO, pool=TR.MeterPool(meters),
                                     fcs_bytes=ctl.target.fcs_bytes)
    return ctl


class History:
    """Random events between rounds, the same for every run with one seed."""

    def __init__(self, ctl, seed: int):
        self.ctl = ctl
        self.rng = random.Random(seed)
        self.now = 1_000_000.0
        self.next_ext = 1
        self.frames: dict = {}   # (cid, src, dst) -> frame bytes counted so far
        self.liars: set = set()

    def arrive(self):
        rng = self.rng
        cid = CoflowId(self.next_ext, rng.randrange(2))
        self.next_ext += 1
        flows = []
        for _ in range(rng.randrange(1, 7)):
            a = rng.randrange(16)
            b = (a + rng.randrange(1, 16)) % 16
            size = None if rng.random() < 0.1 else rng.choice([2_000, 9_000, 30_000, 120_000, 600_000])
            flows.append(FlowSpec(HOSTS[a], HOSTS[b], size))
        rec = CoflowRecord(cid, flows, self.now)
        if rng.random() < 0.15:
            self.liars.add((cid.external, cid.internal))
        self.ctl._records = self.ctl._records + [rec]
        self.ctl.slots.assign((cid.external, cid.internal))

    def depart(self):
        recs = self.ctl._records
        if not recs:
            return
        gone = recs[self.rng.randrange(len(recs))]
        self.ctl._records = [r for r in recs if r is not gone]
        c = (gone.cid.external, gone.cid.internal)
        self.ctl.slots.release(c)
        self.ctl.progress.forget_except({(r.cid.external, r.cid.internal) for r in self.ctl._records})

    def report(self):
        """An application reports bytes sent on some flows (Update): as the registry's shared
        snapshots do, the round then sees a new record (a record it saw is never modified)."""
        recs = list(self.ctl._records)
        for k in self.rng.sample(range(len(recs)), min(2, len(recs))):
            rec = recs[k]
            sent = dict(rec.sent_bytes)
            for i, f in enumerate(rec.flows):
                if f.size_bytes is not None and self.rng.random() < 0.5:
                    sent[i] = min(f.size_bytes, sent.get(i, 0) + f.size_bytes // 3)
            recs[k] = replace(rec, flows=list(rec.flows), sent_bytes=sent)
        self.ctl._records = recs

    def read_counters(self):
        """The closed loop reads flow_bytes of metered pairs (a liar's pass its claims)."""
        pool = self.ctl._meter_ctx.pool
        for (cid, a, b), where in sorted(pool.index_of.items()):
            if self.rng.random() < 0.5:
                continue
            step = 1518 * self.rng.randrange(1, 8)
            if cid in self.liars:
                step *= 40
            k = (cid, a, b)
            self.frames[k] = self.frames.get(k, 0) + step
            self.ctl.progress.observe(cid, a, b, where, self.frames[k], self.frames[k] // 1518)
        self.ctl._observe_demand(self.now)     # demand caps from the readings

    def step(self):
        r = self.rng.random()
        if r < 0.3 or not self.ctl._records:
            self.arrive()
        elif r < 0.45:
            self.depart()
        elif r < 0.65:
            self.report()
        else:
            self.read_counters()
        self.now += self.rng.choice([0.01, 0.03, 0.05, 0.2])


def run(mode: str, seed: int, rounds: int, rules=RULES, settings=None, patch=None):
    """Rounds of both paths over one history: [(round, difference)] where they part."""
    ctl = make_controller(mode, settings)
    if patch is not None:
        patch(ctl)
    ref = FromScratch(ctl, rules)
    hist = History(ctl, seed)
    actual = {sw: M.SwitchState() for sw in ctl.agents}
    parted = []
    try:
        for i in range(rounds):
            hist.step()
            inc = controller_ops(ctl, actual, hist.now)
            why = first_difference(inc, ref.ops(hist.now))
            if why is not None:
                parted.append((i, why))
    finally:
        ctl._pool.shutdown()
        ctl.registry.close()
    return parted, ctl


@pytest.mark.parametrize("mode", ["sebf", "hug", "sincronia", "utopia", "fai"])
@pytest.mark.parametrize("seed", [1, 2])
def test_incremental_equals_from_scratch(mode, seed):
    parted, ctl = run(mode, seed, 60)
    assert not parted, f"{len(parted)} rounds parted; first: round {parted[0][0]}: {parted[0][1]}"
    # the history exercised what the rules are about
    assert ctl.rounds == 0   # never started: the rounds above are the test's own
    if mode == "sebf":
        assert ctl.distrusted, "no liar was caught: the claims rule went unexercised"
        why = {d["why"] for d in ctl.distrusted.values()}
        assert why == {"sent", "held"}, f"claims caught only by {why}"
        assert ctl.metrics.demand_cap_changes._value.get() > 0, "no demand cap was ever set"
        assert ctl.progress.version > 0
        assert ctl.metrics.unmetered_coflows._value.get() >= 0


def test_default_settings_too():
    parted, _ = run("sebf", 3, 40, settings={"audit_s": "0", "link_mbps": "1"})
    assert not parted, parted[0]


@pytest.mark.parametrize("rule", RULES)
def test_a_rule_dropped_from_the_reference_parts_the_writes(rule):
    parted, _ = run(SHOWS_IN[rule], 1, 60, rules=tuple(r for r in RULES if r != rule))
    assert parted, f"dropping {rule!r} from the reference changed no write in 60 rounds"


def _no_claims(ctl):
    ctl._check_claims = lambda now=None: None


def _no_pace_hold(ctl):
    ctl._pace_hold = MeterHold(0.0)


def _no_meter_hold(ctl):
    ctl._meter_hold = MeterHold(0.0)


def _no_conserve(ctl):
    ctl._demand_cap = lambda: None


def _no_time_claims(ctl):
    ctl._overheld = lambda rec, c, now: None


@pytest.mark.parametrize("patch", [_no_claims, _no_pace_hold, _no_meter_hold, _no_conserve,
                                   _no_time_claims],
                         ids=["claims", "pace_hold", "meter_hold", "conserve", "time_claims"])
def test_a_rule_dropped_from_the_controller_parts_the_writes(patch):
    parted, _ = run("sebf", 1, 60, patch=patch)
    assert parted


def test_reference_refuses_a_mode_without_rates_and_unknown_rules():
    from coflow.ctl.daemon import Controller
    ctl = Controller(TOPO, "dclas", P4INFO, BMV2_JSON, {s.name: "127.0.0.1:1" for s in TOPO.switches})
    try:
        with pytest.raises(ValueError, match="no rate round"):
            FromScratch(ctl)
    finally:
        ctl._pool.shutdown()
        ctl.registry.close()
    ctl = make_controller("sebf")
    try:
        with pytest.raises(ValueError, match="unknown rule"):
            FromScratch(ctl, ("claims", "nonsense"))
    finally:
        ctl._pool.shutdown()
        ctl.registry.close()


def test_first_difference_names_the_switch_and_write():
    e = M.TableEntry(M.T_FLOW_METER, (("external_id", 1),), M.A_SET_METER, (("index", 1),))
    a = {"e0": [M.Op("INSERT", e)], "e1": []}
    assert first_difference(a, {"e0": [M.Op("INSERT", e)], "e1": []}) is None
    why = first_difference(a, {"e0": [], "e1": []})
    assert why.startswith("e0: 1 writes only incremental, 0 only from scratch; incremental only: ")
    b = {"e0": [M.Op("INSERT", e), M.Op("DELETE", e)]}
    assert "another order" in first_difference(b, {"e0": list(reversed(b["e0"]))})

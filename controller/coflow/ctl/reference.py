"""The rate modes' round rebuilt from nothing: the reference the controller's incremental round
must equal, write for write.

:class:`Controller` keeps its rate round incremental: each record's View arrays, the meter
translation's per-coflow structures, the desired-state book's components, the claim check run
only on the coflows whose readings changed, overrides rebuilt only when the priorities changed,
and a diff of only the keys that changed. :class:`FromScratch` computes the same round from its
inputs alone, every round: the controller's records and counter readings, its slots, and the
indices its meter pool handed out (an allocation with history, not a rule: copied, see below).
It applies every rule of the round itself and keeps its own copy of the rules' memory:

``claims``
    a coflow whose counted bytes on a host pair pass its declared sizes by more than the
    margin loses its sizes for good (checked on every coflow with readings, every round);
``time_claims``
    a coflow whose rates, from its first counted byte, allowed more than its declared sizes
    need plus margin and slack (the controller's :class:`~.demand.GrantLedger`, an input like
    the readings) loses its sizes for good (:func:`~.demand.overheld`);
``conserve``
    the flows' demand caps (the ledger's) make the Allocation work-conserving
    (:func:`coflow.sched.conserve.conserve`);
``measured``
    the closed loop's readings raise the registry's bytes sent (:func:`~.rates.build_view`);
``class_memory``
    ordered modes with ``promote_active=0``: last round's order classes keep an active coflow
    from being promoted (:func:`~.translate.keep_classes`);
``size_caps``
    ``class_q1_bytes`` > 0: classes capped by size, floored at cap minus ``class_span``;
``pace_hold`` / ``meter_hold``
    paces, then meters, go down only that long after a rate did (:class:`~.rates.MeterHold`);
``unmetered``
    a coflow the meter pool cannot meter whole gets no override (fair class);
``metering``
    a mode that does not enforce with meters writes flow_meter entries but no MeterConfig.

What it shares with the controller: the scheduler object (stateless: its memory is the View's
``memory`` dict, which the reference keeps apart), the records and the readings (the round's
inputs), and a copy of the meter pool taken after the controller's round (which pair holds
which index, and which free index still holds whose config). A difference between the two is
either a defect of the incremental path or a rule one side lacks; tests/test_ctl_reference.py
drops each rule on one side and sees the writes differ.
"""
from __future__ import annotations

import copy

import numpy as np

from . import model as M
from . import translate as TR
from .demand import overheld
from .rates import MeterHold, overrun, plan, without_sizes

#: the rules of the rate round (module docstring), each applied by :class:`FromScratch`
RULES = ("claims", "time_claims", "conserve", "measured", "class_memory", "size_caps", "pace_hold", "meter_hold",
         "unmetered", "metering")


class FromScratch:
    """The reference round for one never-started or running :class:`Controller` of a rate
    mode. Call :meth:`ops` right after the controller's round (``_compute_rates`` then
    ``_desired``) with the same ``now``: it returns each switch's writes, from a full diff
    against its own copy of what the switches hold. ``rules``: the rules applied (all of
    :data:`RULES`; the tests leave one out)."""

    def __init__(self, ctl, rules=RULES):
        if not ctl.policy.rate:
            raise ValueError(f"mode {ctl.mode!r} has no rate round (only the rate modes do)")
        unknown = set(rules) - set(RULES)
        if unknown:
            raise ValueError(f"unknown rule(s) {sorted(unknown)}; rules: {', '.join(RULES)}")
        self.ctl = ctl
        self.rules = frozenset(rules)
        s = ctl.ctl
        self.memory: dict = {}
        self.prev_prio: dict = {}
        self.pace_hold = MeterHold(s.pace_hold_s)
        self.meter_hold = MeterHold(s.meter_hold_s)
        self.distrusted: set = set()
        self.actual = {sw: M.SwitchState() for sw in ctl.agents}
        self.sched = copy.deepcopy(ctl.sched)

    # the round ------------------------------------------------------------------------------
    def _records(self, now: float) -> list:
        ctl, s = self.ctl, self.ctl.ctl
        recs = ctl._records
        led = ctl.ledger if ("time_claims" in self.rules and s.claim_time_factor > 0) else None
        if "claims" in self.rules and s.claim_margin_bytes >= 0:
            for rec in recs:
                c = (rec.cid.external, rec.cid.internal)
                if c in self.distrusted:
                    continue
                if overrun(rec, ctl.progress.sent(c), ctl.host_port, s.claim_margin_frac,
                           s.claim_margin_bytes) is not None or (led is not None and overheld(
                               rec, led.held_pairs(c, now), ctl.host_port, s.claim_margin_frac,
                               s.claim_margin_bytes, s.claim_slack_s * s.link_payload_Bps,
                               s.claim_time_factor)
                           is not None):
                    self.distrusted.add(c)
        return [without_sizes(r) if (r.cid.external, r.cid.internal) in self.distrusted else r
                for r in recs]

    def desired(self, now: float) -> dict:
        """Switch -> the SwitchState the round must leave on it."""
        ctl, s, rules = self.ctl, self.ctl.ctl, self.rules
        records = self._records(now)
        measured = None
        if "measured" in rules and ctl.progress.version:
            measured = ctl.progress.measured(records, ctl.host_port)
        prev = self.prev_prio if ("class_memory" in rules and not s.promote_active) else None
        p = plan(ctl.mode, self.sched, records, ctl.host_port, s.rate_capacity_Bps, now,
                 self.memory, s.unknown_size_bytes, None, None, measured, prev,
                 s.class_q1_bytes if "size_caps" in rules else 0.0, s.class_span,
                 ctl.ledger.cap if ("conserve" in rules and ctl.ledger is not None and s.conserve
                                    and ctl.ledger.capped()) else None)
        self.prev_prio = p.order_prio or {}
        metering = ctl.policy.meters or "metering" not in rules
        rates = p.rates
        if metering:
            keys = [(p.cids[k], a, b) for k, a, b in zip(p.cf.tolist(), p.src.tolist(), p.dst.tolist())]
            if "pace_hold" in rules:
                rates, _ = self.pace_hold.apply(keys, rates, now)
            if "meter_hold" in rules:
                rates, _ = self.meter_hold.apply(keys, rates, now)
        else:
            rates = np.zeros(p.rates.size)
        # the pool's assignments after the controller's round; the indices it released this
        # round stay out of reach until the next (MeterPool: a released index is held one round),
        # so the copy's commit must not free them
        pool = ctl._meter_ctx.pool.copy()
        pool._held = []
        mctx = TR.MeterContext(ctl.topo, ctl.target.metered_slots, pool=pool,
                               fcs_bytes=ctl.target.fcs_bytes)
        meters = TR.meter_entities_arrays(mctx, p.cids, p.cf, p.src, p.dst, rates, ctl.slots.slot, s)
        if not metering:
            meters = {sw: {k: e for k, e in d.items() if not isinstance(e, M.MeterConfig)}
                      for sw, d in meters.items()}
        prio = p.prio
        if "unmetered" in rules:
            prio = {c: pr for c, pr in prio.items() if c not in mctx.unmetered}
        static = TR.static_state(ctl.topo, ctl.routes, ctl.mode, ctl.dclas_params, s.fair_prio,
                                 ctl.heavy_bytes, 0, s.control_prio, s.control_max_len,
                                 target=ctl.target, slot_idle_epochs=s.slot_idle_epochs,
                                 ecn_threshold_bytes=s.ecn_threshold_bytes, link_mbps=s.link_mbps)
        if ctl.tofino_server is not None:
            from ..tofino import ports as tofino_ports
            static = tofino_ports.apply(static, ctl.port_map or tofino_ports.PortMap(),
                                        ctl.tofino_server)
        slot_ents = TR.slot_entities(ctl.slots.slot)
        overrides = [TR.override_entity(c, pr) for c, pr in prio.items()]
        out = {}
        for sw in ctl.agents:
            st = M.SwitchState.of(static[sw])
            if sw in ctl.edges:
                st.update(slot_ents)
                st.update(overrides)
            st.merge_keyed(meters.get(sw, {}))
            out[sw] = st
        return out

    def ops(self, now: float) -> dict:
        """Switch -> this round's writes (a full diff; the reference's switches then hold them)."""
        out = {}
        for sw, st in self.desired(now).items():
            out[sw] = M.diff(st, self.actual[sw])
            self.actual[sw] = M.apply_ops(self.actual[sw], out[sw])
        return out


def controller_ops(ctl, actual: dict, now: float, timings: dict | None = None) -> dict:
    """One round of the controller's own incremental path on a never-started controller:
    ``_compute_rates`` and ``_desired``, then each switch's diff of the keys that changed
    against ``actual`` (switch -> SwitchState, updated in place), as its sync would write it.
    ``timings`` gets the phases (``view``, ``allocate``, ..., ``desired``, ``diff``)."""
    import time
    t = timings if timings is not None else {}
    with ctl._mu:
        ctl._compute_rates(now, t)
        t1 = time.perf_counter()
        desired = ctl._desired()
    t2 = time.perf_counter()
    ops = {}
    for sw, st in desired.items():
        ops[sw] = M.diff_keys(st, actual[sw], ctl.book.dirty[sw])
        M.apply_ops_inplace(actual[sw], ops[sw])
        ctl.book.synced(sw)
    t["desired"] = t2 - t1
    t["diff"] = time.perf_counter() - t2
    return ops


def first_difference(a: dict, b: dict) -> str | None:
    """None when two rounds' writes (switch -> [Op]) are the same; else one line naming the
    first switch and write where they part."""
    for sw in sorted(set(a) | set(b)):
        oa, ob = a.get(sw, []), b.get(sw, [])
        if oa == ob:
            continue
        sa, sb = set(map(repr, oa)), set(map(repr, ob))
        only_a = sorted(sa - sb)
        only_b = sorted(sb - sa)
        if not only_a and not only_b:
            return f"{sw}: the same {len(oa)} writes in another order"
        first = (f"incremental only: {only_a[0][:200]}" if only_a
                 else f"from scratch only: {only_b[0][:200]}")
        return f"{sw}: {len(only_a)} writes only incremental, {len(only_b)} only from scratch; {first}"
    return None

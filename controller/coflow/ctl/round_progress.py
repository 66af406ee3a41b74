"""The rate modes' closed loop, a part of :class:`coflow.ctl.daemon.Controller`: reading the
meters' ``flow_bytes`` counters (which flows, keyed so an unchanged reading is not observed
again), checking the applications' size claims against what the data plane counted, and the
diagnostic trace of every allocation (``COFLOW_RATES_TRACE``).
"""
from __future__ import annotations

import json
import logging
import os
import time

import numpy as np

from . import model as M

from .demand import GrantLedger, overheld, ready_pairs
from .rates import (overrun, without_sizes)
from .switch import SwitchAgent


log = logging.getLogger(__name__)

#: rate modes: a JSON line per allocation (time, order, every active flow's remaining bytes as
#: the scheduler saw them and its rate) appended to this file; for diagnosing a schedule
_RATES_TRACE = os.environ.get("COFLOW_RATES_TRACE", "")


class ClosedLoop:
    def _read_progress(self) -> float:
        """Rate modes' read phase (the closed loop): one read of ``flow_bytes`` at every edge
        holding meters (its meters in use, or a wildcard read when more than 1,024 are), all
        in flight together; each metered pair's reading (frame bytes,
        packets) goes to :class:`FlowProgress`, but only once the switch holds the pair's
        ``flow_meter`` entry (its write zeroed the counter first: a reading before that could
        be an earlier owner's)."""
        ctx = self._meter_ctx
        if self.ctl.progress_s <= 0 or not ctx.pool.index_of:
            return 0.0
        t0 = time.perf_counter()
        self._progress_at = time.monotonic()
        # the metered pairs per switch: kept by the meter context as coflows come and go
        # (not rebuilt from the pool every round)
        incremental = self.incremental_read_set
        read_set = ctx.read_set if incremental else ctx.read_set_rebuilt()
        agents, idx = [], {}
        for sw, ents in read_set.items():
            if not ents:
                continue
            ag = self.agents[sw]
            if ag.state not in (SwitchAgent.MASTER, SwitchAgent.BACKUP) or ag.actual is None \
                    or not ag.readable():
                continue
            # the meters in use only (0.3-0.5 ms on BMv2), or all of them with one wildcard
            # entity when many are (4,096 counters: ~1.6 ms on BMv2 + 0.5 ms to parse)
            idx[sw] = ctx.read_indices(sw) if len(ents) <= 1024 else None
            agents.append(ag)
        if self.use_push:    # edges that push their counters are not polled
            polled = []
            for ag in agents:
                seq = ag.push_sequence()
                if seq is None:
                    polled.append(ag)
                elif not incremental or \
                        self._push_seen.get(ag.name) != self._progress_key(ag, idx[ag.name], ("push", seq)):
                    got = ag.pushed_counts(idx[ag.name])
                    if got is None:
                        polled.append(ag)
                    else:
                        self._progress_from(ag, read_set[ag.name], idx[ag.name], got[1], ("push", got[0]))
            agents = polled
        for ag, got in self._read_raw(agents, M.C_FLOW_BYTES, idx):
            if isinstance(got, Exception):
                self.metrics.read_errors.labels(ag.name).inc()
                continue
            self._progress_from(ag, read_set[ag.name], idx[ag.name], got, ("raw",))
        self.progress_reads += 1
        self._observe_demand()
        return time.perf_counter() - t0

    # the paces streamed to the senders: make before break ----------------------------------
    def _publish_paces(self, p, build, prates, at: float) -> None:
        """Publish this round's paces (``build(rates)`` -> the rate stream's snapshot) so that
        no sender is told a rate its meter does not pass yet: a pace lowered is published at
        once (the sender slows before its meter tightens, in this round's writes or
        ``meter_hold_s`` later), a pace raised only once this round's writes are done
        (:meth:`_publish_raises`: the meter first, then the sender). Without the order a
        backfilled flow's sender sped up into its old meter and lost segments to it."""
        board = self.rate_board
        prev = self.__dict__.get("_paced")
        cids = p.cids
        keys = [(cids[k], a, b) for k, a, b in zip(p.cf.tolist(), p.src.tolist(), p.dst.tolist())]
        self._paced = dict(zip(keys, prates.tolist()))
        self._raise_pending = None
        if prev and prates.size:
            old = np.fromiter((prev.get(k, np.inf) for k in keys), float, len(keys))
            if (prates > old).any():
                lo = np.minimum(prates, old)
                board.publish(lambda: build(lo), at)
                self._raise_pending = (build, prates, at)
                return
        board.publish(lambda: build(prates), at)

    def _publish_raises(self) -> None:
        """The paces :meth:`_publish_paces` held back until the round's meters were written."""
        got = self.__dict__.pop("_raise_pending", None)
        if got is not None:
            build, rates, at = got
            self.rate_board.publish(lambda: build(rates), at)

    # grants against use (coflow.ctl.demand) ------------------------------------------------
    @property
    def _claim_tally(self) -> dict:
        """Since start: coflows distrusted by bytes sent / by grant held, demand cap changes
        (the status's ``claims``: a run's report keeps them after its coflows leave)."""
        return self.__dict__.setdefault("_claim_counts", {"distrusted_sent": 0, "distrusted_held": 0,
                                                          "cap_changes": 0})

    def _grant_ledger(self):
        """The rate modes' :class:`GrantLedger` (None: no rate mode, no closed loop, or
        neither ``conserve`` nor the time claim check on)."""
        if not self.policy.rate or self.ctl.progress_s <= 0 or \
                not (self.ctl.conserve or self.ctl.claim_time_factor > 0):
            return None
        # (a cap never below 4 x the meters' floor: a capped flow keeps room to show demand)
        return GrantLedger(self.ctl.demand_headroom,
                           4 * self.ctl.min_rate_frac * self.ctl.link_payload_Bps,
                           self.ctl.rate_capacity_Bps)

    def _demand_cap(self):
        """The flows' demand caps for the core (``conserve``; None: off)."""
        led = self.ledger
        return led.cap if led is not None and self.ctl.conserve and led.capped() else None

    def _ledger_rates(self, p, prates, now: float) -> None:
        """Each metered flow's paced rate from this round on, into the ledger."""
        led = self.ledger
        if led is None:
            return
        unm = self._meter_ctx.unmetered
        cids = p.cids
        led.set_rates({(cids[k], a, b): r for k, a, b, r in
                       zip(p.cf.tolist(), p.src.tolist(), p.dst.tolist(), prates.tolist())
                       if cids[k] not in unm}, now)

    def _observe_demand(self, now: float | None = None) -> None:
        """After a reading: each metered flow's bytes against its rate; a changed cap makes the
        next round re-rate (``conserve``)."""
        led = self.ledger
        if led is None:
            return
        now = time.time() if now is None else now
        changed = 0
        with self._mu:
            ready = self._ready_keys() if self.ctl.conserve else ()
            for key in led.keys():
                c, a, b = key
                if led.observe(key, now, self.progress.pair_sent(c, a, b), key in ready):
                    changed += 1
            if changed:
                self.metrics.demand_cap_changes.inc(changed)
                self._claim_tally["cap_changes"] += changed
                if self.ctl.conserve:
                    self._rates_stale = True
            self.metrics.demand_capped_flows.set(led.capped())

    def _ready_keys(self) -> set:
        """(cid, src pos, dst pos) of the flows whose application said every byte is ready to
        send (``Flow.ready``), a coflow no longer trusted excepted: readiness is a claim, as
        sizes are. Kept per record between readings (records are replaced, never changed)."""
        cache = self.__dict__.setdefault("_ready_cache", {})
        out: set = set()
        seen = {}
        for r in self._records:
            c = (r.cid.external, r.cid.internal)
            if c in self.distrusted:
                continue
            got = cache.get(c)
            if got is None or got[0] is not r.flows:
                got = (r.flows, {(c, a, b) for a, b in ready_pairs(r, self.host_port)})
            seen[c] = got
            out |= got[1]
        self.__dict__["_ready_cache"] = seen
        return out

    def _progress_key(self, ag, idx, how: tuple, entries: dict | None = None) -> tuple:
        """What an edge's closed-loop reading is observed under: the same answer (or push)
        for the same observable entries (the switch's writes, connection and read set)."""
        if not self.incremental_read_set:   # the baseline's key: any write, every pair
            return ("progress", how, idx, ag.generation, ag.writes, id(ag.actual),
                    None if entries is None else tuple((i, *v[:3]) for i, v in entries.items()))
        # what is observable changes only with the flow_meter entries the switch holds (a
        # round that re-rates meters writes none), the connection and the read set
        return ("progress", how, idx, ag.generation, ag.table_writes.get(M.T_FLOW_METER, 0),
                id(ag.actual), self._meter_ctx.read_version.get(ag.name, 0))

    def _trace_rates(self, p) -> None:
        v = p.view
        if v is None or not p.cids:
            return
        order = p.alloc.order.tolist() if p.alloc is not None and p.alloc.order is not None else []
        h = p.hosts
        row = {"t": time.time(), "order": [list(p.cids[k]) for k in order],
               "prio": {f"{c[0]}.{c[1]}": pr for c, pr in p.prio.items()},
               "flows": [[p.cids[k][0], h[a], h[b], round(float(rem)), round(float(r), 1)]
                         for k, a, b, rem, r in zip(p.cf.tolist(), p.src.tolist(), p.dst.tolist(),
                                                    v.remaining.tolist(), p.rates.tolist())]}
        with open(_RATES_TRACE, "a") as f:
            f.write(json.dumps(row) + "\n")

    def _overheld(self, rec, c, now: float):
        """The time claim check of coflow ``c`` (:func:`overheld`); None without a ledger."""
        s = self.ctl
        if self.ledger is None or s.claim_time_factor <= 0:
            return None
        return overheld(rec, self.ledger.held_pairs(c, now), self.host_port, s.claim_margin_frac,
                        s.claim_margin_bytes, s.claim_slack_s * s.link_payload_Bps,
                        s.claim_time_factor)

    def _check_claims(self, now: float | None = None) -> None:
        """Declared sizes are claims: a coflow whose counted bytes on a host pair pass what
        its flows there declare by more than the margin (``claim_margin_frac`` x declared +
        ``claim_margin_bytes``) is no longer trusted, for the rest of its life: its flows are
        handed to the core without sizes, as flows of unknown size (ordered last by the
        clairvoyant schedulers; p4src/README.md, "What a host can gain by lying"). Counted in
        ``coflow_ctl_sizes_distrusted_total``, listed under ``claims`` in the status. Only
        coflows whose readings changed since their last check are looked at."""
        s = self.ctl
        if s.claim_margin_bytes < 0:
            return
        by = None
        # (with the time check a coflow whose rates are followed is looked at every time: its
        # grant grows whether it sends or not; without it, only when its readings changed)
        led = self.ledger if s.claim_time_factor > 0 else None
        cids = self.progress.cids() if led is None else set(self.progress.cids()) | set(led.cids())
        for c in cids:
            if c in self.distrusted:
                continue
            v = self.progress.changes(c)
            if led is None and self._claim_seen.get(c) == v:
                continue
            self._claim_seen[c] = v
            if by is None:
                by = {(r.cid.external, r.cid.internal): r for r in self._records}
            rec = by.get(c)
            if rec is None:
                continue
            bad = overrun(rec, self.progress.sent(c), self.host_port, s.claim_margin_frac,
                          s.claim_margin_bytes)
            why = "sent"
            if bad is None:
                bad = self._overheld(rec, c, time.time() if now is None else now)
                why = "held"
            if bad is None:
                continue
            (a, b), got, declared = bad
            names = self._meter_ctx.names
            self.distrusted[c] = {"at": time.time(), "pair": [names[a], names[b]], "why": why,
                                  "measured_bytes": int(self.progress.sent(c).get((a, b), 0)),
                                  "held_bytes": int(got) if why == "held" else None,
                                  "declared_bytes": int(declared)}
            self.metrics.sizes_distrusted.inc()
            self._claim_tally["distrusted_" + why] += 1
            if why == "held":
                self.metrics.grants_overheld.inc()
            log.warning("coflow %d.%d: %d bytes %s on %s->%s, %d declared: its sizes are "
                        "no longer trusted (ordered as unknown sizes)", c[0], c[1], got,
                        "counted" if why == "sent" else "of rate held", names[a], names[b],
                        declared)

    def _claimed_records(self) -> list:
        """The registry's records as the core sees them: a distrusted coflow without sizes."""
        if not self.distrusted:
            return self._records
        out = []
        for r in self._records:
            c = (r.cid.external, r.cid.internal)
            if c not in self.distrusted:
                out.append(r)
                continue
            cached = self._desized.get(c)
            if cached is None or cached[0] is not r:
                cached = self._desized[c] = (r, without_sizes(r))
            out.append(cached[1])
        return out

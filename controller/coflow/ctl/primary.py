"""Being the primary, a part of :class:`coflow.ctl.daemon.Controller`: the P4Runtime and etcd
elections, leases (expired, or renewed by the traffic the switches count), the registry's and
the switches' events, adopting what the switches hold after a restart, and the API's wait for a
new coflow's entries (``wait_installed``).
"""
from __future__ import annotations

import logging
import time


from . import model as M
from . import translate as TR

from .switch import SwitchAgent


log = logging.getLogger(__name__)


class Primary:
    def is_primary(self) -> bool:
        """Primary for every switch that is up (and up somewhere), and holder of the etcd
        election when there is one: what a shared registry asks before it takes a change (a
        backup controller only follows)."""
        if self.election is not None and not self.election.is_leader():
            return False
        up = [a.state for a in self.agents.values() if a.state != SwitchAgent.DOWN]
        return bool(up) and all(s == SwitchAgent.MASTER for s in up)

    def _on_election(self, leader: bool) -> None:
        """The etcd election changed hands: take the new P4Runtime election id (above every
        earlier primary's when we lead) and re-arbitrate on every switch."""
        eid = self.election.election_id()
        self.election_id = eid
        if leader:
            self.ha["takeovers"] += 1
            self.ha["became_primary_at"] = self.election.became_leader_at or time.time()
            self._ha_pending = self.ha["became_primary_at"]
        for a in getattr(self, "agents", {}).values():
            a.rearbitrate(eid)
        wake = getattr(self, "_wake", None)   # (None: called while __init__ still runs; the
        if wake is not None:                  # first round's _sync_election_id catches up)
            wake.set()

    def wait_installed(self, cid, timeout: float = 0.5) -> bool:
        """Block until coflow ``cid``'s slot entry, and in the scheduled modes its queue class
        (the ``coflow_override`` entry of the priority the scheduler's order gives it), are on
        every edge switch this controller is primary for, so that its first packets are
        classed as a registered coflow's and served in its place in the order, at most
        ``timeout`` s. The round that assigns the slot computes the order and writes both in
        one Write, so this costs no extra round. False on timeout, or at once when no slot
        could be assigned (the slot table is full: the coflow is served as unregistered). The
        API's Register calls it before answering."""
        key = (cid.external, cid.internal) if hasattr(cid, "external") else tuple(cid)
        entry = TR.slot_key(key)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._stop.is_set():
            with self._mu:     # a consistent view: _refresh_coflows runs under it
                has_slot = key in self.slots.slot
                no_slot = (not has_slot and not self._registry_dirty
                           and any((r.cid.external, r.cid.internal) == key for r in self._records))
                want = [(entry, None)]
                if has_slot and self.policy.rate:
                    pr = None if self._rates_stale else self._prio.get(key)
                    if self._rates_stale:
                        want.append((None, None))      # its order is not computed yet
                    elif pr is not None:
                        e = TR.override_entity(key, pr)
                        want.append((e.key, e))
            if no_slot:
                return False   # the round saw it and gave it no slot: the table is full
            if has_slot and all(self._holds(a, want) for a in (self.agents[e] for e in self.edges)
                                if a.state == SwitchAgent.MASTER):
                return True
            time.sleep(0.002)
        return False

    @staticmethod
    def _holds(agent, want) -> bool:
        """The switch's cached state holds every (key, entity) of ``want`` (entity None: any
        entity under the key; key None: never)."""
        act = agent.actual
        if act is None:
            return False
        ents = act.entities
        for k, e in want:
            if k is None or k not in ents or (e is not None and ents[k] != e):
                return False
        return True

    def _on_registry(self, event: str, rec) -> None:
        self._registry_dirty = True
        self._wake.set()

    def _switch_event(self, agent: SwitchAgent, event: str) -> None:
        if event == "reset":
            with self._mu:
                self.coord.switch_reset(agent.name)
        if event == "down":
            self.metrics.reconnects.labels(agent.name).inc()
        self._wake.set()

    def _seed_from_switches(self) -> None:
        """Adopt slot assignments, D-CLAS overrides and rate-mode meter indices that the
        switches hold for coflows the registry knows (a restarted controller keeps slots and
        meters, hence counters, and queues)."""
        with self._mu:
            known = {(r.cid.external, r.cid.internal) for r in self.registry.list()}
            for name in self.edges:
                a = self.agents[name]
                if a.actual is None:
                    continue
                for e in a.actual.table(M.T_SLOT):
                    cid = (dict(e.match)["external_id"], dict(e.match)["internal_id"])
                    if cid in known:
                        self.slots.seed(cid, dict(e.params)["slot"])
                if self.policy.rate:  # each flow keeps its meter, hence its flow_bytes
                    pos = {ip: i for i, ip in enumerate(self._meter_ctx.ip)}
                    for e in a.actual.table(M.T_FLOW_METER):
                        mt = dict(e.match)
                        cid = (mt["external_id"], mt["internal_id"])
                        src, dst = pos.get(mt["ipv4_src"]), pos.get(mt["ipv4_dst"])
                        if cid in known and src is not None and dst is not None:
                            self._meter_ctx.pool.seed(name, (cid, src, dst), dict(e.params)["index"])
                if self.policy.dclas:
                    for e in a.actual.table(M.T_OVERRIDE):
                        cid = (dict(e.match)["external_id"], dict(e.match)["internal_id"])
                        if cid in known:
                            self.coord.seed_queue(cid, 8 - dict(e.params)["prio"])
            self._seeded = True

    def _expire_leases(self) -> int:
        """Unregister the coflows whose lease ran out (the registry does it, only while this
        controller leads it); their slots go with the normal unregister path."""
        expire = getattr(self.registry, "expire", None)
        gone = expire() if expire is not None else []
        if gone:
            self.leases_expired += len(gone)
            self.metrics.leases_expired.inc(len(gone))
        return len(gone)

    def _renew_by_traffic(self) -> None:
        """A coflow whose bytes grew in the counters since the last look (at most once a
        second) is alive: its lease is renewed (D-CLAS / FIFO-LM: global coflow_bytes; rate
        modes: the meters' flow_bytes)."""
        now = time.monotonic()
        if now - self._last_renew < 1.0 or not hasattr(self.registry, "renew"):
            return
        self._last_renew = now
        with self._mu:
            if self.policy.coordinated:
                cur = dict(self._sizes)
            elif self.policy.rate:
                cur = {c: sum(self.progress.sent(c).values()) for c in self.progress.cids()}
            else:
                return
        seen = self._traffic_seen
        grown = [c for c, b in cur.items() if b > seen.get(c, 0)]
        self._traffic_seen = cur
        if grown:
            self.leases_renewed_by_traffic += self.registry.renew(grown)

    def _sync_election_id(self) -> None:
        """Every agent on the election's current id (an election that changed hands while the
        agents were being created would otherwise leave them on the old one)."""
        eid = self.election.election_id()
        if eid != self.election_id or any(a.election_id != eid for a in self.agents.values()):
            self.election_id = eid
            for a in self.agents.values():
                if a.election_id != eid:
                    a.rearbitrate(eid)

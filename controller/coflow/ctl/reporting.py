"""What the controller tells the outside, a part of :class:`coflow.ctl.daemon.Controller`:
Prometheus metrics, the gRPC health service, the status file and the status dictionary
(``coflow ctl status``, the API's brief).
"""
from __future__ import annotations

import json
import logging
import os
import time


from ..sched.base import params_dict



log = logging.getLogger(__name__)


class Reporting:
    def _metric(self, name: str, label: str):
        """A labelled child of a metric, looked up once (every round sets a few dozen)."""
        k = (name, label)
        c = self._metric_children.get(k)
        if c is None:
            c = self._metric_children[k] = getattr(self.metrics, name).labels(label)
        return c

    def set_health(self, servicer, service: str) -> None:
        """The API's gRPC health service follows this controller's role: SERVING while it is
        primary, NOT_SERVING as a backup (its API refuses changes), so a health-checking load
        balancer sends applications to the primary."""
        self._health = [servicer, service, None]
        self._publish_health()

    def _publish_health(self) -> None:
        h = self._health
        if h is None:
            return
        from grpc_health.v1 import health_pb2
        st = health_pb2.HealthCheckResponse.SERVING if self.is_primary() \
            else health_pb2.HealthCheckResponse.NOT_SERVING
        if st != h[2]:
            h[2] = st
            for name in ("", h[1]):
                h[0].set(name, st)

    def _publish(self) -> None:
        self._publish_health()
        with self._mu:
            counts: dict = {}
            for q in self._queues.values():
                counts[q] = counts.get(q, 0) + 1
        for q in range(1, 9):
            self._metric("coflows", str(q)).set(counts.get(q, 0))
        if self.status_file and time.monotonic() - self._last_status_write >= 1.0:
            self._last_status_write = time.monotonic()
            tmp = f"{self.status_file}.tmp{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(self.status(), f, indent=1, default=str)
            os.replace(tmp, self.status_file)

    def status(self) -> dict:
        with self._mu:
            coflows = []
            for r in self._records:
                c = (r.cid.external, r.cid.internal)
                slot = self.slots.slot.get(c)
                coflows.append({"cid": str(r.cid), "slot": slot, "lease_s": getattr(r, "lease_s", None),
                                "owner": getattr(r, "owner", None),
                                "global_bytes": self._sizes.get(c), "queue": self._queues.get(c),
                                "override_prio": self._prio.get(c) if self.policy.rate
                                else {e: o[c] for e, o in self._overrides.items() if c in o}})
                if self.policy.rate:
                    mflows = self._meter_ctx.flows(c)
                    sent = self.progress.sent(c)
                    coflows[-1].update(
                        metered=self._meter_ctx.metered(c),
                        unmetered_flows=self._meter_ctx.unmetered.get(c, 0),
                        meters={f"{sw}/{i}": [self._meter_ctx.names[a], self._meter_ctx.names[b]]
                                for a, b, sw, i in mflows},
                        bytes_sent_measured=sum(sent.values()),
                        sizes_trusted=c not in self.distrusted,
                        meter_red_drops=self.telemetry.red_drops_of(
                            [(sw, i) for _, _, sw, i in mflows]))
            ha = dict(self.ha, etcd=self.election is not None,
                      primary=self.election.is_leader() if self.election is not None else None)
            return {"mode": self.mode, "election_id": self.election_id, "ha": ha,
                    "scheduler": {"name": self.sched.name, "params": params_dict(self.sched)},
                    "settings": self.ctl.__dict__, "delta_s": self.delta_s,
                    "topology": self.topo.name, "rounds": self.rounds,
                    "last_round": self.last_round,
                    "switches": {n: a.status() for n, a in self.agents.items()},
                    "coflows": coflows, "metrics_addr": self.metrics_addr,
                    "dataplane": self.telemetry.status(),
                    "leases": {"default_lease_s": getattr(self.registry, "default_lease_s", None),
                               "expired": self.leases_expired,
                               "renewed_by_traffic": self.leases_renewed_by_traffic,
                               "register_retries_answered": getattr(self.registry, "replayed_total", 0)},
                    "meters": self._meter_status() if self.policy.rate else None,
                    "rate_audit": self.audit.summary() if self.audit is not None else None,
                    "claims": {"margin_frac": self.ctl.claim_margin_frac,
                               "margin_bytes": self.ctl.claim_margin_bytes,
                               "distrusted": {f"{c[0]}.{c[1]}": v for c, v in self.distrusted.items()},
                               "totals": dict(self._claim_tally),
                               "capped_flows": self.ledger.capped() if self.ledger is not None else 0}
                    if self.policy.rate else None}

    def _meter_status(self) -> dict:
        ctx = self._meter_ctx
        return {"pool_per_edge": ctx.pool.size, "in_use": ctx.pool.in_use(),
                "unmetered_coflows": len(ctx.unmetered), "unmetered_flows": ctx.unmetered_flows,
                "closed_loop": self.ctl.progress_s > 0, "progress_reads": self.progress_reads}

"""Strict priority and weighted sharing between a port's queues on Tofino, as data.

On BMv2 the project emulates the traffic manager in Linux (``coflow.dataplane.tm``: HTB on the
DSCP the pipeline writes). On Tofino the pipeline puts a packet in queue ``qid`` = its class
(0..7, ``p4src/tna/include/control/stamp.p4``) and how a port's queues share it is
traffic-manager configuration, not P4. This module turns the same per-mode plan the emulation
uses (``coflow.emu.fabric.tm_for_mode``: a discipline, a queue count, Aalo's weights) into the
per-queue settings of bf-drivers' TM API (``include/traffic_mgr/traffic_mgr_sch_intf.h`` in
p4lang/open-p4studio):

- ``bf_tm_port_q_mapping_set(dev, port, q_count, q_mapping)``: 8 queues, qid i -> queue i;
- ``bf_tm_sched_q_remaining_bw_priority_set(dev, port, queue, prio)``: the priority for the
  bandwidth past the guaranteed rates (``BF_TM_SCH_PRIO_0`` .. ``_7``, higher served first).
  Strict: queue ``qid`` gets priority ``qid`` (class 7 first, like BMv2's priority 7);
  weighted: every queue the same priority;
- ``bf_tm_sched_q_dwrr_weight_set(dev, port, queue, weight)``: DWRR weights among queues of one
  priority, 1..1023 (Aalo's weights scaled so the largest is 1023);
- ``bf_tm_sched_q_guaranteed_rate_set``: 0 (no guarantees: strict priority decides).

No server here can take these (no Tofino model or switch runs on these machines); the
controller's side is :func:`queue_plan` and :func:`bf_tm_calls`, tested as pure functions.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dataplane.constants import NUM_PRIOS

STRICT = "strict"
WEIGHTED = "weighted"
SCH_PRIO_MAX = 7          # BF_TM_SCH_PRIO_7
DWRR_WEIGHT_MAX = 1023    # bf_tm_sched_q_dwrr_weight_set's range


@dataclass(frozen=True)
class QueueSched:
    qid: int                  # ig_tm_md.qid = the class (7 = Aalo queue 1)
    remaining_bw_priority: int
    dwrr_weight: int
    guaranteed_kbps: int = 0


@dataclass(frozen=True)
class PortQueuePlan:
    discipline: str
    queues: tuple             # QueueSched, qid 0..7

    def strict_qids(self) -> list[int]:
        """The queues served by strict priority, highest first (empty when weighted)."""
        if self.discipline != STRICT:
            return []
        return [q.qid for q in sorted(self.queues, key=lambda q: -q.remaining_bw_priority)]


def queue_plan(discipline: str = STRICT, weights=None, nqueues: int = NUM_PRIOS) -> PortQueuePlan:
    """One port's queue settings. ``weights`` are per Aalo queue, queue 1 (qid 7) first, like
    ``DclasParams.queue_weights()`` (weighted only; default Aalo's K - i + 1)."""
    if discipline not in (STRICT, WEIGHTED):
        raise ValueError(f"discipline must be {STRICT!r} or {WEIGHTED!r}")
    if weights is None:
        weights = [float(nqueues - i) for i in range(nqueues)]
    weights = [float(w) for w in weights]
    if len(weights) != nqueues or min(weights) <= 0:
        raise ValueError(f"weights must be {nqueues} positive numbers")
    top = max(weights)
    out = []
    for qid in range(NUM_PRIOS):
        aalo = NUM_PRIOS - 1 - qid              # index into weights (Aalo queue aalo + 1)
        if discipline == STRICT:
            out.append(QueueSched(qid, qid, DWRR_WEIGHT_MAX))
        else:
            w = weights[aalo] if aalo < nqueues else min(weights)
            out.append(QueueSched(qid, 0, max(1, round(DWRR_WEIGHT_MAX * w / top))))
    return PortQueuePlan(discipline, tuple(out))


def plan_for_mode(mode: str, weighted_dclas: bool = False) -> PortQueuePlan:
    """The plan of a controller mode, by the emulation's rule (``tm_for_mode``)."""
    from ..emu.fabric import tm_for_mode
    p = tm_for_mode(mode, weighted_dclas)
    if p.queues == 1:
        return queue_plan(STRICT)           # one class in use: any discipline serves it
    return queue_plan(p.discipline, p.weights, p.queues)


def bf_tm_calls(plan: PortQueuePlan, dev_port: int, dev: int = 0) -> list[tuple]:
    """The bf-drivers TM calls that set ``plan`` on one port, as (function, args...) tuples."""
    calls: list[tuple] = [("bf_tm_port_q_mapping_set", dev, dev_port, NUM_PRIOS, tuple(range(NUM_PRIOS)))]
    for q in plan.queues:
        calls.append(("bf_tm_sched_q_guaranteed_rate_set", dev, dev_port, q.qid,
                      False, 0, q.guaranteed_kbps))     # pps, burst_size, rate (kbps)
        calls.append(("bf_tm_sched_q_remaining_bw_priority_set", dev, dev_port, q.qid,
                      q.remaining_bw_priority))
        calls.append(("bf_tm_sched_q_dwrr_weight_set", dev, dev_port, q.qid, q.dwrr_weight))
    return calls


def as_dict(plan: PortQueuePlan) -> dict:
    return {"discipline": plan.discipline, "strict_order": plan.strict_qids(),
            "queues": [q.__dict__ for q in plan.queues]}

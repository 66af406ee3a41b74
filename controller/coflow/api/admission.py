"""Varys deadline admission for the registry, from the scheduler core.

Varys ([VARYS] section 5.3) admits a coflow with a deadline iff its MADD bottleneck time Γ,
computed on the capacity that the already admitted deadline coflows leave (each reserves
r_ij = d_ij / time-to-deadline), is within its deadline. That test is the scheduler core's
``varys-deadline`` scheduler (:class:`coflow.sched.ordered.VarysDeadline`, which uses
:func:`coflow.sched.primitives.gamma`); this module only builds its input: a big-switch
:class:`~coflow.sched.base.View` whose ports are the topology's hosts, whose coflows are the
admitted deadline coflows still before their deadline plus the candidate (remaining bytes =
size - sent), with the admitted ones marked admitted in the scheduler's memory. The core then
decides the candidate exactly as it does in the simulator.

Coflows without a deadline reserve nothing (Varys serves them with what is left), and admitted
coflows whose deadline has passed no longer hold a reservation.
"""
from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import numpy as np

from .registry import CoflowRecord


def varys_admission(hosts: Sequence[str], capacity_Bps: float | Mapping[str, float],
                    clock: Callable[[], float] = time.time, settings: dict[str, str] | None = None):
    """An ``admit(candidate, others)`` callback for :class:`~coflow.api.registry.CoflowRegistry`.

    ``hosts``: host names, in port order (the topology's host order). ``capacity_Bps``: bytes/s
    of every host's link (both directions), or per host name. ``settings``: ``varys-deadline``
    parameter overrides (as ``--set``). Returns ``(admitted, reason)``."""
    from ..sched import make_scheduler
    from ..sched.base import View
    from ..sched.primitives import gamma

    hosts = list(hosts)
    port = {h: i for i, h in enumerate(hosts)}
    if len(port) != len(hosts):
        raise ValueError("varys_admission: duplicate host names")
    if isinstance(capacity_Bps, Mapping):
        missing = [h for h in hosts if h not in capacity_Bps]
        if missing:
            raise ValueError(f"varys_admission: no capacity for host {missing[0]}")
        cap = np.array([float(capacity_Bps[h]) for h in hosts])
    else:
        cap = np.full(len(hosts), float(capacity_Bps))
    if not np.all(np.isfinite(cap)) or np.any(cap <= 0):
        raise ValueError("varys_admission: capacities must be finite and > 0")
    sched = make_scheduler("varys-deadline", settings)
    P = len(hosts)
    # Compile the core's kernels now, not inside the first deadline Register: numba's first
    # compilation takes seconds on a cold cache and a loaded machine, and admission runs under
    # the registry's lock with clients waiting.
    one = np.zeros(1, dtype=np.int64)
    sched.allocate(View(now=0.0, ports=P, cap_up=cap.copy(), cap_down=cap.copy(), src=np.zeros(1, np.int32),
                        dst=np.full(1, P - 1, np.int32), sent=np.zeros(1), cf=one, reducer=one, cf_id=one,
                        cf_arrival=np.zeros(1), cf_sent=np.zeros(1), cf_lo=np.array([0, 1], np.int64),
                        remaining=np.ones(1), cf_deadline=np.ones(1), cf_total=np.ones(1),
                        memory={"deadline": {0: 1.0}, "admitted": {}}))

    def admit(cand: CoflowRecord, others: list[CoflowRecord]):
        now = float(clock())
        held = [r for r in others if r.admitted and r.deadline_s is not None and r.clairvoyant
                and r.registered_at + r.deadline_s > now]
        held.sort(key=lambda r: (r.registered_at, r.cid))
        recs = held + [cand]
        src, dst, sent, rem, cf, lo = [], [], [], [], [], [0]
        for k, r in enumerate(recs):
            for i, f in enumerate(r.flows):
                src.append(port[f.src])
                dst.append(port[f.dst])
                sent.append(float(r.sent_bytes.get(i, 0)))
                rem.append(float(r.remaining(i)))
                cf.append(k)
            lo.append(len(src))
        C = len(recs)
        cf_a = np.array(cf, dtype=np.int64)
        sent_a, rem_a = np.array(sent), np.array(rem)
        deadline = np.array([r.registered_at + r.deadline_s for r in recs])
        v = View(now=now, ports=P, cap_up=cap.copy(), cap_down=cap.copy(),
                 src=np.array(src, dtype=np.int32), dst=np.array(dst, dtype=np.int32), sent=sent_a, cf=cf_a,
                 reducer=np.arange(len(src), dtype=np.int64), cf_id=np.arange(C, dtype=np.int64),
                 cf_arrival=np.array([r.registered_at for r in recs]), cf_sent=np.bincount(cf_a, sent_a, C),
                 cf_lo=np.array(lo, dtype=np.int64), remaining=rem_a, cf_deadline=deadline,
                 cf_total=np.bincount(cf_a, sent_a + rem_a, C),
                 memory={"deadline": {k: float(deadline[k]) for k in range(C)},
                         "admitted": {k: True for k in range(C - 1)}})
        alloc = sched.allocate(v)
        ok = bool(alloc.admitted[-1])
        if ok:
            return True, ""
        left = deadline[-1] - now
        idle = float(gamma(v.link_demand(rem_a)[-1], v.caps))
        return False, (f"the coflow cannot finish within its deadline ({left:.6g} s left) on the capacity "
                       f"that {len(held)} admitted deadline coflow(s) leave (Γ on an idle fabric: {idle:.6g} s)")

    return admit

"""Rate-allocation building blocks shared by all schedulers. Vectorised with numpy.

Links are numbered 0..L-1; in the big-switch fabric, port i's uplink is link i and its downlink
is link P + i (see :mod:`coflow.sched.base`).  Capacities and rates are bytes per second.
"""
from __future__ import annotations

import numpy as np

from . import kernels

INF = float("inf")
REL_TOL = 1e-9  # a link whose residual falls below REL_TOL * capacity is saturated


def waterfill(links: list[np.ndarray], rem: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Weighted max-min fair rates by progressive filling over arbitrary links
    (:func:`coflow.sched.kernels.waterfill_links`).

    ``links``: for every flow, the link it crosses, one array per hop (all of the same length).
    ``rem``: residual capacity per link; **updated in place** with what the flows take.
    ``w``: weights (flow f runs at w_f * level while unfrozen); default 1.
    Flows crossing a link with no residual get rate 0.  For flows that cross just a port's
    uplink and downlink, :func:`pair_waterfill` is faster."""
    n = len(links[0]) if links else 0
    if n == 0:
        return np.zeros(0)
    L2 = np.ascontiguousarray(np.stack([np.asarray(l, dtype=np.int64) for l in links], axis=1))
    w = np.ones(n) if w is None else np.ascontiguousarray(w, dtype=float)
    return kernels.waterfill_links(L2, w, rem, REL_TOL)


def pair_waterfill(v, rem: np.ndarray, idx: np.ndarray | None = None, w: np.ndarray | None = None) -> np.ndarray:
    """Per-flow max-min over the flows ``idx`` (all active flows by default).

    In progressive filling a flow freezes when the first of its two links saturates, so its
    max-min rate is min(level(uplink), level(downlink)): only the 2P link levels are computed,
    by water-filling the (src, dst) pair counts (:func:`coflow.sched.kernels.pair_levels`).
    ``rem`` is updated in place."""
    src = v.src if idx is None else v.src[idx]
    dst = v.dst if idx is None else v.dst[idx]
    if len(src) == 0:
        return np.zeros(0)
    if w is None:
        return kernels.pair_levels_unit(src, dst, v.ports, rem, REL_TOL)
    w = np.ascontiguousarray(w, dtype=float)
    return kernels.pair_levels(src, dst, w, v.ports, rem, REL_TOL)


def gamma(demand_links: np.ndarray, rem: np.ndarray) -> np.ndarray:
    """MADD bottleneck time Γ ([VARYS] Eq. 1 / [DISS] Eq. 4.1) of each row of a (C x L) demand
    matrix on residual link capacity ``rem``: max over links of demand / Rem.  inf where a link
    with demand has no residual."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(demand_links > 0, demand_links / rem, 0.0)
    return t.max(axis=1) if t.ndim == 2 else t.max()


def madd_ordered(v, order: np.ndarray, remaining: np.ndarray, rem: np.ndarray,
                 tau: np.ndarray | None = None) -> np.ndarray:
    """Varys Pseudocode 1 ``allocBandwidth``: for each coflow in ``order``, τ = Γ on the residual
    capacity (or the given ``tau``, e.g. a deadline), r_ij = d_ij / τ, then update Rem.
    ``rem`` is updated in place.  Returns per-flow rates."""
    D = v.link_demand(remaining)
    use_tau = tau is not None
    rates_cf = kernels.madd_coflows(np.ascontiguousarray(order, dtype=np.int64), D, rem, REL_TOL,
                                    np.ascontiguousarray(tau, dtype=float) if use_tau else np.zeros(0), use_tau)
    return remaining * np.repeat(rates_cf, np.diff(v.cf_lo))  # flows are grouped by coflow


def ordered_waterfill(v, order: np.ndarray, rem: np.ndarray, weights: np.ndarray | None = None,
                      rates: np.ndarray | None = None, eligible: np.ndarray | None = None) -> np.ndarray:
    """Strict priority across coflows in ``order``; inside a coflow, (weighted) max-min over its
    flows on what is left.  Adds to ``rates`` (created if None); ``rem`` updated in place.

    This is both Varys's backfill (weights = the flows' MADD rates / sizes, "flows share it in
    their current r_ij ratios, subject to egress capacity") and the FIFO-within-queue service of
    D-CLAS and FIFO-LM (weights 1 = max-min within a coflow)."""
    if rates is None:
        rates = np.zeros(v.nflows)
    n = v.nflows
    w = np.ones(n) if weights is None else np.ascontiguousarray(weights, dtype=float)
    el = np.ones(n, dtype=bool) if eligible is None else eligible
    kernels.ordered_fill(v.kernel_flows(), np.ascontiguousarray(order, dtype=np.int64), w, el, rem, REL_TOL, rates)
    return rates


def greedy(v, order_flows: np.ndarray, rem: np.ndarray, rates: np.ndarray | None = None,
           chunk: int = 4096) -> np.ndarray:
    """Strict per-flow priority: each flow in ``order_flows`` takes min(Rem(up), Rem(down)).
    Each grant saturates a link, so at most 2P flows get a rate; the scan stops early
    (checked every ``chunk`` flows).  ``rem`` updated in place."""
    if rates is None:
        rates = np.zeros(v.nflows)
    kernels.greedy_fill(np.ascontiguousarray(order_flows, dtype=np.int64), v.src, v.dst, v.ports, rem, REL_TOL,
                        rates, int(chunk))
    return rates


def concurrency_mask(v, limit: int) -> np.ndarray:
    """CoflowSim's MAX_CONCURRENT_FLOWS: per reducer, only the first ``limit`` unfinished flows
    (in flow order) may send.  Flows of a reducer are contiguous, so rank = position - group start."""
    if limit <= 0 or v.nflows == 0:
        return np.ones(v.nflows, dtype=bool)
    r = v.reducer
    start = np.r_[True, r[1:] != r[:-1]]
    gstart = np.maximum.accumulate(np.where(start, np.arange(len(r)), 0))
    return (np.arange(len(r)) - gstart) < limit


def coflow_rates(v, rates: np.ndarray) -> np.ndarray:
    """Per-coflow sum of per-flow ``rates`` (flows are grouped by coflow: ``v.cf_lo``)."""
    return kernels.segment_sum(np.ascontiguousarray(v.cf_lo, dtype=np.int64), rates)


_SCRATCH: dict = {}


def scratch(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Read-only scratch for the kernels: (n ones, n int64 slots), grown on demand and reused
    (per thread) so that events do not page in fresh memory."""
    import threading
    key = threading.get_ident()
    ones, buf = _SCRATCH.get(key, (np.ones(0), np.empty(0, dtype=np.int64)))
    if ones.size < n:
        m = max(n, int(ones.size * 1.5))
        ones, buf = np.ones(m), np.empty(m, dtype=np.int64)
        _SCRATCH[key] = (ones, buf)
    return ones, buf

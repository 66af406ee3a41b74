"""Scheduler parameter objects shared by the simulator, the controller and the data plane.

The data plane mirrors the scheduler core: the D-CLAS thresholds and the FIFO-LM heavy
threshold that the P4 program applies are computed here, from the same objects the simulator
uses (architecture seam "the data plane mirrors the core").

Names follow the papers:
- Aalo [AALO] section 4.2-4.4 / [DISS] section 6.5: K queues, exponent E, first threshold Q1,
  coordination interval delta (Δ).  Queue i (1-based, 1 = highest priority) holds coflows whose
  bytes sent lie in [Q_i^lo, Q_i^hi) with Q_1^lo = 0, Q_i^hi = E^(i-1) * Q1, Q_K^hi = inf.
- Varys [VARYS] section 5.3: starvation-freedom period T and starved-service interval δ.
"""
from __future__ import annotations

from dataclasses import dataclass
import math

MB = 1 << 20  # CoflowSim convention: 1 MB = 2^20 bytes
HW_QUEUES = 8  # commodity switches and BMv2 (standard_metadata.priority is bit<3>)


@dataclass(frozen=True)
class DclasParams:
    """D-CLAS (Aalo) parameters. Paper defaults: K=10, E=10, Q1=10 MB, Δ=10 ms.

    ``weights`` default to Aalo's evaluated setting Q_i.weight = K - i + 1.
    """

    K: int = 10
    E: float = 10.0
    Q1: float = 10 * MB
    delta: float = 0.010  # seconds
    strict: bool = False  # True: strict priority across queues (CoflowSim's DARK)
    weights: tuple[float, ...] | None = None

    def __post_init__(self):
        if self.K < 1:
            raise ValueError("K must be >= 1")
        if self.E <= 1:
            raise ValueError("E must be > 1")
        if self.Q1 <= 0:
            raise ValueError("Q1 must be > 0")
        if self.delta < 0:
            raise ValueError("delta must be >= 0")
        if self.weights is not None and (len(self.weights) != self.K or min(self.weights) <= 0):
            raise ValueError("weights must be K positive numbers")

    def thresholds(self) -> list[float]:
        """Upper thresholds Q_1^hi .. Q_{K-1}^hi in bytes (queue K is unbounded)."""
        return [self.Q1 * self.E ** i for i in range(self.K - 1)]

    def queue_of(self, nbytes: float) -> int:
        """1-based Aalo queue for a coflow that has sent ``nbytes``."""
        q = 1
        for hi in self.thresholds():
            if nbytes >= hi:
                q += 1
            else:
                break
        return q

    def queue_weights(self) -> list[float]:
        if self.weights is not None:
            return list(self.weights)
        return [float(self.K - i + 1) for i in range(1, self.K + 1)]

    def ranges(self) -> list[tuple[int, int, int]]:
        """(lo, hi_inclusive, queue) byte ranges for a range-match table, integer bytes."""
        out = []
        lo = 0
        for q, hi in enumerate(self.thresholds(), start=1):
            out.append((lo, int(math.ceil(hi)) - 1, q))
            lo = int(math.ceil(hi))
        out.append((lo, (1 << 64) - 1, self.K))
        return out


def hw_priority(queue: int, nqueues: int = HW_QUEUES) -> int:
    """Map a 1-based Aalo queue (1 = highest) to a BMv2/v1model priority (7 = served first)."""
    if not 1 <= queue <= nqueues:
        raise ValueError(f"queue {queue} outside 1..{nqueues}")
    return nqueues - queue


@dataclass(frozen=True)
class FifoLmParams:
    """Baraat FIFO-LM. A coflow is heavy once its bytes exceed ``heavy_bytes``; the seeds found
    the 80th percentile of coflow size best ([AALO] section 7.2.1). ``heavy_percentile`` is used
    to derive ``heavy_bytes`` from a workload when ``heavy_bytes`` is None."""

    heavy_percentile: float = 80.0
    heavy_bytes: float | None = None


@dataclass(frozen=True)
class VarysParams:
    """Varys SEBF+MADD. EC2 defaults ([VARYS] section 7.1): T = 2 s, δ = 200 ms."""

    T: float = 2.0
    delta: float = 0.2
    backfill: bool = True
    starvation: bool = True

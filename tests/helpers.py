"""Build small workloads and views by hand."""
import numpy as np

from coflow.sched.base import View
from coflow.trace import Workload


def workload(ports, coflows, arrivals=None):
    """``coflows``: list of lists of (src, dst, bytes)."""
    src, dst, size, red, lo = [], [], [], [], [0]
    for flows in coflows:
        for s, d, b in flows:
            src.append(s); dst.append(d); size.append(float(b)); red.append(len(red))
        lo.append(len(src))
    C = len(coflows)
    return Workload(ports, np.arange(1, C + 1), np.array(arrivals if arrivals is not None else [0.0] * C, dtype=float),
                    np.array(lo), np.array(src, dtype=np.int32), np.array(dst, dtype=np.int32),
                    np.array(size), np.array(red, dtype=np.int64))


def view(ports, coflows, cap_up, cap_down, now=0.0, sent=None):
    """A scheduler view of ``coflows`` (lists of (src, dst, remaining bytes)) at time ``now``."""
    wl = workload(ports, coflows)
    cf = wl.coflow_of_flow()
    C = wl.ncoflows
    s = np.zeros(wl.nflows) if sent is None else np.asarray(sent, float)
    return View(now=now, ports=ports, cap_up=np.asarray(cap_up, float), cap_down=np.asarray(cap_down, float),
                src=wl.src, dst=wl.dst, sent=s, cf=cf, reducer=wl.reducer, cf_id=wl.ids,
                cf_arrival=wl.arrival, cf_sent=np.bincount(cf, s, C), cf_lo=wl.flow_lo,
                remaining=wl.size.copy(), cf_total=np.bincount(cf, wl.size, C), memory={})

"""The coflow-benchmark trace format: strict reader, writer, flow expansion, stats, generator, scaler.

Format (coflow/coflow-benchmark README)::

    <ports> <coflows>
    <id> <arrival ms> <#mappers> <mapper ports...> <#reducers> <reducer port:MB ...>

Validation is strict: every problem raises :class:`TraceError` whose message is one line,
``file:line: field: problem``.  The CLI turns it into exit code 2 and writes no output.

Arrival order: lines whose arrival time is smaller than the previous line's are an error by
default.  ``allow_unsorted=True`` (CLI ``--allow-unsorted``) accepts them with one warning and
sorts coflows by (arrival, file order), which is what a replay needs anyway.
"""
from __future__ import annotations

import math
import os
import tempfile
import warnings
from dataclasses import dataclass

import numpy as np

from .params import MB

# Flow-expansion conventions ------------------------------------------------------------------
#: CoflowSim's CoflowBenchmarkTraceProducer: every reducer's MB is split evenly over all the
#: coflow's mappers, one flow per (mapper, reducer); 1 MB = 2^20 bytes.
SPLIT = "split"
#: Alternative: one flow per distinct (mapper port, reducer port) pair, the reducer's bytes split
#: over mapper *ports* in proportion to how many mappers sit on each port; 1 MB = 10^6 bytes
#: (the SI reading of "MB").  This is what one TCP connection per host pair carries in the
#: emulation, and it shows how sensitive results are to the unstated MB unit.
PAIRS = "pairs"
CONVENTIONS = (SPLIT, PAIRS)

SHORT_BYTES = 5 * MB  # short: longest flow < 5 MB ([VARYS] Table 4)
NARROW_FLOWS = 50  # narrow: at most 50 flows
BINS = ("SN", "LN", "SW", "LW")


class TraceError(ValueError):
    """A malformed trace. ``str(err)`` is a single line naming file:line and the field."""

    def __init__(self, path: str, line: int, fieldname: str, problem: str):
        self.path, self.line, self.field, self.problem = path, line, fieldname, problem
        super().__init__(f"{path}:{line}: {fieldname}: {problem}")


@dataclass
class CoflowSpec:
    """One trace line: a coflow as the trace describes it (before expansion into flows)."""

    id: int
    arrival_ms: float
    mappers: list[int]
    reducers: list[tuple[int, float]]  # (port, MB)
    line: int = 0

    @property
    def total_mb(self) -> float:
        return sum(mb for _, mb in self.reducers)


@dataclass
class Trace:
    ports: int
    coflows: list[CoflowSpec]
    path: str = "<memory>"

    def write(self, path: str) -> None:
        write_trace(self, path)


# Reading ------------------------------------------------------------------------------------

def _int(tok: str, path: str, ln: int, fieldname: str) -> int:
    try:
        v = int(tok)
    except ValueError:
        raise TraceError(path, ln, fieldname, f"not an integer: {tok!r}") from None
    return v


def _num(tok: str, path: str, ln: int, fieldname: str) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise TraceError(path, ln, fieldname, f"not a number: {tok!r}") from None
    if math.isnan(v) or math.isinf(v):
        raise TraceError(path, ln, fieldname, f"not a finite number: {tok!r}")
    return v


def parse_trace(text: str, path: str = "<string>", allow_unsorted: bool = False) -> Trace:
    lines = text.splitlines()
    # Skip leading blank lines? No: line 1 must be the header.
    if not lines or not lines[0].strip():
        raise TraceError(path, 1, "header", "missing '<ports> <coflows>' line")
    head = lines[0].split()
    if len(head) != 2:
        raise TraceError(path, 1, "header", f"expected 2 fields '<ports> <coflows>', got {len(head)}")
    ports = _int(head[0], path, 1, "ports")
    ncoflows = _int(head[1], path, 1, "coflows")
    if ports <= 0:
        raise TraceError(path, 1, "ports", f"must be positive, got {ports}")
    if ncoflows < 0:
        raise TraceError(path, 1, "coflows", f"must be >= 0, got {ncoflows}")

    coflows: list[CoflowSpec] = []
    seen: dict[int, int] = {}
    last_arrival = -math.inf
    unsorted_at = None
    for ln, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        tok = raw.split()
        if len(tok) < 4:
            raise TraceError(path, ln, "line", f"truncated: {len(tok)} fields, need at least 4")
        cid = _int(tok[0], path, ln, "id")
        if cid in seen:
            raise TraceError(path, ln, "id", f"duplicate coflow id {cid} (first on line {seen[cid]})")
        arrival = _num(tok[1], path, ln, "arrival")
        if arrival < 0:
            raise TraceError(path, ln, "arrival", f"negative arrival time {tok[1]}")
        nm = _int(tok[2], path, ln, "#mappers")
        if nm <= 0:
            raise TraceError(path, ln, "#mappers", f"must be positive, got {nm}")
        if len(tok) < 3 + nm + 1:
            raise TraceError(path, ln, "mappers", f"truncated: #mappers={nm} but only {len(tok) - 3} fields follow")
        mappers = []
        for k in range(nm):
            p = _int(tok[3 + k], path, ln, f"mapper[{k}]")
            if not 0 <= p < ports:
                raise TraceError(path, ln, f"mapper[{k}]", f"port {p} outside [0, {ports})")
            mappers.append(p)
        nr = _int(tok[3 + nm], path, ln, "#reducers")
        if nr <= 0:
            raise TraceError(path, ln, "#reducers", f"must be positive, got {nr}")
        rest = tok[4 + nm:]
        if len(rest) < nr:
            raise TraceError(path, ln, "reducers", f"truncated: #reducers={nr} but only {len(rest)} fields follow")
        if len(rest) > nr:
            raise TraceError(path, ln, "line", f"{len(rest) - nr} unexpected extra field(s) after the reducers")
        reducers = []
        for k, r in enumerate(rest):
            if r.count(":") != 1:
                raise TraceError(path, ln, f"reducer[{k}]", f"expected 'port:MB', got {r!r}")
            ps, ms = r.split(":")
            p = _int(ps, path, ln, f"reducer[{k}].port")
            if not 0 <= p < ports:
                raise TraceError(path, ln, f"reducer[{k}].port", f"port {p} outside [0, {ports})")
            mb = _num(ms, path, ln, f"reducer[{k}].MB")
            if mb < 0:
                raise TraceError(path, ln, f"reducer[{k}].MB", f"negative size {ms}")
            reducers.append((p, mb))
        if arrival < last_arrival and unsorted_at is None:
            unsorted_at = ln
            if not allow_unsorted:
                raise TraceError(path, ln, "arrival", f"{tok[1]} ms is earlier than the previous line's {last_arrival:g} ms (arrivals must be sorted; --allow-unsorted sorts them)")
        last_arrival = max(last_arrival, arrival)
        seen[cid] = ln
        coflows.append(CoflowSpec(cid, arrival, mappers, reducers, ln))
    if len(coflows) != ncoflows:
        raise TraceError(path, 1, "coflows", f"header says {ncoflows} coflows, file has {len(coflows)}")
    if unsorted_at is not None:
        warnings.warn(f"{path}:{unsorted_at}: arrival: arrivals not sorted; sorted by arrival time", stacklevel=2)
        coflows.sort(key=lambda c: c.arrival_ms)  # stable: ties keep file order
    return Trace(ports, coflows, path)


def read_trace(path: str, allow_unsorted: bool = False) -> Trace:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise TraceError(path, 1, "file", f"not UTF-8 text ({e.reason})") from None
    return parse_trace(text, path, allow_unsorted)


def format_trace(tr: Trace) -> str:
    out = [f"{tr.ports} {len(tr.coflows)}"]
    for c in tr.coflows:
        arr = int(c.arrival_ms) if float(c.arrival_ms).is_integer() else repr(c.arrival_ms)
        red = " ".join(f"{p}:{_fmt_mb(mb)}" for p, mb in c.reducers)
        out.append(f"{c.id} {arr} {len(c.mappers)} {' '.join(map(str, c.mappers))} {len(c.reducers)} {red}")
    return "\n".join(out) + "\n"


def _fmt_mb(mb: float) -> str:
    s = f"{mb:.6f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def write_trace(tr: Trace, path: str) -> None:
    """Atomic write: a failure leaves no partial output file."""
    text = format_trace(tr)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".trace-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# Flow expansion ------------------------------------------------------------------------------

@dataclass
class Workload:
    """A trace expanded into flows, as flat arrays (struct of arrays) for speed.

    Flows of coflow ``k`` are ``flow_lo[k]:flow_lo[k+1]``.  ``reducer`` numbers a flow's reducer
    within its coflow (used by CoflowSim's per-reducer concurrent-flow cap)."""

    ports: int
    ids: np.ndarray  # coflow id per coflow
    arrival: np.ndarray  # seconds
    flow_lo: np.ndarray  # len C+1
    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray  # bytes (float64)
    reducer: np.ndarray  # global reducer-group id per flow
    convention: str = SPLIT
    deadline: np.ndarray | None = None  # seconds after arrival, or inf

    @property
    def ncoflows(self) -> int:
        return len(self.ids)

    @property
    def nflows(self) -> int:
        return len(self.src)

    def coflow_of_flow(self) -> np.ndarray:
        return np.repeat(np.arange(self.ncoflows), np.diff(self.flow_lo))

    def subset(self, n: int) -> "Workload":
        """The first ``n`` coflows."""
        hi = int(self.flow_lo[n])
        return Workload(self.ports, self.ids[:n], self.arrival[:n], self.flow_lo[: n + 1], self.src[:hi],
                        self.dst[:hi], self.size[:hi], self.reducer[:hi], self.convention,
                        None if self.deadline is None else self.deadline[:n])


def expand(tr: Trace, convention: str = SPLIT) -> Workload:
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r}; choose from {', '.join(CONVENTIONS)}")
    src, dst, size, red, lo = [], [], [], [], [0]
    rid = 0
    for c in tr.coflows:
        # a reducer's flows, one per mapper (split) or mapper port (pairs), reducer after reducer
        R = len(c.reducers)
        ports = np.fromiter((p for p, _ in c.reducers), dtype=np.int32, count=R)
        mbs = np.fromiter((mb for _, mb in c.reducers), dtype=np.float64, count=R)
        if convention == SPLIT:
            m = np.asarray(c.mappers, dtype=np.int32)
            M = len(m)
            sizes = np.repeat(mbs * MB / M, M)
        else:
            m, cnt = np.unique(np.asarray(c.mappers, dtype=np.int32), return_counts=True)
            M = len(m)
            sizes = ((mbs * 1e6)[:, None] * cnt / cnt.sum()).ravel()
        src.append(np.tile(m, R))
        dst.append(np.repeat(ports, M))
        size.append(sizes)
        red.append(np.repeat(np.arange(rid, rid + R, dtype=np.int64), M))
        rid += R
        lo.append(lo[-1] + R * M)
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)
    return Workload(
        ports=tr.ports,
        ids=np.array([c.id for c in tr.coflows], dtype=np.int64),
        arrival=np.array([c.arrival_ms / 1000.0 for c in tr.coflows], dtype=np.float64),
        flow_lo=np.array(lo, dtype=np.int64),
        src=cat(src, np.int32),
        dst=cat(dst, np.int32),
        size=cat(size, np.float64),
        reducer=cat(red, np.int64),
        convention=convention,
    )


# Statistics and bins --------------------------------------------------------------------------

def coflow_bins(wl: Workload) -> np.ndarray:
    """Bin label per coflow: SN, LN, SW or LW (short = longest flow < 5 MB; narrow = <= 50 flows)."""
    C = wl.ncoflows
    width = np.diff(wl.flow_lo)
    cof = wl.coflow_of_flow()
    length = np.zeros(C)
    if wl.nflows:
        np.maximum.at(length, cof, wl.size)
    short = length < SHORT_BYTES
    narrow = width <= NARROW_FLOWS
    out = np.empty(C, dtype=object)
    out[short & narrow] = "SN"
    out[~short & narrow] = "LN"
    out[short & ~narrow] = "SW"
    out[~short & ~narrow] = "LW"
    return out


def stats(wl: Workload) -> dict:
    cof = wl.coflow_of_flow()
    total = np.bincount(cof, weights=wl.size, minlength=wl.ncoflows)
    bins = coflow_bins(wl)
    allb = float(total.sum()) or 1.0
    per_bin = {}
    for b in BINS:
        m = bins == b
        per_bin[b] = {
            "coflows": int(m.sum()),
            "pct_coflows": 100.0 * m.sum() / max(1, wl.ncoflows),
            "bytes": float(total[m].sum()),
            "pct_bytes": 100.0 * total[m].sum() / allb,
        }
    span = float(wl.arrival[-1] - wl.arrival[0]) if wl.ncoflows else 0.0
    return {
        "ports": wl.ports,
        "coflows": wl.ncoflows,
        "flows": wl.nflows,
        "bytes": float(total.sum()),
        "span_s": span,
        "max_width": int(np.diff(wl.flow_lo).max()) if wl.ncoflows else 0,
        "convention": wl.convention,
        "bins": per_bin,
    }


# Generation and scaling ---------------------------------------------------------------------

def generate(ncoflows: int = 100, ports: int = 16, load: float = 0.6, tail: float = 1.2,
             seed: int = 1, capacity_bps: float = 1e9) -> Trace:
    """A seeded FB-like synthetic trace.

    Mirrors the FB trace's shape: about half the coflows short and narrow, a heavy tail of long
    and wide coflows that carry almost all bytes.  Widths are drawn so that SN/LN/SW/LW come out
    near 52/16/15/17 %; per-reducer sizes are Pareto with shape ``tail`` (smaller is heavier).
    Arrivals are Poisson, with the rate set so that the offered load (bytes per second over
    the total capacity of the fabric's ports) is ``load``.
    """
    if ncoflows < 1 or ports < 1:
        raise ValueError("ncoflows and ports must be >= 1")
    if not 0 < load:
        raise ValueError("load must be > 0")
    if tail <= 0:
        raise ValueError("tail must be > 0")
    rng = np.random.default_rng(seed)
    specs = []
    kinds = rng.choice(4, size=ncoflows, p=[0.52, 0.16, 0.15, 0.17])
    sizes_total = []
    bodies = []
    for k in kinds:
        wide = k in (2, 3)
        long_ = k in (1, 3)
        if wide:
            nm = int(rng.integers(max(2, ports // 4), ports + 1))
            nr = int(rng.integers(max(2, ports // 4), ports + 1))
            while nm * nr <= NARROW_FLOWS:
                nm, nr = min(ports, nm + 1), min(ports, nr + 1)
                if nm == ports and nr == ports:
                    break
        else:
            nm = int(rng.integers(1, min(ports, 7) + 1))
            nr = int(rng.integers(1, min(ports, max(1, NARROW_FLOWS // nm)) + 1))
        mappers = sorted(rng.choice(ports, size=nm, replace=False).tolist())
        rports = sorted(rng.choice(ports, size=nr, replace=False).tolist())
        # per-flow size in MB (split convention): short < 5 MB, long >= 5 MB with a Pareto tail
        if long_:
            flow_mb = 5.0 * (1 + rng.pareto(tail, size=nr))
            flow_mb = np.minimum(flow_mb, 5.0 * 2000)
        else:
            flow_mb = rng.uniform(0.01, 4.9, size=nr)
        red_mb = np.round(flow_mb * nm, 3)
        red_mb = np.maximum(red_mb, 0.001)
        bodies.append((mappers, list(zip(rports, red_mb.tolist()))))
        sizes_total.append(float(red_mb.sum()) * MB)
    total_bytes = sum(sizes_total)
    cap_Bps = capacity_bps / 8.0 * ports
    duration = total_bytes / (load * cap_Bps)
    gaps = rng.exponential(duration / ncoflows, size=ncoflows)
    gaps[0] = 0.0
    t_ms = np.round(np.cumsum(gaps) * 1000.0).astype(int)
    for i, ((m, r), a) in enumerate(zip(bodies, t_ms), start=1):
        specs.append(CoflowSpec(i, int(a), m, r))
    return Trace(ports, specs, "<generated>")


def scale(tr: Trace, ports: int, bytes_factor: float = 1.0, time_factor: float = 1.0,
          first: int | None = None) -> Trace:
    """Map a trace onto ``ports`` ports and scale bytes and time.

    Port p goes to p mod ports (racks folded round-robin onto hosts).  Mappers (reducers) that
    land on the same port are merged into one, as the benchmark itself merged the machines of a
    rack; a merged reducer receives the sum of its parts.  Preserved: coflow count, order and ids;
    each coflow's total bytes (times ``bytes_factor``); arrival times (times ``time_factor``);
    width up to merging.  Not preserved: per-port load balance when ports don't divide evenly.
    """
    if ports < 1:
        raise ValueError("ports must be >= 1")
    if bytes_factor <= 0 or time_factor <= 0:
        raise ValueError("scale factors must be > 0")
    out = []
    for c in tr.coflows[: first if first else None]:
        m = sorted({p % ports for p in c.mappers})
        red: dict[int, float] = {}
        for p, mb in c.reducers:
            red[p % ports] = red.get(p % ports, 0.0) + mb * bytes_factor
        out.append(CoflowSpec(c.id, c.arrival_ms * time_factor, m, sorted(red.items())))
    return Trace(ports, out, tr.path)

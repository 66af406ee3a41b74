"""The coflow-benchmark trace format: strict reader, writer, flow expansion, stats, generator, scaler.

Format (coflow/coflow-benchmark README)::

    <ports> <coflows>
    <id> <arrival ms> <#mappers> <mapper ports...> <#reducers> <reducer port:MB ...>

Validation is strict: every problem raises :class:`TraceError` whose message is one line,
``file:line: field: problem``.  The CLI turns it into exit code 2 and writes no output.

Runtime dynamics (an extension; plain coflow-benchmark files are valid as they are): a line may
end with annotations ``key=value`` after its reducers::

    <id> <arrival ms> <#mappers> <mappers...> <#reducers> <reducers...> [wave=N] [restart=1] [after=ID,...] [pipe=ID,...]

- ``wave=N`` (N >= 2): wave N of coflow ``id`` (the same id, the same CoflowId): its flows start
  when wave N-1's flows have all finished, and not before the line's arrival (a bound, so the
  sorting rule below concerns first lines only).  Waves 2.. follow wave 1 (the line without
  ``wave=``) in the file, in order, without gaps.
- ``restart=1`` (on a wave line): the wave re-runs restarted tasks; treated as a wave ([AALO] 5.2)
  and counted in the report as restarted bytes.
- ``after=ID,...``: Starts-After (barrier) edges: the coflow starts when all these coflows are
  complete.  ``pipe=ID,...``: Finishes-Before (pipelined) edges: it may start once these have
  started, but it is not complete before they are.  Only on a coflow's first line.

The header counts lines.  See :mod:`coflow.dynamics` for the semantics and traces/README.md.

Arrival order: lines whose arrival time is smaller than the previous line's are an error by
default.  ``allow_unsorted=True`` (CLI ``--allow-unsorted``) accepts them with one warning and
sorts coflows by (arrival, file order), which is what a replay needs anyway.
"""
from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from .params import MB
from .tracemodel import (  # noqa: F401 (the trace's data types and writer, re-exported)
    BINS, CONVENTIONS, NARROW_FLOWS, PAIRS, SHORT_BYTES, SPLIT, CoflowSpec, Trace, Workload, _fmt_mb,
    format_trace, write_trace)


class TraceError(ValueError):
    """A malformed trace. ``str(err)`` is a single line naming file:line and the field."""

    def __init__(self, path: str, line: int, fieldname: str, problem: str):
        self.path, self.line, self.field, self.problem = path, line, fieldname, problem
        super().__init__(f"{path}:{line}: {fieldname}: {problem}")


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
    waves: dict[int, int] = {}  # coflow id -> last wave number read
    last_arrival = -math.inf
    unsorted_at = None
    for ln, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        tok = raw.split()
        if len(tok) < 4:
            raise TraceError(path, ln, "line", f"truncated: {len(tok)} fields, need at least 4")
        cid = _int(tok[0], path, ln, "id")
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
        ann = _annotations(rest[nr:], path, ln)
        rest = rest[:nr]
        wave = ann.get("wave", 1)
        if wave == 1:
            if cid in seen:
                raise TraceError(path, ln, "id", f"duplicate coflow id {cid} (first on line {seen[cid]})")
        else:
            if cid not in seen:
                raise TraceError(path, ln, "wave", f"wave {wave} of coflow {cid}, which has no wave-1 line before it")
            if wave != waves[cid] + 1:
                raise TraceError(path, ln, "wave", f"wave {wave} of coflow {cid} follows wave {waves[cid]} "
                                                   f"(waves must be numbered 1, 2, 3, ... in file order)")
            if "after" in ann or "pipe" in ann:
                raise TraceError(path, ln, "after" if "after" in ann else "pipe",
                                 "DAG edges belong on the coflow's first line, not on a wave line")
        if ann.get("restart") and wave == 1:
            raise TraceError(path, ln, "restart", "restart=1 needs wave=N (N >= 2): a restarted task is a later wave")
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
        # (a wave line's arrival is only the earliest its wave may start: not an arrival)
        if wave == 1 and arrival < last_arrival and unsorted_at is None:
            unsorted_at = ln
            if not allow_unsorted:
                raise TraceError(path, ln, "arrival", f"{tok[1]} ms is earlier than the previous line's {last_arrival:g} ms (arrivals must be sorted; --allow-unsorted sorts them)")
        if wave == 1:
            last_arrival = max(last_arrival, arrival)
        if wave == 1:
            seen[cid] = ln
        waves[cid] = wave
        coflows.append(CoflowSpec(cid, arrival, mappers, reducers, ln, wave, bool(ann.get("restart", 0)),
                                  ann.get("after", ()), ann.get("pipe", ())))
    if len(coflows) != ncoflows:
        raise TraceError(path, 1, "coflows", f"header says {ncoflows} coflows, file has {len(coflows)}")
    _check_dag(coflows, seen, path)
    if unsorted_at is not None:
        warnings.warn(f"{path}:{unsorted_at}: arrival: arrivals not sorted; sorted by arrival time", stacklevel=2)
        first_arrival = {c.id: c.arrival_ms for c in coflows if c.wave == 1}
        # stable: ties keep file order, and a coflow's waves stay after its first line
        coflows.sort(key=lambda c: first_arrival[c.id])
    return Trace(ports, coflows, path)


ANNOTATIONS = ("wave", "restart", "after", "pipe")


def _annotations(toks: list[str], path: str, ln: int) -> dict:
    """The ``key=value`` fields after the reducers (module doc)."""
    out: dict = {}
    for tok in toks:
        key, eq, val = tok.partition("=")
        if not eq:
            raise TraceError(path, ln, "line", f"unexpected extra field {tok!r} after the reducers "
                                               f"(annotations are key=value: {', '.join(ANNOTATIONS)})")
        if key not in ANNOTATIONS:
            raise TraceError(path, ln, key or "line", f"unknown annotation {tok!r} (known: {', '.join(ANNOTATIONS)})")
        if key in out:
            raise TraceError(path, ln, key, "given twice")
        if key == "wave":
            w = _int(val, path, ln, "wave")
            if w < 1:
                raise TraceError(path, ln, "wave", f"must be >= 1, got {w}")
            out[key] = w
        elif key == "restart":
            if val not in ("0", "1"):
                raise TraceError(path, ln, "restart", f"must be 0 or 1, got {val!r}")
            out[key] = val == "1"
        else:
            ids = [_int(x, path, ln, key) for x in val.split(",")] if val else []
            if not ids:
                raise TraceError(path, ln, key, "expected one or more coflow ids, e.g. after=3,5")
            if len(set(ids)) != len(ids):
                raise TraceError(path, ln, key, f"a parent listed twice in {val!r}")
            out[key] = tuple(ids)
    if set(out.get("after", ())) & set(out.get("pipe", ())):
        both = sorted(set(out["after"]) & set(out["pipe"]))
        raise TraceError(path, ln, "pipe", f"parent {both[0]} is both a Starts-After and a Finishes-Before parent")
    return out


def _check_dag(coflows: list[CoflowSpec], first_line: dict[int, int], path: str) -> None:
    """Every parent is a coflow of the trace and the edges have no cycle (each error names the
    line of the child, or of the first coflow on the cycle, in file order)."""
    parents: dict[int, tuple[int, ...]] = {}
    for c in coflows:
        if c.wave != 1:
            continue
        for key, ps in (("after", c.after), ("pipe", c.pipe)):
            for p in ps:
                if p not in first_line:
                    raise TraceError(path, c.line, key, f"unknown parent coflow {p}")
                if p == c.id:
                    raise TraceError(path, c.line, key, f"coflow {c.id} is its own parent")
        if c.after or c.pipe:
            parents[c.id] = c.after + c.pipe
    if not parents:
        return
    state: dict[int, int] = {}  # 1 on the DFS stack, 2 done
    for start in sorted(parents, key=lambda i: first_line[i]):
        if state.get(start):
            continue
        stack = [(start, iter(parents.get(start, ())))]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                continue
            if state.get(nxt) == 1:
                cyc = [n for n, _ in stack]
                cyc = cyc[cyc.index(nxt):]
                first = min(cyc, key=lambda i: first_line[i])
                k = cyc.index(first)
                cyc = cyc[k:] + cyc[:k] + [first]
                c = next(x for x in coflows if x.id == first and x.wave == 1)
                raise TraceError(path, c.line, "after" if cyc[1] in c.after else "pipe",
                                 "cycle of dependencies " + " -> ".join(f"{i}" for i in cyc)
                                 + " (each depends on the next)")
            if not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(parents.get(nxt, ()))))


def read_trace(path: str, allow_unsorted: bool = False) -> Trace:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise TraceError(path, 1, "file", f"not UTF-8 text ({e.reason})") from None
    return parse_trace(text, path, allow_unsorted)


# Flow expansion ------------------------------------------------------------------------------

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
        dynamics=_dynamics(tr),
    )


def _dynamics(tr: Trace):
    if not tr.dynamic:
        return None
    from .dynamics import build_dynamics    # (lazy: the release rules import the coflow API's ids)
    return build_dynamics(tr.coflows)


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
    if wl.dynamics is not None:   # bins above are per line (wave); these count the dynamics
        d = wl.dynamics
        extra = {"lines": wl.ncoflows, "trace_coflows": d.ncoflows, "jobs": len(set(d.job.tolist())),
                 "waves_max": int(max(len(d.units_of(c)) for c in range(d.ncoflows))),
                 "after_edges": sum(map(len, d.after)), "pipe_edges": sum(map(len, d.pipe))}
    else:
        extra = {}
    return {**extra,
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
    for c in closed_prefix(tr.coflows, first):
        m = sorted({p % ports for p in c.mappers})
        red: dict[int, float] = {}
        for p, mb in c.reducers:
            red[p % ports] = red.get(p % ports, 0.0) + mb * bytes_factor
        out.append(dataclasses.replace(c, arrival_ms=c.arrival_ms * time_factor, mappers=m,
                                       reducers=sorted(red.items())))
    return Trace(ports, out, tr.path)


def closed_prefix(coflows: list[CoflowSpec], first: int | None) -> list[CoflowSpec]:
    """The first ``first`` lines (all when None or 0), less any line whose coflow's first wave or
    one of whose parents was cut, and so on transitively: a DAG or a multi-wave coflow is kept
    whole or not at all where the cut falls inside it (plain traces: just the first lines)."""
    out = coflows[: first if first else None]
    if not first or not any(c.dynamic for c in coflows):
        return out
    while True:
        have = {c.id for c in out if c.wave == 1}
        keep = [c for c in out if c.id in have and all(p in have for p in c.after + c.pipe)]
        if len(keep) == len(out):
            return out
        out = keep

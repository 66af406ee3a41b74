"""The coordinated modes' reads (D-CLAS, FIFO-LM), a part of :class:`coflow.ctl.daemon.Controller`:
which edges a coflow sends from, the edges' per-coflow byte counters read in one request per
switch (all in flight together), unchanged answers skipped, and the report digests the edges
push instead when they do.
"""
from __future__ import annotations

import logging
import time


from . import model as M

from .aio import call_timeout
from . import wire


log = logging.getLogger(__name__)


class CounterReads:
    def _sender_edges(self) -> dict:
        """cid -> the edge switches of its registered flows' source hosts (a record unchanged
        since the last refresh keeps its frozenset object: the incremental round skips it)."""
        memo, out, he = self._senders_memo, {}, self._host_edge
        for r in self._records:
            cid = (r.cid.external, r.cid.internal)
            m = memo.get(cid)
            if m is None or m[0] is not r:
                fs = frozenset(he[f.src] for f in r.flows if f.src in he)
                m = memo[cid] = (r, fs if m is None or m[1] != fs else m[1])
            out[cid] = m[1]
        for cid in [c for c in memo if c not in out]:
            del memo[cid]
        return out

    def _read_raw(self, agents: list, counter: str, idx: dict) -> list:
        """One counter ReadRequest per agent (``idx``: name -> indices tuple, or None for a
        wildcard read), all in flight together; returns [(agent, serialised responses or the
        exception)]."""
        if self.io is not None:
            items = []
            for a in agents:
                items.append((a.name, a.address, a.io_key(), a.counter_request(counter, idx[a.name])))
            return list(zip(agents, self.io.run("read", items)))
        waits = []
        timeout = call_timeout("read", len(agents))
        for a in agents:
            try:
                waits.append((a, a.client.read_raw_start(a.counter_request(counter, idx[a.name]),
                                                         timeout=timeout)))
            except Exception as exc:  # noqa: BLE001
                waits.append((a, lambda exc=exc: _raise(exc)))
        out = []
        for a, w in waits:
            try:
                out.append((a, w()))
            except Exception as exc:  # noqa: BLE001
                out.append((a, exc))
        return out

    def _unchanged(self, name: str, key, raw: list) -> bool:
        """Whether switch ``name`` answered exactly as last time under the same ``key`` (then
        nothing it holds changed: not decoded again); records the answer."""
        prev = self._raw_last.get(name)
        same = self.skip_unchanged and prev is not None and prev[0] == key and prev[1] == raw
        if not same:
            self._raw_last[name] = (key, raw)
        return same

    def _read_counters(self) -> float:
        """D-CLAS read phase: coflow_bytes of every coordinated slot from every edge switch,
        one ReadRequest per switch, all in flight together; an edge whose answer is byte for
        byte the last one's is not decoded (its counters did not change)."""
        t0 = time.perf_counter()
        idx = tuple(sorted(set(self.slots.slot.values())))
        if not idx:
            return 0.0
        readable = [a for a in (self.agents[e] for e in self.edges) if a.readable()]
        if self.use_digest:  # the edges push threshold crossings: poll only those that must be
            readable = self._observe_digests(readable)
        elif self.use_push:    # edges that push their counters are not polled
            polled = []
            for a in readable:
                seq = a.push_sequence()
                if seq is None:
                    polled.append(a)
                    continue
                if self._push_seen.get(a.name) == (seq, idx, self.coord.epoch):
                    continue     # nothing pushed since the last round: not copied again
                got = a.pushed_counts(idx)
                if got is None:
                    polled.append(a)
                    continue
                with self._mu:
                    key = (got[0], idx, self.coord.epoch)
                    if self._push_seen.get(a.name) != key:
                        self._push_seen[a.name] = key
                        self.coord.observe(a.name, {i: v[0] for i, v in got[1].items()})
            readable = polled
        for a, got in self._read_raw(readable, M.C_COFLOW_BYTES, {a.name: idx for a in readable}):
            if isinstance(got, Exception):
                self.metrics.read_errors.labels(a.name).inc()
                continue
            with self._mu:
                if self._unchanged(a.name, (idx, self.coord.epoch, self.use_digest), got):
                    continue
                counts: dict = {}
                for resp in got:
                    wire.parse_counter_bytes_fast(resp, counts)
                if self.use_digest:   # rounded as the pushed counts are
                    if a.digests is not None:
                        n = self.digest.corrected(a.digests.polled(counts))
                        if n:
                            self.metrics.digest_corrections.labels(a.name).inc(n)
                    counts = self.digest.quantise(counts)
                self.coord.observe(a.name, counts)
        return time.perf_counter() - t0

    def _telemetry_slots(self) -> list:
        """The slots in use, for the telemetry's per-slot counters: every assigned slot and
        every registered coflow's hashed slot (where it counts before it has one)."""
        with self._mu:
            out = list(self.slots.slot.values())
            records = list(self._records)
        hs = self.target.hash_slot
        out.extend(hs(r.cid) for r in records)
        return out

    def _edge_pipes(self) -> dict:
        """Tofino: edge -> the pipes of its host ports; the edges whose host ports span pipes
        are the coordinator's split edges (every D-CLAS decision there by override). BMv2:
        one pipe, {}."""
        if self.target.name != "tofino":
            return {}
        from ..tofino.ports import edge_pipes
        pipes = edge_pipes(self.topo, self.port_map)
        self.coord.set_split_edges(e for e, p in pipes.items() if len(p) > 1)
        return pipes

    def _digest_rounds(self):
        """The digest side of D-CLAS (coflow.ctl.digest) when the P4 program has the report
        digest, with an inbox on every edge; None otherwise. Sets the split edges first."""
        from .digest import DigestFormat, DigestRounds
        pipes = self._edge_pipes()
        fmt = DigestFormat.from_p4info(self.codec.h.p4info, self.target.bytes_unit_shift)
        if fmt is None or M.T_REPORT not in self.codec.table_id:
            return None
        width = self.codec.aparams[M.A_SET_STEP]["mask"][1]
        d = DigestRounds(fmt, self.dclas_params, self.edges, self.target.bytes_unit_shift,
                         self.target.metered_slots, self.ctl.digest_resync_s, width,
                         domains=sum(len(pipes.get(e, (0,))) for e in self.edges))
        for e in self.edges:
            self.agents[e].digests = d.inbox(e)
        return d

    def _observe_digests(self, readable: list) -> list:
        """Digest mode: hand the coordinator what the edges pushed (rounded to the report
        steps); returns the edges to poll this round."""
        pushed, poll = self.digest.collect(readable, time.monotonic())
        with self._mu:
            for name, counts in pushed.items():
                self.coord.observe(name, counts)
        return poll


def _raise(exc):
    raise exc

"""Global coordination, pure: edge counters -> global sizes -> the overrides each edge switch
needs. D-CLAS (Aalo section 4.3): sizes -> queues. FIFO-LM (Baraat): sizes -> FIFO groups.

Every Δ the controller reads the per-coflow byte counter (``coflow_bytes[slot]``) of every edge
switch. A coflow's global size is the sum over edges; the core's D-CLAS
(:func:`coflow.sched.queues.dclas_queues`, fed ``cf_sent`` = global sizes, memory kept between
rounds, so a coflow is never promoted) gives its queue. Each edge decides locally from its own
counter (the same thresholds in the range table); where the local queue differs from the global
one, the edge gets a ``coflow_override`` entry with the global queue's priority. A coflow below
the first threshold needs nothing: every edge's local count is below it too.

Where overrides go (issue 29): only on the edges where the coflow sends. An edge decides the
class of the tagged packets from its own hosts (count, local queue, override) and stamps it in
the packet (p4src stamp.p4); a packet from the fabric keeps that stamp, which the sending edge's
override already made the global queue (an override at the receiving edge would set the same
class again). So an edge with none of the coflow's senders needs none. The edges that get one,
when the local queue differs from the global one:
- the edges that have counted the coflow's bytes (local count > 0, or bytes counted before a
  restart of that switch);
- the edges of its registered flows' senders (``senders``: cid -> the edge switches of its
  flows' source hosts, from the registry): such an edge gets the override before its first
  byte, and a flow added later through the API gives its edge the override in the first round
  after it is added.
An edge where the coflow's first packet appears unannounced (no registered flow from there)
serves it in its local class until the round that first reads its bytes: at most one Δ, as
Aalo's daemons learn the global queue on the next Δ (with report digests, ``digest=1``: until
its count crosses the first report step, at most band / (8 x edges) bytes, or its resync poll).
``senders`` None: every edge may send (the rule before: an override on every edge whose local
queue differs; the benchmark's ``alledges`` baseline). FIFO-LM's overrides follow the same rule.

Switch restarts: a restarted switch counts from 0 again. The bytes it had counted (the last
read before it went away) are kept as an offset and added to what it counts from then on, so
the global size never goes backwards. The local decision of the restarted edge uses its fresh
count (as its data plane does), so the override restores the global queue there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..params import DclasParams, hw_priority
from ..sched.base import View
from ..sched.queues import dclas_queues

_NONE: frozenset = frozenset()

#: FIFO-LM on 8 strict-priority queues: group g at priority 7 - g, groups 6 and later share
#: priority 1 (p4src define.p4 FIFO_LM_MAX_RANK; priority 0 is left for untagged traffic)
FIFO_LM_TOP_PRIO = 7
FIFO_LM_MAX_RANK = 6


def cf_number(cid) -> int:
    """A CoflowId (external, internal) as one integer for the core's arrays."""
    return (int(cid[0]) << 8) | int(cid[1])


def coordination_view(now: float, cids: list, sizes: list[float], memory: dict) -> View:
    """A View with no flows: D-CLAS's queue decision reads only ids, global sizes and time."""
    n = len(cids)
    z = np.zeros(0, dtype=np.int64)
    ids = np.array([cf_number(c) for c in cids], dtype=np.int64)
    due = memory.setdefault("due", {})
    for i in ids.tolist():
        due[i] = now  # every coflow is coordinated at this tick
    return View(now=now, ports=0, cap_up=np.zeros(0), cap_down=np.zeros(0), src=z, dst=z,
                sent=np.zeros(0), cf=z, reducer=z, cf_id=ids, cf_arrival=np.zeros(n),
                cf_sent=np.asarray(sizes, dtype=float), cf_lo=np.zeros(n + 1, dtype=np.int64),
                memory=memory)


@dataclass
class RoundResult:
    sizes: dict  # cid -> global bytes
    queues: dict  # cid -> 1-based Aalo queue
    overrides: dict  # switch -> {cid: BMv2 priority}
    #: incremental rounds: the edges whose override dict is a new object since the last round
    #: (every other edge's dict is the same object as then); None: compare every edge
    changed: list | None = None


class DclasCoordinator:
    def __init__(self, params: DclasParams):
        self.p = params
        self.memory: dict = {}
        self.last: dict = {}  # (switch, slot) -> last raw counter value read
        self.offset: dict = {}  # (switch, slot) -> bytes counted before that switch restarted
        self._th = None  # (thresholds, int64 array or None)
        # the local counts as an edges x coflows matrix, kept between rounds: only the rows of
        # switches observed since are rebuilt (a round at 1,024 edges would otherwise look up
        # every (edge, slot) pair in ``last``)
        self._mat: tuple | None = None  # (edges tuple, slots tuple, matrix)
        self._dirty_rows: set = set()
        self.epoch = 0  # bumps whenever ``last`` loses entries (switch or slot reset)
        self._inc: _Incremental | None = None  # round_incremental's state (None: rebuild)
        self._seen: dict = {}   # switch -> its readings observed since the last round
        self._offs: np.ndarray | None = None   # the last full round's offsets (None: none)
        #: edges whose host ports span pipes (Tofino): each pipe counts its own share, so the
        #: data plane's local decision is unknown there and the override carries every demotion
        self.split_edges: frozenset = frozenset()
        self._split_memo: tuple = ((), None)

    def set_split_edges(self, edges) -> None:
        """The edges whose host ports span pipes (:attr:`split_edges`)."""
        self.split_edges = frozenset(edges)
        self._inc = None

    def _split(self, edges) -> np.ndarray | None:
        """Bool per edge row: a split edge (None: none)."""
        key = tuple(edges)
        if self._split_memo[0] != key:
            sp = np.array([e in self.split_edges for e in key], dtype=bool)
            self._split_memo = (key, sp if sp.any() else None)
        return self._split_memo[1]

    # inputs ------------------------------------------------------------------------------
    def observe(self, switch: str, counts: dict) -> None:
        """Raw counter values read from one switch (slot -> bytes)."""
        last = self.last
        for slot, b in counts.items():
            last[(switch, slot)] = int(b)
        self._dirty_rows.add(switch)
        # the incremental round rebuilds the row from this reading when it covers every slot
        # (``last`` then holds exactly these values for the switch's row)
        prev = self._seen.get(switch)
        self._seen[switch] = counts if prev is None else {**prev, **counts}

    def local_changed(self, switch: str) -> None:
        """``last`` of ``switch`` was changed other than by :meth:`observe` (a rounding to a
        coarser report step): its row is rebuilt from ``last``."""
        self._dirty_rows.add(switch)
        self._seen.pop(switch, None)

    def switch_reset(self, switch: str) -> None:
        """The switch lost its counters (restarted, or the pipeline was pushed again)."""
        for key in [k for k in self.last if k[0] == switch]:
            self.offset[key] = self.offset.get(key, 0) + self.last.pop(key)
        self._dirty_rows.add(switch)
        self._seen.pop(switch, None)
        self.epoch += 1

    def slot_reset(self, slot: int) -> None:
        """The slot was (re)assigned: its counters were zeroed on every switch."""
        for d in (self.last, self.offset):
            for key in [k for k in d if k[1] == slot]:
                del d[key]
        self._mat = None
        self._inc = None
        self._seen = {}
        self.epoch += 1

    def forget(self, cid) -> None:
        i = cf_number(cid)
        for k in ("queue", "due"):
            self.memory.get(k, {}).pop(i, None)

    def seed_queue(self, cid, queue: int) -> None:
        """A queue read back from a switch's override (controller restart): D-CLAS never
        promotes, so the coflow stays at least there."""
        q = self.memory.setdefault("queue", {})
        i = cf_number(cid)
        q[i] = max(q.get(i, 1), min(int(queue), self.p.K))

    # outputs -----------------------------------------------------------------------------
    def local_bytes(self, switch: str, slot: int) -> int:
        return self.last.get((switch, slot), 0)

    def global_bytes(self, slot: int, switches) -> int:
        return sum(self.offset.get((s, slot), 0) + self.last.get((s, slot), 0) for s in switches)

    def _int_thresholds(self):
        """The thresholds as int64 (nbytes >= hi <=> nbytes >= ceil(hi) for integer counts),
        or None when they are not increasing (then :meth:`DclasParams.queue_of` decides)."""
        th = self.p.thresholds()
        if self._th is None or self._th[0] != th:
            ints = [min(math.ceil(h), (1 << 63) - 1) for h in th]
            ok = all(a < b for a, b in zip(th, th[1:]))
            self._th = (th, np.asarray(ints, dtype=np.int64) if ok else None)
        return self._th[1]

    def _sizes(self, slots: dict, edges: list[str]):
        """(cids, local counts edge x coflow, global sizes) of the coordinated coflows."""
        cids = list(slots)
        sl = [slots[c] for c in cids]
        last, off = self.last, self.offset
        key_e, key_s = tuple(edges), tuple(sl)
        m = self._mat
        if m is None or m[0] != key_e or m[1] != key_s:
            local = np.array([[last.get((e, s), 0) for s in sl] for e in edges], dtype=np.int64) \
                .reshape(len(edges), len(cids))
            self._mat = (key_e, key_s, local)
        else:
            local = m[2]
            if self._dirty_rows:
                for i, e in enumerate(edges):
                    if e in self._dirty_rows:
                        local[i] = [last.get((e, s), 0) for s in sl]
        self._dirty_rows = set()
        self._seen = {}
        if off:
            offs = np.array([[off.get((e, s), 0) for s in sl] for e in edges], dtype=np.int64) \
                .reshape(len(edges), len(cids))
            sizes = (local + offs).sum(axis=0).tolist()
        else:
            offs = None
            sizes = local.sum(axis=0).tolist()
        self._offs = offs
        return cids, local, sizes

    @staticmethod
    def _registered(cids: list, edges, senders: dict) -> np.ndarray:
        """edges x coflows: True where an edge holds a registered sender of the coflow."""
        row = {e: i for i, e in enumerate(edges)}
        reg = np.zeros((len(row), len(cids)), dtype=bool)
        for j, c in enumerate(cids):
            for e in senders.get(c, ()):
                i = row.get(e)
                if i is not None:
                    reg[i, j] = True
        return reg

    def _where(self, cids: list, edges, local: np.ndarray, offs, senders) -> np.ndarray | None:
        """edges x coflows: where an override may go (the coflow sends there: counted bytes,
        now or before a restart, or a registered sender); None: everywhere (``senders`` None)."""
        if senders is None:
            return None
        m = local > 0
        if offs is not None:
            m |= offs > 0
        return m | self._registered(cids, edges, senders)

    def fifo_lm_round(self, now: float, slots: dict, edges: list[str], sched,
                      senders: dict | None = None) -> RoundResult:
        """Baraat FIFO-LM on global sizes: the core's :meth:`coflow.sched.queues.FifoLm.groups`
        (FIFO by CoflowId among the *registered* coflows; a heavy coflow joins the next light
        one's group) -> priority 7 - group, saturating at 1. Every edge where a coordinated
        coflow sends (the module's rule; ``senders`` None: every edge) gets an override for it:
        the data plane's own rank (external id - oldest id, local bytes) counts ids of coflows
        that have finished, so after a few departures most coflows would fall to the lowest
        rank behind a heavy one; dense groups do not. ``queues`` holds group + 1."""
        self._inc = None
        cids, local, sizes = self._sizes(slots, edges)
        if not cids:
            return RoundResult({}, {}, {e: {} for e in edges})
        g = sched.groups(coordination_view(now, cids, sizes, {}))
        prio = {c: FIFO_LM_TOP_PRIO - min(int(x), FIFO_LM_MAX_RANK) for c, x in zip(cids, g.tolist())}
        where = self._where(cids, edges, local, self._offs, senders)
        if where is None:
            ovr = {e: dict(prio) for e in edges}
        else:
            ovr = {e: {cids[j]: prio[cids[j]] for j in np.flatnonzero(where[i]).tolist()}
                   for i, e in enumerate(edges)}
        return RoundResult(dict(zip(cids, sizes)), {c: int(x) + 1 for c, x in zip(cids, g.tolist())},
                           ovr)

    def round(self, now: float, slots: dict, edges: list[str], senders: dict | None = None) -> RoundResult:
        """``slots``: cid -> counter slot of every coordinated coflow; ``edges``: the edge
        switches (every one where the coflow sends gets the overrides it needs, whether or not
        it was read); ``senders``: cid -> the edges of its registered flows' senders (None:
        every edge may send; the module's docstring)."""
        self._inc = None   # the incremental state no longer follows the dirty rows
        cids, local, sizes = self._sizes(slots, edges)
        v = coordination_view(now, cids, sizes, self.memory)
        q = dclas_queues(v, self.p) if cids else np.zeros(0, dtype=np.int64)
        ql = q.tolist()
        queues = {c: int(x) for c, x in zip(cids, ql)}
        overrides: dict = {e: {} for e in edges}
        demoted = np.flatnonzero(q > 1)
        if demoted.size:
            th = self._int_thresholds()
            if th is not None:
                lq = 1 + np.searchsorted(th, local[:, demoted], side="right")
            else:
                lq = np.array([[self.p.queue_of(int(x)) for x in row] for row in local[:, demoted]],
                              dtype=np.int64).reshape(len(edges), demoted.size)
            sp = self._split(edges)
            if sp is not None:   # a pipe's own share decides there: the override always
                lq[sp] = 1
            need = lq != q[demoted][None, :]
            where = self._where(cids, edges, local, self._offs, senders)
            if where is not None:
                need &= where[:, demoted]
            prio = [hw_priority(ql[j]) for j in demoted.tolist()]
            dl = demoted.tolist()
            for i, e in enumerate(edges):
                row = need[i]
                if row.any():
                    overrides[e] = {cids[dl[j]]: prio[j] for j in np.flatnonzero(row).tolist()}
        return RoundResult(dict(zip(cids, sizes)), queues, overrides)

    # incremental D-CLAS round ---------------------------------------------------------------
    def _local_queues(self, local: np.ndarray) -> np.ndarray:
        """The queue each edge's own count gives (the data plane's local decision)."""
        th = self._int_thresholds()
        if th is not None:
            return 1 + np.searchsorted(th, local, side="right")
        return np.array([[self.p.queue_of(int(x)) for x in row] for row in local],
                        dtype=np.int64).reshape(local.shape)

    def _want_prio(self, q: np.ndarray, local: np.ndarray, where: np.ndarray | None = None,
                   split: np.ndarray | None = None) -> np.ndarray:
        """Override priority per (edge, coflow) of ``local`` (-1: none; queue 8 is priority 0):
        a demoted coflow (global queue > 1) whose local queue differs from its global one, on
        an edge where it sends (``where``; None: every edge); on a ``split`` row (an edge whose
        host ports span pipes) every demoted coflow."""
        if local.size == 0:
            return np.full(local.shape, -1, dtype=np.int64)
        lq = self._local_queues(local)
        if split is not None:
            lq[split] = 1
        hw = np.array([hw_priority(int(x)) if x > 1 else -1 for x in q.tolist()], dtype=np.int64)
        need = (q[None, :] > 1) & (lq != q[None, :])
        if where is not None:
            need &= where
        return np.where(need, hw[None, :], -1)

    def round_incremental(self, now: float, slots: dict, edges: list[str],
                          senders: dict | None = None) -> RoundResult:
        """:meth:`round`, at the cost of what changed: the local counts' matrix, the offsets
        and the global sizes (column sums) are updated from the rows of the switches observed
        or reset since the last round; the override of an (edge, coflow) is recomputed only
        on those rows and in the columns whose global queue or registered senders moved (a
        coflow's ``senders`` entry that is not the same object as last round's is compared;
        the controller hands the same frozenset while its record is unchanged); only the edges whose
        overrides changed get a new dict (``changed``), every other edge keeps the same dict
        object as in the last round. The results equal :meth:`round`'s
        (``tests/test_ctl_coord_incremental.py``, random histories). A new set of edges or
        slots, a slot reset or a full round in between rebuilds it all (``changed`` None)."""
        cids = list(slots)
        key_e, key_s = tuple(edges), tuple(slots[c] for c in cids)
        st = self._inc
        last, off = self.last, self.offset
        dirty, self._dirty_rows = self._dirty_rows, set()
        seen, self._seen = self._seen, {}
        self._mat = None    # the full path's matrix no longer follows the dirty rows
        if st is None or st.edges != key_e or st.slots != key_s or st.cids != cids \
                or (senders is None) != (st.reg is None):
            sl = key_s
            local = np.array([[last.get((e, s), 0) for s in sl] for e in edges], dtype=np.int64) \
                .reshape(len(edges), len(cids))
            offs = np.array([[off.get((e, s), 0) for s in sl] for e in edges], dtype=np.int64) \
                .reshape(len(edges), len(cids))
            st = _Incremental(key_e, key_s, cids, {e: i for i, e in enumerate(edges)}, local, offs,
                              (local + offs).sum(axis=0), set(key_s))
            if senders is not None:
                st.senders = {c: senders.get(c, _NONE) for c in cids}
                st.reg = self._registered(cids, edges, st.senders)
            rows = None
            scols: list = []
        else:
            rows = sorted(st.row[e] for e in dirty if e in st.row)
            if rows:
                ri = np.asarray(rows, dtype=np.int64)
                before = st.local[ri].sum(axis=0) + st.offs[ri].sum(axis=0)
                need = st.slot_set
                for i in rows:
                    e = key_e[i]
                    c = seen.get(e)
                    if c is not None and c.keys() >= need:   # this reading is the whole row
                        st.local[i] = list(map(c.__getitem__, key_s))
                    else:
                        st.local[i] = [last.get((e, s), 0) for s in key_s]
                    if off:
                        st.offs[i] = [off.get((e, s), 0) for s in key_s]
                    elif st.has_offs:
                        st.offs[i] = 0
                st.sizes += st.local[ri].sum(axis=0) + st.offs[ri].sum(axis=0) - before
            scols = []   # the columns whose registered senders changed
            if senders is not None:
                for j, c in enumerate(cids):
                    new = senders.get(c, _NONE)
                    old = st.senders[c]
                    if new is not old and frozenset(new) != frozenset(old):
                        assert st.reg is not None   # senders given: st.reg was built with them
                        st.reg[:, j] = self._registered([c], key_e, {c: new})[:, 0]
                        scols.append(j)
                    st.senders[c] = new
        st.has_offs = bool(off)
        self._inc = st
        sizes = st.sizes.tolist()
        v = coordination_view(now, cids, sizes, self.memory)
        q = dclas_queues(v, self.p) if cids else np.zeros(0, dtype=np.int64)
        q = np.asarray(q, dtype=np.int64)
        queues = {c: int(x) for c, x in zip(cids, q.tolist())}
        sp = self._split(edges)
        if rows is None:   # everything from scratch
            st.prio = self._want_prio(q, st.local, st.where(), sp)
            st.q = q
            st.ovr = {}
            for i, e in enumerate(edges):
                nz = np.flatnonzero(st.prio[i] >= 0)
                st.ovr[e] = {cids[j]: int(st.prio[i, j]) for j in nz.tolist()}
            return RoundResult(dict(zip(cids, sizes)), queues, st.ovr, None)
        cells: dict = {}   # row -> {col: new prio}
        moved = q != st.q
        if scols:
            moved[scols] = True
        cols = np.flatnonzero(moved)
        if cols.size:
            new = self._want_prio(q[cols], st.local[:, cols], st.where(None, cols), sp)
            ii, jj = np.nonzero(new != st.prio[:, cols])
            for i, j in zip(ii.tolist(), jj.tolist()):
                cells.setdefault(i, {})[int(cols[j])] = int(new[i, j])
        if rows:   # the observed rows: only the demoted columns can hold an override (the
            # others' were -1 and stay so, or moved with their queue: done above)
            ri = np.asarray(rows, dtype=np.int64)
            dem = np.flatnonzero(q > 1)
            if dem.size:
                new = self._want_prio(q[dem], st.local[np.ix_(ri, dem)], st.where(ri, dem),
                                      None if sp is None else sp[ri])
                ii, jj = np.nonzero(new != st.prio[np.ix_(ri, dem)])
                for i, j in zip(ii.tolist(), jj.tolist()):
                    cells.setdefault(rows[i], {})[int(dem[j])] = int(new[i, j])
        st.q = q
        changed = []
        for i, cs in cells.items():
            e = key_e[i]
            d = dict(st.ovr[e])    # copy on write: the dict handed out last round stays as it was
            for j, p in cs.items():
                st.prio[i, j] = p
                if p >= 0:
                    d[cids[j]] = p
                else:
                    d.pop(cids[j], None)
            st.ovr[e] = d
            changed.append(e)
        return RoundResult(dict(zip(cids, sizes)), queues, st.ovr, changed)


@dataclass(eq=False)
class _Incremental:
    edges: tuple
    slots: tuple
    cids: list
    row: dict            # edge -> row
    local: np.ndarray    # edges x coflows: last raw counts
    offs: np.ndarray     # edges x coflows: bytes counted before a switch restart
    sizes: np.ndarray    # the column sums of local + offs (global sizes)
    slot_set: set        # the slots, as a set
    has_offs: bool = False
    q: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # last queues
    prio: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    #: edges x coflows: override priority (-1: none)
    ovr: dict = field(default_factory=dict)  # edge -> {cid: prio}: never changed once handed out
    #: edges x coflows: a registered sender of the coflow on the edge (None: senders unknown,
    #: every edge may send)
    reg: np.ndarray | None = None
    senders: dict = field(default_factory=dict)   # cid -> the senders entry of the last round

    def where(self, ri=None, cj=None) -> np.ndarray | None:
        """Where an override may go (rows ``ri``, columns ``cj``; None: all): the coflow's
        bytes counted there (now or before a restart) or a registered sender there."""
        if self.reg is None:
            return None
        r = slice(None) if ri is None else ri
        c = slice(None) if cj is None else cj
        ix = np.ix_(np.arange(self.local.shape[0])[r], np.arange(self.local.shape[1])[c])
        return (self.local[ix] > 0) | (self.offs[ix] > 0) | self.reg[ix]

"""The coflow registry: what applications have told the scheduler about their coflows.

Ids are Aalo's two-part CoflowId ``external.internal``: external = job / DAG id (< 2^32),
internal = stage within the job (< 2^8), the widths of the packet's CoflowId option
(p4src/README.md). A new coflow gets a new external id (1, 2, 3, ... in registration order, so
FIFO-LM's "oldest external id first" is registration order) and internal 0. A child stage
(``parents=``, or the deprecated ``parent=`` for one) or a new stage of a known job
(``external=``) gets the job's next free internal id.
Ids are never reused, even after the coflow is unregistered.

Every mutating call validates the whole request first and changes nothing when it fails: it
raises :class:`ApiError` whose ``field`` names the offending request field
(``flows[1].size_bytes``) and whose ``code`` is the gRPC status name the server answers with.

Durability: with ``db_path`` every change is written to SQLite (one transaction per call)
before it becomes visible, so a restarted controller rebuilds the same coflows and continues
with the same next ids. The database is held with an exclusive lock while the registry is open:
a second registry on the same file fails at once with a one-line :class:`RegistryDbError`.

Shared (``shared=True``): a primary controller and its backups open one database (WAL mode, no
exclusive lock). Only the **leader** writes: ``leader`` is a function the controller sets (True
while it is primary); a mutation on a registry whose leader function says False fails with
FAILED_PRECONDITION and changes nothing. The others :meth:`follow` the database (each round):
when another connection committed (SQLite's ``data_version``), the registry reloads and emits
the register / add_flows / update / unregister events that turn its old state into the new
one, so a backup's controller tracks the primary's coflows and, when it takes over, continues
them with the same ids. A leader catches up the same way before each write.

Leases and idempotency: a Register may carry a ``request_id`` (chosen by the client, unique per
owner): a retry with the same id and the same request returns the coflow the first attempt
registered (no second coflow; a different request under a used id is INVALID_ARGUMENT). Each
coflow may hold a lease (``lease_s``; ``default_lease_s`` when the request gives none; None =
never expires): :meth:`keep_alive`, AddFlows and Update renew it, and so may the controller when
it sees the coflow's traffic in the counters (:meth:`renew`); :meth:`expire` unregisters every
coflow whose lease ran out (only a leader does). Both are durable: request ids, owners and lease
lengths are in SQLite (table ``coflow_ext``); renewals are not (a reopened registry gives every
coflow one full lease from the moment it opens, so an orphan outlives a crash by one lease).
The request id's mapping lives as long as its coflow: a retry after the coflow ended
registers anew.

Thread safety: one lock guards the state (the gRPC server runs handlers concurrently).
Subscribers are called after the change, outside that lock, in the order the changes happened,
with a snapshot of the record; they may read the registry but must not mutate it.
"""
from __future__ import annotations

import dataclasses
import logging
import math

import sqlite3
import threading
import time
from collections import deque
from typing import Callable, Iterable, Mapping, Sequence

log = logging.getLogger(__name__)

from ..dataplane.constants import CoflowId  # noqa: E402
# the registry's model (records, ids, errors, limits; re-exported) and its SQLite backend, each
# in a module of its own
from .records import (  # noqa: E402,F401
    DB_FORMAT, EVENTS, EXTERNAL_LIMIT, INTERNAL_LIMIT, MAX_LEASE_S, MAX_REQUEST_ID, SIZE_LIMIT, AdmitFn,
    ApiError, CidAllocator, CoflowRecord, FlowSpec, RegistryDbError, next_cid, parse_cid, _CODES, _copy,
    _invalid)
from .registry_sqlite import SqliteStore  # noqa: E402


class CoflowRegistry(SqliteStore):
    """Registered coflows. See the module docstring.

    ``hosts``: the topology's host names (flows must use them). ``admit(candidate, others)``:
    called for every coflow with a deadline (at registration, and when added flows or changed
    sizes raise its demand) with the candidate record and the other registered records; it returns
    True to admit, or ``(False, reason)`` / False to reject (the request then fails with
    FAILED_PRECONDITION and changes nothing). :func:`coflow.api.admission.varys_admission`
    builds the Varys test from the scheduler core."""

    def __init__(self, hosts: Iterable[str], db_path: str | None = None, max_flows_per_coflow: int = 10000,
                 admit: AdmitFn | None = None, clock: Callable[[], float] = time.time,
                 shared: bool = False, leader: Callable[[], bool] | None = None,
                 default_lease_s: float | None = None,
                 lease_clock: Callable[[], float] = time.monotonic,
                 quota: Callable[[str], tuple] | None = None):
        self.hosts = frozenset(hosts)
        if not self.hosts:
            raise ValueError("CoflowRegistry: the host set is empty")
        if max_flows_per_coflow < 1:
            raise ValueError("CoflowRegistry: max_flows_per_coflow must be >= 1")
        self.max_flows = int(max_flows_per_coflow)
        self.admit = admit
        self.clock = clock
        self.db_path = db_path
        if shared and db_path is None:
            raise ValueError("CoflowRegistry: shared=True needs a db_path")
        self.shared = shared
        self.leader = leader           # None: always writable (an unshared registry)
        if default_lease_s is not None:
            default_lease_s = self._check_lease(default_lease_s, "default_lease_s", ValueError)
        self.default_lease_s = default_lease_s
        self.lease_clock = lease_clock
        # owner -> (max coflows, max flows) or None each (coflow.api.auth.Identities.quota)
        self.quota = quota
        self._expires: dict[CoflowId, float] = {}          # lease end (lease_clock) per leased coflow
        self._requests: dict[tuple[str, str], tuple[CoflowId, str]] = {}   # (owner, request id) -> (cid, fingerprint)
        self._fingerprints: dict[CoflowId, str] = {}
        self.expired_total = 0       # coflows unregistered because their lease ran out
        self.replayed_total = 0      # Registers answered from their request id (retries)
        self._data_version: int | None = None
        self._lock = threading.Lock()
        self._notify_lock = threading.Lock()
        self._pending: deque = deque()
        self._subs: list[Callable[[str, CoflowRecord], None]] = []
        # state
        self._recs: dict[CoflowId, CoflowRecord] = {}   # insertion order = registration order
        self._seq: dict[CoflowId, int] = {}
        self._next_seq = 0
        self._next_external = 1
        self._next_internal: dict[int, int] = {}   # job (external id) -> next free internal id
        self._version = 0
        self._shared_snaps: dict[CoflowId, tuple] = {}   # cid -> (stored record, its snapshot)
        self._db: sqlite3.Connection | None = None
        if db_path is not None:
            self._open_db(db_path)

    @classmethod
    def from_topology(cls, topology, **kw) -> "CoflowRegistry":
        return cls([h.name for h in topology.hosts], **kw)

    # Reading -----------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    @property
    def next_external(self) -> int:
        with self._lock:
            return self._next_external

    def get(self, cid) -> CoflowRecord:
        cid = parse_cid(cid)
        with self._lock:
            return _copy(self._get(cid, "coflow_id"))

    def list(self) -> list[CoflowRecord]:
        with self._lock:
            return _copy(list(self._recs.values()))

    def list_shared(self) -> list[CoflowRecord]:
        """As :meth:`list`, but a record that did not change since the previous call is the
        same snapshot object as then (a change replaces the stored record, never modifies it
        in place), so a caller that keeps per-record caches (the controller's rounds) copies
        and re-reads only the coflows that moved. The snapshots are shared between calls:
        callers must not modify them."""
        with self._lock:
            snaps = self._shared_snaps
            out = []
            for cid, r in self._recs.items():
                got = snaps.get(cid)
                if got is None or got[0] is not r:
                    got = snaps[cid] = (r, _copy(r))
                out.append(got[1])
            if len(snaps) > len(out):
                for cid in [c for c in snaps if c not in self._recs]:
                    del snaps[cid]
            return out

    def snapshot(self) -> tuple[int, list[CoflowRecord]]:
        """``(version, records)`` read atomically."""
        with self._lock:
            return self._version, _copy(list(self._recs.values()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._recs)

    def __contains__(self, cid) -> bool:
        try:
            cid = parse_cid(cid)
        except ApiError:
            return False
        with self._lock:
            return cid in self._recs

    # Events ------------------------------------------------------------------------------------

    def subscribe(self, fn: Callable[[str, CoflowRecord], None]) -> Callable[[], None]:
        """Call ``fn(event, record)`` after every change; returns an unsubscribe function.
        An exception in ``fn`` is logged and does not fail the request."""
        with self._lock:
            self._subs.append(fn)

        def unsubscribe():
            with self._lock:
                if fn in self._subs:
                    self._subs.remove(fn)
        return unsubscribe

    def _emit(self):
        # Changes queue their events under the state lock; whoever gets here drains the queue in
        # order, outside the state lock.
        with self._notify_lock:
            while True:
                with self._lock:
                    if not self._pending:
                        return
                    event, rec = self._pending.popleft()
                    subs = list(self._subs)
                for fn in subs:
                    try:
                        fn(event, rec)
                    except Exception:
                        log.exception("coflow registry subscriber %r failed on %s %s", fn, event, rec.cid)

    # Mutations ---------------------------------------------------------------------------------

    def register(self, flows, parent=None, deadline_s: float | None = None, external: int | None = None,
                 request_id: str | None = None, lease_s: float | None = None,
                 owner: str | None = None, parents=None) -> CoflowRecord:
        """``parents``: the parent stages' CoflowIds (``parent``: the deprecated single one;
        with both, ``parent`` must be ``parents[0]``); ``request_id``: the client's idempotency
        key (a retry returns the same coflow); ``lease_s``: the coflow's lease (None: the
        registry's default); ``owner``: the authenticated identity registering it (None
        without identities)."""
        with self._lock:
            self._writable()
            specs = self._check_flows(flows, "flows", existing=())
            deadline = self._check_deadline(deadline_s, specs)
            pars = self._check_parents(parent, parents)
            par = pars[0] if pars else None
            if external is not None:
                if not isinstance(external, int) or isinstance(external, bool) or not 0 <= external < EXTERNAL_LIMIT:
                    raise _invalid("external", f"{external!r} is not an integer in [0, 2^32)")
            lease = self._check_lease(lease_s, "lease_s") if lease_s is not None else self.default_lease_s
            if request_id is not None:
                request_id = self._check_request_id(request_id)
                fp = repr(([(f.src, f.dst, f.size_bytes) + ((True,) if f.ready else ()) for f in specs],
                           ",".join(map(str, pars)),
                           deadline, external, lease_s))
                seen = self._requests.get((owner or "", request_id))
                if seen is not None:
                    cid, was = seen
                    if was != fp:
                        raise _invalid("request_id", f"already used by another Register (coflow {cid}); "
                                                     "a retry must repeat the request as it was")
                    self.replayed_total += 1
                    self._renew(cid)
                    return _copy(self._recs[cid])
            if par is not None:
                pf = "parents[{}]" if parents else "parent"
                for i, p in enumerate(pars):
                    if p.external != par.external:
                        raise _invalid(pf.format(i), f"{p} is of job {p.external}, {par} of job {par.external}: "
                                                     "a coflow's parents are stages of one job")
                for i, p in enumerate(pars):
                    if p.internal == self._next_internal.get(p.external):
                        raise _invalid(pf.format(i), f"{p} is the id this coflow would get: a coflow cannot be "
                                                     "its own parent (a cycle)")
                    if not self._issued(p):
                        raise ApiError("NOT_FOUND", pf.format(i), f"coflow {p} was never registered")
                if external is not None and external != par.external:
                    raise _invalid("external", f"{external} differs from the job of parent {par} ({par.external})")
                job = par.external
            elif external is not None:
                if external not in self._next_internal:
                    raise ApiError("NOT_FOUND", "external",
                                   f"job {external} is not known (register without it to get a new job id)")
                job = external
            else:
                job = None
            if job is None:
                if self._next_external >= EXTERNAL_LIMIT:
                    raise ApiError("RESOURCE_EXHAUSTED", "external", "all 2^32 external ids are used")
            elif self._next_internal[job] >= INTERNAL_LIMIT:
                raise ApiError("RESOURCE_EXHAUSTED", "parent" if par is not None else "external",
                               f"job {job} has used all {INTERNAL_LIMIT} internal (stage) ids")
            cid = next_cid(self._next_external, self._next_internal, job)
            rec = CoflowRecord(cid=cid, flows=specs, registered_at=float(self.clock()), deadline_s=deadline,
                               parent=par, sent_bytes={}, admitted=True, lease_s=lease, owner=owner,
                               request_id=request_id, parents=pars)
            fingerprint = fp if request_id is not None else ""
            self._check_quota(owner, 1, len(specs))
            if deadline is not None:
                self._admission(rec)
            new_ext = max(self._next_external, cid.external + 1) if job is None else self._next_external
            seq = self._next_seq
            self._db_write(lambda db: self._db_register(db, rec, seq, new_ext, fingerprint))
            # commit in memory
            self._recs[cid] = rec
            self._seq[cid] = seq
            self._index_ext(rec, fingerprint)
            self._renew(cid)
            self._next_seq += 1
            self._next_external = new_ext
            self._next_internal[cid.external] = cid.internal + 1
            self._changed("register", rec)
        self._emit()
        return _copy(rec)

    @staticmethod
    def _check_parents(parent, parents) -> tuple[CoflowId, ...]:
        """The parents of a Register: ``parents`` (a list of CoflowIds) and/or the deprecated
        ``parent`` (one, "" or None = none); with both, ``parent`` must be ``parents[0]``."""
        one = parse_cid(parent, "parent") if parent is not None and parent != "" else None
        if parents is None:
            parents = []
        if isinstance(parents, str) or not isinstance(parents, (list, tuple)):
            raise _invalid("parents", f"{parents!r} is not a list of CoflowIds")
        pars: list[CoflowId] = []
        for i, p in enumerate(parents):
            cid = parse_cid(p, f"parents[{i}]")
            if cid in pars:
                raise _invalid(f"parents[{i}]", f"{cid} is listed twice (also parents[{pars.index(cid)}])")
            pars.append(cid)
        if one is not None and pars and one != pars[0]:
            raise _invalid("parent", f"{one} differs from parents[0] {pars[0]} (parent is deprecated: "
                                     "give parents only, or parent == parents[0])")
        return tuple(pars) if pars else ((one,) if one is not None else ())

    def add_flows(self, cid, flows, owner: str | None = None) -> CoflowRecord:
        cid = parse_cid(cid)
        with self._lock:
            self._writable()
            old = self._owned(cid, owner)
            specs = self._check_flows(flows, "flows", existing=old.flows, cid=cid)
            if old.deadline_s is not None:
                for i, f in enumerate(specs):
                    if f.size_bytes is None:
                        raise _invalid(f"flows[{i}].size_bytes", f"required: coflow {cid} has a deadline")
            self._check_quota(old.owner, 0, len(specs))
            rec = _copy(old)
            first = len(rec.flows)
            rec.flows.extend(specs)
            if rec.deadline_s is not None:
                self._admission(rec)
            self._db_write(lambda db: self._db_add_flows(db, rec, first))
            self._recs[cid] = rec
            self._renew(cid)
            self._changed("add_flows", rec)
        self._emit()
        return _copy(rec)

    def update(self, cid, sizes: Mapping[int, int] | None = None, sent: Mapping[int, int] | None = None,
               owner: str | None = None, ready: Mapping[int, bool] | None = None) -> CoflowRecord:
        cid = parse_cid(cid)
        with self._lock:
            self._writable()
            old = self._owned(cid, owner)
            sizes = self._check_counts(sizes, "sizes", old)
            sent = self._check_counts(sent, "sent_bytes", old)
            ready = self._check_flags(ready, "ready", old)
            if not sizes and not sent and not ready:
                raise _invalid("sizes", "nothing to update: give sizes, sent_bytes and/or ready")
            rec = _copy(old)
            grew = False
            for i, b in sizes.items():
                f = rec.flows[i]
                if f.size_bytes is None or b > f.size_bytes:
                    grew = True
                rec.flows[i] = dataclasses.replace(f, size_bytes=b)
            for i, r in ready.items():
                rec.flows[i] = dataclasses.replace(rec.flows[i], ready=r)
            for i, b in sent.items():
                rec.sent_bytes[i] = b
            if rec.deadline_s is not None and grew:
                self._admission(rec)
            self._db_write(lambda db: self._db_update(db, rec, set(sizes) | set(sent) | set(ready)))
            self._recs[cid] = rec
            self._renew(cid)
            self._changed("update", rec)
        self._emit()
        return _copy(rec)

    def unregister(self, cid, owner: str | None = None) -> CoflowRecord:
        cid = parse_cid(cid)
        with self._lock:
            self._writable()
            rec = self._owned(cid, owner)
            self._db_write(lambda db: self._db_unregister(db, cid))
            self._drop(cid)
            self._changed("unregister", rec)
        self._emit()
        return _copy(rec)

    # Leases ------------------------------------------------------------------------------------

    def keep_alive(self, cids: Sequence, owner: str | None = None) -> tuple[list[CoflowRecord], list[str]]:
        """Renew the leases of ``cids`` (every coflow of ``owner`` when ``cids`` is empty and an
        owner is given). Returns (renewed records, ids not registered: expired or unregistered).
        A malformed id, an empty list without an owner, or a coflow of another owner fails the
        whole call and renews nothing."""
        if isinstance(cids, (str, bytes)):
            raise _invalid("coflow_ids", "a list of CoflowIds is required")
        parsed = [parse_cid(c, f"coflow_ids[{i}]") for i, c in enumerate(cids)]
        with self._lock:
            self._writable()
            if not parsed:
                if owner is None:
                    raise _invalid("coflow_ids", "at least one CoflowId is required")
                parsed = [c for c, r in self._recs.items() if r.owner == owner]
            missing, found = [], []
            for i, c in enumerate(parsed):
                r = self._recs.get(c)
                if r is None:
                    missing.append(str(c))
                    continue
                if owner is not None and r.owner != owner:
                    raise ApiError("PERMISSION_DENIED", f"coflow_ids[{i}]",
                                   f"coflow {c} belongs to another application")
                found.append(r)
            for r in found:
                self._renew(r.cid)
            return _copy(found), missing

    def renew(self, cids: Iterable) -> int:
        """Renew leases without a request (the controller saw the coflows' traffic in the
        counters). ``cids``: CoflowIds or (external, internal) pairs; unknown ones are ignored."""
        n = 0
        with self._lock:
            for c in cids:
                c = c if isinstance(c, CoflowId) else CoflowId(*c)
                if c in self._expires:
                    self._renew(c)
                    n += 1
        return n

    def lease_remaining(self, cid) -> float | None:
        """Seconds left of a coflow's lease (None: no lease, or not registered)."""
        c = cid if isinstance(cid, CoflowId) else CoflowId(*cid)
        with self._lock:
            t = self._expires.get(c)
            return None if t is None else t - self.lease_clock()

    def expire(self) -> list[CoflowRecord]:
        """Unregister every coflow whose lease has run out (one transaction); returns them.
        Nothing on a registry that is not the leader (the primary expires, backups follow)."""
        with self._lock:
            if self.leader is not None and not self.leader():
                return []
            now = self.lease_clock()
            due = [c for c, t in self._expires.items() if t <= now]
            if not due:
                return []
            if self.shared:
                self._catch_up()
                due = [c for c in due if c in self._recs]
            recs = [self._recs[c] for c in due]

            def write(db):
                for c in due:
                    self._db_unregister(db, c)
            self._db_write(write, bump=len(due))
            for c, rec in zip(due, recs):
                self._drop(c)
                self._changed("unregister", rec)
            self.expired_total += len(recs)
        self._emit()
        for r in recs:
            log.info("coflow %s: lease of %.3g s expired; unregistered", r.cid, r.lease_s or 0)
        return _copy(recs)

    def _renew(self, cid: CoflowId):
        rec = self._recs.get(cid)
        if rec is not None and rec.lease_s is not None:
            self._expires[cid] = self.lease_clock() + rec.lease_s

    def _drop(self, cid: CoflowId):
        rec = self._recs.pop(cid)
        del self._seq[cid]
        self._expires.pop(cid, None)
        self._fingerprints.pop(cid, None)
        if rec.request_id is not None:
            self._requests.pop((rec.owner or "", rec.request_id), None)

    def _index_ext(self, rec: CoflowRecord, fingerprint: str):
        if rec.request_id is not None:
            self._requests[(rec.owner or "", rec.request_id)] = (rec.cid, fingerprint)
            self._fingerprints[rec.cid] = fingerprint

    @staticmethod
    def _check_lease(v, fieldname: str, exc=None) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not 0 < v <= MAX_LEASE_S:
            msg = f"must be a number of seconds in (0, {MAX_LEASE_S:g}], got {v!r}"
            if exc is not None:
                raise exc(f"CoflowRegistry: {fieldname} {msg}")
            raise _invalid(fieldname, msg)
        return float(v)

    @staticmethod
    def _check_request_id(v) -> str:
        if not isinstance(v, str) or not v:
            raise _invalid("request_id", "must be a non-empty string")
        if len(v) > MAX_REQUEST_ID or not v.isascii() or not v.isprintable():
            raise _invalid("request_id", f"must be at most {MAX_REQUEST_ID} printable ASCII characters")
        return v

    def follow(self) -> int:
        """Catch up with the shared database: when another registry committed since the last
        look, reload and emit the events that turn the old state into the new one. Returns the
        number of events (0 when nothing changed, and always for an unshared registry)."""
        if not self.shared:
            return 0
        with self._lock:
            n = self._catch_up()
        if n:
            self._emit()
        return n

    def close(self):
        """Release the database (the in-memory state stays readable)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # Validation (callers hold the lock) --------------------------------------------------------

    def _writable(self):
        if self.leader is not None and not self.leader():
            raise ApiError("FAILED_PRECONDITION", "coflow_id",
                           "this controller is a backup: the primary controller serves changes")
        if self.shared:
            self._catch_up()     # a backup that just took over writes on the latest state

    def _check_quota(self, owner: str | None, coflows: int, flows: int):
        """RESOURCE_EXHAUSTED when ``owner`` would hold more coflows or flows than its quota."""
        if owner is None or self.quota is None:
            return
        max_c, max_f = self.quota(owner)
        if max_c is None and max_f is None:
            return
        mine = [r for r in self._recs.values() if r.owner == owner]
        if max_c is not None and len(mine) + coflows > max_c:
            raise ApiError("RESOURCE_EXHAUSTED", "quota",
                           f"application {owner} holds {len(mine)} coflows, its quota is {max_c}")
        n = sum(len(r.flows) for r in mine)
        if max_f is not None and n + flows > max_f:
            raise ApiError("RESOURCE_EXHAUSTED", "quota",
                           f"application {owner} would hold {n + flows} flows, its quota is {max_f}")

    def _owned(self, cid: CoflowId, owner: str | None, fieldname: str = "coflow_id") -> CoflowRecord:
        """The record, when ``owner`` (None: no identities) may change it."""
        rec = self._get(cid, fieldname)
        if owner is not None and rec.owner != owner:
            raise ApiError("PERMISSION_DENIED", fieldname, f"coflow {cid} belongs to another application")
        return rec

    def _get(self, cid: CoflowId, fieldname: str) -> CoflowRecord:
        rec = self._recs.get(cid)
        if rec is None:
            why = "was unregistered" if self._issued(cid) else "is not registered"
            raise ApiError("NOT_FOUND", fieldname, f"coflow {cid} {why}")
        return rec

    def _issued(self, cid: CoflowId) -> bool:
        return cid.internal < self._next_internal.get(cid.external, 0)

    def _host(self, v, fieldname: str) -> str:
        if not isinstance(v, str) or not v:
            raise _invalid(fieldname, "a host name is required")
        if v not in self.hosts:
            shown = v if len(v) <= 40 else v[:37] + "..."
            raise _invalid(fieldname, f"unknown host {shown!r} (not in the topology)")
        return v

    def _check_flows(self, flows, fieldname: str, existing: Sequence[FlowSpec], cid: CoflowId | None = None) -> list[FlowSpec]:
        if flows is None or isinstance(flows, (str, bytes)):
            raise _invalid(fieldname, "a list of flows is required")
        flows = list(flows)
        if not flows:
            raise _invalid(fieldname, "at least one flow is required")
        total = len(existing) + len(flows)
        if total > self.max_flows:
            what = f"coflow {cid} would have {total} flows" if existing else f"{total} flows"
            raise _invalid(fieldname, f"{what}: more than the limit of {self.max_flows} per coflow")
        seen = {(f.src, f.dst): i for i, f in enumerate(existing)}
        out = []
        for i, f in enumerate(flows):
            fi = f"{fieldname}[{i}]"
            if isinstance(f, FlowSpec):
                src, dst, size, ready = f.src, f.dst, f.size_bytes, f.ready
            elif isinstance(f, (tuple, list)) and len(f) in (2, 3, 4):
                src, dst, size, ready = (*f, None, False)[:4] if len(f) == 2 else (*f, False)[:4]
            else:
                raise _invalid(fi, "expected (src, dst[, size_bytes[, ready]])")
            if not isinstance(ready, bool):
                raise _invalid(f"{fi}.ready", f"{ready!r} is not a boolean")
            src = self._host(src, f"{fi}.src")
            dst = self._host(dst, f"{fi}.dst")
            if src == dst:
                raise _invalid(f"{fi}.dst", f"same host as src ({src}): a flow needs two hosts")
            if size is not None:
                if not isinstance(size, int) or isinstance(size, bool):
                    raise _invalid(f"{fi}.size_bytes", f"{size!r} is not an integer")
                if size < 0:
                    raise _invalid(f"{fi}.size_bytes", "must be >= 0")
                if size >= SIZE_LIMIT:
                    raise _invalid(f"{fi}.size_bytes", "must be < 2^63")
            key = (src, dst)
            if key in seen:
                j = seen[key]
                other = f"flow {j} of coflow {cid}" if j < len(existing) else f"{fieldname}[{j - len(existing)}]"
                raise _invalid(fi, f"duplicate flow {src}->{dst} (same src and dst as {other}); "
                                   "update that flow's size instead")
            seen[key] = len(existing) + i
            out.append(FlowSpec(src, dst, size, ready))
        return out

    def _check_deadline(self, d, specs: list[FlowSpec]) -> float | None:
        if d is None:
            return None
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d) or d <= 0:
            raise _invalid("deadline_s", f"must be a finite number of seconds > 0, got {d!r}")
        for i, f in enumerate(specs):
            if f.size_bytes is None:
                raise _invalid(f"flows[{i}].size_bytes", "required when deadline_s is set (admission needs the size)")
        return float(d)

    @staticmethod
    def _check_per_flow(m, fieldname: str, rec: CoflowRecord, what: str, check) -> dict:
        """A mapping flow id -> value (None: empty): every id one of ``rec``'s flows, every
        value passed through ``check(value, field)`` (which raises the field's error)."""
        if m is None:
            return {}
        if not isinstance(m, Mapping):
            raise _invalid(fieldname, f"expected a mapping flow id -> {what}")
        out = {}
        for k, v in m.items():
            fk = f"{fieldname}[{k}]"
            if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(rec.flows):
                raise _invalid(fk, f"unknown flow id {k!r}: coflow {rec.cid} has flows 0..{len(rec.flows) - 1}")
            check(v, fk)
            out[k] = v
        return out

    @staticmethod
    def _byte_count(b, fk: str) -> None:
        if not isinstance(b, int) or isinstance(b, bool):
            raise _invalid(fk, f"{b!r} is not an integer")
        if b < 0:
            raise _invalid(fk, "must be >= 0")
        if b >= SIZE_LIMIT:
            raise _invalid(fk, "must be < 2^63")

    @staticmethod
    def _flag(b, fk: str) -> None:
        if not isinstance(b, bool):
            raise _invalid(fk, f"{b!r} is not a boolean")

    def _check_counts(self, m, fieldname: str, rec: CoflowRecord) -> dict[int, int]:
        return self._check_per_flow(m, fieldname, rec, "bytes", self._byte_count)

    def _check_flags(self, m, fieldname: str, rec: CoflowRecord) -> dict[int, bool]:
        return self._check_per_flow(m, fieldname, rec, "true/false", self._flag)

    def _admission(self, rec: CoflowRecord):
        if self.admit is None:
            return
        others = [r for c, r in self._recs.items() if c != rec.cid]
        res = self.admit(_copy(rec), _copy(others))
        ok, reason = (res if isinstance(res, tuple) else (res, ""))
        if not ok:
            raise ApiError("FAILED_PRECONDITION", "deadline_s",
                           f"rejected by admission control{': ' + reason if reason else ''}")

    def _changed(self, event: str, rec: CoflowRecord):
        self._version += 1
        self._pending.append((event, _copy(rec)))

    # SQLite ------------------------------------------------------------------------------------

    _SCHEMA = """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE jobs (external INTEGER PRIMARY KEY, next_internal INTEGER NOT NULL);
    CREATE TABLE coflows (external INTEGER NOT NULL, internal INTEGER NOT NULL, seq INTEGER NOT NULL UNIQUE,
                          registered_at REAL NOT NULL, deadline_s REAL, parent TEXT, admitted INTEGER NOT NULL,
                          PRIMARY KEY (external, internal));
    CREATE TABLE flows (external INTEGER NOT NULL, internal INTEGER NOT NULL, flow_id INTEGER NOT NULL,
                        src TEXT NOT NULL, dst TEXT NOT NULL, size_bytes INTEGER, sent_bytes INTEGER NOT NULL,
                        PRIMARY KEY (external, internal, flow_id));
    """
    # leases, request ids and owners (added after coflow-registry/1's first tables: an older
    # database gets it when opened)
    _EXT_SCHEMA = """
    CREATE TABLE IF NOT EXISTS coflow_ext (external INTEGER NOT NULL, internal INTEGER NOT NULL,
                          lease_s REAL, owner TEXT, request_id TEXT, fingerprint TEXT,
                          PRIMARY KEY (external, internal))
    """
    # the flows that are ready to send (FlowSpec.ready; added after the first tables as well)
    _READY_SCHEMA = """
    CREATE TABLE IF NOT EXISTS flow_ready (external INTEGER NOT NULL, internal INTEGER NOT NULL,
                          flow_id INTEGER NOT NULL, PRIMARY KEY (external, internal, flow_id))
    """

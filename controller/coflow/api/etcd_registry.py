"""The coflow registry in etcd: controllers on different machines share it (``coflow ctl run
--etcd``); SQLite stays the embedded default of a single controller.

Layout under ``prefix`` (``/coflow/<cluster>``): ``meta`` (JSON: format, version, next external
id, next sequence number, each job's next internal id) and one key per registered coflow,
``coflows/<external:010d>.<internal:03d>`` (JSON: its flows with sizes and bytes sent, parent,
deadline, admission, lease length, owner, request id). Every change is one etcd transaction
that writes the coflow's key(s) and ``meta`` and is guarded by two comparisons: ``meta``'s mod
revision is the one this registry last saw (nobody else wrote since), and, with an
:class:`~coflow.api.etcd.Election`, the leader key's create revision is this controller's
(a deposed primary cannot write: its transaction fails and the call answers
FAILED_PRECONDITION, changing nothing). An acknowledged change is committed by a quorum of the
etcd members: it survives the loss of the primary and of any minority of members.

Backups watch the prefix; :meth:`follow` (each controller round) reloads after a change and
emits the register / add_flows / update / unregister events of the difference, as the shared
SQLite registry does, so a backup's controller tracks the primary's coflows and continues them
with the same ids and slots when it takes over. Renewals of leases are not written (as with
SQLite): a new primary gives every coflow one full lease from its takeover.
"""
from __future__ import annotations

import json
import threading

from ..dataplane.constants import CoflowId
from .etcd import Etcd, Election, EtcdError
from .registry import DB_FORMAT, ApiError, CoflowRecord, CoflowRegistry, FlowSpec, RegistryDbError, parse_cid


class _Txn:
    def __init__(self, meta: dict):
        self.meta = meta
        self.ops: list = []


class EtcdCoflowRegistry(CoflowRegistry):
    def __init__(self, hosts, etcd: Etcd, prefix: str = "/coflow/default",
                 election: Election | None = None, **kw):
        super().__init__(hosts, **kw)
        self.etcd = etcd
        self.prefix = prefix.rstrip("/")
        self.election = election
        self.shared = True
        self.db_path = f"etcd:{self.prefix}"
        if self.leader is None and election is not None:
            self.leader = election.is_leader
        self._meta_key = f"{self.prefix}/meta".encode()
        self._cf_prefix = f"{self.prefix}/coflows/".encode()
        self._rev = 0
        self._meta_mod = 0
        self._dirty = threading.Event()
        with self._lock:
            self._reload()
        self._cancel = etcd.watch(f"{self.prefix}/".encode(), self._on_watch, prefix=True,
                                  start_revision=self._rev)

    def close(self):
        if self._cancel is not None:
            self._cancel()
            self._cancel = None

    # etcd -> memory ---------------------------------------------------------------------------
    def _on_watch(self, events, revision) -> None:
        for e in events:
            k = e.kv.key
            if (k == self._meta_key or k.startswith(self._cf_prefix)) and e.kv.mod_revision > self._rev:
                self._dirty.set()
                return

    def _catch_up(self) -> int:
        """(Lock held.) Reload when the watch saw another controller's write."""
        if not self._dirty.is_set():
            return 0
        self._dirty.clear()
        old = self._recs
        self._reload()
        return self._queue_diff(old)

    def _reload(self) -> None:
        kvs, rev = self.etcd.get_prefix(f"{self.prefix}/".encode())
        meta, recs = None, []
        where = f"etcd {self.prefix}"
        for kv in kvs:
            if kv.key == self._meta_key:
                meta, self._meta_mod = kv.value, kv.mod_revision
            elif kv.key.startswith(self._cf_prefix):
                recs.append(kv.value)
        if meta is None:
            if recs:
                raise RegistryDbError(f"{where}: coflows without a meta key")
            self._meta_mod = 0
            self._recs, self._seq, self._next_internal = {}, {}, {}
            self._version, self._next_external, self._next_seq = 0, 1, 0
            self._rev = rev
            return
        try:
            m = json.loads(meta)
            if m.get("format") != DB_FORMAT:
                raise RegistryDbError(f"{where}: meta format {m.get('format')!r}, expected {DB_FORMAT!r}")
            version, next_ext, next_seq = int(m["version"]), int(m["next_external"]), int(m["next_seq"])
            jobs = {int(k): int(v) for k, v in m["jobs"].items()}
            parsed = []
            for raw in recs:
                d = json.loads(raw)
                cid = CoflowId(int(d["e"]), int(d["i"]))
                # (a fifth element, ready, since the flows' readiness was added: absent = false)
                flows = [FlowSpec(x[0], x[1], x[2], bool(x[4]) if len(x) > 4 else False) for x in d["flows"]]
                for f in flows:
                    if f.src not in self.hosts or f.dst not in self.hosts:
                        raise RegistryDbError(f"{where}: coflow {cid}: a host outside the topology")
                sent = {i: int(x[3]) for i, x in enumerate(d["flows"]) if x[3]}
                rec = CoflowRecord(cid, flows, float(d["at"]), d.get("dl"),
                                   parse_cid(d["parent"]) if d.get("parent") else None, sent,
                                   bool(d.get("adm", True)), d.get("lease_s"), d.get("owner"), d.get("rid"),
                                   tuple(parse_cid(p) for p in d.get("parents") or ()))
                parsed.append((int(d["seq"]), rec, d.get("fp") or ""))
        except (ValueError, KeyError, TypeError, ApiError) as e:
            raise RegistryDbError(f"{where}: damaged registry ({type(e).__name__}: {e})") from None
        old_exp = self._expires
        self._recs, self._seq = {}, {}
        self._expires, self._requests, self._fingerprints = {}, {}, {}
        now = self.lease_clock()
        for seq, rec, fp in sorted(parsed, key=lambda x: x[0]):
            self._recs[rec.cid] = rec
            self._seq[rec.cid] = seq
            self._index_ext(rec, fp)
            if rec.lease_s is not None:
                self._expires[rec.cid] = old_exp.get(rec.cid, now + rec.lease_s)
        self._next_internal = jobs
        self._version, self._next_external, self._next_seq = version, next_ext, next_seq
        self._rev = rev

    # memory -> etcd ---------------------------------------------------------------------------
    def _key(self, cid: CoflowId) -> bytes:
        return self._cf_prefix + f"{cid.external:010d}.{cid.internal:03d}".encode()

    def _value(self, rec: CoflowRecord, seq: int, fp: str) -> bytes:
        return json.dumps({
            "e": rec.cid.external, "i": rec.cid.internal, "seq": seq, "at": rec.registered_at,
            "dl": rec.deadline_s, "parent": str(rec.parent) if rec.parent else None,
            "parents": [str(p) for p in rec.parents] if len(rec.parents) > 1 else None, "adm": rec.admitted,
            "flows": [[f.src, f.dst, f.size_bytes, rec.sent_bytes.get(i, 0)] + ([True] if f.ready else [])
                      for i, f in enumerate(rec.flows)],
            "lease_s": rec.lease_s, "owner": rec.owner, "rid": rec.request_id, "fp": fp or None},
            separators=(",", ":")).encode()

    def _db_write(self, fn, bump: int = 1):
        t = _Txn({"format": DB_FORMAT, "version": self._version + bump, "next_external": self._next_external,
                  "next_seq": self._next_seq, "jobs": {str(k): v for k, v in self._next_internal.items()}})
        fn(t)
        e = self.etcd
        cmp = [e.compare(self._meta_key, "MOD", self._meta_mod)]
        if self.election is not None:
            cmp.append(e.compare(self.election.key, "CREATE", self.election.revision))
        ops = t.ops + [e.op_put(self._meta_key, json.dumps(t.meta, separators=(",", ":")).encode())]
        try:
            ok, rev, _ = e.txn(cmp, ops)
        except EtcdError:
            self._dirty.set()        # it may have committed: look before the next write
            raise
        if not ok:
            self._dirty.set()
            raise ApiError("FAILED_PRECONDITION", "coflow_id",
                           "the registry changed in etcd under this controller (a new primary?); retry")
        self._rev = self._meta_mod = rev

    def _db_register(self, db, rec, seq, next_external, fingerprint=""):
        db.ops.append(self.etcd.op_put(self._key(rec.cid), self._value(rec, seq, fingerprint)))
        db.meta["next_external"] = next_external
        db.meta["next_seq"] = seq + 1
        db.meta["jobs"][str(rec.cid.external)] = rec.cid.internal + 1

    def _db_add_flows(self, db, rec, first):
        db.ops.append(self.etcd.op_put(self._key(rec.cid), self._value(
            rec, self._seq[rec.cid], self._fingerprints.get(rec.cid, ""))))

    def _db_update(self, db, rec, ids):
        self._db_add_flows(db, rec, 0)

    def _db_unregister(self, db, cid):
        db.ops.append(self.etcd.op_delete(self._key(cid)))

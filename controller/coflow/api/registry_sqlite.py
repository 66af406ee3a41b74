"""The registry's SQLite backend, a part of :class:`coflow.api.registry.CoflowRegistry`: opening
and locking the database (exclusive, or shared in WAL mode), loading it, catching up with what
another connection committed (and the events that turn the old state into the new one), and one
transaction per change.  :class:`coflow.api.etcd_registry.EtcdCoflowRegistry` replaces these
methods with etcd's.
"""
from __future__ import annotations

import os
import sqlite3

from ..dataplane.constants import CoflowId
from .records import DB_FORMAT, ApiError, CoflowRecord, FlowSpec, RegistryDbError, _copy, parse_cid


class SqliteStore:
    def _open_db(self, path: str):
        if os.path.isdir(path):
            raise RegistryDbError(f"{path}: is a directory, not a registry database")
        try:
            db = sqlite3.connect(path, timeout=2.0 if self.shared else 0.2, isolation_level=None,
                                 check_same_thread=False)
        except sqlite3.Error as e:
            raise RegistryDbError(f"{path}: cannot open the registry database: {e}") from None
        try:
            if self.shared:
                db.execute("PRAGMA journal_mode=WAL")   # readers never wait for the writer
                db.execute("BEGIN IMMEDIATE")
            else:
                db.execute("PRAGMA locking_mode=EXCLUSIVE")
                db.execute("BEGIN EXCLUSIVE")
            try:
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if not tables:
                    for stmt in self._SCHEMA.split(";"):
                        if stmt.strip():
                            db.execute(stmt)
                    db.executemany("INSERT INTO meta VALUES (?, ?)",
                                   [("format", DB_FORMAT), ("version", "0"), ("next_external", "1"), ("next_seq", "0")])
                else:
                    self._load(db, path, tables)
                db.execute(self._EXT_SCHEMA)
                db.execute(self._READY_SCHEMA)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as e:
            db.close()
            if "locked" in str(e):
                raise RegistryDbError(f"{path}: in use by another coflow registry (database is locked)") from None
            raise RegistryDbError(f"{path}: cannot use the registry database: {e}") from None
        except sqlite3.DatabaseError as e:
            db.close()
            raise RegistryDbError(f"{path}: not a coflow registry database ({e})") from None
        except RegistryDbError:
            db.close()
            raise
        self._db = db
        if self.shared:
            self._data_version = db.execute("PRAGMA data_version").fetchone()[0]

    def _catch_up(self) -> int:
        """(Lock held.) Reload from the shared database if another connection committed; queue
        the events of the difference."""
        db = self._db
        if db is None:
            return 0
        dv = db.execute("PRAGMA data_version").fetchone()[0]
        if dv == self._data_version:
            return 0
        self._data_version = dv
        old = (self._recs, self._seq, self._next_internal, self._version, self._next_external,
               self._next_seq, self._expires, self._requests, self._fingerprints)
        self._recs, self._seq, self._next_internal = {}, {}, {}
        db.execute("BEGIN")
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            self._load(db, self.db_path or "", tables)
        except BaseException:
            # a damaged database loses nothing here: keep the last good state
            (self._recs, self._seq, self._next_internal, self._version, self._next_external,
             self._next_seq, self._expires, self._requests, self._fingerprints) = old
            raise
        finally:
            db.execute("COMMIT")
        return self._queue_diff(old[0])

    def _queue_diff(self, old_recs: dict) -> int:
        """(Lock held.) Queue the events that turn ``old_recs`` into the current records."""
        events = []
        for cid, rec in self._recs.items():           # registration order
            was = old_recs.get(cid)
            if was is None:
                events.append(("register", rec))
            elif rec != was:
                events.append(("add_flows" if len(rec.flows) > len(was.flows) else "update", rec))
        events += [("unregister", rec) for cid, rec in old_recs.items() if cid not in self._recs]
        for ev, rec in events:
            self._pending.append((ev, _copy(rec)))
        return len(events)

    def _load(self, db: sqlite3.Connection, path: str, tables: set[str]):
        def bad(msg):
            return RegistryDbError(f"{path}: {msg}")
        if "meta" not in tables:
            raise bad(f"not a coflow registry database (no {DB_FORMAT} marker; tables: {', '.join(sorted(tables))})")
        meta = dict(db.execute("SELECT key, value FROM meta"))
        if meta.get("format") != DB_FORMAT:
            raise bad(f"not a coflow registry database (format {meta.get('format')!r}, expected {DB_FORMAT!r})")
        if not {"jobs", "coflows", "flows"} <= tables:
            raise bad("registry database is missing tables jobs/coflows/flows")
        try:
            self._version = int(meta["version"])
            self._next_external = int(meta["next_external"])
            self._next_seq = int(meta["next_seq"])
        except (KeyError, ValueError) as e:
            raise bad(f"registry database meta is damaged ({e})") from None
        self._next_internal = {int(e): int(n) for e, n in db.execute("SELECT external, next_internal FROM jobs")}
        flows: dict[tuple[int, int], list] = {}
        for e, i, fid, src, dst, size, sent in db.execute(
                "SELECT external, internal, flow_id, src, dst, size_bytes, sent_bytes FROM flows ORDER BY external, internal, flow_id"):
            flows.setdefault((e, i), []).append((fid, src, dst, size, sent))
        ready = set(db.execute("SELECT external, internal, flow_id FROM flow_ready")) if "flow_ready" in tables else set()
        for e, i, seq, at, dl, parent, adm in db.execute(
                "SELECT external, internal, seq, registered_at, deadline_s, parent, admitted FROM coflows ORDER BY seq"):
            try:
                cid = CoflowId(e, i)
                pars = tuple(parse_cid(p) for p in parent.split(",")) if parent else ()
            except (ValueError, ApiError) as ex:
                raise bad(f"coflow {e}.{i}: {ex}") from None
            fl = flows.pop((e, i), [])
            if not fl or [f[0] for f in fl] != list(range(len(fl))):
                raise bad(f"coflow {cid}: flow ids are not 0..n-1")
            specs, sent = [], {}
            for fid, src, dst, size, s in fl:
                for h in (src, dst):
                    if h not in self.hosts:
                        raise bad(f"coflow {cid} flow {fid}: host {h!r} is not in the topology")
                specs.append(FlowSpec(src, dst, size, (e, i, fid) in ready))
                if s:
                    sent[fid] = s
            if not self._issued(cid):
                raise bad(f"coflow {cid}: id beyond the job's next internal id")
            self._recs[cid] = CoflowRecord(cid, specs, at, dl, None, sent, bool(adm), parents=pars)
            self._seq[cid] = seq
        if flows:
            raise bad(f"flows of unknown coflow {'.'.join(map(str, next(iter(flows))))}")
        old_expires = self._expires
        self._expires, self._requests, self._fingerprints = {}, {}, {}
        if "coflow_ext" in tables:
            for e, i, lease, owner, rid, fp in db.execute(
                    "SELECT external, internal, lease_s, owner, request_id, fingerprint FROM coflow_ext"):
                rec = self._recs.get(CoflowId(e, i))
                if rec is None:
                    continue
                rec.lease_s, rec.owner, rec.request_id = lease, owner, rid
                self._index_ext(rec, fp or "")
        now = self.lease_clock()
        for cid, rec in self._recs.items():
            if rec.lease_s is not None:   # a renewal seen before a reload stays; else one full lease
                self._expires[cid] = old_expires.get(cid, now + rec.lease_s)

    def _db_write(self, fn, bump: int = 1):
        db = self._db
        if db is None:
            if self.db_path is not None:
                raise RuntimeError("coflow registry: the database was closed")
            return
        db.execute("BEGIN IMMEDIATE" if self.shared else "BEGIN")
        try:
            fn(db)
            db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(self._version + bump),))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if self.shared:   # our own commit is not news to us
            self._data_version = db.execute("PRAGMA data_version").fetchone()[0]

    def _db_register(self, db, rec: CoflowRecord, seq: int, next_external: int, fingerprint: str = ""):
        c = rec.cid
        if rec.lease_s is not None or rec.owner is not None or rec.request_id is not None:
            db.execute("INSERT INTO coflow_ext VALUES (?, ?, ?, ?, ?, ?)",
                       (c.external, c.internal, rec.lease_s, rec.owner, rec.request_id, fingerprint or None))
        db.execute("INSERT INTO coflows VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (c.external, c.internal, seq, rec.registered_at, rec.deadline_s,
                    ",".join(map(str, rec.parents)) or None, int(rec.admitted)))
        db.executemany("INSERT INTO flows VALUES (?, ?, ?, ?, ?, ?, 0)",
                       [(c.external, c.internal, i, f.src, f.dst, f.size_bytes) for i, f in enumerate(rec.flows)])
        self._db_ready(db, rec, range(len(rec.flows)))
        db.execute("INSERT INTO jobs VALUES (?, ?) ON CONFLICT(external) DO UPDATE SET next_internal = excluded.next_internal",
                   (c.external, c.internal + 1))
        db.execute("UPDATE meta SET value = ? WHERE key = 'next_external'", (str(next_external),))
        db.execute("UPDATE meta SET value = ? WHERE key = 'next_seq'", (str(seq + 1),))

    def _db_add_flows(self, db, rec: CoflowRecord, first: int):
        c = rec.cid
        db.executemany("INSERT INTO flows VALUES (?, ?, ?, ?, ?, ?, 0)",
                       [(c.external, c.internal, i, f.src, f.dst, f.size_bytes)
                        for i, f in enumerate(rec.flows) if i >= first])
        self._db_ready(db, rec, range(first, len(rec.flows)))

    def _db_update(self, db, rec: CoflowRecord, ids: set[int]):
        c = rec.cid
        db.executemany("UPDATE flows SET size_bytes = ?, sent_bytes = ? WHERE external = ? AND internal = ? AND flow_id = ?",
                       [(rec.flows[i].size_bytes, rec.sent_bytes.get(i, 0), c.external, c.internal, i) for i in sorted(ids)])
        self._db_ready(db, rec, sorted(ids))

    @staticmethod
    def _db_ready(db, rec: CoflowRecord, ids) -> None:
        """The flows ``ids``' readiness into ``flow_ready`` (a row per ready flow)."""
        c = rec.cid
        rows = [(c.external, c.internal, i) for i in ids]
        db.executemany("DELETE FROM flow_ready WHERE external = ? AND internal = ? AND flow_id = ?",
                       [r for r in rows if not rec.flows[r[2]].ready])
        db.executemany("INSERT OR IGNORE INTO flow_ready VALUES (?, ?, ?)",
                       [r for r in rows if rec.flows[r[2]].ready])

    def _db_unregister(self, db, cid: CoflowId):
        db.execute("DELETE FROM coflow_ext WHERE external = ? AND internal = ?", (cid.external, cid.internal))
        db.execute("DELETE FROM flow_ready WHERE external = ? AND internal = ?", (cid.external, cid.internal))
        db.execute("DELETE FROM flows WHERE external = ? AND internal = ?", (cid.external, cid.internal))
        db.execute("DELETE FROM coflows WHERE external = ? AND internal = ?", (cid.external, cid.internal))

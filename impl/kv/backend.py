"""The member's storage backend: one SQLite file holding every key revision, leases,
alarms and the applied Raft position.

Schema (version 1, `meta.schema_version`):
- `kv`: one row per key revision — (main, sub) is the revision (main is the store
  revision, sub orders the changes inside it), key, value, create_revision, mod_revision,
  version, lease, tombstone (1 for a deletion). Indexed on (key, main).
  A key can have two rows in one main revision (a txn that puts it, then deletes it
  through a range): the higher sub is the newer, so "newest" always orders by (main, sub).
- `key_newest`: key -> its newest revision (main, sub, tombstone), kept with every insert
  and compaction, for fast reads at the current revision; rebuilt from `kv` on open if
  empty.
- `meta`: name -> integer: schema_version, consistent_index (the last applied Raft
  index), term (its term), current_revision, compact_revision.
- `lease`: id -> granted ttl. `alarm`: (member_id, alarm type).
- `auth`: (kind 'user' or 'role', name) -> the encoded authpb record (etcdspec.impl.kv.
  auth_store owns the encoding); `meta` holds auth_enabled (0/1) and auth_revision.

Contract:
- Writes happen only inside `transaction()` (BEGIN IMMEDIATE ... COMMIT, rolled back on an
  exception). The applier writes the consistent index and term with `set_applied()` in
  the SAME transaction as the data it applied, so after a crash the file says exactly
  which log entries its contents include. SQLite's write-ahead-log journal with
  synchronous=FULL: a commit is on disk when it returns (one fsync per commit).
- Group commit (`group_commit_limit` > 1, the member's backend): each `transaction()`
  block is a savepoint inside one SQLite transaction that stays open across blocks and
  is committed after `group_commit_limit` blocks, or at the first block ending
  `group_commit_s` after it began, or by `flush()` / `flush_if_due()`; every
  operation that needs the file itself (checkpoint, defragment, snapshot, restore,
  close) commits first. A block that raises is rolled back alone (to its savepoint).
  A block's writes are visible to every read at once (one connection), but reach the
  file only with that commit: after a crash the file holds a prefix of the blocks, and
  its consistent index says which (etcd's backend commits its batch the same way, every
  100 ms or 10,000 writes, the WAL being the durable record).
- Reads outside a transaction see committed data; reads inside one also see its own
  uncommitted writes (same connection).
- `compact()` deletes superseded revisions (the file does not shrink: pages go to the
  free list); `defragment()` rebuilds the file with VACUUM so it shrinks. `size()` is
  the database's page count times page size: the file's size once `checkpoint()` has
  moved the journal's pages into it.
- `snapshot_bytes()`/`save_snapshot()` make a consistent copy with SQLite's backup API;
  `restore()` replaces the file's contents with a snapshot. `copy_committed()` makes one
  through a connection of its own, of what has been committed: it may run on another
  thread while this connection goes on writing (WAL journal mode: neither waits).
- Not thread-safe by itself: every call takes an internal lock, but a transaction must be
  opened and finished on one thread.
- The meta values, the alarm list and `size()` are cached in memory (they are read on
  every applied request and every proposal): a write updates the cache with the
  statement that changes the file (the size is read again after each transaction),
  and any rollback, restore, defragmentation or reconnect drops the cache, so it never
  shows what the file does not hold. The connection is the file's only writer.
- Under group commit the meta values (current revision, consistent index) are written
  once per SQLite transaction, just before its COMMIT, rather than by every block: they
  are in the same transaction as the rows they describe either way. A rolled-back block
  undoes the values it set.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from etcdspec.impl.kv.etcd_format import HashRow

SCHEMA_VERSION = 1

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS kv (
        main INTEGER NOT NULL,
        sub INTEGER NOT NULL,
        key BLOB NOT NULL,
        value BLOB NOT NULL,
        create_revision INTEGER NOT NULL,
        mod_revision INTEGER NOT NULL,
        version INTEGER NOT NULL,
        lease INTEGER NOT NULL,
        tombstone INTEGER NOT NULL,
        PRIMARY KEY (main, sub)
    )""",
    "CREATE INDEX IF NOT EXISTS kv_by_key_revision ON kv (key, main, sub)",
    """CREATE TABLE IF NOT EXISTS key_newest (
        key BLOB PRIMARY KEY,
        main INTEGER NOT NULL,
        sub INTEGER NOT NULL,
        tombstone INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY, ttl INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS alarm (
        member_id INTEGER NOT NULL,
        alarm INTEGER NOT NULL,
        PRIMARY KEY (member_id, alarm)
    )""",
    # The cluster's members (etcd's members and members_removed buckets): one row per
    # member ever added, its record as etcd's JSON, `removed` once it was removed.
    """CREATE TABLE IF NOT EXISTS member (
        id INTEGER PRIMARY KEY,
        record BLOB NOT NULL,
        removed INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS auth (
        kind TEXT NOT NULL,
        name BLOB NOT NULL,
        record BLOB NOT NULL,
        PRIMARY KEY (kind, name)
    )""",
)

_META_DEFAULTS = {
    "schema_version": SCHEMA_VERSION,
    "consistent_index": 0,
    "term": 0,
    "current_revision": 1,
    "compact_revision": 0,
    "auth_enabled": 0,
    "auth_revision": 1,  # etcd's auth store starts at revision 1
}

_KV_COLUMNS = "main, sub, key, value, create_revision, mod_revision, version, lease, tombstone"


class BackendError(RuntimeError):
    """The database file is unusable or misused; the message says what to do."""


@dataclass(frozen=True)
class KeyRevision:
    """One row of `kv`: a key's state as of revision (main, sub)."""

    main: int
    sub: int
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int
    tombstone: bool

    def describe(self) -> str:
        what = "tombstone" if self.tombstone else f"value={self.value!r} version={self.version}"
        return f"rev {self.main}.{self.sub} key={self.key!r} {what} lease={self.lease}"


def _row(r: tuple[int, int, bytes, bytes, int, int, int, int, int]) -> KeyRevision:
    return KeyRevision(r[0], r[1], bytes(r[2]), bytes(r[3]), r[4], r[5], r[6], r[7], bool(r[8]))


def key_range_clause(
    key: bytes, range_end: bytes, column: str = "key"
) -> tuple[str, tuple[bytes, ...]]:
    """SQL condition on `column` and its parameters for etcd's key range rules.

    Empty range_end: the key alone. range_end b"\\0": every key >= key. Otherwise the
    half-open interval [key, range_end) (empty when range_end <= key).
    """
    if not range_end:
        return f"{column} = ?", (key,)
    if range_end == b"\x00":
        return f"{column} >= ?", (key,)
    return f"{column} >= ? AND {column} < ?", (key, range_end)


_KEYS_PER_QUERY = 500  # host parameters per `newest_live` statement (SQLite allows 32766)
# put_run's statements (Backend.insert_puts, Backend.newest_live).
PutRow = tuple[int, bytes, bytes, int, int, int]  # main, key, value, create, version, lease
LiveRow = tuple[bytes, bytes, int, int, int, int]  # key, value, create, mod, version, lease
_INSERT_PUT = f"INSERT INTO kv ({_KV_COLUMNS}) VALUES (?1, 0, ?2, ?3, ?4, ?1, ?5, ?6, 0)"
_NEWEST_PUT = (
    "INSERT INTO key_newest (key, main, sub, tombstone) VALUES (?1, ?2, 0, 0) "
    "ON CONFLICT (key) DO UPDATE SET main = excluded.main, sub = 0, tombstone = 0"
)
_NEWEST_LIVE = (
    "SELECT kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease "
    "FROM key_newest AS latest JOIN kv ON kv.main = latest.main AND kv.sub = latest.sub "
    "WHERE latest.key IN ({marks}) AND latest.tombstone = 0"
)

_LATEST_SELECT = (
    "SELECT "
    + ", ".join(f"kv.{c.strip()}" for c in _KV_COLUMNS.split(","))
    + " FROM key_newest AS latest JOIN kv ON kv.main = latest.main AND kv.sub = latest.sub"
)


class Backend:
    """A SQLite database file holding one member's applied state."""

    # Group commit (see the module contract): 1 commits each transaction() block.
    group_commit_limit = 1
    group_commit_s = 0.1

    def __init__(self, path: str | os.PathLike[str], durable: bool = True) -> None:
        """Open (creating if needed) the database at `path`.

        durable=False skips fsync (synchronous=OFF): still atomic and safe against a
        killed process, not against power loss. Only for throwaway stores in tests.
        """
        self.path = Path(path)
        self.durable = durable
        self._lock = threading.RLock()
        self._in_txn = False
        self._open = False  # a SQLite transaction holds committed transaction() blocks
        self._open_blocks = 0
        self._open_since = 0.0
        self._meta_cache: dict[str, int] = {}
        # Meta values set under group commit, written to the file once, just before the
        # COMMIT (or before a statement that reads the table), not by every block.
        self._meta_dirty: dict[str, int] = {}
        self._alarm_cache: list[tuple[int, int]] | None = None
        self._size_cache: int | None = None
        self._committed_size: int | None = None  # committed_size(), until the next commit
        self._page_size: int | None = None
        self._conn = self._connect()

    # ---- lifecycle ----

    def _drop_caches(self) -> None:
        self._meta_cache = dict(self._meta_dirty)
        self._alarm_cache = None
        self._size_cache = None
        self._committed_size = None
        self._page_size = None

    def _connect(self) -> sqlite3.Connection:
        self._drop_caches()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if self.durable else 'OFF'}")
            conn.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA:
                conn.execute(statement)
            for name, value in _META_DEFAULTS.items():
                conn.execute(
                    "INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)", (name, value)
                )
            if conn.execute("SELECT 1 FROM key_newest LIMIT 1").fetchone() is None:
                conn.execute(
                    "INSERT INTO key_newest (key, main, sub, tombstone) "
                    "SELECT key, main, sub, tombstone FROM (SELECT key, main, sub, tombstone, "
                    "ROW_NUMBER() OVER (PARTITION BY key ORDER BY main DESC, sub DESC) AS n "
                    "FROM kv) WHERE n = 1"
                )
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise BackendError(
                f"{self.path}: not a usable etcdspec database ({exc}); "
                "restore it from a snapshot or remove the member's data directory"
            ) from exc
        version = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0]
        if version != SCHEMA_VERSION:
            conn.close()
            raise BackendError(
                f"{self.path}: schema version {version}, this program reads version "
                f"{SCHEMA_VERSION}; use a matching etcdspec release"
            )
        return conn

    def _sidecar(self, suffix: str) -> Path:
        return self.path.with_name(self.path.name + suffix)

    def close(self) -> None:
        """Commit what group commit holds, and close. A commit that fails here leaves the
        file at its previous commit, which its consistent index describes (the member
        replays the rest from its WAL on start); the connection is closed either way."""
        with self._lock:
            try:
                self._commit_open()
            finally:
                self._quiesce()
                self._conn.close()

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Backend]:
        """One atomic write transaction, rolled back if the block raises; durable when it
        ends, or with group commit (`group_commit_limit` > 1) at the next commit."""
        if self.group_commit_limit > 1:
            with self._grouped_transaction():
                yield self
            return
        with self._lock:
            if self._in_txn:
                raise BackendError("nested backend transaction: finish the open one first")
            self._conn.execute("BEGIN IMMEDIATE")
            self._in_txn = True
            try:
                yield self
            except BaseException:
                self._drop_caches()
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._commit()
            finally:
                self._in_txn = False
                self._size_cache = None  # the transaction's writes may have grown the file

    @contextlib.contextmanager
    def _grouped_transaction(self) -> Iterator[None]:
        """`transaction()` under group commit: a savepoint in the open SQLite transaction."""
        with self._lock:
            if self._in_txn:
                raise BackendError("nested backend transaction: finish the open one first")
            if not self._open:
                self._conn.execute("BEGIN IMMEDIATE")
                self._open = True
                self._open_since = time.monotonic()
            self._conn.execute("SAVEPOINT block")
            self._in_txn = True
            dirty = dict(self._meta_dirty)
            try:
                yield
            except BaseException:
                self._meta_dirty = dirty  # what the block set is undone with it
                self._drop_caches()
                self._conn.execute("ROLLBACK TO block")
                self._conn.execute("RELEASE block")
                raise
            else:
                self._conn.execute("RELEASE block")
                self._open_blocks += 1
            finally:
                self._in_txn = False
                self._size_cache = None  # the transaction's writes may have grown the file
            if (
                self._open_blocks >= self.group_commit_limit
                or time.monotonic() - self._open_since >= self.group_commit_s
            ):
                self._commit_open()

    def _commit_open(self) -> None:
        """Commit the SQLite transaction group commit holds open, if any. A failed commit
        is rolled back and raised: the file keeps its previous commit, and the caller
        (whose applied state ran ahead of the file) must stop and recover."""
        if not self._open:
            return
        self._write_meta()
        self._open = False
        self._open_blocks = 0
        self._commit()
        self._after_commit()

    def _commit(self) -> None:
        """COMMIT the open SQLite transaction. A failed commit (disk full, I/O error) may
        leave it open: it is rolled back, so the caller sees the error and nothing
        half-done."""
        self._committed_size = None
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error:
            self._meta_dirty = {}  # rolled back below: the file's values are the truth
            self._drop_caches()
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    def _after_commit(self) -> None:
        """Called after each commit of group commit (a subclass may checkpoint)."""

    def _quiesce(self) -> None:
        """Called, under the lock, before the file is checkpointed, rebuilt, replaced or
        closed here (a subclass stops what else works on the file)."""

    def flush(self) -> None:
        """Commit what group commit holds (no-op when nothing is held)."""
        with self._lock:
            if self._in_txn:
                raise BackendError("flush inside a transaction: finish it first")
            self._commit_open()

    def flush_due(self) -> bool:
        """Whether `flush_if_due` would commit now."""
        return (
            self._open
            and not self._in_txn
            and time.monotonic() - self._open_since >= self.group_commit_s
        )

    def flush_if_due(self) -> bool:
        """Commit what group commit holds once it is `group_commit_s` old; whether it did."""
        with self._lock:
            if not self.flush_due():
                return False
            self._commit_open()
            return True

    @contextlib.contextmanager
    def savepoint(self, name: str = "request") -> Iterator[None]:
        """A nested rollback point inside the open transaction (undone if the block raises)."""
        self._require_txn()
        self._conn.execute(f"SAVEPOINT {name}")
        dirty = dict(self._meta_dirty)
        try:
            yield
        except BaseException:
            self._meta_dirty = dirty
            self._drop_caches()
            self._conn.execute(f"ROLLBACK TO {name}")
            self._conn.execute(f"RELEASE {name}")
            raise
        else:
            self._conn.execute(f"RELEASE {name}")

    def changes(self) -> int:
        """How many rows this connection has inserted, updated or deleted so far."""
        return self._conn.total_changes

    def _require_txn(self) -> None:
        if not self._in_txn:
            raise BackendError(
                "backend write outside a transaction: use `with backend.transaction()`"
            )

    # ---- meta ----

    def _meta(self, name: str) -> int:
        cached = self._meta_cache.get(name)
        if cached is not None:
            return cached
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
            value = int(row[0])
            self._meta_cache[name] = value
        return value

    def _set_meta(self, name: str, value: int) -> None:
        self._require_txn()
        if self._open:  # group commit: written once, before the COMMIT (_write_meta)
            self._meta_dirty[name] = value
        else:
            self._conn.execute("UPDATE meta SET value = ? WHERE name = ?", (value, name))
        self._meta_cache[name] = value

    def _write_meta(self) -> None:
        """Write the meta values group commit has held back, in the open transaction."""
        if self._meta_dirty:
            self._conn.executemany(
                "UPDATE meta SET value = ? WHERE name = ?",
                [(value, name) for name, value in self._meta_dirty.items()],
            )
            self._meta_dirty = {}

    def consistent_index(self) -> int:
        """The index of the last Raft entry whose effects this file holds."""
        return self._meta("consistent_index")

    def applied_term(self) -> int:
        return self._meta("term")

    def set_applied(self, index: int, term: int) -> None:
        self._require_txn()
        if self._open:
            self._meta_dirty["consistent_index"] = index
            self._meta_dirty["term"] = term
        else:
            self._conn.execute(
                "UPDATE meta SET value = CASE name WHEN 'consistent_index' THEN ? ELSE ? END "
                "WHERE name IN ('consistent_index', 'term')",
                (index, term),
            )
        self._meta_cache["consistent_index"] = index
        self._meta_cache["term"] = term

    def current_revision(self) -> int:
        return self._meta("current_revision")

    def set_current_revision(self, revision: int) -> None:
        self._set_meta("current_revision", revision)

    def compact_revision(self) -> int:
        return self._meta("compact_revision")

    # ---- key revisions ----

    def insert_revision(self, row: KeyRevision) -> None:
        self._require_txn()
        self._conn.execute(
            f"INSERT INTO kv ({_KV_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.main,
                row.sub,
                row.key,
                row.value,
                row.create_revision,
                row.mod_revision,
                row.version,
                row.lease,
                int(row.tombstone),
            ),
        )
        self._conn.execute(
            "INSERT INTO key_newest (key, main, sub, tombstone) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET "
            "main = excluded.main, sub = excluded.sub, tombstone = excluded.tombstone",
            (row.key, row.main, row.sub, int(row.tombstone)),
        )

    def insert_revisions(self, rows: Sequence[KeyRevision]) -> None:
        """`insert_revision` of each row, in order, as two batched statements."""
        self._require_txn()
        self._conn.executemany(
            f"INSERT INTO kv ({_KV_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    r.main,
                    r.sub,
                    r.key,
                    r.value,
                    r.create_revision,
                    r.mod_revision,
                    r.version,
                    r.lease,
                    int(r.tombstone),
                )
                for r in rows
            ],
        )
        self._conn.executemany(
            "INSERT INTO key_newest (key, main, sub, tombstone) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET "
            "main = excluded.main, sub = excluded.sub, tombstone = excluded.tombstone",
            [(r.key, r.main, r.sub, int(r.tombstone)) for r in rows],
        )

    def insert_puts(self, rows: Sequence[PutRow]) -> None:
        """`insert_revision` of a put for each row (main, key, value, create_revision,
        version, lease: sub 0, mod_revision main, no tombstone), in order, as two batched
        statements (executemany): a key written twice keeps its later row as its newest."""
        self._require_txn()
        self._conn.executemany(_INSERT_PUT, rows)
        self._conn.executemany(_NEWEST_PUT, [(row[1], row[0]) for row in rows])

    def newest_live(self, keys: Iterable[bytes]) -> dict[bytes, LiveRow]:
        """Each of `keys` that exists at the current revision, with its newest state (key,
        value, create_revision, mod_revision, version, lease): `live(key, b"",
        current_revision())` for many keys in few statements."""
        wanted = list(dict.fromkeys(keys))
        found: dict[bytes, LiveRow] = {}
        with self._lock:
            for start in range(0, len(wanted), _KEYS_PER_QUERY):
                chunk = wanted[start : start + _KEYS_PER_QUERY]
                sql = _NEWEST_LIVE.format(marks=", ".join("?" * len(chunk)))
                for row in self._conn.execute(sql, chunk).fetchall():
                    found[row[0]] = row
        return found

    def latest(self, key: bytes, range_end: bytes, revision: int) -> list[KeyRevision]:
        """Each key's newest row with main <= revision (tombstones included), by key.

        Reads at (or above) the current revision go through `key_newest`, the newest
        revision of every key; older reads scan the key's revisions.
        """
        if revision < self.current_revision():
            return self._latest_scan(key, range_end, revision)
        clause, params = key_range_clause(key, range_end, column="latest.key")
        sql = f"{_LATEST_SELECT} WHERE {clause} ORDER BY latest.key"
        with self._lock:
            rows = [_row(r) for r in self._conn.execute(sql, params).fetchall()]
        if all(r.main <= revision for r in rows):
            return rows
        # Only inside a write transaction that reads below its own writes.
        out: list[KeyRevision] = []
        for r in rows:
            out.extend([r] if r.main <= revision else self._latest_scan(r.key, b"", revision))
        return out

    def _latest_scan(self, key: bytes, range_end: bytes, revision: int) -> list[KeyRevision]:
        clause, params = key_range_clause(key, range_end)
        sql = (
            f"SELECT {_KV_COLUMNS} FROM (SELECT {_KV_COLUMNS}, ROW_NUMBER() OVER "
            "(PARTITION BY key ORDER BY main DESC, sub DESC) AS n "
            f"FROM kv WHERE {clause} AND main <= ?) WHERE n = 1 ORDER BY key"
        )
        with self._lock:
            rows = self._conn.execute(sql, (*params, revision)).fetchall()
        return [_row(r) for r in rows]

    def live(self, key: bytes, range_end: bytes, revision: int) -> list[KeyRevision]:
        """Keys in the range that exist at `revision`, with their state then, by key."""
        return [r for r in self.latest(key, range_end, revision) if not r.tombstone]

    def previous(self, key: bytes, before_main: int) -> KeyRevision | None:
        """The key's newest row strictly before revision `before_main`, if kept."""
        with self._lock:
            r = self._conn.execute(
                f"SELECT {_KV_COLUMNS} FROM kv WHERE key = ? AND main < ? "
                "ORDER BY main DESC, sub DESC LIMIT 1",
                (key, before_main),
            ).fetchone()
        return None if r is None else _row(r)

    def history(
        self, key: bytes, range_end: bytes, start: int, end: int, limit: int = 0
    ) -> list[KeyRevision]:
        """Rows with start <= main <= end in the range, in revision order.

        With limit > 0, stops after the first revision that reaches `limit` rows, so a
        revision's rows are never split.
        """
        clause, params = key_range_clause(key, range_end)
        sql = (
            f"SELECT {_KV_COLUMNS} FROM kv WHERE {clause} AND main >= ? AND main <= ? "
            "ORDER BY main, sub"
        )
        out: list[KeyRevision] = []
        with self._lock:
            for r in self._conn.execute(sql, (*params, start, end)):
                row = _row(r)
                if limit and len(out) >= limit and row.main != out[-1].main:
                    break
                out.append(row)
        return out

    def rows_up_to(self, revision: int) -> Iterator[KeyRevision]:
        """Every kept row with main <= revision, in revision order."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_KV_COLUMNS} FROM kv WHERE main <= ? ORDER BY main, sub", (revision,)
            ).fetchall()
        for r in rows:
            yield _row(r)

    def hash_rows(self, revision: int, compact_revision: int) -> list[HashRow]:
        """The rows etcd's HashKV at `revision` hashes, in revision order, as raw tuples.

        Every row with compact_revision < main <= revision; of the rows at or below the
        compact revision, those a compaction at `revision` would keep (each key's newest
        row up to `revision`, unless a tombstone), or all but tombstones when no key is
        alive at `revision` (etcd's "don't skip if there isn't one"). Our compaction
        keeps a tombstone AT the compact revision that etcd's bucket drops; it is never
        hashed.
        """
        newest_to_revision = (
            "NOT EXISTS (SELECT 1 FROM kv AS later WHERE later.key = kv.key "
            "AND later.main > kv.main AND later.main <= :rev)"
        )
        with self._lock:
            keep_all = 0
            if compact_revision > 0:
                keep_all = int(
                    self._conn.execute(
                        f"SELECT NOT EXISTS (SELECT 1 FROM kv WHERE main <= :rev "
                        f"AND tombstone = 0 AND {newest_to_revision})",
                        {"rev": revision},
                    ).fetchone()[0]
                )
            return self._conn.execute(
                f"SELECT {_KV_COLUMNS} FROM kv WHERE main <= :rev AND (main > :compact OR "
                f"(tombstone = 0 AND (:keep_all OR {newest_to_revision}))) ORDER BY main, sub",
                {"rev": revision, "compact": compact_revision, "keep_all": keep_all},
            ).fetchall()

    def compact(self, revision: int) -> int:
        """Drop revisions superseded at `revision`; return how many rows were removed.

        Each key keeps its newest row with main <= revision unless that row is a
        tombstone; every row above `revision` is kept, and so is every row AT `revision`
        (tombstones included), so that a watcher may still start at the compact
        revision and receive all of its events. (etcd drops a tombstone at the compact
        revision too, and a watcher resuming there misses that deletion; reads cannot
        tell the difference.)
        """
        self._require_txn()
        cur = self._conn.execute(
            "DELETE FROM kv WHERE main < :rev AND (tombstone = 1 OR (main, sub) < "
            "(SELECT k2.main, k2.sub FROM kv AS k2 WHERE k2.key = kv.key AND k2.main <= :rev "
            "ORDER BY k2.main DESC, k2.sub DESC LIMIT 1))",
            {"rev": revision},
        )
        self._conn.execute("DELETE FROM key_newest WHERE tombstone = 1 AND main < ?", (revision,))
        self._set_meta("compact_revision", revision)
        return int(cur.rowcount)

    # ---- leases ----

    def put_lease(self, lease_id: int, ttl: int) -> None:
        self._require_txn()
        self._conn.execute("INSERT OR REPLACE INTO lease (id, ttl) VALUES (?, ?)", (lease_id, ttl))

    def delete_lease(self, lease_id: int) -> None:
        self._require_txn()
        self._conn.execute("DELETE FROM lease WHERE id = ?", (lease_id,))

    def leases(self) -> list[tuple[int, int]]:
        """(lease_id, ttl) of every granted lease, by id."""
        with self._lock:
            return [
                (int(i), int(t))
                for i, t in self._conn.execute("SELECT id, ttl FROM lease ORDER BY id")
            ]

    def leased_keys(self) -> list[tuple[int, bytes]]:
        """(lease_id, key) for every live key attached to a lease, at the current revision."""
        return [
            (r.lease, r.key)
            for r in self.live(b"\x00", b"\x00", self.current_revision())
            if r.lease
        ]

    # ---- auth records ----

    def auth_records(self, kind: str) -> list[tuple[bytes, bytes]]:
        """(name, record) of every auth record of `kind` ('user' or 'role'), by name."""
        with self._lock:
            return [
                (bytes(n), bytes(r))
                for n, r in self._conn.execute(
                    "SELECT name, record FROM auth WHERE kind = ? ORDER BY name", (kind,)
                )
            ]

    def put_auth_record(self, kind: str, name: bytes, record: bytes) -> None:
        self._require_txn()
        self._conn.execute(
            "INSERT OR REPLACE INTO auth (kind, name, record) VALUES (?, ?, ?)",
            (kind, name, record),
        )

    def delete_auth_record(self, kind: str, name: bytes) -> None:
        self._require_txn()
        self._conn.execute("DELETE FROM auth WHERE kind = ? AND name = ?", (kind, name))

    def auth_state(self) -> tuple[bool, int]:
        """(auth enabled, auth revision)."""
        return bool(self._meta("auth_enabled")), self._meta("auth_revision")

    def set_auth_state(self, enabled: bool, revision: int) -> None:
        self._set_meta("auth_enabled", int(enabled))
        self._set_meta("auth_revision", revision)

    # ---- members ----

    def member_records(self) -> list[tuple[int, bytes, bool]]:
        """(id, record, removed) of every member ever recorded, by id."""
        with self._lock:
            return [
                (int(i), bytes(r), bool(x))
                for i, r, x in self._conn.execute(
                    "SELECT id, record, removed FROM member ORDER BY id"
                )
            ]

    def put_member_record(self, member_id: int, record: bytes, removed: bool = False) -> None:
        self._require_txn()
        self._conn.execute(
            "INSERT OR REPLACE INTO member (id, record, removed) VALUES (?, ?, ?)",
            (member_id, record, int(removed)),
        )

    # ---- alarms ----
    # A member id is a uint64 and SQLite's INTEGER a signed 64-bit one: stored wrapped
    # (`_signed64`), read back unsigned. An id of 2**63 or more (AlarmRequest.memberID
    # from bench/fuzz_grpc.py; any member's random id may be one) had raised OverflowError
    # in the apply and stopped the member.

    def put_alarm(self, member_id: int, alarm: int) -> None:
        self._require_txn()
        self._conn.execute(
            "INSERT OR IGNORE INTO alarm (member_id, alarm) VALUES (?, ?)",
            (_signed64(member_id), alarm),
        )
        self._alarm_cache = None

    def delete_alarm(self, member_id: int, alarm: int) -> None:
        self._require_txn()
        self._conn.execute(
            "DELETE FROM alarm WHERE member_id = ? AND alarm = ?", (_signed64(member_id), alarm)
        )
        self._alarm_cache = None

    def alarms(self) -> list[tuple[int, int]]:
        """(member_id, alarm type) of every raised alarm, sorted."""
        cached = self._alarm_cache
        if cached is not None:
            return list(cached)
        with self._lock:
            found = sorted(
                (int(m) & _U64, int(a))
                for m, a in self._conn.execute("SELECT member_id, alarm FROM alarm")
            )
            self._alarm_cache = found
        return list(found)

    # ---- size, defragmentation, hashing ----

    def size(self) -> int:
        """Bytes the database file occupies (etcd's dbSize)."""
        cached = self._size_cache
        if cached is not None:
            return cached
        with self._lock:
            pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
            size = int(pages) * self._page_bytes()
            if not self._in_txn:
                self._size_cache = size
        return size

    def committed_size(self) -> int:
        """`size()` as of the last commit, read again after each commit: under group
        commit, behind by at most one group-commit interval of writes. As etcd's quota
        check, which reads the size its backend records at each batch commit."""
        cached = self._committed_size
        if cached is None:
            cached = self._committed_size = self.size()
        return cached

    def size_in_use(self) -> int:
        """Bytes of the file holding data, excluding free pages (etcd's dbSizeInUse)."""
        with self._lock:
            pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
            free = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
            return (int(pages) - int(free)) * self._page_bytes()

    def _page_bytes(self) -> int:
        """The file's page size (cached: only a restore or rebuild, which drop the caches,
        could change it)."""
        if self._page_size is None:
            self._page_size = int(self._conn.execute("PRAGMA page_size").fetchone()[0])
        return self._page_size

    def defragment(self) -> None:
        """Rebuild the file without free pages; afterwards size() == size_in_use()."""
        with self._lock:
            if self._in_txn:
                raise BackendError("defragment inside a transaction: finish it first")
            self._commit_open()
            self._quiesce()
            self._size_cache = None
            self._conn.execute("VACUUM")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def checkpoint(self) -> None:
        """Move committed pages from the write-ahead log into the database file."""
        with self._lock:
            if self._in_txn:
                raise BackendError("checkpoint inside a transaction: finish it first")
            self._commit_open()
            self._quiesce()
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def hash(self) -> int:
        """CRC-32 over every table's contents in a canonical order (Maintenance.Hash)."""
        crc = 0
        with self._lock:
            self._write_meta()
            for table, order in (
                ("kv", "main, sub"),
                ("lease", "id"),
                ("alarm", "member_id, alarm"),
                ("auth", "kind, name"),
                ("meta", "name"),
            ):
                crc = zlib.crc32(table.encode(), crc)
                for row in self._conn.execute(f"SELECT * FROM {table} ORDER BY {order}"):
                    crc = zlib.crc32(repr(tuple(row)).encode(), crc)
        return crc & 0xFFFFFFFF

    # ---- snapshots ----

    def save_snapshot(self, target: str | os.PathLike[str]) -> Path:
        """Write a consistent copy of the database to `target` (fsynced); return its path."""
        target_path = Path(target)
        target_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = target_path.with_name(target_path.name + ".part")
        tmp.write_bytes(self.snapshot_bytes())
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, target_path)
        return target_path

    def snapshot_bytes(self) -> bytes:
        """A consistent copy of the whole database as bytes, what group commit holds
        committed first (`copy_committed`)."""
        with self._lock:
            if self._in_txn:
                raise BackendError("snapshot inside a transaction: finish it first")
            self._commit_open()
        return self.copy_committed().data

    def copy_committed(self) -> BackendCopy:
        """A consistent copy of what this file has committed (not what group commit still
        holds), with the consistent index and term it holds.

        Safe on any thread while this Backend's own connection writes: it reads through
        a connection of its own, in one read transaction (one backup step), which in WAL
        journal mode neither waits for the writer nor holds it up. The copy goes to a
        scratch file, which is only read back: it is never fsynced.
        """
        source = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            with tempfile.TemporaryDirectory(prefix="etcdspec-copy-") as tmp:
                target = Path(tmp) / "copy.db"
                dest = sqlite3.connect(target, isolation_level=None)
                try:
                    source.backup(dest)
                    meta = dict(
                        dest.execute(
                            "SELECT name, value FROM meta WHERE name IN ('consistent_index', 'term')"
                        ).fetchall()
                    )
                finally:
                    dest.close()
                return BackendCopy(target.read_bytes(), meta["consistent_index"], meta["term"])
        finally:
            source.close()

    def restore(self, snapshot: bytes) -> None:
        """Replace this database's contents with `snapshot` (from `snapshot_bytes()`).

        The snapshot is validated first; on a bad snapshot the current contents stay.
        """
        check_snapshot(snapshot)
        with self._lock:
            if self._in_txn:
                raise BackendError("restore inside a transaction: finish it first")
            self._commit_open()
            self._quiesce()
            tmp = self.path.with_name(self.path.name + ".restore")
            tmp.write_bytes(snapshot)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            self._conn.close()  # the last connection checkpoints and removes the -wal file
            for leftover in (self._sidecar("-wal"), self._sidecar("-shm")):
                leftover.unlink(missing_ok=True)
            os.replace(tmp, self.path)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            self._conn = self._connect()


@dataclass(frozen=True)
class BackendCopy:
    """A copy of the database file (`copy_committed`) and the Raft position it holds."""

    data: bytes
    index: int  # its consistent index
    term: int  # the term of that entry

    def describe(self) -> str:
        return f"copy of {len(self.data)} bytes at index {self.index} (term {self.term})"


def check_snapshot(snapshot: bytes) -> dict[str, int]:
    """Validate snapshot bytes; return its meta table (schema_version, revisions, index).

    Raises BackendError saying what is wrong with the snapshot.
    """
    if not snapshot.startswith(b"SQLite format 3\x00"):
        raise BackendError("snapshot is not an etcdspec (SQLite) database file")
    with tempfile.TemporaryDirectory(prefix="etcdspec-check-") as tmp:
        path = Path(tmp) / "check.db"
        path.write_bytes(snapshot)
        conn = sqlite3.connect(path)
        try:
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if integrity != "ok":
                raise BackendError(f"snapshot is corrupt: {integrity}")
            meta = {str(n): int(v) for n, v in conn.execute("SELECT name, value FROM meta")}
        except sqlite3.DatabaseError as exc:
            raise BackendError(f"snapshot is not a readable etcdspec database: {exc}") from exc
        finally:
            conn.close()
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise BackendError(
            f"snapshot has schema version {meta.get('schema_version')}, expected {SCHEMA_VERSION}"
        )
    return meta


_U64 = (1 << 64) - 1


def _signed64(value: int) -> int:
    """A uint64 as the signed 64-bit integer with the same bits (SQLite's INTEGER)."""
    value &= _U64
    return value - (1 << 64) if value >= 1 << 63 else value

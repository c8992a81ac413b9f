"""Backup and restore, as etcdctl/etcdutl do them: save, status, restore.

Two file formats, told apart by their first page:
- etcd's: a bbolt database (etcd_snapshot), followed by its SHA-256 when it came from
  `etcdctl snapshot save` or Maintenance.Snapshot (the file's size is then 32 more than
  a multiple of 512, etcdutl's rule), without it when it is a member's `member/snap/db`.
  Our server's Maintenance.Snapshot streams this format too (impl/kv/etcd_export.py);
- ours before that: the member's SQLite database followed by its SHA-256 (still read,
  so that older backups restore).
`save` writes the stream to FILE.part, checks the digest, fsyncs and renames, so FILE is
either complete and verified or absent. `status` checks the digest and the database and
reports etcdutl's figures (hash, revision, total keys, total size; for an etcd file
computed exactly as etcdutl computes them). `restore` writes a fresh data directory for
a member of a NEW cluster: our database, with its applied Raft index reset to 0 (the new
cluster's log starts empty, and every restored member starts from the same data) — from
an etcd file, one built from its key revisions, leases and compaction; an etcd file
without a SHA-256 is restored only with `skip_hash_check`, as etcdutl's
--skip-hash-check. It refuses to write into an existing data directory.
"""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

import grpc

from etcdspec.impl.kv.backend import Backend, BackendError, KeyRevision, check_snapshot
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import etcd_snapshot
from etcdspec.impl.tools.etcd_snapshot import EtcdSnapshotError, EtcdStore

DIGEST_BYTES = 32


class SnapshotError(Exception):
    """A snapshot could not be saved, read or restored; the message says why and what to do."""


class SnapshotUnreachable(SnapshotError):
    """The endpoint did not answer."""


@dataclass(frozen=True)
class SnapshotStatus:
    hash: int
    revision: int
    total_keys: int
    total_size: int
    consistent_index: int

    def describe(self) -> str:
        """etcdutl's (and etcdctl's) simple output: hash in hex, revision, total keys,
        total size in SI units."""
        return f"{self.hash:x}, {self.revision}, {self.total_keys}, {si_bytes(self.total_size)}"

    def to_json(self) -> dict[str, int]:
        return {
            "hash": self.hash,
            "revision": self.revision,
            "totalKey": self.total_keys,
            "totalSize": self.total_size,
        }


def si_bytes(size: int) -> str:
    """A size as etcd's tools print it (go-humanize's Bytes: SI units, one decimal
    below 10, rounded half up): 24576 -> "25 kB", 1433600 -> "1.4 MB"."""
    if size < 10:
        return f"{size} B"
    units = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
    exponent = min(math.floor(math.log(size, 1000) + 1e-12), len(units) - 1)
    value = math.floor(size / 1000**exponent * 10 + 0.5) / 10
    return f"{value:.1f} {units[exponent]}" if value < 10 else f"{value:.0f} {units[exponent]}"


def split_digest(data: bytes, where: str) -> bytes:
    """The database part of a snapshot, after checking its trailing SHA-256."""
    if len(data) < DIGEST_BYTES:
        raise SnapshotError(f"{where}: {len(data)} bytes is too short for a snapshot")
    body, digest = data[:-DIGEST_BYTES], data[-DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise SnapshotError(
            f"{where}: the SHA-256 at the end does not match the contents; the file is "
            "truncated or damaged — save a new snapshot"
        )
    return body


def save(endpoint: str, path: str | os.PathLike[str], timeout_s: float = 60.0) -> int:
    """Stream a snapshot from `endpoint` into `path`; return its size in bytes."""
    target = Path(path)
    part = target.with_name(target.name + ".part")
    address = endpoint.removeprefix("http://")
    try:
        with grpc.insecure_channel(address) as channel, open(part, "wb") as out:
            stub = rpc_pb2_grpc.MaintenanceStub(channel)
            size = 0
            for response in stub.Snapshot(rpc_pb2.SnapshotRequest(), timeout=timeout_s):
                out.write(response.blob)
                size += len(response.blob)
            out.flush()
            os.fsync(out.fileno())
    except grpc.RpcError as error:
        part.unlink(missing_ok=True)
        code = error.code()
        message = f"{endpoint}: {code.name}: {error.details()}"
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise SnapshotUnreachable(message) from error
        raise SnapshotError(message) from error
    try:
        split_digest(part.read_bytes(), str(part))
    except SnapshotError:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, target)
    return size


def _read(path: str | os.PathLike[str]) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise SnapshotError(f"{path}: cannot read ({error.strerror})") from error


def _etcd_body(data: bytes, where: str) -> tuple[bytes, bool]:
    """An etcd file's bbolt part, and whether it carried a SHA-256 (checked if so)."""
    if len(data) % 512 == DIGEST_BYTES:
        return split_digest(data, where), True
    return data, False


def _etcd_status(data: bytes, where: str) -> SnapshotStatus:
    body, _ = _etcd_body(data, where)
    try:
        found = etcd_snapshot.status(body, where)
    except EtcdSnapshotError as error:
        raise SnapshotError(str(error)) from error
    return SnapshotStatus(
        hash=found.hash,
        revision=found.revision,
        total_keys=found.total_keys,
        total_size=found.total_size,
        consistent_index=found.consistent_index,
    )


def status(path: str | os.PathLike[str]) -> SnapshotStatus:
    where = str(path)
    data = _read(path)
    if etcd_snapshot.is_etcd_snapshot(data):
        return _etcd_status(data, where)
    body = split_digest(data, where)
    try:
        meta = check_snapshot(body)
    except BackendError as error:
        raise SnapshotError(f"{where}: {error}") from error
    with tempfile.TemporaryDirectory(prefix="etcdspec-status-") as tmp:
        copy = Path(tmp) / "db"
        copy.write_bytes(body)
        backend = Backend(copy)
        try:
            digest = backend.hash()
        finally:
            backend.close()
        conn = sqlite3.connect(copy)
        try:
            total_keys = int(conn.execute("SELECT COUNT(*) FROM kv").fetchone()[0])
        finally:
            conn.close()
    return SnapshotStatus(
        hash=digest,
        revision=int(meta.get("current_revision", 0)),
        total_keys=total_keys,
        total_size=len(body),
        consistent_index=int(meta.get("consistent_index", 0)),
    )


def restore(
    path: str | os.PathLike[str],
    data_dir: str | os.PathLike[str],
    skip_hash_check: bool = False,
) -> Path:
    """Write a new member data directory from a snapshot; return the database path."""
    where = str(path)
    target = Path(data_dir)
    if target.exists() and any(target.iterdir()):
        raise SnapshotError(
            f"--data-dir {target} exists and is not empty; restore into a new directory"
        )
    data = _read(path)
    if etcd_snapshot.is_etcd_snapshot(data):
        return _restore_etcd(data, where, target, skip_hash_check)
    body = split_digest(data, where)
    try:
        check_snapshot(body)
    except BackendError as error:
        raise SnapshotError(f"{where}: {error}") from error
    db_path = target / "member" / "snap" / "db"
    db_path.parent.mkdir(parents=True, exist_ok=True)
    db_path.write_bytes(body)
    backend = Backend(db_path)
    try:
        with backend.transaction():
            backend.set_applied(0, 0)
    finally:
        backend.close()
    with open(db_path, "rb") as handle:
        os.fsync(handle.fileno())
    return db_path


def _restore_etcd(data: bytes, where: str, target: Path, skip_hash_check: bool) -> Path:
    body, had_digest = _etcd_body(data, where)
    if not had_digest and not skip_hash_check:
        raise SnapshotError(
            f"{where}: an etcd database without the SHA-256 a saved snapshot ends with "
            "(a member's member/snap/db?); its integrity cannot be checked — restore it "
            "with --skip-hash-check if that is what you mean, as with etcdutl"
        )
    try:
        store = etcd_snapshot.read_store(body, where)
    except EtcdSnapshotError as error:
        raise SnapshotError(str(error)) from error
    db_path = target / "member" / "snap" / "db"
    db_path.parent.mkdir(parents=True, exist_ok=True)
    backend = Backend(db_path)
    try:
        load_etcd_store(backend, store)
    finally:
        backend.close()
    with open(db_path, "rb") as handle:
        os.fsync(handle.fileno())
    return db_path


def load_etcd_store(backend: Backend, store: EtcdStore) -> None:
    """Fill an empty backend with an etcd snapshot's revisions, leases, compaction and
    auth store (applied index 0: the start of a new cluster's log)."""
    with backend.transaction():
        for rev in store.revisions:
            kv = rev.kv
            backend.insert_revision(
                KeyRevision(
                    main=rev.main,
                    sub=rev.sub,
                    key=kv.key,
                    value=b"" if rev.tombstone else kv.value,
                    create_revision=0 if rev.tombstone else kv.create_revision,
                    mod_revision=rev.main if rev.tombstone else kv.mod_revision,
                    version=0 if rev.tombstone else kv.version,
                    lease=0 if rev.tombstone else kv.lease,
                    tombstone=rev.tombstone,
                )
            )
        for lease in store.leases:
            backend.put_lease(lease.lease_id, lease.ttl)
        for name, record in store.users:
            backend.put_auth_record("user", name, record)
        for name, record in store.roles:
            backend.put_auth_record("role", name, record)
        backend.set_auth_state(store.auth_enabled, max(store.auth_revision, 1))
        backend.set_current_revision(store.revision)
        if 0 < store.compact_revision <= store.revision:
            backend.compact(store.compact_revision)
        backend.set_applied(0, 0)

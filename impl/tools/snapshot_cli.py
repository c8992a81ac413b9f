"""Backup and restore, as etcdctl/etcdutl do them: save, status, restore.

File format: what Maintenance.Snapshot streams — the member's SQLite database followed
by the SHA-256 of the database (32 bytes), as etcd appends a SHA-256 to its bbolt file.
`save` writes the stream to FILE.part, checks the digest, fsyncs and renames, so FILE is
either complete and verified or absent. `status` checks the digest and the database and
reports etcdutl's figures (hash, revision, total keys, total size). `restore` writes a
fresh data directory for a member of a NEW cluster: the database, with its applied Raft
index reset to 0 (the new cluster's log starts empty, and every restored member starts
from the same data); it refuses to write into an existing data directory.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

import grpc

from etcdspec.impl.kv.backend import Backend, BackendError, check_snapshot
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

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
        return f"{self.hash:x}, {self.revision}, {self.total_keys}, {self.total_size}"

    def to_json(self) -> dict[str, int]:
        return {
            "hash": self.hash,
            "revision": self.revision,
            "totalKey": self.total_keys,
            "totalSize": self.total_size,
        }


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


def status(path: str | os.PathLike[str]) -> SnapshotStatus:
    where = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise SnapshotError(f"{where}: cannot read ({error.strerror})") from error
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


def restore(path: str | os.PathLike[str], data_dir: str | os.PathLike[str]) -> Path:
    """Write a new member data directory from a snapshot; return the database path."""
    where = str(path)
    target = Path(data_dir)
    if target.exists() and any(target.iterdir()):
        raise SnapshotError(
            f"--data-dir {target} exists and is not empty; restore into a new directory"
        )
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise SnapshotError(f"{where}: cannot read ({error.strerror})") from error
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

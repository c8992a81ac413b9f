"""etcd's own snapshot files (a bbolt database, optionally followed by its SHA-256), read.

What `etcdctl snapshot save` writes, and what a member's `member/snap/db` is. Contract:
- `is_etcd_snapshot(data)`: the file starts with a bbolt meta page.
- `status(body, where)`: what `etcdutl snapshot status` reports — the CRC-32C over every
  bucket's name and then its keys and values, in bucket and key order; the revision of
  the last entry of the `key` bucket; the number of entries of all buckets; the size
  bbolt reports (pages in use x page size) — after `bbolt check`'s consistency check.
- `read_store(body, where)`: the parts of etcd's schema a member needs to serve the
  same data: the key revisions (`key` bucket, etcd_format's encoding), leases (`lease`
  bucket: id -> leasepb.Lease{ID=1, TTL=2}), and the `meta` bucket's consistent index,
  term and compaction revisions (scheduledCompactRev, finishedCompactRev), and the auth
  store (`auth` bucket's authEnabled and authRevision; `authUsers`, `authRoles`:
  name -> marshaled authpb.User / Role, kept as they are).
Everything here is a pure function of the bytes; errors are `EtcdSnapshotError` naming
the file and what was wrong (and, from the bbolt reader, the page and offset).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import google_crc32c

from etcdspec.impl.kv.etcd_format import (
    KEY_BUCKET,
    BucketRevision,
    EtcdFormatError,
    decode_bucket_entry,
)
from etcdspec.impl.tools.bbolt import MAGIC, PAGE_HEADER, BoltError, BoltFile

LEASE_BUCKET = b"lease"
META_BUCKET = b"meta"
AUTH_BUCKET, USERS_BUCKET, ROLES_BUCKET = b"auth", b"authUsers", b"authRoles"


class EtcdSnapshotError(ValueError):
    """An etcd snapshot that cannot be read; the message says where and what."""


def is_etcd_snapshot(data: bytes) -> bool:
    """Whether `data` starts as a bbolt file (page 0 is a meta page with bbolt's magic)."""
    return len(data) >= PAGE_HEADER + 4 and (
        struct.unpack_from("<I", data, PAGE_HEADER)[0] == MAGIC
    )


@dataclass(frozen=True)
class EtcdStatus:
    """etcdutl snapshot status's four figures."""

    hash: int
    revision: int
    total_keys: int
    total_size: int
    consistent_index: int


@dataclass(frozen=True)
class EtcdLease:
    lease_id: int
    ttl: int


@dataclass(frozen=True)
class EtcdStore:
    """What a member restores from an etcd snapshot."""

    revisions: list[BucketRevision]
    leases: list[EtcdLease]
    consistent_index: int
    term: int
    compact_revision: int  # the newer of the scheduled and finished compactions (0: none)
    auth_enabled: bool = False
    auth_revision: int = 0
    users: list[tuple[bytes, bytes]] = field(default_factory=list)  # name, authpb.User
    roles: list[tuple[bytes, bytes]] = field(default_factory=list)  # name, authpb.Role

    @property
    def revision(self) -> int:
        """The store's revision: its last key revision's, or the compact revision if
        that is later (etcd's restore does the same), or 1 for an empty store."""
        last = self.revisions[-1].main if self.revisions else 1
        return max(last, self.compact_revision)

    def describe(self) -> str:
        return (
            f"{len(self.revisions)} key revisions up to {self.revision}, compacted at "
            f"{self.compact_revision}, {len(self.leases)} leases, consistent index "
            f"{self.consistent_index}, {len(self.users)} users, {len(self.roles)} roles, "
            f"auth {'enabled' if self.auth_enabled else 'disabled'}"
        )


def _open(body: bytes, where: str) -> BoltFile:
    try:
        bolt = BoltFile(body, where)
        problems = bolt.check()
    except BoltError as error:
        raise EtcdSnapshotError(str(error)) from error
    if problems:
        shown = "; ".join(problems[:5])
        raise EtcdSnapshotError(f"{where}: integrity check failed, {len(problems)} errors: {shown}")
    return bolt


def status(body: bytes, where: str) -> EtcdStatus:
    bolt = _open(body, where)
    crc = 0
    total = 0
    revision = 0
    consistent_index = 0
    try:
        for name in bolt.buckets():
            crc = google_crc32c.extend(crc, name)
            for entry in bolt.bucket(name):
                crc = google_crc32c.extend(crc, entry.key)
                crc = google_crc32c.extend(crc, entry.value or b"")
                if name == KEY_BUCKET:
                    if len(entry.key) < 8:
                        raise EtcdSnapshotError(
                            f"{where}: key bucket entry {entry.key.hex()} is not a revision"
                        )
                    revision = struct.unpack_from(">q", entry.key)[0]
                if name == META_BUCKET and entry.key == b"consistent_index":
                    consistent_index = _meta_number(
                        {entry.key: entry.value or b""}, entry.key, where
                    )
                total += 1
    except BoltError as error:
        raise EtcdSnapshotError(str(error)) from error
    return EtcdStatus(crc, revision, total, bolt.size, consistent_index)


def _varint_fields(data: bytes, where: str) -> dict[int, int]:
    """The varint fields of a protobuf message (leasepb.Lease has only those)."""
    fields: dict[int, int] = {}
    i = 0
    while i < len(data):
        tag, i = _varint(data, i, where)
        if tag & 7 != 0:
            raise EtcdSnapshotError(f"{where}: field {tag >> 3} is not a varint")
        value, i = _varint(data, i, where)
        fields[tag >> 3] = value
    return fields


def _varint(data: bytes, i: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise EtcdSnapshotError(f"{where}: truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _meta_number(meta: dict[bytes, bytes], name: bytes, where: str) -> int:
    raw = meta.get(name)
    if raw is None:
        return 0
    if len(raw) < 8:
        raise EtcdSnapshotError(f"{where}: meta {name.decode()} has {len(raw)} bytes, not 8")
    return int(struct.unpack_from(">Q", raw)[0])


def read_store(body: bytes, where: str) -> EtcdStore:
    bolt = _open(body, where)
    try:
        names = bolt.buckets()
        if KEY_BUCKET not in names or META_BUCKET not in names:
            raise EtcdSnapshotError(
                f"{where}: a bbolt file without etcd's 'key' and 'meta' buckets "
                f"(it has {', '.join(n.decode(errors='replace') for n in names) or 'none'})"
            )
        revisions = [decode_bucket_entry(e.key, e.value or b"") for e in bolt.bucket(KEY_BUCKET)]
        meta = {e.key: e.value or b"" for e in bolt.bucket(META_BUCKET)}
        leases = []
        if LEASE_BUCKET in names:
            for entry in bolt.bucket(LEASE_BUCKET):
                fields = _varint_fields(entry.value or b"", f"{where}: lease {entry.key.hex()}")
                leases.append(EtcdLease(_signed(fields.get(1, 0)), _signed(fields.get(2, 0))))
        auth = (
            {e.key: e.value or b"" for e in bolt.bucket(AUTH_BUCKET)}
            if AUTH_BUCKET in names
            else {}
        )
        users = (
            [(e.key, e.value or b"") for e in bolt.bucket(USERS_BUCKET)]
            if USERS_BUCKET in names
            else []
        )
        roles = (
            [(e.key, e.value or b"") for e in bolt.bucket(ROLES_BUCKET)]
            if ROLES_BUCKET in names
            else []
        )
    except (BoltError, EtcdFormatError) as error:
        text = str(error) if str(error).startswith(where) else f"{where}: {error}"
        raise EtcdSnapshotError(text) from error
    compacted = max(
        _meta_number(meta, b"scheduledCompactRev", where),
        _meta_number(meta, b"finishedCompactRev", where),
    )
    return EtcdStore(
        revisions=revisions,
        leases=leases,
        consistent_index=_meta_number(meta, b"consistent_index", where),
        term=_meta_number(meta, b"term", where),
        compact_revision=compacted,
        auth_enabled=auth.get(b"authEnabled", b"") == b"\x01",
        auth_revision=_meta_number(auth, b"authRevision", where),
        users=users,
        roles=roles,
    )

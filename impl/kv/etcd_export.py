"""Our backend's committed state as etcd 3.5's backend database (bbolt), for snapshots.

`etcd_database(backend)` reads a backend (a copy, not the member's live one) and returns
the bytes of a bbolt file laid out in etcd 3.5's schema, so that `etcdctl snapshot
status` and etcd's restore read it, and a member of ours or of etcd restored from it
serves the same keys, revisions and leases:
- `key`: every kept key revision, etcd_format's encoding; tombstones at or below the
  compact revision are left out, as etcd's compaction drops them;
- `meta`: consistent_index and term (8 bytes big-endian), and when compacted
  scheduledCompactRev and finishedCompactRev (the compact revision as a revision key);
- `lease`: lease id (8 bytes big-endian) -> leasepb.Lease{ID, TTL};
- `cluster`: clusterVersion;
- `auth`: authRevision (8 bytes big-endian, at least 1, as etcd's store starts) and,
  when auth is enabled, authEnabled (one byte, 1; etcd reads a missing key as disabled,
  and a fresh etcd has none); `authUsers` and `authRoles`: name -> authpb.User / Role,
  the records our auth store keeps already marshaled (bcrypt hashes included);
- `members`: member id (lowercase hex, etcd's types.ID) -> the member as etcd 3.5.1's
  backend holds it, JSON in its field order with its omitempty fields: id, peerURLs,
  isLearner (when a learner), name (set at bootstrap; an added member has none; never
  clientURLs, which etcd 3.5.1 publishes through its v2 store only);
  `members_removed`: id -> "removed";
- etcd's empty bucket alarm.
A restore (etcdutl's, or ours) trims the members and makes a new cluster from its flags,
as etcd's does; the members are in the file so that it holds what an etcd snapshot holds.
"""

from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path
from typing import Any

from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.bbolt_writer import write_bbolt
from etcdspec.impl.kv.etcd_format import key_value_bytes, revision_key
from etcdspec.impl.kv.members import MemberRecord, MemberTable

CLUSTER_VERSION = b"3.5.0"
EMPTY_BUCKETS = (b"alarm",)
AUTH_ENABLED = b"\x01"  # etcd's authEnabled value when enabled


def _u64(value: int) -> bytes:
    return struct.pack(">Q", value & 0xFFFFFFFFFFFFFFFF)


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def lease_bytes(lease_id: int, ttl: int) -> bytes:
    """leasepb.Lease{ID: lease_id, TTL: ttl} marshaled (zero fields left out)."""
    out = b""
    if lease_id:
        out += b"\x08" + _varint(lease_id)
    if ttl:
        out += b"\x10" + _varint(ttl)
    return out


def member_json(record: MemberRecord) -> bytes:
    """One member as etcd 3.5.1's members bucket holds it (membership.Member marshaled)."""
    fields: dict[str, Any] = {"id": record.member_id, "peerURLs": list(record.peer_urls)}
    if record.listed_learner:
        fields["isLearner"] = True
    # etcd 3.5.1 publishes a member's attributes through its v2 store only: the bucket
    # keeps the name of bootstrap and never client URLs.
    if record.initial_name:
        fields["name"] = record.initial_name
    return json.dumps(fields, separators=(",", ":")).encode()


def member_buckets(
    backend: Backend,
) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """(members, members_removed) entries, sorted by key."""
    members, removed = MemberTable(backend).all()
    current = sorted((f"{i:x}".encode(), member_json(r)) for i, r in members.items())
    gone = sorted((f"{i:x}".encode(), b"removed") for i in removed)
    return current, gone


def etcd_buckets(backend: Backend) -> dict[bytes, list[tuple[bytes, bytes]]]:
    compacted = backend.compact_revision()
    keys = [
        (
            revision_key(row.main, row.sub, row.tombstone),
            key_value_bytes(
                row.key,
                row.value,
                row.create_revision,
                row.mod_revision,
                row.version,
                row.lease,
                row.tombstone,
            ),
        )
        for row in backend.rows_up_to(backend.current_revision())
        if not (row.tombstone and row.main <= compacted)
    ]
    meta = [
        (b"consistent_index", _u64(backend.consistent_index())),
        (b"term", _u64(backend.applied_term())),
    ]
    if compacted > 0:
        meta += [
            (b"finishedCompactRev", revision_key(compacted, 0)),
            (b"scheduledCompactRev", revision_key(compacted, 0)),
        ]
    leases = sorted(
        (_u64(lease_id), lease_bytes(lease_id, ttl)) for lease_id, ttl in backend.leases()
    )
    buckets: dict[bytes, list[tuple[bytes, bytes]]] = {name: [] for name in EMPTY_BUCKETS}
    buckets[b"key"] = keys
    buckets[b"members"], buckets[b"members_removed"] = member_buckets(backend)
    buckets[b"meta"] = sorted(meta)
    buckets[b"lease"] = leases
    buckets[b"cluster"] = [(b"clusterVersion", CLUSTER_VERSION)]
    enabled, auth_revision = backend.auth_state()
    buckets[b"auth"] = [(b"authEnabled", AUTH_ENABLED)] if enabled else []
    buckets[b"auth"].append((b"authRevision", _u64(max(auth_revision, 1))))
    buckets[b"authUsers"] = backend.auth_records("user")
    buckets[b"authRoles"] = backend.auth_records("role")
    return buckets


def etcd_database(backend: Backend) -> bytes:
    """The backend's committed state as an etcd 3.5 bbolt database file."""
    return write_bbolt(etcd_buckets(backend))


def etcd_database_from_copy(data: bytes) -> bytes:
    """`etcd_database` of a copy of our database file (`Backend.copy_committed().data`),
    opened in a scratch directory. Any thread."""
    with tempfile.TemporaryDirectory(prefix="etcdspec-export-") as tmp:
        path = Path(tmp) / "copy.db"
        path.write_bytes(data)
        backend = Backend(path, durable=False)
        try:
            return etcd_database(backend)
        finally:
            backend.close()

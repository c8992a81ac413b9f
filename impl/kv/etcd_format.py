"""etcd 3.5's encoding of key revisions in its `key` bucket, and HashKV over it.

etcd keeps every key revision in the bbolt bucket `key`: the bucket key is the
revision — main as 8 bytes big-endian, the byte `_`, sub as 8 bytes big-endian — with
a `t` appended for a tombstone; the value is the marshaled mvccpb.KeyValue (a tombstone's
holds the key alone). Byte order of these keys is revision order.

HashKV at revision R hashes, with CRC-32C (Castagnoli), the bucket's name and then the
key and value bytes of every bucket entry up to R in bucket order, leaving out the
entries at or below the compact revision that a compaction at R would not keep (while
any key would be kept). `hash_kv_rows` takes the rows as our backend holds them and
gives the same number; both the hash and the bucket encoding are pure functions of the
rows, with no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import google_crc32c
from google.protobuf.message import DecodeError

from etcdspec.impl.pb import kv_pb2

KEY_BUCKET = b"key"
REVISION_BYTES = 17  # main (8) + "_" + sub (8); a tombstone's key has one more byte
_REVISION = struct.Struct(">q")


class EtcdFormatError(ValueError):
    """A `key` bucket entry that is not etcd's encoding (says which and why)."""


@dataclass(frozen=True)
class BucketRevision:
    """One entry of etcd's `key` bucket, decoded."""

    main: int
    sub: int
    tombstone: bool
    kv: kv_pb2.KeyValue

    def describe(self) -> str:
        mark = " tombstone" if self.tombstone else ""
        return f"{self.main}_{self.sub}{mark} {self.kv.key!r}"


def revision_key(main: int, sub: int, tombstone: bool = False) -> bytes:
    """The `key` bucket key of revision (main, sub)."""
    return _REVISION.pack(main) + b"_" + _REVISION.pack(sub) + (b"t" if tombstone else b"")


def key_value_bytes(
    key: bytes,
    value: bytes,
    create_revision: int,
    mod_revision: int,
    version: int,
    lease: int,
    tombstone: bool,
) -> bytes:
    """The `key` bucket value: mvccpb.KeyValue marshaled (a tombstone's has the key only)."""
    if tombstone:
        return kv_pb2.KeyValue(key=key).SerializeToString()
    return kv_pb2.KeyValue(
        key=key,
        value=value,
        create_revision=create_revision,
        mod_revision=mod_revision,
        version=version,
        lease=lease,
    ).SerializeToString()


def decode_bucket_entry(key: bytes, value: bytes) -> BucketRevision:
    """A `key` bucket entry read back; EtcdFormatError if it is not etcd's encoding."""
    if len(key) not in (REVISION_BYTES, REVISION_BYTES + 1) or key[8:9] != b"_":
        raise EtcdFormatError(
            f"key bucket entry {key.hex()} is not a revision (8 bytes, '_', 8 bytes[, 't'])"
        )
    tombstone = len(key) == REVISION_BYTES + 1
    if tombstone and key[-1:] != b"t":
        raise EtcdFormatError(f"key bucket entry {key.hex()} has a mark other than 't'")
    kv = kv_pb2.KeyValue()
    try:
        kv.ParseFromString(value)
    except DecodeError as error:
        raise EtcdFormatError(
            f"key bucket entry {key.hex()}: value is not an mvccpb.KeyValue ({error})"
        ) from error
    main = _REVISION.unpack_from(key, 0)[0]
    sub = _REVISION.unpack_from(key, 9)[0]
    return BucketRevision(main, sub, tombstone, kv)


HashRow = tuple[int, int, bytes, bytes, int, int, int, int, int]
"""(main, sub, key, value, create_revision, mod_revision, version, lease, tombstone),
in revision order, as the backend's kv table holds them."""


def hash_kv_rows(rows: Iterable[HashRow]) -> int:
    """CRC-32C of the bucket name, then each row's bucket key and value bytes."""
    crc = google_crc32c.value(KEY_BUCKET)
    pack = _REVISION.pack
    for main, sub, key, value, create, mod, version, lease, tombstone in rows:
        crc = google_crc32c.extend(
            crc,
            pack(main)
            + b"_"
            + pack(sub)
            + (b"t" if tombstone else b"")
            + key_value_bytes(key, value, create, mod, version, lease, bool(tombstone)),
        )
    return crc

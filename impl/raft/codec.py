"""Bytes encoding of Raft messages, entries, hard state and snapshots (format version 2).

Used by the peer transport (one encoded message per frame) and by the WAL (entries and
hard state inside records). All integers are big-endian and unsigned; no pickle.

    message   = version:u8 (=2; 1 is read too) type:u8 to:u64 from:u64 term:u64
                log_term:u64 index:u64 commit:u64 reject:u8 reject_hint:u64
                context:bytes32 n_entries:u32 entry* has_snapshot:u8 [snapshot]
    entry     = term:u64 index:u64 length:u32 [type:u8] data
                (the length's top bit, TYPED, says a type byte follows: an entry that is
                not NORMAL; a NORMAL entry is written as in format 1)
    hardstate = term:u64 vote:u64 commit:u64
    meta      = index:u64 term:u64 n_voters:u16 voter:u64* [n_learners:u16 learner:u64*]
                (n_voters' top bit, LEARNERS, says the learners follow; written only
                when there are learners, so a meta without them is as in format 1)
    snapshot  = meta data:bytes64
    bytesN    = length:uN then that many bytes

Format 2 added entry types (configuration changes) and learners, as flags in fields whose
top bit format 1 never set: everything written in format 1 (WAL records, snapshot files,
messages) decodes unchanged, and the WAL and snapshot files need no conversion.

Decoding checks everything (version, message type, lengths, trailing bytes) and raises
CodecError naming the field and the byte offset. Messages are decoded by one fast pass
over the bytes (`_decode_plain`: offsets and `unpack_from`, no reader object, for the
peer transport's hot path); anything it does not take as valid (a snapshot, bad or
truncated input) goes through the checked reader, which gives the same message or the
error.
"""

from __future__ import annotations

import struct

from etcdspec.impl.raft.messages import (
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
)

VERSION = 2
READABLE_VERSIONS = (1, 2)
TYPED = 1 << 31  # in an entry's length: a type byte follows
LEARNERS = 1 << 15  # in a meta's voter count: a learner list follows the voters
_ENTRY_TYPES = {int(t): t for t in EntryType}

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_HEAD = struct.Struct(">BBQQQQQQBQ")
_ENTRY_HEAD = struct.Struct(">QQI")
_HARD = struct.Struct(">QQQ")
_META_HEAD = struct.Struct(">QQH")
_HEAD_CONTEXT = struct.Struct(">BBQQQQQQBQI")  # _HEAD, then the context length
_NO_ENTRIES_NO_SNAPSHOT = _U32.pack(0) + _U8.pack(0)
_MESSAGE_TYPES = {int(t): t for t in MessageType}


class CodecError(ValueError):
    """Bytes that are not a valid encoding; says which field and at which offset."""


class Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int, field: str) -> bytes:
        if self.pos + n > len(self.data):
            raise CodecError(
                f"{self.what}: {field} needs {n} bytes at offset {self.pos},"
                f" only {len(self.data) - self.pos} left (truncated input?)"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: struct.Struct, field: str) -> tuple[int, ...]:
        return fmt.unpack(self.take(fmt.size, field))

    def u8(self, field: str) -> int:
        return self.unpack(_U8, field)[0]

    def u16(self, field: str) -> int:
        return self.unpack(_U16, field)[0]

    def u32(self, field: str) -> int:
        return self.unpack(_U32, field)[0]

    def u64(self, field: str) -> int:
        return self.unpack(_U64, field)[0]

    def done(self) -> None:
        if self.pos != len(self.data):
            raise CodecError(
                f"{self.what}: {len(self.data) - self.pos} trailing bytes at offset {self.pos}"
            )


# --- entries and hard state ----------------------------------------------------------------
def encode_entry(entry: Entry) -> bytes:
    if entry.type is EntryType.NORMAL:
        return _ENTRY_HEAD.pack(entry.term, entry.index, len(entry.data)) + entry.data
    if len(entry.data) >= TYPED:
        raise ValueError(f"entry {entry.index}: {len(entry.data)} bytes is too large to encode")
    head = _ENTRY_HEAD.pack(entry.term, entry.index, len(entry.data) | TYPED)
    return head + _U8.pack(int(entry.type)) + entry.data


def read_entry(reader: Reader) -> Entry:
    term, index, length = reader.unpack(_ENTRY_HEAD, "entry header")
    if not length & TYPED:
        return Entry(term, index, reader.take(length, f"data of entry {index}"))
    code = reader.u8(f"type of entry {index}")
    entry_type = _ENTRY_TYPES.get(code)
    if entry_type is None:
        raise CodecError(f"{reader.what}: entry {index} has unknown type {code}")
    data = reader.take(length & ~TYPED, f"data of entry {index}")
    return Entry(term, index, data, entry_type)


def encode_hard_state(hs: HardState) -> bytes:
    return _HARD.pack(hs.term, hs.vote, hs.commit)


def read_hard_state(reader: Reader) -> HardState:
    term, vote, commit = reader.unpack(_HARD, "hard state")
    return HardState(term, vote, commit)


def encode_snapshot_meta(meta: SnapshotMeta) -> bytes:
    if len(meta.voters) >= LEARNERS or len(meta.learners) >= LEARNERS:
        raise ValueError(f"{meta.describe()}: too many members to encode")
    count = len(meta.voters) | (LEARNERS if meta.learners else 0)
    parts = [_META_HEAD.pack(meta.index, meta.term, count)]
    parts.extend(_U64.pack(v) for v in meta.voters)
    if meta.learners:
        parts.append(_U16.pack(len(meta.learners)))
        parts.extend(_U64.pack(v) for v in meta.learners)
    return b"".join(parts)


def read_snapshot_meta(reader: Reader) -> SnapshotMeta:
    index, term, count = reader.unpack(_META_HEAD, "snapshot metadata")
    voters = tuple(reader.u64("voter id") for _ in range(count & ~LEARNERS))
    learners: tuple[int, ...] = ()
    if count & LEARNERS:
        learners = tuple(reader.u64("learner id") for _ in range(reader.u16("learner count")))
    return SnapshotMeta(index, term, voters, learners)


def encode_snapshot(snapshot: Snapshot) -> bytes:
    return encode_snapshot_head(snapshot) + snapshot.data


def encode_snapshot_head(snapshot: Snapshot) -> bytes:
    """What precedes a snapshot's data in its encoding: the metadata and the data's length
    (a writer of large snapshots sends this, then the data itself, uncopied)."""
    return encode_snapshot_meta(snapshot.meta) + _U64.pack(len(snapshot.data))


def read_snapshot(reader: Reader) -> Snapshot:
    meta = read_snapshot_meta(reader)
    length = reader.u64("snapshot data length")
    return Snapshot(meta, reader.take(length, "snapshot data"))


# --- messages ------------------------------------------------------------------------------
def encode_message(m: Message) -> bytes:
    head = _HEAD_CONTEXT.pack(
        VERSION,
        int(m.type),
        m.to,
        m.from_,
        m.term,
        m.log_term,
        m.index,
        m.commit,
        1 if m.reject else 0,
        m.reject_hint,
        len(m.context),
    )
    if not m.entries and m.snapshot is None:
        return head + m.context + _NO_ENTRIES_NO_SNAPSHOT
    parts = [head, m.context, _U32.pack(len(m.entries))]
    pack_entry = _ENTRY_HEAD.pack
    for e in m.entries:
        if e.type is EntryType.NORMAL:
            parts.append(pack_entry(e.term, e.index, len(e.data)))
            parts.append(e.data)
        else:
            parts.append(encode_entry(e))
    if m.snapshot is None:
        parts.append(_U8.pack(0))
    else:
        parts.append(_U8.pack(1))
        parts.append(encode_snapshot(m.snapshot))
    return b"".join(parts)


def decode_message(data: bytes) -> Message:
    try:
        message = _decode_plain(data)
    except (struct.error, IndexError):
        message = None
    return message if message is not None else _decode_checked(data)


def _decode_plain(data: bytes) -> Message | None:
    """A valid message without a snapshot, in one pass; None (or struct.error or
    IndexError) for anything else, which `_decode_checked` then judges."""
    (version, type_code, to, from_, term, log_term, index, commit, reject, hint, length) = (
        _HEAD_CONTEXT.unpack_from(data, 0)
    )
    message_type = _MESSAGE_TYPES.get(type_code)
    if version not in READABLE_VERSIONS or message_type is None or reject > 1:
        return None
    size = len(data)
    pos = _HEAD_CONTEXT.size + length
    if pos > size:
        return None
    context = data[_HEAD_CONTEXT.size : pos]
    (count,) = _U32.unpack_from(data, pos)
    pos += _U32.size
    entries: list[Entry] = []
    unpack_entry = _ENTRY_HEAD.unpack_from
    for _ in range(count):
        entry_term, entry_index, length = unpack_entry(data, pos)
        pos += _ENTRY_HEAD.size
        end = pos + length
        if end > size:
            return None  # truncated, or a typed entry (its length has the TYPED bit)
        entries.append(Entry(entry_term, entry_index, data[pos:end]))
        pos = end
    if pos + 1 != size or data[pos] != 0:
        return None  # a snapshot follows, or a bad flag, or trailing bytes
    return Message(
        type=message_type,
        to=to,
        from_=from_,
        term=term,
        log_term=log_term,
        index=index,
        entries=tuple(entries),
        commit=commit,
        reject=reject == 1,
        reject_hint=hint,
        snapshot=None,
        context=context,
    )


def _decode_checked(data: bytes) -> Message:
    """Decode with every field checked; CodecError names the first bad one."""
    reader = Reader(data, "raft message")
    version = reader.u8("version")
    if version not in READABLE_VERSIONS:
        raise CodecError(
            f"raft message: format version {version}, this build reads"
            f" {' and '.join(map(str, READABLE_VERSIONS))}"
        )
    reader.pos = 0
    (_, type_code, to, from_, term, log_term, index, commit, reject, hint) = reader.unpack(
        _HEAD, "message header"
    )
    try:
        message_type = MessageType(type_code)
    except ValueError:
        raise CodecError(f"raft message: unknown message type {type_code} at offset 1") from None
    if reject not in (0, 1):
        raise CodecError(f"raft message: reject flag {reject} is neither 0 nor 1")
    context = reader.take(reader.u32("context length"), "context")
    entries = tuple(read_entry(reader) for _ in range(reader.u32("entry count")))
    has_snapshot = reader.u8("snapshot flag")
    if has_snapshot not in (0, 1):
        raise CodecError(f"raft message: snapshot flag {has_snapshot} is neither 0 nor 1")
    snapshot = read_snapshot(reader) if has_snapshot else None
    reader.done()
    return Message(
        type=message_type,
        to=to,
        from_=from_,
        term=term,
        log_term=log_term,
        index=index,
        entries=entries,
        commit=commit,
        reject=bool(reject),
        reject_hint=hint,
        snapshot=snapshot,
        context=context,
    )

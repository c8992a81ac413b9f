"""The write-ahead log: Raft's durable state as a sequence of checksummed records.

Directory layout: segment files `<seq:016x>-<first_index:016x>.wal`, seq counting up
from 0 without gaps; `first_index` is the index the next appended entry had when the
segment was started. A new segment is started when the current one reaches
`segment_bytes` (64 MiB by default); records are never split across segments.

The last segment's space is allocated ahead of its records (PREALLOCATE_BYTES at a
time, at most to `segment_bytes`; etcd preallocates its segments too), so that it ends
in zeros: a record is written in place, and its fdatasync then rarely has a new file
size to commit to the filesystem's journal (measured in docs/benchmarks.md). Replay ends
at an all-zero header that only zeros follow. A segment is cut back to its records when
the next one is started, so only the last one ends in zeros.

Record framing (all big-endian):
    header  = payload_length:u32 type:u8 payload_crc32:u32 header_crc32:u32
    payload = payload_length bytes
where header_crc32 covers the first 9 header bytes (so a damaged length is detected)
and payload_crc32 covers the payload (CRC-32, zlib). Record types:
    SEGMENT (1)  first record of every segment: magic, format version, seq, first_index,
                 the hard state and latest snapshot metadata at the segment's start
                 (so older segments can be released without losing them).
    BATCH (2)    one Ready's durable part: optional received snapshot metadata,
                 optional truncate_from (a conflicting suffix dropped: entries with
                 index >= truncate_from), entries, optional hard state. One record, so
                 hard state and entries are persisted atomically, and one fsync.
    SNAPSHOT (3) a local snapshot was taken at (index, term): replay may start there.

Contract: `save(...)`/`save_ready(ready)` return only after the record is written and
the injected `fsync` returned (group commit: one fsync per Ready); only then may the
Ready's messages be sent. `save` is `prepare_save` (check and encode the batch: CPU
only) then `write_batch` (write, fsync, and only then take it as the WAL's state): a
server encodes on its event loop and hands only the write and fsync to a worker thread.
One batch is prepared and written at a time. `Wal.open` replays everything: a torn final
record of the last segment (the file ends inside it, or it is damaged and no intact
record follows it: only zeros, or the rest of a torn write) is truncated away and
reported as a warning naming the file and offset; a damaged record anywhere else raises
WalCorruption naming the file and offset, and the server must not start. Nothing
acknowledged (fsynced) is dropped silently.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from etcdspec.impl.failpoints import on
from etcdspec.impl.raft.codec import (
    CodecError,
    Reader,
    encode_entry,
    encode_hard_state,
    encode_snapshot_meta,
    read_entry,
    read_hard_state,
    read_snapshot_meta,
)
from etcdspec.impl.raft.driver import Ready
from etcdspec.impl.raft.messages import Entry, HardState, SnapshotMeta

log = logging.getLogger("etcdspec.impl.storage.wal")

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
PREALLOCATE_BYTES = 4 * 1024 * 1024
FORMAT_VERSION = 1
MAGIC = b"ESWAL"

REC_SEGMENT = 1
REC_BATCH = 2
REC_SNAPSHOT = 3

_HEADER = struct.Struct(">IBII")
_HEADER_BODY = struct.Struct(">IBI")
_SEGMENT_HEAD = struct.Struct(">5sBQQ")
_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{16})\.wal$")

_F_SNAPSHOT = 1
_F_TRUNCATE = 2
_F_HARD_STATE = 4

Fsync = Callable[[int], None]


@dataclass(frozen=True)
class PendingBatch:
    """A BATCH record that `Wal.prepare_save` encoded and `Wal.write_batch` writes."""

    record: bytes
    last_index: int
    hard_state: HardState | None
    snapshot: SnapshotMeta | None

    def describe(self) -> str:
        return f"batch of {len(self.record)} bytes up to index {self.last_index}"


class WalError(Exception):
    """The WAL cannot be opened or written as asked (says what and what to do)."""


class WalCorruption(WalError):
    """A damaged record that is not a torn tail: refusing to start."""

    def __init__(self, path: Path, offset: int, problem: str) -> None:
        self.path = path
        self.offset = offset
        super().__init__(
            f"{path}: corrupt WAL record at offset {offset}: {problem}. Refusing to start:"
            " restore this member from a snapshot or remove it and re-add it to the cluster"
        )


class WalSyncFailed(WalError):
    """fsync of a WAL segment failed: its records may not be on the disk, and the kernel
    may have dropped them already, so nothing written since the last good fsync may be
    acknowledged; the member must stop (as etcd does)."""

    def __init__(self, path: Path, error: OSError) -> None:
        self.path = path
        super().__init__(
            f"{path}: fsync of the WAL failed ({error.strerror or error}): records written "
            "since the last fsync may be lost, so the member stops rather than acknowledge "
            "them; restart it once the disk is healthy"
        )


@dataclass(frozen=True)
class WalState:
    """What replay recovered: the state to restart Raft from."""

    hard_state: HardState
    snapshot: SnapshotMeta | None  # the snapshot replay started from (None: log start)
    entries: tuple[Entry, ...]  # the entries after the snapshot, contiguous
    warnings: tuple[str, ...]

    def describe(self) -> str:
        snap = self.snapshot.describe() if self.snapshot else "no snapshot"
        last = (
            self.entries[-1].index
            if self.entries
            else (self.snapshot.index if self.snapshot else 0)
        )
        text = f"{self.hard_state.describe()}; {snap}; {len(self.entries)} entries to {last}"
        return text + "".join(f"\nwarning: {w}" for w in self.warnings)


@dataclass(frozen=True)
class _Segment:
    seq: int
    first_index: int
    path: Path


def _frame(rec_type: int, payload: bytes) -> bytes:
    body = _HEADER_BODY.pack(len(payload), rec_type, zlib.crc32(payload))
    return body + struct.pack(">I", zlib.crc32(body)) + payload


def _segment_name(seq: int, first_index: int) -> str:
    return f"{seq:016x}-{first_index:016x}.wal"


def _encode_batch(
    snapshot: SnapshotMeta | None,
    truncate_from: int | None,
    entries: Sequence[Entry],
    hard_state: HardState | None,
) -> bytes:
    flags = (
        (_F_SNAPSHOT if snapshot else 0)
        | (_F_TRUNCATE if truncate_from is not None else 0)
        | (_F_HARD_STATE if hard_state else 0)
    )
    parts = [bytes([flags])]
    if snapshot is not None:
        parts.append(encode_snapshot_meta(snapshot))
    if truncate_from is not None:
        parts.append(struct.pack(">Q", truncate_from))
    parts.append(struct.pack(">I", len(entries)))
    parts.extend(encode_entry(e) for e in entries)
    if hard_state is not None:
        parts.append(encode_hard_state(hard_state))
    return b"".join(parts)


class _Replay:
    """The log as the records describe it, built record by record."""

    def __init__(self) -> None:
        self.hard_state = HardState()
        self.snapshot = SnapshotMeta()
        self.entries: dict[int, Entry] = {}
        self.last_index = 0
        self.seen_snapshots: set[tuple[int, int]] = {(0, 0)}
        self.current_seq = 0
        self.snapshot_seq = 0  # the segment holding the record of `snapshot`

    def apply_segment_header(self, reader: Reader, first: bool) -> tuple[int, int]:
        magic, version, seq, first_index = reader.unpack(_SEGMENT_HEAD, "segment header")
        if magic != MAGIC:
            raise CodecError(f"segment header: magic {magic!r}, expected {MAGIC!r}")
        if version != FORMAT_VERSION:
            raise CodecError(
                f"segment header: format version {version}, this build reads {FORMAT_VERSION}"
            )
        hard_state = read_hard_state(reader)
        snapshot = read_snapshot_meta(reader)
        reader.done()
        self.current_seq = seq
        if first:
            self.hard_state = hard_state
            self.snapshot = snapshot
            self.snapshot_seq = seq
            self.last_index = max(first_index - 1, snapshot.index)
        self.seen_snapshots.add((snapshot.index, snapshot.term))
        return seq, first_index

    def apply_batch(self, reader: Reader) -> None:
        flags = reader.u8("batch flags")
        if flags & ~(_F_SNAPSHOT | _F_TRUNCATE | _F_HARD_STATE):
            raise CodecError(f"batch: unknown flags {flags:#x}")
        if flags & _F_SNAPSHOT:
            meta = read_snapshot_meta(reader)
            self.snapshot = meta
            self.snapshot_seq = self.current_seq
            self.seen_snapshots.add((meta.index, meta.term))
            self.entries.clear()  # a received snapshot replaces the whole log
            self.last_index = meta.index
        if flags & _F_TRUNCATE:
            start = reader.u64("truncate_from")
            for index in range(start, self.last_index + 1):
                self.entries.pop(index, None)
            self.last_index = min(self.last_index, start - 1)
        for _ in range(reader.u32("entry count")):
            entry = read_entry(reader)
            if entry.index != self.last_index + 1:
                raise CodecError(
                    f"batch: entry {entry.index} does not follow the last index {self.last_index}"
                )
            self.entries[entry.index] = entry
            self.last_index = entry.index
        if flags & _F_HARD_STATE:
            self.hard_state = read_hard_state(reader)
        reader.done()

    def apply_snapshot(self, reader: Reader) -> None:
        meta = read_snapshot_meta(reader)
        reader.done()
        self.seen_snapshots.add((meta.index, meta.term))
        if meta.index > self.snapshot.index:
            self.snapshot = meta
            self.snapshot_seq = self.current_seq

    def result(self, start: SnapshotMeta | None, warnings: list[str], where: Path) -> WalState:
        base = start.index if start is not None else 0
        if start is not None and (start.index, start.term) not in self.seen_snapshots:
            raise WalError(
                f"{where}: the snapshot {start.term}/{start.index} was never recorded in this WAL;"
                " use the snapshot file the WAL names, or restore the member from a backup"
            )
        if start is None and self.entries and min(self.entries) > 1:
            base = min(self.entries) - 1
            start = self.snapshot if self.snapshot.index >= base else None
            if start is None:
                raise WalError(
                    f"{where}: the log starts at {base + 1}; open with the snapshot file"
                    " that precedes it"
                )
            base = start.index
        entries = []
        for index in range(base + 1, self.last_index + 1):
            entry = self.entries.get(index)
            if entry is None:
                raise WalError(f"{where}: entry {index} is missing after the snapshot at {base}")
            entries.append(entry)
        if self.hard_state.commit > max(self.last_index, base):
            raise WalError(
                f"{where}: commit index {self.hard_state.commit} beyond the last entry"
                f" {self.last_index}: the log lost acknowledged entries"
            )
        return WalState(self.hard_state, start, tuple(entries), tuple(warnings))


class Wal:
    """An open WAL, appending to its last segment. Not thread-safe: one writer."""

    def __init__(
        self,
        directory: Path,
        segments: list[_Segment],
        replay: _Replay,
        segment_bytes: int,
        fsync: Fsync,
        tail_end: int,
        preallocate_bytes: int,
    ) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self._fsync = fsync
        self._segments = segments
        self._hard_state = replay.hard_state
        self._snapshot = replay.snapshot
        self._last_index = replay.last_index
        self._snapshot_seq = replay.snapshot_seq
        self._fd = os.open(segments[-1].path, os.O_WRONLY)
        self._size = tail_end  # where the next record goes; zeros may follow
        self._allocated = os.fstat(self._fd).st_size
        self._preallocate_bytes = preallocate_bytes

    # --- opening -----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path | str,
        *,
        snapshot: SnapshotMeta | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: Fsync = os.fdatasync,
        preallocate_bytes: int = PREALLOCATE_BYTES,
    ) -> tuple[Wal, WalState]:
        """Open (creating if empty) and replay. `snapshot`: the snapshot file loaded.

        `fsync` makes a segment file's writes durable: fdatasync by default, as etcd's
        WAL does — the data and the file size that reaches it, without the timestamps a
        full fsync also writes. A directory (a segment added, renamed or removed) is
        always synced with a full fsync. `preallocate_bytes`: how far ahead of its
        records the last segment is allocated; 0 appends (bench.wal_fsync compares)."""
        if segment_bytes <= 0:
            raise WalError(f"segment_bytes must be positive, got {segment_bytes}")
        if preallocate_bytes < 0:
            raise WalError(f"preallocate_bytes must be 0 or more, got {preallocate_bytes}")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.wal.tmp"):
            stale.unlink()  # a segment whose creation never completed (never renamed)
        segments = _list_segments(directory)
        replay = _Replay()
        warnings: list[str] = []
        tail_end = 0
        if not segments:
            path = directory / _segment_name(0, 1)
            _create_segment(path, 0, 1, HardState(), SnapshotMeta(), fsync)
            segments = [_Segment(0, 1, path)]
        for position, segment in enumerate(segments):
            if position > 0 and segment.seq != segments[position - 1].seq + 1:
                raise WalError(
                    f"{segment.path}: segment seq {segment.seq} follows {segments[position - 1].seq}:"
                    " a segment file is missing"
                )
            last = position == len(segments) - 1
            tail_end = _replay_segment(
                segment, replay, first=position == 0, last=last, warnings=warnings, fsync=fsync
            )
        state = replay.result(
            snapshot if snapshot is not None and snapshot.index > 0 else None,
            warnings,
            directory,
        )
        for warning in warnings:
            log.warning("%s", warning)
        wal = cls(directory, segments, replay, segment_bytes, fsync, tail_end, preallocate_bytes)
        return wal, state

    # --- writing -----------------------------------------------------------------------
    def save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: SnapshotMeta | None = None,
        sync: bool = True,
    ) -> None:
        """Append one batch (received snapshot, entries, hard state) and fsync once."""
        batch = self.prepare_save(hard_state, entries, snapshot)
        if batch is not None:
            self.write_batch(batch, sync)

    def prepare_save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: SnapshotMeta | None = None,
    ) -> PendingBatch | None:
        """Check and encode one batch, writing nothing; None when there is nothing to save."""
        if snapshot is None and not entries and hard_state is None:
            return None
        last_index = snapshot.index if snapshot is not None else self._last_index
        truncate_from = None
        if entries:
            first = entries[0].index
            if first > last_index + 1:
                raise WalError(f"entries start at {first} but the WAL ends at {last_index}: a gap")
            if first <= last_index:
                truncate_from = first
            last_index = entries[-1].index
        record = _frame(REC_BATCH, _encode_batch(snapshot, truncate_from, entries, hard_state))
        return PendingBatch(record, last_index, hard_state, snapshot)

    def write_batch(self, batch: PendingBatch, sync: bool = True) -> None:
        """Write the batch `prepare_save` gave (the last one prepared) and fsync once."""
        self._write_record(batch.record, sync)
        self._last_index = batch.last_index
        if batch.hard_state is not None:
            self._hard_state = batch.hard_state
        if batch.snapshot is not None:
            self._snapshot = batch.snapshot
            self._snapshot_seq = self._segments[-1].seq

    def save_ready(self, ready: Ready) -> None:
        """Step 1 of the Ready contract: write its durable part; one fsync if must_fsync."""
        meta = ready.snapshot.meta if ready.snapshot is not None else None
        self.save(ready.hard_state, ready.entries, meta, sync=ready.must_fsync)

    def save_snapshot(self, meta: SnapshotMeta) -> None:
        """Record a local snapshot (after its snapfile is durable); replay may start there."""
        self._write(REC_SNAPSHOT, encode_snapshot_meta(meta), sync=True)
        if meta.index > self._snapshot.index:
            self._snapshot = meta
            self._snapshot_seq = self._segments[-1].seq

    def _write(self, rec_type: int, payload: bytes, sync: bool) -> None:
        self._write_record(_frame(rec_type, payload), sync)

    def _write_record(self, record: bytes, sync: bool) -> None:
        if self._size >= self.segment_bytes:
            self._roll()
        end = self._size + len(record)
        if end > self._allocated:
            self._preallocate(end)
        view = memoryview(record)
        offset = self._size
        while view:
            written = os.pwrite(self._fd, view, offset)
            view = view[written:]
            offset += written
        self._size = end
        self._allocated = max(self._allocated, end)
        if sync:
            try:
                self._fsync(self._fd)
            except OSError as error:
                raise WalSyncFailed(self._segments[-1].path, error) from error

    def _preallocate(self, end: int) -> None:
        """Before a record that ends at `end` is written past the allocated space: allocate
        the segment's next PREALLOCATE_BYTES (zeros), if the segment is to hold more."""
        ahead = min(self._size + self._preallocate_bytes, self.segment_bytes)
        if ahead <= end:
            return
        try:
            os.posix_fallocate(self._fd, self._allocated, ahead - self._allocated)
        except OSError as error:
            # Records are appended instead: correct, each fdatasync commits a new size.
            self._preallocate_bytes = 0
            log.warning(
                "cannot preallocate WAL space in %s (%s); appending instead",
                self.directory,
                error,
            )
            return
        self._allocated = ahead

    def _roll(self) -> None:
        if self._allocated > self._size:
            # Cut the old segment back to its records (durably, before the next segment
            # exists): only the last segment may end in zeros.
            os.ftruncate(self._fd, self._size)
            os.fsync(self._fd)
        seq = self._segments[-1].seq + 1
        first = self._last_index + 1
        path = self.directory / _segment_name(seq, first)
        _create_segment(path, seq, first, self._hard_state, self._snapshot, self._fsync)
        os.close(self._fd)
        self._segments.append(_Segment(seq, first, path))
        self._fd = os.open(path, os.O_WRONLY)
        self._size = self._allocated = os.fstat(self._fd).st_size

    def release_to(self, snapshot_index: int) -> list[Path]:
        """Delete old segments whose every entry is covered by a snapshot at snapshot_index.

        Call only after the snapshot file and save_snapshot() are durable. Returns the
        deleted paths. The last segment is never deleted.
        """
        removed: list[Path] = []
        while (
            len(self._segments) > 1
            and self._segments[1].first_index <= snapshot_index + 1
            and self._segments[0].seq < self._snapshot_seq
            and snapshot_index <= self._snapshot.index
        ):
            path = self._segments.pop(0).path
            path.unlink()
            removed.append(path)
        if removed:
            _fsync_dir(self.directory)
        return removed

    def segments(self) -> list[Path]:
        return [s.path for s in self._segments]

    @property
    def records_end(self) -> int:
        """Where the last segment's records end: its next record goes there (zeros may
        follow, allocated ahead)."""
        return self._size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def recorded_snapshots(directory: Path | str) -> frozenset[tuple[int, int]]:
    """The (index, term) of every snapshot the WAL in `directory` records (read-only).

    Recovery picks the newest snapshot file among these (snapfile.load_newest with
    `accept`): a snapshot file written just before a crash, whose WAL record never made it
    to disk, is then passed over instead of making Wal.open refuse to start.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return frozenset({(0, 0)})
    segments = _list_segments(directory)
    replay = _Replay()
    for position, segment in enumerate(segments):
        last = position == len(segments) - 1
        _replay_segment(segment, replay, first=position == 0, last=last, warnings=[], fsync=None)
    return frozenset(replay.seen_snapshots)


# --- files -------------------------------------------------------------------------------------
def _list_segments(directory: Path) -> list[_Segment]:
    segments = []
    for path in directory.iterdir():
        match = _NAME.match(path.name)
        if match:
            segments.append(_Segment(int(match.group(1), 16), int(match.group(2), 16), path))
    return sorted(segments, key=lambda s: s.seq)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_segment(
    path: Path,
    seq: int,
    first_index: int,
    hard_state: HardState,
    snapshot: SnapshotMeta,
    fsync: Fsync,
) -> None:
    """Write a segment with its header under a temporary name, fsync, then rename it in."""
    payload = (
        _SEGMENT_HEAD.pack(MAGIC, FORMAT_VERSION, seq, first_index)
        + encode_hard_state(hard_state)
        + encode_snapshot_meta(snapshot)
    )
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, _frame(REC_SEGMENT, payload))
        fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    _fsync_dir(path.parent)


def _records(data: bytes) -> Iterator[tuple[int, int, bytes | str]]:
    """(offset, type, payload) per record, up to the end of the file or to an all-zero
    header that only zeros follow (preallocated space). At a damaged record, (offset, -1,
    problem) and stop; the problem starts with "torn:" when no intact record follows it,
    so that it may be a torn tail."""
    pos = 0
    size = len(data)
    zeros_from = _zeros_from(data)
    while pos < min(size, zeros_from):
        if size - pos < _HEADER.size:
            yield pos, -1, f"torn: {size - pos} bytes, less than a record header"
            return
        length, rec_type, payload_crc, header_crc = _HEADER.unpack_from(data, pos)
        end = pos + _HEADER.size + length
        if zlib.crc32(data[pos : pos + _HEADER_BODY.size]) != header_crc:
            problem, rest = "record header checksum mismatch", pos + 1
        elif end > size:
            yield pos, -1, f"torn: record of {length} bytes runs past the end of the file"
            return
        elif zlib.crc32(data[pos + _HEADER.size : end]) != payload_crc and not on(
            "wal_skip_payload_crc"
        ):
            problem, rest = "payload checksum mismatch", end
        else:
            yield pos, rec_type, data[pos + _HEADER.size : end]
            pos = end
            continue
        torn = _intact_record_at_or_after(data, rest, zeros_from) is None
        yield pos, -1, ("torn: " + problem) if torn else problem
        return


def _zeros_from(data: bytes, chunk: int = 1 << 16) -> int:
    """Where the zeros that end `data` begin (len(data) if it does not end in zeros),
    copying only them and one chunk, not the whole of a segment as rstrip would."""
    end = len(data)
    while end > 0:
        start = max(0, end - chunk)
        content = len(data[start:end].rstrip(b"\0"))
        if content:
            return start + content
        end = start
    return 0


_RECORD_TYPE_BYTE = re.compile(rb"[\x01-\x03]")


def _intact_record_at_or_after(data: bytes, start: int, stop: int) -> int | None:
    """The offset of the first intact record (both checksums right) starting in
    [start, stop), or None. Only for a damaged record's verdict (torn or corrupt)."""
    type_offset = 4  # the type byte follows the u32 length
    for match in _RECORD_TYPE_BYTE.finditer(data, start + type_offset, stop + type_offset):
        pos = match.start() - type_offset
        if pos + _HEADER.size > len(data):
            break
        length, _, payload_crc, header_crc = _HEADER.unpack_from(data, pos)
        end = pos + _HEADER.size + length
        if (
            zlib.crc32(data[pos : pos + _HEADER_BODY.size]) == header_crc
            and end <= len(data)
            and zlib.crc32(data[pos + _HEADER.size : end]) == payload_crc
        ):
            return pos
    return None


def _replay_segment(
    segment: _Segment,
    replay: _Replay,
    *,
    first: bool,
    last: bool,
    warnings: list[str],
    fsync: Fsync | None,
) -> int:
    """Replay one segment; a torn tail is truncated (when `fsync` is given) and reported.
    Returns the offset where its records end (where the next record goes)."""
    data = segment.path.read_bytes()
    saw_header = False
    records_end = 0
    for offset, rec_type, body in _records(data):
        if isinstance(body, str):
            if body.startswith("torn:") and last and offset > 0:
                if fsync is not None:
                    with open(segment.path, "r+b") as f:
                        f.truncate(offset)
                        f.flush()
                        fsync(f.fileno())
                damaged = max(_zeros_from(data) - offset, 1)
                warnings.append(
                    f"{segment.path}: torn final record at offset {offset}"
                    f" ({damaged} bytes, {body[6:]}) truncated"
                )
                return offset
            problem = body[6:] if body.startswith("torn:") else body
            if not last:
                problem += " (in a segment that is not the last one)"
            raise WalCorruption(segment.path, offset, problem)
        assert isinstance(body, bytes)
        reader = Reader(body, f"{segment.path.name} record at offset {offset}")
        try:
            if not saw_header:
                if rec_type != REC_SEGMENT:
                    raise CodecError(f"first record has type {rec_type}, expected a segment header")
                seq, first_index = replay.apply_segment_header(reader, first)
                if (seq, first_index) != (segment.seq, segment.first_index):
                    raise CodecError(
                        f"header says seq {seq} first_index {first_index}, the file name"
                        f" {segment.seq}/{segment.first_index}"
                    )
                saw_header = True
            elif rec_type == REC_BATCH:
                replay.apply_batch(reader)
            elif rec_type == REC_SNAPSHOT:
                replay.apply_snapshot(reader)
            else:
                raise CodecError(f"unknown record type {rec_type}")
        except CodecError as exc:
            raise WalCorruption(segment.path, offset, str(exc)) from None
        records_end = offset + _HEADER.size + len(body)
    if not saw_header:
        raise WalCorruption(segment.path, 0, "empty segment without a header")
    if not last and records_end < len(data):
        # Zeros: a segment is cut back to its records before the next one is started.
        raise WalCorruption(
            segment.path,
            records_end,
            "zeros after the last record (in a segment that is not the last one)",
        )
    return records_end

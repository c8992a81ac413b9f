"""State-machine snapshot files: written atomically, loaded newest-valid-first.

One file per snapshot, named `<term:016x>-<index:016x>.snap`, holding (format v1):
    magic "ESSNAP" version:u8 crc32:u32 body
    body = snapshot metadata (index, term, voter and learner ids; raft_codec layout,
           whose format 2 reads format 1's metadata unchanged) + data:bytes64
where crc32 (zlib) covers the body. `save` writes a temporary file, fsyncs it, renames
it into place and fsyncs the directory, so a crash leaves either the old set of files
or the new one, never a half-written snapshot under a final name. `load_newest` returns
the valid snapshot with the highest index, skipping (and reporting) damaged files, or
the newest among those the caller accepts (e.g. those the WAL has recorded). `prune`
keeps the newest `keep` files.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from etcdspec.impl import failpoints
from etcdspec.impl.raft.codec import CodecError, Reader, encode_snapshot_head, read_snapshot
from etcdspec.impl.raft.messages import Snapshot, SnapshotMeta

log = logging.getLogger("etcdspec.impl.storage.snapfile")

MAGIC = b"ESSNAP"
FORMAT_VERSION = 1
_HEAD = struct.Struct(">6sBI")
_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{16})\.snap$")

Fsync = Callable[[int], None]


class SnapshotFileError(Exception):
    """A snapshot file is damaged or not a snapshot (names the file and the problem)."""


@dataclass(frozen=True)
class LoadedSnapshot:
    snapshot: Snapshot
    path: Path
    skipped: tuple[str, ...]  # damaged newer files that were passed over, with why

    def describe(self) -> str:
        text = f"{self.snapshot.describe()} from {self.path.name}"
        return text + "".join(f"\nskipped: {s}" for s in self.skipped)


def file_name(meta: SnapshotMeta) -> str:
    return f"{meta.term:016x}-{meta.index:016x}.snap"


def encode(snapshot: Snapshot) -> bytes:
    return b"".join(_pieces(snapshot))


def _pieces(snapshot: Snapshot) -> tuple[bytes, bytes, bytes]:
    """A snapshot file's bytes in three pieces (file head, snapshot head, data), so that
    the data, the whole database, is written from the snapshot itself and never copied
    (two copies had doubled a member's memory while it saved a snapshot); the checksum
    covers the snapshot head and the data, computed piece by piece."""
    head = encode_snapshot_head(snapshot)
    crc = zlib.crc32(snapshot.data, zlib.crc32(head))
    return _HEAD.pack(MAGIC, FORMAT_VERSION, crc), head, snapshot.data


def decode(data: bytes, where: str) -> Snapshot:
    if len(data) < _HEAD.size:
        raise SnapshotFileError(f"{where}: {len(data)} bytes is too short for a snapshot file")
    magic, version, crc = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise SnapshotFileError(f"{where}: not a snapshot file (magic {magic!r})")
    if version != FORMAT_VERSION:
        raise SnapshotFileError(
            f"{where}: format version {version}, this build reads {FORMAT_VERSION}"
        )
    body = data[_HEAD.size :]
    if zlib.crc32(body) != crc and not failpoints.on("snap_skip_crc"):
        raise SnapshotFileError(f"{where}: checksum mismatch (damaged file)")
    reader = Reader(body, where)
    try:
        snapshot = read_snapshot(reader)
        reader.done()
    except CodecError as exc:
        raise SnapshotFileError(str(exc)) from None
    return snapshot


def _fsync_dir(directory: Path, fsync: Fsync) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def save(directory: Path | str, snapshot: Snapshot, fsync: Fsync = os.fsync) -> Path:
    """Write `snapshot` durably and atomically; returns its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name(snapshot.meta)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for piece in _pieces(snapshot):
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view) :]
        fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(directory, fsync)
    return path


def list_files(directory: Path | str) -> list[tuple[SnapshotMeta, Path]]:
    """Snapshot files by name, newest (highest index, then term) first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _NAME.match(path.name)
        if match:
            term, index = int(match.group(1), 16), int(match.group(2), 16)
            found.append((SnapshotMeta(index, term), path))
    return sorted(found, key=lambda item: (item[0].index, item[0].term), reverse=True)


def load_newest(
    directory: Path | str, accept: Callable[[SnapshotMeta], bool] | None = None
) -> LoadedSnapshot | None:
    """The newest valid snapshot (that `accept` approves, if given), or None if none is."""
    skipped: list[str] = []
    for named, path in list_files(directory):
        if accept is not None and not accept(named):
            continue
        try:
            snapshot = decode(path.read_bytes(), str(path))
        except (OSError, SnapshotFileError) as exc:
            skipped.append(str(exc))
            log.warning("skipping snapshot file: %s", exc)
            continue
        if (snapshot.meta.index, snapshot.meta.term) != (named.index, named.term):
            problem = f"{path}: holds {snapshot.meta.describe()}, its name says {named.term}/{named.index}"
            skipped.append(problem)
            log.warning("skipping snapshot file: %s", problem)
            continue
        return LoadedSnapshot(snapshot, path, tuple(skipped))
    return None


def prune(directory: Path | str, keep: int = 2) -> list[Path]:
    """Delete all but the `keep` newest snapshot files; returns the deleted paths."""
    if keep < 1:
        raise ValueError(f"prune keeps at least one snapshot, got keep={keep}")
    removed = []
    for _, path in list_files(directory)[keep:]:
        path.unlink()
        removed.append(path)
    for stale in Path(directory).glob("*.snap.tmp"):
        stale.unlink()
        removed.append(stale)
    return removed

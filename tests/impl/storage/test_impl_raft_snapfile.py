"""Snapshot files: atomic durable write (temp, fsync, rename, fsync dir), newest valid one
loaded, damaged ones skipped and reported, pruning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from etcdspec.impl import failpoints
from etcdspec.impl.raft.messages import Snapshot, SnapshotMeta
from etcdspec.impl.storage import snapfile


def snap(index: int, term: int, data: bytes = b"state") -> Snapshot:
    return Snapshot(SnapshotMeta(index, term, (1, 2, 3)), data)


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    calls: list[int] = []
    path = snapfile.save(tmp_path, snap(10, 2, b"\x00blob\xff"), fsync=calls.append)
    assert len(calls) == 2  # the file, then the directory
    assert path.name == "0000000000000002-000000000000000a.snap"
    assert not list(tmp_path.glob("*.tmp"))
    loaded = snapfile.load_newest(tmp_path)
    assert loaded is not None and loaded.snapshot == snap(10, 2, b"\x00blob\xff")
    assert loaded.skipped == ()


@pytest.mark.parametrize("data", [b"", b"x", bytes(range(256)) * 4096])
def test_saved_file_holds_the_encoding_written_piece_by_piece(tmp_path: Path, data: bytes) -> None:
    """save writes head, snapshot head and data separately (the data is never copied);
    the file is byte for byte what `encode` gives, and its checksum covers all of it."""
    snapshot = snap(7, 3, data)
    path = snapfile.save(tmp_path, snapshot)
    assert path.read_bytes() == snapfile.encode(snapshot)
    assert snapfile.decode(path.read_bytes(), str(path)) == snapshot
    damaged = bytearray(path.read_bytes())
    damaged[-1 if data else 20] ^= 0xFF
    with pytest.raises(snapfile.SnapshotFileError):
        snapfile.decode(bytes(damaged), str(path))


def test_newest_valid_snapshot_wins_and_damaged_ones_are_skipped(tmp_path: Path) -> None:
    snapfile.save(tmp_path, snap(5, 1, b"old"))
    newest = snapfile.save(tmp_path, snap(9, 1, b"new"))
    newest.write_bytes(newest.read_bytes()[:-1] + b"X")
    loaded = snapfile.load_newest(tmp_path)
    assert loaded is not None and loaded.snapshot == snap(5, 1, b"old")
    assert "checksum mismatch" in loaded.skipped[0] and newest.name in loaded.skipped[0]


def test_accept_filter_limits_the_choice(tmp_path: Path) -> None:
    snapfile.save(tmp_path, snap(5, 1))
    snapfile.save(tmp_path, snap(9, 1))
    loaded = snapfile.load_newest(tmp_path, accept=lambda meta: meta.index == 5)
    assert loaded is not None and loaded.snapshot.meta.index == 5


@pytest.mark.parametrize(
    "mangle,problem",
    [
        (lambda b: b[:5], "too short"),
        (lambda b: b"XXXXXX" + b[6:], "not a snapshot file"),
        (lambda b: b[:6] + b"\x09" + b[7:], "format version 9"),
    ],
)
def test_damaged_files_are_described(
    tmp_path: Path, mangle: Callable[[bytes], bytes], problem: str
) -> None:
    path = snapfile.save(tmp_path, snap(3, 1))
    path.write_bytes(mangle(path.read_bytes()))
    with pytest.raises(snapfile.SnapshotFileError, match=problem):
        snapfile.decode(path.read_bytes(), str(path))
    assert snapfile.load_newest(tmp_path) is None


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    for index in (1, 4, 7, 9):
        snapfile.save(tmp_path, snap(index, 1))
    removed = snapfile.prune(tmp_path, keep=2)
    assert len(removed) == 2
    assert [meta.index for meta, _ in snapfile.list_files(tmp_path)] == [9, 7]


def test_empty_directory_has_no_snapshot(tmp_path: Path) -> None:
    assert snapfile.load_newest(tmp_path / "absent") is None


def test_snap_skip_crc_failpoint_reads_a_damaged_file_as_it_is() -> None:
    """snap_skip_crc (the planted bug the corrupt-snap conformance run must catch): a bit
    flipped in the data is refused, but read as it is with the failpoint on."""
    data = bytearray(snapfile.encode(snap(7, 2, b"state bytes")))
    data[-3] ^= 0x01
    with pytest.raises(snapfile.SnapshotFileError, match="checksum mismatch"):
        snapfile.decode(bytes(data), "damaged.snap")
    with failpoints.active("snap_skip_crc"):
        read = snapfile.decode(bytes(data), "damaged.snap")
    assert read.meta.index == 7 and read.data != b"state bytes"

"""faultfs (conform/faultfs.py) through a real FUSE mount: unsynced writes are read back
but dropped by a power cut (read, size and mmap alike: no kernel page survives the
cut), fsync and fdatasync make them durable in the backing directory, a failing fsync
answers EIO and drops the file's dirty data, renames and open-but-unlinked files keep
their overlay, SQLite in WAL mode runs on it; and the overlay's arithmetic alone."""

from __future__ import annotations

import errno
import mmap
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from etcdspec.conform.faultfs import Overlay
from etcdspec.conform.faultfs_mount import FaultFsError, FaultFsMount, is_mounted


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[FaultFsMount]:
    made = FaultFsMount.mount(
        tmp_path / "backing", tmp_path / "mnt", tmp_path / "faultfs.log", tmp_path / "ctl.sock"
    )
    try:
        yield made
    finally:
        made.unmount()
    assert not os.path.ismount(tmp_path / "mnt")
    assert made.process.returncode is not None


def _write(path: Path, data: bytes, offset: int = 0, sync: str = "") -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, data, offset)
        if sync == "fsync":
            os.fsync(fd)
        elif sync == "fdatasync":
            os.fdatasync(fd)
    finally:
        os.close(fd)


def test_unsynced_writes_are_read_back_then_lost_in_a_power_cut(mount: FaultFsMount) -> None:
    path = mount.mountpoint / "wal"
    _write(path, b"acknowledged?")
    assert path.read_bytes() == b"acknowledged?"
    assert path.stat().st_size == 13
    assert (mount.backing / "wal").read_bytes() == b""  # created at once, data not yet
    status = mount.status()
    assert (status["unsynced_bytes"], status["unsynced_files"]) == (13, 1)
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        assert mapped[:4] == b"ackn"  # the kernel now holds the page
    cut = mount.cut()
    assert (cut["dropped_bytes"], cut["dropped_files"]) == (13, 1)
    assert path.stat().st_size == 0
    assert path.read_bytes() == b""
    assert mount.status()["unsynced_bytes"] == 0


@pytest.mark.parametrize("sync", ["fsync", "fdatasync"])
def test_synced_writes_survive_and_only_later_ones_are_lost(mount: FaultFsMount, sync: str) -> None:
    path = mount.mountpoint / "segment"
    _write(path, b"durable", sync=sync)
    assert (mount.backing / "segment").read_bytes() == b"durable"
    _write(path, b"-lost", offset=7)
    _write(path, b"D", offset=0)
    assert path.read_bytes() == b"Durable-lost"
    assert mount.cut()["dropped_bytes"] == 6
    assert path.read_bytes() == b"durable"
    assert mount.status()["fsyncs"] == 1


def test_no_kernel_page_resurrects_a_dropped_write(mount: FaultFsMount) -> None:
    """Same size before and after, so only the page's bytes can tell: the kernel read
    the unsynced page (read and mmap) before the cut, and a fresh open after it reads
    the durable bytes (FUSE drops a file's page cache on open without keep_cache)."""
    path = mount.mountpoint / "db"
    _write(path, b"a" * 8192, sync="fsync")
    _write(path, b"b" * 8192)
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        assert mapped[:2] == b"bb" and handle.read(2) == b"bb"
    mount.cut()
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        assert mapped[:2] == b"aa"
    assert path.read_bytes() == b"a" * 8192


def test_failing_fsync_answers_eio_and_drops_the_dirty_data(mount: FaultFsMount) -> None:
    path = mount.mountpoint / "wal"
    _write(path, b"kept", sync="fsync")
    assert mount.fail_fsync(True)["fail_fsync"] is True
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, b"LOST", 0)
        with pytest.raises(OSError) as failed:
            os.fdatasync(fd)
        assert failed.value.errno == errno.EIO
    finally:
        os.close(fd)
    directory = os.open(mount.mountpoint, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as failed:
            os.fsync(directory)
        assert failed.value.errno == errno.EIO
    finally:
        os.close(directory)
    assert path.read_bytes() == b"kept"  # as Linux: the failed writeback's pages are gone
    status = mount.status()
    assert (status["failed_fsyncs"], status["unsynced_bytes"]) == (2, 0)
    mount.fail_fsync(False)
    _write(path, b"healed", sync="fsync")
    assert (mount.backing / "wal").read_bytes() == b"healed"


def test_a_renamed_or_unlinked_open_file_keeps_its_overlay(mount: FaultFsMount) -> None:
    tmp, final = mount.mountpoint / "seg.tmp", mount.mountpoint / "seg"
    _write(tmp, b"header")
    tmp.rename(final)  # metadata: at once
    assert final.read_bytes() == b"header"
    assert (mount.backing / "seg").exists()
    fd = os.open(final, os.O_RDWR)
    try:
        final.unlink()
        assert os.pread(fd, 6, 0) == b"header"
    finally:
        os.close(fd)
    assert not (mount.backing / "seg").exists()


def test_sqlite_in_wal_mode_runs_and_keeps_what_it_synced(mount: FaultFsMount) -> None:
    path = mount.mountpoint / "backend.db"
    db = sqlite3.connect(path)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=full")
    db.execute("create table kv (k text primary key, v text)")
    db.executemany("insert into kv values (?, ?)", [(f"k{i}", f"v{i}") for i in range(50)])
    db.commit()
    db.close()
    mount.cut()
    db = sqlite3.connect(path)
    try:
        assert db.execute("select count(*) from kv").fetchone() == (50,)
    finally:
        db.close()


def test_a_mount_whose_process_died_is_still_unmounted(tmp_path: Path) -> None:
    made = FaultFsMount.mount(tmp_path / "backing", tmp_path / "mnt", tmp_path / "faultfs.log")
    try:
        made.process.send_signal(signal.SIGKILL)
        made.process.wait(10)
        assert not os.path.ismount(tmp_path / "mnt")  # ENOTCONN: ismount cannot see it
        assert is_mounted(tmp_path / "mnt")
    finally:
        made.unmount()
    assert not is_mounted(tmp_path / "mnt")
    assert not made.control.exists() and not made.control.parent.exists()


def test_an_unknown_control_request_is_refused(mount: FaultFsMount) -> None:
    with pytest.raises(FaultFsError, match="unknown op 'explode'"):
        mount.request({"op": "explode"})


def test_overlay_lays_writes_in_order_extends_and_truncates() -> None:
    overlay = Overlay()
    overlay.write(2, b"abc")
    overlay.write(5, b"de")  # continues the last write: one extent
    overlay.write(3, b"X")
    assert len(overlay.extents) == 2
    assert (overlay.end(), overlay.unsynced_bytes()) == (7, 6)
    buffer = bytearray(b"........")
    overlay.apply(buffer, 0)
    assert bytes(buffer) == b"..aXcde."
    window = bytearray(b"__")
    overlay.apply(window, 4)
    assert bytes(window) == b"cd"
    overlay.truncate(4)
    assert (overlay.end(), overlay.unsynced_bytes()) == (4, 3)
    overlay.truncate(2)
    assert overlay.extents == []

"""faultfs: a passthrough FUSE filesystem that keeps unsynced writes in memory, for
disk faults of conformance runs (lost unsynced writes, fsync that fails), in the
spirit of LazyFS. One process per member, run as

    python -m etcdspec.conform.faultfs BACKING MOUNTPOINT --control SOCKET

Built on mfusepy (ctypes over libfuse3; no compiler, no trio), started and driven by
conform/faultfs_mount.py.

Semantics (what a member on MOUNTPOINT sees; the files live in BACKING):
- Data. A write to a regular file is kept in this process, in an overlay of that file
  (keyed by the backing file's inode, so renames and unlinked-but-open files follow),
  not written to BACKING. Reads and the file's size (getattr) see the overlay over the
  backing file, so the member reads what it wrote, through read() and mmap alike. The
  overlay survives close(): as in the kernel's page cache, closing a file makes nothing
  durable.
- fsync and fdatasync of a file write its overlay to the backing file, in the order of
  the writes, and fsync the backing file; only then is the data durable. fsync of a
  directory fsyncs the backing directory.
- `cut` (the power cut) drops every overlay: every write not followed by an fsync of
  its file is gone, and the answer says how many bytes in how many files. The member
  must be killed first (kill -9 before the cut, as a power cut stops processes with it);
  its next open of a file reads the backing file again: FUSE drops a file's kernel page
  cache on open (this filesystem never sets keep_cache) and attributes are not cached
  (attr_timeout=0), so no page the kernel still holds resurrects dropped data.
- `fail-fsync on` makes every fsync/fdatasync (files and directories) return EIO, and,
  as Linux does after a failed writeback, the file's unsynced writes are dropped (a
  later successful fsync does not bring them back). `fail-fsync off` heals it.
- `status` answers the unsynced bytes and files, whether fsync fails, and counts of
  fsyncs done and failed.

Control: a Unix stream socket at SOCKET, one JSON request line, one JSON answer line:
{"op":"cut"} -> {"ok":true,"dropped_bytes":N,"dropped_files":M};
{"op":"fail-fsync","on":true|false} -> {"ok":true,"fail_fsync":...};
{"op":"status"} -> {"ok":true,"unsynced_bytes":...,"unsynced_files":...,"fail_fsync":...,
"fsyncs":...,"failed_fsyncs":...}. An unknown op answers {"ok":false,"error":...}.

What it does NOT model (simplifications, said so that a result is read right):
- Metadata: create, mkdir, unlink, rename, truncate, chmod, utimens and links are
  applied to BACKING at once, as if every metadata change were journalled and synced
  immediately (a real power cut may also lose a rename or a new file's name that was
  not followed by a directory fsync). A file truncated or created survives a cut with
  its durable (backing) contents.
- fallocate is not offered (the kernel answers EOPNOTSUPP: etcd and our WAL then
  append or truncate instead).
- Torn writes inside one write call, reordered writeback and partial flushes: a cut
  drops a file's unsynced writes whole, never a part of them.
- Failing fsync is all or nothing for the mount: no per-file or intermittent EIO.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socketserver
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

FileKey = tuple[int, int]  # (st_dev, st_ino) of the backing file


@dataclass
class Overlay:
    """The unsynced writes of one file, in the order they were made (a write that
    continues the last one extends it)."""

    extents: list[tuple[int, bytearray]] = field(default_factory=list)

    def write(self, offset: int, data: bytes) -> None:
        if self.extents:
            last_offset, last = self.extents[-1]
            if last_offset + len(last) == offset:
                last.extend(data)
                return
        self.extents.append((offset, bytearray(data)))

    def end(self) -> int:
        return max((offset + len(data) for offset, data in self.extents), default=0)

    def unsynced_bytes(self) -> int:
        return sum(len(data) for _, data in self.extents)

    def apply(self, buffer: bytearray, offset: int) -> None:
        """Lay the writes over `buffer`, which holds the file from `offset` on."""
        stop = offset + len(buffer)
        for start, data in self.extents:
            end = start + len(data)
            if end <= offset or start >= stop:
                continue
            low, high = max(start, offset), min(end, stop)
            buffer[low - offset : high - offset] = data[low - start : high - start]

    def truncate(self, length: int) -> None:
        kept = []
        for start, data in self.extents:
            if start < length:
                kept.append((start, data[: length - start]))
        self.extents = kept


class FaultFs:
    """The filesystem's operations (mfusepy's Operations protocol) and its control."""

    use_ns = True

    def __init__(self, backing: str) -> None:
        self.backing = os.path.realpath(backing)
        self._mutex = threading.Lock()
        self.overlays: dict[FileKey, Overlay] = {}
        self.handles: dict[int, FileKey] = {}
        self.fail_fsync = False
        self.fsyncs = 0
        self.failed_fsyncs = 0

    def _full(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    @staticmethod
    def _key(st: os.stat_result) -> FileKey:
        return (st.st_dev, st.st_ino)

    # -- control --------------------------------------------------------------

    def cut(self) -> dict[str, Any]:
        with self._mutex:
            dropped = sum(o.unsynced_bytes() for o in self.overlays.values())
            files = sum(1 for o in self.overlays.values() if o.extents)
            self.overlays.clear()
        return {"ok": True, "dropped_bytes": dropped, "dropped_files": files}

    def set_fail_fsync(self, on: bool) -> dict[str, Any]:
        with self._mutex:
            self.fail_fsync = on
        return {"ok": True, "fail_fsync": on}

    def status(self) -> dict[str, Any]:
        with self._mutex:
            return {
                "ok": True,
                "unsynced_bytes": sum(o.unsynced_bytes() for o in self.overlays.values()),
                "unsynced_files": sum(1 for o in self.overlays.values() if o.extents),
                "fail_fsync": self.fail_fsync,
                "fsyncs": self.fsyncs,
                "failed_fsyncs": self.failed_fsyncs,
            }

    def control(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "cut":
            return self.cut()
        if op == "fail-fsync":
            return self.set_fail_fsync(bool(request.get("on")))
        if op == "status":
            return self.status()
        return {"ok": False, "error": f"unknown op {op!r}: use cut, fail-fsync or status"}

    # -- attributes and directories (applied to BACKING at once) ---------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None and fh in self.handles else os.lstat(self._full(path))
        attrs = {
            key: getattr(st, key)
            for key in (
                "st_mode",
                "st_nlink",
                "st_uid",
                "st_gid",
                "st_size",
                "st_atime_ns",
                "st_mtime_ns",
                "st_ctime_ns",
                "st_ino",
                "st_blocks",
            )
        }
        attrs["st_atime"] = st.st_atime_ns
        attrs["st_mtime"] = st.st_mtime_ns
        attrs["st_ctime"] = st.st_ctime_ns
        with self._mutex:
            overlay = self.overlays.get(self._key(st))
            if overlay is not None:
                attrs["st_size"] = max(st.st_size, overlay.end())
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._full(path))]

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._full(path), amode):
            raise OSError(errno.EACCES, "access denied", path)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._full(path))
        return {
            key: getattr(st, key)
            for key in (
                "f_bavail",
                "f_bfree",
                "f_blocks",
                "f_bsize",
                "f_favail",
                "f_ffree",
                "f_files",
                "f_flag",
                "f_frsize",
                "f_namemax",
            )
        }

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._full(path))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._full(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self._full(path))
        else:
            os.utime(self._full(path), ns=times)
        return 0

    def rename(self, old: str, new: str) -> int:
        os.rename(self._full(old), self._full(new))
        return 0

    def link(self, target: str, source: str) -> int:
        os.link(self._full(source), self._full(target))
        return 0

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self._full(target))
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self._full(path))

    def unlink(self, path: str) -> int:
        full = self._full(path)
        st = os.lstat(full)
        os.unlink(full)
        if st.st_nlink <= 1:
            with self._mutex:
                if not any(key == self._key(st) for key in self.handles.values()):
                    self.overlays.pop(self._key(st), None)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        with self._mutex:
            if self.fail_fsync:
                self.failed_fsyncs += 1
                raise OSError(errno.EIO, "fsync fails (faultfs fail-fsync is on)", path)
        fd = os.open(self._full(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    # -- files ----------------------------------------------------------------

    def _open_backing(self, full: str, flags: int, mode: int = 0o600) -> int:
        """The backing file opened read-write whatever was asked (the overlay is written
        back through this handle at fsync); O_TRUNC applied at once (metadata)."""
        access = os.O_RDONLY | os.O_WRONLY | os.O_RDWR
        drop = access | os.O_APPEND | os.O_TRUNC | os.O_DIRECT
        fd = os.open(full, (flags & ~drop) | os.O_RDWR, mode)
        key = self._key(os.fstat(fd))
        with self._mutex:
            self.handles[fd] = key
            if flags & os.O_TRUNC:
                os.ftruncate(fd, 0)
                self.overlays.pop(key, None)
        return fd

    def open(self, path: str, flags: int) -> int:
        return self._open_backing(self._full(path), flags & ~os.O_CREAT)

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        return self._open_backing(self._full(path), flags | os.O_CREAT, mode)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self._mutex:
            st = os.fstat(fh)
            overlay = self.overlays.get(self._key(st))
            logical = max(st.st_size, overlay.end() if overlay else 0)
            want = max(0, min(size, logical - offset))
            buffer = bytearray(os.pread(fh, want, offset))
            buffer.extend(bytes(want - len(buffer)))
            if overlay is not None:
                overlay.apply(buffer, offset)
        return bytes(buffer)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self._mutex:
            key = self.handles[fh]
            self.overlays.setdefault(key, Overlay()).write(offset, bytes(data))
        return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self._mutex:
            if fh is not None and fh in self.handles:
                os.ftruncate(fh, length)
                key = self.handles[fh]
            else:
                os.truncate(self._full(path), length)
                key = self._key(os.lstat(self._full(path)))
            overlay = self.overlays.get(key)
            if overlay is not None:
                overlay.truncate(length)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self._mutex:
            key = self.handles[fh]
            if self.fail_fsync:
                self.failed_fsyncs += 1
                self.overlays.pop(key, None)  # as Linux: the dirty pages are gone
                raise OSError(errno.EIO, "fsync fails (faultfs fail-fsync is on)", path)
            overlay = self.overlays.pop(key, None)
            if overlay is not None:
                for offset, data in overlay.extents:
                    os.pwrite(fh, data, offset)
            if datasync:
                os.fdatasync(fh)
            else:
                os.fsync(fh)
            self.fsyncs += 1
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0  # close() makes nothing durable

    def release(self, path: str, fh: int) -> int:
        with self._mutex:
            self.handles.pop(fh, None)
        os.close(fh)
        return 0


def serve_control(fs: FaultFs, socket_path: str) -> socketserver.UnixStreamServer:
    """Answer control requests on `socket_path` in a daemon thread."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                try:
                    answer = fs.control(json.loads(line))
                except (ValueError, AttributeError) as error:
                    answer = {"ok": False, "error": f"bad request: {error}"}
                self.wfile.write(json.dumps(answer).encode() + b"\n")
                self.wfile.flush()

    if os.path.exists(socket_path):
        os.unlink(socket_path)
    server = socketserver.UnixStreamServer(socket_path, Handler)
    threading.Thread(target=server.serve_forever, name="faultfs-control", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m etcdspec.conform.faultfs")
    parser.add_argument("backing", help="the directory that holds the durable files")
    parser.add_argument("mountpoint", help="where the filesystem is mounted")
    parser.add_argument("--control", required=True, help="the control socket's path")
    args = parser.parse_args(argv)
    try:
        from mfusepy import FUSE
    except ImportError:
        print(
            "faultfs: the mfusepy package is missing: pip install mfusepy "
            "(and Debian's fuse3 for fusermount3)",
            file=sys.stderr,
        )
        return 2
    fs = FaultFs(args.backing)
    server = serve_control(fs, args.control)
    try:
        FUSE(
            fs,
            args.mountpoint,
            foreground=True,
            nothreads=False,
            fsname="faultfs",
            attr_timeout=0,
            entry_timeout=0,
            negative_timeout=0,
        )
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

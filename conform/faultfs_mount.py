"""One faultfs mount (conform/faultfs.py) as seen from the harness: mount it, send it
control requests, unmount it.

Contract:
- `FaultFsMount.mount(backing, mountpoint, log_path, control=None)` starts `python -m
  etcdspec.conform.faultfs` as its own process (its output in log_path; the control
  socket in a fresh /tmp/faultfs-* directory unless given, as a socket's path is
  limited to 107 bytes) and returns once MOUNTPOINT is a mount point and the control
  socket answers (deadline MOUNT_TIMEOUT_S, else FaultFsError
  with the filesystem's own output). `require_fuse()` says, before anything starts,
  what is missing (/dev/fuse, fusermount3, the mfusepy package) and how to get it.
- `cut()`, `fail_fsync(on)` and `status()` are the control requests of faultfs's
  docstring; each answers the filesystem's JSON answer (FaultFsError if it says not ok).
- `unmount()` always ends the mount it started: `fusermount3 -u`, lazily (`-uz`) when the
  mount is busy, then the process is waited for (and killed if it outlives
  UNMOUNT_TIMEOUT_S). A mount whose process died is unmounted too (it is found in
  /proc/self/mountinfo, where os.path.ismount fails on it). It is safe to call twice.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MOUNT_TIMEOUT_S = 15.0
UNMOUNT_TIMEOUT_S = 10.0
MAX_SOCKET_PATH = 108  # sun_path's size on Linux, the final NUL included


class FaultFsError(RuntimeError):
    """A faultfs mount could not be made, driven or ended; says what to do."""


def require_fuse() -> None:
    """Raise FaultFsError naming what a faultfs mount needs and is missing."""
    missing = []
    if not os.path.exists("/dev/fuse"):
        missing.append("/dev/fuse (load the fuse module; in a container pass --device /dev/fuse)")
    if shutil.which("fusermount3") is None:
        missing.append("fusermount3 (Debian: apt-get install fuse3)")
    if importlib.util.find_spec("mfusepy") is None:
        missing.append("the mfusepy package (pip install mfusepy, or the project's test extra)")
    if missing:
        raise FaultFsError("faults on a FUSE filesystem need " + "; ".join(missing))


def is_mounted(path: Path) -> bool:
    """Whether `path` is a mount point in this process's mount table. (os.path.ismount
    says no for a FUSE mount whose process died: its lstat fails with ENOTCONN, yet
    the mount is still there and must be unmounted.)"""
    target = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as table:
            for line in table:
                fields = line.split()
                if len(fields) > 4 and _unescape(fields[4]) == target:
                    return True
    except OSError:
        return os.path.ismount(path)
    return False


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


@dataclass
class FaultFsMount:
    backing: Path
    mountpoint: Path
    control: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    @classmethod
    def mount(
        cls, backing: Path, mountpoint: Path, log_path: Path, control: Path | None = None
    ) -> FaultFsMount:
        require_fuse()
        if control is None:  # a socket's path must be short (108 bytes): one in /tmp
            control = Path(tempfile.mkdtemp(prefix="faultfs-")) / "control.sock"
        if len(str(control).encode()) >= MAX_SOCKET_PATH:
            raise FaultFsError(
                f"control socket path {control} is longer than {MAX_SOCKET_PATH - 1} bytes; "
                "give a shorter one or none"
            )
        backing.mkdir(parents=True, exist_ok=True)
        mountpoint.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "etcdspec.conform.faultfs",
                    str(backing),
                    str(mountpoint),
                    "--control",
                    str(control),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        made = cls(backing, mountpoint, control, process, log_path)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise FaultFsError(
                    f"faultfs on {mountpoint} exited ({process.returncode}) before mounting: "
                    f"{made.last_output()}"
                )
            if is_mounted(mountpoint) and control.exists():
                try:
                    made.status()
                    return made
                except (OSError, FaultFsError):
                    pass
            if time.monotonic() > deadline:
                made.unmount()
                raise FaultFsError(
                    f"faultfs on {mountpoint} not mounted within {MOUNT_TIMEOUT_S:g} s: "
                    f"{made.last_output()}"
                )
            time.sleep(0.05)

    def last_output(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no output)"
        return lines[-1] if lines else "(no output)"

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(10.0)
            conn.connect(str(self.control))
            conn.sendall(json.dumps(request).encode() + b"\n")
            answer = conn.makefile("rb").readline()
        if not answer:
            raise FaultFsError(f"faultfs on {self.mountpoint}: no answer to {request}")
        data: dict[str, Any] = json.loads(answer)
        if not data.get("ok"):
            raise FaultFsError(f"faultfs on {self.mountpoint}: {data.get('error')}")
        return data

    def cut(self) -> dict[str, Any]:
        """The power cut: every unsynced write dropped (the member must be down)."""
        return self.request({"op": "cut"})

    def fail_fsync(self, on: bool) -> dict[str, Any]:
        return self.request({"op": "fail-fsync", "on": on})

    def status(self) -> dict[str, Any]:
        return self.request({"op": "status"})

    def unmount(self) -> None:
        if is_mounted(self.mountpoint):
            done = subprocess.run(
                ["fusermount3", "-u", str(self.mountpoint)], capture_output=True, check=False
            )
            if done.returncode != 0:
                subprocess.run(
                    ["fusermount3", "-uz", str(self.mountpoint)], capture_output=True, check=False
                )
        try:
            self.process.wait(UNMOUNT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            self.control.unlink()
        if self.control.parent.name.startswith("faultfs-"):
            with contextlib.suppress(OSError):
                self.control.parent.rmdir()

    def describe(self) -> str:
        return f"faultfs {self.mountpoint} (files in {self.backing})"

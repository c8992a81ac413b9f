"""How a servicer method answers: etcd's errors as gRPC statuses, proposals by field.

Every unary method is one `@unary` handler `(self, request) -> response`; the decorator
maps an error to the call's status: an etcd error (`etcdspec.impl.errors.RpcError`, which
the store raises too) leaves as etcd's gRPC code and message, anything else as an
internal error (UNKNOWN). Writes go through `propose(proposer, field, request, answer)`,
which wraps the request as the InternalRaftRequest field `field`. A handler's context is
anything with grpc's `abort` (`Context`): grpc_h2's Call and grpc.aio's ServicerContext.

Auth: `caller(auth, context)` is who a call comes from, read from its "token" metadata
(or, without one, "authorization", as the HTTP gateway passes it) as etcd does, and `propose(..., caller=...)` carries that user and auth revision in the
Raft request so the applier checks the write's permission. While auth is disabled the
caller is nobody at the cost of one boolean test, and no metadata is read (etcd would
also refuse a stale token then; its clients drop the token and retry). With
`--client-cert-auth` (`client_cert_auth=True`), a call with no token comes from the user
its verified TLS client certificate's common name names, at the store's current auth
revision, as etcd's AuthInfoFromCtx then AuthInfoFromTLS decide: a token always wins,
and a call that came through the HTTP gateway (no TLS context here; etcd ignores the
common name of a request with "grpcgateway-accept") never gets a user from a certificate.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from etcdspec.impl.api.ports import Proposer, ReadBarrier
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.auth_store import AuthStore
from etcdspec.impl.kv.auth_tokens import NO_USER, AuthInfo, TokenNotApplied
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2

TOKEN_METADATA = "token"  # etcd's rpctypes.TokenFieldNameGRPC
TOKEN_METADATA_GATEWAY = "authorization"  # etcd's TokenFieldNameSwagger, read when no "token"
GATEWAY_ACCEPT_METADATA = "grpcgateway-accept"  # etcd ignores a certificate's user then

log = logging.getLogger("etcdspec.impl.api")


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """The gRPC (code, message) an error maps to, or None when it is not an etcd error."""
    if isinstance(error, RpcError):
        return error.code, error.message
    return None


class Context(Protocol):
    """What our servicers use of a call's context: grpc_h2's Call and grpc.aio's
    ServicerContext both have it."""

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn: ...

    def invocation_metadata(self) -> tuple[tuple[str, str], ...] | None: ...


def caller(auth: AuthStore, context: Context, client_cert_auth: bool = False) -> AuthInfo:
    """Who the call comes from: NO_USER while auth is disabled or when the call carries
    no token (and, with `client_cert_auth`, no verified client certificate);
    INVALID_AUTH_TOKEN for a token nobody holds (unknown, expired, forged)."""
    if not auth.enabled:
        return NO_USER
    gateway = None
    for name, value in context.invocation_metadata() or ():
        if name == TOKEN_METADATA:
            return auth.auth_info(value)  # TokenNotApplied: see unary_in_context
        if name == TOKEN_METADATA_GATEWAY:
            gateway = value
        if name == GATEWAY_ACCEPT_METADATA:
            client_cert_auth = False
    if gateway is not None:
        return auth.auth_info(gateway)
    if client_cert_auth:
        common_name = certificate_user(context)
        if common_name is not None:
            return AuthInfo(common_name, auth.revision)
    return NO_USER


def certificate_user(context: Context) -> str | None:
    """The common name of the call's verified TLS client certificate, or None (no TLS, no
    certificate, or a context without grpc's auth_context: the HTTP gateway's)."""
    auth_context = getattr(context, "auth_context", None)
    if auth_context is None:
        return None
    names = auth_context().get("x509_common_name") or []
    return names[0].decode("utf-8", "replace") if names else None


async def abort_with(context: Context, error: Exception) -> None:
    """Abort the call as etcd would for `error`: its code and message, or UNKNOWN."""
    mapped = status_of(error)
    if mapped is None:
        log.exception("internal error serving a request")
        await context.abort(grpc.StatusCode.UNKNOWN, f"etcdserver: internal error: {error}")
    else:
        await context.abort(mapped[0], mapped[1])


Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
S = TypeVar("S")
Handler = Callable[[S, Req], Awaitable[Resp]]
Method = Callable[[S, Req, Context], Awaitable[Resp]]


def unary(handler: Handler[S, Req, Resp]) -> Method[S, Req, Resp]:
    """The gRPC unary method serving `handler(self, request)`: its answer, or an abort
    with etcd's code and message when it raises an etcd error (UNKNOWN otherwise)."""

    @functools.wraps(handler)
    async def method(self: S, request: Req, context: Context) -> Resp:
        try:
            return await handler(self, request)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            await abort_with(context, error)
            raise  # abort raises; this is not reached

    return method


class ReadsAt(Protocol):
    """A servicer whose calls can wait until this member has applied what is committed."""

    reads: ReadBarrier


R = TypeVar("R", bound=ReadsAt)


def unary_in_context(handler: Method[R, Req, Resp]) -> Method[R, Req, Resp]:
    """As `unary`, for a handler that also reads the call's context (its token). A
    simple token issued at an index not applied here yet (another member authenticated
    the client) makes the call wait for this member's applied index to catch up, then
    run again from its start, as etcd waits on the token's index."""

    @functools.wraps(handler)
    async def method(self: R, request: Req, context: Context) -> Resp:
        try:
            try:
                return await handler(self, request, context)
            except TokenNotApplied:
                await self.reads.barrier()
                return await handler(self, request, context)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            await abort_with(context, error)
            raise  # abort raises; this is not reached

    return method


async def propose(
    proposer: Proposer,
    field: str,
    request: Message,
    answer: type[Resp],
    caller: AuthInfo = NO_USER,
) -> Resp:
    """Propose `request` as the InternalRaftRequest field `field`, on behalf of `caller`;
    the applied answer."""
    internal = internal_pb2.InternalRaftRequest()
    getattr(internal, field).CopyFrom(request)
    if caller is not NO_USER:
        internal.header.username = caller.username
        internal.header.auth_revision = caller.revision
    response = await proposer.propose(internal)
    if not isinstance(response, answer):
        raise TypeError(f"{field} was answered with {type(response).__name__}")
    return response

"""How a servicer method answers: etcd's errors as gRPC statuses, proposals by field.

Every unary method is one `@unary` handler `(self, request) -> response`; the decorator
maps an error to the call's status: an etcd error (`etcdspec.impl.errors.RpcError`, which
the store raises too) leaves as etcd's gRPC code and message, anything else as an
internal error (UNKNOWN). Writes go through `propose(proposer, field, request, answer)`,
which wraps the request as the InternalRaftRequest field `field`. A handler's context is
anything with grpc's `abort` (`Context`): grpc_h2's Call and grpc.aio's ServicerContext.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from etcdspec.impl.api.ports import Proposer
from etcdspec.impl.errors import RpcError
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2

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


async def propose(proposer: Proposer, field: str, request: Message, answer: type[Resp]) -> Resp:
    """Propose `request` as the InternalRaftRequest field `field`; the applied answer."""
    internal = internal_pb2.InternalRaftRequest()
    getattr(internal, field).CopyFrom(request)
    response = await proposer.propose(internal)
    if not isinstance(response, answer):
        raise TypeError(f"{field} was answered with {type(response).__name__}")
    return response

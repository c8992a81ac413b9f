"""The server side of one HTTP/1.1 connection on asyncio, parsed by h11 (sans-I/O).

A connection reads requests one at a time (pipelined requests wait in h11's buffer),
hands each whole request (`HttpRequest`: method, target, headers, body) to the server's
`HttpHandler`, and writes the `HttpResponse` it returns: a body of bytes with
Content-Length, or a `stream` of chunks written as they come (chunked for an HTTP/1.1
client, close-delimited for HTTP/1.0); to a HEAD request, the head alone. A client that
expects 100-continue gets it once its head is accepted. Keep-alive is h11's: the connection serves the
next request after a response unless either side said close.

Limits (`Http1Limits`): a request head above `max_header_bytes` is answered 431, a body
above `max_body_bytes` 413, anything h11 cannot parse 400 (its status hint); each of
these closes the connection, as Go's net/http does. While a request is handled, input
beyond one more head is not read (the transport pauses), so a client cannot queue
unbounded pipelined bytes.

Ownership and threading: everything runs on the event loop thread. A connection owns
the task running its current request's handler; the client closing the connection (or
the server's `close`) cancels it, and a streamed body's iterator is closed with it. The
server's hooks `before_call` (before a handler starts) and `after_read` (after it ran up
to its first wait) are the ones the gRPC server calls, so a request here moves the member
as a gRPC call does. This module knows nothing of etcd.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import h11

from etcdspec.impl.rpc.eager import start_eagerly

log = logging.getLogger("etcdspec.impl.rpc.http1")

STATUS_TEXT = {
    400: b"Bad Request",
    413: b"Request Entity Too Large",
    431: b"Request Header Fields Too Large",
}


@dataclass(frozen=True)
class HttpRequest:
    """One whole request as the client sent it (header names lower-cased by h11)."""

    method: str
    target: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    http_version: str = "1.1"

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.target).query, keep_blank_values=True)

    def header(self, name: bytes) -> bytes | None:
        """The first value of header `name` (lower case), or None."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def describe(self) -> str:
        return f"{self.method} {self.target} HTTP/{self.http_version} ({len(self.body)} body bytes)"


@dataclass(frozen=True)
class HttpResponse:
    """What a handler answers: status, headers, and either `body` or a `stream` of
    chunks (written as each arrives; the response ends when the iterator does)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    stream: AsyncGenerator[bytes, None] | None = field(default=None, compare=False)

    def describe(self) -> str:
        kind = "streamed" if self.stream is not None else f"{len(self.body)} bytes"
        return f"HTTP {self.status} ({kind})"


HttpHandler = Callable[[HttpRequest], Awaitable[HttpResponse]]


@dataclass(frozen=True)
class Http1Limits:
    max_header_bytes: int = 64 * 1024
    max_body_bytes: int = 2 * 1024 * 1024


@dataclass
class Http1Hooks:
    """What the connection calls around a handler (the gRPC server's hooks), and where it
    registers itself while open."""

    before_call: Callable[[], None] = lambda: None
    after_read: Callable[[], None] = lambda: None
    connections: set[Http1Connection] = field(default_factory=set)


class Http1Connection(asyncio.Protocol):
    """One client connection speaking HTTP/1.x; see the module docstring."""

    def __init__(self, handler: HttpHandler, limits: Http1Limits, hooks: Http1Hooks) -> None:
        self.handler = handler
        self.limits = limits
        self.hooks = hooks
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self._request: h11.Request | None = None
        self._body = bytearray()
        self._task: asyncio.Task[None] | None = None
        self._handling = False
        self._dispatching = False
        self._streaming = False
        self._reading_paused = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.hooks.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.h11.receive_data(data)
        if self._handling:
            # Pipelined input waits; more than one further head's worth is not read.
            if len(self.h11.trailing_data[0]) > self.limits.max_header_bytes:
                self._pause_reading()
            return
        self._next_events()

    def eof_received(self) -> bool | None:
        self.h11.receive_data(b"")
        if self._handling and not self._streaming:
            return True  # the answer still goes out; the connection closes after it
        if self._handling:
            return None  # a client gone from a stream: the stream ends with the connection
        self._next_events()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.hooks.connections.discard(self)
        self.transport = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._wake_writers()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_writers()

    # -- requests in -----------------------------------------------------------------------

    def _next_events(self) -> None:
        """Parse what has arrived until a request is whole (it is then handled) or more
        bytes are needed."""
        while self.transport is not None and not self._handling:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as error:
                self._refuse(error.error_status_hint)
                return
            if event is h11.NEED_DATA:
                return
            if event is h11.PAUSED:
                if self.h11.our_state is h11.MUST_CLOSE or self.h11.their_state is h11.MUST_CLOSE:
                    self.close()
                    return
                self.h11.start_next_cycle()
                continue
            if isinstance(event, h11.Request):
                if _head_bytes(event) > self.limits.max_header_bytes:
                    self._refuse(431)  # h11 bounds only a head still incomplete
                    return
                length = _content_length(event)
                if length is not None and length > self.limits.max_body_bytes:
                    self._refuse(413)
                    return
                self._request = event
                self._body = bytearray()
                if self.h11.they_are_waiting_for_100_continue:
                    # "Expect: 100-continue": the body is wanted (as Go's server says
                    # once a handler reads it; a client would wait for this a while).
                    self._write(
                        self.h11.send(h11.InformationalResponse(status_code=100, headers=[]))
                    )
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > self.limits.max_body_bytes:
                    self._refuse(413)
                    return
            elif isinstance(event, h11.EndOfMessage):
                self._dispatch()
            elif isinstance(event, h11.ConnectionClosed):
                self.close()
                return

    def _dispatch(self) -> None:
        head = self._request
        assert head is not None
        request = HttpRequest(
            method=head.method.decode("ascii", "replace"),
            target=head.target.decode("latin-1"),
            headers=tuple((bytes(name), bytes(value)) for name, value in head.headers),
            body=bytes(self._body),
            http_version=head.http_version.decode("ascii", "replace"),
        )
        self._request = None
        self._body = bytearray()
        self._handling = True
        self._dispatching = True
        self.hooks.before_call()
        try:
            self._task = start_eagerly(self.loop, self._serve(request))
        finally:
            self._dispatching = False
        self.hooks.after_read()

    def _refuse(self, status: int) -> None:
        """Answer a request that cannot be served with `status` and close (as Go does)."""
        reason = STATUS_TEXT.get(status, b"Bad Request")
        body = b"%d %s" % (status, reason)
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(h11.LocalProtocolError):
                self._write(
                    self.h11.send(
                        h11.Response(
                            status_code=status,
                            reason=reason,
                            headers=[
                                ("Content-Type", "text/plain; charset=utf-8"),
                                ("Content-Length", str(len(body))),
                                ("Connection", "close"),
                            ],
                        )
                    )
                )
                self._write(self.h11.send(h11.Data(data=body)))
                self._write(self.h11.send(h11.EndOfMessage()))
        self.close()

    # -- responses out -----------------------------------------------------------------------

    async def _serve(self, request: HttpRequest) -> None:
        try:
            try:
                response = await self.handler(request)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("error serving %s", request.describe())
                response = HttpResponse(
                    500, (("Content-Type", "text/plain; charset=utf-8"),), b"internal error\n"
                )
            await self._respond(response, head_only=request.method == "HEAD")
        except asyncio.CancelledError:
            return
        except h11.LocalProtocolError:
            log.exception("cannot answer %s", request.describe())
            self.close()
            return
        finally:
            self._handling = False
            self._streaming = False
            self._task = None
        self._after_response()

    async def _respond(self, response: HttpResponse, head_only: bool = False) -> None:
        """Write `response`; for a HEAD request its head alone (the body's length said)."""
        headers = list(response.headers)
        if response.stream is None:
            headers.append(("Content-Length", str(len(response.body))))
        elif head_only:
            await response.stream.aclose()
        reason = _REASONS.get(response.status, b"")
        self._write(
            self.h11.send(h11.Response(status_code=response.status, headers=headers, reason=reason))
        )
        if response.stream is None or head_only:
            if response.body and not head_only:
                self._write(self.h11.send(h11.Data(data=response.body)))
            self._write(self.h11.send(h11.EndOfMessage()))
            return
        self._streaming = True
        async with contextlib.aclosing(response.stream) as chunks:
            async for chunk in chunks:
                if self.transport is None:
                    raise asyncio.CancelledError()
                if chunk:
                    self._write(self.h11.send(h11.Data(data=chunk)))
                await self._drain()
        self._write(self.h11.send(h11.EndOfMessage()))

    def _after_response(self) -> None:
        if self.transport is None:
            return
        if self.h11.our_state is h11.MUST_CLOSE or self.h11.their_state in (
            h11.MUST_CLOSE,
            h11.CLOSED,
        ):
            self.close()
            return
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        self._resume_reading()
        if not self._dispatching:  # else the loop in _next_events that dispatched goes on
            self._next_events()

    def _write(self, data: bytes | None) -> None:
        if data and self.transport is not None:
            self.transport.write(data)

    async def _drain(self) -> None:
        while self.transport is not None and self._write_paused:
            waiter = self.loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def _wake_writers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        """Close the connection (what was written still leaves); a running handler is
        cancelled when the transport reports the loss."""
        if self.transport is not None:
            self.transport.close()


_REASONS = {
    200: b"OK",
    400: b"Bad Request",
    401: b"Unauthorized",
    403: b"Forbidden",
    404: b"Not Found",
    405: b"Method Not Allowed",
    408: b"Request Timeout",
    409: b"Conflict",
    412: b"Precondition Failed",
    413: b"Request Entity Too Large",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
    500: b"Internal Server Error",
    501: b"Not Implemented",
    503: b"Service Unavailable",
    504: b"Gateway Timeout",
}


def _head_bytes(request: h11.Request) -> int:
    """About the size of a request's head as sent (line and header lines)."""
    size = len(request.method) + len(request.target) + 12
    for name, value in request.headers:
        size += len(name) + len(value) + 4
    return size


def _content_length(request: h11.Request) -> int | None:
    for name, value in request.headers:
        if name == b"content-length":
            return int(value)
    return None

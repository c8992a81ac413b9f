"""A gRPC server on our own HTTP/2 connection (`etcdspec.impl.rpc.h2_conn`), in asyncio.

It serves the same `grpc.GenericRpcHandler`s that grpc.aio serves (the generated
`add_*Servicer_to_server` functions register into it through `server.GenericOnly`), with
the same servicer code: handlers are called as `behavior(request_or_iterator, context)`
and the context offers what grpc.aio's does for our servicers (`abort`, `set_code`,
`set_details`, `write`, `time_remaining`, `invocation_metadata`, `cancelled`, `peer`,
`auth_context`: on a TLS port, the verified client certificate's common name as grpc
names it, "x509_common_name").
Why: grpc.aio's per-call machinery costs 240-430 µs of CPU per call on this machine
(bench/grpc_ceiling.py), most of a member's CPU per read; this server parses frames in
one pass per socket read, starts each handler right after the read that completed its
request (a task takes it on only if it waits: a serializable read never does), and
answers in one write.

The gRPC wire protocol (PROTOCOL-HTTP2 of grpc/grpc): a call is an HTTP/2 stream opened
by a POST to /package.Service/Method with content-type application/grpc; each message is
a 1-byte compressed flag and a 4-byte big-endian length, then the protobuf bytes. The
answer is response headers (:status 200), the messages, and trailers holding
grpc-status and grpc-message (percent-encoded); an error before any message is answered
with one "trailers-only" header block. grpc-timeout sets a deadline: when it passes, the
handler is cancelled and the call ends with DEADLINE_EXCEEDED. A message above the
receive limit ends the call with RESOURCE_EXHAUSTED; a compressed one with UNIMPLEMENTED
(no client of ours compresses, etcd does not by default either).

Threading: everything runs on the event loop thread. Ownership: a connection owns its
calls; a call owns its handler (and the task that drives it once it has waited), which
ends with the call (a client reset, a deadline, a lost connection or the server's stop
cancels it). A handler may therefore run without a current task: it must not use
asyncio.timeout, which needs one.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import socket
import ssl
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NamedTuple, NoReturn

import grpc

from etcdspec.impl.rpc import h2_conn
from etcdspec.impl.rpc.eager import start_eagerly
from etcdspec.impl.rpc.h2_conn import H2ServerConnection, Headers
from etcdspec.impl.rpc.http1 import Http1Connection, Http1Hooks, Http1Limits, HttpHandler
from etcdspec.impl.rpc.port_sharing import FirstBytes
from etcdspec.impl.rpc.scratch_recv import ScratchProtocol, new_scratch

log = logging.getLogger("etcdspec.impl.rpc.grpc_h2")

CONTENT_TYPE = b"application/grpc"
MESSAGE_PREFIX = 5

# Header blocks in HPACK without the dynamic table (RFC 7541 §6.1, §6.2.2): ":status: 200"
# is static entry 8; content-type is static name 31 with a literal value.
_STATUS_200 = b"\x88"
_CONTENT_TYPE_FIELD = b"\x0f\x10" + bytes([len(CONTENT_TYPE)]) + CONTENT_TYPE
RESPONSE_HEADERS = _STATUS_200 + _CONTENT_TYPE_FIELD

TIMEOUT_UNITS = {b"H": 3600.0, b"M": 60.0, b"S": 1.0, b"m": 1e-3, b"u": 1e-6, b"n": 1e-9}


def _hpack_int(value: int, prefix_bits: int, first: int) -> bytes:
    """An HPACK integer (RFC 7541 §5.1) with `first`'s high bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal_field(name: bytes, value: bytes) -> bytes:
    """A header field as a literal without indexing, new name, no Huffman (§6.2.2)."""
    return b"\x00" + _hpack_int(len(name), 7, 0) + name + _hpack_int(len(value), 7, 0) + value


def percent_encode(text: str) -> bytes:
    """grpc-message's encoding: UTF-8, with bytes outside 0x20-0x7E and '%' as %XX."""
    out = bytearray()
    for byte in text.encode("utf-8"):
        if 0x20 <= byte <= 0x7E and byte != 0x25:
            out.append(byte)
        else:
            out += b"%%%02X" % byte
    return bytes(out)


def status_block(code: grpc.StatusCode, details: str) -> bytes:
    """The trailer fields of a status: grpc-status, and grpc-message when there are details."""
    block = literal_field(b"grpc-status", str(code.value[0]).encode())
    if details:
        block += literal_field(b"grpc-message", percent_encode(details))
    return block


OK_TRAILERS = status_block(grpc.StatusCode.OK, "")


def parse_timeout(value: bytes) -> float | None:
    """Seconds of a grpc-timeout value ("100m", "5S"); None when malformed."""
    unit = TIMEOUT_UNITS.get(value[-1:])
    digits = value[:-1]
    if unit is None or not digits.isdigit() or len(digits) > 8:
        return None
    return int(digits) * unit


class Abort(Exception):
    """Raised by `context.abort`: the call ends with this status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def _decode(deserialize: Callable[[bytes], Any] | None, message: bytes) -> Any:
    """A request message decoded; one that does not decode ends the call with INTERNAL
    "grpc: error unmarshalling request: ...", as grpc-go's server answers (it had
    reached the handler's catch-all: UNKNOWN, and a traceback in the log)."""
    if deserialize is None:
        return message
    try:
        return deserialize(message)
    except Exception as error:
        raise Abort(
            grpc.StatusCode.INTERNAL, f"grpc: error unmarshalling request: {error}"
        ) from None


class CallDetails(NamedTuple):
    """grpc.HandlerCallDetails as a generic handler's `service` reads it."""

    method: str
    invocation_metadata: tuple[tuple[str, str], ...]


class Call:
    """One RPC: its request bytes in, its handler (begun at once, driven by a task once it
    waits), its answer out. It is also the handler's context."""

    __slots__ = (
        "_buffer",
        "_code",
        "_deadline",
        "_details",
        "_done",
        "_expired",
        "_first_message",
        "_headers_sent",
        "_remote_ended",
        "_request_waiter",
        "_requests",
        "_started",
        "_task",
        "_timer",
        "connection",
        "handler",
        "metadata",
        "stream_id",
    )

    def __init__(
        self,
        connection: GrpcConnection,
        stream_id: int,
        handler: grpc.RpcMethodHandler,
        metadata: Headers,
        timeout: float | None,
    ) -> None:
        self.connection = connection
        self.stream_id = stream_id
        self.handler = handler
        self.metadata = metadata
        self._buffer = b""
        self._requests: deque[bytes] = deque()
        self._request_waiter: asyncio.Future[None] | None = None
        self._remote_ended = False
        self._started = False
        self._headers_sent = False
        self._done = False
        self._task: asyncio.Task[None] | None = None
        self._first_message: bytes | None = None  # a unary call's request, for `begin`
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: float | None = None
        self._expired = False
        self._code: grpc.StatusCode | None = None
        self._details = ""
        if timeout is not None:
            loop = connection.loop
            self._deadline = loop.time() + timeout
            self._timer = loop.call_later(timeout, self._expire)
        if handler.request_streaming:
            self._start(None)

    # -- requests in -------------------------------------------------------------------

    def feed(self, data: bytes, end_stream: bool) -> None:
        """Request bytes from the connection: whole messages go to the handler. As
        grpc-go's server (etcd's): a unary call takes its first message and ignores what
        follows; a message flagged compressed, or with an unknown flag, is INTERNAL; a
        request ending inside a message is UNKNOWN "unexpected EOF", a unary one with no
        message UNKNOWN "EOF" (tests/fuzz/test_fuzz_frames.py asks etcd the same)."""
        if self._started and not self.handler.request_streaming:
            self._remote_ended = self._remote_ended or end_stream
            return
        buffer = self._buffer + data if self._buffer else data
        position = 0
        end = len(buffer)
        limit = self.connection.server.max_receive_bytes
        while end - position >= MESSAGE_PREFIX:
            length = int.from_bytes(buffer[position + 1 : position + 5], "big")
            if length > limit:
                self._fail_early(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"grpc: received message larger than max ({length} vs. {limit})",
                )
                return
            if end - position - MESSAGE_PREFIX < length:
                break
            flag = buffer[position]
            if flag:
                self._fail_early(
                    grpc.StatusCode.INTERNAL,
                    "grpc: compressed flag set with identity or empty encoding"
                    if flag == 1
                    else f"grpc: received unexpected payload format {flag}",
                )
                return
            message = buffer[position + MESSAGE_PREFIX : position + MESSAGE_PREFIX + length]
            position += MESSAGE_PREFIX + length
            self._message(message)
            if not self.handler.request_streaming:
                self._buffer = b""
                self._remote_ended = self._remote_ended or end_stream
                return
        self._buffer = buffer[position:] if position < end else b""
        if end_stream:
            self._remote_ended = True
            if self._buffer:
                self._fail_early(grpc.StatusCode.UNKNOWN, "unexpected EOF")
            elif not self.handler.request_streaming and not self._started:
                self._fail_early(grpc.StatusCode.UNKNOWN, "EOF")
            else:
                self._wake_reader()

    def _message(self, message: bytes) -> None:
        if self.handler.request_streaming:
            self._requests.append(message)
            self._wake_reader()
        else:
            self._start(message)

    def _wake_reader(self) -> None:
        waiter = self._request_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _request_iterator(self) -> AsyncIterator[Any]:
        deserialize = self.handler.request_deserializer
        while True:
            if self._requests:
                message = self._requests.popleft()
                self.connection.h2.consumed(self.stream_id, MESSAGE_PREFIX + len(message))
                self.connection.schedule_flush()
                yield _decode(deserialize, message)
            elif self._remote_ended:
                return
            else:
                self._request_waiter = self.connection.loop.create_future()
                await self._request_waiter
                self._request_waiter = None

    # -- the handler -------------------------------------------------------------------

    def _start(self, message: bytes | None) -> None:
        """The handler starts once the connection has parsed this read (`begin`)."""
        self._started = True
        self._first_message = message
        self.connection.starting.append(self)

    def begin(self) -> None:
        """Run the handler at once, up to its first real wait; a task takes it on from
        there. A handler that never waits (a serializable read) answers without a task
        or a loop turn: its answer leaves with this read's other output."""
        if self._done:
            return  # ended (reset, refused) before it began
        handler = self._run(self._first_message)
        self._first_message = None  # the handler holds the request from here
        self._task = start_eagerly(self.connection.loop, handler)

    async def _run(self, message: bytes | None) -> None:
        handler = self.handler
        try:
            request: Any
            if message is None:
                request = self._request_iterator()
            else:
                request = _decode(handler.request_deserializer, message)
            if handler.response_streaming:
                behavior = handler.unary_stream if message is not None else handler.stream_stream
                responses = behavior(request, self)
                if hasattr(responses, "__aiter__"):
                    # aclosing: a cancelled call runs the generator's cleanup now, not
                    # whenever the generator is collected.
                    async with contextlib.aclosing(responses):
                        async for response in responses:
                            await self.write(response)
                elif responses is not None:
                    for response in responses:
                        await self.write(response)
                self._finish(grpc.StatusCode.OK, "")
            else:
                behavior = handler.unary_unary if message is not None else handler.stream_unary
                response = behavior(request, self)
                if inspect.isawaitable(response):
                    response = await response
                serialize = handler.response_serializer
                self._answer(serialize(response) if serialize else response)
        except Abort as abort:
            self._finish(abort.code, abort.details)
        except asyncio.CancelledError:
            if self._expired:
                self._finish(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
            else:
                self._finish(grpc.StatusCode.CANCELLED, "Cancelled")
        except Exception as error:
            if self._code is not None and self._code != grpc.StatusCode.OK:
                self._finish(self._code, self._details)
            else:
                log.exception("unexpected error in %s", self.path())
                self._finish(grpc.StatusCode.UNKNOWN, f"Unexpected {type(error)}: {error}")
        finally:
            self._close()

    def _answer(self, payload: bytes) -> None:
        """A unary call's response and OK trailers, in one go."""
        if self._done:
            return
        self._done = True
        h2 = self.connection.h2
        stream_id = self.stream_id
        h2.send_headers(stream_id, RESPONSE_HEADERS)
        h2.send_data(stream_id, b"\x00" + len(payload).to_bytes(4, "big") + payload)
        h2.send_headers(stream_id, OK_TRAILERS, end_stream=True)
        self.connection.server.handled[(id(self.handler), grpc.StatusCode.OK)] += 1
        self.connection.answered()

    async def write(self, message: Any) -> None:
        """Send one response message; waits while the client's window or the socket's
        buffer is full."""
        if self._done:
            raise asyncio.CancelledError()
        serialize = self.handler.response_serializer
        payload = serialize(message) if serialize else message
        h2 = self.connection.h2
        if not self._headers_sent:
            self._headers_sent = True
            h2.send_headers(self.stream_id, RESPONSE_HEADERS)
        h2.send_data(self.stream_id, b"\x00" + len(payload).to_bytes(4, "big") + payload)
        self.connection.schedule_flush()
        await self.connection.writable(self.stream_id)

    def _finish(self, code: grpc.StatusCode, details: str) -> None:
        """End the call with a status (trailers, or trailers-only before any message)."""
        if self._done:
            return
        self._done = True
        self.connection.server.handled[(id(self.handler), code)] += 1
        block = status_block(code, details)
        if not self._headers_sent:
            block = RESPONSE_HEADERS + block
            self._headers_sent = True
        self.connection.h2.send_headers(self.stream_id, block, end_stream=True)
        self.connection.schedule_flush()

    def _fail_early(self, code: grpc.StatusCode, details: str) -> None:
        """End the call from its input side: the handler, if running, is cancelled."""
        self._finish(code, details)
        self._remote_ended = True
        if self._task is not None:
            self._task.cancel()
        else:
            self._close()

    def _expire(self) -> None:
        self._timer = None
        self._expired = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
        else:
            self._finish(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
            self._close()

    def cancel(self) -> None:
        """The stream is gone (client reset, lost connection, server stop): stop at once."""
        self._done = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
        else:
            self._close()

    def _close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake_reader()
        self.connection.call_closed(self)

    def path(self) -> str:
        """The method this call asked for ("/etcdserverpb.KV/Range")."""
        for name, value in self.metadata:
            if name == b":path":
                return value.decode("latin-1")
        return "?"

    # -- the handler's context (what grpc.aio.ServicerContext offers our servicers) -----

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        raise Abort(code, details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def set_details(self, details: str) -> None:
        self._details = details

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - self.connection.loop.time())

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return tuple(
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in self.metadata
            if not name.startswith(b":")
        )

    def cancelled(self) -> bool:
        return self._done and self._task is not None and self._task.cancelled()

    def peer(self) -> str:
        return self.connection.peer

    def auth_context(self) -> dict[str, list[bytes]]:
        """grpc's auth context: on TLS, "transport_security_type" b"ssl", and
        "x509_common_name" when the client presented a certificate the server verified."""
        return self.connection.auth_context


class GrpcConnection(ScratchProtocol):
    """One client TCP connection: bytes to the HTTP/2 core, streams to calls."""

    def __init__(self, server: GrpcH2Server) -> None:
        super().__init__(server.scratch)
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.h2 = H2ServerConnection(self, stream_window=server.stream_window)
        self.calls: dict[int, Call] = {}
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.auth_context: dict[str, list[bytes]] = {}
        self._flush_scheduled = False
        self._write_paused = False
        self._writers: list[asyncio.Future[None]] = []
        self.starting: list[Call] = []  # calls whose handler starts after this read
        self._receiving = False  # inside data_received: its end writes what is queued

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"ipv4:{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.auth_context = tls_auth_context(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self)
        self._flush()

    def data_received(self, data: bytes) -> None:
        self._receiving = True
        try:
            self.h2.receive(data)
            # Handlers start once the read is parsed, not while the HTTP/2 core is in it.
            starting = self.starting
            if starting:
                self.starting = []
                for call in starting:
                    call.begin()
                self.server.after_read()
        finally:
            self._receiving = False
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        self.transport = None
        for call in list(self.calls.values()):
            call.cancel()
        self.calls.clear()
        self._wake_writers()
        self.server.idle_connection()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_writers()

    # -- h2_conn.StreamEvents --------------------------------------------------------------

    def on_headers(self, stream_id: int, headers: Headers, end_stream: bool) -> None:
        path = b""
        method = b""
        timeout: float | None = None
        content_type = b""
        for name, value in headers:
            if name == b":path":
                path = value
            elif name == b":method":
                method = value
            elif name == b"content-type":
                content_type = value
            elif name == b"grpc-timeout":
                timeout = parse_timeout(value)
        if method != b"POST":  # a gRPC call is a POST: anything else, 405 Method Not Allowed
            self.h2.send_headers(stream_id, _status_field(b"405"), end_stream=True)
            return
        if not content_type.startswith(CONTENT_TYPE):
            self.h2.send_headers(stream_id, _status_field(b"415"), end_stream=True)
            return
        handler = self.server.method_handler(path.decode("latin-1"))
        if handler is None:
            self.h2.send_headers(
                stream_id,
                RESPONSE_HEADERS + status_block(grpc.StatusCode.UNIMPLEMENTED, "Method not found!"),
                end_stream=True,
            )
            return
        if self.server.stopping:
            self.h2.reset(stream_id, h2_conn.REFUSED_STREAM)
            return
        self.server.before_call()
        call = Call(self, stream_id, handler, headers, timeout)
        self.calls[stream_id] = call
        if end_stream:
            call.feed(b"", True)

    def on_data(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        call = self.calls.get(stream_id)
        if call is not None:
            call.feed(data, end_stream)

    def on_reset(self, stream_id: int, error_code: int) -> None:
        call = self.calls.pop(stream_id, None)
        if call is not None:
            call.cancel()

    def on_send_ready(self) -> None:
        self._wake_writers()
        if not self.busy:
            self.server.idle_connection()

    # -- output ----------------------------------------------------------------------------

    def answered(self) -> None:
        """A unary call queued its answer. Written at once when the call is this
        connection's only one and no read is being handled (nothing else of this turn
        would join it); else with the rest, at the end of the read or of the turn."""
        if not self._receiving and len(self.calls) <= 1:
            self._flush()
        else:
            self.schedule_flush()

    def schedule_flush(self) -> None:
        """Write what the HTTP/2 core has queued at the end of this loop turn (the answers
        of one turn leave in one write)."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        outbound = self.h2.outbound
        transport = self.transport
        if outbound and transport is not None:
            transport.write(b"".join(outbound) if len(outbound) > 1 else outbound[0])
        outbound.clear()
        if self.h2.closed and transport is not None:
            transport.close()

    async def writable(self, stream_id: int) -> None:
        """Wait while the stream's DATA waits for window or the socket buffer is full."""
        while self.transport is not None and (self._write_paused or self.h2.pending(stream_id)):
            waiter = self.loop.create_future()
            self._writers.append(waiter)
            await waiter

    def _wake_writers(self) -> None:
        writers, self._writers = self._writers, []
        for waiter in writers:
            if not waiter.done():
                waiter.set_result(None)

    def call_closed(self, call: Call) -> None:
        if self.calls.get(call.stream_id) is call:
            del self.calls[call.stream_id]
        if not self.busy:
            self.server.idle_connection()

    @property
    def busy(self) -> bool:
        """A call runs, or an answer still waits for the client's window."""
        return bool(self.calls or self.h2.streams) and self.transport is not None

    def close(self) -> None:
        if self.transport is not None:
            self._flush()
            if self.transport is not None:
                self.transport.close()


def tls_auth_context(transport: asyncio.BaseTransport) -> dict[str, list[bytes]]:
    """What grpc's auth context says of a connection: nothing on plain TCP; on TLS the
    security type and, for a client certificate that was verified, its subject's common
    name (getpeercert() gives the subject only for a verified certificate)."""
    if transport.get_extra_info("ssl_object") is None:
        return {}
    context: dict[str, list[bytes]] = {"transport_security_type": [b"ssl"]}
    certificate = transport.get_extra_info("peercert") or {}
    for rdn in certificate.get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                context.setdefault("x509_common_name", []).append(value.encode())
    return context


def _status_field(status: bytes) -> bytes:
    """A ":status" header field as a literal with the static name (index 8)."""
    return b"\x08" + _hpack_int(len(status), 7, 0) + status


LISTEN_BACKLOG = 100  # asyncio's default backlog


def _listening_sockets(host: str, port: int) -> list[socket.socket]:
    """TCP sockets bound to every address of (host, port) and listening, as asyncio's
    create_server makes them, but listening at once (asyncio would listen only once it
    starts serving)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            listening = socket.socket(family, kind, proto)
            sockets.append(listening)
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            listening.bind(address)
            listening.listen(LISTEN_BACKLOG)
            listening.setblocking(False)
    except OSError:
        for listening in sockets:
            listening.close()
        raise
    return sockets


class GrpcH2Server:
    """The server: listening sockets, connections, and the method table.

    Used as grpc.aio.Server is: `add_generic_rpc_handlers`, `add_insecure_port(target)`,
    `await start()`, `await stop(grace)`. `stop` refuses new calls and connections at
    once, lets calls in progress finish for `grace` seconds, then cancels the rest.

    With `serve_http1(handler)` called before `start`, the ports are shared as etcd's
    client port is (etcdspec.impl.rpc.port_sharing): connections that do not open with
    the HTTP/2 preface are HTTP/1.x (etcdspec.impl.rpc.http1), served by `handler` with
    the same before_call/after_read hooks as calls. Without it, every connection is
    HTTP/2 from its first byte, as before.
    """

    def __init__(self, max_receive_bytes: int) -> None:
        self.max_receive_bytes = max_receive_bytes
        self.stream_window = max(h2_conn.STREAM_WINDOW, 2 * (max_receive_bytes + MESSAGE_PREFIX))
        self.connections: set[GrpcConnection] = set()
        self.scratch = new_scratch()  # every connection's reads (scratch_recv)
        self.stopping = False
        # Run before each call's handler starts (the member catches up its state machine),
        # and after the calls a read completed have begun (the member handles its Readies).
        self.before_call: Callable[[], None] = lambda: None
        self.after_read: Callable[[], None] = lambda: None
        self._generic: list[grpc.GenericRpcHandler] = []
        self._methods: dict[str, grpc.RpcMethodHandler | None] = {}
        self._targets: list[str] = []
        self._tls: dict[str, ssl.SSLContext] = {}  # targets served over TLS
        self._listeners: list[asyncio.Server] = []
        self._idle: asyncio.Event | None = None
        self._http1: HttpHandler | None = None
        self._http1_limits = Http1Limits()
        self._http1_hooks = Http1Hooks()
        self._undecided: set[FirstBytes] = set()  # connections whose first bytes are due
        # Calls ended, by method handler (its id: cheap to hash) and status (`handled_counts`).
        self.handled: Counter[tuple[int, grpc.StatusCode]] = Counter()

    def serve_http1(self, handler: HttpHandler, limits: Http1Limits | None = None) -> None:
        """Serve HTTP/1.x on the same ports with `handler` (call before `start`)."""
        self._http1 = handler
        if limits is not None:
            self._http1_limits = limits

    def _new_connection(self) -> asyncio.BaseProtocol:
        if self._http1 is None:
            return GrpcConnection(self)
        return FirstBytes(lambda: GrpcConnection(self), self._new_http1, self._undecided)

    def _new_http1(self) -> Http1Connection:
        assert self._http1 is not None
        hooks = self._http1_hooks
        hooks.before_call = self.before_call
        hooks.after_read = self.after_read
        return Http1Connection(self._http1, self._http1_limits, hooks)

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._generic.extend(handlers)
        self._methods.clear()

    def add_insecure_port(self, target: str) -> int:
        """Listen on `target` ("host:port") once started; returns the port. Port 0 (any
        free port) is refused: this server binds in `start`, so it could not say which."""
        port = int(target.rsplit(":", 1)[1])
        if port == 0:
            raise ValueError(f"{target}: give a port; GrpcH2Server does not pick one")
        self._targets.append(target)
        return port

    def add_secure_port(self, target: str, context: ssl.SSLContext) -> int:
        """As `add_insecure_port`, every connection served over TLS with `context` (its
        ALPN should offer h2, and http/1.1 when HTTP/1.x is served too)."""
        port = self.add_insecure_port(target)
        self._tls[target] = context
        return port

    def handled_counts(self) -> list[tuple[str, grpc.RpcMethodHandler, grpc.StatusCode, int]]:
        """(path, handler, status, calls) of every method and status a call ended with,
        by path then status: what a grpc_server_handled_total metric counts."""
        known = {id(h): (p, h) for p, h in self._methods.items() if h is not None}
        rows = [
            (*known[handler_id], code, count)
            for (handler_id, code), count in self.handled.items()
            if handler_id in known  # a call's handler is cached in _methods while it runs
        ]
        return sorted(rows, key=lambda row: (row[0], row[2].value[0]))

    def method_handler(self, path: str) -> grpc.RpcMethodHandler | None:
        """The handler serving `path` ("/etcdserverpb.KV/Range"), or None."""
        try:
            return self._methods[path]
        except KeyError:
            pass
        found = None
        details = CallDetails(path, ())
        for generic in self._generic:
            found = generic.service(details)
            if found is not None:
                break
        self._methods[path] = found
        return found

    async def start(self, accepting: bool = True) -> None:
        """Bind and listen on every target; raises RuntimeError naming the target that
        cannot be bound. With `accepting` False, the sockets listen (a client's TCP
        connection completes, in the kernel's backlog) but no connection is accepted, so
        no call or HTTP request is answered, until `start_accepting()`: as etcd's client
        port before its member is ready (a caller waits until its own deadline)."""
        loop = asyncio.get_running_loop()
        for target in self._targets:
            host, port = target.rsplit(":", 1)
            try:
                sockets = _listening_sockets(host.strip("[]"), int(port))
            except OSError as error:
                await self._close_listeners()
                raise RuntimeError(f"Failed to bind to address {target}: {error}") from error
            for listening in sockets:
                listener = await loop.create_server(
                    self._new_connection,
                    sock=listening,
                    ssl=self._tls.get(target),
                    start_serving=accepting,
                )
                self._listeners.append(listener)

    async def start_accepting(self) -> None:
        """Accept connections on every target (those waiting in the backlog first); does
        nothing once accepting or stopping."""
        if self.stopping:
            return
        for listener in self._listeners:
            await listener.start_serving()

    async def stop(self, grace: float | None) -> None:
        """Refuse new calls, let running ones finish within `grace` s, then cancel them."""
        self.stopping = True
        await self._close_listeners()
        for connection in list(self.connections):
            connection.h2.goaway()
            connection.schedule_flush()
        if grace and any(c.busy for c in self.connections):
            self._idle = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), grace)
        for connection in list(self.connections):
            for call in list(connection.calls.values()):
                call.cancel()
        await asyncio.sleep(0)  # let cancelled handlers run their cleanup
        for connection in list(self.connections):
            connection.close()
        for http1 in list(self._http1_hooks.connections):
            http1.close()
        for undecided in list(self._undecided):
            undecided.close()

    def idle_connection(self) -> None:
        if self._idle is not None and not any(c.busy for c in self.connections):
            self._idle.set()

    async def _close_listeners(self) -> None:
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener.close()
        for listener in listeners:
            await listener.wait_closed()

"""The HTTP/1.1 layer and the shared port, over real loopback sockets.

A GrpcH2Server with `serve_http1(handler)` (a toy handler, no etcd) is driven with raw
bytes: keep-alive, pipelining, Content-Length and chunked bodies, streamed answers (and a
client leaving one), HTTP/1.0, bad requests (400 and close), heads and bodies above the
limits (431, 413), a handler's crash (500); and gRPC calls on the same port, with the
HTTP/2 preface arriving in pieces, while HTTP/1.1 connections are open.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from etcdspec.impl.rpc.grpc_h2 import GrpcH2Server
from etcdspec.impl.rpc.http1 import Http1Limits, HttpRequest, HttpResponse
from etcdspec.impl.rpc.port_sharing import H2_PREFACE
from etcdspec.impl.tools.launcher import free_ports

T = TypeVar("T")
WAIT_S = 10.0
LIMITS = Http1Limits(max_header_bytes=4096, max_body_bytes=1000)


@dataclass
class Toy:
    """The handler: /echo answers the body, /stream streams until released, /boom raises."""

    requests: list[HttpRequest] = field(default_factory=list)
    release: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    stream_closed: asyncio.Event = field(default_factory=asyncio.Event)
    hooks: list[str] = field(default_factory=list)
    server: GrpcH2Server | None = None

    async def handle(self, request: HttpRequest) -> HttpResponse:
        self.requests.append(request)
        if request.path == "/echo":
            headers = (("X-Method", request.method), ("X-Query", repr(request.query)))
            return HttpResponse(200, headers, request.body)
        if request.path == "/stream":
            return HttpResponse(200, (("Content-Type", "application/json"),), stream=self._chunks())
        if request.path == "/boom":
            raise RuntimeError("the handler broke")
        return HttpResponse(404, (), b"no such path\n")

    async def _chunks(self) -> AsyncGenerator[bytes, None]:
        try:
            while (chunk := await self.release.get()) is not None:
                yield chunk
        finally:
            self.stream_closed.set()


def echo_unary(request: bytes, context: Any) -> bytes:
    return b"grpc:" + request


@contextlib.asynccontextmanager
async def shared_server(limits: Http1Limits = LIMITS) -> AsyncIterator[tuple[int, Toy]]:
    port = free_ports(1)[0]
    toy = Toy()
    server = GrpcH2Server(1024 * 1024)
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "test.Echo", {"Unary": grpc.unary_unary_rpc_method_handler(echo_unary)}
            )
        ]
    )
    server.serve_http1(toy.handle, limits)
    toy.server = server
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    server.before_call = lambda: toy.hooks.append("before_call")
    server.after_read = lambda: toy.hooks.append("after_read")
    try:
        yield port, toy
    finally:
        await server.stop(grace=0.1)


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, WAIT_S)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


async def read_reply(reader: asyncio.StreamReader) -> Reply:
    """One response: status line, headers, then a Content-Length, chunked or to-close body."""
    head = await within(reader.readuntil(b"\r\n\r\n"))
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await within(reader.readexactly(int(headers["content-length"])))
    elif headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int((await within(reader.readline())).strip(), 16)
            chunk = await within(reader.readexactly(size + 2))
            if size == 0:
                break
            body += chunk[:-2]
    else:
        body = await within(reader.read())
    return Reply(status, headers, body)


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await within(asyncio.open_connection("127.0.0.1", port))


async def closed(reader: asyncio.StreamReader) -> bool:
    """True once the server has closed the connection (EOF with nothing more)."""
    return await within(reader.read()) == b""


def test_keep_alive_serves_several_requests_on_one_connection() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, toy):
            reader, writer = await connect(port)
            for n in range(3):
                writer.write(
                    b"POST /echo?n=%d HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" % n
                )
                reply = await read_reply(reader)
                assert (reply.status, reply.body) == (200, b"hello")
                assert reply.headers["x-query"] == repr({"n": [str(n)]})
            assert [r.method for r in toy.requests] == ["POST"] * 3
            assert toy.hooks[:2] == ["before_call", "after_read"]
            writer.close()

    run(scenario)


def test_pipelined_requests_are_answered_in_order() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, _toy):
            reader, writer = await connect(port)
            writer.write(
                b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
                b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo"
                b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            replies = [await read_reply(reader) for _ in range(3)]
            assert [(r.status, r.body) for r in replies] == [
                (200, b"one"),
                (200, b"two"),
                (404, b"no such path\n"),
            ]
            writer.close()

    run(scenario)


def test_a_chunked_request_body_arrives_whole() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, _toy):
            reader, writer = await connect(port)
            writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            writer.write(b"4\r\nabcd\r\n")
            await asyncio.sleep(0)
            writer.write(b"3\r\nefg\r\n0\r\n\r\n")
            reply = await read_reply(reader)
            assert (reply.status, reply.body) == (200, b"abcdefg")
            writer.close()

    run(scenario)


def test_a_streamed_answer_is_chunked_and_each_chunk_leaves_when_produced() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, toy):
            reader, writer = await connect(port)
            writer.write(b"POST /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            await toy.release.put(b'{"n":1}\n')
            head = await within(reader.readuntil(b"\r\n\r\n"))
            assert b"Transfer-Encoding: chunked" in head
            assert await within(reader.readline()) == b"8\r\n"
            assert await within(reader.readline()) == b'{"n":1}\n'
            await toy.release.put(b'{"n":2}\n')
            await toy.release.put(None)
            rest = await within(reader.readuntil(b"0\r\n\r\n"))
            assert rest == b'\r\n8\r\n{"n":2}\n\r\n0\r\n\r\n'
            # keep-alive after a stream
            writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
            assert (await read_reply(reader)).body == b"ok"
            writer.close()

    run(scenario)


def test_a_client_leaving_a_stream_ends_it() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, toy):
            reader, writer = await connect(port)
            writer.write(b"POST /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            await toy.release.put(b"first\n")
            await within(reader.readuntil(b"first\n"))
            writer.close()
            await within(toy.stream_closed.wait())

    run(scenario)


def test_http_1_0_gets_an_answer_and_the_connection_closes() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, _toy):
            reader, writer = await connect(port)
            writer.write(b"GET /echo HTTP/1.0\r\n\r\n")
            reply = await read_reply(reader)
            assert reply.status == 200
            assert await closed(reader)
            writer.close()

    run(scenario)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
        (b"GET /echo HTTP/1.1\r\nNo-Host-Header: x\r\n\r\n", 400),
        (b"GET /echo HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n", 400),
        (b"GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 5000 + b"\r\n\r\n", 431),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n", 413),
        (
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"200\r\n"
            + b"a" * 512
            + b"\r\n"
            + b"200\r\n"
            + b"a" * 512
            + b"\r\n",
            413,
        ),
    ],
    ids=[
        "garbage",
        "no-host",
        "bad-header",
        "bad-length",
        "head-too-big",
        "length-too-big",
        "chunks-too-big",
    ],
)
def test_a_request_that_cannot_be_served_is_refused_and_the_connection_closed(
    request_bytes: bytes, status: int
) -> None:
    async def scenario() -> None:
        async with shared_server() as (port, toy):
            reader, writer = await connect(port)
            writer.write(request_bytes)
            reply = await read_reply(reader)
            assert reply.status == status
            assert reply.headers["connection"] == "close"
            assert await closed(reader)
            assert toy.requests == []
            writer.close()

    run(scenario)


def test_a_handler_that_raises_is_answered_500_and_the_connection_goes_on() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, _toy):
            reader, writer = await connect(port)
            writer.write(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await read_reply(reader)).status == 500
            writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await read_reply(reader)).status == 200
            writer.close()

    run(scenario)


def test_grpc_and_http1_share_the_port() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, _toy):
            reader, writer = await connect(port)
            writer.write(b"G")  # one byte that is not "P" decides: HTTP/1
            await asyncio.sleep(0.05)
            writer.write(b"ET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await read_reply(reader)).status == 200
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                unary = channel.unary_unary("/test.Echo/Unary")
                assert await within(unary(b"hi")) == b"grpc:hi"
            writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await read_reply(reader)).status == 200
            writer.close()

    run(scenario)


def test_the_http2_preface_in_pieces_still_reaches_http2() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, toy):
            reader, writer = await connect(port)
            for piece in (H2_PREFACE[:3], H2_PREFACE[3:10], H2_PREFACE[10:]):
                writer.write(piece)
                await asyncio.sleep(0.02)
            writer.write(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # an empty SETTINGS frame
            frame = await within(reader.readexactly(9))
            assert frame[3] == 0x04  # the server's SETTINGS: HTTP/2 answered
            assert toy.requests == []
            writer.close()

    run(scenario)


def test_a_connection_closed_before_its_first_bytes_decide_is_dropped() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, _toy):
            for opening in (b"", b"PRI * HT"):
                reader, writer = await connect(port)
                writer.write(opening)
                writer.write_eof()
                assert await closed(reader)
                writer.close()
            reader, writer = await connect(port)  # the server serves on
            writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await read_reply(reader)).status == 200
            writer.close()

    run(scenario)


def test_stop_closes_http1_connections_and_undecided_ones() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, toy):
            streaming, stream_writer = await connect(port)
            stream_writer.write(b"POST /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            await toy.release.put(b"first\n")
            await within(streaming.readuntil(b"first\n"))
            undecided, undecided_writer = await connect(port)
            undecided_writer.write(b"PRI * HTTP/2")  # a preface not yet whole
            await asyncio.sleep(0.05)
            assert toy.server is not None
            await within(toy.server.stop(grace=0.1))
            assert await closed(undecided)
            await within(streaming.read())  # the rest of the stream, then EOF
            await within(toy.stream_closed.wait())
            stream_writer.close()
            undecided_writer.close()

    run(scenario)


PIPELINE = (
    b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nfirst"
    b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"3\r\nsec\r\n3\r\nond\r\n0\r\n\r\n"
    b"GET /echo?third HTTP/1.1\r\nHost: x\r\n\r\n"
    b"GET /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(PIPELINE) - 1), max_size=8, unique=True))
@example(cuts=[1])  # "P": a prefix of the HTTP/2 preface, so the choice waits for "OST"
@example(cuts=[1, 2, 3, 60, 61])
def test_requests_split_anywhere_get_the_same_answers(cuts: list[int]) -> None:
    """The same pipelined requests, written in pieces cut at any points (the first cut
    may fall inside the bytes that choose the protocol), get the same four answers."""
    bounds = [0, *sorted(cuts), len(PIPELINE)]

    async def scenario() -> None:
        async with shared_server() as (port, _toy):
            reader, writer = await connect(port)
            for start, end in itertools.pairwise(bounds):
                writer.write(PIPELINE[start:end])
                await writer.drain()
                await asyncio.sleep(0.001)
            replies = [await read_reply(reader) for _ in range(4)]
            assert [(r.status, r.body) for r in replies] == [
                (200, b"first"),
                (200, b"second"),
                (200, b""),
                (404, b"no such path\n"),
            ]
            assert await closed(reader)
            writer.close()

    run(scenario)


def test_head_gets_the_head_alone_and_the_connection_goes_on() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, toy):
            reader, writer = await connect(port)
            writer.write(b"HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            head = await within(reader.readuntil(b"\r\n\r\n"))
            assert head.startswith(b"HTTP/1.1 200 ")
            writer.write(b"HEAD /missing HTTP/1.1\r\nHost: x\r\n\r\n")
            head = await within(reader.readuntil(b"\r\n\r\n"))
            assert head.startswith(b"HTTP/1.1 404 ") and b"Content-Length: 13\r\n" in head
            writer.write(b"HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            head = await within(reader.readuntil(b"\r\n\r\n"))
            assert head.startswith(b"HTTP/1.1 200 ")
            writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
            reply = await read_reply(reader)  # nothing of a body came before it
            assert (reply.status, reply.body) == (200, b"ok")
            assert [r.method for r in toy.requests] == ["HEAD", "HEAD", "HEAD", "POST"]
            writer.close()

    run(scenario)


def test_a_client_expecting_100_continue_gets_it_before_sending_its_body() -> None:
    async def scenario() -> None:
        async with shared_server() as (port, _toy):
            reader, writer = await connect(port)
            writer.write(
                b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
            )
            interim = await within(reader.readuntil(b"\r\n\r\n"))
            assert interim.startswith(b"HTTP/1.1 100 ")
            writer.write(b"body")
            reply = await read_reply(reader)
            assert (reply.status, reply.body) == (200, b"body")
            # a body above the limit is refused instead, before the client sends it
            writer.write(
                b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n"
            )
            assert (await read_reply(reader)).status == 413
            writer.close()

    run(scenario)

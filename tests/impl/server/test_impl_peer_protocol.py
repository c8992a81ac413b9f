"""The peer transport's framing without sockets: inbound bytes parsed however they are
split into reads, bad frames closing the connection, and the sender's coalescing (the
frames of one loop turn leave in one write) and its limits (a peer that does not read
gets nothing more past WRITE_BUFFER_LIMIT; at most QUEUE_LIMIT frames wait)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from etcdspec.impl.server import peer


class _FakeTransport(asyncio.Transport):
    def __init__(self, buffered: int = 0) -> None:
        super().__init__()
        self.closed = False
        self.writes: list[bytes] = []
        self.buffered = buffered

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))


def _owner() -> tuple[peer.PeerTransport, list[tuple[int, bytes]], list[dict[str, Any]]]:
    got: list[tuple[int, bytes]] = []
    seen: list[dict[str, Any]] = []
    owner = peer.PeerTransport(
        2,
        "127.0.0.1",
        0,
        {},
        lambda from_id, payload: got.append((from_id, payload)),
        on_attributes=lambda from_id, attributes: seen.append(attributes),
    )
    return owner, got, seen


def _stream(payloads: list[bytes]) -> bytes:
    attributes = json.dumps({"name": "m1"}).encode()
    return (
        peer.encode_hello(7)
        + peer.encode_frame(attributes)
        + b"".join(peer.encode_frame(p) for p in payloads)
    )


@given(
    st.lists(st.binary(max_size=40), max_size=8),
    st.lists(st.integers(1, 30), min_size=1, max_size=60),
)
def test_inbound_frames_are_delivered_in_order_however_the_bytes_are_split(
    payloads: list[bytes], cuts: list[int]
) -> None:
    owner, got, seen = _owner()
    inbound = peer._Inbound(owner)
    inbound.connection_made(_FakeTransport())
    data = _stream(payloads)
    pos = 0
    for cut in cuts * (len(data) // sum(cuts) + 1):
        inbound.data_received(data[pos : pos + cut])
        pos += cut
        if pos >= len(data):
            break
    assert got == [(7, p) for p in payloads]
    assert seen == [{"name": "m1"}]
    assert owner.stats.received_frames == len(payloads)
    assert not inbound.buffer


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"HTTP/1.1 GET /", "expected"),
        (peer.encode_hello(7) + peer.LENGTH.pack(peer.MAX_FRAME_BYTES + 1), "limit"),
        (peer.encode_hello(7) + peer.encode_frame(b"{not json"), "Expecting"),
    ],
    ids=["stranger", "oversize frame", "bad attributes"],
)
def test_a_bad_inbound_stream_closes_the_connection(
    data: bytes, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    owner, got, _ = _owner()
    inbound = peer._Inbound(owner)
    transport = _FakeTransport()
    inbound.connection_made(transport)
    inbound.data_received(data)
    assert transport.closed and not got
    assert problem in caplog.text


def test_blocked_sender_frames_are_counted_and_dropped() -> None:
    owner, got, _ = _owner()
    owner.blocked = frozenset({7})
    inbound = peer._Inbound(owner)
    inbound.connection_made(_FakeTransport())
    inbound.data_received(_stream([b"a", b"b"]))
    assert not got and owner.stats.dropped_frames == 2


class _FakeWriter:
    def __init__(self, transport: _FakeTransport) -> None:
        self.transport = transport

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def is_closing(self) -> bool:
        return self.transport.is_closing()


def _sender(buffered: int = 0) -> tuple[peer._PeerSender, _FakeTransport]:
    sender = peer._PeerSender(1, 2, "127.0.0.1", 0, peer.TransportStats(), b"{}")
    transport = _FakeTransport(buffered)
    sender.writer = _FakeWriter(transport)  # type: ignore[assignment]
    return sender, transport


def test_the_frames_of_one_loop_turn_leave_in_one_write() -> None:
    async def run() -> _FakeTransport:
        sender, transport = _sender()
        for payload in (b"a", b"bb", b"ccc"):
            sender.enqueue(payload)
        assert transport.writes == []  # not before the turn ends
        await asyncio.sleep(0)
        sender.enqueue(b"d")
        await asyncio.sleep(0)
        return transport

    transport = asyncio.run(run())
    assert transport.writes == [
        b"".join(peer.encode_frame(p) for p in (b"a", b"bb", b"ccc")),
        peer.encode_frame(b"d"),
    ]


def test_a_peer_that_does_not_read_gets_nothing_past_the_buffer_limit() -> None:
    async def run() -> tuple[_FakeTransport, peer.TransportStats]:
        sender, transport = _sender(buffered=peer.WRITE_BUFFER_LIMIT + 1)
        sender.enqueue(b"a")
        await asyncio.sleep(0)
        return transport, sender.stats

    transport, stats = asyncio.run(run())
    assert transport.writes == [] and stats.dropped_frames == 1


def test_at_most_queue_limit_frames_wait_for_a_connection() -> None:
    sender = peer._PeerSender(1, 2, "127.0.0.1", 0, peer.TransportStats(), b"{}")
    for _ in range(peer.QUEUE_LIMIT + 3):
        sender.enqueue(b"x")  # not connected: nothing is scheduled, frames wait
    assert len(sender.pending) == peer.QUEUE_LIMIT
    assert sender.stats.dropped_frames == 3


class _StreamTransportNotSubclassed(asyncio.BaseTransport):
    """A stream transport that is not an asyncio.Transport subclass, as uvloop's is not."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_inbound_accepts_a_stream_transport_of_another_event_loop() -> None:
    owner, got, _ = _owner()
    inbound = peer._Inbound(owner)
    transport = _StreamTransportNotSubclassed()
    inbound.connection_made(transport)
    inbound.data_received(_stream([b"x"]))
    assert got == [(7, b"x")]
    assert not transport.closed

"""The peer transport: framing round trips, delivery in order, reconnect after a restart,
and the metrics endpoint's text format."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from etcdspec.impl.server import peer
from etcdspec.impl.server.metrics import Metrics, MetricsServer, parse_prometheus
from etcdspec.impl.tools.launcher import free_port, free_ports


@pytest.mark.parametrize("payload", [b"", b"x", bytes(range(256)) * 40])
def test_frame_round_trip(payload: bytes) -> None:
    async def run() -> bytes:
        reader = asyncio.StreamReader()
        reader.feed_data(peer.encode_frame(payload))
        reader.feed_eof()
        return await peer.read_frame(reader)

    assert asyncio.run(run()) == payload


def test_hello_rejects_a_stranger() -> None:
    assert peer.decode_hello(peer.encode_hello(0xABCDEF)) == 0xABCDEF
    with pytest.raises(peer.FrameError, match="expected"):
        peer.decode_hello(b"HTTP" + bytes(9))


async def _wait_for(condition: object, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(0.01)


def test_messages_arrive_in_order_and_after_a_restart() -> None:
    async def run() -> None:
        port_a, port_b = free_ports(2)
        peers = {1: ("127.0.0.1", port_a), 2: ("127.0.0.1", port_b)}
        got_b: list[tuple[int, bytes]] = []
        a = peer.PeerTransport(1, "127.0.0.1", port_a, peers, lambda f, p: None)
        b = peer.PeerTransport(2, "127.0.0.1", port_b, peers, lambda f, p: got_b.append((f, p)))
        await a.start()
        await b.start()
        try:
            for index in range(100):
                a.send(2, f"m{index}".encode())
            await _wait_for(lambda: len(got_b) == 100)
            assert got_b == [(1, f"m{index}".encode()) for index in range(100)]
            await b.close()
            b = peer.PeerTransport(2, "127.0.0.1", port_b, peers, lambda f, p: got_b.append((f, p)))
            await b.start()

            def resent() -> bool:
                a.send(2, b"again")
                return (1, b"again") in got_b

            await _wait_for(resent)
            a.send(3, b"nobody")  # unknown peer: dropped, never raises
            assert a.stats.dropped_frames >= 1
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())


@contextlib.asynccontextmanager
async def _two_transports() -> AsyncIterator[
    tuple[peer.PeerTransport, peer.PeerTransport, list[bytes]]
]:
    """Transports of members 1 and 2 on free loopback ports, started, closed after; the
    list collects what 2 receives."""
    port_a, port_b = free_ports(2)
    peers = {1: ("127.0.0.1", port_a), 2: ("127.0.0.1", port_b)}
    got_b: list[bytes] = []
    a = peer.PeerTransport(1, "127.0.0.1", port_a, peers, lambda f, p: None)
    b = peer.PeerTransport(2, "127.0.0.1", port_b, peers, lambda f, p: got_b.append(p))
    await a.start()
    await b.start()
    try:
        yield a, b, got_b
    finally:
        await a.close()
        await b.close()


def test_flush_writes_queued_frames_before_the_loop_turn_ends() -> None:
    """flush() hands the frames to the socket at once (the member calls it before it
    applies), where send() alone leaves them for the end of the loop turn."""

    async def run() -> None:
        async with _two_transports() as (a, _, got_b):
            await _wait_for(lambda: (a.send(2, b"hello"), got_b)[1] != [])
            await asyncio.sleep(0)  # the last hello's end-of-turn write
            sent = a.stats.sent_frames
            a.send(2, b"queued")
            assert a.stats.sent_frames == sent  # not yet: at the end of this turn
            a.flush()
            assert a.stats.sent_frames == sent + 1  # written now, in this turn
            await _wait_for(lambda: b"queued" in got_b)

    asyncio.run(run())


def test_metrics_endpoint_serves_prometheus_text() -> None:
    async def run() -> dict[str, float]:
        metrics = Metrics(proposals_committed=7, leader_changes_seen=2, has_leader=True)
        port = free_port()
        server = MetricsServer(metrics, "127.0.0.1", port)
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
            await writer.drain()
            raw = await reader.read()
            writer.close()
        finally:
            await server.close()
        head, _, body = raw.decode().partition("\r\n\r\n")
        assert head.startswith("HTTP/1.1 200")
        return parse_prometheus(body)

    samples = asyncio.run(run())
    assert samples["etcd_server_proposals_committed_total"] == 7
    assert samples["etcd_server_leader_changes_seen_total"] == 2
    assert samples["etcd_server_has_leader"] == 1


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, frozenset()),
        ('{"version": 1, "blocked_peers": [5, 7]}', frozenset({5, 7})),
        ('{"version": 1, "blocked_peers": []}', frozenset()),
    ],
)
def test_fault_file_names_the_blocked_peers(
    tmp_path: Path, content: str | None, expected: frozenset[int]
) -> None:
    path = tmp_path / "faults.json"
    if content is not None:
        path.write_text(content)
    assert peer.read_fault_file(str(path)) == expected


@pytest.mark.parametrize(
    "content", ["not json", '{"version": 2}', '{"version": 1, "blocked_peers": ["a"]}']
)
def test_bad_fault_file_is_refused_with_its_name(tmp_path: Path, content: str) -> None:
    path = tmp_path / "faults.json"
    path.write_text(content)
    with pytest.raises(peer.FrameError, match=r"faults\.json"):
        peer.read_fault_file(str(path))


def test_blocked_peer_is_neither_sent_to_nor_heard() -> None:
    async def run() -> tuple[list[bytes], int]:
        async with _two_transports() as (a, b, got_b):
            b.blocked = frozenset({1})
            a.send(2, b"dropped by the receiver")
            a.blocked = frozenset({2})
            a.send(2, b"dropped by the sender")
            await _wait_for(lambda: b.stats.dropped_frames >= 1)
            a.blocked = b.blocked = frozenset()
            a.send(2, b"heard")
            await _wait_for(lambda: got_b == [b"heard"])
            return got_b, a.stats.dropped_frames

    got, dropped_by_sender = asyncio.run(run())
    assert got == [b"heard"] and dropped_by_sender >= 1

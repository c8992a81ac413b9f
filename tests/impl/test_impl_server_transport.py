"""The peer transport: framing round trips, delivery in order, reconnect after a restart,
and the metrics endpoint's text format."""

from __future__ import annotations

import asyncio

import pytest
from etcdspec.impl import peer
from etcdspec.impl.launcher import free_port, free_ports
from etcdspec.impl.metrics import Metrics, MetricsServer, parse_prometheus


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
        assert head.startswith("HTTP/1.0 200")
        return parse_prometheus(body)

    samples = asyncio.run(run())
    assert samples["etcd_server_proposals_committed_total"] == 7
    assert samples["etcd_server_leader_changes_seen_total"] == 2
    assert samples["etcd_server_has_leader"] == 1

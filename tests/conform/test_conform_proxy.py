"""The peer proxy: it tells members apart by their first bytes (our hello frame, etcd's
X-Server-From header), cuts and heals a pair symmetrically, and cuts unidentified
connections only when their destination is isolated. Plain sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from etcdspec.conform.proxy import Network, PeerProxy, identify
from etcdspec.impl.tools import launcher
from etcdspec.impl.tools.launcher import free_ports

HELLO_A = struct.pack(">4sBQ", b"ETSP", 1, 0xA1)
HTTP_A = b"GET /raftstream/message/b2 HTTP/1.1\r\nHost: x\r\nX-Server-From: a1\r\n\r\n"
HTTP_ANON = b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        (HELLO_A, 0xA1),
        (HELLO_A + b"\x00\x00\x00\x02{}", 0xA1),
        (HTTP_A, 0xA1),
        (b"POST /raft HTTP/1.1\r\nx-server-from: 8e9e05c52164694d\r\n\r\n", 0x8E9E05C52164694D),
        (HTTP_ANON, None),
        (b"\x16\x03\x01garbage", None),
    ],
)
def test_identify_reads_the_sender_member_id(first: bytes, expected: int | None) -> None:
    assert identify(first) == expected


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(4096):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _exchange(port: int, first: bytes, payload: bytes = b"ping") -> bytes:
    """Connect through the proxy, send first bytes + payload, read the echo ('' if cut)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(first + payload)
        await writer.drain()
        want = len(first) + len(payload)
        got = b""
        while len(got) < want:
            chunk = await asyncio.wait_for(reader.read(want - len(got)), 3.0)
            if not chunk:
                break
            got += chunk
        return got
    except ConnectionError:
        return b""
    finally:
        writer.close()


def _with_proxy(body: Callable[[Network, int], Awaitable[None]]) -> None:
    async def main() -> None:
        backend_port, proxy_port = free_ports(2)
        server = await asyncio.start_server(_echo, "127.0.0.1", backend_port)
        network = Network(names={0xA1: "a"})
        proxy = PeerProxy("b", proxy_port, backend_port, network)
        await proxy.start()
        try:
            await body(network, proxy_port)
        finally:
            await proxy.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


@pytest.mark.parametrize("first", [HELLO_A, HTTP_A], ids=["hello", "x-server-from"])
def test_cut_pair_refuses_then_heal_restores(first: bytes) -> None:
    async def body(network: Network, port: int) -> None:
        assert await _exchange(port, first) == first + b"ping"
        network.cut("b", "a")
        assert await _exchange(port, first) == b""
        assert await _exchange(port, HTTP_ANON) == HTTP_ANON + b"ping"  # b not isolated
        network.heal()
        assert await _exchange(port, first) == first + b"ping"

    _with_proxy(body)


def test_cut_closes_an_open_connection_of_the_pair() -> None:
    async def body(network: Network, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(HELLO_A + b"x")
        await writer.drain()
        assert await asyncio.wait_for(reader.readexactly(len(HELLO_A) + 1), 3.0)
        for _ in range(50):
            if network.connections:
                break
            await asyncio.sleep(0.01)
        assert network.cut("a", "b") == 1
        assert await asyncio.wait_for(reader.read(10), 3.0) == b""
        writer.close()

    _with_proxy(body)


def test_unidentified_source_is_cut_when_destination_isolated() -> None:
    async def body(network: Network, port: int) -> None:
        network.isolate("b")
        assert await _exchange(port, HTTP_ANON) == b""
        assert await _exchange(port, HELLO_A) == b""
        network.heal()
        assert await _exchange(port, HTTP_ANON) == HTTP_ANON + b"ping"
        assert network.refused == 2

    _with_proxy(body)


def test_isolating_the_source_cuts_it_everywhere() -> None:
    async def body(network: Network, port: int) -> None:
        network.isolate("a")
        assert await _exchange(port, HELLO_A) == b""
        assert await _exchange(port, HTTP_ANON) == HTTP_ANON + b"ping"

    _with_proxy(body)


def test_a_proxy_port_taken_since_it_was_planned_is_planned_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between planning a port (bound, then released) and the proxy's bind, another
    process may take it (CI: a side-by-side run's member). The cluster's start plans that
    proxy's port again, as no member has been told it yet."""
    from etcdspec.conform import targets

    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    replanned: list[int] = []

    def plan_again(count: int) -> list[int]:
        replanned.extend(free_ports(count))
        return replanned[-count:]

    monkeypatch.setattr(targets.launcher, "free_ports", plan_again)
    cluster = targets.LocalCluster("ours", ["true"], tmp_path)
    cluster.network = Network()
    member = launcher.MemberPlan("m1", 1, 2, 3, str(tmp_path / "m1.data"))

    async def start() -> None:
        proxy = await cluster._start_proxy(member, taken)
        try:
            assert proxy.listen_port == replanned[0] != taken
            assert cluster.proxy_ports["m1"] == replanned[0]
        finally:
            await proxy.close()

    try:
        asyncio.run(start())
    finally:
        held.close()

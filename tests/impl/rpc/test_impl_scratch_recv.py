"""ScratchProtocol over real loopback sockets: connections that share one scratch buffer
each get exactly their own bytes, in order, however the reads interleave, and a message
larger than the scratch arrives whole across several reads."""

from __future__ import annotations

import asyncio
import random

from etcdspec.impl.rpc.scratch_recv import SCRATCH_BYTES, ScratchProtocol, new_scratch


class _Collect(ScratchProtocol):
    def __init__(self, scratch: memoryview, expected: int) -> None:
        super().__init__(scratch)
        self.into = bytearray()
        self.expected = expected
        self.reads = 0
        self.complete = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        assert isinstance(data, bytes)  # a copy, not a view of the shared scratch
        self.into += data
        self.reads += 1
        if len(self.into) >= self.expected and not self.complete.done():
            self.complete.set_result(None)


async def _serve_and_send(payloads: list[list[bytes]]) -> tuple[list[bytes], list[int]]:
    """One server, one connection per payload list; the lists' parts are sent
    interleaved across the connections. Returns what each connection received."""
    scratch = new_scratch()
    expected = [sum(len(p) for p in parts) for parts in payloads]
    protocols: list[_Collect] = []

    def factory() -> _Collect:
        protocols.append(_Collect(scratch, expected[len(protocols)]))
        return protocols[-1]

    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    writers = []
    for _ in payloads:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writers.append(writer)
        while len(protocols) < len(writers):  # accepted in the order connected
            await asyncio.sleep(0)
    for step in range(max(len(parts) for parts in payloads)):
        for writer, parts in zip(writers, payloads, strict=True):
            if step < len(parts):
                writer.write(parts[step])
                await writer.drain()
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*(p.complete for p in protocols)), timeout=10)
    for writer in writers:
        writer.close()
        await writer.wait_closed()
    server.close()
    await server.wait_closed()
    return [bytes(p.into) for p in protocols], [p.reads for p in protocols]


def test_connections_sharing_a_scratch_each_get_their_own_bytes() -> None:
    rng = random.Random(5)
    payloads = [
        [bytes([tag]) * rng.randrange(1, 3000) for _ in range(40)] for tag in (0xA1, 0xB2, 0xC3)
    ]
    received, _ = asyncio.run(_serve_and_send(payloads))
    assert received == [b"".join(parts) for parts in payloads]


def test_a_message_larger_than_the_scratch_arrives_whole() -> None:
    big = random.Random(6).randbytes(3 * SCRATCH_BYTES + 17)
    received, reads = asyncio.run(_serve_and_send([[big]]))
    assert received == [big]
    assert reads[0] >= 4  # no read can take more than the scratch holds

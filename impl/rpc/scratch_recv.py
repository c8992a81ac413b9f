"""Socket reads into one shared scratch buffer instead of a fresh 256 KiB object each.

asyncio's selector transport reads for a plain `asyncio.Protocol` with
`sock.recv(256 KiB)`: every read allocates a 256 KiB bytes object, which glibc serves with
mmap and then shrinks (mremap) and unmaps (munmap) — about 17 µs of a member's CPU per
read, however few bytes arrived (`python -m bench.recv_scratch`). A `ScratchProtocol` is
an `asyncio.BufferedProtocol` instead: the transport reads into a scratch buffer, and
the protocol's `data_received` gets a copy of just the bytes that arrived.

Contract: the scratch is shared by every connection one server accepts. That is safe
because a transport hands a read over synchronously (get_buffer, recv_into,
buffer_updated, with no other callback in between), and `buffer_updated` copies the bytes
out before it returns; a subclass implements `data_received(data)` as for a plain
Protocol and never keeps the scratch.
"""

from __future__ import annotations

import asyncio

SCRATCH_BYTES = 256 * 1024  # as much per read as asyncio's own transports take


def new_scratch() -> memoryview:
    """A scratch buffer for the connections of one server (one event loop)."""
    return memoryview(bytearray(SCRATCH_BYTES))


class ScratchProtocol(asyncio.BufferedProtocol):
    """A stream protocol whose reads land in a shared scratch (see the module docstring)."""

    def __init__(self, scratch: memoryview) -> None:
        self._scratch = scratch

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(self._scratch[:nbytes]))

    def data_received(self, data: bytes) -> None:
        """The bytes of one read, copied out of the scratch: each subclass's own."""
        raise NotImplementedError(f"{type(self).__name__} must implement data_received")

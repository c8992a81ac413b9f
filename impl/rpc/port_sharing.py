"""One listening port for HTTP/2 (gRPC) and HTTP/1.1, decided by a connection's first bytes.

etcd serves gRPC and plain HTTP on its client port (cmux): a connection whose first
bytes are the HTTP/2 client preface (RFC 9113 §3.4, "PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n")
is HTTP/2; anything else is HTTP/1.x. `FirstBytes` is the protocol a listener starts
each connection with: it reads until the bytes it has either match the whole preface or
differ from it (an HTTP/1.x request differs at its first byte, as no method starts "PRI "),
then hands the transport to the protocol the `http2` or `http1` factory makes
(`transport.set_protocol`, then `connection_made` and the bytes read so far), and is out
of the way: the chosen protocol gets every later read straight from the transport, so
the sniff costs one comparison per connection and nothing per call.

A connection closed before its first bytes decide is dropped. Until they decide, a
connection is in the `undecided` set it was given (the server closes those at its stop).
Nothing here knows of gRPC or etcd.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class FirstBytes(asyncio.Protocol):
    """A connection until its first bytes say which protocol serves it."""

    def __init__(
        self,
        http2: Callable[[], asyncio.BaseProtocol],
        http1: Callable[[], asyncio.BaseProtocol],
        undecided: set[FirstBytes] | None = None,
    ) -> None:
        self.http2 = http2
        self.http1 = http1
        self.transport: asyncio.Transport | None = None
        self.undecided = undecided if undecided is not None else set()
        self._seen = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.undecided.add(self)

    def data_received(self, data: bytes) -> None:
        seen = self._seen + data
        if len(seen) < len(H2_PREFACE) and H2_PREFACE.startswith(seen):
            self._seen = seen  # so far a prefix of the preface: wait for more
            return
        self._seen = b""
        self.undecided.discard(self)
        factory = self.http2 if seen.startswith(H2_PREFACE) else self.http1
        hand_over(self.transport, factory(), seen)

    def eof_received(self) -> bool | None:
        return None  # closed before deciding: nothing to answer

    def connection_lost(self, exc: Exception | None) -> None:
        self.undecided.discard(self)
        self.transport = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def hand_over(
    transport: asyncio.Transport | None, protocol: asyncio.BaseProtocol, data: bytes
) -> None:
    """Make `protocol` the transport's, as if it had been from the start and `data` its
    first read."""
    if transport is None or transport.is_closing():
        return
    transport.set_protocol(protocol)
    protocol.connection_made(transport)
    if isinstance(protocol, asyncio.BufferedProtocol):
        view = memoryview(data)
        while view and not transport.is_closing():
            buffer = memoryview(protocol.get_buffer(len(view)))
            size = min(len(buffer), len(view))
            buffer[:size] = view[:size]
            protocol.buffer_updated(size)
            view = view[size:]
    elif isinstance(protocol, asyncio.Protocol):
        protocol.data_received(data)

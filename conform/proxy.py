"""A TCP proxy in front of each member's peer port: partitions, delays and dropped
connections between members, cut symmetrically per pair.

Contract:
- Every member advertises its proxy's URL as its peer URL, so all member-to-member
  traffic towards member B passes B's `PeerProxy`. A `Network` (shared by all proxies)
  holds the fault state: the isolated member names, the blocked pairs, a delay.
- The proxy learns which member a connection comes from by peeking at its first bytes:
  our server's hello frame (b"ETSP", version byte, 8-byte big-endian member id) or, for
  real etcd's rafthttp, the `X-Server-From: <member id hex>` header of the first HTTP
  request (stream and pipeline requests both carry it). Ids map to names through
  `Network.names` (filled from MemberList once the cluster is up; looked up per check,
  so a connection opened earlier is classified as soon as the name is known).
- A connection from an unidentified source is cut whenever its destination is isolated.
- `Network.isolate(name)` / `cut(a, b)` close the affected connections at once and
  refuse new ones until `heal()`; `drop()` resets every open connection once (they
  reconnect); `delay_s` delays every forwarded chunk. Everything runs on one asyncio
  loop; only 127.0.0.1 is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
from dataclasses import dataclass, field

HELLO = struct.Struct(">4sBQ")
HELLO_MAGIC = b"ETSP"
MAX_PEEK = 64 * 1024
PEEK_TIMEOUT_S = 2.0
_SERVER_FROM = re.compile(rb"\r\nx-server-from:\s*([0-9a-fA-F]+)\s*\r\n", re.IGNORECASE)


def identify(first: bytes) -> int | None:
    """The sending member's id from the first bytes of a peer connection, or None."""
    if first.startswith(HELLO_MAGIC) and len(first) >= HELLO.size:
        _, _, member_id = HELLO.unpack(first[: HELLO.size])
        return int(member_id)
    match = _SERVER_FROM.search(first)
    if match:
        return int(match.group(1), 16)
    return None


def _complete(first: bytes) -> bool:
    """Enough bytes to classify: a hello, or a whole HTTP header block."""
    if first.startswith(HELLO_MAGIC):
        return len(first) >= HELLO.size
    if HELLO_MAGIC.startswith(first):
        return False
    return b"\r\n\r\n" in first or len(first) >= MAX_PEEK


@dataclass(eq=False)
class Connection:
    source_id: int | None
    destination: str
    writers: tuple[asyncio.StreamWriter, asyncio.StreamWriter]

    def close(self) -> None:
        for writer in self.writers:
            with contextlib.suppress(Exception):
                transport = writer.transport
                if hasattr(transport, "abort"):
                    transport.abort()
                else:
                    writer.close()


@dataclass
class Network:
    """Fault state shared by the proxies of one cluster."""

    names: dict[int, str] = field(default_factory=dict)  # member id -> name
    isolated: set[str] = field(default_factory=set)
    blocked: set[frozenset[str]] = field(default_factory=set)
    delay_s: float = 0.0
    connections: set[Connection] = field(default_factory=set)
    refused: int = 0

    def source_name(self, connection: Connection) -> str | None:
        if connection.source_id is None:
            return None
        return self.names.get(connection.source_id)

    def allowed(self, connection: Connection) -> bool:
        destination = connection.destination
        source = self.source_name(connection)
        if destination in self.isolated:
            return False
        if source is None:
            return True
        if source in self.isolated:
            return False
        return frozenset((source, destination)) not in self.blocked

    def enforce(self) -> int:
        """Close every open connection the fault state forbids; how many."""
        doomed = [c for c in self.connections if not self.allowed(c)]
        for connection in doomed:
            connection.close()
            self.connections.discard(connection)
        return len(doomed)

    def isolate(self, name: str) -> int:
        self.isolated.add(name)
        return self.enforce()

    def cut(self, a: str, b: str) -> int:
        self.blocked.add(frozenset((a, b)))
        return self.enforce()

    def heal(self) -> None:
        self.isolated.clear()
        self.blocked.clear()
        self.delay_s = 0.0

    def drop(self) -> int:
        """Reset every open connection once (members reconnect)."""
        count = len(self.connections)
        for connection in list(self.connections):
            connection.close()
        self.connections.clear()
        return count

    def describe(self) -> str:
        parts = [f"isolated {sorted(self.isolated)}"] if self.isolated else []
        parts += [f"cut {'-'.join(sorted(pair))}" for pair in self.blocked]
        if self.delay_s:
            parts.append(f"delay {self.delay_s * 1000:.0f} ms")
        return ", ".join(parts) or "healthy"


@dataclass
class PeerProxy:
    """Listens on 127.0.0.1:listen_port and forwards to 127.0.0.1:target_port."""

    destination: str  # the name of the member behind this proxy
    listen_port: int
    target_port: int
    network: Network
    _server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.listen_port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None
        for connection in [
            c for c in self.network.connections if c.destination == self.destination
        ]:
            connection.close()
            self.network.connections.discard(connection)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = b""
        try:
            while not _complete(first):
                chunk = await asyncio.wait_for(reader.read(MAX_PEEK - len(first)), PEEK_TIMEOUT_S)
                if not chunk:
                    break
                first += chunk
        except (TimeoutError, ConnectionError):
            pass
        if not first:
            writer.close()
            return
        probe = Connection(identify(first), self.destination, (writer, writer))
        if not self.network.allowed(probe):
            self.network.refused += 1
            probe.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            probe.close()
            return
        connection = Connection(probe.source_id, self.destination, (writer, up_writer))
        self.network.connections.add(connection)
        try:
            up_writer.write(first)
            await asyncio.gather(
                self._pump(reader, up_writer, connection),
                self._pump(up_reader, writer, connection),
            )
        finally:
            self.network.connections.discard(connection)
            connection.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connection: Connection
    ) -> None:
        try:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                if self.network.delay_s:
                    await asyncio.sleep(self.network.delay_s)
                if not self.network.allowed(connection):
                    break
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            connection.close()

"""The peer transport: raft messages between members over TCP (asyncio streams).

Wire format (version 1), on one TCP connection per (sender, receiver) pair, sender to
receiver only:
  hello  = b"ETSP" + version (1 byte) + sender member_id (8 bytes, big-endian),
           then one frame holding the sender's attributes as JSON (name, client URLs:
           what MemberList and lease forwarding need to know about a peer)
  frame  = length (4 bytes, big-endian) + payload (length bytes: raft_codec bytes)
A frame longer than MAX_FRAME_BYTES closes the connection.

Contract: `send(to, payload)` never blocks and never raises; a message is queued for
that peer and may be lost (when the queue is full, the peer is down, or the connection
breaks), as Raft allows. Each peer's sender task reconnects with exponential backoff
(BACKOFF_START_S doubling up to BACKOFF_MAX_S). Received frames are handed, in order
per connection, to the `deliver(from_id, payload)` callback on the event loop thread.
`close()` stops the listener and every task this transport started.

Fault injection (tests and conformance runs only): `blocked` is a set of peer ids this
member neither sends to nor accepts frames from — a network partition seen from this
side. `read_fault_file(path)` reads it from JSON `{"version": 1, "blocked_peers": [id,
...]}` (the member re-reads the file of `--fault-file` when it changes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAGIC = b"ETSP"
VERSION = 1
HELLO = struct.Struct(">4sBQ")
LENGTH = struct.Struct(">I")
MAX_FRAME_BYTES = 64 * 1024 * 1024
QUEUE_LIMIT = 4096
BACKOFF_START_S = 0.05
BACKOFF_MAX_S = 1.0

log = logging.getLogger("etcdspec.impl.peer")

Deliver = Callable[[int, bytes], None]
OnAttributes = Callable[[int, dict[str, Any]], None]


class FrameError(Exception):
    """The byte stream from a peer is not a valid frame sequence."""


def encode_hello(member_id: int) -> bytes:
    return HELLO.pack(MAGIC, VERSION, member_id)


def decode_hello(data: bytes) -> int:
    magic, version, member_id = HELLO.unpack(data)
    if magic != MAGIC:
        raise FrameError(f"peer hello starts with {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise FrameError(f"peer speaks transport version {version}, this member {VERSION}")
    return int(member_id)


def read_fault_file(path: str) -> frozenset[int]:
    """The peers a fault file blocks; a missing file blocks none. Bad content raises
    FrameError naming the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return frozenset()
    except (OSError, ValueError) as error:
        raise FrameError(f"{path}: not a readable fault file ({error})") from error
    if not isinstance(data, dict) or data.get("version") != 1:
        raise FrameError(f'{path}: expected {{"version": 1, "blocked_peers": [...]}}')
    peers = data.get("blocked_peers", [])
    if not isinstance(peers, list) or not all(isinstance(p, int) for p in peers):
        raise FrameError(f"{path}: blocked_peers must be a list of member ids")
    return frozenset(peers)


def encode_frame(payload: bytes) -> bytes:
    if len(payload) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(payload)} bytes exceeds {MAX_FRAME_BYTES}")
    return LENGTH.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """Read one frame; raises asyncio.IncompleteReadError at a clean end of stream."""
    header = await reader.readexactly(LENGTH.size)
    (length,) = LENGTH.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"peer announced a frame of {length} bytes (limit {MAX_FRAME_BYTES})")
    return await reader.readexactly(length)


@dataclass
class TransportStats:
    """Counters for /metrics and tests."""

    sent_frames: int = 0
    dropped_frames: int = 0
    received_frames: int = 0
    connects: int = 0

    def describe(self) -> str:
        return (
            f"sent {self.sent_frames}, dropped {self.dropped_frames}, "
            f"received {self.received_frames}, connects {self.connects}"
        )


class _PeerSender:
    """One peer's outbound queue and the task that drains it over a connection."""

    def __init__(
        self,
        self_id: int,
        peer_id: int,
        host: str,
        port: int,
        stats: TransportStats,
        attributes: bytes,
    ) -> None:
        self.self_id = self_id
        self.attributes = attributes
        self.peer_id = peer_id
        self.host = host
        self.port = port
        self.stats = stats
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=QUEUE_LIMIT)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"peer-send-{self.peer_id:x}")

    def enqueue(self, payload: bytes) -> None:
        try:
            self.queue.put_nowait(payload)
        except asyncio.QueueFull:
            self.stats.dropped_frames += 1

    async def _run(self) -> None:
        backoff = BACKOFF_START_S
        while True:
            writer: asyncio.StreamWriter | None = None
            try:
                _, writer = await asyncio.open_connection(self.host, self.port)
                writer.write(encode_hello(self.self_id) + encode_frame(self.attributes))
                await writer.drain()
                self.stats.connects += 1
                backoff = BACKOFF_START_S
                while True:
                    payload = await self.queue.get()
                    batch = [encode_frame(payload)]
                    while not self.queue.empty() and len(batch) < 256:
                        batch.append(encode_frame(self.queue.get_nowait()))
                    writer.write(b"".join(batch))
                    await writer.drain()
                    self.stats.sent_frames += len(batch)
            except (OSError, ConnectionError, asyncio.IncompleteReadError) as error:
                log.debug("peer %x unreachable: %s", self.peer_id, error)
            finally:
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()
            # While disconnected, what is queued is stale: Raft will resend.
            while not self.queue.empty():
                self.queue.get_nowait()
                self.stats.dropped_frames += 1
            await asyncio.sleep(backoff)
            backoff = min(BACKOFF_MAX_S, backoff * 2)


class PeerTransport:
    """Listens for peers and sends to them; see the module docstring for the contract."""

    def __init__(
        self,
        self_id: int,
        listen_host: str,
        listen_port: int,
        peers: dict[int, tuple[str, int]],
        deliver: Deliver,
        attributes: dict[str, Any] | None = None,
        on_attributes: OnAttributes | None = None,
    ) -> None:
        self.self_id = self_id
        self.on_attributes = on_attributes
        encoded = json.dumps(attributes or {}, sort_keys=True).encode()
        self.listen_host = listen_host
        self.listen_port = listen_port
        self.deliver = deliver
        self.stats = TransportStats()
        self._senders = {
            peer_id: _PeerSender(self_id, peer_id, host, port, self.stats, encoded)
            for peer_id, (host, port) in peers.items()
            if peer_id != self_id
        }
        self._server: asyncio.Server | None = None
        self._readers: set[asyncio.Task[None]] = set()
        self._inbound: set[asyncio.StreamWriter] = set()
        self.bound_port: int | None = None
        self.blocked: frozenset[int] = frozenset()

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.listen_host, self.listen_port, reuse_address=True
        )
        sockets = self._server.sockets
        self.bound_port = int(sockets[0].getsockname()[1]) if sockets else self.listen_port
        for sender in self._senders.values():
            sender.start()

    def send(self, to: int, payload: bytes) -> None:
        sender = self._senders.get(to)
        if sender is None or to in self.blocked:
            self.stats.dropped_frames += 1
            return
        sender.enqueue(payload)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._readers.add(task)
        self._inbound.add(writer)
        try:
            from_id = decode_hello(await reader.readexactly(HELLO.size))
            attributes = json.loads(await read_frame(reader) or b"{}")
            if self.on_attributes is not None and isinstance(attributes, dict):
                self.on_attributes(from_id, attributes)
            while True:
                payload = await read_frame(reader)
                if from_id in self.blocked:
                    self.stats.dropped_frames += 1
                    continue
                self.stats.received_frames += 1
                self.deliver(from_id, payload)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        except (FrameError, ValueError) as error:
            log.warning("closing peer connection: %s", error)
        finally:
            writer.close()
            self._inbound.discard(writer)
            if task is not None:
                self._readers.discard(task)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Inbound connections are closed (their readers then end on their own);
        # sender tasks are cancelled.
        for writer in list(self._inbound):
            writer.close()
        readers = list(self._readers)
        if readers:
            await asyncio.wait(readers, timeout=1.0)
        tasks = [s.task for s in self._senders.values() if s.task is not None]
        tasks.extend(task for task in readers if not task.done())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=1.0)

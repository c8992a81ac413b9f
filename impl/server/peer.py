"""The peer transport: raft messages between members over TCP (asyncio streams).

Wire format (version 1), on one TCP connection per (sender, receiver) pair, sender to
receiver only:
  hello  = b"ETSP" + version (1 byte) + sender member_id (8 bytes, big-endian),
           then one frame holding the sender's attributes as JSON (name, client URLs:
           what MemberList and lease forwarding need to know about a peer)
  frame  = length (4 bytes, big-endian) + payload (length bytes: raft_codec bytes)
A frame longer than MAX_FRAME_BYTES closes the connection.
A members query (a member joining an existing cluster, which does not know its own id
yet): the hello with sender id QUERY_ID (0, no member's id), one frame holding the query
as JSON; the receiver answers with one frame (JSON, `on_query`'s answer) and closes.
`query_peer(host, port, query)` asks it.
A member removed from the cluster that connects (it was down when it was removed, say)
is sent REMOVED_NOTICE and the connection closed; its sender calls `on_removed_notice`
(the member stops itself, as etcd's does when its peers say it was removed).

Contract: `send(to, payload)` never blocks and never raises; a message is queued for
that peer and may be lost (when QUEUE_LIMIT frames wait, when more than
WRITE_BUFFER_LIMIT bytes are still unsent to a peer that does not read, when the peer is
down or the connection breaks), as Raft allows. The frames sent during one turn of the
event loop leave together, in one write, at the end of that turn. Each peer's sender
task (re)connects with exponential backoff (BACKOFF_START_S doubling up to
BACKOFF_MAX_S). Inbound bytes are parsed as they arrive (an asyncio Protocol, no task
or await per frame; reads land in a shared scratch, `etcdspec.impl.rpc.scratch_recv`), and
each frame is handed, in order per connection, to the `deliver(from_id, payload)`
callback on the event loop thread. `close()` stops the listener and every task this
transport started.

The peers change with the cluster's configuration: `add_peer` and `remove_peer`.
`active_since` tells since when each peer has had a connection to this member open.

Fault injection (tests and conformance runs only): `blocked` is a set of peer ids this
member neither sends to nor accepts frames from — a network partition seen from this
side. `read_fault_file(path)` reads it from JSON `{"version": 1, "blocked_peers": [id,
...]}` (the member re-reads the file of `--fault-file` when it changes).

TLS (https:// peer URLs, etcd's `--peer-*` flags; contexts from etcdspec.impl.server.tls):
with `server_ssl` the listener serves TLS only, and with `client_ssl` every connection
to a peer is dialled over TLS, the peer's certificate checked against the trusted CA and
its address, this member's certificate presented. A peer whose handshake fails (a
certificate from another CA, none when one is required, plaintext) never gets past it:
its frames are never read, and the sender retries with backoff as for a peer that is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from etcdspec.impl.rpc.scratch_recv import ScratchProtocol, new_scratch

MAGIC = b"ETSP"
VERSION = 1
HELLO = struct.Struct(">4sBQ")
LENGTH = struct.Struct(">I")
MAX_FRAME_BYTES = 64 * 1024 * 1024
QUEUE_LIMIT = 4096
WRITE_BUFFER_LIMIT = 16 * 1024 * 1024
BACKOFF_START_S = 0.05
BACKOFF_MAX_S = 1.0
QUERY_ID = 0  # the sender id of a members query (no member has id 0)
REMOVED_NOTICE = b"ETSP-REMOVED"  # written back to a removed member's connection

log = logging.getLogger("etcdspec.impl.server.peer")

Deliver = Callable[[int, bytes], None]
OnAttributes = Callable[[int, dict[str, Any]], None]
OnQuery = Callable[[dict[str, Any]], dict[str, Any]]


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
    """One peer's outbound frames and the task that keeps a connection to it.

    `enqueue` adds a frame to `pending` and, when connected, schedules one `_flush` for
    the end of this loop turn, which writes every pending frame at once (no drain: a
    peer that stops reading fills the transport's buffer, and past WRITE_BUFFER_LIMIT
    frames are dropped until it drains)."""

    def __init__(
        self,
        self_id: int,
        peer_id: int,
        host: str,
        port: int,
        stats: TransportStats,
        attributes: bytes,
        client_ssl: ssl.SSLContext | None = None,
    ) -> None:
        self.client_ssl = client_ssl
        self.tls_failure = ""  # the last TLS handshake error logged (said once)
        self.self_id = self_id
        self.attributes = attributes
        self.peer_id = peer_id
        self.host = host
        self.port = port
        self.stats = stats
        self.pending: list[bytes] = []
        self.on_removed_notice: Callable[[int], None] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task[None] | None = None
        self._flush_scheduled = False

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"peer-send-{self.peer_id:x}")

    def enqueue(self, payload: bytes) -> None:
        if len(self.pending) >= QUEUE_LIMIT:
            self.stats.dropped_frames += 1
            return
        if len(payload) > MAX_FRAME_BYTES:
            log.error(
                "dropping a message of %d bytes to %x: over the frame limit",
                len(payload),
                self.peer_id,
            )
            self.stats.dropped_frames += 1
            return
        self.pending.append(payload)
        if self.writer is not None and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        writer = self.writer
        if writer is None or not self.pending or writer.is_closing():
            return
        frames, self.pending = self.pending, []
        if writer.transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
            self.stats.dropped_frames += len(frames)  # the peer is not reading: Raft resends
            return
        pack = LENGTH.pack
        writer.write(b"".join([part for frame in frames for part in (pack(len(frame)), frame)]))
        self.stats.sent_frames += len(frames)

    async def _run(self) -> None:
        backoff = BACKOFF_START_S
        while True:
            writer: asyncio.StreamWriter | None = None
            try:
                reader, writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=self.client_ssl,
                    server_hostname=self.host if self.client_ssl is not None else None,
                )
                writer.write(encode_hello(self.self_id) + encode_frame(self.attributes))
                await writer.drain()
                self.stats.connects += 1
                backoff = BACKOFF_START_S
                self.writer = writer
                self._flush()  # what was queued while connecting
                # The peer writes on this connection only to say this member was
                # removed (REMOVED_NOTICE); reading ends when it closes.
                while data := await reader.read(4096):
                    if data.startswith(REMOVED_NOTICE) and self.on_removed_notice is not None:
                        self.on_removed_notice(self.peer_id)
            except ssl.SSLError as error:
                # A peer whose certificate this member does not trust (or that refuses
                # this member's): said once per kind of error, then retried quietly.
                reason = error.reason or str(error)
                if reason != self.tls_failure:
                    self.tls_failure = reason
                    log.warning(
                        "TLS handshake with peer failed",
                        extra={"peer": f"{self.peer_id:x}", "error": str(error)},
                    )
            except (OSError, ConnectionError, asyncio.IncompleteReadError) as error:
                log.debug("peer %x unreachable: %s", self.peer_id, error)
            finally:
                self.writer = None
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()
            # While disconnected, what is queued is stale: Raft will resend.
            self.stats.dropped_frames += len(self.pending)
            self.pending = []
            await asyncio.sleep(backoff)
            backoff = min(BACKOFF_MAX_S, backoff * 2)


class _Inbound(ScratchProtocol):
    """One connection from a peer: its hello, its attributes frame, then raft frames,
    parsed from the bytes as they arrive and handed to the transport's `deliver`."""

    def __init__(self, owner: PeerTransport) -> None:
        super().__init__(owner._scratch)
        self.owner = owner
        self.buffer = bytearray()
        self.from_id: int | None = None
        self.attributes_seen = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (create_server's), though not always an asyncio.Transport
        # subclass: uvloop's TCPTransport is not one, so no isinstance check here.
        self.transport = cast(asyncio.Transport, transport)
        self.owner._inbound.add(self.transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.owner._inbound.discard(self.transport)
        if self.from_id is not None and self.attributes_seen:
            self.owner._inbound_lost(self.from_id)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        try:
            self._parse()
        except (FrameError, ValueError) as error:
            log.warning("closing peer connection: %s", error)
            self.buffer.clear()
            if self.transport is not None:
                self.transport.close()
        self.owner.after_read()

    def _parse(self) -> None:
        buffer, owner = self.buffer, self.owner
        pos = 0
        if self.from_id is None:
            if len(buffer) < HELLO.size:
                return
            self.from_id = decode_hello(bytes(buffer[: HELLO.size]))
            pos = HELLO.size
            if self.from_id in owner.removed_peers() and self.transport is not None:
                self.transport.write(REMOVED_NOTICE)
                self.transport.close()
                buffer.clear()
                return
        from_id = self.from_id
        size = len(buffer)
        try:
            while size - pos >= LENGTH.size:
                (length,) = LENGTH.unpack_from(buffer, pos)
                if length > MAX_FRAME_BYTES:
                    raise FrameError(
                        f"peer announced a frame of {length} bytes (limit {MAX_FRAME_BYTES})"
                    )
                end = pos + LENGTH.size + length
                if end > size:
                    break
                payload = bytes(buffer[pos + LENGTH.size : end])
                pos = end
                if from_id == QUERY_ID:
                    self._answer(payload)
                    return
                if not self.attributes_seen:
                    self.attributes_seen = True
                    owner._inbound_seen(from_id)
                    attributes = json.loads(payload or b"{}")
                    if owner.on_attributes is not None and isinstance(attributes, dict):
                        owner.on_attributes(from_id, attributes)
                elif from_id in owner.blocked:
                    owner.stats.dropped_frames += 1
                else:
                    owner.stats.received_frames += 1
                    owner.deliver(from_id, payload)
        finally:
            del buffer[:pos]

    def _answer(self, payload: bytes) -> None:
        """Answer a members query (`on_query`) and close the connection."""
        query = json.loads(payload or b"{}")
        answer: dict[str, Any] = {"error": "this member answers no queries"}
        if self.owner.on_query is not None and isinstance(query, dict):
            answer = self.owner.on_query(query)
        if self.transport is not None:
            self.transport.write(encode_frame(json.dumps(answer, sort_keys=True).encode()))
            self.transport.close()


async def query_peer(
    host: str, port: int, query: dict[str, Any], timeout_s: float = 2.0
) -> dict[str, Any]:
    """Ask the member listening for peers at host:port a members query; its answer.
    Raises OSError (unreachable), asyncio.TimeoutError or FrameError (a bad answer)."""

    async def ask() -> dict[str, Any]:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(encode_hello(QUERY_ID) + encode_frame(json.dumps(query).encode()))
            await writer.drain()
            answer = json.loads(await read_frame(reader))
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        if not isinstance(answer, dict):
            raise FrameError(f"a members query answered {answer!r}")
        return answer

    try:
        return await asyncio.wait_for(ask(), timeout_s)
    except (ValueError, asyncio.IncompleteReadError) as error:
        raise FrameError(f"a members query got no answer: {error}") from error


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
        after_read: Callable[[], None] = lambda: None,
        server_ssl: ssl.SSLContext | None = None,
        client_ssl: ssl.SSLContext | None = None,
        on_query: OnQuery | None = None,
        removed_peers: Callable[[], frozenset[int]] = frozenset,
        on_removed_notice: Callable[[int], None] | None = None,
    ) -> None:
        self.self_id = self_id
        self.server_ssl = server_ssl
        self.removed_peers = removed_peers  # the members removed from the cluster
        self.on_removed_notice = on_removed_notice
        self.on_attributes = on_attributes
        self.on_query = on_query
        self.after_read = after_read  # called once a read's frames are all delivered
        encoded = json.dumps(attributes or {}, sort_keys=True).encode()
        self.listen_host = listen_host
        self.listen_port = listen_port
        self.deliver = deliver
        self.stats = TransportStats()
        self._senders = {
            peer_id: _PeerSender(self_id, peer_id, host, port, self.stats, encoded, client_ssl)
            for peer_id, (host, port) in peers.items()
            if peer_id != self_id
        }
        for sender in self._senders.values():
            sender.on_removed_notice = on_removed_notice
        self._server: asyncio.Server | None = None
        self._inbound: set[asyncio.Transport] = set()
        self._scratch = new_scratch()  # every inbound connection's reads (scratch_recv)
        self.bound_port: int | None = None
        self.blocked: frozenset[int] = frozenset()
        self._encoded_attributes = encoded
        # Since when (time.monotonic) each peer has had a connection to this member open:
        # etcd's "active since", for the strict reconfiguration checks.
        self.active_since: dict[int, float] = {}
        self._inbound_counts: dict[int, int] = {}

    def _inbound_seen(self, peer_id: int) -> None:
        self._inbound_counts[peer_id] = self._inbound_counts.get(peer_id, 0) + 1
        self.active_since.setdefault(peer_id, time.monotonic())

    def _inbound_lost(self, peer_id: int) -> None:
        count = self._inbound_counts.get(peer_id, 0) - 1
        if count > 0:
            self._inbound_counts[peer_id] = count
        else:
            self._inbound_counts.pop(peer_id, None)
            self.active_since.pop(peer_id, None)

    def add_peer(self, peer_id: int, host: str, port: int) -> None:
        """Send to `peer_id` at host:port from now on (a member added or its URL updated)."""
        if peer_id == self.self_id:
            return
        old = self._senders.get(peer_id)
        if old is not None and (old.host, old.port) == (host, port):
            return
        if old is not None:
            self.remove_peer(peer_id)
        sender = _PeerSender(
            self.self_id, peer_id, host, port, self.stats, self._encoded_attributes
        )
        sender.on_removed_notice = self.on_removed_notice
        self._senders[peer_id] = sender
        if self._server is not None:
            sender.start()

    def remove_peer(self, peer_id: int) -> None:
        """Stop sending to `peer_id` (a member removed): its sender task is cancelled."""
        sender = self._senders.pop(peer_id, None)
        if sender is not None and sender.task is not None:
            sender.task.cancel()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Inbound(self),
            self.listen_host,
            self.listen_port,
            reuse_address=True,
            ssl=self.server_ssl,
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

    def flush(self) -> None:
        """Write the frames queued so far now, rather than at the end of this loop turn:
        for a caller with more work to do in this turn before it yields (applying, say)
        whose messages should not wait for it."""
        for sender in self._senders.values():
            if sender.pending:
                sender._flush()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Inbound connections are closed; sender tasks are cancelled.
        for transport in list(self._inbound):
            transport.close()
        tasks = [s.task for s in self._senders.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=1.0)

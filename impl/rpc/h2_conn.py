"""The server side of one HTTP/2 connection (RFC 9113), as a pure state machine.

No I/O: bytes from the socket go in through `receive(data)`, which parses frames and
tells the `StreamEvents` listener what happened on which stream; bytes for the socket
collect in `outbound` (a list) and the caller writes them and clears it. Time plays no
part. The gRPC server (`etcdspec.impl.rpc.grpc_h2`) drives one of these per TCP connection;
the tests drive it with bytes alone.

What it does:
- the preface and SETTINGS exchange; PING answered; PRIORITY ignored; PUSH_PROMISE
  from a client is a protocol error; GOAWAY received stops new streams;
- request header blocks (HEADERS + CONTINUATION) decoded with HPACK (the `hpack`
  library); a block that changes nothing in the decoder's dynamic table (neither its
  entries nor its size) is remembered, so a client repeating the same indexed headers
  costs a dict lookup; a list above the advertised MAX_HEADER_LIST_SIZE resets its
  stream alone (ENHANCE_YOUR_CALM), and so does a malformed request (§8.2-8.3, §8.5,
  `malformed_request`: an uppercase name, a connection-specific field, a missing,
  repeated, unknown or misplaced pseudo-header, an empty :path for http(s), a CONNECT
  with more than :authority; PROTOCOL_ERROR), as do malformed trailers (a pseudo-header,
  an uppercase name, a connection-specific field: `malformed_trailers`);
- flow control both ways. Receiving: the connection window is replenished as data
  arrives; a stream's window as the listener reports bytes consumed (`consumed`), so
  a handler that does not read holds its client back. Sending: DATA beyond the peer's
  windows waits in the stream's queue, as do trailers behind it, and leaves when
  WINDOW_UPDATE or SETTINGS open the window; `pending(stream_id)` says what still waits.
  Frames are cut to the peer's SETTINGS_MAX_FRAME_SIZE;
- stream lifetime: a stream is known from its HEADERS until our END_STREAM has left
  (a client still sending then gets RST_STREAM NO_ERROR) or either side resets it. The
  last RESET_MEMORY resets are remembered with who made them: frames that crossed our
  RST_STREAM are ignored, frames after the client's are a stream error (§5.1); DATA on any
  other closed stream is a stream error STREAM_CLOSED (§6.1), any frame but PRIORITY on an
  idle one a connection error (§5.1).

Errors: a connection error (RFC 9113 §5.4.1) raises nothing to the caller: it queues a
GOAWAY with its code and a reason, marks the connection `closed`, and ignores all later
input; the caller closes the socket once `outbound` is written. A stream error queues
RST_STREAM for that stream alone.

Why not the `h2` package (python-hyper's sans-I/O HTTP/2, which the tests use as an
oracle: tests/impl/rpc/test_impl_h2_oracle.py): the CPU it costs per call.
`python -m bench.h2_cost` feeds both the bytes of gRPC unary calls (the request's HEADERS
and DATA in; grpc_h2's HEADERS, DATA and trailers out). On the two-core development
machine the medians were 13 µs of CPU per call here against 333 µs for h2 (242 µs with
its header validation off) when the client repeats its request fields, and 94 µs
against 347 µs (304 µs) when a grpc-timeout changes every call (docs/benchmarks.md,
"HTTP/2 layer"). h2 alone would cost several times what a whole call costs grpc_h2
(46-48 µs, bench/grpc_ceiling.py), as much as the grpc.aio per-call work grpc_h2 was
written to remove. h2 spends it on objects made per frame and per event (frames, state
machines, events, header validation); this module, when its header cache misses, mostly
in the hpack decoder both use.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_HEADER = struct.Struct(">HBBBI")  # length (24 bits: 16 + 8), type, flags, stream id

# Frame types (§6).
DATA = 0x0
HEADERS = 0x1
PRIORITY = 0x2
RST_STREAM = 0x3
SETTINGS = 0x4
PUSH_PROMISE = 0x5
PING = 0x6
GOAWAY = 0x7
WINDOW_UPDATE = 0x8
CONTINUATION = 0x9

# Flags.
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# Error codes (§7).
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB

# Settings (§6.5.2).
SETTINGS_HEADER_TABLE_SIZE = 0x1
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
SETTINGS_MAX_FRAME_SIZE = 0x5
SETTINGS_MAX_HEADER_LIST_SIZE = 0x6

DEFAULT_WINDOW = 65_535
DEFAULT_MAX_FRAME = 16_384
MAX_WINDOW = 2**31 - 1
MAX_FRAME_LIMIT = 2**24 - 1

# What this server advertises. The receive windows are large so that a request of the
# largest allowed size arrives without waiting on a round trip; the connection window
# is topped up whenever half of it has been used.
STREAM_WINDOW = 4 * 1024 * 1024
CONNECTION_WINDOW = 32 * 1024 * 1024
MAX_FRAME = 1024 * 1024
MAX_HEADER_LIST = 64 * 1024
# A decoded header list above MAX_HEADER_LIST costs its stream only (RST_STREAM
# ENHANCE_YOUR_CALM, which gRPC clients read as RESOURCE_EXHAUSTED): the block is decoded
# whole, so the HPACK table stays in step and the connection's other calls go on. Above
# this hard bound (indexed fields can inflate a small block a thousandfold) decoding stops
# and the connection ends.
HEADER_LIST_HARD_LIMIT = 16 * MAX_HEADER_LIST
HEADER_CACHE_LIMIT = 256
# Streams reset lately, and by whom: frames the client sent before our RST_STREAM reached
# it are ignored (RFC 9113 §5.1), frames after its own RST_STREAM are a stream error. Older
# resets are forgotten; a late frame on such a stream is then treated as on any closed
# stream (§5.1 lets the ignoring end after a while).
RESET_MEMORY = 1024

Headers = list[tuple[bytes, bytes]]


class StreamEvents(Protocol):
    """What a connection tells its user; each call happens inside `receive`."""

    def on_headers(self, stream_id: int, headers: Headers, end_stream: bool) -> None:
        """A new stream's request headers (a second HEADERS on a stream, trailers from the
        client, arrives as on_data(b"", end_stream) instead)."""

    def on_data(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        """Request body bytes; report them with `consumed` once taken."""

    def on_reset(self, stream_id: int, error_code: int) -> None:
        """The client reset the stream, or the connection closed under it (code given)."""

    def on_send_ready(self) -> None:
        """Queued DATA left because a window opened: writers waiting on `pending` may go on."""


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One frame's bytes."""
    length = len(payload)
    return FRAME_HEADER.pack(length >> 8, length & 0xFF, kind, flags, stream_id) + payload


@dataclass
class StreamState:
    """One stream as the connection sees it."""

    send_window: int
    recv_window: int
    unacknowledged: int = 0  # bytes consumed that no WINDOW_UPDATE has returned yet
    remote_ended: bool = False
    local_ended: bool = False
    queue: deque[tuple[int, bytes, bool]] = field(default_factory=deque)  # (kind, bytes, end)
    queued_bytes: int = 0


class H2ServerConnection:
    """One client's HTTP/2 connection, server side. See the module docstring."""

    def __init__(self, events: StreamEvents, stream_window: int = STREAM_WINDOW) -> None:
        self.events = events
        self.stream_window = stream_window
        self.outbound: list[bytes] = []
        self.closed = False
        self.close_reason = ""
        self.goaway_received = False
        self.goaway_sent = False
        self.streams: dict[int, StreamState] = {}
        self.last_stream_id = 0
        self._resets: dict[int, bool] = {}  # stream id -> we sent the reset (else the client)
        self._buffer = b""
        self._preface_seen = False
        self._decoder = hpack.Decoder()
        self._decoder.max_header_list_size = HEADER_LIST_HARD_LIMIT
        # block -> its header list and what makes it a malformed request (None: nothing)
        self._header_cache: dict[bytes, tuple[Headers, str | None]] = {}
        self._continuing: tuple[int, bool, bytearray] | None = None  # id, end, block so far
        self._peer_window = DEFAULT_WINDOW
        self._peer_initial_window = DEFAULT_WINDOW
        self._peer_max_frame = DEFAULT_MAX_FRAME
        self._recv_window = DEFAULT_WINDOW
        self._blocked: dict[int, None] = {}  # streams with queued frames, oldest first
        settings = struct.pack(
            ">HIHIHIHI",
            SETTINGS_ENABLE_PUSH,
            0,
            SETTINGS_INITIAL_WINDOW_SIZE,
            stream_window,
            SETTINGS_MAX_FRAME_SIZE,
            MAX_FRAME,
            SETTINGS_MAX_HEADER_LIST_SIZE,
            MAX_HEADER_LIST,
        )
        self.outbound.append(frame(SETTINGS, 0, 0, settings))
        self._grant(0, CONNECTION_WINDOW - DEFAULT_WINDOW)
        self._recv_window = CONNECTION_WINDOW

    # -- input -------------------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        """Take bytes from the socket: every complete frame is acted on, in order."""
        if self.closed:
            return
        buffer = self._buffer + data if self._buffer else data
        position = 0
        if not self._preface_seen:
            if len(buffer) < len(PREFACE):
                if not PREFACE.startswith(buffer):
                    self._connection_error(PROTOCOL_ERROR, "not an HTTP/2 client preface")
                else:
                    self._buffer = buffer
                return
            if not buffer.startswith(PREFACE):
                self._connection_error(PROTOCOL_ERROR, "not an HTTP/2 client preface")
                return
            self._preface_seen = True
            position = len(PREFACE)
        end = len(buffer)
        unpack = FRAME_HEADER.unpack_from
        while end - position >= 9 and not self.closed:
            high, low, kind, flags, stream_id = unpack(buffer, position)
            length = (high << 8) | low
            if length > MAX_FRAME:
                self._connection_error(FRAME_SIZE_ERROR, f"a frame of {length} bytes")
                return
            if end - position - 9 < length:
                break
            payload = buffer[position + 9 : position + 9 + length]
            position += 9 + length
            self._frame(kind, flags, stream_id & 0x7FFFFFFF, payload)
        self._buffer = buffer[position:] if position < end else b""

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if self._continuing is not None and kind != CONTINUATION:
            self._connection_error(PROTOCOL_ERROR, "a header block was interrupted")
            return
        if kind == DATA:
            self._on_data(flags, stream_id, payload)
        elif kind == HEADERS:
            self._on_headers(flags, stream_id, payload)
        elif kind == WINDOW_UPDATE:
            self._on_window_update(stream_id, payload)
        elif kind == SETTINGS:
            self._on_settings(flags, stream_id, payload)
        elif kind == PING:
            if stream_id != 0:
                self._connection_error(PROTOCOL_ERROR, "PING on a stream")
            elif len(payload) != 8:
                self._connection_error(FRAME_SIZE_ERROR, f"a PING of {len(payload)} bytes")
            elif not flags & ACK:
                self.outbound.append(frame(PING, ACK, 0, payload))
        elif kind == RST_STREAM:
            self._on_rst_stream(stream_id, payload)
        elif kind == CONTINUATION:
            self._on_continuation(flags, stream_id, payload)
        elif kind == GOAWAY:
            if stream_id != 0:
                self._connection_error(PROTOCOL_ERROR, "GOAWAY on a stream")
            elif len(payload) < 8:
                self._connection_error(FRAME_SIZE_ERROR, f"a GOAWAY of {len(payload)} bytes")
            else:
                self.goaway_received = True
        elif kind == PRIORITY:
            self._on_priority(stream_id, payload)
        elif kind == PUSH_PROMISE:
            self._connection_error(PROTOCOL_ERROR, "a client may not push")
        # Unknown frame types are ignored (§4.1).

    def _on_data(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            self._connection_error(PROTOCOL_ERROR, "DATA on stream 0")
            return
        length = len(payload)
        self._recv_window -= length
        if self._recv_window < 0:
            self._connection_error(FLOW_CONTROL_ERROR, "the client overran the connection window")
            return
        if self._recv_window < CONNECTION_WINDOW // 2:
            self._grant(0, CONNECTION_WINDOW - self._recv_window)
            self._recv_window = CONNECTION_WINDOW
        if flags & PADDED:
            payload = self._strip_padding(payload, 0)
            if self.closed:
                return
        stream = self.streams.get(stream_id)
        if stream is None or stream.remote_ended:
            if self._idle(stream_id):
                self._connection_error(PROTOCOL_ERROR, f"DATA on idle stream {stream_id}")
            elif not self._resets.get(stream_id, False):
                # Half-closed (remote) or closed: a stream error (§6.1), unless our own
                # RST_STREAM is still on its way to the client (§5.1: ignore).
                self._stream_error(stream_id, STREAM_CLOSED)
            return
        stream.recv_window -= length
        if stream.recv_window < 0:
            self._stream_error(stream_id, FLOW_CONTROL_ERROR)
            return
        end_stream = bool(flags & END_STREAM)
        if end_stream:
            stream.remote_ended = True
        self.events.on_data(stream_id, payload, end_stream)

    def _on_headers(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            self._connection_error(PROTOCOL_ERROR, "HEADERS on stream 0")
            return
        # The priority fields (5 bytes, deprecated by §5.3.2) are skipped, not read.
        priority = 5 if flags & PRIORITY_FLAG else 0
        if flags & PADDED:
            payload = self._strip_padding(payload, priority)
            if self.closed:
                return
        elif len(payload) < priority:
            self._connection_error(FRAME_SIZE_ERROR, "a HEADERS too short for its priority")
            return
        if stream_id % 2 == 0:
            self._connection_error(PROTOCOL_ERROR, f"HEADERS on stream {stream_id}")
            return
        payload = payload[priority:]
        end_stream = bool(flags & END_STREAM)
        if flags & END_HEADERS:
            self._header_block(stream_id, end_stream, payload)
        else:
            self._continuing = (stream_id, end_stream, bytearray(payload))

    def _on_continuation(self, flags: int, stream_id: int, payload: bytes) -> None:
        if self._continuing is None or self._continuing[0] != stream_id:
            self._connection_error(PROTOCOL_ERROR, "CONTINUATION without its HEADERS")
            return
        block = self._continuing[2]
        block += payload
        # The same bound as a block in one HEADERS frame (MAX_FRAME): below it, the block is
        # decoded and only its stream pays for a list too long.
        if len(block) > HEADER_LIST_HARD_LIMIT:
            self._connection_error(ENHANCE_YOUR_CALM, "a header block too large")
            return
        if flags & END_HEADERS:
            _, end_stream, _ = self._continuing
            self._continuing = None
            self._header_block(stream_id, end_stream, bytes(block))

    def _header_block(self, stream_id: int, end_stream: bool, block: bytes) -> None:
        decoded = self._decode(block)
        if decoded is None:
            return
        headers, fits, malformed = decoded
        stream = self.streams.get(stream_id)
        if stream is not None:
            # Trailers from the client: they must end the stream; gRPC sends none.
            if stream.remote_ended:  # half-closed (remote), §5.1
                self._stream_error(stream_id, STREAM_CLOSED)
                return
            if not fits:
                self._stream_error(stream_id, ENHANCE_YOUR_CALM)
                return
            if not end_stream or malformed_trailers(headers) is not None:
                self._stream_error(stream_id, PROTOCOL_ERROR)
                return
            stream.remote_ended = True
            self.events.on_data(stream_id, b"", True)
            return
        reset_by_us = self._resets.get(stream_id)
        if reset_by_us is not None and stream_id <= self.last_stream_id:
            # A closed stream reset lately (§5.1): the block was decoded above, to keep the
            # HPACK table in step; after our RST_STREAM it is ignored, after the client's
            # it is a stream error.
            if not reset_by_us:
                self._stream_error(stream_id, STREAM_CLOSED)
            return
        if stream_id <= self.last_stream_id:
            # A new stream's id must exceed every id the client used before (§5.1.1).
            self._connection_error(
                PROTOCOL_ERROR,
                f"HEADERS opening stream {stream_id}, not above stream {self.last_stream_id}",
            )
            return
        self.last_stream_id = stream_id
        if self.goaway_sent:
            self._send_rst(stream_id, REFUSED_STREAM)
            return
        if not fits:
            self._send_rst(stream_id, ENHANCE_YOUR_CALM)
            return
        if malformed is not None:
            self._send_rst(stream_id, PROTOCOL_ERROR)
            return
        self.streams[stream_id] = StreamState(
            send_window=self._peer_initial_window,
            recv_window=self.stream_window,
            remote_ended=end_stream,
        )
        self.events.on_headers(stream_id, headers, end_stream)

    def _decode(self, block: bytes) -> tuple[Headers, bool, str | None] | None:
        """The header list of a block, whether it fits MAX_HEADER_LIST and what makes it a
        malformed request (judged once per remembered block); None after a compression
        error (connection closed)."""
        cached = self._header_cache.get(block)
        if cached is not None:
            return cached[0], True, cached[1]
        table = self._decoder.header_table
        entries = table.dynamic_entries
        size_before = len(entries)
        first_before = entries[0] if entries else None
        maxsize_before = table.maxsize
        try:
            headers: Headers = [
                (bytes(n), bytes(v)) for n, v in self._decoder.decode(block, raw=True)
            ]
        except hpack.HPACKError as error:
            self._connection_error(COMPRESSION_ERROR, f"header block not decodable: {error}")
            return None
        # The list's size as RFC 9113 §6.5.2 counts it (32 octets of overhead a field).
        fits = sum(len(n) + len(v) + 32 for n, v in headers) <= MAX_HEADER_LIST
        malformed = malformed_request(headers)
        entries = table.dynamic_entries
        if (
            len(entries) != size_before
            or (entries[0] if entries else None) is not first_before
            or table.maxsize != maxsize_before
        ):
            # The table moved or was resized (a size update, RFC 7541 §6.3): blocks
            # remembered so far may now mean something else, and a remembered block holding
            # a size update would skip it.
            self._header_cache.clear()
        elif fits:
            if len(self._header_cache) >= HEADER_CACHE_LIMIT:
                self._header_cache.clear()
            self._header_cache[block] = (headers, malformed)
        return headers, fits, malformed

    def _on_window_update(self, stream_id: int, payload: bytes) -> None:
        if len(payload) != 4:
            self._connection_error(FRAME_SIZE_ERROR, "a WINDOW_UPDATE of the wrong size")
            return
        increment = int.from_bytes(payload, "big") & 0x7FFFFFFF
        if stream_id == 0:
            if increment == 0:
                self._connection_error(PROTOCOL_ERROR, "a zero connection WINDOW_UPDATE")
                return
            self._peer_window += increment
            if self._peer_window > MAX_WINDOW:
                self._connection_error(FLOW_CONTROL_ERROR, "the connection window overflowed")
                return
        else:
            stream = self.streams.get(stream_id)
            if stream is None:
                if self._idle(stream_id):  # §5.1
                    self._connection_error(PROTOCOL_ERROR, f"WINDOW_UPDATE on idle {stream_id}")
                # Else a stream already finished here: the update crossed our end.
                return
            if increment == 0:
                self._stream_error(stream_id, PROTOCOL_ERROR)
                return
            stream.send_window += increment
            if stream.send_window > MAX_WINDOW:
                self._stream_error(stream_id, FLOW_CONTROL_ERROR)
                return
        if self._blocked:
            self._flush_queues()

    def _on_settings(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id != 0:
            self._connection_error(PROTOCOL_ERROR, "SETTINGS on a stream")
            return
        if flags & ACK:
            if payload:  # §6.5
                self._connection_error(FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload")
            return
        if len(payload) % 6:
            self._connection_error(FRAME_SIZE_ERROR, "SETTINGS of a length not a multiple of 6")
            return
        for offset in range(0, len(payload), 6):
            identifier, value = struct.unpack_from(">HI", payload, offset)
            if identifier == SETTINGS_INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    self._connection_error(FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE too large")
                    return
                delta = value - self._peer_initial_window
                self._peer_initial_window = value
                for stream in self.streams.values():
                    stream.send_window += delta
                    if stream.send_window > MAX_WINDOW:  # §6.9.2
                        self._connection_error(
                            FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE overflowed a stream window"
                        )
                        return
            elif identifier == SETTINGS_MAX_FRAME_SIZE:
                if not DEFAULT_MAX_FRAME <= value <= MAX_FRAME_LIMIT:
                    self._connection_error(PROTOCOL_ERROR, f"MAX_FRAME_SIZE {value}")
                    return
                self._peer_max_frame = value
            elif identifier == SETTINGS_ENABLE_PUSH and value > 1:
                self._connection_error(PROTOCOL_ERROR, f"ENABLE_PUSH {value}")
                return
            # HEADER_TABLE_SIZE needs nothing: our header blocks never use the dynamic table.
        self.outbound.append(frame(SETTINGS, ACK, 0))
        if self._blocked:
            self._flush_queues()

    def _on_rst_stream(self, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            self._connection_error(PROTOCOL_ERROR, "RST_STREAM on stream 0")
            return
        if len(payload) != 4:
            self._connection_error(FRAME_SIZE_ERROR, f"a RST_STREAM of {len(payload)} bytes")
            return
        if self._idle(stream_id):
            self._connection_error(PROTOCOL_ERROR, f"RST_STREAM on idle stream {stream_id}")
            return
        if self.streams.pop(stream_id, None) is not None:
            self._blocked.pop(stream_id, None)
            self._remember_reset(stream_id, by_us=False)
            self.events.on_reset(stream_id, int.from_bytes(payload, "big"))

    def _on_priority(self, stream_id: int, payload: bytes) -> None:
        """PRIORITY carries deprecated signals (§5.3.2): only its framing is checked."""
        if stream_id == 0:
            self._connection_error(PROTOCOL_ERROR, "PRIORITY on stream 0")
        elif len(payload) != 5:
            # A stream error (§6.3); on an idle stream, which may not be reset (§6.4), the
            # connection's (§5.4). After our own RST_STREAM the frame is ignored (§5.1).
            if self._idle(stream_id):
                self._connection_error(FRAME_SIZE_ERROR, f"a PRIORITY of {len(payload)} bytes")
            elif not self._resets.get(stream_id, False):
                self._stream_error(stream_id, FRAME_SIZE_ERROR)

    def _idle(self, stream_id: int) -> bool:
        """A stream neither side has opened (§5.1): above every id the client used, or
        even (a server's, and this one pushes none)."""
        return stream_id > self.last_stream_id or stream_id % 2 == 0

    def _strip_padding(self, payload: bytes, fixed: int) -> bytes:
        """The payload between the Pad Length field and the padding, with `fixed` bytes of
        other fields after Pad Length (§6.1, §6.2); b"" after a connection error."""
        if len(payload) < 1 + fixed:  # too small for its own fields (§4.2)
            self._connection_error(FRAME_SIZE_ERROR, "a padded frame without its Pad Length")
            return b""
        if payload[0] > len(payload) - 1 - fixed:
            self._connection_error(PROTOCOL_ERROR, "padding longer than the frame")
            return b""
        return payload[1 : len(payload) - payload[0]]

    # -- output ------------------------------------------------------------------------

    def send_headers(self, stream_id: int, block: bytes, end_stream: bool = False) -> None:
        """Send a header block (response headers, or trailers with end_stream), after any
        DATA still queued on the stream."""
        stream = self._sending(stream_id, end_stream)
        if stream is None:
            return
        if stream.queue:
            stream.queue.append((HEADERS, block, end_stream))
            return
        self._write_headers(stream_id, block, end_stream)

    def send_data(self, stream_id: int, data: bytes, end_stream: bool = False) -> None:
        """Send body bytes now as far as the windows allow; the rest waits in the stream's
        queue (see `pending`)."""
        stream = self._sending(stream_id, end_stream)
        if stream is None:
            return
        if stream.queue:
            stream.queue.append((DATA, data, end_stream))
            stream.queued_bytes += len(data)
            return
        sent = self._write_data(stream_id, stream, data, end_stream)
        if sent < len(data):
            stream.queue.append((DATA, data[sent:], end_stream))
            stream.queued_bytes += len(data) - sent
            self._blocked[stream_id] = None

    def _sending(self, stream_id: int, end_stream: bool) -> StreamState | None:
        """The stream a frame is for, marked ended when the frame ends it; None when the
        stream is gone or our side has ended it already (the frame is dropped)."""
        stream = self.streams.get(stream_id)
        if stream is None or stream.local_ended:
            return None
        if end_stream:
            stream.local_ended = True
        return stream

    def pending(self, stream_id: int) -> int:
        """Bytes of DATA queued on the stream, waiting for window (0 for unknown streams)."""
        stream = self.streams.get(stream_id)
        return 0 if stream is None else stream.queued_bytes

    def consumed(self, stream_id: int, count: int) -> None:
        """The user has taken `count` bytes of the stream's DATA: the client may send more."""
        stream = self.streams.get(stream_id)
        if stream is None or stream.remote_ended or count <= 0:
            return
        stream.unacknowledged += count
        if stream.unacknowledged >= self.stream_window // 4:
            self._grant(stream_id, stream.unacknowledged)
            stream.recv_window += stream.unacknowledged
            stream.unacknowledged = 0

    def reset(self, stream_id: int, error_code: int = CANCEL) -> None:
        """Reset a stream from this side; queued frames are dropped."""
        if self.streams.pop(stream_id, None) is not None:
            self._blocked.pop(stream_id, None)
            self._send_rst(stream_id, error_code)

    def _sent_end(self, stream_id: int) -> None:
        """Our END_STREAM has left: the stream is forgotten, and a client still sending is
        told to stop (RST_STREAM NO_ERROR, §8.1)."""
        stream = self.streams.pop(stream_id, None)
        self._blocked.pop(stream_id, None)
        if stream is not None and not stream.remote_ended:
            self._send_rst(stream_id, NO_ERROR)

    def goaway(self, error_code: int = NO_ERROR, reason: str = "") -> None:
        """Refuse new streams from now on; streams already open go on."""
        if self.goaway_sent:
            return
        self.goaway_sent = True
        payload = struct.pack(">II", self.last_stream_id, error_code) + reason.encode()
        self.outbound.append(frame(GOAWAY, 0, 0, payload))

    def _grant(self, stream_id: int, increment: int) -> None:
        self.outbound.append(frame(WINDOW_UPDATE, 0, stream_id, struct.pack(">I", increment)))

    def _write_headers(self, stream_id: int, block: bytes, end_stream: bool) -> None:
        limit = self._peer_max_frame
        flags = END_STREAM if end_stream else 0
        if len(block) <= limit:
            self.outbound.append(frame(HEADERS, flags | END_HEADERS, stream_id, block))
        else:
            pieces = [block[i : i + limit] for i in range(0, len(block), limit)]
            self.outbound.append(frame(HEADERS, flags, stream_id, pieces[0]))
            for piece in pieces[1:-1]:
                self.outbound.append(frame(CONTINUATION, 0, stream_id, piece))
            self.outbound.append(frame(CONTINUATION, END_HEADERS, stream_id, pieces[-1]))
        if end_stream:
            self._sent_end(stream_id)

    def _write_data(self, stream_id: int, stream: StreamState, data: bytes, end: bool) -> int:
        """Write as much of `data` as the windows allow; the count written. END_STREAM goes
        on the last frame only when all of `data` left."""
        total = len(data)
        sent = 0
        limit = self._peer_max_frame
        while True:
            # A window may be below zero after SETTINGS shrank it (§6.9.2): no room then.
            room = max(0, min(self._peer_window, stream.send_window, limit, total - sent))
            if room <= 0 and sent < total:
                return sent
            piece = data[sent : sent + room] if (sent or room < total) else data
            sent += room
            last = sent == total
            self.outbound.append(frame(DATA, END_STREAM if end and last else 0, stream_id, piece))
            self._peer_window -= room
            stream.send_window -= room
            if last:
                if end:
                    self._sent_end(stream_id)
                return sent

    def _flush_queues(self) -> None:
        """Send what waits on blocked streams, oldest first, while the windows allow."""
        moved = False
        for stream_id in list(self._blocked):
            stream = self.streams.get(stream_id)
            if stream is None:
                del self._blocked[stream_id]
                continue
            while stream.queue:
                kind, payload, end = stream.queue.popleft()
                if kind == HEADERS:
                    self._write_headers(stream_id, payload, end)
                    continue
                sent = self._write_data(stream_id, stream, payload, end)
                moved = moved or sent > 0
                stream.queued_bytes -= sent
                if sent < len(payload):
                    stream.queue.appendleft((kind, payload[sent:], end))
                    break
            if not stream.queue:
                self._blocked.pop(stream_id, None)
            if self._peer_window <= 0:
                break
        if moved:
            self.events.on_send_ready()

    # -- errors ------------------------------------------------------------------------

    def _stream_error(self, stream_id: int, error_code: int) -> None:
        if self.streams.pop(stream_id, None) is not None:
            self._blocked.pop(stream_id, None)
            self.events.on_reset(stream_id, error_code)
        self._send_rst(stream_id, error_code)

    def _send_rst(self, stream_id: int, error_code: int) -> None:
        self._remember_reset(stream_id, by_us=True)
        self.outbound.append(_rst(stream_id, error_code))

    def _remember_reset(self, stream_id: int, by_us: bool) -> None:
        """Note who reset a stream (a reset of ours is not overwritten by the client's)."""
        resets = self._resets
        if stream_id in resets:
            resets[stream_id] = resets[stream_id] or by_us
            return
        if len(resets) >= RESET_MEMORY:
            del resets[next(iter(resets))]
        resets[stream_id] = by_us

    def _connection_error(self, error_code: int, reason: str) -> None:
        self.goaway(error_code, reason)
        self.closed = True
        self.close_reason = reason
        for stream_id in list(self.streams):
            del self.streams[stream_id]
            self.events.on_reset(stream_id, error_code)
        self._blocked.clear()


_REQUEST_PSEUDO = frozenset({b":method", b":scheme", b":authority", b":path"})
_REQUIRED_PSEUDO = frozenset({b":method", b":scheme", b":path"})
_CONNECTION_SPECIFIC = frozenset(
    {b"connection", b"proxy-connection", b"keep-alive", b"transfer-encoding", b"upgrade"}
)


def malformed_request(headers: Headers) -> str | None:
    """What makes a request's header list malformed (RFC 9113 §8.2-8.3), or None."""
    seen: dict[bytes, bytes] = {}
    regular = False
    for name, value in headers:
        if name[:1] == b":":
            if name != name.lower():
                return f"the field name {name!r} is not lowercase"
            if regular:
                return f"the pseudo-header {name!r} follows a regular field"
            if name not in _REQUEST_PSEUDO:
                return f"{name!r} is not a request pseudo-header"
            if name in seen:
                return f"the pseudo-header {name!r} appears twice"
            seen[name] = value
        else:
            regular = True
            wrong = _malformed_field(name, value)
            if wrong is not None:
                return wrong
    if seen.get(b":method") == b"CONNECT":  # §8.5: only :authority, the target
        if b":scheme" in seen or b":path" in seen or b":authority" not in seen:
            return "a CONNECT request with :scheme or :path, or without :authority"
        return None
    missing = _REQUIRED_PSEUDO - seen.keys()
    if missing:
        return f"no {b', '.join(sorted(missing))!r}"
    if not seen[b":path"] and seen[b":scheme"] in (b"http", b"https"):  # §8.3.1
        return "an empty :path"
    return None


def malformed_trailers(headers: Headers) -> str | None:
    """What makes a request's trailers malformed (RFC 9113 §8.1, §8.2), or None."""
    for name, value in headers:
        if name[:1] == b":":
            return f"the pseudo-header {name!r} in trailers"
        wrong = _malformed_field(name, value)
        if wrong is not None:
            return wrong
    return None


def _malformed_field(name: bytes, value: bytes) -> str | None:
    """What makes a regular field malformed in any HTTP/2 message (§8.2, §8.2.2)."""
    if name != name.lower():
        return f"the field name {name!r} is not lowercase"
    if name in _CONNECTION_SPECIFIC or (name == b"te" and value.lower() != b"trailers"):
        return f"the connection-specific field {name!r}"
    return None


def _rst(stream_id: int, error_code: int) -> bytes:
    return frame(RST_STREAM, 0, stream_id, struct.pack(">I", error_code))

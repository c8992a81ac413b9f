"""Differential tests of our HTTP/2 server core (impl/rpc/h2_conn.py) against `h2`.

The same client bytes go to an H2ServerConnection and to the h2 package's server-side
H2Connection, set up alike: the settings ours advertises (`advertised`), acknowledged by
the client in every script's opening, and the same connection window. What each side
does is normalized into one `Outcome`: per stream, what the application was given
(request headers, data and end of stream, in order; the client's RST_STREAM code) and
the RST_STREAM codes the server sent; per connection, alive or the GOAWAY code; and the
SETTINGS and PING acknowledgements. The two outcomes must be equal.

A script is a list of steps: client bytes (one frame, or for well-formed scripts a run of
frames fed in random pieces), or the server answering a stream (`Respond`). Both sides'
answers are kept per step. Where RFC 9113 lets implementations differ, or h2 is knowingly
stricter or more lenient than we are, `reconcile` applies one of the DIVERGENCES at the
first step where the two differ: each is named, justified by its RFC section in
`Divergence.why`, and reported in the comparison; any other difference fails the test
with both outcomes described. Differences no rule can recognise from the step alone are
kept out of the generated scripts instead and asserted one by one in KNOWN_DIFFERENCES,
so that a change on either side shows.

Left out of the outcome: the WINDOW_UPDATE frames the server sends (when to return
window is the receiver's choice, §6.9; ours tops the connection window up at half, h2
only when told, so every script sends less than half of CONNECTION_WINDOW), the
response frames, and a GOAWAY's last stream id and debug data.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import NamedTuple

import hpack
import pytest
from grpc_request import GRPC_REQUEST
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, Event, RequestReceived, StreamEnded, StreamReset
from h2.exceptions import ProtocolError
from h2.settings import SettingCodes
from h2.stream import StreamState
from hypothesis import event, given
from hypothesis import strategies as st

from etcdspec.impl.rpc import h2_conn
from etcdspec.impl.rpc.h2_conn import (
    ACK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PADDED,
    PING,
    PREFACE,
    PRIORITY,
    PRIORITY_FLAG,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    H2ServerConnection,
    frame,
)

ALTSVC = 0xA  # RFC 7838: h2 implements it, we do not
ENABLE_CONNECT_PROTOCOL = 0x8  # RFC 8441: likewise
KIND_NAMES = {
    DATA: "DATA",
    HEADERS: "HEADERS",
    PRIORITY: "PRIORITY",
    RST_STREAM: "RST_STREAM",
    SETTINGS: "SETTINGS",
    PUSH_PROMISE: "PUSH_PROMISE",
    PING: "PING",
    GOAWAY: "GOAWAY",
    WINDOW_UPDATE: "WINDOW_UPDATE",
    CONTINUATION: "CONTINUATION",
    ALTSVC: "ALTSVC",
}
ERROR_NAMES = (  # RFC 9113 §7
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
)
OPENING = PREFACE + frame(SETTINGS, 0, 0) + frame(SETTINGS, ACK, 0)
RESPONSE_BLOCK = b"\x88"  # ":status: 200", static entry 8


def error_name(code: int) -> str:
    return ERROR_NAMES[code] if 0 <= code < len(ERROR_NAMES) else f"{code:#x}"


def advertised(stream_window: int) -> dict[SettingCodes | int, int]:
    """What H2ServerConnection advertises, as h2 settings (no stream limit, as ours)."""
    return {
        SettingCodes.ENABLE_PUSH: 0,
        SettingCodes.INITIAL_WINDOW_SIZE: stream_window,
        SettingCodes.MAX_FRAME_SIZE: h2_conn.MAX_FRAME,
        SettingCodes.MAX_HEADER_LIST_SIZE: h2_conn.MAX_HEADER_LIST,
        SettingCodes.MAX_CONCURRENT_STREAMS: 2**31 - 1,
    }


# -- scripts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientFrame:
    """One frame the client sends; its length field always matches its payload."""

    kind: int
    flags: int
    stream_id: int
    payload: bytes = b""

    def encode(self) -> bytes:
        return frame(self.kind, self.flags, self.stream_id, self.payload)

    def describe(self) -> str:
        name = KIND_NAMES.get(self.kind, f"type {self.kind:#x}")
        shown = self.payload[:24].hex() + ("..." if len(self.payload) > 24 else "")
        return (
            f"{name} flags {self.flags:#04x} stream {self.stream_id} [{len(self.payload)}] {shown}"
        )


@dataclass(frozen=True)
class Send:
    """Client bytes, fed in pieces cut at `cuts` (offsets into `data`); `frame` is set
    when the bytes are that one frame (the divergences look at it)."""

    data: bytes
    frame: ClientFrame | None = None
    cuts: tuple[int, ...] = ()

    def pieces(self) -> list[bytes]:
        edges = [0, *sorted(c for c in set(self.cuts) if 0 < c < len(self.data)), len(self.data)]
        return [self.data[a:b] for a, b in pairwise(edges)]

    def describe(self) -> str:
        if self.frame is not None:
            return self.frame.describe()
        return f"bytes [{len(self.data)}] in {len(self.pieces())} pieces"


@dataclass(frozen=True)
class Respond:
    """The server ends the stream with a response, if it has it half-closed (remote)."""

    stream_id: int

    def describe(self) -> str:
        return f"respond on stream {self.stream_id}"


Step = Send | Respond
Script = tuple[Step, ...]


def sends(*frames: ClientFrame) -> tuple[Send, ...]:
    """One step per frame."""
    return tuple(Send(f.encode(), f) for f in frames)


def opened(*steps: Step | Sequence[Step]) -> Script:
    """A script: the opening (preface, SETTINGS, ACK of ours), then the steps."""
    flat: list[Step] = [Send(OPENING)]
    for step in steps:
        flat.extend([step] if isinstance(step, Send | Respond) else step)
    return tuple(flat)


def block(
    headers: Sequence[tuple[bytes | str, bytes | str]], encoder: hpack.Encoder | None = None
) -> bytes:
    """A header block; a fresh encoder's holds no reference into the dynamic table."""
    return (encoder or hpack.Encoder()).encode(list(headers))


def headers_frame(
    stream_id: int,
    headers: Sequence[tuple[bytes | str, bytes | str]] = GRPC_REQUEST,
    *,
    end_stream: bool = False,
) -> ClientFrame:
    flags = END_HEADERS | (END_STREAM if end_stream else 0)
    return ClientFrame(HEADERS, flags, stream_id, block(headers))


def data_frame(
    stream_id: int, data: bytes = b"\x00\x00\x00\x00\x00", *, end_stream: bool = False
) -> ClientFrame:
    return ClientFrame(DATA, END_STREAM if end_stream else 0, stream_id, data)


def settings_frame(*pairs: tuple[int, int]) -> ClientFrame:
    return ClientFrame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def window_update_frame(stream_id: int, increment: int) -> ClientFrame:
    return ClientFrame(WINDOW_UPDATE, 0, stream_id, struct.pack(">I", increment))


def rst_frame(stream_id: int, code: int = h2_conn.CANCEL) -> ClientFrame:
    return ClientFrame(RST_STREAM, 0, stream_id, struct.pack(">I", code))


def goaway_frame(code: int = h2_conn.NO_ERROR) -> ClientFrame:
    return ClientFrame(GOAWAY, 0, 0, struct.pack(">II", 0, code))


# -- what each side did ------------------------------------------------------------------


class Action(NamedTuple):
    """One thing a server did in a step. Application side: "headers" (value: the list),
    "data" (bytes), "end", "cancel" (the client's RST_STREAM code). Wire side: "rst"
    (code), "goaway" (code), "settings-ack", "ping-ack" (payload); "refused" (code): h2
    raised a connection error without queuing a GOAWAY."""

    kind: str
    stream_id: int = 0
    value: object = None

    def key(self) -> tuple[str, int, str]:
        return (self.kind, self.stream_id, repr(self.value))


Actions = tuple[Action, ...]
Trace = list[Actions]  # one entry per script step


def wire_actions(data: bytes) -> list[Action]:
    """The frames a server wrote that an outcome records."""
    actions = []
    position = 0
    while position < len(data):
        high, low, kind, flags, stream_id = h2_conn.FRAME_HEADER.unpack_from(data, position)
        length = (high << 8) | low
        payload = data[position + 9 : position + 9 + length]
        position += 9 + length
        if kind == RST_STREAM:
            actions.append(Action("rst", stream_id, int.from_bytes(payload, "big")))
        elif kind == GOAWAY:
            actions.append(Action("goaway", 0, int.from_bytes(payload[4:8], "big")))
        elif kind == SETTINGS and flags & ACK:
            actions.append(Action("settings-ack"))
        elif kind == PING and flags & ACK:
            actions.append(Action("ping-ack", 0, payload))
    return actions


class OurListener:
    """StreamEvents for our core. A stream error and a connection error tell the listener
    (on_reset) too; those resets are not the client's, and are told apart here by what
    the core does next: a stream error queues its RST_STREAM right after telling, a
    connection error has marked the connection closed before."""

    def __init__(self) -> None:
        self.conn: H2ServerConnection | None = None
        self.actions: list[Action] = []
        self._resets: list[tuple[int, int, int]] = []  # stream, code, outbound length then

    def on_headers(self, stream_id: int, headers: h2_conn.Headers, end_stream: bool) -> None:
        self.actions.append(Action("headers", stream_id, tuple(headers)))
        if end_stream:
            self.actions.append(Action("end", stream_id))

    def on_data(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        if data:
            self.actions.append(Action("data", stream_id, data))
        if end_stream:
            self.actions.append(Action("end", stream_id))

    def on_reset(self, stream_id: int, error_code: int) -> None:
        assert self.conn is not None
        if not self.conn.closed:
            self._resets.append((stream_id, error_code, len(self.conn.outbound)))
            self.actions.append(Action("cancel", stream_id, error_code))

    def on_send_ready(self) -> None:
        pass

    def take(self, outbound: list[bytes]) -> list[Action]:
        """This step's actions; the cancels that were our own stream errors dropped."""
        own = {
            (stream_id, code)
            for stream_id, code, index in self._resets
            if index < len(outbound)
            and wire_actions(outbound[index]) == [Action("rst", stream_id, code)]
        }
        actions = [
            a for a in self.actions if not (a.kind == "cancel" and (a.stream_id, a.value) in own)
        ]
        self.actions, self._resets = [], []
        return actions


def run_ours(script: Script, stream_window: int) -> Trace:
    listener = OurListener()
    conn = H2ServerConnection(listener, stream_window=stream_window)
    listener.conn = conn
    conn.outbound.clear()
    trace: Trace = []
    for step in script:
        if isinstance(step, Respond):
            stream = conn.streams.get(step.stream_id)
            if stream is not None and stream.remote_ended:
                conn.send_headers(step.stream_id, RESPONSE_BLOCK, end_stream=True)
        else:
            for piece in step.pieces():
                conn.receive(piece)
        outbound = list(conn.outbound)
        conn.outbound.clear()
        trace.append((*listener.take(outbound), *wire_actions(b"".join(outbound))))
    return trace


def h2_actions(events: list[Event]) -> list[Action]:
    actions = []
    for e in events:
        if isinstance(e, RequestReceived):
            actions.append(Action("headers", e.stream_id or 0, tuple(e.headers or ())))
        elif isinstance(e, DataReceived) and e.data:
            actions.append(Action("data", e.stream_id or 0, e.data))
        elif isinstance(e, StreamEnded):
            actions.append(Action("end", e.stream_id or 0))
        elif isinstance(e, StreamReset) and e.remote_reset:
            actions.append(Action("cancel", e.stream_id or 0, int(e.error_code or 0)))
    return actions


def run_h2(script: Script, stream_window: int) -> Trace:
    conn = H2Connection(
        H2Configuration(client_side=False, header_encoding=None, normalize_inbound_headers=False)
    )
    conn.initiate_connection()
    conn.update_settings(advertised(stream_window))
    conn.increment_flow_control_window(h2_conn.CONNECTION_WINDOW - h2_conn.DEFAULT_WINDOW)
    conn.data_to_send()
    trace: Trace = []
    failed = False
    for step in script:
        if failed:
            trace.append(())
            continue
        actions: list[Action] = []
        error: ProtocolError | None = None
        if isinstance(step, Respond):
            stream = conn.streams.get(step.stream_id)
            if stream is not None and stream.state_machine.state == StreamState.HALF_CLOSED_REMOTE:
                conn.send_headers(step.stream_id, [(b":status", b"200")], end_stream=True)
        else:
            for piece in step.pieces():
                try:
                    actions.extend(h2_actions(conn.receive_data(piece)))
                except ProtocolError as raised:
                    error, failed = raised, True
                    break
        actions.extend(wire_actions(conn.data_to_send()))
        if error is not None and not any(a.kind == "goaway" for a in actions):
            actions.append(Action("refused", 0, int(error.error_code)))
        trace.append(tuple(actions))
    return trace


# -- outcomes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamOutcome:
    """One stream as the application and the client saw it."""

    stream_id: int
    headers: tuple[tuple[bytes, bytes], ...] | None = None
    data: bytes = b""
    ended: bool = False
    cancelled: int | None = None  # the client's RST_STREAM, as told to the application
    resets: tuple[int, ...] = ()  # RST_STREAM codes the server sent
    disorder: tuple[str, ...] = ()  # deliveries out of their order (none expected)

    def status(self) -> str:
        if self.resets:
            return "reset " + ",".join(error_name(c) for c in self.resets)
        if self.cancelled is not None:
            return f"cancelled {error_name(self.cancelled)}"
        if self.ended:
            return "ended"
        return "open" if self.headers is not None else "never opened"

    def describe(self) -> str:
        parts = [f"stream {self.stream_id}: {self.status()}"]
        if self.headers is not None:
            parts.append(
                "headers "
                + ", ".join(
                    f"{n.decode('latin-1')}: {v.decode('latin-1')}" for n, v in self.headers
                )
            )
        if self.data:
            parts.append(f"data [{len(self.data)}] {self.data[:16].hex()}")
        if self.ended and (self.resets or self.cancelled is not None):
            parts.append("ended before")
        if self.disorder:
            parts.append("OUT OF ORDER: " + "; ".join(self.disorder))
        return "; ".join(parts)


@dataclass(frozen=True)
class Outcome:
    """What a server did with a script, in the terms both servers share."""

    connection: int | None  # the GOAWAY code; None: alive
    streams: tuple[StreamOutcome, ...]
    settings_acks: int
    ping_acks: tuple[bytes, ...]

    def stream(self, stream_id: int) -> StreamOutcome:
        for s in self.streams:
            if s.stream_id == stream_id:
                return s
        return StreamOutcome(stream_id)

    def connection_name(self) -> str:
        return "alive" if self.connection is None else f"GOAWAY {error_name(self.connection)}"

    def describe(self) -> str:
        lines = [
            f"connection: {self.connection_name()}",
            f"acknowledged: {self.settings_acks} SETTINGS, PINGs {[p.hex() for p in self.ping_acks]}",
        ]
        lines += [s.describe() for s in self.streams]
        return "\n".join(lines)


@dataclass
class _StreamBuilder:
    stream_id: int
    headers: tuple[tuple[bytes, bytes], ...] | None = None
    data: bytearray = field(default_factory=bytearray)
    ended: bool = False
    cancelled: int | None = None
    resets: list[int] = field(default_factory=list)
    disorder: list[str] = field(default_factory=list)

    def deliver(self, action: Action) -> None:
        over = self.cancelled is not None or bool(self.resets)
        if action.kind == "headers":
            if self.headers is not None or over:
                self.disorder.append("headers again")
            assert isinstance(action.value, tuple)
            self.headers = action.value
        elif action.kind in ("data", "end"):
            if self.headers is None or self.ended or over:
                self.disorder.append(
                    f"{action.kind} {'before headers' if self.headers is None else 'after end'}"
                )
            if action.kind == "data":
                assert isinstance(action.value, bytes)
                self.data += action.value
            else:
                self.ended = True
        elif action.kind == "cancel":
            if over:
                self.disorder.append("cancelled after a reset")
            assert isinstance(action.value, int)
            self.cancelled = action.value
        elif action.kind == "rst":
            assert isinstance(action.value, int)
            self.resets.append(action.value)

    def build(self) -> StreamOutcome:
        return StreamOutcome(
            self.stream_id,
            self.headers,
            bytes(self.data),
            self.ended,
            self.cancelled,
            tuple(self.resets),
            tuple(self.disorder),
        )


def outcome(trace: Trace) -> Outcome:
    streams: dict[int, _StreamBuilder] = {}
    connection: int | None = None
    settings_acks = 0
    pings: list[bytes] = []
    for step in trace:
        for action in step:
            if action.kind in ("goaway", "refused"):
                assert isinstance(action.value, int)
                connection = action.value if connection is None else connection
            elif action.kind == "settings-ack":
                settings_acks += 1
            elif action.kind == "ping-ack":
                assert isinstance(action.value, bytes)
                pings.append(action.value)
            else:
                streams.setdefault(action.stream_id, _StreamBuilder(action.stream_id)).deliver(
                    action
                )
    return Outcome(
        connection,
        tuple(streams[s].build() for s in sorted(streams)),
        settings_acks,
        tuple(pings),
    )


# -- where the two may differ ------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """A way h2 and we may answer the same step differently, and why that is allowed."""

    name: str
    rfc: str
    why: str

    def describe(self) -> str:
        return f"{self.name} (RFC {self.rfc}): {self.why}"


@dataclass
class At:
    """The first step where the two traces differ, as the divergences see it."""

    script: Script
    k: int
    ours: Trace
    theirs: Trace

    @property
    def frame(self) -> ClientFrame | None:
        step = self.script[self.k]
        return step.frame if isinstance(step, Send) else None

    @property
    def only_ours(self) -> Counter[Action]:
        return Counter(self.ours[self.k]) - Counter(self.theirs[self.k])

    @property
    def only_theirs(self) -> Counter[Action]:
        return Counter(self.theirs[self.k]) - Counter(self.ours[self.k])

    def ours_end(self) -> bool:
        return any(a.kind == "goaway" for a in self.ours[self.k])

    def theirs_end(self) -> int | None:
        codes = [a.value for a in self.theirs[self.k] if a.kind in ("goaway", "refused")]
        return int(codes[0]) if codes and isinstance(codes[0], int) else None

    def block_start(self) -> ClientFrame | None:
        """The HEADERS or PUSH_PROMISE whose field block this step's frame ends (or is)."""
        for step in reversed(self.script[: self.k + 1]):
            f = step.frame if isinstance(step, Send) else None
            if f is None:
                return None
            if f.kind in (HEADERS, PUSH_PROMISE):
                return f
            if f.kind != CONTINUATION:
                return None
        return None

    def interrupts_block(self) -> bool:
        """This step's frame comes while a field block waits for CONTINUATION."""
        if self.k == 0 or self.frame is None or self.frame.kind == CONTINUATION:
            return False
        before = self.script[self.k - 1]
        f = before.frame if isinstance(before, Send) else None
        return (
            f is not None
            and f.kind in (HEADERS, PUSH_PROMISE, CONTINUATION)
            and not f.flags & END_HEADERS
        )

    def earlier_frames(self) -> list[ClientFrame]:
        return [
            s.frame for s in self.script[: self.k] if isinstance(s, Send) and s.frame is not None
        ]


DIVERGENCES = {
    d.name: d
    for d in [
        Divergence(
            "stream-error-as-connection-error",
            "9113 §5.4",
            "where the RFC names a stream error (a malformed request or trailers §8.1.1, "
            "a stream window overrun §6.9.1, a zero stream WINDOW_UPDATE §6.9, a PRIORITY "
            "of the wrong length §6.3, a header list over our limit §10.5.1) h2 ends the "
            "connection with the same code; 'an endpoint MAY choose to treat a stream "
            "error as a connection error'. The comparison stops there.",
        ),
        Divergence(
            "h2-repeats-rst",
            "9113 §5.1",
            "after sending RST_STREAM an endpoint MUST ignore the frames still arriving "
            "on the stream; h2 answers each with another RST_STREAM STREAM_CLOSED. Those "
            "later resets are dropped from h2's side.",
        ),
        Divergence(
            "h2-omits-goaway-for-bad-preface",
            "9113 §3.4",
            "an invalid preface is a connection error PROTOCOL_ERROR, and 'a GOAWAY "
            "frame MAY be omitted in this case': h2 raises without one, we send it.",
        ),
        Divergence(
            "h2-hpack-error-is-protocol-error",
            "9113 §4.3",
            "a field block that cannot be decoded is a connection error COMPRESSION_ERROR "
            "(ours); h2 turns hpack's errors into PROTOCOL_ERROR.",
        ),
        Divergence(
            "h2-settings-ack-payload-is-protocol-error",
            "9113 §6.5",
            "a SETTINGS ACK with a payload is a connection error FRAME_SIZE_ERROR (ours); "
            "h2 (hyperframe) calls it PROTOCOL_ERROR.",
        ),
        Divergence(
            "reused-stream-id-code",
            "9113 §5.1, §5.1.1",
            "HEADERS on a stream closed by both ends: §5.1.1 makes a non-increasing "
            "stream id a connection error PROTOCOL_ERROR (ours: a closed stream is not "
            "remembered), §5.1 a frame after END_STREAM a connection error STREAM_CLOSED "
            "(h2, which remembers it).",
        ),
        Divergence(
            "h2-validates-all-settings-first",
            "9113 §6.5.3",
            "a SETTINGS frame holding two bad values: the values 'MUST be processed in "
            "the order they appear' and ours stops at the first, with its code; h2 checks "
            "every value before applying any, and may give the other value's code.",
        ),
        Divergence(
            "h2-checks-frame-size-before-block-interruption",
            "9113 §6.10, §4.2",
            "a frame of the wrong size arriving inside a field block breaks two rules, "
            "each a connection error: ours reports the interrupted block "
            "(PROTOCOL_ERROR), h2 the frame's size (FRAME_SIZE_ERROR). The RFC orders "
            "neither check first.",
        ),
        Divergence(
            "push-promise-code",
            "9113 §8.4, §4.2",
            "a client's PUSH_PROMISE is a connection error PROTOCOL_ERROR (ours, at once); "
            "h2 parses it first and gives FRAME_SIZE_ERROR when it is too short.",
        ),
        Divergence(
            "h2-validates-field-characters",
            "9113 §8.2.1",
            "implementations SHOULD validate field names and values (no empty name, none "
            "of 0x00-0x20 or 0x7F-0xFF, no NUL, CR, LF, no leading or trailing space); we "
            "check only what §8.2-8.3 make a MUST (uppercase names, connection-specific "
            "fields, pseudo-headers) and hand values to the servicer as they came. h2 ends "
            "the connection. The comparison stops.",
        ),
        Divergence(
            "h2-implements-altsvc",
            "9113 §5.5; RFC 7838",
            "ALTSVC is an extension we do not implement, so its frames are ignored "
            "('implementations MUST ignore unknown or unsupported values'); h2 implements "
            "it and ends the connection on one it cannot parse. The comparison stops.",
        ),
        Divergence(
            "h2-implements-extended-connect",
            "9113 §6.5.2; RFC 8441 §3",
            "SETTINGS_ENABLE_CONNECT_PROTOCOL above 1: we do not support the setting and "
            "MUST ignore it; h2 supports it and refuses the value. The comparison stops.",
        ),
        Divergence(
            "h2-rejects-self-dependency",
            "7540 §5.3.1; 9113 §5.3.2",
            "a priority naming its own stream was a stream error in RFC 7540; RFC 9113 "
            "deprecates the priority signals, which we ignore; h2 keeps the old rule, as "
            "a connection error. The comparison stops.",
        ),
        Divergence(
            "h2-headers-padding-off-by-one",
            "9113 §6.2",
            "only padding longer than what remains for the field block fragment is an "
            "error; padding that fills all that follows Pad Length leaves an empty "
            "fragment (ours accepts it, the block goes on in CONTINUATION), but h2 "
            "(hyperframe) refuses it. The comparison stops.",
        ),
        Divergence(
            "h2-ends-connection-on-client-goaway",
            "9113 §6.8",
            "a client's GOAWAY limits the streams the server may open; streams below "
            "its last stream id 'might still complete successfully', and ours serves "
            "them. h2 treats the connection as closed and refuses any later frame. The "
            "comparison stops.",
        ),
        Divergence(
            "h2-forgets-resets-of-unopened-streams",
            "9113 §5.1, §5.1.1",
            "DATA on a stream the client skipped is answered RST_STREAM STREAM_CLOSED by "
            "both; a HEADERS there later is a frame on a closed stream after our "
            "RST_STREAM, which ours ignores (§5.1 'MUST ignore'); h2 keeps no record of "
            "streams that never opened and ends the connection for a stream id not above "
            "the last (§5.1.1). The comparison stops.",
        ),
        Divergence(
            "h2-checks-priority-length-after-our-reset",
            "9113 §5.1, §6.3",
            "a PRIORITY of the wrong length is a stream error; on a stream we have reset "
            "ours ignores it, as every frame arriving after our RST_STREAM (§5.1 'MUST "
            "ignore'); h2 refuses it while parsing, as a connection error. The "
            "comparison stops.",
        ),
        Divergence(
            "h2-reads-window-update-reserved-bit",
            "9113 §6.9",
            "the reserved bit of a WINDOW_UPDATE increment 'MUST be ignored when "
            "receiving' (ours masks it); h2 (hyperframe) reads it as part of the "
            "increment and refuses the frame. The comparison stops.",
        ),
        Divergence(
            "h2-rejects-zero-window-update-on-closed-stream",
            "9113 §6.9, §5.1",
            "a zero WINDOW_UPDATE is a stream error; on a stream already closed here ours "
            "ignores it, as WINDOW_UPDATE may arrive there after the stream ended; h2 "
            "refuses it while parsing, as a connection error. The comparison stops.",
        ),
        Divergence(
            "h2-ignores-rst-stream-on-idle-stream",
            "9113 §6.4, §5.1",
            "RST_STREAM on an idle stream 'MUST' be a connection error PROTOCOL_ERROR "
            "(ours); h2 ignores it. The comparison stops.",
        ),
        Divergence(
            "h2-checks-headers-at-block-end",
            "9113 §4.3, §8.4",
            "a HEADERS on an even stream, or a PUSH_PROMISE, without END_HEADERS: ours "
            "ends the connection at that frame, h2 first collects the field block and "
            "ends it when the block ends or is interrupted. The comparison stops.",
        ),
    ]
}


@dataclass(frozen=True)
class Resolution:
    """How a divergence reconciles the step where the traces differ: `theirs` replaces
    h2's actions there (None: the step is dropped from both); the comparison stops after
    it, as one side has ended the connection."""

    divergence: str
    theirs: Actions | None


def _only(counter: Counter[Action]) -> Action | None:
    items = list(counter.elements())
    return items[0] if len(items) == 1 else None


def _priority_dependency(f: ClientFrame) -> int | None:
    """The stream a PRIORITY frame, or a HEADERS with PRIORITY flag, depends on."""
    if f.kind == PRIORITY and len(f.payload) == 5:
        return int.from_bytes(f.payload[:4], "big") & 0x7FFFFFFF
    if f.kind == HEADERS and f.flags & PRIORITY_FLAG:
        start = 1 if f.flags & PADDED else 0
        if len(f.payload) >= start + 5:
            return int.from_bytes(f.payload[start : start + 4], "big") & 0x7FFFFFFF
    return None


def _settings_pairs(f: ClientFrame) -> list[tuple[int, int]]:
    usable = len(f.payload) - len(f.payload) % 6
    return [struct.unpack_from(">HI", f.payload, i) for i in range(0, usable, 6)]


def _valid_goaway(f: ClientFrame) -> bool:
    return f.kind == GOAWAY and f.stream_id == 0 and len(f.payload) >= 8


def _h2_waits_for_block_end(at: At, f: ClientFrame) -> bool:
    """h2 collects a field block before judging its HEADERS or PUSH_PROMISE: its steps
    after this one stay silent until it ends the connection, or the script ends."""
    if f.kind not in (HEADERS, PUSH_PROMISE) or f.flags & END_HEADERS:
        return False
    for step in at.theirs[at.k + 1 :]:
        if any(a.kind in ("goaway", "refused") for a in step):
            return True
        if step:
            return False
    return True


def _reset_but_never_opened(at: At, f: ClientFrame) -> bool:
    """The field block this step ends is on a stream no earlier HEADERS opened and on
    which ours has sent RST_STREAM."""
    start = at.block_start()
    if start is None or start.kind != HEADERS:
        return False
    opened_before = any(
        g.kind == HEADERS and g.stream_id == start.stream_id
        for g in at.earlier_frames()
        if g is not start
    )
    reset = any(
        a.kind == "rst" and a.stream_id == start.stream_id for step in at.ours[: at.k] for a in step
    )
    return reset and not opened_before


def invalid_field_8_2_1(name: bytes, value: bytes) -> bool:
    """A field RFC 9113 §8.2.1 says implementations SHOULD refuse: a name empty or with
    a character outside 0x21-0x7E, an uppercase letter, or a colon after the first; a
    value with NUL, LF or CR, or starting or ending with a space or tab."""
    if not name or name.find(b":", 1) != -1:
        return True
    if any(c <= 0x20 or 0x41 <= c <= 0x5A or c >= 0x7F for c in name):
        return True
    if any(c in (0x00, 0x0A, 0x0D) for c in value):
        return True
    return bool(value) and (value[:1] in (b" ", b"\t") or value[-1:] in (b" ", b"\t"))


def _delivers_invalid_field(at: At, f: ClientFrame) -> bool:
    return any(
        a.kind == "headers"
        and isinstance(a.value, tuple)
        and any(invalid_field_8_2_1(n, v) for n, v in a.value)
        for a in at.ours[at.k]
    )


FramePredicate = Callable[[At, ClientFrame], bool]

# Both end the connection at the step, with different codes: (divergence, frame, our
# code, h2's code).
CODE_DIFFERENCES: tuple[tuple[str, FramePredicate, int, int], ...] = (
    (
        "h2-hpack-error-is-protocol-error",
        lambda at, f: f.kind in (HEADERS, CONTINUATION),
        h2_conn.COMPRESSION_ERROR,
        h2_conn.PROTOCOL_ERROR,
    ),
    (
        "h2-settings-ack-payload-is-protocol-error",
        lambda at, f: f.kind == SETTINGS and bool(f.flags & ACK) and bool(f.payload),
        h2_conn.FRAME_SIZE_ERROR,
        h2_conn.PROTOCOL_ERROR,
    ),
    (
        "reused-stream-id-code",
        lambda at, f: f.kind in (HEADERS, CONTINUATION),
        h2_conn.PROTOCOL_ERROR,
        h2_conn.STREAM_CLOSED,
    ),
    (
        "h2-validates-all-settings-first",
        lambda at, f: f.kind == SETTINGS and len(_settings_pairs(f)) > 1,
        h2_conn.FLOW_CONTROL_ERROR,
        h2_conn.PROTOCOL_ERROR,
    ),
    (
        "h2-validates-all-settings-first",
        lambda at, f: f.kind == SETTINGS and len(_settings_pairs(f)) > 1,
        h2_conn.PROTOCOL_ERROR,
        h2_conn.FLOW_CONTROL_ERROR,
    ),
    (
        "h2-checks-frame-size-before-block-interruption",
        lambda at, f: at.interrupts_block(),
        h2_conn.PROTOCOL_ERROR,
        h2_conn.FRAME_SIZE_ERROR,
    ),
    (
        "push-promise-code",
        lambda at, f: f.kind == PUSH_PROMISE,
        h2_conn.PROTOCOL_ERROR,
        h2_conn.FRAME_SIZE_ERROR,
    ),
)

# h2 ends the connection at the step, ours goes on.
H2_STRICTER: tuple[tuple[str, FramePredicate], ...] = (
    ("h2-validates-field-characters", _delivers_invalid_field),
    ("h2-implements-altsvc", lambda at, f: f.kind == ALTSVC),
    (
        "h2-implements-extended-connect",
        lambda at, f: (
            f.kind == SETTINGS
            and not f.flags & ACK
            and any(k == ENABLE_CONNECT_PROTOCOL and v > 1 for k, v in _settings_pairs(f))
        ),
    ),
    (
        "h2-rejects-self-dependency",
        lambda at, f: any(
            g is not None and _priority_dependency(g) == g.stream_id for g in (f, at.block_start())
        ),
    ),
    (
        "h2-headers-padding-off-by-one",
        lambda at, f: (
            f.kind == HEADERS
            and f.flags & (PADDED | PRIORITY_FLAG) == PADDED
            and len(f.payload) >= 1
            and f.payload[0] == len(f.payload) - 1
        ),
    ),
    (
        "h2-ends-connection-on-client-goaway",
        lambda at, f: any(_valid_goaway(g) for g in at.earlier_frames()),
    ),
    ("h2-forgets-resets-of-unopened-streams", _reset_but_never_opened),
    (
        "h2-checks-priority-length-after-our-reset",
        lambda at, f: f.kind == PRIORITY and len(f.payload) != 5 and not at.ours[at.k],
    ),
    (
        "h2-reads-window-update-reserved-bit",
        lambda at, f: f.kind == WINDOW_UPDATE and len(f.payload) == 4 and f.payload[0] >= 0x80,
    ),
    (
        "h2-rejects-zero-window-update-on-closed-stream",
        lambda at, f: (
            f.kind == WINDOW_UPDATE
            and f.stream_id != 0
            and len(f.payload) == 4
            and int.from_bytes(f.payload, "big") & 0x7FFFFFFF == 0
            and not at.ours[at.k]
        ),
    ),
)

# Ours ends the connection at the step, h2 goes on.
OURS_STRICTER: tuple[tuple[str, FramePredicate], ...] = (
    (
        "h2-ignores-rst-stream-on-idle-stream",
        lambda at, f: f.kind == RST_STREAM and f.stream_id != 0 and len(f.payload) == 4,
    ),
    ("h2-checks-headers-at-block-end", _h2_waits_for_block_end),
)


def _bad_preface(at: At) -> Resolution | None:
    ours, theirs = _only(at.only_ours), _only(at.only_theirs)
    if ours == Action("goaway", 0, h2_conn.PROTOCOL_ERROR) and theirs == Action(
        "refused", 0, h2_conn.PROTOCOL_ERROR
    ):
        return Resolution("h2-omits-goaway-for-bad-preface", at.ours[at.k])
    return None


def _stream_error_as_connection_error(at: At) -> Resolution | None:
    rst, goaway = _only(at.only_ours), _only(at.only_theirs)
    if rst is None or goaway is None or (rst.kind, goaway.kind) != ("rst", "goaway"):
        return None
    if rst.value != goaway.value:
        return None
    return Resolution("stream-error-as-connection-error", at.ours[at.k])


def _code_differs(at: At) -> Resolution | None:
    ours, theirs, f = _only(at.only_ours), _only(at.only_theirs), at.frame
    if ours is None or theirs is None or f is None:
        return None
    if ours.kind != "goaway" or theirs.kind not in ("goaway", "refused"):
        return None
    for name, predicate, our_code, their_code in CODE_DIFFERENCES:
        if (ours.value, theirs.value) == (our_code, their_code) and predicate(at, f):
            return Resolution(name, at.ours[at.k])
    return None


def _one_side_ends(at: At) -> Resolution | None:
    f = at.frame
    if f is None or at.ours_end() == (at.theirs_end() is not None):
        return None
    table = OURS_STRICTER if at.ours_end() else H2_STRICTER
    for name, predicate in table:
        if predicate(at, f):
            return Resolution(name, None)
    return None


def _h2_repeats_reset(at: At) -> bool:
    """True when h2's step differs from ours only by RST_STREAMs on streams h2 reset in
    an earlier step, where ours sends none."""
    earlier = {a.stream_id for step in at.theirs[: at.k] for a in step if a.kind == "rst"}
    extra = list(at.only_theirs.elements())
    return (
        bool(extra)
        and not at.only_ours
        and all(a.kind == "rst" and a.stream_id in earlier for a in extra)
    )


RULES: tuple[Callable[[At], Resolution | None], ...] = (
    _bad_preface,
    _stream_error_as_connection_error,
    _code_differs,
    _one_side_ends,
)


def reconcile(script: Script, ours: Trace, theirs: Trace) -> tuple[Trace, Trace, tuple[str, ...]]:
    """Both traces, made comparable by the DIVERGENCES applied (named, in order)."""
    ours, theirs = list(ours), list(theirs)
    applied: list[str] = []
    for k in range(len(script)):
        at = At(script, k, ours, theirs)
        if _h2_repeats_reset(at):
            theirs[k] = tuple(a for a in theirs[k] if a not in at.only_theirs)
            applied.append("h2-repeats-rst")
        if sorted(a.key() for a in ours[k]) == sorted(a.key() for a in theirs[k]):
            continue
        for rule in RULES:
            resolution = rule(at)
            if resolution is not None:
                applied.append(resolution.divergence)
                if resolution.theirs is None:
                    return ours[:k], theirs[:k], tuple(applied)
                theirs[k] = resolution.theirs
                return ours[: k + 1], theirs[: k + 1], tuple(applied)
        break  # no divergence explains it: the outcomes will show the difference
    return ours, theirs, tuple(applied)


@dataclass(frozen=True)
class Comparison:
    """Both outcomes of a script, after reconciling, the divergences applied, and our
    outcome before reconciling (what our server did with all of the script)."""

    script: Script
    ours: Outcome
    theirs: Outcome
    applied: tuple[str, ...]
    ours_full: Outcome

    def agree(self) -> bool:
        return self.ours == self.theirs

    def describe(self) -> str:
        lines = ["script:"] + [f"  {i}: {s.describe()}" for i, s in enumerate(self.script)]
        if self.ours_full != self.ours:
            lines += ["ours, all of the script:"]
            lines += ["  " + line for line in self.ours_full.describe().splitlines()]
        lines += ["ours:"] + ["  " + line for line in self.ours.describe().splitlines()]
        lines += ["h2:"] + ["  " + line for line in self.theirs.describe().splitlines()]
        lines += ["divergences applied:"] + [f"  {DIVERGENCES[n].describe()}" for n in self.applied]
        return "\n".join(lines)


def compare(script: Script, stream_window: int = h2_conn.STREAM_WINDOW) -> Comparison:
    ours = run_ours(script, stream_window)
    ours_cut, theirs, applied = reconcile(script, ours, run_h2(script, stream_window))
    return Comparison(script, outcome(ours_cut), outcome(theirs), applied, outcome(ours))


def raw_outcomes(
    script: Script, stream_window: int = h2_conn.STREAM_WINDOW
) -> tuple[Outcome, Outcome]:
    """Both outcomes, not reconciled."""
    return outcome(run_ours(script, stream_window)), outcome(run_h2(script, stream_window))


# -- hand-written cases: the RFC 9113 rules both must agree on ---------------------------


@dataclass(frozen=True)
class Case:
    """A script, how our server ends it (`connection`: "alive" or "GOAWAY <code>";
    `stream`: stream 1's status), and the divergences the comparison with h2 must need,
    in order (none: identical outcomes)."""

    name: str
    script: Script
    connection: str
    stream: str = "never opened"
    divergences: tuple[str, ...] = ()
    stream_window: int = h2_conn.STREAM_WINDOW


def _continued(
    stream_id: int, headers: Sequence[tuple[str, str]], cut: int, flags: int = 0
) -> tuple[ClientFrame, ClientFrame]:
    """A request block over HEADERS (without END_HEADERS) and one CONTINUATION."""
    encoded = block(headers)
    return (
        ClientFrame(HEADERS, flags, stream_id, encoded[:cut]),
        ClientFrame(CONTINUATION, END_HEADERS, stream_id, encoded[cut:]),
    )


def _shared_encoder_blocks(count: int) -> list[bytes]:
    """The same request `count` times from one encoder: later blocks index the table."""
    encoder = hpack.Encoder()
    return [encoder.encode(GRPC_REQUEST) for _ in range(count)]


_PSEUDO = GRPC_REQUEST[:4]  # :method, :scheme, :path, :authority
_REGULAR = GRPC_REQUEST[4:]
PING_DATA = b"\x01\x02\x03\x04\x05\x06\x07\x08"
STREAM_ERROR = ("stream-error-as-connection-error",)
H = headers_frame

CASES = [
    # §3.4 the preface
    Case(
        "3.4-preface-of-http1",
        (Send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),),
        "GOAWAY PROTOCOL_ERROR",
        divergences=("h2-omits-goaway-for-bad-preface",),
    ),
    Case(
        "3.4-preface-last-byte-wrong",
        (Send(PREFACE[:-1] + b"!"),),
        "GOAWAY PROTOCOL_ERROR",
        divergences=("h2-omits-goaway-for-bad-preface",),
    ),
    Case(
        "3.4-preface-in-pieces",
        (Send(PREFACE[:5]), Send(PREFACE[5:17]), Send(PREFACE[17:] + frame(SETTINGS, 0, 0))),
        "alive",
    ),
    Case(
        "3.4-preface-then-frames-in-one-piece",
        (Send(OPENING + H(1).encode() + data_frame(1, end_stream=True).encode()),),
        "alive",
        "ended",
    ),
    # §6.5 SETTINGS and their ACK
    Case(
        "6.5-settings-acknowledged",
        opened(
            sends(
                settings_frame(
                    (h2_conn.SETTINGS_MAX_CONCURRENT_STREAMS, 10),
                    (h2_conn.SETTINGS_HEADER_TABLE_SIZE, 0),
                )
            )
        ),
        "alive",
    ),
    Case(
        "6.5-settings-ack-not-acknowledged", opened(sends(ClientFrame(SETTINGS, ACK, 0))), "alive"
    ),
    Case(
        "6.5-settings-ack-with-payload",
        opened(sends(ClientFrame(SETTINGS, ACK, 0, bytes(6)))),
        "GOAWAY FRAME_SIZE_ERROR",
        divergences=("h2-settings-ack-payload-is-protocol-error",),
    ),
    Case(
        "6.5-settings-on-a-stream",
        opened(sends(ClientFrame(SETTINGS, 0, 1, bytes(6)))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.5-settings-length-not-a-multiple-of-6",
        opened(sends(ClientFrame(SETTINGS, 0, 0, bytes(7)))),
        "GOAWAY FRAME_SIZE_ERROR",
    ),
    Case("6.5.2-unknown-setting-ignored", opened(sends(settings_frame((0xFF, 7)))), "alive"),
    Case(
        "6.5.2-enable-push-2",
        opened(sends(settings_frame((h2_conn.SETTINGS_ENABLE_PUSH, 2)))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.5.2-initial-window-2^31",
        opened(sends(settings_frame((h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, 2**31)))),
        "GOAWAY FLOW_CONTROL_ERROR",
    ),
    Case(
        "6.5.2-max-frame-size-16383",
        opened(sends(settings_frame((h2_conn.SETTINGS_MAX_FRAME_SIZE, 16_383)))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.5.2-max-frame-size-2^24",
        opened(sends(settings_frame((h2_conn.SETTINGS_MAX_FRAME_SIZE, 2**24)))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.5.2-max-frame-size-2^24-1",
        opened(sends(settings_frame((h2_conn.SETTINGS_MAX_FRAME_SIZE, 2**24 - 1)))),
        "alive",
    ),
    Case(
        "6.5.2-extended-connect-2",
        opened(sends(settings_frame((ENABLE_CONNECT_PROTOCOL, 2)))),
        "alive",
        divergences=("h2-implements-extended-connect",),
    ),
    Case(
        "6.5.3-two-bad-values-first-one-counts",
        opened(
            sends(
                H(1),
                window_update_frame(1, h2_conn.MAX_WINDOW - h2_conn.DEFAULT_WINDOW),
                settings_frame(
                    (h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, h2_conn.DEFAULT_WINDOW + 1),
                    (h2_conn.SETTINGS_ENABLE_PUSH, 2),
                ),
            )
        ),
        "GOAWAY FLOW_CONTROL_ERROR",
        "open",
        ("h2-validates-all-settings-first",),
    ),
    Case(
        "6.9.2-initial-window-overflowing-an-open-stream",
        opened(
            sends(
                H(1),
                window_update_frame(1, h2_conn.MAX_WINDOW - h2_conn.DEFAULT_WINDOW),
                settings_frame((h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, h2_conn.DEFAULT_WINDOW + 1)),
            )
        ),
        "GOAWAY FLOW_CONTROL_ERROR",
        "open",
    ),
    # §6.7 PING
    Case(
        "6.7-ping-answered-with-its-payload",
        opened(sends(ClientFrame(PING, 0, 0, PING_DATA))),
        "alive",
    ),
    Case("6.7-ping-ack-not-answered", opened(sends(ClientFrame(PING, ACK, 0, PING_DATA))), "alive"),
    Case(
        "6.7-ping-of-7-bytes",
        opened(sends(ClientFrame(PING, 0, 0, PING_DATA[:7]))),
        "GOAWAY FRAME_SIZE_ERROR",
    ),
    Case(
        "6.7-ping-on-a-stream",
        opened(sends(ClientFrame(PING, 0, 1, PING_DATA))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    # §6.9 WINDOW_UPDATE
    Case(
        "6.9-zero-connection-window-update",
        opened(sends(window_update_frame(0, 0))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.9-zero-stream-window-update",
        opened(sends(H(1), window_update_frame(1, 0))),
        "alive",
        "reset PROTOCOL_ERROR",
        STREAM_ERROR,
    ),
    Case(
        "6.9-zero-window-update-on-a-closed-stream",
        opened(sends(H(1), rst_frame(1), window_update_frame(1, 0))),
        "alive",
        "cancelled CANCEL",
        ("h2-rejects-zero-window-update-on-closed-stream",),
    ),
    Case(
        "6.9-window-update-of-3-bytes",
        opened(sends(ClientFrame(WINDOW_UPDATE, 0, 0, b"\x00\x00\x01"))),
        "GOAWAY FRAME_SIZE_ERROR",
    ),
    Case(
        "6.9-window-update-reserved-bit-ignored",
        opened(sends(window_update_frame(0, 0x8000_0001))),
        "alive",
        divergences=("h2-reads-window-update-reserved-bit",),
    ),
    Case(
        "6.9.1-connection-window-overflow",
        opened(sends(window_update_frame(0, h2_conn.MAX_WINDOW))),
        "GOAWAY FLOW_CONTROL_ERROR",
    ),
    Case(
        "6.9.1-stream-window-overflow",
        opened(sends(H(1), window_update_frame(1, h2_conn.MAX_WINDOW))),
        "alive",
        "reset FLOW_CONTROL_ERROR",
    ),
    Case(
        "5.1-window-update-on-an-idle-stream",
        opened(sends(window_update_frame(3, 10))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "5.1-window-update-on-a-closed-stream-ignored",
        opened(sends(H(1, end_stream=True)), Respond(1), sends(window_update_frame(1, 10))),
        "alive",
        "ended",
    ),
    # §6.9.1 flow control of what the client sends
    Case(
        "6.9.1-stream-window-used-exactly",
        opened(sends(H(1), data_frame(1, b"a" * 600), data_frame(1, b"b" * 400, end_stream=True))),
        "alive",
        "ended",
        stream_window=1000,
    ),
    Case(
        "6.9.1-stream-window-overrun",
        opened(sends(H(1), data_frame(1, b"a" * 600), data_frame(1, b"b" * 401))),
        "alive",
        "reset FLOW_CONTROL_ERROR",
        STREAM_ERROR,
        stream_window=1000,
    ),
    Case(
        "6.1-padding-counts-against-the-window",
        opened(
            sends(
                H(1),
                ClientFrame(DATA, PADDED, 1, bytes([200]) + b"a" * 799 + bytes(200)),
                data_frame(1, b"b"),
            )
        ),
        "alive",
        "reset FLOW_CONTROL_ERROR",
        STREAM_ERROR,
        stream_window=1000,
    ),
    # §6.1 DATA
    Case("6.1-data-on-stream-0", opened(sends(data_frame(0))), "GOAWAY PROTOCOL_ERROR"),
    Case("5.1-data-on-an-idle-stream", opened(sends(data_frame(1))), "GOAWAY PROTOCOL_ERROR"),
    Case("5.1-data-on-an-even-stream", opened(sends(H(3), data_frame(2))), "GOAWAY PROTOCOL_ERROR"),
    Case(
        "5.1-data-on-a-half-closed-remote-stream",
        opened(sends(H(1, end_stream=True), data_frame(1))),
        "alive",
        "reset STREAM_CLOSED",
    ),
    Case(
        "5.1-data-after-the-clients-rst-stream",
        opened(sends(H(1), rst_frame(1), data_frame(1))),
        "alive",
        "reset STREAM_CLOSED",
    ),
    Case(
        "6.1-data-on-a-stream-closed-by-both-ends",
        opened(sends(H(1, end_stream=True)), Respond(1), sends(data_frame(1))),
        "alive",
        "reset STREAM_CLOSED",
    ),
    Case(
        "6.1-data-on-a-skipped-stream-id",
        opened(sends(H(3), data_frame(1))),
        "alive",
        "reset STREAM_CLOSED",
    ),
    Case(
        "5.1-data-after-our-rst-stream-ignored",
        opened(sends(H(1, end_stream=True), H(1, [("x-t", "1")], end_stream=True), data_frame(1))),
        "alive",
        "reset STREAM_CLOSED",
        ("h2-repeats-rst",),
    ),
    Case(
        "6.1-data-padding-longer-than-the-frame",
        opened(sends(H(1), ClientFrame(DATA, PADDED, 1, b"\x05abcd"))),
        "GOAWAY PROTOCOL_ERROR",
        "open",
    ),
    Case(
        "6.1-data-padding-filling-the-frame",
        opened(sends(H(1), ClientFrame(DATA, PADDED | END_STREAM, 1, b"\x04abcd"))),
        "alive",
        "ended",
    ),
    Case(
        "4.2-padded-data-without-pad-length",
        opened(sends(H(1), ClientFrame(DATA, PADDED, 1))),
        "GOAWAY FRAME_SIZE_ERROR",
        "open",
    ),
    Case(
        "6.1-empty-data-ends-the-stream",
        opened(sends(H(1), data_frame(1, b"x"), data_frame(1, b"", end_stream=True))),
        "alive",
        "ended",
    ),
    # §4.3, §6.2, §6.10 HEADERS and CONTINUATION
    Case(
        "4.3-headers-and-continuation-are-one-block",
        opened(sends(*_continued(1, GRPC_REQUEST, 7, END_STREAM))),
        "alive",
        "ended",
    ),
    Case(
        "6.10-many-continuations",
        opened(
            sends(
                ClientFrame(HEADERS, 0, 1, block(GRPC_REQUEST)[:1]),
                *(ClientFrame(CONTINUATION, 0, 1, bytes([b])) for b in block(GRPC_REQUEST)[1:-1]),
                ClientFrame(CONTINUATION, END_HEADERS, 1, block(GRPC_REQUEST)[-1:]),
            )
        ),
        "alive",
        "open",
    ),
    Case(
        "6.10-interrupted-by-ping",
        opened(sends(_continued(1, GRPC_REQUEST, 7)[0], ClientFrame(PING, 0, 0, PING_DATA))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.10-interrupted-by-data",
        opened(sends(_continued(1, GRPC_REQUEST, 7)[0], data_frame(1))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.10-interrupted-by-headers-of-another-stream",
        opened(sends(_continued(1, GRPC_REQUEST, 7)[0], H(3))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.10-interrupted-by-continuation-of-another-stream",
        opened(sends(_continued(1, GRPC_REQUEST, 7)[0], _continued(3, GRPC_REQUEST, 7)[1])),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.10-interrupted-by-a-ping-of-the-wrong-size",
        opened(sends(_continued(1, GRPC_REQUEST, 7)[0], ClientFrame(PING, 0, 0, PING_DATA[:3]))),
        "GOAWAY PROTOCOL_ERROR",
        divergences=("h2-checks-frame-size-before-block-interruption",),
    ),
    Case(
        "5.5-interrupted-by-an-unknown-frame",
        opened(sends(_continued(1, GRPC_REQUEST, 7)[0], ClientFrame(0xFA, 0, 1, b"x"))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.10-continuation-without-headers",
        opened(sends(_continued(1, GRPC_REQUEST, 7)[1])),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.10-continuation-after-end-headers",
        opened(sends(H(1), _continued(1, GRPC_REQUEST, 7)[1])),
        "GOAWAY PROTOCOL_ERROR",
        "open",
    ),
    Case(
        "6.10-continuation-on-stream-0",
        opened(
            sends(
                _continued(1, GRPC_REQUEST, 7)[0],
                ClientFrame(CONTINUATION, END_HEADERS, 0, b"\x82"),
            )
        ),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case("6.2-headers-on-stream-0", opened(sends(H(0))), "GOAWAY PROTOCOL_ERROR"),
    Case(
        "6.2-headers-padded-with-priority",
        opened(
            sends(
                ClientFrame(
                    HEADERS,
                    END_HEADERS | PADDED | PRIORITY_FLAG | END_STREAM,
                    1,
                    b"\x03" + b"\x80\x00\x00\x03\x10" + block(GRPC_REQUEST) + bytes(3),
                )
            )
        ),
        "alive",
        "ended",
    ),
    Case(
        "6.2-headers-padding-longer-than-the-frame",
        opened(
            sends(ClientFrame(HEADERS, END_HEADERS | PADDED, 1, b"\x09" + block(GRPC_REQUEST)[:4]))
        ),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.2-headers-padding-filling-the-frame",
        opened(
            sends(
                ClientFrame(HEADERS, PADDED, 1, b"\x03abc"),
                ClientFrame(CONTINUATION, END_HEADERS, 1, block(GRPC_REQUEST)),
            )
        ),
        "alive",
        "open",
        ("h2-headers-padding-off-by-one",),
    ),
    Case(
        "4.2-headers-too-short-for-its-priority",
        opened(sends(ClientFrame(HEADERS, END_HEADERS | PRIORITY_FLAG, 1, b"\x00\x00\x00"))),
        "GOAWAY FRAME_SIZE_ERROR",
    ),
    Case(
        "4.3-undecodable-block",
        opened(sends(ClientFrame(HEADERS, END_HEADERS, 1, b"\x82\xff\x10"))),
        "GOAWAY COMPRESSION_ERROR",
        divergences=("h2-hpack-error-is-protocol-error",),
    ),
    Case(
        "4.3-hpack-table-size-update-above-our-limit",
        opened(sends(ClientFrame(HEADERS, END_HEADERS, 1, b"\x3f\xe1\x3f" + block(GRPC_REQUEST)))),
        "GOAWAY COMPRESSION_ERROR",
        divergences=("h2-hpack-error-is-protocol-error",),
    ),
    Case(
        "4.3-hpack-dynamic-table-shared-by-streams",
        opened(
            sends(
                *(
                    ClientFrame(HEADERS, END_HEADERS | END_STREAM, i, b)
                    for i, b in zip((1, 3, 5), _shared_encoder_blocks(3), strict=True)
                )
            )
        ),
        "alive",
        "ended",
    ),
    Case(
        "10.5.1-header-list-above-our-limit",
        opened(
            sends(
                ClientFrame(
                    HEADERS,
                    END_HEADERS | END_STREAM,
                    1,
                    hpack.Encoder().encode(
                        [*GRPC_REQUEST, ("x-big", "a" * h2_conn.MAX_HEADER_LIST)], huffman=False
                    ),
                )
            )
        ),
        "alive",
        "reset ENHANCE_YOUR_CALM",
        STREAM_ERROR,
    ),
    # §4.2 frame size
    Case(
        "4.2-frame-above-our-max-frame-size",
        opened(sends(H(1), data_frame(1, bytes(h2_conn.MAX_FRAME + 1)))),
        "GOAWAY FRAME_SIZE_ERROR",
        "open",
    ),
    Case(
        "4.2-frame-at-our-max-frame-size",
        opened(sends(H(1), data_frame(1, bytes(h2_conn.MAX_FRAME), end_stream=True))),
        "alive",
        "ended",
    ),
    # §5.1.1 stream ids
    Case("5.1.1-even-stream-id", opened(sends(H(2))), "GOAWAY PROTOCOL_ERROR"),
    Case(
        "5.1.1-even-stream-id-over-continuation",
        opened(sends(*_continued(2, GRPC_REQUEST, 7))),
        "GOAWAY PROTOCOL_ERROR",
        divergences=("h2-checks-headers-at-block-end",),
    ),
    Case("5.1.1-decreasing-stream-id", opened(sends(H(5), H(3))), "GOAWAY PROTOCOL_ERROR"),
    Case(
        "5.1.1-stream-id-reused-after-both-ended",
        opened(sends(H(1, end_stream=True)), Respond(1), sends(H(1, end_stream=True))),
        "GOAWAY PROTOCOL_ERROR",
        "ended",
        ("reused-stream-id-code",),
    ),
    Case(
        "5.1.1-skipped-ids-are-closed", opened(sends(H(7, end_stream=True), rst_frame(3))), "alive"
    ),
    Case("5.1.1-largest-stream-id", opened(sends(H(2**31 - 1, end_stream=True))), "alive"),
    # §5.1 stream states
    Case(
        "5.1-headers-on-a-half-closed-remote-stream",
        opened(sends(H(1, end_stream=True), H(1, [("x-t", "1")], end_stream=True))),
        "alive",
        "reset STREAM_CLOSED",
    ),
    Case(
        "5.1-headers-on-a-skipped-stream-after-our-rst-stream",
        opened(sends(H(3), data_frame(1), H(1, end_stream=True))),
        "alive",
        "reset STREAM_CLOSED",
        ("h2-forgets-resets-of-unopened-streams",),
    ),
    Case(
        "5.1-headers-after-the-clients-rst-stream",
        opened(sends(H(1), rst_frame(1), H(1, [("x-t", "1")], end_stream=True))),
        "alive",
        "reset STREAM_CLOSED",
    ),
    Case(
        "6.4-rst-stream-cancels-the-stream",
        opened(sends(H(1), data_frame(1, b"part"), rst_frame(1, 0x1234))),
        "alive",
        "cancelled 0x1234",
    ),
    Case(
        "6.4-rst-stream-on-an-idle-stream-first",
        opened(sends(rst_frame(1))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.4-rst-stream-on-an-idle-stream",
        opened(sends(H(1), rst_frame(3))),
        "GOAWAY PROTOCOL_ERROR",
        "open",
        ("h2-ignores-rst-stream-on-idle-stream",),
    ),
    Case(
        "6.4-rst-stream-on-an-even-stream",
        opened(sends(H(1), rst_frame(2))),
        "GOAWAY PROTOCOL_ERROR",
        "open",
        ("h2-ignores-rst-stream-on-idle-stream",),
    ),
    Case("6.4-rst-stream-on-stream-0", opened(sends(rst_frame(0))), "GOAWAY PROTOCOL_ERROR"),
    Case(
        "6.4-rst-stream-of-3-bytes",
        opened(sends(H(1), ClientFrame(RST_STREAM, 0, 1, bytes(3)))),
        "GOAWAY FRAME_SIZE_ERROR",
        "open",
    ),
    Case(
        "6.4-rst-stream-twice",
        opened(sends(H(1), rst_frame(1), rst_frame(1))),
        "alive",
        "cancelled CANCEL",
    ),
    # §6.3 PRIORITY
    Case(
        "6.3-priority-on-an-idle-stream-ignored",
        opened(sends(ClientFrame(PRIORITY, 0, 5, b"\x00\x00\x00\x03\x10"), H(5, end_stream=True))),
        "alive",
    ),
    Case(
        "6.3-priority-on-stream-0",
        opened(sends(ClientFrame(PRIORITY, 0, 0, b"\x00\x00\x00\x03\x10"))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "6.3-priority-of-4-bytes",
        opened(sends(H(1), ClientFrame(PRIORITY, 0, 1, bytes(4)))),
        "alive",
        "reset FRAME_SIZE_ERROR",
        STREAM_ERROR,
    ),
    Case(
        "5.1-priority-of-4-bytes-after-our-rst-stream",
        opened(
            sends(
                H(1, end_stream=True),
                H(1, [("x-t", "1")], end_stream=True),
                ClientFrame(PRIORITY, 0, 1, bytes(4)),
            )
        ),
        "alive",
        "reset STREAM_CLOSED",
        ("h2-checks-priority-length-after-our-reset",),
    ),
    Case(
        "6.3-priority-of-6-bytes-on-an-idle-stream",
        opened(sends(ClientFrame(PRIORITY, 0, 3, bytes(6)))),
        "GOAWAY FRAME_SIZE_ERROR",
    ),
    Case(
        "5.3.2-priority-on-its-own-stream",
        opened(sends(H(1), ClientFrame(PRIORITY, 0, 1, b"\x00\x00\x00\x01\x10"))),
        "alive",
        "open",
        ("h2-rejects-self-dependency",),
    ),
    Case(
        "5.3.2-headers-priority-on-its-own-stream",
        opened(
            sends(
                ClientFrame(
                    HEADERS,
                    END_HEADERS | PRIORITY_FLAG,
                    1,
                    b"\x00\x00\x00\x01\x10" + block(GRPC_REQUEST),
                )
            )
        ),
        "alive",
        "open",
        ("h2-rejects-self-dependency",),
    ),
    # §8.4, §6.8, §5.5
    Case(
        "8.4-push-promise-from-a-client",
        opened(
            sends(
                H(1),
                ClientFrame(
                    PUSH_PROMISE, END_HEADERS, 1, b"\x00\x00\x00\x02" + block(GRPC_REQUEST)
                ),
            )
        ),
        "GOAWAY PROTOCOL_ERROR",
        "open",
    ),
    Case(
        "8.4-push-promise-too-short-for-its-promised-id",
        opened(sends(H(1), ClientFrame(PUSH_PROMISE, END_HEADERS, 1, b"\x00\x02"))),
        "GOAWAY PROTOCOL_ERROR",
        "open",
        ("push-promise-code",),
    ),
    Case(
        "8.4-push-promise-continued",
        opened(
            sends(
                H(1),
                ClientFrame(PUSH_PROMISE, 0, 1, b"\x00\x00\x00\x02"),
                ClientFrame(CONTINUATION, END_HEADERS, 1, block(GRPC_REQUEST)),
            )
        ),
        "GOAWAY PROTOCOL_ERROR",
        "open",
        ("h2-checks-headers-at-block-end",),
    ),
    Case(
        "6.8-goaway-on-a-stream",
        opened(sends(ClientFrame(GOAWAY, 0, 1, bytes(8)))),
        "GOAWAY PROTOCOL_ERROR",
    ),
    Case(
        "4.2-goaway-of-4-bytes",
        opened(sends(ClientFrame(GOAWAY, 0, 0, bytes(4)))),
        "GOAWAY FRAME_SIZE_ERROR",
    ),
    Case(
        "6.8-client-goaway-then-more-of-a-stream",
        opened(sends(H(1), goaway_frame(), data_frame(1, end_stream=True))),
        "alive",
        "ended",
        ("h2-ends-connection-on-client-goaway",),
    ),
    Case(
        "5.5-unknown-frame-types-ignored",
        opened(
            sends(
                ClientFrame(0xFA, 0xFF, 0, b"whatever"),
                ClientFrame(0x20, 0, 1, b"x"),
                H(1, end_stream=True),
            )
        ),
        "alive",
        "ended",
    ),
    Case(
        "5.5-unknown-flags-ignored",
        opened(
            sends(
                ClientFrame(HEADERS, END_HEADERS | 0xD2, 1, block(GRPC_REQUEST)),
                ClientFrame(DATA, 0xF6 | END_STREAM, 1, b"x"),
            )
        ),
        "alive",
        "ended",
    ),
    Case(
        "5.5-malformed-altsvc",
        opened(sends(ClientFrame(ALTSVC, 0, 0, b"\x00"))),
        "alive",
        divergences=("h2-implements-altsvc",),
    ),
    # §8.1-8.3 requests and trailers
    *(
        Case(
            f"8.2-malformed-request-{name}",
            opened(sends(H(1, headers))),
            "alive",
            "reset PROTOCOL_ERROR",
            STREAM_ERROR,
        )
        for name, headers in [
            ("uppercase-name", [*_PSEUDO, ("Content-Type", "application/grpc")]),
            ("uppercase-pseudo", [*_PSEUDO[:3], (":Authority", "a"), *_REGULAR]),
            ("connection-field", [*GRPC_REQUEST, ("connection", "keep-alive")]),
            ("transfer-encoding", [*GRPC_REQUEST, ("transfer-encoding", "chunked")]),
            ("te-gzip", [*_PSEUDO, ("te", "gzip")]),
            ("pseudo-after-regular", [*_PSEUDO[:2], ("x-early", "1"), *_PSEUDO[2:]]),
            ("unknown-pseudo", [*GRPC_REQUEST[:4], (":status", "200")]),
            ("pseudo-twice", [*_PSEUDO, (":method", "GET")]),
            ("no-method", GRPC_REQUEST[1:]),
            ("no-scheme", [GRPC_REQUEST[0], *GRPC_REQUEST[2:]]),
            ("no-path", [*GRPC_REQUEST[:2], *GRPC_REQUEST[3:]]),
            (
                "empty-path",
                [(":method", "POST"), (":scheme", "https"), (":path", ""), (":authority", "a")],
            ),
        ]
    ),
    Case(
        "8.5-connect-has-only-authority",
        opened(sends(H(1, [(":method", "CONNECT"), (":authority", "example.com:443")]))),
        "alive",
        "open",
    ),
    Case(
        "8.5-connect-with-a-path",
        opened(sends(H(1, [(":method", "CONNECT"), (":authority", "a:1"), (":path", "/")]))),
        "alive",
        "reset PROTOCOL_ERROR",
        STREAM_ERROR,
    ),
    Case(
        "4.1-reserved-bit-of-the-stream-id-ignored",
        opened(Send(frame(HEADERS, END_HEADERS | END_STREAM, 0x8000_0001, block(GRPC_REQUEST)))),
        "alive",
        "ended",
    ),
    *(
        Case(
            f"8.2.1-{name}",
            opened(sends(H(1, [*GRPC_REQUEST, field], end_stream=True))),
            "alive",
            "ended",
            ("h2-validates-field-characters",),
        )
        for name, field in [
            ("value-with-a-leading-space", ("x-a", " spaced")),
            ("value-with-a-carriage-return", ("x-a", "a\rb")),
            ("name-with-a-space", ("x a", "1")),
            ("empty-name", ("", "1")),
            ("name-with-a-colon", ("x:a", "1")),
        ]
    ),
    Case(
        "8.2.2-te-trailers-in-any-case",
        opened(sends(H(1, [*_PSEUDO, ("te", "TrAiLeRs")], end_stream=True))),
        "alive",
        "ended",
    ),
    Case(
        "8.1-trailers-end-the-request",
        opened(sends(H(1), data_frame(1), H(1, [("x-trailer", "1")], end_stream=True))),
        "alive",
        "ended",
    ),
    Case(
        "8.1-trailers-without-end-stream",
        opened(sends(H(1), H(1, [("x-trailer", "1")]))),
        "alive",
        "reset PROTOCOL_ERROR",
        STREAM_ERROR,
    ),
    Case(
        "8.1-trailers-with-a-pseudo-header",
        opened(sends(H(1), H(1, [(":path", "/x")], end_stream=True))),
        "alive",
        "reset PROTOCOL_ERROR",
        STREAM_ERROR,
    ),
    Case(
        "8.2-trailers-with-an-uppercase-name",
        opened(sends(H(1), H(1, [("X-Trailer", "1")], end_stream=True))),
        "alive",
        "reset PROTOCOL_ERROR",
        STREAM_ERROR,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_outcome_as_h2(case: Case) -> None:
    comparison = compare(case.script, case.stream_window)
    assert comparison.agree(), comparison.describe()
    assert comparison.applied == case.divergences, comparison.describe()
    assert comparison.ours_full.connection_name() == case.connection, comparison.describe()
    assert comparison.ours_full.stream(1).status() == case.stream, comparison.describe()


# -- known differences: h2 refuses what we accept, kept out of the generated scripts ----


@dataclass(frozen=True)
class KnownDifference:
    """A script whose outcomes differ on purpose: each side's summary (connection; stream
    1's status), the RFC section, and why ours may differ."""

    name: str
    script: Script
    ours: str
    theirs: str
    rfc: str
    why: str


def summary(o: Outcome) -> str:
    return f"{o.connection_name()}; stream 1 {o.stream(1).status()}"


KNOWN_DIFFERENCES = [
    KnownDifference(
        "no-authority",
        opened(sends(H(1, [GRPC_REQUEST[0], GRPC_REQUEST[1], GRPC_REQUEST[2]], end_stream=True))),
        "alive; stream 1 ended",
        "GOAWAY PROTOCOL_ERROR; stream 1 never opened",
        "9113 §8.3.1",
        ":authority is to be sent 'unless there is no authority information to convey'; "
        "h2 insists on :authority or Host. gRPC clients always send :authority.",
    ),
    KnownDifference(
        "host-differs-from-authority",
        opened(sends(H(1, [*GRPC_REQUEST, ("host", "elsewhere")], end_stream=True))),
        "alive; stream 1 ended",
        "GOAWAY PROTOCOL_ERROR; stream 1 never opened",
        "9113 §8.3.1",
        "a server SHOULD (not MUST) treat a Host that names another entity as malformed; "
        "we do not look at Host.",
    ),
    KnownDifference(
        "content-length-not-the-data-length",
        opened(
            sends(H(1, [*GRPC_REQUEST, ("content-length", "10")]), data_frame(1, end_stream=True))
        ),
        "alive; stream 1 ended",
        "GOAWAY PROTOCOL_ERROR; stream 1 open",
        "9113 §8.1.1",
        "such a request is malformed, and malformed requests 'that are detected' are "
        "stream errors; we do not track content-length: gRPC sends none, and its messages "
        "carry their own lengths, checked by the gRPC layer.",
    ),
    KnownDifference(
        "empty-path-of-another-scheme",
        opened(
            sends(
                H(
                    1,
                    [(":method", "POST"), (":scheme", "urn"), (":path", ""), (":authority", "a")],
                    end_stream=True,
                )
            )
        ),
        "alive; stream 1 ended",
        "GOAWAY PROTOCOL_ERROR; stream 1 never opened",
        "9113 §8.3.1",
        ":path 'MUST NOT be empty for http or https URIs'; h2 refuses it for any scheme.",
    ),
    KnownDifference(
        "extended-connect-not-advertised",
        opened(
            sends(
                H(
                    1,
                    [
                        (":method", "CONNECT"),
                        (":protocol", "websocket"),
                        (":scheme", "https"),
                        (":path", "/"),
                        (":authority", "a"),
                    ],
                )
            )
        ),
        "alive; stream 1 reset PROTOCOL_ERROR",
        "alive; stream 1 open",
        "RFC 8441 §4, 9113 §8.3",
        ":protocol is defined only for a server that sent SETTINGS_ENABLE_CONNECT_PROTOCOL; "
        "we do not, so it is an undefined pseudo-header (malformed); h2 takes it.",
    ),
    KnownDifference(
        "setting-repeated-bad-value-first",
        opened(
            sends(
                settings_frame(
                    (h2_conn.SETTINGS_MAX_FRAME_SIZE, 100),
                    (h2_conn.SETTINGS_MAX_FRAME_SIZE, 16_384),
                )
            )
        ),
        "GOAWAY PROTOCOL_ERROR; stream 1 never opened",
        "alive; stream 1 never opened",
        "9113 §6.5.3",
        "values 'MUST be processed in the order they appear': the first is invalid; h2 "
        "(hyperframe) keeps only the last value of a repeated identifier.",
    ),
    KnownDifference(
        "more-than-64-continuations",
        opened(
            sends(
                ClientFrame(HEADERS, 0, 1, b""),
                *(ClientFrame(CONTINUATION, 0, 1, b"") for _ in range(64)),
                ClientFrame(CONTINUATION, END_HEADERS, 1, block(GRPC_REQUEST)),
            )
        ),
        "alive; stream 1 open",
        "GOAWAY PROTOCOL_ERROR; stream 1 never opened",
        "9113 §10.5",
        "h2 limits a field block to 64 CONTINUATION frames; ours limits its bytes "
        "(HEADER_LIST_HARD_LIMIT). Both are defences an endpoint may choose.",
    ),
]


@pytest.mark.parametrize("known", KNOWN_DIFFERENCES, ids=[k.name for k in KNOWN_DIFFERENCES])
def test_known_difference_from_h2(known: KnownDifference) -> None:
    ours, theirs = raw_outcomes(known.script)
    assert (summary(ours), summary(theirs)) == (known.ours, known.theirs), (
        f"{known.name} (RFC {known.rfc}): {known.why}\nours:\n{ours.describe()}\nh2:\n{theirs.describe()}"
    )


def test_every_divergence_is_written_down_and_needed_by_a_case() -> None:
    """Every divergence a rule can apply has its justification in DIVERGENCES, and each
    is needed by a hand-written case: one no case needs is no longer shown to be real."""
    named = {
        "stream-error-as-connection-error",
        "h2-repeats-rst",
        "h2-omits-goaway-for-bad-preface",
        *(name for name, *_ in CODE_DIFFERENCES),
        *(name for name, _ in H2_STRICTER),
        *(name for name, _ in OURS_STRICTER),
    }
    assert named == set(DIVERGENCES)
    used = {name for case in CASES for name in case.divergences}
    assert set(DIVERGENCES) - used == set()


# -- generated scripts -------------------------------------------------------------------

# Names a well-formed request may carry: not the connection-specific ones (RFC 9113
# §8.2.2) nor content-length, each of which makes a request malformed (CI drew
# "connection").
MALFORMING = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"}
TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=10).filter(
    lambda name: name not in MALFORMING | {"content-length"}
)
VALUE = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12)
PATHS = ["/etcdserverpb.KV/Range", "/etcdserverpb.KV/Put", "/etcdserverpb.Watch/Watch", "/"]
FIELD_NAMES = ["x-a", "x-request-id", "user-agent", "grpc-timeout", "authorization", "x-bin"]


@st.composite
def request_headers(draw: st.DrawFn) -> list[tuple[str, str]]:
    """A well-formed request: the pseudo-headers in any order, then regular fields.
    Kept to what both must accept: no Host, content-length, CONNECT, and values of
    visible characters (see KNOWN_DIFFERENCES)."""
    pseudo = [
        (":method", draw(st.sampled_from(["POST", "GET", "PUT"]))),
        (":scheme", draw(st.sampled_from(["http", "https"]))),
        (":path", draw(st.sampled_from(PATHS))),
        (":authority", draw(st.sampled_from(["127.0.0.1:2379", "etcd", "a"]))),
    ]
    pseudo = draw(st.permutations(pseudo))
    regular = [("content-type", "application/grpc")]
    if draw(st.booleans()):
        regular.append(("te", draw(st.sampled_from(["trailers", "Trailers"]))))
    extra = draw(
        st.lists(st.tuples(st.one_of(st.sampled_from(FIELD_NAMES), TOKEN), VALUE), max_size=3)
    )
    return [*pseudo, *regular, *extra]


def _cut(data: bytes, fractions: Sequence[float]) -> list[bytes]:
    edges = sorted({0, len(data), *(int(f * len(data)) for f in fractions)})
    return [data[a:b] for a, b in pairwise(edges)]


@dataclass
class PlannedStream:
    """What a well-formed script sends on one stream, and what the server must deliver."""

    stream_id: int
    headers: list[tuple[str, str]]
    body: list[tuple[bytes, int | None]]  # DATA payloads, with their padding (None: none)
    ending: str  # on-headers, on-data, empty-data, trailers, open, cancel
    respond: bool

    def expected_status(self) -> str:
        return {"open": "open", "cancel": "cancelled CANCEL"}.get(self.ending, "ended")


@st.composite
def planned_stream(draw: st.DrawFn, stream_id: int, window: int) -> PlannedStream:
    ending = draw(
        st.sampled_from(["on-headers", "on-data", "empty-data", "trailers", "open", "cancel"])
    )
    body: list[tuple[bytes, int | None]] = []
    room = window
    if ending != "on-headers":
        for _ in range(draw(st.integers(0, 4))):
            pad = draw(st.one_of(st.none(), st.integers(0, 40)))
            size = draw(st.integers(0, 3000))
            cost = size + (0 if pad is None else pad + 1)
            if cost > room:
                break
            room -= cost
            body.append((draw(st.binary(min_size=size, max_size=size)), pad))
        if ending == "on-data" and not body:
            ending = "empty-data"
    respond = ending not in ("open", "cancel") and draw(st.booleans())
    return PlannedStream(stream_id, draw(request_headers()), body, ending, respond)


Unit = Callable[[hpack.Encoder], list[ClientFrame | Respond]]


def _headers_unit(
    draw: st.DrawFn, stream_id: int, headers: list[tuple[str, str]], end_stream: bool, huffman: bool
) -> Unit:
    fractions = draw(st.lists(st.floats(0, 1), max_size=3))
    pad = draw(st.one_of(st.none(), st.integers(0, 30)))
    dependency = draw(
        st.one_of(st.none(), st.sampled_from([0, 1, 3, 5, 7, 9]).filter(lambda d: d != stream_id))
    )

    def unit(encoder: hpack.Encoder) -> list[ClientFrame | Respond]:
        pieces = _cut(encoder.encode(headers, huffman=huffman), fractions)
        first = pieces[0]
        flags = END_STREAM if end_stream else 0
        if dependency is not None:
            flags |= PRIORITY_FLAG
            first = struct.pack(">IB", dependency, 15) + first
        if pad is not None:
            flags |= PADDED
            first = bytes([pad]) + first + bytes(pad)
        if len(pieces) == 1:
            return [ClientFrame(HEADERS, flags | END_HEADERS, stream_id, first)]
        frames: list[ClientFrame | Respond] = [ClientFrame(HEADERS, flags, stream_id, first)]
        frames += [ClientFrame(CONTINUATION, 0, stream_id, p) for p in pieces[1:-1]]
        frames.append(ClientFrame(CONTINUATION, END_HEADERS, stream_id, pieces[-1]))
        return frames

    return unit


def _frame_unit(f: ClientFrame | Respond) -> Unit:
    return lambda encoder: [f]


def _data_frame(stream_id: int, data: bytes, pad: int | None, end_stream: bool) -> ClientFrame:
    flags = END_STREAM if end_stream else 0
    if pad is None:
        return ClientFrame(DATA, flags, stream_id, data)
    return ClientFrame(DATA, flags | PADDED, stream_id, bytes([pad]) + data + bytes(pad))


@st.composite
def control_frame(draw: st.DrawFn) -> ClientFrame:
    """A frame outside any stream's request that both must take without an error."""
    kind = draw(st.sampled_from(["ping", "settings", "ack", "window", "priority", "unknown"]))
    if kind == "ping":
        return ClientFrame(
            PING, draw(st.sampled_from([0, ACK])), 0, draw(st.binary(min_size=8, max_size=8))
        )
    if kind == "settings":
        values = {
            h2_conn.SETTINGS_HEADER_TABLE_SIZE: st.integers(0, 2**32 - 1),
            h2_conn.SETTINGS_ENABLE_PUSH: st.integers(0, 1),
            h2_conn.SETTINGS_MAX_CONCURRENT_STREAMS: st.integers(0, 2**32 - 1),
            # Room left for a stream WINDOW_UPDATE (at most 2**20) on top: no overflow.
            h2_conn.SETTINGS_INITIAL_WINDOW_SIZE: st.integers(0, h2_conn.MAX_WINDOW - 2**20),
            h2_conn.SETTINGS_MAX_FRAME_SIZE: st.integers(
                h2_conn.DEFAULT_MAX_FRAME, h2_conn.MAX_FRAME_LIMIT
            ),
            h2_conn.SETTINGS_MAX_HEADER_LIST_SIZE: st.integers(0, 2**32 - 1),
            0x10: st.integers(0, 2**32 - 1),  # unknown: ignored
        }
        chosen = draw(st.lists(st.sampled_from(sorted(values)), unique=True, max_size=4))
        return settings_frame(*((k, draw(values[k])) for k in chosen))
    if kind == "ack":
        return ClientFrame(SETTINGS, ACK, 0)
    if kind == "window":
        return window_update_frame(0, draw(st.integers(1, 2**20)))
    if kind == "priority":
        stream_id = draw(st.sampled_from([1, 3, 5, 7, 9, 11]))
        dependency = draw(st.sampled_from([0, 1, 3, 5]).filter(lambda d: d != stream_id))
        return ClientFrame(
            PRIORITY, 0, stream_id, struct.pack(">IB", dependency, draw(st.integers(0, 255)))
        )
    kind_byte = draw(st.integers(0x0B, 0xFF))
    return ClientFrame(
        kind_byte, draw(st.integers(0, 255)), draw(st.integers(0, 9)), draw(st.binary(max_size=12))
    )


@dataclass(frozen=True)
class WellFormed:
    script: Script
    stream_window: int
    streams: tuple[PlannedStream, ...]


@st.composite
def well_formed_scripts(draw: st.DrawFn) -> WellFormed:
    """Valid requests on a few streams, interleaved with control frames, fed in random
    pieces: both servers must deliver exactly what was sent."""
    window = draw(st.sampled_from([h2_conn.STREAM_WINDOW, 65_535, 5_000]))
    huffman = draw(st.booleans())
    ids = sorted(draw(st.sets(st.integers(0, 30), min_size=1, max_size=4)))
    plans = [draw(planned_stream(2 * i + 1, window)) for i in ids]
    queues: list[list[Unit]] = []
    for plan in plans:
        sid = plan.stream_id
        units = [_headers_unit(draw, sid, plan.headers, plan.ending == "on-headers", huffman)]
        for i, (data, pad) in enumerate(plan.body):
            last = i == len(plan.body) - 1
            units.append(
                _frame_unit(_data_frame(sid, data, pad, plan.ending == "on-data" and last))
            )
        if plan.ending == "empty-data":
            units.append(_frame_unit(data_frame(sid, b"", end_stream=True)))
        elif plan.ending == "trailers":
            trailers = [("x-trailer", draw(VALUE))]
            units.append(_headers_unit(draw, sid, trailers, True, huffman))
        elif plan.ending == "cancel":
            units.append(_frame_unit(rst_frame(sid)))
        if draw(st.booleans()):  # a stream WINDOW_UPDATE, allowed in every state but idle
            units.insert(
                draw(st.integers(1, len(units))),
                _frame_unit(window_update_frame(sid, draw(st.integers(1, 2**20)))),
            )
        if plan.respond:
            units.append(_frame_unit(Respond(sid)))
        queues.append(units)
    control = [_frame_unit(f) for f in draw(st.lists(control_frame(), max_size=5))]
    merged: list[Unit] = []
    started = 0
    while control or any(queues):
        choices = [i for i in range(started) if queues[i]]
        if started < len(queues):
            choices.append(started)
        if control:
            choices.append(-1)
        pick = draw(st.sampled_from(choices))
        if pick == -1:
            merged.append(control.pop(0))
        else:
            started = max(started, pick + 1)
            merged.append(queues[pick].pop(0))
    encoder = hpack.Encoder()
    items = [item for unit in merged for item in unit(encoder)]
    steps: list[Step] = []
    pending: list[ClientFrame] = []
    for item in [*items, None]:
        if isinstance(item, ClientFrame):
            pending.append(item)
            continue
        if pending:
            data = b"".join(f.encode() for f in pending)
            cuts = draw(st.lists(st.integers(0, len(data)), max_size=6))
            steps.append(Send(data, pending[0] if len(pending) == 1 else None, tuple(cuts)))
            pending = []
        if isinstance(item, Respond):
            steps.append(item)
    return WellFormed(opened(steps), window, tuple(plans))


@given(well_formed_scripts())
def test_well_formed_requests_same_outcome_as_h2(case: WellFormed) -> None:
    comparison = compare(case.script, case.stream_window)
    assert comparison.applied == () and comparison.agree(), comparison.describe()
    ours = comparison.ours
    assert ours.connection is None, comparison.describe()
    for plan in case.streams:
        got = ours.stream(plan.stream_id)
        assert got.headers == tuple((n.encode(), v.encode()) for n, v in plan.headers), (
            got.describe()
        )
        assert got.data == b"".join(data for data, _ in plan.body), got.describe()
        assert got.status() == plan.expected_status(), got.describe()
        event(f"ending {plan.ending}")
    pieces = sum(len(step.pieces()) for step in case.script if isinstance(step, Send))
    event(f"fed in {'<= 3' if pieces <= 3 else '4-10' if pieces <= 10 else '> 10'} pieces")
    event(
        "padding"
        if any(pad is not None for p in case.streams for _, pad in p.body)
        else "no padding"
    )
    sent = b"".join(step.data for step in case.script if isinstance(step, Send))
    event("continuation" if _has_kind(sent, CONTINUATION) else "no continuation")
    event("respond" if any(isinstance(step, Respond) for step in case.script) else "no respond")


def _has_kind(data: bytes, kind: int) -> bool:
    """Whether the frames in `data` (after the preface) include one of `kind`."""
    position = len(PREFACE) if data.startswith(PREFACE) else 0
    while position + 9 <= len(data):
        high, low, found, _, _ = h2_conn.FRAME_HEADER.unpack_from(data, position)
        if found == kind:
            return True
        position += 9 + ((high << 8) | low)
    return False


# -- generated malformed scripts ---------------------------------------------------------

STREAM_IDS = st.sampled_from([0, 1, 2, 3, 5, 7, 9, 2**31 - 1])
INCREMENTS = st.sampled_from([0, 1, 1000, 2**16, 2**31 - 1, 2**31, 2**31 + 5])
SETTING_VALUES = st.sampled_from(
    [0, 1, 2, 100, 16_383, 16_384, 65_535, 65_536, 2**24 - 1, 2**24, 2**31 - 1, 2**31, 2**32 - 1]
)


def _bad_request_headers() -> st.SearchStrategy[list[tuple[str, str]]]:
    """Requests both must refuse (malformed by a MUST of §8.2-8.3), or accept."""
    good = list(GRPC_REQUEST)
    return st.sampled_from(
        [
            good,
            [*good, ("Upper", "1")],
            [*good, ("connection", "close")],
            [*good, ("te", "gzip")],
            [good[0], ("x-early", "1"), *good[1:]],
            [*good, (":status", "200")],
            [*good, (":method", "GET")],
            good[1:],
            [(":method", "CONNECT"), (":authority", "a:1")],
            [(":method", "POST"), (":scheme", "https"), (":path", ""), (":authority", "a")],
        ]
    )


@st.composite
def any_frame(draw: st.DrawFn, encoder: hpack.Encoder) -> list[Step]:
    """One frame of any type with any flags and stream id, its payload shaped for the
    type or not; or a field block over HEADERS and CONTINUATION; or a response."""
    kind = draw(
        st.sampled_from(
            [
                DATA,
                HEADERS,
                PRIORITY,
                RST_STREAM,
                SETTINGS,
                PUSH_PROMISE,
                PING,
                GOAWAY,
                WINDOW_UPDATE,
                CONTINUATION,
                ALTSVC,
                0x42,
                "split",
                "respond",
            ]
        )
    )
    stream_id = draw(STREAM_IDS)
    if kind == "respond":
        return [Respond(stream_id)]
    flags = draw(
        st.one_of(
            st.sampled_from(
                [
                    0,
                    END_STREAM,
                    END_HEADERS,
                    END_HEADERS | END_STREAM,
                    PADDED,
                    PADDED | END_HEADERS,
                    PRIORITY_FLAG | END_HEADERS,
                    ACK,
                ]
            ),
            st.integers(0, 255),
        )
    )
    if kind == "split":
        encoded = encoder.encode(draw(_bad_request_headers()))
        cut = draw(st.integers(0, len(encoded)))
        other = draw(st.sampled_from([stream_id, stream_id, 3]))
        return list(
            sends(
                ClientFrame(HEADERS, flags & ~END_HEADERS & 0xFF, stream_id, encoded[:cut]),
                ClientFrame(CONTINUATION, END_HEADERS, other, encoded[cut:]),
            )
        )
    assert isinstance(kind, int)
    payload: bytes
    if kind in (HEADERS, CONTINUATION, PUSH_PROMISE):
        choice = draw(st.sampled_from(["request", "trailers", "random", "empty"]))
        if choice == "request":
            payload = encoder.encode(draw(_bad_request_headers()))
        elif choice == "trailers":
            payload = encoder.encode([("x-trailer", "1")])
        else:
            payload = draw(st.binary(max_size=20)) if choice == "random" else b""
        if kind == PUSH_PROMISE:
            payload = struct.pack(">I", draw(st.sampled_from([0, 2, 3]))) + payload
        if kind == HEADERS and flags & PRIORITY_FLAG and draw(st.booleans()):
            payload = struct.pack(">IB", draw(STREAM_IDS), 15) + payload
    elif kind == DATA:
        payload = draw(st.binary(max_size=150))
    elif kind == PRIORITY:
        payload = draw(
            st.one_of(
                st.builds(lambda d, w: struct.pack(">IB", d, w), STREAM_IDS, st.integers(0, 255)),
                st.binary(max_size=7),
            )
        )
    elif kind == RST_STREAM:
        payload = draw(
            st.one_of(
                st.builds(lambda c: struct.pack(">I", c), st.integers(0, 15)), st.binary(max_size=6)
            )
        )
    elif kind == SETTINGS:
        if draw(st.booleans()):
            ids = draw(
                st.lists(st.sampled_from([1, 2, 3, 4, 5, 6, 8, 0x10]), unique=True, max_size=3)
            )
            payload = b"".join(struct.pack(">HI", k, draw(SETTING_VALUES)) for k in ids)
        else:
            payload = draw(st.binary(max_size=8))
    elif kind == PING:
        payload = draw(st.binary(min_size=draw(st.sampled_from([8, 8, 0, 7, 9])), max_size=9))[:9]
    elif kind == GOAWAY:
        payload = draw(st.binary(min_size=draw(st.sampled_from([8, 8, 4, 0, 12])), max_size=12))
    elif kind == WINDOW_UPDATE:
        payload = draw(
            st.one_of(
                st.builds(lambda i: struct.pack(">I", i & 0xFFFFFFFF), INCREMENTS),
                st.binary(max_size=6),
            )
        )
    else:
        payload = draw(st.binary(max_size=10))
    if kind in (DATA, HEADERS, PUSH_PROMISE) and flags & PADDED and draw(st.booleans()):
        pad = draw(st.integers(0, 40))
        payload = bytes([pad]) + payload + bytes(draw(st.sampled_from([pad, pad, 0, pad + 3])))
    return list(sends(ClientFrame(kind, flags, stream_id, payload)))


@st.composite
def valid_frame(draw: st.DrawFn, encoder: hpack.Encoder) -> list[Step]:
    """A frame a client may send, though not always at that point: a request, data,
    trailers, a reset, a control frame."""
    stream_id = draw(st.sampled_from([1, 3, 5, 7]))
    end = draw(st.sampled_from([0, END_STREAM]))
    kind = draw(st.sampled_from(["request", "data", "data", "trailers", "reset", "control"]))
    if kind == "request":
        f = ClientFrame(HEADERS, END_HEADERS | end, stream_id, encoder.encode(GRPC_REQUEST))
    elif kind == "data":
        f = ClientFrame(DATA, end, stream_id, draw(st.binary(max_size=60)))
    elif kind == "trailers":
        f = ClientFrame(
            HEADERS, END_HEADERS | END_STREAM, stream_id, encoder.encode([("x-t", "1")])
        )
    elif kind == "reset":
        f = rst_frame(stream_id, draw(st.sampled_from([h2_conn.CANCEL, h2_conn.NO_ERROR])))
    else:
        f = draw(control_frame())
    return list(sends(f))


@st.composite
def malformed_scripts(draw: st.DrawFn) -> tuple[Script, int]:
    """A few valid requests, then frames, each its own step: a third random (types,
    flags, stream ids, lengths, SETTINGS values, increments), the rest valid frames that
    may come at a wrong time."""
    encoder = hpack.Encoder()
    window = draw(st.sampled_from([h2_conn.STREAM_WINDOW, 100]))
    steps: list[Step] = []
    for stream_id in draw(st.sampled_from([(), (1,), (1, 3), (3, 5)])):
        end = draw(st.booleans())
        steps += sends(
            ClientFrame(
                HEADERS,
                END_HEADERS | (END_STREAM if end else 0),
                stream_id,
                encoder.encode(GRPC_REQUEST),
            )
        )
    for _ in range(draw(st.integers(1, 10))):
        valid = draw(st.sampled_from([True, True, False]))
        steps += draw(valid_frame(encoder) if valid else any_frame(encoder))
    return opened(steps), window


def test_malformed_frame_sequences_same_outcome_as_h2() -> None:
    """Random frames must get the same answers from both, up to the DIVERGENCES; the run
    must have seen connections end, live on, and streams reset, or it proved little."""
    seen: Counter[str] = Counter()

    @given(malformed_scripts())
    def check(case: tuple[Script, int]) -> None:
        script, window = case
        comparison = compare(script, window)
        assert comparison.agree(), comparison.describe()
        ours = comparison.ours_full
        seen["alive" if ours.connection is None else "connection error"] += 1
        seen["stream reset"] += any(s.resets for s in ours.streams)
        for name in comparison.applied:
            event(f"divergence {name}")
            seen[name] += 1
        event(ours.connection_name())

    check()
    assert seen["alive"] and seen["connection error"] and seen["stream reset"], seen

"""Byte-level tests of the server side of an HTTP/2 connection (impl/rpc/h2_conn.py).

Client frames are built with `h2_conn.frame`, client header blocks with a real HPACK
encoder (`hpack.Encoder`); a recording listener keeps every event in order. Each test is
named after the RFC 9113 (or RFC 7541) rule it checks.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import hpack
import pytest
from grpc_request import GRPC_REQUEST as REQUEST

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
    PRIORITY_FLAG,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    H2ServerConnection,
    frame,
)

RAW_REQUEST = [(n.encode(), v.encode()) for n, v in REQUEST]
# The pseudo-headers a request needs, from HPACK's static table alone (indexed fields 3, 6
# and 4): a prefix that leaves the dynamic table as it is.
STATIC_PSEUDO = b"\x83\x86\x84"
STATIC_PSEUDO_LIST = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/")]


@dataclass(frozen=True)
class Frame:
    """One frame the server wrote."""

    kind: int
    flags: int
    stream_id: int
    payload: bytes

    def describe(self) -> str:
        return f"frame {self.kind} flags {self.flags:#x} stream {self.stream_id} {self.payload!r}"


class Recorder:
    """A StreamEvents listener that records every call as a tuple."""

    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def on_headers(self, stream_id: int, headers: h2_conn.Headers, end_stream: bool) -> None:
        self.events.append(("headers", stream_id, list(headers), end_stream))

    def on_data(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        self.events.append(("data", stream_id, data, end_stream))

    def on_reset(self, stream_id: int, error_code: int) -> None:
        self.events.append(("reset", stream_id, error_code))

    def on_send_ready(self) -> None:
        self.events.append(("send_ready",))


def parse(data: bytes) -> list[Frame]:
    """The frames in `data` (which holds whole frames only)."""
    frames = []
    position = 0
    while position < len(data):
        high, low, kind, flags, stream_id = h2_conn.FRAME_HEADER.unpack_from(data, position)
        length = (high << 8) | low
        payload = data[position + 9 : position + 9 + length]
        assert len(payload) == length, "a truncated frame in the output"
        frames.append(Frame(kind, flags, stream_id & 0x7FFFFFFF, payload))
        position += 9 + length
    return frames


def take(conn: H2ServerConnection) -> list[Frame]:
    """What the server has written since the last take; clears its outbound."""
    frames = parse(b"".join(conn.outbound))
    conn.outbound.clear()
    return frames


def settings(*pairs: tuple[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def window_update(stream_id: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream_id, struct.pack(">I", increment))


def rst(stream_id: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, stream_id, struct.pack(">I", code))


def goaway_code(frames: list[Frame]) -> int | None:
    """The error code of the GOAWAY among `frames`, or None."""
    for f in frames:
        if f.kind == GOAWAY:
            return int(struct.unpack_from(">I", f.payload, 4)[0])
    return None


def rst_codes(frames: list[Frame]) -> list[tuple[int, int]]:
    return [
        (f.stream_id, int(struct.unpack(">I", f.payload)[0]))
        for f in frames
        if f.kind == RST_STREAM
    ]


def open_conn(
    *client_settings: tuple[int, int], stream_window: int = h2_conn.STREAM_WINDOW
) -> tuple[H2ServerConnection, Recorder]:
    """A connection past the preface and the client's SETTINGS, output taken."""
    recorder = Recorder()
    conn = H2ServerConnection(recorder, stream_window=stream_window)
    conn.receive(PREFACE + settings(*client_settings))
    take(conn)
    return conn, recorder


def request(
    stream_id: int, end_stream: bool = False, encoder: hpack.Encoder | None = None
) -> bytes:
    block = (encoder or hpack.Encoder()).encode(REQUEST)
    flags = END_HEADERS | (END_STREAM if end_stream else 0)
    return frame(HEADERS, flags, stream_id, block)


# -- preface and settings (§3.4, §6.5, §6.7) ---------------------------------------------


@pytest.mark.parametrize(
    "wrong",
    [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"PRI * HTTP/1.1", b"X", PREFACE[:-1] + b"!"],
    ids=["http1", "wrong-version-prefix", "one-wrong-byte", "last-byte-wrong"],
)
def test_connection_preface_wrong_is_protocol_error(wrong: bytes) -> None:
    recorder = Recorder()
    conn = H2ServerConnection(recorder)
    take(conn)
    conn.receive(wrong)
    assert conn.closed
    assert goaway_code(take(conn)) == h2_conn.PROTOCOL_ERROR
    conn.receive(PREFACE + frame(PING, 0, 0, b"8 bytes!"))
    assert take(conn) == []


def test_connection_preface_may_arrive_in_pieces() -> None:
    recorder = Recorder()
    conn = H2ServerConnection(recorder)
    take(conn)
    for piece in (PREFACE[:3], PREFACE[3:10], PREFACE[10:], settings()):
        conn.receive(piece)
    assert not conn.closed
    assert [f.kind for f in take(conn)] == [SETTINGS]  # the ACK


def test_server_preface_is_settings_first() -> None:
    conn = H2ServerConnection(Recorder())
    frames = take(conn)
    assert frames[0].kind == SETTINGS and frames[0].flags == 0 and frames[0].stream_id == 0
    advertised = dict(
        struct.unpack_from(">HI", frames[0].payload, i) for i in range(0, len(frames[0].payload), 6)
    )
    assert advertised[h2_conn.SETTINGS_ENABLE_PUSH] == 0
    assert advertised[h2_conn.SETTINGS_INITIAL_WINDOW_SIZE] == h2_conn.STREAM_WINDOW
    # The connection window is opened beyond the default right after.
    assert frames[1] == Frame(
        WINDOW_UPDATE,
        0,
        0,
        struct.pack(">I", h2_conn.CONNECTION_WINDOW - h2_conn.DEFAULT_WINDOW),
    )


def test_settings_from_client_is_acknowledged() -> None:
    recorder = Recorder()
    conn = H2ServerConnection(recorder)
    take(conn)
    conn.receive(PREFACE + settings((h2_conn.SETTINGS_MAX_CONCURRENT_STREAMS, 100)))
    assert take(conn) == [Frame(SETTINGS, ACK, 0, b"")]
    conn.receive(frame(SETTINGS, ACK, 0))  # an ACK of ours is not acknowledged
    assert take(conn) == []


def test_ping_is_answered_with_ack_and_same_payload() -> None:
    conn, _ = open_conn()
    conn.receive(frame(PING, 0, 0, b"\x01\x02\x03\x04\x05\x06\x07\x08"))
    assert take(conn) == [Frame(PING, ACK, 0, b"\x01\x02\x03\x04\x05\x06\x07\x08")]


def test_ping_ack_is_not_answered() -> None:
    conn, _ = open_conn()
    conn.receive(frame(PING, ACK, 0, b"abcdefgh"))
    assert take(conn) == []
    assert not conn.closed


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (frame(PING, 0, 0, b"short"), h2_conn.FRAME_SIZE_ERROR),
        (frame(PING, 0, 1, b"abcdefgh"), h2_conn.PROTOCOL_ERROR),
        (frame(SETTINGS, 0, 1, b""), h2_conn.PROTOCOL_ERROR),
        (frame(SETTINGS, 0, 0, b"\x00\x04\x00"), h2_conn.FRAME_SIZE_ERROR),
        (settings((h2_conn.SETTINGS_ENABLE_PUSH, 2)), h2_conn.PROTOCOL_ERROR),
        (settings((h2_conn.SETTINGS_MAX_FRAME_SIZE, 100)), h2_conn.PROTOCOL_ERROR),
        (settings((h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, 2**31)), h2_conn.FLOW_CONTROL_ERROR),
        (window_update(0, 0), h2_conn.PROTOCOL_ERROR),
        (frame(WINDOW_UPDATE, 0, 0, b"\x00\x01"), h2_conn.FRAME_SIZE_ERROR),
        (window_update(0, 2**31 - 1), h2_conn.FLOW_CONTROL_ERROR),
        (frame(h2_conn.PUSH_PROMISE, END_HEADERS, 1, b"\x00\x00\x00\x02"), h2_conn.PROTOCOL_ERROR),
        (frame(h2_conn.PRIORITY, 0, 0, b"\x00\x00\x00\x00\x10"), h2_conn.PROTOCOL_ERROR),
        (frame(DATA, 0, 0, b"x"), h2_conn.PROTOCOL_ERROR),
        (frame(RST_STREAM, 0, 0, b"\x00\x00\x00\x00"), h2_conn.PROTOCOL_ERROR),
        (frame(RST_STREAM, 0, 1, b"\x00\x00\x00"), h2_conn.FRAME_SIZE_ERROR),
    ],
    ids=[
        "ping-length-not-8-6.7",
        "ping-on-stream-6.7",
        "settings-on-stream-6.5",
        "settings-length-not-multiple-of-6-6.5",
        "enable-push-above-1-6.5.2",
        "max-frame-size-below-16384-6.5.2",
        "initial-window-above-2^31-1-6.5.2",
        "zero-connection-window-update-6.9",
        "window-update-length-not-4-6.9",
        "connection-window-overflow-6.9.1",
        "push-promise-from-client-8.4",
        "priority-on-stream-0-6.3",
        "data-on-stream-0-6.1",
        "rst-stream-on-stream-0-6.4",
        "rst-stream-length-not-4-6.4",
    ],
)
def test_malformed_control_frame_is_connection_error(bad: bytes, code: int) -> None:
    conn, _recorder = open_conn()
    conn.receive(bad)
    assert conn.closed
    assert goaway_code(take(conn)) == code


def test_frame_larger_than_advertised_max_frame_size_is_frame_size_error() -> None:
    conn, _ = open_conn()
    # Only the 9-byte header of a frame one byte above our SETTINGS_MAX_FRAME_SIZE.
    length = h2_conn.MAX_FRAME + 1
    conn.receive(h2_conn.FRAME_HEADER.pack(length >> 8, length & 0xFF, DATA, 0, 1))
    assert conn.closed
    assert goaway_code(take(conn)) == h2_conn.FRAME_SIZE_ERROR


def test_unknown_frame_type_is_ignored() -> None:
    conn, _ = open_conn()
    conn.receive(frame(0xFA, 0xFF, 0, b"whatever"))
    assert not conn.closed and take(conn) == []


# -- framing (§4.1): where reads split the bytes changes nothing -------------------------


def conversation() -> bytes:
    """A client's bytes covering most frame kinds."""
    encoder = hpack.Encoder()
    block = encoder.encode([*REQUEST, ("x-long", "v" * 40)])
    padded = bytes([3]) + b"\x00\x00\x00\x00\x10" + encoder.encode(REQUEST) + b"\x00" * 3
    return b"".join(
        [
            PREFACE,
            settings((h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, 1000)),
            frame(HEADERS, 0, 1, block[:10]),
            frame(CONTINUATION, 0, 1, block[10:20]),
            frame(CONTINUATION, END_HEADERS, 1, block[20:]),
            frame(DATA, 0, 1, b"\x00\x00\x00\x00\x03abc"),
            frame(PING, 0, 0, b"pingpong"),
            frame(DATA, END_STREAM | PADDED, 1, b"\x02xy\x00\x00"),
            frame(HEADERS, END_HEADERS | PADDED | PRIORITY_FLAG | END_STREAM, 3, padded),
            window_update(0, 5000),
            rst(3, h2_conn.CANCEL),
        ]
    )


def test_frames_split_at_every_byte_boundary_give_same_events() -> None:
    whole_recorder = Recorder()
    whole = H2ServerConnection(whole_recorder)
    whole.receive(conversation())
    bytewise_recorder = Recorder()
    bytewise = H2ServerConnection(bytewise_recorder)
    data = conversation()
    for i in range(len(data)):
        bytewise.receive(data[i : i + 1])
    assert not whole.closed and not bytewise.closed
    assert bytewise_recorder.events == whole_recorder.events
    assert take(bytewise) == take(whole)
    kinds = [e[0] for e in whole_recorder.events]
    assert kinds == ["headers", "data", "data", "headers", "reset"]
    assert whole_recorder.events[2] == ("data", 1, b"xy", True)


# -- header blocks (§6.2, §6.10, §4.3) ---------------------------------------------------


def test_headers_padded_and_priority_fields_are_stripped() -> None:
    conn, recorder = open_conn()
    block = hpack.Encoder().encode(REQUEST)
    payload = bytes([4]) + b"\x80\x00\x00\x01\xff" + block + b"\x00" * 4
    conn.receive(frame(HEADERS, END_HEADERS | PADDED | PRIORITY_FLAG, 1, payload))
    assert recorder.events == [("headers", 1, RAW_REQUEST, False)]


def test_headers_padding_longer_than_frame_is_protocol_error() -> None:
    conn, _ = open_conn()
    conn.receive(frame(HEADERS, END_HEADERS | PADDED, 1, b"\x09abc"))
    assert conn.closed and goaway_code(take(conn)) == h2_conn.PROTOCOL_ERROR


def test_headers_and_continuation_form_one_block() -> None:
    conn, recorder = open_conn()
    block = hpack.Encoder().encode(REQUEST)
    conn.receive(frame(HEADERS, END_STREAM, 1, block[:5]))
    assert recorder.events == []
    conn.receive(frame(CONTINUATION, 0, 1, block[5:9]))
    conn.receive(frame(CONTINUATION, END_HEADERS, 1, block[9:]))
    assert recorder.events == [("headers", 1, RAW_REQUEST, True)]


@pytest.mark.parametrize(
    "interruption",
    [
        frame(PING, 0, 0, b"pingpong"),
        frame(DATA, 0, 1, b"x"),
        frame(CONTINUATION, END_HEADERS, 3, b"\x82"),
        frame(HEADERS, END_HEADERS, 3, b"\x82"),
    ],
    ids=["ping", "data", "continuation-other-stream", "headers-other-stream"],
)
def test_interrupted_header_block_is_connection_error(interruption: bytes) -> None:
    conn, recorder = open_conn()
    conn.receive(frame(HEADERS, 0, 1, hpack.Encoder().encode(REQUEST)))
    conn.receive(interruption)
    assert conn.closed and goaway_code(take(conn)) == h2_conn.PROTOCOL_ERROR
    assert recorder.events == []


def test_continuation_without_headers_is_connection_error() -> None:
    conn, _ = open_conn()
    conn.receive(frame(CONTINUATION, END_HEADERS, 1, b"\x82"))
    assert conn.closed and goaway_code(take(conn)) == h2_conn.PROTOCOL_ERROR


def test_header_block_with_bad_index_is_compression_error() -> None:
    conn, recorder = open_conn()
    conn.receive(frame(HEADERS, END_HEADERS, 1, b"\x82\xff\x10"))  # index 142: no such entry
    assert conn.closed and goaway_code(take(conn)) == h2_conn.COMPRESSION_ERROR
    assert recorder.events == []


_PSEUDO = REQUEST[:3]  # :method, :scheme, :path
_REGULAR = REQUEST[3:]


@pytest.mark.parametrize(
    "headers",
    [
        [*_PSEUDO[:2], *_REGULAR],
        [*_PSEUDO, ("Content-Length", "5")],
        [_PSEUDO[0], ("x-early", "1"), *_PSEUDO[1:]],
        [*_PSEUDO, (":status", "200")],
        [*_PSEUDO, (":method", "GET")],
        [*_PSEUDO, ("connection", "keep-alive")],
        [*_PSEUDO, ("te", "gzip")],
    ],
    ids=["no-path", "uppercase", "pseudo-after-regular", "unknown-pseudo", "twice", "conn", "te"],
)
def test_malformed_request_is_stream_error_8_2_and_8_3(headers: list[tuple[str, str]]) -> None:
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    # Sent three times: the last two are all indexed, the third served from the cache.
    for stream_id in (1, 3, 5):
        conn.receive(frame(HEADERS, END_HEADERS, stream_id, encoder.encode(headers)))
    assert rst_codes(take(conn)) == [(i, h2_conn.PROTOCOL_ERROR) for i in (1, 3, 5)]
    assert recorder.events == [] and not conn.closed
    conn.receive(frame(HEADERS, END_HEADERS, 7, encoder.encode(REQUEST)))  # the next is served
    assert recorder.events == [("headers", 7, RAW_REQUEST, False)]


def test_trailers_with_a_pseudo_header_are_stream_error_8_1() -> None:
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    conn.receive(request(1, encoder=encoder))
    take(conn)
    conn.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, encoder.encode([(":path", "/x")])))
    assert rst_codes(take(conn)) == [(1, h2_conn.PROTOCOL_ERROR)]
    assert recorder.events[-1] == ("reset", 1, h2_conn.PROTOCOL_ERROR)


def test_header_list_above_advertised_limit_is_stream_error_10_5_1() -> None:
    """A header list above SETTINGS_MAX_HEADER_LIST_SIZE costs its own stream only; the
    block is still decoded, so the HPACK table stays in step for the next request."""
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    conn.receive(request(1, encoder=encoder))
    big = encoder.encode([*REQUEST, ("x-big", "a" * (h2_conn.MAX_HEADER_LIST + 1))], huffman=False)
    conn.receive(frame(HEADERS, END_HEADERS | END_STREAM, 3, big))
    assert rst_codes(take(conn)) == [(3, h2_conn.ENHANCE_YOUR_CALM)]
    conn.receive(request(5, encoder=encoder))
    assert not conn.closed, conn.close_reason
    assert [(e[0], e[1]) for e in recorder.events] == [("headers", 1), ("headers", 5)]
    assert recorder.events[-1] == ("headers", 5, RAW_REQUEST, False)
    assert 1 in conn.streams and 3 not in conn.streams
    conn.receive(frame(DATA, END_STREAM, 3, b"late"))  # after our reset: ignored
    assert take(conn) == [] and not conn.closed


@pytest.mark.parametrize(
    "piece", [None, 16_384, 1000], ids=["one-frame", "16k-pieces", "1k-pieces"]
)
def test_oversized_header_list_same_answer_whether_split_or_not_4_3(piece: int | None) -> None:
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    block = encoder.encode(
        [*REQUEST, ("x-big", "a" * (h2_conn.MAX_HEADER_LIST + 1))], huffman=False
    )
    assert len(block) > 16_384
    if piece is None:
        conn.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, block))
    else:
        pieces = [block[i : i + piece] for i in range(0, len(block), piece)]
        conn.receive(frame(HEADERS, END_STREAM, 1, pieces[0]))
        for middle in pieces[1:-1]:
            conn.receive(frame(CONTINUATION, 0, 1, middle))
        conn.receive(frame(CONTINUATION, END_HEADERS, 1, pieces[-1]))
    assert not conn.closed, conn.close_reason
    assert rst_codes(take(conn)) == [(1, h2_conn.ENHANCE_YOUR_CALM)]
    conn.receive(request(3, encoder=encoder))
    assert recorder.events == [("headers", 3, RAW_REQUEST, False)]


def test_header_block_past_hard_limit_over_continuation_is_connection_error() -> None:
    conn, _ = open_conn()
    piece = b"\x82" * 65_536
    conn.receive(frame(HEADERS, 0, 1, piece))
    for _ in range(h2_conn.HEADER_LIST_HARD_LIMIT // len(piece)):
        conn.receive(frame(CONTINUATION, 0, 1, piece))
    assert conn.closed and goaway_code(take(conn)) == h2_conn.ENHANCE_YOUR_CALM


def test_header_list_inflating_past_hard_limit_is_compression_error_rfc7541_7_3() -> None:
    """An "HPACK bomb": one large table entry referenced over and over."""
    conn, recorder = open_conn()
    insert = b"\x40\x03x-a" + b"\x7f\x81\x1f" + b"v" * 4000  # x-a: 4000 v's, indexed
    references = bytes([0x80 | 62]) * 300  # 300 x 4 kB decoded
    conn.receive(frame(HEADERS, END_HEADERS, 1, insert + references))
    assert conn.closed and goaway_code(take(conn)) == h2_conn.COMPRESSION_ERROR
    assert recorder.events == []


class CountingDecoder:
    """Wraps the connection's HPACK decoder, counting decode calls."""

    def __init__(self, conn: H2ServerConnection) -> None:
        self.calls = 0
        decoder = conn._decoder
        original = decoder.decode

        def decode(data: bytes, raw: bool = False) -> object:
            self.calls += 1
            return original(data, raw=raw)

        decoder.decode = decode  # type: ignore[method-assign]


def test_header_block_cache_same_block_decodes_once() -> None:
    conn, recorder = open_conn()
    counter = CountingDecoder(conn)
    encoder = hpack.Encoder()
    first = encoder.encode(REQUEST)  # inserts into the dynamic table: not remembered
    second = encoder.encode(REQUEST)  # all indexed now
    conn.receive(frame(HEADERS, END_HEADERS, 1, first))
    conn.receive(frame(HEADERS, END_HEADERS, 3, second))
    conn.receive(frame(HEADERS, END_HEADERS, 5, second))
    conn.receive(frame(HEADERS, END_HEADERS, 7, second))
    assert counter.calls == 2
    headers = [e[2] for e in recorder.events]
    assert headers == [RAW_REQUEST] * 4


def test_header_block_cache_cleared_when_block_inserts_into_dynamic_table() -> None:
    conn, _recorder = open_conn()
    counter = CountingDecoder(conn)
    encoder = hpack.Encoder()
    conn.receive(frame(HEADERS, END_HEADERS, 1, encoder.encode(REQUEST)))
    indexed = encoder.encode(REQUEST)
    conn.receive(frame(HEADERS, END_HEADERS, 3, indexed))
    assert conn._header_cache
    conn.receive(frame(HEADERS, END_HEADERS, 5, encoder.encode([("x-new", "inserted")])))
    assert not conn._header_cache
    conn.receive(frame(HEADERS, END_HEADERS, 7, indexed))
    assert counter.calls == 4


def test_header_block_cache_after_table_moved_means_new_entry_rfc7541_2_3_3() -> None:
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    dynamic_62 = STATIC_PSEUDO + bytes([0x80 | 62])  # the newest dynamic entry
    conn.receive(frame(HEADERS, END_HEADERS, 1, STATIC_PSEUDO + encoder.encode([("x-a", "1")])))
    conn.receive(frame(HEADERS, END_HEADERS, 3, dynamic_62))
    conn.receive(frame(HEADERS, END_HEADERS, 5, dynamic_62))  # now from the cache
    shift = STATIC_PSEUDO + encoder.encode([("x-b", "2")])  # shifts x-a
    conn.receive(frame(HEADERS, END_HEADERS, 7, shift))
    conn.receive(frame(HEADERS, END_HEADERS, 9, dynamic_62))
    conn.receive(frame(HEADERS, END_HEADERS, 11, STATIC_PSEUDO + bytes([0x80 | 63])))
    got = {e[1]: e[2][len(STATIC_PSEUDO_LIST) :] for e in recorder.events}
    assert got[3] == got[5] == [(b"x-a", b"1")]
    assert got[9] == [(b"x-b", b"2")]
    assert got[11] == [(b"x-a", b"1")]


def test_header_block_cache_keeps_table_size_updates_rfc7541_6_3() -> None:
    """A block holding a dynamic table size update changes the decoder's state even when
    no entry moves: served from the cache, the update would be lost and the decoder's
    table would drift from the encoder's."""
    conn, recorder = open_conn()
    grow = b"\x3f\xe1\x1f" + STATIC_PSEUDO  # size update to 4096, then the pseudo-headers
    shrink = b"\x20" + STATIC_PSEUDO  # size update to 0
    insert = STATIC_PSEUDO + b"\x40\x03x-a\x011"  # literal with incremental indexing: x-a: 1
    conn.receive(frame(HEADERS, END_HEADERS, 1, grow))  # table empty: nothing moves
    conn.receive(frame(HEADERS, END_HEADERS, 3, shrink))  # table size 0
    conn.receive(frame(HEADERS, END_HEADERS, 5, grow))  # must grow the table again
    conn.receive(frame(HEADERS, END_HEADERS, 7, insert))  # x-a: 1 at index 62
    conn.receive(frame(HEADERS, END_HEADERS, 9, STATIC_PSEUDO + bytes([0x80 | 62])))
    assert not conn.closed, conn.close_reason
    assert recorder.events[-1] == ("headers", 9, [*STATIC_PSEUDO_LIST, (b"x-a", b"1")], False)


# -- flow control, sending (§6.9) ------------------------------------------------------


def data_frames(frames: list[Frame], stream_id: int) -> list[Frame]:
    return [f for f in frames if f.kind == DATA and f.stream_id == stream_id]


def test_send_data_beyond_peer_window_queues_until_both_windows_open() -> None:
    conn, recorder = open_conn()
    conn.receive(request(1, end_stream=True))
    body = bytes(range(256)) * 400  # 102 400 bytes against a 65 535 window
    conn.send_headers(1, b"\x88")
    conn.send_data(1, body, end_stream=False)
    conn.send_headers(1, b"\x40\x0bgrpc-status\x010", end_stream=True)
    frames = take(conn)
    sent = data_frames(frames, 1)
    assert sum(len(f.payload) for f in sent) == h2_conn.DEFAULT_WINDOW
    assert all(f.flags == 0 for f in sent)
    assert conn.pending(1) == len(body) - h2_conn.DEFAULT_WINDOW
    conn.receive(window_update(1, 50_000))  # the connection window is still closed
    assert take(conn) == [] and conn.pending(1) == len(body) - h2_conn.DEFAULT_WINDOW
    assert ("send_ready",) not in recorder.events
    conn.receive(window_update(0, 50_000))
    frames = take(conn)
    rest = data_frames(frames, 1)
    assert b"".join(f.payload for f in sent + rest) == body
    assert [f.kind for f in frames][-1] == HEADERS  # the trailers leave after the data
    assert frames[-1].flags == END_STREAM | END_HEADERS
    assert all(not f.flags & END_STREAM for f in rest)
    assert conn.pending(1) == 0 and 1 not in conn.streams
    assert recorder.events[-1] == ("send_ready",)


def test_send_data_end_stream_on_last_frame_only() -> None:
    conn, _ = open_conn()
    conn.receive(request(1, end_stream=True))
    conn.send_headers(1, b"\x88")
    conn.send_data(1, b"z" * 70_000, end_stream=True)
    assert conn.pending(1) == 70_000 - h2_conn.DEFAULT_WINDOW
    first = data_frames(take(conn), 1)
    assert all(not f.flags & END_STREAM for f in first)
    conn.receive(window_update(0, 10_000) + window_update(1, 10_000))
    last = data_frames(take(conn), 1)
    assert [f.flags for f in last] == [END_STREAM]
    assert sum(len(f.payload) for f in first + last) == 70_000
    assert 1 not in conn.streams


@pytest.mark.parametrize(
    ("new_initial", "expected_window"),
    [(100_000, 100_000 - 10_000), (0, -10_000), (10_000, 0)],
    ids=["larger", "negative", "zero"],
)
def test_initial_window_size_change_adjusts_open_streams_6_9_2(
    new_initial: int, expected_window: int
) -> None:
    conn, _ = open_conn()
    conn.receive(request(1, end_stream=True))
    conn.send_data(1, b"a" * 10_000)
    take(conn)
    conn.receive(settings((h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, new_initial)))
    assert conn.streams[1].send_window == expected_window
    take(conn)
    conn.send_data(1, b"b" * 100)
    frames = data_frames(take(conn), 1)
    if expected_window >= 100:
        assert [len(f.payload) for f in frames] == [100]
    else:
        assert frames == [] and conn.pending(1) == 100
        if expected_window < 0:
            conn.receive(window_update(1, -expected_window))  # back to zero: still waiting
            assert data_frames(take(conn), 1) == []
        conn.receive(window_update(1, 100))
        assert [len(f.payload) for f in data_frames(take(conn), 1)] == [100]


def test_initial_window_size_overflowing_a_stream_window_is_flow_control_error_6_9_2() -> None:
    conn, _ = open_conn()
    conn.receive(request(1))
    conn.receive(window_update(1, h2_conn.MAX_WINDOW - h2_conn.DEFAULT_WINDOW))
    assert not conn.closed and conn.streams[1].send_window == h2_conn.MAX_WINDOW
    conn.receive(settings((h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, h2_conn.DEFAULT_WINDOW + 1)))
    assert conn.closed and goaway_code(take(conn)) == h2_conn.FLOW_CONTROL_ERROR


def test_initial_window_size_increase_releases_queued_data() -> None:
    conn, recorder = open_conn()
    conn.receive(request(1, end_stream=True) + window_update(0, 1_000_000))
    conn.send_data(1, b"q" * 80_000)
    take(conn)
    assert conn.pending(1) == 80_000 - h2_conn.DEFAULT_WINDOW
    conn.receive(settings((h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, 1_000_000)))
    assert conn.pending(1) == 0
    assert recorder.events[-1] == ("send_ready",)


def test_empty_end_stream_data_with_negative_window_queues_nothing() -> None:
    conn, _ = open_conn()
    conn.receive(request(1, end_stream=True))
    conn.send_data(1, b"a" * 1000)
    conn.receive(settings((h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, 0)))
    take(conn)
    conn.send_data(1, b"", end_stream=True)  # a zero-length DATA needs no window (§6.9.1)
    assert conn.pending(1) == 0
    assert data_frames(take(conn), 1) == [Frame(DATA, END_STREAM, 1, b"")]


@pytest.mark.parametrize(
    ("max_frame", "sizes"),
    [(None, [16_384, 16_384, 7_232]), (20_000, [20_000, 20_000])],
    ids=["default-16384", "advertised-20000"],
)
def test_data_frames_cut_to_peer_max_frame_size_4_2(
    max_frame: int | None, sizes: list[int]
) -> None:
    pairs = [(h2_conn.SETTINGS_INITIAL_WINDOW_SIZE, 1_000_000)]
    if max_frame is not None:
        pairs.append((h2_conn.SETTINGS_MAX_FRAME_SIZE, max_frame))
    conn, _ = open_conn(*pairs)
    conn.receive(request(1, end_stream=True) + window_update(0, 1_000_000))
    conn.send_data(1, b"d" * sum(sizes), end_stream=True)
    frames = data_frames(take(conn), 1)
    assert [len(f.payload) for f in frames] == sizes
    assert [f.flags for f in frames] == [0] * (len(sizes) - 1) + [END_STREAM]


def test_large_header_block_goes_out_as_headers_and_continuation_4_3() -> None:
    conn, _ = open_conn()
    conn.receive(request(1, end_stream=True))
    block = bytes(i % 251 for i in range(40_000))
    conn.send_headers(1, block, end_stream=True)
    frames = take(conn)
    assert [(f.kind, f.flags, len(f.payload)) for f in frames] == [
        (HEADERS, END_STREAM, 16_384),
        (CONTINUATION, 0, 16_384),
        (CONTINUATION, END_HEADERS, 40_000 - 2 * 16_384),
    ]
    assert b"".join(f.payload for f in frames) == block


# -- flow control, receiving (§6.9) ----------------------------------------------------


def test_connection_window_topped_up_after_half_is_used() -> None:
    window = h2_conn.CONNECTION_WINDOW
    conn, _ = open_conn(stream_window=window)
    conn.receive(request(1))
    chunk = b"\x00" * h2_conn.MAX_FRAME
    for _ in range(window // 2 // len(chunk)):
        conn.receive(frame(DATA, 0, 1, chunk))
    assert take(conn) == []  # exactly half used: not yet
    conn.receive(frame(DATA, 0, 1, b"x"))
    assert take(conn) == [Frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", window // 2 + 1))]


def test_stream_window_returned_only_after_a_quarter_consumed() -> None:
    conn, _recorder = open_conn()
    conn.receive(request(1))
    conn.receive(frame(DATA, 0, 1, b"\x00" * h2_conn.MAX_FRAME))
    take(conn)
    quarter = h2_conn.STREAM_WINDOW // 4
    conn.consumed(1, quarter - 1)
    assert take(conn) == []
    conn.consumed(1, 1)
    assert take(conn) == [Frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", quarter))]
    assert conn.streams[1].recv_window == h2_conn.STREAM_WINDOW - h2_conn.MAX_FRAME + quarter


def test_client_overrunning_stream_window_gets_flow_control_error_6_9_1() -> None:
    conn, recorder = open_conn(stream_window=100)
    conn.receive(request(1) + request(3))
    conn.receive(frame(DATA, 0, 1, b"a" * 60))
    conn.receive(frame(DATA, 0, 1, b"a" * 41))
    assert rst_codes(take(conn)) == [(1, h2_conn.FLOW_CONTROL_ERROR)]
    assert recorder.events[-1] == ("reset", 1, h2_conn.FLOW_CONTROL_ERROR)
    assert not conn.closed and 3 in conn.streams


def test_padding_counts_against_flow_control_6_1() -> None:
    conn, recorder = open_conn(stream_window=100)
    conn.receive(request(1))
    conn.receive(frame(DATA, PADDED, 1, bytes([60]) + b"a" * 10 + b"\x00" * 60))
    assert conn.streams[1].recv_window == 100 - 71
    assert recorder.events[-1] == ("data", 1, b"a" * 10, False)


# -- stream lifetime (§5.1, §8.1) ------------------------------------------------------


def test_stream_forgotten_after_our_end_stream_client_done() -> None:
    conn, _ = open_conn()
    conn.receive(request(1, end_stream=True))
    conn.send_headers(1, b"\x88", end_stream=True)
    assert 1 not in conn.streams
    assert rst_codes(take(conn)) == []


def test_client_still_sending_after_our_end_stream_gets_rst_no_error_8_1() -> None:
    conn, _ = open_conn()
    conn.receive(request(1))
    conn.send_headers(1, b"\x88", end_stream=True)
    assert 1 not in conn.streams
    assert rst_codes(take(conn)) == [(1, h2_conn.NO_ERROR)]
    conn.receive(frame(DATA, END_STREAM, 1, b"late"))  # crossed our reset: ignored
    assert take(conn) == [] and not conn.closed


def test_client_rst_stream_calls_on_reset_and_drops_queued_frames() -> None:
    conn, recorder = open_conn()
    conn.receive(request(1, end_stream=True))
    conn.send_data(1, b"x" * 100_000)
    conn.send_headers(1, b"\x88", end_stream=True)
    take(conn)
    conn.receive(rst(1, h2_conn.CANCEL))
    assert recorder.events[-1] == ("reset", 1, h2_conn.CANCEL)
    conn.receive(window_update(0, 1_000_000))
    assert take(conn) == []
    assert conn.pending(1) == 0


def test_data_on_idle_stream_is_connection_error_5_1() -> None:
    conn, _ = open_conn()
    conn.receive(frame(DATA, 0, 5, b"x"))
    assert conn.closed and goaway_code(take(conn)) == h2_conn.PROTOCOL_ERROR


def test_rst_stream_on_idle_stream_is_connection_error_5_1() -> None:
    conn, _ = open_conn()
    conn.receive(rst(7, h2_conn.CANCEL))
    assert conn.closed and goaway_code(take(conn)) == h2_conn.PROTOCOL_ERROR


def test_data_after_client_end_stream_is_stream_closed_5_1() -> None:
    conn, recorder = open_conn()
    conn.receive(request(1, end_stream=True))
    conn.receive(frame(DATA, 0, 1, b"more"))
    assert rst_codes(take(conn)) == [(1, h2_conn.STREAM_CLOSED)]
    assert recorder.events[-1] == ("reset", 1, h2_conn.STREAM_CLOSED)
    assert not conn.closed


def test_data_on_finished_stream_is_ignored_5_1() -> None:
    conn, recorder = open_conn()
    conn.receive(request(1, end_stream=True))
    conn.send_headers(1, b"\x88", end_stream=True)
    take(conn)
    before = list(recorder.events)
    conn.receive(frame(DATA, 0, 1, b"late"))
    assert take(conn) in ([], [Frame(RST_STREAM, 0, 1, struct.pack(">I", h2_conn.STREAM_CLOSED))])
    assert recorder.events == before and not conn.closed


def test_client_trailers_end_the_request_8_1() -> None:
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    conn.receive(request(1, encoder=encoder))
    conn.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, encoder.encode([("x-t", "1")])))
    assert recorder.events[-1] == ("data", 1, b"", True)


def test_second_headers_without_end_stream_is_stream_error_8_1() -> None:
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    conn.receive(request(1, encoder=encoder))
    conn.receive(frame(HEADERS, END_HEADERS, 1, encoder.encode([("x-t", "1")])))
    assert rst_codes(take(conn)) == [(1, h2_conn.PROTOCOL_ERROR)]
    assert recorder.events[-1] == ("reset", 1, h2_conn.PROTOCOL_ERROR)


@pytest.mark.parametrize(
    ("opened", "bad_stream"),
    [((), 2), ((), 0), ((5,), 3), ((5,), 5)],
    ids=["even-id-5.1.1", "stream-0-6.2", "decreasing-id-5.1.1", "reused-id-5.1.1"],
)
def test_headers_on_forbidden_stream_id_is_protocol_error(
    opened: tuple[int, ...], bad_stream: int
) -> None:
    conn, recorder = open_conn()
    for stream_id in opened:
        conn.receive(request(stream_id, end_stream=True))
        conn.send_headers(stream_id, b"\x88", end_stream=True)
    take(conn)
    events_before = len(recorder.events)
    conn.receive(request(bad_stream, end_stream=True))
    assert conn.closed
    assert goaway_code(take(conn)) == h2_conn.PROTOCOL_ERROR
    assert len(recorder.events) == events_before


def test_after_goaway_new_streams_are_refused_6_8() -> None:
    conn, recorder = open_conn()
    conn.receive(request(1))
    conn.goaway()
    frames = take(conn)
    assert [f.kind for f in frames] == [GOAWAY]
    assert struct.unpack(">II", frames[0].payload) == (1, h2_conn.NO_ERROR)
    conn.receive(request(3, end_stream=True))
    assert rst_codes(take(conn)) == [(3, h2_conn.REFUSED_STREAM)]
    assert [e[1] for e in recorder.events] == [1]
    conn.receive(frame(DATA, END_STREAM, 1, b"still served"))  # the open stream goes on
    assert recorder.events[-1] == ("data", 1, b"still served", True)


def test_goaway_received_is_recorded() -> None:
    conn, _ = open_conn()
    conn.receive(frame(GOAWAY, 0, 0, struct.pack(">II", 0, h2_conn.NO_ERROR)))
    assert conn.goaway_received and not conn.closed


def test_connection_error_resets_every_open_stream_and_ignores_later_input_5_4_1() -> None:
    conn, recorder = open_conn()
    conn.receive(request(1) + request(3) + request(5, end_stream=True))
    conn.send_data(5, b"x" * 100_000)
    take(conn)
    conn.receive(frame(h2_conn.PUSH_PROMISE, END_HEADERS, 1, b"\x00\x00\x00\x02"))
    assert conn.closed and conn.close_reason
    resets = sorted(e for e in recorder.events if e[0] == "reset")
    assert resets == [("reset", s, h2_conn.PROTOCOL_ERROR) for s in (1, 3, 5)]
    assert goaway_code(take(conn)) == h2_conn.PROTOCOL_ERROR
    count = len(recorder.events)
    conn.receive(frame(PING, 0, 0, b"pingpong") + request(7) + window_update(0, 1000))
    assert take(conn) == [] and len(recorder.events) == count


# -- found by the h2 oracle (test_impl_h2_oracle.py): each was an RFC 9113 violation -----


@pytest.mark.parametrize(
    ("opening", "bad", "code"),
    [
        (b"", frame(GOAWAY, 0, 1, bytes(8)), h2_conn.PROTOCOL_ERROR),
        (b"", frame(GOAWAY, 0, 0, bytes(4)), h2_conn.FRAME_SIZE_ERROR),
        (b"", frame(SETTINGS, ACK, 0, bytes(6)), h2_conn.FRAME_SIZE_ERROR),
        (
            b"",
            frame(HEADERS, END_HEADERS | PRIORITY_FLAG, 1, b"\x00\x00"),
            h2_conn.FRAME_SIZE_ERROR,
        ),
        (b"", frame(HEADERS, END_HEADERS | PADDED, 1, b""), h2_conn.FRAME_SIZE_ERROR),
        (
            b"",
            frame(HEADERS, END_HEADERS | PADDED | PRIORITY_FLAG, 1, b"\x04" + bytes(5) + b"\x82ab"),
            h2_conn.PROTOCOL_ERROR,
        ),
        (request(1), frame(DATA, PADDED, 1, b""), h2_conn.FRAME_SIZE_ERROR),
        (b"", frame(h2_conn.PRIORITY, 0, 5, bytes(4)), h2_conn.FRAME_SIZE_ERROR),
        (b"", window_update(5, 10), h2_conn.PROTOCOL_ERROR),
        (request(3), window_update(2, 10), h2_conn.PROTOCOL_ERROR),
        (request(3), frame(DATA, 0, 2, b"x"), h2_conn.PROTOCOL_ERROR),
        (request(3), rst(2, h2_conn.CANCEL), h2_conn.PROTOCOL_ERROR),
    ],
    ids=[
        "goaway-on-a-stream-6.8",
        "goaway-shorter-than-its-fields-4.2",
        "settings-ack-with-a-payload-6.5",
        "headers-too-short-for-its-priority-4.2",
        "padded-headers-without-pad-length-4.2",
        "headers-padding-over-the-block-after-priority-6.2",
        "padded-data-without-pad-length-4.2",
        "priority-of-4-bytes-on-an-idle-stream-6.3-5.4",
        "window-update-on-an-idle-stream-5.1",
        "window-update-on-an-even-stream-5.1",
        "data-on-an-even-stream-5.1",
        "rst-stream-on-an-even-stream-6.4",
    ],
)
def test_oracle_found_connection_error(opening: bytes, bad: bytes, code: int) -> None:
    conn, _ = open_conn()
    conn.receive(opening)
    assert not conn.closed, conn.close_reason
    take(conn)
    conn.receive(bad)
    assert conn.closed
    assert goaway_code(take(conn)) == code


def test_oracle_found_priority_of_wrong_length_is_stream_error_6_3() -> None:
    conn, recorder = open_conn()
    conn.receive(request(1) + request(3))
    conn.receive(frame(h2_conn.PRIORITY, 0, 1, bytes(4)))
    assert rst_codes(take(conn)) == [(1, h2_conn.FRAME_SIZE_ERROR)]
    assert recorder.events[-1] == ("reset", 1, h2_conn.FRAME_SIZE_ERROR)
    assert not conn.closed and 3 in conn.streams


def test_oracle_found_headers_on_half_closed_remote_stream_is_stream_closed_5_1() -> None:
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    conn.receive(request(1, end_stream=True, encoder=encoder))
    conn.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, encoder.encode([("x-t", "1")])))
    assert rst_codes(take(conn)) == [(1, h2_conn.STREAM_CLOSED)]
    assert recorder.events[-1] == ("reset", 1, h2_conn.STREAM_CLOSED)


@pytest.mark.parametrize(
    "trailer",
    [("X-Trailer", "1"), ("connection", "close"), ("te", "gzip")],
    ids=["uppercase-8.2", "connection-specific-8.2.2", "te-not-trailers-8.2.2"],
)
def test_oracle_found_malformed_trailers_are_stream_error(trailer: tuple[str, str]) -> None:
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    conn.receive(request(1, encoder=encoder))
    conn.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, encoder.encode([trailer])))
    assert rst_codes(take(conn)) == [(1, h2_conn.PROTOCOL_ERROR)]
    assert recorder.events[-1] == ("reset", 1, h2_conn.PROTOCOL_ERROR)
    assert not conn.closed


def test_oracle_found_te_trailers_is_case_insensitive_8_2_2() -> None:
    conn, recorder = open_conn()
    headers = [(n, "Trailers" if n == "te" else v) for n, v in REQUEST]
    conn.receive(frame(HEADERS, END_HEADERS, 1, hpack.Encoder().encode(headers)))
    assert take(conn) == [] and recorder.events[0][:2] == ("headers", 1)


@pytest.mark.parametrize(("scheme", "malformed"), [("http", True), ("https", True), ("urn", False)])
def test_oracle_found_empty_path_is_malformed_for_http_8_3_1(scheme: str, malformed: bool) -> None:
    conn, recorder = open_conn()
    headers = [(":method", "POST"), (":scheme", scheme), (":path", ""), (":authority", "a")]
    conn.receive(frame(HEADERS, END_HEADERS, 1, hpack.Encoder().encode(headers)))
    if malformed:
        assert rst_codes(take(conn)) == [(1, h2_conn.PROTOCOL_ERROR)]
        assert recorder.events == []
    else:
        assert take(conn) == [] and recorder.events[0][:2] == ("headers", 1)


@pytest.mark.parametrize(
    "closing",
    ["client-reset", "skipped-id", "both-ended"],
)
def test_oracle_found_data_on_closed_stream_is_stream_closed_6_1(closing: str) -> None:
    """DATA on a closed stream is a stream error STREAM_CLOSED (§6.1, §5.1), however it
    closed, unless we reset it ourselves; once answered, further DATA there is ignored."""
    conn, recorder = open_conn()
    if closing == "client-reset":
        conn.receive(request(1) + rst(1, h2_conn.CANCEL))
    elif closing == "skipped-id":
        conn.receive(request(3))  # stream 1 is closed without ever opening (§5.1.1)
    else:
        conn.receive(request(1, end_stream=True))
        conn.send_headers(1, b"\x88", end_stream=True)
    take(conn)
    events = len(recorder.events)
    conn.receive(frame(DATA, 0, 1, b"late"))
    assert rst_codes(take(conn)) == [(1, h2_conn.STREAM_CLOSED)]
    conn.receive(frame(DATA, 0, 1, b"later"))
    assert take(conn) == [] and not conn.closed
    assert len(recorder.events) == events


def test_oracle_found_headers_after_client_reset_is_stream_error_5_1() -> None:
    conn, _ = open_conn()
    encoder = hpack.Encoder()
    conn.receive(request(1, encoder=encoder) + rst(1, h2_conn.CANCEL))
    conn.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, encoder.encode([("x-t", "1")])))
    assert rst_codes(take(conn)) == [(1, h2_conn.STREAM_CLOSED)]
    assert not conn.closed


def test_oracle_found_trailers_after_our_reset_are_ignored_but_decoded_5_1() -> None:
    """Trailers crossing our RST_STREAM end nothing; their block still updates the HPACK
    table, so the next request, which refers to it, decodes."""
    conn, recorder = open_conn()
    encoder = hpack.Encoder()
    conn.receive(frame(HEADERS, END_HEADERS, 1, encoder.encode([*REQUEST, ("Bad", "1")])))
    assert rst_codes(take(conn)) == [(1, h2_conn.PROTOCOL_ERROR)]
    trailers = encoder.encode([("x-trailer", "indexed")])  # inserted into the table
    conn.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, trailers))
    assert take(conn) == [] and not conn.closed, conn.close_reason
    conn.receive(
        frame(HEADERS, END_HEADERS, 3, encoder.encode([*REQUEST, ("x-trailer", "indexed")]))
    )
    assert recorder.events == [("headers", 3, [*RAW_REQUEST, (b"x-trailer", b"indexed")], False)]


def test_oracle_found_resets_are_remembered_up_to_reset_memory_5_1() -> None:
    """Frames crossing our RST_STREAM are ignored for the last RESET_MEMORY resets; DATA on
    a stream reset longer ago is answered as on any closed stream."""
    conn, _ = open_conn()
    encoder = hpack.Encoder()
    malformed = [*REQUEST, ("Bad", "1")]
    for i in range(h2_conn.RESET_MEMORY + 1):
        conn.receive(frame(HEADERS, END_HEADERS, 2 * i + 1, encoder.encode(malformed)))
    take(conn)
    conn.receive(frame(DATA, 0, 3, b"crossed our reset"))
    assert take(conn) == []
    conn.receive(frame(DATA, 0, 1, b"long after"))
    assert rst_codes(take(conn)) == [(1, h2_conn.STREAM_CLOSED)]
    assert not conn.closed


@pytest.mark.parametrize(
    ("headers", "malformed"),
    [
        ([(":method", "CONNECT"), (":authority", "example.com:443")], False),
        ([(":method", "CONNECT"), (":authority", "a:1"), (":path", "/")], True),
        ([(":method", "CONNECT"), (":authority", "a:1"), (":scheme", "https")], True),
        ([(":method", "CONNECT")], True),
    ],
    ids=["well-formed", "with-path", "with-scheme", "without-authority"],
)
def test_oracle_found_connect_request_has_only_authority_8_5(
    headers: list[tuple[str, str]], malformed: bool
) -> None:
    """A CONNECT request omits :scheme and :path (§8.5): it is well-formed (the gRPC
    layer answers it 405, as any method but POST), not refused as missing them."""
    conn, recorder = open_conn()
    conn.receive(frame(HEADERS, END_HEADERS, 1, hpack.Encoder().encode(headers)))
    if malformed:
        assert rst_codes(take(conn)) == [(1, h2_conn.PROTOCOL_ERROR)]
        assert recorder.events == []
    else:
        assert take(conn) == [] and recorder.events[0][:2] == ("headers", 1)

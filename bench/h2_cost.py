"""CPU per gRPC unary call in the server's HTTP/2 layer: our h2_conn against the h2 package.

Both process the same client bytes, in one process, with no sockets: a connection's
preface and settings once (a client's SETTINGS, WINDOW_UPDATE and the ACK of ours), then
per call the request's HEADERS (HPACK from one client encoder, so from the second call on
every field is indexed, as a gRPC client's are) and DATA (a RangeRequest, END_STREAM) in,
and out the response grpc_h2 writes for a unary call: HEADERS (:status 200,
content-type), DATA (the gRPC message: a RangeResponse of one 256-byte key), and HEADERS
with grpc-status 0 ending the stream. A call is done when its response bytes are taken.
Every 64 calls the client's bytes also return the connection window the responses used.

Implementations (`--variants`):
  h2_conn   etcdspec.impl.rpc.h2_conn.H2ServerConnection with grpc_h2's prebuilt header
            blocks, as the member serves.
  h2        h2.connection.H2Connection as a server with its default configuration (inbound
            and outbound headers validated), returning the connection window as its docs
            require (acknowledge_received_data); ours returns it on its own.
  h2-lean   h2 with header validation and normalization turned off: its cheapest setup.

Request headers (`--headers`): "repeated", the same fields every call (from the second
call on one block of indexed fields, which h2_conn decodes once and then finds in its
cache), and "deadline", the same plus a grpc-timeout that changes every call, as a client
setting a deadline per call sends (etcd's clientv3 does): every block differs, so
h2_conn decodes every one.

Each round measures every variant for every kind of headers on a fresh connection:
--warmup calls, then --calls calls timed with the process CPU clock; the order rotates
from round to round. Prints each round, then the medians and each variant's cost against
h2_conn's.

Usage: python -m bench.h2_cost [--calls 10000] [--rounds 7] [--warmup 200]
       [--variants h2_conn,h2,h2-lean] [--headers repeated,deadline]
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import struct
import time
from collections.abc import Callable
from importlib.metadata import version

import hpack
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, RequestReceived, StreamEnded
from h2.settings import SettingCodes
from hpack import NeverIndexedHeaderTuple
from hpack.struct import HeaderWeaklyTyped

from etcdspec.impl.pb import rpc_pb2
from etcdspec.impl.rpc import h2_conn
from etcdspec.impl.rpc.grpc_h2 import OK_TRAILERS, RESPONSE_HEADERS
from etcdspec.impl.rpc.h2_conn import H2ServerConnection, Headers, frame

PATH = "/etcdserverpb.KV/Range"
# What grpcio's client sends with each call (its user-agent shortened).
REQUEST_HEADERS = [
    (":scheme", "http"),
    (":method", "POST"),
    (":authority", "127.0.0.1:2379"),
    (":path", PATH),
    ("te", "trailers"),
    ("content-type", "application/grpc"),
    ("user-agent", "grpc-python/1.66.1 grpc-c/43.0.0 (linux; chttp2)"),
    ("grpc-accept-encoding", "identity, deflate, gzip"),
]
H2_RESPONSE = [(b":status", b"200"), (b"content-type", b"application/grpc")]
H2_TRAILERS = [(b"grpc-status", b"0")]
VARIANTS = ("h2_conn", "h2", "h2-lean")
HEADER_KINDS = ("repeated", "deadline")
WINDOW_RETURN = 64  # calls between the client's connection WINDOW_UPDATEs


def grpc_message(payload: bytes) -> bytes:
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def request_message() -> bytes:
    return grpc_message(
        rpc_pb2.RangeRequest(key=b"bench/000001", serializable=True).SerializeToString()
    )


def response_message() -> bytes:
    """grpc_ceiling's constant answer: one key of 256 bytes, with its header."""
    response = rpc_pb2.RangeResponse(count=1)
    response.header.cluster_id = 1
    response.header.member_id = 2
    response.header.revision = 1001
    response.header.raft_term = 2
    response.kvs.add(
        key=b"bench/000001", value=bytes(256), create_revision=2, mod_revision=1001, version=3
    )
    return grpc_message(response.SerializeToString())


def client_opening() -> bytes:
    """A gRPC client's first bytes: preface, SETTINGS, a connection WINDOW_UPDATE, and the
    ACK of the server's SETTINGS."""
    settings = struct.pack(
        ">HIHIHI",
        h2_conn.SETTINGS_ENABLE_PUSH,
        0,
        h2_conn.SETTINGS_INITIAL_WINDOW_SIZE,
        4 * 1024 * 1024,
        h2_conn.SETTINGS_MAX_HEADER_LIST_SIZE,
        16 * 1024 * 1024,
    )
    return (
        h2_conn.PREFACE
        + frame(h2_conn.SETTINGS, 0, 0, settings)
        + frame(h2_conn.WINDOW_UPDATE, 0, 0, struct.pack(">I", 4 * 1024 * 1024))
        + frame(h2_conn.SETTINGS, h2_conn.ACK, 0)
    )


def client_calls(count: int, response: bytes, headers: str) -> list[bytes]:
    """Each call's request bytes, stream ids 1, 3, 5, ..., from one client encoder; every
    WINDOW_RETURN calls the client also gives back the connection window the responses
    used, as a client reading them does. `headers`: "repeated" (the same fields every
    call: from the second on, one block of indexed fields) or "deadline" (also a
    grpc-timeout, different every call, as a literal never indexed: each block differs)."""
    encoder = hpack.Encoder()
    message = request_message()
    returned = struct.pack(">I", WINDOW_RETURN * len(response))
    calls = []
    for i in range(count):
        stream_id = 2 * i + 1
        fields: list[HeaderWeaklyTyped] = list(REQUEST_HEADERS)
        if headers == "deadline":
            fields.append(NeverIndexedHeaderTuple("grpc-timeout", f"{4_999_000 - i}u"))
        block = encoder.encode(fields)
        call = frame(h2_conn.HEADERS, h2_conn.END_HEADERS, stream_id, block) + frame(
            h2_conn.DATA, h2_conn.END_STREAM, stream_id, message
        )
        if i % WINDOW_RETURN == WINDOW_RETURN - 1:
            call += frame(h2_conn.WINDOW_UPDATE, 0, 0, returned)
        calls.append(call)
    return calls


class _Call:
    """StreamEvents for our core: the call whose request has fully arrived."""

    def __init__(self) -> None:
        self.stream_id = 0
        self.path = b""
        self.request = b""
        self.complete = False

    def on_headers(self, stream_id: int, headers: Headers, end_stream: bool) -> None:
        self.stream_id = stream_id
        for name, value in headers:
            if name == b":path":
                self.path = value

    def on_data(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        self.request = data
        self.complete = end_stream

    def on_reset(self, stream_id: int, error_code: int) -> None:
        raise AssertionError(f"stream {stream_id} reset ({error_code})")

    def on_send_ready(self) -> None:
        pass


Server = Callable[[bytes], bytes]  # a call's request bytes -> its response bytes


def serve_h2_conn(opening: bytes, response: bytes) -> Server:
    call = _Call()
    conn = H2ServerConnection(call)
    conn.receive(opening)
    conn.outbound.clear()

    def serve(request: bytes) -> bytes:
        conn.receive(request)
        assert call.complete and call.path == PATH.encode(), "the request did not arrive"
        stream_id = call.stream_id
        call.complete = False
        conn.send_headers(stream_id, RESPONSE_HEADERS)
        conn.send_data(stream_id, response)
        conn.send_headers(stream_id, OK_TRAILERS, end_stream=True)
        out = b"".join(conn.outbound)
        conn.outbound.clear()
        return out

    return serve


def serve_h2(opening: bytes, response: bytes, *, lean: bool) -> Server:
    config = H2Configuration(client_side=False, header_encoding=None)
    if lean:
        config.validate_inbound_headers = False
        config.normalize_inbound_headers = False
        config.validate_outbound_headers = False
        config.normalize_outbound_headers = False
    conn = H2Connection(config)
    conn.initiate_connection()
    conn.update_settings(  # what h2_conn advertises
        {
            SettingCodes.ENABLE_PUSH: 0,
            SettingCodes.INITIAL_WINDOW_SIZE: h2_conn.STREAM_WINDOW,
            SettingCodes.MAX_FRAME_SIZE: h2_conn.MAX_FRAME,
            SettingCodes.MAX_HEADER_LIST_SIZE: h2_conn.MAX_HEADER_LIST,
            SettingCodes.MAX_CONCURRENT_STREAMS: 2**31 - 1,
        }
    )
    conn.increment_flow_control_window(h2_conn.CONNECTION_WINDOW - h2_conn.DEFAULT_WINDOW)
    conn.receive_data(opening)
    conn.data_to_send()

    def serve(request: bytes) -> bytes:
        stream_id = 0
        path = b""
        complete = False
        for event in conn.receive_data(request):
            if isinstance(event, RequestReceived):
                stream_id = event.stream_id or 0
                for name, value in event.headers or ():
                    if name == b":path":
                        path = bytes(value)
            elif isinstance(event, DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length or 0, stream_id)
            elif isinstance(event, StreamEnded):
                complete = True
        assert complete and path == PATH.encode(), "the request did not arrive"
        conn.send_headers(stream_id, H2_RESPONSE)
        conn.send_data(stream_id, response)
        conn.send_headers(stream_id, H2_TRAILERS, end_stream=True)
        return conn.data_to_send()

    return serve


def new_server(variant: str, opening: bytes, response: bytes) -> Server:
    if variant == "h2_conn":
        return serve_h2_conn(opening, response)
    return serve_h2(opening, response, lean=variant == "h2-lean")


def frame_kinds(data: bytes) -> list[int]:
    kinds = []
    position = 0
    while position < len(data):
        high, low, kind, _, _ = h2_conn.FRAME_HEADER.unpack_from(data, position)
        kinds.append(kind)
        position += 9 + ((high << 8) | low)
    return kinds


def check_answer(variant: str, out: bytes) -> None:
    """HEADERS, DATA, HEADERS (the trailers): the response grpc_h2 writes, nothing else."""
    kinds = frame_kinds(out)
    expected = [h2_conn.HEADERS, h2_conn.DATA, h2_conn.HEADERS]
    assert kinds == expected, f"{variant} answered with frame types {kinds}"


def measure(variant: str, requests: list[bytes], warmup: int, response: bytes) -> float:
    """CPU microseconds per call over requests[warmup + 1:], on a fresh connection."""
    serve = new_server(variant, client_opening(), response)
    for request in requests[:warmup]:
        serve(request)
    check_answer(variant, serve(requests[warmup]))
    timed = requests[warmup + 1 :]
    gc.collect()
    out = b""
    start = time.process_time_ns()
    for request in timed:
        out = serve(request)
    elapsed = time.process_time_ns() - start
    check_answer(variant, out)  # the last call was answered in full: no window ran out
    return elapsed / 1000 / len(timed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--headers", default=",".join(HEADER_KINDS))
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    kinds = [k for k in args.headers.split(",") if k]
    if not kinds or any(k not in HEADER_KINDS for k in kinds):
        parser.error(f"--headers: choose from {', '.join(HEADER_KINDS)}")
    print(
        f"python {platform.python_version()}, h2 {version('h2')}, hpack {version('hpack')}; "
        f"{args.calls} calls a round after {args.warmup + 1} warm-up calls",
        flush=True,
    )
    response = response_message()
    response = response_message()
    requests = {k: client_calls(args.warmup + 1 + args.calls, response, k) for k in kinds}
    cells = [(k, v) for k in kinds for v in variants]
    results: dict[tuple[str, str], list[float]] = {cell: [] for cell in cells}
    for round_index in range(args.rounds):
        shift = round_index % len(cells)
        for kind, variant in cells[shift:] + cells[:shift]:
            cost = measure(variant, requests[kind], args.warmup, response)
            results[(kind, variant)].append(cost)
        figures = "; ".join(
            f"{k}: " + ", ".join(f"{v} {results[(k, v)][-1]:.1f}" for v in variants) for k in kinds
        )
        print(f"round {round_index + 1} (us/call CPU): {figures}", flush=True)
    print(f"medians over {args.rounds} rounds (us of CPU per call):")
    for kind in kinds:
        base = statistics.median(results[(kind, variants[0])])
        for variant in variants:
            costs = results[(kind, variant)]
            median = statistics.median(costs)
            print(
                f"  {kind:<9} {variant:<8} {median:6.1f}  (min {min(costs):6.1f}, "
                f"max {max(costs):6.1f})  {median / base:5.1f}x {variants[0]}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Fuzzing the gRPC surface of a running member of ours (a separate process, a real
socket): requests generated from the protobuf descriptors, and malformed HTTP/2 / gRPC
bytes sent raw. The targets plug into bench/fuzz.py (`python -m bench.fuzz grpc`).

- `grpc`: every method of KV, Watch, Lease, Cluster, Maintenance, Auth (etcdserverpb),
  Lock (v3lockpb) and Election (v3electionpb), found by walking the services'
  descriptors; each request a Hypothesis strategy built from its message descriptor
  (`message_strategy`: scalars in their type's range, strings, bytes, enums with unknown
  numbers too, nested messages to a depth, repeated fields, oneofs). Unary calls with a
  short deadline; streaming ones send their requests and read for a moment. Any status
  is allowed but a handler's unexpected exception (UNKNOWN "etcdserver: internal error"
  or "Unexpected ...", which our server answers after logging the traceback).
- `frames`: a valid HTTP/2 connection carrying one gRPC Range call (written with the
  `h2` package), then either its gRPC message framed wrong (`FRAMINGS`: a length prefix
  longer or shorter than the message, a truncated message, the compressed flag set, an
  unknown flag, a length over the member's limit, two messages on a unary call, no
  message) — each must get the status `EXPECTED_STATUS` names — or the whole byte
  stream mutated (bench.fuzz.mutate), which may get anything but a crash.
After every batch (`health`): the process still runs, Maintenance.Status answers within
HEALTH_TIMEOUT_S (else a hang), no new traceback in its log, and alarms raised by fuzzed
Alarm calls are cleared (a NOSPACE alarm would refuse every later write).
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import h2.config
import h2.connection
import hpack
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from hyperframe.frame import ContinuationFrame, Frame, GoAwayFrame, HeadersFrame
from hypothesis import strategies as st

from bench.fuzz import FuzzFinding, FuzzTarget, mutated
from etcdspec.impl.pb import rpc_pb2, v3election_pb2, v3lock_pb2
from etcdspec.impl.tools import launcher

CALL_TIMEOUT_S = 0.5  # a unary call (Lock and Campaign may wait: their deadline ends them)
STREAM_TIMEOUT_S = 0.05  # how long a streaming call is read
HEALTH_TIMEOUT_S = 5.0
MAX_DEPTH = 3  # nested messages (a Txn's ops hold Txns)
SERVICES = (
    (rpc_pb2, ("KV", "Watch", "Lease", "Cluster", "Maintenance", "Auth")),
    (v3lock_pb2, ("Lock",)),
    (v3election_pb2, ("Election",)),
)
INTERNAL_ERRORS = ("etcdserver: internal error", "Unexpected ")


# ---- requests from descriptors -------------------------------------------------------
_INTS = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


def _scalar(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any] | None:
    kind = field.type
    if kind in _INTS:
        low, high = _INTS[kind]
        small = st.integers(max(low, -3), min(high, 100))  # ids, revisions, TTLs that exist
        return st.one_of(small, st.integers(low, high))
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return st.floats(width=32 if kind == FieldDescriptor.TYPE_FLOAT else 64)
    if kind == FieldDescriptor.TYPE_STRING:
        return st.text(max_size=20)
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=20), st.sampled_from((b"", b"\x00", b"a", b"foo")))
    if kind == FieldDescriptor.TYPE_ENUM:
        known = [value.number for value in field.enum_type.values]
        return st.one_of(st.sampled_from(known), st.integers(-5, 100))
    if kind == FieldDescriptor.TYPE_MESSAGE:
        if depth >= MAX_DEPTH:
            return None
        return message_strategy(field.message_type, depth + 1)
    raise ValueError(f"{field.full_name}: no strategy for field type {kind}")


def message_strategy(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of `descriptor`'s type: each plain field present or not, at most one
    field of each oneof, repeated fields of up to 3 values."""
    cls = message_factory.GetMessageClass(descriptor)
    plain: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.containing_oneof is not None:
            continue
        strategy = _scalar(field, depth)
        if strategy is None:
            continue
        if field.is_repeated:
            strategy = st.lists(strategy, max_size=3)
        plain[field.name] = strategy
    choices: list[st.SearchStrategy[dict[str, Any]]] = []
    for oneof in descriptor.oneofs:
        branches = [
            st.builds(lambda v, name=f.name: {name: v}, strategy)
            for f in oneof.fields
            if (strategy := _scalar(f, depth)) is not None
        ]
        choices.append(st.one_of(st.just({}), *branches))

    def build(fields: dict[str, Any], picked: list[dict[str, Any]]) -> Message:
        for one in picked:
            fields.update(one)
        return cls(**fields)

    return st.builds(build, st.fixed_dictionaries({}, optional=plain), st.tuples(*choices))


@dataclass(frozen=True)
class Method:
    path: str
    descriptor: MethodDescriptor

    @property
    def streaming(self) -> bool:
        return self.descriptor.client_streaming or self.descriptor.server_streaming

    def describe(self) -> str:
        return self.path


def methods() -> list[Method]:
    found = []
    for module, names in SERVICES:
        for name in names:
            service = module.DESCRIPTOR.services_by_name[name]
            found += [Method(f"/{service.full_name}/{m.name}", m) for m in service.methods]
    return found


def request_strategy() -> st.SearchStrategy[tuple[Method, list[Message]]]:
    """A method and its request (a streaming method: 1..3 requests)."""
    per_method = []
    for method in methods():
        requests = message_strategy(method.descriptor.input_type)
        many = method.descriptor.client_streaming
        per_method.append(
            st.tuples(
                st.just(method),
                st.lists(requests, min_size=1, max_size=3) if many else requests.map(lambda r: [r]),
            )
        )
    return st.one_of(per_method)


# ---- the member under fuzz -----------------------------------------------------------
class Member:
    """One member of ours started for a fuzz run (a 1-member cluster), its log watched."""

    def __init__(self) -> None:
        self.scratch = tempfile.TemporaryDirectory(prefix="fuzz-member-")
        self.plan = launcher.plan_cluster(Path(self.scratch.name) / "cluster", 1)
        self.running = launcher.start_cluster(self.plan)
        try:
            launcher.wait_ready(self.plan.endpoints, 60.0)
        except BaseException:
            self.close()
            raise
        self.address = self.plan.endpoints[0].removeprefix("http://")
        self.channel = grpc.insecure_channel(self.address)
        self.log = Path(self.running[0].log_path)
        self.log_seen = self.log.stat().st_size

    def health(self) -> None:
        member = self.running[0]
        if not member.alive():
            raise FuzzFinding(f"the member exited: {self._log_tail()}")
        status = self.channel.unary_unary(
            "/etcdserverpb.Maintenance/Status",
            request_serializer=rpc_pb2.StatusRequest.SerializeToString,
            response_deserializer=rpc_pb2.StatusResponse.FromString,
        )
        try:
            status(rpc_pb2.StatusRequest(), timeout=HEALTH_TIMEOUT_S)
        except grpc.RpcError as error:
            raise FuzzFinding(f"hang: Status did not answer ({error.code().name})") from None
        with self.log.open("rb") as handle:
            handle.seek(self.log_seen)
            new = handle.read().decode(errors="replace")
        self.log_seen += len(new.encode())
        if "Traceback" in new:
            start = new.index("Traceback")
            raise FuzzFinding(
                f"a traceback in the member's log: {new[max(0, start - 300) :][:3000]}"
            )
        alarm = self.channel.unary_unary(
            "/etcdserverpb.Maintenance/Alarm",
            request_serializer=rpc_pb2.AlarmRequest.SerializeToString,
            response_deserializer=rpc_pb2.AlarmResponse.FromString,
        )
        raised = alarm(rpc_pb2.AlarmRequest(action=rpc_pb2.AlarmRequest.GET), timeout=5.0)
        for member_alarm in raised.alarms:
            alarm(
                rpc_pb2.AlarmRequest(
                    action=rpc_pb2.AlarmRequest.DEACTIVATE,
                    memberID=member_alarm.memberID,
                    alarm=member_alarm.alarm,
                ),
                timeout=5.0,
            )

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    def close(self) -> None:
        try:
            if hasattr(self, "channel"):
                self.channel.close()
            launcher.stop_members(self.running)
        finally:
            self.scratch.cleanup()


def _check_status(method: Method, error: grpc.RpcError) -> None:
    code, details = error.code(), error.details() or ""
    if code == grpc.StatusCode.UNKNOWN and details.startswith(INTERNAL_ERRORS):
        raise FuzzFinding(f"{method.path}: {code.name} {details}")


def grpc_target() -> FuzzTarget:
    strategy = request_strategy()
    member = Member()
    calls: dict[str, Callable[..., Any]] = {}
    for method in methods():
        kind = (method.descriptor.client_streaming, method.descriptor.server_streaming)
        make = {
            (False, False): member.channel.unary_unary,
            (False, True): member.channel.unary_stream,
            (True, False): member.channel.stream_unary,
            (True, True): member.channel.stream_stream,
        }[kind]
        output = message_factory.GetMessageClass(method.descriptor.output_type)
        calls[method.path] = make(
            method.path,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=output.FromString,
        )

    def check(value: tuple[Method, list[Message]]) -> bool:
        method, requests = value
        call = calls[method.path]
        try:
            if not method.streaming:
                call(requests[0], timeout=CALL_TIMEOUT_S)
            elif method.descriptor.client_streaming:
                for _ in call(iter(requests), timeout=STREAM_TIMEOUT_S):
                    pass
            else:
                for _ in call(requests[0], timeout=STREAM_TIMEOUT_S):
                    pass
        except grpc.RpcError as error:
            _check_status(method, error)
            return True
        return False

    return FuzzTarget("grpc", strategy, check, member.health, member.close, batch=500)


# ---- malformed frames ----------------------------------------------------------------
RANGE_PATH = "/etcdserverpb.KV/Range"
LIMIT = 1_572_864 + 512 * 1024  # the member's receive limit: --max-request-bytes + 0.5 MiB
_RANGE = rpc_pb2.RangeRequest(key=b"fuzz").SerializeToString()


def _grpc_message(payload: bytes, flag: int = 0, length: int | None = None) -> bytes:
    size = len(payload) if length is None else length
    return bytes([flag]) + size.to_bytes(4, "big") + payload


# Each framing of the Range call's body, and the status every gRPC server of etcd's
# (grpc-go) and ours must answer it with.
FRAMINGS: dict[str, bytes] = {
    "valid": _grpc_message(_RANGE),
    "length prefix longer than the message": _grpc_message(_RANGE, length=len(_RANGE) + 7),
    "length prefix shorter than the message": _grpc_message(_RANGE, length=len(_RANGE) - 2),
    "message cut inside its prefix": _grpc_message(_RANGE)[:3],
    "compressed flag set, no grpc-encoding": _grpc_message(_RANGE, flag=1),
    "unknown payload flag": _grpc_message(_RANGE, flag=2),
    "length over the limit": _grpc_message(b"x" * 16, length=LIMIT + 1),
    "two messages on a unary call": _grpc_message(_RANGE) * 2,
    "no message": b"",
    "not a RangeRequest": _grpc_message(b"\xff\xff\xff"),
}
# What etcd 3.5.1 answers each (grpc-status, the start of grpc-message: the decoder's own
# words follow "unmarshalling request: ", Go's in etcd, Python's in ours), and so ours.
EXPECTED_STATUS: dict[str, tuple[int, str]] = {
    "valid": (0, ""),
    "length prefix longer than the message": (2, "unexpected EOF"),
    "length prefix shorter than the message": (13, "grpc: error unmarshalling request: "),
    "message cut inside its prefix": (2, "unexpected EOF"),
    "compressed flag set, no grpc-encoding": (
        13,
        "grpc: compressed flag set with identity or empty encoding",
    ),
    "unknown payload flag": (13, "grpc: received unexpected payload format 2"),
    "length over the limit": (
        8,
        f"grpc: received message larger than max ({LIMIT + 1} vs. {LIMIT})",
    ),
    "two messages on a unary call": (0, ""),
    "no message": (2, "EOF"),
    "not a RangeRequest": (13, "grpc: error unmarshalling request: "),
}


def expected(name: str, answer: Answer) -> bool:
    """Whether `answer` is what etcd gives the framing `name`."""
    code, message = EXPECTED_STATUS[name]
    return answer.status == code and answer.message.startswith(message)


def connection_bytes(body: bytes, path: str = RANGE_PATH) -> bytes:
    """A client's whole side of an HTTP/2 connection: preface, SETTINGS, one POST of
    `body` to `path` with gRPC's headers, the stream ended."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(
        1,
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "fuzz"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ],
    )
    conn.send_data(1, body, end_stream=True)
    return conn.data_to_send()


@dataclass(frozen=True)
class Answer:
    """What came back on one raw connection: the call's grpc-status (None: none came),
    its message, and whether the server closed the connection (GOAWAY or EOF)."""

    status: int | None
    message: str
    closed: bool

    def describe(self) -> str:
        status = "no status" if self.status is None else f"grpc-status {self.status}"
        return f"{status} {self.message!r}" + (", connection closed" if self.closed else "")


def exchange(address: tuple[str, int], data: bytes, wait_s: float) -> Answer:
    """Send `data` on a fresh connection and read the server's frames (hyperframe, and
    hpack for header blocks) for up to `wait_s`, until a grpc-status, a GOAWAY or the
    connection's end."""
    decoder = hpack.Decoder()
    buffer = b""
    block = b""
    with socket.create_connection(address, timeout=wait_s) as sock:
        sock.sendall(data)
        deadline = time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                return Answer(None, "", True)
            buffer += chunk
            while len(buffer) >= 9:
                frame, length = Frame.parse_frame_header(memoryview(buffer[:9]))
                if len(buffer) < 9 + length:
                    break
                frame.parse_body(memoryview(buffer[9 : 9 + length]))
                buffer = buffer[9 + length :]
                if isinstance(frame, GoAwayFrame):
                    return Answer(None, f"GOAWAY {frame.error_code}", True)
                if isinstance(frame, HeadersFrame | ContinuationFrame):
                    block += frame.data
                    if "END_HEADERS" in frame.flags:
                        fields = {_text(k): _text(v) for k, v in decoder.decode(block)}
                        block = b""
                        if "grpc-status" in fields:
                            return Answer(
                                int(fields["grpc-status"]), fields.get("grpc-message", ""), False
                            )
    return Answer(None, "", False)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def frames_strategy() -> st.SearchStrategy[tuple[str, bytes]]:
    """A named framing (its bytes as sent), or a mutated connection (named "mutated")."""
    named = st.sampled_from(sorted(FRAMINGS)).map(lambda n: (n, connection_bytes(FRAMINGS[n])))
    corpus = [connection_bytes(body) for body in FRAMINGS.values()]
    return st.one_of(named, mutated(corpus).map(lambda data: ("mutated", data)))


def frames_target() -> FuzzTarget:
    member = Member()
    host, port = member.address.rsplit(":", 1)
    address = (host, int(port))

    def check(value: tuple[str, bytes]) -> bool:
        name, data = value
        answer = exchange(address, data, 2.0 if name != "mutated" else 0.05)
        if name == "mutated":
            return answer.status is None or answer.status != 0
        if not expected(name, answer):
            code, message = EXPECTED_STATUS[name]
            raise FuzzFinding(
                f"{name}: {answer.describe()}, where etcd answers grpc-status {code} {message!r}"
            )
        return answer.status != 0

    return FuzzTarget("frames", frames_strategy(), check, member.health, member.close, batch=500)


GRPC_TARGETS: dict[str, Callable[[], FuzzTarget]] = {
    "grpc": grpc_target,
    "frames": frames_target,
}

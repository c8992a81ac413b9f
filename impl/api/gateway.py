"""etcd's JSON gateway (grpc-gateway) on the client port: POST /v3/... as JSON, answered by
the same gRPC method handlers the gRPC API serves.

`ROUTES` maps each path etcd 3.5's gateway serves (and we serve the method of) to its
gRPC method and message types. A request body is JSON of the request message, or several
for a client-streaming method (one after another, as Go's json.Decoder reads them: a
unary method's first value is read and anything after it ignored; an empty body is the
empty message). It is read with google.protobuf.json_format (fields the message does not
have dropped first, int64 as strings or numbers, bytes as base64, enums by name or number),
and the method handler registered for the gRPC path is called with it
(`handler.unary_unary(request, context)` or `stream_stream`), so nothing is implemented
twice. The answer is written as etcd's gateway writes it (runtime.JSONPb{OrigName: true}):
proto field names, default values left out, int64 as strings, compact separators; a
unary answer is the response message itself, a streamed one is one
`{"result": message}` line per message, in chunks as they come. Errors: a gRPC status
as `{"error": message, "code": code, "message": message}` with the HTTP status
grpc-gateway maps the code to (`HTTP_STATUS`); a stream's error after its first message
as one `{"error": {"grpc_code", "http_code", "message", "http_status"}}` line. A body that
is not JSON of the message is InvalidArgument (our message is json_format's, not Go's).

Auth: the Authorization header (or Grpc-Metadata-Token) is passed to the call as
metadata, as grpc-gateway does, so a token from /v3/auth/authenticate works as on etcd.
Lock and Election are served under /v3/lock/ and /v3/election/ as etcd serves them.
Not served, as etcd 3.5.1 does not: /v3/maintenance/hashkv (404). Not served because
the gRPC method is not: member add/remove/update/promote.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from etcdspec.impl.pb import rpc_pb2, v3election_pb2, v3lock_pb2
from etcdspec.impl.rpc.http1 import HttpRequest, HttpResponse

JSON_HEADERS = (("Content-Type", "application/json"),)
OK_HEADERS = (*JSON_HEADERS, ("Grpc-Metadata-Content-Type", "application/grpc"))
TEXT_HEADERS = (
    ("Content-Type", "text/plain; charset=utf-8"),
    ("X-Content-Type-Options", "nosniff"),
)

# grpc-gateway v1's runtime.HTTPStatusFromCode.
HTTP_STATUS = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 408,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
}
HTTP_STATUS_TEXT = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    429: "Too Many Requests",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(frozen=True)
class Route:
    """One gateway path: the gRPC method behind it and its message types."""

    grpc_path: str
    request: type[Message]
    streaming_request: bool = False
    streaming_response: bool = False

    def describe(self) -> str:
        return self.grpc_path


R = rpc_pb2
E = v3election_pb2
ROUTES: dict[str, Route] = {
    "/v3/kv/range": Route("/etcdserverpb.KV/Range", R.RangeRequest),
    "/v3/kv/put": Route("/etcdserverpb.KV/Put", R.PutRequest),
    "/v3/kv/deleterange": Route("/etcdserverpb.KV/DeleteRange", R.DeleteRangeRequest),
    "/v3/kv/txn": Route("/etcdserverpb.KV/Txn", R.TxnRequest),
    "/v3/kv/compaction": Route("/etcdserverpb.KV/Compact", R.CompactionRequest),
    "/v3/watch": Route("/etcdserverpb.Watch/Watch", R.WatchRequest, True, True),
    "/v3/lease/grant": Route("/etcdserverpb.Lease/LeaseGrant", R.LeaseGrantRequest),
    "/v3/lease/revoke": Route("/etcdserverpb.Lease/LeaseRevoke", R.LeaseRevokeRequest),
    "/v3/kv/lease/revoke": Route("/etcdserverpb.Lease/LeaseRevoke", R.LeaseRevokeRequest),
    "/v3/lease/keepalive": Route(
        "/etcdserverpb.Lease/LeaseKeepAlive", R.LeaseKeepAliveRequest, True, True
    ),
    "/v3/lease/timetolive": Route("/etcdserverpb.Lease/LeaseTimeToLive", R.LeaseTimeToLiveRequest),
    "/v3/kv/lease/timetolive": Route(
        "/etcdserverpb.Lease/LeaseTimeToLive", R.LeaseTimeToLiveRequest
    ),
    "/v3/lease/leases": Route("/etcdserverpb.Lease/LeaseLeases", R.LeaseLeasesRequest),
    "/v3/kv/lease/leases": Route("/etcdserverpb.Lease/LeaseLeases", R.LeaseLeasesRequest),
    "/v3/cluster/member/list": Route("/etcdserverpb.Cluster/MemberList", R.MemberListRequest),
    "/v3/maintenance/alarm": Route("/etcdserverpb.Maintenance/Alarm", R.AlarmRequest),
    "/v3/maintenance/status": Route("/etcdserverpb.Maintenance/Status", R.StatusRequest),
    "/v3/maintenance/defragment": Route(
        "/etcdserverpb.Maintenance/Defragment", R.DefragmentRequest
    ),
    "/v3/maintenance/hash": Route("/etcdserverpb.Maintenance/Hash", R.HashRequest),
    "/v3/maintenance/snapshot": Route(
        "/etcdserverpb.Maintenance/Snapshot", R.SnapshotRequest, False, True
    ),
    "/v3/maintenance/transfer-leadership": Route(
        "/etcdserverpb.Maintenance/MoveLeader", R.MoveLeaderRequest
    ),
    **{
        f"/v3/auth/{path}": Route(f"/etcdserverpb.Auth/{method}", getattr(R, f"{kind}Request"))
        for path, method, kind in (
            ("enable", "AuthEnable", "AuthEnable"),
            ("disable", "AuthDisable", "AuthDisable"),
            ("status", "AuthStatus", "AuthStatus"),
            ("authenticate", "Authenticate", "Authenticate"),
            ("user/add", "UserAdd", "AuthUserAdd"),
            ("user/get", "UserGet", "AuthUserGet"),
            ("user/list", "UserList", "AuthUserList"),
            ("user/delete", "UserDelete", "AuthUserDelete"),
            ("user/changepw", "UserChangePassword", "AuthUserChangePassword"),
            ("user/grant", "UserGrantRole", "AuthUserGrantRole"),
            ("user/revoke", "UserRevokeRole", "AuthUserRevokeRole"),
            ("role/add", "RoleAdd", "AuthRoleAdd"),
            ("role/get", "RoleGet", "AuthRoleGet"),
            ("role/list", "RoleList", "AuthRoleList"),
            ("role/delete", "RoleDelete", "AuthRoleDelete"),
            ("role/grant", "RoleGrantPermission", "AuthRoleGrantPermission"),
            ("role/revoke", "RoleRevokePermission", "AuthRoleRevokePermission"),
        )
    },
    "/v3/lock/lock": Route("/v3lockpb.Lock/Lock", v3lock_pb2.LockRequest),
    "/v3/lock/unlock": Route("/v3lockpb.Lock/Unlock", v3lock_pb2.UnlockRequest),
    "/v3/election/campaign": Route("/v3electionpb.Election/Campaign", E.CampaignRequest),
    "/v3/election/proclaim": Route("/v3electionpb.Election/Proclaim", E.ProclaimRequest),
    "/v3/election/leader": Route("/v3electionpb.Election/Leader", E.LeaderRequest),
    "/v3/election/observe": Route(
        "/v3electionpb.Election/Observe", E.LeaderRequest, streaming_response=True
    ),
    "/v3/election/resign": Route("/v3electionpb.Election/Resign", E.ResignRequest),
}

MethodLookup = Callable[[str], "grpc.RpcMethodHandler | None"]


class GatewayStatus(Exception):
    """A call ended with a gRPC status (`context.abort`, or a body that is not JSON)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class GatewayContext:
    """A handler's context for a gateway call: what our servicers use of grpc's."""

    def __init__(self, peer: str = "", metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self._peer = peer
        self._metadata = metadata
        self._code: grpc.StatusCode | None = None
        self._details = ""

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        raise GatewayStatus(code, details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def set_details(self, details: str) -> None:
        self._details = details

    def time_remaining(self) -> float | None:
        return None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def cancelled(self) -> bool:
        return False

    def peer(self) -> str:
        return self._peer


def forwarded_metadata(request: HttpRequest) -> tuple[tuple[str, str], ...]:
    """The request's headers a gRPC call sees as metadata, as grpc-gateway forwards them:
    Authorization as "authorization" (where etcd looks for a token when the call has no
    "token"), and any Grpc-Metadata-NAME header as NAME ("Grpc-Metadata-Token: ...")."""
    out = []
    for name, value in request.headers:
        key = name.decode("latin-1").lower()
        if key == "authorization":
            out.append(("authorization", value.decode("latin-1")))
        elif key.startswith("grpc-metadata-"):
            out.append((key.removeprefix("grpc-metadata-"), value.decode("latin-1")))
    return tuple(out)


def to_json(message: Message) -> dict[str, Any]:
    """A message as etcd's gateway writes it (before serialising)."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def known_fields(value: Any, descriptor: Any) -> Any:
    """`value` (JSON of a `descriptor` message) without the fields the message does not
    have, at any depth: grpc-gateway ignores those, but not a bad value in a known field
    (which json_format's ignore_unknown_fields would also let pass, an unknown enum name
    among them)."""
    if not isinstance(value, dict):
        return value
    by_json_name = {field.json_name: field for field in descriptor.fields}
    out: dict[str, Any] = {}
    for key, item in value.items():
        field = descriptor.fields_by_name.get(key) or by_json_name.get(key)
        if field is None:
            continue
        if field.message_type is not None:
            if isinstance(item, list):  # a repeated message field
                item = [known_fields(element, field.message_type) for element in item]
            else:
                item = known_fields(item, field.message_type)
        out[key] = item
    return out


def iter_messages(body: bytes, kind: type[Message]) -> Iterator[Message]:
    """The request messages a body holds, as Go's json.Decoder reads them: JSON values one
    after another, whitespace between; none for an empty body. Raises
    GatewayStatus(INVALID_ARGUMENT) at the first that is not JSON of the message."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise GatewayStatus(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from error
    decoder = json.JSONDecoder()
    position = 0
    while True:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position == len(text):
            return
        try:
            value, position = decoder.raw_decode(text, position)
            message = kind()
            json_format.ParseDict(known_fields(value, message.DESCRIPTOR), message)
        except (ValueError, json_format.ParseError) as error:
            raise GatewayStatus(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from error
        yield message


def error_response(code: grpc.StatusCode, details: str) -> HttpResponse:
    body = {"error": details, "code": code.value[0], "message": details}
    return HttpResponse(HTTP_STATUS.get(code, 500), JSON_HEADERS, dumps(body))


def stream_error(code: grpc.StatusCode, details: str) -> bytes:
    http_code = HTTP_STATUS.get(code, 500)
    error = {
        "grpc_code": code.value[0],
        "http_code": http_code,
        "message": details,
        "http_status": HTTP_STATUS_TEXT.get(http_code, ""),
    }
    return dumps({"error": error}) + b"\n"


def text_response(status: int, text: str) -> HttpResponse:
    return HttpResponse(status, TEXT_HEADERS, text.encode())


class Gateway:
    """Serves ROUTES over the method handlers `lookup` finds (the gRPC server's table)."""

    def __init__(self, lookup: MethodLookup) -> None:
        self.lookup = lookup

    def serves(self, path: str) -> bool:
        return path.startswith("/v3/")

    async def handle(self, request: HttpRequest) -> HttpResponse:
        route = ROUTES.get(request.path)
        if route is None:
            return text_response(404, "Not Found\n")
        if request.method != "POST":
            return text_response(405, "Method Not Allowed\n")
        handler = self.lookup(route.grpc_path)
        if handler is None:
            return error_response(grpc.StatusCode.UNIMPLEMENTED, "unknown method")
        messages: list[Message] = []
        try:
            for message in iter_messages(request.body, route.request):
                messages.append(message)
                if not route.streaming_request:
                    break  # one value is read; whatever follows it is not looked at
        except GatewayStatus as status:
            if not route.streaming_request:
                return error_response(status.code, status.details)
            # grpc-gateway stops sending at a bad message; the call goes on
        context = GatewayContext(metadata=forwarded_metadata(request))
        if route.streaming_response:
            return await self._stream(handler, route, messages, context)
        return await self._unary(handler, messages, route, context)

    async def _unary(
        self,
        handler: grpc.RpcMethodHandler,
        messages: list[Message],
        route: Route,
        context: GatewayContext,
    ) -> HttpResponse:
        request = messages[0] if messages else route.request()
        try:
            response = await handler.unary_unary(request, context)
        except GatewayStatus as status:
            return error_response(status.code, status.details)
        return HttpResponse(200, OK_HEADERS, dumps(to_json(response)))

    async def _stream(
        self,
        handler: grpc.RpcMethodHandler,
        route: Route,
        messages: list[Message],
        context: GatewayContext,
    ) -> HttpResponse:
        if route.streaming_request:
            responses = handler.stream_stream(_requests(messages), context)
        else:
            request = messages[0] if messages else route.request()
            responses = handler.unary_stream(request, context)
        # The head goes out with the first message, as grpc-gateway's does: an error
        # before it is the response's status.
        try:
            first = await anext(responses)
        except StopAsyncIteration:
            return HttpResponse(200, OK_HEADERS, b"")
        except GatewayStatus as status:
            await responses.aclose()
            return HttpResponse(
                HTTP_STATUS.get(status.code, 500),
                JSON_HEADERS,
                stream_error(status.code, status.details),
            )
        return HttpResponse(200, OK_HEADERS, stream=_chunks(first, responses))


async def _requests(messages: list[Message]) -> AsyncIterator[Message]:
    for message in messages:
        yield message
        await asyncio.sleep(0)


async def _chunks(first: Message, responses: AsyncIterator[Message]) -> AsyncGenerator[bytes, None]:
    """`{"result": message}` lines; an error ends the stream with its error line."""
    yield dumps({"result": to_json(first)}) + b"\n"
    try:
        async for response in responses:
            yield dumps({"result": to_json(response)}) + b"\n"
    except GatewayStatus as status:
        yield stream_error(status.code, status.details)
    finally:
        aclose = getattr(responses, "aclose", None)
        if aclose is not None:
            await aclose()

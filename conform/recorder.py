"""The recording client of a conformance run: every request and its outcome, every watch
response, written as a history (DESIGN.md, "History format").

Contract:
- `Recorder` numbers events and stamps them with a monotonic clock in nanoseconds
  (never going backwards). It is used from one asyncio event loop and is not shared
  between threads.
- `Process` is one client process of the history: one operation at a time; after an
  `info` completion it takes a new process id (`Recorder.new_process`), as Jepsen does.
- `RecordingClient.call(process, request)` sends one model request over etcd's gRPC API
  (grpc.aio), records `invoke` just before sending and `ok` (the response),
  `fail` (definitely not applied) or `info` (unknown) after. It never retries.
  `classify` is the rule: a read-only request that errs is `fail` (it changed nothing);
  INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE (compacted or future revision),
  NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, UNAUTHENTICATED and RESOURCE_EXHAUSTED
  are `fail`; UNAVAILABLE before any connection ("failed to connect") is `fail`;
  everything else (DEADLINE_EXCEEDED, UNAVAILABLE after send, CANCELLED, a reset
  connection, UNKNOWN, INTERNAL) is `info`.
- Keep-alives: etcd fills a LeaseKeepAlive response's header from the answering
  member's local revision *before* renewing (server/etcdserver/api/v3rpc/lease.go), so
  on a follower it can lag behind writes already acknowledged: it is no linearization
  point, yet the etcd model reads it as one. Until the model treats it as a lower
  bound, an answered keep-alive is recorded as `info` (the checker draws nothing from
  it) with the whole response kept in its value (`"answered": true`); set
  `keepalive_as_info=False` to record it as `ok`.
- Locks (the `locks` workload): `RecordingClient.lock(process, name, lease)` and
  `unlock(process, key)` call etcd's v3lock service and record `f` "lock" (value
  {"name", "lease"}; ok {"header": {"revision"}, "key"}) and "unlock" (value {"key"};
  ok {"header": {"revision"}}). A Lock answered "mutex: session is expired" (its key is
  gone: it holds nothing) or with a definite code is `fail`; any other error `info`.
- `WatchRecorder` runs one watch stream and records `watch_create` (the request) and
  each `watch_response` as history events of type "watch"; with `resume=True` a broken
  stream is opened again as a new named watch starting just after the last delivered
  event (so no guarantee is judged across two streams).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import grpc
import grpc.aio

from etcdspec.checker.etcd_json import request_to_json, response_to_json
from etcdspec.checker.history import HistoryEvent, encode_bytes, write_history
from etcdspec.checker.watch_checks import watch_request_to_json, watch_response_to_json
from etcdspec.conform.secure import aio_channel, token_refused
from etcdspec.conform.wire import WireError, event_from_pb, from_pb, operation_of, to_pb
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc, v3lock_pb2, v3lock_pb2_grpc
from etcdspec.model.requests import (
    LeaseKeepAliveRequest,
    RangeRequest,
    Request,
    Response,
    ResponseHeader,
    TxnRequest,
)
from etcdspec.model.watch import WatchFilter, WatchRequest, WatchResponse

DEFINITE_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
SESSION_EXPIRED = "mutex: session is expired"  # etcd's answer to a waiter that lost its key
NOT_SENT_MARKERS = ("failed to connect to all addresses", "connections to all backends failing")
# etcd refuses a request whose token was checked at an older auth revision before it
# applies anything (code Unknown in etcd 3.5): a definite refusal.
AUTH_OLD_REVISION = "auth: revision in header is old"


def classify(request: Request, code: grpc.StatusCode, details: str) -> str:
    """`fail` when the request surely had no effect, else `info` (see the module notes)."""
    if read_only(request):
        return "fail"
    if code in DEFINITE_CODES or details == AUTH_OLD_REVISION:
        return "fail"
    if code is grpc.StatusCode.UNAVAILABLE and any(m in details for m in NOT_SENT_MARKERS):
        return "fail"
    return "info"


def read_only(request: Request) -> bool:
    if isinstance(request, RangeRequest):
        return True
    if isinstance(request, TxnRequest):
        return all(read_only(op) for op in (*request.success, *request.failure))
    return False


class Recorder:
    """The history being recorded: events in order, times monotonic (ns since start)."""

    def __init__(self, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.events: list[HistoryEvent] = []
        self._clock = clock
        self._origin = clock()
        self._last = 0
        self._next_process = 0
        self.counts: dict[str, int] = {"ok": 0, "fail": 0, "info": 0, "watch": 0}

    def now(self) -> int:
        self._last = max(self._last, self._clock() - self._origin)
        return self._last

    def new_process(self) -> int:
        process = self._next_process
        self._next_process += 1
        return process

    def add(
        self,
        process: int | str,
        type_: str,
        f: str,
        value: Any,
        error: Any = None,
        user: str | None = None,
    ) -> HistoryEvent:
        """One event; `user` (on an invoke) is who the request's token names."""
        event = HistoryEvent(
            len(self.events), process, type_, f, value, self.now(), error=error, user=user
        )
        self.events.append(event)
        if type_ in self.counts:
            self.counts[type_] += 1
        return event

    def write(self, path: Any) -> None:
        write_history(self.events, path)


@dataclass
class Process:
    """One client process of the history (its id changes after an info)."""

    id: int

    def describe(self) -> str:
        return f"p{self.id}"


class _Describable(Protocol):
    def describe(self) -> str: ...


ResponseT = TypeVar("ResponseT", bound=_Describable)


@dataclass(frozen=True)
class CallOutcome(Generic[ResponseT]):
    """What one call came to: `ok` with the model response, `fail` or `info`."""

    type: str
    response: ResponseT | None = None
    code: str = ""
    error: str = ""

    def describe(self) -> str:
        if self.type == "ok" and self.response is not None:
            return f"ok {self.response.describe()}"
        return f"{self.type} {self.code} {self.error}".rstrip()


Outcome = CallOutcome[Response]  # a KV, Lease or Lock call's (conform.auth_client: Auth's)


@dataclass(frozen=True)
class LockOutcome:
    """What one Lock or Unlock call came to: `ok` (with the lock key and the answer's
    revision), `fail` or `info`."""

    type: str
    key: bytes = b""
    revision: int = 0
    code: str = ""
    error: str = ""

    def describe(self) -> str:
        if self.type == "ok":
            return f"ok {self.key!r} at {self.revision}"
        return f"{self.type} {self.code} {self.error}".rstrip()


def classify_lock(code: grpc.StatusCode, details: str) -> str:
    """`fail` when the Lock or Unlock surely holds or changed nothing, else `info`."""
    if code in DEFINITE_CODES or details == SESSION_EXPIRED:
        return "fail"
    if code is grpc.StatusCode.UNAVAILABLE and any(m in details for m in NOT_SENT_MARKERS):
        return "fail"
    return "info"


@dataclass
class RecordingClient:
    """One gRPC channel to one member, recording every call into `recorder`."""

    recorder: Recorder
    endpoint: str  # http://127.0.0.1:PORT or 127.0.0.1:PORT
    timeout_s: float = 2.0
    keepalive_as_info: bool = True
    _channel: grpc.aio.Channel | None = field(default=None, init=False)

    def channel(self) -> grpc.aio.Channel:
        if self._channel is None:
            self._channel = aio_channel(self.endpoint)
        return self._channel

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def move_to(self, endpoint: str) -> None:
        """Send later calls to `endpoint` (a removed member's clients move to the member
        that replaced it); a call in flight on the old channel may end as it will."""
        old, self._channel = self._channel, None
        self.endpoint = endpoint
        if old is not None:
            await old.close(grace=self.timeout_s)

    async def call(self, process: Process, request: Request) -> Outcome:
        f, value = request_to_json(request)
        self.recorder.add(process.id, "invoke", f, value)
        try:
            message = await self._send(request)
            response = from_pb(request, message)
        except grpc.aio.AioRpcError as error:
            return self._failed(process, request, f, error.code(), error.details() or "")
        except (TimeoutError, WireError) as error:
            code = grpc.StatusCode.DEADLINE_EXCEEDED
            return self._failed(process, request, f, code, str(error) or type(error).__name__)
        if self.keepalive_as_info and isinstance(request, LeaseKeepAliveRequest):
            body = {**response_to_json(response), "answered": True}
            self.recorder.add(process.id, "info", f, body)
            process.id = self.recorder.new_process()
            return Outcome("info", response)
        self.recorder.add(process.id, "ok", f, response_to_json(response))
        return Outcome("ok", response)

    def _failed(
        self, process: Process, request: Request, f: str, code: grpc.StatusCode, details: str
    ) -> Outcome:
        kind = classify(request, code, details)
        if "invalid auth token" in details:
            token_refused(self.endpoint)  # authenticate again before the next call
        body = {"error": details, "code": code.name}
        self.recorder.add(process.id, kind, f, body)
        if kind == "info":
            process.id = self.recorder.new_process()
        return Outcome(kind, code=code.name, error=details)

    async def _send(self, request: Request) -> Any:
        message = to_pb(request)
        operation = operation_of(request)
        stub = getattr(rpc_pb2_grpc, f"{operation.service}Stub")(self.channel())
        method = getattr(stub, operation.method)
        if operation.streaming:
            return await self._stream_once(operation.method, method, message)
        return await method(message, timeout=self.timeout_s)

    async def _stream_once(self, name: str, method: Any, message: Any) -> Any:
        """One request and its reply on a bidirectional stream (LeaseKeepAlive)."""
        call = method(timeout=self.timeout_s)
        try:
            await call.write(message)
            reply = await call.read()
            if reply is grpc.aio.EOF:
                raise WireError(f"{name} stream ended without a reply")
            return reply
        finally:
            call.cancel()

    async def lock(
        self, process: Process, name: bytes, lease: int, timeout_s: float
    ) -> LockOutcome:
        """One recorded Lock call (it may wait up to `timeout_s` for the lock)."""
        value = {"name": encode_bytes(name), "lease": lease}
        self.recorder.add(process.id, "invoke", "lock", value)
        stub = v3lock_pb2_grpc.LockStub(self.channel())
        try:
            answer = await stub.Lock(
                v3lock_pb2.LockRequest(name=name, lease=lease), timeout=timeout_s
            )
        except grpc.aio.AioRpcError as error:
            return self._lock_failed(process, "lock", error)
        revision = int(answer.header.revision)
        body = {"header": {"revision": revision}, "key": encode_bytes(answer.key)}
        self.recorder.add(process.id, "ok", "lock", body)
        return LockOutcome("ok", bytes(answer.key), revision)

    async def unlock(self, process: Process, key: bytes) -> LockOutcome:
        """One recorded Unlock call."""
        self.recorder.add(process.id, "invoke", "unlock", {"key": encode_bytes(key)})
        stub = v3lock_pb2_grpc.LockStub(self.channel())
        try:
            answer = await stub.Unlock(v3lock_pb2.UnlockRequest(key=key), timeout=self.timeout_s)
        except grpc.aio.AioRpcError as error:
            return self._lock_failed(process, "unlock", error)
        revision = int(answer.header.revision)
        self.recorder.add(process.id, "ok", "unlock", {"header": {"revision": revision}})
        return LockOutcome("ok", key, revision)

    def _lock_failed(self, process: Process, f: str, error: grpc.aio.AioRpcError) -> LockOutcome:
        code, details = error.code(), error.details() or ""
        kind = classify_lock(code, details)
        self.recorder.add(process.id, kind, f, {"error": details, "code": code.name})
        if kind == "info":
            process.id = self.recorder.new_process()
        return LockOutcome(kind, code=code.name, error=details)

    async def maintenance(self, name: str, message: Any, timeout_s: float = 10.0) -> Any:
        """An unrecorded Maintenance call (HashKV, Defragment, Status, MemberList...)."""
        channel = self.channel()
        try:
            if name == "MemberList":
                stub = rpc_pb2_grpc.ClusterStub(channel)
                return await stub.MemberList(message, timeout=timeout_s)
            method = getattr(rpc_pb2_grpc.MaintenanceStub(channel), name)
            return await method(message, timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            if "invalid auth token" in (error.details() or ""):
                token_refused(self.endpoint)  # a restarted member: log in again next time
            raise


@dataclass
class WatchRecorder:
    """One recorded watch stream (renamed and reopened after a break when `resume`)."""

    recorder: Recorder
    endpoint: str
    name: str
    request: WatchRequest
    resume: bool = False
    streams: int = 0
    responses: int = 0
    last_revision: int = 0  # of the last delivered event
    canceled: bool = False

    async def run(self, stop: asyncio.Event) -> None:
        """Record until `stop` is set (or the server cancels the watch)."""
        while not stop.is_set() and not self.canceled:
            request = self.request
            if self.streams and self.last_revision:
                request = _from_revision(self.request, self.last_revision + 1)
            name = self.name if self.streams == 0 else f"{self.name}.{self.streams}"
            self.streams += 1
            with contextlib.suppress(grpc.aio.AioRpcError):  # the member went away
                await self._stream(name, request, stop)
            if not self.resume:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.3)

    async def _stream(self, name: str, request: WatchRequest, stop: asyncio.Event) -> None:
        async with aio_channel(self.endpoint) as channel:
            call = rpc_pb2_grpc.WatchStub(channel).Watch()
            create = rpc_pb2.WatchRequest(
                create_request=rpc_pb2.WatchCreateRequest(
                    key=request.key,
                    range_end=request.range_end,
                    start_revision=request.start_revision,
                    prev_kv=request.prev_kv,
                    progress_notify=request.progress_notify,
                    filters=[
                        rpc_pb2.WatchCreateRequest.NOPUT
                        if f is WatchFilter.NOPUT
                        else rpc_pb2.WatchCreateRequest.NODELETE
                        for f in sorted(request.filters, key=lambda f: f.name)
                    ],
                )
            )
            try:
                await asyncio.wait_for(call.write(create), 2.0)
            except TimeoutError:
                call.cancel()
                return
            self.recorder.add(
                name,
                "watch",
                "watch_create",
                {"watch": name, "request": watch_request_to_json(request)},
            )
            stopper = asyncio.ensure_future(stop.wait())
            try:
                while True:
                    reader = asyncio.ensure_future(call.read())
                    done, _ = await asyncio.wait(
                        {reader, stopper}, return_when=asyncio.FIRST_COMPLETED
                    )
                    if reader not in done:
                        reader.cancel()
                        return
                    reply = reader.result()
                    if reply is grpc.aio.EOF:
                        return
                    self._record(name, reply)
                    if reply.canceled:
                        self.canceled = True
                        return
            finally:
                stopper.cancel()
                call.cancel()

    def _record(self, name: str, reply: Any) -> None:
        events = tuple(event_from_pb(e) for e in reply.events)
        response = WatchResponse(
            header=ResponseHeader(int(reply.header.revision)),
            events=events,
            compact_revision=int(reply.compact_revision),
            canceled=bool(reply.canceled),
            created=bool(reply.created),
        )
        if events:
            self.last_revision = max(self.last_revision, max(e.revision for e in events))
        self.responses += 1
        self.recorder.add(
            name, "watch", "watch_response", {"watch": name, **watch_response_to_json(response)}
        )


def _from_revision(request: WatchRequest, revision: int) -> WatchRequest:
    return WatchRequest(
        key=request.key,
        range_end=request.range_end,
        start_revision=revision,
        prev_kv=request.prev_kv,
        progress_notify=request.progress_notify,
        filters=request.filters,
    )

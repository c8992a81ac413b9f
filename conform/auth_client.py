"""Recorded requests made as users: tokens from Authenticate, sent as gRPC metadata, and
the Auth service's calls, on one RecordingClient's channel and recorder.

Contract:
- `AuthClient(client, passwords)`: `token(process, user)` authenticates once per user
  (recorded as `authenticate`, without the token) and keeps the token until the server
  refuses it as old or invalid; `call(process, user, request)` records a KV or lease
  request with its `user` ("" for one sent without a token; passwords are never
  recorded, tokens neither) and sends the token in the
  `token` metadata, as etcd's clients do; `auth(process, user, request)` does the same
  for the Auth service (`user` None: sent without a token and recorded without a user,
  as before auth is enabled).
- Outcomes are classified as RecordingClient classifies them (conform/recorder.py); a
  request refused because its token is old or unknown drops that token, so the next
  call authenticates again. Nothing is retried.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import grpc
import grpc.aio

from etcdspec.checker.etcd_auth_json import (
    auth_request_to_json,
    auth_response_to_json,
)
from etcdspec.checker.etcd_json import request_to_json, response_to_json
from etcdspec.conform.auth_wire import auth_from_pb, auth_method, auth_to_pb, token_of
from etcdspec.conform.recorder import (
    AUTH_OLD_REVISION,
    DEFINITE_CODES,
    NOT_SENT_MARKERS,
    CallOutcome,
    Outcome,
    Process,
    RecordingClient,
)
from etcdspec.conform.wire import WireError, from_pb, operation_of, to_pb
from etcdspec.impl.pb import rpc_pb2_grpc
from etcdspec.model.auth_requests import (
    AuthenticateRequest,
    AuthRequest,
    AuthResponse,
    AuthUserAddRequest,
    AuthUserChangePasswordRequest,
)
from etcdspec.model.requests import Request

INVALID_TOKEN = "etcdserver: invalid auth token"


def _unsecret(request: AuthRequest) -> AuthRequest:
    """The request as recorded: passwords left out (histories are reports, not vaults)."""
    if isinstance(
        request, (AuthenticateRequest, AuthUserAddRequest, AuthUserChangePasswordRequest)
    ):
        return replace(request, password=None)
    return request


AuthOutcome = CallOutcome[AuthResponse]  # what one Auth service call came to


@dataclass
class AuthClient:
    client: RecordingClient
    passwords: dict[str, str]
    tokens: dict[str, str] = field(default_factory=dict)

    async def token(self, process: Process, user: str) -> str | None:
        """`user`'s token, authenticating (recorded) when none is held; None if refused."""
        if user in self.tokens:
            return self.tokens[user]
        request = AuthenticateRequest(user, self.passwords.get(user, ""))
        outcome, message = await self._auth(process, None, None, request)
        if outcome.type == "ok" and message is not None:
            self.tokens[user] = token_of(message)
            return self.tokens[user]
        return None

    def forget(self, user: str) -> None:
        self.tokens.pop(user, None)

    async def _metadata(self, process: Process, user: str | None) -> tuple[Any, ...] | None:
        if not user:
            return ()
        token = await self.token(process, user)
        return None if token is None else (("token", token),)

    async def call(self, process: Process, user: str, request: Request) -> Outcome | None:
        """One recorded KV or lease request made as `user`; None when no token was had."""
        metadata = await self._metadata(process, user)
        if metadata is None:
            return None
        f, value = request_to_json(request)
        recorder = self.client.recorder
        recorder.add(process.id, "invoke", f, value, user=user)
        operation = operation_of(request)
        stub = getattr(rpc_pb2_grpc, f"{operation.service}Stub")(self.client.channel())
        try:
            message = await getattr(stub, operation.method)(
                to_pb(request), timeout=self.client.timeout_s, metadata=metadata
            )
            response = from_pb(request, message)
        except grpc.aio.AioRpcError as error:
            details = error.details() or ""
            if details in (AUTH_OLD_REVISION, INVALID_TOKEN):
                self.forget(user)
            return self.client._failed(process, request, f, error.code(), details)
        except (TimeoutError, WireError) as error:
            code = grpc.StatusCode.DEADLINE_EXCEEDED
            return self.client._failed(process, request, f, code, str(error) or "timeout")
        recorder.add(process.id, "ok", f, response_to_json(response))
        return Outcome("ok", response)

    async def auth(self, process: Process, user: str | None, request: AuthRequest) -> AuthOutcome:
        """One recorded Auth service call as `user` (None: without a token, no user)."""
        metadata = await self._metadata(process, user)
        if metadata is None:
            return AuthOutcome("fail", code="UNAUTHENTICATED", error="no token")
        outcome, _ = await self._auth(process, user, metadata, request)
        return outcome

    async def _auth(
        self,
        process: Process,
        user: str | None,
        metadata: tuple[Any, ...] | None,
        request: AuthRequest,
    ) -> tuple[AuthOutcome, Any]:
        f, value = auth_request_to_json(_unsecret(request))
        recorder = self.client.recorder
        recorder.add(process.id, "invoke", f, value, user=user)
        stub = rpc_pb2_grpc.AuthStub(self.client.channel())
        try:
            message = await getattr(stub, auth_method(request))(
                auth_to_pb(request), timeout=self.client.timeout_s, metadata=metadata or ()
            )
        except grpc.aio.AioRpcError as error:
            details = error.details() or ""
            if user and details in (AUTH_OLD_REVISION, INVALID_TOKEN):
                self.forget(user)
            code = error.code()
            # Auth requests go through the log: only a definite refusal is `fail`.
            kind = self.client_kind(code, details)
            recorder.add(process.id, kind, f, {"error": details, "code": code.name})
            if kind == "info":
                process.id = recorder.new_process()
            return AuthOutcome(kind, code=code.name, error=details), None
        except TimeoutError as error:
            recorder.add(process.id, "info", f, {"error": str(error), "code": "DEADLINE_EXCEEDED"})
            process.id = recorder.new_process()
            return AuthOutcome("info", code="DEADLINE_EXCEEDED"), None
        response = auth_from_pb(request, message)
        recorder.add(process.id, "ok", f, auth_response_to_json(response))
        return AuthOutcome("ok", response), message

    @staticmethod
    def client_kind(code: grpc.StatusCode, details: str) -> str:
        if code in DEFINITE_CODES or details == AUTH_OLD_REVISION:
            return "fail"
        if code is grpc.StatusCode.UNAVAILABLE and any(m in details for m in NOT_SENT_MARKERS):
            return "fail"
        if details.startswith("auth: "):  # the auth package's own refusals (code Unknown)
            return "fail"
        return "info"

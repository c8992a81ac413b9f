"""A conformance run against a secured target: TLS, client certificates, a user's token.

`ClientSecurity` is what a client of a secured cluster presents, as etcdctl's flags name
it: `--cacert` (the CA the servers' certificates are checked against), `--cert` and
`--key` (a client certificate, when the servers require one), `--user` and `--password`
(Authenticate once, then every call carries the token in its "token" metadata).

Contract:
- Every gRPC channel of a run is opened through `aio_channel(endpoint)` (or
  `sync_channel`), which serves an http:// endpoint in the clear and an https:// one with
  the security registered for its "host:port" (`register`), so the recorder, the fault
  injector, the consistency checks and the targets need no security argument of their
  own. An https endpoint with nothing registered is refused (SecurityError), never
  dialled in the clear; `unregister` at the end of the run.
- The token comes from a gRPC call-credentials plugin (`TokenPlugin`): on the first call
  it authenticates (a blocking Authenticate on a channel of its own, in grpc's plugin
  thread) and caches the token; `token_refused(endpoint)` (the recorder calls it when a
  server answers "invalid auth token": a restarted member forgot its simple tokens, as
  etcd's do) drops it, so the next call authenticates again. The call that was refused
  is not retried: it did not take effect, and is recorded as `fail`.
- Credentials are sent over TLS only: `--user` without `--cacert` is refused (gRPC itself
  will not send call credentials in the clear).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

AUTH_TIMEOUT_S = 5.0
TOKEN_METADATA = "token"  # etcd's rpctypes.TokenFieldNameGRPC


class SecurityError(ValueError):
    """Security flags that cannot work together, or an https endpoint without them."""


@dataclass(frozen=True)
class ClientSecurity:
    cacert: str
    cert: str | None = None
    key: str | None = None
    user: str | None = None
    password: str | None = None

    def check(self) -> None:
        """Raise SecurityError naming the flag for a missing file or a half pair."""
        for flag, path in (("--cacert", self.cacert), ("--cert", self.cert), ("--key", self.key)):
            if path is not None and not Path(path).is_file():
                raise SecurityError(f"{flag} {path}: no such file")
        if (self.cert is None) != (self.key is None):
            raise SecurityError("--cert and --key go together: give both or neither")
        if (self.user is None) != (self.password is None):
            raise SecurityError("--user and --password go together: give both or neither")

    def describe(self) -> str:
        parts = [f"TLS (CA {self.cacert}"]
        if self.cert:
            parts.append(f", client certificate {self.cert}")
        parts.append(")")
        if self.user:
            parts.append(f", user {self.user}")
        return "".join(parts)

    def transport_credentials(self) -> grpc.ChannelCredentials:
        key = Path(self.key).read_bytes() if self.key else None
        chain = Path(self.cert).read_bytes() if self.cert else None
        return grpc.ssl_channel_credentials(Path(self.cacert).read_bytes(), key, chain)


class TokenPlugin(grpc.AuthMetadataPlugin):
    """Adds a user's token to every call (see the module docstring)."""

    def __init__(self, target: str, security: ClientSecurity) -> None:
        self.target = target
        self.security = security
        self._token: str | None = None
        self._lock = threading.Lock()
        self.authentications = 0

    def __call__(
        self, context: grpc.AuthMetadataContext, callback: grpc.AuthMetadataPluginCallback
    ) -> None:
        if context.method_name == "Authenticate":
            callback((), None)
            return
        try:
            token = self.token()
        except grpc.RpcError as error:
            callback((), error)  # the call fails with this error; nothing was sent
            return
        callback(((TOKEN_METADATA, token),), None)

    def token(self) -> str:
        with self._lock:
            if self._token is None:
                with grpc.secure_channel(
                    self.target, self.security.transport_credentials()
                ) as channel:
                    response = rpc_pb2_grpc.AuthStub(channel).Authenticate(
                        rpc_pb2.AuthenticateRequest(
                            name=self.security.user or "", password=self.security.password or ""
                        ),
                        timeout=AUTH_TIMEOUT_S,
                    )
                self._token = response.token
                self.authentications += 1
            return self._token

    def forget(self) -> None:
        with self._lock:
            self._token = None


@dataclass
class _Registered:
    security: ClientSecurity
    credentials: grpc.ChannelCredentials
    plugin: TokenPlugin | None


_registered: dict[str, _Registered] = {}


def target_of(endpoint: str) -> str:
    return endpoint.removeprefix("https://").removeprefix("http://")


def register(endpoints: list[str], security: ClientSecurity) -> None:
    """Serve these https endpoints with `security` until `unregister`."""
    security.check()
    if security.user is not None and not security.cacert:
        raise SecurityError("--user needs --cacert: credentials are only sent over TLS")
    for endpoint in endpoints:
        target = target_of(endpoint)
        credentials = security.transport_credentials()
        plugin = None
        if security.user is not None:
            plugin = TokenPlugin(target, security)
            credentials = grpc.composite_channel_credentials(
                credentials, grpc.metadata_call_credentials(plugin, name="etcd-token")
            )
        _registered[target] = _Registered(security, credentials, plugin)


def unregister(endpoints: list[str]) -> None:
    for endpoint in endpoints:
        _registered.pop(target_of(endpoint), None)


def _credentials(endpoint: str) -> grpc.ChannelCredentials | None:
    if not endpoint.startswith("https://"):
        return None
    entry = _registered.get(target_of(endpoint))
    if entry is None:
        raise SecurityError(f"{endpoint} is https: give --cacert (and --cert/--key, --user)")
    return entry.credentials


def aio_channel(endpoint: str, **options: Any) -> grpc.aio.Channel:
    """An asyncio channel to `endpoint` (http:// in the clear, https:// as registered)."""
    credentials = _credentials(endpoint)
    if credentials is None:
        return grpc.aio.insecure_channel(target_of(endpoint), **options)
    return grpc.aio.secure_channel(target_of(endpoint), credentials, **options)


def sync_channel(endpoint: str) -> grpc.Channel:
    """A blocking channel to `endpoint`, as `aio_channel`."""
    credentials = _credentials(endpoint)
    if credentials is None:
        return grpc.insecure_channel(target_of(endpoint))
    return grpc.secure_channel(target_of(endpoint), credentials)


def verify_login(endpoint: str) -> None:
    """Authenticate now for `endpoint` (when a user is registered for it): a wrong user or
    password (or auth not enabled) is said before the run starts as SecurityError, not
    found in its history; an unreachable endpoint raises grpc.RpcError."""
    entry = _registered.get(target_of(endpoint))
    if entry is None or entry.plugin is None:
        return
    try:
        entry.plugin.token()
    except grpc.RpcError as error:
        if error.code() not in (
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.FAILED_PRECONDITION,
        ):
            raise  # unreachable, no leader: not the credentials' fault
        raise SecurityError(
            f"{endpoint}: cannot log in as {entry.security.user}: "
            f"{error.code().name} {error.details()}"
        ) from error


def token_refused(endpoint: str) -> None:
    """The server answered "invalid auth token": authenticate again on the next call."""
    entry = _registered.get(target_of(endpoint))
    if entry is not None and entry.plugin is not None:
        entry.plugin.forget()


def authentications() -> int:
    """How many times the registered endpoints' tokens were fetched (for the report)."""
    return sum(e.plugin.authentications for e in _registered.values() if e.plugin is not None)

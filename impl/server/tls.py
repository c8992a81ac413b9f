"""TLS for a member's client and peer ports, from etcd's flags, on the standard library's ssl.

`TlsFiles` is one set of etcd's TLS flags: `--cert-file`, `--key-file`,
`--trusted-ca-file`, `--client-cert-auth` for the client port, and the same four with
`--peer-` for the peer port. What each gives, as etcd 3.5 does (checked side by side in
tests/impl/server/test_impl_tls.py):

- an https:// URL needs a certificate and key: without them the member does not start
  (`require_for`, etcd's message "TLS key/cert (--cert-file, --key-file) must be provided
  for client url ... with HTTPS scheme");
- `server_context()`: TLS 1.2 or later, ALPN http/1.1 and h2 (gRPC and the HTTP/1.1
  gateway share the port; ALPN_PROTOCOLS says why in that order); with a trusted CA
  file (or `--client-cert-auth`) a client must present a certificate that CA signed, or
  the handshake fails (etcd 3.5.1 too requires and verifies one as soon as a trusted CA
  file is given, with or without `--client-cert-auth`);
- `client_context()`: how a member dials another one (peer traffic): the server's
  certificate verified against the trusted CA file, its address checked, and this
  member's certificate presented;
- `leader_credentials(files)`: the same as grpc credentials, for a follower's calls to
  the leader's client port (lease keep-alives forwarded).

With `--client-cert-auth`, a caller that sends no token is the user its verified
certificate's common name names (etcd's AuthInfoFromTLS; see etcdspec.impl.api.handlers).

Rejected connections are counted and logged, as etcd logs them ("rejected connection"
with the error): `server_context(on_reject)` makes every connection's SSLObject report
a handshake that fails (a certificate from another CA, none when one is required,
plaintext on the TLS port) to `on_reject(reason)` before asyncio closes it.

Loading happens once, at start: `check()` loads every file and raises TlsError naming
the flag and the file, so a wrong path or a key that does not match its certificate
stops the member before it listens. Only loopback URLs are served (config.py), so these
contexts never see another host.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import grpc

# In the server's order of preference (OpenSSL picks the first one the client offers):
# gRPC clients offer h2 only and get it; a client that offers both (curl, a browser) gets
# HTTP/1.1, which the port's HTTP/1.1 side serves (/health, /version, the JSON gateway),
# as our HTTP/2 side serves gRPC only. The first bytes still decide (port_sharing).
ALPN_PROTOCOLS = ("http/1.1", "h2")


OnReject = Callable[[str], None]


def _reporting_sslobject(on_reject: OnReject) -> type[ssl.SSLObject]:
    """An SSLObject class whose failed server handshake is reported to `on_reject`
    (SSLContext.sslobject_class: what asyncio's TLS transport wraps each connection in)."""

    class ReportingSSLObject(ssl.SSLObject):
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise  # not done yet: more bytes to come
            except ssl.SSLError as error:
                on_reject(error.reason or error.strerror or str(error))
                raise

    return ReportingSSLObject


class TlsError(ValueError):
    """A TLS flag's file is missing or unusable; the message names the flag and the file."""


@dataclass(frozen=True)
class TlsFiles:
    """One side's TLS flags (the client port's, or the peers' with prefix "peer-")."""

    cert_file: str = ""
    key_file: str = ""
    trusted_ca_file: str = ""
    client_cert_auth: bool = False
    prefix: str = ""  # "" for the client flags, "peer-" for the peer flags

    @property
    def has_cert(self) -> bool:
        return bool(self.cert_file and self.key_file)

    @property
    def verifies_clients(self) -> bool:
        """A connecting side must present a certificate (etcd: trusted CA or the flag)."""
        return self.has_cert and (bool(self.trusted_ca_file) or self.client_cert_auth)

    def flag(self, name: str) -> str:
        return f"--{self.prefix}{name}"

    def describe(self) -> str:
        if not self.has_cert:
            return "no TLS"
        return (
            f"cert = {self.cert_file}, key = {self.key_file}, "
            f"trusted-ca = {self.trusted_ca_file or '-'}, "
            f"client-cert-auth = {str(self.client_cert_auth).lower()}"
        )

    def require_for(self, url: str, kind: str) -> None:
        """Refuse an https `url` ("client" or "peer") without a certificate and key."""
        if url.startswith("https://") and not self.has_cert:
            raise TlsError(
                f"TLS key/cert ({self.flag('cert-file')}, {self.flag('key-file')}) must be "
                f"provided for {kind} url {url} with HTTPS scheme"
            )

    def check(self) -> None:
        """Load every file once (raises TlsError naming the flag and the file)."""
        if self.cert_file or self.key_file:
            if not self.has_cert:
                missing = self.flag("key-file") if self.cert_file else self.flag("cert-file")
                raise TlsError(
                    f"{self.flag('cert-file')} and {self.flag('key-file')} go together; "
                    f"give {missing} too"
                )
            self.server_context()
            self.client_context()

    def _load_chain(self, context: ssl.SSLContext) -> None:
        for flag, path in (("cert-file", self.cert_file), ("key-file", self.key_file)):
            if not Path(path).is_file():
                raise TlsError(f"{self.flag(flag)}: {path}: no such file")
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError) as error:
            raise TlsError(
                f"{self.flag('cert-file')} {self.cert_file} with {self.flag('key-file')} "
                f"{self.key_file}: cannot load ({error}); give a PEM certificate and its key"
            ) from error

    def _load_trust(self, context: ssl.SSLContext, purpose: ssl.Purpose) -> None:
        if not self.trusted_ca_file:
            context.load_default_certs(purpose)
            return
        if not Path(self.trusted_ca_file).is_file():
            raise TlsError(f"{self.flag('trusted-ca-file')}: {self.trusted_ca_file}: no such file")
        try:
            context.load_verify_locations(cafile=self.trusted_ca_file)
        except (ssl.SSLError, OSError) as error:
            raise TlsError(
                f"{self.flag('trusted-ca-file')} {self.trusted_ca_file}: cannot load ({error}); "
                "give the CA's certificates as PEM"
            ) from error

    def server_context(self, on_reject: OnReject | None = None) -> ssl.SSLContext:
        """The listening side's context (see the module docstring)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if on_reject is not None:
            context.sslobject_class = _reporting_sslobject(on_reject)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(list(ALPN_PROTOCOLS))
        self._load_chain(context)
        if self.verifies_clients:
            context.verify_mode = ssl.CERT_REQUIRED
            self._load_trust(context, ssl.Purpose.CLIENT_AUTH)
        return context

    def client_context(self) -> ssl.SSLContext:
        """The dialling side's context: verify the server, present this member's cert."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._load_trust(context, ssl.Purpose.SERVER_AUTH)
        if self.has_cert:
            self._load_chain(context)
        return context

    def channel_credentials_bytes(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """(root CAs, key, certificate chain) as grpc.ssl_channel_credentials takes them."""
        roots = Path(self.trusted_ca_file).read_bytes() if self.trusted_ca_file else None
        if not self.has_cert:
            return roots, None, None
        return roots, Path(self.key_file).read_bytes(), Path(self.cert_file).read_bytes()


class _Listener(Protocol):
    @property
    def scheme(self) -> str: ...

    @property
    def target(self) -> str: ...


def listener_contexts(
    endpoints: Iterable[_Listener], files: TlsFiles, on_reject: OnReject | None = None
) -> dict[str, ssl.SSLContext]:
    """The server context of each https endpoint, by its "host:port" target (one context
    shared by them all); http endpoints are not named, so they are served in the clear."""
    secure = [endpoint.target for endpoint in endpoints if endpoint.scheme == "https"]
    if not secure:
        return {}
    context = files.server_context(on_reject)
    return {target: context for target in secure}


class _Peer(Protocol):
    @property
    def peer(self) -> _Listener: ...


@dataclass(frozen=True)
class PeerContexts:
    """The peer transport's contexts: `server` when this member listens on an https peer
    URL, `client` when some peer's URL is https (None: plain TCP)."""

    server: ssl.SSLContext | None
    client: ssl.SSLContext | None


def peer_contexts(
    listen: Sequence[_Listener],
    peers: Iterable[_Peer],
    files: TlsFiles,
    on_reject: OnReject | None = None,
) -> PeerContexts:
    """The peer transport's contexts for these URLs and the `--peer-*` files."""
    secure_listen = bool(listen) and listen[0].scheme == "https"
    server = files.server_context(on_reject) if secure_listen else None
    secure = any(peer.peer.scheme == "https" for peer in peers)
    return PeerContexts(server, files.client_context() if secure else None)


def leader_credentials(files: TlsFiles) -> grpc.ChannelCredentials | None:
    """The credentials a follower calls the leader's https client URL with (forwarded
    lease calls): the trusted CA, and this member's certificate when it has one."""
    if not files.has_cert:
        return None
    roots, key, chain = files.channel_credentials_bytes()
    return grpc.ssl_channel_credentials(roots, key, chain)

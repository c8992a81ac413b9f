"""Auth tokens as etcd's `--auth-token` makes them: `simple` (random, kept per member,
with a TTL renewed on use) or `jwt` (signed, self-contained).

Contract:
- `assign(username, revision, prefix, index)` is called when an Authenticate entry is
  applied, on every member, in log order: simple tokens are `<prefix>.<index>` (the
  prefix random, drawn by the proposing member; the log index makes it unique), so every
  member knows every token; a JWT carries the username and the auth revision as claims.
- `info(token, store_revision)` is who a token names, and at what auth revision: a
  simple token is valid until TTL seconds pass without use on this member (as etcd's
  simple token keeper; a restart forgets them all) and names the store's current
  revision; a JWT is valid until its `exp` and names the revision in its claims. None
  for an unknown, expired, forged or malformed token.
- `invalidate_user(name)` drops a user's simple tokens (deleted, password changed);
  `disable()` drops all of them (auth disabled). A JWT stays valid until it expires
  (etcd does the same) but names an old revision, so a write with it is refused.
- Time comes from an injected clock (seconds, monotonic for simple tokens; wall time for
  JWT's exp, which other members and clients read).
"""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError

SIMPLE_TOKEN_TTL_S = 300.0  # etcd's simpleTokenTTLDefault, and --auth-token-ttl's default
_PREFIX_LETTERS = string.ascii_letters
_PREFIX_LENGTH = 16  # etcd's defaultSimpleTokenLength


class TokenNotApplied(RpcError):
    """A simple token issued at a log index this member has not applied yet: wait until
    it has (etcd's simple token keeper waits on the index in the token), then ask
    again. Not caught, it is etcd's "invalid auth token"."""

    def __init__(self, index: int) -> None:
        super().__init__(errors.INVALID_AUTH_TOKEN, f"issued at index {index}, not applied here")
        self.index = index


def simple_token_index(token: str) -> int | None:
    """The log index a simple token was issued at (`<prefix>.<index>`), or None."""
    prefix, dot, index = token.partition(".")
    if not dot or not prefix or not index.isdigit():
        return None
    return int(index)


class TokenConfigError(ValueError):
    """An `--auth-token` value this server cannot use; the message says what to pass."""


@dataclass(frozen=True)
class AuthInfo:
    """Who a request comes from: the user and the auth revision its token was checked at
    (etcd's auth.AuthInfo). The empty one (no token) is `NO_USER`."""

    username: str
    revision: int

    def describe(self) -> str:
        return f"user {self.username or '-'} at auth revision {self.revision}"


NO_USER = AuthInfo("", 0)


class TokenProvider(Protocol):
    def assign(self, username: str, revision: int, prefix: str, index: int) -> str: ...

    def info(self, token: str, store_revision: int) -> AuthInfo | None: ...

    def invalidate_user(self, username: str) -> None: ...

    def disable(self) -> None: ...

    def describe(self) -> str: ...


def new_token_prefix() -> str:
    """A random simple-token prefix (the proposing member draws it)."""
    return "".join(secrets.choice(_PREFIX_LETTERS) for _ in range(_PREFIX_LENGTH))


class SimpleTokens:
    """etcd's simple tokens: see the module docstring."""

    def __init__(
        self, ttl_s: float = SIMPLE_TOKEN_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._tokens: dict[str, tuple[str, float]] = {}  # token -> (username, expires at)

    def assign(self, username: str, revision: int, prefix: str, index: int) -> str:
        token = f"{prefix}.{index}"
        self._tokens[token] = (username, self.clock() + self.ttl_s)
        return token

    def info(self, token: str, store_revision: int) -> AuthInfo | None:
        entry = self._tokens.get(token)
        if entry is None:
            return None
        now = self.clock()
        username, expires = entry
        if now >= expires:
            del self._tokens[token]
            return None
        self._tokens[token] = (username, now + self.ttl_s)
        return AuthInfo(username, store_revision)

    def invalidate_user(self, username: str) -> None:
        self._tokens = {t: e for t, e in self._tokens.items() if e[0] != username}

    def disable(self) -> None:
        self._tokens.clear()

    def describe(self) -> str:
        return f"simple tokens (TTL {self.ttl_s:g} s, {len(self._tokens)} live)"


class JwtTokens:
    """etcd's JWT tokens, signed with a key file (RS*, PS*, ES*) through pyjwt."""

    def __init__(
        self,
        private_key: bytes,
        public_key: bytes,
        sign_method: str,
        ttl_s: float = SIMPLE_TOKEN_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.private_key = private_key
        self.public_key = public_key
        self.sign_method = sign_method
        self.ttl_s = ttl_s
        self.clock = clock

    def assign(self, username: str, revision: int, prefix: str, index: int) -> str:
        import jwt  # here, not at the top: pyjwt and cryptography cost a member's start

        claims = {"username": username, "revision": revision, "exp": int(self.clock() + self.ttl_s)}
        return jwt.encode(claims, self.private_key, algorithm=self.sign_method)

    def info(self, token: str, store_revision: int) -> AuthInfo | None:
        import jwt

        try:
            claims = jwt.decode(
                token,
                self.public_key,
                algorithms=[self.sign_method],
                options={"require": ["exp", "username", "revision"], "verify_exp": False},
            )
        except jwt.PyJWTError:
            return None
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= self.clock():
            return None
        username, revision = claims.get("username"), claims.get("revision")
        if not isinstance(username, str) or not isinstance(revision, int):
            return None
        return AuthInfo(username, revision)

    def invalidate_user(self, username: str) -> None:
        """Nothing to drop: a JWT holds its own claims."""

    def disable(self) -> None:
        """Nothing to drop: a JWT holds its own claims."""

    def describe(self) -> str:
        return f"JWT tokens ({self.sign_method}, TTL {self.ttl_s:g} s)"


_SIGN_METHODS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}
)


def _duration_s(text: str) -> float:
    """A Go duration as etcd's ttl option takes it ("5m", "30s", "1h", "300ms")."""
    units = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0))
    for suffix, scale in units:
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * scale
    raise TokenConfigError(f"--auth-token ttl={text!r}: give a duration such as 5m or 300s")


def token_provider(spec: str, ttl_s: float = SIMPLE_TOKEN_TTL_S) -> TokenProvider:
    """The provider an `--auth-token` value names: "simple", or
    "jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256[,ttl=5m]" (etcd's syntax)."""
    kind, _, rest = spec.partition(",")
    if kind == "simple" and not rest:
        return SimpleTokens(ttl_s)
    if kind != "jwt":
        raise TokenConfigError(
            f"--auth-token {spec!r}: use 'simple' or 'jwt,pub-key=...,priv-key=...,sign-method=...'"
        )
    options: dict[str, str] = {}
    for part in rest.split(",") if rest else []:
        name, sep, value = part.partition("=")
        if not sep:
            raise TokenConfigError(f"--auth-token option {part!r}: expected name=value")
        options[name] = value
    unknown = set(options) - {"pub-key", "priv-key", "sign-method", "ttl"}
    if unknown:
        raise TokenConfigError(f"--auth-token jwt: unknown option(s) {', '.join(sorted(unknown))}")
    method = options.get("sign-method", "")
    if method not in _SIGN_METHODS:
        raise TokenConfigError(
            f"--auth-token jwt: sign-method {method!r} is not one of {', '.join(sorted(_SIGN_METHODS))}"
        )
    if "pub-key" not in options or "priv-key" not in options:
        raise TokenConfigError("--auth-token jwt: give both pub-key=PATH and priv-key=PATH")
    try:
        public = Path(options["pub-key"]).read_bytes()
        private = Path(options["priv-key"]).read_bytes()
    except OSError as error:
        raise TokenConfigError(f"--auth-token jwt: cannot read a key file: {error}") from error
    ttl = _duration_s(options["ttl"]) if "ttl" in options else ttl_s
    provider = JwtTokens(private, public, method, ttl)
    # A key pair that cannot sign, or whose halves do not match, is refused at start.
    probe = provider.assign("probe", 1, "", 0)
    if provider.info(probe, 1) is None:
        raise TokenConfigError(
            "--auth-token jwt: the public key does not verify the private key's signature"
        )
    return provider

"""etcd's gRPC errors: the status code and the exact message of each.

Clients (etcdctl, clientv3, the checker) recognise an etcd error by its gRPC status code
and message text, so both are part of the wire contract. `RpcError` is the exception
the server's layers raise; the gRPC servicer turns it into `context.abort(code,
message)`. The catalogue below lists the errors this server can return, with etcd's
codes and texts (etcd api/v3rpc/rpctypes).
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc


@dataclass(frozen=True)
class EtcdErrorKind:
    """One etcd error: its gRPC code and the message clients match on."""

    code: grpc.StatusCode
    message: str

    def describe(self) -> str:
        return f"{self.code.name}: {self.message}"


class RpcError(Exception):
    """An etcd error to return to the client; nothing of its request was applied."""

    def __init__(self, kind: EtcdErrorKind, detail: str = "") -> None:
        super().__init__(kind.message if not detail else f"{kind.message} ({detail})")
        self.kind = kind
        self.detail = detail

    @property
    def code(self) -> grpc.StatusCode:
        return self.kind.code

    @property
    def message(self) -> str:
        return self.kind.message

    def describe(self) -> str:
        return self.kind.describe()


_INVALID = grpc.StatusCode.INVALID_ARGUMENT
_UNAVAILABLE = grpc.StatusCode.UNAVAILABLE

EMPTY_KEY = EtcdErrorKind(_INVALID, "etcdserver: key is not provided")
KEY_NOT_FOUND = EtcdErrorKind(_INVALID, "etcdserver: key not found")
VALUE_PROVIDED = EtcdErrorKind(_INVALID, "etcdserver: value is provided")
LEASE_PROVIDED = EtcdErrorKind(_INVALID, "etcdserver: lease is provided")
TOO_MANY_OPS = EtcdErrorKind(_INVALID, "etcdserver: too many operations in txn request")
DUPLICATE_KEY = EtcdErrorKind(_INVALID, "etcdserver: duplicate key given in txn request")
REQUEST_TOO_LARGE = EtcdErrorKind(_INVALID, "etcdserver: request is too large")
COMPACTED = EtcdErrorKind(
    grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted"
)
FUTURE_REV = EtcdErrorKind(
    grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision"
)
NO_SPACE = EtcdErrorKind(
    grpc.StatusCode.RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded"
)
LEASE_NOT_FOUND = EtcdErrorKind(grpc.StatusCode.NOT_FOUND, "etcdserver: requested lease not found")
LEASE_EXIST = EtcdErrorKind(grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: lease already exists")
LEASE_TTL_TOO_LARGE = EtcdErrorKind(grpc.StatusCode.OUT_OF_RANGE, "etcdserver: too large lease TTL")
MEMBER_NOT_FOUND = EtcdErrorKind(grpc.StatusCode.NOT_FOUND, "etcdserver: member not found")
# Membership (etcd 3.5's rpctypes ErrGRPCMember*, ErrGRPCPeerURLExist, ...).
MEMBER_EXIST = EtcdErrorKind(
    grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: member ID already exist"
)
PEER_URL_EXIST = EtcdErrorKind(
    grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: Peer URLs already exists"
)
# etcd 3.5.1 maps ErrNotEnoughStartedMembers to rpctypes' client-side error (not its
# ErrGRPC status), which gRPC sends with code UNKNOWN: so do we (compared side by side).
MEMBER_NOT_ENOUGH_STARTED = EtcdErrorKind(
    grpc.StatusCode.UNKNOWN,
    "etcdserver: re-configuration failed due to not enough started members",
)
MEMBER_BAD_URLS = EtcdErrorKind(_INVALID, "etcdserver: given member URLs are invalid")
MEMBER_NOT_LEARNER = EtcdErrorKind(
    grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: can only promote a learner member"
)
LEARNER_NOT_READY = EtcdErrorKind(
    grpc.StatusCode.FAILED_PRECONDITION,
    "etcdserver: can only promote a learner member which is in sync with leader",
)
TOO_MANY_LEARNERS = EtcdErrorKind(
    grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: too many learner members in cluster"
)
BAD_LEADER_TRANSFEREE = EtcdErrorKind(
    grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: bad leader transferee"
)
NO_LEADER = EtcdErrorKind(_UNAVAILABLE, "etcdserver: no leader")
NOT_LEADER = EtcdErrorKind(grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: not leader")
LEADER_CHANGED = EtcdErrorKind(_UNAVAILABLE, "etcdserver: leader changed")
STOPPED = EtcdErrorKind(_UNAVAILABLE, "etcdserver: server stopped")
TIMEOUT = EtcdErrorKind(_UNAVAILABLE, "etcdserver: request timed out")
TIMEOUT_LEADER_FAIL = EtcdErrorKind(
    _UNAVAILABLE, "etcdserver: request timed out, possibly due to previous leader failure"
)
UNHEALTHY = EtcdErrorKind(_UNAVAILABLE, "etcdserver: unhealthy cluster")
CORRUPT = EtcdErrorKind(grpc.StatusCode.DATA_LOSS, "etcdserver: corrupt cluster")
NOT_CAPABLE = EtcdErrorKind(_UNAVAILABLE, "etcdserver: not capable")
WATCH_CANCELED = EtcdErrorKind(grpc.StatusCode.CANCELLED, "etcdserver: watch canceled")

# The server-side concurrency services (v3lock, v3election) answer errors of etcd's
# client library, which gRPC sends with code UNKNOWN and the error's text.
_UNKNOWN = grpc.StatusCode.UNKNOWN
SESSION_EXPIRED = EtcdErrorKind(_UNKNOWN, "mutex: session is expired")
ELECTION_NOT_LEADER = EtcdErrorKind(_UNKNOWN, "election: not leader")
ELECTION_NO_LEADER = EtcdErrorKind(_UNKNOWN, "election: no leader")
MISSING_LEADER_KEY = EtcdErrorKind(_UNKNOWN, '"leader" field must be provided')
_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION

# The auth store's errors (etcd api/v3rpc/rpctypes, ErrGRPC*).
ROOT_USER_NOT_EXIST = EtcdErrorKind(_PRECONDITION, "etcdserver: root user does not exist")
ROOT_ROLE_NOT_EXIST = EtcdErrorKind(_PRECONDITION, "etcdserver: root user does not have root role")
USER_ALREADY_EXIST = EtcdErrorKind(_PRECONDITION, "etcdserver: user name already exists")
USER_EMPTY = EtcdErrorKind(_INVALID, "etcdserver: user name is empty")
USER_NOT_FOUND = EtcdErrorKind(_PRECONDITION, "etcdserver: user name not found")
ROLE_ALREADY_EXIST = EtcdErrorKind(_PRECONDITION, "etcdserver: role name already exists")
ROLE_NOT_FOUND = EtcdErrorKind(_PRECONDITION, "etcdserver: role name not found")
ROLE_EMPTY = EtcdErrorKind(_INVALID, "etcdserver: role name is empty")
AUTH_FAILED = EtcdErrorKind(
    _INVALID, "etcdserver: authentication failed, invalid user ID or password"
)
PERMISSION_NOT_GIVEN = EtcdErrorKind(_INVALID, "etcdserver: permission not given")
PERMISSION_DENIED = EtcdErrorKind(
    grpc.StatusCode.PERMISSION_DENIED, "etcdserver: permission denied"
)
ROLE_NOT_GRANTED = EtcdErrorKind(_PRECONDITION, "etcdserver: role is not granted to the user")
PERMISSION_NOT_GRANTED = EtcdErrorKind(
    _PRECONDITION, "etcdserver: permission is not granted to the role"
)
AUTH_NOT_ENABLED = EtcdErrorKind(_PRECONDITION, "etcdserver: authentication is not enabled")
INVALID_AUTH_TOKEN = EtcdErrorKind(
    grpc.StatusCode.UNAUTHENTICATED, "etcdserver: invalid auth token"
)
INVALID_AUTH_MGMT = EtcdErrorKind(_INVALID, "etcdserver: invalid auth management")
# etcd 3.5 does not map this one to its gRPC form ("etcdserver: revision of auth store is
# old"): clients see the auth package's error with code Unknown.
AUTH_OLD_REVISION = EtcdErrorKind(grpc.StatusCode.UNKNOWN, "auth: revision in header is old")

# Maintenance's admin check returns the auth package's own errors, not their gRPC forms,
# so clients see code Unknown and the "auth: " text (etcd 3.5's authMaintenanceServer).
MAINTENANCE_AUTH_ERRORS = {
    PERMISSION_DENIED: EtcdErrorKind(grpc.StatusCode.UNKNOWN, "auth: permission denied"),
    USER_EMPTY: EtcdErrorKind(grpc.StatusCode.UNKNOWN, "auth: user name is empty"),
    USER_NOT_FOUND: EtcdErrorKind(grpc.StatusCode.UNKNOWN, "auth: user not found"),
    INVALID_AUTH_TOKEN: EtcdErrorKind(grpc.StatusCode.UNKNOWN, "auth: invalid auth token"),
}

# Authenticate as a user added with --no-password: etcd answers its auth package's own
# error (code Unknown), not a gRPC-form one.
NO_PASSWORD_USER = EtcdErrorKind(
    grpc.StatusCode.UNKNOWN, "auth: authentication failed, password was given for no password user"
)

# Watch cancel reasons are sent inside a WatchResponse, not as a status.
WATCH_CANCEL_COMPACTED = "mvcc: required revision has been compacted"
WATCH_CANCEL_FUTURE = "mvcc: required revision is a future revision"

MAX_TXN_OPS = 128  # etcd's --max-txn-ops default

ALL_KINDS: tuple[EtcdErrorKind, ...] = (
    EMPTY_KEY,
    KEY_NOT_FOUND,
    VALUE_PROVIDED,
    LEASE_PROVIDED,
    TOO_MANY_OPS,
    DUPLICATE_KEY,
    REQUEST_TOO_LARGE,
    COMPACTED,
    FUTURE_REV,
    NO_SPACE,
    LEASE_NOT_FOUND,
    LEASE_EXIST,
    LEASE_TTL_TOO_LARGE,
    MEMBER_NOT_FOUND,
    MEMBER_EXIST,
    PEER_URL_EXIST,
    MEMBER_NOT_ENOUGH_STARTED,
    MEMBER_BAD_URLS,
    MEMBER_NOT_LEARNER,
    LEARNER_NOT_READY,
    TOO_MANY_LEARNERS,
    BAD_LEADER_TRANSFEREE,
    NO_LEADER,
    NOT_LEADER,
    LEADER_CHANGED,
    STOPPED,
    TIMEOUT,
    TIMEOUT_LEADER_FAIL,
    UNHEALTHY,
    CORRUPT,
    NOT_CAPABLE,
    WATCH_CANCELED,
    SESSION_EXPIRED,
    ELECTION_NOT_LEADER,
    ELECTION_NO_LEADER,
    MISSING_LEADER_KEY,
    ROOT_USER_NOT_EXIST,
    ROOT_ROLE_NOT_EXIST,
    USER_ALREADY_EXIST,
    USER_EMPTY,
    USER_NOT_FOUND,
    ROLE_ALREADY_EXIST,
    ROLE_NOT_FOUND,
    ROLE_EMPTY,
    AUTH_FAILED,
    PERMISSION_NOT_GIVEN,
    PERMISSION_DENIED,
    ROLE_NOT_GRANTED,
    PERMISSION_NOT_GRANTED,
    AUTH_NOT_ENABLED,
    INVALID_AUTH_TOKEN,
    INVALID_AUTH_MGMT,
    AUTH_OLD_REVISION,
    NO_PASSWORD_USER,
)


def kind_by_message(message: str) -> EtcdErrorKind | None:
    """The catalogued error whose message is `message` (or, failing that, starts it), if
    any (exact first: one message may start another's)."""
    for kind in ALL_KINDS:
        if message == kind.message:
            return kind
    for kind in ALL_KINDS:
        if message.startswith(kind.message):
            return kind
    return None

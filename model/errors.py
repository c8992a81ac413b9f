"""Typed errors of the store model: one class per error etcd's KV/lease/auth API returns.

Contract: `apply()` raises a `StoreError` subclass and leaves the state unchanged when a
request is invalid. `.code` is the gRPC status name etcd answers with and `.message` is
etcd's exact error text (api/v3rpc/rpctypes/error.go), so the checker can compare a
model error with a real server's error one to one. `.hint` says what to do instead.
"""

from __future__ import annotations


class StoreError(Exception):
    """A request etcd would reject; `code` is the gRPC status, `message` etcd's text."""

    code: str = "UNKNOWN"
    message: str = "etcdserver: unknown error"

    def __init__(self, hint: str = "") -> None:
        self.hint = hint
        super().__init__(self.describe())

    def describe(self) -> str:
        text = f"{self.code}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text


class CompactedError(StoreError):
    """ErrCompacted: a read or compaction at a revision already compacted away."""

    code = "OUT_OF_RANGE"
    message = "etcdserver: mvcc: required revision has been compacted"


class FutureRevisionError(StoreError):
    """ErrFutureRev: a read or compaction at a revision the store has not reached."""

    code = "OUT_OF_RANGE"
    message = "etcdserver: mvcc: required revision is a future revision"


class EmptyKeyError(StoreError):
    """ErrEmptyKey: range, put or delete without a key."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: key is not provided"


class KeyNotFoundError(StoreError):
    """ErrKeyNotFound: put with ignore_value or ignore_lease on a key that does not exist."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: key not found"


class ValueProvidedError(StoreError):
    """ErrValueProvided: put with ignore_value and a non-empty value."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: value is provided"


class LeaseProvidedError(StoreError):
    """ErrLeaseProvided: put with ignore_lease and a non-zero lease."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: lease is provided"


class TooManyOpsError(StoreError):
    """ErrTooManyOps: a txn with more compares or ops than --max-txn-ops (default 128)."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: too many operations in txn request"


class DuplicateKeyError(StoreError):
    """ErrDuplicateKey: a txn branch puts one key twice, or puts a key it also deletes."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: duplicate key given in txn request"


class LeaseNotFoundError(StoreError):
    """ErrLeaseNotFound: a put or revoke names a lease that is not granted."""

    code = "NOT_FOUND"
    message = "etcdserver: requested lease not found"


class LeaseExistsError(StoreError):
    """ErrLeaseExist: a grant asks for an id that is already granted."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: lease already exists"


class LeaseTTLTooLargeError(StoreError):
    """ErrLeaseTTLTooLarge: a grant asks for a TTL above lease.MaxLeaseTTL (9e9 s)."""

    code = "OUT_OF_RANGE"
    message = "etcdserver: too large lease TTL"


# ---------------------------------------------------------------------------- auth
# The auth store's errors (api/v3rpc/rpctypes ErrGRPC*, etcd 3.5). etcd 3.5 sends the last
# two with code Unknown and the auth package's own text.


class RootUserNotExistError(StoreError):
    """AuthEnable without a user named root."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: root user does not exist"


class RootRoleNotExistError(StoreError):
    """AuthEnable while the root user lacks the root role."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: root user does not have root role"


class UserAlreadyExistError(StoreError):
    """UserAdd of a name that is taken."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: user name already exists"


class UserEmptyError(StoreError):
    """UserAdd without a name, or a request without a token while auth is enabled."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: user name is empty"


class UserNotFoundError(StoreError):
    """a user request naming a user that does not exist."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: user name not found"


class RoleAlreadyExistError(StoreError):
    """RoleAdd of a name that is taken."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: role name already exists"


class RoleNotFoundError(StoreError):
    """a role request naming a role that does not exist."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: role name not found"


class RoleEmptyError(StoreError):
    """RoleAdd without a name."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: role name is empty"


class AuthFailedError(StoreError):
    """Authenticate with an unknown user or a wrong password."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: authentication failed, invalid user ID or password"


class PermissionNotGivenError(StoreError):
    """RoleGrantPermission without a permission."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: permission not given"


class PermissionDeniedError(StoreError):
    """the caller's roles do not grant what the request needs."""

    code = "PERMISSION_DENIED"
    message = "etcdserver: permission denied"


class RoleNotGrantedError(StoreError):
    """UserRevokeRole of a role the user does not hold."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: role is not granted to the user"


class PermissionNotGrantedError(StoreError):
    """RoleRevokePermission of a permission the role does not hold."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: permission is not granted to the role"


class AuthNotEnabledError(StoreError):
    """Authenticate while auth is disabled."""

    code = "FAILED_PRECONDITION"
    message = "etcdserver: authentication is not enabled"


class InvalidAuthMgmtError(StoreError):
    """deleting the root user or role, or revoking root from root, while auth is enabled."""

    code = "INVALID_ARGUMENT"
    message = "etcdserver: invalid auth management"


class AuthOldRevisionError(StoreError):
    """a token checked at an auth revision older than the store's (authenticate again)."""

    code = "UNKNOWN"
    message = "auth: revision in header is old"


class NoPasswordUserError(StoreError):
    """Authenticate as a user added with --no-password."""

    code = "UNKNOWN"
    message = "auth: authentication failed, password was given for no password user"


ALL_ERRORS: tuple[type[StoreError], ...] = (
    CompactedError,
    FutureRevisionError,
    EmptyKeyError,
    KeyNotFoundError,
    ValueProvidedError,
    LeaseProvidedError,
    TooManyOpsError,
    DuplicateKeyError,
    LeaseNotFoundError,
    LeaseExistsError,
    LeaseTTLTooLargeError,
    RootUserNotExistError,
    RootRoleNotExistError,
    UserAlreadyExistError,
    UserEmptyError,
    UserNotFoundError,
    RoleAlreadyExistError,
    RoleNotFoundError,
    RoleEmptyError,
    AuthFailedError,
    PermissionNotGivenError,
    PermissionDeniedError,
    RoleNotGrantedError,
    PermissionNotGrantedError,
    AuthNotEnabledError,
    InvalidAuthMgmtError,
    AuthOldRevisionError,
    NoPasswordUserError,
)
"""Every error class, for lookups by (code, message) from recorded histories."""


def error_for(code: str, message: str) -> type[StoreError] | None:
    """The error class etcd answers with this code and text, or None if it is not ours."""
    for cls in ALL_ERRORS:
        if cls.code == code and cls.message == message:
            return cls
    return None

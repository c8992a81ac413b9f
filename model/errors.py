"""Typed errors of the store model: one class per error etcd's KV/lease API returns.

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
)
"""Every error class, for lookups by (code, message) from recorded histories."""


def error_for(code: str, message: str) -> type[StoreError] | None:
    """The error class etcd answers with this code and text, or None if it is not ours."""
    for cls in ALL_ERRORS:
        if cls.code == code and cls.message == message:
            return cls
    return None

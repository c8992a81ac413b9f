"""etcd's checks of a KV request before it is proposed, and what a request asks for.

As etcd's v3rpc layer: an empty key (EMPTY_KEY), a put's ignore_value with a value or
ignore_lease with a lease, a txn with more than MAX_TXN_OPS operations in a branch
(nested txns share the budget), an operation with no request, and a key written twice
in one txn (DUPLICATE_KEY: puts against puts and deletes, as etcd compares intervals).
The servicers check before proposing; the store checks again when it applies (a
request in the log from elsewhere). `txn_is_read_only` and `txn_has_put` say what a txn
does, for the applier and the quota. Pure functions over the request messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.pb import rpc_pb2


def check_range(req: rpc_pb2.RangeRequest) -> None:
    if not req.key:
        raise RpcError(errors.EMPTY_KEY)


def check_put(req: rpc_pb2.PutRequest) -> None:
    if not req.key:
        raise RpcError(errors.EMPTY_KEY)
    if req.ignore_value and req.value:
        raise RpcError(errors.VALUE_PROVIDED)
    if req.ignore_lease and req.lease:
        raise RpcError(errors.LEASE_PROVIDED)


def check_delete(req: rpc_pb2.DeleteRangeRequest) -> None:
    if not req.key:
        raise RpcError(errors.EMPTY_KEY)


def check_txn(req: rpc_pb2.TxnRequest, max_ops: int = errors.MAX_TXN_OPS) -> None:
    """etcd's checks before proposing a txn: size, empty keys, keys written twice."""
    _check_txn_ops(req, max_ops)
    _check_intervals(req.success)
    _check_intervals(req.failure)


def _check_txn_ops(req: rpc_pb2.TxnRequest, max_ops: int) -> None:
    ops = max(len(req.compare), len(req.success), len(req.failure))
    if ops > max_ops:
        raise RpcError(errors.TOO_MANY_OPS)
    for c in req.compare:
        if not c.key:
            raise RpcError(errors.EMPTY_KEY)
    for op in (*req.success, *req.failure):
        kind = op.WhichOneof("request")
        if kind == "request_range":
            check_range(op.request_range)
        elif kind == "request_put":
            check_put(op.request_put)
        elif kind == "request_delete_range":
            check_delete(op.request_delete_range)
        elif kind == "request_txn":
            _check_txn_ops(op.request_txn, max_ops - ops)  # nested txns share the budget
        else:
            raise RpcError(errors.KEY_NOT_FOUND, "a txn operation carries no request")


def _deleted_by(key: bytes, dels: Sequence[tuple[bytes, bytes]]) -> bool:
    # etcd checks overlaps on plain intervals [key, range_end): a delete whose range_end
    # is "\0" (to the end of the keyspace) is the empty interval there, and so never
    # conflicts with a put. Reproduced as etcd behaves.
    return any(key == start if not end else start <= key < end for start, end in dels)


def _check_intervals(
    ops: Sequence[rpc_pb2.RequestOp],
) -> tuple[set[bytes], list[tuple[bytes, bytes]]]:
    """The put keys and delete intervals of one branch; DUPLICATE_KEY on a clash.

    As etcd: this level's deletes first; then each nested txn's puts against the puts
    and deletes so far (its two branches exclude each other, so a key put in both is
    fine); then this level's puts.
    """
    dels: list[tuple[bytes, bytes]] = [
        (op.request_delete_range.key, op.request_delete_range.range_end)
        for op in ops
        if op.WhichOneof("request") == "request_delete_range"
    ]
    puts: set[bytes] = set()
    for op in ops:
        if op.WhichOneof("request") != "request_txn":
            continue
        puts_then, dels_then = _check_intervals(op.request_txn.success)
        puts_else, dels_else = _check_intervals(op.request_txn.failure)
        for key in puts_then:
            if key in puts or _deleted_by(key, dels):
                raise RpcError(errors.DUPLICATE_KEY)
            puts.add(key)
        for key in puts_else:
            if (key in puts and key not in puts_then) or _deleted_by(key, dels):
                raise RpcError(errors.DUPLICATE_KEY)
            puts.add(key)
        dels += dels_then + dels_else
    for op in ops:
        if op.WhichOneof("request") != "request_put":
            continue
        key = op.request_put.key
        if key in puts or _deleted_by(key, dels):
            raise RpcError(errors.DUPLICATE_KEY)
        puts.add(key)
    return puts, dels


def txn_is_read_only(req: rpc_pb2.TxnRequest) -> bool:
    """True when no branch (at any depth) holds a put or a delete."""
    for op in (*req.success, *req.failure):
        kind = op.WhichOneof("request")
        if kind in ("request_put", "request_delete_range"):
            return False
        if kind == "request_txn" and not txn_is_read_only(op.request_txn):
            return False
    return True


def txn_has_put(req: rpc_pb2.TxnRequest) -> bool:
    """True when some branch (at any depth) holds a put (what a full quota rejects)."""
    for op in (*req.success, *req.failure):
        kind = op.WhichOneof("request")
        if kind == "request_put":
            return True
        if kind == "request_txn" and txn_has_put(op.request_txn):
            return True
    return False

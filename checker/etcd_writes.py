"""What an etcd request, response or watch event shows about the writes it made: the
facts the `etcd` model's revision hints and observations are built from.

Contract
- `bumped(request, response)`: whether the response shows the request took a new
  revision (None: it cannot tell); `pre_revisions` the revisions it may have run
  after, given the revision its response reports.
- Write signatures name writes the way observations do: ("put", key, value),
  ("create", key) for a put that created the key, ("delete", key).
  `write_signatures(request)` are those a request may make (either txn branch);
  `blind_write` says whether it may also write what they do not name (a put with
  ignore_value, a range delete); `event_signatures(event)` those a store event shows.
- `put_keys`, `sure_put_keys` (an ok request: the branch that ran), `blind_put_keys`,
  `lease_ids_used` and `response_kvs` (every kv a response holds, prev_kv(s) too).
- Pure functions of the model's request and response values (model/requests.py).
"""

from __future__ import annotations

from collections.abc import Hashable

from etcdspec.model.requests import (
    DeleteRangeRequest,
    DeleteRangeResponse,
    Event,
    EventType,
    KeyValue,
    LeaseGrantRequest,
    LeaseKeepAliveRequest,
    LeaseRevokeRequest,
    PutRequest,
    PutResponse,
    RangeResponse,
    Request,
    Response,
    TxnOp,
    TxnRequest,
    TxnResponse,
)


def pre_revisions(
    request: Request, response: Response | None, revision: int | None
) -> tuple[int, ...]:
    """The revisions the request may have run after, given the revision its response
    reports: r-1 if it took revision r, r if it wrote nothing, either if unknown."""
    if revision is None or revision <= 0:
        return ()
    if type(request) is PutRequest:  # the common case: a put always takes one
        return (revision - 1,)
    took = bumped(request, response)
    if took is None:
        return (revision - 1, revision)
    return (revision - 1,) if took else (revision,)


def bumped(request: Request | TxnOp, response: Response | None) -> bool | None:
    """Whether the response shows that the request took a new revision (None: unknown).

    A put always takes one; a delete when it deleted something; a txn when an op of
    the branch that ran (per `succeeded`) did; reads, grants, keep-alives and
    compactions never do; a revoke does when the lease had keys, which no response shows.
    """
    if isinstance(request, PutRequest):
        return True
    if isinstance(request, DeleteRangeRequest):
        return isinstance(response, DeleteRangeResponse) and response.deleted > 0
    if isinstance(request, TxnRequest):
        if not isinstance(response, TxnResponse):
            return None
        branch = request.success if response.succeeded else request.failure
        if len(branch) != len(response.responses):
            return None
        results = [bumped(op, inner) for op, inner in zip(branch, response.responses, strict=True)]
        if any(result is True for result in results):
            return True
        return False if all(result is False for result in results) else None
    if isinstance(request, LeaseRevokeRequest):
        return None
    return False


def write_signatures(request: Request | TxnOp) -> tuple[Hashable, ...]:
    """("put", key, value) for every put and ("delete", key) for every single-key delete
    the request may make (either txn branch)."""
    if isinstance(request, PutRequest):
        create = ("create", request.key)
        return (create,) if request.ignore_value else (("put", request.key, request.value), create)
    if isinstance(request, DeleteRangeRequest) and not request.range_end:
        return (("delete", request.key),)
    if isinstance(request, TxnRequest):
        return tuple(s for op in request.success + request.failure for s in write_signatures(op))
    return ()


def blind_write(request: Request | TxnOp) -> bool:
    """Whether the request may write what its signatures do not name: a put with
    ignore_value (its value) or a range delete (its keys)."""
    if isinstance(request, PutRequest):
        return request.ignore_value
    if isinstance(request, DeleteRangeRequest):
        return bool(request.range_end)
    if isinstance(request, TxnRequest):
        return any(blind_write(op) for op in request.success + request.failure)
    return False


def put_keys(request: Request | TxnOp) -> set[bytes]:
    """The keys the request may put (either txn branch)."""
    if isinstance(request, PutRequest):
        return {request.key}
    if isinstance(request, TxnRequest):
        return {k for op in request.success + request.failure for k in put_keys(op)}
    return set()


def sure_put_keys(request: Request | TxnOp, response: Response) -> set[bytes]:
    """The keys an ok request surely put (a txn: the puts of the branch that ran)."""
    if isinstance(request, PutRequest):
        return {request.key}
    if isinstance(request, TxnRequest) and isinstance(response, TxnResponse):
        branch = request.success if response.succeeded else request.failure
        return {op.key for op in branch if isinstance(op, PutRequest)}
    return set()


def blind_put_keys(request: Request | TxnOp) -> set[bytes]:
    """The keys the request may put with ignore_value (either txn branch)."""
    if isinstance(request, PutRequest):
        return {request.key} if request.ignore_value else set()
    if isinstance(request, TxnRequest):
        return {k for op in request.success + request.failure for k in blind_put_keys(op)}
    return set()


def event_signatures(event: Event) -> tuple[Hashable, ...]:
    """The signatures of one store event, as observations name writes: ("put", key,
    value), with ("create", key) for a put that created the key, or ("delete", key)."""
    kv = event.kv
    if event.type is EventType.DELETE:
        return (("delete", kv.key),)
    if kv.version == 1:
        return (("put", kv.key, kv.value), ("create", kv.key))
    return (("put", kv.key, kv.value),)


def lease_ids_used(request: Request | TxnOp) -> set[int]:
    if isinstance(request, LeaseGrantRequest):
        return {request.id} - {0}
    if isinstance(request, PutRequest):
        return {request.lease} if request.lease else set()
    if isinstance(request, (LeaseRevokeRequest, LeaseKeepAliveRequest)):
        return {request.id}
    if isinstance(request, TxnRequest):
        found: set[int] = set()
        for op in request.success + request.failure:
            found |= lease_ids_used(op)
        return found
    return set()


def response_kvs(response: Response) -> list[KeyValue]:
    if isinstance(response, RangeResponse):
        return list(response.kvs)
    if isinstance(response, PutResponse):
        return [response.prev_kv] if response.prev_kv is not None else []
    if isinstance(response, DeleteRangeResponse):
        return list(response.prev_kvs)
    if isinstance(response, TxnResponse):
        return [kv for inner in response.responses for kv in response_kvs(inner)]
    return []

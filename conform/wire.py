"""The etcd v3 wire for conformance runs: the model's requests as protobuf, and protobuf
responses back as the model's responses.

Contract: `to_pb(request)` gives the gRPC request message for a model request
(RangeRequest, PutRequest, DeleteRangeRequest, TxnRequest, CompactionRequest, the lease
requests); `from_pb(request, message)` gives the model response for the reply to it.
Only the generated protobuf modules (etcdspec.impl.pb.*) are used, as a wire library:
nothing of the server. Header fields other than revision are dropped (the model does
not know them); `header_of(message)` keeps them for logs.
"""

from __future__ import annotations

from typing import Any

from etcdspec.impl.pb import kv_pb2, rpc_pb2
from etcdspec.model.requests import (
    CompactionRequest,
    CompactionResponse,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    Event,
    EventType,
    KeyValue,
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseKeepAliveRequest,
    LeaseKeepAliveResponse,
    LeaseRevokeRequest,
    LeaseRevokeResponse,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    Request,
    Response,
    ResponseHeader,
    TxnOp,
    TxnOpResponse,
    TxnRequest,
    TxnResponse,
)

_TARGETS = {
    CompareTarget.VERSION: rpc_pb2.Compare.VERSION,
    CompareTarget.CREATE: rpc_pb2.Compare.CREATE,
    CompareTarget.MOD: rpc_pb2.Compare.MOD,
    CompareTarget.VALUE: rpc_pb2.Compare.VALUE,
    CompareTarget.LEASE: rpc_pb2.Compare.LEASE,
}
_RESULTS = {
    CompareResult.EQUAL: rpc_pb2.Compare.EQUAL,
    CompareResult.GREATER: rpc_pb2.Compare.GREATER,
    CompareResult.LESS: rpc_pb2.Compare.LESS,
    CompareResult.NOT_EQUAL: rpc_pb2.Compare.NOT_EQUAL,
}


class WireError(ValueError):
    """A request the wire cannot carry, or a reply of the wrong shape for its request."""


def to_pb(request: Request) -> Any:
    """The protobuf request message for a model request."""
    if isinstance(request, RangeRequest):
        return rpc_pb2.RangeRequest(
            key=request.key,
            range_end=request.range_end,
            limit=request.limit,
            revision=request.revision,
            keys_only=request.keys_only,
            count_only=request.count_only,
        )
    if isinstance(request, PutRequest):
        return rpc_pb2.PutRequest(
            key=request.key,
            value=request.value,
            lease=request.lease,
            prev_kv=request.prev_kv,
            ignore_value=request.ignore_value,
            ignore_lease=request.ignore_lease,
        )
    if isinstance(request, DeleteRangeRequest):
        return rpc_pb2.DeleteRangeRequest(
            key=request.key, range_end=request.range_end, prev_kv=request.prev_kv
        )
    if isinstance(request, TxnRequest):
        return rpc_pb2.TxnRequest(
            compare=[_compare_pb(c) for c in request.compare],
            success=[_op_pb(op) for op in request.success],
            failure=[_op_pb(op) for op in request.failure],
        )
    if isinstance(request, CompactionRequest):
        return rpc_pb2.CompactionRequest(revision=request.revision)
    if isinstance(request, LeaseGrantRequest):
        return rpc_pb2.LeaseGrantRequest(TTL=request.ttl, ID=request.id)
    if isinstance(request, LeaseRevokeRequest):
        return rpc_pb2.LeaseRevokeRequest(ID=request.id)
    if isinstance(request, LeaseKeepAliveRequest):
        return rpc_pb2.LeaseKeepAliveRequest(ID=request.id)
    raise WireError(f"conformance runs do not send {request.describe()}")


def _compare_pb(compare: Compare) -> Any:
    message = rpc_pb2.Compare(
        key=compare.key,
        range_end=compare.range_end,
        target=_TARGETS[compare.target],
        result=_RESULTS[compare.result],
    )
    operand = compare.operand
    if compare.target is CompareTarget.VALUE:
        message.value = operand if isinstance(operand, bytes) else str(operand).encode()
    elif isinstance(operand, int):
        field = {
            CompareTarget.VERSION: "version",
            CompareTarget.CREATE: "create_revision",
            CompareTarget.MOD: "mod_revision",
            CompareTarget.LEASE: "lease",
        }[compare.target]
        setattr(message, field, operand)
    else:
        raise WireError(f"compare {compare.describe()}: a {compare.target.name} needs an int")
    return message


def _op_pb(op: TxnOp) -> Any:
    body = to_pb(op)
    if isinstance(op, RangeRequest):
        return rpc_pb2.RequestOp(request_range=body)
    if isinstance(op, PutRequest):
        return rpc_pb2.RequestOp(request_put=body)
    if isinstance(op, DeleteRangeRequest):
        return rpc_pb2.RequestOp(request_delete_range=body)
    return rpc_pb2.RequestOp(request_txn=body)


def kv_from_pb(kv: Any) -> KeyValue:
    return KeyValue(
        key=bytes(kv.key),
        create_revision=int(kv.create_revision),
        mod_revision=int(kv.mod_revision),
        version=int(kv.version),
        value=bytes(kv.value),
        lease=int(kv.lease),
    )


def header_of(message: Any) -> dict[str, int]:
    """Every header field of a reply (cluster_id, member_id, revision, raft_term)."""
    header = message.header
    return {
        "cluster_id": int(header.cluster_id),
        "member_id": int(header.member_id),
        "revision": int(header.revision),
        "raft_term": int(header.raft_term),
    }


def from_pb(request: Request, message: Any) -> Response:
    """The model response for the reply `message` to `request`."""
    header = ResponseHeader(int(message.header.revision))
    if isinstance(request, RangeRequest):
        return RangeResponse(
            header=header,
            kvs=tuple(kv_from_pb(kv) for kv in message.kvs),
            more=bool(message.more),
            count=int(message.count),
        )
    if isinstance(request, PutRequest):
        has_prev = message.HasField("prev_kv")
        return PutResponse(header=header, prev_kv=kv_from_pb(message.prev_kv) if has_prev else None)
    if isinstance(request, DeleteRangeRequest):
        return DeleteRangeResponse(
            header=header,
            deleted=int(message.deleted),
            prev_kvs=tuple(kv_from_pb(kv) for kv in message.prev_kvs),
        )
    if isinstance(request, TxnRequest):
        branch = request.success if message.succeeded else request.failure
        if len(branch) != len(message.responses):
            raise WireError(
                f"txn reply has {len(message.responses)} responses for {len(branch)} ops"
            )
        return TxnResponse(
            header=header,
            succeeded=bool(message.succeeded),
            responses=tuple(
                _op_response(op, reply) for op, reply in zip(branch, message.responses, strict=True)
            ),
        )
    if isinstance(request, CompactionRequest):
        return CompactionResponse(header=header)
    if isinstance(request, LeaseGrantRequest):
        return LeaseGrantResponse(header=header, id=int(message.ID), ttl=int(message.TTL))
    if isinstance(request, LeaseRevokeRequest):
        return LeaseRevokeResponse(header=header)
    if isinstance(request, LeaseKeepAliveRequest):
        return LeaseKeepAliveResponse(header=header, id=int(message.ID), ttl=int(message.TTL))
    raise WireError(f"no reply shape for {request.describe()}")


def _op_response(op: TxnOp, reply: Any) -> TxnOpResponse:
    name = reply.WhichOneof("response")
    expected = {
        RangeRequest: "response_range",
        PutRequest: "response_put",
        DeleteRangeRequest: "response_delete_range",
        TxnRequest: "response_txn",
    }[type(op)]
    if name != expected:
        raise WireError(f"txn op {op.describe()} answered with {name}, expected {expected}")
    response = from_pb(op, getattr(reply, name))
    assert isinstance(response, (RangeResponse, PutResponse, DeleteRangeResponse, TxnResponse))
    return response


def event_from_pb(event: Any) -> Event:
    kind = EventType.DELETE if event.type == kv_pb2.Event.DELETE else EventType.PUT
    prev = kv_from_pb(event.prev_kv) if event.HasField("prev_kv") else None
    return Event(kind, kv_from_pb(event.kv), prev)

"""etcd v3 requests and responses as history JSON, to and from the model's dataclasses.

Contract:
- Field names are etcd's v3 JSON names: key, range_end, limit, revision, keys_only,
  count_only, prev_kv, lease, ignore_value, ignore_lease; header.revision; kvs[] with
  key, create_revision, mod_revision, version, value, lease; more, count, deleted,
  prev_kvs, succeeded, responses; txn compare[] with target (VERSION, CREATE, MOD,
  VALUE, LEASE), result (EQUAL, GREATER, LESS, NOT_EQUAL) and the operand in version,
  create_revision, mod_revision, value or lease; txn ops as request_range, request_put,
  request_delete_range, request_txn and their responses as response_range,
  response_put, response_delete_range, response_txn. Leases use ID and TTL (etcd's
  JSON names; id and ttl are accepted too).
- As in etcd's JSON, a missing field is its zero value, and 64-bit integers may be
  written as decimal strings. Header fields other than revision (cluster_id, member_id,
  raft_term) are accepted and ignored: the model does not know them.
- Keys and values are strings, or {"b64": "..."} for bytes that are not UTF-8.
- Decoding errors raise EtcdJsonError naming the field path and what was expected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from etcdspec.checker.history import decode_bytes, encode_bytes
from etcdspec.model.requests import (
    CompactionRequest,
    CompactionResponse,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
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

ETCD_FS = (
    "range",
    "put",
    "delete",
    "txn",
    "compact",
    "lease_grant",
    "lease_revoke",
    "lease_keepalive",
)
_OPERAND_FIELD = {
    CompareTarget.VERSION: "version",
    CompareTarget.CREATE: "create_revision",
    CompareTarget.MOD: "mod_revision",
    CompareTarget.VALUE: "value",
    CompareTarget.LEASE: "lease",
}
_TXN_REQUEST = {
    "request_range": "range",
    "request_put": "put",
    "request_delete_range": "delete",
    "request_txn": "txn",
}
_TXN_RESPONSE = {v: k.replace("request_", "response_") for k, v in _TXN_REQUEST.items()}


class EtcdJsonError(ValueError):
    """A request or response that does not decode: the field path and what was wrong."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


# ---------------------------------------------------------------------------- decoding


def as_object(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise EtcdJsonError(path, f"expected an object, got {value!r}")
    return value


def field_int(obj: dict[str, Any], name: str, path: str, *aliases: str) -> int:
    value = obj.get(name)
    if type(value) is int:  # the common case, first
        return value
    for field in (name, *aliases):
        if field in obj and obj[field] is not None:
            value = obj[field]
            if isinstance(value, bool):
                break
            if isinstance(value, int):
                return value
            if isinstance(value, str) and value.lstrip("-").isdigit():
                return int(value)
            raise EtcdJsonError(f"{path}.{field}", f"expected an integer, got {value!r}")
    else:
        return 0
    raise EtcdJsonError(f"{path}.{name}", "expected an integer, got a boolean")


def field_bool(obj: dict[str, Any], name: str, path: str) -> bool:
    value = obj.get(name, False)
    if value is True or value is False:
        return value
    if value is None:
        return False
    if not isinstance(value, bool):
        raise EtcdJsonError(f"{path}.{name}", f"expected true or false, got {value!r}")
    return value


def field_bytes(obj: dict[str, Any], name: str, path: str) -> bytes:
    value = obj.get(name)
    if type(value) is str:
        return value.encode("utf-8")
    if value is None:
        return b""
    try:
        return decode_bytes(value, f"{path}.{name}")
    except ValueError as error:
        raise EtcdJsonError(f"{path}.{name}", str(error)) from error


def field_list(obj: dict[str, Any], name: str, path: str) -> list[Any]:
    value = obj.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise EtcdJsonError(f"{path}.{name}", f"expected a list, got {value!r}")
    return value


class _Plain:
    """A message read in one go when every field is present with exactly its JSON type
    (the common case: our recorder writes every field); `decode` gives None otherwise,
    and the caller takes the careful per-field path (zero values, decimal strings,
    {"b64": ...}, precise errors). With `shared`, equal field values give the same
    immutable message from a small cache: histories repeat their reads and kvs."""

    __slots__ = ("build", "cache", "names", "types")

    def __init__(self, build: Callable[..., Any], shared: bool, **fields: type) -> None:
        self.build = build
        self.names = tuple(fields)
        self.types = tuple(fields.values())
        self.cache: dict[tuple[Any, ...], Any] | None = {} if shared else None

    def decode(self, obj: dict[str, Any]) -> Any:
        raw = tuple(map(obj.get, self.names))
        if tuple(map(type, raw)) != self.types:
            return None
        cache = self.cache
        if cache is None:
            return self.build(*raw)
        # Exact types: True is not 1 here, so equal tuples make equal messages.
        message = cache.get(raw)
        if message is None:
            if len(cache) >= _SHARED_MAX:
                cache.clear()
            message = cache[raw] = self.build(*raw)
        return message


_SHARED_MAX = 1 << 16  # messages kept per kind; then the cache starts again
_PLAIN_RANGE = _Plain(
    lambda key, end, *rest: RangeRequest(key.encode(), end.encode(), *rest),
    True,
    key=str,
    range_end=str,
    limit=int,
    revision=int,
    keys_only=bool,
    count_only=bool,
)
_PLAIN_PUT = _Plain(
    lambda key, value, *rest: PutRequest(key.encode(), value.encode(), *rest),
    False,
    key=str,
    value=str,
    lease=int,
    prev_kv=bool,
    ignore_value=bool,
    ignore_lease=bool,
)
_PLAIN_DELETE = _Plain(
    lambda key, end, prev_kv: DeleteRangeRequest(key.encode(), end.encode(), prev_kv),
    True,
    key=str,
    range_end=str,
    prev_kv=bool,
)
_PLAIN_KV = _Plain(
    lambda key, create, mod, version, value, lease: KeyValue(
        key.encode(), create, mod, version, value.encode(), lease
    ),
    True,
    key=str,
    create_revision=int,
    mod_revision=int,
    version=int,
    value=str,
    lease=int,
)
_PLAIN_REQUESTS = {"range": _PLAIN_RANGE, "put": _PLAIN_PUT, "delete": _PLAIN_DELETE}


def request_from_json(f: str, value: Any, path: str = "value") -> Request:
    """The model request for operation `f` with JSON request `value`."""
    obj = value if type(value) is dict else as_object(value, path)
    plain = _PLAIN_REQUESTS.get(f)
    if plain is not None:
        request: Request | None = plain.decode(obj)
        if request is not None:
            return request
    if f == "range":
        return RangeRequest(
            key=field_bytes(obj, "key", path),
            range_end=field_bytes(obj, "range_end", path),
            limit=field_int(obj, "limit", path),
            revision=field_int(obj, "revision", path),
            keys_only=field_bool(obj, "keys_only", path),
            count_only=field_bool(obj, "count_only", path),
        )
    if f == "put":
        return PutRequest(
            key=field_bytes(obj, "key", path),
            value=field_bytes(obj, "value", path),
            lease=field_int(obj, "lease", path),
            prev_kv=field_bool(obj, "prev_kv", path),
            ignore_value=field_bool(obj, "ignore_value", path),
            ignore_lease=field_bool(obj, "ignore_lease", path),
        )
    if f == "delete":
        return DeleteRangeRequest(
            key=field_bytes(obj, "key", path),
            range_end=field_bytes(obj, "range_end", path),
            prev_kv=field_bool(obj, "prev_kv", path),
        )
    if f == "txn":
        return TxnRequest(
            compare=tuple(
                _compare(c, f"{path}.compare[{i}]")
                for i, c in enumerate(field_list(obj, "compare", path))
            ),
            success=tuple(
                _txn_op(o, f"{path}.success[{i}]")
                for i, o in enumerate(field_list(obj, "success", path))
            ),
            failure=tuple(
                _txn_op(o, f"{path}.failure[{i}]")
                for i, o in enumerate(field_list(obj, "failure", path))
            ),
        )
    if f == "compact":
        return CompactionRequest(revision=field_int(obj, "revision", path))
    if f == "lease_grant":
        return LeaseGrantRequest(
            ttl=field_int(obj, "TTL", path, "ttl"), id=field_int(obj, "ID", path, "id")
        )
    if f == "lease_revoke":
        return LeaseRevokeRequest(id=field_int(obj, "ID", path, "id"))
    if f == "lease_keepalive":
        return LeaseKeepAliveRequest(id=field_int(obj, "ID", path, "id"))
    raise EtcdJsonError("f", f"the etcd model has {', '.join(ETCD_FS)}, not {f!r}")


def _compare(value: Any, path: str) -> Compare:
    obj = as_object(value, path)
    try:
        target = CompareTarget[str(obj.get("target", "VERSION"))]
        result = CompareResult[str(obj.get("result", "EQUAL"))]
    except KeyError as error:
        raise EtcdJsonError(
            path,
            f"unknown target or result {error}; targets: VERSION CREATE MOD VALUE LEASE, "
            "results: EQUAL GREATER LESS NOT_EQUAL",
        ) from error
    field = _OPERAND_FIELD[target]
    operand: int | bytes = (
        field_bytes(obj, field, path)
        if target is CompareTarget.VALUE
        else field_int(obj, field, path)
    )
    return Compare(
        key=field_bytes(obj, "key", path),
        target=target,
        result=result,
        operand=operand,
        range_end=field_bytes(obj, "range_end", path),
    )


def _txn_op(value: Any, path: str) -> TxnOp:
    obj = as_object(value, path)
    found = [name for name in _TXN_REQUEST if name in obj]
    if len(found) != 1:
        raise EtcdJsonError(path, f"expected exactly one of {', '.join(_TXN_REQUEST)}")
    request = request_from_json(_TXN_REQUEST[found[0]], obj[found[0]], f"{path}.{found[0]}")
    assert isinstance(request, (RangeRequest, PutRequest, DeleteRangeRequest, TxnRequest))
    return request


def _header(obj: dict[str, Any], path: str) -> ResponseHeader:
    header = obj.get("header")
    if type(header) is dict:
        revision = header.get("revision")
        if type(revision) is int:
            return ResponseHeader(revision)
    return ResponseHeader(revision=field_int(as_object(header, f"{path}.header"), "revision", path))


def header_revision(value: Any) -> int | None:
    """The response's header.revision, or None when it is not recorded."""
    if not isinstance(value, dict) or not isinstance(value.get("header"), dict):
        return None
    if "revision" not in value["header"]:
        return None
    return field_int(value["header"], "revision", "value.header")


def kv_from_json(value: Any, path: str) -> KeyValue:
    obj = value if type(value) is dict else as_object(value, path)
    kv: KeyValue | None = _PLAIN_KV.decode(obj)
    if kv is not None:
        return kv
    return KeyValue(
        key=field_bytes(obj, "key", path),
        create_revision=field_int(obj, "create_revision", path),
        mod_revision=field_int(obj, "mod_revision", path),
        version=field_int(obj, "version", path),
        value=field_bytes(obj, "value", path),
        lease=field_int(obj, "lease", path),
    )


def response_from_json(f: str, value: Any, path: str = "value") -> Response:
    """The model response for operation `f` with JSON response `value`."""
    obj = value if type(value) is dict else as_object(value, path)
    header = _header(obj, path)
    if f == "range":
        return RangeResponse(
            header=header,
            kvs=_kvs(obj, "kvs", path),
            more=field_bool(obj, "more", path),
            count=field_int(obj, "count", path),
        )
    if f == "put":
        prev = obj.get("prev_kv")
        return PutResponse(
            header=header, prev_kv=kv_from_json(prev, f"{path}.prev_kv") if prev else None
        )
    if f == "delete":
        return DeleteRangeResponse(
            header=header,
            deleted=field_int(obj, "deleted", path),
            prev_kvs=_kvs(obj, "prev_kvs", path),
        )
    if f == "txn":
        return TxnResponse(
            header=header,
            succeeded=field_bool(obj, "succeeded", path),
            responses=tuple(
                _txn_response(r, f"{path}.responses[{i}]")
                for i, r in enumerate(field_list(obj, "responses", path))
            ),
        )
    if f == "compact":
        return CompactionResponse(header=header)
    if f == "lease_grant":
        return LeaseGrantResponse(
            header=header,
            id=field_int(obj, "ID", path, "id"),
            ttl=field_int(obj, "TTL", path, "ttl"),
        )
    if f == "lease_revoke":
        return LeaseRevokeResponse(header=header)
    if f == "lease_keepalive":
        return LeaseKeepAliveResponse(
            header=header,
            id=field_int(obj, "ID", path, "id"),
            ttl=field_int(obj, "TTL", path, "ttl"),
        )
    raise EtcdJsonError("f", f"the etcd model has {', '.join(ETCD_FS)}, not {f!r}")


def _kvs(obj: dict[str, Any], name: str, path: str) -> tuple[KeyValue, ...]:
    """The list of kvs in field `name` (each read plainly when it can be)."""
    items = field_list(obj, name, path)
    decode = _PLAIN_KV.decode
    kvs = []
    for i, item in enumerate(items):
        kv = decode(item) if type(item) is dict else None
        kvs.append(kv if kv is not None else kv_from_json(item, f"{path}.{name}[{i}]"))
    return tuple(kvs)


def _txn_response(value: Any, path: str) -> TxnOpResponse:
    obj = as_object(value, path)
    names = {v: k for k, v in _TXN_RESPONSE.items()}
    found = [name for name in names if name in obj]
    if len(found) != 1:
        raise EtcdJsonError(path, f"expected exactly one of {', '.join(names)}")
    response = response_from_json(names[found[0]], obj[found[0]], f"{path}.{found[0]}")
    assert isinstance(response, (RangeResponse, PutResponse, DeleteRangeResponse, TxnResponse))
    return response


# ---------------------------------------------------------------------------- encoding


def kv_to_json(kv: KeyValue) -> dict[str, Any]:
    return {
        "key": encode_bytes(kv.key),
        "create_revision": kv.create_revision,
        "mod_revision": kv.mod_revision,
        "version": kv.version,
        "value": encode_bytes(kv.value),
        "lease": kv.lease,
    }


def request_to_json(request: Request) -> tuple[str, dict[str, Any]]:
    """(f, JSON request) for a model request (the history's invoke value)."""
    if isinstance(request, RangeRequest):
        return "range", {
            "key": encode_bytes(request.key),
            "range_end": encode_bytes(request.range_end),
            "limit": request.limit,
            "revision": request.revision,
            "keys_only": request.keys_only,
            "count_only": request.count_only,
        }
    if isinstance(request, PutRequest):
        return "put", {
            "key": encode_bytes(request.key),
            "value": encode_bytes(request.value),
            "lease": request.lease,
            "prev_kv": request.prev_kv,
            "ignore_value": request.ignore_value,
            "ignore_lease": request.ignore_lease,
        }
    if isinstance(request, DeleteRangeRequest):
        return "delete", {
            "key": encode_bytes(request.key),
            "range_end": encode_bytes(request.range_end),
            "prev_kv": request.prev_kv,
        }
    if isinstance(request, TxnRequest):
        return "txn", {
            "compare": [_compare_to_json(c) for c in request.compare],
            "success": [_txn_op_to_json(op) for op in request.success],
            "failure": [_txn_op_to_json(op) for op in request.failure],
        }
    if isinstance(request, CompactionRequest):
        return "compact", {"revision": request.revision}
    if isinstance(request, LeaseGrantRequest):
        return "lease_grant", {"TTL": request.ttl, "ID": request.id}
    if isinstance(request, LeaseRevokeRequest):
        return "lease_revoke", {"ID": request.id}
    if isinstance(request, LeaseKeepAliveRequest):
        return "lease_keepalive", {"ID": request.id}
    raise EtcdJsonError("request", f"the history format has no operation for {request.describe()}")


def _compare_to_json(compare: Compare) -> dict[str, Any]:
    operand = compare.operand
    return {
        "key": encode_bytes(compare.key),
        "range_end": encode_bytes(compare.range_end),
        "target": compare.target.name,
        "result": compare.result.name,
        _OPERAND_FIELD[compare.target]: encode_bytes(operand)
        if isinstance(operand, bytes)
        else operand,
    }


def _txn_op_to_json(op: TxnOp) -> dict[str, Any]:
    f, body = request_to_json(op)
    name = {v: k for k, v in _TXN_REQUEST.items()}[f]
    return {name: body}


def response_to_json(response: Response) -> dict[str, Any]:
    """The JSON response (the history's ok value) for a model response."""
    out: dict[str, Any] = {"header": {"revision": response.header.revision}}
    if isinstance(response, RangeResponse):
        out.update(
            kvs=[kv_to_json(kv) for kv in response.kvs], more=response.more, count=response.count
        )
    elif isinstance(response, PutResponse):
        if response.prev_kv is not None:
            out["prev_kv"] = kv_to_json(response.prev_kv)
    elif isinstance(response, DeleteRangeResponse):
        out.update(deleted=response.deleted, prev_kvs=[kv_to_json(kv) for kv in response.prev_kvs])
    elif isinstance(response, TxnResponse):
        out.update(
            succeeded=response.succeeded,
            responses=[_txn_response_to_json(r) for r in response.responses],
        )
    elif isinstance(response, (LeaseGrantResponse, LeaseKeepAliveResponse)):
        out.update(ID=response.id, TTL=response.ttl)
    return out


def _txn_response_to_json(response: TxnOpResponse) -> dict[str, Any]:
    if isinstance(response, RangeResponse):
        return {"response_range": response_to_json(response)}
    if isinstance(response, PutResponse):
        return {"response_put": response_to_json(response)}
    if isinstance(response, DeleteRangeResponse):
        return {"response_delete_range": response_to_json(response)}
    return {"response_txn": response_to_json(response)}

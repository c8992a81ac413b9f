"""The etcd v3 request vocabulary as one table: each model message, its fields with their
etcd v3 names, kinds and defaults; the operations a history and a conformance run carry.

Contract:
- `MESSAGES` maps every model message the vocabulary carries (etcdspec.model.requests)
  to a `Message`: its protobuf name (`etcdserverpb.RangeRequest`, `mvccpb.KeyValue`)
  and its `Field`s in the order a history writes them (etcd's JSON order). A field is
  the model attribute, its etcd v3 name (the JSON key and the protobuf field: `ID` and
  `TTL` for leases), the names also accepted when reading JSON, its `Kind` and, for an
  enum or a nested message, what it holds. A missing field reads as `default`, etcd's
  zero value.
- Fields the model has and history format version 1 does not carry (a range's sort
  order and revision filters) are listed with `carried=False` and the reason: the codecs
  refuse a message that sets one, rather than write it without. `etcd_only` names the
  protobuf fields the model leaves out (`serializable`, `physical`, header ids, ...).
- `OPERATIONS` are the history's operations (`f`), each with its request and response
  types and the gRPC method that serves it; `NOT_IN_HISTORY` the model's requests and
  responses that have no operation yet, with the reason.
- This is plain data, read by the checker's JSON codec (checker/etcd_json.py) and the
  conformance wire codec (conform/wire.py), which generate each message's reader and
  writer from it at import (`generate`): a field is added here, once. It imports no
  protobuf module, nothing of impl/ and nothing of conform/.
"""

from __future__ import annotations

import dataclasses
import enum
import linecache
from dataclasses import dataclass
from typing import Any

from etcdspec.model.requests import (
    AsUser,
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
    LeaseLeasesRequest,
    LeaseLeasesResponse,
    LeaseRevokeRequest,
    LeaseRevokeResponse,
    LeaseTimeToLiveRequest,
    LeaseTimeToLiveResponse,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    ResponseHeader,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
)


class Kind(enum.Enum):
    """What a field holds, and so how each codec writes it."""

    BYTES = "bytes"
    """model bytes; JSON a string, or {"b64": ...} when not UTF-8; protobuf bytes."""
    INT = "int"
    """model int; JSON a number (a decimal string is read too); protobuf int64."""
    BOOL = "bool"
    ENUM = "enum"
    """a member of the model enum `of`; JSON its name; protobuf the number of that name."""
    MESSAGE = "message"
    """one nested message of type `of`; with `optional`, None when absent (and not written)."""
    REPEATED = "repeated"
    """a tuple of nested messages of type `of`; JSON a list."""
    ONE_OF = "one_of"
    """a tuple of ops, each a member of the `Union` `of` (etcd's RequestOp, ResponseOp);
    JSON a list of one-field objects, {"request_put": {...}}."""
    CHOICE = "choice"
    """one value whose etcd field the value of field `selector` picks (Compare's
    target_union: the operand is `version`, `mod_revision`, `value`, ...)."""


SCALARS = frozenset({Kind.BYTES, Kind.INT, Kind.BOOL})
_ZEROS: dict[Kind, Any] = {Kind.BYTES: b"", Kind.INT: 0, Kind.BOOL: False}


@dataclass(frozen=True)
class Choice:
    """One arm of a CHOICE field: when the selector is `when`, the value is field `name`."""

    when: enum.Enum
    name: str
    kind: Kind


@dataclass(frozen=True)
class Union:
    """A protobuf oneof of messages (etcdserverpb.RequestOp: request_range, ...)."""

    etcd: str
    oneof: str
    members: tuple[tuple[type, str], ...]
    """(model type, etcd field name) of each member."""

    def name_of(self, message_type: type) -> str:
        for member, name in self.members:
            if member is message_type:
                return name
        raise KeyError(f"{self.etcd} has no member for {message_type.__name__}")


@dataclass(frozen=True)
class Field:
    """One field of a message: model attribute, etcd v3 name, kind and default."""

    attr: str
    kind: Kind
    of: Any = None
    """ENUM: the model enum; MESSAGE, REPEATED: the model message type; ONE_OF: a Union."""
    name: str = ""
    """The etcd v3 name (JSON and protobuf); the attribute's name when not given."""
    aliases: tuple[str, ...] = ()
    """Other JSON names read (when `name` is missing): `id` for `ID`, ..."""
    optional: bool = False
    choices: tuple[Choice, ...] = ()
    selector: str = ""
    carried: bool = True
    why: str = ""
    """Why a field is not carried (what to do to carry it)."""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.attr)
        if self.kind in (Kind.ENUM, Kind.MESSAGE, Kind.REPEATED, Kind.ONE_OF) and self.of is None:
            raise ValueError(f"field {self.attr}: a {self.kind.value} field needs `of`")
        if self.kind is Kind.CHOICE and not (self.choices and self.selector):
            raise ValueError(f"field {self.attr}: a choice needs `choices` and `selector`")
        if not self.carried and not self.why:
            raise ValueError(f"field {self.attr}: say why it is not carried")

    @property
    def default(self) -> Any:
        """etcd's zero value: what a missing field reads as (for CHOICE, per arm)."""
        if self.kind in _ZEROS:
            return _ZEROS[self.kind]
        if self.kind is Kind.ENUM:
            return self.of(0)
        if self.kind is Kind.MESSAGE:
            return None if self.optional else zero_message(self.of)
        if self.kind in (Kind.REPEATED, Kind.ONE_OF):
            return ()
        return None

    def choice_for(self, selected: enum.Enum) -> Choice:
        for choice in self.choices:
            if choice.when is selected:
                return choice
        raise KeyError(f"field {self.attr} has no choice for {selected!r}")

    def describe(self) -> str:
        kind = self.kind.value
        if self.kind in (Kind.ENUM, Kind.MESSAGE, Kind.REPEATED):
            kind = f"{kind} {self.of.__name__}"
        elif self.kind is Kind.ONE_OF:
            kind = f"{kind} {self.of.etcd}"
        elif self.kind is Kind.CHOICE:
            arms = ", ".join(f"{c.when.name}: {c.name}" for c in self.choices)
            kind = f"{kind} by {self.selector} ({arms})"
        name = self.name if self.name == self.attr else f"{self.name} ({self.attr})"
        extra = " optional" if self.optional else ""
        extra += "" if self.carried else " not carried"
        return f"{name}: {kind}{extra}"


@dataclass(frozen=True)
class Message:
    """A model message and its etcd protobuf message."""

    type: type
    etcd: str
    """The protobuf full name, package.Name."""
    fields: tuple[Field, ...]
    etcd_only: tuple[str, ...] = ()
    """Fields of the protobuf message the model leaves out (written as etcd's zero)."""

    @property
    def carried(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.carried)

    @property
    def uncarried(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if not f.carried)

    def field(self, attr: str) -> Field:
        for field in self.fields:
            if field.attr == attr:
                return field
        raise KeyError(f"{self.type.__name__} has no field {attr!r} in the vocabulary")

    def describe(self) -> str:
        fields = "; ".join(f.describe() for f in self.fields)
        return f"{self.type.__name__} = {self.etcd} {{{fields}}}"


@dataclass(frozen=True)
class Operation:
    """One operation of the history format: its `f`, model types and gRPC method."""

    f: str
    request: type
    response: type
    service: str
    method: str
    streaming: bool = False
    """The method is a bidirectional stream (LeaseKeepAlive): one request, one reply."""


def zero_message(message_type: type) -> Any:
    """The message with every carried field at its default (etcd's empty message); a
    choice takes the zero of the arm its selector's default picks."""
    values: dict[str, Any] = {}
    for field in MESSAGES[message_type].carried:
        if field.kind is Kind.CHOICE:
            values[field.attr] = _ZEROS[field.choice_for(values[field.selector]).kind]
        else:
            values[field.attr] = field.default
    return message_type(**values)


# ---------------------------------------------------------------------------- the table

_NOT_IN_V1 = (
    "history format version 1 has no such field (the recorder never sends it); to carry "
    "it, add it here with the history's schema version raised, and teach the checker"
)


_KEY_VALUE = Message(
    KeyValue,
    "mvccpb.KeyValue",
    (
        Field("key", Kind.BYTES),
        Field("create_revision", Kind.INT),
        Field("mod_revision", Kind.INT),
        Field("version", Kind.INT),
        Field("value", Kind.BYTES),
        Field("lease", Kind.INT),
    ),
)
_EVENT = Message(
    Event,
    "mvccpb.Event",
    (
        Field("type", Kind.ENUM, of=EventType),
        Field("kv", Kind.MESSAGE, of=KeyValue),
        Field("prev_kv", Kind.MESSAGE, of=KeyValue, optional=True),
    ),
)
_HEADER = Message(
    ResponseHeader,
    "etcdserverpb.ResponseHeader",
    (Field("revision", Kind.INT),),
    etcd_only=("cluster_id", "member_id", "raft_term"),
)
_RANGE = Message(
    RangeRequest,
    "etcdserverpb.RangeRequest",
    (
        Field("key", Kind.BYTES),
        Field("range_end", Kind.BYTES),
        Field("limit", Kind.INT),
        Field("revision", Kind.INT),
        Field("keys_only", Kind.BOOL),
        Field("count_only", Kind.BOOL),
        Field("sort_order", Kind.ENUM, of=SortOrder, carried=False, why=_NOT_IN_V1),
        Field("sort_target", Kind.ENUM, of=SortTarget, carried=False, why=_NOT_IN_V1),
        Field("min_mod_revision", Kind.INT, carried=False, why=_NOT_IN_V1),
        Field("max_mod_revision", Kind.INT, carried=False, why=_NOT_IN_V1),
        Field("min_create_revision", Kind.INT, carried=False, why=_NOT_IN_V1),
        Field("max_create_revision", Kind.INT, carried=False, why=_NOT_IN_V1),
    ),
    etcd_only=("serializable",),
)
_PUT = Message(
    PutRequest,
    "etcdserverpb.PutRequest",
    (
        Field("key", Kind.BYTES),
        Field("value", Kind.BYTES),
        Field("lease", Kind.INT),
        Field("prev_kv", Kind.BOOL),
        Field("ignore_value", Kind.BOOL),
        Field("ignore_lease", Kind.BOOL),
    ),
)
_DELETE = Message(
    DeleteRangeRequest,
    "etcdserverpb.DeleteRangeRequest",
    (
        Field("key", Kind.BYTES),
        Field("range_end", Kind.BYTES),
        Field("prev_kv", Kind.BOOL),
    ),
)
_COMPARE = Message(
    Compare,
    "etcdserverpb.Compare",
    (
        Field("key", Kind.BYTES),
        Field("range_end", Kind.BYTES),
        Field("target", Kind.ENUM, of=CompareTarget),
        Field("result", Kind.ENUM, of=CompareResult),
        Field(
            "operand",
            Kind.CHOICE,
            name="target_union",
            selector="target",
            choices=(
                Choice(CompareTarget.VERSION, "version", Kind.INT),
                Choice(CompareTarget.CREATE, "create_revision", Kind.INT),
                Choice(CompareTarget.MOD, "mod_revision", Kind.INT),
                Choice(CompareTarget.VALUE, "value", Kind.BYTES),
                Choice(CompareTarget.LEASE, "lease", Kind.INT),
            ),
        ),
    ),
)
REQUEST_OP = Union(
    "etcdserverpb.RequestOp",
    "request",
    (
        (RangeRequest, "request_range"),
        (PutRequest, "request_put"),
        (DeleteRangeRequest, "request_delete_range"),
        (TxnRequest, "request_txn"),
    ),
)
RESPONSE_OP = Union(
    "etcdserverpb.ResponseOp",
    "response",
    (
        (RangeResponse, "response_range"),
        (PutResponse, "response_put"),
        (DeleteRangeResponse, "response_delete_range"),
        (TxnResponse, "response_txn"),
    ),
)
_TXN = Message(
    TxnRequest,
    "etcdserverpb.TxnRequest",
    (
        Field("compare", Kind.REPEATED, of=Compare),
        Field("success", Kind.ONE_OF, of=REQUEST_OP),
        Field("failure", Kind.ONE_OF, of=REQUEST_OP),
    ),
)
_COMPACTION = Message(
    CompactionRequest,
    "etcdserverpb.CompactionRequest",
    (Field("revision", Kind.INT),),
    etcd_only=("physical",),
)


def _lease_id() -> Field:
    """A lease id: etcd's JSON and protobuf name is ID; histories may write id."""
    return Field("id", Kind.INT, name="ID", aliases=("id",))


def _lease_ttl() -> Field:
    return Field("ttl", Kind.INT, name="TTL", aliases=("ttl",))


_LEASE_GRANT = Message(
    LeaseGrantRequest,
    "etcdserverpb.LeaseGrantRequest",
    (_lease_ttl(), _lease_id()),
)
_LEASE_REVOKE = Message(LeaseRevokeRequest, "etcdserverpb.LeaseRevokeRequest", (_lease_id(),))
_LEASE_KEEPALIVE = Message(
    LeaseKeepAliveRequest,
    "etcdserverpb.LeaseKeepAliveRequest",
    (_lease_id(),),
)
_HEADER_FIELD = Field("header", Kind.MESSAGE, of=ResponseHeader)
_RANGE_RESPONSE = Message(
    RangeResponse,
    "etcdserverpb.RangeResponse",
    (
        _HEADER_FIELD,
        Field("kvs", Kind.REPEATED, of=KeyValue),
        Field("more", Kind.BOOL),
        Field("count", Kind.INT),
    ),
)
_PUT_RESPONSE = Message(
    PutResponse,
    "etcdserverpb.PutResponse",
    (_HEADER_FIELD, Field("prev_kv", Kind.MESSAGE, of=KeyValue, optional=True)),
)
_DELETE_RESPONSE = Message(
    DeleteRangeResponse,
    "etcdserverpb.DeleteRangeResponse",
    (
        _HEADER_FIELD,
        Field("deleted", Kind.INT),
        Field("prev_kvs", Kind.REPEATED, of=KeyValue),
    ),
)
_TXN_RESPONSE = Message(
    TxnResponse,
    "etcdserverpb.TxnResponse",
    (
        _HEADER_FIELD,
        Field("succeeded", Kind.BOOL),
        Field("responses", Kind.ONE_OF, of=RESPONSE_OP),
    ),
)
_COMPACTION_RESPONSE = Message(
    CompactionResponse, "etcdserverpb.CompactionResponse", (_HEADER_FIELD,)
)
_LEASE_GRANT_RESPONSE = Message(
    LeaseGrantResponse,
    "etcdserverpb.LeaseGrantResponse",
    (_HEADER_FIELD, _lease_id(), _lease_ttl()),
    etcd_only=("error",),
)
_LEASE_REVOKE_RESPONSE = Message(
    LeaseRevokeResponse, "etcdserverpb.LeaseRevokeResponse", (_HEADER_FIELD,)
)
_LEASE_KEEPALIVE_RESPONSE = Message(
    LeaseKeepAliveResponse,
    "etcdserverpb.LeaseKeepAliveResponse",
    (_HEADER_FIELD, _lease_id(), _lease_ttl()),
)

MESSAGES: dict[type, Message] = {
    m.type: m
    for m in (
        _KEY_VALUE,
        _EVENT,
        _HEADER,
        _RANGE,
        _PUT,
        _DELETE,
        _COMPARE,
        _TXN,
        _COMPACTION,
        _LEASE_GRANT,
        _LEASE_REVOKE,
        _LEASE_KEEPALIVE,
        _RANGE_RESPONSE,
        _PUT_RESPONSE,
        _DELETE_RESPONSE,
        _TXN_RESPONSE,
        _COMPACTION_RESPONSE,
        _LEASE_GRANT_RESPONSE,
        _LEASE_REVOKE_RESPONSE,
        _LEASE_KEEPALIVE_RESPONSE,
    )
}

OPERATIONS: tuple[Operation, ...] = (
    Operation("range", RangeRequest, RangeResponse, "KV", "Range"),
    Operation("put", PutRequest, PutResponse, "KV", "Put"),
    Operation("delete", DeleteRangeRequest, DeleteRangeResponse, "KV", "DeleteRange"),
    Operation("txn", TxnRequest, TxnResponse, "KV", "Txn"),
    Operation("compact", CompactionRequest, CompactionResponse, "KV", "Compact"),
    Operation("lease_grant", LeaseGrantRequest, LeaseGrantResponse, "Lease", "LeaseGrant"),
    Operation("lease_revoke", LeaseRevokeRequest, LeaseRevokeResponse, "Lease", "LeaseRevoke"),
    Operation(
        "lease_keepalive",
        LeaseKeepAliveRequest,
        LeaseKeepAliveResponse,
        "Lease",
        "LeaseKeepAlive",
        streaming=True,
    ),
)
OPERATION_BY_F: dict[str, Operation] = {op.f: op for op in OPERATIONS}
OPERATION_BY_REQUEST: dict[type, Operation] = {op.request: op for op in OPERATIONS}
OPERATION_BY_RESPONSE: dict[type, Operation] = {op.response: op for op in OPERATIONS}

_NO_OPERATION = (
    "history format version 1 has no operation for it and the checker's etcd model does "
    "not judge it; conformance runs read it unrecorded (conform/initial.py)"
)
NOT_IN_HISTORY: dict[type, str] = {
    AsUser: (
        "not a message: the user a request was made as is the operation's `user` field "
        "(history schema 2); the checker wraps the request in AsUser when it is recorded"
    ),
    LeaseTimeToLiveRequest: _NO_OPERATION,
    LeaseTimeToLiveResponse: _NO_OPERATION,
    LeaseLeasesRequest: _NO_OPERATION,
    LeaseLeasesResponse: _NO_OPERATION,
}


def generate(name: str, lines: list[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """Runs the source the codecs generate from this table (a message's reader or
    writer, as one would write it by hand) in `namespace`, and returns it. The source is
    kept in GENERATED under `name`, and tracebacks show its lines (file <vocabulary NAME>)."""
    source = "\n".join(lines) + "\n"
    filename = f"<vocabulary {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    GENERATED[name] = source
    return namespace


GENERATED: dict[str, str] = {}
"""The source of every generated reader and writer, by name ("json decode KeyValue")."""


def model_fields(message_type: type) -> tuple[str, ...]:
    """The model dataclass's field names, in order (what the table must list)."""
    return tuple(f.name for f in dataclasses.fields(message_type))

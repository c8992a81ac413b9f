"""The etcd v3 wire for conformance runs: the model's requests as protobuf, and protobuf
responses back as the model's responses.

Contract:
- `to_pb(request)` gives the gRPC request message for a model request of one of the
  history's operations (checker/etcd_vocabulary.py: range, put, delete, txn, compact,
  lease grant, revoke, keep-alive); `from_pb(request, message)` gives the model
  response for the reply to it, after checking that a txn reply has the shape of the
  branch it ran (WireError otherwise). `operation_of(request)` says which gRPC method
  serves it.
- Both come from the vocabulary table: each model message is the protobuf message the
  table names, field by field under the table's etcd names (the reader and writer of
  each are generated from its row at import); enums go by name (the protobuf number of
  the model member's name). `message_to_pb` / `message_from_pb` do it for any message
  of the table. A request that sets a field the table does not carry is refused
  (WireError), never sent without it.
- Only the generated protobuf modules (etcdspec.impl.pb.*) are used, as a wire library:
  nothing of the server. Header fields other than revision are dropped (the model does
  not know them); `header_of(message)` keeps them for logs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from etcdspec.checker.etcd_vocabulary import (
    MESSAGES,
    OPERATION_BY_REQUEST,
    RESPONSE_OP,
    Field,
    Kind,
    Message,
    Operation,
    generate,
    model_fields,
)
from etcdspec.impl.pb import kv_pb2, rpc_pb2
from etcdspec.model.requests import (
    Event,
    KeyValue,
    Request,
    Response,
    TxnRequest,
)

_MODULES = {"etcdserverpb": rpc_pb2, "mvccpb": kv_pb2}


class WireError(ValueError):
    """A request the wire cannot carry, or a reply of the wrong shape for its request."""


def pb_class(etcd_name: str) -> Any:
    """The generated protobuf class of a message the table names (package.Name)."""
    package, _, name = etcd_name.partition(".")
    cls = getattr(_MODULES[package], name, None)
    if cls is None or cls.DESCRIPTOR.full_name != etcd_name:
        raise WireError(f"the protobuf modules have no message {etcd_name}")
    return cls


def operation_of(request: Request) -> Operation:
    """The history operation of a request: its gRPC service and method."""
    operation = OPERATION_BY_REQUEST.get(type(request))
    if operation is None:
        raise WireError(f"conformance runs do not send {request.describe()}")
    return operation


# ---------------------------------------------------------------------------- encoding

_ENCODERS: dict[type, Callable[[Any], Any]] = {}


def message_to_pb(message: Any) -> Any:
    """The protobuf message for a model message of the vocabulary table."""
    return _ENCODERS[type(message)](message)


def to_pb(request: Request) -> Any:
    """The protobuf request message for a model request."""
    encode = _REQUEST_ENCODERS.get(type(request))
    if encode is None:
        raise WireError(f"conformance runs do not send {request.describe()}")
    return encode(request)


def _encoder(message: Message) -> Callable[[Any], Any]:
    """The writer of one message kind, generated from its table row: refuse a field
    that is not carried, then the protobuf constructor with every carried field."""
    cls = pb_class(message.etcd)
    namespace: dict[str, Any] = {"cls": cls, "refuse": _refusal(message), "E": _ENCODERS}
    lines = ["def encode(obj):"]
    if message.uncarried:
        namespace.update({f"z_{f.attr}": f.default for f in message.uncarried})
        differs = " or ".join(f"obj.{f.attr} != z_{f.attr}" for f in message.uncarried)
        lines += [f"    if {differs}:", "        refuse(obj)"]
    arguments = [_put_expression(f, cls, namespace) for f in message.carried]
    lines.append(f"    return cls({', '.join(arguments)})")
    encode: Callable[[Any], Any] = generate(
        f"wire encode {message.type.__name__}", lines, namespace
    )["encode"]
    return encode


def _put_expression(field: Field, cls: Any, namespace: dict[str, Any]) -> str:
    """The constructor argument for one field of `obj` (NAME=value)."""
    attr, name, kind = field.attr, field.name, field.kind
    value = f"obj.{attr}"
    if kind in (Kind.BYTES, Kind.INT, Kind.BOOL):
        return f"{name}={value}"
    if kind is Kind.ENUM:
        namespace[f"n_{attr}"] = _enum_numbers(field, cls)
        return f"{name}=n_{attr}[{value}]"
    if kind is Kind.CHOICE:
        namespace[f"a_{attr}"] = {c.when: c.name for c in field.choices}
        return f"**{{a_{attr}[obj.{field.selector}]: {value}}}"
    namespace[f"t_{attr}"] = field.of
    if kind is Kind.MESSAGE:  # None (an absent optional message) leaves it unset
        return f"{name}=None if {value} is None else E[t_{attr}]({value})"
    if kind is Kind.REPEATED:
        return f"{name}=list(map(E[t_{attr}], {value}))"
    assert kind is Kind.ONE_OF, field
    union = pb_class(field.of.etcd)
    names = {member: member_name for member, member_name in field.of.members}
    namespace[f"o_{attr}"] = lambda items: [
        union(**{names[type(item)]: _ENCODERS[type(item)](item)}) for item in items
    ]
    return f"{name}=o_{attr}({value})"


def _refusal(message: Message) -> Callable[[Any], None]:
    """Raises for a request that sets a field the table does not carry."""

    def refuse(obj: Any) -> None:
        for field in message.uncarried:
            if getattr(obj, field.attr) != field.default:
                raise WireError(
                    f"conformance runs cannot send {obj.describe()} ({field.attr}): {field.why}"
                )

    return refuse


def _enum_numbers(field: Field, cls: Any) -> dict[enum.Enum, int]:
    """Model member -> protobuf number, matched by name (WireError if one is missing)."""
    values = cls.DESCRIPTOR.fields_by_name[field.name].enum_type.values_by_name
    missing = [member.name for member in field.of if member.name not in values]
    if missing:
        raise WireError(f"{cls.DESCRIPTOR.full_name}.{field.name} has no {', '.join(missing)}")
    return {member: values[member.name].number for member in field.of}


# ---------------------------------------------------------------------------- decoding

_DECODERS: dict[type, Callable[[Any], Any]] = {}


def message_from_pb(message_type: type, message: Any) -> Any:
    """The model message of `message_type` (a type of the table) for a protobuf message."""
    return _DECODERS[message_type](message)


def from_pb(request: Request, message: Any) -> Response:
    """The model response for the reply `message` to `request`."""
    decode = _RESPONSE_DECODERS.get(type(request))
    if decode is None:
        raise WireError(f"no reply shape for {request.describe()}")
    if type(request) is TxnRequest:
        _check_shape(request, message)
    response: Response = decode(message)
    return response


def _check_shape(request: Request, message: Any) -> None:
    """A txn reply holds one response per op of the branch it ran, each of its op's kind."""
    if not isinstance(request, TxnRequest):
        return
    branch = request.success if message.succeeded else request.failure
    if len(branch) != len(message.responses):
        raise WireError(f"txn reply has {len(message.responses)} responses for {len(branch)} ops")
    for op, reply in zip(branch, message.responses, strict=True):
        name = reply.WhichOneof(RESPONSE_OP.oneof)
        expected = RESPONSE_OP.name_of(OPERATION_BY_REQUEST[type(op)].response)
        if name != expected:
            raise WireError(f"txn op {op.describe()} answered with {name}, expected {expected}")
        _check_shape(op, getattr(reply, name))


def _decoder(message: Message) -> Callable[[Any], Any]:
    """The reader of one message kind, generated from its table row: the model message
    from the protobuf message's fields (by keyword when a choice reads after its selector)."""
    cls = pb_class(message.etcd)
    namespace: dict[str, Any] = {"build": message.type, "D": _DECODERS}
    lines = ["def decode(pb):"]
    arguments = []
    for field in message.carried:
        value = _get_expression(field, cls, namespace)
        if field.kind is Kind.CHOICE or _has_choice(message):
            lines.append(f"    f_{field.attr} = {value}")
            value = f"f_{field.attr}"
        arguments.append(f"{field.attr}={value}" if _by_keyword(message) else value)
    lines.append(f"    return build({', '.join(arguments)})")
    decode: Callable[[Any], Any] = generate(
        f"wire decode {message.type.__name__}", lines, namespace
    )["decode"]
    return decode


def _get_expression(field: Field, cls: Any, namespace: dict[str, Any]) -> str:
    """One field's model value, read from the protobuf message `pb`."""
    attr, name, kind = field.attr, field.name, field.kind
    value = f"pb.{name}"
    if kind in (Kind.BYTES, Kind.INT, Kind.BOOL):
        return value  # protobuf gives bytes, int and bool
    if kind is Kind.ENUM:
        namespace[f"m_{attr}"] = _enum_members(field, cls)
        return f"m_{attr}({value})"
    if kind is Kind.CHOICE:
        namespace[f"a_{attr}"] = {c.when: c.name for c in field.choices}
        return f"getattr(pb, a_{attr}[f_{field.selector}])"
    namespace[f"t_{attr}"] = field.of
    if kind is Kind.MESSAGE:
        decode = f"D[t_{attr}]({value})"
        return f"{decode} if pb.HasField({name!r}) else None" if field.optional else decode
    if kind is Kind.REPEATED:
        return f"tuple(map(D[t_{attr}], {value}))"
    assert kind is Kind.ONE_OF, field
    namespace[f"o_{attr}"] = _one_of_reader(field, cls)
    return f"o_{attr}({value})"


def _enum_members(field: Field, cls: Any) -> Callable[[int], Any]:
    members = {number: member for member, number in _enum_numbers(field, cls).items()}
    where = f"{cls.DESCRIPTOR.full_name}.{field.name}"

    def member_of(number: int) -> Any:
        member = members.get(number)
        if member is None:
            raise WireError(f"{where}: unknown value {number}")
        return member

    return member_of


def _one_of_reader(field: Field, cls: Any) -> Callable[[Any], tuple[Any, ...]]:
    oneof = field.of.oneof
    types = {member_name: member for member, member_name in field.of.members}
    where = f"{cls.DESCRIPTOR.full_name}.{field.name}"

    def read_one_of(items: Any) -> tuple[Any, ...]:
        out = []
        for item in items:
            which = item.WhichOneof(oneof)
            if which is None:
                raise WireError(f"{where}: an op holds nothing")
            out.append(_DECODERS[types[which]](getattr(item, which)))
        return tuple(out)

    return read_one_of


def _has_choice(message: Message) -> bool:
    return any(f.kind is Kind.CHOICE for f in message.carried)


def _by_keyword(message: Message) -> bool:
    """Built by keyword when the carried fields are not the model's first, in order."""
    attrs = tuple(f.attr for f in message.carried)
    return _has_choice(message) or attrs != model_fields(message.type)[: len(attrs)]


def kv_from_pb(kv: Any) -> KeyValue:
    decoded: KeyValue = _DECODERS[KeyValue](kv)
    return decoded


def event_from_pb(event: Any) -> Event:
    decoded: Event = _DECODERS[Event](event)
    return decoded


def header_of(message: Any) -> dict[str, int]:
    """Every header field of a reply (cluster_id, member_id, revision, raft_term)."""
    header = message.header
    return {
        "cluster_id": int(header.cluster_id),
        "member_id": int(header.member_id),
        "revision": int(header.revision),
        "raft_term": int(header.raft_term),
    }


for _message in MESSAGES.values():
    _ENCODERS[_message.type] = _encoder(_message)
    _DECODERS[_message.type] = _decoder(_message)
_REQUEST_ENCODERS = {op.request: _ENCODERS[op.request] for op in OPERATION_BY_REQUEST.values()}
_RESPONSE_DECODERS = {op.request: _DECODERS[op.response] for op in OPERATION_BY_REQUEST.values()}

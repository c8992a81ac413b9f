"""The etcd v3 wire for conformance runs: the model's requests as protobuf, and protobuf
responses back as the model's responses.

Contract:
- `to_pb(request)` gives the gRPC request message for a model request of one of the
  history's operations (checker/etcd_vocabulary.py: range, put, delete, txn, compact,
  lease grant, revoke, keep-alive); `from_pb(request, message)` gives the model
  response for the reply to it, after checking that a txn reply has the shape of the
  branch it ran (WireError otherwise). `operation_of(request)` says which gRPC method
  serves it.
- Both walk the vocabulary table: each model message is the protobuf message the table
  names, field by field under the table's etcd names; enums go by name (the protobuf
  number of the model member's name). `message_to_pb` / `message_from_pb` do it for any
  message of the table. A request that sets a field the table does not carry is refused
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

_Put = Callable[[Any, dict[str, Any]], None]
"""Puts one field of a model message into the protobuf constructor's arguments."""
_ENCODERS: dict[type, Callable[[Any], Any]] = {}


def message_to_pb(message: Any) -> Any:
    """The protobuf message for a model message of the vocabulary table."""
    return _ENCODERS[type(message)](message)


def to_pb(request: Request) -> Any:
    """The protobuf request message for a model request."""
    return _ENCODERS[operation_of(request).request](request)


def _encoder(message: Message) -> Callable[[Any], Any]:
    cls = pb_class(message.etcd)
    puts = tuple(_put(f, cls) for f in message.carried)
    uncarried = tuple((f.attr, f.default, f.why) for f in message.uncarried)

    def encode(obj: Any) -> Any:
        for attr, default, why in uncarried:
            if getattr(obj, attr) != default:
                raise WireError(f"conformance runs cannot send {obj.describe()} ({attr}): {why}")
        arguments: dict[str, Any] = {}
        for put in puts:
            put(obj, arguments)
        return cls(**arguments)

    return encode


def _put(field: Field, cls: Any) -> _Put:
    attr, name, kind = field.attr, field.name, field.kind
    if kind in (Kind.BYTES, Kind.INT, Kind.BOOL):

        def put_scalar(obj: Any, arguments: dict[str, Any]) -> None:
            arguments[name] = getattr(obj, attr)

        return put_scalar
    if kind is Kind.ENUM:
        numbers = _enum_numbers(field, cls)

        def put_enum(obj: Any, arguments: dict[str, Any]) -> None:
            arguments[name] = numbers[getattr(obj, attr)]

        return put_enum
    if kind is Kind.MESSAGE:
        of = field.of

        def put_message(obj: Any, arguments: dict[str, Any]) -> None:
            value = getattr(obj, attr)
            if value is not None:  # only an optional message may be None
                arguments[name] = _ENCODERS[of](value)

        return put_message
    if kind is Kind.REPEATED:
        of = field.of

        def put_repeated(obj: Any, arguments: dict[str, Any]) -> None:
            encode = _ENCODERS[of]
            arguments[name] = [encode(item) for item in getattr(obj, attr)]

        return put_repeated
    if kind is Kind.ONE_OF:
        union = pb_class(field.of.etcd)
        names = {member: member_name for member, member_name in field.of.members}

        def put_one_of(obj: Any, arguments: dict[str, Any]) -> None:
            arguments[name] = [
                union(**{names[type(item)]: _ENCODERS[type(item)](item)})
                for item in getattr(obj, attr)
            ]

        return put_one_of
    if kind is Kind.CHOICE:
        selector = field.selector
        arms = {c.when: c.name for c in field.choices}

        def put_choice(obj: Any, arguments: dict[str, Any]) -> None:
            arguments[arms[getattr(obj, selector)]] = getattr(obj, attr)

        return put_choice
    raise TypeError(f"no protobuf writer for {field.describe()}")


def _enum_numbers(field: Field, cls: Any) -> dict[enum.Enum, int]:
    """Model member -> protobuf number, matched by name (WireError if one is missing)."""
    values = cls.DESCRIPTOR.fields_by_name[field.name].enum_type.values_by_name
    missing = [member.name for member in field.of if member.name not in values]
    if missing:
        raise WireError(f"{cls.DESCRIPTOR.full_name}.{field.name} has no {', '.join(missing)}")
    return {member: values[member.name].number for member in field.of}


# ---------------------------------------------------------------------------- decoding

_Get = Callable[[Any], Any]
"""Gets one field of a model message out of a protobuf message."""
_DECODERS: dict[type, Callable[[Any], Any]] = {}


def message_from_pb(message_type: type, message: Any) -> Any:
    """The model message of `message_type` (a type of the table) for a protobuf message."""
    return _DECODERS[message_type](message)


def from_pb(request: Request, message: Any) -> Response:
    """The model response for the reply `message` to `request`."""
    operation = OPERATION_BY_REQUEST.get(type(request))
    if operation is None:
        raise WireError(f"no reply shape for {request.describe()}")
    _check_shape(request, message)
    response: Response = _DECODERS[operation.response](message)
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
    cls = pb_class(message.etcd)
    build = message.type
    fields = message.carried
    keyword = (
        any(f.kind is Kind.CHOICE for f in fields)
        or tuple(f.attr for f in fields) != model_fields(message.type)[: len(fields)]
    )
    if not keyword:
        gets = tuple(_get(f, cls) for f in fields)

        def decode(pb: Any) -> Any:
            return build(*[get(pb) for get in gets])

        return decode

    # By keyword, in the table's order: a choice reads after the field that selects it.
    steps: tuple[tuple[str, Callable[..., Any], str], ...] = tuple(
        (f.attr, _choice_get(f) if f.kind is Kind.CHOICE else _get(f, cls), f.selector)
        for f in fields
    )

    def decode_by_name(pb: Any) -> Any:
        values: dict[str, Any] = {}
        for attr, get, selector in steps:
            values[attr] = get(pb, values[selector]) if selector else get(pb)
        return build(**values)

    return decode_by_name


def _get(field: Field, cls: Any) -> _Get:
    name, kind = field.name, field.kind
    if kind is Kind.BYTES:
        return lambda pb: bytes(getattr(pb, name))
    if kind is Kind.INT:
        return lambda pb: int(getattr(pb, name))
    if kind is Kind.BOOL:
        return lambda pb: bool(getattr(pb, name))
    if kind is Kind.ENUM:
        members = {number: member for member, number in _enum_numbers(field, cls).items()}

        def get_enum(pb: Any) -> Any:
            number = getattr(pb, name)
            member = members.get(number)
            if member is None:
                raise WireError(f"{cls.DESCRIPTOR.full_name}.{name}: unknown value {number}")
            return member

        return get_enum
    if kind is Kind.MESSAGE:
        of = field.of
        if field.optional:
            return lambda pb: _DECODERS[of](getattr(pb, name)) if pb.HasField(name) else None
        return lambda pb: _DECODERS[of](getattr(pb, name))
    if kind is Kind.REPEATED:
        of = field.of

        def get_repeated(pb: Any) -> tuple[Any, ...]:
            decode = _DECODERS[of]
            return tuple(decode(item) for item in getattr(pb, name))

        return get_repeated
    if kind is Kind.ONE_OF:
        oneof = field.of.oneof
        types = {member_name: member for member, member_name in field.of.members}

        def get_one_of(pb: Any) -> tuple[Any, ...]:
            out = []
            for item in getattr(pb, name):
                which = item.WhichOneof(oneof)
                if which is None:
                    raise WireError(f"{cls.DESCRIPTOR.full_name}.{name}: an op holds nothing")
                out.append(_DECODERS[types[which]](getattr(item, which)))
            return tuple(out)

        return get_one_of
    raise TypeError(f"no protobuf reader for {field.describe()}")


def _choice_get(field: Field) -> Callable[[Any, Any], Any]:
    """Gets a CHOICE field: the arm the already read selector picks."""
    arms = {c.when: (c.name, bytes if c.kind is Kind.BYTES else int) for c in field.choices}

    def get_choice(pb: Any, selected: Any) -> Any:
        arm_name, convert = arms[selected]
        return convert(getattr(pb, arm_name))

    return get_choice


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

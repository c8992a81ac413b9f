"""etcd v3 requests and responses as history JSON, to and from the model's dataclasses.

Contract:
- What is written and read is the vocabulary table's (checker/etcd_vocabulary.py): each
  message's fields under their etcd v3 JSON names, in the table's order. Requests:
  key, range_end, limit, revision, keys_only, count_only, prev_kv, lease, ignore_value,
  ignore_lease; txn compare[] with target (VERSION, CREATE, MOD, VALUE, LEASE), result
  (EQUAL, GREATER, LESS, NOT_EQUAL) and the operand in version, create_revision,
  mod_revision, value or lease; txn ops as request_range, request_put,
  request_delete_range, request_txn. Responses: header.revision; kvs[] with key,
  create_revision, mod_revision, version, value, lease; more, count, deleted, prev_kvs,
  succeeded, responses (response_range, response_put, ...). Leases use ID and TTL
  (etcd's JSON names; id and ttl are read too). Nothing here names a field: the reader
  and writer of each message are generated from its table row at import.
- As in etcd's JSON, a missing field is its zero value, and 64-bit integers may be
  written as decimal strings. Header fields other than revision (cluster_id, member_id,
  raft_term) are accepted and ignored: the model does not know them. An optional
  message (put's prev_kv) is written only when present.
- Keys and values are strings, or {"b64": "..."} for bytes that are not UTF-8.
- Encoding a message that sets a field the history format does not carry (a range's
  sort order, ...) raises EtcdJsonError instead of writing it without; decoding errors
  raise EtcdJsonError naming the field path and what was expected.
- Reading is the checker's hot path, so the generated readers are the code one would
  write by hand (scalars inline; etcd_vocabulary.GENERATED holds it, tracebacks show it). A range,
  put or delete request, a kv and a header are first read in one go (`_Plain`: every
  field present with exactly its JSON type; the field list is the table's), else field
  by field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from etcdspec.checker.etcd_vocabulary import (
    MESSAGES,
    OPERATION_BY_F,
    OPERATIONS,
    SCALARS,
    Field,
    Kind,
    Message,
    generate,
    model_fields,
)
from etcdspec.checker.history import decode_bytes, encode_bytes
from etcdspec.model.requests import (
    DeleteRangeRequest,
    KeyValue,
    PutRequest,
    RangeRequest,
    Request,
    Response,
    ResponseHeader,
)

ETCD_FS = tuple(op.f for op in OPERATIONS)


class EtcdJsonError(ValueError):
    """A request or response that does not decode: the field path and what was wrong."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


# ---------------------------------------------------------------------------- fields


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


# ---------------------------------------------------------------------------- the plain path


class _Plain:
    """A message read in one go when every field is present with exactly its JSON type
    (the common case: our recorder writes every field); `decode` gives None otherwise,
    and the caller takes the careful per-field path (zero values, decimal strings,
    {"b64": ...}, precise errors). With `shared`, equal field values give the same
    immutable message from a small cache: histories repeat their reads and kvs.
    `decode` is generated for the message's fields (a look-up and a type test each,
    inline: no tuple of the values and their types per read, the checker's hot path)."""

    __slots__ = ("build", "cache", "decode", "names", "types")

    def __init__(self, build: Callable[..., Any], shared: bool, label: str, **fields: type) -> None:
        self.build = build
        self.names = tuple(fields)
        self.types = tuple(fields.values())
        self.cache: dict[tuple[Any, ...], Any] | None = {} if shared else None
        self.decode: Callable[[dict[str, Any]], Any] = self._generated(label)

    def _generated(self, label: str) -> Callable[[dict[str, Any]], Any]:
        values = [f"a{i}" for i in range(len(self.names))]
        namespace: dict[str, Any] = {"build": self.build, "miss": self._miss}
        lines = ["def decode(obj):"]
        lines += [
            f"    {v} = obj.get({name!r})" for v, name in zip(values, self.names, strict=True)
        ]
        for i, (v, kind) in enumerate(zip(values, self.types, strict=True)):
            namespace[f"t{i}"] = kind
            lines += [f"    if type({v}) is not t{i}:", "        return None"]
        if self.cache is None:
            lines.append(f"    return build({', '.join(values)})")
        else:
            namespace["cached"] = self.cache.get
            lines += [
                f"    raw = ({', '.join(values)},)",
                "    message = cached(raw)",  # exact types: True is not 1 here
                "    return message if message is not None else miss(raw)",
            ]
        decode: Callable[[dict[str, Any]], Any] = generate(
            f"json plain decode {label}", lines, namespace
        )["decode"]
        return decode

    def _miss(self, raw: tuple[Any, ...]) -> Any:
        """A shared message not in the cache yet: built, and kept."""
        cache = self.cache
        assert cache is not None
        if len(cache) >= _SHARED_MAX:
            cache.clear()
        message = cache[raw] = self.build(*raw)
        return message


_SHARED_MAX = 1 << 16  # messages kept per kind; then the cache starts again
_JSON_TYPES = {Kind.BYTES: str, Kind.INT: int, Kind.BOOL: bool}


def _plain(message_type: type, shared: bool) -> _Plain:
    """The plain path of a message whose carried fields are all scalars, from the table."""
    message = MESSAGES[message_type]
    fields = message.carried
    other = [f.describe() for f in fields if f.kind not in SCALARS]
    if other:
        raise TypeError(
            f"{message_type.__name__} has fields the plain path cannot read ({', '.join(other)}): "
            "take it out of _PLAIN or teach _Plain their kind"
        )
    if tuple(f.attr for f in fields) != model_fields(message_type)[: len(fields)]:
        raise TypeError(
            f"{message_type.__name__}: the plain path builds positionally, so the table must "
            "list its carried fields first and in the model's order"
        )
    build = _builder(message_type, fields)
    types = {f.name: _JSON_TYPES[f.kind] for f in fields}
    return _Plain(build, shared, message_type.__name__, **types)


def _builder(message_type: type, fields: tuple[Field, ...]) -> Callable[..., Any]:
    """The message from its plain JSON values in the table's order (strings encoded)."""
    values = [f"a{i}" for i in range(len(fields))]
    arguments = [
        f"a{i}.encode()" if f.kind is Kind.BYTES else f"a{i}" for i, f in enumerate(fields)
    ]
    lines = [f"def build({', '.join(values)}):", f"    return cls({', '.join(arguments)})"]
    namespace = {"cls": message_type}
    build: Callable[..., Any] = generate(f"json plain {message_type.__name__}", lines, namespace)[
        "build"
    ]
    return build


# (message type, whether equal reads share one message): range and delete requests and
# kvs repeat in histories; puts carry fresh values.
_PLAIN: dict[type, _Plain] = {
    RangeRequest: _plain(RangeRequest, True),
    PutRequest: _plain(PutRequest, False),
    DeleteRangeRequest: _plain(DeleteRangeRequest, True),
    KeyValue: _plain(KeyValue, True),
    ResponseHeader: _plain(ResponseHeader, False),
}
_PLAIN_KV = _PLAIN[KeyValue]


# ---------------------------------------------------------------------------- decoding

_Read = Callable[[dict[str, Any], str], Any]
"""Reads one field out of a JSON object, given the object's path (for errors)."""
_Decode = Callable[[Any, str], Any]
"""Reads one message from a JSON value at a path."""

_DECODERS: dict[type, _Decode] = {}


def message_from_json(message_type: type, value: Any, path: str = "value") -> Any:
    """The model message of `message_type` (a type of the vocabulary table) from JSON."""
    return _DECODERS[message_type](value, path)


def _decoder(message: Message, plain: bool = True) -> _Decode:
    """The reader of one message kind, generated from its table row: the plain path
    first, then field by field, scalars inline (the code one would write by hand; the
    history's hot path). `plain=False` leaves the plain path out (for tests)."""
    fast = _PLAIN.get(message.type) if plain else None
    fields = message.carried
    namespace: dict[str, Any] = {
        "as_object": as_object,
        "field_bool": field_bool,
        "field_bytes": field_bytes,
        "field_int": field_int,
        "build": message.type,
    }
    lines = [
        "def decode(value, path):",
        "    obj = value if type(value) is dict else as_object(value, path)",
    ]
    if fast is not None:
        namespace["plain"] = fast.decode
        lines += ["    found = plain(obj)", "    if found is not None:", "        return found"]
    for field in fields:
        lines += [f"    {line}" for line in _read_lines(field, namespace)]
    keyword = _by_keyword(message)
    arguments = ", ".join(f"{f.attr}=f_{f.attr}" if keyword else f"f_{f.attr}" for f in fields)
    lines.append(f"    return build({arguments})")
    decode: _Decode = generate(f"json decode {message.type.__name__}", lines, namespace)["decode"]
    return decode


def _read_lines(field: Field, namespace: dict[str, Any]) -> list[str]:
    """Statements that set f_<attr> from `obj` (the JSON object) at `path`."""
    name, target = repr(field.name), f"f_{field.attr}"
    kind = field.kind
    if kind is Kind.BYTES:
        return [
            f"v = obj.get({name})",
            f"{target} = v.encode() if type(v) is str else field_bytes(obj, {name}, path)",
        ]
    if kind is Kind.INT:
        aliases = "".join(f", {alias!r}" for alias in field.aliases)
        return [
            f"v = obj.get({name})",
            f"{target} = v if type(v) is int else field_int(obj, {name}, path{aliases})",
        ]
    if kind is Kind.BOOL:
        return [
            f"v = obj.get({name}, False)",
            f"{target} = v if v is True or v is False else field_bool(obj, {name}, path)",
        ]
    reader = f"r_{field.attr}"
    if kind is Kind.CHOICE:
        namespace[reader] = _choice_reader(field)
        return [f"{target} = {reader}(obj, path, f_{field.selector})"]
    namespace[reader] = _reader(field)
    fast = _PLAIN.get(field.of) if kind is Kind.MESSAGE and not field.optional else None
    if fast is None:
        return [f"{target} = {reader}(obj, path)"]
    namespace[f"p_{field.attr}"] = fast.decode
    return [  # a nested message read plainly (a response's header) without a call more
        f"v = obj.get({name})",
        f"{target} = p_{field.attr}(v) if type(v) is dict else None",
        f"if {target} is None:",
        f"    {target} = {reader}(obj, path)",
    ]


def _by_keyword(message: Message) -> bool:
    """Whether a message is built by keyword: when its carried fields are not the first
    of the model's, in order, or a choice (whose selector reads first) is among them."""
    attrs = tuple(f.attr for f in message.carried)
    choice = any(f.kind is Kind.CHOICE for f in message.carried)
    return choice or attrs != model_fields(message.type)[: len(attrs)]


def _reader(field: Field) -> _Read:
    """A field's reader as a function, for the kinds the generated code does not inline."""
    name = field.name
    kind = field.kind
    if kind is Kind.BYTES:
        return lambda obj, path: field_bytes(obj, name, path)
    if kind is Kind.BOOL:
        return lambda obj, path: field_bool(obj, name, path)
    if kind is Kind.INT:
        aliases = field.aliases
        return lambda obj, path: field_int(obj, name, path, *aliases)
    if kind is Kind.ENUM:
        return _enum_reader(field)
    if kind is Kind.MESSAGE:
        return _message_reader(field)
    if kind is Kind.REPEATED:
        return _repeated_reader(field)
    if kind is Kind.ONE_OF:
        return _one_of_reader(field)
    raise TypeError(f"no JSON reader for {field.describe()}")


def _enum_reader(field: Field) -> _Read:
    name, members = field.name, dict(field.of.__members__)
    zero = field.default.name
    choices = " ".join(members)

    def read_enum(obj: dict[str, Any], path: str) -> Any:
        text = str(obj.get(name, zero))
        member = members.get(text)
        if member is None:
            raise EtcdJsonError(f"{path}.{name}", f"unknown {name} {text!r}; one of {choices}")
        return member

    return read_enum


def _message_reader(field: Field) -> _Read:
    name, of, optional = field.name, field.of, field.optional

    def read_message(obj: dict[str, Any], path: str) -> Any:
        value = obj.get(name)
        if optional and not value:  # absent, null or {}: no message
            return None
        return _DECODERS[of](value, f"{path}.{name}")

    return read_message


def _repeated_reader(field: Field) -> _Read:
    name, of = field.name, field.of
    plain = _PLAIN.get(of)
    plain_decode = plain.decode if plain is not None else None

    def read_repeated(obj: dict[str, Any], path: str) -> tuple[Any, ...]:
        """The list in field `name`, each item read plainly when it can be."""
        items = field_list(obj, name, path)
        decode = _DECODERS[of]
        out = []
        for i, item in enumerate(items):
            found = plain_decode(item) if plain_decode is not None and type(item) is dict else None
            out.append(found if found is not None else decode(item, f"{path}.{name}[{i}]"))
        return tuple(out)

    return read_repeated


def _one_of_reader(field: Field) -> _Read:
    name, members = field.name, field.of.members
    names = tuple(member_name for _, member_name in members)
    types = {member_name: member for member, member_name in members}
    expected = f"expected exactly one of {', '.join(names)}"

    def read_one_of(obj: dict[str, Any], path: str) -> tuple[Any, ...]:
        out = []
        for i, item in enumerate(field_list(obj, name, path)):
            if type(item) is dict and len(item) == 1:  # the common case: {member: op}
                for member_name, value in item.items():
                    member = types.get(member_name)
                    if member is not None:
                        out.append(_decoded(_DECODERS[member], value, path, name, i, member_name))
                        break
                else:
                    raise EtcdJsonError(f"{path}.{name}[{i}]", expected)
                continue
            where = f"{path}.{name}[{i}]"
            op = as_object(item, where)
            found = [member_name for member_name in names if member_name in op]
            if len(found) != 1:
                raise EtcdJsonError(where, expected)
            out.append(_DECODERS[types[found[0]]](op[found[0]], f"{where}.{found[0]}"))
        return tuple(out)

    return read_one_of


_UNNAMED = "<unnamed>"  # the path a nested message is first read at: errors read it again


def _decoded(decode: _Decode, value: Any, path: str, name: str, i: int, member: str) -> Any:
    """`decode(value, path.name[i].member)`, with the path written out only when
    decoding fails: read again at its path, the message raises the same error, naming
    it (the readers are deterministic; a path is read only for an error's text)."""
    try:
        return decode(value, _UNNAMED)
    except EtcdJsonError:  # the one error whose text names the path
        decode(value, f"{path}.{name}[{i}].{member}")
        raise


def _choice_reader(field: Field) -> Callable[[dict[str, Any], str, Any], Any]:
    arms = {c.when: _reader(Field(field.attr, c.kind, name=c.name)) for c in field.choices}

    def read_choice(obj: dict[str, Any], path: str, selected: Any) -> Any:
        return arms[selected](obj, path)

    return read_choice


def request_from_json(f: str, value: Any, path: str = "value") -> Request:
    """The model request for operation `f` with JSON request `value`."""
    plain = _REQUEST_PLAIN.get(f)
    if plain is not None and type(value) is dict:  # the common case, without a call more
        found: Request | None = plain(value)
        if found is not None:
            return found
    decode = _REQUEST_DECODERS.get(f)
    if decode is None:
        raise EtcdJsonError("f", f"the etcd model has {', '.join(ETCD_FS)}, not {f!r}")
    request: Request = decode(value, path)
    return request


def response_from_json(f: str, value: Any, path: str = "value") -> Response:
    """The model response for operation `f` with JSON response `value`."""
    decode = _RESPONSE_DECODERS.get(f)
    if decode is None:
        raise EtcdJsonError("f", f"the etcd model has {', '.join(ETCD_FS)}, not {f!r}")
    response: Response = decode(value, path)
    return response


def plain_request_reader(f: str) -> Callable[[dict[str, Any]], Request | None] | None:
    """The plain path of operation `f`'s request (`_Plain`: the request, or None when
    the JSON object is not plain), or None when `f` has none. What `request_from_json`
    tries first; for loops that decode the common shapes inline."""
    return _REQUEST_PLAIN.get(f)


def response_reader(f: str) -> Callable[[Any, str], Response]:
    """`response_from_json` for operation `f` (a KeyError for an unknown f), bound once."""
    return _RESPONSE_DECODERS[f]


def kv_from_json(value: Any, path: str) -> KeyValue:
    kv: KeyValue = _decode_kv(value, path)
    return kv


def header_revision(value: Any) -> int | None:
    """The response's header.revision, or None when it is not recorded."""
    if not isinstance(value, dict) or not isinstance(value.get("header"), dict):
        return None
    if "revision" not in value["header"]:
        return None
    return field_int(value["header"], "revision", "value.header")


# ---------------------------------------------------------------------------- encoding

_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def message_to_json(message: Any) -> dict[str, Any]:
    """The JSON object of a model message (a type of the vocabulary table)."""
    return _ENCODERS[type(message)](message)


def _encoder(message: Message) -> Callable[[Any], dict[str, Any]]:
    """The writer of one message kind, generated from its table row: refuse a field
    that is not carried, then one JSON object in the table's order."""
    namespace: dict[str, Any] = {"encode_bytes": encode_bytes, "refuse": _refusal(message)}
    lines = ["def encode(obj):"]
    uncarried = message.uncarried
    if uncarried:
        namespace.update({f"z_{f.attr}": f.default for f in uncarried})
        differs = " or ".join(f"obj.{f.attr} != z_{f.attr}" for f in uncarried)
        lines += [f"    if {differs}:", "        refuse(obj)"]
    literal: list[str] = []  # "name": value, up to the first field that may be left out
    after: list[str] = []
    for field in message.carried:
        value = _write_expression(field, namespace)
        if field.optional or field.kind is Kind.CHOICE:
            after.append(f"    {value}")
        elif after:
            after.append(f"    out[{field.name!r}] = {value}")
        else:
            literal.append(f"{field.name!r}: {value}")
    lines.append(f"    out = {{{', '.join(literal)}}}")
    lines += after
    lines.append("    return out")
    encode: Callable[[Any], dict[str, Any]] = generate(
        f"json encode {message.type.__name__}", lines, namespace
    )["encode"]
    return encode


def _refusal(message: Message) -> Callable[[Any], None]:
    """Raises for a message that sets a field the history format does not carry."""

    def refuse(obj: Any) -> None:
        for field in message.uncarried:
            if getattr(obj, field.attr) != field.default:
                raise EtcdJsonError(
                    "request",
                    f"{obj.describe()} sets {message.type.__name__}.{field.attr}, which is "
                    f"not carried: {field.why}",
                )

    return refuse


def _write_expression(field: Field, namespace: dict[str, Any]) -> str:
    """The JSON value of field `field` of `obj`, as an expression; for a field that may
    be left out (an optional message, a choice), a statement that sets it in `out`."""
    value = f"obj.{field.attr}"
    kind = field.kind
    if kind is Kind.BYTES:
        return f"encode_bytes({value})"
    if kind in (Kind.INT, Kind.BOOL):
        return value
    if kind is Kind.ENUM:
        return f"{value}.name"
    writer = f"w_{field.attr}"
    namespace[writer] = _writer(field)
    if kind is Kind.CHOICE:
        return f"{writer}(obj, out)"
    if field.optional:
        return f"if {value} is not None: out[{field.name!r}] = {writer}({value})"
    return f"{writer}({value})"


def _writer(field: Field) -> Callable[..., Any]:
    """A nested field's writer (a message, a list, ops, a choice) as a function."""
    kind = field.kind
    if kind is Kind.MESSAGE:
        of = field.of
        return lambda value: _ENCODERS[of](value)
    if kind is Kind.REPEATED:
        of = field.of

        def write_repeated(items: tuple[Any, ...]) -> list[dict[str, Any]]:
            encode = _ENCODERS[of]
            return [encode(item) for item in items]

        return write_repeated
    if kind is Kind.ONE_OF:
        names = {member: member_name for member, member_name in field.of.members}

        def write_one_of(items: tuple[Any, ...]) -> list[dict[str, Any]]:
            return [{names[type(item)]: _ENCODERS[type(item)](item)} for item in items]

        return write_one_of
    if kind is Kind.CHOICE:
        attr, selector = field.attr, field.selector
        arms = {c.when: (c.name, c.kind) for c in field.choices}

        def write_choice(obj: Any, out: dict[str, Any]) -> None:
            arm_name, arm_kind = arms[getattr(obj, selector)]
            value = getattr(obj, attr)
            out[arm_name] = encode_bytes(value) if arm_kind is Kind.BYTES else value

        return write_choice
    raise TypeError(f"no JSON writer for {field.describe()}")


def kv_to_json(kv: KeyValue) -> dict[str, Any]:
    return _encode_kv(kv)


def request_to_json(request: Request) -> tuple[str, dict[str, Any]]:
    """(f, JSON request) for a model request (the history's invoke value)."""
    found = _REQUEST_ENCODERS.get(type(request))
    if found is None:
        raise EtcdJsonError(
            "request", f"the history format has no operation for {request.describe()}"
        )
    f, encode = found
    return f, encode(request)


def response_to_json(response: Response) -> dict[str, Any]:
    """The JSON response (the history's ok value) for a model response."""
    encode = _RESPONSE_ENCODERS.get(type(response))
    if encode is None:
        raise EtcdJsonError(
            "response", f"the history format has no operation for {response.describe()}"
        )
    return encode(response)


for _message in MESSAGES.values():
    _DECODERS[_message.type] = _decoder(_message)
    _ENCODERS[_message.type] = _encoder(_message)
_REQUEST_DECODERS = {f: _DECODERS[op.request] for f, op in OPERATION_BY_F.items()}
_RESPONSE_DECODERS = {f: _DECODERS[op.response] for f, op in OPERATION_BY_F.items()}
_REQUEST_ENCODERS = {op.request: (op.f, _ENCODERS[op.request]) for op in OPERATIONS}
_RESPONSE_ENCODERS = {op.response: _ENCODERS[op.response] for op in OPERATIONS}
_REQUEST_PLAIN = {
    f: _PLAIN[op.request].decode for f, op in OPERATION_BY_F.items() if op.request in _PLAIN
}
_decode_kv = _DECODERS[KeyValue]
_encode_kv = _ENCODERS[KeyValue]

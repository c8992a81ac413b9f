"""The one table of the etcd request vocabulary (checker/etcd_vocabulary.py) and the two
codecs that walk it: the history's JSON (checker/etcd_json.py) and the conformance wire
(conform/wire.py).

- The table cannot fall behind: every field of every model message is listed, with the
  kind its annotation says and the model's default; every model message and request or
  response kind is in the table or named as outside the history; every field agrees
  with etcd's protobuf message, and every protobuf field is either mapped or named as
  one the model leaves out.
- Driven by the table: every message kind, and every operation's request and response,
  goes model -> JSON text -> model and model -> protobuf bytes -> model unchanged.
- A golden table pins the JSON itself (field names, order, b64, omitted prev_kv): it
  was written by the hand-written codec this table replaced.
- A field the history format does not carry is refused by both codecs; the plain
  reading path reads what the careful path reads; the watch checker's own event JSON
  agrees with the table's.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from etcdspec.checker import etcd_json
from etcdspec.checker.etcd_json import (
    EtcdJsonError,
    message_from_json,
    message_to_json,
    request_from_json,
    request_to_json,
    response_from_json,
    response_to_json,
)
from etcdspec.checker.etcd_vocabulary import (
    MESSAGES,
    NOT_IN_HISTORY,
    OPERATION_BY_RESPONSE,
    OPERATIONS,
    Field,
    Kind,
    Union,
    model_fields,
    zero_message,
)
from etcdspec.checker.watch_checks import watch_response_from_json, watch_response_to_json
from etcdspec.conform.wire import (
    WireError,
    from_pb,
    message_from_pb,
    message_to_pb,
    pb_class,
    to_pb,
)
from etcdspec.model import hypothesis_store, requests
from etcdspec.model.requests import (
    RANGE_END_ALL,
    CompactionRequest,
    CompactionResponse,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    Event,
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
    ResponseHeader,
    SortOrder,
    TxnRequest,
    TxnResponse,
)
from etcdspec.model.watch import WatchResponse

# ---------------------------------------------------------------------------- strategies
# Built from the table itself: a field the table gains is generated without a change here.

_BYTES = st.one_of(
    st.sampled_from((*hypothesis_store.KEYS, *hypothesis_store.VALUES, b"", RANGE_END_ALL)),
    st.binary(max_size=4),  # mostly not UTF-8: written {"b64": ...}
)
_INTS = st.one_of(st.integers(0, 10), st.integers(-(2**63), 2**63 - 1))
_SCALARS: dict[Kind, st.SearchStrategy[Any]] = {
    Kind.BYTES: _BYTES,
    Kind.INT: _INTS,
    Kind.BOOL: st.booleans(),
}
_NESTING = 2  # txns within txns, this deep
_CACHE: dict[tuple[type, int], st.SearchStrategy[Any]] = {}


def message_of(message_type: type, depth: int = 0) -> st.SearchStrategy[Any]:
    """Any message of a table type, with every carried field drawn by its kind."""
    key = (message_type, depth)
    if key not in _CACHE:
        _CACHE[key] = st.deferred(lambda: _build(message_type, depth))
    return _CACHE[key]


def _build(message_type: type, depth: int) -> st.SearchStrategy[Any]:
    fields = MESSAGES[message_type].carried
    plain = {f.attr: _field_strategy(f, depth) for f in fields if f.kind is not Kind.CHOICE}
    choices = [f for f in fields if f.kind is Kind.CHOICE]
    if not choices:
        return st.builds(message_type, **plain)
    (choice,) = choices  # one per message, as in etcd's Compare
    return st.sampled_from(choice.choices).flatmap(
        lambda arm: st.builds(
            message_type,
            **{**plain, choice.selector: st.just(arm.when), choice.attr: _SCALARS[arm.kind]},
        )
    )


def _field_strategy(field: Field, depth: int) -> st.SearchStrategy[Any]:
    if field.kind in _SCALARS:
        return _SCALARS[field.kind]
    if field.kind is Kind.ENUM:
        return st.sampled_from(field.of)
    if field.kind is Kind.MESSAGE:
        nested = message_of(field.of, depth)
        return st.none() | nested if field.optional else nested
    if field.kind is Kind.REPEATED:
        return st.lists(message_of(field.of, depth), max_size=3).map(tuple)
    assert field.kind is Kind.ONE_OF, field
    members = [
        message_of(member, depth + 1)
        for member, _ in field.of.members
        if depth < _NESTING or not _nests(member)
    ]
    return st.lists(st.one_of(members), max_size=3).map(tuple)


def _nests(message_type: type) -> bool:
    return any(f.kind is Kind.ONE_OF for f in MESSAGES[message_type].fields)


def requests_and_responses() -> st.SearchStrategy[tuple[Any, Any]]:
    """(request, response) of one operation: not an answer to it, just both kinds."""
    return st.one_of(
        [st.tuples(message_of(op.request), message_of(op.response)) for op in OPERATIONS]
    )


def request_for(response: Any) -> Any:
    """A request whose reply has the shape of `response` (txns: the branch that ran)."""
    request_type = OPERATION_BY_RESPONSE[type(response)].request
    if request_type is TxnRequest:
        branch = tuple(request_for(r) for r in response.responses)
        other = (RangeRequest(b"other"),)
        if response.succeeded:
            return TxnRequest(success=branch, failure=other)
        return TxnRequest(success=other, failure=branch)
    return {
        RangeRequest: RangeRequest(b"k"),
        PutRequest: PutRequest(b"k"),
        DeleteRangeRequest: DeleteRangeRequest(b"k"),
        CompactionRequest: CompactionRequest(1),
        LeaseGrantRequest: LeaseGrantRequest(5),
        LeaseRevokeRequest: LeaseRevokeRequest(1),
        LeaseKeepAliveRequest: LeaseKeepAliveRequest(1),
    }[request_type]


def _through_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _through_bytes(message: Any) -> Any:
    return type(message).FromString(message.SerializeToString())


# ---------------------------------------------------------------------------- the table is whole

TABLE_TYPES = sorted(MESSAGES, key=lambda t: t.__name__)


@pytest.mark.parametrize("message_type", TABLE_TYPES, ids=lambda t: t.__name__)
def test_table_lists_every_field_the_model_has(message_type: type) -> None:
    listed = [f.attr for f in MESSAGES[message_type].fields]
    assert sorted(listed) == sorted(model_fields(message_type)), (
        f"{message_type.__name__}: add the missing fields to checker/etcd_vocabulary.py "
        "(carried=False with a reason if the history format does not carry them)"
    )
    names = [f.name for f in MESSAGES[message_type].fields]
    assert len(set(names)) == len(names)


def _model_messages() -> set[type]:
    return {
        value
        for value in vars(requests).values()
        if dataclasses.is_dataclass(value)
        and isinstance(value, type)
        and value.__module__ == requests.__name__
    }


def test_every_model_message_is_in_the_table_or_named_outside_the_history() -> None:
    missing = _model_messages() - set(MESSAGES) - set(NOT_IN_HISTORY)
    assert not missing, f"not in the vocabulary table: {sorted(t.__name__ for t in missing)}"
    assert not set(MESSAGES) & set(NOT_IN_HISTORY)


def test_every_request_and_response_kind_is_an_operation_or_named_outside_the_history() -> None:
    operations = {op.request for op in OPERATIONS} | {op.response for op in OPERATIONS}
    for kind in (*typing.get_args(requests.Request), *typing.get_args(requests.Response)):
        assert kind in operations or kind in NOT_IN_HISTORY, kind.__name__
    assert len({op.f for op in OPERATIONS}) == len(OPERATIONS)


_PYTHON = {Kind.BYTES: bytes, Kind.INT: int, Kind.BOOL: bool}


def _annotation(field: Field) -> Any:
    """The model annotation a field of this kind must have (normalized, as `_norm`)."""
    if field.kind in _PYTHON:
        return _PYTHON[field.kind]
    if field.kind is Kind.ENUM:
        return field.of
    if field.kind is Kind.MESSAGE:
        return frozenset({field.of, type(None)}) if field.optional else field.of
    if field.kind is Kind.REPEATED:
        return ("tuple", (field.of, ...))
    if field.kind is Kind.ONE_OF:
        return ("tuple", (frozenset(member for member, _ in field.of.members), ...))
    return frozenset(_PYTHON[choice.kind] for choice in field.choices)


def _norm(hint: Any) -> Any:
    """A type hint as plain data: unions as sets, tuple[X, ...] as ("tuple", (X, ...))."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return frozenset(_norm(arg) for arg in typing.get_args(hint))
    if origin is tuple:
        return ("tuple", tuple(_norm(arg) for arg in typing.get_args(hint)))
    return hint


@pytest.mark.parametrize("message_type", TABLE_TYPES, ids=lambda t: t.__name__)
def test_each_field_kind_is_what_the_model_annotates(message_type: type) -> None:
    hints = typing.get_type_hints(message_type)
    for field in MESSAGES[message_type].fields:
        assert _norm(hints[field.attr]) == _annotation(field), field.describe()


@pytest.mark.parametrize("message_type", TABLE_TYPES, ids=lambda t: t.__name__)
def test_each_default_is_the_models(message_type: type) -> None:
    declared = {f.name: f.default for f in dataclasses.fields(message_type)}
    for field in MESSAGES[message_type].fields:
        if declared.get(field.attr, dataclasses.MISSING) is not dataclasses.MISSING:
            assert field.default == declared[field.attr], field.describe()


_PB_TYPES = {Kind.BYTES: 12, Kind.INT: 3, Kind.BOOL: 8, Kind.ENUM: 14}  # FieldDescriptor.TYPE_*
_PB_MESSAGE = 11


@pytest.mark.parametrize("message_type", TABLE_TYPES, ids=lambda t: t.__name__)
def test_table_agrees_with_etcds_protobuf(message_type: type) -> None:
    message = MESSAGES[message_type]
    descriptor = pb_class(message.etcd).DESCRIPTOR
    by_name = descriptor.fields_by_name
    mapped = set(message.etcd_only)
    for field in message.fields:
        if field.kind is Kind.CHOICE:
            oneof = descriptor.oneofs_by_name[field.name]
            arms = {c.name: c.kind for c in field.choices}
            assert {f.name for f in oneof.fields} == set(arms)
            assert all(by_name[name].type == _PB_TYPES[kind] for name, kind in arms.items())
            mapped |= set(arms)
            continue
        pb = by_name[field.name]
        mapped.add(field.name)
        repeated = field.kind in (Kind.REPEATED, Kind.ONE_OF)
        assert pb.is_repeated == repeated, field.describe()
        if field.kind in _PB_TYPES:
            assert pb.type == _PB_TYPES[field.kind], field.describe()
        else:
            assert pb.type == _PB_MESSAGE, field.describe()
            nested = field.of.etcd if isinstance(field.of, Union) else MESSAGES[field.of].etcd
            assert pb.message_type.full_name == nested, field.describe()
        if field.kind is Kind.ENUM:
            assert {m.name: m.value for m in field.of} == {
                v.name: v.number for v in pb.enum_type.values
            }
        if field.kind is Kind.ONE_OF:
            oneof = pb.message_type.oneofs_by_name[field.of.oneof]
            assert {f.name for f in oneof.fields} == {name for _, name in field.of.members}
    assert set(by_name) == mapped, f"{message.etcd}: fields neither mapped nor etcd_only"


# ---------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("message_type", TABLE_TYPES, ids=lambda t: t.__name__)
@settings(max_examples=60)
@given(data=st.data())
def test_every_message_round_trips_through_json_and_protobuf(
    message_type: type, data: st.DataObject
) -> None:
    value = data.draw(message_of(message_type))
    assert message_from_json(message_type, _through_json(message_to_json(value))) == value
    assert message_from_pb(message_type, _through_bytes(message_to_pb(value))) == value


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.f)
@settings(max_examples=60)
@given(data=st.data())
def test_every_operation_round_trips_as_the_history_and_the_recorder_carry_it(
    operation: Any, data: st.DataObject
) -> None:
    request = data.draw(message_of(operation.request))
    f, body = request_to_json(request)
    assert f == operation.f
    assert request_from_json(f, _through_json(body)) == request
    assert message_from_pb(operation.request, _through_bytes(to_pb(request))) == request

    response = data.draw(message_of(operation.response))
    assert response_from_json(f, _through_json(response_to_json(response))) == response
    reply = _through_bytes(message_to_pb(response))
    assert from_pb(request_for(response), reply) == response


@settings(max_examples=100)
@given(hypothesis_store.txns())
def test_the_store_machines_txns_round_trip(txn: TxnRequest) -> None:
    f, body = request_to_json(txn)
    assert request_from_json(f, _through_json(body)) == txn
    assert message_from_pb(TxnRequest, _through_bytes(to_pb(txn))) == txn


KV = KeyValue(b"k", 2, 4, 3, b"v", 9)
H = ResponseHeader(7)
# (model value, its JSON as the hand-written codec wrote it, compact separators)
GOLDEN: list[tuple[Any, str]] = [
    (
        RangeRequest(b"a", b"c", limit=2, revision=3, keys_only=True),
        '{"key":"a","range_end":"c","limit":2,"revision":3,"keys_only":true,"count_only":false}',
    ),
    (
        PutRequest(b"k", b"\xff\x00", lease=5, prev_kv=True, ignore_lease=True),
        '{"key":"k","value":{"b64":"/wA="},"lease":5,"prev_kv":true,"ignore_value":false,'
        '"ignore_lease":true}',
    ),
    (
        DeleteRangeRequest(b"a", RANGE_END_ALL, prev_kv=True),
        '{"key":"a","range_end":"\\u0000","prev_kv":true}',
    ),
    (
        TxnRequest(
            compare=(
                Compare(b"k", CompareTarget.MOD, CompareResult.LESS, 3),
                Compare(b"k", CompareTarget.VALUE, CompareResult.NOT_EQUAL, b"x", b"z"),
            ),
            success=(PutRequest(b"k", b"1"), TxnRequest(failure=(DeleteRangeRequest(b"k"),))),
            failure=(RangeRequest(b"k"),),
        ),
        '{"compare":[{"key":"k","range_end":"","target":"MOD","result":"LESS","mod_revision":3},'
        '{"key":"k","range_end":"z","target":"VALUE","result":"NOT_EQUAL","value":"x"}],'
        '"success":[{"request_put":{"key":"k","value":"1","lease":0,"prev_kv":false,'
        '"ignore_value":false,"ignore_lease":false}},{"request_txn":{"compare":[],"success":[],'
        '"failure":[{"request_delete_range":{"key":"k","range_end":"","prev_kv":false}}]}}],'
        '"failure":[{"request_range":{"key":"k","range_end":"","limit":0,"revision":0,'
        '"keys_only":false,"count_only":false}}]}',
    ),
    (CompactionRequest(4), '{"revision":4}'),
    (LeaseGrantRequest(10, 7), '{"TTL":10,"ID":7}'),
    (LeaseRevokeRequest(7), '{"ID":7}'),
    (LeaseKeepAliveRequest(-7), '{"ID":-7}'),
    (
        RangeResponse(H, (KV,), more=True, count=3),
        '{"header":{"revision":7},"kvs":[{"key":"k","create_revision":2,"mod_revision":4,'
        '"version":3,"value":"v","lease":9}],"more":true,"count":3}',
    ),
    (
        PutResponse(H, prev_kv=KV),
        '{"header":{"revision":7},"prev_kv":{"key":"k","create_revision":2,"mod_revision":4,'
        '"version":3,"value":"v","lease":9}}',
    ),
    (PutResponse(H), '{"header":{"revision":7}}'),
    (
        DeleteRangeResponse(H, 1, (KV,)),
        '{"header":{"revision":7},"deleted":1,"prev_kvs":[{"key":"k","create_revision":2,'
        '"mod_revision":4,"version":3,"value":"v","lease":9}]}',
    ),
    (
        TxnResponse(H, True, (PutResponse(H), TxnResponse(H, False, (DeleteRangeResponse(H),)))),
        '{"header":{"revision":7},"succeeded":true,"responses":[{"response_put":{"header":'
        '{"revision":7}}},{"response_txn":{"header":{"revision":7},"succeeded":false,'
        '"responses":[{"response_delete_range":{"header":{"revision":7},"deleted":0,'
        '"prev_kvs":[]}}]}}]}',
    ),
    (CompactionResponse(H), '{"header":{"revision":7}}'),
    (LeaseGrantResponse(H, 7, 10), '{"header":{"revision":7},"ID":7,"TTL":10}'),
    (LeaseRevokeResponse(H), '{"header":{"revision":7}}'),
    (LeaseKeepAliveResponse(H, 7, 0), '{"header":{"revision":7},"ID":7,"TTL":0}'),
]


@pytest.mark.parametrize(("value", "text"), GOLDEN, ids=lambda v: type(v).__name__)
def test_history_json_is_what_it_always_was(value: Any, text: str) -> None:
    if type(value) in OPERATION_BY_RESPONSE:
        written = response_to_json(value)
        f = OPERATION_BY_RESPONSE[type(value)].f
        assert response_from_json(f, json.loads(text)) == value
    else:
        f, written = request_to_json(value)
        assert request_from_json(f, json.loads(text)) == value
    assert json.dumps(written, separators=(",", ":")) == text


ALIASED = [
    (message_type, field)
    for message_type, message in MESSAGES.items()
    for field in message.carried
    if field.aliases
]


@pytest.mark.parametrize(
    ("message_type", "field"), ALIASED, ids=lambda v: getattr(v, "name", getattr(v, "__name__", ""))
)
def test_other_names_of_a_field_are_read_too(message_type: type, field: Field) -> None:
    """etcd's JSON writes ID and TTL; histories of other tools write id and ttl."""
    value = dataclasses.replace(zero_message(message_type), **{field.attr: 42})
    written = message_to_json(value)
    for alias in field.aliases:
        renamed = {alias if name == field.name else name: v for name, v in written.items()}
        assert message_from_json(message_type, renamed) == value
        assert message_from_json(message_type, {**renamed, field.name: 7}) != value  # name first


def test_every_upper_case_etcd_name_reads_its_lower_case_form() -> None:
    """The history format has always read id and ttl for ID and TTL (DESIGN.md)."""
    upper = [f for m in MESSAGES.values() for f in m.fields if f.name.isupper()]
    assert {f.name for f in upper} == {"ID", "TTL"}
    assert all(f.aliases == (f.name.lower(),) for f in upper)
    assert len(ALIASED) == len(upper) == 8


# ---------------------------------------------------------------------------- what is not carried


def _non_default(field: Field) -> Any:
    if field.kind is Kind.ENUM:
        return field.of(1)
    return {Kind.INT: 1, Kind.BOOL: True, Kind.BYTES: b"x"}[field.kind]


UNCARRIED = [
    (message_type, field)
    for message_type, message in MESSAGES.items()
    for field in message.uncarried
]


@pytest.mark.parametrize(("message_type", "field"), UNCARRIED, ids=lambda v: getattr(v, "attr", ""))
def test_a_field_the_history_does_not_carry_is_refused_not_dropped(
    message_type: type, field: Field
) -> None:
    value = dataclasses.replace(zero_message(message_type), **{field.attr: _non_default(field)})
    with pytest.raises(EtcdJsonError, match=field.attr):
        message_to_json(value)
    with pytest.raises(WireError, match=field.attr):
        message_to_pb(value)


def test_uncarried_fields_are_the_ranges_sorting_and_filters() -> None:
    """The gap is known and small; carrying one of them is a format change (see the table)."""
    assert [(t.__name__, f.attr) for t, f in UNCARRIED] == [
        ("RangeRequest", name)
        for name in (
            "sort_order",
            "sort_target",
            "min_mod_revision",
            "max_mod_revision",
            "min_create_revision",
            "max_create_revision",
        )
    ]
    assert RangeRequest(b"k", sort_order=SortOrder.DESCEND).sort_order is SortOrder.DESCEND


# ---------------------------------------------------------------------------- the plain path

_JSON_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "a", "7", "-2", "x\u00e9"]),
    st.just({"b64": "/w=="}),
    st.just([]),
    st.floats(-2, 2),
)


def _plain_inputs(message_type: type) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects over the message's names: each field absent, of its own JSON type, or
    of another type (the plain path must then step aside)."""
    fields = MESSAGES[message_type].carried
    own = {Kind.BYTES: st.text(max_size=3), Kind.INT: st.integers(-5, 5), Kind.BOOL: st.booleans()}
    return st.fixed_dictionaries(
        {},
        optional={f.name: st.one_of(own[f.kind], own[f.kind], _JSON_ANY) for f in fields},
    )


def _outcome(decode: Any, value: Any) -> Any:
    try:
        return decode(value, "value")
    except (EtcdJsonError, TypeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"


@pytest.mark.parametrize("message_type", sorted(etcd_json._PLAIN, key=lambda t: t.__name__))
@settings(max_examples=150)
@given(data=st.data())
def test_plain_path_reads_what_the_careful_path_reads(
    message_type: type, data: st.DataObject
) -> None:
    obj = data.draw(_plain_inputs(message_type))
    careful = etcd_json._decoder(MESSAGES[message_type], plain=False)
    plain = etcd_json._PLAIN[message_type].decode(obj)
    if plain is not None:
        assert plain == careful(obj, "value")
    assert _outcome(etcd_json._DECODERS[message_type], obj) == _outcome(careful, obj)


# ---------------------------------------------------------------------------- copies elsewhere


@settings(max_examples=100)
@given(st.lists(message_of(Event), max_size=3).map(tuple), _INTS, st.booleans())
def test_watch_checkers_event_json_is_the_tables(
    events: tuple[Event, ...], compact_revision: int, canceled: bool
) -> None:
    """checker/watch_checks.py writes and reads watch events by hand: it must agree."""
    response = WatchResponse(H, events, compact_revision, canceled, created=not canceled)
    written = watch_response_to_json(response)
    assert written["events"] == [message_to_json(event) for event in events]
    assert watch_response_from_json(_through_json(written)) == response


# ---------------------------------------------------------------------------- the wire's checks


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (TxnResponse(H, True, ()), "txn reply has 0 responses for 1 ops"),
        (
            TxnResponse(H, True, (PutResponse(H),)),
            "answered with response_put, expected response_range",
        ),
        (
            TxnResponse(H, True, (RangeResponse(H), RangeResponse(H))),
            "txn reply has 2 responses for 1 ops",
        ),
    ],
)
def test_a_txn_reply_of_another_shape_is_refused(reply: TxnResponse, message: str) -> None:
    request = TxnRequest(success=(RangeRequest(b"k"),))
    with pytest.raises(WireError, match=message):
        from_pb(request, message_to_pb(reply))


ENUM_FIELDS = [
    (message_type, field)
    for message_type, message in MESSAGES.items()
    for field in message.carried
    if field.kind is Kind.ENUM
]


@pytest.mark.parametrize(
    ("message_type", "field"),
    ENUM_FIELDS,
    ids=lambda v: getattr(v, "attr", getattr(v, "__name__", "")),
)
def test_enums_go_by_name_on_the_wire(message_type: type, field: Field) -> None:
    """A round trip cannot see a codec that maps enums wrongly both ways: etcd's number of
    each member's name is what goes out, and what comes back in as that member."""
    numbers = (
        pb_class(MESSAGES[message_type].etcd)
        .DESCRIPTOR.fields_by_name[field.name]
        .enum_type.values_by_name
    )
    for member in field.of:
        changes: dict[str, Any] = {field.attr: member}
        for choice in MESSAGES[message_type].carried:
            if choice.kind is Kind.CHOICE and choice.selector == field.attr:
                changes[choice.attr] = b"" if choice.choice_for(member).kind is Kind.BYTES else 0
        value = dataclasses.replace(zero_message(message_type), **changes)
        message = message_to_pb(value)
        assert getattr(message, field.name) == numbers[member.name].number
        assert getattr(message_from_pb(message_type, message), field.attr) is member

"""EtcdModel.prepare_all decodes an ok put without a lease and an ok range inline; it must
give exactly what `prepare` gives, operation by operation (payload types included), and
leave every odd shape, with its error, to `prepare`."""

from __future__ import annotations

from typing import Any

import pytest
from etcd_differential import SIMULATION_FIELDS, SIMULATIONS, simulated_operations

from etcdspec.checker.history import Operation
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.checker.models import CheckModel, ModelInputError, PreparedOp


def _typed(value: Any) -> Any:
    """A value with the type of every part, so 1 and True or a tuple and a list differ."""
    if isinstance(value, tuple):
        return (type(value).__name__, tuple(_typed(v) for v in value))
    if isinstance(value, frozenset):
        return ("frozenset", frozenset(value))
    return (type(value).__name__, value)


def _summary(items: list[PreparedOp]) -> list[Any]:
    return [(item.op, _typed(tuple(item)[1:])) for item in items]


def _both(operations: list[Operation]) -> tuple[Any, Any]:
    inline = EtcdModel().prepare_all(operations)
    one_by_one = CheckModel.prepare_all(EtcdModel(), operations)  # `prepare` per operation
    return (_summary(inline[0]), inline[1]), (_summary(one_by_one[0]), one_by_one[1])


@pytest.mark.parametrize(SIMULATION_FIELDS, [*SIMULATIONS, (6, 25, "phantom_read", False, False)])
def test_simulated_histories_prepare_as_prepare_does(
    seed: int, processes: int, fault: str | None, leases: bool, watch: bool
) -> None:
    operations = simulated_operations(seed, processes, fault, leases, watch, ops=400)
    inline, one_by_one = _both(operations)
    assert inline == one_by_one
    fs = {(op.f, op.type) for op in operations}
    assert {("put", "ok"), ("range", "ok"), ("txn", "ok"), ("put", "info")} <= fs


def _op(op_id: int, f: str, request: Any, response: Any, user: str | None = None) -> Operation:
    return Operation(
        op_id, 1, f, request, "ok", response, 2 * op_id, 2 * op_id + 1, 0, 1, 0, 1, user
    )


PUT = {"key": "a", "value": "1", "lease": 0, "prev_kv": False}
PUT_PLAIN = {**PUT, "ignore_value": False, "ignore_lease": False}
RANGE = {"key": "a", "range_end": "", "limit": 0, "revision": 0}
RANGE_PLAIN = {**RANGE, "keys_only": False, "count_only": False}
KV = {"key": "a", "create_revision": 2, "mod_revision": 2, "version": 1, "value": "1", "lease": 0}
ODD = [
    _op(0, "put", PUT_PLAIN, {"header": {"revision": 2}}),
    _op(1, "put", PUT, {"header": {"revision": 3}}),  # not plain: fields left out
    _op(2, "put", {**PUT_PLAIN, "lease": 7}, {"header": {"revision": 4}}),  # a lease
    _op(3, "put", PUT_PLAIN, {"header": {"revision": "5"}}),  # a decimal string
    _op(4, "put", PUT_PLAIN, {}),  # no header: revision 0, no hint
    _op(5, "put", PUT_PLAIN, {"header": {"revision": 6}, "prev_kv": KV}),
    _op(6, "put", PUT_PLAIN, {"header": {"revision": 7}}, user="alice"),
    _op(7, "range", RANGE_PLAIN, {"header": {"revision": 7}, "kvs": [KV], "count": 1}),
    _op(8, "range", RANGE, {"header": {"revision": 7}, "kvs": [], "count": 0}),
    _op(9, "range", {**RANGE_PLAIN, "key": {"b64": "/w=="}}, {"header": {"revision": 7}}),
    _op(10, "range", RANGE_PLAIN, {"header": {"revision": 7}, "kvs": [{**KV, "version": "1"}]}),
    _op(11, "range", RANGE_PLAIN, {"header": {"revision": 0}, "more": True, "count": 3}),
    _op(12, "delete", {"key": "a", "range_end": ""}, {"header": {"revision": 8}, "deleted": 1}),
]


def test_odd_shapes_prepare_as_prepare_does() -> None:
    inline, one_by_one = _both(ODD)
    assert inline == one_by_one
    assert len(inline[0]) == len(ODD)


@pytest.mark.parametrize(
    "op",
    [
        _op(0, "put", {**PUT_PLAIN, "value": "\ud800"}, {"header": {"revision": 2}}),
        _op(0, "put", PUT_PLAIN, {"header": {"revision": "two"}}),
        _op(0, "put", PUT_PLAIN, ["not", "an", "object"]),
        _op(0, "range", RANGE_PLAIN, {"header": {"revision": 2}, "kvs": "none"}),
        _op(0, "range", RANGE_PLAIN, {"header": {"revision": 2}, "kvs": [{"key": 5}]}),
    ],
)
def test_errors_are_prepare_s(op: Operation) -> None:
    with pytest.raises(ModelInputError) as expected:
        EtcdModel().prepare(op)
    with pytest.raises(ModelInputError) as found:
        EtcdModel().prepare_all([op])
    assert str(found.value) == str(expected.value)

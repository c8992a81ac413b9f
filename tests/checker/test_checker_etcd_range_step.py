"""EtcdModel.step answers a range of one key now (`_plain_range`) from the key's kv and
compares the recorded response field by field: every such step the search takes must
answer what `apply` and a whole-response comparison answer (the step before that fast
path), with the recorded answer as it is and altered; and every other range shape
(a range_end, a revision, a limit, keys_only, count_only, sort, filters, an empty key)
must step as `apply` answers it."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

import pytest
from etcd_differential import (
    SIMULATION_FIELDS,
    SIMULATIONS,
    ComparedSteps,
    applied_step,
    simulated_operations,
)

from etcdspec.checker.history import Operation
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.model_etcd import EtcdModel, _plain_range
from etcdspec.checker.models import PreparedOp
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import (
    KeyValue,
    PutRequest,
    RangeRequest,
    RangeResponse,
    ResponseHeader,
    SortOrder,
    SortTarget,
)
from etcdspec.model.store import apply, initial_state
from etcdspec.verdict import Verdict


def _altered(request: RangeRequest, observed: RangeResponse) -> list[Any]:
    """The recorded answer with one thing changed: the revision, the kvs, more, count,
    the kvs as a list, and a header that is not a ResponseHeader."""
    other = KeyValue(request.key, 1, 1, 1, b"x", 0)
    return [
        replace(observed, header=ResponseHeader(observed.header.revision + 1)),
        replace(observed, kvs=() if observed.kvs else (other,)),
        replace(observed, kvs=(other,)),
        replace(observed, kvs=observed.kvs * 2),
        replace(observed, more=True),
        replace(observed, count=observed.count + 1),
        replace(observed, kvs=list(observed.kvs)),  # type: ignore[arg-type]
        replace(observed, header=None),  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize(SIMULATION_FIELDS, SIMULATIONS)
def test_every_range_step_of_a_search_is_apply_s(
    seed: int, processes: int, fault: str | None, leases: bool, watch: bool
) -> None:
    operations = simulated_operations(seed, processes, fault, leases, watch, ops=250)
    model = ComparedSteps(RangeRequest, RangeResponse, _altered)
    result = check_linearizable(model, operations)
    assert result.verdict is not Verdict.UNKNOWN
    if result.verdict is Verdict.TRUE:  # a refuted one may stop before any range
        assert any(_plain_range(request) for _, request in model.compared)


_SHAPES = [
    RangeRequest(b"a"),
    RangeRequest(b"b"),  # a key nobody wrote
    RangeRequest(b""),  # refused: an empty key
    RangeRequest(b"a", b"c"),
    RangeRequest(b"a", revision=2),
    RangeRequest(b"a", revision=9),  # refused: a future revision
    RangeRequest(b"a", limit=1),
    RangeRequest(b"a", keys_only=True),
    RangeRequest(b"a", count_only=True),
    RangeRequest(b"a", sort_order=SortOrder.DESCEND),
    RangeRequest(b"a", sort_target=SortTarget.VALUE),
    RangeRequest(b"a", min_mod_revision=3),
    RangeRequest(b"a", max_create_revision=1),
]


@pytest.mark.parametrize("request_", _SHAPES)
def test_range_shapes_step_as_apply_answers(request_: RangeRequest) -> None:
    model = EtcdModel()
    state = initial_state()
    for put in (PutRequest(b"a", b"1"), PutRequest(b"a", b"2"), PutRequest(b"c", b"3")):
        state = apply(state, put)[0]
    op = Operation(0, 1, "range", {}, "ok", {}, 0, 1, 0, 1, 0, 1)
    kv = state.live.get(b"a")
    assert kv is not None
    answers: list[Any] = [
        None,
        RangeResponse(ResponseHeader(state.revision), (kv,), False, 1),
        RangeResponse(ResponseHeader(state.revision), (), False, 0),
        RangeResponse(ResponseHeader(state.revision - 1), (kv,), False, 1),
        RangeResponse(ResponseHeader(state.revision), (kv,), True, 1),
        RangeResponse(ResponseHeader(state.revision), (kv,), 0, 1),  # type: ignore[arg-type]
    ]
    with contextlib.suppress(StoreError):  # the answer of a range apply allows
        answers.append(apply(state, request_)[1])
    for observed in answers:
        prepared = PreparedOp(op, (request_, observed))
        assert model.step(state, prepared) == applied_step(state, request_, observed)


def test_only_a_range_of_one_key_now_takes_the_fast_step() -> None:
    assert [_plain_range(request) for request in _SHAPES] == [True, True] + [False] * 11

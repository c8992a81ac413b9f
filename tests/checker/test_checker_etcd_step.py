"""EtcdModel.step builds a plain put's state directly (`put_state`) and compares the
recorded response itself: every step the search takes must answer what `apply` and a
whole-response comparison answer (the step before that fast path)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

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
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.checker.models import PreparedOp
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import KeyValue, PutRequest, PutResponse, ResponseHeader
from etcdspec.model.store import apply, initial_state
from etcdspec.verdict import Verdict


def _altered(request: PutRequest, observed: PutResponse) -> list[PutResponse]:
    """The recorded answer with one thing changed: a revision off by one, a prev_kv."""
    return [
        replace(observed, header=ResponseHeader(observed.header.revision + 1)),
        replace(observed, prev_kv=KeyValue(request.key, 1, 1, 1, b"x", 0)),
    ]


@pytest.mark.parametrize(SIMULATION_FIELDS, SIMULATIONS)
def test_every_put_step_of_a_search_is_apply_s(
    seed: int, processes: int, fault: str | None, leases: bool, watch: bool
) -> None:
    operations = simulated_operations(seed, processes, fault, leases, watch, ops=250)
    model = ComparedSteps(PutRequest, PutResponse, _altered)
    result = check_linearizable(model, operations)
    assert result.verdict is not Verdict.UNKNOWN
    assert model.compared  # a refuted history may stop after a few


@pytest.mark.parametrize(
    "request_",
    [
        PutRequest(b"a", b"1"),
        PutRequest(b"", b"1"),  # refused: an empty key
        PutRequest(b"a", b"1", prev_kv=True),
        PutRequest(b"a", b"1", lease=7),  # refused: no such lease
        PutRequest(b"a", b"", ignore_value=True),  # refused on a missing key
        PutRequest(b"b", b"2", ignore_lease=True),
    ],
)
def test_put_shapes_step_as_apply_answers(request_: PutRequest) -> None:
    model = EtcdModel()
    state = apply(initial_state(), PutRequest(b"b", b"0"))[0]
    op = Operation(0, 1, "put", {}, "ok", {}, 0, 1, 0, 1, 0, 1)
    answers = [None, PutResponse(ResponseHeader(3)), PutResponse(ResponseHeader(2))]
    with contextlib.suppress(StoreError):  # the answer of a put apply allows
        answers.append(apply(state, request_)[1])
    for observed in answers:
        prepared = PreparedOp(op, (request_, observed))
        assert model.step(state, prepared) == applied_step(state, request_, observed)

"""EtcdModel.step answers a txn of a simple shape (`_simple_txn`: single-op branches
of a plain put or a current range) without the store's general write path: every txn
step the search takes, and hand-made shapes (refused ones, compares that hold and do
not, ranges over intervals, empty branches), must answer what `apply` and a
whole-response comparison answer (the step before that fast path)."""

from __future__ import annotations

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
from etcdspec.checker.model_etcd import EtcdModel, _simple_txn
from etcdspec.checker.models import PreparedOp
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    PutRequest,
    PutResponse,
    RangeRequest,
    ResponseHeader,
    TxnRequest,
    TxnResponse,
)
from etcdspec.model.store import StoreConfig, apply, initial_state
from etcdspec.verdict import Verdict


def _altered(request: TxnRequest, observed: TxnResponse) -> list[TxnResponse]:
    """The recorded answer with one thing changed: the revision, the outcome, a
    response dropped."""
    header = ResponseHeader(observed.header.revision + 1)
    return [
        replace(observed, header=header),
        replace(observed, succeeded=not observed.succeeded),
        replace(observed, responses=observed.responses[:-1]),
    ]


@pytest.mark.parametrize(SIMULATION_FIELDS, SIMULATIONS)
def test_every_txn_step_of_a_search_is_apply_s(
    seed: int, processes: int, fault: str | None, leases: bool, watch: bool
) -> None:
    operations = simulated_operations(seed, processes, fault, leases, watch, ops=250)
    model = ComparedSteps(TxnRequest, TxnResponse, _altered)
    result = check_linearizable(model, operations)
    assert result.verdict is not Verdict.UNKNOWN
    if fault is None:  # a refuted history may stop before its first txn
        assert result.verdict is Verdict.TRUE
        simple = sum(_simple_txn(state, txn) is not None for state, txn in model.compared)
        assert simple > 0 and len(model.compared) > simple


def _mod_equals(key: bytes, revision: int) -> Compare:
    return Compare(key, CompareTarget.MOD, CompareResult.EQUAL, revision)


_PUT = PutRequest(b"a", b"new")
_READ = RangeRequest(b"a")
SHAPES = [
    TxnRequest((_mod_equals(b"a", 2),), (_PUT,), (_READ,)),  # holds: the put
    TxnRequest((_mod_equals(b"a", 9),), (_PUT,), (_READ,)),  # fails: the read
    TxnRequest((_mod_equals(b"a", 9),), (_READ,), (_PUT,)),  # fails: the put
    TxnRequest((), (_PUT,), ()),
    TxnRequest((), (), ()),
    TxnRequest((_mod_equals(b"zz", 0),), (), ()),  # a missing key: mod 0 holds
    TxnRequest((_mod_equals(b"a", 9),), (_PUT,), (RangeRequest(b"a", b"c"),)),  # an interval
    TxnRequest((_mod_equals(b"a", 9),), (_PUT,), (RangeRequest(b"a", b"c", limit=1),)),
    TxnRequest((_mod_equals(b"a", 9),), (_PUT,), (RangeRequest(b"a", count_only=True),)),
    TxnRequest((), (PutRequest(b"b", b"x"),), ()),  # b held a lease: the put moves it out
    # Not simple (the general path), refused or not:
    TxnRequest((), (PutRequest(b"", b"x"),), ()),  # an empty key
    TxnRequest((_mod_equals(b"", 0),), (), ()),  # a compare on an empty key
    TxnRequest((), (PutRequest(b"a", b"x", lease=99),), ()),  # no such lease
    TxnRequest((), (PutRequest(b"q", b"x", ignore_value=True),), ()),  # a missing key
    TxnRequest((), (PutRequest(b"a", b"x", prev_kv=True),), ()),
    TxnRequest((), (RangeRequest(b"a", revision=2),), ()),  # an old revision
    TxnRequest((), (RangeRequest(b"a", revision=99),), ()),  # a future one: refused
    TxnRequest((), (DeleteRangeRequest(b"a"),), ()),
    TxnRequest((), (_PUT, PutRequest(b"b", b"y")), ()),  # two ops
    TxnRequest((), (_PUT, _PUT), ()),  # refused: a key put twice
]


@pytest.mark.parametrize("request_", SHAPES, ids=lambda r: r.describe())
@pytest.mark.parametrize("max_ops", [128, 0])
def test_txn_shapes_step_as_apply_answers(request_: TxnRequest, max_ops: int) -> None:
    state = initial_state(StoreConfig(max_txn_ops=max_ops))
    state = apply(state, PutRequest(b"a", b"old"))[0]  # a at revision 2
    state = apply(state, _grant(7))[0]
    state = apply(state, PutRequest(b"b", b"leased", lease=7))[0]
    model = EtcdModel()
    op = Operation(0, 1, "txn", {}, "ok", {}, 0, 1, 0, 1, 0, 1)
    answers: list[Any] = [None, TxnResponse(ResponseHeader(3), True, ())]
    try:
        answer = apply(state, request_)[1]
    except StoreError:
        pass
    else:
        assert isinstance(answer, TxnResponse)
        answers += [answer, *_altered(request_, answer)] if answer.responses else [answer]
    for observed in answers:
        prepared = PreparedOp(op, (request_, observed))
        assert model.step(state, prepared) == applied_step(state, request_, observed)


def _grant(lease: int) -> Any:
    from etcdspec.model.requests import LeaseGrantRequest

    return LeaseGrantRequest(60, lease)


def test_simple_shapes_are_taken_by_the_fast_path() -> None:
    """Not vacuous: the shapes the history's txns have go through `_simple_txn`."""
    state = apply(initial_state(), PutRequest(b"a", b"old"))[0]
    assert _simple_txn(state, SHAPES[0]) is not None
    assert _simple_txn(state, SHAPES[1]) is not None
    assert _simple_txn(state, TxnRequest((), (_PUT, PutRequest(b"b", b"y")), ())) is None
    put = _simple_txn(state, SHAPES[0])
    assert put is not None and put[1].responses == (PutResponse(ResponseHeader(3)),)

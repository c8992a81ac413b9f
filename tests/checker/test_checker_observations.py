"""Observed writes as cuts of the etcd search: which revision an info write can take
(`pinned_revisions`), what the write at an observed revision must have made
(`writes_match`), and that 50-process histories with many info writes are decided."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from etcdspec.checker.budget import Budget
from etcdspec.checker.check import load_history
from etcdspec.checker.etcd_json import request_to_json, response_to_json
from etcdspec.checker.history import HistoryBuilder, Operation, build_history
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.checker.models import PreparedOp
from etcdspec.checker.simulate import simulate_etcd
from etcdspec.checker.watch_checks import observed_writes, parse_watches
from etcdspec.model.requests import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    RangeResponse,
    ResponseHeader,
    TxnRequest,
    TxnResponse,
)
from etcdspec.model.store import apply, initial_state
from etcdspec.verdict import Verdict


def _kv(key: str, value: str, create: int, mod: int, version: int) -> dict[str, Any]:
    return {
        "key": key,
        "value": value,
        "create_revision": create,
        "mod_revision": mod,
        "version": version,
        "lease": 0,
    }


def _ops(extra_put: dict[str, Any] | None) -> list[Operation]:
    """An info put of k=a, an ok put of x (revision 2), a read showing k=a at 3."""
    builder = HistoryBuilder()
    builder.add(1, "invoke", "put", {"key": "k", "value": "a"})
    builder.add(2, "invoke", "put", {"key": "x", "value": "1"})
    builder.add(2, "ok", "put", {"header": {"revision": 2}})
    if extra_put is not None:
        builder.add(4, "invoke", "put", extra_put)
        builder.add(4, "info", "put", {"error": "lost", "code": "UNAVAILABLE"})
    builder.add(1, "info", "put", {"error": "lost", "code": "UNAVAILABLE"})
    builder.add(3, "invoke", "range", {"key": "k"})
    builder.add(
        3, "ok", "range", {"header": {"revision": 3}, "kvs": [_kv("k", "a", 3, 3, 1)], "count": 1}
    )
    return list(build_history(builder.events).operations)


def _pins(extra_put: dict[str, Any] | None) -> dict[int, int]:
    model = EtcdModel(lease_expiry=False)
    items = [p for p in (model.prepare(op) for op in _ops(extra_put)) if p is not None]
    pins = model.pinned_revisions(items, model.observed_writes(items))
    return {items[i].op.id: revision for i, revision in pins.items()}


@pytest.mark.parametrize(
    ("case", "extra_put", "pinned"),
    [
        ("the only op that writes k=a takes revision 3", None, {0: 3}),
        ("another op may write k=a too: no pin", {"key": "k", "value": "a"}, {}),
        (
            "a put with ignore_value may write k=a again: no pin",
            {"key": "k", "ignore_value": True},
            {},
        ),
        ("an unrelated info put leaves the pin", {"key": "y", "value": "b"}, {0: 3}),
    ],
)
def test_pinned_revisions(
    case: str, extra_put: dict[str, Any] | None, pinned: dict[int, int]
) -> None:
    assert _pins(extra_put) == pinned, case


@pytest.mark.parametrize(
    "extra_put", [None, {"key": "k", "value": "a"}, {"key": "y", "value": "b"}]
)
def test_pinned_histories_stay_linearizable(extra_put: dict[str, Any] | None) -> None:
    result = check_linearizable(EtcdModel(lease_expiry=False), _ops(extra_put))
    assert result.verdict is Verdict.TRUE, result.describe()


WRITES_MATCH = [
    ("put k=a created k", [PutRequest(b"k", b"a")], {("put", b"k", b"a"), ("create", b"k")}, True),
    ("put k=a is not put k=b", [PutRequest(b"k", b"a")], {("put", b"k", b"b")}, False),
    (
        "a second put does not create",
        [PutRequest(b"k", b"a"), PutRequest(b"k", b"b")],
        {("create", b"k")},
        False,
    ),
    ("a put is not a delete", [PutRequest(b"k", b"a")], {("delete", b"k")}, False),
    (
        "a delete is seen as one",
        [PutRequest(b"k", b"a"), DeleteRangeRequest(b"k")],
        {("delete", b"k")},
        True,
    ),
    ("other kinds are not judged", [PutRequest(b"k", b"a")], {("lease", 7)}, True),
]


@pytest.mark.parametrize(
    ("case", "writes", "signatures", "match"), WRITES_MATCH, ids=[c[0] for c in WRITES_MATCH]
)
def test_writes_match(case: str, writes: list[Any], signatures: set[Any], match: bool) -> None:
    state = initial_state()
    for request in writes:
        state, _ = apply(state, request)
    assert EtcdModel().writes_match(state, signatures) is match, case


def test_fifty_processes_with_many_info_writes_are_decided() -> None:
    """Before the create observations and pins this stayed undecided for minutes."""
    history = build_history(simulate_etcd(0, ops=3000, processes=50, info_rate=0.2))
    assert sum(op.type == "info" for op in history.operations) > 400
    result = check_linearizable(EtcdModel(), history.operations, Budget(timeout_s=90))
    assert result.verdict is Verdict.TRUE, result.describe()


def _versions_case(version: int) -> tuple[EtcdModel, PreparedOp]:
    """Two ok puts to k (revisions 2 and 4), an info put to k, a read at 4 showing k at
    `version`: 2 means the ok puts made every version, 3 that one more put happened."""
    builder = HistoryBuilder()
    builder.add(1, "invoke", "put", {"key": "k", "value": "z"})
    builder.add(2, "invoke", "put", {"key": "k", "value": "a"})
    builder.add(2, "ok", "put", {"header": {"revision": 2}})
    builder.add(2, "invoke", "put", {"key": "k", "value": "b"})
    builder.add(2, "ok", "put", {"header": {"revision": 4}})
    builder.add(1, "info", "put", {"error": "lost", "code": "UNAVAILABLE"})
    builder.add(3, "invoke", "range", {"key": "k"})
    kv = _kv("k", "b", 2, 4, version)
    builder.add(3, "ok", "range", {"header": {"revision": 4}, "kvs": [kv], "count": 1})
    model = EtcdModel(lease_expiry=False)
    ops = build_history(builder.events).operations
    prepared = [p for p in (model.prepare(op) for op in ops) if p is not None]
    model.observed_writes(prepared)
    return model, next(p for p in prepared if p.op.type == "info")


@pytest.mark.parametrize(
    ("version", "revision", "possible"),
    [(2, 3, False), (2, 5, True), (3, 3, True)],
)
def test_info_put_excluded_where_ok_puts_made_every_version(
    version: int, revision: int, possible: bool
) -> None:
    model, info_put = _versions_case(version)
    assert model.info_possible(info_put, revision) is possible


def _two_info_puts_needed(failed_txn: bool) -> tuple[EtcdModel, PreparedOp]:
    """k created at 2 by an ok put, read at 5 with version 3 and mod_revision 4: the
    two missing puts are info puts, at 3 and 4 (5 is an ok put's). With `failed_txn`,
    an ok txn that would have put k ran its failure branch: it wrote nothing."""
    builder = HistoryBuilder()
    if failed_txn:
        txn = TxnRequest(
            compare=(Compare(b"k", CompareTarget.VERSION, CompareResult.EQUAL, 9),),
            success=(PutRequest(b"k", b"t"),),
            failure=(RangeRequest(b"k"),),
        )
        answer = TxnResponse(ResponseHeader(1), False, (RangeResponse(ResponseHeader(1)),))
        builder.add(7, "invoke", *request_to_json(txn))
        builder.add(7, "ok", "txn", response_to_json(answer))
    for process, value in ((4, "b"), (5, "c")):
        builder.add(process, "invoke", "put", {"key": "k", "value": value})
    builder.add(6, "invoke", "put", {"key": "y", "value": "z"})
    builder.add(1, "invoke", "put", {"key": "k", "value": "a"})
    builder.add(1, "ok", "put", {"header": {"revision": 2}})
    for process in (4, 5, 6):
        builder.add(process, "info", "put", {"error": "lost", "code": "UNAVAILABLE"})
    builder.add(2, "invoke", "put", {"key": "x", "value": "1"})
    builder.add(2, "ok", "put", {"header": {"revision": 5}})
    builder.add(3, "invoke", "range", {"key": "k"})
    kv = _kv("k", "c", 2, 4, 3)
    builder.add(3, "ok", "range", {"header": {"revision": 5}, "kvs": [kv], "count": 1})
    model = EtcdModel(lease_expiry=False)
    ops = build_history(builder.events).operations
    prepared = [p for p in (model.prepare(op) for op in ops) if p is not None]
    model.observed_writes(prepared)
    return model, next(p for p in prepared if p.op.type == "info")


@pytest.mark.parametrize("failed_txn", [False, True])
@pytest.mark.parametrize(
    ("case", "writes", "possible"),
    [
        ("y at 3 leaves one revision for two puts to k", [(b"k", b"a"), (b"y", b"z")], False),
        ("k at 3 leaves one revision for one put to k", [(b"k", b"a"), (b"k", b"b")], True),
    ],
)
def test_info_writes_must_leave_room_for_the_puts_a_version_needs(
    case: str, writes: list[tuple[bytes, bytes]], possible: bool, failed_txn: bool
) -> None:
    model, info_put = _two_info_puts_needed(failed_txn)
    state = initial_state()
    for key, value in writes:
        state, _ = apply(state, PutRequest(key, value))
    assert model.info_state_possible(info_put, state) is possible, case


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("watch_lease_expiry_after_last_op.jsonl", Verdict.TRUE),
        ("watch_lease_expiry_after_last_op_broken.jsonl", Verdict.FALSE),
    ],
)
def test_search_goes_past_the_last_ok_op_to_the_revisions_watches_saw(
    name: str, verdict: Verdict
) -> None:
    history = load_history(Path(__file__).parent / "data" / name)
    seen = observed_writes(parse_watches(history))
    assert max(seen) == 5 if verdict is Verdict.TRUE else max(seen) == 4
    result = check_linearizable(EtcdModel(), history.operations, Budget(), seen)
    assert result.verdict is verdict, result.describe()
    if verdict is Verdict.FALSE:
        assert result.failure is not None
        assert "no operation explains the writes seen up to revision 4" in result.failure.reason
    else:  # both synthetic expiries are placed, after every ok operation
        assert len(result.linearization()) == len(history.operations) + 2

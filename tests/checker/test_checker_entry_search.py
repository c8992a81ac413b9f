"""The entry-list search (checker/entry_search.py) decides as the frame search does, and
the overwritten-read cut refutes only what the search refutes.

Hypothesis draws small register and kv histories of concurrent operations over few
values (so that many are violations), with info operations; each partition is searched
both ways with no cut (`frame_search`, the generic loop the etcd model still uses, and
`entry_search`) and the verdicts must agree. A read the models' `overwritten` names must
be one whose partition the plain search refutes."""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

import history_strategies
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from etcdspec.checker.budget import UNBOUNDED, Budget, BudgetClock
from etcdspec.checker.history import HistoryBuilder, Operation
from etcdspec.checker.linearizability import _Search, check_linearizable
from etcdspec.checker.linearizability_result import PartitionResult
from etcdspec.checker.models import CheckModel, PreparedOp, get_model
from etcdspec.verdict import Verdict

KV_VALUES = [None, "1", "2", "1,2", ",1", ",2", "2,1"]
REGISTER_VALUES = [None, 1, 2, 3]


def histories(model: str) -> st.SearchStrategy[list[Operation]]:
    return history_strategies.histories(
        model,
        max_events=14,
        register_values=REGISTER_VALUES,
        kv_values=KV_VALUES,
        put_texts=["1", "2"],
    )


def _run(search: Generator[None, None, PartitionResult]) -> PartitionResult:
    while True:
        try:
            next(search)
        except StopIteration as done:
            result: PartitionResult = done.value
            return result


def _partitions(model: CheckModel, operations: list[Operation]) -> list[list[PreparedOp]]:
    prepared = [p for p in map(model.prepare, operations) if p is not None]
    parts = model.partitions(prepared)
    return [prepared] if parts is None else [parts[k] for k in sorted(parts)]


def _both_ways(model: CheckModel, items: list[PreparedOp]) -> tuple[Verdict, Verdict]:
    searches = [_Search(model, items, "k", BudgetClock(UNBOUNDED), {}) for _ in range(2)]
    frame = _run(searches[0].frame_search(time.monotonic()))
    entry = _run(searches[1].entry_search(time.monotonic()))
    return frame.verdict, entry.verdict


def _check_model(name: str, operations: list[Operation]) -> None:
    model = get_model(name)
    for items in _partitions(model, operations):
        frame, entry = _both_ways(model, items)
        event(f"{name}: {frame.describe()}")
        assert entry is frame
        assert frame is not Verdict.UNKNOWN
        if model.overwritten(items):
            event(f"{name}: overwritten read")
            assert frame is Verdict.FALSE


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories("kv"))
def test_entry_search_agrees_with_frame_search_on_kv(operations: list[Operation]) -> None:
    _check_model("kv", operations)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories("register"))
def test_entry_search_agrees_with_frame_search_on_register(operations: list[Operation]) -> None:
    _check_model("register", operations)


def test_a_stale_read_is_refuted_by_the_overwritten_cut_past_a_hard_search() -> None:
    """A read of an overwritten value behind many overlapping info appends: the search's
    first turn does not decide it; the cut does, naming the write and its overwriter."""
    builder = HistoryBuilder()
    builder.add(0, "invoke", "put", {"key": "k", "value": "old"})
    builder.add(0, "ok", "put", {"key": "k", "value": "old"})
    builder.add(1, "invoke", "put", {"key": "k", "value": "new"})
    builder.add(1, "ok", "put", {"key": "k", "value": "new"})
    for p in range(10, 24):  # info appends: 2^14 subsets, 14! orders
        builder.add(p, "invoke", "append", {"key": "k", "value": f",{p}"})
    for p in range(10, 24):
        builder.add(p, "info", "append", {"key": "k", "value": f",{p}"})
    builder.add(2, "invoke", "get", {"key": "k"})
    builder.add(2, "ok", "get", {"key": "k", "value": "old"})
    result = check_linearizable(get_model("kv"), builder.history().operations, Budget(timeout_s=10))
    assert result.verdict is Verdict.FALSE
    failure = result.failure
    assert failure is not None
    assert "surely overwritten" in failure.reason and '"new"' in failure.reason
    assert result.seconds < 5


def _ops(rows: list[tuple[int, str, str, Any]]) -> list[Operation]:
    builder = HistoryBuilder()
    for process, kind, f, value in rows:
        builder.add(process, kind, f, value)
    return list(builder.history().operations)


def test_fewer_info_operations_placed_are_not_dominated_by_more() -> None:
    """The search first reaches (put 2 placed, state "2") with the info append placed
    too, and fails there; the same ok set and state without the append must still be
    searched (the append placed later gives "2,1"): subsumption runs one way only."""
    operations = _ops(
        [
            (1, "invoke", "append", {"key": "k", "value": ",1"}),
            (2, "invoke", "put", {"key": "k", "value": "2"}),
            (2, "ok", "put", {"key": "k", "value": "2"}),
            (1, "info", "append", {"key": "k", "value": ",1"}),
            (3, "invoke", "get", {"key": "k"}),
            (3, "ok", "get", {"key": "k", "value": "2,1"}),
        ]
    )
    model = get_model("kv")
    (items,) = _partitions(model, operations)
    assert _both_ways(model, items) == (Verdict.TRUE, Verdict.TRUE)


def test_an_info_write_is_never_surely_overwritten() -> None:
    """An info put may take effect right before the read, whatever returned before (an
    ok put of the same value, overwritten, too)."""
    operations = _ops(
        [
            (0, "invoke", "put", {"key": "k", "value": "2"}),
            (0, "ok", "put", {"key": "k", "value": "2"}),
            (1, "invoke", "put", {"key": "k", "value": "2"}),
            (1, "info", "put", {"key": "k", "value": "2"}),
            (2, "invoke", "put", {"key": "k", "value": "3"}),
            (2, "ok", "put", {"key": "k", "value": "3"}),
            (3, "invoke", "get", {"key": "k"}),
            (3, "ok", "get", {"key": "k", "value": "2"}),
        ]
    )
    model = get_model("kv")
    (items,) = _partitions(model, operations)
    assert model.overwritten(items) == []
    assert check_linearizable(model, operations).verdict is Verdict.TRUE


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["kv", "register"]), st.data())
def test_a_models_stepper_gives_what_its_step_gives(name: str, data: st.DataObject) -> None:
    """The hot loop calls `stepper(op)(state)`; the frame loop and reports call `step`."""
    model = get_model(name)
    operations = data.draw(histories(name))
    states = KV_VALUES if name == "kv" else REGISTER_VALUES
    for prepared in filter(None, map(model.prepare, operations)):
        for state in states:
            assert list(model.stepper(prepared)(state)) == model.step(state, prepared)

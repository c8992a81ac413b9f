"""The one-call fused check (`_wgl.check_fused`, docs/benchmarks.md, Session 17: kv-1's
clean checks) decides as the calls it replaces, and its faster reads give what the plain
ones give.

- `check_fused` is `fuse` + the partitions sorted by name + the turns' order (fewest info
  operations, then fewest operations) + `first_turns`: on Hypothesis register and kv
  histories (info operations, violations) and simulated kv and register histories (1, 10
  and 50 clients, with a stale get or a fault planted), the same decline (None), the same
  results when every first turn linearizes (PartitionResults equal, field by field and
  whole, to the constructor's), and otherwise the same order, first turns and parts.
- An Operation's attributes are read from its values array (CPython 3.11) or through
  getattr: operations whose `__dict__` was made (getattr then serves), and operations of
  a class whose `ret` is a property (no direct read at all), give the same partitions,
  values and whole check as plain ones, and as the pure core.
- The linearization's ids are the fused pass's copies of the operations' ids while
  every id is an int; other ids (str, 2**70) are read from the operations: the same.
- A partition's call and return entries are sorted by insertion, or by qsort past 8
  moves per entry (many concurrent operations): simulated histories of 1 and 50 clients
  on one key give the pure core's whole result either way."""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, replace
from typing import Any

import history_strategies
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from result_fields import whole_result

from etcdspec.checker import _wgl, compiled_search  # type: ignore[attr-defined]
from etcdspec.checker.budget import OutOfBudget
from etcdspec.checker.history import HistoryBuilder, Operation, build_history
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.linearizability_result import PartitionResult
from etcdspec.checker.models import get_model
from etcdspec.checker.simulate import REGISTER_FAULTS, simulate_kv, simulate_register
from etcdspec.verdict import Verdict

TURN, EVERY = 2048 * compiled_search.TURN_FACTOR, 512 * compiled_search.TURN_FACTOR


def _check(monkeypatch: pytest.MonkeyPatch, core: str, model: str, ops: list[Any]) -> Any:
    monkeypatch.setenv(compiled_search.CORE_ENV, core)
    try:
        return whole_result(check_linearizable(get_model(model), ops))
    except Exception as error:  # the same error both ways
        return ("error", type(error).__name__, str(error))


def _one_call(model: str, ops: list[Any], turn: int = TURN, op_type: type = Operation) -> Any:
    checked: Any = get_model(model)
    return _wgl.check_fused(
        checked.flat_code, ops, op_type, "", checked.init(), 7, turn, EVERY, _no_check,
        OutOfBudget, math.inf, PartitionResult, compiled_search._RESULT_FIELDS, Verdict.TRUE,
    )  # fmt: skip


def _no_check() -> None:
    raise AssertionError("no clock check with an infinite deadline")


def _separate_calls(model: str, ops: list[Any], turn: int = TURN) -> Any:
    """What check_fused does, by the calls it replaces (fresh searches, the same seed)."""
    checked: Any = get_model(model)
    fused = _wgl.fuse(checked.flat_code, ops, Operation, "", checked.init(), 7)
    if fused is None:
        return None
    dropped, parts = fused
    parts.sort(key=lambda part: part[0])
    order = sorted(range(len(parts)), key=lambda i: (parts[i][4], len(parts[i][1])))
    turned = [parts[i][1:] for i in order]
    done, _, out = _wgl.first_turns(
        checked.flat_code, turned, turn, EVERY, _no_check, OutOfBudget, math.inf
    )
    return dropped, sum(len(part[1]) for part in parts), parts, order, done, out


def _agree(model: str, ops: list[Any], turn: int = TURN) -> None:
    one, separate = _one_call(model, ops, turn), _separate_calls(model, ops, turn)
    if separate is None:
        assert one is None
        return
    dropped, count, parts, order, done, out = separate
    assert one[:2] == (dropped, count)
    if len(done) < len(order):  # a first turn did not linearize its partition
        _, _, one_parts, one_order, one_done, _, one_out = one
        assert one_order == order
        assert [part[0] for part in one_parts] == [part[0] for part in parts]
        assert [part[1] for part in one_parts] == [part[1] for part in parts]
        assert [entry[:3] for entry in one_done] == [entry[:3] for entry in done]
        assert one_out == out
        return
    results = one[2]
    assert isinstance(results, tuple) and len(results) == len(parts)
    unkeyed = model == "register" and len(parts) == 1 and parts[0][0] == ""
    by_index = dict(zip(order, done, strict=True))
    for index, (result, part) in enumerate(zip(results, parts, strict=True)):
        ids, state, steps, _ = by_index[index]
        name = None if unkeyed else part[0]
        expected = PartitionResult(
            name, Verdict.TRUE, len(part[1]), ids, state, None, "", steps, result.seconds
        )
        assert type(result) is PartitionResult
        assert result == expected and hash(result) == hash(expected)
        assert asdict(result) == asdict(expected)
        assert result.final_state == state and type(result.final_state) is type(state)


_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("model", ["register", "kv"])
@_SETTINGS
@given(data=st.data())
def test_check_fused_is_the_calls_it_replaces_on_drawn_histories(
    model: str, data: st.DataObject
) -> None:
    ops = data.draw(
        history_strategies.histories(
            model,
            max_events=16,
            register_values=[None, 1, 2, 3, 1.0, True],
            kv_values=[None, "", "1", "2", "1,2", ",1", ",2", "2,1", ",1,2"],
            put_texts=["1", "2", ""],
        )
    )
    _agree(model, ops)
    _agree(model, ops, turn=3)  # turns that stop early: the partial answer


def _kv(seed: int, ops: int, processes: int, keys: int, stale: bool = False) -> list[Any]:
    events = simulate_kv(seed, ops=ops, processes=processes, info_rate=0.1, keys=keys)
    if stale:  # an ok get late on answering its key's first put: a stale read
        first: dict[str, Any] = {}
        for i, event in enumerate(events):
            if event.type == "ok" and event.f == "put":
                first.setdefault(event.value["key"], event.value["value"])
            if i > len(events) // 2 and event.type == "ok" and event.f == "get":
                old = first.get(event.value["key"])
                if old is not None and old != event.value["value"]:
                    events[i] = replace(event, value={**event.value, "value": old})
                    break
    return list(build_history(events).operations)


def test_check_fused_is_the_calls_it_replaces_on_simulated_histories(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cases: list[tuple[str, list[Any]]] = [
        ("kv", _kv(1, 400, 1, 10)),
        ("kv", _kv(2, 400, 1, 10, stale=True)),
        ("kv", _kv(3, 400, 10, 10)),
        ("kv", _kv(4, 400, 10, 10, stale=True)),
        ("kv", _kv(5, 300, 50, 10)),
    ]
    for seed, fault in enumerate([None, *REGISTER_FAULTS]):
        try:
            events = simulate_register(seed, ops=300, processes=5, info_rate=0.1, fault=fault)
        except ValueError:  # the fault never applied from this seed
            continue
        cases.append(("register", list(build_history(events).operations)))
    shapes = set()
    for model, ops in cases:
        _agree(model, ops)
        one = _one_call(model, ops)
        shapes.add(len(one))
        pure = _check(monkeypatch, "pure", model, ops)
        assert _check(monkeypatch, "compiled", model, ops) == pure
    assert shapes == {3, 7}  # clean ones answered whole, refuted ones handed back


@dataclass(frozen=True)
class _RetProperty:
    """An operation class whose `ret` is a class attribute (a property): the fused pass
    must read every attribute through getattr."""

    id: int
    process: int | str
    f: str
    request: Any
    type: str
    response: Any
    call: int
    end: int | None

    @property
    def ret(self) -> int | None:
        return self.end


def test_direct_and_getattr_reads_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.version_info[:2] == (3, 11):
        assert _wgl.INLINE_VALUES == 1  # the direct read is built where it can be
    for model, ops in (
        ("kv", _kv(6, 300, 1, 5)),
        ("kv", _kv(7, 300, 10, 5, stale=True)),
        ("register", list(build_history(simulate_register(8, ops=200, processes=5)).operations)),
    ):
        made = [Operation(**asdict(op)) for op in ops]
        for op in made[::3]:
            vars(op)  # its dict made: getattr serves this one
        checked: Any = get_model(model)
        plain = _wgl.fuse(checked.flat_code, ops, Operation, "", None, 3)
        mixed = _wgl.fuse(checked.flat_code, made, Operation, "", None, 3)
        assert plain is not None and mixed is not None
        assert plain[0] == mixed[0]
        for (key, part_ops, _, values, infos), (key2, part_ops2, _, values2, infos2) in zip(
            plain[1], mixed[1], strict=True
        ):
            assert (key, [op.id for op in part_ops], values, infos) == (
                key2,
                [op.id for op in part_ops2],
                values2,
                infos2,
            )
        pure = _check(monkeypatch, "pure", model, ops)
        assert _check(monkeypatch, "compiled", model, made) == pure
        assert _check(monkeypatch, "compiled", model, ops) == pure
        odd = [
            _RetProperty(op.id, op.process, op.f, op.request, op.type, op.response, op.call, op.ret)
            for op in ops
        ]
        by_property = _wgl.fuse(checked.flat_code, odd, _RetProperty, "", None, 3)
        assert by_property is not None
        assert [(p[0], [op.id for op in p[1]], p[3], p[4]) for p in by_property[1]] == [
            (p[0], [op.id for op in p[1]], p[3], p[4]) for p in plain[1]
        ]
        got = _one_call(model, odd, op_type=_RetProperty)
        want = _one_call(model, ops)
        assert got[:2] == want[:2]
        if len(want) == 3:
            assert [_part(r) for r in got[2]] == [_part(r) for r in want[2]]


def _part(result: PartitionResult) -> tuple[Any, ...]:
    """A result but its seconds."""
    return (
        result.partition,
        result.operations,
        result.linearization,
        result.final_state,
        result.steps,
    )


def test_ids_that_are_not_ints_are_read_from_the_operations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ops = _kv(9, 200, 1, 3)
    for odd in (lambda i: f"op-{i}", lambda i: 2**70 + i, lambda i: -1 - i):
        renamed = [Operation(**{**asdict(op), "id": odd(op.id)}) for op in ops]
        compiled = _check(monkeypatch, "compiled", "kv", renamed)
        assert compiled == _check(monkeypatch, "pure", "kv", renamed)
        ids = {odd(op.id) for op in ops if op.type != "fail"}
        assert {i for part in compiled["partitions"] for i in part["linearization"]} <= ids


def _all_concurrent(puts: int, reads: list[int]) -> list[Any]:
    """`puts` puts of one key, all invoked before any returns, returning in reverse
    order; then gets, one after another, reading the values of the puts named."""
    builder = HistoryBuilder()
    for p in range(puts):
        builder.add(p, "invoke", "put", {"key": "k", "value": f"v{p}"})
    for p in reversed(range(puts)):
        builder.add(p, "ok", "put", {"key": "k", "value": f"v{p}"})
    for r, p in enumerate(reads):
        builder.add(puts + r, "invoke", "get", {"key": "k"})
        builder.add(puts + r, "ok", "get", {"key": "k", "value": f"v{p}"})
    return list(builder.history().operations)


def test_entries_sorted_by_insertion_or_qsort_agree_with_the_pure_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Simulated keys of 1 and 10 clients (sorted as they come, or nearly), and 40 puts
    all concurrent, returning in reverse order (far past the insertion sort's budget:
    qsort), then reads of the value the search reaches first, or none: the pure core's whole result, steps and
    linearization included. (A refuted all-concurrent key would have the search try
    every subset of the puts: the stale simulated key is the refuted case here.)"""
    cases = [_kv(10, 250, 1, 1), _kv(10, 250, 1, 1, stale=True), _kv(11, 250, 10, 1)]
    cases += [_all_concurrent(40, [39, 39]), _all_concurrent(40, [])]
    verdicts = []
    for ops in cases:
        compiled = _check(monkeypatch, "compiled", "kv", ops)
        assert compiled == _check(monkeypatch, "pure", "kv", ops)
        verdicts.append(compiled["verdict"])
    true, false = Verdict.TRUE, Verdict.FALSE
    assert verdicts == [true, false, true, true, true]

"""The paths that cut the fixed cost of one check (docs/benchmarks.md, Session 16: the
fixed cost per check) decide as the paths they replace.

- ETCDSPEC_CHECKER_CORE is read through the C library's getenv (`_wgl.getenv`): it
  follows os.environ's assignments and deletions between checks, as os.environ.get did.
- The budget's time limit is tested in C between the first turns (`_wgl.first_turns`
  calls `clock.check` only once it is passed, or always with a memory bound): a history
  of many partitions gives the same result with no limit, with a time limit, and with a
  memory bound (each turn then calls `clock.check`); a spent time limit is still seen,
  and is unknown, never a pass.
- The register and kv models' `impossible` (one pass over the writes, one over the
  reads) finds what the read-by-read sweep (the earlier code, kept here as the
  reference) finds, in the same order, on Hypothesis histories and on simulated ones
  with a read made to answer a value written only later.
- Fused partitions the first turns linearize get no `_Search`: the whole result is the
  one the separate passes give (tests/checker/test_checker_compiled_core.py covers the
  other shapes), and a history whose later partition needs more turns still reports
  every partition."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from typing import Any

import history_strategies
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from result_fields import whole_result

from etcdspec.checker import _wgl, compiled_search, linearizability  # type: ignore[attr-defined]
from etcdspec.checker.budget import Budget
from etcdspec.checker.history import build_history
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.models import PreparedOp, get_model
from etcdspec.checker.simulate import REGISTER_FAULTS, simulate_kv, simulate_register
from etcdspec.verdict import Verdict


def _kv(seed: int, ops: int, processes: int, keys: int, info_rate: float = 0.1) -> list[Any]:
    events = simulate_kv(seed, ops=ops, processes=processes, info_rate=info_rate, keys=keys)
    return list(build_history(events).operations)


def test_the_core_choice_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(compiled_search.CORE_ENV, raising=False)
    assert compiled_search.core_choice() == "auto"
    assert _wgl.getenv(compiled_search.CORE_ENV) is None
    for raw, choice in (("pure", "pure"), (" Compiled ", "compiled"), ("", "auto")):
        monkeypatch.setenv(compiled_search.CORE_ENV, raw)
        assert _wgl.getenv(compiled_search.CORE_ENV) == os.environ[compiled_search.CORE_ENV]
        assert compiled_search.core_choice() == choice
    os.environ[compiled_search.CORE_ENV] = "pure"  # as bench/porcupine_compare sets it
    assert compiled_search.core_choice() == "pure"
    del os.environ[compiled_search.CORE_ENV]
    assert compiled_search.core_choice() == "auto"
    with pytest.raises(TypeError, match="must be a str"):
        _wgl.getenv(b"ETCDSPEC_CHECKER_CORE")


def test_the_core_choice_is_honoured_per_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set between two checks, the choice decides which core runs the second."""
    ops = _kv(3, 200, 4, keys=3)
    calls: list[str] = []
    real = compiled_search._wgl.check_fused

    def counting(*args: Any) -> Any:
        calls.append("fuse")
        return real(*args)

    monkeypatch.setattr(compiled_search._wgl, "check_fused", counting)
    monkeypatch.setenv(compiled_search.CORE_ENV, "pure")
    pure = whole_result(check_linearizable(get_model("kv"), ops))
    assert calls == []
    monkeypatch.setenv(compiled_search.CORE_ENV, "auto")
    assert whole_result(check_linearizable(get_model("kv"), ops)) == pure
    assert calls == ["fuse"]


@pytest.mark.parametrize("planted", [False, True])
def test_budgets_with_and_without_a_python_check_agree(
    monkeypatch: pytest.MonkeyPatch, planted: bool
) -> None:
    """40 keys: no limit, a time limit (checked in C), a memory bound (clock.check at
    every turn): the same whole result."""
    monkeypatch.setenv(compiled_search.CORE_ENV, "compiled")
    ops = _kv(7, 600, 10, keys=40)
    if planted:  # a get of a value nobody wrote: its key is refuted, the others not
        victim = next(i for i, op in enumerate(ops) if op.f == "get" and op.type == "ok")
        response = {**ops[victim].response, "value": "never written"}
        ops[victim] = type(ops[victim])(**{**asdict(ops[victim]), "response": response})
    checks: list[int] = []
    real_check = linearizability.BudgetClock.check

    def counted(self: Any) -> None:
        checks.append(1)
        real_check(self)

    monkeypatch.setattr(linearizability.BudgetClock, "check", counted)
    results = []
    for budget in (Budget(), Budget(timeout_s=600), Budget(max_memory_mb=1e9)):
        checks.clear()
        results.append(whole_result(check_linearizable(get_model("kv"), ops, budget)))
        if planted:
            continue  # the refuted key stops the turns: how many ran depends on its place
        if budget.max_memory_mb is not None:
            assert len(checks) >= len(results[-1]["partitions"])  # every turn asks
        else:
            assert checks == []  # all linearized in their first turns: no Python call
    assert results[0] == results[1] == results[2]
    assert len(results[0]["partitions"]) == 40
    assert results[0]["verdict"] is (Verdict.FALSE if planted else Verdict.TRUE)


def test_a_spent_time_limit_is_unknown_on_the_fused_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every partition would linearize in its first turn, but the limit is spent before
    the first: unknown, saying so, never a pass."""
    monkeypatch.setenv(compiled_search.CORE_ENV, "compiled")
    ops = _kv(9, 300, 5, keys=6)
    assert check_linearizable(get_model("kv"), ops).verdict is Verdict.TRUE
    result = check_linearizable(get_model("kv"), ops, Budget(timeout_s=0.0))
    assert result.verdict is Verdict.UNKNOWN
    assert "time budget" in result.reason
    assert all(part.verdict is Verdict.UNKNOWN for part in result.partitions)


def test_first_turns_takes_an_infinite_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline argument: +inf never calls check, -inf calls it before each turn."""
    monkeypatch.setenv(compiled_search.CORE_ENV, "compiled")
    model = get_model("kv")
    for deadline, expected in ((math.inf, 0), (-math.inf, 6)):
        fused = compiled_search.compiled_fuse(model, _kv(9, 300, 5, keys=6), 0)
        assert fused is not None
        parts = [part for _, part in fused[1]]
        calls: list[int] = []
        done, _, out = _wgl.first_turns(
            2, parts, 1 << 20, 1 << 20, lambda calls=calls: calls.append(1), RuntimeError, deadline
        )
        assert (len(done), out, len(calls)) == (6, 0, expected)


def reads_and_writes_before(
    ops: list[PreparedOp], is_read: Callable[[PreparedOp], bool]
) -> Iterator[tuple[int, list[int]]]:
    """Each ok read's index, in the order they returned, with the writes (every other
    operation) invoked since the previous read returned and before this one did."""
    reads = [i for i, p in enumerate(ops) if p.op.type == "ok" and is_read(p)]
    reads.sort(key=lambda i: ops[i].op.ret or 0)
    writes = [i for i, p in enumerate(ops) if not is_read(p)]
    writes.sort(key=lambda i: ops[i].op.call)
    taken = 0
    for read in reads:
        ret = ops[read].op.ret or 0
        start = taken
        while taken < len(writes) and ops[writes[taken]].op.call < ret:
            taken += 1
        yield read, writes[start:taken]


def _swept(ops: list[PreparedOp]) -> list[int]:
    """The register's impossible reads as the read-by-read sweep finds them."""
    written: set[Any] = set()
    found = []
    for read, writes in reads_and_writes_before(ops, lambda p: p.payload[1] == "read"):
        for write in writes:
            _, f, arg = ops[write].payload
            written.add(arg if f == "write" else arg[1])
        value = ops[read].payload[2]
        if value is not None and value not in written:
            found.append(read)
    return found


def _swept_kv(ops: list[PreparedOp]) -> list[int]:
    """kv's impossible gets as the get-by-get sweep finds them."""
    puts: set[str] = set()
    appends: dict[int, set[str]] = {}
    found = []
    for read, writes in reads_and_writes_before(ops, lambda p: p.payload[1] == "get"):
        for write in writes:
            _, f, arg = ops[write].payload
            if f == "put":
                puts.add(arg)
            else:
                appends.setdefault(len(arg), set()).add(arg)
        value = ops[read].payload[2]
        if value is None or value in puts or (value == "" and 0 in appends):
            continue
        if any(0 < n <= len(value) and value[-n:] in ends for n, ends in appends.items()):
            continue
        found.append(read)
    return found


def _impossible_agrees(ops: list[Any], model_name: str = "register") -> int:
    model = get_model(model_name)
    items = model.prepare_all(ops)[0]
    groups = model.partitions(items) or {None: items}
    swept = _swept if model_name == "register" else _swept_kv
    count = 0
    for part in groups.values():
        found = [read for read, _ in model.impossible(part)]
        assert found == swept(part)
        count += len(found)
    return count


@pytest.mark.parametrize("model", ["register", "kv"])
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_impossible_is_the_sweep_on_drawn_histories(model: str, data: st.DataObject) -> None:
    ops = data.draw(
        history_strategies.histories(
            model,
            max_events=16,
            register_values=[None, 1, 2, 3, 1.0, True],
            kv_values=[None, "", "1", "2", "1,2", ",1", ",2", "2,1", ",1,2", "9"],
            put_texts=["1", "2", ""],
        )
    )
    _impossible_agrees(ops, model)


def test_kv_impossible_is_the_sweep_on_simulated_histories() -> None:
    found = 0
    for seed in range(8):
        ops = _kv(seed, 200, 4, keys=3)
        found += _impossible_agrees(ops, "kv")
        # an early get made to answer the last put's or append's value (written later)
        last = next(op for op in reversed(ops) if op.f != "get" and op.type == "ok")
        early = next(i for i, op in enumerate(ops) if op.f == "get" and op.type == "ok")
        response = {**ops[early].response, "value": last.request["value"]}
        ops[early] = replace(ops[early], response=response)
        found += _impossible_agrees(ops, "kv")
    assert found > 0  # the comparison saw impossible gets


def test_register_impossible_is_the_sweep_on_simulated_histories() -> None:
    found = 0
    for seed in range(12):
        for fault in (None, *REGISTER_FAULTS):
            try:
                events = simulate_register(seed, ops=120, processes=4, info_rate=0.1, fault=fault)
            except ValueError:  # the fault never applied at this seed
                continue
            ops = list(build_history(events).operations)
            found += _impossible_agrees(ops)
            # an early read made to answer the last write's value (written only later)
            last = next(op for op in reversed(ops) if op.f == "write" and op.type == "ok")
            early = next(i for i, op in enumerate(ops) if op.f == "read" and op.type == "ok")
            ops[early] = replace(ops[early], response=last.request)
            found += _impossible_agrees(ops)
    assert found > 0  # the comparison saw impossible reads
    # a read of a value written only later (invoked after the read returned)
    model = get_model("register")
    ops = [
        _reg(0, "read", None, 7, call=0, ret=1),
        _reg(1, "write", 7, None, call=2, ret=3),
        _reg(2, "read", None, 7, call=4, ret=5),
    ]
    assert [read for read, _ in model.impossible(model.prepare_all(ops)[0])] == [0]
    assert _impossible_agrees(ops) == 1


def _reg(i: int, f: str, request: Any, response: Any, call: int, ret: int) -> Any:
    from etcdspec.checker.history import Operation

    return Operation(i, 0, f, request, "ok", response, call, ret, call, ret, call, ret)

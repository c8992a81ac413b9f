"""The compiled search core (checker/_wgl.c via checker/compiled_search.py) decides as the
pure loop does, with the same steps, linearizations and failure reports.

Hypothesis draws small register and kv histories of concurrent operations over few values
(many are violations; register values mix 1, 1.0 and True, which Python's == makes one
value; kv has appends, the core's TRANSFORM), and each is checked whole with
ETCDSPEC_CHECKER_CORE=pure and =compiled; every partition is also searched with no cut
(`_Search.entry_search`, the cuts' refutations hide the search's own report). Results are
compared whole but for the seconds. The files in tests/checker/data and generated
Jepsen-size histories are compared the same way. The compiled path also decodes, interns
and partitions in C (`_wgl.prepare`, `_wgl.flatten`, `_wgl.group`, kv's `_wgl.Appender`):
the C decode is compared item by item, types included, with the Python loop on odd
shapes, and a kv history with str-subclass values takes the Appender's Python path."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import history_strategies
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from etcdspec.checker import compiled_search
from etcdspec.checker.budget import UNBOUNDED, Budget, BudgetClock
from etcdspec.checker.check import load_history
from etcdspec.checker.entry_search import EntryProgress
from etcdspec.checker.history import HistoryBuilder, Operation, build_history
from etcdspec.checker.linearizability import _Search, check_linearizable
from etcdspec.checker.linearizability_result import PartitionResult
from etcdspec.checker.models import get_model
from etcdspec.checker.simulate import simulate_kv, simulate_register
from etcdspec.verdict import Verdict

DATA = Path(__file__).parent / "data"
REGISTER_VALUES: list[Any] = [None, 1, 2, 3, 1.0, True]
KV_VALUES = [None, "", "1", "2", "1,2", ",1", ",2", "2,1", ",1,2"]


def histories(model: str) -> st.SearchStrategy[list[Operation]]:
    return history_strategies.histories(
        model,
        max_events=16,
        register_values=REGISTER_VALUES,
        kv_values=KV_VALUES,
        put_texts=["1", "2", ""],
    )


def _whole(result: Any) -> dict[str, Any]:
    """A result as a dict, without the times (the one thing allowed to differ)."""
    out = asdict(result)
    out.pop("seconds", None)
    for part in out.get("partitions", ()):
        part.pop("seconds", None)
    return out


def _check_both(
    monkeypatch: pytest.MonkeyPatch, model: str, ops: list[Operation], budget: Budget = UNBOUNDED
) -> tuple[dict[str, Any], dict[str, Any]]:
    results = []
    for core in ("pure", "compiled"):
        monkeypatch.setenv(compiled_search.CORE_ENV, core)
        results.append(_whole(check_linearizable(get_model(model), ops, budget)))
    return results[0], results[1]


def _search_both(monkeypatch: pytest.MonkeyPatch, model: str, ops: list[Operation]) -> None:
    """Each partition searched with no cut, both ways: equal results."""
    checked = get_model(model)
    items = [p for p in (checked.prepare(op) for op in ops) if p is not None]
    parts = checked.partitions(items) or {"": items}
    for name, part in sorted(parts.items()):
        found: list[dict[str, Any]] = []
        for core in ("pure", "compiled"):
            monkeypatch.setenv(compiled_search.CORE_ENV, core)
            search = _Search(checked, part, name, BudgetClock(UNBOUNDED), {})
            found.append(_whole(_run(search.entry_search(time.monotonic()))))
        assert found[0] == found[1], (model, name)


def _run(search: Any) -> PartitionResult:
    while True:
        try:
            next(search)
        except StopIteration as done:
            result: PartitionResult = done.value
            return result


_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def test_the_compiled_core_is_built() -> None:
    # `make test` installs the project, which builds the extension (setup.py): a checker
    # silently on the pure loop would be 3-10x slower and this file would compare
    # nothing.
    assert compiled_search.compiled_available()


@_SETTINGS
@given(ops=histories("register"))
def test_register_histories_agree(monkeypatch: pytest.MonkeyPatch, ops: list[Operation]) -> None:
    pure, compiled = _check_both(monkeypatch, "register", ops)
    assert pure == compiled
    _search_both(monkeypatch, "register", ops)


@_SETTINGS
@given(ops=histories("kv"))
def test_kv_histories_agree(monkeypatch: pytest.MonkeyPatch, ops: list[Operation]) -> None:
    pure, compiled = _check_both(monkeypatch, "kv", ops)
    assert pure == compiled
    _search_both(monkeypatch, "kv", ops)


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("register_cas_ok.edn", "register"),
        ("register_cas_bad.edn", "register"),
        ("register_independent.edn", "register"),
        ("kv_lost_append.jsonl", "kv"),
    ],
)
def test_data_files_agree(monkeypatch: pytest.MonkeyPatch, name: str, model: str) -> None:
    history = load_history(DATA / name, "edn" if name.endswith(".edn") else "jsonl", model)
    ops = list(history.operations)
    pure, compiled = _check_both(monkeypatch, model, ops)
    assert pure == compiled
    _search_both(monkeypatch, model, ops)


def test_generated_histories_agree_and_both_verdicts_occur(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    verdicts = set()
    # Seeds 2 and 3 with a stale read are refuted (3 by the search, with its report).
    cases = [
        ("register", simulate_register(seed, ops=400, processes=5, info_rate=0.1, fault=fault))
        for seed, fault in [(0, None), (0, "lost_write"), (2, "stale_read"), (3, "stale_read")]
    ]
    cases.append(("kv", simulate_kv(3, ops=600, processes=10, info_rate=0.1)))
    for model, events in cases:
        ops = list(build_history(events).operations)
        pure, compiled = _check_both(monkeypatch, model, ops)
        assert pure == compiled
        _search_both(monkeypatch, model, ops)
        verdicts.add(pure["verdict"])
    assert verdicts == {Verdict.TRUE, Verdict.FALSE}


def test_nan_and_unhashable_values_fall_back_to_the_pure_loop() -> None:
    builder = HistoryBuilder()
    builder.add(0, "invoke", "write", float("nan"))
    builder.add(0, "ok", "write", float("nan"))
    builder.add(1, "invoke", "read", None)
    builder.add(1, "ok", "read", float("nan"))
    ops = list(builder.history().operations)
    model = get_model("register")
    items = [p for p in (model.prepare(op) for op in ops) if p is not None]
    clock = BudgetClock(UNBOUNDED)
    assert (
        compiled_search.compiled_entry_search(model, items, 0, clock, EntryProgress(), 64, 8)
        is None
    )
    # NaN is not equal to itself: the read cannot see the write, as the pure loop says.
    assert check_linearizable(model, ops).verdict is Verdict.FALSE


def test_out_of_budget_is_unknown_with_the_compiled_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(compiled_search.CORE_ENV, "compiled")
    ops = list(build_history(simulate_kv(5, ops=1500, processes=50, info_rate=0.2)).operations)
    result = check_linearizable(get_model("kv"), ops, Budget(timeout_s=0.0))
    assert result.verdict is Verdict.UNKNOWN
    assert "configurations" in result.reason or "time" in result.reason


def test_a_bad_core_choice_says_what_to_choose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiled_search.CORE_ENV, "fast")
    with pytest.raises(ValueError, match="choose one of auto, pure, compiled"):
        compiled_search.core_choice()


_ODD_VALUES = st.one_of(
    st.none(),
    st.integers(-2, 2),
    st.booleans(),
    st.text("ab", max_size=2),
    st.lists(st.integers(0, 2), max_size=3),
    st.dictionaries(st.sampled_from(["key", "value", "other"]), st.integers(0, 2), max_size=3),
    st.fixed_dictionaries({"key": st.sampled_from(["a", 1]), "value": st.integers(0, 2)}),
    st.fixed_dictionaries({"key": st.sampled_from(["a", 1]), "value": st.text("ab")}),
)


@settings(max_examples=80, deadline=None)
@given(
    model=st.sampled_from(["register", "kv"]),
    shapes=st.lists(
        st.tuples(
            st.sampled_from(["ok", "info", "fail"]),
            st.sampled_from(["read", "write", "cas", "get", "put", "append", "nope"]),
            _ODD_VALUES,
            _ODD_VALUES,
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_prepare_all_is_prepare_of_each(
    model: str, shapes: list[tuple[str, str, Any, Any]]
) -> None:
    """The models' inline `prepare_all` gives what `prepare` gives, errors included."""
    checked = get_model(model)
    ops = [
        Operation(i, i, f, request, kind, response, 2 * i, 2 * i + 1, 0, 0, 2 * i, 2 * i + 1)
        for i, (kind, f, request, response) in enumerate(shapes)
    ]

    def one_by_one() -> tuple[list[Any], int]:
        items = [checked.prepare(op) for op in ops]
        return [p for p in items if p is not None], sum(1 for p in items if p is None)

    try:
        expected: Any = one_by_one()
    except ValueError as error:
        expected = str(error)
    try:
        got: Any = checked.prepare_all(ops)
    except ValueError as error:
        got = str(error)
    assert got == expected


def test_without_the_extension_the_pure_loop_checks_and_compiled_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ops = list(
        build_history(
            simulate_register(3, ops=200, processes=5, info_rate=0.1, fault="stale_read")
        ).operations
    )
    monkeypatch.setenv(compiled_search.CORE_ENV, "compiled")
    built = _whole(check_linearizable(get_model("register"), ops))
    monkeypatch.setattr(compiled_search, "_wgl", None)
    with pytest.raises(compiled_search.CoreUnavailable, match="not built"):
        check_linearizable(get_model("register"), ops)
    monkeypatch.setenv(compiled_search.CORE_ENV, "auto")
    assert _whole(check_linearizable(get_model("register"), ops)) == built


# The C decode (`_wgl.prepare`) against the Python loop (`prepare_all_pure`), and the C
# flat arrays (`_wgl.flatten`) against `flat_ops` with the Python interning, on odd
# shapes: None, bools, floats (NaN too), nested lists, missing fields, non-str keys,
# unicode, a set (unhashable), a str subclass.
class _Text(str):
    pass


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from([1.0, -0.0, 0.5, float("nan"), float("inf"), 2**70]),
    st.text("aé✓\x00", max_size=3),
    st.sampled_from([_Text("a"), frozenset({1}), "ключ"]),
)
_SHAPES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["key", "value", "other", 1]), inner, max_size=3),
        st.fixed_dictionaries({"key": st.sampled_from(["a", "ü", 1, None])}),
        st.fixed_dictionaries({"key": st.sampled_from(["a", "ü", _Text("a")]), "value": inner}),
    ),
    max_leaves=4,
)


def _exactly(value: Any) -> Any:
    """A value with the type of every part (1, 1.0 and True differ; NaN equals NaN)."""
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, [_exactly(v) for v in value])
    return (type(value).__name__, repr(value))


def _decoded(run: Any) -> Any:
    try:
        items, dropped = run()
    except Exception as error:  # any error: both paths must raise the same
        return ("error", type(error).__name__, str(error))
    return [(id(p.op), _exactly(tuple(p)[1:])) for p in items], dropped


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    model=st.sampled_from(["register", "kv"]),
    shapes=st.lists(
        st.tuples(
            st.sampled_from(["ok", "info", "fail", _Text("ok")]),
            st.sampled_from(["read", "write", "cas", "get", "put", "append", "nope"]),
            _SHAPES,
            _SHAPES,
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_the_c_decode_is_the_python_loop_exactly(
    monkeypatch: pytest.MonkeyPatch, model: str, shapes: list[tuple[str, str, Any, Any]]
) -> None:
    monkeypatch.setenv(compiled_search.CORE_ENV, "compiled")
    checked: Any = get_model(model)
    ops = [
        Operation(i, i, f, request, kind, response, 2 * i, 2 * i + 1, 0, 0, 2 * i, 2 * i + 1)
        for i, (kind, f, request, response) in enumerate(shapes)
    ]
    in_c = _decoded(lambda: checked.prepare_all(ops))
    assert in_c == _decoded(lambda: checked.prepare_all_pure(ops))
    if in_c[0] == "error":
        return
    items, _ = checked.prepare_all(ops)
    init = checked.init()
    flat = compiled_search._wgl.flatten(checked.flat_code, items, init)
    expected = compiled_search._flat_arrays(checked, items)
    assert (flat is None) == (expected is None)
    if flat is None or expected is None:
        return
    kinds, a, b, is_ok, calls, rets, values, ids = flat
    assert (kinds, a, b) == expected[:3]
    assert [id(v) for v in values] == [id(v) for v in expected[3]]  # the first object met
    assert ids == expected[4]
    assert list(is_ok) == [p.op.type == "ok" for p in items]
    assert (calls, rets) == ([p.op.call for p in items], [p.op.ret for p in items])


def test_the_c_decode_drops_and_keys_as_the_python_loop() -> None:
    """A hand-picked set: keyed and plain values, info reads dropped, fails dropped, a
    cas pair, a unicode key; one list per model, decoded the same both ways."""
    register = get_model("register")
    kv = get_model("kv")

    def op(i: int, kind: str, f: str, request: Any, response: Any) -> Operation:
        return Operation(i, i, f, request, kind, response, i, i + 1, 0, 0, i, i + 1)

    register_ops = [
        op(0, "ok", "write", {"key": "ü", "value": 1.5}, None),
        op(1, "ok", "read", {"key": "ü"}, {"key": "ü", "value": True}),
        op(2, "info", "read", None, None),
        op(3, "fail", "cas", [1, 2], None),
        op(4, "info", "cas", [None, "✓"], None),
        op(5, "ok", "read", None, {"key": "k"}),
    ]
    kv_ops = [
        op(0, "ok", "put", {"key": "ü", "value": "✓"}, None),
        op(1, "ok", "get", {"key": "ü"}, {"key": "ü", "value": None}),
        op(2, "info", "get", {"key": "ü"}, None),
        op(3, "info", "append", {"key": "ü", "value": ",1"}, None),
    ]
    for model, ops, dropped in ((register, register_ops, 2), (kv, kv_ops, 1)):
        got = _decoded(lambda m=model, o=ops: m.prepare_all(o))
        assert got == _decoded(lambda m=model, o=ops: m.prepare_all_pure(o))
        assert got[1] == dropped
        assert len(got[0]) == len(ops) - dropped


def test_kv_appends_of_str_subclass_values_take_the_python_transform(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`prepare` accepts a str subclass (the C decode sends it there); the Appender then
    asks the model's transform, and both cores agree, a refutation included."""

    def op(i: int, kind: str, f: str, request: Any, response: Any) -> Operation:
        return Operation(i, i, f, request, kind, response, 2 * i, 2 * i + 1, 0, 0, 2 * i, 2 * i + 1)

    ops = [
        op(0, "ok", "append", {"key": "k", "value": _Text(",1")}, None),
        op(1, "ok", "append", {"key": "k", "value": ",2"}, None),
        op(2, "ok", "get", {"key": "k"}, {"key": "k", "value": ",1,2"}),
        op(3, "ok", "append", {"key": "j", "value": _Text(",1")}, None),
        op(4, "ok", "get", {"key": "j"}, {"key": "j", "value": ",2"}),
    ]
    pure, compiled = _check_both(monkeypatch, "kv", ops)
    assert pure == compiled
    assert pure["verdict"] is Verdict.FALSE
    _search_both(monkeypatch, "kv", ops)
    pure, compiled = _check_both(monkeypatch, "kv", ops[:3])
    assert pure == compiled
    assert pure["verdict"] is Verdict.TRUE

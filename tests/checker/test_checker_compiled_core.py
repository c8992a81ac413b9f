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
shapes, and a kv history with str-subclass values takes the Appender's Python path.
The fused pass (`_wgl.fuse`, operations straight to each partition's Search) is compared
with the separate passes it replaces: the whole check (or its error) with it and with it
declining, on the Hypothesis histories, the odd shapes, odd values (None, bools, 2**70,
NaN, unicode, str and float subclasses), missing fields, and partition counts of 0, 1,
300 tiny ones, one huge one beside a refutable tiny one, and partitions that need more
than their first turn; where it takes a history, its partitions, values and searches
are those of `prepare_all`, `group`, `flatten` and `Search`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import history_strategies
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from result_fields import whole_result

from etcdspec.checker import compiled_search, linearizability
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


def _check_both(
    monkeypatch: pytest.MonkeyPatch, model: str, ops: list[Operation], budget: Budget = UNBOUNDED
) -> tuple[dict[str, Any], dict[str, Any]]:
    results = []
    for core in ("pure", "compiled"):
        monkeypatch.setenv(compiled_search.CORE_ENV, core)
        results.append(whole_result(check_linearizable(get_model(model), ops, budget)))
    return results[0], results[1]


def _check_unfused(
    monkeypatch: pytest.MonkeyPatch, model: str, ops: list[Operation], budget: Budget = UNBOUNDED
) -> Any:
    """The compiled check with the fused pass declining (the separate passes run): the
    whole result, or the error's type and text."""
    monkeypatch.setenv(compiled_search.CORE_ENV, "compiled")
    with monkeypatch.context() as patch:
        patch.setattr(linearizability, "compiled_check_fused", lambda *args: None)
        try:
            return whole_result(check_linearizable(get_model(model), ops, budget))
        except Exception as error:  # any error: the fused path must raise the same
            return ("error", type(error).__name__, str(error))


def _check_fused(
    monkeypatch: pytest.MonkeyPatch, model: str, ops: list[Operation], budget: Budget = UNBOUNDED
) -> Any:
    """The compiled check as it runs by default (the fused pass first), as `_check_unfused`."""
    monkeypatch.setenv(compiled_search.CORE_ENV, "compiled")
    try:
        return whole_result(check_linearizable(get_model(model), ops, budget))
    except Exception as error:
        return ("error", type(error).__name__, str(error))


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
            found.append(whole_result(_run(search.entry_search(time.monotonic()))))
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


@pytest.mark.parametrize("model", ["register", "kv"])
@_SETTINGS
@given(data=st.data())
def test_histories_agree(monkeypatch: pytest.MonkeyPatch, model: str, data: st.DataObject) -> None:
    ops = data.draw(histories(model))
    pure, compiled = _check_both(monkeypatch, model, ops)
    assert pure == compiled
    assert _check_unfused(monkeypatch, model, ops) == compiled
    _search_both(monkeypatch, model, ops)


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
    assert _check_unfused(monkeypatch, model, ops) == compiled
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
        assert _check_unfused(monkeypatch, model, ops) == compiled
        assert _fuse(model, ops) is not None  # these are the fused pass's shapes
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
    built = whole_result(check_linearizable(get_model("register"), ops))
    monkeypatch.setattr(compiled_search, "_wgl", None)
    with pytest.raises(compiled_search.CoreUnavailable, match="not built"):
        check_linearizable(get_model("register"), ops)
    monkeypatch.setenv(compiled_search.CORE_ENV, "auto")
    assert whole_result(check_linearizable(get_model("register"), ops)) == built


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
    # The fused pass: the whole check (or its error) as with the separate passes.
    fused = _check_fused(monkeypatch, model, ops)
    assert fused == _check_unfused(monkeypatch, model, ops)
    _fused_is_the_separate_passes(checked, ops)
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


# The fused pass (`_wgl.fuse`): operations straight to each partition's Search.
def _fuse(model: str, ops: list[Operation], seed: int = 0) -> Any:
    checked: Any = get_model(model)
    return compiled_search._wgl.fuse(checked.flat_code, ops, Operation, "", None, seed)


def _fused_is_the_separate_passes(checked: Any, ops: list[Operation]) -> None:
    """When the fused pass takes a history, its partitions, operations, interned values
    (the same objects) and searches (run to the end: status, steps, outcome) are those
    of `prepare_all` + `partitions` + `flatten` + `Search`; when it declines, an operation
    is one it must not take (a shape `prepare` decides, or a value it does not intern)."""
    fused = compiled_search._wgl.fuse(checked.flat_code, ops, Operation, "", None, 7)
    try:
        items, dropped = checked.prepare_all(ops)
    except Exception:  # any error: the separate passes' to raise
        assert fused is None
        return
    if fused is None:
        return
    assert fused[0] == dropped
    groups = compiled_search._wgl.group(items)
    assert [key for key, *_ in fused[1]] == list(groups)
    for key, part_ops, search, values, infos in fused[1]:
        part = groups[key]
        assert part_ops == [p.op for p in part]
        assert infos == sum(1 for p in part if p.op.type != "ok")
        flat = compiled_search._wgl.flatten(checked.flat_code, part, None)
        assert flat is not None
        kinds, a, b, is_ok, calls, rets, flat_values, ids = flat
        assert [id(v) for v in values] == [id(v) for v in flat_values]
        step = (
            compiled_search._wgl.Appender(flat_values, ids, None)
            if checked.flat_code == compiled_search.KV
            else None
        )
        again = compiled_search._wgl.Search(kinds, a, b, is_ok, calls, rets, 0, 7, step)
        assert search.run(1 << 40) == again.run(1 << 40)
        assert (search.steps, search.outcome()) == (again.steps, again.outcome())


class _Exotic(float):
    pass


@pytest.mark.parametrize(
    ("model", "value", "taken"),
    [
        ("register", None, True),
        ("register", True, True),
        ("register", 2**70, True),
        ("register", "ключ✓", True),
        ("register", -0.0, True),
        ("register", float("nan"), False),  # not equal to itself: not internable
        ("register", _Text("a"), False),  # a str subclass: `prepare` decides
        ("register", _Exotic(1.0), False),
        ("register", frozenset({1}), False),
        ("register", (1, 2), False),
        ("kv", "ключ✓", True),
        ("kv", _Text("a"), False),
    ],
)
def test_the_fused_pass_takes_plain_values_only(
    monkeypatch: pytest.MonkeyPatch, model: str, value: Any, taken: bool
) -> None:
    """Odd values: the fused pass takes None, bools, ints (2**70 too), floats but NaN and
    exact str; anything else goes to the separate passes. Either way the whole check is
    the separate passes' and the pure core's."""
    builder = HistoryBuilder()
    if model == "register":
        builder.add(0, "invoke", "write", value)
        builder.add(1, "invoke", "read", None)
        builder.add(0, "ok", "write", value)
        builder.add(1, "ok", "read", value)
    else:
        builder.add(0, "invoke", "put", {"key": "k", "value": value})
        builder.add(1, "invoke", "get", {"key": "k"})
        builder.add(0, "ok", "put", {"key": "k", "value": value})
        builder.add(1, "ok", "get", {"key": "k", "value": value})
    ops = list(builder.history().operations)
    assert (_fuse(model, ops) is not None) == taken
    fused = _check_fused(monkeypatch, model, ops)
    assert fused == _check_unfused(monkeypatch, model, ops)
    pure, _ = _check_both(monkeypatch, model, ops)
    assert fused == pure
    _fused_is_the_separate_passes(get_model(model), ops)


def _op(i: int, kind: str, f: str, request: Any, response: Any) -> Operation:
    return Operation(i, i, f, request, kind, response, 2 * i, 2 * i + 1, 0, 0, 2 * i, 2 * i + 1)


def test_missing_fields_and_unknown_kinds_give_the_separate_passes_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cases = [
        ("kv", [_op(0, "ok", "put", {"value": "1"}, None)]),  # no key
        ("kv", [_op(0, "ok", "get", {"key": "k"}, {"key": "k"})]),  # no value in the response
        ("kv", [_op(0, "ok", "put", {"key": 1, "value": "1"}, None)]),  # not a str key
        ("register", [_op(0, "ok", "cas", [1], None)]),  # a cas needs [old, new]
        ("register", [_op(0, "ok", "swap", 1, None)]),
        ("register", [_op(0, "ok", "write", {"key": "k", "other": 1}, None)]),
    ]
    for model, ops in cases:
        assert _fuse(model, ops) is None
        got = _check_fused(monkeypatch, model, ops)
        assert got[0] == "error", (model, ops)
        assert got == _check_unfused(monkeypatch, model, ops)


def _kv_ops(seed: int, ops: int, processes: int, keys: int, info_rate: float = 0.1) -> list[Any]:
    events = simulate_kv(seed, ops=ops, processes=processes, info_rate=info_rate, keys=keys)
    return list(build_history(events).operations)


def test_partition_counts_zero_and_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """No operation, only dropped ones, one plain register, one kv key: the same results
    fused, unfused and pure (empty input is unknown, never a pass)."""
    only_fails = [_op(0, "fail", "write", 1, None), _op(1, "fail", "put", 1, None)]
    cases: list[tuple[str, list[Any]]] = [
        ("register", []),
        ("kv", []),
        ("register", only_fails[:1]),
        ("register", list(build_history(simulate_register(1, ops=60, processes=3)).operations)),
        ("kv", _kv_ops(1, 80, 4, keys=1)),
    ]
    for model, ops in cases:
        fused = _check_fused(monkeypatch, model, ops)
        assert fused == _check_unfused(monkeypatch, model, ops)
        assert fused == _check_both(monkeypatch, model, ops)[0]
        assert len(fused["partitions"]) == (1 if ops and ops is not cases[2][1] else 0)
        if not fused["partitions"]:
            assert fused["verdict"] is Verdict.UNKNOWN
            assert "nothing was checked" in fused["reason"]
    register_parts = _check_fused(monkeypatch, "register", cases[3][1])["partitions"]
    assert register_parts[0]["partition"] is None  # a plain register: one unnamed partition
    for model in ("register", "kv"):
        allowed = whole_result(check_linearizable(get_model(model), [], allow_empty=True))
        assert allowed["partitions"] == ()


def test_many_tiny_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """300 keys with 1-6 operations each (some stale gets planted): per-partition verdicts,
    steps and reports the same fused, unfused and pure."""
    from bench.porcupine_compare import plant_stale_get

    events = simulate_kv(11, ops=900, processes=10, info_rate=0.1, keys=300)
    for planted in (False, True):
        if planted:
            events, _ = plant_stale_get(events)
        ops = list(build_history(events).operations)
        fused = _check_fused(monkeypatch, "kv", ops)
        assert len(fused["partitions"]) > 200
        assert fused == _check_unfused(monkeypatch, "kv", ops)
        assert fused == _check_both(monkeypatch, "kv", ops)[0]
        assert (fused["verdict"] is Verdict.FALSE) == planted


def test_one_huge_partition_and_a_refutable_tiny_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hard 50-client key (20 % info) beside a tiny key whose get reads a value nobody
    wrote: the tiny one is refuted and decides the history; the huge one ends unknown,
    not searched to the end. Fused and unfused alike."""
    hard = _kv_ops(5, 1500, 50, keys=1, info_rate=0.2)
    base = 2 * len(hard) + 10
    tiny = [
        Operation(10_000, 900, "put", {"key": "tiny", "value": "1"}, "ok", None, base, base + 1, 0, 0, base, base + 1),
        Operation(10_001, 901, "get", {"key": "tiny"}, "ok", {"key": "tiny", "value": "2"}, base + 2, base + 3, 0, 0, base + 2, base + 3),
    ]  # fmt: skip
    ops = hard + tiny
    budget = Budget(timeout_s=30.0)
    fused = _check_fused(monkeypatch, "kv", ops, budget)
    assert fused == _check_unfused(monkeypatch, "kv", ops, budget)
    assert fused["verdict"] is Verdict.FALSE
    parts = {part["partition"]: part for part in fused["partitions"]}
    assert parts["tiny"]["verdict"] is Verdict.FALSE
    assert parts["k0"]["verdict"] is Verdict.UNKNOWN
    assert "partition tiny is refuted" in parts["k0"]["reason"]


def test_partitions_that_need_more_than_their_first_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two kv keys each searched over 45,000 steps (more than one turn of 32,768): the
    fused first turns hand them to the turns loop, which goes on from where they are;
    the results are the separate passes', with a stale get planted too, and the pure
    core's (not compared when planted: a cut after the first turn reports the steps of
    that turn, 16x longer compiled)."""
    from bench.porcupine_compare import plant_stale_get

    events = simulate_kv(2, ops=200, processes=12, info_rate=0.2, keys=2)
    for planted in (False, True):
        if planted:
            events, _ = plant_stale_get(events)
        ops = list(build_history(events).operations)
        fused = _check_fused(monkeypatch, "kv", ops)
        assert fused == _check_unfused(monkeypatch, "kv", ops)
        if not planted:
            assert fused == _check_both(monkeypatch, "kv", ops)[0]
            assert min(part["steps"] for part in fused["partitions"]) > 32_768
        else:
            assert fused["verdict"] is Verdict.FALSE

"""Linearizability search: register/CAS with info ops, kv key by key, etcd with revisions,
histories generated from the store model with and without faults, budgets."""

from __future__ import annotations

import pytest

from etcdspec.checker.budget import Budget
from etcdspec.checker.history import HistoryBuilder, build_history
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.models import get_model
from etcdspec.checker.simulate import (
    ETCD_FAULTS,
    REGISTER_FAULTS,
    simulate_etcd,
    simulate_kv,
    simulate_register,
)
from etcdspec.verdict import Verdict

# (name, [(process, type, f, value)], expected verdict)
REGISTER_CASES = [
    (
        "sequential write then read",
        [
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", 1),
        ],
        Verdict.TRUE,
    ),
    (
        "stale read after a completed write",
        [
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", None),
        ],
        Verdict.FALSE,
    ),
    (
        "read concurrent with write sees either",
        [
            (0, "invoke", "write", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", None),
            (0, "ok", "write", 1),
        ],
        Verdict.TRUE,
    ),
    (
        "write seen before its invoke",
        [
            (1, "invoke", "read", None),
            (1, "ok", "read", 7),
            (0, "invoke", "write", 7),
            (0, "ok", "write", 7),
        ],
        Verdict.FALSE,
    ),
    (
        "info cas may have happened",
        [
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (1, "invoke", "cas", [1, 2]),
            (1, "info", "cas", [1, 2]),
            (2, "invoke", "read", None),
            (2, "ok", "read", 2),
        ],
        Verdict.TRUE,
    ),
    (
        "info cas may not have happened",
        [
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (1, "invoke", "cas", [1, 2]),
            (1, "info", "cas", [1, 2]),
            (2, "invoke", "read", None),
            (2, "ok", "read", 1),
        ],
        Verdict.TRUE,
    ),
    (
        "info write cannot be undone",
        [
            (0, "invoke", "write", 1),
            (0, "info", "write", 1),
            (2, "invoke", "read", None),
            (2, "ok", "read", 1),
            (3, "invoke", "read", None),
            (3, "ok", "read", None),
        ],
        Verdict.FALSE,
    ),
    (
        "cas ok from the wrong value",
        [
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (1, "invoke", "cas", [3, 4]),
            (1, "ok", "cas", [3, 4]),
        ],
        Verdict.FALSE,
    ),
    (
        "failed cas takes no effect",
        [
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (1, "invoke", "cas", [1, 4]),
            (1, "fail", "cas", [1, 4]),
            (2, "invoke", "read", None),
            (2, "ok", "read", 4),
        ],
        Verdict.FALSE,
    ),
    (
        "lost write",
        [
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (0, "invoke", "write", 2),
            (0, "ok", "write", 2),
            (1, "invoke", "read", None),
            (1, "ok", "read", 1),
        ],
        Verdict.FALSE,
    ),
]


def _history(rows: list[tuple[object, str, str, object]]):  # type: ignore[no-untyped-def]
    builder = HistoryBuilder()
    for process, type_, f, value in rows:
        builder.add(process, type_, f, value)  # type: ignore[arg-type]
    return builder.history()


@pytest.mark.parametrize(
    ("name", "rows", "verdict"), REGISTER_CASES, ids=[c[0] for c in REGISTER_CASES]
)
def test_register_cases(
    name: str, rows: list[tuple[object, str, str, object]], verdict: Verdict
) -> None:
    result = check_linearizable(get_model("register"), _history(rows).operations)
    assert result.verdict is verdict, result.describe()
    if verdict is Verdict.FALSE:
        assert result.failure is not None and result.failure.reason


def test_failure_reports_prefix_state_and_window() -> None:
    rows = REGISTER_CASES[1][1]
    result = check_linearizable(get_model("register"), _history(rows).operations)
    failure = result.failure
    assert failure is not None
    assert failure.failing_op == 1
    assert failure.prefix == (0,)
    assert failure.state == "register = 1"
    assert 1 in failure.window


@pytest.mark.parametrize("seed", range(6))
def test_generated_register_histories_are_linearizable(seed: int) -> None:
    history = build_history(simulate_register(seed, ops=100, processes=5, info_rate=0.15))
    assert sum(op.type == "info" for op in history.operations) > 0
    assert check_linearizable(get_model("register"), history.operations).verdict is Verdict.TRUE


@pytest.mark.parametrize("fault", REGISTER_FAULTS)
@pytest.mark.parametrize("seed", range(3))
def test_generated_sequential_register_faults_are_found(fault: str, seed: int) -> None:
    history = build_history(
        simulate_register(seed, ops=200, processes=1, info_rate=0.0, fault=fault)
    )
    assert check_linearizable(get_model("register"), history.operations).verdict is Verdict.FALSE


def test_keyed_register_is_checked_key_by_key() -> None:
    history = build_history(simulate_register(1, ops=300, keys=4))
    result = check_linearizable(get_model("register"), history.operations)
    assert result.verdict is Verdict.TRUE
    assert len(result.partitions) == 4


@pytest.mark.parametrize("seed", range(3))
def test_generated_kv_histories_hold_per_key(seed: int) -> None:
    history = build_history(simulate_kv(seed, ops=500, keys=5))
    result = check_linearizable(get_model("kv"), history.operations)
    assert result.verdict is Verdict.TRUE
    assert len(result.partitions) == 5


def test_kv_append_lost_is_found() -> None:
    rows = [
        (0, "invoke", "append", {"key": "a", "value": "x"}),
        (0, "ok", "append", {"key": "a", "value": "x"}),
        (1, "invoke", "append", {"key": "a", "value": "y"}),
        (1, "ok", "append", {"key": "a", "value": "y"}),
        (2, "invoke", "get", {"key": "a"}),
        (2, "ok", "get", {"key": "a", "value": "y"}),
    ]
    result = check_linearizable(get_model("kv"), _history(rows).operations)
    assert result.verdict is Verdict.FALSE
    assert result.failure is not None and result.failure.partition == "a"


@pytest.mark.parametrize("seed", range(5))
def test_generated_etcd_histories_are_linearizable(seed: int) -> None:
    history = build_history(simulate_etcd(seed, ops=400, processes=6, info_rate=0.1))
    result = check_linearizable(get_model("etcd"), history.operations)
    assert result.verdict is Verdict.TRUE, result.describe()


@pytest.mark.parametrize("fault", ETCD_FAULTS)
@pytest.mark.parametrize("seed", range(3))
def test_generated_etcd_faults_are_found(fault: str, seed: int) -> None:
    history = build_history(simulate_etcd(seed, ops=300, processes=5, fault=fault))
    result = check_linearizable(get_model("etcd"), history.operations)
    assert result.verdict is Verdict.FALSE, result.describe()


def test_etcd_with_leases_and_expiry_holds() -> None:
    history = build_history(simulate_etcd(2, ops=200, processes=4, leases=True))
    assert any(op.f == "lease_grant" for op in history.operations)
    assert check_linearizable(get_model("etcd"), history.operations).verdict is Verdict.TRUE


def test_spent_time_budget_is_unknown_never_a_pass() -> None:
    history = build_history(simulate_register(9, ops=2000, processes=30, info_rate=0.3))
    result = check_linearizable(get_model("register"), history.operations, Budget(timeout_s=0.0))
    assert result.verdict is Verdict.UNKNOWN
    assert "time budget" in result.reason


def test_memory_bound_is_unknown() -> None:
    history = build_history(simulate_register(9, ops=200))
    result = check_linearizable(get_model("register"), history.operations, Budget(max_memory_mb=1))
    assert result.verdict is Verdict.UNKNOWN
    assert "memory bound" in result.reason

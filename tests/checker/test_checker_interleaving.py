"""Partitions take turns: a hard partition cannot hold back one that can be refuted.

The hard partition is twelve overlapping appends and a read nobody could have seen
(12! orders to rule out), placed where a one-after-another search would start: first by
key and cheapest-looking (no info operation, fewer operations). The refutable one is a
plain stale read. The refutation must decide the history long before the budget, which
is only there so that a regression fails as unknown instead of hanging."""

from __future__ import annotations

from dataclasses import replace

import pytest

from etcdspec.checker.budget import Budget
from etcdspec.checker.history import HistoryBuilder, HistoryEvent, build_history
from etcdspec.checker.linearizability import SLICE_STEPS, check_linearizable
from etcdspec.checker.models import get_model
from etcdspec.checker.simulate import simulate_kv, simulate_register
from etcdspec.verdict import Verdict

APPENDS = 12


def _history() -> list[HistoryEvent]:
    history = HistoryBuilder()
    # "a": every append overlaps every other, then a read no order gives ("0" is
    # appended once, so never "00"; the cut of impossible reads lets it through).
    for p in range(APPENDS):
        history.add(p, "invoke", "append", {"key": "a", "value": f"{p:x}"})
    for p in range(APPENDS):
        history.add(p, "ok", "append", {"key": "a", "value": f"{p:x}"})
    history.add(100, "invoke", "get", {"key": "a"})
    history.add(100, "ok", "get", {"key": "a", "value": "00"})
    # "b": sequential puts, one info put, then a read of an overwritten value.
    for n in range(20):
        history.add(200, "invoke", "put", {"key": "b", "value": f"v{n}"})
        history.add(200, "ok", "put", {"key": "b", "value": f"v{n}"})
    history.add(201, "invoke", "put", {"key": "b", "value": "maybe"})
    history.add(201, "info", "put", {"key": "b", "value": "maybe"})
    history.add(202, "invoke", "get", {"key": "b"})
    history.add(202, "ok", "get", {"key": "b", "value": "v3"})
    return history.events


def test_a_refutable_partition_is_refuted_past_a_hard_one() -> None:
    history = build_history(_history())
    result = check_linearizable(get_model("kv"), history.operations, Budget(timeout_s=120))
    assert result.verdict is Verdict.FALSE
    failure = result.failure
    assert failure is not None and failure.partition == "b"
    by_name = {part.partition: part for part in result.partitions}
    assert by_name["a"].verdict is Verdict.UNKNOWN
    assert "partition b is refuted" in by_name["a"].reason
    # "a" had its turns, and far fewer steps than its 12! orders.
    assert 0 < by_name["a"].steps < 1000 * SLICE_STEPS


def test_the_hard_partition_alone_runs_out_of_budget() -> None:
    events = [e for e in _history() if e.value["key"] == "a"]
    result = check_linearizable(
        get_model("kv"), build_history(events).operations, Budget(timeout_s=0.5)
    )
    assert result.verdict is Verdict.UNKNOWN
    (part,) = result.partitions
    assert part.steps > SLICE_STEPS and part.seconds > 0
    assert "time budget of 0.5 s spent" in part.reason


def test_every_partition_reports_its_verdict_steps_and_time() -> None:
    history = build_history(simulate_kv(3, ops=400, processes=8, info_rate=0.1, keys=6))
    result = check_linearizable(get_model("kv"), history.operations)
    assert result.verdict is Verdict.TRUE
    assert len(result.partitions) == 6
    for part in result.partitions:
        assert part.verdict is Verdict.TRUE and part.steps > 0 and part.seconds > 0
    listed = result.to_json()["partitions"]
    assert [p["partition"] for p in listed] == sorted(p.partition or "" for p in result.partitions)
    assert sum(p["seconds"] for p in listed) <= result.seconds + 0.01


def _phantom(events: list[HistoryEvent], key: str, after: int) -> list[HistoryEvent]:
    """`events` with the `after`-th ok get of `key` answering a value nobody wrote."""
    seen = 0
    for i, event in enumerate(events):
        if event.type == "ok" and event.f == "get" and event.value["key"] == key:
            seen += 1
            if seen == after:
                events[i] = replace(event, value={"key": key, "value": "never-written"})
                return events
    raise AssertionError(f"no {after}th get of {key}")


def test_a_read_of_a_value_nobody_wrote_is_refuted_without_a_search() -> None:
    # 50 clients, 20 % info: the other keys' searches are long; the phantom read on
    # the last key (in name and in difficulty) decides the history on its first turn.
    events = _phantom(simulate_kv(0, ops=3000, processes=50, info_rate=0.2, keys=10), "k9", 5)
    result = check_linearizable(get_model("kv"), build_history(events).operations)
    assert result.verdict is Verdict.FALSE
    assert result.failure is not None and result.failure.partition == "k9"
    assert "no put or append of k9" in result.failure.reason
    assert all(p.verdict is not Verdict.TRUE or p.partition != "k9" for p in result.partitions)


def test_a_register_read_of_an_unwritten_value_is_refuted_without_a_search() -> None:
    history = HistoryBuilder()
    history.add(0, "invoke", "write", 1)
    history.add(0, "ok", "write", 1)
    history.add(1, "invoke", "read", None)
    history.add(1, "ok", "read", 7)
    history.add(2, "invoke", "write", 7)  # invoked after the read returned
    history.add(2, "ok", "write", 7)
    result = check_linearizable(get_model("register"), history.history().operations)
    assert result.verdict is Verdict.FALSE
    assert result.failure is not None and "no write or cas" in result.failure.reason
    assert result.partitions[0].steps == 0


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("model", ["kv", "register"])
def test_the_cut_never_refutes_a_linearizable_history(model: str, seed: int) -> None:
    if model == "kv":
        events = simulate_kv(seed, ops=300, processes=6, info_rate=0.2, keys=3)
    else:
        events = simulate_register(seed, ops=300, processes=6, info_rate=0.2, keys=3)
    checker_model = get_model(model)
    operations = build_history(events).operations
    prepared = [p for p in map(checker_model.prepare, operations) if p is not None]
    parts = checker_model.partitions(prepared) or {None: prepared}
    assert all(checker_model.impossible(items) == [] for items in parts.values())
    assert check_linearizable(checker_model, operations).verdict is Verdict.TRUE

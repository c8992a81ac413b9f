"""Speed work must not change what the checker says (issue 20, the 100k-operation
history): the fast reader builds the events and operations the schema path and the
dataclass constructors build, and `etcdspec check`'s results (verdicts, step counts,
linearizations, failure reports, watch checks, notes) on the corpus files and on
simulated etcd histories (faults, leases, watches, 5-30 processes) are those recorded
before the speed work, in tests/checker/data/speed_invariance.json (made at main
550afc2). A checker change that is meant to change results rewrites that file:
`.venv/bin/python -m pytest tests/checker/test_checker_speed_invariance.py --rewrite-golden`
(the rewritten file fails the test once; say why in the commit)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from etcdspec.checker.check import CheckOptions, check_history, load_history
from etcdspec.checker.history import (
    HistoryEvent,
    Operation,
    assembled,
    build_history,
    parse_event,
    read_history,
    write_history,
)
from etcdspec.checker.simulate import simulate_etcd

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "speed_invariance.json"

# (name, seed, ops, processes, info_rate, fault, leases, watch): every fault, leases,
# watches, 5 to 30 processes.
SIMULATED = [
    ("plain-5", 1, 300, 5, 0.1, None, False, False),
    ("plain-30-info", 2, 400, 30, 0.3, None, False, False),
    ("leases-8", 3, 300, 8, 0.15, None, True, False),
    ("leases-watch-12", 4, 300, 12, 0.1, None, True, True),
    ("watch-20", 5, 300, 20, 0.2, None, False, True),
    ("stale-read-5", 6, 300, 5, 0.1, "stale_read", False, False),
    ("lost-write-10", 7, 300, 10, 0.1, "lost_write", False, False),
    ("revision-backwards-15", 8, 300, 15, 0.1, "revision_backwards", True, False),
    ("phantom-read-30", 9, 300, 30, 0.2, "phantom_read", False, True),
    ("stale-read-leases-watch-25", 10, 400, 25, 0.1, "stale_read", True, True),
]


def _corpus() -> list[tuple[str, str, str]]:
    """(file name, format, model) of every etcd, kv and register history in data/."""
    found = []
    for path in sorted(DATA.iterdir()):
        if path.suffix == ".edn":
            found.append((path.name, "edn", "register"))
        elif path.suffix == ".jsonl" and not path.name.startswith("bad_"):
            model = "kv" if path.name.startswith("kv_") else "etcd"
            found.append((path.name, "jsonl", model))
    return found


def _summary(path: Path, fmt: str, model: str) -> dict[str, Any]:
    """What `etcdspec check` says about a history, without its times: result.json
    plus each partition's linearization and the failure report, and its digest."""
    report = check_history(load_history(path, fmt, model), CheckOptions(model=model))
    shown = report.to_json()
    shown.pop("seconds")
    shown.pop("source")
    for check in shown["checks"]:
        check.pop("seconds", None)
    lin = report.linearizability
    if lin is not None:
        shown["linearizability"].pop("seconds")
        for part in shown["linearizability"]["partitions"]:
            part.pop("seconds")
        shown["linearizations"] = [list(p.linearization) for p in lin.partitions]
        shown["failure_text"] = lin.failure.describe() if lin.failure is not None else None
        shown["synthetic"] = [op.describe() for op in lin.synthetic]
    text = json.dumps(shown, sort_keys=True, ensure_ascii=False, default=str)
    return {
        "valid": shown["valid"],
        "steps": [p["steps"] for p in (shown["linearizability"] or {}).get("partitions", [])],
        "digest": hashlib.sha256(text.encode()).hexdigest()[:16],
    }


def _all_summaries(folder: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for name, fmt, model in _corpus():
        out[name] = _summary(DATA / name, fmt, model)
    for name, seed, ops, processes, info, fault, leases, watch in SIMULATED:
        path = folder / f"{name}.jsonl"
        events = simulate_etcd(
            seed, ops=ops, processes=processes, info_rate=info, fault=fault, leases=leases,
            watch=watch,
        )  # fmt: skip
        write_history(events, path)
        out[f"simulated {name}"] = _summary(path, "jsonl", "etcd")
    return out


def test_results_are_those_recorded_before_the_speed_work(
    tmp_path: Path, rewrite_golden: bool
) -> None:
    found = _all_summaries(tmp_path)
    if rewrite_golden:
        GOLDEN.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        pytest.fail(f"rewrote {GOLDEN.name}: review the diff")
    expected = json.loads(GOLDEN.read_text())
    assert set(found) == set(expected), "the corpus changed: rewrite the golden file"
    changed = {
        name: (expected[name], found[name]) for name in found if found[name] != expected[name]
    }
    assert not changed, f"results changed (recorded, now): {changed}"
    # Not vacuous: both verdicts occur among the simulated histories and the corpus.
    verdicts = {summary["valid"] for summary in found.values()}
    assert {True, False} <= verdicts


def test_assembled_is_what_the_constructor_makes() -> None:
    for cls in (HistoryEvent, Operation):
        names = [f.name for f in dataclasses.fields(cls)]
        values = {name: f"value of {name}" for name in names}
        made, built = assembled(cls, dict(values)), cls(**values)
        assert vars(made) == vars(built)
        assert repr(made) == repr(built)
        # What `assembled` relies on: a frozen dataclass with a __dict__ and no hook.
        assert not hasattr(cls, "__post_init__") and not hasattr(cls, "__slots__")
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.index = 1  # type: ignore[misc]


def _reference_operation(events: list[HistoryEvent], op: Operation) -> Operation:
    """The operation as the Operation constructor builds it from its events."""
    invoke = events[op.call]
    complete = events[op.ret] if op.ret is not None else None
    if complete is None:  # an info operation: its completion, if any, is after call
        later = [e for e in events[op.call + 1 :] if e.process == invoke.process]
        complete = later[0] if later and later[0].type == "info" else None
        return Operation(
            op.id, invoke.process, invoke.f, invoke.value, "info",
            complete.value if complete is not None else None, op.call, None, invoke.time,
            None, invoke.index, complete.index if complete is not None else None, invoke.user,
        )  # fmt: skip
    response = complete.value
    if complete.type == "fail" and complete.error is not None and response is None:
        response = {"error": complete.error}
    return Operation(
        op.id, invoke.process, invoke.f, invoke.value, complete.type, response, op.call,
        op.ret, invoke.time, complete.time, invoke.index, complete.index, invoke.user,
    )  # fmt: skip


def test_the_fast_reader_reads_what_the_schema_path_reads(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    events = simulate_etcd(11, ops=400, processes=12, info_rate=0.2, leases=True, watch=True)
    write_history(events, path)
    fast = read_history(path)
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    slow = [parse_event(json.loads(line), str(path), n) for n, line in enumerate(lines, 1)]
    assert [vars(e) for e in fast.events] == [vars(e) for e in slow]
    again = build_history(slow, str(path))
    assert [vars(op) for op in fast.operations] == [vars(op) for op in again.operations]
    assert [vars(op) for op in fast.operations] == [
        vars(_reference_operation(slow, op)) for op in fast.operations
    ]
    kinds = {op.type for op in fast.operations}
    assert {"ok", "info"} <= kinds and fast.watch_events

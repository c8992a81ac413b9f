"""The trace-validation stage of `etcdspec verify` (conform/trace_stage.py): its quick
run records a real 3-member cluster of our server under load with a kill -9 of the
leader and its restart, and the traces replay, every kind of check having had work; the
same stage with a planted bug (the vote is never persisted) fails at the restart; a
replay that checked too little is UNKNOWN, not a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from etcdspec.checker.trace_check import TraceResult
from etcdspec.conform.trace_stage import NAME, TracePlan, judge, run_stage, run_trace_stage
from etcdspec.stage import StageOptions
from etcdspec.verdict import Verdict


@pytest.mark.timeout(150)
def test_quick_stage_replays_a_loaded_cluster_with_a_kill(tmp_path: Path) -> None:
    result = run_stage(StageOptions(report_dir=tmp_path, seed=1, quick=True))
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.name == NAME
    witnesses = result.details["witnesses"]
    assert witnesses["restarts"] >= 1 and witnesses["leader commits"] >= 25
    assert witnesses["matched receives"] >= 100
    assert result.details["writes"] >= 75
    report = Path(result.details["report"])
    assert sorted(p.name for p in report.glob("*.trace.ndjson")) == [
        "m1.trace.ndjson",
        "m2.trace.ndjson",
        "m3.trace.ndjson",
    ]


@pytest.mark.timeout(150)
def test_stage_with_the_vote_never_persisted_fails_at_the_restart(tmp_path: Path) -> None:
    options = StageOptions(report_dir=tmp_path, quick=True)
    result = run_trace_stage(options, failpoints=("forget_vote_on_restart",))
    assert result.verdict is Verdict.FALSE, result.describe()
    assert "DurableRestart" in result.summary, result.summary


PLAN = TracePlan(writers=1, writes_per_phase=10, kills=("leader", "follower"), snapshot_count=5)


@pytest.mark.parametrize(
    ("witnesses", "verdict", "why"),
    [
        ((("restarts", 2), ("leader commits", 40)), Verdict.TRUE, ""),
        ((("restarts", 1), ("leader commits", 40)), Verdict.UNKNOWN, "1 restarts"),
        ((("restarts", 2), ("leader commits", 3)), Verdict.UNKNOWN, "3 leader commits"),
    ],
)
def test_a_replay_that_checked_too_little_is_unknown(
    witnesses: tuple[tuple[str, int], ...], verdict: Verdict, why: str
) -> None:
    result = TraceResult(Verdict.TRUE, 100, ("n1", "n2", "n3"), 0, witnesses=witnesses)
    assert judge(result, PLAN) == (verdict, "the replay checked too little: " + why if why else "")

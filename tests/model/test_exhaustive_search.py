"""The exhaustive explorer: it exhausts small bounds of the correct model (verdict TRUE),
finds Raft bugs with a shortest replayable counterexample, and never calls a search that
ran out of budget a pass."""

from __future__ import annotations

from typing import Any

import pytest

from etcdspec.model.bugs import BugSet
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig, ConfigError
from etcdspec.model.exhaustive import explore_exhaustive, finite_config, small_config
from etcdspec.model.invariants import InvariantViolation
from etcdspec.verdict import Verdict


@pytest.mark.parametrize(
    "bounds",
    [
        {"nodes": 3, "max_term": 1, "max_log": 1},
        {"nodes": 3, "max_term": 1, "max_log": 0, "max_crashes": 1},
        {"nodes": 5, "max_term": 1, "max_log": 0, "max_messages": 2},
    ],
    ids=["3-nodes-term1-log1", "3-nodes-term1-crash", "5-nodes-term1"],
)
def test_correct_model_exhausts_small_bounds(bounds: dict[str, Any]) -> None:
    result = explore_exhaustive(small_config(**bounds), time_budget_s=120)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.counterexample is None and result.violation is None
    assert result.distinct_states > 50


@pytest.mark.parametrize(
    ("limits", "reason"),
    [({"max_states": 100}, "max_states"), ({"max_depth": 3}, "max_depth")],
)
def test_a_budget_that_runs_out_is_unknown(limits: dict[str, Any], reason: str) -> None:
    result = explore_exhaustive(small_config(max_term=2, max_log=1), **limits)
    assert result.verdict is Verdict.UNKNOWN
    assert reason in result.reason


def test_a_spent_time_budget_is_unknown() -> None:
    result = explore_exhaustive(small_config(max_term=3, max_log=2), time_budget_s=0.2)
    assert result.verdict is Verdict.UNKNOWN
    assert "time budget" in result.reason


@pytest.mark.parametrize(
    ("bug", "bounds", "invariant", "max_length"),
    [
        (
            "vote_not_persisted",
            {"max_term": 1, "max_log": 0, "max_crashes": 1},
            "ElectionSafety",
            10,
        ),
        ("commit_without_quorum", {"max_term": 2, "max_log": 1}, "LeaderCompleteness", 11),
        # Figure 8: the unsafe commit itself breaks the lemma behind Leader Completeness
        (
            "figure8_commit",
            {"max_term": 3, "max_log": 1, "allow_heartbeat": False},
            "UpToDateLogsHoldCommitted",
            21,
        ),
    ],
)
def test_exhaustive_search_finds_the_bug_with_a_shortest_run(
    bug: str, bounds: dict[str, Any], invariant: str, max_length: int
) -> None:
    config = small_config(bugs=BugSet.of(bug), **bounds)
    result = explore_exhaustive(config, time_budget_s=300)
    assert result.verdict is Verdict.FALSE, result.describe()
    assert result.violation is not None and result.violation.invariant == invariant
    run = result.counterexample
    assert run is not None and 0 < len(run) <= max_length
    assert len(run) == result.depth_reached
    # the run replays from the start and ends in the violating state
    state = Cluster.start(config)
    for action, recorded in run:
        assert action in state.enabled_actions()
        state = state.apply(action)
        assert state == recorded
    with pytest.raises(InvariantViolation):
        state.check_invariants()
    assert "shortest run:" in result.describe()


def test_the_same_bounds_hold_without_the_bug() -> None:
    config = small_config(max_term=1, max_log=0, max_crashes=1)
    assert explore_exhaustive(config, time_budget_s=120).verdict is Verdict.TRUE


def test_finite_config_fills_default_bounds_and_leaves_reads_out() -> None:
    config = finite_config(ClusterConfig(timeouts="free"))
    assert (config.max_term, config.max_log, config.max_messages) == (2, 2, 3)
    assert config.reads == ()
    bounded = small_config(max_term=1)
    assert finite_config(bounded) is bounded


def test_tick_counted_timeouts_cannot_be_searched_exhaustively() -> None:
    with pytest.raises(ConfigError, match='timeouts="free"'):
        explore_exhaustive(ClusterConfig(timeouts="ticks", max_term=1, max_log=1))


def test_full_featured_config_searches_without_error() -> None:
    # explicit persistence, PreVote, CheckQuorum, drops, partitions, crashes: a big space
    result = explore_exhaustive(ClusterConfig(timeouts="free"), max_states=3000)
    assert result.verdict is Verdict.UNKNOWN and result.distinct_states == 3000

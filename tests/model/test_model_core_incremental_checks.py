"""Checking a state against the state it came from (`check_invariants(previous)`, which
evaluates only the facts the step could change) gives the full check's answer: the same
pass, or the same first violation with the same text."""

from __future__ import annotations

import random

import pytest

from etcdspec.model.actions import deliver, heartbeat, propose, timeout
from etcdspec.model.bugs import BugSet
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.exhaustive import explore_exhaustive, small_config
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_messages import Entry
from etcdspec.verdict import Verdict


def _outcome(state: Cluster, previous: Cluster | None) -> str | None:
    try:
        state.check_invariants(previous)
    except InvariantViolation as violation:
        return violation.describe()
    return None


WALK_CONFIGS: dict[str, ClusterConfig] = {
    "ticks": ClusterConfig(),
    "free-with-crashes": ClusterConfig(timeouts="free", max_crashes=2),
    "no-truncate-bug": ClusterConfig(
        timeouts="free", noop_on_leader=False, bugs=BugSet.of("no_truncate_conflict")
    ),
    "stale-append-bug": ClusterConfig(
        timeouts="free", noop_on_leader=False, bugs=BugSet.of("accept_stale_term_append")
    ),
    "five-nodes": ClusterConfig(nodes=5, timeouts="free"),
}

WEIGHTS = {"deliver": 20.0, "propose": 3.0, "persist": 6.0, "tick": 2.0, "timeout": 1.0}


@pytest.mark.parametrize("name", sorted(WALK_CONFIGS))
def test_incremental_check_agrees_with_the_full_check_on_walks(name: str) -> None:
    config = WALK_CONFIGS[name]
    commits = 0  # witness: the walks reach states with committed entries
    for seed in range(4):
        rng = random.Random(seed)
        state = Cluster.start(config)
        for _ in range(200):
            actions = state.enabled_actions()
            weights = [WEIGHTS.get(a.kind, 0.2) for a in actions]
            after = state.apply(rng.choices(actions, weights)[0])
            full = _outcome(after, None)
            assert _outcome(after, state) == full
            if full is not None:
                break  # a violation: later states have no passing predecessor
            commits += after.commit_index() > state.commit_index()
            state = after
    assert commits >= 3


@pytest.mark.parametrize(
    ("bug", "bounds"),
    [
        ("commit_without_quorum", {"max_term": 2, "max_log": 1}),
        ("vote_not_persisted", {"max_term": 1, "max_log": 0, "max_crashes": 1}),
        ("figure8_commit", {"max_term": 3, "max_log": 1, "allow_heartbeat": False}),
    ],
)
def test_incremental_check_finds_each_bugs_violation(bug: str, bounds: dict[str, object]) -> None:
    config = small_config(bugs=BugSet.of(bug), **bounds)  # type: ignore[arg-type]
    result = explore_exhaustive(config, time_budget_s=300)
    assert result.verdict is Verdict.FALSE and result.counterexample is not None
    state = Cluster.start(config)
    for _, after in result.counterexample:
        assert _outcome(after, state) == _outcome(after, None)
        state = after
    assert _outcome(state, None) is not None


def _elected(config: ClusterConfig) -> Cluster:
    """n1 leads with entry 1 committed everywhere (a scripted run, no randomness)."""
    state = Cluster.start(config)
    for action in (timeout(1), propose(1, config.proposals[0]), heartbeat(1)):
        state = state.apply(action)
        while state.messages:
            state = state.apply(deliver(state.messages[0]))
    return state


def _replace_node(state: Cluster, position: int, **changes: object) -> Cluster:
    nodes = list(state.nodes)
    nodes[position] = nodes[position]._replace(**changes)
    return Cluster(
        state.config,
        state.params,
        tuple(nodes),
        state.up,
        state.network,
        state.crashes,
        state.ghost,
    )


@pytest.mark.parametrize(
    ("position", "invariant", "changes"),
    [
        (2, "CommitWithinLog", {"commit_index": 9}),
        # same term at index 1 as the others, another request
        (2, "LogMatching", {"log_entry": Entry(1, "put other", None)}),
        # a follower's entry 1 of a higher term: its log is more up to date, lacks it
        (1, "UpToDateLogsHoldCommitted", {"log_entry": Entry(2, "put other", None)}),
        # a follower's committed entry 1 replaced by one of a lower term (its log then
        # is less up to date, so no earlier invariant breaks); it knows no leader (else
        # FollowerCommitMatched, checked just before, names the break first)
        (1, "StateMachineSafety", {"log_entry": Entry(0, "put other", None), "lead": 0}),
        # the leader's by one of a higher term (no log then agrees with it at index 1)
        (0, "LeaderCompleteness", {"log_entry": Entry(2, "put other", None)}),
        (2, "AppliedStatesAgree", {"store": "other"}),
    ],
)
def test_a_changed_node_that_breaks_an_invariant_is_caught(
    position: int, invariant: str, changes: dict[str, object]
) -> None:
    config = small_config(max_term=2, max_log=2, noop_on_leader=False)
    state = _elected(config)
    assert _outcome(state, None) is None and state.commit_index() == 1
    entry = changes.pop("log_entry", None)
    if isinstance(entry, Entry):
        log = state.nodes[position].log
        changes["log"] = log._replace(entries=(entry, *log.entries[1:]))
    if changes.get("store") == "other":
        changes["store"] = state.nodes[0].log.snapshot.data
    broken = _replace_node(state, position, **changes)
    full = _outcome(broken, None)
    assert full is not None and full.startswith(invariant), full
    assert _outcome(broken, state) == full

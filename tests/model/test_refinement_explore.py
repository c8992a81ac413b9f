"""Refinement during Hypothesis exploration: seeded runs of the correct 3-node model
(crashes, restarts, partitions, drops, duplicates, compaction on), and of 3 and 5 nodes
with configuration changes, refine raft_steps.spec at every step, and the run witnesses
the spec actions it checked."""

from __future__ import annotations

from dataclasses import replace

import pytest

from etcdspec.model.bugs import BugSet
from etcdspec.model.explore import FINDERS, ExploreOptions
from etcdspec.model.refinement import RefinementMachine, run_exploration
from etcdspec.model.refinement_abstraction import raft_steps_spec
from etcdspec.model.refinement_check import RefinementViolation

# restore_snapshot needs a follower behind a compacted leader: the scripted scenario
# in test_refinement_scenarios.py witnesses it.
# Without membership no configuration changes.
MEMBERSHIP_ACTIONS = {"leader_reconfigure", "adopt_config"}
EXPECTED = {a.name for a in raft_steps_spec().spec.actions()} - {"restore_snapshot"}


@pytest.mark.parametrize(
    ("persist", "seed", "nodes", "membership"),
    [
        ("sync", 1, 3, False),
        ("explicit", 2, 3, False),
        ("explicit", 1, 3, True),
        ("sync", 1, 5, True),
    ],
)
def test_seeded_exploration_refines_spec_at_every_step(
    persist: str, seed: int, nodes: int, membership: bool
) -> None:
    options = ExploreOptions(
        nodes=nodes,
        seed=seed,
        max_examples=25,
        steps=50,
        persist=persist,
        membership=membership,
    )
    run = run_exploration(options, checked=True)
    assert run.violation is None, run.violation.describe()
    stats = run.stats
    expected = EXPECTED if membership else EXPECTED - MEMBERSHIP_ACTIONS
    missing = expected - set(stats.actions)
    assert not missing, f"never checked: {sorted(missing)}; {stats.describe()}"
    # every model step was checked (the recorder also counts the watch rule's checks)
    assert 500 < stats.steps <= run.steps, stats.describe()
    assert stats.stutters > 0  # network-only and clock steps were checked as stutters
    assert sum(stats.actions.values()) > stats.steps // 2


def test_refinement_machine_is_the_cluster_machine_with_checks() -> None:
    from etcdspec.model.hypothesis_cluster import ClusterMachine, rule_names

    assert issubclass(RefinementMachine, ClusterMachine)
    assert rule_names(RefinementMachine) == rule_names(ClusterMachine)


@pytest.mark.parametrize(
    ("bug", "persist", "part"),
    [
        ("vote_not_persisted", "sync", "dvote("),
        ("commit_without_quorum", "explicit", "[quorum]"),
    ],
)
def test_catalogued_bug_found_by_refinement_not_by_invariants(
    bug: str, persist: str, part: str
) -> None:
    """On the same seeded run the model's invariants hold throughout, while refinement
    flags the bug at the step where it first shows."""
    options = ExploreOptions(
        nodes=3, seed=1, max_examples=40, steps=50, persist=persist, bugs=BugSet.of(bug)
    )
    plain = run_exploration(options, checked=False)
    checked = run_exploration(options, checked=True)
    assert plain.violation is None, plain.describe()
    assert isinstance(checked.violation, RefinementViolation), checked.describe()
    assert part in checked.violation.failed
    assert checked.steps < plain.steps


def test_reconfiguring_before_a_term_commit_is_caught_by_refinement() -> None:
    """The finder's run of reconfig_before_term_commit: refinement flags the first
    configuration change a new leader appends before an entry of its term commits,
    long before the invariants see two majorities decide."""
    options = replace(
        FINDERS["reconfig_before_term_commit"].options,
        bugs=BugSet.of("reconfig_before_term_commit"),
        refine=True,
    )
    checked = run_exploration(options, checked=True)
    assert isinstance(checked.violation, RefinementViolation), checked.describe()
    assert "leader_reconfigure" in checked.violation.plan
    assert "[term_commit]" in checked.violation.failed
    clean = run_exploration(replace(options, bugs=BugSet()), checked=True)
    assert clean.violation is None, clean.describe()
    assert {"leader_reconfigure", "adopt_config"} <= set(clean.stats.actions)

"""The Hypothesis machines' fast paths change nothing that runs: dead rules are left out,
step labels are built lazily but read the same, rule steps are counted exactly, the
split-brain macro rule diverges the logs as it says, and focused store runs keep their
rules on."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.stateful import rule, run_state_machine_as_test

from etcdspec.model.bugs import BugSet
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.explore import (
    FINDERS,
    ExploreOptions,
    RunRecorder,
    find_bug,
    hypothesis_settings,
    run_hypothesis,
)
from etcdspec.model.hypothesis_cluster import (
    ClusterMachine,
    SplitBrainMachine,
    abstract_state,
    cluster_config,
    dead_rules,
    machine_factory,
)
from etcdspec.model.hypothesis_rules import focused, rule_names
from etcdspec.model.hypothesis_store import StoreMachine
from etcdspec.model.hypothesis_store import machine_factory as store_factory
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_node import Role
from etcdspec.model.requests import PutRequest
from etcdspec.verdict import Verdict


@pytest.mark.parametrize(
    ("timeouts", "persist", "dead"),
    [
        ("free", "sync", {"tick", "persist"}),
        ("free", "explicit", {"tick"}),
        ("ticks", "sync", {"timeout", "disrupt", "heartbeat", "persist"}),
        ("ticks", "explicit", {"timeout", "disrupt", "heartbeat"}),
    ],
)
def test_rules_that_cannot_run_under_the_configuration_are_left_out(
    timeouts: str, persist: str, dead: set[str]
) -> None:
    options = ExploreOptions(timeouts=timeouts, persist=persist)
    assert dead_rules(cluster_config(options)) == dead
    machine = machine_factory(options, RunRecorder(abstract_state, None))()
    assert set(rule_names(type(machine))) == set(rule_names(ClusterMachine)) - dead


def test_split_brain_runs_only_where_a_focused_rule_set_names_it() -> None:
    assert "split_brain" not in rule_names(ClusterMachine)
    recorder = RunRecorder(abstract_state, None)
    default = machine_factory(ExploreOptions(), recorder)()
    assert "split_brain" not in rule_names(type(default))
    named = machine_factory(ExploreOptions(rules=frozenset({"split_brain", "heal"})), recorder)()
    assert rule_names(type(named)) == ["heal", "split_brain"]


def test_a_focused_rule_set_also_loses_its_dead_rules() -> None:
    options = ExploreOptions(rules=frozenset({"tick", "propose", "persist"}))
    machine = machine_factory(options, RunRecorder(abstract_state, None))()
    assert rule_names(type(machine)) == ["propose"]


def test_lazy_labels_read_as_the_actions_describe_them() -> None:
    machine = ClusterMachine(ClusterConfig(timeouts="free"))
    machine.bootstrap(0, 0)
    recorder = machine.recorder
    assert all(label is None for label, _ in recorder.trace)
    assert recorder.labels() == [action.describe() for action in recorder.actions]
    assert recorder.labels()[0] == "timeout(n1)"


class _CountingMachine(ClusterMachine):
    """Counts the stabilize rules Hypothesis runs, to compare with the rule steps."""

    runs = 0

    @rule()
    def stabilize(self) -> None:
        _CountingMachine.runs += 1
        super().stabilize()


def test_rule_steps_count_each_rule_run_once() -> None:
    """Hypothesis checks invariants after each rule (and, in a machine without an
    initialize rule, once before the first): only the rules are counted (bootstrap, the
    initialize rule, is one per example)."""
    _CountingMachine.runs = 0
    options = ExploreOptions(max_examples=5, steps=7)
    recorder = RunRecorder(abstract_state, None)
    config = cluster_config(options)
    machine = focused(_CountingMachine, frozenset({"stabilize"}))

    def factory() -> Any:
        return machine(config, recorder)

    factory._hypothesis_internal_use_seed = 0  # type: ignore[attr-defined]
    run_state_machine_as_test(factory, settings=hypothesis_settings(options))
    assert recorder.examples >= 5
    assert recorder.rule_steps == _CountingMachine.runs + recorder.examples


def test_split_brain_cuts_the_leader_off_and_the_others_elect_another() -> None:
    machine = SplitBrainMachine(cluster_config(ExploreOptions(noop_on_leader=False)))
    machine.bootstrap(0, 0)
    assert machine.cluster.leader_ids() == [1]
    machine.split_brain(0, PutRequest(key=b"a", value=b"1"))
    cluster = machine.cluster
    assert cluster.network.groups == (frozenset({1}), frozenset({2, 3}))
    old, new = cluster.node(1), cluster.node(2)
    assert old.role is Role.LEADER and [e.term for e in old.log.entries] == [1]
    assert new.role is Role.LEADER and new.term > old.term and not new.log.entries


@pytest.mark.parametrize("name", ["no_truncate_conflict", "accept_stale_term_append"])
def test_a_split_brain_with_writes_on_both_sides_breaks_the_log_bugs(name: str) -> None:
    """The schedule the split-brain finder looks for, run by hand: both sides write at
    index 1, heal, deliver; the correct model holds."""
    for bugs, broken in ((BugSet.of(name), True), (BugSet(), False)):
        machine = SplitBrainMachine(cluster_config(ExploreOptions(noop_on_leader=False, bugs=bugs)))
        machine.bootstrap(0, 0)
        machine.split_brain(0, PutRequest(key=b"a", value=b"1"))
        request = PutRequest(key=b"b", value=b"2")
        machine.propose(1, request)  # leaders [n1, n2]: n2, the new one
        machine.propose(1, request)
        machine.heal()
        try:
            machine.stabilize()
        except InvariantViolation as violation:
            assert broken, f"the correct model failed: {violation}"
        else:
            assert not broken, f"{name} was not caught"


def test_a_store_run_without_its_initialize_rule_counts_only_rules() -> None:
    options = ExploreOptions(machine="store", max_examples=5, steps=6, rules=frozenset({"put"}))
    result = run_hypothesis(options)
    assert result.verdict is Verdict.TRUE
    # every put is one rule and one model step (a put cannot fail)
    assert result.rule_steps == result.steps > 0


def test_a_focused_store_run_keeps_every_rule_on() -> None:
    options = ExploreOptions(machine="store", rules=frozenset({"put", "watch"}))
    machine = store_factory(options, RunRecorder(abstract_state, None))()
    assert isinstance(machine, StoreMachine)
    assert rule_names(type(machine)) == ["put", "watch"]
    assert type(machine).choose_rules is None
    assert "watch" in machine.enabled


@pytest.mark.parametrize(
    "name", ["figure8_commit", "no_truncate_conflict", "accept_stale_term_append"]
)
def test_split_brain_finders_find_their_bug_on_each_of_three_seeds(name: str) -> None:
    assert FINDERS[name].mode == "hypothesis"
    for seed in (1, 2, 3):
        result = find_bug(name, seed=seed)
        assert result.verdict is Verdict.FALSE, result.describe()


def test_a_focused_finder_names_its_rules() -> None:
    text = FINDERS["figure8_commit"].describe()
    assert text.startswith("hypothesis, cluster model, 3 nodes")
    assert "rules heal, propose, split_brain, stabilize, " in text and "up to 5 seeds" in text

"""The Hypothesis machines: not vacuous (leaders elected, entries committed), seeded runs
replay, shrunk counterexamples replay, focused rule sets, and the model's verify stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from etcdspec.model.action_shrink import replay
from etcdspec.model.cluster import Cluster
from etcdspec.model.explore import ExploreOptions, find_bug, run_hypothesis
from etcdspec.model.hypothesis_cluster import ClusterMachine, cluster_config, focused, rule_names
from etcdspec.model.stage import run_stage
from etcdspec.stage import StageOptions
from etcdspec.verdict import Verdict


@pytest.mark.parametrize(
    "options",
    [
        ExploreOptions(max_examples=15, steps=30),
        ExploreOptions(max_examples=10, steps=30, nodes=5),
        ExploreOptions(max_examples=10, steps=30, timeouts="ticks", persist="explicit"),
    ],
    ids=["3-nodes-free", "5-nodes-free", "3-nodes-ticks-explicit"],
)
def test_cluster_exploration_elects_leaders_and_commits(options: ExploreOptions) -> None:
    """A run that never elects a leader or never commits would pass vacuously: fail it."""
    result = run_hypothesis(options)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.witnesses.get("cluster: leader elected", 0) > 0, result.witnesses
    assert result.witnesses.get("cluster: entry committed", 0) > 0, result.witnesses
    assert result.witnesses.get("cluster: term change", 0) > 0, result.witnesses
    assert result.rule_steps >= result.examples


def test_store_exploration_checks_past_reads_and_watches() -> None:
    result = run_hypothesis(ExploreOptions(machine="store", max_examples=40, steps=30))
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.witnesses.get("store: revision advanced", 0) > 0
    assert result.witnesses.get("store: past read checked", 0) > 0
    assert result.witnesses.get("store: response checked", 0) > 0
    # the response rules (put_prev_kv, range_options, txn_options) thinned the default
    # run's watches: a run focused on writes, compactions and watches checks them
    rules = frozenset(("put", "compact", "watch"))
    watched = run_hypothesis(
        ExploreOptions(machine="store", max_examples=20, steps=30, rules=rules)
    )
    assert watched.verdict is Verdict.TRUE, watched.describe()
    assert watched.witnesses.get("store: watch checked", 0) > 0


def test_a_seeded_run_replays_exactly() -> None:
    options = ExploreOptions(max_examples=5, steps=20, seed=7)
    first, second = run_hypothesis(options), run_hypothesis(options)
    assert (first.examples, first.steps, dict(first.witnesses)) == (
        second.examples,
        second.steps,
        dict(second.witnesses),
    )


def test_a_cluster_counterexample_is_shrunk_by_replay() -> None:
    # the finder's split-brain schedules (the finder tries its seeds in turn): a long run
    # that replay shrinks
    result = find_bug("no_truncate_conflict")
    options = result.options
    assert result.verdict is Verdict.FALSE, result.describe()
    cex = result.counterexample
    assert cex is not None
    assert "shrunk by replay" in result.note
    found = int(result.note.split("from ")[1].split(" ")[0])
    assert len(cex.steps) <= found
    assert cex.steps[0].state != Cluster.start(cluster_config(options)).abstract()


def test_replay_skips_actions_that_are_no_longer_enabled() -> None:
    config = cluster_config(ExploreOptions())
    machine = ClusterMachine(config)
    machine.bootstrap(0, 0)
    actions = [a for a in machine.recorder.actions if a is not None]
    # dropping the first timeout leaves every later delivery without its message
    kept, trace, violation = replay(config, actions[1:])
    assert violation is None
    assert len(kept) < len(actions) - 1
    assert len(trace) == len(kept)


def test_focused_machine_has_only_the_named_rules() -> None:
    machine = focused(ClusterMachine, frozenset({"elect", "propose"}))
    assert rule_names(machine) == ["elect", "propose"]
    with pytest.raises(ValueError, match="unknown rule"):
        focused(ClusterMachine, frozenset({"no_such_rule"}))


def test_explore_options_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="nodes must be 3 or 5"):
        ExploreOptions(nodes=0)
    with pytest.raises(ValueError, match="machine must be one of"):
        ExploreOptions(machine="raft")


def test_quick_model_stage_holds_and_writes_its_report(tmp_path: Path) -> None:
    result = run_stage(StageOptions(report_dir=tmp_path, seed=0, quick=True))
    assert result.name == "model"
    assert result.verdict is Verdict.TRUE, result.summary
    document = json.loads((tmp_path / "model" / "explore.json").read_text())
    assert set(document["runs"]) == {
        "hypothesis-cluster",
        "hypothesis-cluster-membership",
        "hypothesis-store",
        "exhaustive-cluster",
        "exhaustive-cluster-membership",
    }
    assert document["runs"]["exhaustive-cluster"]["valid"] is True
    membership = document["runs"]["exhaustive-cluster-membership"]
    assert membership["valid"] is True
    assert membership["distinct_states"] == 1046  # 3 nodes, 2 voters, max_term 2, max_log 1
    assert document["runs"]["hypothesis-cluster-membership"]["witnesses"].get(
        "cluster: configuration change"
    ), "the membership run never changed a configuration"

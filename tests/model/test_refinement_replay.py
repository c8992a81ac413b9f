"""A model counterexample (ITF) replayed on the spec's evaluator (raft_steps.spec): the
run rebuilt from the config in the ITF's #meta, each step's spec actions named where
the layers agree, and where they differ the spec's `require` that refuses the step.
Figure 8: every step up to the commit agrees; the commit of an entry of an older term
is refused by advance_commit's current-term rule. The same run without the bug agrees
throughout. A file that is not the model's run, or lacks its config, is refused."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.model import actions
from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig, config_from_json, config_to_json
from etcdspec.model.counterexample import build
from etcdspec.model.hypothesis_cluster import abstract_state
from etcdspec.model.refinement_replay import SpecReplayInputError, replay_on_spec
from etcdspec.model.requests import PutRequest

# The explorer's Figure 8 run (explore --bug figure8_commit, seed 0): n1 leads term 1
# with an entry nobody has, n3 leads term 2, n1 leads term 3 and replicates its term-1
# entry to n2; with the bug it then commits it by counting replicas.
FIGURE8 = (
    "timeout(n1)",
    "deliver(n1→n2 PreVote term 1 last 0/0)",
    "deliver(n2→n1 PreVoteResp term 1 granted)",
    "deliver(n1→n2 RequestVote term 1 last 0/0)",
    "deliver(n1→n3 RequestVote term 1 last 0/0)",
    "deliver(n2→n1 RequestVoteResp term 1 granted)",
    "propose(n1, put(b=1))",
    "timeout(n3)",
    "deliver(n3→n2 PreVote term 2 last 0/0)",
    "deliver(n2→n3 PreVoteResp term 2 granted)",
    "deliver(n3→n2 RequestVote term 2 last 0/0)",
    "deliver(n2→n3 RequestVoteResp term 2 granted)",
    "deliver(n3→n1 AppendEntries term 2 prev 0/0 0 entries commit 0)",
    "propose(n3, put(b=1))",
    "timeout(n1)",
    "deliver(n1→n2 PreVote term 3 last 1/1)",
    "deliver(n2→n1 PreVoteResp term 3 granted)",
    "deliver(n1→n2 RequestVote term 3 last 1/1)",
    "deliver(n2→n1 RequestVoteResp term 3 granted)",
    "deliver(n1→n2 AppendEntries term 3 prev 1/1 0 entries commit 0)",
    "deliver(n2→n1 AppendEntriesResp term 3 rejected 1 hint 0)",
    "deliver(n1→n2 AppendEntries term 3 prev 0/0 1 entry commit 0)",
    "deliver(n2→n1 AppendEntriesResp term 3 match 1)",
)
CONFIG = ClusterConfig(
    nodes=3,
    timeouts="free",
    persist="sync",
    election_ticks=4,
    noop_on_leader=False,
    bugs=BugSet.of("figure8_commit"),
)


def _itf(config: ClusterConfig, labels: tuple[str, ...]) -> dict[str, Any]:
    """The run as `explore --itf` writes it, each step applied to the model here."""
    cluster = Cluster.start(config)
    initial = abstract_state(cluster)
    labelled = []
    for label in labels:
        if label.startswith("propose("):
            action = actions.propose(int(label[len("propose(n")]), PutRequest(b"b", b"1"))
        else:
            action = next(a for a in cluster.enabled_actions() if a.describe() == label)
        cluster = cluster.apply(action)
        labelled.append((label, abstract_state(cluster)))
    counterexample = build("cluster", "X", "", initial, labelled, config=config_to_json(config))
    return json.loads(json.dumps(counterexample.to_itf().to_json()))


def test_figure8_agrees_until_the_commit_which_the_current_term_rule_refuses() -> None:
    result = replay_on_spec(_itf(CONFIG, FIGURE8))
    assert result.total == result.mapped == len(FIGURE8)
    assert [s.outcome for s in result.steps] == ["agrees"] * 22 + ["differs"]
    assert result.steps[0].detail == "spec: pre_campaign"
    assert result.steps[5].detail == "spec: become_leader"
    assert result.steps[6].detail == "spec: leader_append, persist"
    last = result.steps[-1]
    assert "advance_commit(n=n1, i=1" in last.detail
    assert "[current_term_rule]" in last.detail and "raft_steps.spec:" in last.detail
    assert "first difference at step 23 (differs)" in result.describe().splitlines()[0]


def test_the_same_run_without_the_bug_agrees_throughout() -> None:
    result = replay_on_spec(_itf(replace(CONFIG, bugs=NO_BUGS), FIGURE8))
    assert result.agreed == len(FIGURE8) and result.first_difference() is None
    assert result.steps[-1].detail == "spec: record_ack"  # acknowledged, not committed


def test_a_file_that_is_not_the_model_s_run_stops_where_it_leaves_it() -> None:
    document = _itf(CONFIG, FIGURE8[:6])
    document["states"][4]["nodes"]["n3"]["term"] = {"#bigint": "7"}
    result = replay_on_spec(document)
    assert [s.outcome for s in result.steps] == ["agrees"] * 3 + ["does not map"]
    assert "not the file's" in result.steps[-1].detail
    document = _itf(CONFIG, FIGURE8[:2])
    document["states"][2]["#meta"]["action"] = "crash(n9)"
    result = replay_on_spec(document)
    assert result.steps[-1].outcome == "does not map" and "no such step" in result.steps[-1].detail


def test_a_file_without_the_model_s_config_is_refused() -> None:
    document = _itf(CONFIG, FIGURE8[:1])
    del document["#meta"]["etcdspec-config"]
    with pytest.raises(SpecReplayInputError, match="explore --itf"):
        replay_on_spec(document)
    document = _itf(CONFIG, FIGURE8[:1])
    document["#meta"]["etcdspec-config"]["bugs"] = ["meteor_strike"]
    with pytest.raises(SpecReplayInputError, match="unknown bug meteor_strike"):
        replay_on_spec(document)
    document = _itf(CONFIG, FIGURE8[:1])
    document["#meta"]["etcdspec-config"]["seed"] = 5  # timeouts free: same start
    document["#meta"]["etcdspec-config"]["nodes"] = 5
    with pytest.raises(SpecReplayInputError, match="not the model's initial state"):
        replay_on_spec(document)


def test_the_config_round_trips_through_json() -> None:
    for config in (CONFIG, ClusterConfig(), ClusterConfig(membership=True, max_term=2)):
        assert config_from_json(json.loads(json.dumps(config_to_json(config)))) == replace(
            config, proposals=ClusterConfig().proposals, reads=ClusterConfig().reads
        )


def test_replay_verb_on_spec_on_impl_and_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    itf = tmp_path / "figure8.itf.json"
    itf.write_text(json.dumps(_itf(CONFIG, FIGURE8)))
    assert run(["replay", str(itf), "--on", "spec"]) == ExitCode.VIOLATION
    out = capsys.readouterr().out
    assert out.startswith("replayed 23 of 23 step(s) on the spec's evaluator")
    assert "server's Raft core" not in out
    assert run(["replay", str(itf)]) == ExitCode.VIOLATION
    out = capsys.readouterr().out
    assert "on the spec's evaluator" in out and "on the server's Raft core" in out
    document = json.loads(itf.read_text())
    del document["#meta"]["etcdspec-config"]
    itf.write_text(json.dumps(document))
    assert run(["replay", str(itf), "--on", "spec"]) == ExitCode.BAD_INPUT
    assert run(["replay", str(itf)]) == ExitCode.VIOLATION  # the core still replays it
    captured = capsys.readouterr()
    assert "that layer is skipped" in captured.err and "Raft core" in captured.out

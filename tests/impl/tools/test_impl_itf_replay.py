"""A model counterexample (ITF) replayed on the server's Raft core: the steps that map
(timeouts, deliveries, proposals, crashes, restarts, partitions) are taken and every
node compared; where the layers
agree it says so, where they differ it names the node and both states, and a step the
core cannot take stops the replay, saying why. The Figure 8 run of the model's explorer
maps step for step and first differs at the election: the core appends an empty entry
when it becomes leader (as etcd does), the model's Figure 8 finder runs without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.tools.itf_replay import ReplayInputError, replay_itf


def _node(role: str = "follower", term: int = 0, vote: str | None = None) -> dict[str, Any]:
    return {"role": role, "term": term, "voted_for": vote, "log": [], "commit_index": 0}


def _state(action: str, **nodes: dict[str, Any]) -> dict[str, Any]:
    everyone = {"n1": _node(), "n2": _node(), "n3": _node()}
    everyone.update(nodes)
    return {"#meta": {"action": action} if action else {}, "nodes": everyone, "messages": {}}


def _pre_election(n1_after_answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "vars": ["nodes", "messages"],
        "states": [
            _state(""),
            _state("timeout(n1)", n1=_node("pre-candidate")),
            _state("deliver(n1→n2 PreVote term 1 last 0/0)", n1=_node("pre-candidate")),
            _state("deliver(n2→n1 PreVoteResp term 1 granted)", n1=n1_after_answer),
            _state("compact_log(n2)", n1=n1_after_answer),
        ],
    }


def test_steps_that_map_agree_and_an_unmapped_step_stops_the_replay() -> None:
    result = replay_itf(_pre_election(_node("candidate", 1, "n1")))
    assert [s.outcome for s in result.steps] == ["agrees"] * 3 + ["does not map"]
    assert result.mapped == 3 and result.total == 4 and result.agreed == 3
    assert "knows no such step" in result.steps[-1].detail


def test_a_difference_names_the_node_and_both_states() -> None:
    result = replay_itf(_pre_election(_node("candidate", 2, "n1")))  # the core is in term 1
    step = result.steps[2]
    assert step.outcome == "differs"
    assert "n1: model candidate term 2" in step.detail and "core candidate term 1" in step.detail
    assert result.first_difference() == step


def test_a_delivery_the_core_has_not_sent_does_not_map() -> None:
    document = _pre_election(_node("candidate", 1, "n1"))
    document["states"][2]["#meta"]["action"] = "deliver(n1→n3 RequestVote term 1 last 0/0)"
    result = replay_itf(document)
    assert result.steps[-1].outcome == "does not map"
    assert "no RequestVote of term 1 in flight" in result.steps[-1].detail
    assert "PRE_VOTE 1->3 term 1" in result.steps[-1].detail


def test_not_a_cluster_run_is_refused() -> None:
    with pytest.raises(ReplayInputError, match="explore --itf"):
        replay_itf({"states": [{"x": 1}]})


def test_the_explorer_s_figure8_run_maps_and_differs_at_the_leader_s_no_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    itf = tmp_path / "figure8.itf.json"
    assert run(["explore", "--bug", "figure8_commit", "--itf", str(itf), "--quiet"]) == 1
    capsys.readouterr()
    assert run(["replay", str(itf), "--on", "impl"]) == ExitCode.VIOLATION
    out = capsys.readouterr().out
    head = out.splitlines()[0]
    steps = out.count("\n") - 1  # a line per step under the head line
    assert head.startswith(f"replayed {steps} of {steps} step(s)"), head
    first = next(line for line in out.splitlines() if " — differs" in line)
    assert "RequestVoteResp" in first and "model leader term 1 commit 0 log []" in first
    assert "core leader term 1 commit 0 log [1]" in first  # the no-op of its term


def _node_up(up: bool, **fields: Any) -> dict[str, Any]:
    return {**_node(), "up": up, "durable_term": 0, "durable_voted_for": None, **fields}


def test_crash_and_restart_map_onto_the_core_s_persisted_state() -> None:
    """A crashed node is compared by what it persisted; a step at a down node, a
    delivery across a partition and a restart of a node that is up do not map."""
    down = _node_up(False, durable_log_length=0)
    states = [
        _state("", n1=_node_up(True)),
        _state("crash(n1)", n1=down),
        _state("restart(n1)", n1=_node_up(True)),
        _state("partition(n1 | n2,n3)", n1=_node_up(True)),
        _state("timeout(n1)", n1=_node_up(True, role="pre-candidate")),
        _state("deliver(n1→n2 PreVote term 1 last 0/0)", n1=_node_up(True, role="pre-candidate")),
    ]
    result = replay_itf({"vars": ["nodes", "messages"], "states": states})
    assert [s.outcome for s in result.steps] == ["agrees"] * 4 + ["does not map"]
    assert "n1 and n2 are partitioned at the core" in result.steps[-1].detail
    states[2] = _state("timeout(n1)", n1=down)
    result = replay_itf({"vars": ["nodes", "messages"], "states": states[:3]})
    assert result.steps[-1].outcome == "does not map"
    assert result.steps[-1].detail == "n1 is down at the core"
    states[2] = _state("restart(n1)", n1=_node_up(True))
    states[1] = _state("heal()", n1=_node_up(True))
    result = replay_itf({"vars": ["nodes", "messages"], "states": states[:3]})
    assert result.steps[-1].detail == "n1 is already up at the core"


def test_vote_not_persisted_maps_through_the_crash_and_the_core_keeps_its_vote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The explorer's vote_not_persisted run (a crash and a restart in it) maps step for
    step, with the model's prevote setting from the ITF's #meta: at the crash the model
    has lost n1's vote and the core has it on disk; restarted, the core's n1 refuses
    n3 the second vote of term 1, so n3 does not become a second leader there."""
    itf = tmp_path / "vote.itf.json"
    assert run(["explore", "--bug", "vote_not_persisted", "--itf", str(itf), "--quiet"]) == 1
    capsys.readouterr()
    assert run(["replay", str(itf), "--on", "impl"]) == ExitCode.VIOLATION
    out = capsys.readouterr().out
    steps = out.count("\n") - 1
    assert out.startswith(f"replayed {steps} of {steps} step(s)"), out
    crash = next(line for line in out.splitlines() if "crash(n1) — " in line)
    assert "n1: model down, durable term 1 vote 0 log []" in crash
    assert "core down, persisted term 1 vote 1" in crash
    assert "restart(n1) — " in out
    last = out.splitlines()[-1]
    assert "n3: model leader term 1" in last and "core candidate term 1" in last

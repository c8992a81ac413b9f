"""The randomized campaign: its task list, its verdicts, distinct counterexamples and
coverage, driven in this process (InlinePool) with an injected clock where time matters;
the same on a local Dask cluster is in tests/cli/test_cli_explore_distributed.py."""

from __future__ import annotations

from etcdspec.model.campaign import (
    CampaignResult,
    CampaignTask,
    RunOutcome,
    run_campaign,
    tasks,
)
from etcdspec.model.explore import ExploreOptions
from etcdspec.verdict import Verdict
from etcdspec.workers import InlinePool

OPTIONS = ExploreOptions(machine="cluster", seed=7, max_examples=3, steps=20)


def test_tasks_take_turns_and_raise_the_seed_each_round() -> None:
    made = tasks(7, ("a", "b"), 7, 0)
    assert made == [
        CampaignTask(7),
        CampaignTask(7, "a"),
        CampaignTask(7, "b"),
        CampaignTask(8),
        CampaignTask(8, "a"),
        CampaignTask(8, "b"),
        CampaignTask(9),
    ]
    assert tasks(7, ("a", "b"), 2, 5) == made[5:7]


def test_a_short_campaign_finds_the_bug_and_reports_coverage() -> None:
    pool = InlinePool(1)
    result = run_campaign(pool, 600, OPTIONS, ("commit_without_quorum",), max_runs=4)
    assert result.runs == 4
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.bugs_found == {"commit_without_quorum": 2}
    keys = list(result.distinct)
    assert keys and all(bug == "commit_without_quorum" for bug, _, _ in keys)
    assert keys[0][1] == "LeaderCompleteness"
    assert result.actions["timeout"] > 0 and result.actions["deliver"] > 0
    assert result.witnesses["cluster: leader elected"] > 0
    document = result.to_json()
    assert document["valid"] is True and document["runs"] == 4
    assert document["counterexamples"][0]["found_by"] == (
        "the finder of commit_without_quorum, seed 7"
    )
    assert "actions fired: " in result.describe()


def test_a_budget_spent_before_any_run_is_unknown() -> None:
    ticks = iter([0.0, 100.0, 100.0])
    result = run_campaign(InlinePool(1), 5, OPTIONS, (), clock=lambda: next(ticks))
    assert result.runs == 0
    assert result.verdict is Verdict.UNKNOWN


def _outcome(task: CampaignTask, verdict: Verdict, invariant: str | None) -> RunOutcome:
    labels = ("timeout(n1)",) if invariant else ()
    return RunOutcome(task, verdict, 0.1, 5, invariant, labels, "", "", {}, {"timeout": 1})


def test_verdicts_of_the_campaign() -> None:
    result = CampaignResult(budget_s=10, where="here")
    result.add(_outcome(CampaignTask(1), Verdict.TRUE, None))
    result.add(_outcome(CampaignTask(1, "bug"), Verdict.TRUE, None))
    assert result.verdict is Verdict.UNKNOWN  # the bug's finder ran and missed it
    result.add(_outcome(CampaignTask(2, "bug"), Verdict.FALSE, "Inv"))
    result.add(_outcome(CampaignTask(3, "bug"), Verdict.FALSE, "Inv"))
    assert result.verdict is Verdict.TRUE
    assert len(result.distinct) == 1  # the same shrunk run twice is one counterexample
    result.add(_outcome(CampaignTask(4), Verdict.FALSE, "Inv"))
    assert result.verdict is Verdict.FALSE  # the correct model broke an invariant
    assert len(result.distinct) == 2
    crashed = CampaignResult(budget_s=10, where="here")
    crashed.add(RunOutcome(CampaignTask(1), Verdict.UNKNOWN, 0.1, 0, None, (), "", "boom", {}, {}))
    assert crashed.verdict is Verdict.UNKNOWN and crashed.crashes == [
        "the correct model, seed 1: boom"
    ]

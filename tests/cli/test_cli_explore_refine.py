"""`etcdspec explore --refine`: Hypothesis runs with every step checked against the spec."""

from __future__ import annotations

import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode


def test_refined_exploration_of_the_correct_model_holds(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["explore", "--refine", "--max-examples", "5", "--steps", "30", "--seed", "1"])
    assert code == ExitCode.HOLDS
    assert "refinement checked: no violation found" in capsys.readouterr().err


def test_refinement_finds_a_bug_no_invariant_sees(capsys: pytest.CaptureFixture[str]) -> None:
    # vote_not_persisted on seed 1: the model's invariants hold on this run (see
    # tests/model/test_refinement_explore.py); the crash step breaks raft_steps.spec.
    args = [
        "explore",
        "--bug",
        "vote_not_persisted",
        "--max-examples",
        "40",
        "--steps",
        "50",
        "--seed",
        "1",
        "--quiet",
    ]
    assert run([*args, "--plain"]) == ExitCode.HOLDS
    capsys.readouterr()
    assert run([*args, "--refine"]) == ExitCode.VIOLATION
    assert "invariant Refinement violated" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [["--exhaustive"], ["--machine", "store"]])
def test_refine_is_for_hypothesis_runs_of_the_cluster(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["explore", "--refine", *extra]) == ExitCode.USAGE
    assert "--refine" in capsys.readouterr().err

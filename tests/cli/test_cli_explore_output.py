"""What `etcdspec explore` prints, stream by stream: on stderr the banner (naming the bug
switched on and the budget asked) and one summary line, progress only on a terminal;
on stdout the counterexample once; examples counted against the number asked."""

from __future__ import annotations

import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode

BUG = "figure8_commit"  # its finder: 100 examples of 12 steps per seed, shrunk by replay


def test_banner_names_the_bug_and_the_examples_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["explore", "--bug", BUG, "--max-examples", "90", "--steps", "12"]) == 1
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 2, err  # the banner and the summary: no progress off a terminal
    banner, summary = lines
    assert banner.startswith(f"[explore] the finder of {BUG}: ")
    assert f"bugs: {BUG}" in banner and "bugs: none" not in banner
    assert "90 examples of 12 steps per seed" in banner
    assert f"bugs: {BUG}" in summary and "(of at most 90)" in summary
    assert out.count("Counterexample: invariant") == 1


def test_progress_only_on_a_terminal_and_never_with_quiet(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    argv = ["explore", "--machine", "store", "--max-examples", "30", "--steps", "10"]
    assert run(argv) == ExitCode.HOLDS
    err = capsys.readouterr().err
    assert any(" distinct states, " in line for line in err.splitlines()), err  # progress
    assert run([*argv, "--quiet"]) == ExitCode.HOLDS
    assert capsys.readouterr().err == ""


def test_examples_are_counted_against_the_number_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["explore", "--machine", "store", "--max-examples", "5", "--steps", "5"]) == 0
    summary = capsys.readouterr().err.splitlines()[-1]
    assert "examples (of at most 5)" in summary or "(5 asked;" in summary, summary


def test_hypothesis_shrinking_is_not_counted_as_examples() -> None:
    """A violation found by the 3rd example and shrunk by Hypothesis in hundreds of runs
    was reported as hundreds of examples: the runs after the first failing one are
    shrinking, counted apart."""
    from etcdspec.model.bugs import BugSet
    from etcdspec.model.explore import ExploreOptions, run_hypothesis

    options = ExploreOptions(
        machine="store", max_examples=40, steps=20, bugs=BugSet.of("txn_revision_per_op")
    )
    result = run_hypothesis(options)
    assert result.counterexample is not None
    assert 1 <= result.examples <= 40, result.describe()
    assert "more runs while shrinking" in result.note

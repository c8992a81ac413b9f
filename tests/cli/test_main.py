"""The command line's exit-code discipline (DESIGN.md: 0 holds ... 255 internal error)."""

from __future__ import annotations

import pytest

from etcdspec.cli.main import VERBS, run
from etcdspec.exitcodes import ExitCode
from etcdspec.verdict import Verdict


def test_unknown_verb_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["no-such-verb"]) == ExitCode.USAGE
    assert "No such command" in capsys.readouterr().err


def test_version_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"]) == ExitCode.HOLDS
    assert "etcdspec" in capsys.readouterr().out


def test_help_lists_the_verbs_that_exist(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--help"]) == ExitCode.HOLDS
    out = capsys.readouterr().out
    assert "verify" in out
    assert set(VERBS) >= {"verify", "explore", "prove", "check", "conform", "serve"}


@pytest.mark.parametrize(
    ("left", "right", "merged"),
    [
        (Verdict.TRUE, Verdict.TRUE, Verdict.TRUE),
        (Verdict.TRUE, Verdict.UNKNOWN, Verdict.UNKNOWN),
        (Verdict.UNKNOWN, Verdict.FALSE, Verdict.FALSE),
        (Verdict.FALSE, Verdict.TRUE, Verdict.FALSE),
    ],
)
def test_verdicts_merge_false_over_unknown_over_true(
    left: Verdict, right: Verdict, merged: Verdict
) -> None:
    assert left.merge(right) is merged
    assert right.merge(left) is merged


def test_unknown_verdict_never_exits_as_a_pass() -> None:
    assert Verdict.UNKNOWN.exit_code() == ExitCode.UNKNOWN
    assert Verdict.FALSE.exit_code() == ExitCode.VIOLATION

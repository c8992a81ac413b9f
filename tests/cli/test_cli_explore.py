"""`etcdspec explore`: exit codes, --list-bugs, bad values, --json and --itf output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.model.bugs import CATALOGUE


def test_list_bugs_prints_one_line_per_catalogued_bug(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["explore", "--list-bugs"]) == ExitCode.HOLDS
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(CATALOGUE)
    for line, bug in zip(lines, CATALOGUE, strict=True):
        assert line.startswith(bug.name)
        assert f"[{bug.layer}]" in line
        assert bug.summary in line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "0"], "--nodes must be 3 or 5, got 0"),
        (["--nodes", "4"], "--nodes must be 3 or 5, got 4"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--max-examples", "-1"], "--max-examples must be at least 1"),
        (["--exhaustive", "--max-term", "0"], "--max-term must be at least 1"),
        (["--exhaustive", "--time-budget", "0"], "--time-budget must be positive"),
        (["--exhaustive", "--machine", "store"], "--exhaustive explores the cluster"),
        (["--bug", "no_such_bug"], "unknown bug no_such_bug; known bugs: accept_stale_term_append"),
        (["--membership", "--machine", "store"], "--membership changes the cluster's"),
    ],
)
def test_bad_values_are_one_line_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["explore", *argv]) == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("etcdspec: ")
    assert message in lines[0]


def test_unknown_bug_error_lists_every_known_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["explore", "--bug", "nope"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    for bug in CATALOGUE:
        assert bug.name in err


def test_non_integer_nodes_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["explore", "--nodes", "three"]) == ExitCode.USAGE
    assert "three" in capsys.readouterr().err


def test_correct_model_exits_zero_with_json_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["explore", "--max-examples", "3", "--steps", "20", "--json", "--seed", "1"])
    captured = capsys.readouterr()
    assert code == ExitCode.HOLDS, captured.err
    document = json.loads(captured.out)
    assert document["valid"] is True
    assert document["examples"] == 3
    assert document["counterexample"] is None
    assert "[explore]" in captured.err  # progress and summary go to stderr


def test_store_bug_exits_one_and_writes_itf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    itf = tmp_path / "cex.itf.json"
    code = run(
        [
            "explore",
            "--machine",
            "store",
            "--bug",
            "txn_revision_per_op",
            "--plain",
            "--max-examples",
            "200",
            "--itf",
            str(itf),
        ]
    )
    captured = capsys.readouterr()
    assert code == ExitCode.VIOLATION, captured.err
    assert captured.out.startswith("Counterexample: invariant ")
    assert "  1. " in captured.out
    document = json.loads(itf.read_text())
    assert document["#meta"]["format"] == "ITF"
    states = document["states"]
    assert len(states) >= 2
    assert all("action" in state["#meta"] for state in states[1:])
    assert set(document["vars"]) <= set(states[0])


def test_exhaustive_budget_exhausted_exits_three_never_zero(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = run(["explore", "--exhaustive", "--max-states", "50", "--quiet"])
    assert code == ExitCode.UNKNOWN
    capsys.readouterr()


def test_exhaustive_finds_a_seeded_raft_bug_and_exits_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = run(
        [
            "explore",
            "--exhaustive",
            "--bug",
            "commit_without_quorum",
            "--plain",
            "--max-term",
            "2",
            "--max-log",
            "1",
            "--json",
            "--quiet",
        ]
    )
    captured = capsys.readouterr()
    assert code == ExitCode.VIOLATION, captured.err
    document = json.loads(captured.out)
    assert document["valid"] is False
    assert document["mode"] == "exhaustive"
    assert document["counterexample"]["invariant"] == "LeaderCompleteness"
    assert document["counterexample"]["steps"]


def test_a_cluster_violation_prints_numbered_steps(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["explore", "--bug", "no_truncate_conflict", "--quiet"])
    captured = capsys.readouterr()
    assert code == ExitCode.VIOLATION, captured.err
    assert captured.out.startswith("Counterexample: invariant ")
    assert "  1. " in captured.out
    assert "Violated: " in captured.out


def test_plain_cluster_options_reach_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(
        [
            "explore",
            "--max-examples",
            "3",
            "--steps",
            "10",
            "--timeouts",
            "ticks",
            "--persist",
            "explicit",
            "--no-prevote",
            "--json",
            "--quiet",
        ]
    )
    captured = capsys.readouterr()
    assert code == ExitCode.HOLDS, captured.err
    assert json.loads(captured.out)["valid"] is True


def test_membership_search_covers_its_space_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["explore", "--membership", "--exhaustive", "--max-term", "2", "--max-log", "1"]
    assert run([*argv, "--json"]) == ExitCode.HOLDS
    result = json.loads(capsys.readouterr().out)
    assert result["valid"] is True and result["distinct_states"] == 1046

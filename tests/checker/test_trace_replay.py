"""Trace validation on hand-made traces: a correct run replays; each protocol mutation
(a vote forgotten on restart, two leaders in a term, commit moving backwards, a message
sent before the Ready was persisted, a commit without a quorum, different entries applied
at one index, logs that agree on an entry but not before it) is reported at the exact
event, with the rule it breaks and a readable explanation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from trace_scenarios import TraceBuilder, clean_run, figure8_run

from etcdspec.checker.trace_check import check_traces
from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.verdict import Verdict

Lines = dict[int, list[dict[str, Any]]]


def _find(lines: list[dict[str, Any]], event: str, nth: int = 0, **where: Any) -> int:
    """Position of the nth line with this event whose message/fields match `where`."""
    found = []
    for position, line in enumerate(lines):
        if line["event"] != event:
            continue
        fields = {**line, **line.get("message", {})}
        if all(fields.get(k) == v for k, v in where.items()):
            found.append(position)
    return found[nth]


def _swap(lines: list[dict[str, Any]], a: int, b: int) -> None:
    lines[a], lines[b] = lines[b], lines[a]
    lines[a]["seq"], lines[b]["seq"] = lines[b]["seq"], lines[a]["seq"]


def forgotten_vote(lines: Lines) -> tuple[int, int]:
    restart = _find(lines[3], "start", 1)
    lines[3][restart]["vote"] = 0
    return 3, restart


def two_leaders(lines: Lines) -> tuple[int, int]:
    heartbeat = _find(lines[2], "receive", type="HEARTBEAT")
    lines[2][heartbeat]["role"] = "leader"
    return 2, heartbeat


def vote_changed_in_a_term(lines: Lines) -> tuple[int, int]:
    receive = _find(lines[3], "receive", type="VOTE", term=2)
    lines[3][receive]["term"] = 1
    return 3, receive


def commit_backwards(lines: Lines) -> tuple[int, int]:
    send = _find(lines[1], "send", type="HEARTBEAT")
    lines[1][send]["commit"] = 1
    return 1, send


def ack_before_persist(lines: Lines) -> tuple[int, int]:
    send = _find(lines[2], "send", type="APP_RESP", index=1)
    persist = send - 1
    _swap(lines[2], persist, send)
    return 2, persist


def vote_before_persist(lines: Lines) -> tuple[int, int]:
    send = _find(lines[2], "send", type="VOTE_RESP")
    persist = send - 1
    _swap(lines[2], persist, send)
    return 2, persist


def commit_without_quorum(lines: Lines) -> tuple[int, int]:
    persist = _find(lines[1], "persist", 1)
    for line in lines[1][persist : _find(lines[1], "receive", type="APP_RESP")]:
        line["commit"] = 1
    return 1, persist


def different_entry_applied(lines: Lines) -> tuple[int, int]:
    persist = _find(lines[3], "persist", 2)
    lines[3][persist]["entries"] = [[2, 5]]
    apply = _find(lines[3], "apply", 1)
    lines[3][apply]["entries"] = [[2, 5]]
    return 3, apply


def logs_disagree_before_a_shared_entry(lines: Lines) -> tuple[int, int]:
    first = _find(lines[3], "persist", 1)
    lines[3][first]["entries"] = [[1, 7]]
    second = _find(lines[3], "persist", 2)
    return 3, second


def applied_entry_overwritten(lines: Lines) -> tuple[int, int]:
    persist = _find(lines[2], "persist", entries=[[3, 2]])
    lines[2][persist]["entries"] = [[2, 2], [3, 2]]
    return 2, persist


def committed_entries_lost_on_restart(lines: Lines) -> tuple[int, int]:
    restart = _find(lines[3], "start", 1)
    lines[3][restart].update(last_index=1, commit=1, applied=1)
    return 3, restart


MUTATIONS: list[tuple[Callable[[Lines], tuple[int, int]], str, str]] = [
    (forgotten_vote, "DurableRestart", "restarted with term 1 and no vote"),
    (two_leaders, "ElectionSafety", "two leaders in term 1"),
    (vote_changed_in_a_term, "VoteOnce", "changed its vote in term 1 from n1 to n2"),
    (commit_backwards, "CommitMonotonic", "went back from 2 to 1"),
    (ack_before_persist, "ReadyContract", "acknowledged index 1"),
    (vote_before_persist, "ReadyContract", "before persisting that vote"),
    (commit_without_quorum, "LeaderCommit", "only 1 of the quorum of 2"),
    (different_entry_applied, "StateMachineSafety", "applied entry 2 of term 5"),
    (logs_disagree_before_a_shared_entry, "LogMatching", "agree at index 2"),
    (committed_entries_lost_on_restart, "DurableRestart", "had applied entries up to 2"),
    (applied_entry_overwritten, "AppliedKept", "persisted entries from 2 over its log"),
]


def _write(builder: TraceBuilder, tmp_path: Path) -> list[Path]:
    return builder.write(tmp_path)


def test_clean_hand_made_run_replays(tmp_path: Path) -> None:
    builder = clean_run()
    result = check_traces(_write(builder, tmp_path))
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.events == sum(len(lines) for lines in builder.lines.values())
    assert result.failure is None and result.unmatched_receives == 0


@pytest.mark.parametrize(
    ("mutate", "rule", "text"), MUTATIONS, ids=lambda x: getattr(x, "__name__", None)
)
def test_mutated_trace_is_reported_at_the_mutated_event(
    tmp_path: Path, mutate: Callable[[Lines], tuple[int, int]], rule: str, text: str
) -> None:
    builder = clean_run()
    node, position = mutate(builder.lines)
    result = check_traces(_write(builder, tmp_path))
    assert result.verdict is Verdict.FALSE
    failure = result.failure
    assert failure is not None
    assert failure.rule == rule, failure.describe()
    assert failure.event.location == f"{tmp_path / f'n{node}.trace.ndjson'}:{position + 1}"
    assert text in failure.explanation, failure.describe()
    assert failure.states and failure.states[0].node == node
    assert failure.event.location in failure.describe()


def test_cli_exit_codes_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = _write(clean_run(), tmp_path)
    assert run(["check-trace", *map(str, clean)]) == ExitCode.HOLDS
    builder = clean_run()
    two_leaders(builder.lines)
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    capsys.readouterr()
    assert run(["check-trace", "--json", *map(str, _write(builder, bad_dir))]) == ExitCode.VIOLATION
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "etcdspec-trace-check" and document["verdict"] is False
    assert document["failure"]["rule"] == "ElectionSafety"
    assert document["failure"]["location"].endswith(
        "n2.trace.ndjson:" + str(_find(builder.lines[2], "receive", type="HEARTBEAT") + 1)
    )


@pytest.mark.parametrize("bug", [False, True], ids=["correct", "figure8"])
def test_leader_commits_only_entries_of_its_term(tmp_path: Path, bug: bool) -> None:
    builder = figure8_run(bug)
    result = check_traces(_write(builder, tmp_path))
    if not bug:
        assert result.verdict is Verdict.TRUE, result.describe()
        assert result.witness("leader commits") == 1
        return
    failure = result.failure
    assert failure is not None and failure.rule == "LeaderCommit", result.describe()
    assert failure.event.location == f"{tmp_path / 'n1.trace.ndjson'}:{len(builder.lines[1])}"
    assert "an entry of term 1" in failure.explanation


def test_receive_whose_send_was_not_traced_is_let_through_and_counted(tmp_path: Path) -> None:
    """A sender killed before it flushed its trace loses its last send lines; the peer's
    receive of that message still replays, counted as unmatched."""
    builder = clean_run()
    lines = builder.lines[1]
    send = _find(lines, "send", type="HEARTBEAT", to=3)
    del lines[send]
    for line in lines[send:]:
        line["seq"] -= 1
    result = check_traces(_write(builder, tmp_path))
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.unmatched_receives == 1
    assert "1 receives without a traced send" in result.describe()


def test_receive_before_its_send_is_a_causality_failure(tmp_path: Path) -> None:
    """n1 asks n2 for its vote only after it received n2's grant: no order of the traces
    puts each receive after its send. Reported at the first waiting receive (n1's)."""
    builder = clean_run()
    lines = builder.lines[1]
    ask = _find(lines, "send", type="VOTE", to=2)
    moved = lines.pop(ask)
    answer = _find(lines, "receive", type="VOTE_RESP", term=1)
    lines.insert(answer + 1, moved)
    for seq, line in enumerate(lines[1:], start=2):
        if line["event"] == "start":
            break
        line["seq"] = seq
    result = check_traces(_write(builder, tmp_path))
    assert result.failure is not None and result.failure.rule == "Causality", result.describe()
    assert result.failure.event.location == f"{tmp_path / 'n1.trace.ndjson'}:{answer + 1}"
    assert "sends only later" in result.failure.explanation


def test_a_member_without_its_trace_is_named_and_the_rest_still_checked(tmp_path: Path) -> None:
    builder = clean_run()
    paths = _write(builder, tmp_path)
    result = check_traces(paths[:2])
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.untraced == (3,)
    assert "members without a trace (their own steps unchecked): 3" in result.describe()
    assert result.witness("leader commits") >= 2  # the quorum still counts n3's acks

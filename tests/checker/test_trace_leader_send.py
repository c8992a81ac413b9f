"""The Ready contract on sends, with the leader's parallel persist: a leader's MsgApp may
leave before the persist that covers its own new entries (Raft dissertation §10.2.1, as
etcd and our server do), while a follower's MsgAppResp and any vote grant still leave
only after their persist, and a leader is still counted in a commit quorum only as far as
its log is durable (LeaderCommit).

The traces are the hand-made clean run of trace_scenarios with one member's lines moved
(seq renumbered), so each case differs from a correct run in one place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trace_scenarios import TraceBuilder, clean_run

from etcdspec.checker.trace_check import check_traces
from etcdspec.verdict import Verdict

Lines = list[dict[str, Any]]


def _position(lines: Lines, event: str, **where: Any) -> int:
    for position, line in enumerate(lines):
        fields = {**line, **line.get("message", {})}
        if line["event"] == event and all(fields.get(k) == v for k, v in where.items()):
            return position
    raise AssertionError(f"no {event} line with {where}")


def _move_after(lines: Lines, position: int, count: int) -> int:
    """Move the line at `position` after the `count` lines that follow it; renumber seq.
    Returns the line's new position."""
    line = lines.pop(position)
    lines.insert(position + count, line)
    seq = 0
    for each in lines:
        seq = 1 if each["event"] == "start" else seq + 1
        each["seq"] = seq
    return position + count


def _replay(builder: TraceBuilder, tmp_path: Path) -> Any:
    return check_traces(builder.write(tmp_path))


@pytest.mark.parametrize(("entries", "sends"), [([[1, 1]], 2), ([[2, 1]], 2), ([[3, 2]], 1)])
def test_leader_append_may_leave_before_its_persist(
    tmp_path: Path, entries: list[list[int]], sends: int
) -> None:
    builder = clean_run()
    leader = 2 if entries == [[3, 2]] else 1
    lines = builder.lines[leader]
    persist = _position(lines, "persist", entries=entries)
    assert all(
        line["message"]["type"] == "APP" for line in lines[persist + 1 : persist + 1 + sends]
    )
    _move_after(lines, persist, sends)
    result = _replay(builder, tmp_path)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.witness("entries sent before the leader persisted them") == sends


def test_follower_ack_before_its_persist_is_caught(tmp_path: Path) -> None:
    builder = clean_run()
    lines = builder.lines[2]
    persist = _position(lines, "persist", entries=[[1, 1]])
    assert lines[persist + 1]["message"]["type"] == "APP_RESP"
    send = persist
    _move_after(lines, persist, 1)
    result = _replay(builder, tmp_path)
    failure = result.failure
    assert failure is not None and failure.rule == "ReadyContract", result.describe()
    assert failure.event.location.endswith(f"n2.trace.ndjson:{send + 1}")
    assert "acknowledged index 1" in failure.explanation


@pytest.mark.parametrize("node", [2, 3])
def test_vote_grant_before_its_persist_is_caught(tmp_path: Path, node: int) -> None:
    builder = clean_run()
    lines = builder.lines[node]
    send = _position(lines, "send", type="VOTE_RESP")
    _move_after(lines, send - 1, 1)
    result = _replay(builder, tmp_path)
    failure = result.failure
    assert failure is not None and failure.rule == "ReadyContract", result.describe()
    assert failure.event.location.endswith(f"n{node}.trace.ndjson:{send}")
    assert "before persisting that vote" in failure.explanation


def test_leader_sending_an_older_terms_entry_before_persisting_it_is_caught(
    tmp_path: Path,
) -> None:
    """Only the leader's own new entries (of its term) may run ahead of its disk."""
    builder = clean_run()
    lines = builder.lines[2]
    persist = _position(lines, "persist", entries=[[3, 2]])
    lines[persist]["entries"] = [[3, 1]]
    lines[persist + 1]["message"]["entries"] = [[3, 1]]
    send = _move_after(lines, persist, 1) - 1
    receive = _position(builder.lines[3], "receive", type="APP", term=2)
    builder.lines[3][receive]["message"]["entries"] = [[3, 1]]
    result = _replay(builder, tmp_path)
    failure = result.failure
    assert failure is not None and failure.rule == "ReadyContract", result.describe()
    assert failure.event.location.endswith(f"n2.trace.ndjson:{send + 1}")
    assert "before persisting it" in failure.explanation


def test_leader_whose_term_is_not_durable_may_not_send_ahead(tmp_path: Path) -> None:
    """n1's campaign (its persist of term 1 and vote, and its vote requests) is missing
    from its trace but for a role line: its term and vote are not known durable, so its
    MsgApp may not carry an entry it has not persisted."""
    builder = clean_run()
    lines = builder.lines[1]
    campaign = _position(lines, "persist", term=1, vote=1)
    lines[campaign]["event"] = "role"  # seen a candidate (its grants count), never persisted
    del lines[campaign + 1 : campaign + 3]  # the two vote requests
    persist = _position(lines, "persist", entries=[[1, 1]])
    send = _move_after(lines, persist, 2) - 2
    result = _replay(builder, tmp_path)
    failure = result.failure
    assert failure is not None and failure.rule == "ReadyContract", result.describe()
    assert failure.event.location.endswith(f"n1.trace.ndjson:{send + 1}")
    assert "before persisting it" in failure.explanation


def test_leader_counting_its_unpersisted_entry_in_the_quorum_is_caught(tmp_path: Path) -> None:
    """The leader's MsgApp left early (allowed), but it committed entry 2 on n3's
    acknowledgement alone, before its own persist of entry 2: LeaderCommit."""
    builder = clean_run()
    lines = builder.lines[1]
    persist = _position(lines, "persist", entries=[[2, 1]])
    commit = _position(lines, "receive", type="APP_RESP", index=2)
    _move_after(lines, persist, commit - persist)
    result = _replay(builder, tmp_path)
    failure = result.failure
    assert failure is not None and failure.rule == "LeaderCommit", result.describe()
    assert failure.event.location.endswith(f"n1.trace.ndjson:{commit}")
    assert "only 1 of the quorum of 2" in failure.explanation

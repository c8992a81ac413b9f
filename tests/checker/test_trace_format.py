"""Malformed traces are bad input: a typed error naming file:line and what is wrong, and
`etcdspec check-trace` exits 4 with that message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from etcdspec.checker.trace_check import check_traces
from etcdspec.checker.trace_format import TraceFormatError, read_trace, read_trace_file
from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode

START = {
    "v": 1,
    "seq": 1,
    "event": "start",
    "node": 7,
    "term": 0,
    "vote": 0,
    "role": "follower",
    "commit": 0,
    "applied": 0,
    "last_index": 0,
    "last_term": 0,
}


def _line(**changes: object) -> str:
    line = {**START, **changes}
    for key, value in changes.items():
        if value is None:
            del line[key]
    return json.dumps(line)


BAD = [
    ("not_json", [_line(), "{oops"], 2, "not JSON"),
    ("array", [_line(), "[1, 2]"], 2, "must be a JSON object"),
    ("version", [_line(v=2)], 1, "trace version 2"),
    ("unknown_event", [_line(), _line(seq=2, event="tick")], 2, "unknown event 'tick'"),
    ("unknown_role", [_line(role="boss")], 1, "unknown role 'boss'"),
    ("missing_term", [_line(), _line(seq=2, event="role", term=None)], 2, "field 'term'"),
    ("negative_commit", [_line(commit=-1)], 1, "field 'commit' must be a non-negative"),
    ("seq_gap", [_line(), _line(seq=3, event="role")], 2, "seq 3 does not follow seq 1"),
    ("first_not_start", [_line(event="role")], 1, "begins with a start event"),
    ("send_without_message", [_line(), _line(seq=2, event="send")], 2, "needs a 'message'"),
    ("bad_entries", [_line(), _line(seq=2, event="persist", entries=[[1]])], 2, "[index, term]"),
    (
        "other_node",
        [_line(), _line(seq=2, event="role", node=8)],
        2,
        "node 8 in the trace of node 7",
    ),
    ("start_seq", [_line(seq=2)], 1, "a start event has seq 1"),
    ("empty", [], 1, "no events"),
]


@pytest.mark.parametrize(("lines", "number", "text"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_malformed_trace_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], number: int, text: str
) -> None:
    path = tmp_path / "m1.trace.ndjson"
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(TraceFormatError) as caught:
        read_trace(path)
    assert caught.value.location == f"{path}:{number}"
    assert text in str(caught.value)
    capsys.readouterr()
    assert run(["check-trace", str(path)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{path}:{number}" in err and text in err


def test_missing_file_and_one_member_twice_are_bad_input(tmp_path: Path) -> None:
    assert run(["check-trace", str(tmp_path / "absent.ndjson")]) == ExitCode.BAD_INPUT
    path = tmp_path / "m1.trace.ndjson"
    path.write_text(_line() + "\n")
    copy = tmp_path / "m1-copy.trace.ndjson"
    copy.write_text(_line() + "\n")
    with pytest.raises(TraceFormatError, match="node 7 is traced in"):
        check_traces([path, copy])


def test_no_files_is_a_usage_error() -> None:
    assert run(["check-trace"]) == ExitCode.USAGE


def test_lines_cut_by_a_kill_are_dropped_and_counted(tmp_path: Path) -> None:
    """A member killed mid-write leaves a cut line: at the end of the file (no newline),
    or with its next run's start appended to it. Anywhere else a cut line is bad input."""
    role = _line(seq=2, event="role")
    path = tmp_path / "m1.trace.ndjson"
    path.write_text(_line() + "\n" + role + "\n" + role[:25] + _line(term=1) + "\n" + role[:30])
    traced = read_trace_file(path)
    assert [(e.event, e.line) for e in traced.events] == [("start", 1), ("role", 2), ("start", 3)]
    assert traced.events[2].term == 1 and traced.torn_lines == 2
    path.write_text(_line() + "\n" + role[:30] + "\n" + role + "\n")
    with pytest.raises(TraceFormatError, match=f"{path}:2: not JSON"):
        read_trace_file(path)


def test_a_directory_stands_for_its_trace_files(tmp_path: Path) -> None:
    (tmp_path / "m1.trace.ndjson").write_text(_line() + "\n")
    (tmp_path / "m2.trace.ndjson").write_text(_line(node=8) + "\n")
    (tmp_path / "m1.log").write_text("not a trace\n")
    result = check_traces([tmp_path])
    assert result.events == 2 and len(result.nodes) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceFormatError, match="without"):
        check_traces([empty])
    assert run(["check-trace", str(empty)]) == ExitCode.BAD_INPUT

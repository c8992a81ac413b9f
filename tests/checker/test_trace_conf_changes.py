"""Trace validation across configuration changes (format 1.1), on hand-made traces: a run
that adds a learner, promotes it, adds and promotes another and removes a member holds,
judged by the quorum of the leader's configuration at each commit; a commit counted with
a learner's or a removed member's acknowledgement, a commit by the old configuration's
quorum after a promotion, and a configuration that does not follow the log are refused
at the exact line; a 1.0 trace (no configuration) still reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trace_scenarios import MembershipRun, clean_run, message

from etcdspec.checker.trace_check import check_traces
from etcdspec.checker.trace_format import TraceFormatError, read_trace
from etcdspec.verdict import Verdict


def test_membership_run_holds(tmp_path: Path) -> None:
    result = check_traces(MembershipRun().build().write(tmp_path))
    assert result.verdict is Verdict.TRUE, result.describe()
    witnesses = dict(result.witnesses)
    assert witnesses["configurations changed"] == 11  # 5 on n1, 4 on n2 (after joining), 2 on n3
    assert witnesses["leader commits"] == 10
    assert witnesses["elections checked"] == 1  # n1, the single voter, elects itself
    # n1 commits entries 1..4 alone although n2 is traced: a learner is no voter.
    n1 = [json.loads(x) for x in (tmp_path / "n1.trace.ndjson").read_text().splitlines()]
    assert [x["commit"] for x in n1 if x["event"] == "persist" and x.get("entries")][:4] == [
        1,
        2,
        3,
        4,
    ]


def test_removed_member_falls_silent(tmp_path: Path) -> None:
    """n2's trace ends where it applies its own removal, before entry 10: it is not
    required to go on, and the run holds."""
    paths = MembershipRun().build().write(tmp_path)
    n2 = read_trace(paths[1])
    assert n2[-1].event == "apply" and n2[-1].conf_changes[0].type == "REMOVE_NODE"
    assert n2[-1].last_index == 9
    assert check_traces(paths).verdict is Verdict.TRUE


@pytest.mark.parametrize(
    ("bug", "rule", "node", "needle"),
    [
        (
            "alone",
            "LeaderCommit",
            1,
            "advanced its commit index to 5, but only 1 of the quorum of 2",
        ),
        ("learner", "LeaderCommit", 1, "voters [1, 2] learners [3]) hold it"),
        (
            "removed",
            "LeaderCommit",
            1,
            "index to 10, but only 1 of the quorum of 2 of its configuration (voters [1, 3])",
        ),
        (
            "conf",
            "ConfChange",
            2,
            "applied 4: ADD_NODE 2 to voters [1] learners [2] and then used voters [1, 2, 3]",
        ),
        ("unlogged", "ConfChange", 1, "at a role event"),
    ],
)
def test_planted_wrong_membership_is_refused(
    tmp_path: Path, bug: str, rule: str, node: int, needle: str
) -> None:
    builder = MembershipRun(bug).build()
    result = check_traces(builder.write(tmp_path))
    failure = result.failure
    assert result.verdict is Verdict.FALSE and failure is not None, result.describe()
    assert failure.rule == rule, result.describe()
    assert failure.event.node == node
    assert needle in failure.explanation, failure.explanation
    assert f"{rule} broken" in result.describe()


def test_one_point_zero_trace_reads_with_the_names_quorum(tmp_path: Path) -> None:
    """The run without its configuration (format 1.0: "minor", conf and conf_changes
    stripped) still reads, and is judged as before by a majority of the names: 3 nodes,
    so n1's election alone at the start is refused, and (the election let through) its
    commits alone are (the false reports format 1.1 ends)."""
    builder = MembershipRun("learner").build()
    for lines in builder.lines.values():
        for line in lines:
            for key in ("minor", "conf", "conf_changes"):
                line.pop(key, None)
    paths = builder.write(tmp_path)
    assert all(event.conf is None for event in read_trace(paths[0]))
    result = check_traces(paths)
    # Without configurations n1's election by itself breaks the names' quorum ...
    assert result.failure is not None and result.failure.rule == "LeaderElection"
    assert result.failure.event.location.endswith("n1.trace.ndjson:3")
    assert "with 1 of the 2 votes it needs (a majority of the 3 nodes the traces name)" in (
        result.failure.explanation
    )
    # ... and so do its commits alone (entries 1..4), once it has n3's vote.
    n1, n3 = builder.lines[1], builder.lines[3]
    vote, grant = message("VOTE", 1, 3, 1), message("VOTE_RESP", 3, 1, 1)
    n1[2:2] = [{**n1[1], "event": "send", "message": vote}]
    n1[3:3] = [{**n1[1], "event": "receive", "message": grant}]
    for line in n3:
        line.update(term=1, vote=1)
    n3[1:1] = [
        {**n3[0], "event": "receive", "message": vote},
        {**n3[0], "event": "persist"},
        {**n3[0], "event": "send", "message": grant},
    ]
    for lines in (n1, n3):
        for seq, line in enumerate(lines, start=1):
            line["seq"] = seq
    result = check_traces(builder.write(tmp_path))
    assert result.failure is not None and result.failure.rule == "LeaderCommit"
    assert "index to 1, but only 1 of the quorum of 2 hold it" in result.failure.explanation


def test_clean_one_point_zero_run_still_holds(tmp_path: Path) -> None:
    assert check_traces(clean_run().write(tmp_path)).verdict is Verdict.TRUE


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        ({"conf": {"voters": [1], "learners": [1]}}, "both voter and learner"),
        ({"conf": {"voters": "1"}}, "conf field 'voters' must be a list of node ids"),
        ({"conf_changes": [[1, "ADD", 2]]}, "type one of ADD_LEARNER_NODE"),
        ({"conf_changes": [[7, "ADD_NODE", 2]]}, "conf change at index 7 is not among"),
        ({"minor": -1}, "field 'minor' must be a non-negative integer"),
    ],
)
def test_bad_configuration_fields_are_named(
    tmp_path: Path, edit: dict[str, object], problem: str
) -> None:
    builder = MembershipRun().build()
    line = builder.lines[1][3]  # n1's persist of entry 1
    assert line["event"] == "persist"
    line.update(edit)
    paths = builder.write(tmp_path)
    with pytest.raises(TraceFormatError) as caught:
        read_trace(paths[0])
    assert caught.value.location.endswith("n1.trace.ndjson:4")
    assert problem in caught.value.problem


def test_start_without_configuration_is_refused_in_one_point_one(tmp_path: Path) -> None:
    builder = MembershipRun().build()
    del builder.lines[1][0]["conf"]
    with pytest.raises(TraceFormatError, match="needs 'conf'"):
        read_trace(builder.write(tmp_path)[0])

"""Trace validation on traces recorded from a real 3-member cluster of our server: a run
with writes, a kill -9 of the leader and its restart (with snapshots sent to the member
that fell behind) replays on the model, every kind of check having had work; the same
traces, mutated as the named bugs would write them, are caught at the mutated line."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from trace_cluster import record, record_concurrent, record_partition

from etcdspec.checker.trace_check import check_traces
from etcdspec.verdict import Verdict

Traces = list[list[dict[str, Any]]]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    directory = tmp_path_factory.mktemp("traced-cluster")
    return record(directory, kill="leader", writes=10, snapshot_count=5)


def _load(paths: list[Path]) -> Traces:
    return [[json.loads(line) for line in path.read_text().splitlines()] for path in paths]


def _store(traces: Traces, directory: Path) -> list[Path]:
    directory.mkdir()
    paths = []
    for position, lines in enumerate(traces):
        path = directory / f"m{position + 1}.trace.ndjson"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        paths.append(path)
    return paths


def test_recorded_cluster_run_replays_on_the_model(recorded: list[Path]) -> None:
    result = check_traces(recorded)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.witness("restarts") >= 1
    assert result.witness("leader terms") >= 2  # the killed leader was replaced
    assert result.witness("votes sent") >= 4
    assert result.witness("elections checked") >= 2  # each won by a quorum of votes
    assert result.witness("leader commits") >= 10
    assert result.witness("entries applied") >= 2 * 30  # a restored snapshot skips some
    assert result.witness("matched receives") >= 100


def forget_vote_on_restart(traces: Traces) -> tuple[int, int]:
    for member, lines in enumerate(traces):
        starts = [i for i, line in enumerate(lines) if line["event"] == "start"]
        if len(starts) > 1:
            restart = starts[1]
            assert lines[restart]["vote"] != 0, "the restarted leader had voted for itself"
            lines[restart]["vote"] = 0
            return member, restart
    raise AssertionError("no member was restarted")


def ack_before_fsync(traces: Traces) -> tuple[int, int]:
    for member, lines in enumerate(traces):
        for i, (persist, send) in enumerate(itertools.pairwise(lines)):
            message = send.get("message", {})
            if (
                persist["event"] == "persist"
                and persist.get("entries")
                and send["event"] == "send"
                and message["type"] == "APP_RESP"
                and not message["reject"]
                and message["index"] == persist["entries"][-1][0]
            ):
                del lines[i]
                for later in lines[i:]:
                    if later["event"] == "start":
                        break
                    later["seq"] -= 1
                return member, i
    raise AssertionError("no follower persisted entries and then acknowledged them")


def second_leader(traces: Traces) -> tuple[int, int]:
    leader_terms = {line["term"] for lines in traces for line in lines if line["role"] == "leader"}
    for member, lines in enumerate(traces):
        for i, line in enumerate(lines):
            if (
                line["role"] == "follower"
                and line["term"] in leader_terms
                and line["event"] == "receive"
                and line["message"]["type"] == "HEARTBEAT"  # the leader was elected before
            ):
                line["role"] = "leader"
                return member, i
    raise AssertionError("no follower received a heartbeat")


def commit_backwards(traces: Traces) -> tuple[int, int]:
    for member, lines in enumerate(traces):
        for i, (before, after) in enumerate(itertools.pairwise(lines)):
            if (
                after["event"] != "start"
                and before["commit"] >= 3
                and after["commit"] == before["commit"]
            ):
                after["commit"] = before["commit"] - 2
                return member, i + 1
    raise AssertionError("no commit index of 3 or more was traced")


def win_on_a_rejection(traces: Traces) -> tuple[int, int]:
    """The grant that a leader won on (a three-member cluster: the first grant wins)
    turned into a rejection, at both its ends: the win then lacks a quorum of votes."""
    for member, lines in enumerate(traces):
        for i, (before, line) in enumerate(itertools.pairwise(lines)):
            message = line.get("message", {})
            if (
                line["event"] == "receive"
                and line["role"] == "leader"
                and before["role"] != "leader"
                and message["type"] == "VOTE_RESP"
                and not message["reject"]
            ):
                for other in traces:
                    for sent in other:
                        if sent["event"] == "send" and sent.get("message") == message:
                            sent["message"] = {**message, "reject": True}
                line["message"] = {**message, "reject": True}
                return member, i + 1
    raise AssertionError("no leader won on receiving a vote")


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (forget_vote_on_restart, "DurableRestart"),
        (ack_before_fsync, "ReadyContract"),
        (second_leader, "ElectionSafety"),
        (commit_backwards, "CommitMonotonic"),
        (win_on_a_rejection, "LeaderElection"),
    ],
    ids=lambda x: getattr(x, "__name__", None),
)
def test_mutated_recorded_trace_is_caught_at_the_mutated_line(
    recorded: list[Path], tmp_path: Path, mutate: Callable[[Traces], tuple[int, int]], rule: str
) -> None:
    traces = _load(recorded)
    member, position = mutate(traces)
    paths = _store(traces, tmp_path / "mutated")
    result = check_traces(paths)
    assert result.failure is not None, result.describe()
    assert result.failure.rule == rule, result.describe()
    assert result.failure.event.location == f"{paths[member]}:{position + 1}", result.describe()


def test_a_copy_of_the_recorded_traces_still_replays(recorded: list[Path], tmp_path: Path) -> None:
    """The mutation tests' load/store round trip changes nothing by itself."""
    paths = _store(_load(recorded), tmp_path / "copy")
    assert check_traces(paths).verdict is Verdict.TRUE
    shutil.rmtree(tmp_path / "copy")


def test_partitioned_leader_run_replays_with_its_entries_overwritten(tmp_path: Path) -> None:
    """The leader is cut off and given writes it cannot commit; after the heal the new
    leader's entries overwrite them, which the replay follows (truncation is legal for
    entries that were never applied)."""
    result = check_traces(record_partition(tmp_path))
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.witness("leader terms") >= 2
    assert result.witness("entries overwritten") >= 1, result.describe()


def test_concurrent_writes_with_kills_mid_load_replay(tmp_path: Path) -> None:
    """Six concurrent writers; the leader and a follower are killed mid-load and
    restarted; snapshots every 20 entries. Batched Readies, fsyncs overlapping new
    messages, restarts and snapshot installs all replay on the model."""
    result = check_traces(record_concurrent(tmp_path))
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.witness("restarts") == 3
    assert result.witness("leader terms") >= 2
    assert result.witness("leader commits") >= 50

"""Protocol bugs planted in the real server (ETCDSPEC_FAILPOINTS) are caught by replaying
its traces, at the event that shows them, although the writes themselves succeed.

- forget_vote_on_restart: the WAL never holds the vote. The leader (which voted for
  itself) is killed with SIGKILL and restarted: it comes back in its term with no vote,
  and the replay reports DurableRestart at that start event. Deterministic: a leader has
  always voted for itself in its term, and it is killed before any later election.
- ack_before_fsync: a Ready's messages leave before its WAL write. The first campaign's
  vote request leaves before the vote is persisted: ReadyContract. Deterministic: every
  election sends one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from trace_cluster import record

from etcdspec.checker.trace_check import check_traces
from etcdspec.verdict import Verdict


@pytest.mark.parametrize(
    ("failpoint", "rule", "event"),
    [
        ("forget_vote_on_restart", "DurableRestart", "start"),
        ("ack_before_fsync", "ReadyContract", "send"),
    ],
)
def test_failpoint_run_is_caught_by_trace_replay(
    tmp_path: Path, failpoint: str, rule: str, event: str
) -> None:
    paths = record(tmp_path, kill="leader", writes=5, env={"ETCDSPEC_FAILPOINTS": failpoint})
    result = check_traces(paths)
    assert result.verdict is Verdict.FALSE, result.describe()
    failure = result.failure
    assert failure is not None
    assert failure.rule == rule, failure.describe()
    assert failure.event.event == event, failure.describe()

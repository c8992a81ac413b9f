"""Golden Raft scenarios: a script of cluster commands and the exact transcript expected.

Each scenario pins one Raft property (named in the test id) on the model's cluster, with
timeouts as explicit actions so nothing depends on timing. The transcripts are the
readable output of etcdspec.model.raft_script; on a mismatch the test prints both.
"""

from __future__ import annotations

from typing import Any

import pytest

from etcdspec.model.cluster import ClusterConfig
from etcdspec.model.raft_script import run_script

SCENARIOS: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "leader_elected_commits_and_followers_apply",
        {},
        """
        timeout 1
        stabilize
        state
        propose 1 a=1
        stabilize
        heartbeat 1
        stabilize
        state
        committed
        check
        """,
        """
        > timeout 1
        > stabilize
        > state
        n1 leader term 1 vote n1 log [1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1] commit 0 applied 0
        n3 follower term 1 vote n1 log [1] commit 0 applied 0
        > propose 1 a=1
        > stabilize
        n1 applied 2 put(a=1) -> put-> rev 2
        > heartbeat 1
        > stabilize
        n2 applied 2 put(a=1) -> put-> rev 2
        n3 applied 2 put(a=1) -> put-> rev 2
        > state
        n1 leader term 1 vote n1 log [1 1] commit 2 applied 2
        n2 follower term 1 vote n1 log [1 1] commit 2 applied 2
        n3 follower term 1 vote n1 log [1 1] commit 2 applied 2
        > committed
        1/1:noop 2/1:put(a=1)
        > check
        ok
        """,
    ),
    (
        "prevote_keeps_a_partitioned_node_from_raising_its_term",
        {},
        """
        timeout 1
        stabilize
        partition 3 | 1 2
        timeout 3
        timeout 3
        state
        heal
        stabilize
        state
        check
        """,
        """
        > timeout 1
        > stabilize
        > partition 3 | 1 2
        > timeout 3
        > timeout 3
        > state
        n1 leader term 1 vote n1 log [1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1] commit 0 applied 0
        n3 pre-candidate term 1 vote n1 log [1] commit 0 applied 0
        > heal
        > stabilize
        > state
        n1 leader term 1 vote n1 log [1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1] commit 0 applied 0
        n3 pre-candidate term 1 vote n1 log [1] commit 0 applied 0
        > check
        ok
        """,
    ),
    (
        "without_prevote_a_rejoining_node_deposes_the_leader",
        {"prevote": False},
        """
        timeout 1
        stabilize
        partition 3 | 1 2
        timeout 3
        timeout 3
        state
        heal
        heartbeat 1
        stabilize
        state
        check
        """,
        """
        > timeout 1
        > stabilize
        > partition 3 | 1 2
        > timeout 3
        > timeout 3
        > state
        n1 leader term 1 vote n1 log [1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1] commit 0 applied 0
        n3 candidate term 3 vote n3 log [1] commit 0 applied 0
        > heal
        > heartbeat 1
        > stabilize
        > state
        n1 follower term 3 log [1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1] commit 1 applied 1
        n3 candidate term 3 vote n3 log [1] commit 0 applied 0
        > check
        ok
        """,
    ),
    (
        "check_quorum_steps_down_an_isolated_leader",
        {},
        """
        timeout 1
        stabilize
        partition 1 | 2 3
        timeout 1
        state
        timeout 1
        state
        check
        """,
        """
        > timeout 1
        > stabilize
        > partition 1 | 2 3
        > timeout 1
        > state
        n1 leader term 1 vote n1 log [1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1] commit 0 applied 0
        n3 follower term 1 vote n1 log [1] commit 0 applied 0
        > timeout 1
        > state
        n1 follower term 1 vote n1 log [1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1] commit 0 applied 0
        n3 follower term 1 vote n1 log [1] commit 0 applied 0
        > check
        ok
        """,
    ),
    (
        "conflicting_uncommitted_suffix_is_truncated",
        {"prevote": False, "check_quorum": False},
        """
        timeout 1
        stabilize
        propose 1 a=1
        propose 1 a=2
        state
        partition 1 | 2 3
        timeout 2
        stabilize
        propose 2 b=1
        stabilize
        heal
        heartbeat 2
        stabilize
        state
        committed
        check
        """,
        """
        > timeout 1
        > stabilize
        > propose 1 a=1
        > propose 1 a=2
        > state
        n1 leader term 1 vote n1 log [1 1 1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1] commit 0 applied 0
        n3 follower term 1 vote n1 log [1] commit 0 applied 0
        > partition 1 | 2 3
        > timeout 2
        > stabilize
        > propose 2 b=1
        > stabilize
        n2 applied 3 put(b=1) -> put-> rev 2
        > heal
        > heartbeat 2
        > stabilize
        n3 applied 3 put(b=1) -> put-> rev 2
        > state
        n1 follower term 2 log [1 2 2] commit 2 applied 2
        n2 leader term 2 vote n2 log [1 2 2] commit 3 applied 3
        n3 follower term 2 vote n2 log [1 2 2] commit 3 applied 3
        > committed
        1/1:noop 2/2:noop 3/2:put(b=1)
        > check
        ok
        """,
    ),
    (
        "vote_survives_crash_and_restart",
        {"prevote": False, "check_quorum": False},
        """
        timeout 1
        deliver 1 2 RequestVote
        crash 2
        restart 2
        timeout 3
        deliver 3 2 RequestVote
        messages
        state
        check
        """,
        """
        > timeout 1
        > deliver 1 2 RequestVote
        > crash 2
        > restart 2
        > timeout 3
        > deliver 3 2 RequestVote
        > messages
        n1→n3 RequestVote term 1 last 0/0
        n2→n1 RequestVoteResp term 1 granted
        n3→n1 RequestVote term 1 last 0/0
        n2→n3 RequestVoteResp term 1 rejected
        > state
        n1 candidate term 1 vote n1 log [] commit 0 applied 0
        n2 follower term 1 vote n1 log [] commit 0 applied 0
        n3 candidate term 1 vote n3 log [] commit 0 applied 0
        > check
        ok
        """,
    ),
    (
        "unpersisted_entries_are_not_acknowledged_and_lost_on_crash",
        {"persist": "explicit"},
        """
        timeout 1
        stabilize
        propose 1 a=1
        persist 1
        deliver 1 2 AppendEntries
        state
        messages
        crash 2
        restart 2
        state
        check
        """,
        """
        > timeout 1
        > stabilize
        > propose 1 a=1
        > persist 1
        > deliver 1 2 AppendEntries
        > state
        n1 leader term 1 vote n1 log [1 1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1 1] commit 1 applied 1 durable log 1
        n3 follower term 1 vote n1 log [1] commit 0 applied 0
        > messages
        n1→n3 AppendEntries term 1 prev 1/1 1 entry commit 1
        > crash 2
        > restart 2
        > state
        n1 leader term 1 vote n1 log [1 1] commit 1 applied 1
        n2 follower term 1 vote n1 log [1] commit 0 applied 0
        n3 follower term 1 vote n1 log [1] commit 0 applied 0
        > check
        ok
        """,
    ),
    (
        "lagging_follower_catches_up_by_install_snapshot",
        {},
        """
        timeout 1
        stabilize
        crash 3
        propose 1 a=1
        propose 1 a=2
        stabilize
        heartbeat 1
        stabilize
        compact 1
        drop 1 3
        drop 1 3
        drop 1 3
        restart 3
        heartbeat 1
        messages
        stabilize
        state
        check
        """,
        """
        > timeout 1
        > stabilize
        > crash 3
        > propose 1 a=1
        > propose 1 a=2
        > stabilize
        n1 applied 2 put(a=1) -> put-> rev 2
        n1 applied 3 put(a=2) -> put-> rev 3
        > heartbeat 1
        > stabilize
        n2 applied 2 put(a=1) -> put-> rev 2
        n2 applied 3 put(a=2) -> put-> rev 3
        > compact 1
        > drop 1 3
        > drop 1 3
        > drop 1 3
        > restart 3
        > heartbeat 1
        > messages
        n1→n2 AppendEntries term 1 prev 3/1 0 entries commit 3
        n1→n3 InstallSnapshot term 1 snapshot 3/1
        > stabilize
        > state
        n1 leader term 1 vote n1 log [] snapshot 3/1 commit 3 applied 3
        n2 follower term 1 vote n1 log [1 1 1] commit 3 applied 3
        n3 follower term 1 vote n1 log [] snapshot 3/1 commit 3 applied 3
        > check
        ok
        """,
    ),
    (
        "read_index_serves_after_a_quorum_confirms_leadership",
        {},
        """
        timeout 1
        stabilize
        propose 1 a=1
        stabilize
        read 1 a
        messages
        deliver 1 2 AppendEntries
        deliver 2 1 AppendEntriesResp
        check
        """,
        """
        > timeout 1
        > stabilize
        > propose 1 a=1
        > stabilize
        n1 applied 2 put(a=1) -> put-> rev 2
        > read 1 a
        > messages
        n1→n2 AppendEntries term 1 prev 2/1 0 entries commit 2 read 1
        n1→n3 AppendEntries term 1 prev 2/1 0 entries commit 2 read 1
        > deliver 1 2 AppendEntries
        n2 applied 2 put(a=1) -> put-> rev 2
        > deliver 2 1 AppendEntriesResp
        n1 read 1 at 2 range(a) -> range-> rev 2 count 1 [a=1(c2 m2 v1)]
        > check
        ok
        """,
    ),
]


def _dedent(block: str) -> list[str]:
    return [line.strip() for line in block.strip().splitlines()]


@pytest.mark.parametrize(
    ("name", "settings", "script", "expected"), SCENARIOS, ids=[s[0] for s in SCENARIOS]
)
def test_raft_scenario(name: str, settings: dict[str, Any], script: str, expected: str) -> None:
    options: dict[str, Any] = {"timeouts": "free", "persist": "sync", **settings}
    transcript, cluster = run_script(_dedent(script), ClusterConfig(**options))
    assert transcript.splitlines() == _dedent(expected), transcript
    cluster.check_invariants()

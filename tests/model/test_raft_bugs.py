"""Every Raft bug of the catalogue, reproduced by a fixed script: the mutated model breaks
the named invariant, and the correct model runs the same script with every invariant intact.

The scripts are the permanent reproductions (see model/bugs.py); a new Raft-layer bug in
the catalogue without a script here fails `test_every_raft_bug_has_a_reproduction`.
"""

from __future__ import annotations

from typing import Any

import pytest

from etcdspec.model.bugs import CATALOGUE, NO_BUGS, BugSet
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.raft_script import run_script

# bug -> (cluster settings, the invariant it breaks, the script)
REPRODUCTIONS: dict[str, tuple[dict[str, Any], str, str]] = {
    "figure8_commit": (
        {"prevote": False, "check_quorum": False, "noop_on_leader": False},
        "LeaderCompleteness",
        """
        timeout 1
        deliver 1 2
        deliver 2 1
        propose 1 a=1
        timeout 2
        deliver 2 3
        deliver 3 2
        propose 2 a=2
        deliver 2 1 RequestVote
        timeout 1
        deliver 1 3 RequestVote
        deliver 3 1
        deliver 1 3 AppendEntries
        deliver 3 1 AppendEntriesResp
        deliver 1 3 AppendEntries
        deliver 3 1 AppendEntriesResp
        state
        committed
        deliver 1 2 RequestVote
        timeout 2
        deliver 2 3 RequestVote
        deliver 3 2 RequestVoteResp
        state
        check
        """,
    ),
    "vote_not_persisted": (
        {"prevote": False, "check_quorum": False},
        "ElectionSafety",
        """
        timeout 1
        deliver 1 2 RequestVote
        deliver 2 1 RequestVoteResp
        crash 2
        restart 2
        timeout 3
        deliver 3 2 RequestVote
        deliver 2 3 RequestVoteResp
        check
        """,
    ),
    "ack_before_persist": (
        {"prevote": False, "check_quorum": False, "persist": "explicit"},
        "LeaderCompleteness",
        """
        timeout 1
        stabilize
        propose 1 a=1
        persist 1
        deliver 1 2 AppendEntries
        deliver 2 1 AppendEntriesResp
        crash 2
        restart 2
        crash 1
        timeout 2
        persist 2
        deliver 2 3 RequestVote
        persist 3
        deliver 3 2 RequestVoteResp
        check
        """,
    ),
    "commit_without_quorum": (
        {"prevote": False, "check_quorum": False, "noop_on_leader": False},
        "LeaderCompleteness",
        """
        timeout 1
        deliver 1 2 RequestVote
        deliver 2 1 RequestVoteResp
        deliver 1 2 AppendEntries
        propose 1 a=1
        deliver 2 1 AppendEntriesResp
        timeout 2
        deliver 2 3 RequestVote
        deliver 3 2 RequestVoteResp
        check
        """,
    ),
    "heartbeat_full_commit": (
        {"prevote": False, "check_quorum": False, "noop_on_leader": False, "etcd_heartbeats": True},
        "FollowerCommitMatched",
        """
        timeout 1
        deliver 1 2 RequestVote
        deliver 2 1 RequestVoteResp
        propose 1 a=1
        timeout 2
        deliver 2 3 RequestVote
        deliver 3 2 RequestVoteResp
        propose 2 a=2
        deliver 2 3 AppendEntries
        deliver 3 2 AppendEntriesResp
        deliver 2 3 AppendEntries
        deliver 3 2 AppendEntriesResp
        committed
        heartbeat 2
        deliver 2 1 Heartbeat
        check
        """,
    ),
    "no_truncate_conflict": (
        {"prevote": False, "check_quorum": False, "noop_on_leader": False},
        "LogMatching",
        """
        timeout 1
        deliver 1 2 RequestVote
        deliver 2 1 RequestVoteResp
        propose 1 a=1
        timeout 2
        deliver 2 3 RequestVote
        deliver 3 2 RequestVoteResp
        propose 2 b=1
        deliver 2 1 RequestVote
        timeout 1
        deliver 1 3 RequestVote
        deliver 3 1 RequestVoteResp
        propose 1 c=1
        deliver 1 3 AppendEntries
        deliver 3 1 AppendEntriesResp
        deliver 1 3 AppendEntries
        deliver 3 1 AppendEntriesResp
        deliver 1 2 AppendEntries
        deliver 2 1 AppendEntriesResp
        deliver 1 2 AppendEntries
        state
        check
        """,
    ),
    "accept_stale_term_append": (
        {"prevote": False, "check_quorum": False, "noop_on_leader": False},
        "LeaderCompleteness",
        """
        timeout 1
        deliver 1 2 RequestVote
        deliver 2 1 RequestVoteResp
        propose 1 a=1
        timeout 2
        deliver 2 3 RequestVote
        deliver 3 2 RequestVoteResp
        propose 2 b=1
        deliver 2 3 AppendEntries
        deliver 3 2 AppendEntriesResp
        deliver 1 3 AppendEntries
        deliver 2 1 RequestVote
        timeout 1
        deliver 1 3 RequestVote
        deliver 3 1 RequestVoteResp
        state
        check
        """,
    ),
    "lease_revoke_by_stale_leader": (
        {"prevote": False, "check_quorum": False, "timeouts": "ticks"},
        "AppliedStatesAgree",
        """
        tick 1 20
        stabilize
        grant 1 7 5
        stabilize
        state
        partition 1 | 2 3
        tick 2 20
        stabilize
        heal
        tick 2
        stabilize
        state
        tick 1 5
        check
        """,
    ),
    # n1 leads, grants lease 7 (TTL 2); two ticks run its clock out, so it proposes the
    # expiry; before that commits, a keep-alive of lease 7 arrives. The correct leader
    # refuses it (not enabled: etcd's Renew waits for the revoke); the mutated one
    # acknowledges it with TTL 2, while the pending revoke will delete the lease's keys.
    "keepalive_after_expiry": (
        {"prevote": False, "check_quorum": False, "timeouts": "ticks"},
        "LeaseKeepAliveHonoured",
        """
        tick 1 20
        stabilize
        grant 1 7 2
        stabilize
        tick 1 2
        keepalive 1 7
        state
        stabilize
        check
        """,
    ),
    # Ongaro's single-server change bug (raft-dev, 2015): n2 leads term 2 with votes of
    # the old configuration n1..n4 and removes n1 before committing an entry of its own
    # term; the change commits with n2, n3 (a majority of n2..n4), while n1, whose log
    # added n5, wins term 3 with n4 and n5 (a majority of n1..n5) without it.
    "reconfig_before_term_commit": (
        {"nodes": 5, "membership": True, "prevote": False, "check_quorum": False},
        "LeaderCompleteness",
        """
        timeout 1
        stabilize
        conf 1 add 5
        deliver 1 5
        deliver 5 1
        drop 1 2 AppendEntries
        drop 1 3 AppendEntries
        drop 1 4 AppendEntries
        state
        timeout 2
        deliver 2 3 RequestVote
        deliver 3 2 RequestVoteResp
        deliver 2 4 RequestVote
        deliver 4 2 RequestVoteResp
        drop 2 1 RequestVote
        conf 2 remove 1
        deliver 2 3 AppendEntries
        deliver 3 2 AppendEntriesResp
        committed
        state
        crash 1
        restart 1
        timeout 1
        timeout 1
        deliver 1 4 RequestVote
        deliver 4 1 RequestVoteResp
        deliver 1 5 RequestVote
        deliver 5 1 RequestVoteResp
        state
        check
        """,
    ),
    # Two changes at once: n1..n3 become n1..n5 in one go, so n1, n4, n5 (a majority of
    # n1..n5) commit what n2 and n3 (a majority of n1..n3) never saw, and elect n2.
    "two_pending_changes": (
        {"nodes": 5, "voters": 3, "membership": True, "prevote": False, "check_quorum": False},
        "LeaderCompleteness",
        """
        timeout 1
        stabilize
        conf 1 add 4
        conf 1 add 5
        drop 1 2 AppendEntries
        drop 1 2 AppendEntries
        drop 1 3 AppendEntries
        drop 1 3 AppendEntries
        deliver 1 4 AppendEntries
        drop 1 4 AppendEntries
        deliver 1 5 AppendEntries
        deliver 4 1
        deliver 5 1
        committed
        timeout 2
        deliver 2 3 RequestVote
        deliver 3 2 RequestVoteResp
        state
        check
        """,
    ),
}


def _run(bug: str, bugs: BugSet) -> str:
    settings, _, script = REPRODUCTIONS[bug]
    options: dict[str, Any] = {"timeouts": "free", "persist": "sync", **settings}
    lines = [line.strip() for line in script.strip().splitlines()]
    transcript, _ = run_script(lines, ClusterConfig(bugs=bugs, **options))
    return transcript


def test_every_raft_bug_has_a_reproduction() -> None:
    raft_layer = {bug.name for bug in CATALOGUE if bug.layer == "raft"}
    assert raft_layer <= set(REPRODUCTIONS)


@pytest.mark.parametrize("bug", sorted(REPRODUCTIONS))
def test_mutated_model_breaks_the_invariant(bug: str) -> None:
    invariant = REPRODUCTIONS[bug][1]
    transcript = _run(bug, BugSet.of(bug))
    assert f"error: invariant {invariant} violated" in transcript, transcript


@pytest.mark.parametrize("bug", sorted(REPRODUCTIONS))
def test_correct_model_keeps_every_invariant_on_the_same_script(bug: str) -> None:
    transcript = _run(bug, NO_BUGS)
    assert "invariant" not in transcript, transcript
    assert transcript.rstrip().endswith("> check\nok"), transcript

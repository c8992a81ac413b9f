"""The bug catalogue: named mutations of the model, each a bug that really happened.

A mutation is off unless its name is passed to the model (`etcdspec explore --bug NAME`).
Model code asks `bugs.on(NAME)` through the BugSet it was given; nothing here is global.
The test suite shows that exploration finds each one and that the unmutated model passes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bug:
    name: str
    layer: str  # "raft", "kv", "lease", "watch" or "response" (RESPONSE_MUTATIONS)
    summary: str  # one line, printed by `etcdspec explore --list-bugs`


CATALOGUE: tuple[Bug, ...] = (
    Bug(
        "figure8_commit",
        "raft",
        "a leader commits an entry of an older term by counting replicas (Raft paper, Figure 8)",
    ),
    Bug(
        "vote_not_persisted",
        "raft",
        "the vote is kept only in memory, so a restarted node votes twice in one term",
    ),
    Bug(
        "no_truncate_conflict",
        "raft",
        "a follower appends after a conflicting entry instead of truncating its log there",
    ),
    Bug(
        "accept_stale_term_append",
        "raft",
        "a follower accepts AppendEntries from a leader of an older term",
    ),
    Bug(
        "commit_without_quorum",
        "raft",
        "a leader overstates a follower's match index and commits without a quorum",
    ),
    Bug(
        "ack_before_persist",
        "raft",
        "a follower acknowledges entries before they are durable; a crash then loses them",
    ),
    Bug(
        "reconfig_before_term_commit",
        "raft",
        "a new leader changes the configuration before committing an entry of its own term "
        "(single-server changes, raft-dev 2015): two disjoint majorities lose a committed entry",
    ),
    Bug(
        "two_pending_changes",
        "raft",
        "a leader appends a configuration change while another is still uncommitted",
    ),
    Bug(
        "heartbeat_full_commit",
        "raft",
        "a leader's heartbeat carries its whole commit index, not min(match, commit) as etcd "
        "raft's does: a follower commits a stale entry of its own without a log check",
    ),
    Bug(
        "lease_revoke_by_stale_leader",
        "lease",
        "a deposed leader revokes an expired lease by itself instead of through the log",
    ),
    Bug(
        "keepalive_after_expiry",
        "lease",
        "a leader acknowledges a keep-alive of a lease whose expiry it has already proposed "
        "(etcd's lessor.Renew must wait for the pending revoke)",
    ),
    Bug(
        "watch_drops_event_at_compaction",
        "watch",
        "a watcher catching up across a compaction silently skips the compacted events",
    ),
    Bug(
        "txn_revision_per_op",
        "kv",
        "a write txn takes one revision per operation instead of one for the whole txn",
    ),
)

BY_NAME: dict[str, Bug] = {bug.name: bug for bug in CATALOGUE}

RESPONSE_MUTATIONS: tuple[Bug, ...] = (
    Bug(
        "range_more_at_exact_limit",
        "response",
        "a range whose result has exactly `limit` keys says `more` (there are no more)",
    ),
    Bug(
        "range_count_after_limit",
        "response",
        "a range's `count` is taken after the limit cut it, not every key in range",
    ),
    Bug(
        "prev_kv_from_new_revision",
        "response",
        "a put's `prev_kv` is the key as the put left it (the new revision), not as it was",
    ),
)
"""Mutations of how a response is built, the state left right: kept off the catalogue
(its per-bug exploration, drawing and CLI suites are for bugs of the state), shown by
tests/model/test_response_postconditions.py to be caught by the response postconditions
(model/response_oracle.py) and by no state invariant. `--bug NAME` accepts them too."""

MUTATION_NAMES: frozenset[str] = frozenset(bug.name for bug in RESPONSE_MUTATIONS)


class UnknownBugError(ValueError):
    """A bug name that is not in the catalogue."""


@dataclass(frozen=True)
class BugSet:
    """The mutations switched on for one model instance (empty: the correct model)."""

    names: frozenset[str] = frozenset()

    @staticmethod
    def of(*names: str) -> BugSet:
        unknown = sorted(set(names) - set(BY_NAME) - MUTATION_NAMES)
        if unknown:
            known = ", ".join(sorted(BY_NAME))
            raise UnknownBugError(f"unknown bug {', '.join(unknown)}; known bugs: {known}")
        return BugSet(frozenset(names))

    def on(self, name: str) -> bool:
        assert name in BY_NAME or name in MUTATION_NAMES, (
            f"model code asked for an uncatalogued bug {name!r}"
        )
        return name in self.names

    def describe(self) -> str:
        return ",".join(sorted(self.names)) or "none"


NO_BUGS = BugSet()

"""Raft's safety invariants over a cluster's nodes, with the small history they need.

Contract: `check_raft(nodes, ghost)` raises `InvariantViolation` (etcdspec.model.invariants)
naming the first broken invariant: ElectionSafety, LeaderAppendOnly, LogMatching,
LeaderCompleteness, UpToDateLogsHoldCommitted, StateMachineSafety, CommitWithinLog,
AppliedStatesAgree, FollowerCommitMatched (a follower of a leader of its term has
committed only what that leader's log holds: the follower-commit rule, which etcd raft's
heartbeats keep by sending min(match, commit); checked just before StateMachineSafety,
which a follower committing a stale entry also breaks, so that the rule is named). The ghost
(auxiliary history) is kept small and is part of the cluster's state:
- `committed`: the committed log as first observed (entry term, entry key, the term in
  which it was first known committed), index 1 first;
- `leaders`: every (term, node) that ever became leader;
- `violation`: a broken transition invariant (LeaderAppendOnly), recorded by
  `update_ghost` when a step changes a leader's log other than by appending.
Nothing here does I/O or changes its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_log import RaftLog
from etcdspec.model.raft_messages import node_name
from etcdspec.model.raft_node import Node, Role


class Ghost(NamedTuple):
    committed: tuple[tuple[int, str, int], ...] = ()
    leaders: tuple[tuple[int, int], ...] = ()
    violation: tuple[str, str] | None = None

    def describe(self) -> str:
        committed = " ".join(f"{i + 1}:{t}:{k}" for i, (t, k, _) in enumerate(self.committed))
        leaders = " ".join(f"{node_name(n)}@{t}" for t, n in self.leaders)
        return f"committed [{committed}] leaders [{leaders}]"


def update_ghost(ghost: Ghost, before: Sequence[Node], after: Sequence[Node]) -> Ghost:
    """The history after one step from `before` to `after` (same node order)."""
    committed = ghost.committed
    leaders = ghost.leaders
    violation = ghost.violation
    for old, new in zip(before, after, strict=True):
        if new is old:
            continue
        if new.commit_index > len(committed):
            extra = []
            for index in range(len(committed) + 1, new.commit_index + 1):
                if index <= new.log.snapshot.last_index:
                    break
                entry = new.log.entry(index)
                extra.append((entry.term, entry.key, new.term))
            committed = committed + tuple(extra)
        if new.role == Role.LEADER:
            pair = (new.term, new.id)
            if pair not in leaders:
                leaders = tuple(sorted((*leaders, pair)))
            if (
                violation is None
                and old.role == Role.LEADER
                and old.term == new.term
                and new.log is not old.log
                and not _extends(new.log, old.log)
            ):
                violation = (
                    "LeaderAppendOnly",
                    f"{new.name}, leader in term {new.term}, changed its log from "
                    f"{old.log.describe()} to {new.log.describe()}",
                )
    if committed is ghost.committed and leaders is ghost.leaders and violation is ghost.violation:
        return ghost
    return Ghost(committed, leaders, violation)


def _extends(new: RaftLog, old: RaftLog) -> bool:
    if new.last_index < old.last_index:
        return False
    lo = max(new.snapshot.last_index, old.snapshot.last_index) + 1
    return new.slice(lo, old.last_index) == old.slice(lo, old.last_index)


def check_raft(
    nodes: Sequence[Node],
    ghost: Ghost,
    previous: tuple[Sequence[Node], Ghost] | None = None,
) -> None:
    """Raise InvariantViolation for the first broken invariant (in the order of the
    module docstring).

    With `previous` = (nodes, ghost) of a state that PASSED this check, only what the
    step from it could have changed is checked, with the same answer as the full check:
    each invariant is a conjunction of facts about one node (CommitWithinLog,
    LeaderCompleteness, StateMachineSafety), about a pair of nodes (LogMatching,
    UpToDateLogsHoldCommitted, AppliedStatesAgree) — each with the committed log — or
    about the leaders (ElectionSafety). Every fact is a function of its inputs' values,
    so a fact whose inputs are the very objects it had before held before and holds now;
    only facts with a new node (or a new committed log, or new leaders) are evaluated,
    invariant by invariant in the full check's order, so the same violation is
    reported first."""
    if ghost.violation is not None:
        raise InvariantViolation(*ghost.violation)
    fresh: tuple[bool, ...] | None = None
    if previous is not None:
        old_nodes, old_ghost = previous
        if ghost.committed is old_ghost.committed and len(old_nodes) == len(nodes):
            fresh = tuple([new is not old for new, old in zip(nodes, old_nodes, strict=True)])
        if ghost.leaders is not old_ghost.leaders:
            _election_safety(ghost)
        if fresh is not None and True not in fresh:
            return  # no node and no committed entry changed: every fact held before
    else:
        _election_safety(ghost)
    for position, node in enumerate(nodes):
        if fresh is None or fresh[position]:
            _commit_within_log(node)
    _log_matching(nodes, fresh)
    _leader_completeness(nodes, ghost, fresh)
    _up_to_date_logs_hold_committed(nodes, ghost, fresh)
    _follower_commit_matched(nodes, fresh)
    _state_machine_safety(nodes, ghost, fresh)
    _applied_states_agree(nodes, fresh)


def _election_safety(ghost: Ghost) -> None:
    for (term_a, node_a), (term_b, node_b) in zip(ghost.leaders, ghost.leaders[1:], strict=False):
        if term_a == term_b:
            raise InvariantViolation(
                "ElectionSafety",
                f"two leaders in term {term_a}: {node_name(node_a)} and {node_name(node_b)}",
            )


def _commit_within_log(node: Node) -> None:
    if node.commit_index > node.log.last_index:
        raise InvariantViolation(
            "CommitWithinLog",
            f"{node.name} commit_index {node.commit_index} > last index {node.log.last_index}: "
            f"{node.describe()}",
        )
    if node.applied_index > node.commit_index:
        raise InvariantViolation(
            "CommitWithinLog",
            f"{node.name} applied_index {node.applied_index} > commit_index "
            f"{node.commit_index}: {node.describe()}",
        )


def _follower_commit_matched(nodes: Sequence[Node], fresh: Sequence[bool] | None = None) -> None:
    """FollowerCommitMatched: a follower whose leader (`lead`) leads in the follower's
    term holds, at its commit index, the entry the leader holds there (Log Matching then
    gives the whole committed prefix)."""
    position_of = {node.id: position for position, node in enumerate(nodes)}
    for position, follower in enumerate(nodes):
        if follower.role == Role.LEADER or not follower.lead:
            continue
        at = position_of.get(follower.lead)
        if at is None:
            continue
        leader = nodes[at]
        if leader.role != Role.LEADER or leader.term != follower.term:
            continue
        if fresh is not None and not (fresh[position] or fresh[at]):
            continue
        index = follower.commit_index
        if index <= max(follower.log.snapshot.last_index, leader.log.snapshot.last_index):
            continue
        mine, theirs = follower.log.term_at(index), leader.log.term_at(index)
        if mine != theirs:
            raise InvariantViolation(
                "FollowerCommitMatched",
                f"{follower.name} committed {index} holding term {mine} there, but its "
                f"leader {leader.name} holds {theirs}: {follower.describe()}; "
                f"{leader.describe()}",
            )


def _log_matching(nodes: Sequence[Node], fresh: Sequence[bool] | None = None) -> None:
    for position, a in enumerate(nodes):
        for other, b in enumerate(nodes[position + 1 :], start=position + 1):
            if fresh is not None and not (fresh[position] or fresh[other]):
                continue
            if a.log is b.log:
                continue  # one log agrees with itself
            lo = max(a.log.snapshot.last_index, b.log.snapshot.last_index) + 1
            hi = min(a.log.last_index, b.log.last_index)
            for index in range(hi, lo - 1, -1):
                if a.log.term_at(index) == b.log.term_at(index):
                    if a.log.slice(lo, index) != b.log.slice(lo, index):
                        raise InvariantViolation(
                            "LogMatching",
                            f"{a.name} and {b.name} agree at index {index} (term "
                            f"{a.log.term_at(index)}) but differ before it: "
                            f"{a.describe()}; {b.describe()}",
                        )
                    break


def _leader_completeness(
    nodes: Sequence[Node], ghost: Ghost, fresh: Sequence[bool] | None = None
) -> None:
    for position, node in enumerate(nodes):
        if node.role != Role.LEADER or (fresh is not None and not fresh[position]):
            continue
        log = node.log
        for offset, (term, key, commit_term) in enumerate(ghost.committed):
            index = offset + 1
            if commit_term > node.term or index <= log.snapshot.last_index:
                continue
            held = log.entry(index) if index <= log.last_index else None
            if held is None or held.term != term or held.key != key:
                raise InvariantViolation(
                    "LeaderCompleteness",
                    f"entry {index}:{term}:{key} was committed in term {commit_term} but "
                    f"leader {node.describe()} does not hold it",
                )


def _holds(log: RaftLog, index: int, term: int, key: str) -> bool:
    if index <= log.snapshot.last_index:
        return True  # compacted: it was applied, so it was the committed entry
    if index > log.last_index:
        return False
    entry = log.entry(index)
    return entry.term == term and entry.key == key


def _first_missing(log: RaftLog, committed: tuple[tuple[int, str, int], ...]) -> int | None:
    """The position (index - 1) of the first committed entry `log` does not hold, or
    None; a compacted index counts as held (see `_holds`)."""
    snapshot_index = log.snapshot.last_index
    entries = log.entries
    for offset in range(snapshot_index, len(committed)):
        position = offset - snapshot_index
        if position >= len(entries):
            return offset
        entry = entries[position]
        term, key, _ = committed[offset]
        if entry.term != term or entry.key != key:
            return offset
    return None


def _up_to_date_logs_hold_committed(
    nodes: Sequence[Node], ghost: Ghost, fresh: Sequence[bool] | None = None
) -> None:
    """The lemma behind Leader Completeness (Raft §5.4.3): a log at least as up to date as
    a log holding a committed entry holds that entry too — else its owner could win an
    election with that voter's vote and lose the entry. It breaks at the moment an unsafe
    commit happens (Figure 8), before any later leader shows it."""
    committed = ghost.committed
    if not committed:
        return
    for position, candidate in enumerate(nodes):
        log = candidate.log
        voters = [
            voter
            for other, voter in enumerate(nodes)
            if voter is not candidate and (fresh is None or fresh[position] or fresh[other])
        ]
        if not voters:
            continue
        missing = _first_missing(log, committed)
        if missing is None:
            continue
        term, key, commit_term = committed[missing]
        for voter in voters:
            if not _holds(voter.log, missing + 1, term, key):
                continue
            if voter.log.is_up_to_date(log.last_index, log.last_term):
                raise InvariantViolation(
                    "UpToDateLogsHoldCommitted",
                    f"entry {missing + 1}:{term}:{key} was committed in term {commit_term}; "
                    f"{candidate.name} lacks it yet its log is at least as up to date as "
                    f"{voter.name}'s, which holds it, so {candidate.name} could be elected "
                    f"with {voter.name}'s vote: {candidate.describe()}; {voter.describe()}",
                )


def _state_machine_safety(
    nodes: Sequence[Node], ghost: Ghost, fresh: Sequence[bool] | None = None
) -> None:
    committed = ghost.committed
    for position, node in enumerate(nodes):
        if fresh is not None and not fresh[position]:
            continue
        log = node.log
        for index in range(log.snapshot.last_index + 1, min(node.commit_index, len(committed)) + 1):
            term, key, _ = committed[index - 1]
            entry = log.entry(index)
            if entry.term != term or entry.key != key:
                raise InvariantViolation(
                    "StateMachineSafety",
                    f"{node.name} committed {index}:{entry.term}:{entry.key} but "
                    f"{index}:{term}:{key} was committed before: {node.describe()}",
                )


def _applied_states_agree(nodes: Sequence[Node], fresh: Sequence[bool] | None = None) -> None:
    by_index: dict[int, tuple[int, Node]] = {}
    for position, node in enumerate(nodes):
        first, other = by_index.setdefault(node.applied_index, (position, node))
        if other is node or (fresh is not None and not (fresh[position] or fresh[first])):
            continue
        if other.store != node.store:
            raise InvariantViolation(
                "AppliedStatesAgree",
                f"{other.name} and {node.name} both applied {node.applied_index} entries but "
                f"their stores differ: {_store_text(other)} vs {_store_text(node)}",
            )


def _store_text(node: Node) -> str:
    describe = getattr(node.store, "describe", None)
    return describe() if callable(describe) else repr(node.store)

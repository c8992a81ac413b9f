"""Each Raft invariant fails on a hand-made state that breaks it, and holds on its repair."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from etcdspec.model import store as kv
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_invariants import Ghost, check_raft, update_ghost
from etcdspec.model.raft_log import RaftLog
from etcdspec.model.raft_messages import Entry, Snapshot
from etcdspec.model.raft_node import Node, RaftParams, Role, new_node
from etcdspec.model.requests import PutRequest

PARAMS = RaftParams(free_timeouts=True, explicit_persist=False)
INITIAL = kv.initial_state()


def _node(
    node_id: int, *terms: int, role: Role = Role.FOLLOWER, term: int = 0, commit: int = 0
) -> Node:
    entries = tuple(Entry(t, f"e{t}", None) for t in terms)
    node = new_node(PARAMS, node_id, INITIAL)
    log = RaftLog(Snapshot(0, 0, INITIAL), entries)
    return node._replace(
        log=log, role=role, term=term or max(terms, default=0), commit_index=commit
    )


def _committed(*terms: int, commit_term: int = 1) -> tuple[tuple[int, str, int], ...]:
    return tuple((t, f"e{t}", commit_term) for t in terms)


Case = tuple[str, Callable[[], tuple[list[Node], Ghost]], Callable[[], tuple[list[Node], Ghost]]]

CASES: list[Case] = [
    (
        "ElectionSafety",
        lambda: ([_node(1), _node(2)], Ghost(leaders=((1, 1), (1, 2)))),
        lambda: ([_node(1), _node(2)], Ghost(leaders=((1, 1), (2, 2)))),
    ),
    (
        "CommitWithinLog",
        lambda: ([_node(1, 1, commit=2)], Ghost()),
        lambda: ([_node(1, 1, 1, commit=2)], Ghost()),
    ),
    (
        "LogMatching",
        lambda: ([_node(1, 1, 2), _node(2, 2, 2)], Ghost()),
        lambda: ([_node(1, 1, 2), _node(2, 1, 2)], Ghost()),
    ),
    (
        "LeaderCompleteness",
        lambda: ([_node(1, 2, role=Role.LEADER, term=3)], Ghost(committed=_committed(1))),
        lambda: ([_node(1, 1, role=Role.LEADER, term=3)], Ghost(committed=_committed(1))),
    ),
    (
        "UpToDateLogsHoldCommitted",
        lambda: ([_node(1, 1), _node(2, 2)], Ghost(committed=_committed(1, commit_term=3))),
        lambda: ([_node(1, 1), _node(2)], Ghost(committed=_committed(1, commit_term=3))),
    ),
    (
        "StateMachineSafety",
        lambda: ([_node(1, 2, commit=1)], Ghost(committed=_committed(1))),
        lambda: ([_node(1, 1, commit=1)], Ghost(committed=_committed(1))),
    ),
]


@pytest.mark.parametrize(("invariant", "broken", "repaired"), CASES, ids=[c[0] for c in CASES])
def test_invariant_fails_on_a_broken_state_and_holds_on_its_repair(
    invariant: str,
    broken: Callable[[], tuple[list[Node], Ghost]],
    repaired: Callable[[], tuple[list[Node], Ghost]],
) -> None:
    nodes, ghost = broken()
    with pytest.raises(InvariantViolation) as caught:
        check_raft(nodes, ghost)
    assert caught.value.invariant == invariant
    check_raft(*repaired())


def test_applied_states_agree_compares_stores_at_equal_applied_index() -> None:
    changed, _ = kv.apply(INITIAL, PutRequest(b"a", b"1"))
    one = _node(1, 1, commit=1)._replace(applied_index=1, store=changed)
    two = _node(2, 1, commit=1)._replace(applied_index=1, store=INITIAL)
    with pytest.raises(InvariantViolation) as caught:
        check_raft([one, two], Ghost())
    assert caught.value.invariant == "AppliedStatesAgree"
    check_raft([one, two._replace(store=changed)], Ghost())


def test_leader_append_only_is_recorded_by_the_step_that_breaks_it() -> None:
    before = _node(1, 1, 1, role=Role.LEADER, term=1)
    truncated = before._replace(log=RaftLog(before.log.snapshot, before.log.entries[:1]))
    ghost = update_ghost(Ghost(), [before], [truncated])
    assert ghost.violation is not None and ghost.violation[0] == "LeaderAppendOnly"
    with pytest.raises(InvariantViolation, match="LeaderAppendOnly"):
        check_raft([truncated], ghost)
    appended = before._replace(log=before.log.append(Entry(1, "e1", None)))
    assert update_ghost(Ghost(), [before], [appended]).violation is None


def test_ghost_records_commits_once_with_the_term_they_were_committed_in() -> None:
    before = _node(1, 1, 2, term=3)
    after = before._replace(commit_index=2)
    ghost = update_ghost(Ghost(), [before], [after])
    assert ghost.committed == ((1, "e1", 3), (2, "e2", 3))
    assert update_ghost(ghost, [after], [after]) is ghost

"""Refinement on scripted runs: the correct model refines raft_steps.spec (a snapshot
install included), and model bugs that no model invariant catches on the run are
caught by check_step at the step that breaks the spec."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from etcdspec.model import actions as cl
from etcdspec.model import raft_node as rn
from etcdspec.model.actions import Action
from etcdspec.model.bugs import BugSet
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.explore import ExploreOptions
from etcdspec.model.raft_messages import Message, MsgType
from etcdspec.model.refinement import run_exploration
from etcdspec.model.refinement_check import RefinementStats, RefinementViolation, check_step
from etcdspec.model.requests import PutRequest

Script = Sequence[Any]  # Actions, "settle", or callables cluster -> list of Actions


def settle(cluster: Cluster) -> Iterator[Action]:
    """The next step towards a quiet network: persist a node that holds unpersisted
    state, else deliver the oldest deliverable message (`walk` re-asks after each)."""
    for node in cluster.nodes:
        if cluster.up[node.id - 1] and rn.needs_persist(node):
            yield cl.persist(node.id)
            return
    for message in cluster.messages:
        if cluster.up[message.dst - 1] and cluster.network.connected(message.src, message.dst):
            yield cl.deliver(message)
            return


def deliver_first(kind: MsgType, src: int, dst: int) -> Callable[[Cluster], list[Action]]:
    def pick(cluster: Cluster) -> list[Action]:
        found = [m for m in cluster.messages if (m.type, m.src, m.dst) == (kind, src, dst)]
        assert found, f"no {kind.name} {src}->{dst} in flight"
        return [cl.deliver(found[0])]

    return pick


def drop_to(node: int) -> Callable[[Cluster], list[Action]]:
    def pick(cluster: Cluster) -> list[Action]:
        targets: list[Message] = [m for m in cluster.messages if m.dst == node]
        return [cl.drop(m) for m in dict.fromkeys(targets)]

    return pick


def walk(config: ClusterConfig, script: Script) -> list[tuple[Cluster, Action, Cluster]]:
    """Run a script; returns every (pre, action, post) step."""
    cluster = Cluster.start(config)
    trace: list[tuple[Cluster, Action, Cluster]] = []

    def do(action: Action) -> None:
        nonlocal cluster
        before = cluster
        cluster = cluster.apply(action)
        trace.append((before, action, cluster))

    for item in script:
        if item in ("settle", "until n1 leads"):
            for _ in range(200):
                if item != "settle" and cluster.node(1).role == rn.Role.LEADER:
                    break
                pending = list(settle(cluster))
                if not pending:
                    break
                do(pending[0])
        elif isinstance(item, Action):
            do(item)
        else:
            for action in item(cluster):
                do(action)
    return trace


def refinement_failures(
    trace: list[tuple[Cluster, Action, Cluster]], stats: RefinementStats | None = None
) -> list[RefinementViolation]:
    failures = []
    for pre, action, post in trace:
        try:
            check_step(pre, action, post, stats, check_properties=True)
        except RefinementViolation as violation:
            failures.append(violation)
    return failures


def assert_invariants_hold(trace: list[tuple[Cluster, Action, Cluster]]) -> None:
    for pre, _, post in trace:
        post.check_invariants(pre)


SYNC = ClusterConfig(nodes=3, timeouts="free", persist="sync", election_ticks=4)
EXPLICIT = ClusterConfig(nodes=3, timeouts="free", persist="explicit", election_ticks=4)
PUT = PutRequest(b"k", b"v")

SNAPSHOT_SCRIPT: Script = [
    cl.partition(({3}, {1, 2})),
    cl.timeout(1),
    "settle",
    cl.propose(1, PUT),
    "settle",
    cl.compact_log(1),
    drop_to(3),
    cl.heal(),
    cl.heartbeat(1),
    "settle",
    cl.crash(2),
    cl.restart(2),
    cl.timeout(2),
    "settle",
]


@pytest.mark.parametrize("config", [SYNC, EXPLICIT], ids=["sync", "explicit"])
def test_correct_model_refines_spec_through_snapshot_install(config: ClusterConfig) -> None:
    trace = walk(config, SNAPSHOT_SCRIPT)
    stats = RefinementStats()
    assert refinement_failures(trace, stats) == []
    assert_invariants_hold(trace)
    for action in ("restore_snapshot", "compact", "accept_entries", "become_leader", "crash"):
        assert stats.actions[action] >= 1, stats.describe()


# --------------------------------------------------------------------------- mutations


def _term_goes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower that takes AppendEntries of its term lowers its term by one."""
    original = rn.step

    def buggy(params: rn.RaftParams, node: rn.Node, m: Message) -> tuple[rn.Node, list[Message]]:
        after, out = original(params, node, m)
        if m.type == MsgType.APPEND and after.role == rn.Role.FOLLOWER and after.term == m.term:
            after = after._replace(term=after.term - 1)
        return after, out

    monkeypatch.setattr(rn, "step", buggy)


def _second_vote(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node grants a vote in a term where it already voted for someone else."""
    original = rn._handle_vote_request

    def buggy(params: rn.RaftParams, node: rn.Node, m: Message) -> tuple[rn.Node, list[Message]]:
        after, out = original(params, node._replace(vote=0, lead=0), m)
        return after._replace(vote=after.vote or node.vote, lead=node.lead), out

    monkeypatch.setattr(rn, "_handle_vote_request", buggy)


def _no_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    return None


ELECT: Script = [cl.timeout(1), "settle", cl.propose(1, PUT), "settle"]
TWO_CANDIDATES: Script = [
    cl.timeout(1),
    cl.timeout(2),
    deliver_first(MsgType.VOTE, 1, 3),
    deliver_first(MsgType.VOTE, 2, 3),
]
STALE_ACK: Script = [
    cl.timeout(1),
    "until n1 leads",
    cl.propose(1, PUT),
    deliver_first(MsgType.APPEND, 1, 2),  # the no-op only: n2 acknowledges index 1
    deliver_first(MsgType.APPEND_RESP, 2, 1),
]
NO_PREVOTE = ClusterConfig(
    nodes=3, timeouts="free", persist="sync", election_ticks=4, prevote=False
)

# (id, config, patch, script, the model step caught, the failed part)
MUTATIONS = [
    ("term goes back on AppendEntries", SYNC, _term_goes_back, ELECT, "deliver(", "[higher]"),
    (
        "vote not persisted",
        ClusterConfig(
            nodes=3,
            timeouts="free",
            persist="sync",
            election_ticks=4,
            bugs=BugSet.of("vote_not_persisted"),
        ),
        _no_patch,
        [*ELECT, cl.crash(2)],
        "crash(n2)",
        "vote",
    ),
    (
        "commit without quorum",
        ClusterConfig(
            nodes=3,
            timeouts="free",
            persist="sync",
            election_ticks=4,
            bugs=BugSet.of("commit_without_quorum"),
        ),
        _no_patch,
        STALE_ACK,
        "AppendEntriesResp",
        "[quorum]",
    ),
    (
        "second vote in a term",
        NO_PREVOTE,
        _second_vote,
        TWO_CANDIDATES,
        "RequestVote",
        "[one_vote]",
    ),
]


@pytest.mark.parametrize(
    ("config", "patch", "script", "step", "part"),
    [m[1:] for m in MUTATIONS],
    ids=[m[0] for m in MUTATIONS],
)
def test_refinement_catches_bug_no_model_invariant_catches(
    monkeypatch: pytest.MonkeyPatch,
    config: ClusterConfig,
    patch: Callable[[pytest.MonkeyPatch], None],
    script: Script,
    step: str,
    part: str,
) -> None:
    clean = ClusterConfig(**{**config.__dict__, "bugs": BugSet()})
    assert refinement_failures(walk(clean, script)) == []  # the script itself is fine
    patch(monkeypatch)
    trace = walk(config, script)
    assert_invariants_hold(trace)  # no model invariant notices the bug on this run ...
    failures = refinement_failures(trace)
    assert failures, "refinement missed the bug"  # ... refinement does
    first = failures[0]
    assert step in first.action and part in first.failed, first.describe()
    text = first.describe()
    assert "pre:" in text and "post:" in text and "plan:" in text and "failed:" in text


def test_exploration_with_term_bug_caught_by_refinement_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On one seeded Hypothesis run, refinement flags the lowered term at the step it
    happens; the model's invariants notice only later, when a vote given twice has made
    two leaders (or never)."""
    _term_goes_back(monkeypatch)
    options = ExploreOptions(seed=3, max_examples=5, steps=30, persist="sync")
    plain = run_exploration(options, checked=False)
    checked = run_exploration(options, checked=True)
    assert isinstance(checked.violation, RefinementViolation), checked.describe()
    assert "[higher]" in checked.violation.failed
    assert plain.violation is None or checked.steps < plain.steps, plain.describe()

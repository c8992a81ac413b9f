"""The cluster's contract: persistent values, labels, symmetry, abstraction, partitions,
leader-driven lease expiry, illegal role transitions, and seeded random walks that keep
every invariant while electing leaders and committing."""

from __future__ import annotations

import json
import random

import pytest

from etcdspec.model import raft_node as rn
from etcdspec.model.actions import (
    Action,
    deliver,
    heal,
    keepalive,
    partition,
    propose,
    tick,
    timeout,
)
from etcdspec.model.cluster import Cluster, IllegalActionError
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.raft_node import Role
from etcdspec.model.raft_script import run_script
from etcdspec.model.requests import LeaseGrantRequest, LeaseRevokeRequest, PutRequest

FREE = ClusterConfig(timeouts="free", persist="sync", prevote=False, check_quorum=False)


def test_nodes_differing_only_by_name_share_a_canonical_fingerprint() -> None:
    start = Cluster.start(FREE)
    one, two = start.apply(timeout(1)), start.apply(timeout(2))
    assert one.fingerprint() != two.fingerprint()
    assert one.canonical_fingerprint() == two.canonical_fingerprint()
    assert one.canonical_fingerprint() != start.canonical_fingerprint()


def test_message_order_does_not_change_the_fingerprint() -> None:
    start = Cluster.start(FREE).apply(timeout(1)).apply(timeout(2))
    first, second = start.messages[0], start.messages[-1]
    a = start.apply(deliver(first)).apply(deliver(second))
    b = start.apply(deliver(second)).apply(deliver(first))
    assert sorted(m.sort_key() for m in a.messages) == sorted(m.sort_key() for m in b.messages)
    assert a.fingerprint() == b.fingerprint()


def test_action_labels() -> None:
    cluster = Cluster.start(FREE).apply(timeout(2))
    labels = [a.describe() for a in cluster.enabled_actions() if a.kind == "deliver"]
    assert labels == [
        "deliver(n2→n1 RequestVote term 1 last 0/0)",
        "deliver(n2→n3 RequestVote term 1 last 0/0)",
    ]
    assert timeout(2).describe() == "timeout(n2)"
    assert partition([[3], [1, 2]]).describe() == "partition(n1,n2 | n3)"
    assert Action("heal").describe() == "heal()"


def test_deliver_by_position_resolves_to_the_message() -> None:
    cluster = Cluster.start(FREE).apply(timeout(1))
    by_position = cluster.apply(deliver(0))
    assert by_position == cluster.apply(deliver(cluster.messages[0]))
    with pytest.raises(IllegalActionError):
        cluster.apply(deliver(7))


@pytest.mark.parametrize("nodes", [3, 5])
def test_every_enabled_action_applies_and_the_order_is_deterministic(nodes: int) -> None:
    cluster = Cluster.start(ClusterConfig(nodes=nodes, seed=3))
    for _ in range(30):
        cluster = cluster.apply(tick(1))
    actions = cluster.enabled_actions()
    assert actions == cluster.enabled_actions()
    for action in actions:
        cluster.apply(action).check_invariants()


@pytest.mark.parametrize(("nodes", "splits"), [(3, 3), (5, 15)])
def test_partitions_offered_are_every_minority_split(nodes: int, splits: int) -> None:
    actions = Cluster.start(ClusterConfig(nodes=nodes)).enabled_actions()
    assert len([a for a in actions if a.kind == "partition"]) == splits


def test_a_partition_blocks_delivery_until_heal() -> None:
    cluster = Cluster.start(FREE).apply(partition([[1], [2, 3]])).apply(timeout(1))
    assert not [a for a in cluster.enabled_actions() if a.kind == "deliver"]
    assert heal() in cluster.enabled_actions()
    healed = cluster.apply(heal())
    assert len([a for a in healed.enabled_actions() if a.kind == "deliver"]) == 2


def test_abstract_is_plain_json() -> None:
    _, cluster = run_script(["timeout 1", "stabilize", "propose 1 a=1", "stabilize"], FREE)
    view = cluster.abstract()
    json.dumps(view)
    n1 = view["nodes"]["n1"]
    assert (n1["role"], n1["term"], n1["voted_for"], n1["commit_index"]) == ("leader", 1, "n1", 2)
    assert n1["log"] == [[1, "noop"], [1, "put(a=1)"]]
    assert view["committed"] == [[1, "noop"], [1, "put(a=1)"]]


def test_crash_loses_volatile_state_but_keeps_term_vote_and_log() -> None:
    _, cluster = run_script(["timeout 1", "stabilize", "crash 1"], FREE)
    node = cluster.node(1)
    assert (node.role, node.term, node.vote, node.log.last_index) == (Role.FOLLOWER, 1, 1, 1)
    assert node.commit_index == 0 and not cluster.up[0]
    with pytest.raises(IllegalActionError):
        cluster.apply(timeout(1))


def test_illegal_role_transition_raises_and_changes_nothing() -> None:
    params = FREE.params()
    follower = Cluster.start(FREE).node(1)
    with pytest.raises(rn.IllegalTransitionError, match="follower -> leader"):
        rn._become_leader(params, follower)
    assert follower.role == Role.FOLLOWER


def _elect(config: ClusterConfig) -> Cluster:
    cluster = Cluster.start(config)
    for _ in range(200):
        if cluster.leader_ids():
            return cluster
        pending = [a for a in cluster.enabled_actions() if a.kind in ("deliver", "persist")]
        cluster = cluster.apply(pending[0] if pending else tick(1))
    raise AssertionError("no leader")


def _settle(cluster: Cluster) -> Cluster:
    for _ in range(200):
        pending = [a for a in cluster.enabled_actions() if a.kind in ("deliver", "persist")]
        if not pending:
            return cluster
        cluster = cluster.apply(pending[0])
        cluster.check_invariants()
    raise AssertionError("still busy")


def test_leader_revokes_an_expired_lease_through_the_log() -> None:
    config = ClusterConfig(lease_tick_scale=2, persist="sync")
    cluster = _settle(_elect(config).apply(propose(1, LeaseGrantRequest(ttl=3, id=5))))
    assert cluster.node(1).leases == ((5, 6),)
    for _ in range(5):
        cluster = _settle(cluster.apply(tick(1)))
    cluster = cluster.apply(keepalive(1, 5))  # refreshed to the full TTL
    assert cluster.node(1).leases == ((5, 6),)
    for _ in range(6):
        cluster = _settle(cluster.apply(tick(1)))
    log = cluster.node(1).log
    assert isinstance(log.entries[-1].request, LeaseRevokeRequest)
    assert cluster.node(1).store.lease_ids() == frozenset()
    assert cluster.node(1).leases == ()


def test_a_new_leader_restarts_lease_clocks_at_the_full_ttl() -> None:
    config = ClusterConfig(persist="sync", prevote=False, check_quorum=False)
    cluster = _settle(_elect(config).apply(propose(1, LeaseGrantRequest(ttl=4, id=9))))
    cluster = cluster.apply(tick(1)).apply(tick(1))
    cluster = _settle(cluster.apply(tick(1)))  # heartbeats carry the commit index
    for _ in range(40):
        if cluster.node(2).role == Role.LEADER:
            break
        cluster = cluster.apply(tick(2))
        cluster = _settle(cluster)
    assert cluster.node(2).role == Role.LEADER
    assert cluster.node(2).leases == ((9, 4),)


@pytest.mark.parametrize(("nodes", "seed"), [(3, 0), (3, 1), (5, 2)])
def test_seeded_random_walk_keeps_invariants_elects_and_commits(nodes: int, seed: int) -> None:
    rng = random.Random(seed)
    cluster = Cluster.start(ClusterConfig(nodes=nodes, seed=seed))
    leaders: set[tuple[int, int]] = set()
    for _ in range(1500):
        actions = cluster.enabled_actions()
        calm = [a for a in actions if a.kind in ("tick", "deliver", "persist", "restart", "heal")]
        if rng.random() < 0.05 or not calm:
            action = rng.choice(actions)
        elif rng.random() < 0.05 and cluster.leader_ids():
            action = propose(cluster.leader_ids()[0], PutRequest(b"k", str(seed).encode()))
        else:
            action = rng.choice(calm)
        cluster = cluster.apply(action)
        cluster.check_invariants()
        leaders.update((cluster.node(n).term, n) for n in cluster.leader_ids())
    assert leaders, "no leader was ever elected"
    assert cluster.commit_index() > 0, "nothing was ever committed"


def test_symmetric_partitions_share_a_canonical_fingerprint() -> None:
    start = Cluster.start(FREE)
    one = start.apply(partition([[1], [2, 3]]))
    two = start.apply(partition([[2], [1, 3]]))
    assert one.canonical_fingerprint() == two.canonical_fingerprint()
    assert one.canonical_fingerprint() != start.canonical_fingerprint()
    hash(one.canonical_fingerprint())


def test_ready_lists_what_to_persist_send_and_apply_in_order() -> None:
    config = ClusterConfig(timeouts="free", persist="explicit")
    _, cluster = run_script(["timeout 1", "stabilize", "propose 1 a=1"], config)
    leader = cluster.node(1)
    pending = rn.ready(leader)
    assert pending.hard_state is not None and pending.hard_state.log.last_index == 2
    assert [m.dst for m in pending.messages] == [2, 3]
    assert pending.committed_entries == ()
    _, settled = run_script(["timeout 1", "stabilize", "propose 1 a=1", "stabilize"], config)
    done = rn.ready(settled.node(1))
    assert done.hard_state is None and done.messages == () and done.committed_entries == ()
    assert done.describe() == "persist nothing; send 0; apply nothing"

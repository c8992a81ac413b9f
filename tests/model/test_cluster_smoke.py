"""The cluster simulator elects a leader, commits and applies, deterministically."""

from __future__ import annotations

import pytest

from etcdspec.model.actions import propose, tick
from etcdspec.model.cluster import Cluster, IllegalActionError
from etcdspec.model.cluster_config import ClusterConfig, ConfigError
from etcdspec.model.raft_node import Role
from etcdspec.model.requests import PutRequest


def _run_until_leader(cluster: Cluster, limit: int = 400) -> Cluster:
    """Tick n1 until it campaigns, then deliver/persist everything in order."""
    for _ in range(limit):
        if cluster.leader_ids():
            return cluster
        actions = [a for a in cluster.enabled_actions() if a.kind in ("persist", "deliver")] or [
            tick(1)
        ]
        cluster = cluster.apply(actions[0])
        cluster.check_invariants()
    raise AssertionError("no leader elected")


def test_cluster_elects_commits_and_applies_a_put() -> None:
    cluster = _run_until_leader(Cluster.start(ClusterConfig()))
    assert cluster.leader_ids() == [1]
    cluster = cluster.apply(propose(1, PutRequest(b"a", b"1")))
    for _ in range(50):
        actions = [a for a in cluster.enabled_actions() if a.kind in ("persist", "deliver")]
        if not actions:
            break
        cluster = cluster.apply(actions[0])
        cluster.check_invariants()
    assert [key for _, _, key in cluster.committed()] == ["noop", "put(a=1)"]
    leader = cluster.node(1)
    assert leader.role == Role.LEADER and leader.applied_index == 2
    assert leader.store.revision == 2


def test_apply_leaves_the_old_cluster_unchanged() -> None:
    start = Cluster.start(ClusterConfig())
    after = start.apply(tick(1))
    assert start.node(1).election_elapsed == 0
    assert after.node(1).election_elapsed == 1
    assert start != after


def test_illegal_action_raises_and_changes_nothing() -> None:
    start = Cluster.start(ClusterConfig())
    with pytest.raises(IllegalActionError):
        start.apply(propose(1, PutRequest(b"a", b"1")))


@pytest.mark.parametrize(
    "changes",
    [{"nodes": 0}, {"timeouts": "sometimes"}, {"persist": "never"}, {"heartbeat_ticks": 10}],
)
def test_bad_config_is_a_clear_error(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ClusterConfig(**changes)  # type: ignore[arg-type]

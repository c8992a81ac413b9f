"""Model fidelity to etcd raft: heartbeats carry min(match, commit) and are taken by a
follower without a log check; appends carry at most `max_append_entries` entries, the
leader sending the next batch on each acknowledgement; FollowerCommitMatched (a
follower commits only what its leader's log holds) holds throughout. The catalogue's
heartbeat_full_commit (the whole commit index in a heartbeat) breaks it: found by its
finder in tests/model/test_explore_bugs.py (a bounded exhaustive search), reproduced by
a fixed script in tests/model/test_raft_bugs.py."""

from __future__ import annotations

from dataclasses import replace

from etcdspec.model import actions as act
from etcdspec.model.actions import Action
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.explore import ExploreOptions, run_hypothesis
from etcdspec.model.raft_messages import MsgType
from etcdspec.model.refinement import run_exploration
from etcdspec.model.refinement_check import check_step
from etcdspec.model.requests import PutRequest
from etcdspec.verdict import Verdict

STEPS: list[tuple[Cluster, Action, Cluster]] = []


def _step(cluster: Cluster, action: Action) -> Cluster:
    """One model step, its invariants checked, kept for the refinement check."""
    after = cluster.apply(action)
    after.check_invariants(cluster)
    STEPS.append((cluster, action, after))
    return after


def _settle(cluster: Cluster, skip_to: int = 0) -> Cluster:
    """Deliver in order until quiet, dropping whatever goes to node `skip_to`."""
    for _ in range(200):
        if not cluster.messages:
            return cluster
        message = cluster.messages[0]
        action = act.drop(message) if message.dst == skip_to else act.deliver(message)
        cluster = _step(cluster, action)
    raise AssertionError("the network did not settle")


def _start(**settings: object) -> Cluster:
    config = ClusterConfig(timeouts="free", persist="sync", etcd_heartbeats=True, **settings)  # type: ignore[arg-type]
    cluster = _settle(_step(Cluster.start(config), act.timeout(1)))
    assert cluster.leader_ids() == [1]
    return cluster


def test_a_heartbeat_carries_min_of_match_and_commit_and_catches_a_follower_up() -> None:
    STEPS.clear()
    cluster = _start(max_append_entries=1)
    for value in (b"1", b"2", b"3"):
        cluster = _settle(_step(cluster, act.propose(1, PutRequest(b"k", value))), skip_to=3)
    leader = cluster.node(1)
    assert leader.commit_index == leader.log.last_index == 4  # the no-op and three puts
    assert (leader.match[2], cluster.node(3).log.last_index) == (1, 1)  # n3 holds the no-op
    cluster = _step(cluster, act.heartbeat(1))
    beats = {m.dst: m for m in cluster.messages if m.type == MsgType.HEARTBEAT}
    assert (beats[2].commit, beats[3].commit) == (4, 1)  # min(match, commit) each
    cluster = _settle(cluster)  # n3's HeartbeatResp brings appends of one entry each
    assert cluster.node(3).commit_index == 4 and cluster.node(3).log.last_index == 4
    # every step, heartbeats and their commits included, is a raft_steps.spec step
    assert any(a.kind == "deliver" and a.args[0].type == MsgType.HEARTBEAT for _, a, _ in STEPS)
    for pre, action, post in STEPS:
        check_step(pre, action, post)


def test_exploration_with_etcd_heartbeats_keeps_every_invariant_and_refines_the_spec() -> None:
    options = ExploreOptions(
        max_examples=10, steps=30, timeouts="ticks", etcd_heartbeats=True, max_append_entries=1
    )
    result = run_hypothesis(options)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.witnesses["cluster: entry committed"] > 0
    refined = run_exploration(replace(options, refine=True, timeouts="free"))
    assert refined.violation is None, refined.violation
    assert refined.steps > 100


def test_appends_are_limited_in_size() -> None:
    cluster = _start(max_append_entries=2)
    for value in (b"1", b"2", b"3"):
        cluster = _settle(cluster.apply(act.propose(1, PutRequest(b"k", value))), skip_to=3)
    cluster = cluster.apply(act.heartbeat(1))
    cluster = cluster.apply(
        act.deliver(next(m for m in cluster.messages if m.dst == 3))
    )  # n3's heartbeat
    cluster = cluster.apply(act.deliver(next(m for m in cluster.messages if m.dst == 1)))
    appends = [m for m in cluster.messages if m.type == MsgType.APPEND and m.dst == 3]
    assert [len(m.entries) for m in appends] == [2]

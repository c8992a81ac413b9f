"""The leader's two conf-change rules matter: each scenario below is run with the rule
on (the core refuses the second change; the simulator's safety checks stay quiet) and
with it turned off by the core's bug hook (RaftConfig.unsafe_conf_change): then two
changes commit under the old configuration, two disjoint quorums exist, and the
simulator finds two different entries committed at one index (a committed entry lost).

Both scenarios drive the cluster message by message; ticks are given only to end a
leader's lease (CheckQuorum) or to let a node campaign.
"""

from __future__ import annotations

import pytest
from impl_raft_sim import Cluster

from etcdspec.impl.raft.core import SKIP_PENDING_CHECK, SKIP_TERM_CHECK
from etcdspec.impl.raft.messages import ConfChange, ConfChangeType, Message, MessageType

ADD = ConfChangeType.ADD_NODE
REMOVE = ConfChangeType.REMOVE_NODE
LOST = "Leader Completeness|State Machine Safety"  # a committed entry lost


def lead(cluster: Cluster, node: int) -> None:
    """Make `node` the leader: end the others' leases, campaign, deliver what it takes."""
    for other in cluster.alive():
        if other != node:
            for _ in range(cluster.config(other).election_tick):
                cluster.driver(other).core.election_elapsed += 1  # no campaign of its own
    cluster.campaign(node)
    for _ in range(100):
        if cluster.driver(node).is_leader():
            return
        assert cluster.network, f"node {node} could not win:\n{cluster.describe()}"
        cluster.deliver(0)
    raise AssertionError(f"node {node} did not win:\n{cluster.describe()}")


def commit(cluster: Cluster, node: int) -> int:
    return cluster.driver(node).core.log.committed


def pending_rule_scenario(bugs: frozenset[str]) -> bool:
    """{1,2,3}: leader 1 proposes "remove 3" and at once "add 4". Returns whether the second
    was taken. Taken, both commit with the old quorum {1,2}; 1 moves to {1,2,4} and commits
    x with {1,4}, while 2, never told of the commit, stays in {1,2,3} and is elected with
    3's vote: its no-op commits at x's index with {2,3}."""
    cluster = Cluster(3, seed=5, unsafe_conf_change=bugs)
    lead(cluster, 1)
    cluster.deliver_all()
    cluster.add_node(4)  # joining with an empty configuration: it acknowledges appends
    cluster.partition({1, 2, 4}, {3})
    assert cluster.propose_conf_change(1, ConfChange(REMOVE, 3))
    taken = cluster.propose_conf_change(1, ConfChange(ADD, 4))
    last = cluster.driver(1).core.log.last_index()
    # 2 acknowledges the changes; the leader commits them, 2 is never told.
    cluster.deliver_where(lambda m: m.to == 2 and m.type is MessageType.APP)
    cluster.deliver_where(lambda m: m.from_ == 2 and m.type is MessageType.APP_RESP)
    assert commit(cluster, 1) == last and commit(cluster, 2) < last
    cluster.drop_where(lambda m: m.to == 2)
    cluster.partition({1, 4}, {2, 3})
    cluster.deliver_all()
    cluster.propose(1, b"x")
    cluster.deliver_all()
    lead(cluster, 2)
    cluster.deliver_all()
    return taken


def term_rule_scenario(bugs: frozenset[str]) -> bool:
    """{1,2,3}: leader 1 commits "add 4" with {1,2}; 2 is not told. 2 is elected with 3's vote
    and proposes "add 5" before it committed an entry of its term. Returns whether that was
    taken. Taken, "add 4" and "add 5" commit with {2,3}, a quorum of the old configuration;
    2 moves to {1,2,3,4,5} and commits x with {2,4,5}, while 3, never told of the commit,
    stays in {1,2,3} and is elected with 1's vote: its no-op commits at x's index."""
    cluster = Cluster(3, seed=5, unsafe_conf_change=bugs)
    lead(cluster, 1)
    cluster.deliver_all()
    cluster.add_node(4)  # joining with an empty configuration: they acknowledge appends
    cluster.add_node(5)
    cluster.partition({1, 2}, {3, 4, 5})
    assert cluster.propose_conf_change(1, ConfChange(ADD, 4))
    cluster.deliver_where(lambda m: m.to == 2 and m.type is MessageType.APP)
    cluster.deliver_where(lambda m: m.from_ == 2 and m.type is MessageType.APP_RESP)
    assert commit(cluster, 2) < commit(cluster, 1)
    cluster.drop_where(lambda m: True)
    cluster.partition({2, 3}, {1, 4, 5})
    lead(cluster, 2)
    taken = cluster.propose_conf_change(2, ConfChange(ADD, 5))
    last = cluster.driver(2).core.log.last_index()
    # 3 acknowledges everything; 2 commits it, 3 is never told.
    while commit(cluster, 2) < last:
        waiting = [
            i
            for i, m in enumerate(cluster.network)
            if m.to in (2, 3) and m.type in (MessageType.APP, MessageType.APP_RESP)
        ]
        assert waiting, cluster.describe()
        cluster.deliver(waiting[0])
    cluster.drop_where(lambda m: m.to == 3)
    cluster.partition({2, 4, 5}, {1, 3})
    cluster.deliver_all()
    cluster.tick(2, 3)  # heartbeats: the new members catch up
    cluster.deliver_all()
    cluster.propose(2, b"x")
    cluster.deliver_all()
    for _ in range(cluster.config(1).election_tick):
        cluster.tick(1)  # CheckQuorum: the old leader 1 steps down
    cluster.drop_where(lambda m: True)
    lead(cluster, 3)
    cluster.deliver_all()
    return taken


SCENARIOS = {SKIP_PENDING_CHECK: pending_rule_scenario, SKIP_TERM_CHECK: term_rule_scenario}


@pytest.mark.parametrize("rule", sorted(SCENARIOS))
def test_with_the_rule_the_second_change_is_refused_and_nothing_committed_is_lost(
    rule: str,
) -> None:
    assert SCENARIOS[rule](frozenset()) is False


@pytest.mark.parametrize("rule", sorted(SCENARIOS))
def test_without_the_rule_the_simulator_finds_a_lost_committed_entry(rule: str) -> None:
    with pytest.raises(AssertionError, match=LOST):
        SCENARIOS[rule](frozenset({rule}))


def test_turning_off_the_other_rule_alone_does_not_open_the_hole() -> None:
    """Each scenario needs its own rule off: the other rule alone still refuses."""
    assert pending_rule_scenario(frozenset({SKIP_TERM_CHECK})) is False
    assert term_rule_scenario(frozenset({SKIP_PENDING_CHECK})) is False


def test_the_message_filter_helpers_select_what_they_say() -> None:
    cluster = Cluster(3, seed=1)
    cluster.network = [
        Message(MessageType.HEARTBEAT, to=2, from_=1, term=1),
        Message(MessageType.HEARTBEAT, to=3, from_=1, term=1),
    ]
    assert cluster.drop_where(lambda m: m.to == 2) == 1
    assert [m.to for m in cluster.network] == [3]
    assert cluster.deliver_where(lambda m: m.to == 2) == 0
    assert cluster.deliver_where(lambda m: m.to == 3) == 1  # and 3's answer is kept
    assert [(m.from_, m.to) for m in cluster.network] == [(3, 1)]

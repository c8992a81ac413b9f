"""Configuration changes in the server's Raft core, driven deterministically through the
simulator: learners, promotion, removal (of a follower and of the leader), the leader's
refusals (a change pending, no entry of its term committed yet, nonsense changes), a
transfer to a non-voter, a new node catching up from the log or a snapshot, and a change
made while a minority is partitioned away."""

from __future__ import annotations

import random

import pytest
from impl_raft_sim import Cluster

from etcdspec.impl.raft.core import RaftConfig, Role
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import (
    BadLeaderTransferee,
    ConfChange,
    ConfChangeRefused,
    ConfChangeType,
    ConfigError,
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    NotLeader,
    UsageError,
)

ADD = ConfChangeType.ADD_NODE
REMOVE = ConfChangeType.REMOVE_NODE
LEARNER = ConfChangeType.ADD_LEARNER_NODE


def started(n: int = 3, seed: int = 1, **options: object) -> tuple[Cluster, int]:
    cluster = Cluster(n, seed=seed, **options)  # type: ignore[arg-type]
    return cluster, cluster.stabilize()


def change(cluster: Cluster, leader: int, kind: ConfChangeType, node: int) -> None:
    assert cluster.propose_conf_change(leader, ConfChange(kind, node)), cluster.describe()
    cluster.stabilize()


def conf(cluster: Cluster, node: int) -> ConfState:
    return cluster.driver(node).conf_state


def committed_everywhere(cluster: Cluster, data: bytes, nodes: list[int]) -> bool:
    return all(any(e.data == data for e in cluster.nodes[i].applied) for i in nodes)


def test_conf_change_round_trips_and_describes_itself() -> None:
    cc = ConfChange(LEARNER, 7, b"member record")
    assert ConfChange.decode(cc.encode()) == cc
    entry = Entry(3, 9, cc.encode(), EntryType.CONF_CHANGE)
    assert entry.describe() == '3/9 conf change: add learner 7 context="member record"'
    with pytest.raises(ValueError, match="unknown type 9"):
        ConfChange.decode(b"\x01\x09" + bytes(8))
    with pytest.raises(ValueError, match="at least 10 needed"):
        ConfChange.decode(b"\x01")


def test_learner_gets_the_log_but_never_counts_toward_commit_nor_campaigns() -> None:
    cluster, leader = started()
    cluster.add_node(4, voters=(1, 2, 3), learners=(4,))
    change(cluster, leader, LEARNER, 4)
    assert conf(cluster, leader) == ConfState((1, 2, 3), (4,))
    assert conf(cluster, 4) == ConfState((1, 2, 3), (4,))
    assert cluster.propose(leader, b"x")
    cluster.stabilize()
    assert committed_everywhere(cluster, b"x", [1, 2, 3, 4])
    assert cluster.driver(leader).match_index(4) == cluster.driver(leader).core.log.last_index()
    # With both other voters cut off, the learner's acknowledgement commits nothing.
    others = [i for i in (1, 2, 3) if i != leader]
    cluster.partition({leader, 4}, set(others))
    commit = cluster.driver(leader).core.log.committed
    assert cluster.propose(leader, b"y")
    cluster.deliver_all()
    assert cluster.driver(4).core.log.last_index() > commit  # the learner has it
    assert cluster.driver(leader).core.log.committed == commit  # but it is not committed
    # A learner never campaigns, however long it hears from no leader.
    cluster.partition({4}, {1, 2, 3})
    cluster.tick(4, 200)
    assert cluster.driver(4).role is Role.FOLLOWER and cluster.driver(4).term <= 3


def test_promoting_a_learner_makes_it_count_and_able_to_lead() -> None:
    cluster, leader = started()
    cluster.add_node(4, voters=(1, 2, 3), learners=(4,))
    change(cluster, leader, LEARNER, 4)
    change(cluster, leader, ADD, 4)
    assert conf(cluster, 4) == ConfState((1, 2, 3, 4)) == conf(cluster, leader)
    # Four voters: the quorum is three, so the leader and one follower cannot commit.
    one = next(i for i in (1, 2, 3) if i != leader)
    cluster.partition({leader, one}, set(cluster.ids) - {leader, one})
    commit = cluster.driver(leader).core.log.committed
    cluster.propose(leader, b"needs three")
    cluster.deliver_all()
    assert cluster.driver(leader).core.log.committed == commit
    cluster.heal()
    cluster.stabilize()
    cluster.transfer_leader(cluster.leader() or leader, 4)
    assert cluster.stabilize() == 4


def test_removed_follower_is_not_counted_and_never_campaigns() -> None:
    cluster, leader = started(5)
    gone = next(i for i in cluster.ids if i != leader)
    change(cluster, leader, REMOVE, gone)
    assert gone not in conf(cluster, leader).voters and len(conf(cluster, leader).voters) == 4
    assert cluster.driver(gone).removed
    assert cluster.propose(leader, b"after removal")
    cluster.stabilize()
    live = [i for i in cluster.ids if i != gone]
    assert committed_everywhere(cluster, b"after removal", live)
    assert not any(e.data == b"after removal" for e in cluster.nodes[gone].applied)
    # However long it hears nothing, it starts nothing.
    cluster.partition({gone}, set(live))
    cluster.tick(gone, 100)
    assert cluster.driver(gone).role is Role.FOLLOWER
    assert not [m for m in cluster.network if m.from_ == gone]


def test_a_removed_node_still_answers_a_leader_that_has_not_applied_its_removal() -> None:
    """A leader elected by nodes that have not applied a removal counts the removed node
    in its configuration: the removed node's vote and acknowledgements let it commit, and
    so learn of the removal (a silent removed node could leave it stuck forever)."""
    cluster, leader = started(3)
    gone = next(i for i in cluster.ids if i != leader)
    change(cluster, leader, REMOVE, gone)
    driver = cluster.driver(gone)
    term = driver.term
    other = next(i for i in cluster.ids if i not in (leader, gone))
    last = driver.core.log.last_index()
    cluster.tick(gone, cluster.config(gone).election_tick)  # out of the leader's lease
    assert not driver.has_ready()  # it never starts anything itself
    vote = Message(MessageType.VOTE, to=gone, from_=other, term=term + 1, index=last, log_term=term)
    assert driver.step(vote) is True
    app = Message(MessageType.APP, to=gone, from_=other, term=term + 1, index=last, log_term=term)
    assert driver.step(app) is True
    ready = driver.ready()
    assert [(m.type, m.to, m.reject) for m in ready.messages] == [
        (MessageType.VOTE_RESP, other, False),
        (MessageType.APP_RESP, other, False),
    ]
    driver.advance(ready)


def test_removed_leader_steps_down_and_the_rest_elect_a_new_one() -> None:
    cluster, leader = started()
    term = cluster.driver(leader).term
    change(cluster, leader, REMOVE, leader)
    assert cluster.driver(leader).role is Role.FOLLOWER
    assert cluster.driver(leader).core.removed
    new = cluster.stabilize()
    assert new != leader and cluster.driver(new).term > term
    assert conf(cluster, new) == ConfState(tuple(i for i in (1, 2, 3) if i != leader))
    assert cluster.propose(new, b"two voters")
    cluster.stabilize()
    assert committed_everywhere(cluster, b"two voters", [i for i in (1, 2, 3) if i != leader])


def test_a_second_change_is_refused_while_the_first_is_pending() -> None:
    cluster, leader = started()
    cluster.add_node(4, voters=(1, 2, 3), learners=(4,))
    driver = cluster.driver(leader)
    driver.propose_conf_change(ConfChange(LEARNER, 4))
    with pytest.raises(ConfChangeRefused, match="a configuration change is pending"):
        driver.propose_conf_change(ConfChange(REMOVE, 2))
    cluster.process(leader)
    cluster.stabilize()
    driver.propose_conf_change(ConfChange(REMOVE, 2 if leader != 2 else 3))  # applied: ok


def test_a_new_leader_takes_no_change_before_it_committed_an_entry_of_its_term() -> None:
    cluster, leader = started()
    other = next(i for i in cluster.ids if i != leader)
    cluster.transfer_leader(leader, other)
    while not cluster.driver(other).is_leader():
        assert cluster.network, cluster.describe()
        cluster.deliver(0)
    # Elected, its no-op appended, but not yet acknowledged by anyone.
    driver = cluster.driver(other)
    assert driver.core.log.committed < driver.core.term_start_index
    with pytest.raises(ConfChangeRefused, match="not committed an entry of its term"):
        driver.propose_conf_change(ConfChange(REMOVE, leader))
    cluster.stabilize()
    driver.propose_conf_change(ConfChange(REMOVE, leader))


@pytest.mark.parametrize(
    "cc,problem",
    [
        (ConfChange(ADD, 2), "already a voter"),
        (ConfChange(LEARNER, 2), "already a voter"),
        (ConfChange(REMOVE, 9), "unknown node 9"),
        (ConfChange(ConfChangeType.UPDATE_NODE, 9), "unknown node 9"),
        (ConfChange(ADD, 0), "needs a node id"),
    ],
)
def test_nonsense_changes_are_refused(cc: ConfChange, problem: str) -> None:
    cluster, leader = started()
    with pytest.raises(ConfChangeRefused, match=problem):
        cluster.driver(leader).propose_conf_change(cc)


def test_the_last_voter_cannot_be_removed() -> None:
    cluster, leader = started(1)
    with pytest.raises(ConfChangeRefused, match="last voter"):
        cluster.driver(leader).propose_conf_change(ConfChange(REMOVE, leader))


def test_only_the_leader_takes_conf_changes() -> None:
    cluster, leader = started()
    follower = next(i for i in cluster.ids if i != leader)
    with pytest.raises(NotLeader) as raised:
        cluster.driver(follower).propose_conf_change(ConfChange(REMOVE, leader))
    assert raised.value.leader_id == leader


def test_transfer_to_a_non_voter_is_a_bad_leader_transferee() -> None:
    cluster, leader = started()
    cluster.add_node(4, voters=(1, 2, 3), learners=(4,))
    change(cluster, leader, LEARNER, 4)
    for target in (4, 9):
        with pytest.raises(BadLeaderTransferee, match=f"cannot transfer leadership to {target}"):
            cluster.driver(leader).transfer_leader(target)
    assert issubclass(BadLeaderTransferee, UsageError)


def test_apply_conf_change_without_a_committed_change_is_a_usage_error() -> None:
    driver = RaftDriver(RaftConfig(id=1, voters=(1,)), random.Random(0))
    with pytest.raises(UsageError, match="no committed conf change entry"):
        driver.apply_conf_change(ConfChange(ADD, 2))


@pytest.mark.parametrize(
    "kwargs,problem",
    [
        ({"id": 1, "voters": (1, 2), "learners": (2,)}, "not voters"),
        ({"id": 4, "voters": (1, 2, 3), "learners": (5,)}, "not among voters"),
        ({"id": 4, "voters": (), "learners": (4,)}, "needs voters"),
        ({"id": 1, "voters": (1,), "unsafe_conf_change": frozenset({"x"})}, "unknown"),
    ],
)
def test_bad_configurations_are_refused(kwargs: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        RaftDriver(RaftConfig(**kwargs), random.Random(0))  # type: ignore[arg-type]


def test_new_learner_catches_up_from_a_snapshot_when_the_log_was_compacted() -> None:
    cluster, leader = started()
    for i in range(5):
        cluster.propose(leader, f"old{i}".encode())
    cluster.stabilize()
    for node in cluster.ids:
        cluster.compact(node)
    cluster.add_node(4)  # empty configuration: it learns it from the snapshot
    change(cluster, leader, LEARNER, 4)
    assert conf(cluster, 4) == ConfState((1, 2, 3), (4,))
    assert [e.data for e in cluster.nodes[4].applied][-5:] == [
        *(f"old{i}".encode() for i in range(1, 5)),
        ConfChange(LEARNER, 4).encode(),
    ]
    change(cluster, leader, ADD, 4)
    assert conf(cluster, 4) == ConfState((1, 2, 3, 4))


def test_new_learner_catches_up_from_the_log_and_keeps_its_config_over_a_restart() -> None:
    cluster, leader = started()
    gone = next(i for i in cluster.ids if i != leader)
    change(cluster, leader, REMOVE, gone)  # history before 4 joins: not applied again
    cluster.add_node(4, voters=tuple(i for i in (1, 2, 3) if i != gone), learners=(4,))
    change(cluster, leader, LEARNER, 4)
    change(cluster, leader, ADD, 4)
    expected = ConfState(tuple(sorted({1, 2, 3, 4} - {gone})))
    assert conf(cluster, 4) == expected
    cluster.crash(4)
    cluster.restart(4)
    cluster.stabilize()
    assert conf(cluster, 4) == expected


def test_conf_change_with_a_minority_partitioned_reaches_it_after_healing() -> None:
    cluster, leader = started(5)
    cut = [i for i in cluster.ids if i != leader][:2]
    cluster.partition(set(cut), set(cluster.ids) - set(cut))
    victim = next(i for i in cluster.ids if i not in cut and i != leader)
    assert cluster.propose_conf_change(leader, ConfChange(REMOVE, victim))
    for _ in range(5):
        cluster.deliver_all()
        cluster.tick_all()
    assert victim not in conf(cluster, leader).voters
    assert all(victim in conf(cluster, i).voters for i in cut)  # not heard yet
    cluster.heal()
    cluster.stabilize()
    assert all(conf(cluster, i) == conf(cluster, leader) for i in cut)


def test_snapshot_carries_the_configuration_at_its_index() -> None:
    cluster, leader = started()
    cluster.add_node(4, voters=(1, 2, 3), learners=(4,))
    change(cluster, leader, LEARNER, 4)
    driver = cluster.driver(leader)
    assert driver.conf_state_at(1) == ConfState((1, 2, 3))  # before the change
    assert driver.conf_state_at(driver.core.log.applied) == ConfState((1, 2, 3), (4,))
    cluster.compact(leader)
    meta = driver.core.log.snapshot.meta
    assert (meta.voters, meta.learners) == ((1, 2, 3), (4,))


def test_a_forwarded_proposal_holding_a_conf_change_is_dropped() -> None:
    cluster, leader = started()
    follower = next(i for i in cluster.ids if i != leader)
    entry = Entry(0, 0, ConfChange(REMOVE, follower).encode(), EntryType.CONF_CHANGE)
    prop = Message(MessageType.PROP, to=leader, from_=follower, entries=(entry,))
    last = cluster.driver(leader).core.log.last_index()
    assert cluster.driver(leader).step(prop) is False
    assert cluster.driver(leader).core.log.last_index() == last


def test_no_campaign_while_a_committed_conf_change_is_unapplied() -> None:
    """etcd raft's rule: a node that knows a conf change is committed applies it before it
    campaigns (it would count votes in a configuration the cluster has left)."""
    driver = RaftDriver(RaftConfig(id=2, voters=(1, 2, 3)), random.Random(0))
    cc = Entry(1, 2, ConfChange(REMOVE, 3).encode(), EntryType.CONF_CHANGE)
    entries = (Entry(1, 1), cc)
    driver.step(Message(MessageType.APP, to=2, from_=1, term=1, entries=entries, commit=2))
    ready = driver.ready()
    assert ready.committed_entries == entries
    driver.advance(ready)  # applied the entries but not (yet) the conf change
    driver.campaign()
    assert driver.role is Role.FOLLOWER and not driver.has_ready()
    assert driver.apply_conf_change(ConfChange.decode(cc.data)) == ConfState((1, 2))
    driver.campaign()
    assert driver.role is Role.PRE_CANDIDATE


def test_a_node_with_an_empty_configuration_learns_it_only_from_a_snapshot() -> None:
    """Caught up from the log alone (never compacted), it replicates, acknowledges and
    applies, but does not know the configuration, so it never campaigns even once made a
    voter: start new members with the configuration that adds them (as a learner)."""
    cluster, leader = started()
    cluster.add_node(4)
    change(cluster, leader, LEARNER, 4)
    change(cluster, leader, ADD, 4)
    assert conf(cluster, 4) == ConfState(()) and cluster.driver(4).core.joining
    assert not cluster.driver(4).core.promotable()
    assert conf(cluster, leader) == ConfState((1, 2, 3, 4))
    driver = cluster.driver(leader)
    assert driver.match_index(4) == driver.core.log.last_index()  # it has the whole log
    # (test_new_learner_catches_up_from_a_snapshot_when_the_log_was_compacted: configured)


def test_a_stale_candidate_outside_the_configuration_is_told_the_term() -> None:
    """With PreVote off, a node whose configuration lacks a candidate never sends it its
    own campaigns' terms: a stale vote request from it gets a rejection with the term
    (Raft's reply), or it could stay terms behind forever (chaos found that livelock).
    A voter's stale request is still ignored, as before."""

    def sent(driver: RaftDriver) -> list[tuple[MessageType, int, int, bool]]:
        if not driver.has_ready():
            return []
        ready = driver.ready()
        driver.advance(ready)
        return [(m.type, m.to, m.term, m.reject) for m in ready.messages]

    driver = RaftDriver(RaftConfig(id=1, voters=(1, 2), pre_vote=False), random.Random(0))
    driver.campaign()
    driver.campaign()  # a candidate of {1, 2} at term 2
    sent(driver)
    for candidate, expected in ((5, [(MessageType.VOTE_RESP, 5, 2, True)]), (2, [])):
        stale = Message(MessageType.VOTE, to=1, from_=candidate, term=1, index=9, log_term=1)
        assert driver.step(stale)
        assert sent(driver) == expected

"""Raft scenarios driven deterministically through the simulator: PreVote, CheckQuorum,
leader transfer, ReadIndex, InstallSnapshot, flow control, the Figure 8 commit rule and
proposal routing. Each names the property it checks; where a feature can be turned off,
the same scenario is run without it to show the check can fail."""

from __future__ import annotations

import random

import pytest
from impl_raft_sim import Cluster

from etcdspec.impl.raft.core import PersistedState, RaftConfig, RaftCore, Role
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import (
    NONE,
    Entry,
    HardState,
    IllegalTransition,
    MessageType,
    NotLeader,
    ProposalDropped,
)


def elected(cluster: Cluster) -> int:
    return cluster.stabilize()


@pytest.mark.parametrize("pre_vote,disrupted", [(True, False), (False, True)])
def test_prevote_partitioned_node_does_not_disrupt_the_leader_on_rejoin(
    pre_vote: bool, disrupted: bool
) -> None:
    cluster = Cluster(3, seed=7, pre_vote=pre_vote)
    leader = elected(cluster)
    term = cluster.driver(leader).term
    isolated = next(i for i in cluster.ids if i != leader)
    cluster.partition({isolated}, set(cluster.ids) - {isolated})
    for _ in range(60):
        cluster.tick(isolated)
        cluster.tick_all()
        cluster.deliver_all()
    assert (cluster.driver(isolated).term > term) is disrupted
    cluster.heal()
    for _ in range(30):
        cluster.tick_all()
        cluster.deliver_all()
    stable = cluster.stabilize()
    if disrupted:
        assert cluster.driver(stable).term > term
    else:
        assert stable == leader and cluster.driver(leader).term == term


@pytest.mark.parametrize("check_quorum,steps_down", [(True, True), (False, False)])
def test_check_quorum_leader_without_quorum_steps_down(
    check_quorum: bool, steps_down: bool
) -> None:
    cluster = Cluster(3, seed=3, check_quorum=check_quorum)
    leader = elected(cluster)
    others = set(cluster.ids) - {leader}
    cluster.partition({leader}, others)
    for _ in range(3 * 10):
        cluster.tick(leader)
        cluster.deliver_all()
    assert (cluster.driver(leader).role is not Role.LEADER) is steps_down


def test_leader_transfer_to_an_up_to_date_follower() -> None:
    cluster = Cluster(3, seed=1)
    leader = elected(cluster)
    target = next(i for i in cluster.ids if i != leader)
    term = cluster.driver(leader).term
    cluster.transfer_leader(leader, target)
    assert any(m.type is MessageType.TIMEOUT_NOW for m in cluster.network)
    cluster.deliver_all()
    assert cluster.driver(target).is_leader() and cluster.driver(target).term == term + 1
    assert cluster.stabilize() == target


def test_leader_transfer_catches_up_a_lagging_target_first_and_drops_proposals_meanwhile() -> None:
    cluster = Cluster(3, seed=2)
    leader = elected(cluster)
    target = next(i for i in cluster.ids if i != leader)
    cluster.partition({target}, set(cluster.ids) - {target})
    for i in range(5):
        assert cluster.propose(leader, f"p{i}".encode())
        cluster.deliver_all()
    cluster.heal()
    cluster.transfer_leader(leader, target)
    assert not any(m.type is MessageType.TIMEOUT_NOW for m in cluster.network)
    with pytest.raises(ProposalDropped, match="leadership is moving"):
        cluster.driver(leader).propose(b"during transfer")
    cluster.deliver_all()
    assert cluster.driver(target).is_leader()
    assert [e.data for e in cluster.nodes[target].applied if e.data][:5] == [
        f"p{i}".encode() for i in range(5)
    ]


def test_leader_transfer_is_abandoned_after_an_election_timeout() -> None:
    cluster = Cluster(3, seed=4)
    leader = elected(cluster)
    target = next(i for i in cluster.ids if i != leader)
    cluster.partition({target}, set(cluster.ids) - {target})
    cluster.transfer_leader(leader, target)
    with pytest.raises(ProposalDropped):
        cluster.driver(leader).propose(b"x")
    cluster.tick(leader, 10)
    assert cluster.propose(leader, b"after")


def test_read_index_on_the_leader_waits_for_a_heartbeat_quorum() -> None:
    cluster = Cluster(3, seed=5)
    leader = elected(cluster)
    commit = cluster.driver(leader).status().commit_index
    assert cluster.read_index(leader, b"r1")
    assert cluster.nodes[leader].read_states == []
    heartbeats = [m for m in cluster.network if m.type is MessageType.HEARTBEAT]
    assert {m.context for m in heartbeats} == {b"r1"}
    cluster.deliver_all()
    (state,) = cluster.nodes[leader].read_states
    assert (state.index, state.context) == (commit, b"r1")


def test_read_index_on_a_follower_is_forwarded_and_answered() -> None:
    cluster = Cluster(3, seed=6)
    leader = elected(cluster)
    follower = next(i for i in cluster.ids if i != leader)
    cluster.propose(leader, b"w")
    cluster.deliver_all()
    assert cluster.read_index(follower, b"f1")
    cluster.deliver_all()
    (state,) = cluster.nodes[follower].read_states
    assert state.context == b"f1"
    assert state.index == cluster.driver(leader).status().commit_index


def test_read_index_on_a_leader_cut_off_from_the_quorum_is_never_confirmed() -> None:
    cluster = Cluster(3, seed=8)
    leader = elected(cluster)
    cluster.partition({leader}, set(cluster.ids) - {leader})
    cluster.read_index(leader, b"stale")
    cluster.deliver_all()
    assert cluster.nodes[leader].read_states == []


def test_read_index_waits_until_the_new_leader_commits_in_its_term() -> None:
    driver = RaftDriver(RaftConfig(id=1, voters=(1, 2, 3)), random.Random(0))
    driver.core.become_candidate()
    driver.core.become_leader()
    driver.read_index(b"early")
    assert driver.core.read_states == [] and driver.core.pending_read_index


def test_install_snapshot_to_a_follower_whose_entries_were_compacted() -> None:
    cluster = Cluster(3, seed=9)
    leader = elected(cluster)
    lagging = next(i for i in cluster.ids if i != leader)
    cluster.crash(lagging)
    for i in range(8):
        cluster.propose(leader, f"s{i}".encode())
        cluster.deliver_all()
    assert cluster.compact(leader)
    snapshot_index = cluster.driver(leader).core.log.offset
    cluster.restart(lagging)
    sent = []
    for _ in range(40):
        sent += [m for m in cluster.network if m.type is MessageType.SNAP and m.to == lagging]
        if cluster.network:
            cluster.deliver(0)
        else:
            cluster.tick_all()
    assert sent and sent[0].snapshot is not None
    assert sent[0].snapshot.meta.index == snapshot_index
    cluster.stabilize()
    assert cluster.nodes[lagging].applied == cluster.nodes[leader].applied
    assert cluster.nodes[lagging].disk.snapshot is not None


def test_flow_control_limits_inflight_appends_per_follower() -> None:
    cluster = Cluster(3, seed=10, max_inflight_msgs=2)
    leader = elected(cluster)
    follower = next(i for i in cluster.ids if i != leader)
    for i in range(6):
        cluster.propose(leader, f"f{i}".encode())
    appends = [m for m in cluster.network if m.type is MessageType.APP and m.to == follower]
    assert len(appends) == 2
    cluster.stabilize()
    assert len(cluster.nodes[follower].applied) == len(cluster.nodes[leader].applied)


def test_flow_control_batches_by_bytes_but_sends_at_least_one_entry() -> None:
    cluster = Cluster(3, seed=11, max_size_per_msg=10)
    leader = elected(cluster)
    follower = next(i for i in cluster.ids if i != leader)
    cluster.partition({follower}, set(cluster.ids) - {follower})
    for _ in range(5):
        cluster.propose(leader, b"x" * 8)
        cluster.deliver_all()
    cluster.heal()
    cluster.network.clear()
    sizes = []
    for _ in range(60):
        sizes += [
            len(m.entries)
            for m in cluster.network
            if m.type is MessageType.APP and m.to == follower
        ]
        if cluster.network:
            cluster.deliver(0)
        else:
            cluster.tick(leader)
    assert sizes and max(sizes) == 1
    cluster.stabilize()


def test_figure_8_only_current_term_entries_commit_by_counting() -> None:
    persisted = PersistedState(HardState(2, NONE, 1), None, (Entry(1, 1), Entry(2, 2, b"old")))
    core = RaftCore(RaftConfig(id=1, voters=(1, 2, 3)), random.Random(0), persisted)
    core.become_candidate()
    core.become_leader()  # term 3, appends its no-op at index 3
    core.stable_to(3, 3)
    core.progress[2].match = 2  # a majority holds the term-2 entry...
    core._maybe_commit()
    assert core.log.committed == 1  # ...but it is not committed by counting
    core.progress[2].match = 3
    core._maybe_commit()
    assert core.log.committed == 3


def test_follower_without_forwarding_raises_not_leader_with_the_leader_id() -> None:
    config = RaftConfig(id=2, voters=(1, 2, 3), forward_proposals=False)
    driver = RaftDriver(config, random.Random(0))
    with pytest.raises(ProposalDropped, match="no leader"):
        driver.propose(b"x")
    driver.core.become_follower(1, 1)
    with pytest.raises(NotLeader) as caught:
        driver.propose(b"x")
    assert caught.value.leader_id == 1


def test_follower_forwards_proposals_to_the_leader() -> None:
    cluster = Cluster(3, seed=12)
    leader = elected(cluster)
    follower = next(i for i in cluster.ids if i != leader)
    assert cluster.propose(follower, b"via follower")
    (forwarded,) = [m for m in cluster.network if m.type is MessageType.PROP]
    assert forwarded.to == leader
    cluster.stabilize()
    assert cluster.nodes[follower].applied[-1].data == b"via follower"


@pytest.mark.parametrize(
    "start,move",
    [
        ("follower", "become_leader"),
        ("pre_candidate", "become_leader"),
        ("leader", "become_candidate"),
        ("leader", "become_pre_candidate"),
    ],
)
def test_illegal_role_transitions_raise_and_change_nothing(start: str, move: str) -> None:
    core = RaftCore(RaftConfig(id=1, voters=(1, 2, 3)), random.Random(0))
    if start == "pre_candidate":
        core.become_pre_candidate()
    elif start == "leader":
        core.become_candidate()
        core.become_leader()
    before = (core.role, core.term, core.vote, core.lead)
    with pytest.raises(IllegalTransition):
        getattr(core, move)()
    assert (core.role, core.term, core.vote, core.lead) == before


def test_election_timeouts_are_randomized_from_the_injected_rng() -> None:
    def timeouts(seed: int) -> list[int]:
        core = RaftCore(RaftConfig(id=1, voters=(1, 2, 3)), random.Random(seed))
        out = []
        for _ in range(8):
            core.become_follower(core.term + 1, NONE)
            out.append(core.randomized_election_timeout)
        return out

    assert timeouts(1) == timeouts(1)
    assert all(10 <= t < 20 for t in timeouts(1))
    assert len(set(timeouts(1) + timeouts(2))) > 1


def test_a_won_pre_election_starts_a_plain_election_not_a_transfer() -> None:
    cluster = Cluster(3, seed=13)
    cluster.campaign(1)
    cluster.deliver(0)
    cluster.deliver(0)  # node 2 grants the pre-vote
    position = next(i for i, m in enumerate(cluster.network) if m.type is MessageType.PRE_VOTE_RESP)
    cluster.deliver(position)
    votes = [m for m in cluster.network if m.type is MessageType.VOTE]
    assert votes and all(m.context == b"" for m in votes)


def test_backtracking_skips_a_long_divergent_suffix_by_term() -> None:
    cluster = Cluster(3, seed=14)
    common = [Entry(1, 1), Entry(1, 2, b"c")]
    stale = [Entry(2, i, b"stale") for i in range(3, 60)]
    fresh = [Entry(3, i, b"fresh") for i in range(3, 10)]
    for node_id, tail, hard in [
        (1, fresh, HardState(3, 1, 2)),
        (2, fresh, HardState(3, 1, 2)),
        (3, stale, HardState(2, 3, 2)),
    ]:
        cluster.crash(node_id)
        disk = cluster.nodes[node_id].disk
        disk.entries, disk.hard_state = [*common, *tail], hard
    for node_id in cluster.ids:
        cluster.restart(node_id)
    cluster.partition({1, 2}, {3})
    cluster.campaign(1)
    cluster.deliver_all()
    assert cluster.driver(1).is_leader()
    cluster.heal()
    rejections = 0
    for _ in range(200):
        rejections += sum(1 for m in cluster.network if m.type is MessageType.APP_RESP and m.reject)
        if cluster.network:
            cluster.deliver(0)
        else:
            cluster.tick(1)
        if cluster.driver(3).core.log.last_term() == cluster.driver(1).term:
            break
    assert cluster.driver(3).core.log.last_index() == cluster.driver(1).core.log.last_index()
    assert rejections <= 3, rejections


def test_proposals_between_readies_are_batched_into_one_append_per_follower() -> None:
    cluster = Cluster(3, seed=15)
    leader = elected(cluster)
    driver = cluster.driver(leader)
    for i in range(5):
        driver.propose(f"b{i}".encode())  # no Ready handled in between
    cluster.process(leader)
    appends = [m for m in cluster.network if m.type is MessageType.APP]
    assert len(appends) == 2
    assert all(len(m.entries) == 5 for m in appends)
    cluster.stabilize()


def _deliver_in_flight(cluster: Cluster) -> None:
    """Deliver the messages in flight now, not the ones they cause (one network hop)."""
    for _ in range(len(cluster.network)):
        cluster.deliver(0)


def _commit_carriers(cluster: Cluster) -> list[int]:
    """The commit index of each MsgApp in flight that carries no entries."""
    return [m.commit for m in cluster.network if m.type is MessageType.APP and not m.entries]


@pytest.mark.parametrize("defer", [False, True])
def test_a_new_commit_index_goes_out_at_once_or_rides_on_the_next_message(defer: bool) -> None:
    """etcd raft sends each follower an MsgApp only to carry a commit index that
    advanced. With defer_commit_broadcast the leader owes it instead (commit_pending):
    the next write's MsgApp carries it, or flush_commit() sends it, or a heartbeat does.
    Without the option the same steps show the commit-only MsgApps."""
    cluster = Cluster(3, seed=21, defer_commit_broadcast=defer)
    leader = elected(cluster)
    cluster.deliver_all()
    followers = [i for i in cluster.ids if i != leader]
    driver = cluster.driver(leader)

    def round_trip(data: bytes) -> int:
        assert cluster.propose(leader, data)
        _deliver_in_flight(cluster)  # the MsgApps
        _deliver_in_flight(cluster)  # the answers: the entry commits
        return driver.core.log.committed

    first = round_trip(b"a")
    assert driver.commit_pending is defer
    assert _commit_carriers(cluster) == ([] if defer else [first, first])
    if not defer:
        return
    assert all(cluster.driver(f).core.log.committed < first for f in followers)
    second = round_trip(b"b")  # b's MsgApps carried a's commit index
    assert all(cluster.driver(f).core.log.committed == first for f in followers)
    assert all(cluster.nodes[f].applied[-1].data == b"a" for f in followers)
    cluster.flush_commit(leader)
    assert not driver.commit_pending and _commit_carriers(cluster) == [second, second]
    cluster.deliver_all()
    assert all(cluster.nodes[f].applied[-1].data == b"b" for f in followers)
    third = round_trip(b"c")
    cluster.tick(leader)  # the heartbeat carries the commit index too
    cluster.deliver_all()
    assert all(cluster.driver(f).core.log.committed == third for f in followers)
    assert all(cluster.nodes[f].applied[-1].data == b"c" for f in followers)


def test_a_commit_a_followers_client_waits_for_is_not_deferred() -> None:
    """A write forwarded by a follower is answered by that follower once it has applied
    it, so with defer_commit_broadcast too the commit covering it goes out at once."""
    cluster = Cluster(3, seed=21, defer_commit_broadcast=True)
    leader = elected(cluster)
    cluster.deliver_all()
    follower = next(i for i in cluster.ids if i != leader)
    assert cluster.propose(follower, b"forwarded")
    for _ in range(3):  # the MsgProp, the MsgApps, their answers
        _deliver_in_flight(cluster)
    committed = cluster.driver(leader).core.log.committed
    assert cluster.driver(leader).core.log.slice(committed, committed + 1)[0].data == b"forwarded"
    assert not cluster.driver(leader).commit_pending
    assert _commit_carriers(cluster) == [committed, committed]
    cluster.deliver_all()
    assert cluster.nodes[follower].applied[-1].data == b"forwarded"
    assert cluster.propose(leader, b"local")  # the leader's own write is deferred again
    for _ in range(2):
        _deliver_in_flight(cluster)
    assert cluster.driver(leader).commit_pending and _commit_carriers(cluster) == []

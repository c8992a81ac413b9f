"""The leader's parallel persist is safe: a leader's MsgApp may leave before its own
fsync (impl/server/pump.py `leader_sends_early`), because the Raft core counts the leader in
a commit quorum only after the driver reported its entries persisted (`advance`), and a
client is answered only when its entry is applied, which needs it committed. Checked on
the driver directly, and the rule choosing which Readies may send early."""

from __future__ import annotations

import random

import pytest

from etcdspec.impl.raft.core import RaftConfig
from etcdspec.impl.raft.driver import RaftDriver, Ready
from etcdspec.impl.raft.messages import (
    Entry,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
)
from etcdspec.impl.server.pump import leader_sends_early

MT = MessageType
GRANTS = {MT.PRE_VOTE: MT.PRE_VOTE_RESP, MT.VOTE: MT.VOTE_RESP}


def _drain(driver: RaftDriver) -> list[Ready]:
    readies = []
    while driver.has_ready():
        ready = driver.ready()
        readies.append(ready)
        driver.advance(ready)
    return readies


def _leader(voters: tuple[int, ...]) -> RaftDriver:
    """Node 1 elected by every peer's vote, its no-op committed by every peer."""
    driver = RaftDriver(RaftConfig(id=1, voters=voters), random.Random(0))
    driver.campaign()
    for _ in range(4):
        for ready in _drain(driver):
            for m in ready.messages:
                if m.type in GRANTS:
                    driver.step(Message(GRANTS[m.type], to=1, from_=m.to, term=m.term))
    assert driver.is_leader()
    _ack(driver, voters[1:], driver.status().last_index)
    _drain(driver)
    assert driver.status().commit_index == driver.status().last_index
    return driver


def _ack(driver: RaftDriver, peers: tuple[int, ...], index: int) -> None:
    for peer in peers:
        driver.step(Message(MT.APP_RESP, to=1, from_=peer, term=driver.term, index=index))


@pytest.mark.parametrize(
    ("voters", "acks_before_persist", "committed_before_persist"),
    [
        ((1, 2, 3), (2,), False),  # leader + 1 follower: the leader must be durable
        ((1, 2, 3), (2, 3), True),  # a quorum of followers holds it durably
        ((1, 2, 3, 4, 5), (2, 3), False),
        ((1, 2, 3, 4, 5), (2, 3, 4), True),
    ],
)
def test_the_leader_counts_itself_in_the_quorum_only_after_its_persist(
    voters: tuple[int, ...], acks_before_persist: tuple[int, ...], committed_before_persist: bool
) -> None:
    driver = _leader(voters)
    driver.propose(b"x")
    ready = driver.ready()
    (entry,) = ready.entries
    assert leader_sends_early(ready, driver.is_leader(), HardState(driver.term, 1, 0))
    appends = [m for m in ready.messages if m.type is MT.APP]
    assert sorted(m.to for m in appends) == list(voters[1:])
    # The MsgApps left early; acknowledgements come back while the leader's fsync runs.
    _ack(driver, acks_before_persist, entry.index)
    assert (driver.status().commit_index >= entry.index) is committed_before_persist
    assert ready.committed_entries == ()  # nothing of this Ready is applied on its own
    driver.advance(ready)  # the fsync completed
    assert driver.status().commit_index == entry.index
    (after,) = [r for r in _drain(driver) if r.committed_entries]
    assert [e.data for e in after.committed_entries] == [b"x"]


def _ready(
    entries: tuple[Entry, ...] = (),
    hard_state: HardState | None = None,
    snapshot: Snapshot | None = None,
) -> Ready:
    return Ready(None, hard_state, snapshot, entries, (), (), ())


@pytest.mark.parametrize(
    ("case", "ready", "is_leader", "early"),
    [
        ("leader appends", "entries", True, True),
        ("leader appends, commit moved", "commit", True, True),
        ("follower appends", "entries", False, False),
        ("leader with a new term", "term", True, False),
        ("leader with a new vote", "vote", True, False),
        ("nothing to append", "empty", True, False),
        ("snapshot", "snapshot", True, False),
    ],
)
def test_which_readies_may_send_before_their_fsync(
    case: str, ready: str, is_leader: bool, early: bool
) -> None:
    persisted = HardState(3, 1, 5)
    entries = (Entry(3, 6, b"x"),)
    readies = {
        "entries": _ready(entries=entries),
        "commit": _ready(entries=entries, hard_state=HardState(3, 1, 6)),
        "term": _ready(entries=entries, hard_state=HardState(4, 1, 5)),
        "vote": _ready(entries=entries, hard_state=HardState(3, 2, 5)),
        "empty": _ready(hard_state=HardState(3, 1, 6)),
        "snapshot": _ready(entries=entries, snapshot=Snapshot(SnapshotMeta(5, 3, (1, 2, 3)), b"")),
    }
    assert leader_sends_early(readies[ready], is_leader, persisted) is early, case

"""The Ready contract of raft_driver: what is persisted in the same Ready as the messages
that depend on it, when entries become appliable, and the driver's usage rules."""

from __future__ import annotations

import random

import pytest

from etcdspec.impl.raft.core import RaftConfig
from etcdspec.impl.raft.driver import RaftDriver, Ready
from etcdspec.impl.raft.messages import (
    ConfigError,
    Entry,
    HardState,
    Message,
    MessageType,
    UsageError,
)


def node(node_id: int = 1, voters: tuple[int, ...] = (1, 2, 3), seed: int = 0) -> RaftDriver:
    return RaftDriver(RaftConfig(id=node_id, voters=voters), random.Random(seed))


def drain(driver: RaftDriver) -> list[Ready]:
    readies = []
    while driver.has_ready():
        ready = driver.ready()
        readies.append(ready)
        driver.advance(ready)
    return readies


def test_single_node_entries_are_applied_only_after_they_are_persisted() -> None:
    driver = node(voters=(1,))
    driver.campaign()
    drain(driver)
    driver.propose(b"a")
    first = driver.ready()
    assert [e.data for e in first.entries] == [b"a"]
    assert first.committed_entries == ()  # not durable yet: not committed
    driver.advance(first)
    second = driver.ready()
    assert [e.data for e in second.committed_entries] == [b"a"]
    assert second.hard_state is not None and second.hard_state.commit == first.entries[0].index
    driver.advance(second)
    assert not driver.has_ready()


def test_a_vote_is_persisted_in_the_same_ready_as_the_vote_response() -> None:
    driver = node(node_id=2)
    driver.step(Message(MessageType.VOTE, to=2, from_=1, term=1, log_term=0, index=0))
    ready = driver.ready()
    assert ready.hard_state == HardState(1, 1, 0)
    (response,) = ready.messages
    assert response.type is MessageType.VOTE_RESP and not response.reject
    assert ready.must_sync


def test_a_follower_persists_entries_in_the_same_ready_as_its_acknowledgement() -> None:
    driver = node(node_id=2)
    entries = (Entry(1, 1), Entry(1, 2, b"x"))
    driver.step(
        Message(
            MessageType.APP, to=2, from_=1, term=1, index=0, log_term=0, entries=entries, commit=1
        )
    )
    ready = driver.ready()
    assert ready.entries == entries
    (ack,) = ready.messages
    assert ack.type is MessageType.APP_RESP and ack.index == 2
    assert [e.index for e in ready.committed_entries] == [1]


def test_a_candidate_persists_its_term_and_self_vote_before_asking_for_votes() -> None:
    driver = RaftDriver(RaftConfig(id=1, voters=(1, 2, 3), pre_vote=False), random.Random(0))
    driver.campaign()
    ready = driver.ready()
    assert ready.hard_state == HardState(1, 1, 0)
    assert {m.type for m in ready.messages} == {MessageType.VOTE}


def test_messages_only_ready_needs_no_sync() -> None:
    driver = node(node_id=2)
    driver.step(Message(MessageType.HEARTBEAT, to=2, from_=1, term=1, commit=0))
    assert drain(driver)[0].must_sync  # the new term is persisted
    driver.step(Message(MessageType.HEARTBEAT, to=2, from_=1, term=1, commit=0, context=b"c"))
    ready = driver.ready()
    assert ready.messages and not ready.must_sync


@pytest.mark.parametrize(
    "call,problem",
    [
        (lambda d: (d.ready(), d.ready()), "before advance"),
        (lambda d: d.propose(b""), "non-empty"),
        (lambda d: d.read_index(b""), "non-empty"),
        (lambda d: d.transfer_leader(9), "not a voter"),
    ],
)
def test_driver_usage_errors(call, problem: str) -> None:  # type: ignore[no-untyped-def]
    driver = node()
    driver.campaign()
    with pytest.raises(UsageError, match=problem):
        call(driver)


@pytest.mark.parametrize(
    "kwargs,problem",
    [
        ({"id": 0, "voters": (1,)}, "positive"),
        ({"id": 4, "voters": (1, 2, 3)}, "not among voters"),
        ({"id": 1, "voters": (1, 1)}, "distinct"),
        ({"id": 1, "voters": (1,), "election_tick": 1, "heartbeat_tick": 1}, "greater"),
    ],
)
def test_bad_config_is_refused_with_the_field_named(
    kwargs: dict[str, object], problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        RaftDriver(RaftConfig(**kwargs), random.Random(0))  # type: ignore[arg-type]


def test_status_describes_the_node() -> None:
    driver = node(voters=(1,))
    driver.campaign()
    drain(driver)
    text = driver.status().describe()
    assert text.startswith("node 1 leader term=1") and "commit=1" in text


@pytest.mark.parametrize(
    "message",
    [
        Message(MessageType.HUP, to=1, from_=2),
        Message(MessageType.APP, to=3, from_=2, term=5),
        Message(MessageType.PROP, to=1, from_=2, entries=(Entry(0, 0, b"x"),)),
        Message(MessageType.APP, to=1, from_=2, term=0),
        Message(MessageType.SNAP_STATUS, to=1, from_=2, term=1),
        Message(MessageType.HEARTBEAT, to=1, from_=1, term=1),
    ],
    ids=[
        "local-only",
        "misaddressed",
        "unforwardable-proposal",
        "termless-append",
        "transport-report",
        "from-itself",
    ],
)
def test_unwanted_network_messages_are_dropped_not_raised(message: Message) -> None:
    driver = node()
    assert driver.step(message) is False
    assert driver.dropped_messages == 1
    assert driver.term == 0 and not driver.has_ready()


def test_must_fsync_follows_etcd_mustsync_commit_alone_needs_no_fsync() -> None:
    driver = node(node_id=2)
    entries = (Entry(1, 1), Entry(1, 2, b"x"))
    driver.step(
        Message(MessageType.APP, to=2, from_=1, term=1, index=0, log_term=0, entries=entries)
    )
    first = driver.ready()
    assert first.must_fsync  # new term and entries
    driver.advance(first)
    driver.step(Message(MessageType.APP, to=2, from_=1, term=1, index=2, log_term=1, commit=2))
    second = driver.ready()
    assert second.hard_state == HardState(1, 0, 2)
    assert second.must_sync and not second.must_fsync
    assert "no fsync needed" in second.describe()


def test_compactable_only_past_the_snapshot_up_to_applied_at_the_logs_term() -> None:
    """A state machine copied in a worker is compacted to only if the log still has its
    index, applied, at the term the copy holds."""
    driver = node(voters=(1,))
    driver.campaign()
    drain(driver)
    for data in (b"a", b"b", b"c"):
        driver.propose(data)
    drain(driver)
    assert driver.status().applied_index == 4  # the leader's no-op, then a, b, c
    term = driver.term
    assert driver.compactable(3, term) and driver.compactable(4, term)
    assert not driver.compactable(5, term)  # not applied (nor in the log)
    assert not driver.compactable(3, term + 1)  # another term's entry
    driver.compact(3, b"state at 3")
    assert not driver.compactable(3, term)  # not past the snapshot
    assert not driver.compactable(2, term)
    assert driver.compactable(4, term)
    assert driver.voters == (1,)

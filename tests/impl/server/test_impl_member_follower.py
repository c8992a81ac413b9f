"""A follower member, driven in-process by the test playing its leader.

The member runs as one of three; its peers do not exist, and the test hands it MsgApps
through the member's peer-frame entry point. Its election timeout is a minute, so it
stays a follower throughout. Checked:
- the Raft pump (impl/server/raft_loop.py `pump`): the Ready a read's MsgApp makes is persisted and
  acknowledged within that read, with no turn of the event loop; when the WAL fsync runs
  in a worker (a slow disk, FsyncPace), a task takes the pump on and finishes it;
- a follower holds back committed entries nobody there waits for and applies them in a
  batch (impl/server/apply.py, the plan's APPLY_OR_DEFER): at its turn (an index equal to its rank among the voters,
  modulo their number), before any client call it serves (so that a client reading
  from the follower sees what it would without the deferral), or APPLY_DEFER_S later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from inprocess_member import member_config

from etcdspec.impl.kv.applier import encode_request
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.raft import codec as raft_codec
from etcdspec.impl.raft.messages import Entry, Message, MessageType
from etcdspec.impl.server import apply as apply_module
from etcdspec.impl.server import member as member_module
from etcdspec.impl.server.apply import APPLY_DEFER_S
from etcdspec.impl.server.config import MemberConfig
from etcdspec.impl.server.member import Member
from etcdspec.impl.server.pump import FsyncPace
from etcdspec.impl.tools.launcher import free_ports

TERM = 2


def _config(tmp_path: Path) -> MemberConfig:
    peers = free_ports(3)
    return member_config(
        tmp_path / "m1",
        name="m1",
        listen_peer_urls=f"http://127.0.0.1:{peers[0]}",
        initial_cluster=",".join(
            f"m{n}=http://127.0.0.1:{port}" for n, port in enumerate(peers, 1)
        ),
        heartbeat_interval_ms=100,
        election_timeout_ms=60_000,
    )


class _Leader:
    """Member m2 as the test plays it: appends puts of keys k<index> to the follower."""

    def __init__(self, member: Member, config: MemberConfig) -> None:
        assert member.driver is not None
        self.member = member
        self.id = config.peer_by_name("m2").member_id
        self.last = member.driver.status().last_index
        self.last_term = member.driver.core.log.term(self.last)

    def append(self, count: int, commit: int) -> None:
        first = self.last + 1
        entries = tuple(
            Entry(
                term=TERM,
                index=index,
                data=encode_request(rpc_pb2.PutRequest(key=b"k%d" % index, value=b"v")),
            )
            for index in range(first, first + count)
        )
        message = Message(
            MessageType.APP,
            to=self.member.member_id,
            from_=self.id,
            term=TERM,
            log_term=self.last_term,
            index=self.last,
            entries=entries,
            commit=commit,
        )
        self.member._on_peer_frame(self.id, raft_codec.encode_message(message))
        self.last, self.last_term = entries[-1].index, TERM


def _settled(member: Member) -> bool:
    """No Ready waits to be handled and none is being handled (a worker's fsync included)."""
    return member.driver is not None and not member.raft.pumping and not member.driver.has_ready()


async def _until(condition: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the member did not get there"
        await asyncio.sleep(0.001)


def _record_acks(member: Member) -> list[int]:
    """The indices the member's MsgAppResps acknowledge, as it hands them to its transport."""
    assert member.transport is not None
    acks: list[int] = []
    send = member.transport.send

    def recording(to: int, payload: bytes) -> None:
        message = raft_codec.decode_message(payload)
        if message.type is MessageType.APP_RESP:
            acks.append(message.index)
        send(to, payload)

    member.transport.send = recording  # type: ignore[method-assign]
    return acks


def test_a_reads_msgapp_is_persisted_and_acknowledged_within_that_read(tmp_path: Path) -> None:
    config = _config(tmp_path)

    async def scenario() -> None:
        member = Member(config)
        await member.start()
        try:
            assert member.driver is not None and member.transport is not None
            await _until(lambda: _settled(member))
            leader = _Leader(member, config)
            acks = _record_acks(member)
            member.raft.fsync_pace.average_s = 0.0  # a fast disk, whatever start-up's fsyncs took
            leader.append(2, commit=0)
            member.transport.after_read()  # what the peer connection does after a read
            # No await since: the Ready was handled in the call.
            assert not member.driver.has_ready()
            assert member.driver.status().last_index == leader.last
            assert acks == [leader.last]
            assert member.raft.pump_task is None  # it never waited

            # A slow disk: the fsync goes to a worker and a task finishes the Ready.
            member.raft.fsync_pace.average_s = FsyncPace.INLINE_MAX_S * 10
            leader.append(1, commit=0)
            member.transport.after_read()
            pump = member.raft.pump_task
            assert pump is not None and not pump.done()
            assert acks == [leader.last - 1]  # not before its fsync
            await pump
            assert member.driver.status().last_index == leader.last
            assert acks == [leader.last - 1, leader.last]
        finally:
            await member.stop()

    asyncio.run(scenario())


def _revision(member: Member) -> int:
    return member.data.state.current_revision()  # read in-process: no client call, no catch-up


def test_a_follower_applies_at_its_turn_before_a_client_call_or_on_its_timer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path)
    voters = sorted(peer.member_id for peer in config.peers)
    rank = voters.index(config.member_id)

    def turn(index: int) -> bool:
        return index % len(voters) == rank

    async def published_unproposed(*_args: object) -> bool:
        return True

    # The member publishes its attributes when it starts; the leader played here never
    # commits that proposal, which would wait here throughout, and a proposal waiting
    # here makes the follower apply at once: not the case this test is about. The
    # stand-in proposes nothing and says the attributes are applied, so that the member
    # serves its clients (it accepts none before: as etcd's, not before its publish).
    monkeypatch.setattr(member_module, "publish_attributes", published_unproposed)

    async def scenario() -> None:
        member = Member(config)
        await member.start()
        channel = grpc.aio.insecure_channel(config.listen_client_urls[0].target)
        try:
            assert member.driver is not None
            await _until(lambda: _settled(member))
            leader = _Leader(member, config)
            start = _revision(member)
            settled = lambda: _settled(member)  # noqa: E731
            # The fsync inline, whatever this disk's speed: in a worker, a follower applies
            # while it waits for its fsync instead (pump.py `committed_already_persisted`).
            member.raft.fsync_pace.INLINE_MAX_S = float("inf")

            # One put per MsgApp, each MsgApp committing the one before (one client's
            # writes): the follower applies only at its turns, everything held at once.
            monkeypatch.setattr(apply_module, "APPLY_DEFER_S", 60.0)  # no timer here
            leader.append(1, commit=0)
            committed = applied = 0
            for _ in range(2 * len(voters)):
                leader.append(1, commit=leader.last)
                await _until(settled)
                committed += 1
                if turn(leader.last - 1):
                    applied = committed
                assert _revision(member) == start + applied, (leader.last - 1, rank)
            # A client call catches the follower up before it is served.
            while turn(leader.last):  # the next commit must not be a turn
                leader.append(1, commit=leader.last)
                await _until(settled)
                committed += 1
            leader.append(1, commit=leader.last)
            await _until(settled)
            committed += 1
            assert _revision(member) < start + committed  # something is held
            kv = rpc_pb2_grpc.KVStub(channel)
            response = await kv.Range(
                rpc_pb2.RangeRequest(key=b"k", range_end=b"l", serializable=True), timeout=5
            )
            assert response.count == committed
            assert _revision(member) == start + committed

            # Nobody calls and no turn comes: the timer applies what is held.
            monkeypatch.setattr(apply_module, "APPLY_DEFER_S", APPLY_DEFER_S)
            while turn(leader.last):
                leader.append(1, commit=leader.last)
                await _until(settled)
                committed += 1
                await kv.Range(rpc_pb2.RangeRequest(key=b"k", serializable=True), timeout=5)
            leader.append(1, commit=leader.last)
            await _until(settled)
            committed += 1
            assert _revision(member) == start + committed - 1
            await asyncio.sleep(APPLY_DEFER_S * 3)  # a later deadline than the member's timer
            assert _revision(member) == start + committed

            # Many entries committed by one MsgApp (a loaded leader) include the turn.
            leader.append(2 * len(voters), commit=leader.last)
            leader.append(1, commit=leader.last)
            await _until(settled)
            assert _revision(member) == start + committed + 1 + 2 * len(voters)
        finally:
            await channel.close()
            await member.stop()

    asyncio.run(scenario())

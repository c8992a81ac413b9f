"""Failpoints (etcdspec.impl.failpoints): each planted bug changes the server's behaviour
only when it is named, and an unknown name is refused (by the parser and by a member
process, which then does not start). Hooks are driven in-process on one member, on the
watch hub and on the member's storage; the conformance runs that find each bug are in
tests/conform/test_conform_failpoints.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from inprocess_member import member_config

from etcdspec.exitcodes import ExitCode
from etcdspec.impl import failpoints
from etcdspec.impl.kv.applier import Applier, encode_request
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.quota import BackendQuota
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.raft.messages import NONE, HardState
from etcdspec.impl.server.config import MemberConfig
from etcdspec.impl.server.member import Member
from etcdspec.impl.server.recovery import open_member_data
from etcdspec.impl.tools.launcher import free_ports

# ---- names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", frozenset()),
        (" , ", frozenset()),
        ("local_linearizable_read", frozenset({"local_linearizable_read"})),
        (
            "ack_before_fsync, forget_vote_on_restart",
            frozenset({"ack_before_fsync", "forget_vote_on_restart"}),
        ),
    ],
)
def test_names_are_parsed_comma_separated(text: str, expected: frozenset[str]) -> None:
    assert failpoints.parse(text) == expected


def test_unknown_name_is_refused_with_the_known_ones_listed() -> None:
    with pytest.raises(failpoints.FailpointError) as caught:
        failpoints.parse("local_linearizable_read,meteor_strike")
    message = str(caught.value)
    assert "meteor_strike" in message and "ETCDSPEC_FAILPOINTS" in message
    assert all(name in message for name in failpoints.FAILPOINTS)


def test_off_unless_the_environment_names_them() -> None:
    with failpoints.active():
        assert failpoints.activate_from_environment({}) == frozenset()
        assert not any(failpoints.on(name) for name in failpoints.FAILPOINTS)
        named = failpoints.activate_from_environment(
            {failpoints.ENV_VAR: "skip_watch_event_on_resume"}
        )
        assert named == {"skip_watch_event_on_resume"}
        assert failpoints.on("skip_watch_event_on_resume")
        assert not failpoints.on("ack_before_fsync")
        assert failpoints.describe() == "skip_watch_event_on_resume"
    assert failpoints.active_names() == frozenset()


def test_member_process_with_an_unknown_failpoint_refuses_to_start(tmp_path: Path) -> None:
    client, peer = free_ports(2)
    argv = [
        sys.executable,
        "-m",
        "etcdspec",
        "serve",
        "--name",
        "solo",
        "--data-dir",
        str(tmp_path / "solo"),
        "--listen-client-urls",
        f"http://127.0.0.1:{client}",
        "--listen-peer-urls",
        f"http://127.0.0.1:{peer}",
    ]
    env = {**os.environ, failpoints.ENV_VAR: "ack_before_fsync,nonsense"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "nonsense" in done.stderr and "local_linearizable_read" in done.stderr
    assert not (tmp_path / "solo" / "member" / "wal").exists()  # nothing was started


# ---- skip_watch_event_on_resume (the watch hub) ---------------------------------------


def _hub_with_three_puts(path: Path) -> tuple[WatchHub, Applier]:
    backend = Backend(path)
    hub = WatchHub(backend)
    applier = Applier(backend, Lessor(), hub, BackendQuota(backend))
    for index, value in enumerate((b"1", b"2", b"3"), start=1):
        applier.apply(index, 1, encode_request(rpc_pb2.PutRequest(key=b"k", value=value)))
    return hub, applier


@pytest.mark.parametrize(
    ("named", "start_revision", "expected_values"),
    [
        ((), 2, [b"1", b"2", b"3", b"4"]),
        (("skip_watch_event_on_resume",), 2, [b"2", b"3", b"4"]),  # revision 2's is lost
        (("skip_watch_event_on_resume",), 0, [b"4"]),  # from now: not in the past, whole
        (("local_linearizable_read",), 2, [b"1", b"2", b"3", b"4"]),  # another: whole
    ],
)
def test_watch_from_a_past_revision_loses_its_first_event_only_when_named(
    tmp_path: Path, named: tuple[str, ...], start_revision: int, expected_values: list[bytes]
) -> None:
    hub, applier = _hub_with_three_puts(tmp_path / "db")  # revisions 2, 3, 4
    with failpoints.active(*named):
        handle = hub.create(1, b"k", start_revision=start_revision)
    applier.apply(4, 1, encode_request(rpc_pb2.PutRequest(key=b"k", value=b"4")))  # rev 5
    values = [e.kv.value for item in hub.take(handle) for e in item.events]
    assert values == expected_values


# ---- forget_vote_on_restart (the member's storage) ------------------------------------


@pytest.mark.parametrize(
    ("named", "vote_after_restart"),
    [((), 0x2222), (("forget_vote_on_restart",), NONE)],
)
def test_vote_survives_a_restart_unless_forgotten(
    tmp_path: Path, named: tuple[str, ...], vote_after_restart: int
) -> None:
    data, _ = open_member_data(tmp_path / "data", 0x1111, quota_bytes=0)
    with failpoints.active(*named):
        data.disk.persist(HardState(term=3, vote=0x2222, commit=0), (), None)
    data.close()
    reopened, recovered = open_member_data(tmp_path / "data", 0x1111, quota_bytes=0)
    reopened.close()
    assert recovered.persisted.hard_state.term == 3  # the term is kept either way
    assert recovered.persisted.hard_state.vote == vote_after_restart


# ---- hooks in the member (one in-process member) --------------------------------------


Scenario = Callable[[Member, grpc.aio.Channel], Awaitable[None]]


def _run(config: MemberConfig, named: tuple[str, ...], scenario: Scenario) -> None:
    async def main() -> None:
        member = Member(config)
        await member.start()
        channel = grpc.aio.insecure_channel(config.listen_client_urls[0].target)
        try:
            deadline = asyncio.get_running_loop().time() + 10
            while not member.metrics.has_leader:
                assert asyncio.get_running_loop().time() < deadline, "no leader elected"
                await asyncio.sleep(0.01)
            await scenario(member, channel)
        finally:
            await channel.close()
            await member.stop()

    with failpoints.active(*named):
        asyncio.run(main())


@pytest.mark.parametrize(
    ("named", "barriers"),
    [((), 1), (("local_linearizable_read",), 0), (("ack_before_fsync",), 1)],
)
def test_linearizable_read_waits_for_read_index_unless_local(
    tmp_path: Path, named: tuple[str, ...], barriers: int
) -> None:
    calls: list[str] = []

    async def scenario(member: Member, channel: grpc.aio.Channel) -> None:
        reads = member.reads
        assert reads is not None
        original = reads.barrier

        async def counted() -> None:
            calls.append("barrier")
            await original()

        reads.barrier = counted  # type: ignore[method-assign]
        kv = rpc_pb2_grpc.KVStub(channel)
        await kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"v"), timeout=5)
        reply = await kv.Range(rpc_pb2.RangeRequest(key=b"k"), timeout=5)
        assert reply.count == 1
        await kv.Range(rpc_pb2.RangeRequest(key=b"k", serializable=True), timeout=5)

    _run(member_config(tmp_path / "d"), named, scenario)
    assert len(calls) == barriers


@pytest.mark.parametrize(
    ("named", "fsynced"),
    [((), True), (("ack_before_fsync",), False), (("forget_vote_on_restart",), True)],
)
def test_writes_are_fsynced_before_the_answer_unless_acked_early(
    tmp_path: Path, named: tuple[str, ...], fsynced: bool
) -> None:
    seen: list[int] = []

    async def scenario(member: Member, channel: grpc.aio.Channel) -> None:
        before = member.metrics.wal_fsyncs
        kv = rpc_pb2_grpc.KVStub(channel)
        for number in range(5):
            await kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"%d" % number), timeout=5)
        seen.append(member.metrics.wal_fsyncs - before)

    config = member_config(tmp_path / "d")
    _run(config, named, scenario)
    assert (seen[0] > 0) is fsynced, seen

    async def read_back(member: Member, channel: grpc.aio.Channel) -> None:
        reply = await rpc_pb2_grpc.KVStub(channel).Range(rpc_pb2.RangeRequest(key=b"k"))
        assert [kv.value for kv in reply.kvs] == [b"4"]

    _run(config, (), read_back)  # written either way: a clean stop loses nothing


@pytest.mark.parametrize(
    ("named", "revoke_in_log"),
    [((), True), (("stale_leader_lease_revoke",), False)],
)
def test_expired_lease_is_revoked_through_the_log_unless_stale(
    tmp_path: Path, named: tuple[str, ...], revoke_in_log: bool
) -> None:
    async def scenario(member: Member, channel: grpc.aio.Channel) -> None:
        assert member.driver is not None
        lease = rpc_pb2_grpc.LeaseStub(channel)
        kv = rpc_pb2_grpc.KVStub(channel)
        grant = await lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=2), timeout=5)
        await kv.Put(rpc_pb2.PutRequest(key=b"short", value=b"x", lease=grant.ID), timeout=5)
        commit = member.driver.status().commit_index
        deadline = asyncio.get_running_loop().time() + 10
        while (await kv.Range(rpc_pb2.RangeRequest(key=b"short"), timeout=5)).count:
            assert asyncio.get_running_loop().time() < deadline, "lease never expired"
            await asyncio.sleep(0.05)
        # Linearizable reads add no entries: only a LeaseRevoke entry moves the commit.
        assert (member.driver.status().commit_index > commit) is revoke_in_log

    _run(member_config(tmp_path / "d"), named, scenario)

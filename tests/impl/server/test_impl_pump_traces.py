"""Each variation of the Ready pump's plan, run by real members, keeps the Ready contract as
the trace checker judges it; the planted bug does not.

Three members run in this process (one event loop, real sockets on loopback, real WAL and
SQLite files), traced, each with the same pump settings (impl/server/pump.py): every
speed-up off (the plain contract), each one on alone, all on with the fsync inline or in a
worker thread, and the failpoint ack_before_fsync. A leader is elected, 30 puts and some
linearizable reads are served, and the members' traces are replayed by check-trace
(checker/trace_check.py), whose ReadyContract rule is the contract stated independently
of the plan. Witnesses show that a run did what its variation is about: entries sent by
the leader before its own fsync happen only with leader_sends_early on (with the fsync
inline, too: the MsgApps are flushed to the sockets before the fsync starts).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from inprocess_member import member_config

from etcdspec.checker.trace_check import check_traces
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.server.member import Member
from etcdspec.impl.server.pump import PLAIN, PumpSettings
from etcdspec.impl.tools.launcher import free_ports
from etcdspec.verdict import Verdict

EARLY = "entries sent before the leader persisted them"


def _configs(tmp_path: Path) -> list:  # type: ignore[type-arg]
    ports = free_ports(6)
    cluster = ",".join(f"m{n}=http://127.0.0.1:{ports[2 * n - 1]}" for n in (1, 2, 3))
    return [
        member_config(
            tmp_path / f"m{n}",
            name=f"m{n}",
            listen_client_urls=f"http://127.0.0.1:{ports[2 * n - 2]}",
            listen_peer_urls=f"http://127.0.0.1:{ports[2 * n - 1]}",
            initial_cluster=cluster,
            heartbeat_interval_ms=20,
            election_timeout_ms=400,
            trace_file=str(tmp_path / f"m{n}.trace.ndjson"),
            seed=n,
        )
        for n in (1, 2, 3)
    ]


async def _serve(tmp_path: Path, settings: PumpSettings, fsync_inline: bool) -> None:
    members = [Member(config, pump_settings=settings) for config in _configs(tmp_path)]
    for member in members:
        await member.start()
        assert member.raft is not None
        # Where the fsync runs, whatever this disk's speed.
        member.raft.fsync_pace.INLINE_MAX_S = float("inf") if fsync_inline else -1.0  # type: ignore[misc]
    channels: list[grpc.aio.Channel] = []
    try:
        deadline = asyncio.get_running_loop().time() + 20
        while not any(m.driver is not None and m.driver.is_leader() for m in members):
            assert asyncio.get_running_loop().time() < deadline, "no leader elected"
            await asyncio.sleep(0.02)
        leader = next(m for m in members if m.driver is not None and m.driver.is_leader())
        channels = [
            grpc.aio.insecure_channel(m.config.listen_client_urls[0].target) for m in members
        ]
        kv = rpc_pb2_grpc.KVStub(channels[members.index(leader)])
        await asyncio.gather(
            *(kv.Put(rpc_pb2.PutRequest(key=b"k%d" % i, value=b"v"), timeout=10) for i in range(30))
        )
        for channel in channels:  # a linearizable read at every member
            reply = await rpc_pb2_grpc.KVStub(channel).Range(
                rpc_pb2.RangeRequest(key=b"k", range_end=b"l"), timeout=10
            )
            assert reply.count == 30
    finally:
        for channel in channels:
            await channel.close()
        for member in members:
            await member.stop()


VARIATIONS = {
    "plain": (PLAIN, True),
    "leader_sends_early-worker": (
        PumpSettings(apply_during_fsync=False, defer_follower_apply=False),
        False,
    ),
    "apply_during_fsync-worker": (
        PumpSettings(leader_sends_early=False, defer_follower_apply=False),
        False,
    ),
    "defer_follower_apply": (
        PumpSettings(leader_sends_early=False, apply_during_fsync=False),
        True,
    ),
    "all-inline": (PumpSettings(), True),
    "all-worker": (PumpSettings(), False),
}


@pytest.mark.parametrize("name", list(VARIATIONS))
def test_a_variation_of_the_plan_keeps_the_ready_contract(tmp_path: Path, name: str) -> None:
    settings, inline = VARIATIONS[name]
    asyncio.run(_serve(tmp_path, settings, inline))
    result = check_traces(sorted(tmp_path.glob("*.trace.ndjson")))
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.witness("entries applied") >= 3 * 30
    assert (result.witness(EARLY) > 0) is settings.leader_sends_early, result.describe()


def test_the_planted_bug_in_the_plan_is_caught_by_the_trace_checker(tmp_path: Path) -> None:
    """ack_before_fsync: a Ready is sent before it is written; the first vote request of
    the election already leaves before the vote is durable."""
    asyncio.run(_serve(tmp_path, PumpSettings(ack_before_fsync=True), True))
    result = check_traces(sorted(tmp_path.glob("*.trace.ndjson")))
    assert result.verdict is Verdict.FALSE, result.describe()
    assert result.failure is not None and result.failure.rule == "ReadyContract"

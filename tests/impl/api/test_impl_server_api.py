"""The gRPC API of one in-process member: etcd's answers, errors and headers.

Each test starts a single-member cluster on free loopback ports inside its own event
loop, talks to it with a grpc.aio client, and stops it. Behaviour checked: every
response header carries cluster_id, member_id, revision and raft_term; etcd's status
codes and messages for bad requests (nothing applied); linearizable and serializable
reads; watches (created first, whole revisions, compacted start); leases; maintenance;
and that a restarted member still has every acknowledged write.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from inprocess_member import member_config

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.server.config import MemberConfig
from etcdspec.impl.server.member import Member
from etcdspec.impl.server.pump import FsyncPace
from etcdspec.impl.storage.data_dir import PreparedPersist
from etcdspec.impl.tools import snapshot_cli


class Client:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.kv = rpc_pb2_grpc.KVStub(channel)
        self.watch = rpc_pb2_grpc.WatchStub(channel)
        self.lease = rpc_pb2_grpc.LeaseStub(channel)
        self.maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
        self.cluster = rpc_pb2_grpc.ClusterStub(channel)

    async def put(self, key: bytes, value: bytes, **fields: object) -> rpc_pb2.PutResponse:
        return await self.kv.Put(rpc_pb2.PutRequest(key=key, value=value, **fields), timeout=5)  # type: ignore[arg-type]


async def _with_member(
    config: MemberConfig, scenario: Callable[[Member, Client], Awaitable[None]]
) -> None:
    member = Member(config)
    await member.start()
    channel = grpc.aio.insecure_channel(config.listen_client_urls[0].target)
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while not member.metrics.has_leader:
            assert asyncio.get_running_loop().time() < deadline, "no leader elected"
            await asyncio.sleep(0.01)
        await scenario(member, Client(channel))
    finally:
        await channel.close()
        await member.stop()


def run(config: MemberConfig, scenario: Callable[[Member, Client], Awaitable[None]]) -> None:
    asyncio.run(_with_member(config, scenario))


async def _status_of(call: Awaitable[object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), caught.value.details() or ""


@pytest.mark.parametrize(("recent_fsync_s", "on_loop_thread"), [(0.0, True), (10.0, False)])
def test_wal_fsync_runs_inline_while_fast_and_in_a_worker_while_slow(
    tmp_path: Path, recent_fsync_s: float, on_loop_thread: bool
) -> None:
    """FsyncPace picks where a Ready's write and fsync run; puts are acknowledged and
    durable (read back after a restart) on either path."""
    config = member_config(tmp_path / "d")
    threads: list[bool] = []

    async def scenario(member: Member, client: Client) -> None:
        raft = member.raft
        assert raft is not None
        write_persist = raft._write_persist

        def recording(prepared: PreparedPersist) -> float:
            threads.append(threading.current_thread() is threading.main_thread())
            write_persist(prepared)
            # the pace hears the pinned time, not this machine's: under load a real
            # fsync can take longer than INLINE_MAX_S and move the next Ready off the loop
            return recent_fsync_s

        raft._write_persist = recording  # type: ignore[method-assign]
        raft.fsync_pace.average_s = recent_fsync_s
        fsyncs = member.metrics.wal_fsyncs
        for index in range(5):
            await client.put(f"k{index}".encode(), b"v")
        assert member.metrics.wal_fsyncs >= fsyncs + 5

    run(config, scenario)
    assert threads and set(threads) == {on_loop_thread}

    async def read_back(member: Member, client: Client) -> None:
        got = await client.kv.Range(rpc_pb2.RangeRequest(key=b"k", range_end=b"l"))
        assert [kv.key for kv in got.kvs] == [f"k{index}".encode() for index in range(5)]

    run(config, read_back)


def test_a_due_group_commit_waits_for_the_answers_its_applies_released(tmp_path: Path) -> None:
    """The Raft pump leaves a due backend commit to a later turn of the loop: the clients
    whose writes it just applied are answered first, rather than after the group commit's
    writes. A call is closed once it is answered, and its connection writes what it
    queued at the end of a turn: the calls open when the pump found the commit due (one
    client's put, just applied) must be closed, and their answers written to the socket,
    when the commit runs."""
    config = member_config(tmp_path / "d")
    flushes: list[set[object]] = []

    async def scenario(member: Member, client: Client) -> None:
        assert member.data is not None
        state, server = member.data.state, member.grpc_server
        assert server is not None
        flush = state.flush_if_due
        open_when_due: set[object] = set()

        def open_calls() -> set[object]:
            return {call for connection in server.connections for call in connection.calls.values()}

        def due() -> bool:
            open_when_due.update(open_calls())
            return True

        def recording() -> None:
            unwritten = [c for c in server.connections if c.h2.outbound]
            flushes.append((open_when_due & open_calls()) | set(unwritten))
            open_when_due.clear()
            flush()

        state.flush_due = due  # type: ignore[method-assign]
        state.flush_if_due = recording  # type: ignore[method-assign]
        for index in range(5):
            await client.put(f"k{index}".encode(), b"v")

    run(config, scenario)
    assert len(flushes) >= 5
    assert all(not still_open for still_open in flushes), flushes


def test_fsync_pace_goes_to_a_worker_after_slow_fsyncs_and_back_after_fast_ones() -> None:
    pace = FsyncPace()
    assert pace.inline()
    pace.observe(0.05)  # one slow fsync (a loaded disk) is enough to leave the loop
    assert not pace.inline()
    fast = 0
    while not pace.inline():
        pace.observe(0.0001)
        fast += 1
    assert 5 <= fast <= 30  # a run of fast ones brings it back, not a single one


def test_every_header_names_cluster_member_revision_and_term(tmp_path: Path) -> None:
    config = member_config(tmp_path / "d")

    async def scenario(member: Member, client: Client) -> None:
        put = await client.put(b"a", b"1")
        got = await client.kv.Range(rpc_pb2.RangeRequest(key=b"a"))
        status = await client.maintenance.Status(rpc_pb2.StatusRequest())
        for header in (put.header, got.header, status.header):
            assert header.cluster_id == config.cluster_id
            assert header.member_id == config.member_id
            assert header.revision == 2
            assert header.raft_term >= 1
        assert got.kvs[0].value == b"1"
        assert (got.kvs[0].create_revision, got.kvs[0].mod_revision, got.kvs[0].version) == (
            2,
            2,
            1,
        )

    run(config, scenario)


BAD_REQUESTS: list[tuple[str, Callable[[Client], Awaitable[object]], grpc.StatusCode, str]] = [
    (
        "empty key put",
        lambda c: c.kv.Put(rpc_pb2.PutRequest(key=b"", value=b"v")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "etcdserver: key is not provided",
    ),
    (
        "empty key range",
        lambda c: c.kv.Range(rpc_pb2.RangeRequest(key=b"")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "etcdserver: key is not provided",
    ),
    (
        "unknown lease",
        lambda c: c.kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"v", lease=12345)),
        grpc.StatusCode.NOT_FOUND,
        "etcdserver: requested lease not found",
    ),
    (
        "duplicate key in txn",
        lambda c: c.kv.Txn(
            rpc_pb2.TxnRequest(
                success=[
                    rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"k", value=b"1")),
                    rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"k", value=b"2")),
                ]
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "etcdserver: duplicate key given in txn request",
    ),
    (
        "request too large",
        lambda c: c.kv.Put(rpc_pb2.PutRequest(key=b"big", value=b"x" * (1_572_864 + 100))),
        grpc.StatusCode.INVALID_ARGUMENT,
        "etcdserver: request is too large",
    ),
    (
        "future revision",
        lambda c: c.kv.Range(rpc_pb2.RangeRequest(key=b"k", revision=1000)),
        grpc.StatusCode.OUT_OF_RANGE,
        "etcdserver: mvcc: required revision is a future revision",
    ),
    (
        "revoke unknown lease",
        lambda c: c.lease.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=999)),
        grpc.StatusCode.NOT_FOUND,
        "etcdserver: requested lease not found",
    ),
]


@pytest.mark.parametrize(
    ("request_call", "code", "message"),
    [pytest.param(call, code, message, id=name) for name, call, code, message in BAD_REQUESTS],
)
def test_bad_requests_get_etcds_error_and_change_nothing(
    tmp_path: Path,
    request_call: Callable[[Client], Awaitable[object]],
    code: grpc.StatusCode,
    message: str,
) -> None:
    async def scenario(member: Member, client: Client) -> None:
        before = (await client.kv.Range(rpc_pb2.RangeRequest(key=b"\0", range_end=b"\0"))).header
        assert await _status_of(request_call(client)) == (code, message)
        after = await client.kv.Range(rpc_pb2.RangeRequest(key=b"\0", range_end=b"\0"))
        assert after.header.revision == before.revision
        assert after.count == 0

    run(member_config(tmp_path / "d"), scenario)


def test_range_end_before_key_is_empty_as_in_etcd(tmp_path: Path) -> None:
    async def scenario(member: Member, client: Client) -> None:
        await client.put(b"m", b"1")
        got = await client.kv.Range(rpc_pb2.RangeRequest(key=b"z", range_end=b"a"))
        assert (got.count, list(got.kvs)) == (0, [])

    run(member_config(tmp_path / "d"), scenario)


def test_serializable_and_linearizable_reads_agree_on_one_member(tmp_path: Path) -> None:
    async def scenario(member: Member, client: Client) -> None:
        for index in range(20):
            await client.put(f"k{index:02d}".encode(), b"v")
        for serializable in (False, True):
            got = await client.kv.Range(
                rpc_pb2.RangeRequest(key=b"k", range_end=b"l", serializable=serializable)
            )
            assert got.count == 20
            assert got.header.revision == 21

    run(member_config(tmp_path / "d"), scenario)


async def _responses(
    stream: AsyncIterator[rpc_pb2.WatchResponse], count: int
) -> list[rpc_pb2.WatchResponse]:
    out = []
    async for response in stream:
        out.append(response)
        if len(out) == count:
            break
    return out


def test_watch_sends_created_then_whole_revisions_then_compaction_cancel(tmp_path: Path) -> None:
    async def scenario(member: Member, client: Client) -> None:
        await client.put(b"w1", b"a")  # revision 2
        txn = rpc_pb2.TxnRequest(
            success=[
                rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"w2", value=b"b")),
                rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"w3", value=b"c")),
            ]
        )
        await client.kv.Txn(txn)  # revision 3, two events
        requests: asyncio.Queue[rpc_pb2.WatchRequest] = asyncio.Queue()

        async def feed() -> AsyncIterator[rpc_pb2.WatchRequest]:
            while True:
                yield await requests.get()

        stream = client.watch.Watch(feed())
        create = rpc_pb2.WatchCreateRequest(key=b"w", range_end=b"x", start_revision=2)
        await requests.put(rpc_pb2.WatchRequest(create_request=create))
        (created,) = await asyncio.wait_for(_responses(stream, 1), 10)
        assert created.created and created.watch_id == 0
        # Catch-up may batch revisions in one response but never splits a revision.
        events: list[tuple[bytes, int]] = []
        while len(events) < 3:
            (response,) = await asyncio.wait_for(_responses(stream, 1), 10)
            revisions = [e.kv.mod_revision for e in response.events]
            assert 3 not in revisions or revisions.count(3) == 2
            events.extend((e.kv.key, e.kv.mod_revision) for e in response.events)
        assert events == [(b"w1", 2), (b"w2", 3), (b"w3", 3)]
        # Live: one response per revision.
        await client.put(b"w4", b"d")
        (live,) = await asyncio.wait_for(_responses(stream, 1), 10)
        assert [(e.kv.key, e.kv.mod_revision) for e in live.events] == [(b"w4", 4)]
        stream.cancel()
        await client.kv.Compact(rpc_pb2.CompactionRequest(revision=4))
        late = client.watch.Watch(feed())
        await requests.put(
            rpc_pb2.WatchRequest(
                create_request=rpc_pb2.WatchCreateRequest(key=b"w1", start_revision=2)
            )
        )
        created2, canceled = await asyncio.wait_for(_responses(late, 2), 10)
        assert created2.created
        assert canceled.canceled and canceled.compact_revision == 4
        late.cancel()

    run(member_config(tmp_path / "d"), scenario)


def test_lease_grant_attach_keepalive_ttl_revoke(tmp_path: Path) -> None:
    async def scenario(member: Member, client: Client) -> None:
        grant = await client.lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=60))
        assert grant.ID > 0 and grant.TTL == 60
        await client.put(b"leased", b"x", lease=grant.ID)
        ttl = await client.lease.LeaseTimeToLive(
            rpc_pb2.LeaseTimeToLiveRequest(ID=grant.ID, keys=True)
        )
        assert ttl.grantedTTL == 60 and 0 < ttl.TTL <= 60 and list(ttl.keys) == [b"leased"]
        keepalive = client.lease.LeaseKeepAlive(iter([rpc_pb2.LeaseKeepAliveRequest(ID=grant.ID)]))
        answers = [answer async for answer in keepalive]
        assert [(a.ID, a.TTL) for a in answers] == [(grant.ID, 60)]
        leases = await client.lease.LeaseLeases(rpc_pb2.LeaseLeasesRequest())
        assert [lease.ID for lease in leases.leases] == [grant.ID]
        await client.lease.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=grant.ID))
        got = await client.kv.Range(rpc_pb2.RangeRequest(key=b"leased"))
        assert got.count == 0

    run(member_config(tmp_path / "d"), scenario)


def test_expired_lease_is_revoked_by_the_leader(tmp_path: Path) -> None:
    async def scenario(member: Member, client: Client) -> None:
        grant = await client.lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=1))
        await client.put(b"short", b"x", lease=grant.ID)
        deadline = asyncio.get_running_loop().time() + 10
        while (await client.kv.Range(rpc_pb2.RangeRequest(key=b"short"))).count:
            assert asyncio.get_running_loop().time() < deadline, "lease never expired"
            await asyncio.sleep(0.1)

    # min TTL is 2 s by default (etcd: 1.5 x election timeout); a 1 s grant gets 2 s.
    run(member_config(tmp_path / "d"), scenario)


def test_maintenance_status_defrag_hashkv_alarm_memberlist(tmp_path: Path) -> None:
    config = member_config(tmp_path / "d")

    async def scenario(member: Member, client: Client) -> None:
        for index in range(50):
            await client.put(b"k", bytes(1000) + str(index).encode())
        await client.kv.Compact(rpc_pb2.CompactionRequest(revision=50))
        status = await client.maintenance.Status(rpc_pb2.StatusRequest())
        assert status.leader == config.member_id and status.dbSizeInUse <= status.dbSize
        await client.maintenance.Defragment(rpc_pb2.DefragmentRequest())
        after = await client.maintenance.Status(rpc_pb2.StatusRequest())
        assert after.dbSize < status.dbSize
        first = await client.maintenance.HashKV(rpc_pb2.HashKVRequest(revision=0))
        second = await client.maintenance.HashKV(rpc_pb2.HashKVRequest(revision=0))
        assert first.hash == second.hash and first.compact_revision == 50
        alarms = await client.maintenance.Alarm(
            rpc_pb2.AlarmRequest(action=rpc_pb2.AlarmRequest.GET)
        )
        assert list(alarms.alarms) == []
        members = await client.cluster.MemberList(rpc_pb2.MemberListRequest())
        assert [(m.ID, m.name) for m in members.members] == [(config.member_id, "solo")]
        assert list(members.members[0].clientURLs) == [config.advertise_client_urls[0].url]

    run(config, scenario)


def test_restart_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    acknowledged: dict[bytes, int] = {}

    async def write(member: Member, client: Client) -> None:
        for index in range(60):
            response = await client.put(f"k{index}".encode(), str(index).encode())
            acknowledged[f"k{index}".encode()] = response.header.revision

    async def read(member: Member, client: Client) -> None:
        got = await client.kv.Range(rpc_pb2.RangeRequest(key=b"k", range_end=b"l"))
        assert {kv.key: kv.mod_revision for kv in got.kvs} == acknowledged
        await client.put(b"after", b"restart")

    # A small --snapshot-count makes the first run take snapshots and compact its log.
    first = member_config(data_dir, snapshot_count=25)
    run(first, write)
    run(member_config(data_dir, snapshot_count=25), read)
    assert list((data_dir / "member" / "snap").glob("*.snap"))


def test_snapshot_save_status_restore_round_trip(tmp_path: Path) -> None:
    saved = tmp_path / "backup.db"

    async def write_and_save(member: Member, client: Client) -> None:
        for index in range(10):
            await client.put(f"s{index}".encode(), b"v")
        endpoint = member.config.listen_client_urls[0].url
        await asyncio.to_thread(snapshot_cli.save, endpoint, saved)

    run(member_config(tmp_path / "a"), write_and_save)
    status = snapshot_cli.status(saved)
    # etcdutl counts every bucket's entries: 10 key revisions, consistent_index, term,
    # clusterVersion, authRevision and the member (members bucket, as etcd's file).
    assert status.revision == 11 and status.total_keys == 15
    snapshot_cli.restore(saved, tmp_path / "b")
    with pytest.raises(snapshot_cli.SnapshotError, match="not empty"):
        snapshot_cli.restore(saved, tmp_path / "b")

    async def read(member: Member, client: Client) -> None:
        got = await client.kv.Range(rpc_pb2.RangeRequest(key=b"s", range_end=b"t"))
        assert got.count == 10 and got.header.revision == 11
        response = await client.put(b"new", b"write")
        assert response.header.revision == 12

    run(member_config(tmp_path / "b"), read)


def test_damaged_snapshot_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(b"SQLite format 3\x00" + bytes(100))
    with pytest.raises(snapshot_cli.SnapshotError, match="SHA-256"):
        snapshot_cli.status(path)


def test_quota_exceeded_refuses_writes_and_raises_nospace_alarm(tmp_path: Path) -> None:
    async def scenario(member: Member, client: Client) -> None:
        refused = None
        for index in range(200):
            try:
                await client.put(f"big{index}".encode(), bytes(8192))
            except grpc.aio.AioRpcError as error:
                refused = (error.code(), error.details())
                break
        assert refused == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "etcdserver: mvcc: database space exceeded",
        )
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            alarms = await client.maintenance.Alarm(
                rpc_pb2.AlarmRequest(action=rpc_pb2.AlarmRequest.GET)
            )
            if alarms.alarms:
                break
            assert asyncio.get_running_loop().time() < deadline, "no NOSPACE alarm raised"
            await asyncio.sleep(0.05)
        assert [(a.memberID, a.alarm) for a in alarms.alarms] == [
            (member.member_id, rpc_pb2.NOSPACE)
        ]
        status = await client.maintenance.Status(rpc_pb2.StatusRequest())
        assert any("NOSPACE" in text for text in status.errors)
        # Deletes still go through under the alarm.
        deleted = await client.kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"big0"))
        assert deleted.deleted == 1

    run(member_config(tmp_path / "d", quota_backend_bytes=256 * 1024), scenario)


def test_auto_compaction_keeps_the_last_n_revisions(tmp_path: Path) -> None:
    async def scenario(member: Member, client: Client) -> None:
        for index in range(30):
            await client.put(b"ac", str(index).encode())  # revisions 2..31
        deadline = asyncio.get_running_loop().time() + 10
        while member.data.state.compact_revision() != 31 - 10:
            assert asyncio.get_running_loop().time() < deadline, "no auto compaction"
            await asyncio.sleep(0.05)
        code, _ = await _status_of(client.kv.Range(rpc_pb2.RangeRequest(key=b"ac", revision=5)))
        assert code == grpc.StatusCode.OUT_OF_RANGE

    run(member_config(tmp_path / "d", auto_compaction_retention="10"), scenario)


def test_trace_file_records_transitions_as_ndjson(tmp_path: Path) -> None:
    trace = tmp_path / "trace.ndjson"

    async def scenario(member: Member, client: Client) -> None:
        await client.put(b"t", b"1")

    run(member_config(tmp_path / "d", trace_file=str(trace)), scenario)
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    events = [line["event"] for line in lines]
    assert events[0] == "start"
    for required in ("role", "propose", "persist", "apply"):
        assert required in events
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert all(line["v"] == 1 and line["commit"] <= line["last_index"] for line in lines)
    leader = [line for line in lines if line["event"] == "role" and line["role"] == "leader"]
    assert leader and leader[0]["term"] >= 1


def test_watch_ids_cancel_and_progress_on_one_stream(tmp_path: Path) -> None:
    async def scenario(member: Member, client: Client) -> None:
        requests: asyncio.Queue[rpc_pb2.WatchRequest] = asyncio.Queue()

        async def feed() -> AsyncIterator[rpc_pb2.WatchRequest]:
            while True:
                yield await requests.get()

        stream = client.watch.Watch(feed())

        async def ask(request: rpc_pb2.WatchRequest) -> rpc_pb2.WatchResponse:
            await requests.put(request)
            (response,) = await asyncio.wait_for(_responses(stream, 1), 10)
            return response

        def create(watch_id: int, key: bytes) -> rpc_pb2.WatchRequest:
            return rpc_pb2.WatchRequest(
                create_request=rpc_pb2.WatchCreateRequest(key=key, watch_id=watch_id)
            )

        first = await ask(create(7, b"x"))
        assert (first.created, first.watch_id, first.canceled) == (True, 7, False)
        duplicate = await ask(create(7, b"y"))
        assert (duplicate.watch_id, duplicate.created, duplicate.canceled) == (-1, True, True)
        assert duplicate.cancel_reason == "mvcc: duplicate watch ID provided on the WatchStream"
        auto = await ask(create(0, b"z"))
        assert auto.created and auto.watch_id == 0
        await client.put(b"x", b"1")
        event = await asyncio.wait_for(_responses(stream, 1), 10)
        assert [(e.kv.key, r.watch_id) for r in event for e in r.events] == [(b"x", 7)]
        progress = await ask(rpc_pb2.WatchRequest(progress_request=rpc_pb2.WatchProgressRequest()))
        assert progress.watch_id == -1 and progress.header.revision == 2
        canceled = await ask(
            rpc_pb2.WatchRequest(cancel_request=rpc_pb2.WatchCancelRequest(watch_id=7))
        )
        assert (canceled.watch_id, canceled.canceled) == (7, True)
        await client.put(b"x", b"2")
        await client.put(b"z", b"3")
        (after,) = await asyncio.wait_for(_responses(stream, 1), 10)
        assert [(e.kv.key, after.watch_id) for e in after.events] == [(b"z", 0)]
        stream.cancel()

    run(member_config(tmp_path / "d"), scenario)

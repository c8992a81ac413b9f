"""Three members, separate processes: what only a cluster can show, checked against our
server and against real etcd alike (the same test body runs on both).

- A write acknowledged by one member is seen by a linearizable read on every other.
- A lease is kept alive, and its TTL asked, through a follower (forwarded to the leader).
- A watch opened on a follower sees a write made through another member.
- MemberList from any member names all three with their client URLs.
- MoveLeader hands leadership to a chosen follower; an unknown target is a bad leader
  transferee (asked of a follower: not leader); MemberList flags no learner, ids sorted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import etcd_procs
import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher

KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])


@pytest.fixture(params=KINDS, scope="module")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[etcd_procs.Cluster]:
    with etcd_procs.cluster(request.param, tmp_path_factory.mktemp(request.param), 3) as running:
        yield running


def _channel(endpoint: str) -> grpc.Channel:
    return grpc.insecure_channel(endpoint.removeprefix("http://"))


def _roles(cluster: etcd_procs.Cluster) -> tuple[str, list[str]]:
    statuses = {e: launcher.probe_status(e) for e in cluster.endpoints}
    leader = next(e for e, s in statuses.items() if s["leader"] == s["member_id"])
    return leader, [e for e in cluster.endpoints if e != leader]


def test_write_on_one_member_is_read_linearizably_on_every_other(
    cluster: etcd_procs.Cluster,
) -> None:
    for index, writer in enumerate(cluster.endpoints):
        key = f"ryw{index}".encode()
        with _channel(writer) as channel:
            put = rpc_pb2_grpc.KVStub(channel).Put(
                rpc_pb2.PutRequest(key=key, value=b"v"), timeout=5
            )
        for reader in cluster.endpoints:
            with _channel(reader) as channel:
                got = rpc_pb2_grpc.KVStub(channel).Range(rpc_pb2.RangeRequest(key=key), timeout=5)
            assert got.count == 1 and got.kvs[0].mod_revision == put.header.revision
            assert got.header.revision >= put.header.revision


def test_lease_keepalive_and_ttl_through_a_follower(cluster: etcd_procs.Cluster) -> None:
    _, followers = _roles(cluster)
    with _channel(followers[0]) as channel:
        lease = rpc_pb2_grpc.LeaseStub(channel)
        grant = lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=30), timeout=5)
        answers = list(
            lease.LeaseKeepAlive(iter([rpc_pb2.LeaseKeepAliveRequest(ID=grant.ID)]), timeout=5)
        )
        assert [(a.ID, a.TTL) for a in answers] == [(grant.ID, 30)]
        ttl = lease.LeaseTimeToLive(rpc_pb2.LeaseTimeToLiveRequest(ID=grant.ID), timeout=5)
        assert ttl.grantedTTL == 30 and 25 <= ttl.TTL <= 30
        unknown = list(
            lease.LeaseKeepAlive(iter([rpc_pb2.LeaseKeepAliveRequest(ID=424242)]), timeout=5)
        )
        assert [(a.ID, a.TTL) for a in unknown] == [(424242, 0)]
        lease.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=grant.ID), timeout=5)


def test_watch_on_a_follower_sees_a_write_made_elsewhere(cluster: etcd_procs.Cluster) -> None:
    leader, followers = _roles(cluster)
    with _channel(followers[-1]) as watch_channel, _channel(leader) as write_channel:
        create = rpc_pb2.WatchCreateRequest(key=b"seen", start_revision=0)
        stream = rpc_pb2_grpc.WatchStub(watch_channel).Watch(
            iter([rpc_pb2.WatchRequest(create_request=create)]), timeout=10
        )
        created = next(stream)
        assert created.created
        put = rpc_pb2_grpc.KVStub(write_channel).Put(
            rpc_pb2.PutRequest(key=b"seen", value=b"here"), timeout=5
        )
        event_response = next(stream)
        stream.cancel()
    assert [(e.kv.key, e.kv.value, e.kv.mod_revision) for e in event_response.events] == [
        (b"seen", b"here", put.header.revision)
    ]


def test_member_list_from_any_member_names_all_three(cluster: etcd_procs.Cluster) -> None:
    expected = sorted((m.name, m.peer_url, m.client_url) for m in cluster.plan.members)
    for endpoint in cluster.endpoints:
        # each member publishes its name and client URLs through the log (as etcd's do):
        # a member's own MemberList waits for its own, not yet for the others'
        deadline = time.monotonic() + 10
        while True:
            with _channel(endpoint) as channel:
                members = rpc_pb2_grpc.ClusterStub(channel).MemberList(
                    rpc_pb2.MemberListRequest(), timeout=5
                )
            if all(m.clientURLs for m in members.members) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        listed = sorted(
            (m.name, m.peerURLs[0], m.clientURLs[0] if m.clientURLs else "")
            for m in members.members
        )
        assert listed == expected


def test_move_leader_hands_leadership_to_a_follower(cluster: etcd_procs.Cluster) -> None:
    leader, followers = _roles(cluster)
    target = launcher.probe_status(followers[0])["member_id"]
    with _channel(leader) as channel:
        rpc_pb2_grpc.MaintenanceStub(channel).MoveLeader(
            rpc_pb2.MoveLeaderRequest(targetID=target), timeout=10
        )
    assert launcher.probe_status(followers[0])["leader"] == target


def test_move_leader_to_an_unknown_member_is_a_bad_leader_transferee(
    cluster: etcd_procs.Cluster,
) -> None:
    leader, followers = _roles(cluster)
    answers = []
    for endpoint in (leader, followers[0]):
        with _channel(endpoint) as channel, pytest.raises(grpc.RpcError) as caught:
            rpc_pb2_grpc.MaintenanceStub(channel).MoveLeader(
                rpc_pb2.MoveLeaderRequest(targetID=12345), timeout=10
            )
        answers.append((caught.value.code(), caught.value.details()))
    assert answers == [
        (grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: bad leader transferee"),
        (grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: not leader"),
    ]


def test_member_list_flags_no_learner_in_a_new_cluster(cluster: etcd_procs.Cluster) -> None:
    with _channel(cluster.endpoints[0]) as channel:
        members = rpc_pb2_grpc.ClusterStub(channel).MemberList(
            rpc_pb2.MemberListRequest(linearizable=True), timeout=5
        )
    assert [m.isLearner for m in members.members] == [False, False, False]
    assert [m.ID for m in members.members] == sorted(m.ID for m in members.members)

"""Leases: grant rules, keep-alive on the leader only, expiry by an injected clock,
remaining TTL across a leader change, key attachment, and revocation through the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.applier import Applier, encode_request
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.lessor import (
    MAX_LEASE_TTL,
    LeaseIdGenerator,
    Lessor,
    NotPrimaryError,
    min_ttl_seconds,
)
from etcdspec.impl.kv.quota import BackendQuota
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import rpc_pb2 as pb


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Member:
    def __init__(self, path: Path, clock: Clock) -> None:
        self.backend = Backend(path)
        self.lessor = Lessor(min_ttl=2)
        self.hub = WatchHub(self.backend)
        self.applier = Applier(
            self.backend, self.lessor, self.hub, BackendQuota(self.backend), clock=clock
        )
        self.index = self.backend.consistent_index()

    def do(self, request: Message) -> Any:
        self.index += 1
        result = self.applier.apply(self.index, 2, encode_request(request))
        if result.error is not None:
            raise result.error
        return result.response


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def member(tmp_path: Path, clock: Clock) -> Member:
    return Member(tmp_path / "m.db", clock)


@pytest.mark.parametrize(
    ("ttl", "granted"),
    [(0, 2), (1, 2), (2, 2), (60, 60), (MAX_LEASE_TTL, MAX_LEASE_TTL)],
)
def test_grant_raises_the_ttl_to_the_minimum(member: Member, ttl: int, granted: int) -> None:
    resp = member.do(pb.LeaseGrantRequest(ID=1, TTL=ttl))
    assert (1, granted) == (resp.ID, resp.TTL)


@pytest.mark.parametrize(
    ("first", "second", "kind"),
    [
        ((5, 10), (5, 10), errors.LEASE_EXIST),
        ((5, 10), (6, MAX_LEASE_TTL + 1), errors.LEASE_TTL_TOO_LARGE),
    ],
)
def test_grant_errors(
    member: Member, first: tuple[int, int], second: tuple[int, int], kind: Any
) -> None:
    member.do(pb.LeaseGrantRequest(ID=first[0], TTL=first[1]))
    with pytest.raises(RpcError) as info:
        member.do(pb.LeaseGrantRequest(ID=second[0], TTL=second[1]))
    assert info.value.kind == kind


def test_grant_without_id_gets_a_deterministic_free_id(tmp_path: Path, clock: Clock) -> None:
    one, two = Member(tmp_path / "1.db", clock), Member(tmp_path / "2.db", clock)
    ids = []
    for m in (one, two):
        m.do(pb.LeaseGrantRequest(ID=2, TTL=5))  # index 1 takes id 2 explicitly
        ids.append((m.do(pb.LeaseGrantRequest(TTL=5)).ID, m.do(pb.LeaseGrantRequest(TTL=5)).ID))
    assert ids[0] == ids[1]
    assert len({2, *ids[0]}) == 3


def test_id_generator_gives_distinct_positive_ids_per_member() -> None:
    a, b = LeaseIdGenerator(1, seed=1000), LeaseIdGenerator(2, seed=1000)
    ids = [a.next() for _ in range(50)] + [b.next() for _ in range(50)]
    assert len(set(ids)) == 100 and all(0 < i < 2**63 for i in ids)


def test_keep_alive_only_on_the_primary(member: Member, clock: Clock) -> None:
    member.do(pb.LeaseGrantRequest(ID=9, TTL=10))
    with pytest.raises(NotPrimaryError):
        member.lessor.renew(9, clock.now)
    member.lessor.promote(clock.now)
    clock.now += 8
    assert member.lessor.renew(9, clock.now) == 10
    clock.now += 8
    assert member.lessor.expired(clock.now) == []
    assert member.lessor.time_to_live(9, clock.now).ttl == 2


def test_expired_lists_leases_soonest_first_and_only_when_primary(
    member: Member, clock: Clock
) -> None:
    for lease_id, ttl in ((1, 30), (2, 10), (3, 20)):
        member.do(pb.LeaseGrantRequest(ID=lease_id, TTL=ttl))
    assert member.lessor.expired(clock.now + 1000) == []  # follower: never expires
    member.lessor.promote(clock.now)
    assert member.lessor.expired(clock.now + 15) == [2]
    assert member.lessor.expired(clock.now + 25) == [2, 3]
    with pytest.raises(RpcError) as info:
        member.lessor.renew(2, clock.now + 15)
    assert info.value.kind == errors.LEASE_NOT_FOUND


def test_promote_gives_every_lease_its_full_ttl_again(member: Member, clock: Clock) -> None:
    member.do(pb.LeaseGrantRequest(ID=4, TTL=10))
    member.lessor.promote(clock.now)
    clock.now += 9  # almost expired under the old leader
    member.lessor.demote()
    assert member.lessor.expired(clock.now + 100) == []
    member.lessor.promote(clock.now)  # a new leader
    assert member.lessor.expired(clock.now + 9) == []
    assert member.lessor.expired(clock.now + 10) == [4]


def test_lease_granted_on_the_leader_expires_from_its_grant(member: Member, clock: Clock) -> None:
    member.lessor.promote(clock.now)
    clock.now += 50
    member.do(pb.LeaseGrantRequest(ID=8, TTL=5))
    assert member.lessor.expired(clock.now + 4.9) == []
    assert member.lessor.expired(clock.now + 5) == [8]


def test_keys_follow_puts_and_deletes(member: Member) -> None:
    member.do(pb.LeaseGrantRequest(ID=1, TTL=60))
    member.do(pb.LeaseGrantRequest(ID=2, TTL=60))
    member.do(pb.PutRequest(key=b"a", lease=1))
    member.do(pb.PutRequest(key=b"b", lease=1))
    member.do(pb.PutRequest(key=b"c", lease=1))
    member.do(pb.PutRequest(key=b"b", lease=2))  # moves to lease 2
    member.do(pb.PutRequest(key=b"c"))  # detached
    member.do(pb.DeleteRangeRequest(key=b"a"))
    ttl = member.lessor.time_to_live(1, 0.0, with_keys=True)
    assert ttl.keys == ()
    assert member.lessor.keys_of(2) == [b"b"]


def test_revoke_deletes_attached_keys_in_one_revision(member: Member) -> None:
    member.do(pb.LeaseGrantRequest(ID=1, TTL=60))
    for key in (b"x", b"y", b"z"):
        member.do(pb.PutRequest(key=key, lease=1))
    member.do(pb.PutRequest(key=b"free"))
    before = member.backend.current_revision()
    handle = member.hub.create(1, b"\x00", b"\x00")
    resp = member.do(pb.LeaseRevokeRequest(ID=1))
    assert resp.header.revision == before + 1
    remaining = member.do(pb.RangeRequest(key=b"\x00", range_end=b"\x00"))
    assert [kv.key for kv in remaining.kvs] == [b"free"]
    (batch,) = member.hub.take(handle)
    assert batch.revision == before + 1
    assert [e.kv.key for e in batch.events] == [b"x", b"y", b"z"]
    assert not member.lessor.exists(1)
    assert member.backend.leases() == []
    with pytest.raises(RpcError) as info:
        member.do(pb.LeaseRevokeRequest(ID=1))
    assert info.value.kind == errors.LEASE_NOT_FOUND


def test_leases_and_attachments_survive_a_restart(tmp_path: Path, clock: Clock) -> None:
    member = Member(tmp_path / "m.db", clock)
    member.do(pb.LeaseGrantRequest(ID=3, TTL=30))
    member.do(pb.PutRequest(key=b"k", lease=3))
    member.backend.close()
    again = Member(tmp_path / "m.db", clock)
    assert again.lessor.lease_ids() == [3]
    assert again.lessor.keys_of(3) == [b"k"]
    assert again.lessor.time_to_live(3, clock.now).granted_ttl == 30


def test_time_to_live_of_an_unknown_lease(member: Member) -> None:
    with pytest.raises(RpcError) as info:
        member.lessor.time_to_live(77, 0.0)
    assert info.value.kind == errors.LEASE_NOT_FOUND


@pytest.mark.parametrize(("election_ms", "min_ttl"), [(1000, 2), (500, 1), (100, 1), (3000, 5)])
def test_min_ttl_follows_the_election_timeout(election_ms: int, min_ttl: int) -> None:
    assert min_ttl_seconds(election_ms) == min_ttl


def test_expired_lists_a_lease_again_only_after_the_retry_interval(
    member: Member, clock: Clock
) -> None:
    member.do(pb.LeaseGrantRequest(ID=1, TTL=10))
    member.lessor.promote(clock.now)
    assert member.lessor.expired(clock.now + 10) == [1]
    assert member.lessor.expired(clock.now + 11) == []  # its revocation is under way
    assert member.lessor.expired(clock.now + 13) == [1]  # lost: propose it again
    member.do(pb.LeaseRevokeRequest(ID=1))
    assert member.lessor.expired(clock.now + 100) == []

"""The member records of the state machine: etcd's JSON, etcd's checks of a change (at
apply time, in log order), persistence with the consistent index across a reopen, and
the attributes a member publishes through the log (a cluster_member_attr_set entry)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.etcd_export import member_json
from etcdspec.impl.kv.members import (
    ChangeKind,
    MemberChange,
    MemberRecord,
    check_change,
)
from etcdspec.impl.kv.state_machine import StateMachine
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2

M1 = MemberRecord(1, "m1", ("http://127.0.0.1:2380",), ("http://127.0.0.1:2379",))
M2 = MemberRecord(2, "m2", ("http://127.0.0.1:2381",))
LEARNER = MemberRecord(3, "", ("http://127.0.0.1:2382",), is_learner=True)


def test_a_record_is_etcds_member_json_and_round_trips() -> None:
    assert M1.to_json() == {
        "id": 1,
        "name": "m1",
        "peerURLs": ["http://127.0.0.1:2380"],
        "clientURLs": ["http://127.0.0.1:2379"],
        "isLearner": False,
        "initialName": "",
    }
    for record in (M1, M2, LEARNER, MemberRecord(4, "m4", initial_name="n4")):
        assert MemberRecord.decode(record.encode()) == record
    # A record written before names were published through the log: its name was the
    # one of bootstrap.
    legacy = MemberRecord.decode(b'{"id": 2, "name": "m2", "peerURLs": ["http://127.0.0.1:2381"]}')
    assert legacy == MemberRecord(2, "m2", ("http://127.0.0.1:2381",), initial_name="m2")
    with pytest.raises(ValueError, match="not a member record"):
        MemberRecord.decode(b'{"name": "no id"}')


CASES = [
    (ChangeKind.ADD, MemberRecord(9, peer_urls=("http://127.0.0.1:2380",)), errors.PEER_URL_EXIST),
    (ChangeKind.ADD, MemberRecord(1, peer_urls=("http://127.0.0.1:9",)), errors.MEMBER_EXIST),
    (ChangeKind.ADD, MemberRecord(7, peer_urls=("http://127.0.0.1:9",)), errors.MEMBER_EXIST),
    (ChangeKind.ADD_LEARNER, MemberRecord(9, peer_urls=("http://x:1",)), errors.TOO_MANY_LEARNERS),
    (ChangeKind.REMOVE, MemberRecord(9), errors.MEMBER_NOT_FOUND),
    (ChangeKind.REMOVE, MemberRecord(7), errors.MEMBER_NOT_FOUND),
    (ChangeKind.PROMOTE, MemberRecord(2), errors.MEMBER_NOT_LEARNER),
    (ChangeKind.PROMOTE, MemberRecord(9), errors.MEMBER_NOT_FOUND),
    (
        ChangeKind.UPDATE,
        MemberRecord(3, peer_urls=("http://127.0.0.1:2381",)),
        errors.PEER_URL_EXIST,
    ),
    (ChangeKind.UPDATE, MemberRecord(9, peer_urls=("http://x:1",)), errors.MEMBER_NOT_FOUND),
]


@pytest.mark.parametrize(("kind", "record", "expected"), CASES)
def test_etcds_checks_refuse_a_change_with_etcds_error(
    kind: ChangeKind, record: MemberRecord, expected: errors.EtcdErrorKind
) -> None:
    members = {m.member_id: m for m in (M1, M2, LEARNER)}
    with pytest.raises(RpcError) as caught:
        check_change(members, {7}, MemberChange(kind, record))
    assert caught.value.kind is expected


def test_changes_apply_in_order_with_the_index_and_survive_a_reopen(tmp_path: Path) -> None:
    db = tmp_path / "db"
    state = StateMachine(db, 1, quota_bytes=0)
    state.members().seed([M1, M2], 1)
    state.members().seed([LEARNER], 1)  # a second seed changes nothing
    learner = MemberRecord(5, peer_urls=("http://127.0.0.1:2390",))
    assert state.apply_member_change(1, 1, MemberChange(ChangeKind.ADD_LEARNER, learner)) == (
        MemberRecord(5, peer_urls=("http://127.0.0.1:2390",), is_learner=True)
    )
    refused = state.apply_member_change(2, 1, MemberChange(ChangeKind.PROMOTE, MemberRecord(2)))
    assert isinstance(refused, RpcError) and refused.kind is errors.MEMBER_NOT_LEARNER
    state.apply_member_change(3, 1, MemberChange(ChangeKind.PROMOTE, MemberRecord(5)))
    state.apply_member_change(4, 2, MemberChange(ChangeKind.REMOVE, MemberRecord(2)))
    assert state.apply_member_change(4, 2, MemberChange(ChangeKind.REMOVE, M1)) is None  # replay
    state.flush()
    state.close()
    reopened = StateMachine(db, 1, quota_bytes=0)
    try:
        assert reopened.consistent_index() == 4
        assert reopened.members().current() == [M1, MemberRecord(5, "", ("http://127.0.0.1:2390",))]
        _, removed = reopened.members().all()
        assert removed == {2}
    finally:
        reopened.close()


def test_data_made_under_another_member_id_takes_the_initial_cluster(tmp_path: Path) -> None:
    state = StateMachine(tmp_path / "db", 1, quota_bytes=0)
    try:
        state.members().seed([M1], 1)
        state.members().seed([M2], 2)  # the same data, started as member 2
        assert state.members().current() == [M2]
        assert state.members().all()[1] == {1}
    finally:
        state.close()


def _attr_set(
    index: int, member_id: int, name: str, client_urls: list[str]
) -> tuple[int, int, bytes]:
    request = internal_pb2.InternalRaftRequest(
        cluster_member_attr_set=internal_pb2.ClusterMemberAttrSetRequest(
            member_ID=member_id,
            member_attributes=internal_pb2.MemberAttributes(name=name, client_urls=client_urls),
        )
    )
    request.header.as_member = True
    return (index, 1, request.SerializeToString())


class _Entry:
    def __init__(self, index: int, term: int, data: bytes) -> None:
        self.index, self.term, self.data = index, term, data


def test_published_attributes_are_applied_to_the_record_and_survive_a_reopen(
    tmp_path: Path,
) -> None:
    db = tmp_path / "db"
    initial = replace(M2, initial_name="m2")
    state = StateMachine(db, 1, quota_bytes=0)
    state.members().seed([initial], 1)
    added = MemberRecord(5, peer_urls=("http://127.0.0.1:2390",))
    state.apply_member_change(1, 1, MemberChange(ChangeKind.ADD_LEARNER, added))
    state.apply_member_change(2, 1, MemberChange(ChangeKind.REMOVE, MemberRecord(5)))
    url = "http://127.0.0.1:2391"
    entries = [
        _attr_set(3, 2, "m2", [url]),
        _attr_set(4, 5, "gone", [url]),  # removed: skipped, as etcd skips it
        _attr_set(5, 77, "who", [url]),  # unknown: changes nothing
    ]
    results = state.apply([_Entry(*entry) for entry in entries])
    assert [result.error for result in results] == [None, None, None]
    state.flush()
    state.close()
    reopened = StateMachine(db, 1, quota_bytes=0)
    try:
        assert reopened.consistent_index() == 5
        published = replace(initial, client_urls=(url,))
        assert reopened.members().current() == [published]
        # etcd 3.5.1's members bucket keeps the name of bootstrap and no client URLs.
        assert (
            member_json(published) == b'{"id":2,"peerURLs":["http://127.0.0.1:2381"],"name":"m2"}'
        )
        # A member added later and started: listed with its published name, none in
        # the bucket.
        later = MemberRecord(6, "m6", ("http://127.0.0.1:2392",), (url,))
        assert member_json(later) == b'{"id":6,"peerURLs":["http://127.0.0.1:2392"]}'
    finally:
        reopened.close()

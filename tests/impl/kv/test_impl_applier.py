"""The applier: consistent index stored with the data, idempotent replay after a restart
or kill -9, errors that still advance the index, the NOSPACE alarm, and the encoding of
entries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message

from etcdspec.impl import errors
from etcdspec.impl.kv.applier import Applier, ApplyError, encode_request
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.mvcc import KVStore
from etcdspec.impl.kv.quota import BackendQuota, nospace_alarm_request
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import raft_internal_pb2
from etcdspec.impl.pb import rpc_pb2 as pb


def make_applier(path: Path, quota_bytes: int = 0) -> Applier:
    backend = Backend(path)
    return Applier(backend, Lessor(), WatchHub(backend), BackendQuota(backend, quota_bytes))


def put(key: bytes, value: bytes = b"v", request_id: int = 0) -> bytes:
    return encode_request(pb.PutRequest(key=key, value=value), request_id, member_id=1)


def test_response_carries_revision_term_and_request_id(tmp_path: Path) -> None:
    applier = make_applier(tmp_path / "m.db")
    result = applier.apply(1, 3, put(b"a", request_id=0xABC))
    assert result.error is None and not result.skipped
    assert (result.request_id, result.proposer_id) == (0xABC, 1)
    assert isinstance(result.response, pb.PutResponse)
    assert (result.response.header.revision, result.response.header.raft_term) == (2, 3)
    assert result.describe() == "entry 1@3 req abc: PutResponse rev 2 events 1"


def test_consistent_index_and_term_survive_a_restart(tmp_path: Path) -> None:
    applier = make_applier(tmp_path / "m.db")
    for index in range(1, 6):
        applier.apply(index, 2, put(b"k%d" % index))
    applier.backend.close()
    again = make_applier(tmp_path / "m.db")
    assert again.applied_index() == 5
    assert again.backend.applied_term() == 2
    assert again.backend.current_revision() == 6


def test_replayed_entries_are_skipped(tmp_path: Path) -> None:
    applier = make_applier(tmp_path / "m.db")
    entries = [put(b"k", b"%d" % i) for i in range(1, 6)]
    for index, data in enumerate(entries, start=1):
        applier.apply(index, 1, data)
    applier.backend.close()
    again = make_applier(tmp_path / "m.db")
    results = [again.apply(index, 1, data) for index, data in enumerate(entries, start=1)]
    assert all(r.skipped for r in results)
    assert again.store.range(pb.RangeRequest(key=b"k")).kvs[0].version == 5
    assert again.apply(6, 1, put(b"k", b"6")).response.header.revision == 7  # type: ignore[union-attr]


def test_noop_entries_only_advance_the_index(tmp_path: Path) -> None:
    applier = make_applier(tmp_path / "m.db")
    result = applier.apply(1, 4, b"")
    assert result.response is None and result.revision == 1
    assert applier.applied_index() == 1


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xff\xff\xff", "undecodable"),
        (raft_internal_pb2.InternalRaftRequest().SerializeToString() + b"\x0a\x00", "no operation"),
    ],
)
def test_undecodable_entries_stop_the_member(tmp_path: Path, data: bytes, reason: str) -> None:
    applier = make_applier(tmp_path / "m.db")
    with pytest.raises(ApplyError, match=reason):
        applier.apply(1, 1, data)
    assert applier.applied_index() == 0


def test_a_failing_request_changes_nothing_but_advances_the_index(tmp_path: Path) -> None:
    applier = make_applier(tmp_path / "m.db")
    applier.apply(1, 1, put(b"a"))
    txn = pb.TxnRequest(
        success=[
            pb.RequestOp(request_put=pb.PutRequest(key=b"b", value=b"1")),
            pb.RequestOp(request_put=pb.PutRequest(key=b"c", value=b"1", lease=42)),
        ]
    )
    result = applier.apply(2, 1, encode_request(txn))
    assert result.error is not None and result.error.kind == errors.LEASE_NOT_FOUND
    assert result.events == ()
    assert applier.applied_index() == 2
    assert applier.backend.current_revision() == 2
    assert applier.store.range(pb.RangeRequest(key=b"b")).count == 0


def test_encode_request_refuses_what_the_log_does_not_carry() -> None:
    with pytest.raises(TypeError, match="StatusRequest"):
        encode_request(pb.StatusRequest())


# ---- quota and the NOSPACE alarm ----


def test_nospace_alarm_blocks_writes_until_disarmed(tmp_path: Path) -> None:
    applier = make_applier(tmp_path / "m.db", quota_bytes=200_000)
    quota = applier.quota
    index = 0

    def do(request: Message) -> Any:
        nonlocal index
        index += 1
        return applier.apply(index, 1, encode_request(request))

    blob = b"x" * 4000
    written = 0
    while quota.available(
        raft_internal_pb2.InternalRaftRequest(put=pb.PutRequest(key=b"k", value=blob))
    ):
        assert do(pb.PutRequest(key=b"k%d" % written, value=blob)).error is None
        written += 1
        assert written < 200, "the quota never filled up"
    # The server proposes the alarm when `available` says no.
    raised = do(nospace_alarm_request(member_id=1))
    assert [(a.memberID, a.alarm) for a in raised.response.alarms] == [(1, pb.NOSPACE)]
    assert quota.nospace_raised()

    rejected = [
        pb.PutRequest(key=b"new", value=b"1"),
        pb.TxnRequest(success=[pb.RequestOp(request_put=pb.PutRequest(key=b"t", value=b"1"))]),
        pb.LeaseGrantRequest(ID=5, TTL=10),
    ]
    for request in rejected:
        result = do(request)
        assert result.error is not None and result.error.kind == errors.NO_SPACE
        assert result.error.message == "etcdserver: mvcc: database space exceeded"
    allowed = [
        pb.DeleteRangeRequest(key=b"k", range_end=b"l"),
        pb.TxnRequest(success=[pb.RequestOp(request_range=pb.RangeRequest(key=b"k1"))]),
        pb.AlarmRequest(action=pb.AlarmRequest.GET),
    ]
    for request in allowed:
        assert do(request).error is None, request
    assert do(pb.CompactionRequest(revision=applier.backend.current_revision())).error is None
    listed = do(pb.AlarmRequest(action=pb.AlarmRequest.GET)).response
    assert [(a.memberID, a.alarm) for a in listed.alarms] == [(1, pb.NOSPACE)]

    applier.backend.defragment()
    assert quota.available(
        raft_internal_pb2.InternalRaftRequest(put=pb.PutRequest(key=b"k", value=blob))
    )
    disarm = pb.AlarmRequest(action=pb.AlarmRequest.DEACTIVATE, memberID=1, alarm=pb.NOSPACE)
    assert len(do(disarm).response.alarms) == 1
    assert not quota.nospace_raised()
    assert do(pb.PutRequest(key=b"new", value=b"1")).error is None


@pytest.mark.parametrize(
    ("request_", "consumes"),
    [
        (pb.PutRequest(key=b"k"), True),
        (pb.LeaseGrantRequest(TTL=5), True),
        (pb.DeleteRangeRequest(key=b"k"), False),
        (pb.CompactionRequest(revision=1), False),
        (pb.LeaseRevokeRequest(ID=1), False),
        (
            pb.TxnRequest(
                failure=[
                    pb.RequestOp(
                        request_txn=pb.TxnRequest(
                            success=[pb.RequestOp(request_put=pb.PutRequest(key=b"k"))]
                        )
                    )
                ]
            ),
            True,
        ),
        (
            pb.TxnRequest(
                success=[pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=b"k"))]
            ),
            False,
        ),
    ],
)
def test_which_requests_the_alarm_blocks(tmp_path: Path, request_: Message, consumes: bool) -> None:
    applier = make_applier(tmp_path / "m.db")
    applier.apply(1, 1, encode_request(nospace_alarm_request(member_id=9)))
    result = applier.apply(2, 1, encode_request(request_))
    blocked = result.error is not None and result.error.kind == errors.NO_SPACE
    assert blocked is consumes


# ---- kill -9 in the middle of applying ----

_WRITER = textwrap.dedent(
    """
    import sys
    from etcdspec.impl.kv.applier import Applier, encode_request
    from etcdspec.impl.kv.backend import Backend
    from etcdspec.impl.kv.lessor import Lessor
    from etcdspec.impl.pb import rpc_pb2 as pb
    from etcdspec.impl.kv.quota import BackendQuota
    from etcdspec.impl.kv.watch_hub import WatchHub

    backend = Backend(sys.argv[1])
    applier = Applier(backend, Lessor(), WatchHub(backend), BackendQuota(backend))
    for index in range(1, 100000):
        txn = pb.TxnRequest(success=[
            pb.RequestOp(request_put=pb.PutRequest(key=b"a", value=b"%d" % index)),
            pb.RequestOp(request_put=pb.PutRequest(key=b"b", value=b"%d" % index)),
        ])
        applier.apply(index, 1, encode_request(txn))
        if index == 20:
            print("running", flush=True)
    """
)


def test_kill_9_while_applying_then_replay_gives_the_same_state(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        stdout=subprocess.PIPE,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"running"
        time.sleep(0.3)  # let it apply more entries; the kill lands mid-stream
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    applier = make_applier(path)
    applied = applier.applied_index()
    assert applied >= 20
    # Every applied entry wrote both keys at one revision: revision = index + 1.
    assert applier.backend.current_revision() == applied + 1
    a, b = (applier.store.range(pb.RangeRequest(key=k)).kvs[0] for k in (b"a", b"b"))
    assert a.value == b.value == b"%d" % applied
    assert a.mod_revision == b.mod_revision == applied + 1
    # Replaying the whole log from 1 applies only what is missing.
    for index in range(1, applied + 6):
        txn = pb.TxnRequest(
            success=[
                pb.RequestOp(request_put=pb.PutRequest(key=b"a", value=b"%d" % index)),
                pb.RequestOp(request_put=pb.PutRequest(key=b"b", value=b"%d" % index)),
            ]
        )
        result = applier.apply(index, 1, encode_request(txn))
        assert result.skipped is (index <= applied)
    assert applier.backend.current_revision() == applied + 6
    assert KVStore(applier.backend).hash_kv(0)[2] == applied + 6


# ---- batches: one transaction for consecutive entries ----


def test_a_batch_applies_each_entry_on_its_own_and_commits_once(tmp_path: Path) -> None:
    applier = make_applier(tmp_path / "m.db")
    handle = applier.watch_hub.create(1, b"\x00", b"\x00")
    batch = [
        (1, 1, encode_request(pb.LeaseGrantRequest(ID=5, TTL=60))),
        (2, 1, put(b"a")),
        (3, 1, b""),
        (4, 1, encode_request(pb.PutRequest(key=b"b", value=b"1", lease=5))),  # sees lease 5
        (5, 1, encode_request(pb.PutRequest(key=b"c", value=b"1", lease=6))),  # no lease 6
        (6, 1, encode_request(pb.DeleteRangeRequest(key=b"a"))),
    ]
    results = applier.apply_batch(batch)
    assert [r.index for r in results] == [1, 2, 3, 4, 5, 6]
    assert [r.revision for r in results] == [1, 2, 2, 3, 3, 4]
    assert results[4].error is not None and results[4].error.kind == errors.LEASE_NOT_FOUND
    assert applier.applied_index() == 6
    assert applier.lessor.keys_of(5) == [b"b"]
    revisions = [b.revision for b in applier.watch_hub.take(handle)]
    assert revisions == [2, 3, 4]
    again = applier.apply_batch([*batch[4:], (7, 2, put(b"d"))])
    assert [r.skipped for r in again] == [True, True, False]


@pytest.mark.parametrize(
    ("indexes", "message"),
    [([2], "expected index 1"), ([1, 3], "expected index 2"), ([1, 1], "expected index 2")],
)
def test_a_batch_with_a_gap_is_refused_before_applying_anything(
    tmp_path: Path, indexes: list[int], message: str
) -> None:
    applier = make_applier(tmp_path / "m.db")
    with pytest.raises(ApplyError, match=message):
        applier.apply_batch([(i, 1, put(b"k")) for i in indexes])
    assert applier.applied_index() == 0 and applier.backend.current_revision() == 1


def test_an_undecodable_entry_in_a_batch_applies_nothing(tmp_path: Path) -> None:
    applier = make_applier(tmp_path / "m.db")
    with pytest.raises(ApplyError, match="entry 2@1"):
        applier.apply_batch([(1, 1, put(b"a")), (2, 1, b"\xff\xff")])
    assert applier.applied_index() == 0 and applier.backend.current_revision() == 1


@pytest.mark.parametrize(
    ("request_", "cost"),
    [
        (pb.PutRequest(key=b"kk", value=b"v" * 10), 2 + 10 + 64),
        (pb.DeleteRangeRequest(key=b"k"), 0),
        (pb.CompactionRequest(revision=3), 0),
        (pb.LeaseGrantRequest(TTL=5), 64),
        # A txn costs its dearer branch: only one of them runs.
        (
            pb.TxnRequest(
                success=[pb.RequestOp(request_put=pb.PutRequest(key=b"a", value=b"1"))],
                failure=[
                    pb.RequestOp(request_put=pb.PutRequest(key=b"b", value=b"1")),
                    pb.RequestOp(request_put=pb.PutRequest(key=b"c", value=b"1")),
                ],
            ),
            2 * (1 + 1 + 64),
        ),
    ],
)
def test_request_cost(request_: Message, cost: int) -> None:
    from etcdspec.impl.kv.quota import request_cost

    decoded = raft_internal_pb2.InternalRaftRequest.FromString(encode_request(request_))
    assert request_cost(decoded) == cost


def test_quota_defaults_to_2_gib_and_refuses_a_negative_size(tmp_path: Path) -> None:
    backend = Backend(tmp_path / "m.db")
    assert BackendQuota(backend).quota_bytes == 2 * 1024**3
    assert BackendQuota(backend, 0).quota_bytes == 2 * 1024**3
    with pytest.raises(ValueError, match="quota_bytes"):
        BackendQuota(backend, -1)

"""HashKV as etcd computes it: the same writes (puts, deletes, txns, leases, revokes,
compactions) against a 1-member real etcd 3.5.1 and a 1-member cluster of ours, then
HashKV at every revision and after each compaction — hashes, compact revisions, header
revisions and errors equal, so hashes compare across implementations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import etcd_procs
import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2 as R
from etcdspec.impl.pb import rpc_pb2_grpc

pytestmark = pytest.mark.etcd

Row = tuple[object, ...]
Stage = tuple[str, list[Row]]
Answers = dict[str, list[Stage]]


def _hash(maintenance: rpc_pb2_grpc.MaintenanceStub, revision: int) -> Row:
    try:
        reply = maintenance.HashKV(R.HashKVRequest(revision=revision), timeout=5)
    except grpc.RpcError as error:
        return (revision, error.code().name, error.details())
    return (revision, reply.hash, reply.compact_revision, reply.header.revision)


def _hashes_up_to_now(
    kv: rpc_pb2_grpc.KVStub, maintenance: rpc_pb2_grpc.MaintenanceStub
) -> list[Row]:
    current = kv.Range(R.RangeRequest(key=b"probe"), timeout=5).header.revision
    return [_hash(maintenance, revision) for revision in range(0, current + 2)]


def run_history(endpoint: str) -> Iterator[Stage]:
    """The writes, and after each stage every member's HashKV answer at every revision."""
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        kv = rpc_pb2_grpc.KVStub(channel)
        lease = rpc_pb2_grpc.LeaseStub(channel)
        maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
        yield "empty store", _hashes_up_to_now(kv, maintenance)
        kv.Put(R.PutRequest(key=b"a", value=b"1"), timeout=5)
        kv.Put(R.PutRequest(key=b"b", value=b"2"), timeout=5)
        kv.Put(R.PutRequest(key=b"a", value=b"3"), timeout=5)
        kv.DeleteRange(R.DeleteRangeRequest(key=b"b"), timeout=5)
        lease.LeaseGrant(R.LeaseGrantRequest(ID=77, TTL=300), timeout=5)
        kv.Put(R.PutRequest(key=b"c", value=b"leased", lease=77), timeout=5)
        kv.Put(R.PutRequest(key=b"\x00\xffbin", value=b"\x00" * 40), timeout=5)
        kv.Txn(
            R.TxnRequest(
                compare=[R.Compare(key=b"a", target=R.Compare.VALUE, value=b"3")],
                success=[
                    R.RequestOp(request_put=R.PutRequest(key=b"e", value=b"5")),
                    R.RequestOp(request_delete_range=R.DeleteRangeRequest(key=b"a")),
                    R.RequestOp(request_put=R.PutRequest(key=b"f", value=b"")),
                ],
            ),
            timeout=5,
        )
        kv.Put(R.PutRequest(key=b"c", value=b"again", ignore_lease=True), timeout=5)
        lease.LeaseRevoke(R.LeaseRevokeRequest(ID=77), timeout=5)
        kv.Put(R.PutRequest(key=b"h", value=b"8"), timeout=5)
        kv.DeleteRange(R.DeleteRangeRequest(key=b"e"), timeout=5)
        yield "after writes", _hashes_up_to_now(kv, maintenance)
        # Compact at a revision whose only change is a tombstone (etcd drops it).
        current = kv.Range(R.RangeRequest(key=b"h"), timeout=5).header.revision
        kv.Compact(R.CompactionRequest(revision=current, physical=True), timeout=5)
        yield "compacted at a tombstone", _hashes_up_to_now(kv, maintenance)
        kv.Put(R.PutRequest(key=b"h", value=b"9"), timeout=5)
        kv.Put(R.PutRequest(key=b"new", value=b"1"), timeout=5)
        yield "writes after compaction", _hashes_up_to_now(kv, maintenance)
        kv.Compact(R.CompactionRequest(revision=current + 1, physical=True), timeout=5)
        kv.DeleteRange(R.DeleteRangeRequest(key=b"\x00", range_end=b"\x00"), timeout=5)
        yield "every key deleted", _hashes_up_to_now(kv, maintenance)


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Answers:
    out = {}
    for kind in ("etcd", "ours"):
        directory: Path = tmp_path_factory.mktemp(kind)
        with etcd_procs.cluster(kind, directory, size=1) as running:
            out[kind] = list(run_history(running.endpoints[0]))
    return out


def test_hashkv_equals_etcds_at_every_revision_through_compactions(
    answers: Answers,
) -> None:
    etcd, ours = answers["etcd"], answers["ours"]
    assert [stage for stage, _ in ours] == [stage for stage, _ in etcd]
    for (stage, expected), (_, got) in zip(etcd, ours, strict=True):
        assert got == expected, f"HashKV differs from etcd's {stage}"


def test_the_history_reaches_the_cases_it_is_for(
    answers: Answers,
) -> None:
    """Not vacuous: compacted revisions refused, the future refused, hashes vary."""
    flat = [row for _, rows in answers["etcd"] for row in rows]
    codes = {row[1] for row in flat if isinstance(row[1], str)}
    assert codes == {"OUT_OF_RANGE"}
    assert len({row[1] for row in flat if isinstance(row[1], int)}) > 15
    assert {row[2] for row in flat if isinstance(row[1], int)} >= {-1, 12, 13}

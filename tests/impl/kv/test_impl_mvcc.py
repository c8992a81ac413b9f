"""MVCC semantics of the reference server's store (etcd's documented rules), and the
SQLite backend's compaction, defragmentation and snapshots measured on the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.applier import Applier, encode_request
from etcdspec.impl.kv.backend import Backend, BackendError, check_snapshot
from etcdspec.impl.kv.lessor import Lessor, min_ttl_seconds
from etcdspec.impl.kv.mvcc import KVStore
from etcdspec.impl.kv.quota import BackendQuota
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import rpc_pb2 as pb

Cmp = pb.Compare
RR = pb.RangeRequest


class Store:
    """A one-member state machine driven with consecutive log indexes."""

    def __init__(self, path: Path, min_ttl: int = 2) -> None:
        self.backend = Backend(path)
        self.lessor = Lessor(min_ttl=min_ttl)
        self.applier = Applier(
            self.backend, self.lessor, WatchHub(self.backend), BackendQuota(self.backend)
        )
        self.index = self.backend.consistent_index()

    def do(self, request: Message) -> Any:
        self.index += 1
        result = self.applier.apply(self.index, 1, encode_request(request, self.index))
        if result.error is not None:
            raise result.error
        return result.response

    def put(self, key: bytes, value: bytes = b"v", **kw: Any) -> Any:
        return self.do(pb.PutRequest(key=key, value=value, **kw))

    def get(self, key: bytes, range_end: bytes = b"", **kw: Any) -> Any:
        return self.do(RR(key=key, range_end=range_end, **kw))

    def keys(self, key: bytes, range_end: bytes = b"", **kw: Any) -> list[bytes]:
        return [kv.key for kv in self.get(key, range_end, **kw).kvs]

    def rev(self) -> int:
        return self.backend.current_revision()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "member.db")


def _error(fn: Any, *args: Any, **kw: Any) -> errors.EtcdErrorKind:
    with pytest.raises(RpcError) as info:
        fn(*args, **kw)
    return info.value.kind


# ---- revisions ----


def test_revision_starts_at_1_and_each_write_adds_one(store: Store) -> None:
    assert store.rev() == 1
    assert store.put(b"a").header.revision == 2
    assert store.put(b"a", b"w").header.revision == 3
    kv = store.get(b"a").kvs[0]
    assert (kv.create_revision, kv.mod_revision, kv.version, kv.value) == (2, 3, 2, b"w")


def test_delete_then_put_starts_a_new_generation(store: Store) -> None:
    store.put(b"a")
    store.do(pb.DeleteRangeRequest(key=b"a"))
    store.put(b"a", b"again")
    kv = store.get(b"a").kvs[0]
    assert (kv.create_revision, kv.mod_revision, kv.version) == (4, 4, 1)


# ---- range ----

KEYS = [(b"a", b"3"), (b"ab", b"1"), (b"abc", b"2"), (b"b", b"5"), (b"c", b"4")]


@pytest.fixture
def filled(store: Store) -> Store:
    for key, value in KEYS:
        store.put(key, value)
    return store


@pytest.mark.parametrize(
    ("key", "range_end", "options", "expected"),
    [
        (b"a", b"", {}, [b"a"]),
        (b"zz", b"", {}, []),
        (b"a", b"b", {}, [b"a", b"ab", b"abc"]),
        (b"ab", b"\x00", {}, [b"ab", b"abc", b"b", b"c"]),
        (b"\x00", b"\x00", {}, [b"a", b"ab", b"abc", b"b", b"c"]),
        (b"b", b"a", {}, []),
        (b"a", b"\x00", {"limit": 2}, [b"a", b"ab"]),
        (b"a", b"\x00", {"sort_order": RR.DESCEND}, [b"c", b"b", b"abc", b"ab", b"a"]),
        (b"a", b"\x00", {"sort_target": RR.VALUE}, [b"ab", b"abc", b"a", b"c", b"b"]),
        (
            b"a",
            b"\x00",
            {"sort_target": RR.VALUE, "sort_order": RR.DESCEND, "limit": 2},
            [b"b", b"c"],
        ),
        (
            b"a",
            b"\x00",
            {"sort_target": RR.MOD, "sort_order": RR.DESCEND},
            [b"c", b"b", b"abc", b"ab", b"a"],
        ),
        (b"a", b"\x00", {"min_mod_revision": 4}, [b"abc", b"b", b"c"]),
        (b"a", b"\x00", {"max_create_revision": 3}, [b"a", b"ab"]),
        (b"a", b"\x00", {"revision": 3}, [b"a", b"ab"]),
    ],
)
def test_range_rules(
    filled: Store, key: bytes, range_end: bytes, options: dict[str, Any], expected: list[bytes]
) -> None:
    assert filled.keys(key, range_end, **options) == expected


@pytest.mark.parametrize(
    ("options", "count", "more", "returned"),
    [
        ({}, 5, False, 5),
        ({"limit": 2}, 5, True, 2),
        ({"limit": 5}, 5, False, 5),
        ({"count_only": True}, 5, False, 0),
        ({"count_only": True, "limit": 2}, 5, False, 0),
        ({"min_mod_revision": 5}, 5, False, 2),
    ],
)
def test_range_count_more_and_limit(
    filled: Store, options: dict[str, Any], count: int, more: bool, returned: int
) -> None:
    resp = filled.get(b"a", b"\x00", **options)
    assert (resp.count, resp.more, len(resp.kvs)) == (count, more, returned)


def test_range_keys_only_drops_values(filled: Store) -> None:
    resp = filled.get(b"a", b"b", keys_only=True)
    assert [kv.value for kv in resp.kvs] == [b"", b"", b""]
    assert [kv.version for kv in resp.kvs] == [1, 1, 1]


def test_range_header_is_the_current_revision_for_past_reads(filled: Store) -> None:
    assert filled.get(b"a", revision=2).header.revision == filled.rev() == 6


@pytest.mark.parametrize(
    ("revision", "kind"),
    [(100, errors.FUTURE_REV), (2, errors.COMPACTED)],
)
def test_range_revision_errors(filled: Store, revision: int, kind: Any) -> None:
    filled.do(pb.CompactionRequest(revision=4))
    assert _error(filled.get, b"a", revision=revision) == kind
    assert filled.keys(b"a", b"\x00", revision=4) == [b"a", b"ab", b"abc"]


# ---- put ----


def test_put_prev_kv_returns_the_previous_pair(store: Store) -> None:
    assert not store.put(b"k", b"1", prev_kv=True).HasField("prev_kv")
    resp = store.put(b"k", b"2", prev_kv=True)
    assert (resp.prev_kv.value, resp.prev_kv.mod_revision) == (b"1", 2)


def test_put_ignore_value_and_ignore_lease_keep_current_ones(store: Store) -> None:
    lease = store.do(pb.LeaseGrantRequest(ID=7, TTL=60))
    store.put(b"k", b"1", lease=lease.ID)
    store.put(b"k", ignore_value=True, value=b"")
    kv = store.get(b"k").kvs[0]
    assert (kv.value, kv.lease, kv.version) == (b"1", 0, 2)
    store.put(b"k", b"2", lease=7)
    store.put(b"k", b"3", ignore_lease=True)
    kv = store.get(b"k").kvs[0]
    assert (kv.value, kv.lease) == (b"3", 7)


@pytest.mark.parametrize(
    ("request_fields", "kind"),
    [
        ({"key": b""}, errors.EMPTY_KEY),
        ({"key": b"missing", "ignore_value": True}, errors.KEY_NOT_FOUND),
        ({"key": b"missing", "ignore_lease": True}, errors.KEY_NOT_FOUND),
        ({"key": b"k", "ignore_value": True, "value": b"x"}, errors.VALUE_PROVIDED),
        ({"key": b"k", "ignore_lease": True, "lease": 5}, errors.LEASE_PROVIDED),
        ({"key": b"k", "lease": 12345}, errors.LEASE_NOT_FOUND),
    ],
)
def test_put_errors_change_nothing(store: Store, request_fields: dict[str, Any], kind: Any) -> None:
    assert _error(store.do, pb.PutRequest(**request_fields)) == kind
    assert store.rev() == 1


# ---- delete ----


def test_delete_range_counts_and_returns_prev_kvs(filled: Store) -> None:
    resp = filled.do(pb.DeleteRangeRequest(key=b"a", range_end=b"b", prev_kv=True))
    assert resp.deleted == 3
    assert [kv.key for kv in resp.prev_kvs] == [b"a", b"ab", b"abc"]
    assert resp.header.revision == 7
    assert filled.keys(b"\x00", b"\x00") == [b"b", b"c"]


def test_delete_of_nothing_keeps_the_revision(filled: Store) -> None:
    resp = filled.do(pb.DeleteRangeRequest(key=b"nope"))
    assert (resp.deleted, resp.header.revision) == (0, 6)


# ---- txn ----


def _cmp(target: int, result: int, key: bytes = b"k", **value: Any) -> pb.Compare:
    return Cmp(key=key, target=target, result=result, **value)


# Key "k" is put at revision 2 with value "v1", again at 3 with "v2" and lease 7
# (granting a lease takes no revision).
@pytest.mark.parametrize(
    ("compare", "succeeded"),
    [
        (_cmp(Cmp.VALUE, Cmp.EQUAL, value=b"v2"), True),
        (_cmp(Cmp.VALUE, Cmp.NOT_EQUAL, value=b"v2"), False),
        (_cmp(Cmp.VALUE, Cmp.GREATER, value=b"v1"), True),
        (_cmp(Cmp.VALUE, Cmp.LESS, value=b"v1"), False),
        (_cmp(Cmp.VERSION, Cmp.EQUAL, version=2), True),
        (_cmp(Cmp.VERSION, Cmp.GREATER, version=2), False),
        (_cmp(Cmp.CREATE, Cmp.EQUAL, create_revision=2), True),
        (_cmp(Cmp.MOD, Cmp.EQUAL, mod_revision=3), True),
        (_cmp(Cmp.MOD, Cmp.LESS, mod_revision=3), False),
        (_cmp(Cmp.LEASE, Cmp.EQUAL, lease=7), True),
        (_cmp(Cmp.LEASE, Cmp.NOT_EQUAL, lease=7), False),
        # A missing key: VALUE is always false, other targets compare as zero.
        (_cmp(Cmp.VALUE, Cmp.NOT_EQUAL, key=b"missing", value=b"x"), False),
        (_cmp(Cmp.VERSION, Cmp.EQUAL, key=b"missing", version=0), True),
        (_cmp(Cmp.CREATE, Cmp.EQUAL, key=b"missing", create_revision=0), True),
        # Over a range every key must satisfy the compare.
        (Cmp(key=b"k", range_end=b"l", target=Cmp.VERSION, result=Cmp.GREATER, version=0), True),
        (Cmp(key=b"a", range_end=b"\x00", target=Cmp.VERSION, result=Cmp.EQUAL, version=2), False),
    ],
)
def test_txn_compare(store: Store, compare: pb.Compare, succeeded: bool) -> None:
    store.do(pb.LeaseGrantRequest(ID=7, TTL=60))
    store.put(b"k", b"v1")
    store.put(b"k", b"v2", lease=7)
    store.put(b"other", b"x")
    resp = store.do(pb.TxnRequest(compare=[compare]))
    assert resp.succeeded is succeeded


def test_write_txn_takes_one_revision_and_sees_its_own_writes(store: Store) -> None:
    resp = store.do(
        pb.TxnRequest(
            success=[
                pb.RequestOp(request_put=pb.PutRequest(key=b"x", value=b"1")),
                pb.RequestOp(request_put=pb.PutRequest(key=b"y", value=b"2")),
                pb.RequestOp(request_range=RR(key=b"x")),
            ]
        )
    )
    assert resp.succeeded and resp.header.revision == 2
    assert resp.responses[2].response_range.kvs[0].value == b"1"
    assert [kv.mod_revision for kv in store.get(b"x", b"z").kvs] == [2, 2]


def test_read_only_txn_takes_no_revision(filled: Store) -> None:
    resp = filled.do(pb.TxnRequest(success=[pb.RequestOp(request_range=RR(key=b"a"))]))
    assert resp.header.revision == filled.rev() == 6


def test_nested_txn_compares_see_the_state_before_the_txn(store: Store) -> None:
    store.put(b"k", b"old")
    inner = pb.TxnRequest(
        compare=[_cmp(Cmp.VALUE, Cmp.EQUAL, value=b"old")],
        success=[pb.RequestOp(request_put=pb.PutRequest(key=b"inner", value=b"yes"))],
        failure=[pb.RequestOp(request_put=pb.PutRequest(key=b"inner", value=b"no"))],
    )
    resp = store.do(
        pb.TxnRequest(
            success=[
                pb.RequestOp(request_put=pb.PutRequest(key=b"k", value=b"new")),
                pb.RequestOp(request_txn=inner),
            ]
        )
    )
    assert resp.responses[1].response_txn.succeeded
    assert store.get(b"inner").kvs[0].value == b"yes"
    assert store.rev() == 3


PUT_A = pb.RequestOp(request_put=pb.PutRequest(key=b"a", value=b"1"))
PUT_B = pb.RequestOp(request_put=pb.PutRequest(key=b"b", value=b"1"))
DEL_A = pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=b"a"))
DEL_AC = pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=b"a", range_end=b"c"))


@pytest.mark.parametrize(
    ("success", "duplicate"),
    [
        ([PUT_A, PUT_A], True),
        ([PUT_A, PUT_B], False),
        ([DEL_A, PUT_A], True),
        ([DEL_AC, PUT_B], True),
        ([DEL_A, DEL_AC], False),
        ([PUT_A, pb.RequestOp(request_txn=pb.TxnRequest(success=[PUT_A]))], True),
        (
            [pb.RequestOp(request_txn=pb.TxnRequest(success=[PUT_A], failure=[PUT_A]))],
            False,
        ),
    ],
)
def test_txn_duplicate_keys(store: Store, success: list[pb.RequestOp], duplicate: bool) -> None:
    request = pb.TxnRequest(success=success)
    if duplicate:
        assert _error(store.do, request) == errors.DUPLICATE_KEY
        assert str(errors.DUPLICATE_KEY.message) == "etcdserver: duplicate key given in txn request"
        assert store.rev() == 1
    else:
        assert store.do(request).succeeded


def test_txn_too_many_ops(store: Store) -> None:
    ops = [pb.RequestOp(request_range=RR(key=b"k%d" % i)) for i in range(129)]
    assert _error(store.do, pb.TxnRequest(success=ops)) == errors.TOO_MANY_OPS


def test_failed_txn_rolls_back_every_op(store: Store) -> None:
    request = pb.TxnRequest(
        success=[
            PUT_A,
            pb.RequestOp(request_put=pb.PutRequest(key=b"b", value=b"x", lease=999)),
        ]
    )
    assert _error(store.do, request) == errors.LEASE_NOT_FOUND
    assert store.get(b"a").count == 0 and store.rev() == 1


# ---- compaction, hashing ----


@pytest.mark.parametrize(
    ("compact_at", "kind"),
    [(100, errors.FUTURE_REV), (3, errors.COMPACTED), (2, errors.COMPACTED)],
)
def test_compaction_errors(filled: Store, compact_at: int, kind: Any) -> None:
    filled.do(pb.CompactionRequest(revision=3))
    assert _error(filled.do, pb.CompactionRequest(revision=compact_at)) == kind


def test_compaction_keeps_the_newest_revision_of_each_live_key(store: Store) -> None:
    for i in range(5):
        store.put(b"k", b"%d" % i)  # revisions 2..6
    store.put(b"gone")  # 7
    store.do(pb.DeleteRangeRequest(key=b"gone"))  # 8
    store.put(b"k", b"late")  # 9
    store.do(pb.CompactionRequest(revision=8))
    rows = list(store.backend.rows_up_to(store.rev()))
    # k's newest value at 8 (revision 6) and what came later; the tombstone AT the
    # compact revision stays so that a watch from revision 8 still sees the deletion.
    assert [(r.key, r.main, r.tombstone) for r in rows] == [
        (b"k", 6, False),
        (b"gone", 8, True),
        (b"k", 9, False),
    ]
    assert store.get(b"k", revision=8).kvs[0].value == b"4"
    assert store.get(b"k").kvs[0].value == b"late"
    store.put(b"later")  # 10
    store.do(pb.CompactionRequest(revision=10))
    rows = list(store.backend.rows_up_to(store.rev()))
    assert [(r.key, r.main) for r in rows] == [(b"k", 9), (b"later", 10)]


def _history(store: Store) -> None:
    for i in range(20):
        store.put(b"key%d" % (i % 4), b"value%d" % i)
    store.do(pb.DeleteRangeRequest(key=b"key1"))


def test_hash_kv_is_equal_for_equal_histories_and_differs_otherwise(tmp_path: Path) -> None:
    one, two, other = (Store(tmp_path / f"{n}.db") for n in ("one", "two", "other"))
    _history(one)
    _history(two)
    _history(other)
    other.put(b"extra")
    h1 = KVStore(one.backend).hash_kv(0)
    assert h1 == KVStore(two.backend).hash_kv(0)
    assert h1[2] == one.rev()
    assert KVStore(other.backend).hash_kv(0)[0] != h1[0]
    assert KVStore(other.backend).hash_kv(one.rev())[:2] == h1[:2]
    for s in (one, two):
        s.do(pb.CompactionRequest(revision=10))
    assert KVStore(one.backend).hash_kv(0) == KVStore(two.backend).hash_kv(0)
    assert KVStore(one.backend).hash_kv(0)[1] == 10


# ---- the file: compaction does not shrink it, defragmentation does; snapshots ----


def test_compaction_frees_pages_and_defragment_shrinks_the_file(store: Store) -> None:
    blob = b"x" * 2000
    for i in range(300):
        store.put(b"key%d" % (i % 3), blob)
    path = store.backend.path
    store.backend.checkpoint()
    before = path.stat().st_size
    assert store.backend.size() == before
    store.do(pb.CompactionRequest(revision=store.rev()))
    store.backend.checkpoint()
    after_compact = path.stat().st_size
    assert after_compact >= before  # the file does not shrink
    assert store.backend.size_in_use() < store.backend.size() // 4
    store.backend.defragment()
    after_defrag = path.stat().st_size
    assert after_defrag < before // 4
    assert store.backend.size() == store.backend.size_in_use() == after_defrag
    assert [kv.key for kv in store.get(b"key", b"kez").kvs] == [b"key0", b"key1", b"key2"]


def test_snapshot_restores_the_same_state(tmp_path: Path) -> None:
    source = Store(tmp_path / "source.db")
    _history(source)
    snapshot = source.backend.snapshot_bytes()
    meta = check_snapshot(snapshot)
    assert meta["current_revision"] == source.rev()
    assert meta["consistent_index"] == source.index
    target = Store(tmp_path / "target.db")
    target.put(b"will-vanish")
    target.applier.restore(snapshot)
    assert target.backend.consistent_index() == source.index
    assert KVStore(target.backend).hash_kv(0) == KVStore(source.backend).hash_kv(0)
    saved = source.backend.save_snapshot(tmp_path / "snap" / "copy.db")
    assert Backend(saved).current_revision() == source.rev()


@pytest.mark.parametrize(
    "snapshot",
    [b"", b"not a database", b"SQLite format 3\x00" + b"\x00" * 100],
)
def test_bad_snapshots_are_rejected_and_change_nothing(store: Store, snapshot: bytes) -> None:
    store.put(b"keep")
    with pytest.raises(BackendError):
        store.applier.restore(snapshot)
    assert store.keys(b"keep") == [b"keep"]


def test_writes_outside_a_transaction_are_refused(store: Store) -> None:
    with pytest.raises(BackendError, match="outside a transaction"):
        store.backend.set_current_revision(5)


def test_a_file_of_another_kind_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BackendError, match="not a usable etcdspec database"):
        Backend(path)


# ---- differential: the same requests against real etcd 3.5 and our store ----

P = pb.PutRequest
D = pb.DeleteRangeRequest
T = pb.TxnRequest
Op = pb.RequestOp


def _txn(compare: list[pb.Compare], success: list[Op], failure: list[Op] = ()) -> T:  # type: ignore[assignment]
    return T(compare=compare, success=success, failure=list(failure))


DIFFERENTIAL_SCRIPT: list[Message] = [
    P(key=b"a", value=b"1"),
    P(key=b"a", value=b"2", prev_kv=True),
    P(key=b"b", value=b"3"),
    P(key=b"ba", value=b"0"),
    P(key=b"c", value=b"9"),
    P(key=b"", value=b"x"),
    P(key=b"zz", ignore_value=True),
    P(key=b"a", value=b"x", ignore_value=True),
    P(key=b"a", ignore_value=True, prev_kv=True),
    P(key=b"a", value=b"l", lease=123),
    pb.LeaseGrantRequest(ID=123, TTL=1),
    pb.LeaseGrantRequest(ID=123, TTL=100),
    pb.LeaseGrantRequest(ID=124, TTL=100),
    P(key=b"a", value=b"l", lease=123),
    P(key=b"d", value=b"l", lease=123),
    P(key=b"a", value=b"keep-lease", ignore_lease=True),
    RR(key=b"a", range_end=b"\x00"),
    RR(key=b"\x00", range_end=b"\x00", limit=2),
    RR(key=b"a", range_end=b"c", sort_order=RR.DESCEND, sort_target=RR.VALUE),
    RR(key=b"a", range_end=b"\x00", sort_target=RR.VERSION, limit=3),
    RR(key=b"a", range_end=b"\x00", sort_target=RR.CREATE, sort_order=RR.DESCEND),
    RR(key=b"a", range_end=b"\x00", keys_only=True, min_mod_revision=4),
    RR(key=b"a", range_end=b"\x00", count_only=True, max_create_revision=4),
    RR(key=b"a", revision=2),
    RR(key=b"a", revision=1000),
    RR(key=b"b", range_end=b"a"),
    _txn(
        [Cmp(key=b"a", target=Cmp.VALUE, result=Cmp.EQUAL, value=b"keep-lease")],
        [Op(request_put=P(key=b"t1", value=b"s")), Op(request_range=RR(key=b"t", range_end=b"u"))],
        [Op(request_put=P(key=b"t1", value=b"f"))],
    ),
    _txn(
        [Cmp(key=b"missing", target=Cmp.VALUE, result=Cmp.NOT_EQUAL, value=b"x")],
        [Op(request_put=P(key=b"t2", value=b"s"))],
        [Op(request_delete_range=D(key=b"t1", prev_kv=True))],
    ),
    _txn(
        [Cmp(key=b"missing", target=Cmp.CREATE, result=Cmp.EQUAL, create_revision=0)],
        [
            Op(request_put=P(key=b"n1", value=b"1")),
            Op(
                request_txn=_txn(
                    [Cmp(key=b"n1", target=Cmp.VERSION, result=Cmp.GREATER, version=0)],
                    [Op(request_put=P(key=b"n2", value=b"inner-s"))],
                    [Op(request_put=P(key=b"n2", value=b"inner-f"))],
                )
            ),
            Op(request_range=RR(key=b"n", range_end=b"o")),
        ],
    ),
    _txn(
        [Cmp(key=b"a", range_end=b"c", target=Cmp.MOD, result=Cmp.LESS, mod_revision=100)],
        [Op(request_range=RR(key=b"a"))],
    ),
    _txn([], [Op(request_put=P(key=b"x", value=b"1")), Op(request_put=P(key=b"x", value=b"2"))]),
    _txn(
        [],
        [
            Op(request_delete_range=D(key=b"a", range_end=b"z")),
            Op(request_put=P(key=b"b", value=b"2")),
        ],
    ),
    _txn([], [Op(request_delete_range=D(key=b"nothing"))]),
    _txn([], [Op(request_range=RR(key=b"k%d" % i)) for i in range(129)]),
    _txn([], [Op(request_put=P(key=b"lease-missing", value=b"1", lease=999))]),
    D(key=b"b", range_end=b"c", prev_kv=True),
    D(key=b"nothing"),
    pb.LeaseRevokeRequest(ID=123),
    pb.LeaseRevokeRequest(ID=123),
    RR(key=b"\x00", range_end=b"\x00", keys_only=True),
    pb.CompactionRequest(revision=5),
    pb.CompactionRequest(revision=5),
    pb.CompactionRequest(revision=4),
    pb.CompactionRequest(revision=10_000),
    RR(key=b"a", revision=4),
    RR(key=b"a", range_end=b"\x00", revision=5),
    RR(key=b"a", range_end=b"\x00", revision=6),
    # Regressions found by the random differential test below:
    # count_only never sets `more`;
    RR(key=b"a", range_end=b"\x00", count_only=True, limit=1),
    # a delete to the end of the keyspace ("\0") does not clash with a put (etcd's check
    # sees an empty interval), and deletes the key put earlier in the same txn;
    _txn(
        [],
        [
            Op(request_put=P(key=b"cd", value=b"3")),
            Op(request_delete_range=D(key=b"c", range_end=b"\x00")),
        ],
    ),
    RR(key=b"\x00", range_end=b"\x00"),
    # a txn range's revision is checked against the revision before the txn.
    _txn(
        [],
        [Op(request_put=P(key=b"f", value=b"1")), Op(request_range=RR(key=b"f", revision=10_000))],
    ),
    _txn(
        [], [Op(request_put=P(key=b"f", value=b"1")), Op(request_range=RR(key=b"f", revision=16))]
    ),
    _txn(
        [], [Op(request_put=P(key=b"f", value=b"1")), Op(request_range=RR(key=b"f", revision=17))]
    ),
    _txn(
        [],
        [
            Op(request_put=P(key=b"g", value=b"1", ignore_value=True)),
            Op(request_range=RR(key=b"f", revision=10_000)),
        ],
    ),
]


def _normalize(message: Message) -> bytes:
    copy = type(message)()
    copy.CopyFrom(message)
    header = getattr(copy, "header", None)
    if header is not None:
        header.cluster_id = header.member_id = header.raft_term = 0
    return bytes(copy.SerializeToString(deterministic=True))


def _etcd_call(channel: Any, request: Message) -> Message:
    from etcdspec.impl.pb import rpc_pb2_grpc

    kv = rpc_pb2_grpc.KVStub(channel)
    lease = rpc_pb2_grpc.LeaseStub(channel)
    method = {
        pb.RangeRequest: kv.Range,
        pb.PutRequest: kv.Put,
        pb.DeleteRangeRequest: kv.DeleteRange,
        pb.TxnRequest: kv.Txn,
        pb.CompactionRequest: kv.Compact,
        pb.LeaseGrantRequest: lease.LeaseGrant,
        pb.LeaseRevokeRequest: lease.LeaseRevoke,
    }[type(request)]
    return method(request, timeout=10)  # type: ignore[no-any-return]


@pytest.mark.etcd
def test_responses_match_real_etcd(tmp_path: Path) -> None:
    import grpc
    from etcd_procs import cluster

    election_ms = 500
    ours = Store(tmp_path / "ours.db", min_ttl=min_ttl_seconds(election_ms))
    mismatches = []
    with cluster("etcd", tmp_path / "etcd", size=1, election_ms=election_ms) as etcd:
        target = etcd.endpoints[0].removeprefix("http://")
        with grpc.insecure_channel(target) as channel:
            for step, request in enumerate(DIFFERENTIAL_SCRIPT):
                try:
                    theirs: Any = _normalize(_etcd_call(channel, request))
                except grpc.RpcError as error:
                    theirs = (error.code(), error.details())
                try:
                    mine: Any = _normalize(ours.do(request))
                except RpcError as error:
                    mine = (error.code, error.message)
                if mine != theirs:
                    mismatches.append(
                        f"step {step}: {type(request).__name__} {request}\n"
                        f"  etcd: {theirs!r}\n  ours: {mine!r}"
                    )
    assert not mismatches, "\n".join(mismatches)


# ---- the newest-revision index (key_newest) agrees with a scan of the revisions ----


def test_a_key_put_and_deleted_in_one_txn_stays_deleted_through_compaction(store: Store) -> None:
    store.put(b"c", b"0")
    txn = T(
        success=[
            Op(request_put=P(key=b"cd", value=b"1")),
            Op(request_delete_range=D(key=b"c", range_end=b"\x00")),
        ]
    )
    assert store.do(txn).responses[1].response_delete_range.deleted == 2
    assert store.keys(b"\x00", b"\x00") == []
    store.do(pb.CompactionRequest(revision=store.rev()))
    assert store.keys(b"\x00", b"\x00") == []
    assert {r.main for r in store.backend.rows_up_to(store.rev())} == {store.rev()}
    store.put(b"z")
    store.do(pb.CompactionRequest(revision=store.rev()))
    assert store.keys(b"\x00", b"\x00") == [b"z"]
    assert [r.key for r in store.backend.rows_up_to(store.rev())] == [b"z"]


def test_txn_reading_below_its_own_writes_sees_the_older_state(store: Store) -> None:
    store.put(b"k", b"old")  # revision 2
    resp = store.do(
        T(
            success=[
                Op(request_put=P(key=b"k", value=b"new")),
                Op(request_range=RR(key=b"k", revision=2)),
                Op(request_range=RR(key=b"k")),
            ]
        )
    )
    assert resp.responses[1].response_range.kvs[0].value == b"old"
    assert resp.responses[2].response_range.kvs[0].value == b"new"


@pytest.mark.parametrize("seed", range(4))
def test_newest_revision_index_matches_a_scan(tmp_path: Path, seed: int) -> None:
    import random

    rng = random.Random(seed)
    store = Store(tmp_path / "m.db")
    keys = [b"k%d" % i for i in range(8)]
    for _ in range(120):
        roll = rng.random()
        if roll < 0.6:
            store.put(rng.choice(keys), b"%d" % rng.randrange(100))
        elif roll < 0.85:
            start = rng.choice(keys)
            store.do(D(key=start, range_end=rng.choice([b"", start + b"\xff", b"\x00"])))
        elif store.rev() > store.backend.compact_revision() + 1:
            store.do(
                pb.CompactionRequest(
                    revision=rng.randrange(store.backend.compact_revision() + 1, store.rev() + 1)
                )
            )
        current = store.rev()
        assert store.backend.latest(b"\x00", b"\x00", current) == store.backend._latest_scan(
            b"\x00", b"\x00", current
        )
    store.backend.close()
    # A file whose index is missing gets it rebuilt on open.
    import sqlite3

    with sqlite3.connect(tmp_path / "m.db") as raw:
        raw.execute("DELETE FROM key_newest")
    reopened = Backend(tmp_path / "m.db")
    current = reopened.current_revision()
    assert reopened.latest(b"\x00", b"\x00", current) == reopened._latest_scan(
        b"\x00", b"\x00", current
    )


def _random_request(rng: Any, revision: int, compact: int) -> Message:
    keys = [b"a", b"ab", b"b", b"c", b"cd"]

    def key() -> bytes:
        return bytes(rng.choice(keys))

    def range_end(start: bytes) -> bytes:
        return bytes(rng.choice([b"", b"", b"\x00", start + b"\xff", b"c"]))

    def put() -> pb.PutRequest:
        request = P(key=key(), value=b"%d" % rng.randrange(5), prev_kv=rng.random() < 0.3)
        roll = rng.random()
        if roll < 0.2:
            request.lease = rng.choice([11, 12, 13])
        elif roll < 0.3:
            request.ignore_lease = True
        elif roll < 0.35:
            request.ignore_value = True
            request.value = b""
        return request

    def delete() -> pb.DeleteRangeRequest:
        start = key()
        return D(key=start, range_end=range_end(start), prev_kv=rng.random() < 0.3)

    def get() -> pb.RangeRequest:
        start = key()
        past = rng.randrange(max(1, compact - 1), revision + 2) if rng.random() < 0.4 else 0
        return RR(
            key=start,
            range_end=range_end(start),
            revision=past,
            limit=rng.choice([0, 0, 1, 2]),
            keys_only=rng.random() < 0.2,
            count_only=rng.random() < 0.1,
        )

    def compare() -> pb.Compare:
        target = rng.choice([Cmp.VERSION, Cmp.CREATE, Cmp.MOD, Cmp.VALUE, Cmp.LEASE])
        result = rng.choice([Cmp.EQUAL, Cmp.NOT_EQUAL, Cmp.GREATER, Cmp.LESS])
        c = Cmp(key=key(), target=target, result=result)
        if target == Cmp.VALUE:
            c.value = b"%d" % rng.randrange(5)
        elif target == Cmp.VERSION:
            c.version = rng.randrange(3)
        elif target == Cmp.CREATE:
            c.create_revision = rng.randrange(revision + 1)
        elif target == Cmp.LEASE:
            c.lease = rng.choice([0, 11, 12])
        else:
            c.mod_revision = rng.randrange(revision + 1)
        return c

    def op() -> pb.RequestOp:
        roll = rng.random()
        if roll < 0.4:
            return Op(request_put=put())
        if roll < 0.6:
            return Op(request_delete_range=delete())
        return Op(request_range=get())

    roll = rng.random()
    if roll < 0.35:
        return put()
    if roll < 0.5:
        return delete()
    if roll < 0.7:
        return get()
    if roll < 0.8:
        return T(
            compare=[compare() for _ in range(rng.randrange(3))],
            success=[op() for _ in range(rng.randrange(3))],
            failure=[op() for _ in range(rng.randrange(3))],
        )
    if roll < 0.87:
        return pb.LeaseGrantRequest(ID=rng.choice([11, 12, 13]), TTL=1000)
    if roll < 0.94:
        return pb.LeaseRevokeRequest(ID=rng.choice([11, 12, 13]))
    return pb.CompactionRequest(revision=rng.randrange(max(1, compact), revision + 2))


def _outcomes(channel: Any, ours: Store, request: Message) -> tuple[Any, Any]:
    """(etcd's, ours): the normalized response bytes, or (status code, message)."""
    import grpc

    try:
        theirs: Any = _normalize(_etcd_call(channel, request))
    except grpc.RpcError as error:
        theirs = (error.code(), error.details())
    try:
        mine: Any = _normalize(ours.do(request))
    except RpcError as error:
        mine = (error.code, error.message)
    return theirs, mine


@pytest.mark.etcd
def test_random_requests_match_real_etcd(tmp_path: Path) -> None:
    import random

    import grpc
    from etcd_procs import cluster

    ours = Store(tmp_path / "ours.db")
    rng = random.Random(20261130)
    mismatches = []
    with cluster("etcd", tmp_path / "etcd", size=1) as etcd:
        target = etcd.endpoints[0].removeprefix("http://")
        with grpc.insecure_channel(target) as channel:
            for step in range(300):
                request = _random_request(rng, ours.rev(), ours.backend.compact_revision())
                theirs, mine = _outcomes(channel, ours, request)
                if mine != theirs:
                    mismatches.append(
                        f"step {step}: {request}\n  etcd: {theirs!r}\n  ours: {mine!r}"
                    )
                    break
    assert not mismatches, "\n".join(mismatches)


WATCH_SPECS: list[dict[str, Any]] = [
    {"key": b"\x00", "range_end": b"\x00"},
    {"key": b"a", "range_end": b"\x00", "prev_kv": True},
    {"key": b"c"},
    {"key": b"a", "range_end": b"b", "filters": [pb.WatchCreateRequest.NOPUT], "prev_kv": True},
    {"key": b"b", "range_end": b"d", "filters": [pb.WatchCreateRequest.NODELETE]},
]


def _event_bytes(events: Any) -> list[bytes]:
    return [bytes(e.SerializeToString(deterministic=True)) for e in events]


@pytest.mark.etcd
def test_watch_events_match_real_etcd(tmp_path: Path) -> None:
    """Live watchers and watchers catching up from the past see what etcd's see."""
    import queue
    import random
    import threading
    import time

    import grpc
    from etcd_procs import cluster

    from etcdspec.impl.pb import rpc_pb2_grpc

    ours = Store(tmp_path / "ours.db")
    rng = random.Random(7)
    requests: queue.Queue[pb.WatchRequest | None] = queue.Queue()
    received: dict[int, list[bytes]] = {}
    lock = threading.Lock()

    def outgoing() -> Any:
        while (item := requests.get()) is not None:
            yield item

    with cluster("etcd", tmp_path / "etcd", size=1) as etcd:
        target = etcd.endpoints[0].removeprefix("http://")
        with grpc.insecure_channel(target) as channel:
            stream = rpc_pb2_grpc.WatchStub(channel).Watch(outgoing())

            def reader() -> None:
                try:
                    for resp in stream:
                        with lock:
                            received.setdefault(resp.watch_id, []).extend(_event_bytes(resp.events))
                except grpc.RpcError:
                    return

            thread = threading.Thread(target=reader, daemon=True)
            thread.start()
            try:
                handles = {}
                for watch_id, spec in enumerate(WATCH_SPECS, start=1):
                    requests.put(
                        pb.WatchRequest(
                            create_request=pb.WatchCreateRequest(watch_id=watch_id, **spec)
                        )
                    )
                    handles[watch_id] = ours.applier.watch_hub.create(watch_id, **spec)
                time.sleep(0.5)  # the creates are asynchronous in etcd
                for _ in range(150):
                    request = _random_request(rng, ours.rev(), ours.backend.compact_revision())
                    if isinstance(request, pb.CompactionRequest):
                        continue  # keep history for the catch-up watchers below
                    theirs, mine = _outcomes(channel, ours, request)
                    assert mine == theirs, request
                # Watchers starting in the past catch up from the backend.
                start = max(2, ours.rev() - 40)
                for offset, spec in enumerate(WATCH_SPECS[:3]):
                    watch_id = 100 + offset
                    requests.put(
                        pb.WatchRequest(
                            create_request=pb.WatchCreateRequest(
                                watch_id=watch_id, start_revision=start, **spec
                            )
                        )
                    )
                    handles[watch_id] = ours.applier.watch_hub.create(
                        watch_id, start_revision=start, **spec
                    )
                expected = {
                    watch_id: _event_bytes(
                        e.to_pb(with_prev_kv=b.with_prev_kv)
                        for b in ours.applier.watch_hub.take(handle)
                        for e in b.events
                    )
                    for watch_id, handle in handles.items()
                }
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    with lock:
                        done = all(len(received.get(w, [])) >= len(v) for w, v in expected.items())
                    if done:
                        break
                    time.sleep(0.05)
                time.sleep(0.3)  # anything extra etcd would send arrives now
            finally:
                requests.put(None)
                stream.cancel()
                thread.join(timeout=5)
    assert all(expected.values()), "a watcher saw no events: the script is too small"
    with lock:
        for watch_id, events in expected.items():
            assert received.get(watch_id, []) == events, f"watch {watch_id}"


def test_a_failed_commit_leaves_no_transaction_open(store: Store) -> None:
    import sqlite3

    store.put(b"k", b"before")
    # A deferred foreign-key violation makes COMMIT itself fail, and SQLite then keeps
    # the transaction open.
    store.backend._conn.execute("PRAGMA foreign_keys = ON")
    store.backend._conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    store.backend._conn.execute(
        "CREATE TABLE child (id INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"
    )
    with pytest.raises(sqlite3.IntegrityError), store.backend.transaction():
        store.backend._conn.execute("INSERT INTO child (id) VALUES (424242)")
    assert not store.backend._conn.in_transaction
    store.put(b"k", b"after")
    assert store.get(b"k").kvs[0].value == b"after"

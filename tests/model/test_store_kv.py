"""KV semantics of the store model, one table row per etcd behaviour it pins.

Each row: the requests that set the store up, the request under test, and the expected
response's describe() text (or the StoreError class and the state left unchanged).
Facts cited from etcd's docs (api_guarantees.md, api.md "Key-Value API") and source
(server/etcdserver/apply.go, api/v3rpc/key.go, server/mvcc/kvstore_txn.go).
"""

from __future__ import annotations

import pytest

from etcdspec.model.errors import (
    CompactedError,
    DuplicateKeyError,
    EmptyKeyError,
    FutureRevisionError,
    KeyNotFoundError,
    LeaseNotFoundError,
    LeaseProvidedError,
    StoreError,
    TooManyOpsError,
    ValueProvidedError,
)
from etcdspec.model.requests import (
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    Request,
    SortOrder,
    SortTarget,
    TxnRequest,
    prefix_end,
)
from etcdspec.model.store import StoreConfig, StoreState, apply, apply_all, initial_state

EQ, NE, GT, LT = (
    CompareResult.EQUAL,
    CompareResult.NOT_EQUAL,
    CompareResult.GREATER,
    CompareResult.LESS,
)
VALUE, VERSION, CREATE, MOD, LEASE = (
    CompareTarget.VALUE,
    CompareTarget.VERSION,
    CompareTarget.CREATE,
    CompareTarget.MOD,
    CompareTarget.LEASE,
)


def put(key: str, value: str = "", **kw: object) -> PutRequest:
    return PutRequest(key.encode(), value.encode(), **kw)  # type: ignore[arg-type]


def get(key: str, end: str | bytes = b"", **kw: object) -> RangeRequest:
    end_bytes = end.encode() if isinstance(end, str) else end
    return RangeRequest(key.encode(), end_bytes, **kw)  # type: ignore[arg-type]


def delete(key: str, end: str | bytes = b"", prev_kv: bool = False) -> DeleteRangeRequest:
    end_bytes = end.encode() if isinstance(end, str) else end
    return DeleteRangeRequest(key.encode(), end_bytes, prev_kv)


def cmp(key: str, target: CompareTarget, result: CompareResult, operand: int | str) -> Compare:
    value = operand.encode() if isinstance(operand, str) else operand
    return Compare(key.encode(), target, result, value)


def txn(compare: list[Compare], success: list[object], failure: list[object] = []) -> TxnRequest:  # noqa: B006
    return TxnRequest(tuple(compare), tuple(success), tuple(failure))  # type: ignore[arg-type]


def setup(*requests: Request) -> StoreState:
    state, _ = apply_all(initial_state(), list(requests))
    return state


ABC = (put("a", "1"), put("b", "2"), put("c", "3"))  # revisions 2, 3, 4
SORTED = (*ABC, put("b", "9"))  # b: version 2, mod revision 5


RESPONSE_CASES = [
    # The store starts at revision 1 with no keys (etcd's first revision is 1).
    ("empty store", (), get("a"), "range-> rev 1 count 0 []"),
    # One revision per put; create == mod, version 1 on creation.
    ("first put", (), put("a", "1"), "put-> rev 2"),
    (
        "put prev_kv",
        (put("a", "1"),),
        put("a", "2", prev_kv=True),
        "put-> rev 3 prev a=1(c2 m2 v1)",
    ),
    ("put prev_kv on new key", (), put("a", "2", prev_kv=True), "put-> rev 2"),
    # version counts writes since creation; create_revision kept.
    (
        "version counts",
        (put("a", "1"), put("a", "2")),
        get("a"),
        "range-> rev 3 count 1 [a=2(c2 m3 v2)]",
    ),
    # after a delete the key is re-created: create_revision and version restart.
    (
        "recreate after delete",
        (put("a", "1"), put("a", "2"), delete("a")),
        put("a", "3", prev_kv=True),
        "put-> rev 5",
    ),
    (
        "recreated key",
        (put("a", "1"), put("a", "2"), delete("a"), put("a", "3")),
        get("a"),
        "range-> rev 5 count 1 [a=3(c5 m5 v1)]",
    ),
    # Range [key, range_end); prefix end computed by the caller.
    ("range a..c", ABC, get("a", "c"), "range-> rev 4 count 2 [a=1(c2 m2 v1), b=2(c3 m3 v1)]"),
    (
        "prefix",
        (put("ab", "1"), put("ac", "2"), put("b", "3")),
        get("a", prefix_end(b"a")),
        "range-> rev 4 count 2 [ab=1(c2 m2 v1), ac=2(c3 m3 v1)]",
    ),
    # range_end "\0": every key >= key (mkGteRange).
    (
        "from b to end",
        ABC,
        get("b", b"\x00"),
        "range-> rev 4 count 2 [b=2(c3 m3 v1), c=3(c4 m4 v1)]",
    ),
    ("all keys", ABC, RangeRequest(b"\x00", b"\x00", count_only=True), "range-> rev 4 count 3 []"),
    # range_end < key: the index walk stops at once, an empty result (no error).
    # Checked on etcd 3.5.1: `etcdctl get c a` answers an empty range.
    ("range end below key", ABC, get("c", "a"), "range-> rev 4 count 0 []"),
    # limit cuts kvs, count stays the total, more says there are more.
    (
        "limit",
        ABC,
        get("a", b"\x00", limit=2),
        "range-> rev 4 count 3 more [a=1(c2 m2 v1), b=2(c3 m3 v1)]",
    ),
    (
        "limit equal count",
        ABC,
        get("a", b"\x00", limit=3),
        "range-> rev 4 count 3 [a=1(c2 m2 v1), b=2(c3 m3 v1), c=3(c4 m4 v1)]",
    ),
    ("keys_only", ABC[:1], get("a", keys_only=True), "range-> rev 2 count 1 [a=''(c2 m2 v1)]"),
    ("count_only", ABC, get("a", b"\x00", count_only=True, limit=1), "range-> rev 4 count 3 []"),
    # Sorting and revision filters (apply.go Range): count is taken before the filters;
    # a non-key target sorts ASCEND by default; ties keep key order; limit applies last.
    # Sorts checked on etcd 3.5.1 (get --sort-by=VERSION --order=DESCEND: b, a, c).
    (
        "sort version descend",
        SORTED,
        get(
            "a",
            b"\x00",
            sort_target=SortTarget.VERSION,
            sort_order=SortOrder.DESCEND,
            keys_only=True,
        ),
        "range-> rev 5 count 3 [b=''(c3 m5 v2), a=''(c2 m2 v1), c=''(c4 m4 v1)]",
    ),
    (
        "sort mod default ascend",
        SORTED,
        get("a", b"\x00", sort_target=SortTarget.MOD, limit=2, keys_only=True),
        "range-> rev 5 count 3 more [a=''(c2 m2 v1), c=''(c4 m4 v1)]",
    ),
    (
        "sort key descend",
        SORTED,
        get("a", b"\x00", sort_order=SortOrder.DESCEND, count_only=False, keys_only=True),
        "range-> rev 5 count 3 [c=''(c4 m4 v1), b=''(c3 m5 v2), a=''(c2 m2 v1)]",
    ),
    (
        "min mod revision",
        SORTED,
        get("a", b"\x00", min_mod_revision=4, keys_only=True),
        "range-> rev 5 count 3 [b=''(c3 m5 v2), c=''(c4 m4 v1)]",
    ),
    (
        "max create revision with limit",
        SORTED,
        get("a", b"\x00", max_create_revision=3, limit=1, keys_only=True),
        "range-> rev 5 count 3 more [a=''(c2 m2 v1)]",
    ),
    # Reads at a past revision see the store as it was; header is the current revision.
    # rangeKeys: a revision <= 0 reads now (etcd 3.5.1: get a --rev=-3 answers a).
    (
        "negative read revision means now",
        ABC,
        get("a", revision=-3),
        "range-> rev 4 count 1 [a=1(c2 m2 v1)]",
    ),
    (
        "txn read revision -1 passes checkRange",
        ABC,
        txn([], [get("a", revision=-1)]),
        "txn-> rev 4 success [range-> rev 4 count 1 [a=1(c2 m2 v1)]]",
    ),
    (
        "past read",
        (put("a", "1"), put("a", "2")),
        get("a", revision=2),
        "range-> rev 3 count 1 [a=1(c2 m2 v1)]",
    ),
    ("past read before creation", ABC, get("c", revision=3), "range-> rev 4 count 0 []"),
    (
        "past read of deleted key",
        (put("a", "1"), delete("a")),
        get("a", revision=2),
        "range-> rev 3 count 1 [a=1(c2 m2 v1)]",
    ),
    (
        "past range",
        (*ABC, delete("a", "c")),
        get("a", b"\x00", revision=4, count_only=True),
        "range-> rev 5 count 3 []",
    ),
    # A read AT the compact revision succeeds (kvstore_txn rangeKeys: rev < compactMainRev fails).
    (
        "read at compact revision",
        (put("a", "1"), put("a", "2"), CompactionRequest(3)),
        get("a", revision=3),
        "range-> rev 3 count 1 [a=2(c2 m3 v2)]",
    ),
    (
        "compaction keeps latest version at or below compact revision",
        (put("a", "1"), put("b", "1"), put("b", "2"), CompactionRequest(4), put("a", "9")),
        get("a", revision=4),
        "range-> rev 5 count 1 [a=1(c2 m2 v1)]",
    ),
    # Deletes: count of deleted keys; prev_kvs only when asked; a delete of nothing takes no revision.
    ("delete one", ABC, delete("a"), "delete-> rev 5 deleted 1"),
    (
        "delete range prev_kv",
        ABC,
        delete("a", "c", prev_kv=True),
        "delete-> rev 5 deleted 2 prev [a=1(c2 m2 v1), b=2(c3 m3 v1)]",
    ),
    ("delete nothing", ABC, delete("x"), "delete-> rev 4 deleted 0"),
    ("delete end below key", ABC, delete("c", "a"), "delete-> rev 4 deleted 0"),
    # Compaction takes no revision.
    ("compact", ABC, CompactionRequest(3), "compact-> rev 4"),
    ("compact 0 on a fresh store", (), CompactionRequest(0), "compact-> rev 1"),
    # Txn: all writes share one revision; reads in it see its earlier writes.
    (
        "txn writes share a revision",
        ABC,
        txn(
            [cmp("a", VALUE, EQ, "1")],
            [put("a", "x"), put("d", "y"), delete("b"), get("a", b"\x00")],
        ),
        "txn-> rev 5 success [put-> rev 5; put-> rev 5; delete-> rev 5 deleted 1; "
        "range-> rev 5 count 3 [a=x(c2 m5 v2), c=3(c4 m4 v1), d=y(c5 m5 v1)]]",
    ),
    (
        "txn failure branch",
        ABC,
        txn([cmp("a", VALUE, EQ, "0")], [put("a", "x")], [get("a")]),
        "txn-> rev 4 failure [range-> rev 4 count 1 [a=1(c2 m2 v1)]]",
    ),
    (
        "read-only txn takes no revision",
        ABC,
        txn([], [get("a")]),
        "txn-> rev 4 success [range-> rev 4 count 1 [a=1(c2 m2 v1)]]",
    ),
    (
        "txn deleting nothing takes no revision",
        ABC,
        txn([], [delete("zz")]),
        "txn-> rev 4 success [delete-> rev 4 deleted 0]",
    ),
    ("empty txn", ABC, txn([], []), "txn-> rev 4 success []"),
    # Compares on a missing key: VALUE always false; version/create/mod/lease compare with 0.
    # Checked on etcd 3.5.1: txn [value("x") = ""] on a missing x takes the failure branch.
    (
        "value compare on missing key is false",
        (),
        txn([cmp("x", VALUE, EQ, "")], [], [get("x")]),
        "txn-> rev 1 failure [range-> rev 1 count 0 []]",
    ),
    (
        "value not_equal on missing key is false",
        (),
        txn([cmp("x", VALUE, NE, "v")], [], []),
        "txn-> rev 1 failure []",
    ),
    (
        "version 0 on missing key",
        (),
        txn([cmp("x", VERSION, EQ, 0)], [put("x", "1")]),
        "txn-> rev 2 success [put-> rev 2]",
    ),
    ("create 0 on missing key", (), txn([cmp("x", CREATE, EQ, 0)], []), "txn-> rev 1 success []"),
    ("mod greater", ABC, txn([cmp("b", MOD, GT, 2)], []), "txn-> rev 4 success []"),
    ("mod less", ABC, txn([cmp("b", MOD, LT, 3)], []), "txn-> rev 4 failure []"),
    ("version not_equal", ABC, txn([cmp("b", VERSION, NE, 1)], []), "txn-> rev 4 failure []"),
    ("lease equal 0", ABC, txn([cmp("b", LEASE, EQ, 0)], []), "txn-> rev 4 success []"),
    (
        "value greater (bytes order)",
        ABC,
        txn([cmp("b", VALUE, GT, "10")], []),
        "txn-> rev 4 success []",
    ),
    # A compare with range_end holds only if it holds for every key in the range.
    (
        "range compare all",
        ABC,
        txn([Compare(b"a", MOD, LT, 5, b"\x00")], []),
        "txn-> rev 4 success []",
    ),
    (
        "range compare one fails",
        ABC,
        txn([Compare(b"a", MOD, LT, 4, b"\x00")], []),
        "txn-> rev 4 failure []",
    ),
    (
        "all compares must hold",
        ABC,
        txn([cmp("a", VALUE, EQ, "1"), cmp("b", VALUE, EQ, "x")], []),
        "txn-> rev 4 failure []",
    ),
    # Nested txn: its compares see the store before the outer txn (compareToPath); its
    # response header is empty (etcd 3.5.1 answers a nested txn with header {}).
    (
        "nested compare sees pre-txn state",
        ABC,
        txn(
            [],
            [put("a", "new"), txn([cmp("a", VALUE, EQ, "1")], [put("n", "yes")], [put("n", "no")])],
        ),
        "txn-> rev 5 success [put-> rev 5; txn-> rev 0 success [put-> rev 5]]",
    ),
    # Puts in then/else of one nested txn may name the same key (only one branch runs).
    (
        "same key in then and else",
        ABC,
        txn([], [txn([cmp("a", VALUE, EQ, "1")], [put("k", "t")], [put("k", "e")])]),
        "txn-> rev 5 success [txn-> rev 0 success [put-> rev 5]]",
    ),
    # Two deletes overlapping are fine (checkIntervals checks puts only).
    (
        "overlapping deletes",
        ABC,
        txn([], [delete("a", "c"), delete("b")]),
        "txn-> rev 5 success [delete-> rev 5 deleted 2; delete-> rev 5 deleted 0]",
    ),
    # etcd quirk: a delete to the end (range_end "\0") is an empty literal interval in
    # checkIntervals, so a put of a key it covers is NOT a duplicate. Checked on etcd 3.5.1:
    # txn [del a --from-key; put b z] succeeds at one revision; [del a c; put b] fails.
    (
        "delete to end and put are not duplicates",
        ABC,
        txn([], [delete("a", b"\x00"), put("b", "z")]),
        "txn-> rev 5 success [delete-> rev 5 deleted 3; put-> rev 5]",
    ),
    # put with ignore_value keeps the value (and ignore_lease the lease).
    ("ignore_value", ABC, put("a", ignore_value=True), "put-> rev 5"),
]


@pytest.mark.parametrize(
    ("setup_requests", "request_", "expected"),
    [pytest.param(s, r, e, id=name) for name, s, r, e in RESPONSE_CASES],
)
def test_store_response_matches_etcd(
    setup_requests: tuple[Request, ...], request_: Request, expected: str
) -> None:
    state = setup(*setup_requests)
    _, response = apply(state, request_)
    assert response.describe() == expected


ERROR_CASES = [
    # v3rpc checkRangeRequest / checkPutRequest / checkDeleteRequest: ErrGRPCEmptyKey.
    ("range empty key", (), get(""), EmptyKeyError),
    ("put empty key", (), put(""), EmptyKeyError),
    ("delete empty key", (), delete(""), EmptyKeyError),
    ("compare empty key", (), txn([cmp("", VERSION, EQ, 0)], []), EmptyKeyError),
    ("txn op empty key", (), txn([], [put("")]), EmptyKeyError),
    # ErrFutureRev / ErrCompacted on reads (kvstore_txn rangeKeys).
    ("read future revision", ABC, get("a", revision=5), FutureRevisionError),
    (
        "read below compact revision",
        (*ABC, CompactionRequest(3)),
        get("a", revision=2),
        CompactedError,
    ),
    ("txn read future revision", ABC, txn([], [get("a", revision=9)]), FutureRevisionError),
    # applierV3backend.Txn: checkPut on the whole path first, then checkRange.
    (
        "txn put check before range check",
        ABC,
        txn([], [get("a", revision=9), put("a", "1", lease=7)]),
        LeaseNotFoundError,
    ),
    # checkRange: a revision below compactMainRev (-1 before any compaction) fails.
    ("txn negative read revision", ABC, txn([], [get("a", revision=-3)]), CompactedError),
    (
        "txn read compacted",
        (*ABC, CompactionRequest(3)),
        txn([], [put("z"), get("a", revision=2)]),
        CompactedError,
    ),
    # Compaction: <= current compact revision is ErrCompacted, > revision ErrFutureRev.
    ("compact twice", (*ABC, CompactionRequest(3)), CompactionRequest(3), CompactedError),
    ("compact backwards", (*ABC, CompactionRequest(3)), CompactionRequest(2), CompactedError),
    ("compact future", ABC, CompactionRequest(5), FutureRevisionError),
    # compactMainRev starts at -1: compact(0) works once on a fresh store (etcd 3.5.1).
    ("compact 0 twice", (CompactionRequest(0),), CompactionRequest(0), CompactedError),
    ("compact negative", (), CompactionRequest(-1), CompactedError),
    # Unknown lease on put: ErrLeaseNotFound, also inside a txn's chosen branch.
    ("put unknown lease", (), put("a", "1", lease=7), LeaseNotFoundError),
    ("txn put unknown lease", ABC, txn([], [put("z"), put("a", "1", lease=7)]), LeaseNotFoundError),
    # ignore_value / ignore_lease on a missing key: ErrKeyNotFound; with a value: ErrValueProvided.
    ("ignore_value missing key", (), put("a", ignore_value=True), KeyNotFoundError),
    ("ignore_value with value", ABC, put("a", "1", ignore_value=True), ValueProvidedError),
    ("ignore_lease with lease", ABC, put("a", "1", lease=3, ignore_lease=True), LeaseProvidedError),
    # A plain put checks the lease first, a put in a txn the key first (apply.go Put vs
    # checkPut; found by the differential test against etcd 3.5.1).
    (
        "put ignore_value missing key unknown lease",
        (),
        put("a", lease=7, ignore_value=True),
        LeaseNotFoundError,
    ),
    (
        "txn put ignore_value missing key unknown lease",
        (),
        txn([], [put("a", lease=7, ignore_value=True)]),
        KeyNotFoundError,
    ),
    # checkIntervals: ErrDuplicateKey.
    ("put twice", (), txn([], [put("a", "1"), put("a", "2")]), DuplicateKeyError),
    ("put and delete", (), txn([], [put("a", "1"), delete("a")]), DuplicateKeyError),
    ("delete range covers put", (), txn([], [delete("a", "c"), put("b")]), DuplicateKeyError),
    ("nested put twice", (), txn([], [put("a"), txn([], [put("a")])]), DuplicateKeyError),
    (
        "nested put under outer delete",
        (),
        txn([], [delete("a", "z"), txn([], [], [put("b")])]),
        DuplicateKeyError,
    ),
    ("duplicate in failure branch", (), txn([], [], [put("a"), put("a")]), DuplicateKeyError),
    # --max-txn-ops (default 128): ErrTooManyOps.
    ("too many ops", (), txn([], [put(f"k{i}") for i in range(129)]), TooManyOpsError),
]


@pytest.mark.parametrize(
    ("setup_requests", "request_", "error"),
    [pytest.param(s, r, e, id=name) for name, s, r, e in ERROR_CASES],
)
def test_store_rejects_like_etcd_and_changes_nothing(
    setup_requests: tuple[Request, ...], request_: Request, error: type[StoreError]
) -> None:
    state = setup(*setup_requests)
    before = state.describe()
    with pytest.raises(error) as raised:
        apply(state, request_)
    assert raised.value.message.startswith("etcdserver: ")
    assert state.describe() == before


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (CompactedError, "OUT_OF_RANGE", "etcdserver: mvcc: required revision has been compacted"),
        (
            FutureRevisionError,
            "OUT_OF_RANGE",
            "etcdserver: mvcc: required revision is a future revision",
        ),
        (LeaseNotFoundError, "NOT_FOUND", "etcdserver: requested lease not found"),
        (DuplicateKeyError, "INVALID_ARGUMENT", "etcdserver: duplicate key given in txn request"),
        (EmptyKeyError, "INVALID_ARGUMENT", "etcdserver: key is not provided"),
    ],
)
def test_store_errors_carry_etcd_code_and_text(
    error: type[StoreError], code: str, message: str
) -> None:
    # api/v3rpc/rpctypes/error.go
    assert (error.code, error.message) == (code, message)


def test_store_max_txn_ops_is_configurable() -> None:
    state = initial_state(StoreConfig(max_txn_ops=2))
    with pytest.raises(TooManyOpsError):
        apply(state, txn([], [put("a"), put("b"), put("c")]))
    _, response = apply(state, txn([], [put("a"), put("b")]))
    assert response.describe() == "txn-> rev 2 success [put-> rev 2; put-> rev 2]"


def test_store_ignore_value_keeps_value_and_lease() -> None:
    state = setup(put("a", "1"))
    state, _ = apply(state, put("a", ignore_value=True))
    assert state.get(b"a") is not None
    assert state.get(b"a").describe() == "a=1(c2 m3 v2)"  # type: ignore[union-attr]


def test_store_states_compare_by_content() -> None:
    one = setup(put("a", "1"), put("b", "2"))
    two = setup(put("a", "1"), put("b", "2"))
    other = setup(put("b", "2"), put("a", "1"))
    assert one == two and hash(one) == hash(two)
    assert one != other  # the same keys, but a different history: past reads differ
    same_after_read, _ = apply(one, get("a"))
    assert same_after_read is one


def test_store_apply_leaves_the_old_state_valid() -> None:
    old = setup(put("a", "1"))
    new, _ = apply(old, put("a", "2"))
    assert old.get(b"a").value == b"1"  # type: ignore[union-attr]
    assert new.get(b"a").value == b"2"  # type: ignore[union-attr]
    assert old.revision == 2 and new.revision == 3

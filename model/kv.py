"""MVCC key-value semantics of the store model: range, put, delete, compare and txn.

Contract: pure functions over a committed `StoreState` plus `WriteTxn`, a short-lived
working copy that one `apply()` uses to run a write and then hands back as changes
(key overlay, lease moves, events per revision). Nothing here mutates a StoreState.

etcd facts this follows (server/etcdserver/api/v3rpc/key.go, server/etcdserver/apply.go,
server/mvcc/kvstore_txn.go, index.go, key_index.go):
- a range end of b"\\x00" means every key >= key; a range end below the key selects
  nothing (the index walk stops at once): an empty result, not an error;
- reads at revision r fail with ErrFutureRev if r > current and ErrCompacted if
  r < compact revision (a read AT the compact revision succeeds); r <= 0 is "now";
- `count` is every key in range, ignoring limit; `more` says the limit cut the result;
- all write ops of one txn share one revision; a txn or delete that changes nothing
  takes no revision; reads inside a write txn see the txn's earlier writes;
- the compares of a txn and of all its nested txns are evaluated against the store as
  it was before the txn (compareToPath), and so are the checks on the chosen branch
  (lease exists, ignore_value key exists, range revisions) before anything is written;
- a VALUE compare on a missing key is false; other targets compare against 0;
  a compare with range_end holds only if it holds for every key in the range;
- within one branch a key may not be put twice nor put and deleted (checkIntervals;
  its interval test treats a delete range end of b"\\x00" literally, so such a delete
  never conflicts with a put, as in etcd);
- check order: a plain put checks its lease before ignore_value's key; a txn checks
  every put of its path (key, then lease) before every range of it (revision against
  compactMainRev); a nested txn's response header is empty (revision 0);
- sorting and the min/max mod/create revision filters follow etcd's applier: count is
  taken before the filters, a non-key target sorts ascending by default, ties stay in
  key order (etcd's Go sort.Sort keeps them so only below 12 results; beyond that
  etcd's tie order is unspecified), the limit applies last.
Every fact above is also checked response-for-response against etcd 3.5.1 and 3.4.23
by tests/model/test_store_vs_etcd.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.errors import (
    CompactedError,
    DuplicateKeyError,
    EmptyKeyError,
    FutureRevisionError,
    KeyNotFoundError,
    LeaseNotFoundError,
    LeaseProvidedError,
    TooManyOpsError,
    ValueProvidedError,
)
from etcdspec.model.requests import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    Event,
    EventType,
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    ResponseHeader,
    SortOrder,
    SortTarget,
    TxnOp,
    TxnOpResponse,
    TxnRequest,
    TxnResponse,
    in_range,
    show_bytes,
)

if TYPE_CHECKING:
    from etcdspec.model.store import StoreState

DEFAULT_MAX_TXN_OPS = 128
"""etcd's --max-txn-ops default."""


# ---------------------------------------------------------------------------- reads


def check_read_revision(state: StoreState, revision: int) -> None:
    """Raise what etcd raises for a read at `revision` (0 or less means now)."""
    if revision > state.revision:
        raise FutureRevisionError(
            f"read at revision {revision} but the store is at {state.revision}"
        )
    if 0 < revision < state.compact_revision:
        raise CompactedError(
            f"read at revision {revision} but the store is compacted up to "
            f"{state.compact_revision}; read at {state.compact_revision} or later"
        )


def keys_at(state: StoreState, key: bytes, range_end: bytes, revision: int) -> list[KeyValue]:
    """The key-values in range at `revision` (<= 0: now), sorted by key. Checked revision."""
    if not range_end:
        current = state.live.get(key)
        if not 0 < revision < state.revision:  # one key now: no history to walk back
            return [] if current is None else [current]
        found: dict[bytes, KeyValue | None] = {key: current} if current is not None else {}
    else:
        found = {k: kv for k, kv in state.live.items() if in_range(k, key, range_end)}
    if 0 < revision < state.revision:
        node = state.history
        while node is not None and node.revision > revision:
            for event in reversed(node.events):
                event_key = event.kv.key
                if in_range(event_key, key, range_end):
                    found[event_key] = event.prev_kv
            node = node.parent
    return [kv for _, kv in sorted(found.items()) if kv is not None]


def range_response(
    kvs: list[KeyValue], request: RangeRequest, header_revision: int, bugs: BugSet = NO_BUGS
) -> RangeResponse:
    """Cut `kvs` (every key in range, sorted by key) to what the request asks for.

    As etcd's applier Range: `count` is taken before the revision filters; the filters
    prune, then the sort (stable, ties in key order), then the limit sets `more`.
    (Mutations range_more_at_exact_limit and range_count_after_limit break the last two.)
    """
    header = ResponseHeader(header_revision)
    count = len(kvs)
    if request.count_only:
        return RangeResponse(header, (), False, count)
    if request.has_filters():
        kvs = [kv for kv in kvs if _passes_filters(request, kv)]
    order = request.sort_order
    if request.sort_target is not SortTarget.KEY and order is SortOrder.NONE:
        order = SortOrder.ASCEND  # etcd sorts ASCEND by default for a non-key target
    if order is not SortOrder.NONE and not (
        request.sort_target is SortTarget.KEY and order is SortOrder.ASCEND
    ):
        field = _SORT_FIELDS[request.sort_target]
        kvs = sorted(kvs, key=field, reverse=order is SortOrder.DESCEND)
    more = False
    if request.limit > 0 and len(kvs) > request.limit:
        kvs = kvs[: request.limit]
        more = True
    elif request.limit > 0 and len(kvs) == request.limit and bugs.on("range_more_at_exact_limit"):
        more = True  # Mutation: `>=` where etcd's `>` is
    if bugs.on("range_count_after_limit"):
        count = len(kvs)  # Mutation: counted after the limit
    if request.keys_only:
        kvs = [
            KeyValue(kv.key, kv.create_revision, kv.mod_revision, kv.version, b"", kv.lease)
            for kv in kvs
        ]
    return RangeResponse(header, tuple(kvs), more, count)


def _passes_filters(request: RangeRequest, kv: KeyValue) -> bool:
    if request.max_mod_revision and kv.mod_revision > request.max_mod_revision:
        return False
    if request.min_mod_revision and kv.mod_revision < request.min_mod_revision:
        return False
    if request.max_create_revision and kv.create_revision > request.max_create_revision:
        return False
    return not (request.min_create_revision and kv.create_revision < request.min_create_revision)


_SORT_FIELDS: dict[SortTarget, Callable[[KeyValue], int | bytes]] = {
    SortTarget.KEY: lambda kv: kv.key,
    SortTarget.VERSION: lambda kv: kv.version,
    SortTarget.CREATE: lambda kv: kv.create_revision,
    SortTarget.MOD: lambda kv: kv.mod_revision,
    SortTarget.VALUE: lambda kv: kv.value,
}


def do_range(state: StoreState, request: RangeRequest, bugs: BugSet = NO_BUGS) -> RangeResponse:
    """A range outside any txn: validated, served at the current revision's header."""
    if not request.key:
        raise EmptyKeyError("a range needs a key; use key b'\\x00' and range_end b'\\x00' for all")
    check_read_revision(state, request.revision)
    kvs = keys_at(state, request.key, request.range_end, request.revision)
    return range_response(kvs, request, state.revision, bugs)


def compare_holds(state: StoreState, compare: Compare) -> bool:
    """etcd's applyCompare over the store as it is now."""
    kvs = keys_at(state, compare.key, compare.range_end, 0)
    if not kvs:
        if compare.target is CompareTarget.VALUE:
            return False
        return _compare_kv(compare, KeyValue(compare.key, 0, 0, 0, b"", 0))
    return all(_compare_kv(compare, kv) for kv in kvs)


def _compare_kv(compare: Compare, kv: KeyValue) -> bool:
    target = compare.target
    operand = compare.operand
    if target is CompareTarget.VALUE:
        assert isinstance(operand, bytes)  # Compare.__post_init__ checked it
        order = (kv.value > operand) - (kv.value < operand)
    else:
        assert isinstance(operand, int)
        actual = _INT_TARGETS[target](kv)
        order = (actual > operand) - (actual < operand)
    result = compare.result
    if result is CompareResult.EQUAL:
        return order == 0
    if result is CompareResult.NOT_EQUAL:
        return order != 0
    if result is CompareResult.GREATER:
        return order > 0
    return order < 0


_INT_TARGETS: dict[CompareTarget, Callable[[KeyValue], int]] = {
    CompareTarget.VERSION: lambda kv: kv.version,
    CompareTarget.CREATE: lambda kv: kv.create_revision,
    CompareTarget.MOD: lambda kv: kv.mod_revision,
    CompareTarget.LEASE: lambda kv: kv.lease,
}


# ---------------------------------------------------------------------------- validation


def check_put_request(request: PutRequest) -> None:
    """The API-layer checks etcd makes on a put before it enters the log."""
    if not request.key:
        raise EmptyKeyError(f"{request.describe()} has an empty key")
    if request.ignore_value and request.value:
        raise ValueProvidedError(f"{request.describe()}: drop the value or ignore_value")
    if request.ignore_lease and request.lease:
        raise LeaseProvidedError(f"{request.describe()}: drop the lease or ignore_lease")


def check_delete_request(request: DeleteRangeRequest) -> None:
    if not request.key:
        raise EmptyKeyError(f"{request.describe()} has an empty key")


def check_txn_request(request: TxnRequest, max_ops: int) -> None:
    """etcd's checkTxnRequest (sizes, keys, nested budgets) then checkIntervals."""
    _check_txn_shape(request, max_ops)
    for branch in (request.success, request.failure):
        _check_intervals(branch)


def _check_txn_shape(request: TxnRequest, max_ops: int) -> None:
    ops = max(len(request.compare), len(request.success), len(request.failure))
    if ops > max_ops:
        raise TooManyOpsError(f"{ops} ops in one txn level, at most {max_ops} allowed")
    for compare in request.compare:
        if not compare.key:
            raise EmptyKeyError(f"compare {compare.describe()} has an empty key")
    for op in request.success + request.failure:
        if isinstance(op, RangeRequest):
            if not op.key:
                raise EmptyKeyError(f"txn op {op.describe()} has an empty key")
        elif isinstance(op, PutRequest):
            check_put_request(op)
        elif isinstance(op, DeleteRangeRequest):
            check_delete_request(op)
        else:
            _check_txn_shape(op, max_ops - ops)


def _deletes_point(deletes: Iterable[tuple[bytes, bytes]], key: bytes) -> bool:
    for start, end in deletes:
        if not end:
            if key == start:
                return True
        elif start <= key < end:  # literal interval, as etcd's adt interval tree
            return True
    return False


def _check_intervals(ops: tuple[TxnOp, ...]) -> tuple[set[bytes], list[tuple[bytes, bytes]]]:
    deletes = [(op.key, op.range_end) for op in ops if isinstance(op, DeleteRangeRequest)]
    puts: set[bytes] = set()
    for op in ops:
        if not isinstance(op, TxnRequest):
            continue
        puts_then, deletes_then = _check_intervals(op.success)
        puts_else, deletes_else = _check_intervals(op.failure)
        for key in puts_then:
            if key in puts or _deletes_point(deletes, key):
                raise DuplicateKeyError(f"key {show_bytes(key)} written twice in one branch")
            puts.add(key)
        for key in puts_else:
            if key in puts and key not in puts_then:
                raise DuplicateKeyError(f"key {show_bytes(key)} written twice in one branch")
            if _deletes_point(deletes, key):
                raise DuplicateKeyError(f"key {show_bytes(key)} put and deleted in one branch")
            puts.add(key)
        deletes.extend(deletes_then)
        deletes.extend(deletes_else)
    for op in ops:
        if not isinstance(op, PutRequest):
            continue
        if op.key in puts:
            raise DuplicateKeyError(f"key {show_bytes(op.key)} put twice in one branch")
        if _deletes_point(deletes, op.key):
            raise DuplicateKeyError(f"key {show_bytes(op.key)} put and deleted in one branch")
        puts.add(op.key)
    return puts, deletes


def check_put_against(state: StoreState, request: PutRequest, in_txn: bool) -> None:
    """etcd's apply-time checks of a put: ignore_* needs the key, the lease must exist.

    The order differs, as in etcd: a put inside a txn goes through checkPut (key, then
    lease); a plain put through applierV3backend.Put (lease, then key). Found by the
    differential test against etcd 3.5.1.
    """
    if not in_txn:
        _check_lease_exists(state, request)
    if (request.ignore_value or request.ignore_lease) and state.live.get(request.key) is None:
        raise KeyNotFoundError(f"{request.describe()} ignores the value or lease of a missing key")
    _check_lease_exists(state, request)


def _check_lease_exists(state: StoreState, request: PutRequest) -> None:
    if request.lease and request.lease not in state.leases:
        raise LeaseNotFoundError(f"{request.describe()}: grant lease {request.lease} first")


def txn_path_checks(state: StoreState, request: TxnRequest) -> None:
    """etcd's checkRequests along the path the compares choose, before any write.

    As applierV3backend.Txn: first checkPut on every put of the path (write txns only),
    then checkRange on every range of the path. checkRange compares a range revision
    with compactMainRev, so inside a txn a negative revision below it is ErrCompacted
    (a top-level range reads "now" for any revision <= 0).
    """
    path = list(_path_ops(state, request))
    if not request.is_read_only():
        for op in path:
            if isinstance(op, PutRequest):
                check_put_against(state, op, in_txn=True)
    for op in path:
        if isinstance(op, RangeRequest) and op.revision != 0:
            if op.revision > state.revision:
                raise FutureRevisionError(
                    f"{op.describe()} in a txn, but the store is at {state.revision}"
                )
            if op.revision < state.compact_main_revision:
                raise CompactedError(
                    f"{op.describe()} in a txn, but the store is compacted up to "
                    f"{state.compact_revision}"
                )


def _path_ops(state: StoreState, request: TxnRequest) -> Iterator[TxnOp]:
    """The ops of the branches the compares choose, nested txns flattened, in order."""
    holds = all(compare_holds(state, c) for c in request.compare)
    for op in request.success if holds else request.failure:
        if isinstance(op, TxnRequest):
            yield from _path_ops(state, op)
        else:
            yield op


# ---------------------------------------------------------------------------- writes


class WriteTxn:
    """One write's working copy: an overlay over the committed state, and its events.

    Reads through the overlay see the writes made so far. `events` groups the events
    by revision: one group for a correct txn; with the `txn_revision_per_op` bug, one
    group per write op.
    """

    def __init__(self, state: StoreState, bugs: BugSet) -> None:
        self.state = state
        self.overlay: dict[bytes, KeyValue | None] = {}
        self.lease_moves: dict[bytes, tuple[int, int]] = {}
        self.events: list[tuple[int, list[Event]]] = []
        self.bugs = bugs
        self._revision_per_op = bugs.on("txn_revision_per_op")
        self._write_revision = state.revision + 1

    @property
    def last_revision(self) -> int:
        """The revision the store is at after the writes made so far."""
        return self.events[-1][0] if self.events else self.state.revision

    def current(self, key: bytes) -> KeyValue | None:
        if key in self.overlay:
            return self.overlay[key]
        return self.state.live.get(key)

    def _current_in_range(self, key: bytes, range_end: bytes) -> list[KeyValue]:
        if not range_end:
            kv = self.current(key)
            return [] if kv is None else [kv]
        found: dict[bytes, KeyValue | None] = {
            k: v for k, v in self.state.live.items() if in_range(k, key, range_end)
        }
        for k, v in self.overlay.items():
            if in_range(k, key, range_end):
                found[k] = v
        return [v for _, v in sorted(found.items()) if v is not None]

    def _begin_write_op(self) -> int:
        if self._revision_per_op:
            self._write_revision = self.last_revision + 1
        return self._write_revision

    def _emit(self, revision: int, event: Event) -> None:
        if self.events and self.events[-1][0] == revision:
            self.events[-1][1].append(event)
        else:
            self.events.append((revision, [event]))

    def _move_lease(self, key: bytes, new_lease: int) -> None:
        if key in self.lease_moves:
            original = self.lease_moves[key][0]
        else:
            committed = self.state.live.get(key)
            original = 0 if committed is None else committed.lease
        self.lease_moves[key] = (original, new_lease)

    def range(self, request: RangeRequest) -> RangeResponse:
        if request.revision > 0:
            kvs = keys_at(self.state, request.key, request.range_end, request.revision)
        else:
            kvs = self._current_in_range(request.key, request.range_end)
        return range_response(kvs, request, self.last_revision, self.bugs)

    def put(self, request: PutRequest) -> PutResponse:
        revision = self._begin_write_op()
        old = self.current(request.key)
        value = old.value if (request.ignore_value and old is not None) else request.value
        lease = old.lease if (request.ignore_lease and old is not None) else request.lease
        if old is None:
            kv = KeyValue(request.key, revision, revision, 1, value, lease)
        else:
            kv = KeyValue(request.key, old.create_revision, revision, old.version + 1, value, lease)
        self.overlay[request.key] = kv
        self._move_lease(request.key, lease)
        self._emit(revision, Event(EventType.PUT, kv, old))
        prev = kv if self.bugs.on("prev_kv_from_new_revision") else old  # (a mutation)
        return PutResponse(ResponseHeader(revision), prev if request.prev_kv else None)

    def delete(self, request: DeleteRangeRequest) -> DeleteRangeResponse:
        doomed = self._current_in_range(request.key, request.range_end)
        if doomed:
            revision = self._begin_write_op()
            for old in doomed:
                self.overlay[old.key] = None
                self._move_lease(old.key, 0)
                tombstone = KeyValue(old.key, 0, revision, 0, b"", 0)
                self._emit(revision, Event(EventType.DELETE, tombstone, old))
        prev = tuple(doomed) if request.prev_kv else ()
        return DeleteRangeResponse(ResponseHeader(self.last_revision), len(doomed), prev)

    def txn(self, request: TxnRequest, nested: bool = False) -> TxnResponse:
        """Run a txn whose request and path checks have passed.

        A nested txn's response carries an empty header (revision 0), as etcd's
        newTxnResp builds it (checked on etcd 3.5.1).
        """
        # compareToPath: every compare, nested ones too, sees the store before the txn.
        succeeded = all(compare_holds(self.state, c) for c in request.compare)
        branch = request.success if succeeded else request.failure
        responses: list[TxnOpResponse] = []
        for op in branch:
            if isinstance(op, RangeRequest):
                responses.append(self.range(op))
            elif isinstance(op, PutRequest):
                responses.append(self.put(op))
            elif isinstance(op, DeleteRangeRequest):
                responses.append(self.delete(op))
            else:
                responses.append(self.txn(op, nested=True))
        header = ResponseHeader(0 if nested else self.last_revision)
        return TxnResponse(header, succeeded, tuple(responses))

    def delete_keys(self, keys: Iterable[bytes]) -> None:
        """Delete each key in key order in one revision (a lease revoke's write)."""
        for key in sorted(keys):
            self.delete(DeleteRangeRequest(key))

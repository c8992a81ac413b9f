"""etcd's multi-version key-value semantics over the SQLite backend.

`KVStore` answers reads (range at a revision, HashKV) and opens `WriteTxn`s. A `WriteTxn`
runs one applied request — put, delete range, txn (nested), or the deletion of a revoked
lease's keys — as at most ONE new store revision: every change it makes gets main
revision current+1 and consecutive sub revisions; if it changes nothing the revision
does not move (a read-only txn, a delete that matched no key). `finish()` records the
new current revision and returns the events in order, each with the key's state before
this revision as prev_kv (what etcd reads at mod_revision - 1 for a watch). The caller (the applier) opens the backend transaction around it.
`put_run` applies consecutive plain puts as one WriteTxn each would, with batched SQL.

Rules followed as etcd does them (api/etcdserverpb/rpc.proto, server/etcdserver/apply):
- Key ranges: empty range_end = the key alone; range_end "\\0" = every key >= key;
  otherwise [key, range_end).
- Range: revision <= 0 reads the newest state; a revision below the compact revision is
  `COMPACTED`, above the current one `FUTURE_REV`. count is the number of keys in the
  range (before limit and min/max filters); more says the limit cut the result (never
  with count_only, which returns no kvs). Sorting
  by a target other than KEY with sort_order NONE sorts ascending. The limit applies after
  sorting.
- Txn: every compare along the taken path is evaluated against the state BEFORE the txn;
  ops see the earlier ops' writes; a key is written at most once (`DUPLICATE_KEY`).
  A compare of VALUE on a missing key is false; other targets compare a missing key as
  zero.
- Revisions start at 1 (the empty store is at revision 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.backend import Backend, KeyRevision, PutRow, key_range_clause
from etcdspec.impl.kv.etcd_format import hash_kv_rows
from etcdspec.impl.kv.request_checks import (
    check_delete,
    check_put,
    check_range,
    check_txn,
    txn_is_read_only,
)
from etcdspec.impl.pb import kv_pb2, rpc_pb2

_Range = rpc_pb2.RangeRequest
_Compare = rpc_pb2.Compare


@dataclass(frozen=True)
class KeyValue:
    """A key's state: etcd's mvccpb.KeyValue."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def from_row(cls, row: KeyRevision) -> KeyValue:
        return cls(
            row.key, row.value, row.create_revision, row.mod_revision, row.version, row.lease
        )

    def to_pb(self, keys_only: bool = False) -> kv_pb2.KeyValue:
        return kv_pb2.KeyValue(
            key=self.key,
            value=b"" if keys_only else self.value,
            create_revision=self.create_revision,
            mod_revision=self.mod_revision,
            version=self.version,
            lease=self.lease,
        )

    def describe(self) -> str:
        return (
            f"{self.key!r}={self.value!r} (create={self.create_revision} "
            f"mod={self.mod_revision} version={self.version} lease={self.lease})"
        )


class EventType(IntEnum):
    PUT = 0
    DELETE = 1


@dataclass(frozen=True)
class Event:
    """One change of one key; a DELETE's kv has only key and mod_revision set."""

    type: EventType
    kv: KeyValue
    prev_kv: KeyValue | None

    @property
    def revision(self) -> int:
        return self.kv.mod_revision

    def to_pb(self, with_prev_kv: bool = False) -> kv_pb2.Event:
        event = kv_pb2.Event(type=self.type.name, kv=self.kv.to_pb())
        if with_prev_kv and self.prev_kv is not None:
            event.prev_kv.CopyFrom(self.prev_kv.to_pb())
        return event

    def describe(self) -> str:
        text = f"{self.type.name} {self.kv.describe()}"
        if self.prev_kv is not None:
            text += f" prev {self.prev_kv.describe()}"
        return text


def key_in_range(key: bytes, start: bytes, end: bytes) -> bool:
    """Whether `key` lies in the etcd key range (start, end)."""
    if not end:
        return key == start
    if end == b"\x00":
        return key >= start
    return start <= key < end


# ---- reads ----


def _sort_key(target: int) -> Callable[[KeyValue], Any]:
    if target == _Range.VERSION:
        return lambda kv: kv.version
    if target == _Range.CREATE:
        return lambda kv: kv.create_revision
    if target == _Range.MOD:
        return lambda kv: kv.mod_revision
    if target == _Range.VALUE:
        return lambda kv: kv.value
    return lambda kv: kv.key


def build_range_response(
    req: rpc_pb2.RangeRequest, live: list[KeyValue], revision: int
) -> rpc_pb2.RangeResponse:
    """Apply count, filters, sorting and limit to the live keys of the range."""
    resp = rpc_pb2.RangeResponse()
    resp.header.revision = revision
    resp.count = len(live)
    if req.count_only:  # etcd: no kvs, and so never `more`
        return resp
    kvs = live
    if req.min_mod_revision:
        kvs = [kv for kv in kvs if kv.mod_revision >= req.min_mod_revision]
    if req.max_mod_revision:
        kvs = [kv for kv in kvs if kv.mod_revision <= req.max_mod_revision]
    if req.min_create_revision:
        kvs = [kv for kv in kvs if kv.create_revision >= req.min_create_revision]
    if req.max_create_revision:
        kvs = [kv for kv in kvs if kv.create_revision <= req.max_create_revision]
    order = req.sort_order
    if req.sort_target != _Range.KEY and order == _Range.NONE:
        order = _Range.ASCEND
    if order != _Range.NONE:
        kvs = sorted(kvs, key=_sort_key(req.sort_target), reverse=order == _Range.DESCEND)
    if req.limit > 0 and len(kvs) > req.limit:
        kvs = kvs[: req.limit]
        resp.more = True
    resp.kvs.extend(kv.to_pb(keys_only=req.keys_only) for kv in kvs)
    return resp


class KVStore:
    """Reads and write transactions over one backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def current_revision(self) -> int:
        return self.backend.current_revision()

    def compact_revision(self) -> int:
        return self.backend.compact_revision()

    def _check_revision(self, revision: int, current: int) -> int:
        if revision <= 0:
            return current
        if revision > current:
            raise RpcError(errors.FUTURE_REV)
        if revision < self.backend.compact_revision():
            raise RpcError(errors.COMPACTED)
        return revision

    def live_at(self, key: bytes, range_end: bytes, revision: int) -> list[KeyValue]:
        return [KeyValue.from_row(r) for r in self.backend.live(key, range_end, revision)]

    def range(self, req: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        """A read of committed state (serializable, or after a linearizable read index).

        One key at the current revision (the common read) takes the key's newest state
        in one statement (`Backend.newest_live`, as `put_run` does), with the same answer
        as the general path."""
        check_range(req)
        current = self.backend.current_revision()
        if not req.range_end and req.revision == 0:
            row = self.backend.newest_live((req.key,)).get(req.key)
            return build_range_response(req, [KeyValue(*row)] if row else [], current)
        revision = self._check_revision(req.revision, current)
        return build_range_response(req, self.live_at(req.key, req.range_end, revision), current)

    def hash_kv(self, revision: int) -> tuple[int, int, int]:
        """(hash, compact_revision, current_revision) as etcd 3.5's HashKV answers.

        The hash is etcd's over its `key` bucket up to `revision` (0: the current one;
        see etcd_format), so it equals real etcd's for the same history of writes.
        As etcd: a revision at or below the compact revision is `COMPACTED`, above the
        current one `FUTURE_REV`; compact_revision is -1 on a store never compacted;
        the third value is the current revision (etcd's response header), not the
        revision hashed.
        """
        current = self.backend.current_revision()
        compacted = self.backend.compact_revision()
        if revision > 0 and revision <= compacted:
            raise RpcError(errors.COMPACTED)
        if revision > current:
            raise RpcError(errors.FUTURE_REV)
        rows = self.backend.hash_rows(revision if revision > 0 else current, compacted)
        return hash_kv_rows(rows), compacted if compacted > 0 else -1, current

    def write(self, lease_exists: Callable[[int], bool]) -> WriteTxn:
        """A write transaction; the caller holds `backend.transaction()` open around it."""
        return WriteTxn(self, lease_exists)

    def compact(self, revision: int) -> None:
        """Compact at `revision` (inside a backend transaction)."""
        current = self.backend.current_revision()
        if revision <= self.backend.compact_revision():
            raise RpcError(errors.COMPACTED)
        if revision > current:
            raise RpcError(errors.FUTURE_REV)
        self.backend.compact(revision)


def put_value(
    req: rpc_pb2.PutRequest,
    prev: KeyValue | None,
    revision: int,
    lease_exists: Callable[[int], bool],
) -> KeyValue:
    """The key's state after `req` (already checked by check_put) is applied at
    `revision` over `prev` (None: the key does not exist); RpcError KEY_NOT_FOUND
    (ignore_value/ignore_lease on a missing key) or LEASE_NOT_FOUND, before any write."""
    if (req.ignore_value or req.ignore_lease) and prev is None:
        raise RpcError(errors.KEY_NOT_FOUND)
    value = prev.value if req.ignore_value and prev is not None else req.value
    lease = prev.lease if req.ignore_lease and prev is not None else req.lease
    if lease and not lease_exists(lease):
        raise RpcError(errors.LEASE_NOT_FOUND)
    return KeyValue(
        key=req.key,
        value=value,
        create_revision=prev.create_revision if prev else revision,
        mod_revision=revision,
        version=prev.version + 1 if prev else 1,
        lease=lease,
    )


def put_response(
    req: rpc_pb2.PutRequest, prev: KeyValue | None, revision: int
) -> rpc_pb2.PutResponse:
    resp = rpc_pb2.PutResponse()
    resp.header.revision = revision
    if req.prev_kv and prev is not None:
        resp.prev_kv.CopyFrom(prev.to_pb())
    return resp


@dataclass(frozen=True)
class PutOutcome:
    """One put of `KVStore.put_run`: its response and event, or the error it refused
    with; `revision` is the store's current revision after it."""

    revision: int
    response: rpc_pb2.PutResponse | None = None
    event: Event | None = None
    error: RpcError | None = None

    def describe(self) -> str:
        if self.error is not None:
            return f"put refused at rev {self.revision}: {self.error.describe()}"
        assert self.event is not None
        return f"put rev {self.revision}: {self.event.describe()}"


def put_run(
    backend: Backend, reqs: Sequence[rpc_pb2.PutRequest], lease_exists: Callable[[int], bool]
) -> list[PutOutcome]:
    """Apply consecutive plain puts, each as its own revision, exactly as one `WriteTxn`
    per put would (same revisions, versions, create/mod revisions, events with prev_kv,
    errors that write nothing), but with batched SQL: one read of the keys' newest rows,
    two executemany inserts and one current-revision write. Inside the caller's backend
    transaction; `lease_exists` must not change during the run (no lease is granted or
    revoked by a put)."""
    revision = backend.current_revision()
    state: dict[bytes, KeyValue | None] = {
        key: KeyValue(*row) for key, row in backend.newest_live(req.key for req in reqs).items()
    }
    rows: list[PutRow] = []
    out: list[PutOutcome] = []
    for req in reqs:
        try:
            check_put(req)
            prev = state.get(req.key)
            kv = put_value(req, prev, revision + 1, lease_exists)
        except RpcError as exc:
            out.append(PutOutcome(revision, error=exc))
            continue
        revision += 1
        state[kv.key] = kv
        rows.append((revision, kv.key, kv.value, kv.create_revision, kv.version, kv.lease))
        out.append(
            PutOutcome(revision, put_response(req, prev, revision), Event(EventType.PUT, kv, prev))
        )
    if rows:
        backend.insert_puts(rows)
        backend.set_current_revision(revision)
    return out


class WriteTxn:
    """One applied request's writes: all at revision current+1, or none."""

    def __init__(self, store: KVStore, lease_exists: Callable[[int], bool]) -> None:
        self.store = store
        self.backend = store.backend
        self.lease_exists = lease_exists
        self.begin_revision = self.backend.current_revision()
        self.revision = self.begin_revision + 1
        self.events: list[Event] = []
        # Each touched key's state before this revision: the prev_kv of its events (etcd
        # reads a watch event's prev_kv at mod_revision - 1).
        self._before: dict[bytes, KeyValue | None] = {}

    @property
    def changed(self) -> bool:
        return bool(self.events)

    def visible_revision(self) -> int:
        """The revision this transaction's reads see: its own writes included."""
        return self.revision if self.events else self.begin_revision

    def _live(self, key: bytes, range_end: bytes) -> list[KeyValue]:
        return self.store.live_at(key, range_end, self.revision)

    def _get(self, key: bytes) -> KeyValue | None:
        found = self._live(key, b"")
        return found[0] if found else None

    def _insert(self, kv: KeyValue, tombstone: bool) -> None:
        self.backend.insert_revision(
            KeyRevision(
                main=self.revision,
                sub=len(self.events),
                key=kv.key,
                value=kv.value,
                create_revision=kv.create_revision,
                mod_revision=kv.mod_revision,
                version=kv.version,
                lease=kv.lease,
                tombstone=tombstone,
            )
        )

    def range(self, req: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        check_range(req)
        current = self.visible_revision()
        revision = self.store._check_revision(req.revision, current)
        live = self.store.live_at(req.key, req.range_end, revision)
        return build_range_response(req, live, current)

    def put(self, req: rpc_pb2.PutRequest) -> rpc_pb2.PutResponse:
        check_put(req)
        prev = self._get(req.key)
        kv = put_value(req, prev, self.revision, self.lease_exists)
        self._insert(kv, tombstone=False)
        self.events.append(Event(EventType.PUT, kv, self._before.setdefault(req.key, prev)))
        return put_response(req, prev, self.revision)

    def put_all(self, reqs: Sequence[rpc_pb2.PutRequest]) -> list[rpc_pb2.PutResponse]:
        """`put` of each of `reqs` in order, with batched SQL: one read of the keys'
        newest rows, two executemany inserts. Only before this transaction has written
        (its reads see the current revision) and for distinct keys (a txn's puts are:
        check_txn refuses duplicates), so that each put's prev is the key's newest row."""
        if self.events or len({req.key for req in reqs}) != len(reqs):
            return [self.put(req) for req in reqs]
        for req in reqs:
            check_put(req)
        newest = self.backend.newest_live(req.key for req in reqs)
        rows: list[KeyRevision] = []
        events: list[Event] = []
        responses = []
        for req in reqs:
            found = newest.get(req.key)
            prev = KeyValue(*found) if found is not None else None
            kv = put_value(req, prev, self.revision, self.lease_exists)
            rows.append(
                KeyRevision(
                    main=self.revision,
                    sub=len(rows),
                    key=kv.key,
                    value=kv.value,
                    create_revision=kv.create_revision,
                    mod_revision=kv.mod_revision,
                    version=kv.version,
                    lease=kv.lease,
                    tombstone=False,
                )
            )
            events.append(Event(EventType.PUT, kv, self._before.setdefault(req.key, prev)))
            responses.append(put_response(req, prev, self.revision))
        self.backend.insert_revisions(rows)
        self.events.extend(events)
        return responses

    def _delete(self, prev: KeyValue) -> None:
        tomb = KeyValue(prev.key, b"", 0, self.revision, 0, 0)
        self._insert(tomb, tombstone=True)
        self.events.append(Event(EventType.DELETE, tomb, self._before.setdefault(prev.key, prev)))

    def delete_range(self, req: rpc_pb2.DeleteRangeRequest) -> rpc_pb2.DeleteRangeResponse:
        check_delete(req)
        doomed = self._live(req.key, req.range_end)
        for prev in doomed:
            self._delete(prev)
        resp = rpc_pb2.DeleteRangeResponse(deleted=len(doomed))
        resp.header.revision = self.visible_revision()
        if req.prev_kv:
            resp.prev_kvs.extend(kv.to_pb() for kv in doomed)
        return resp

    def delete_keys(self, keys: Sequence[bytes]) -> int:
        """Delete the given keys (those that exist) in sorted order; return how many."""
        deleted = 0
        for key in sorted(set(keys)):
            prev = self._get(key)
            if prev is not None:
                self._delete(prev)
                deleted += 1
        return deleted

    def txn(self, req: rpc_pb2.TxnRequest) -> rpc_pb2.TxnResponse:
        check_txn(req)
        path = _compare_path(self.store, req, self.begin_revision)
        # etcd checks the taken path before running any op, against the state before the
        # txn: first every put (key exists for ignore_*, lease exists) in a write txn,
        # then every range's revision.
        taken = _taken_ops(req, list(path))
        if not txn_is_read_only(req):
            for op in taken:
                if op.WhichOneof("request") == "request_put":
                    self._check_put_preconditions(op.request_put)
        for op in taken:
            if op.WhichOneof("request") == "request_range" and op.request_range.revision:
                self.store._check_revision(op.request_range.revision, self.begin_revision)
        resp = self._run_txn(req, path)
        resp.header.revision = self.visible_revision()
        return resp

    def _check_put_preconditions(self, req: rpc_pb2.PutRequest) -> None:
        if (req.ignore_value or req.ignore_lease) and self._get(req.key) is None:
            raise RpcError(errors.KEY_NOT_FOUND)
        if req.lease and not self.lease_exists(req.lease):
            raise RpcError(errors.LEASE_NOT_FOUND)

    def _run_txn(self, req: rpc_pb2.TxnRequest, path: list[bool]) -> rpc_pb2.TxnResponse:
        succeeded = path.pop(0)
        resp = rpc_pb2.TxnResponse(succeeded=succeeded)
        ops = req.success if succeeded else req.failure
        if len(ops) > 1 and all(op.WhichOneof("request") == "request_put" for op in ops):
            # A branch of puts only (a bulk load's txn): batched, the same rows and answers.
            for answer in self.put_all([op.request_put for op in ops]):
                resp.responses.add().response_put.CopyFrom(answer)
            return resp
        for op in ops:
            out = resp.responses.add()
            kind = op.WhichOneof("request")
            if kind == "request_range":
                out.response_range.CopyFrom(self.range(op.request_range))
            elif kind == "request_put":
                out.response_put.CopyFrom(self.put(op.request_put))
            elif kind == "request_delete_range":
                out.response_delete_range.CopyFrom(self.delete_range(op.request_delete_range))
            elif kind == "request_txn":
                inner = self._run_txn(op.request_txn, path)
                inner.header.SetInParent()  # etcd leaves a nested txn's header empty
                out.response_txn.CopyFrom(inner)
        return resp

    def finish(self) -> tuple[int, list[Event]]:
        """Record the new current revision (if anything changed); return it and the events."""
        if self.events:
            self.backend.set_current_revision(self.revision)
            return self.revision, list(self.events)
        return self.begin_revision, []


def _taken_ops(req: rpc_pb2.TxnRequest, path: list[bool]) -> list[rpc_pb2.RequestOp]:
    """The non-txn ops on the taken path, in execution order (consumes `path`)."""
    ops: list[rpc_pb2.RequestOp] = []
    for op in req.success if path.pop(0) else req.failure:
        if op.WhichOneof("request") == "request_txn":
            ops += _taken_ops(op.request_txn, path)
        else:
            ops.append(op)
    return ops


def _compare_path(store: KVStore, req: rpc_pb2.TxnRequest, revision: int) -> list[bool]:
    """The outcome of every compare along the taken path, pre-order, before any op runs."""
    ok = all(_compare(store, c, revision) for c in req.compare)
    path = [ok]
    for op in req.success if ok else req.failure:
        if op.WhichOneof("request") == "request_txn":
            path += _compare_path(store, op.request_txn, revision)
    return path


def _compare(store: KVStore, c: rpc_pb2.Compare, revision: int) -> bool:
    range_end = c.range_end
    kvs = store.live_at(c.key, range_end, revision)
    if not kvs:
        if c.target == _Compare.VALUE:
            return False
        return _compare_kv(c, KeyValue(c.key, b"", 0, 0, 0, 0))
    return all(_compare_kv(c, kv) for kv in kvs)


def _compare_kv(c: rpc_pb2.Compare, kv: KeyValue) -> bool:
    ours: object
    theirs: object
    if c.target == _Compare.VALUE:
        ours, theirs = kv.value, c.value
    elif c.target == _Compare.CREATE:
        ours, theirs = kv.create_revision, c.create_revision
    elif c.target == _Compare.MOD:
        ours, theirs = kv.mod_revision, c.mod_revision
    elif c.target == _Compare.LEASE:
        ours, theirs = kv.lease, c.lease
    else:
        ours, theirs = kv.version, c.version
    assert isinstance(ours, int | bytes) and type(ours) is type(theirs)
    diff = (ours > theirs) - (ours < theirs)  # type: ignore[operator]
    if c.result == _Compare.EQUAL:
        return diff == 0
    if c.result == _Compare.NOT_EQUAL:
        return diff != 0
    if c.result == _Compare.GREATER:
        return diff > 0
    return diff < 0


__all__ = [
    "Event",
    "EventType",
    "KVStore",
    "KeyValue",
    "WriteTxn",
    "build_range_response",
    "key_in_range",
    "key_range_clause",
]

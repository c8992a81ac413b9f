"""Response postconditions: an independent, deliberately plain oracle of what each
request's response must say, and the check that compares the model's response with it.

The store model (model/store.py, model/kv.py) is built for speed and sharing: a
persistent map of live keys, a linked event history, a working copy per write. This
oracle is the opposite, written separately so that the two do not share a mistake: a
dict from key to the list of its versions, `(revision, KeyValue or None)`, oldest first,
where None is a deletion. A read at revision r takes each key's last version at or
below r. Nothing is ever dropped (a compaction only moves `compact_revision`).

Contract
- `ResponseOracle.of_store(state)` starts from what a model store holds (its live keys
  and the history of every revision it can still read); `ResponseOracle()` is etcd's
  empty store (revision 1).
- `answer(request)` gives the response etcd must give to a request that the model
  served without an error, and moves the oracle past it. It does not judge validity (a
  request the model refused is not given to it; etcd's errors are compared with real
  etcd in tests/model/test_store_vs_etcd.py). Fields the oracle does not model (a
  granted lease's id and TTL, the Auth service's answers) are not checked.
- `check_response(oracle, request, response)` raises `InvariantViolation(
  "ResponsePostcondition", ...)` naming the first field that differs, by its path
  (`count`, `more`, `kvs[1].mod_revision`, `responses[0].prev_kv`, `header.revision`),
  with the request and both responses; it returns the expected response otherwise.
- `check_step_responses(before, after, action)` checks every response one cluster step
  output (entries applied, reads served) on an oracle of the applying node's store.

The postconditions, as etcd's v3 API states them (each a field of the responses):
range: `kvs` are the keys in range at the read revision (<= 0: now), sorted (by key
ascending unless asked; a non-key target with order NONE sorts ascending; ties in key
order), after the min/max mod/create revision filters, cut to `limit`; `more` is true
exactly when the limit cut something; `count` is every key in range (before the filters
and the limit); keys_only empties values; count_only gives no kvs; `header.revision` is
the store's revision. put: `header.revision` is the new revision, `prev_kv` (when asked)
the key before the put. delete: `deleted` counts the keys in range, `prev_kvs` (when
asked) are they; a delete of nothing takes no revision. txn: `succeeded` says whether
every compare held against the store before the txn (nested compares too); `responses`
are the chosen branch's, one per op, in order, each as if its op ran alone at that point
(reads see the txn's earlier writes; every write shares the txn's one new revision);
a nested txn's header is empty (revision 0). compaction, lease grant: the revision,
unchanged. lease revoke: its keys deleted in one revision.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from etcdspec.model.errors import StoreError
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.lease_clocks import KeepAliveAck
from etcdspec.model.raft_messages import MsgType
from etcdspec.model.requests import (
    AsUser,
    CompactionRequest,
    CompactionResponse,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    EventType,
    KeyValue,
    LeaseGrantRequest,
    LeaseKeepAliveRequest,
    LeaseLeasesRequest,
    LeaseRevokeRequest,
    LeaseRevokeResponse,
    LeaseTimeToLiveRequest,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    ResponseHeader,
    SortOrder,
    SortTarget,
    TxnOpResponse,
    TxnRequest,
    TxnResponse,
)

Version = tuple[int, KeyValue | None]
"""(revision, the key from that revision on); None: deleted at that revision."""


def _selects(start: bytes, end: bytes, key: bytes) -> bool:
    """etcd's key selection: one key, [start, end), or every key >= start (end \\x00)."""
    if end == b"":
        return key == start
    if end == b"\x00":
        return key >= start
    return start <= key < end


class ResponseOracle:
    """A plain store of every version of every key (see the module docstring)."""

    def __init__(self, revision: int = 1, compact_revision: int = 0) -> None:
        self.revision = revision
        self.compact_revision = compact_revision
        self.versions: dict[bytes, list[Version]] = {}

    @classmethod
    def of_store(cls, state: Any) -> ResponseOracle:
        """The oracle holding what the model store `state` holds: every live key and,
        per key, its versions since the compact revision (from the history's events)."""
        oracle = cls(state.revision, state.compact_revision)
        for revision, events in state.history_revisions():
            for event in events:
                key = event.kv.key
                versions = oracle.versions.setdefault(key, [])
                if not versions and event.prev_kv is not None:
                    versions.append((event.prev_kv.mod_revision, event.prev_kv))
                deleted = event.type is EventType.DELETE
                versions.append((revision, None if deleted else event.kv))
        for kv in state.items():
            if kv.key not in oracle.versions:
                oracle.versions[kv.key] = [(kv.mod_revision, kv)]
        return oracle

    # ------------------------------------------------------------------ reads
    def value_at(self, key: bytes, revision: int) -> KeyValue | None:
        found: KeyValue | None = None
        for at, kv in self.versions.get(key, ()):
            if at > revision:
                break
            found = kv
        return found

    def keys_at(self, start: bytes, end: bytes, revision: int) -> list[KeyValue]:
        """Every key selected by (start, end) as it was at `revision`, by key."""
        out = []
        for key in sorted(self.versions):
            if _selects(start, end, key):
                kv = self.value_at(key, revision)
                if kv is not None:
                    out.append(kv)
        return out

    # ------------------------------------------------------------------ answers
    def answer(self, request: Any) -> Any:
        """The response etcd gives `request` (served without error); the oracle moves on."""
        if isinstance(request, AsUser):
            return self.answer(request.request)
        now = self.revision
        if isinstance(request, RangeRequest):
            return _range_answer(self, request, request.revision if request.revision > 0 else now)
        if isinstance(request, (PutRequest, DeleteRangeRequest, TxnRequest)):
            write = _Write(self)
            if isinstance(request, PutRequest):
                response: Any = write.put(request)
            elif isinstance(request, DeleteRangeRequest):
                response = write.delete(request)
            else:
                response = write.txn(request, nested=False)
            self.revision = write.revision_after()
            return response
        if isinstance(request, CompactionRequest):
            self.compact_revision = request.revision
            return CompactionResponse(ResponseHeader(now))
        if isinstance(request, LeaseRevokeRequest):
            write = _Write(self)
            for kv in self.keys_at(b"\x00", b"\x00", now):
                if kv.lease == request.id:
                    write.delete(DeleteRangeRequest(kv.key))
            self.revision = write.revision_after()
            return LeaseRevokeResponse(ResponseHeader(self.revision))
        return _header_only(request, now)


def _header_only(request: Any, revision: int) -> Any:
    """Requests whose other fields the oracle does not model: only the header is known
    (the rest is filled in from the model's answer by `check_response`)."""
    if isinstance(
        request,
        (LeaseGrantRequest, LeaseKeepAliveRequest, LeaseTimeToLiveRequest, LeaseLeasesRequest),
    ):
        return ResponseHeader(revision)
    return None  # the Auth service: not a KV response


def _range_answer(
    oracle: ResponseOracle, request: RangeRequest, revision: int, header: int | None = None
) -> RangeResponse:
    kvs = oracle.keys_at(request.key, request.range_end, revision)
    head = ResponseHeader(oracle.revision if header is None else header)
    if request.count_only:
        return RangeResponse(head, (), False, len(kvs))
    count = len(kvs)
    kept = []
    for kv in kvs:
        if request.min_mod_revision and kv.mod_revision < request.min_mod_revision:
            continue
        if request.max_mod_revision and kv.mod_revision > request.max_mod_revision:
            continue
        if request.min_create_revision and kv.create_revision < request.min_create_revision:
            continue
        if request.max_create_revision and kv.create_revision > request.max_create_revision:
            continue
        kept.append(kv)
    order = request.sort_order
    if order is SortOrder.NONE and request.sort_target is not SortTarget.KEY:
        order = SortOrder.ASCEND
    if order is not SortOrder.NONE:
        target = request.sort_target

        def field(kv: KeyValue) -> Any:
            return {
                SortTarget.KEY: kv.key,
                SortTarget.VERSION: kv.version,
                SortTarget.CREATE: kv.create_revision,
                SortTarget.MOD: kv.mod_revision,
                SortTarget.VALUE: kv.value,
            }[target]

        kept.sort(key=field, reverse=order is SortOrder.DESCEND)
    more = 0 < request.limit < len(kept)
    if more:
        kept = kept[: request.limit]
    if request.keys_only:
        kept = [dataclasses.replace(kv, value=b"") for kv in kept]
    return RangeResponse(head, tuple(kept), more, count)


class _Write:
    """One write request: its writes go in at revision `before + 1` as they happen."""

    def __init__(self, oracle: ResponseOracle) -> None:
        self.oracle = oracle
        self.before = oracle.revision
        self.at = oracle.revision + 1
        self.wrote = False

    def revision_after(self) -> int:
        return self.at if self.wrote else self.before

    def put(self, request: PutRequest) -> PutResponse:
        old = self.oracle.value_at(request.key, self.at)
        value = old.value if (old is not None and request.ignore_value) else request.value
        lease = old.lease if (old is not None and request.ignore_lease) else request.lease
        if old is None:
            new = KeyValue(request.key, self.at, self.at, 1, value, lease)
        else:
            new = KeyValue(request.key, old.create_revision, self.at, old.version + 1, value, lease)
        self.oracle.versions.setdefault(request.key, []).append((self.at, new))
        self.wrote = True
        return PutResponse(ResponseHeader(self.at), old if request.prev_kv else None)

    def delete(self, request: DeleteRangeRequest) -> DeleteRangeResponse:
        gone = self.oracle.keys_at(request.key, request.range_end, self.at)
        for kv in gone:
            self.oracle.versions[kv.key].append((self.at, None))
        if gone:
            self.wrote = True
        prev = tuple(gone) if request.prev_kv else ()
        return DeleteRangeResponse(ResponseHeader(self.revision_after()), len(gone), prev)

    def holds(self, compare: Compare) -> bool:
        """A compare against the store before this write (etcd's compareToPath)."""
        kvs = self.oracle.keys_at(compare.key, compare.range_end, self.before)
        if not kvs:
            if compare.target is CompareTarget.VALUE:
                return False
            kvs = [KeyValue(compare.key, 0, 0, 0)]
        return all(_holds(compare, kv) for kv in kvs)

    def txn(self, request: TxnRequest, nested: bool) -> TxnResponse:
        succeeded = all(self.holds(c) for c in request.compare)
        responses: list[TxnOpResponse] = []
        for op in request.success if succeeded else request.failure:
            if isinstance(op, RangeRequest):
                revision = op.revision if op.revision > 0 else self.at
                responses.append(_range_answer(self.oracle, op, revision, self.revision_after()))
            elif isinstance(op, PutRequest):
                responses.append(self.put(op))
            elif isinstance(op, DeleteRangeRequest):
                responses.append(self.delete(op))
            else:
                responses.append(self.txn(op, nested=True))
        header = ResponseHeader(0 if nested else self.revision_after())
        return TxnResponse(header, succeeded, tuple(responses))


def _holds(compare: Compare, kv: KeyValue) -> bool:
    actual: int | bytes
    if compare.target is CompareTarget.VALUE:
        actual = kv.value
    elif compare.target is CompareTarget.VERSION:
        actual = kv.version
    elif compare.target is CompareTarget.CREATE:
        actual = kv.create_revision
    elif compare.target is CompareTarget.MOD:
        actual = kv.mod_revision
    else:
        actual = kv.lease
    operand = compare.operand
    if isinstance(actual, bytes) and isinstance(operand, bytes):
        sign = (actual > operand) - (actual < operand)
    elif isinstance(actual, int) and isinstance(operand, int):
        sign = (operand < actual) - (operand > actual)
    else:  # Compare's own check rules this out
        raise TypeError(f"compare {compare.describe()}: operand of the wrong type")
    return {
        CompareResult.EQUAL: sign == 0,
        CompareResult.NOT_EQUAL: sign != 0,
        CompareResult.GREATER: sign > 0,
        CompareResult.LESS: sign < 0,
    }[compare.result]


# ---------------------------------------------------------------------------- the check


def first_difference(expected: Any, actual: Any, path: str = "") -> str | None:
    """The path of the first field where two responses differ, with both values."""
    if type(expected) is not type(actual):
        return f"{path or 'response'}: {_show(actual)}, expected {_show(expected)}"
    if dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        for item in dataclasses.fields(expected):
            name = f"{path}.{item.name}" if path else item.name
            found = first_difference(getattr(expected, item.name), getattr(actual, item.name), name)
            if found is not None:
                return found
        return None
    if isinstance(expected, tuple):
        if len(expected) != len(actual):
            return f"{path}: {len(actual)} item(s), expected {len(expected)}"
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            found = first_difference(want, got, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if expected != actual:
        return f"{path}: {_show(actual)}, expected {_show(expected)}"
    return None


def _show(value: Any) -> str:
    return value.describe() if hasattr(value, "describe") else repr(value)


def check_response(oracle: ResponseOracle, request: Any, response: Any) -> Any:
    """Answer `request` on the oracle and compare with the model's `response` (which the
    model gave without error); raise InvariantViolation("ResponsePostcondition") naming
    the first field that differs. Returns the expected response (None: not checked)."""
    expected = oracle.answer(request)
    if expected is None:
        return None
    if isinstance(expected, ResponseHeader):  # only the header is modelled
        header = getattr(response, "header", None)
        difference = first_difference(expected, header, "header")
        if difference is not None:
            _fail(request, response, f"a response with header {expected.describe()}", difference)
        return expected
    difference = first_difference(expected, response)
    if difference is not None:
        _fail(request, response, expected.describe(), difference)
    return expected


def _fail(request: Any, response: Any, expected: str, difference: str) -> None:
    raise InvariantViolation(
        "ResponsePostcondition",
        f"{request.describe()} answered {_show(response)}; expected {expected} ({difference})",
    )


# ---------------------------------------------------------------------------- cluster steps


def check_step_responses(before: Any, after: Any, action: Any) -> int:
    """The postconditions of one cluster step (model/cluster.py's Cluster before and
    after `action`): the node that applied entries or served reads in it is given an
    oracle of its store as the step found it (or of the snapshot it installed in it),
    which answers each applied request in log order, then each served read; every
    response given without error is checked. Returns how many were checked."""
    outputs = after.outputs
    if not outputs:
        return 0
    node_id = outputs[0].node
    store = before.node(node_id).store
    if action.kind == "deliver" and action.args[0].type == MsgType.SNAPSHOT:
        snapshot = action.args[0].snapshot
        installed = after.node(node_id).log.snapshot
        if installed == snapshot and before.node(node_id).log.snapshot != snapshot:
            store = snapshot.data  # the node's store was replaced before it applied
    oracle = ResponseOracle.of_store(store)
    checked = 0
    for output in outputs:
        if isinstance(output, KeepAliveAck):
            continue  # no store response: its promise is the LeaseKeepAliveHonoured invariant's
        if isinstance(output.response, StoreError):
            continue
        check_response(oracle, output.request, output.response)
        checked += 1
    return checked

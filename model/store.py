"""The store model: etcd's KV + lease state machine as an immutable, hashable value.

Contract:
- `initial_state()` is the store etcd starts with: revision 1, no keys, no leases.
- `apply(state, request, bugs)` returns `(new_state, response)` and never changes
  `state`; an invalid request raises a `StoreError` (etcd's code and text) and leaves
  nothing changed. The new state shares structure with the old one (persistent map of
  live keys, linked event history), so keeping many states is cheap.
- `StoreState` compares and hashes BY CONTENT (revision, compact revision, live keys,
  leases, the event history still readable, lease-id counter, config); the hash is
  maintained incrementally and cached.
- The history keeps the events of every revision >= the compact revision: reads at
  those revisions and watches starting there are served from it. Compaction drops the
  older events (as etcd's compactor does).
- `check_invariants(state)` raises `InvariantViolation` naming the broken invariant.
- States pickle (for worker processes): loading rebuilds every cached hash, since
  Python's hash seed differs between processes.
- The store has no clock: lease expiry arrives as a LeaseRevokeRequest through the log;
  keep-alive is answered by the leader with `lease_ttl(state, id)`.
- The auth store (model/auth.py) is part of the state: auth requests change it, and a
  request wrapped in `AsUser` is checked against the caller's permissions first (a
  refused one raises etcd's error and changes nothing); an unwrapped request is the
  server's own and is not checked.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import overload

from etcdspec.model.auth import (
    AuthState,
    apply_auth,
    check_admin_call,
    check_auth_invariants,
    check_client,
)
from etcdspec.model.auth_requests import AUTH_REQUEST_TYPES, AuthRequest, AuthResponse
from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.errors import (
    CompactedError,
    FutureRevisionError,
    LeaseExistsError,
    LeaseNotFoundError,
    LeaseTTLTooLargeError,
)
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.kv import (
    DEFAULT_MAX_TXN_OPS,
    WriteTxn,
    check_delete_request,
    check_put_against,
    check_put_request,
    check_txn_request,
    do_range,
    txn_path_checks,
)
from etcdspec.model.lease import (
    DEFAULT_MIN_LEASE_TTL,
    MAX_LEASE_TTL,
    LeaseRecord,
    LeaseTable,
    effective_ttl,
    next_free_id,
)
from etcdspec.model.pmap import PMap
from etcdspec.model.requests import (
    AsUser,
    CompactionRequest,
    CompactionResponse,
    DeleteRangeRequest,
    Event,
    EventType,
    KeyValue,
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseKeepAliveRequest,
    LeaseKeepAliveResponse,
    LeaseLeasesRequest,
    LeaseLeasesResponse,
    LeaseRevokeRequest,
    LeaseRevokeResponse,
    LeaseTimeToLiveRequest,
    LeaseTimeToLiveResponse,
    PutRequest,
    PutResponse,
    RangeRequest,
    Request,
    Response,
    ResponseHeader,
    TxnRequest,
    show_bytes,
)


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Server settings that change answers: etcd's minimum lease TTL and --max-txn-ops."""

    min_lease_ttl: int = DEFAULT_MIN_LEASE_TTL
    max_txn_ops: int = DEFAULT_MAX_TXN_OPS

    def describe(self) -> str:
        return f"min_lease_ttl {self.min_lease_ttl} max_txn_ops {self.max_txn_ops}"


class HistoryNode:
    """The events of one revision, linked to the previous revision's node (immutable)."""

    __slots__ = ("events", "hash", "parent", "revision")

    def __init__(self, revision: int, events: tuple[Event, ...], parent: HistoryNode | None):
        self.revision = revision
        self.events = events
        self.parent = parent
        # The hash covers the revision, each event's key, value and type, and the parent
        # (bytes cache their own hash, so this is cheap); __eq__ of StoreState compares
        # the events themselves.
        if len(events) == 1:  # a put's or a single delete's node: the same tuple, sooner
            kv = events[0].kv
            summary: tuple[tuple[bytes, bytes, bool], ...] = (
                (kv.key, kv.value, events[0].type is EventType.PUT),
            )
        else:
            summary = tuple((e.kv.key, e.kv.value, e.type is EventType.PUT) for e in events)
        self.hash: int = hash((revision, summary, None if parent is None else parent.hash))

    def describe(self) -> str:
        return f"rev {self.revision}: " + ", ".join(e.describe() for e in self.events)

    def __reduce__(self) -> tuple[object, tuple[list[tuple[int, tuple[Event, ...]]]]]:
        # Flat, so that long histories do not recurse, and rehashed on load.
        return (_rebuild_history, ([(node.revision, node.events) for node in self.chain()],))

    def chain(self) -> list[HistoryNode]:
        """This node and its ancestors, oldest first."""
        nodes: list[HistoryNode] = []
        node: HistoryNode | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        nodes.reverse()
        return nodes


def _rebuild_history(nodes: list[tuple[int, tuple[Event, ...]]]) -> HistoryNode | None:
    history: HistoryNode | None = None
    for revision, events in nodes:
        history = HistoryNode(revision, events, history)
    return history


def _same_history(a: HistoryNode | None, b: HistoryNode | None) -> bool:
    while a is not b:
        if a is None or b is None or a.hash != b.hash:
            return False
        if a.revision != b.revision or a.events != b.events:
            return False
        a, b = a.parent, b.parent
    return True


_NO_AUTH = AuthState()


class _Keep:
    """Marker: keep the field as it is (None is a valid history)."""


_KEEP = _Keep()


class StoreState:
    """One state of the store. Immutable; build new ones with `apply()`."""

    __slots__ = (
        "_hash",
        "auth",
        "compact_main_revision",
        "config",
        "history",
        "leases",
        "live",
        "next_lease_id",
        "revision",
        "write_count",
    )

    def __init__(
        self,
        *,
        revision: int,
        compact_main_revision: int,
        live: PMap[bytes, KeyValue],
        leases: LeaseTable,
        history: HistoryNode | None,
        next_lease_id: int,
        write_count: int,
        config: StoreConfig,
        auth: AuthState = _NO_AUTH,
    ) -> None:
        self.revision = revision
        self.compact_main_revision = compact_main_revision
        self.live = live
        self.leases = leases
        self.history = history
        self.next_lease_id = next_lease_id
        self.write_count = write_count
        self.config = config
        self.auth = auth
        self._hash = hash(
            (
                revision,
                compact_main_revision,
                hash(live),
                hash(leases),
                None if history is None else history.hash,
                next_lease_id,
                write_count,
                config,
                auth,
            )
        )

    def _replace(
        self,
        *,
        revision: int | None = None,
        compact_main_revision: int | None = None,
        live: PMap[bytes, KeyValue] | None = None,
        leases: LeaseTable | None = None,
        history: HistoryNode | _Keep | None = _KEEP,
        next_lease_id: int | None = None,
        write_count: int | None = None,
        auth: AuthState | None = None,
    ) -> StoreState:
        return StoreState(
            revision=self.revision if revision is None else revision,
            compact_main_revision=(
                self.compact_main_revision
                if compact_main_revision is None
                else compact_main_revision
            ),
            live=self.live if live is None else live,
            leases=self.leases if leases is None else leases,
            history=self.history if isinstance(history, _Keep) else history,
            next_lease_id=self.next_lease_id if next_lease_id is None else next_lease_id,
            write_count=self.write_count if write_count is None else write_count,
            config=self.config,
            auth=self.auth if auth is None else auth,
        )

    # -- queries

    @property
    def compact_revision(self) -> int:
        """The revision the store is compacted to; 0 before any compaction."""
        return max(self.compact_main_revision, 0)

    def get(self, key: bytes) -> KeyValue | None:
        """The key's current key-value, or None if it does not exist."""
        return self.live.get(key)

    def items(self) -> list[KeyValue]:
        """Every live key-value, sorted by key."""
        return [kv for _, kv in sorted(self.live.items())]

    def lease_ids(self) -> frozenset[int]:
        return self.leases.ids()

    def oldest_event_revision(self) -> int:
        """The first revision whose events the history still holds."""
        return max(self.compact_revision, 2)

    def events_since(self, revision: int) -> tuple[Event, ...]:
        """Every event at `revision` or later, in order (revision, then op order).

        Raises CompactedError if events before the compact revision are asked for
        (those are gone, as in etcd); `revision` <= 0 is rejected as meaningless.
        """
        if revision <= 0:
            raise ValueError(f"events_since needs a revision >= 1, got {revision}")
        if revision < self.compact_revision:
            raise CompactedError(
                f"events since {revision} asked for, but the store is compacted up to "
                f"{self.compact_revision}"
            )
        groups: list[tuple[Event, ...]] = []
        node = self.history
        while node is not None and node.revision >= revision:
            groups.append(node.events)
            node = node.parent
        return tuple(event for group in reversed(groups) for event in group)

    def history_revisions(self) -> Iterator[tuple[int, tuple[Event, ...]]]:
        """(revision, events) for every revision the history holds, oldest first."""
        if self.history is None:
            return iter(())
        return ((node.revision, node.events) for node in self.history.chain())

    # -- identity

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # Rebuilt on load, so that every cached hash is this process's (hash seeds differ).
        return (
            _rebuild_state,
            (
                self.revision,
                self.compact_main_revision,
                self.live,
                self.leases,
                self.history,
                self.next_lease_id,
                self.write_count,
                self.config,
                self.auth,
            ),
        )

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, StoreState):
            return NotImplemented
        return (
            self._hash == other._hash
            and self.revision == other.revision
            and self.compact_main_revision == other.compact_main_revision
            and self.next_lease_id == other.next_lease_id
            and self.write_count == other.write_count
            and self.config == other.config
            and self.auth == other.auth
            and self.live == other.live
            and self.leases == other.leases
            and _same_history(self.history, other.history)
        )

    def describe(self) -> str:
        kvs = ", ".join(kv.describe() for kv in self.items())
        compact = f" compact {self.compact_revision}" if self.compact_revision else ""
        auth = "" if self.auth == _NO_AUTH else f" {self.auth.describe()}"
        return f"store rev {self.revision}{compact} {{{kvs}}} {self.leases.describe()}{auth}"

    def __repr__(self) -> str:
        return f"<StoreState {self.describe()}>"


def _rebuild_state(
    revision: int,
    compact_main_revision: int,
    live: PMap[bytes, KeyValue],
    leases: LeaseTable,
    history: HistoryNode | None,
    next_lease_id: int,
    write_count: int,
    config: StoreConfig,
    auth: AuthState | None = None,
) -> StoreState:
    return StoreState(
        revision=revision,
        compact_main_revision=compact_main_revision,
        live=live,
        leases=leases,
        history=history,
        next_lease_id=next_lease_id,
        write_count=write_count,
        config=config,
        auth=_NO_AUTH if auth is None else auth,
    )


def initial_state(config: StoreConfig | None = None) -> StoreState:
    """The empty store at revision 1, as a fresh etcd starts."""
    return StoreState(
        revision=1,
        compact_main_revision=-1,
        live=PMap(),
        leases=LeaseTable(),
        history=None,
        next_lease_id=1,
        write_count=0,
        config=config or StoreConfig(),
    )


# ---------------------------------------------------------------------------- apply


@overload
def apply(
    state: StoreState, request: Request, bugs: BugSet = NO_BUGS
) -> tuple[StoreState, Response]: ...


@overload
def apply(
    state: StoreState, request: AuthRequest | AsUser, bugs: BugSet = NO_BUGS
) -> tuple[StoreState, Response | AuthResponse]: ...


def apply(
    state: StoreState, request: Request | AuthRequest | AsUser, bugs: BugSet = NO_BUGS
) -> tuple[StoreState, Response | AuthResponse]:
    """Apply one request; returns the new state and etcd's response, or raises StoreError."""
    if isinstance(request, RangeRequest):
        return state, do_range(state, request, bugs)
    if isinstance(request, PutRequest):
        check_put_request(request)
        check_put_against(state, request, in_txn=False)
        return _put(state, request, bugs)
    if isinstance(request, DeleteRangeRequest):
        check_delete_request(request)
        txn = WriteTxn(state, bugs)
        delete_response = txn.delete(request)
        return _commit(state, txn), delete_response
    if isinstance(request, TxnRequest):
        check_txn_request(request, state.config.max_txn_ops)
        txn_path_checks(state, request)
        txn = WriteTxn(state, bugs)
        txn_response = txn.txn(request)
        return _commit(state, txn), txn_response
    if isinstance(request, CompactionRequest):
        return _compact(state, request.revision), CompactionResponse(ResponseHeader(state.revision))
    if isinstance(request, LeaseGrantRequest):
        return _grant(state, request)
    if isinstance(request, LeaseRevokeRequest):
        return _revoke(state, request)
    if isinstance(request, LeaseKeepAliveRequest):
        ttl = lease_ttl(state, request.id)
        return state, LeaseKeepAliveResponse(ResponseHeader(state.revision), request.id, ttl or 0)
    if isinstance(request, LeaseTimeToLiveRequest):
        return state, _time_to_live(state, request)
    if isinstance(request, LeaseLeasesRequest):
        ids = tuple(sorted(state.lease_ids()))
        return state, LeaseLeasesResponse(ResponseHeader(state.revision), ids)
    if isinstance(request, AsUser):
        return _apply_as(state, request, bugs)
    if isinstance(request, AUTH_REQUEST_TYPES):
        auth, auth_response = apply_auth(state.auth, request, state.revision)
        return (state if auth is state.auth else state._replace(auth=auth)), auth_response
    raise TypeError(f"apply() got {request!r}, which is not a store request")


def _apply_as(
    state: StoreState, call: AsUser, bugs: BugSet
) -> tuple[StoreState, Response | AuthResponse]:
    """A client's request: the API layer's checks of the request alone (a key given, a
    txn's shape and duplicate keys: etcd makes them before anything else), then the
    caller's permission, then the request applied."""
    request = call.request
    if isinstance(request, AUTH_REQUEST_TYPES):
        check_admin_call(state.auth, call)
        return apply(state, request, bugs)
    if isinstance(request, PutRequest):
        check_put_request(request)
    elif isinstance(request, DeleteRangeRequest):
        check_delete_request(request)
    elif isinstance(request, TxnRequest):
        check_txn_request(request, state.config.max_txn_ops)
    elif isinstance(request, RangeRequest) and not request.key:
        do_range(state, request)  # raises etcd's empty-key error
    check_client(state.auth, call, lambda lease_id: _lease_keys(state, lease_id))
    return apply(state, request, bugs)


def _lease_keys(state: StoreState, lease_id: int) -> frozenset[bytes]:
    record = state.leases.get(lease_id)
    return frozenset() if record is None else frozenset(record.keys)


def apply_all(
    state: StoreState, requests: list[Request], bugs: BugSet = NO_BUGS
) -> tuple[StoreState, list[Response]]:
    """Apply requests in order (convenience for tests and examples)."""
    responses: list[Response] = []
    for request in requests:
        state, response = apply(state, request, bugs)
        responses.append(response)
    return state, responses


def _put(
    state: StoreState, request: PutRequest, bugs: BugSet = NO_BUGS
) -> tuple[StoreState, PutResponse]:
    """A plain put whose checks have passed: what `WriteTxn.put` then `_commit` give
    (one write op, so no bug changes it), built directly; the checker's search applies
    tens of thousands of puts and the working copy's bookkeeping was half their cost."""
    new_state, kv, old = put_state(state, request)
    prev = kv if bugs.on("prev_kv_from_new_revision") else old  # (a mutation)
    return new_state, PutResponse(
        ResponseHeader(new_state.revision), prev if request.prev_kv else None
    )


def put_state(
    state: StoreState, request: PutRequest
) -> tuple[StoreState, KeyValue, KeyValue | None]:
    """The state after a plain put whose checks (`check_put_request`,
    `check_put_against`) have passed, the key-value it wrote and the one it replaced:
    `apply`'s state without building its response (the checker's search compares the
    recorded response's revision itself)."""
    key = request.key
    old = state.live.get(key)
    revision = state.revision + 1
    if old is None:
        kv = KeyValue(key, revision, revision, 1, request.value, request.lease)
        original_lease = 0
    else:
        value = old.value if request.ignore_value else request.value
        lease = old.lease if request.ignore_lease else request.lease
        kv = KeyValue(key, old.create_revision, revision, old.version + 1, value, lease)
        original_lease = old.lease
    leases = state.leases
    if original_lease != kv.lease:
        leases = leases.with_key_moves({key: (original_lease, kv.lease)})
    new_state = StoreState(
        revision=revision,
        compact_main_revision=state.compact_main_revision,
        live=state.live.update({key: kv}),
        leases=leases,
        history=HistoryNode(revision, (Event(EventType.PUT, kv, old),), state.history),
        next_lease_id=state.next_lease_id,
        write_count=state.write_count + 1,
        config=state.config,
        auth=state.auth,
    )
    return new_state, kv, old


def _commit(state: StoreState, txn: WriteTxn, leases: LeaseTable | None = None) -> StoreState:
    """The state after a write: one history node per revision the write used."""
    if leases is None:
        leases = state.leases.with_key_moves(txn.lease_moves)
    if not txn.events:
        return state if leases is state.leases else state._replace(leases=leases)
    history = state.history
    for revision, events in txn.events:
        history = HistoryNode(revision, tuple(events), history)
    return state._replace(
        revision=txn.last_revision,
        live=state.live.update(txn.overlay),
        leases=leases,
        history=history,
        write_count=state.write_count + 1,
    )


def _compact(state: StoreState, revision: int) -> StoreState:
    # mvcc kvstore.updateCompactRev: <= the current compact revision is ErrCompacted,
    # beyond the current revision is ErrFutureRev. Compaction takes no revision. etcd's
    # compactMainRev starts at -1, so a fresh store accepts compact(0) once (etcd 3.5.1).
    if revision <= state.compact_main_revision:
        raise CompactedError(
            f"compact({revision}) but the store is already compacted up to "
            f"{state.compact_revision}; compact to a later revision"
        )
    if revision > state.revision:
        raise FutureRevisionError(
            f"compact({revision}) but the store is at revision {state.revision}"
        )
    kept = [] if state.history is None else state.history.chain()
    history: HistoryNode | None = None
    for node in kept:
        if node.revision >= revision:
            history = HistoryNode(node.revision, node.events, history)
    return state._replace(compact_main_revision=revision, history=history)


def _grant(state: StoreState, request: LeaseGrantRequest) -> tuple[StoreState, Response]:
    if request.ttl > MAX_LEASE_TTL:
        raise LeaseTTLTooLargeError(f"ttl {request.ttl} > {MAX_LEASE_TTL}")
    if request.id and request.id in state.leases:
        raise LeaseExistsError(f"lease {request.id} is already granted; revoke it or pick another")
    lease_id = request.id or next_free_id(state.leases, state.next_lease_id)
    ttl = effective_ttl(request.ttl, state.config.min_lease_ttl)
    new_state = state._replace(
        leases=state.leases.with_record(LeaseRecord(lease_id, ttl)),
        next_lease_id=max(state.next_lease_id, lease_id + 1),
    )
    return new_state, LeaseGrantResponse(ResponseHeader(state.revision), lease_id, ttl)


def _revoke(state: StoreState, request: LeaseRevokeRequest) -> tuple[StoreState, Response]:
    record = state.leases.get(request.id)
    if record is None:
        raise LeaseNotFoundError(f"lease {request.id} is not granted (revoked or expired?)")
    txn = WriteTxn(state, NO_BUGS)
    txn.delete_keys(record.keys)
    new_state = _commit(state, txn, leases=state.leases.without(request.id))
    return new_state, LeaseRevokeResponse(ResponseHeader(new_state.revision))


def _time_to_live(state: StoreState, request: LeaseTimeToLiveRequest) -> LeaseTimeToLiveResponse:
    header = ResponseHeader(state.revision)
    record = state.leases.get(request.id)
    if record is None:  # etcd answers TTL -1 rather than an error
        return LeaseTimeToLiveResponse(header, request.id, -1)
    keys = tuple(sorted(record.keys)) if request.keys else ()
    return LeaseTimeToLiveResponse(header, record.id, record.ttl, record.ttl, keys)


def lease_ttl(state: StoreState, lease_id: int) -> int | None:
    """The granted TTL of a lease (for the leader's keep-alive), None if not granted."""
    record = state.leases.get(lease_id)
    return None if record is None else record.ttl


# ---------------------------------------------------------------------------- invariants


def check_invariants(state: StoreState) -> None:
    """Raise InvariantViolation if the state breaks one of the store's invariants.

    RevisionMonotonic: history revisions strictly increase and end at the revision.
    OneRevisionPerWrite: the revision is 1 + the number of writes that changed the store.
    CompactRevisionBounded: compact revision <= revision.
    KeyRevisionsOrdered: 1 <= create_revision <= mod_revision <= revision for live keys.
    VersionCountsWrites: a live key's version counts its puts since its creation.
    LiveMatchesHistory: the last event of each key in the history is its live value.
    LeaseAttachment: every live key's lease is granted and lists the key, and every
    key a lease lists is live with that lease.
    The auth store's invariants (model/auth.py `check_auth_invariants`).
    """
    for name, detail in check_auth_invariants(state.auth):
        _violation(name, state, detail)
    if state.compact_revision > state.revision:
        _violation("CompactRevisionBounded", state, "compact revision beyond revision")
    if state.revision != 1 + state.write_count:
        _violation(
            "OneRevisionPerWrite",
            state,
            f"revision {state.revision} after {state.write_count} writes",
        )
    revisions = [revision for revision, _ in state.history_revisions()]
    if any(b <= a for a, b in itertools.pairwise(revisions)) or (
        revisions and revisions[-1] != state.revision
    ):
        _violation("RevisionMonotonic", state, f"history revisions {revisions}")
    last_event: dict[bytes, Event] = {}
    puts_since_create: dict[bytes, int] = {}
    for revision, events in state.history_revisions():
        if not events:
            _violation("OneRevisionPerWrite", state, f"revision {revision} has no events")
        for event in events:
            if event.kv.mod_revision != revision:
                _violation("RevisionMonotonic", state, f"{event.describe()} filed at {revision}")
            key = event.kv.key
            last_event[key] = event
            if event.type is EventType.PUT:
                if event.kv.create_revision == revision:
                    puts_since_create[key] = 1
                elif key in puts_since_create:
                    puts_since_create[key] += 1
            else:
                puts_since_create.pop(key, None)
    for key, kv in state.live.items():
        if not 1 <= kv.create_revision <= kv.mod_revision <= state.revision or kv.version < 1:
            _violation("KeyRevisionsOrdered", state, kv.describe())
        if key in puts_since_create and puts_since_create[key] != kv.version:
            _violation(
                "VersionCountsWrites",
                state,
                f"{kv.describe()} after {puts_since_create[key]} puts since creation",
            )
        last = last_event.get(key)
        if last is not None and (last.type is not EventType.PUT or last.kv != kv):
            _violation("LiveMatchesHistory", state, f"{kv.describe()} vs {last.describe()}")
        if kv.lease:
            record = state.leases.get(kv.lease)
            if record is None or key not in record.keys:
                _violation("LeaseAttachment", state, f"{kv.describe()} has no granted lease")
    for key, last in last_event.items():
        if last.type is EventType.DELETE and key in state.live:
            _violation(
                "LiveMatchesHistory", state, f"{show_bytes(key)} live after {last.describe()}"
            )
    for record in state.leases:
        for key in record.keys:
            holder = state.live.get(key)
            if holder is None or holder.lease != record.id:
                _violation("LeaseAttachment", state, f"{record.describe()} lists {show_bytes(key)}")


def _violation(name: str, state: StoreState, what: str) -> None:
    raise InvariantViolation(name, f"{what}; {state.describe()}")

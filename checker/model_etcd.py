"""The `etcd` model: the store model's own semantics (etcdspec.model.store.apply), judged
against recorded etcd v3 responses, with revision hints for the search.

Contract:
- Operations: range, put, delete, txn, compact, lease_grant, lease_revoke,
  lease_keepalive, with etcd v3 JSON requests and responses (checker/etcd_json.py).
- An ok operation is linearizable in a state when `apply()` answers exactly the recorded
  response: header revision, kvs with create/mod revisions, versions, values and leases,
  count, more, prev_kv(s), deleted, succeeded and every nested txn response. Keep-alive
  never goes through the log (as in etcd): it is answered from `lease_ttl`.
- fail operations took no effect and are dropped; info ranges and keep-alives cannot
  change the store and are dropped. An info lease_grant without an ID (the server chose
  one nobody saw) may have granted any lease ID that ok operations use but no grant in
  the history provides; the model tries each.
- Leases may expire at times the history does not show: for every granted lease the
  search gets a synthetic info operation `lease_expire` (a revoke, deleting the
  attached keys), invoked once the granted TTL has passed since the grant's invoke
  (expiry is never earlier: keep-alives and leader changes only delay it), which may
  take effect at any later point or never. It is tried only where it can make a difference: where a revision is missing
  (it deleted keys) or right before an operation that names the lease. Turn it off with
  `EtcdModel(lease_expiry=False)` for clusters whose leases cannot expire in the run.
- Revision hints: a put that reports revision r ran right after revision r-1; a read,
  grant, keep-alive or compaction that reports r ran at r; a delete or txn ran at r-1
  if its response shows it wrote (deleted > 0, a put in the branch that ran), else at
  r; a revoke at r-1 or r. info puts, deletes and txns either advance the revision or
  change nothing.
- Observations cut the info writes further: a response that shows key k = v with
  mod_revision m and create_revision c says some write put k = v at m and a put
  created k at c (only an info write that may do so is placed there, and an info write
  that no other operation could match is placed nowhere else); a current read at
  revision r that shows k with mod_revision m says nothing wrote k in (m, r], and
  nothing deleted it in (c, r]. An operation (a lease expiry too) that takes a
  revision at which ("put", key, value), ("create", key) or ("delete", key) was
  observed (by a response, or by a watch when the caller passes watch events) must
  have made that write (`writes_match`): one revision is one write.
- No per-key partitions: revisions are global, so keys interact through them; the
  revision cuts take the place of partitioning.
- What one request, response or event shows about its writes (revision taken, write
  signatures, keys put, leases named) is checker/etcd_writes.py's.
- Auth: an operation that records its `user` (history schema 2) is applied as that
  user's request (`AsUser`): one the model's auth store refuses cannot have taken
  effect, so an ok or info write by a user without the permission has no linearization
  (a violation when nothing else explains the history). A fail operation with a user
  whose error is one of the auth store's (permission denied, user name is empty, ...)
  is judged too: it must be linearized where the model refuses it with that very error
  (a permitted request that was refused is a violation). "auth: revision in header is
  old" is not judged (the history does not say when the token was issued). The Auth
  service's operations (checker/etcd_auth_json.py's AUTH_FS) change the model's auth
  store; their responses are compared without their headers.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from etcdspec.checker.etcd_auth_json import (
    AUTH_FS,
    auth_request_from_json,
    auth_response_from_json,
    same_auth_answer,
)
from etcdspec.checker.etcd_json import (
    ETCD_FS,
    EtcdJsonError,
    kv_to_json,
    plain_request_reader,
    request_from_json,
    response_from_json,
    response_reader,
)
from etcdspec.checker.etcd_writes import (
    blind_put_keys,
    blind_write,
    bumped,
    event_signatures,
    lease_ids_used,
    pre_revisions,
    put_keys,
    response_kvs,
    sure_put_keys,
    write_signatures,
)
from etcdspec.checker.history import Operation
from etcdspec.checker.models import PREPARED_DEFAULTS, CheckModel, ModelInputError, PreparedOp
from etcdspec.model.auth_requests import AUTH_REQUEST_TYPES, AuthRequest, AuthResponse
from etcdspec.model.errors import ALL_ERRORS, AuthOldRevisionError, StoreError, error_for
from etcdspec.model.kv import compare_holds, keys_at, range_response
from etcdspec.model.requests import (
    RANGE_END_ALL,
    AsUser,
    DeleteRangeRequest,
    DeleteRangeResponse,
    EventType,
    KeyValue,
    LeaseGrantRequest,
    LeaseKeepAliveRequest,
    LeaseKeepAliveResponse,
    LeaseRevokeRequest,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    Request,
    Response,
    ResponseHeader,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
)
from etcdspec.model.store import StoreState, apply, initial_state, lease_ttl, put_state

EXPIRY_PROCESS = "lease-expiry"
AUTH_ERRORS: tuple[type[StoreError], ...] = tuple(
    cls
    for cls in ALL_ERRORS
    if cls.__module__
    and cls.__name__
    in {
        "UserEmptyError",
        "PermissionDeniedError",
        "RootUserNotExistError",
        "RootRoleNotExistError",
        "UserAlreadyExistError",
        "UserNotFoundError",
        "RoleAlreadyExistError",
        "RoleNotFoundError",
        "RoleEmptyError",
        "AuthFailedError",
        "PermissionNotGivenError",
        "RoleNotGrantedError",
        "PermissionNotGrantedError",
        "AuthNotEnabledError",
        "InvalidAuthMgmtError",
        "NoPasswordUserError",
    }
)
"""The refusals a fail operation with a user (or of the Auth service) is judged by."""


class Refused:
    """The recorded answer of a judged fail operation: etcd refused with `error`."""

    __slots__ = ("error",)

    def __init__(self, error: type[StoreError]) -> None:
        self.error = error

    def describe(self) -> str:
        return f"refused {self.error.code}: {self.error.message}"


_AUTH_F_SET = frozenset(AUTH_FS)
_AUTH_TYPE_SET = frozenset(AUTH_REQUEST_TYPES)
_ETCD_F_SET = frozenset(ETCD_FS)
_KINDS = ("put", "create", "delete")  # the signatures `writes_match` judges
_NO_TAGS: frozenset[Hashable] = frozenset()


class EtcdModel(CheckModel):
    name = "etcd"

    def __init__(self, lease_expiry: bool = True) -> None:
        self.lease_expiry = lease_expiry
        self.notes: list[str] = []
        self._blind_grants = 0
        self._orphans: tuple[int, ...] = ()  # lease IDs used but never seen granted

    def init(self) -> Hashable:
        return initial_state()

    def revision(self, state: Any) -> int | None:
        revision: int = state.revision
        return revision

    # -- preparing operations ---------------------------------------------------------
    def prepare_all(self, operations: Sequence[Operation]) -> tuple[list[PreparedOp], int]:
        """`prepare` of every operation, an ok put without a lease and an ok range (most
        of a history) decoded inline: their plain request, their response, the revision
        hints `prepare` gives them. Anything else, or anything the inline path cannot
        read plainly, goes to `prepare` (so its errors are the same);
        tests/checker/test_checker_etcd_prepare_all.py compares the two item by item."""
        prepared: list[PreparedOp] = []
        append = prepared.append
        dropped = 0
        # The plain readers give a PutRequest and a RangeRequest (or None): Any to mypy.
        plain_put: Any = plain_request_reader("put")
        plain_range: Any = plain_request_reader("range")
        assert plain_put is not None and plain_range is not None
        put_response, range_response = response_reader("put"), response_reader("range")
        new_prepared, rest = tuple.__new__, PREPARED_DEFAULTS[2:]
        prepare = self.prepare
        for op in operations:
            if op.type == "ok" and op.user is None and type(op.request) is dict:
                f = op.f
                try:  # anything odd (an error among it) is `prepare`'s to say
                    if f == "put":
                        request = plain_put(op.request)
                        if request is not None and not request.lease:
                            response = put_response(op.response, "response")
                            revision = response.header.revision
                            hints = ((revision - 1,), revision) if revision > 0 else ((), None)
                            payload = (request, response)
                            append(new_prepared(PreparedOp, (op, payload, *hints, *rest)))
                            continue
                    elif f == "range":
                        request = plain_range(op.request)
                        if request is not None:
                            response = range_response(op.response, "response")
                            revision = response.header.revision
                            pre = (revision,) if revision > 0 else ()
                            append(
                                new_prepared(
                                    PreparedOp, (op, (request, response), pre, None, *rest)
                                )
                            )
                            continue
                except (EtcdJsonError, TypeError, ValueError):
                    pass
            item = prepare(op)
            if item is None:
                dropped += 1
            else:
                append(item)
        return prepared, dropped

    def prepare(self, op: Operation) -> PreparedOp | None:
        if op.f in _AUTH_F_SET:
            return self._prepare_auth(op)
        if op.type == "fail":
            return self._prepare_refusal(op) if op.user is not None else None
        if op.f not in _ETCD_F_SET:
            raise ModelInputError(
                op, f"the etcd model has {', '.join((*ETCD_FS, *AUTH_FS))}, not {op.f!r}"
            )
        try:
            request = request_from_json(op.f, op.request, "request")
            response = (
                response_from_json(op.f, op.response, "response") if op.type == "ok" else None
            )
            # A missing header reads as revision 0, which hints nothing (as no header).
            revision = response.header.revision if response is not None else None
        except (EtcdJsonError, TypeError, ValueError) as error:
            raise ModelInputError(op, str(error)) from error
        if op.type == "info":
            return self._prepare_info(op, request)
        if isinstance(request, LeaseGrantRequest) and request.id == 0:
            assert response is not None
            request = LeaseGrantRequest(ttl=request.ttl, id=getattr(response, "id", 0))
        pre = pre_revisions(request, response, revision)
        bumps_to = (
            revision if len(pre) == 1 and revision is not None and pre[0] == revision - 1 else None
        )
        if type(request) is RangeRequest or (isinstance(request, PutRequest) and not request.lease):
            tags = _NO_TAGS  # what lease_ids_used says of them: no lease
        else:
            leases = lease_ids_used(request)
            tags = frozenset(("lease", i) for i in leases) if leases else _NO_TAGS
        return PreparedOp(op, (request, response), pre, bumps_to, tags=tags)

    def _refusal(self, op: Operation) -> Refused | None:
        """The judged refusal a fail operation records, or None (not judged)."""
        body = op.response if isinstance(op.response, dict) else {}
        code, message = body.get("code"), body.get("error")
        if not isinstance(code, str) or not isinstance(message, str):
            return None
        error = error_for(code, message)
        if error is None or error is AuthOldRevisionError or error not in AUTH_ERRORS:
            return None
        return Refused(error)

    def _prepare_refusal(self, op: Operation) -> PreparedOp | None:
        refused = self._refusal(op)
        if refused is None:
            return None
        try:
            request = request_from_json(op.f, op.request, "request")
        except (EtcdJsonError, TypeError, ValueError) as error:
            raise ModelInputError(op, str(error)) from error
        leases = lease_ids_used(request)
        tags = frozenset(("lease", i) for i in leases) if leases else _NO_TAGS
        # Judged like an ok operation: it must be linearized (where the model refuses it).
        return PreparedOp(replace(op, type="ok"), (request, refused), tags=tags)

    def _prepare_auth(self, op: Operation) -> PreparedOp | None:
        try:
            request = auth_request_from_json(op.f, op.request, "request")
            response: AuthResponse | Refused | None = None
            if op.type == "ok":
                response = auth_response_from_json(op.f, op.response, "response")
        except (EtcdJsonError, TypeError, ValueError, KeyError) as error:
            raise ModelInputError(op, str(error)) from error
        if op.type == "fail":
            response = self._refusal(op)
            if response is None:
                return None
            op = replace(op, type="ok")
        return PreparedOp(op, (request, response))

    def _prepare_info(self, op: Operation, request: Request) -> PreparedOp | None:
        if isinstance(request, (RangeRequest, LeaseKeepAliveRequest)):
            return None
        if isinstance(request, TxnRequest) and request.is_read_only():
            return None
        if isinstance(request, LeaseGrantRequest) and request.id == 0:
            # The server chose an ID nobody saw: it may be any lease ID that ok operations
            # use but no grant in the history provides (`synthetic_ops` finds them).
            self._blind_grants += 1
        bumps_or_noop = op.f in ("put", "delete", "txn")
        return PreparedOp(
            op,
            (request, None),
            bumps_or_noop=bumps_or_noop,
            signatures=write_signatures(request),
            wildcard=blind_write(request),
        )

    def synthetic_ops(self, ops: Sequence[PreparedOp], next_id: int) -> list[PreparedOp]:
        grants = [p for p in ops if isinstance(p.payload[0], LeaseGrantRequest)]
        if not grants:  # no lease was granted: none can expire, no grant was blind
            self._orphans = ()
            return []
        granted = {p.payload[0].id for p in grants} - {0}
        used: set[int] = set()
        for prepared in ops:
            if prepared.op.type == "ok":
                used |= lease_ids_used(prepared.payload[0])
        self._orphans = tuple(sorted(used - granted)) if self._blind_grants else ()
        if self._orphans:
            self.notes.append(
                f"{self._blind_grants} info lease_grant(s) without an ID may have granted "
                f"lease(s) {', '.join(map(str, self._orphans))}, which ok operations use"
            )
        if not self.lease_expiry:
            return []
        extra: list[PreparedOp] = []
        seen: set[int] = set()
        events = _event_times(ops)
        for prepared in sorted(grants, key=lambda p: p.op.call):
            request = prepared.payload[0]
            if not isinstance(request, LeaseGrantRequest) or request.id in seen:
                continue
            granted_ttl = getattr(prepared.payload[1], "ttl", 0) or 0
            earliest = prepared.op.call_time + max(request.ttl, granted_ttl) * 1_000_000_000
            ids = (request.id,) if request.id else self._orphans
            for lease_id in ids:
                if lease_id in seen:
                    continue
                seen.add(lease_id)
                extra.append(
                    self._expiry(prepared.op, lease_id, next_id + len(extra), events, earliest)
                )
        return extra

    def _expiry(
        self,
        grant: Operation,
        lease_id: int,
        op_id: int,
        events: list[tuple[int, int]],
        earliest: int,
    ) -> PreparedOp:
        """A lease expiry: a revoke that may happen, or never, once its TTL has run out.

        A lease cannot expire before its TTL has passed since the grant was invoked
        (keep-alives and leader changes only push expiry later), so the expiry is invoked
        at the last history event before `earliest`: every operation that returned
        before then precedes it. Without this bound a search may charge a key's deletion
        to a lease that could not have expired yet (a linearization the watches refute).
        """
        call, call_time = grant.call, grant.call_time
        position = bisect.bisect_left(events, (earliest, -1)) - 1
        if position >= 0 and events[position][1] > call:
            call_time, call = events[position]
        expire = Operation(
            id=op_id,
            process=EXPIRY_PROCESS,
            f="lease_expire",
            request={"ID": lease_id},
            type="info",
            response=None,
            call=call,
            ret=None,
            call_time=call_time,
            return_time=None,
            invoke_index=grant.invoke_index,
            complete_index=None,
        )
        return PreparedOp(
            expire, (LeaseRevokeRequest(lease_id), None), lazy_tag=("lease", lease_id)
        )

    # -- stepping -----------------------------------------------------------------------
    def answer(
        self, state: StoreState, request: Request | AuthRequest | AsUser
    ) -> tuple[StoreState, Response | AuthResponse]:
        """The model's new state and response (raises StoreError when etcd would refuse)."""
        if isinstance(request, AsUser):
            if isinstance(request.request, LeaseKeepAliveRequest):
                apply(state, request)  # the permission check alone (none for keep-alive)
                return self.answer(state, request.request)
            return apply(state, request)
        if isinstance(request, LeaseKeepAliveRequest):
            ttl = lease_ttl(state, request.id)
            return state, LeaseKeepAliveResponse(
                ResponseHeader(state.revision), request.id, ttl if ttl is not None else 0
            )
        return apply(state, request)

    def step(self, state: Any, prepared: PreparedOp) -> list[Any]:
        request, observed = prepared.payload
        user = prepared.op.user
        if user is not None or type(request) in _AUTH_TYPE_SET or type(observed) is Refused:
            return self._step_auth(state, prepared)
        kind = type(request)
        if kind is PutRequest and _plain_put(request):
            # `apply` refuses no such put, and answers PutResponse(header(revision)):
            # its state built directly, the recorded answer compared field by field.
            new_state = put_state(state, request)[0]
            if observed is None or (
                type(observed) is PutResponse
                and observed.prev_kv is None
                and type(observed.header) is ResponseHeader
                and observed.header.revision == new_state.revision
            ):
                return [new_state]
            return []
        if kind is RangeRequest and _plain_range(request):
            # `apply` answers RangeResponse(header(revision), the key's kv or none,
            # False, 1 or 0) and leaves the state as it is: compared field by field as
            # the response's == compares them, without building it.
            if observed is None:
                return [state]
            if type(observed) is RangeResponse and type(observed.header) is ResponseHeader:
                current = state.live.get(request.key)
                kvs, count = ((), 0) if current is None else ((current,), 1)
                if (
                    state.revision == observed.header.revision
                    and kvs == observed.kvs
                    and observed.more == False  # noqa: E712  (a bool: == as the fields compare)
                    and count == observed.count
                ):
                    return [state]
                return []
        if kind is TxnRequest:
            simple = _simple_txn(state, request)
            if simple is not None:
                if observed is not None and simple[1] != observed:
                    return []
                return [simple[0]]
        if kind is LeaseGrantRequest and request.id == 0 and observed is None:
            return self._blind_grant(state, request)
        try:
            if kind is LeaseKeepAliveRequest:
                new_state, response = self.answer(state, request)
            else:  # everything else is the store's own answer (as `answer` gives it)
                new_state, response = apply(state, request)
        except StoreError:
            return []
        if observed is not None and response != observed:
            return []
        return [new_state]

    def _step_auth(self, state: StoreState, prepared: PreparedOp) -> list[Any]:
        """A step of an operation made as a user, of the Auth service, or judged refused."""
        request, observed = prepared.payload
        call = _as_caller(prepared)
        if type(request) is LeaseGrantRequest and request.id == 0 and observed is None:
            try:  # the permission check first (none for a grant: etcd 3.5.1)
                apply(state, AsUser(call.user, request) if isinstance(call, AsUser) else request)
            except StoreError:
                return []
            return self._blind_grant(state, request)
        try:
            new_state, response = self.answer(state, call)
        except StoreError as error:
            if type(observed) is Refused and type(error) is observed.error:
                return [state]
            return []
        if observed is None:
            return [new_state]
        if type(observed) is Refused:
            return []
        if type(request) in AUTH_REQUEST_TYPES:
            return [new_state] if same_auth_answer(response, observed) else []  # type: ignore[arg-type]
        return [new_state] if response == observed else []

    def _blind_grant(self, state: StoreState, request: LeaseGrantRequest) -> list[Any]:
        states = []
        for lease_id in self._orphans:
            try:
                states.append(apply(state, LeaseGrantRequest(request.ttl, lease_id))[0])
            except StoreError:
                continue
        return states

    def describe_op(self, prepared: PreparedOp) -> str:
        observed = prepared.payload[1]
        answer = observed.describe() if observed is not None else "info"
        return f"op {prepared.op.id} {_as_caller(prepared).describe()} -> {answer}"

    def mismatch(self, state: Any, prepared: PreparedOp) -> str:
        observed = prepared.payload[1]
        request = _as_caller(prepared)
        try:
            _, response = self.answer(state, request)
        except StoreError as error:
            return f"{request.describe()}: the model refuses it ({error.describe()})"
        if observed is None:
            return f"{request.describe()}: no effect possible here"
        if type(observed) is Refused:
            return (
                f"{request.describe()}: the model permits it (answering {response.describe()}) "
                f"but the history records it {observed.describe()}"
            )
        return (
            f"{request.describe()}: the model answers {response.describe()} "
            f"but the history records {observed.describe()}"
        )

    # -- observations -------------------------------------------------------------------
    def observed_writes(self, ops: Sequence[PreparedOp]) -> dict[int, set[Hashable]]:
        """Writes responses saw: a kv with mod_revision m and value v says ("put", k, v)
        at m; with create_revision c, ("create", k) at c (a put that created k). Kept for
        `info_possible`, per key the revisions in which a response proves the key was not
        written: a kv read at revision r with mod_revision m means no write to that key in
        (m, r]; a put or delete at r whose prev_kv has mod_revision m means none in
        (m, r-1]; and those in which it was not deleted: (c, r] and (c, r-1] likewise.
        A kv at version v with create c and mod m had v puts in [c, m]: when the ok
        operations surely made all v, nothing else wrote the key in [c, m] either."""
        observed: dict[int, set[Hashable]] = {}
        quiet: dict[bytes, list[tuple[int, int]]] = {}
        alive: dict[bytes, list[tuple[int, int]]] = {}
        answered = []  # the ok ones' payloads
        # Revisions at which an ok operation surely put each key; the revisions ok
        # operations surely took; keys an ok op may put at a revision not known.
        puts: dict[bytes, list[int]] = {}
        claimed: list[int] = []
        uncertain: set[bytes] = set()
        for prepared in ops:
            payload = prepared.payload
            request, response = payload
            kind = type(response)
            # The second loop reads the kvs a response shows (and a txn's, a delete's):
            # a put without prev_kv and a range with no kv show none.
            if kind is PutResponse:
                if response.prev_kv is not None:
                    answered.append(payload)
            elif kind is RangeResponse:
                if response.kvs:
                    answered.append(payload)
            elif _kv_answer(response):
                answered.append(payload)
            else:
                continue
            bumps_to = prepared.bumps_to
            if bumps_to is not None:
                claimed.append(bumps_to)
                if isinstance(request, PutRequest):  # what sure_put_keys gives, inline
                    listed = puts.get(request.key)
                    if listed is None:
                        puts[request.key] = [bumps_to]
                    else:
                        listed.append(bumps_to)
                    continue
                for key in sure_put_keys(request, response):
                    puts.setdefault(key, []).append(bumps_to)
            elif type(request) is not RangeRequest and bumped(request, response) is not False:
                # it may have written (a range never does)
                uncertain |= put_keys(request)
        self._ok_puts = ok_puts = {key: sorted(revisions) for key, revisions in puts.items()}
        self._claimed = sorted(claimed)
        needs: dict[bytes, list[tuple[int, int, int]]] = {}
        # Versions: a current read at r showing key k (create c, version v) bounds the
        # puts to k from any revision g <= r in that incarnation: version at g plus the
        # ok puts to k in (g, r] is at most v.
        versions: dict[bytes, list[tuple[int, int, int]]] = {}
        done: set[KeyValue] = set()  # kvs already seen whole (what they say is the same)
        no_puts: list[int] = []
        bisect_left, bisect_right = bisect.bisect_left, bisect.bisect_right
        for request, response in answered:
            kind = type(response)
            keys_only = isinstance(request, RangeRequest) and request.keys_only
            at = response.header.revision
            if kind is RangeResponse:
                kvs: Sequence[KeyValue] = response.kvs
            elif kind is PutResponse:
                kvs = () if response.prev_kv is None else (response.prev_kv,)
            else:
                kvs = response_kvs(response)
            for kv in kvs:
                if not keys_only:
                    if kv in done:
                        continue
                    done.add(kv)
                    _note(observed, kv.mod_revision, ("put", kv.key, kv.value))
                create_revision = kv.create_revision
                if create_revision > 0:
                    key, mod_revision = kv.key, kv.mod_revision
                    _note(observed, create_revision, ("create", key))
                    # Version v at m: v puts to the key in [c, m]; when ok operations
                    # surely made all of them, no info write put it there.
                    made = ok_puts.get(key, no_puts)
                    low = bisect_left(made, create_revision)
                    missing = kv.version - (bisect_right(made, mod_revision) - low)
                    if missing == 0:
                        _add(quiet, key, (create_revision - 1, mod_revision))
                    elif missing > 0 and key not in uncertain:
                        _add(needs, key, (mod_revision, create_revision, kv.version))
            # A current read's kvs are as they were at its revision; a write's prev_kv(s)
            # show each key as it was just before the write (at-1).
            if kind is RangeResponse:
                if not isinstance(request, RangeRequest) or request.revision > 0:
                    continue
                upto = at
                if not request.count_only:
                    for kv in kvs:
                        _add(versions, kv.key, (at, kv.create_revision, kv.version))
            elif kind is PutResponse or (kind is DeleteRangeResponse and response.deleted):
                upto = at - 1
            else:
                continue
            for kv in kvs:
                if kv.mod_revision < upto:
                    _add(quiet, kv.key, (kv.mod_revision, upto))
                if 0 < kv.create_revision < upto:
                    _add(alive, kv.key, (kv.create_revision, upto))
        self._quiet = {key: _merge(spans) for key, spans in quiet.items()}
        self._needs = {key: sorted(set(items)) for key, items in needs.items()}
        self._needs_at = {key: [m for m, _, _ in items] for key, items in self._needs.items()}
        self._alive = {key: _merge(spans) for key, spans in alive.items()}
        self._versions = {key: sorted(items) for key, items in versions.items()}
        self._version_revisions = {
            key: [r for r, _, _ in items] for key, items in self._versions.items()
        }
        return observed

    def info_state_possible(self, prepared: PreparedOp, state: Any) -> bool:
        revision = state.revision
        if revision <= 1 or not hasattr(self, "_versions"):
            return True
        written = state.history
        if written is None or written.revision != revision:
            return self._puts_fit(state)
        for event in written.events:
            kv = event.kv
            if event.type is not EventType.PUT or kv.key not in self._versions:
                continue
            revisions = self._version_revisions[kv.key]
            k = bisect.bisect_left(revisions, revision)
            if k == len(revisions):
                continue
            at, create_revision, version = self._versions[kv.key][k]
            if create_revision != kv.create_revision:
                continue  # deleted and created again in between: no bound
            ok_puts = self._ok_puts.get(kv.key, [])
            later = bisect.bisect_right(ok_puts, at) - bisect.bisect_right(ok_puts, revision)
            if kv.version + later > version:
                return False
        return self._puts_fit(state)

    def _puts_fit(self, state: StoreState) -> bool:
        """A kv seen at version v (create c, mod m) needs v puts in [c, m]; those that ok
        operations did not surely make must be info writes, each taking a revision no ok
        operation claims. False when, at this state, more are needed than such revisions
        are left before m (or fewer than none)."""
        revision = state.revision
        for key, seen_at in self._needs_at.items():
            j = bisect.bisect_right(seen_at, revision)
            if j == len(seen_at):
                continue
            mod_revision, create_revision, version = self._needs[key][j]
            kv = state.get(key)
            if create_revision > revision or kv is None or kv.create_revision != create_revision:
                continue
            ok_puts = self._ok_puts.get(key, [])
            later = bisect.bisect_right(ok_puts, mod_revision) - bisect.bisect_right(
                ok_puts, revision
            )
            need = version - kv.version - later
            claimed = bisect.bisect_right(self._claimed, mod_revision) - bisect.bisect_right(
                self._claimed, revision
            )
            if need < 0 or need > mod_revision - revision - claimed:
                return False
        return True

    def pinned_revisions(
        self, ops: Sequence[PreparedOp], observed: Mapping[int, set[Hashable]]
    ) -> dict[int, int]:
        """An info write whose ("put", key, value) was observed at exactly one revision,
        and which no other operation (ok or info) may write, takes that revision. Keys
        that a put with ignore_value writes are left out: it writes a value again."""
        # Only an info write's ("put", key, value) can pin it: count the owners of those.
        wanted = {
            signature
            for prepared in ops
            if prepared.op.type == "info"
            for signature in write_signatures(prepared.payload[0])
            if isinstance(signature, tuple) and signature[0] == "put"
        }
        if not wanted:
            return {}
        owners: dict[Hashable, list[int]] = {}
        blind: set[bytes] = set()
        wanted_keys = {signature[1] for signature in wanted}
        for i, prepared in enumerate(ops):
            request = prepared.payload[0]
            kind = type(request)
            if kind is RangeRequest:  # writes nothing
                continue
            if kind is PutRequest:  # write_signatures and blind_put_keys, inline
                if request.ignore_value:
                    blind.add(request.key)
                elif request.key in wanted_keys:
                    put: Hashable = ("put", request.key, request.value)
                    if put in wanted:
                        owners.setdefault(put, []).append(i)
                continue
            for signature in write_signatures(request):
                if signature in wanted:
                    owners.setdefault(signature, []).append(i)
            blind |= blind_put_keys(request)
        seen_at: dict[Hashable, list[int]] = {}
        owned = set(owners)  # few (info writes' puts): intersect each revision's with them
        for revision, signatures in observed.items():
            for signature in signatures:  # a few each: no intersection set made
                if signature in owned:
                    seen_at.setdefault(signature, []).append(revision)
        pins: dict[int, int] = {}
        for signature, revisions in seen_at.items():
            assert isinstance(signature, tuple)
            who = owners[signature]
            alone = len(revisions) == 1 and len(who) == 1 and signature[1] not in blind
            if alone and ops[who[0]].op.type == "info":
                pins[who[0]] = revisions[0]
        return pins

    def writes_match(self, state: Any, signatures: set[Hashable]) -> bool:
        written = state.history
        if written is None or written.revision != state.revision:
            return True
        events = written.events
        made: Collection[Hashable] = (
            event_signatures(events[0])
            if len(events) == 1
            else {s for event in events for s in event_signatures(event)}
        )
        for signature in signatures:
            if isinstance(signature, tuple) and signature[0] in _KINDS and signature not in made:
                return False
        return True

    def info_possible(self, prepared: PreparedOp, revision: int) -> bool:
        request = prepared.payload[0]
        if isinstance(request, PutRequest):
            return not _within(getattr(self, "_quiet", {}).get(request.key), revision)
        if isinstance(request, DeleteRangeRequest) and not request.range_end:
            # A delete that takes a revision deletes the key: not while it is seen alive.
            return not _within(getattr(self, "_alive", {}).get(request.key), revision)
        return True

    # -- presentation -------------------------------------------------------------------
    def _all_keys(self, state: StoreState) -> tuple[KeyValue, ...]:
        try:
            _, response = apply(state, RangeRequest(b"\x00", RANGE_END_ALL))
        except StoreError:
            return ()
        assert isinstance(response, RangeResponse)
        return response.kvs

    def describe_state(self, state: Any) -> str:
        kvs = ", ".join(kv.describe() for kv in self._all_keys(state))
        leases = ", ".join(str(i) for i in sorted(state.lease_ids()))
        auth = "" if state.auth == initial_state().auth else f", {state.auth.describe()}"
        return (
            f"revision {state.revision}, compacted {state.compact_revision}, "
            f"keys [{kvs}], leases [{leases}]{auth}"
        )

    def state_json(self, state: Any) -> Any:
        return {
            "revision": state.revision,
            "compact_revision": state.compact_revision,
            "kvs": [kv_to_json(kv) for kv in self._all_keys(state)],
            "leases": sorted(state.lease_ids()),
        }


def _kv_answer(response: object) -> bool:
    """Whether a payload's answer is a KV or lease response (not None, not a judged
    refusal, not an Auth service response): what the observations read."""
    return (
        response is not None
        and type(response) is not Refused
        and not hasattr(response, "method")
        and type(response).__module__ == _REQUESTS_MODULE
    )


_REQUESTS_MODULE = RangeResponse.__module__


def _plain_put(request: PutRequest) -> bool:
    """A put `apply` cannot refuse (a key, no lease to find, nothing ignored) whose
    response holds no prev_kv: `EtcdModel.step` builds its state directly.
    tests/checker/test_checker_etcd_step.py holds it to `apply`'s answer."""
    return bool(request.key) and not (
        request.lease or request.prev_kv or request.ignore_value or request.ignore_lease
    )


def _plain_range(request: RangeRequest) -> bool:
    """A range of one key now (`keys_at`'s single-key path) with nothing that cuts or
    reshapes the answer: a key, no range_end, revision 0, no limit, keys_only,
    count_only, sort or filter. `apply` cannot refuse it. `EtcdModel.step` answers it
    from the key's kv; tests/checker/test_checker_etcd_range_step.py holds it to
    `apply`'s answer."""
    return (
        bool(request.key)
        and request.range_end == b""
        and request.revision == 0
        and request.limit == 0
        and not request.keys_only
        and not request.count_only
        and request.sort_order is SortOrder.NONE
        and request.sort_target is SortTarget.KEY
        and not request.has_filters()
    )


def _simple_txn(state: StoreState, request: TxnRequest) -> tuple[StoreState, TxnResponse] | None:
    """`apply`'s answer to a txn of a simple shape, built without the store's general
    write path (its checks, working copy and commit: ~20 us a txn), or None for any
    other shape. Simple: compares on non-empty keys, each branch at most one op, that
    op a plain put (`_plain_put`) or a range of a non-empty key at revision 0, and no
    more ops than the store allows per level. apply cannot refuse such a txn (every
    check it makes passes), and a one-put branch leaves what a plain put leaves
    (`put_state`; the txn's header and the put's carry its revision). Held to `apply`
    by tests/checker/test_checker_etcd_txn_step.py."""
    compares, success, failure = request.compare, request.success, request.failure
    if len(success) > 1 or len(failure) > 1:
        return None
    if max(len(compares), 1) > state.config.max_txn_ops:
        return None
    for compare in compares:
        if not compare.key:
            return None
    for branch in (success, failure):
        for op in branch:
            kind = type(op)
            if kind is PutRequest:
                if not _plain_put(op):  # type: ignore[arg-type]
                    return None
            elif kind is not RangeRequest or not op.key or op.revision != 0:  # type: ignore[union-attr]
                return None
    holds = True
    for compare in compares:  # all(...), without a generator
        if not compare_holds(state, compare):
            holds = False
            break
    branch = success if holds else failure
    if not branch:
        return state, TxnResponse(ResponseHeader(state.revision), holds, ())
    op = branch[0]
    if type(op) is PutRequest:
        new_state = put_state(state, op)[0]
        header = ResponseHeader(new_state.revision)
        return new_state, TxnResponse(header, holds, (PutResponse(header, None),))
    assert type(op) is RangeRequest
    kvs = keys_at(state, op.key, op.range_end, 0)
    read = range_response(kvs, op, state.revision)
    return state, TxnResponse(ResponseHeader(state.revision), holds, (read,))


def _as_caller(prepared: PreparedOp) -> Any:
    """The operation's request as the model applies it: wrapped as its user's when the
    history records one."""
    request = prepared.payload[0]
    user = prepared.op.user
    return request if user is None else AsUser(user, request)


def _within(spans: list[tuple[int, int]] | None, revision: int) -> bool:
    """Whether `revision` lies in one of the merged spans (low, high]."""
    if not spans:
        return False
    k = bisect.bisect_left(spans, (revision, revision)) - 1
    return k >= 0 and spans[k][0] < revision <= spans[k][1]


def _note(observed: dict[int, set[Hashable]], revision: int, signature: Hashable) -> None:
    """Add `signature` to what was observed at `revision`."""
    found = observed.get(revision)
    if found is None:
        observed[revision] = {signature}
    else:
        found.add(signature)


def _add(table: dict[bytes, list[Any]], key: bytes, item: Any) -> None:
    """Append `item` to `table[key]`'s list."""
    listed = table.get(key)
    if listed is None:
        table[key] = [item]
    else:
        listed.append(item)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open-on-the-left intervals (low, high] merged, sorted by low."""
    merged: list[tuple[int, int]] = []
    if not spans:
        return merged
    ordered = sorted(spans)
    low, high = ordered[0]
    for next_low, next_high in ordered:
        if next_low <= high:
            if next_high > high:
                high = next_high
        else:
            merged.append((low, high))
            low, high = next_low, next_high
    merged.append((low, high))
    return merged


def _event_times(ops: Sequence[PreparedOp]) -> list[tuple[int, int]]:
    """(time, position) of every invoke and return of the operations, in time order."""
    events = [(p.op.call_time, p.op.call) for p in ops]
    events += [
        (p.op.return_time, p.op.ret)
        for p in ops
        if p.op.ret is not None and p.op.return_time is not None
    ]
    events.sort()
    return events

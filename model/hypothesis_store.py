"""A Hypothesis state machine over the pure store: random requests, invariants after each.

`StoreMachine` applies random KV, txn, lease, compaction and watch requests to
`etcdspec.model.store` and checks after every step:
- the store's own invariants (`store.check_invariants`);
- ResponsePostcondition: every response the store gives (range, put, delete, txn with
  its nested responses, compaction, lease grant and revoke, each header) equals what an
  independent plain oracle (model/response_oracle.py, kept beside the store for the
  whole run) says etcd answers; `postconditions=False` switches it off (to show what
  the state invariants alone miss);
- OneRevisionPerRequest: a request raises the revision by 0 or 1, and every key a
  write txn changed carries the txn's one new revision;
- PastReadsConsistent: a read at a past revision r (compact_revision <= r <= current)
  returns exactly what a read at the latest revision returned when the store was at r;
  below the compaction it fails with CompactedError, above the head with
  FutureRevisionError;
- the watch guarantees (`etcdspec.model.watch`) for a watch opened at a random past
  revision and the responses the model's watch semantics give for it;
- with the `auth` group: auth changes (users, roles, grants, revokes, enable, disable)
  and KV/lease requests made as random users; NoWriteWithoutGrant: a write a client made
  while auth was enabled changed only keys a role of that user (or root) lets it write,
  every refused request changed nothing, and every auth change that succeeded bumped the
  auth revision (AuthRevisionBumped) unless it was an enable or a repeated grant.

Swarm testing: an initialize rule picks which optional rule groups run in this example
(a run focused on some rules, `ExploreOptions.rules`, keeps them all on instead).
`machine_factory(options, recorder)` gives the factory `etcdspec.model.explore` runs;
`StoreMachine.TestCase` runs the machine under pytest with the default recorder.
Keys, values and request strategies here are shared with the cluster machine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from etcdspec.model import store as store_model
from etcdspec.model.auth import ROOT
from etcdspec.model.auth_requests import (
    AuthDisableRequest,
    AuthEnableRequest,
    AuthRequest,
    AuthRoleAddRequest,
    AuthRoleDeleteRequest,
    AuthRoleGrantPermissionRequest,
    AuthRoleRevokePermissionRequest,
    AuthUserAddRequest,
    AuthUserDeleteRequest,
    AuthUserGrantRoleRequest,
    AuthUserRevokeRoleRequest,
    Permission,
    PermType,
)
from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.errors import CompactedError, FutureRevisionError, StoreError
from etcdspec.model.explore import ExploreOptions, RunRecorder
from etcdspec.model.hypothesis_rules import focused, has_initialize_rules
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.requests import (
    RANGE_END_ALL,
    AsUser,
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    Event,
    KeyValue,
    LeaseGrantRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    RangeResponse,
    Request,
    SortOrder,
    SortTarget,
    TxnOp,
    TxnRequest,
    in_range,
    show_bytes,
)
from etcdspec.model.response_oracle import ResponseOracle, check_response
from etcdspec.model.watch import WatchRequest, check_watch, watch_responses

KEYS = (b"a", b"b", b"c", b"d")
VALUES = (b"0", b"1", b"2")

keys = st.sampled_from(KEYS)
values = st.sampled_from(VALUES)
range_ends = st.sampled_from((b"", b"", b"c", RANGE_END_ALL))
lease_ids = st.sampled_from((0, 0, 1, 2, 3))
"""Lease ids are drawn as numbers: the store grants 1, 2, 3, ... in order, so small ids
usually exist, others exercise LeaseNotFound, and a shrunk run keeps its meaning."""


def compares() -> st.SearchStrategy[Compare]:
    int_targets = (CompareTarget.VERSION, CompareTarget.CREATE, CompareTarget.MOD)
    int_compare = st.tuples(
        keys,
        st.sampled_from((*int_targets, CompareTarget.LEASE)),
        st.sampled_from(tuple(CompareResult)),
        st.integers(min_value=0, max_value=4),
    ).map(lambda t: Compare(t[0], t[1], t[2], t[3]))
    value_compare = st.tuples(keys, st.sampled_from(tuple(CompareResult)), values).map(
        lambda t: Compare(t[0], CompareTarget.VALUE, t[1], t[2])
    )
    return st.one_of(int_compare, value_compare)


def txn_ops() -> st.SearchStrategy[TxnOp]:
    return st.one_of(
        st.builds(PutRequest, key=keys, value=values),
        st.builds(DeleteRangeRequest, key=keys, range_end=range_ends),
        st.builds(RangeRequest, key=keys, range_end=range_ends),
    )


def txns() -> st.SearchStrategy[TxnRequest]:
    ops = st.lists(txn_ops(), max_size=3).map(tuple)
    return st.builds(
        TxnRequest, compare=st.lists(compares(), max_size=2).map(tuple), success=ops, failure=ops
    )


revision_bounds = st.sampled_from((0, 0, 1, 2, 3, 4))
no_filters = (0, 0, 0, 0)
filters = st.one_of(st.just(no_filters), st.tuples(*[revision_bounds] * 4))
"""min/max mod revision, min/max create revision: none in about half the ranges."""


def range_requests() -> st.SearchStrategy[RangeRequest]:
    """Ranges with every option the model serves: limit, sort, keys_only, count_only and
    the min/max mod/create revision filters."""
    return st.builds(
        _range_request,
        key=keys,
        range_end=range_ends,
        limit=st.integers(min_value=0, max_value=3),
        keys_only=st.booleans(),
        count_only=st.sampled_from((False, False, False, True)),
        sort_order=st.sampled_from(tuple(SortOrder)),
        sort_target=st.sampled_from(tuple(SortTarget)),
        bounds=filters,
    )


def _range_request(
    key: bytes,
    range_end: bytes,
    limit: int,
    keys_only: bool,
    count_only: bool,
    sort_order: SortOrder,
    sort_target: SortTarget,
    bounds: tuple[int, int, int, int],
) -> RangeRequest:
    return RangeRequest(
        key,
        range_end,
        limit,
        keys_only=keys_only,
        count_only=count_only,
        sort_order=sort_order,
        sort_target=sort_target,
        min_mod_revision=bounds[0],
        max_mod_revision=bounds[1],
        min_create_revision=bounds[2],
        max_create_revision=bounds[3],
    )


def rich_txns() -> st.SearchStrategy[TxnRequest]:
    """Txns whose ops ask for everything a response can carry (prev_kv, range options)
    and may nest one txn (whose header is empty)."""
    flat = st.one_of(
        st.builds(PutRequest, key=keys, value=values, prev_kv=st.booleans()),
        st.builds(DeleteRangeRequest, key=keys, range_end=range_ends, prev_kv=st.booleans()),
        range_requests(),
    )
    nested = st.builds(
        TxnRequest,
        compare=st.lists(compares(), max_size=1).map(tuple),
        success=st.lists(flat, max_size=2).map(tuple),
        failure=st.lists(flat, max_size=2).map(tuple),
    )
    ops = st.lists(st.one_of(flat, nested), max_size=3).map(tuple)
    return st.builds(
        TxnRequest, compare=st.lists(compares(), max_size=2).map(tuple), success=ops, failure=ops
    )


USERS = (ROOT, "alice", "bob")
ROLES = (ROOT, "r1", "r2")
users = st.sampled_from(USERS)
roles = st.sampled_from(ROLES)
callers = st.sampled_from(("", *USERS, "alice", "bob"))
permissions = st.builds(
    Permission, perm_type=st.sampled_from(tuple(PermType)), key=keys, range_end=range_ends
)


def auth_changes() -> st.SearchStrategy[AuthRequest]:
    """Auth changes over a few users and roles (root among them), errors included."""
    return st.one_of(
        st.builds(AuthUserAddRequest, name=users, password=st.just("pw")),
        st.builds(AuthUserDeleteRequest, name=users),
        st.builds(AuthUserGrantRoleRequest, user=users, role=roles),
        st.builds(AuthUserRevokeRoleRequest, name=users, role=roles),
        st.builds(AuthRoleAddRequest, name=roles),
        st.builds(AuthRoleDeleteRequest, role=roles),
        st.builds(AuthRoleGrantPermissionRequest, name=roles, perm=permissions),
        st.builds(AuthRoleRevokePermissionRequest, role=roles, key=keys, range_end=range_ends),
        st.just(AuthEnableRequest()),
        st.just(AuthDisableRequest()),
    )


def client_requests() -> st.SearchStrategy[Request]:
    """KV and lease requests a client may make (what the auth rule judges)."""
    return st.one_of(
        st.builds(PutRequest, key=keys, value=values, lease=lease_ids, prev_kv=st.booleans()),
        st.builds(RangeRequest, key=keys, range_end=range_ends),
        st.builds(DeleteRangeRequest, key=keys, range_end=range_ends, prev_kv=st.booleans()),
        txns(),
        st.builds(LeaseRevokeRequest, id=st.integers(min_value=1, max_value=3)),
    )


def abstract_state(state: Any) -> dict[str, Any]:
    """The store as plain values (for counterexamples and ITF): revisions, keys, leases."""
    return {
        "revision": state.revision,
        "compact_revision": state.compact_revision,
        "kvs": {show_bytes(kv.key): _kv_text(kv) for kv in state.items()},
        "leases": {
            str(record.id): _lease_text(record.ttl, record.keys)
            for record in sorted(state.leases, key=lambda record: record.id)
        },
    }


def _kv_text(kv: KeyValue) -> str:
    lease = f" lease {kv.lease}" if kv.lease else ""
    return f"{show_bytes(kv.value)} (c{kv.create_revision} m{kv.mod_revision} v{kv.version}{lease})"


def _lease_text(ttl: int, keys: frozenset[bytes]) -> str:
    return f"ttl {ttl} keys [{', '.join(show_bytes(k) for k in sorted(keys))}]"


OPTIONAL_RULES = ("delete", "txn", "compact", "lease", "read_past", "watch", "auth")


class StoreMachine(RuleBasedStateMachine):
    """Random requests against the pure store; see the module docstring for the checks."""

    postconditions = True  # check every response against the oracle

    def __init__(self, bugs: BugSet = NO_BUGS, recorder: RunRecorder | None = None) -> None:
        super().__init__()
        self.bugs = bugs
        self.recorder = recorder or RunRecorder(abstract_state, None)
        self.state = store_model.initial_state()
        self.oracle = ResponseOracle.of_store(self.state)
        # revision -> the last state at that revision: its key-values are fixed for good.
        self.at_revision: dict[int, Any] = {self.state.revision: self.state}
        self.enabled: frozenset[str] = frozenset(OPTIONAL_RULES)
        self.events: list[Event] = []  # every event ever, compaction or not (for watches)
        # Without an initialize rule, Hypothesis checks invariants once before any rule.
        self.uncounted_check = not has_initialize_rules(type(self))
        self.recorder.begin(self.state)

    # ------------------------------------------------------------------ swarm
    @initialize(enabled=st.sets(st.sampled_from(OPTIONAL_RULES)))
    def choose_rules(self, enabled: set[str]) -> None:
        self.enabled = frozenset(enabled)

    # ------------------------------------------------------------------ helpers
    def _apply(self, request: Request | AuthRequest | AsUser) -> Any:
        before = self.state
        try:
            after, response = store_model.apply(before, request, self.bugs)
        except StoreError as error:
            self.recorder.step(f"{request.describe()} -> {error.code}", before)
            return error
        label = f"{request.describe()} -> {response.describe()}"
        self.recorder.step(label, after)
        self.state = after
        if self.postconditions:
            check_response(self.oracle, request, response)
            self.recorder.witness("store: response checked")
        self._check_revision_step(request, before, after)
        self.at_revision[after.revision] = after
        if after.revision > before.revision:
            self.events.extend(after.events_since(before.revision + 1))
        if after.revision > before.revision:
            self.recorder.witness("store: revision advanced")
        return response

    def _check_revision_step(
        self, request: Request | AuthRequest | AsUser, before: Any, after: Any
    ) -> None:
        step = after.revision - before.revision
        if step not in (0, 1):
            raise InvariantViolation(
                "OneRevisionPerRequest",
                f"{request.describe()} moved the revision from {before.revision} to "
                f"{after.revision}; one request takes at most one revision",
            )
        if step == 1 and isinstance(request, TxnRequest):
            stale = [
                kv
                for kv in after.items()
                if kv.mod_revision > before.revision and kv.mod_revision != after.revision
            ]
            if stale:
                raise InvariantViolation(
                    "OneRevisionPerRequest",
                    f"{request.describe()} at revision {after.revision} wrote "
                    + ", ".join(kv.describe() for kv in stale),
                )

    # ------------------------------------------------------------------ rules
    @rule(key=keys, value=values, lease=lease_ids)
    def put(self, key: bytes, value: bytes, lease: int) -> None:
        self._apply(PutRequest(key=key, value=value, lease=lease))

    @rule(key=keys, value=values)
    def put_prev_kv(self, key: bytes, value: bytes) -> None:
        self._apply(PutRequest(key=key, value=value, prev_kv=True))

    @rule(key=keys, range_end=range_ends, limit=st.integers(min_value=0, max_value=2))
    def range_now(self, key: bytes, range_end: bytes, limit: int) -> None:
        self._apply(RangeRequest(key=key, range_end=range_end, limit=limit))

    @rule(request=range_requests())
    def range_options(self, request: RangeRequest) -> None:
        """A range with options (sort, filters, keys_only, count_only, limit)."""
        self._apply(request)

    @precondition(lambda self: "delete" in self.enabled)
    @rule(key=keys, range_end=range_ends, prev_kv=st.booleans())
    def delete(self, key: bytes, range_end: bytes, prev_kv: bool) -> None:
        self._apply(DeleteRangeRequest(key=key, range_end=range_end, prev_kv=prev_kv))

    @precondition(lambda self: "txn" in self.enabled)
    @rule(txn=txns())
    def txn(self, txn: TxnRequest) -> None:
        self._apply(txn)

    @precondition(lambda self: "txn" in self.enabled)
    @rule(txn=rich_txns())
    def txn_options(self, txn: TxnRequest) -> None:
        """A txn asking for prev_kv and range options, maybe with a nested txn."""
        self._apply(txn)

    @precondition(lambda self: "compact" in self.enabled and self.state.revision > 1)
    @rule(back=st.integers(min_value=0, max_value=4))
    def compact(self, back: int) -> None:
        revision = max(1, self.state.revision - back)
        self._apply(CompactionRequest(revision=revision))

    @precondition(lambda self: "lease" in self.enabled)
    @rule(ttl=st.integers(min_value=1, max_value=30))
    def lease_grant(self, ttl: int) -> None:
        self._apply(LeaseGrantRequest(ttl=ttl))

    @precondition(lambda self: "lease" in self.enabled)
    @rule(lease=st.integers(min_value=1, max_value=4))
    def lease_revoke(self, lease: int) -> None:
        self._apply(LeaseRevokeRequest(id=lease))

    @precondition(lambda self: "read_past" in self.enabled)
    @rule(key=keys, range_end=range_ends, back=st.integers(min_value=0, max_value=6))
    def read_past(self, key: bytes, range_end: bytes, back: int) -> None:
        """PastReadsConsistent: a read at revision r equals the latest read back at r."""
        revision = self.state.revision - back
        if revision < 1:
            revision = self.state.revision + 1  # a future revision: must be refused
        request = RangeRequest(key=key, range_end=range_end, revision=revision)
        response = self._apply(request)
        state = self.state
        if revision > state.revision:
            _expect_error(request, response, FutureRevisionError, "a future revision")
            return
        if revision < state.compact_revision:
            _expect_error(request, response, CompactedError, "a compacted revision")
            return
        past = self.at_revision.get(revision)
        if past is None:
            return  # the revision was skipped by no request (cannot happen: revisions are dense)
        expected = store_model.apply(past, RangeRequest(key=key, range_end=range_end))[1]
        assert isinstance(expected, RangeResponse)
        if not isinstance(response, RangeResponse) or response.kvs != expected.kvs:
            got = response.describe() if hasattr(response, "describe") else str(response)
            raise InvariantViolation(
                "PastReadsConsistent",
                f"{request.describe()} at revision {state.revision} gave {got}, "
                f"but at revision {revision} the store held {expected.describe()}",
            )
        self.recorder.witness("store: past read checked")

    @precondition(lambda self: "watch" in self.enabled and self.state.revision > 1)
    @rule(
        key=keys,
        range_end=range_ends,
        from_compaction=st.booleans(),
        back=st.integers(min_value=0, max_value=4),
        prev_kv=st.booleans(),
    )
    def watch(
        self, key: bytes, range_end: bytes, from_compaction: bool, back: int, prev_kv: bool
    ) -> None:
        """The watch guarantees for a watch opened `back` revisions before the head or
        before the compact revision (where catching up must be refused)."""
        anchor = self.state.compact_revision if from_compaction else self.state.revision
        start = max(1, anchor - back)
        request = WatchRequest(key=key, range_end=range_end, start_revision=start, prev_kv=prev_kv)
        responses = watch_responses(self.state, request, self.bugs)
        self.recorder.step(
            f"{request.describe()} -> " + "; ".join(r.describe() for r in responses), self.state
        )
        violations = check_watch(self.events, request, responses)
        if violations:
            raise InvariantViolation(
                violations[0].guarantee, "\n".join(v.describe() for v in violations)
            )
        self.recorder.witness("store: watch checked")

    @precondition(lambda self: "auth" in self.enabled and not self.state.auth.enabled)
    @rule()
    def auth_bootstrap(self) -> None:
        """What an operator does first: the root user with the root role, alice and bob
        holding the roles r1 and r2 (no permissions yet), then enable."""
        for request in (
            AuthUserAddRequest(ROOT, "pw"),
            AuthUserGrantRoleRequest(ROOT, ROOT),
            AuthUserAddRequest("alice", "pw"),
            AuthUserAddRequest("bob", "pw"),
            AuthRoleAddRequest("r1"),
            AuthRoleAddRequest("r2"),
            AuthUserGrantRoleRequest("alice", "r1"),
            AuthUserGrantRoleRequest("bob", "r2"),
            AuthEnableRequest(),
        ):
            self._apply(request)
        if self.state.auth.enabled:
            self.recorder.witness("store: auth enabled")

    @precondition(lambda self: "auth" in self.enabled)
    @rule(change=auth_changes(), as_root=st.booleans())
    def auth_change(self, change: AuthRequest, as_root: bool) -> None:
        before = self.state.auth
        request: AuthRequest | AsUser = AsUser(ROOT, change) if as_root else change
        response = self._apply(request)
        if isinstance(response, StoreError):
            return
        after = self.state.auth
        quiet = isinstance(change, AuthEnableRequest) or after == before
        if not quiet and after.revision != before.revision + 1:
            raise InvariantViolation(
                "AuthRevisionBumped",
                f"{change.describe()} moved the auth revision {before.revision} -> "
                f"{after.revision}",
            )
        if after.enabled:
            self.recorder.witness("store: auth enabled")

    @precondition(lambda self: "auth" in self.enabled)
    @rule(user=callers, request=client_requests())
    def as_user(self, user: str, request: Request) -> None:
        before = self.state
        response = self._apply(AsUser(user, request))
        if isinstance(response, StoreError):
            if self.state is not before:
                raise InvariantViolation(
                    "NoWriteWithoutGrant", f"refused {request.describe()} changed the store"
                )
            if before.auth.enabled:
                self.recorder.witness("store: a client request refused")
            return
        if not before.auth.enabled or before.auth.is_root(user):
            return
        self.recorder.witness("store: a client request permitted by its roles")
        written = {e.kv.key for e in self.state.events_since(before.revision + 1)}
        if self.state.revision == before.revision:
            written = set()
        perms = [p for p in before.auth.permissions_of(user) if p.perm_type.grants(PermType.WRITE)]
        for key in written:
            if not any(in_range(key, p.key, p.range_end) for p in perms):
                raise InvariantViolation(
                    "NoWriteWithoutGrant",
                    f"{user} wrote {show_bytes(key)} by {request.describe()} holding only "
                    + ", ".join(p.describe() for p in perms),
                )

    # ------------------------------------------------------------------ invariants
    @invariant()
    def store_invariants(self) -> None:
        """After every rule; counts the rule that ran."""
        if self.uncounted_check:
            self.uncounted_check = False
        else:
            self.recorder.rule_step()
        store_model.check_invariants(self.state)

    def teardown(self) -> None:
        self.recorder.finish()


def _expect_error(request: Request, response: Any, expected: type[StoreError], why: str) -> None:
    if not isinstance(response, expected):
        got = response.describe() if hasattr(response, "describe") else str(response)
        raise InvariantViolation(
            "PastReadsConsistent",
            f"{request.describe()} reads {why} and must fail with "
            f"{expected.__name__} ({expected.message}), but got {got}",
        )


def machine_factory(
    options: ExploreOptions, recorder: RunRecorder
) -> Callable[[], RuleBasedStateMachine]:
    """The factory `etcdspec.model.explore.run_hypothesis` runs: one machine per example."""

    # A focused run (options.rules) keeps all its rules on: no per-example swarm choice.
    drop = frozenset() if options.rules is None else frozenset(("choose_rules",))
    machine = focused(StoreMachine, options.rules, drop)

    def factory() -> RuleBasedStateMachine:
        return cast(RuleBasedStateMachine, machine(options.bugs, recorder))

    return factory

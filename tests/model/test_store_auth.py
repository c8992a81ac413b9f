"""The store model's auth store: etcd 3.5's permission rule, root rules and auth revision,
table by table, and the store machine's auth rules explored with their witnesses.

Facts cited are etcd 3.5's (server/auth/store.go, range_perm_cache.go,
server/etcdserver/apply_auth.go); the same answers are compared with our server and real
etcd in tests/impl/server/test_impl_auth_grpc.py and tests/conform/test_conform_auth.py.
"""

from __future__ import annotations

import pytest

from etcdspec.model.auth import ROOT, AuthState, RoleRecord, UserRecord, covers
from etcdspec.model.auth_requests import (
    AuthEnableRequest,
    AuthRoleAddRequest,
    AuthRoleGrantPermissionRequest,
    AuthRoleRevokePermissionRequest,
    AuthStatusRequest,
    AuthStatusResponse,
    AuthUserAddRequest,
    AuthUserGrantRoleRequest,
    Permission,
    PermType,
)
from etcdspec.model.errors import (
    AuthOldRevisionError,
    PermissionDeniedError,
    StoreError,
    UserEmptyError,
    error_for,
)
from etcdspec.model.explore import ExploreOptions, run_hypothesis
from etcdspec.model.requests import (
    RANGE_END_ALL,
    AsUser,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    LeaseGrantRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    Request,
    TxnRequest,
    prefix_end,
)
from etcdspec.model.store import StoreState, apply, check_invariants, initial_state
from etcdspec.verdict import Verdict

R, W, RW = PermType.READ, PermType.WRITE, PermType.READWRITE


def _perm(kind: PermType, key: str, end: bytes = b"") -> Permission:
    return Permission(kind, key.encode(), end)


@pytest.mark.parametrize(
    ("perms", "key", "end", "expected"),
    [
        ([_perm(R, "a")], b"a", b"", True),
        ([_perm(R, "a")], b"ab", b"", False),
        ([_perm(R, "a", b"c")], b"b", b"", True),
        ([_perm(R, "a", b"c")], b"c", b"", False),  # the end is excluded
        ([_perm(R, "a", b"c")], b"a", b"c", True),
        ([_perm(R, "a", b"c")], b"a", b"d", False),
        ([_perm(R, "a", RANGE_END_ALL)], b"zzz", RANGE_END_ALL, True),
        ([_perm(R, "a", b"z")], b"b", RANGE_END_ALL, False),  # from-key needs an open end
        ([_perm(R, "a", prefix_end(b"a"))], b"a", prefix_end(b"a"), True),  # --prefix
        ([_perm(R, "a", b"c"), _perm(R, "c", b"e")], b"a", b"e", True),  # touching: no gap
        ([_perm(R, "a", b"c"), _perm(R, "d", b"e")], b"a", b"e", False),  # a gap at c
        ([_perm(R, "b", b"e"), _perm(R, "a", b"c")], b"a", b"e", True),  # any order
        # An empty or reversed request range is granted when a permission holds its key,
        # as etcd 3.5.1 answers (its interval tree visits what holds the first key).
        ([_perm(R, "a", b"z")], b"d", b"c", True),
        ([_perm(R, "c")], b"c", b"c", True),
        ([_perm(R, "c")], b"c", b"b", True),
        ([_perm(R, "c")], b"d", b"c", False),
        ([_perm(R, "d", b"c")], b"d", b"", False),  # an empty permission grants nothing
        ([], b"a", b"", False),
        # one key and every key from it on, same begin (a crash the server comparison found)
        ([_perm(R, "a"), _perm(R, "a", RANGE_END_ALL)], b"b", b"", True),
    ],
)
def test_ranges_are_granted_only_when_covered_without_a_gap(
    perms: list[Permission], key: bytes, end: bytes, expected: bool
) -> None:
    assert covers(perms, key, end) is expected


def _enabled(*grants: tuple[str, Permission]) -> StoreState:
    """Auth on: root, and alice holding one role per grant (roles r0, r1, ...)."""
    state = initial_state()
    steps: list[object] = [
        AuthUserAddRequest(ROOT, "rootpw"),
        AuthUserGrantRoleRequest(ROOT, ROOT),
        AuthUserAddRequest("alice", "apw"),
    ]
    for i, (_, perm) in enumerate(grants):
        steps += [
            AuthRoleAddRequest(f"r{i}"),
            AuthRoleGrantPermissionRequest(f"r{i}", perm),
            AuthUserGrantRoleRequest("alice", f"r{i}"),
        ]
    steps += [AuthEnableRequest(), PutRequest(b"a", b"0"), PutRequest(b"b", b"0")]
    for step in steps:
        state, _ = apply(state, step)  # type: ignore[call-overload]
    return state


def _outcome(state: StoreState, request: Request, user: str = "alice") -> str:
    try:
        apply(state, AsUser(user, request))
    except StoreError as error:
        return type(error).__name__
    return "ok"


@pytest.mark.parametrize(
    ("perm", "request_", "expected"),
    [
        # A put needs WRITE on its key, and READ too when it asks for prev_kv.
        (_perm(W, "a"), PutRequest(b"a", b"1"), "ok"),
        (_perm(R, "a"), PutRequest(b"a", b"1"), "PermissionDeniedError"),
        (_perm(W, "a"), PutRequest(b"a", b"1", prev_kv=True), "PermissionDeniedError"),
        (_perm(RW, "a"), PutRequest(b"a", b"1", prev_kv=True), "ok"),
        # A delete needs WRITE over its whole range, READ too with prev_kv.
        (_perm(W, "a", b"c"), DeleteRangeRequest(b"a", b"c"), "ok"),
        (_perm(W, "a", b"b"), DeleteRangeRequest(b"a", b"c"), "PermissionDeniedError"),
        (_perm(W, "a", b"c"), DeleteRangeRequest(b"a", b"c", True), "PermissionDeniedError"),
        # A range needs READ over its range, whatever keys exist in it.
        (_perm(R, "a"), RangeRequest(b"a"), "ok"),
        (_perm(W, "a"), RangeRequest(b"a"), "PermissionDeniedError"),
        (_perm(R, "a"), RangeRequest(b"a", b"c"), "PermissionDeniedError"),
        # A txn needs READ for each compare and every op of both branches.
        (
            _perm(RW, "a"),
            TxnRequest(
                (Compare(b"a", CompareTarget.VERSION, CompareResult.EQUAL, 1),),
                (PutRequest(b"a", b"2"),),
                (RangeRequest(b"a"),),
            ),
            "ok",
        ),
        (
            _perm(RW, "a"),
            TxnRequest(
                (Compare(b"a", CompareTarget.VERSION, CompareResult.EQUAL, 1),),
                (PutRequest(b"a", b"2"),),
                (RangeRequest(b"b"),),  # never runs, still checked
            ),
            "PermissionDeniedError",
        ),
        (
            _perm(W, "a"),
            TxnRequest((Compare(b"b", CompareTarget.VERSION, CompareResult.EQUAL, 1),)),
            "PermissionDeniedError",
        ),
        # Inside a txn a put needs WRITE alone, prev_kv or not (etcd 3.5.1, checked
        # against it by tests/conform/test_conform_auth_hypothesis.py); a delete's
        # prev_kv still needs READ.
        (_perm(W, "a"), TxnRequest((), (PutRequest(b"a", b"1", prev_kv=True),)), "ok"),
        (
            _perm(W, "a"),
            TxnRequest((), (DeleteRangeRequest(b"a", prev_kv=True),)),
            "PermissionDeniedError",
        ),
    ],
)
def test_client_requests_need_the_permissions_etcd_checks(
    perm: Permission, request_: Request, expected: str
) -> None:
    state = _enabled(("r0", perm))
    assert _outcome(state, request_) == expected
    check_invariants(state)


def test_a_refused_request_changes_nothing_and_root_may_do_anything() -> None:
    state = _enabled(("r0", _perm(R, "a")))
    with pytest.raises(PermissionDeniedError):
        apply(state, AsUser("alice", PutRequest(b"a", b"9")))
    assert _outcome(state, PutRequest(b"zz", b"1", prev_kv=True), ROOT) == "ok"
    assert _outcome(state, DeleteRangeRequest(b"\x00", RANGE_END_ALL), ROOT) == "ok"


def test_without_a_token_or_with_an_old_one_nothing_is_permitted() -> None:
    state = _enabled(("r0", _perm(RW, "a")))
    with pytest.raises(UserEmptyError):
        apply(state, AsUser("", RangeRequest(b"a")))
    at = state.auth.revision
    assert _outcome(state, RangeRequest(b"a")) == "ok"
    assert apply(state, AsUser("alice", RangeRequest(b"a"), at))
    state, _ = apply(state, AuthRoleRevokePermissionRequest("r0", b"a"))
    # The revoke bumped the auth revision: the token from before it is old ...
    with pytest.raises(AuthOldRevisionError):
        apply(state, AsUser("alice", RangeRequest(b"a"), at))
    # ... and a new one grants nothing over the revoked key.
    assert _outcome(state, RangeRequest(b"a")) == "PermissionDeniedError"
    assert error_for("UNKNOWN", "auth: revision in header is old") is AuthOldRevisionError


def test_revoking_a_lease_needs_write_on_its_keys() -> None:
    state = _enabled(("r0", _perm(W, "a")))
    state, _ = apply(state, LeaseGrantRequest(60, 5))
    state, _ = apply(state, PutRequest(b"b", b"1", lease=5))
    assert _outcome(state, LeaseRevokeRequest(5)) == "PermissionDeniedError"
    # A put that names the lease must be allowed to write every key already on it.
    assert _outcome(state, PutRequest(b"a", b"1", lease=5)) == "PermissionDeniedError"
    state, _ = apply(state, AuthRoleGrantPermissionRequest("r0", _perm(W, "b")))
    assert _outcome(state, LeaseRevokeRequest(5)) == "ok"


def test_unwrapped_requests_are_the_servers_own_and_not_checked() -> None:
    state = _enabled()
    state, _ = apply(state, PutRequest(b"x", b"1"))  # e.g. a lease expiry's deletes
    assert state.get(b"x") is not None


def test_auth_status_and_the_auth_revision_follow_etcd() -> None:
    state = initial_state()
    _, status = apply(state, AuthStatusRequest())
    assert status == AuthStatusResponse(status.header, False, 1)
    state = _enabled(("r0", _perm(R, "a")))
    # user add x2, grant root, role add, grant perm, grant role = 6 bumps; enable none.
    assert state.auth.revision == 7 and state.auth.enabled


def test_auth_state_is_part_of_the_store_value() -> None:
    plain = initial_state()
    changed, _ = apply(plain, AuthUserAddRequest("u", "p"))
    assert changed != plain and hash(changed) != hash(plain)
    assert (
        changed.auth == AuthState(revision=2, users=(UserRecord("u", "p"),), roles=())
        and RoleRecord("r").perms == ()
    )
    import pickle

    assert pickle.loads(pickle.dumps(changed)) == changed


def test_the_store_machine_explores_auth_and_is_not_vacuous() -> None:
    options = ExploreOptions(
        machine="store",
        seed=18,
        max_examples=60,
        steps=40,
        rules=frozenset(
            {"put", "range_now", "auth_bootstrap", "auth_change", "as_user", "lease_grant"}
        ),
    )
    result = run_hypothesis(options)
    assert result.verdict is Verdict.TRUE, result.counterexample
    for witness in (
        "store: auth enabled",
        "store: a client request refused",
        "store: a client request permitted by its roles",
    ):
        assert result.witnesses.get(witness, 0) > 0, (witness, result.witnesses)


def test_the_store_machine_catches_a_permission_rule_that_grants_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NoWriteWithoutGrant judges writes by the grants alone (in_range per key), not by
    `covers`: a rule that grants every range is caught."""
    import etcdspec.model.auth as auth_model

    monkeypatch.setattr(auth_model, "covers", lambda perms, key, range_end: True)
    options = ExploreOptions(
        machine="store",
        seed=18,
        max_examples=100,
        steps=40,
        rules=frozenset({"put", "auth_bootstrap", "auth_change", "as_user"}),
    )
    result = run_hypothesis(options)
    assert result.verdict is Verdict.FALSE
    assert result.counterexample is not None
    assert "NoWriteWithoutGrant" in result.counterexample.describe()


def test_a_request_that_needs_no_permission_passes_without_a_token() -> None:
    """etcd checks a txn op by op (checkTxnAuth): an empty txn asks nothing, so it runs
    even without a token (found by the Hypothesis comparison with our server)."""
    state = _enabled()
    assert _outcome(state, TxnRequest(), user="") == "ok"
    assert _outcome(state, TxnRequest((), (), (RangeRequest(b"a"),)), user="") == ("UserEmptyError")


def test_the_api_layers_checks_come_before_the_permission_check() -> None:
    """etcd validates a request (key given, txn shape, duplicate keys) before it asks who
    sent it (found by the Hypothesis comparison with our server)."""
    state = _enabled()
    duplicate = TxnRequest((), (PutRequest(b"a", b"1"), PutRequest(b"a", b"2")))
    assert _outcome(state, duplicate, user="") == "DuplicateKeyError"
    assert _outcome(state, PutRequest(b"", b"1"), user="") == "EmptyKeyError"
    assert _outcome(state, RangeRequest(b""), user="") == "EmptyKeyError"

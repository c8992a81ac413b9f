"""Lease semantics of the store model (etcd's lessor, without a clock).

Facts: server/lease/lessor.go (Grant raises a TTL below the minimum to it, rejects TTL >
MaxLeaseTTL and an id already granted; Revoke deletes the attached keys in one txn),
api/v3rpc/lease.go (keep-alive of an unknown lease answers TTL 0, time-to-live answers
TTL -1), server/etcdserver/apply.go (put with an unknown lease: ErrLeaseNotFound).
"""

from __future__ import annotations

import pytest

from etcdspec.model.errors import (
    LeaseExistsError,
    LeaseNotFoundError,
    LeaseTTLTooLargeError,
    StoreError,
)
from etcdspec.model.requests import (
    DeleteRangeRequest,
    LeaseGrantRequest,
    LeaseKeepAliveRequest,
    LeaseLeasesRequest,
    LeaseRevokeRequest,
    LeaseTimeToLiveRequest,
    PutRequest,
    RangeRequest,
    Request,
    TxnRequest,
)
from etcdspec.model.store import (
    StoreConfig,
    apply,
    apply_all,
    check_invariants,
    initial_state,
    lease_ttl,
)


def grant(ttl: int, lease_id: int = 0) -> LeaseGrantRequest:
    return LeaseGrantRequest(ttl, lease_id)


def put(key: str, lease: int = 0) -> PutRequest:
    return PutRequest(key.encode(), b"v", lease)


CASES = [
    # id 0: the server picks; the model picks deterministically from a counter.
    ("grant picks an id", (), grant(10), "lease_grant-> rev 1 id 1 ttl 10"),
    ("grant picks the next id", (grant(10),), grant(10), "lease_grant-> rev 1 id 2 ttl 10"),
    (
        "picked ids skip given ones",
        (grant(10, 1), grant(10, 2)),
        grant(10),
        "lease_grant-> rev 1 id 3 ttl 10",
    ),
    ("grant with an id", (), grant(10, 42), "lease_grant-> rev 1 id 42 ttl 10"),
    # etcd 3.5.1 grants a negative id as given.
    ("grant a negative id", (), grant(10, -5), "lease_grant-> rev 1 id -5 ttl 10"),
    # A TTL below the minimum (2 s with etcd's defaults) is raised to it. etcd 3.5.1: `lease grant 1` -> TTL 2.
    ("min ttl", (), grant(1), "lease_grant-> rev 1 id 1 ttl 2"),
    ("zero ttl", (), grant(0), "lease_grant-> rev 1 id 1 ttl 2"),
    # Grants take no revision; revoke takes one only if it deletes keys.
    ("revoke without keys", (grant(10, 5),), LeaseRevokeRequest(5), "lease_revoke-> rev 1"),
    (
        "revoke deletes attached keys in one revision",
        (grant(10, 5), put("a", 5), put("b", 5), put("c")),
        LeaseRevokeRequest(5),
        "lease_revoke-> rev 5",
    ),
    (
        "keepalive answers the TTL",
        (grant(10, 5),),
        LeaseKeepAliveRequest(5),
        "lease_keepalive-> rev 1 id 5 ttl 10",
    ),
    (
        "keepalive of an unknown lease answers ttl 0",
        (),
        LeaseKeepAliveRequest(5),
        "lease_keepalive-> rev 1 id 5 ttl 0",
    ),
    (
        "timetolive with keys",
        (grant(10, 5), put("b", 5), put("a", 5)),
        LeaseTimeToLiveRequest(5, keys=True),
        "lease_timetolive-> rev 3 id 5 ttl 10 granted 10 keys [a, b]",
    ),
    (
        "timetolive unknown answers -1",
        (),
        LeaseTimeToLiveRequest(5),
        "lease_timetolive-> rev 1 id 5 ttl -1 granted 0",
    ),
    ("leases", (grant(10, 7), grant(10, 3)), LeaseLeasesRequest(), "lease_leases-> rev 1 [3, 7]"),
    ("put with a lease", (grant(10, 5),), put("a", 5), "put-> rev 2"),
]


@pytest.mark.parametrize(
    ("setup", "request_", "expected"), [pytest.param(s, r, e, id=n) for n, s, r, e in CASES]
)
def test_store_lease_response_matches_etcd(
    setup: tuple[Request, ...], request_: Request, expected: str
) -> None:
    state, _ = apply_all(initial_state(), list(setup))
    new_state, response = apply(state, request_)
    assert response.describe() == expected
    check_invariants(new_state)


ERRORS = [
    ("revoke unknown", (), LeaseRevokeRequest(9), LeaseNotFoundError),
    (
        "revoke twice",
        (grant(10, 9), LeaseRevokeRequest(9)),
        LeaseRevokeRequest(9),
        LeaseNotFoundError,
    ),
    ("put unknown lease", (), put("a", 9), LeaseNotFoundError),
    ("put revoked lease", (grant(10, 9), LeaseRevokeRequest(9)), put("a", 9), LeaseNotFoundError),
    ("grant existing id", (grant(10, 9),), grant(10, 9), LeaseExistsError),
    ("ttl too large", (), grant(9_000_000_001), LeaseTTLTooLargeError),
]


@pytest.mark.parametrize(
    ("setup", "request_", "error"), [pytest.param(s, r, e, id=n) for n, s, r, e in ERRORS]
)
def test_store_lease_errors_match_etcd(
    setup: tuple[Request, ...], request_: Request, error: type[StoreError]
) -> None:
    state, _ = apply_all(initial_state(), list(setup))
    with pytest.raises(error):
        apply(state, request_)


def test_store_lease_revoke_deletes_keys_in_one_revision() -> None:
    state, _ = apply_all(initial_state(), [grant(10, 5), put("a", 5), put("b", 5), put("c")])
    state, _ = apply(state, LeaseRevokeRequest(5))
    assert [kv.key for kv in state.items()] == [b"c"]
    events = state.events_since(5)
    assert [e.describe() for e in events] == [
        "DELETE a@5 prev a=v(c2 m2 v1 lease 5)",
        "DELETE b@5 prev b=v(c3 m3 v1 lease 5)",
    ]
    assert state.lease_ids() == frozenset()


def test_store_lease_moves_with_reput_and_detaches_on_delete() -> None:
    state, _ = apply_all(
        initial_state(), [grant(10, 1), grant(10, 2), put("a", 1), put("a", 2), put("b", 1)]
    )
    assert state.leases.get(1).keys == frozenset({b"b"})  # type: ignore[union-attr]
    assert state.leases.get(2).keys == frozenset({b"a"})  # type: ignore[union-attr]
    state, _ = apply(state, DeleteRangeRequest(b"a"))
    assert state.leases.get(2).keys == frozenset()  # type: ignore[union-attr]
    state, _ = apply(state, put("b"))  # a put without a lease detaches the key
    assert state.leases.get(1).keys == frozenset()  # type: ignore[union-attr]
    check_invariants(state)


def test_store_lease_attach_in_txn_and_revoke_is_visible_to_reads() -> None:
    state, _ = apply_all(initial_state(), [grant(10, 1)])
    state, _ = apply(state, TxnRequest((), (put("a", 1), put("b", 1)), ()))
    state, _ = apply(state, LeaseRevokeRequest(1))
    _, response = apply(state, RangeRequest(b"a", b"\x00"))
    assert response.describe() == "range-> rev 3 count 0 []"
    _, past = apply(state, RangeRequest(b"a", b"\x00", revision=2, count_only=True))
    assert past.describe() == "range-> rev 3 count 2 []"


def test_store_lease_min_ttl_is_configurable_and_keepalive_uses_lease_ttl() -> None:
    state = initial_state(StoreConfig(min_lease_ttl=15))
    state, response = apply(state, grant(3, 4))
    assert response.describe() == "lease_grant-> rev 1 id 4 ttl 15"
    assert lease_ttl(state, 4) == 15
    assert lease_ttl(state, 5) is None

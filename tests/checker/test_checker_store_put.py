"""The store's direct put (`store._put`, the checker's hottest model call) gives what
the general write path gives: WriteTxn.put then _commit (the same state, hash,
history events, lease table and response), on random request sequences."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from etcdspec.model.bugs import NO_BUGS
from etcdspec.model.errors import StoreError
from etcdspec.model.kv import WriteTxn, check_put_against, check_put_request
from etcdspec.model.requests import (
    DeleteRangeRequest,
    LeaseGrantRequest,
    LeaseRevokeRequest,
    PutRequest,
    Request,
    Response,
)
from etcdspec.model.store import StoreState, _commit, apply, initial_state

KEYS = [b"a", b"b", b"c"]

puts = st.builds(
    PutRequest,
    st.sampled_from(KEYS),
    st.sampled_from([b"", b"x", b"y"]),
    st.sampled_from([0, 0, 1, 2, 3]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
requests: st.SearchStrategy[Request] = st.one_of(
    puts,
    puts,
    st.builds(DeleteRangeRequest, st.sampled_from(KEYS)),
    st.builds(LeaseGrantRequest, st.integers(1, 10), st.sampled_from([0, 1, 2])),
    st.builds(LeaseRevokeRequest, st.sampled_from([1, 2, 3])),
)


def general_put(state: StoreState, request: PutRequest) -> tuple[StoreState, Response]:
    """The put through the general write path, as apply ran it before the direct one."""
    check_put_request(request)
    check_put_against(state, request, in_txn=False)
    txn = WriteTxn(state, NO_BUGS)
    response = txn.put(request)
    return _commit(state, txn), response


def same_state(a: StoreState, b: StoreState) -> bool:
    history_a = [] if a.history is None else a.history.chain()
    history_b = [] if b.history is None else b.history.chain()
    return (
        a == b
        and hash(a) == hash(b)
        and a.revision == b.revision
        and a.write_count == b.write_count
        and a.items() == b.items()
        and a.leases == b.leases
        and [(n.revision, n.events, n.hash) for n in history_a]
        == [(n.revision, n.events, n.hash) for n in history_b]
    )


@given(st.lists(requests, max_size=30))
def test_direct_put_equals_the_general_write_path(script: list[Request]) -> None:
    state = initial_state()
    for request in script:
        if isinstance(request, PutRequest):
            try:
                expected = general_put(state, request)
            except StoreError as error:
                expected_error: type[StoreError] | None = type(error)
            else:
                expected_error = None
            try:
                got = apply(state, request)
            except StoreError as error:
                assert type(error) is expected_error
                continue
            assert expected_error is None
            assert same_state(got[0], expected[0])
            assert got[1] == expected[1]
            state = got[0]
            continue
        try:
            state, _ = apply(state, request)
        except StoreError:
            continue


def test_direct_put_keeps_value_lease_and_versions() -> None:
    state, _ = apply(initial_state(), LeaseGrantRequest(10, 1))
    state, _ = apply(state, PutRequest(b"a", b"x", lease=1))
    state, response = apply(state, PutRequest(b"a", ignore_value=True, prev_kv=True))
    expected, expected_response = general_put(
        apply(apply(initial_state(), LeaseGrantRequest(10, 1))[0], PutRequest(b"a", b"x", lease=1))[
            0
        ],
        PutRequest(b"a", ignore_value=True, prev_kv=True),
    )
    assert same_state(state, expected)
    assert response == expected_response
    kv = state.get(b"a")
    assert kv is not None
    assert (kv.value, kv.lease, kv.version, kv.create_revision, kv.mod_revision) == (
        b"x",
        0,
        2,
        2,
        3,
    )
    assert b"a" not in state.leases.get(1).keys  # type: ignore[union-attr]

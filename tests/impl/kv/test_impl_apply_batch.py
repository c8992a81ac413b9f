"""A run of plain puts applied with batched SQL (mvcc.put_run via Applier.apply_batch)
gives exactly what applying each entry on its own gives: the same responses (revision,
raft term, prev_kv), the same errors (KEY_NOT_FOUND, LEASE_NOT_FOUND, empty key,
NOSPACE), the same revisions and watch events, the same lease attachments, the same
store (HashKV) and consistent index. And a run of puts reads the keys once, not once
per put."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.message import Message
from hypothesis import given
from hypothesis import strategies as st

from etcdspec.impl.kv.applier import Applier, ApplyResult, encode_request
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.quota import BackendQuota, nospace_alarm_request
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import rpc_pb2 as pb

KEYS = (b"a", b"b", b"c")
LEASES = (0, 7, 8, 99)  # 99 is never granted


def _applier(path: Path) -> Applier:
    backend = Backend(path, durable=False)
    return Applier(backend, Lessor(), WatchHub(backend), BackendQuota(backend))


_puts = st.builds(
    lambda key, value, lease, ignore_value, ignore_lease, prev_kv: pb.PutRequest(
        key=key,
        value=value,
        lease=lease,
        ignore_value=ignore_value,
        ignore_lease=ignore_lease,
        prev_kv=prev_kv,
    ),
    st.sampled_from((*KEYS, b"")),  # the empty key is refused
    st.sampled_from((b"", b"v1", b"v2")),
    st.sampled_from(LEASES),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
_others: st.SearchStrategy[Message] = st.one_of(
    st.builds(lambda key: pb.DeleteRangeRequest(key=key, prev_kv=True), st.sampled_from(KEYS)),
    st.builds(lambda lease: pb.LeaseGrantRequest(ID=lease, TTL=60), st.sampled_from(LEASES[1:3])),
    st.builds(lambda lease: pb.LeaseRevokeRequest(ID=lease), st.sampled_from(LEASES[1:3])),
    st.just(nospace_alarm_request(1)),
    st.just(pb.AlarmRequest(action=pb.AlarmRequest.DEACTIVATE, memberID=1, alarm=pb.NOSPACE)),
)
_requests = st.lists(st.one_of(_puts, _puts, _puts, _others), min_size=1, max_size=40)


def _entries(requests: list[Message], term: int = 2) -> list[tuple[int, int, bytes]]:
    return [
        (index, term, encode_request(request, request_id=index, member_id=1))
        for index, request in enumerate(requests, start=1)
    ]


def _seen(result: ApplyResult) -> tuple[Any, ...]:
    return (
        result.index,
        result.request_id,
        None if result.response is None else result.response.SerializeToString(),
        None if result.error is None else result.error.kind,
        result.revision,
        tuple(event.describe() for event in result.events),
    )


def _state(applier: Applier) -> tuple[Any, ...]:
    backend = applier.backend
    return (
        applier.store.hash_kv(0),
        backend.consistent_index(),
        backend.current_revision(),
        sorted(
            (lease, sorted(applier.lessor.keys_of(lease)))
            for lease in LEASES[1:3]
            if applier.lessor.exists(lease)
        ),
    )


@given(requests=_requests, batch=st.integers(2, 16))
def test_batched_puts_apply_as_one_entry_at_a_time(
    tmp_path_factory: Any, requests: list[Message], batch: int
) -> None:
    directory = tmp_path_factory.mktemp("batch")
    one, many = _applier(directory / "one.db"), _applier(directory / "many.db")
    entries = _entries(requests)
    alone = [one.apply(*entry) for entry in entries]
    batched: list[ApplyResult] = []
    for start in range(0, len(entries), batch):
        batched.extend(many.apply_batch(entries[start : start + batch]))
    assert [_seen(r) for r in batched] == [_seen(r) for r in alone]
    assert _state(many) == _state(one)


def test_a_run_of_puts_reads_the_keys_once(tmp_path: Path) -> None:
    applier = _applier(tmp_path / "m.db")
    statements: list[str] = []
    applier.backend._conn.set_trace_callback(statements.append)
    puts = [pb.PutRequest(key=KEYS[i % 3], value=b"v%d" % i, prev_kv=True) for i in range(30)]
    results = applier.apply_batch(_entries(puts))
    assert [r.revision for r in results] == list(range(2, 32))
    assert [r.response.header.revision for r in results if r.response is not None] == list(
        range(2, 32)
    )
    reads = [s for s in statements if s.startswith("SELECT") and "key_newest" in s]
    assert len(reads) == 1, reads
    versions = {e.kv.key: e.kv.version for r in results for e in r.events}
    assert versions == {b"a": 10, b"b": 10, b"c": 10}


def test_puts_under_a_nospace_alarm_are_refused_one_by_one(tmp_path: Path) -> None:
    applier = _applier(tmp_path / "m.db")
    requests: list[Message] = [nospace_alarm_request(1), pb.PutRequest(key=b"a", value=b"v")]
    requests += [pb.PutRequest(key=b"b", value=b"v"), pb.DeleteRangeRequest(key=b"a")]
    results = applier.apply_batch(_entries(requests))
    assert [r.error is not None for r in results] == [False, True, True, False]
    assert applier.backend.current_revision() == 1
    assert applier.backend.consistent_index() == 4

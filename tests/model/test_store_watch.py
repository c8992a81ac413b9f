"""Watch semantics and the checks of etcd's watch guarantees (api_guarantees.md "Watch APIs").

The correct model's responses pass every check; each guarantee's check catches a
response stream broken in the way that guarantee forbids; the seeded bug
`watch_drops_event_at_compaction` is caught by Resumable/Reliable.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from etcdspec.model.bugs import BugSet
from etcdspec.model.requests import (
    CompactionRequest,
    DeleteRangeRequest,
    Event,
    EventType,
    KeyValue,
    PutRequest,
    Request,
    ResponseHeader,
    TxnRequest,
)
from etcdspec.model.store import StoreState, apply_all, initial_state
from etcdspec.model.watch import (
    GUARANTEES,
    WatchFilter,
    WatchRequest,
    WatchResponse,
    check_watch,
    history_of,
    live_responses,
    watch_responses,
)


def put(key: str, value: str) -> PutRequest:
    return PutRequest(key.encode(), value.encode())


WRITES: list[Request] = [
    put("a", "1"),  # 2
    put("b", "1"),  # 3
    TxnRequest((), (put("a", "2"), put("b", "2"), put("c", "1")), ()),  # 4: one revision
    DeleteRangeRequest(b"a"),  # 5
    put("a", "3"),  # 6
    put("z", "1"),  # 7
]


def store() -> StoreState:
    state, _ = apply_all(initial_state(), WRITES)
    return state


def shown(responses: list[WatchResponse]) -> list[str]:
    return [r.describe() for r in responses]


RESPONSE_CASES = [
    # A start revision of 0 means "from now on": only the created response.
    ("from now", WatchRequest(b"a"), ["watch-> rev 7 created"]),
    # Start revision is inclusive; the catch-up comes in one response whose header is
    # the current revision (etcd 3.5.1 syncWatchers: watch a from 2 at rev 6 gets
    # [a@2, b@3, a@4, a@5, c@6] in one response with header 6).
    (
        "single key from 4",
        WatchRequest(b"a", start_revision=4),
        [
            "watch-> rev 7 created",
            "watch-> rev 7 [PUT a=2(c2 m4 v2), DELETE a@5, PUT a=3(c6 m6 v1)]",
        ],
    ),
    (
        "range a..c with prev_kv",
        WatchRequest(b"a", b"c", start_revision=4, prev_kv=True),
        [
            "watch-> rev 7 created",
            "watch-> rev 7 [PUT a=2(c2 m4 v2) prev a=1(c2 m2 v1), "
            "PUT b=2(c3 m4 v2) prev b=1(c3 m3 v1), DELETE a@5 prev a=2(c2 m4 v2), "
            "PUT a=3(c6 m6 v1)]",
        ],
    ),
    (
        "all keys, no puts",
        WatchRequest(b"\x00", b"\x00", start_revision=1, filters=frozenset({WatchFilter.NOPUT})),
        ["watch-> rev 7 created", "watch-> rev 7 [DELETE a@5]"],
    ),
    (
        "no deletes",
        WatchRequest(b"a", start_revision=5, filters=frozenset({WatchFilter.NODELETE})),
        ["watch-> rev 7 created", "watch-> rev 7 [PUT a=3(c6 m6 v1)]"],
    ),
    ("future start", WatchRequest(b"a", start_revision=100), ["watch-> rev 7 created"]),
]


@pytest.mark.parametrize(
    ("request_", "expected"), [pytest.param(r, e, id=n) for n, r, e in RESPONSE_CASES]
)
def test_store_watch_responses_match_etcd(request_: WatchRequest, expected: list[str]) -> None:
    responses = watch_responses(store(), request_)
    assert shown(responses) == expected
    assert check_watch(history_of(store()), request_, responses) == []


def test_store_watch_progress_notification_carries_current_revision() -> None:
    responses = watch_responses(store(), WatchRequest(b"z", start_revision=2), progress=True)
    assert shown(responses)[-1] == "watch-> rev 7 progress"
    assert check_watch(history_of(store()), WatchRequest(b"z", start_revision=2), responses) == []


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        # watchable_store chooseAll: `if w.minRev < compactRev` -> compacted and canceled.
        (3, ["watch-> rev 7 created", "watch-> rev 0 canceled compact_revision 4"]),
        # A watch from the compact revision itself is served.
        (
            4,
            [
                "watch-> rev 7 created",
                "watch-> rev 7 [PUT a=2(c2 m4 v2), DELETE a@5, PUT a=3(c6 m6 v1)]",
            ],
        ),
    ],
)
def test_store_watch_below_compact_revision_is_canceled(start: int, expected: list[str]) -> None:
    state, _ = apply_all(store(), [CompactionRequest(4)])
    request = WatchRequest(b"a", start_revision=start)
    responses = watch_responses(state, request)
    assert shown(responses) == expected
    assert check_watch(history_of(store()), request, responses) == []


# ---------------------------------------------------------------------------- checks

REQUEST = WatchRequest(b"a", b"d", start_revision=2)


def correct() -> list[WatchResponse]:
    """A watch created at revision 1 that then saw every write live, then a progress."""
    state = store()
    created = WatchResponse(ResponseHeader(1), created=True)
    progress = WatchResponse(ResponseHeader(state.revision))
    return [created, *live_responses(state, REQUEST, 1), progress]


def _events(responses: list[WatchResponse]) -> list[tuple[int, Event]]:
    return [(i, e) for i, r in enumerate(responses) for e in r.events]


def swap_revisions(rs: list[WatchResponse]) -> list[WatchResponse]:
    return [rs[0], rs[2], rs[1], *rs[3:]]


def duplicate(rs: list[WatchResponse]) -> list[WatchResponse]:
    return [*rs[:3], rs[2], *rs[3:]]


def drop_middle(rs: list[WatchResponse]) -> list[WatchResponse]:
    return [*rs[:3], *rs[4:]]


def split_txn(rs: list[WatchResponse]) -> list[WatchResponse]:
    txn = rs[3]
    first = WatchResponse(txn.header, txn.events[:1])
    rest = WatchResponse(txn.header, txn.events[1:])
    return [*rs[:3], first, rest, *rs[4:]]


def skip_start(rs: list[WatchResponse]) -> list[WatchResponse]:
    return [rs[0], *rs[2:]]


def early_bookmark(rs: list[WatchResponse]) -> list[WatchResponse]:
    return [rs[0], rs[1], WatchResponse(ResponseHeader(5)), *rs[2:-1]]


def foreign_event(rs: list[WatchResponse]) -> list[WatchResponse]:
    z = Event(EventType.PUT, KeyValue(b"z", 7, 7, 1, b"1"))
    return [*rs[:-1], WatchResponse(ResponseHeader(7), (z,)), rs[-1]]


def with_prev_kv(rs: list[WatchResponse]) -> list[WatchResponse]:
    event = rs[1].events[0]
    fake = Event(event.type, event.kv, KeyValue(b"a", 1, 1, 1, b"0"))
    return [rs[0], WatchResponse(rs[1].header, (fake,)), *rs[2:]]


def not_create(rs: list[WatchResponse]) -> list[WatchResponse]:
    event = rs[1].events[0]
    kv = event.kv
    wrong = Event(
        event.type, KeyValue(kv.key, kv.create_revision - 1, kv.mod_revision, kv.version, kv.value)
    )
    return [rs[0], WatchResponse(rs[1].header, (wrong,)), *rs[2:]]


def wrong_value(rs: list[WatchResponse]) -> list[WatchResponse]:
    event = rs[1].events[0]
    kv = event.kv
    wrong = Event(
        event.type, KeyValue(kv.key, kv.create_revision, kv.mod_revision, kv.version, b"X")
    )
    return [rs[0], WatchResponse(rs[1].header, (wrong,)), *rs[2:]]


def refuse_available(rs: list[WatchResponse]) -> list[WatchResponse]:
    return [rs[0], WatchResponse(ResponseHeader(7), compact_revision=2, canceled=True)]


MUTATIONS: list[tuple[str, Callable[[list[WatchResponse]], list[WatchResponse]], str]] = [
    ("revisions out of order", swap_revisions, "Ordered"),
    ("a revision twice", duplicate, "Unique"),
    ("a revision dropped in the middle", drop_middle, "Reliable"),
    ("a txn's events split over two responses", split_txn, "Atomic"),
    ("the first revision skipped", skip_start, "Resumable"),
    ("refused as compacted though available", refuse_available, "Resumable"),
    ("a progress notification ahead of its events", early_bookmark, "Bookmarkable"),
    ("an event outside the watched range", foreign_event, "Filter"),
    ("a prev_kv nobody asked for", with_prev_kv, "PrevKV"),
    ("a created key that does not read as created", not_create, "IsCreate"),
    ("a value the history never had", wrong_value, "Valid"),
]


def test_store_watch_correct_stream_passes_every_check() -> None:
    assert check_watch(history_of(store()), REQUEST, correct()) == []
    assert [r.describe() for r in correct()[1:3]] == [
        "watch-> rev 2 [PUT a=1(c2 m2 v1)]",
        "watch-> rev 3 [PUT b=1(c3 m3 v1)]",
    ]


def test_store_watch_catch_up_is_batched_by_1000_revisions() -> None:
    state, _ = apply_all(initial_state(), [put("k", str(i)) for i in range(1500)])
    responses = watch_responses(state, WatchRequest(b"k", start_revision=2))
    assert [len(r.events) for r in responses] == [0, 1000, 500]
    assert {r.revision for r in responses} == {1501}
    assert check_watch(history_of(state), WatchRequest(b"k", start_revision=2), responses) == []


@pytest.mark.parametrize(
    ("mutate", "guarantee"), [pytest.param(m, g, id=n) for n, m, g in MUTATIONS]
)
def test_store_watch_check_catches_broken_guarantee(
    mutate: Callable[[list[WatchResponse]], list[WatchResponse]], guarantee: str
) -> None:
    assert guarantee in GUARANTEES
    violations = check_watch(history_of(store()), REQUEST, mutate(correct()))
    names = {v.guarantee for v in violations}
    assert guarantee in names, [v.describe() for v in violations]
    assert all(v.describe().startswith(f"{v.guarantee}: watch(") for v in violations)


def test_store_watch_bug_drops_events_at_compaction_is_caught() -> None:
    # A client watches from revision 2; the store was compacted to 4 meanwhile. The
    # correct server cancels with compact_revision 4; the buggy one silently resumes
    # at 4, so events at 2 and 3 never reach the client.
    history = history_of(store())  # recorded before the compaction
    compacted, _ = apply_all(store(), [CompactionRequest(4)])
    request = WatchRequest(b"a", b"c", start_revision=2)
    good = watch_responses(compacted, request)
    assert check_watch(history, request, good) == []
    bad = watch_responses(compacted, request, BugSet.of("watch_drops_event_at_compaction"))
    assert not any(r.compact_revision for r in bad)
    names = {v.guarantee for v in check_watch(history, request, bad)}
    assert "Resumable" in names


# ---------------------------------------------------------------------------- property

_keys = st.sampled_from([b"a", b"b", b"c"])
_writes: st.SearchStrategy[Request] = st.one_of(
    st.builds(PutRequest, _keys, st.sampled_from([b"1", b"2"])),
    st.builds(DeleteRangeRequest, _keys, st.sampled_from([b"", b"c", b"\x00"])),
    st.builds(
        TxnRequest,
        st.just(()),
        st.lists(st.builds(PutRequest, _keys), max_size=2, unique_by=lambda p: p.key).map(tuple),
        st.just(()),
    ),
)


@given(
    st.lists(_writes, max_size=15),
    st.integers(0, 16),
    st.integers(0, 16),
    _keys,
    st.sampled_from([b"", b"c", b"\x00"]),
    st.booleans(),
)
def test_store_watch_model_keeps_every_guarantee(
    writes: list[Request], start: int, compact: int, key: bytes, end: bytes, prev_kv: bool
) -> None:
    state, _ = apply_all(initial_state(), writes)
    history = history_of(state)
    if 0 < compact <= state.revision:
        state, _ = apply_all(state, [CompactionRequest(compact)])
    request = WatchRequest(key, end, start_revision=start, prev_kv=prev_kv)
    responses = watch_responses(state, request, progress=True)
    assert check_watch(history, request, responses, state.compact_revision) == []


def test_store_watch_prev_kv_older_than_compaction_is_left_out() -> None:
    # etcd's watch stream reads prev_kv at mod_revision - 1; below the compact revision
    # that read fails and the event goes out without prev_kv (etcd 3.5.1).
    state, _ = apply_all(store(), [CompactionRequest(4)])
    request = WatchRequest(b"a", start_revision=4, prev_kv=True)
    responses = watch_responses(state, request)
    assert shown(responses)[1] == (
        "watch-> rev 7 [PUT a=2(c2 m4 v2), DELETE a@5 prev a=2(c2 m4 v2), PUT a=3(c6 m6 v1)]"
    )
    assert check_watch(history_of(store()), request, responses, compacted_before=4) == []
    strict = check_watch(history_of(store()), request, responses, compacted_before=0)
    assert {v.guarantee for v in strict} == {"PrevKV"}  # claimed: no compaction
    # Compaction unknown: a missing prev_kv is accepted, a wrong one is not.
    assert check_watch(history_of(store()), request, responses) == []
    event = responses[1].events[1]
    wrong = Event(event.type, event.kv, KeyValue(b"a", 2, 2, 1, b"0"))
    forged = [responses[0], WatchResponse(responses[1].header, (wrong,))]
    names = {v.guarantee for v in check_watch(history_of(store()), request, forged)}
    assert "PrevKV" in names

"""Watch semantics over the store's event history, and checks of etcd's watch guarantees.

Contract:
- `watch_responses(state, request)` gives the responses a correct etcd server sends
  for a watch created on `state`: the `created` response (header = current revision),
  then either the catch-up, or, when the start revision is below the compact
  revision, one response with `compact_revision` set, `canceled` and a header
  revision of 0 (etcd's watchable store: `if w.minRev < compactRev`). The catch-up is
  what etcd's syncWatchers sends: every matching event from the start revision on,
  in one response per 1000 revisions (watchBatchMaxRevs), each with the current
  revision as header. A start revision of 0 means current + 1. With `progress=True`
  a progress notification (no events, header = current revision) closes the list.
  All checked against etcd 3.5.1.
- `live_responses(state, request, after)` gives what a synced watcher receives for
  the writes after revision `after`: one response per revision, header = that
  revision (etcd's notify path).
- The guarantee checks are pure functions over PLAIN DATA: the store's event history
  (a sequence of `Event`, in revision order, as any recorder can rebuild it), one
  `WatchRequest` and the `WatchResponse`s observed on that watch, in arrival order.
  `check_watch` returns a list of `WatchViolation`s (empty: every guarantee held).
  The guarantees are named as etcd's API guarantees document names them (Ordered,
  Unique, Reliable, Atomic, Resumable, Bookmarkable) plus Filter, PrevKV, IsCreate and
  Valid (an event that is not in the history, or differs from it).
- The history must cover every revision from the watch's start revision to the last
  revision observed; events before the start may be present and are ignored.
etcd corner: compaction to revision c keeps, per key, only its last revision <= c and
drops that too if it is a tombstone (keyIndex.compact), and etcd's compactor runs in
the background: a watch from c gets the events at c of a key deleted at c only if it
starts before the compactor has run (seen both ways on etcd 3.5.1: put w; del w at 8;
compact 8; watch w --rev 8). `watch_responses` delivers them (the guarantee-keeping
answer); `check_watch(..., compacted_before=c)` excuses their absence.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.kv import keys_at
from etcdspec.model.requests import (
    Event,
    EventType,
    KeyValue,
    ResponseHeader,
    in_range,
    show_bytes,
    show_range,
)
from etcdspec.model.store import StoreState

__all__ = [
    "GUARANTEES",
    "Event",
    "EventType",
    "KeyValue",
    "WatchFilter",
    "WatchRequest",
    "WatchResponse",
    "WatchViolation",
    "check_watch",
    "history_of",
    "live_responses",
    "watch_responses",
]


class WatchFilter(enum.Enum):
    """etcdserverpb.WatchCreateRequest.FilterType."""

    NOPUT = 0
    NODELETE = 1


@dataclass(frozen=True, slots=True)
class WatchRequest:
    """etcdserverpb.WatchCreateRequest (fragment and watch_id are transport details)."""

    key: bytes
    range_end: bytes = b""
    start_revision: int = 0
    prev_kv: bool = False
    progress_notify: bool = False
    filters: frozenset[WatchFilter] = frozenset()

    def matches(self, event: Event) -> bool:
        """Whether an event of the store is one this watch must deliver (range, filters)."""
        if not in_range(event.kv.key, self.key, self.range_end):
            return False
        if event.type is EventType.PUT and WatchFilter.NOPUT in self.filters:
            return False
        return not (event.type is EventType.DELETE and WatchFilter.NODELETE in self.filters)

    def describe(self) -> str:
        parts = [show_range(self.key, self.range_end)]
        if self.start_revision:
            parts.append(f"from {self.start_revision}")
        if self.prev_kv:
            parts.append("prev_kv")
        if self.progress_notify:
            parts.append("progress_notify")
        parts.extend(f.name.lower() for f in sorted(self.filters, key=lambda f: f.value))
        return f"watch({' '.join(parts)})"


@dataclass(frozen=True, slots=True)
class WatchResponse:
    """etcdserverpb.WatchResponse. No events and no flags: a progress notification."""

    header: ResponseHeader
    events: tuple[Event, ...] = ()
    compact_revision: int = 0
    canceled: bool = False
    created: bool = False

    @property
    def revision(self) -> int:
        return self.header.revision

    def is_progress_notify(self) -> bool:
        return not (self.events or self.created or self.canceled or self.compact_revision)

    def describe(self) -> str:
        flags = []
        if self.created:
            flags.append("created")
        if self.canceled:
            flags.append("canceled")
        if self.compact_revision:
            flags.append(f"compact_revision {self.compact_revision}")
        if self.is_progress_notify():
            flags.append("progress")
        events = ", ".join(e.describe() for e in self.events)
        head = " ".join([f"watch-> {self.header.describe()}", *flags])
        return f"{head} [{events}]" if self.events else head


def history_of(state: StoreState) -> tuple[Event, ...]:
    """Every event the state's history still holds, in order."""
    return state.events_since(state.oldest_event_revision())


def _as_delivered(state: StoreState, event: Event, prev_kv: bool) -> Event:
    """The event as etcd's watch stream sends it.

    etcd (v3rpc watch sendLoop) fills prev_kv by reading the key at mod_revision - 1
    from the store as it is when sending, and not at all for a create event: so a
    prev_kv older than the compact revision is left out (checked on etcd 3.5.1), and
    within one txn revision the prev_kv is the value before the txn.
    """
    if not prev_kv or event.is_create():
        return event if event.prev_kv is None else Event(event.type, event.kv, None)
    before = event.revision - 1
    previous = None
    if before >= max(state.compact_revision, 1):
        found = keys_at(state, event.kv.key, b"", before)
        previous = found[0] if found else None
    if previous == event.prev_kv:
        return event
    return Event(event.type, event.kv, previous)


WATCH_BATCH_MAX_REVISIONS = 1000
"""etcd's watchBatchMaxRevs: the most revisions one catch-up response carries."""


def _matching_by_revision(
    state: StoreState, request: WatchRequest, start: int
) -> dict[int, list[Event]]:
    by_revision: dict[int, list[Event]] = {}
    if start <= state.revision:
        for event in state.events_since(start):
            if request.matches(event):
                by_revision.setdefault(event.revision, []).append(
                    _as_delivered(state, event, request.prev_kv)
                )
    return by_revision


def watch_responses(
    state: StoreState,
    request: WatchRequest,
    bugs: BugSet = NO_BUGS,
    progress: bool = False,
) -> list[WatchResponse]:
    """The responses a correct server sends for `request` created on `state`."""
    current = state.revision
    start = request.start_revision or current + 1
    responses = [WatchResponse(ResponseHeader(current), created=True)]
    if start < state.compact_revision:
        if not bugs.on("watch_drops_event_at_compaction"):
            # etcd sends this response with an empty header (revision 0).
            responses.append(
                WatchResponse(
                    ResponseHeader(0), compact_revision=state.compact_revision, canceled=True
                )
            )
            return responses
        # The bug: catch up from what is left after the compaction, say nothing.
        start = state.compact_revision
    by_revision = _matching_by_revision(state, request, start)
    revisions = sorted(by_revision)
    for first in range(0, len(revisions), WATCH_BATCH_MAX_REVISIONS):
        batch = revisions[first : first + WATCH_BATCH_MAX_REVISIONS]
        events = tuple(event for revision in batch for event in by_revision[revision])
        responses.append(WatchResponse(ResponseHeader(current), events))
    if progress:
        responses.append(WatchResponse(ResponseHeader(current)))
    return responses


def live_responses(state: StoreState, request: WatchRequest, after: int) -> list[WatchResponse]:
    """What a synced watcher gets for the writes after revision `after`, one per revision."""
    by_revision = _matching_by_revision(state, request, after + 1)
    return [
        WatchResponse(ResponseHeader(revision), tuple(by_revision[revision]))
        for revision in sorted(by_revision)
    ]


# ---------------------------------------------------------------------------- checks

GUARANTEES: tuple[str, ...] = (
    "Ordered",
    "Unique",
    "Reliable",
    "Atomic",
    "Resumable",
    "Bookmarkable",
    "Filter",
    "PrevKV",
    "IsCreate",
    "Valid",
)
"""The names `check_watch` reports under (etcd's API guarantees, then field checks)."""


@dataclass(frozen=True, slots=True)
class WatchViolation:
    """One broken guarantee: which, and what was observed against what was expected."""

    guarantee: str
    detail: str

    def describe(self) -> str:
        return f"{self.guarantee}: {self.detail}"


_EventId = tuple[int, bytes, EventType]


def _event_id(event: Event) -> _EventId:
    return (event.revision, event.kv.key, event.type)


def _show_id(event_id: _EventId) -> str:
    revision, key, kind = event_id
    return f"{kind.name} {show_bytes(key)}@{revision}"


def _effective_start(request: WatchRequest, responses: Sequence[WatchResponse]) -> int | None:
    if request.start_revision > 0:
        return request.start_revision
    for response in responses:
        if response.created:
            return response.revision + 1
    return None


def _dropped_at_compaction(history: Sequence[Event], compact_revision: int) -> set[_EventId]:
    """Events etcd's compactor may remove at exactly the compact revision.

    Compaction keeps, per key, only the last revision <= c, and drops it too when it is
    a tombstone: so every event at c of a key whose last event at c is a DELETE.
    """
    at_compact = [e for e in history if e.revision == compact_revision]
    last: dict[bytes, Event] = {}
    for event in at_compact:
        last[event.kv.key] = event
    doomed = {key for key, event in last.items() if event.type is EventType.DELETE}
    return {_event_id(e) for e in at_compact if e.kv.key in doomed}


def check_watch(
    history: Sequence[Event],
    request: WatchRequest,
    responses: Sequence[WatchResponse],
    compacted_before: int | None = None,
) -> list[WatchViolation]:
    """Check one watch's observed responses against the store's event history.

    `compacted_before`: the compact revision when the responses were sent. etcd leaves
    out a prev_kv older than it and, at exactly it, the events of a key deleted there
    (see the module notes), so neither missing is a violation. None (unknown) accepts
    any missing prev_kv (a wrong or unasked-for one is still reported) and excuses no
    missing event; pass the compact revision (0 if none) for the strict check.
    """
    violations: list[WatchViolation] = []

    def report(guarantee: str, detail: str) -> None:
        violations.append(WatchViolation(guarantee, f"{request.describe()}: {detail}"))

    by_id: dict[_EventId, Event] = {}
    order: dict[_EventId, int] = {}
    # The key's value at revision - 1 (what etcd sends as prev_kv), per event.
    value_before: dict[_EventId, KeyValue | None] = {}
    # key -> (revision of its last event, value after it, value before that revision)
    last_seen: dict[bytes, tuple[int, KeyValue | None, KeyValue | None]] = {}
    for index, event in enumerate(history):
        eid = _event_id(event)
        by_id.setdefault(eid, event)
        order.setdefault(eid, index)
        key = event.kv.key
        record = last_seen.get(key)
        value: KeyValue | None
        if record is None:
            value = event.prev_kv  # the first event seen: its own record of the value
        elif record[0] < event.revision:
            value = record[1]
        else:
            value = record[2]  # a second event on the key in one revision
        value_before.setdefault(eid, value)
        after = event.kv if event.type is EventType.PUT else None
        last_seen[key] = (event.revision, after, value)
    start = _effective_start(request, responses)

    delivered: list[tuple[int, Event]] = []  # (response index, event)
    for index, response in enumerate(responses):
        delivered.extend((index, event) for event in response.events)

    # Filter, Valid, PrevKV, IsCreate: each delivered event on its own.
    for _, event in delivered:
        eid = _event_id(event)
        if not request.matches(event):
            report("Filter", f"delivered {event.describe()}, which the watch does not select")
        truth = by_id.get(eid)
        if truth is None:
            report("Valid", f"delivered {event.describe()}, which is not in the history")
            continue
        if event.kv != truth.kv:
            report("Valid", f"delivered {event.describe()}, history has {truth.describe()}")
        if event.type is EventType.PUT and event.is_create() != truth.is_create():
            report(
                "IsCreate",
                f"{event.describe()} reads as create={event.is_create()}, "
                f"history has {truth.describe()}",
            )
        expected_prev = value_before.get(eid) if request.prev_kv and not truth.is_create() else None
        if event.prev_kv != expected_prev and not (
            event.prev_kv is None
            and (compacted_before is None or event.revision - 1 < compacted_before)
        ):
            shown = "none" if expected_prev is None else expected_prev.describe()
            report("PrevKV", f"{event.describe()}: expected prev_kv {shown}")

    # Ordered and Unique.
    seen: set[_EventId] = set()
    last: Event | None = None
    for _, event in delivered:
        eid = _event_id(event)
        if eid in seen:
            report("Unique", f"{_show_id(eid)} delivered more than once")
        seen.add(eid)
        if last is not None:
            before, now = order.get(_event_id(last)), order.get(eid)
            if event.revision < last.revision or (
                event.revision == last.revision
                and before is not None
                and now is not None
                and now < before
            ):
                report("Ordered", f"{event.describe()} delivered after {last.describe()}")
        last = event

    # Atomic: the events of one revision arrive in one response.
    response_of_revision: dict[int, int] = {}
    for index, event in delivered:
        first = response_of_revision.setdefault(event.revision, index)
        if first != index:
            report(
                "Atomic",
                f"events of revision {event.revision} split over responses {first} and {index}",
            )
            response_of_revision[event.revision] = index

    # Resumable: a watch from an available revision starts exactly there.
    compacted = [r for r in responses if r.compact_revision]
    droppable = _dropped_at_compaction(history, compacted_before or 0)
    wanted = [e for e in history if request.matches(e) and _event_id(e) not in droppable]
    if start is not None:
        wanted = [e for e in wanted if e.revision >= start]
        for response in compacted:
            if start >= response.compact_revision:
                report(
                    "Resumable",
                    f"refused as compacted at {response.compact_revision}, but start "
                    f"revision {start} is still available",
                )
        if delivered and not compacted:
            first_revision = delivered[0][1].revision
            skipped = [
                e for e in wanted if e.revision < first_revision and _event_id(e) not in seen
            ]
            if skipped:
                report(
                    "Resumable",
                    f"watch from {start} began at revision {first_revision}, skipping "
                    + ", ".join(e.describe() for e in skipped[:5]),
                )

    # Reliable: no gap between the first and the last delivered event.
    if delivered:
        low, high = delivered[0][1].revision, max(e.revision for _, e in delivered)
        missing = [e for e in wanted if low <= e.revision <= high and _event_id(e) not in seen]
        if missing:
            report(
                "Reliable",
                "missing " + ", ".join(e.describe() for e in missing[:5]),
            )

    # Bookmarkable: a progress notification at R means every event <= R is delivered.
    delivered_before = 0
    for index, response in enumerate(responses):
        delivered_before += len(response.events)
        if not response.is_progress_notify():
            continue
        bookmark = response.revision
        got = {_event_id(e) for _, e in delivered[:delivered_before]}
        late = [e for e in wanted if e.revision <= bookmark and _event_id(e) not in got]
        if late and not compacted:
            report(
                "Bookmarkable",
                f"progress at revision {bookmark} (response {index}) before "
                + ", ".join(e.describe() for e in late[:5]),
            )
        stale = [e for i, e in delivered if i > index and e.revision <= bookmark]
        if stale:
            report(
                "Bookmarkable",
                f"{stale[0].describe()} delivered after progress at revision {bookmark}",
            )
    return violations

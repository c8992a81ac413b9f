"""Watch guarantees of a recorded history, judged against its linearized KV history.

Contract:
- Watch streams are history events of type "watch": `watch_create` with value
  {"watch": W, "request": {key, range_end, start_revision, prev_kv, progress_notify,
  filters: ["NOPUT"|"NODELETE"]}} and `watch_response` with value {"watch": W,
  "header": {"revision"}, "events": [{"type": "PUT"|"DELETE", "kv": {...},
  "prev_kv": {...}}], "compact_revision", "canceled", "created"} (etcd v3 JSON; a
  missing type is PUT, etcd's zero value). W names the stream (any string or int;
  "watch_id" is accepted too).
- The truth the watches are judged against is the store's event history after
  replaying the linearization the linearizability check found (compactions are left
  out of the replay so every event stays readable; the compact revision reached is
  passed on, as etcd may omit a prev_kv or a tombstone older than it).
- Each guarantee is a separate result: Ordered, Unique, Reliable, Atomic, Resumable,
  Bookmarkable, Filter, PrevKV, IsCreate and Valid — the names and the pure checks are
  the store model's (`etcdspec.model.watch.check_watch`); this module only adapts the
  recorded data to them. Without a linearization (the KV history is not linearizable,
  or undecided) the guarantees are UNKNOWN: there is no agreed history to judge by.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from etcdspec.checker.etcd_json import (
    EtcdJsonError,
    as_object,
    field_bytes,
    field_int,
    kv_from_json,
    kv_to_json,
    request_from_json,
)
from etcdspec.checker.etcd_writes import event_signatures
from etcdspec.checker.history import History, HistoryError, Operation, encode_bytes
from etcdspec.checker.linearizability_result import LinearizabilityResult
from etcdspec.checker.results import CheckResult
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import (
    CompactionRequest,
    Event,
    EventType,
    LeaseGrantRequest,
    Request,
    ResponseHeader,
)
from etcdspec.model.store import StoreState, apply, initial_state
from etcdspec.model.watch import (
    GUARANTEES,
    WatchFilter,
    WatchRequest,
    WatchResponse,
    check_watch,
)
from etcdspec.verdict import Verdict


@dataclass
class ObservedWatch:
    """One watch stream as recorded: its request and responses, with their event indices."""

    name: str
    request: WatchRequest
    created_index: int
    responses: list[WatchResponse] = field(default_factory=list)
    response_indices: list[int] = field(default_factory=list)

    def describe(self) -> str:
        return f"watch {self.name} {self.request.describe()} ({len(self.responses)} responses)"


def observed_writes(watches: list[ObservedWatch]) -> dict[int, set[Hashable]]:
    """The writes the watches saw, as the linearizability search's observations: per
    revision, ("put", key, value) of every PUT event and ("delete", key) of every DELETE
    event delivered there. A DELETE a lease expiry caused thus fixes the revision the
    synthetic expiry takes: only the expiry of a lease holding that key fits there."""
    observed: dict[int, set[Hashable]] = {}
    for watch in watches:
        for response in watch.responses:
            for event in response.events:
                observed.setdefault(event.kv.mod_revision, set()).update(event_signatures(event))
    return observed


def parse_watches(history: History) -> list[ObservedWatch]:
    """The watch streams of a history, in creation order (HistoryError on bad input)."""
    watches: dict[str, ObservedWatch] = {}
    for event in history.watch_events:
        value = event.value
        if not isinstance(value, dict):
            raise HistoryError(history.source, event.line, "a watch event needs an object value")
        name_value = value.get("watch", value.get("watch_id"))
        if name_value is None:
            raise HistoryError(history.source, event.line, 'a watch event needs "watch": name')
        name = str(name_value)
        try:
            if event.f == "watch_create":
                if name in watches:
                    raise HistoryError(history.source, event.line, f"watch {name} is created twice")
                watches[name] = ObservedWatch(
                    name, watch_request_from_json(value.get("request")), event.index
                )
            elif event.f == "watch_response":
                if name not in watches:
                    raise HistoryError(
                        history.source,
                        event.line,
                        f"a response on watch {name} before its watch_create",
                    )
                watches[name].responses.append(watch_response_from_json(value))
                watches[name].response_indices.append(event.index)
            else:
                raise HistoryError(
                    history.source,
                    event.line,
                    f'watch events have f "watch_create" or "watch_response", not "{event.f}"',
                )
        except (EtcdJsonError, TypeError, ValueError) as error:
            if isinstance(error, HistoryError):
                raise
            raise HistoryError(history.source, event.line, str(error)) from error
    return list(watches.values())


def watch_request_from_json(value: Any, path: str = "request") -> WatchRequest:
    obj = as_object(value, path)
    filters = obj.get("filters") or []
    if not isinstance(filters, list):
        raise EtcdJsonError(f"{path}.filters", "expected a list of NOPUT / NODELETE")
    try:
        parsed = frozenset(WatchFilter[str(f)] for f in filters)
    except KeyError as error:
        raise EtcdJsonError(
            f"{path}.filters", f"unknown filter {error}; NOPUT or NODELETE"
        ) from error
    return WatchRequest(
        key=field_bytes(obj, "key", path),
        range_end=field_bytes(obj, "range_end", path),
        start_revision=field_int(obj, "start_revision", path),
        prev_kv=bool(obj.get("prev_kv", False)),
        progress_notify=bool(obj.get("progress_notify", False)),
        filters=parsed,
    )


def watch_response_from_json(value: Any, path: str = "value") -> WatchResponse:
    obj = as_object(value, path)
    events = []
    for i, item in enumerate(obj.get("events") or []):
        where = f"{path}.events[{i}]"
        item = as_object(item, where)
        kind = str(item.get("type", "PUT"))
        if kind not in ("PUT", "DELETE"):
            raise EtcdJsonError(f"{where}.type", f"expected PUT or DELETE, got {kind!r}")
        prev = item.get("prev_kv")
        events.append(
            Event(
                EventType[kind],
                kv_from_json(item.get("kv"), f"{where}.kv"),
                kv_from_json(prev, f"{where}.prev_kv") if prev else None,
            )
        )
    header = as_object(obj.get("header"), f"{path}.header")
    return WatchResponse(
        header=ResponseHeader(field_int(header, "revision", f"{path}.header")),
        events=tuple(events),
        compact_revision=field_int(obj, "compact_revision", path),
        canceled=bool(obj.get("canceled", False)),
        created=bool(obj.get("created", False)),
    )


def watch_request_to_json(request: WatchRequest) -> dict[str, Any]:
    return {
        "key": encode_bytes(request.key),
        "range_end": encode_bytes(request.range_end),
        "start_revision": request.start_revision,
        "prev_kv": request.prev_kv,
        "progress_notify": request.progress_notify,
        "filters": sorted(f.name for f in request.filters),
    }


def watch_response_to_json(response: WatchResponse) -> dict[str, Any]:
    events = []
    for event in response.events:
        item: dict[str, Any] = {"type": event.type.name, "kv": kv_to_json(event.kv)}
        if event.prev_kv is not None:
            item["prev_kv"] = kv_to_json(event.prev_kv)
        events.append(item)
    return {
        "header": {"revision": response.header.revision},
        "events": events,
        "compact_revision": response.compact_revision,
        "canceled": response.canceled,
        "created": response.created,
    }


def replay_events(
    history: History, linearization: Sequence[int], extra: Sequence[Operation] = ()
) -> tuple[tuple[Event, ...], int]:
    """The store's events after applying the linearized operations, and the compact
    revision reached. `extra` are the model's synthetic operations (lease expiry)."""
    by_id = {op.id: op for op in (*history.operations, *extra)}
    state: StoreState = initial_state()
    compact_revision = 0
    for op_id in linearization:
        request: Request
        if op_id in by_id:
            op = by_id[op_id]
            f = "lease_revoke" if op.f == "lease_expire" else op.f
            request = request_from_json(f, op.request)
            if isinstance(request, LeaseGrantRequest) and request.id == 0:
                request = LeaseGrantRequest(
                    request.ttl, field_int(op.response or {}, "ID", "", "id")
                )
        else:
            continue
        if isinstance(request, CompactionRequest):
            compact_revision = max(compact_revision, request.revision)
            continue
        try:
            state, _ = apply(state, request)
        except StoreError:
            continue  # not reachable for a linearization the model accepted
    if state.revision < 2:
        return (), compact_revision
    return state.events_since(2), compact_revision


def check_watches(
    history: History,
    linearizability: LinearizabilityResult | None,
) -> list[CheckResult]:
    """One result per watch guarantee (empty list: the history has no watch streams)."""
    start = time.monotonic()
    watches = parse_watches(history)
    if not watches:
        return []
    if linearizability is None or linearizability.verdict is not Verdict.TRUE:
        why = (
            "the KV history is not linearizable"
            if linearizability is not None and linearizability.verdict is Verdict.FALSE
            else "the KV history was not decided"
        )
        return [
            CheckResult(name, Verdict.UNKNOWN, f"no linearized history to judge by ({why})")
            for name in GUARANTEES
        ]
    events, compacted = replay_events(
        history, linearizability.linearization(), linearizability.synthetic
    )
    found: dict[str, list[str]] = {name: [] for name in GUARANTEES}
    marks: dict[str, list[int]] = {name: [] for name in GUARANTEES}
    for watch in watches:
        for violation in check_watch(events, watch.request, watch.responses, compacted):
            found.setdefault(violation.guarantee, []).append(
                f"watch {watch.name}: {violation.describe()}"
            )
            marks.setdefault(violation.guarantee, []).extend(
                [watch.created_index, *watch.response_indices]
            )
    seconds = time.monotonic() - start
    results = []
    for name, details in found.items():
        if details:
            results.append(
                CheckResult(
                    name,
                    Verdict.FALSE,
                    f"{len(details)} violation(s) over {len(watches)} watch(es)",
                    seconds,
                    tuple(details),
                    tuple(sorted(set(marks[name]))),
                )
            )
        else:
            results.append(
                CheckResult(name, Verdict.TRUE, f"held on {len(watches)} watch(es)", seconds)
            )
    return results

"""Histories generated from the pure models: concurrent clients against a sequential object.

Contract: `simulate_*(seed, ...)` returns a list of HistoryEvents (a valid history) in
which several processes invoke operations that take effect, one at a time, at a point
between their invoke and their completion; some end `info` (the client lost the
answer: the operation took effect or not, at random) and that process is replaced by a
new id, as in Jepsen. Without a fault the history is linearizable by construction; a
named fault (`ETCD_FAULTS`, `REGISTER_FAULTS`) corrupts it in a way a correct checker
must catch. Everything is driven by random.Random(seed): the same seed gives the same
history. Used by the checker's tests (the corpus of generated histories) and benchmarks.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from etcdspec.checker.etcd_json import request_to_json, response_to_json
from etcdspec.checker.history import HistoryBuilder, HistoryEvent
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    LeaseGrantRequest,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    Request,
    Response,
    ResponseHeader,
    TxnRequest,
)
from etcdspec.model.store import StoreState, apply, initial_state

ETCD_FAULTS = ("stale_read", "lost_write", "revision_backwards", "phantom_read")
REGISTER_FAULTS = ("stale_read", "lost_write")
# watch fault -> the guarantee it breaks
WATCH_FAULTS = {
    "drop_event": "Reliable",
    "duplicate_event": "Unique",
    "reorder": "Ordered",
    "split_revision": "Atomic",
    "wrong_prev_kv": "PrevKV",
    "filter_break": "Filter",
    "not_create": "IsCreate",
    "resume_late": "Resumable",
    "early_bookmark": "Bookmarkable",
}


@dataclass
class _Pending:
    process: int
    f: str
    request: Any
    applied: bool = False
    response: Any = None
    fail: bool = False


def _drive(
    rng: random.Random,
    ops: int,
    processes: int,
    info_rate: float,
    new_request: Callable[[], tuple[str, Any]],
    take_effect: Callable[[str, Any], tuple[Any, bool]],
    info_value: Callable[[str, Any], Any],
) -> list[HistoryEvent]:
    """The concurrency skeleton shared by every model: invoke, take effect, complete."""
    builder = HistoryBuilder()
    idle = list(range(processes))
    next_process = processes
    pending: dict[int, _Pending] = {}
    invoked = 0
    clock = 0
    while invoked < ops or pending:
        clock += rng.randint(1, 1000)
        choice = rng.random()
        if idle and invoked < ops and (choice < 0.4 or not pending):
            process = idle.pop(rng.randrange(len(idle)))
            f, request = new_request()
            builder.add(process, "invoke", f, request, time=clock)
            pending[process] = _Pending(process, f, request)
            invoked += 1
            continue
        process = rng.choice(sorted(pending))
        op = pending[process]
        if not op.applied:
            if rng.random() < info_rate / 2:  # lost before it reached the server
                builder.add(process, "info", op.f, info_value(op.f, op.request), time=clock)
                del pending[process]
                idle.append(next_process)
                next_process += 1
                continue
            op.response, op.fail = take_effect(op.f, op.request)
            op.applied = True
            continue
        del pending[process]
        if rng.random() < info_rate / 2:  # took effect, but the answer was lost
            builder.add(process, "info", op.f, info_value(op.f, op.request), time=clock)
            idle.append(next_process)
            next_process += 1
            continue
        builder.add(process, "fail" if op.fail else "ok", op.f, op.response, time=clock)
        idle.append(process)
    return builder.events


# ---------------------------------------------------------------------------- etcd


def _etcd_request(rng: random.Random, keys: int, state_ref: list[StoreState]) -> Request:
    key = f"k{rng.randrange(keys)}".encode()
    roll = rng.random()
    if roll < 0.45:
        return PutRequest(key, f"v{rng.randrange(10**6)}".encode(), prev_kv=rng.random() < 0.2)
    if roll < 0.75:
        return RangeRequest(key)
    if roll < 0.8:
        return RangeRequest(b"k", b"l", limit=rng.choice([0, 2]))
    if roll < 0.85:
        return DeleteRangeRequest(key, prev_kv=rng.random() < 0.5)
    if roll < 0.88 and keys > 1:  # one revision, two events (for Atomic)
        other = f"k{(int(key[1:]) + 1) % keys}".encode()
        value = f"m{rng.randrange(10**6)}".encode()
        return TxnRequest(success=(PutRequest(key, value), PutRequest(other, value)))
    current = state_ref[0].get(key)
    expected = current.mod_revision if current is not None and rng.random() < 0.7 else 0
    return TxnRequest(
        compare=(Compare(key, CompareTarget.MOD, CompareResult.EQUAL, expected),),
        success=(PutRequest(key, f"t{rng.randrange(10**6)}".encode()),),
        failure=(RangeRequest(key),),
    )


def simulate_etcd(
    seed: int,
    ops: int = 200,
    processes: int = 5,
    info_rate: float = 0.1,
    keys: int = 5,
    fault: str | None = None,
    leases: bool = False,
    watch: bool = False,
    watch_fault: str | None = None,
) -> list[HistoryEvent]:
    """An etcd history of `ops` operations; `fault` one of ETCD_FAULTS or None; with
    `watch`, a watch stream over every key, broken by `watch_fault` (WATCH_FAULTS)."""
    if fault is not None and fault not in ETCD_FAULTS:
        raise ValueError(f"unknown etcd fault {fault!r}; choose one of {', '.join(ETCD_FAULTS)}")
    rng = random.Random(seed)
    state_ref = [initial_state()]
    past: list[StoreState] = [state_ref[0]]
    faulted = [False]
    lease_ids: list[int] = []

    def new_request() -> tuple[str, Any]:
        if leases and rng.random() < 0.05:
            request: Request = LeaseGrantRequest(ttl=60)
        else:
            request = _etcd_request(rng, keys, state_ref)
            if leases and lease_ids and isinstance(request, PutRequest) and rng.random() < 0.3:
                request = replace(request, lease=rng.choice(lease_ids))
        return request_to_json(request)

    def take_effect(f: str, value: Any) -> tuple[Any, bool]:
        from etcdspec.checker.etcd_json import request_from_json

        request = request_from_json(f, value)
        state = state_ref[0]
        try:
            new_state, response = apply(state, request)
        except StoreError as error:
            return {"error": error.message, "code": error.code}, True
        answer = _inject(fault, rng, request, state, new_state, response, past, faulted)
        if answer is None:  # lost write: acknowledged, not applied
            answer = PutResponse(ResponseHeader(state.revision + 1))
            new_state = state
        response = answer
        if hasattr(response, "id") and f == "lease_grant":
            lease_ids.append(response.id)
        state_ref[0] = new_state
        if new_state.revision != state.revision:
            past.append(new_state)
        return response_to_json(response), False

    def info_value(f: str, value: Any) -> Any:
        return value

    events = _drive(rng, ops, processes, info_rate, new_request, take_effect, info_value)
    if fault is not None and not faulted[0]:
        raise ValueError(f"seed {seed}: fault {fault} never applied; use more operations")
    if watch or watch_fault is not None:
        events = _add_watch(events, state_ref[0], watch_fault, rng)
    return events


def _add_watch(
    events: list[HistoryEvent], state: StoreState, fault: str | None, rng: random.Random
) -> list[HistoryEvent]:
    """A watch over every k* key from revision 2 (or 5), appended after the operations:
    its responses are what a correct server sends, then broken by `fault`."""
    from etcdspec.checker.watch_checks import watch_request_to_json, watch_response_to_json
    from etcdspec.model.watch import (
        WatchFilter,
        WatchRequest,
        WatchResponse,
        live_responses,
    )

    if fault is not None and fault not in WATCH_FAULTS:
        raise ValueError(f"unknown watch fault {fault!r}; choose one of {', '.join(WATCH_FAULTS)}")
    start = 5 if fault == "resume_late" else 2
    filters = frozenset({WatchFilter.NODELETE}) if fault == "filter_break" else frozenset()
    request = WatchRequest(b"k", b"l", start_revision=start, prev_kv=True, filters=filters)
    responses = [WatchResponse(ResponseHeader(state.revision), created=True)]
    live = live_responses(state, request, after=start - 1)
    if fault == "filter_break":  # a DELETE the NODELETE filter must hold back
        unfiltered = WatchRequest(b"k", b"l", start_revision=start, prev_kv=True)
        live = live_responses(state, unfiltered, after=start - 1)
    live = _break_watch(fault, live, rng)
    responses.extend(live)
    responses.append(WatchResponse(ResponseHeader(state.revision)))  # progress notification
    if fault == "early_bookmark":
        middle = len(responses) // 2
        bookmark = responses[middle + 1].revision
        responses.insert(middle, WatchResponse(ResponseHeader(bookmark)))
    time = (events[-1].time if events else 0) + 1
    out = list(events)
    index = len(out)
    out.append(
        HistoryEvent(
            index,
            "w1",
            "watch",
            "watch_create",
            {"watch": "w1", "request": watch_request_to_json(request)},
            time,
        )
    )
    for response in responses:
        index += 1
        time += 1
        body = {"watch": "w1", **watch_response_to_json(response)}
        out.append(HistoryEvent(index, "w1", "watch", "watch_response", body, time))
    return out


def _break_watch(fault: str | None, live: list[Any], rng: random.Random) -> list[Any]:
    """Break one guarantee in a list of per-revision watch responses."""
    from etcdspec.model.requests import Event

    if fault is None or len(live) < 6:
        return live
    live = list(live)
    middle = len(live) // 2
    if fault == "drop_event":
        live.pop(middle)
    elif fault == "duplicate_event":
        live.insert(middle + 1, live[middle])
    elif fault == "reorder":
        live[middle], live[middle + 1] = live[middle + 1], live[middle]
    elif fault == "split_revision":
        k = next((i for i, r in enumerate(live) if len(r.events) > 1), None)
        if k is None:
            raise ValueError("no revision with two events to split; use more operations")
        first, second = live[k].events[:1], live[k].events[1:]
        live[k : k + 1] = [replace(live[k], events=first), replace(live[k], events=second)]
    elif fault == "wrong_prev_kv":
        k = next(i for i, r in enumerate(live) if r.events[0].prev_kv is not None and i >= middle)
        event = live[k].events[0]
        assert event.prev_kv is not None
        wrong = replace(event.prev_kv, value=b"not-the-previous-value")
        live[k] = replace(live[k], events=(Event(event.type, event.kv, wrong), *live[k].events[1:]))
    elif fault == "not_create":
        k = next(i for i, r in enumerate(live) if r.events[0].is_create() and i > 0)
        event = live[k].events[0]
        kv = replace(event.kv, create_revision=1)
        live[k] = replace(
            live[k], events=(Event(event.type, kv, event.prev_kv), *live[k].events[1:])
        )
    elif fault == "resume_late":
        live.pop(0)
    return live


def _inject(
    fault: str | None,
    rng: random.Random,
    request: Request,
    state: StoreState,
    new_state: StoreState,
    response: Response,
    past: list[StoreState],
    faulted: list[bool],
) -> Response | None:
    """The response a faulty server gives (None: a write acknowledged but not applied)."""
    if fault is None or faulted[0]:
        return response
    if isinstance(request, RangeRequest) and isinstance(response, RangeResponse):
        if fault == "stale_read" and len(past) > 4:
            _, stale = apply(past[-4], request)
            assert isinstance(stale, RangeResponse)
            if stale.kvs != response.kvs:  # an old answer, stamped with today's revision
                faulted[0] = True
                return replace(stale, header=response.header)
        if fault == "revision_backwards" and response.kvs:
            faulted[0] = True  # today's keys, stamped with the first revision
            return replace(response, header=ResponseHeader(1))
        if fault == "phantom_read" and response.kvs:
            faulted[0] = True  # a value nobody wrote
            kv = replace(response.kvs[0], value=b"phantom")
            return replace(response, kvs=(kv, *response.kvs[1:]))
    if fault == "lost_write" and isinstance(request, PutRequest) and state.revision > 4:
        faulted[0] = True
        return None
    return response


# ---------------------------------------------------------------------------- register / kv


def simulate_register(
    seed: int,
    ops: int = 100,
    processes: int = 5,
    info_rate: float = 0.15,
    keys: int = 0,
    fault: str | None = None,
) -> list[HistoryEvent]:
    """A CAS-register history (keys > 0: Jepsen independent keys {"key", "value"})."""
    if fault is not None and fault not in REGISTER_FAULTS:
        raise ValueError(
            f"unknown register fault {fault!r}; choose one of {', '.join(REGISTER_FAULTS)}"
        )
    rng = random.Random(seed)
    values: dict[str, Any] = {}
    old: dict[str, list[Any]] = {}
    lost: dict[str, Any] = {}
    faulted = [False]

    def wrap(key: str, value: Any) -> Any:
        return {"key": key, "value": value} if keys else value

    def new_request() -> tuple[str, Any]:
        key = f"r{rng.randrange(keys)}" if keys else ""
        roll = rng.random()
        if roll < 0.4:
            return "read", wrap(key, None)
        if roll < 0.7:
            return "write", wrap(key, rng.randrange(5))
        return "cas", wrap(key, [rng.randrange(5), rng.randrange(5)])

    def take_effect(f: str, value: Any) -> tuple[Any, bool]:
        key, arg = (value["key"], value["value"]) if keys else ("", value)
        current = values.get(key)
        if f == "read":
            if key in lost and lost[key] != current:
                faulted[0] = True  # a read shows the lost write missing
            lost.pop(key, None)
            if fault == "stale_read" and not faulted[0] and len(old.get(key, [])) > 2:
                stale = old[key][-3]
                if stale != current:
                    faulted[0] = True
                    return wrap(key, stale), False
            return wrap(key, current), False
        if f == "write":
            lost.pop(key, None)
            if fault == "lost_write" and not faulted[0] and current is not None and arg != current:
                lost[key] = arg  # acknowledged, not applied
                return value, False
            old.setdefault(key, []).append(current)
            values[key] = arg
            return value, False
        lost.pop(key, None)
        if current != arg[0]:
            return value, True
        old.setdefault(key, []).append(current)
        values[key] = arg[1]
        return value, False

    def info_value(f: str, value: Any) -> Any:
        return value

    events = _drive(rng, ops, processes, info_rate, new_request, take_effect, info_value)
    if fault is not None and not faulted[0]:
        raise ValueError(f"seed {seed}: fault {fault} never applied; use more operations")
    return events


def simulate_kv(
    seed: int, ops: int = 200, processes: int = 5, info_rate: float = 0.1, keys: int = 10
) -> list[HistoryEvent]:
    """A kv history (get, put, append over `keys` keys)."""
    rng = random.Random(seed)
    values: dict[str, str] = {}

    def new_request() -> tuple[str, Any]:
        key = f"k{rng.randrange(keys)}"
        roll = rng.random()
        if roll < 0.4:
            return "get", {"key": key}
        if roll < 0.7:
            return "put", {"key": key, "value": f"{rng.randrange(100)}"}
        return "append", {"key": key, "value": f",{rng.randrange(100)}"}

    def take_effect(f: str, value: Any) -> tuple[Any, bool]:
        key = value["key"]
        if f == "get":
            return {"key": key, "value": values.get(key)}, False
        if f == "put":
            values[key] = value["value"]
        else:
            values[key] = values.get(key, "") + value["value"]
        return value, False

    def info_value(f: str, value: Any) -> Any:
        return value

    return _drive(rng, ops, processes, info_rate, new_request, take_effect, info_value)

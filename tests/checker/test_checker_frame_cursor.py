"""The pure search's frames resume their candidates from a cursor (`_Frame.phase`,
`pos`) where they used to hold two suspended generators. The cursor must give, at every
frame, the candidates the generator gave, in the same order, however often the search
comes back to the frame after exploring a child: here the generator's enumeration is
kept as the reference (`_reference_candidates`, the code the cursor replaced) and
compared, frame by frame and call by call, during real searches (etcd histories with
faults, info writes, leases and watches, linearizable and not; register and kv
histories through the model-generic path). And the memory the change is for: a read
history's ok operations carry no dict of their own."""

from __future__ import annotations

import bisect
import random
import time
import tracemalloc
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

import pytest

from etcdspec.checker.budget import UNBOUNDED, BudgetClock
from etcdspec.checker.history import (
    Operation,
    _history_from_pairs,
    assembled,
    build_history,
    read_history,
    write_history,
)
from etcdspec.checker.linearizability import _Frame, _Search, check_linearizable
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.checker.models import get_model
from etcdspec.checker.simulate import ETCD_FAULTS, simulate_etcd, simulate_kv, simulate_register
from etcdspec.checker.watch_checks import observed_writes, parse_watches
from etcdspec.verdict import Verdict


def _reference_candidates(search: _Search, frame: _Frame) -> Iterator[int]:
    """The candidates at `frame` as the generator-per-frame search enumerated them."""
    boundary = search._boundary(frame.ret_ptr)
    placed, call = search.placed, search.call
    revision = frame.revision
    if revision is None:
        by_call = search.by_call
        for k in range(frame.call_ptr, len(by_call)):
            i = by_call[k]
            if call[i] >= boundary:
                return
            if not placed[i]:
                yield i
        return
    others = search.pending_max.get(revision, 0)
    gap = others == 0
    tags: set[Hashable] = set()
    items = search.items
    for i in search.pre_index.get(revision, ()):
        if call[i] >= boundary:
            break
        if placed[i]:
            continue
        if items[i].tags:
            tags |= items[i].tags
        if search.surely_bumps[i] and others > (1 if search.max_pre[i] == revision else 0):
            continue
        yield i
    for i in search.free_ok:
        if call[i] >= boundary:
            break
        if not placed[i]:
            if items[i].tags:
                tags |= items[i].tags
            yield i
    for i in search.info_any:
        if call[i] >= boundary:
            break
        lazy = items[i].lazy_tag
        if placed[i]:
            continue
        if lazy is None or lazy in tags or gap:
            yield i
    if gap:
        after = revision + 1
        pinned = search.pinned
        first = search._gap_matches(after)
        for i in first:
            if call[i] < boundary and not placed[i] and pinned[i] in (None, after):
                yield i
        if after in search.observed_revisions:
            for i in search.info_wildcards:
                if call[i] < boundary and not placed[i] and pinned[i] in (None, after):
                    yield i
            return
        tried = set(first)
        limit = min(boundary, search.gap_time.get(after, boundary))
        split = bisect.bisect_left(search.info_gap_calls, limit)
        possible = search.model.info_possible
        for k in range(split - 1, -1, -1):
            i = search.info_gap[k]
            if not placed[i] and pinned[i] is None and i not in tried and possible(items[i], after):
                yield i
        for k in range(split, len(search.info_gap)):
            i = search.info_gap[k]
            if call[i] >= boundary:
                break
            if not placed[i] and pinned[i] is None and i not in tried and possible(items[i], after):
                yield i


class _Compared:
    """Wraps `_Search._next_candidate`: each frame's reference list is taken when the
    frame is first asked, and every answer after that must be its next entry."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.expected: dict[int, tuple[_Frame, list[int], list[int]]] = {}
        self.calls = 0
        self.resumed = 0  # answers given after the frame's search explored a child
        self.phases: set[int] = set()
        original = _Search._next_candidate

        def checked(search: _Search, frame: _Frame) -> int:
            entry = self.expected.get(id(frame))
            if entry is None or entry[0] is not frame:
                entry = (frame, list(_reference_candidates(search, frame)), [])
                self.expected[id(frame)] = entry
            else:
                self.resumed += 1
            _, reference, given = entry
            self.calls += 1
            i = original(search, frame)
            self.phases.add(frame.phase)
            if i < 0:
                assert given == reference, (given, reference)
            else:
                given.append(i)
                assert given == reference[: len(given)], (given, reference)
            return i

        monkeypatch.setattr(_Search, "_next_candidate", checked)


ETCD_CASES = [
    pytest.param(dict(seed=seed, fault=fault), id=f"{fault}-{seed}")
    for seed in range(3)
    for fault in (None, *ETCD_FAULTS)
] + [pytest.param(dict(seed=seed, leases=True), id=f"leases-{seed}") for seed in range(4)]


@pytest.mark.parametrize("shape", ETCD_CASES)
def test_the_cursor_gives_the_generators_candidates_on_etcd(
    shape: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    compared = _Compared(monkeypatch)
    events = simulate_etcd(ops=40, processes=5, info_rate=0.3, keys=3, **shape)
    result = check_linearizable(EtcdModel(), build_history(events).operations)
    assert result.verdict is not Verdict.UNKNOWN
    assert compared.calls > 0


@pytest.mark.parametrize("leases", [False, True])
def test_the_cursor_gives_the_generators_candidates_with_watches(
    leases: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared = _Compared(monkeypatch)
    for seed in range(4):
        events = simulate_etcd(
            seed, ops=40, processes=4, info_rate=0.3, keys=3, leases=leases, watch=True
        )
        history = build_history(events)
        seen = observed_writes(parse_watches(history))
        result = check_linearizable(EtcdModel(), history.operations, observed=seen)
        assert result.verdict is Verdict.TRUE
    assert compared.resumed > 0


def test_the_comparison_is_not_vacuous(monkeypatch: pytest.MonkeyPatch) -> None:
    """Across etcd shapes (faults, leases, watches) the search comes back to frames
    after exploring a child and its cursors stop in most phases of the enumeration;
    both verdicts occur."""
    compared = _Compared(monkeypatch)
    verdicts = set()
    for seed in range(3):
        for fault in (None, *ETCD_FAULTS):
            events = simulate_etcd(seed, ops=60, processes=6, info_rate=0.4, keys=3, fault=fault)
            verdicts.add(check_linearizable(EtcdModel(), build_history(events).operations).verdict)
        for leases in (False, True):
            events = simulate_etcd(
                seed, ops=60, processes=6, info_rate=0.4, keys=3, leases=leases, watch=True
            )
            history = build_history(events)
            seen = observed_writes(parse_watches(history))
            verdicts.add(check_linearizable(EtcdModel(), history.operations, observed=seen).verdict)
    assert verdicts == {Verdict.TRUE, Verdict.FALSE}
    assert compared.resumed > 20, compared.resumed
    # Where cursors stopped: at the revision, the info ops that need no revision, the
    # observed matches, the info writes newest first, exhausted. (The free ok ops, the
    # wildcards and the later info writes are not reached by these shapes.)
    assert compared.phases >= {1, 3, 4, 6, 8}, compared.phases


@pytest.mark.parametrize("model_name", ["register", "kv"])
def test_the_cursor_gives_the_generators_candidates_without_revisions(
    model_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Models without revision hints: `frame_search` run directly (the register and kv
    checks use entry_search; this is the generic loop it stands for)."""
    compared = _Compared(monkeypatch)
    model = get_model(model_name)
    simulate = simulate_register if model_name == "register" else simulate_kv
    for seed in range(6):
        events = simulate(seed, ops=40, processes=5, info_rate=0.3)
        prepared, _ = model.prepare_all(build_history(events).operations)
        search = _Search(model, prepared, None, BudgetClock(UNBOUNDED), {})
        run = search.frame_search(time.monotonic())
        with pytest.raises(StopIteration):
            while True:
                next(run)
    assert compared.resumed > 0


def test_read_ok_operations_keep_no_dict_of_their_own(tmp_path: Path) -> None:
    """An ok operation read from a file holds its fields in the object (as the
    constructor's do), not in a dict of its own as `assembled` makes: the reader's
    operations cost at least 200 bytes less each than the same built with a dict."""
    path = tmp_path / "history.jsonl"
    write_history(simulate_etcd(3, ops=400, processes=5, info_rate=0.0), path)
    history = read_history(path)
    assert {op.type for op in history.operations} == {"ok"}
    pairs = [(op.call, op.ret) for op in history.operations]
    events = list(history.events)
    count = len(pairs)
    assert count == 400

    def traced(build: Callable[[], Any]) -> int:
        tracemalloc.start()
        try:
            made = build()
            size = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert made
        return int(size)

    fields = [dict(vars(op)) for op in history.operations]
    as_read = traced(lambda: _history_from_pairs(events, list(pairs), {}, [], "m").operations)
    with_dicts = traced(lambda: [assembled(Operation, dict(f)) for f in fields])
    assert as_read <= with_dicts - 200 * count, (as_read / count, with_dicts / count)
    again = _history_from_pairs(events, list(pairs), {}, [], "m").operations
    assert [vars(op) for op in again] == fields


@pytest.mark.parametrize("watch", [False, True])
def test_the_cursor_at_any_frame_gives_the_generators_candidates(watch: bool) -> None:
    """Frames the search may never reach, to cover every phase: for each revision, each
    boundary and a few random sets of placed operations, the whole enumeration from a
    fresh cursor equals the reference's."""
    rng = random.Random(7)
    phases: set[int] = set()
    for seed in range(4):
        events = simulate_etcd(
            seed, ops=40, processes=6, info_rate=0.5, keys=3, leases=seed % 2 == 1, watch=watch
        )
        history = build_history(events)
        seen = observed_writes(parse_watches(history)) if watch else {}
        model = EtcdModel()
        prepared, _ = model.prepare_all(history.operations)
        prepared.extend(model.synthetic_ops(prepared, len(history.operations)))
        search = _Search(model, prepared, None, BudgetClock(UNBOUNDED), seen)
        # Lists these histories leave empty, filled (both enumerations read them): ok
        # operations without a revision hint, info writes that may have written anything.
        search.free_ok = [i for i in search.by_call if search.is_ok[i]][::3]
        search.info_wildcards = list(search.info_gap)
        top = max(search.pre_index, default=0) + 2
        for _ in range(4):
            chosen = [i for i in range(len(prepared)) if rng.random() < 0.3]
            for i in chosen:
                search._place(i)
            for revision in range(top):
                for ret_ptr in range(len(search.ok_by_ret) + 1):
                    frame = _Frame(model.init(), 0, -1, ret_ptr, 0, revision)
                    expected = list(_reference_candidates(search, frame))
                    given = []
                    while (i := search._next_candidate(frame)) >= 0:
                        given.append(i)
                        phases.add(frame.phase)
                    search.bump_only.clear()
                    assert given == expected, (revision, ret_ptr, given, expected)
            for i in chosen:
                search._unplace(i)
    assert phases >= {2, 3, 4, 6, 7} | ({1, 5} if watch else set()), phases

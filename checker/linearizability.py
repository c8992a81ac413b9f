"""Linearizability: Wing & Gong's search with Lowe's memoisation, partitions, revision cuts.

Contract:
- `check_linearizable(model, operations, budget)` decides whether the ok and info
  operations of a history (fail operations take no effect and are dropped) can be put
  in one sequential order that respects real time (an operation that returned before
  another was invoked comes first) and in which the model gives every ok operation its
  recorded response. info operations may take effect at any point after their invoke,
  or never; every ok operation must be placed.
- The search is depth-first: an operation is a candidate when it was invoked before the
  earliest return among the ok operations not yet placed. Configurations (set of placed
  operations, model state) already seen are not explored again (Lowe). The set is kept
  as a 128-bit Zobrist hash from a seeded random.Random (collision odds about n²/2¹²⁸).
- Placing an info operation that leaves the state unchanged is skipped: that
  configuration is dominated by not placing it.
- P-compositionality: when the model splits the history into independent partitions
  (per key), each is searched alone; the verdicts merge (false > unknown > true). The
  searches take turns of SLICE_STEPS steps, the cheapest-looking first (fewest info
  operations), so one hard partition cannot hold back another that is refutable: the
  first partition refuted decides the history, and those still running end unknown
  saying so (tests/checker/test_checker_interleaving.py). Each partition's time is
  the sum of its own turns.
- Before a partition's search, the model may name ok operations no reachable state
  answers so (`CheckModel.impossible`: a read of a value no write invoked before it
  returned can leave); the first of them refutes the partition at once, with no
  linearizable prefix to show (register and kv: swept for only when the partition's
  first turn does not linearize it, and when that turn refutes it only for the report,
  when it is read; sound cuts, so the verdicts and reports are the same). Reads the
  model shows were surely overwritten
  (`CheckModel.overwritten`: every write that could leave the value was followed by an
  ok write that returned before the read was invoked) refute it too, but only after the
  search's first turn, which may decide it with a full report.
- Models without revision hints (register, kv) are searched by checker/entry_search.py
  (call and return entries in a linked list, porcupine's loop), whose memo also prunes a
  configuration whose placed info operations include those of a configuration already
  searched with the same ok operations and state (it can do nothing more: info
  operations bound nobody and may stay unplaced); tests/checker/
  test_checker_entry_search.py compares its verdicts with the generic loop's. When
  the C extension is built, checker/compiled_search.py runs that loop compiled, with
  the same results (ETCDSPEC_CHECKER_CORE=pure: the Python loop).
- Revision cuts (models with revision hints, i.e. etcd): an ok operation is a candidate
  only when the state's revision is one its response allows; revisions only grow, so
  a step that passes the last revision an unplaced ok operation allows is cut at once;
  info writes are tried only where no ok operation claims the next revision (only
  those matching a write a response observed there, when one did; newest invoke first
  otherwise), and the model may rule out an info write from what responses show
  (`info_possible`, `info_state_possible`). An operation (a synthetic lease expiry
  too) that takes a revision where writes were observed must have written them
  (`writes_match`), so the revision each expiry takes follows what watches saw; an
  info write that alone can explain a write observed at revision r is tried only at r
  (`pinned_revisions`). A lazy operation (a lease expiry, tagged with its lease) is
  tried right before an ok operation that names its tag, or where the revision must
  advance; there only if it advances it (an expiry with no keys changes nothing an
  operation not naming the lease sees, so it is delayed, never lost: tests/checker/
  test_checker_lease_cuts.py). Every cut is sound: it drops only branches
  that could never place every ok operation (tests/checker/test_checker_differential.py
  compares with the plain search). A history whose responses carry revisions is then
  checked in near-linear time; many info writes nobody observed still cost backtracking.
- Budgets (checker/budget.py): `Budget.timeout_s` and `Budget.max_memory_mb` (resident
  memory, read from /proc when available). Running out gives Verdict.UNKNOWN with what
  was decided so far (partitions finished, the longest prefix reached) — never a pass.
- The verdict first, the report when read: a register or kv partition its search
  refutes gets a `Refutation` (checker/linearizability_result.py) that works out its
  failure and steps (and the `impossible` sweep above, which there can only give a
  simpler report) when either is first read, and keeps only that partition's search;
  a sweep that can still decide a verdict runs at once. A fused partition refuted in
  its first compiled turn decides the history with no `_Search` and no turns loop
  (tests/checker/test_checker_lazy_report.py).
- The result (checker/linearizability_result.py) gives, on a violation: the longest
  linearizable prefix (the placed operations, in order), the operation that could not
  be placed with the model's reason, the window of concurrent operations around it,
  and the model state at that point.
"""

from __future__ import annotations

import bisect
import random
import time
from collections.abc import Generator, Hashable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

from etcdspec.checker.budget import UNBOUNDED, Budget, BudgetClock, OutOfBudget
from etcdspec.checker.compiled_search import (
    FusedPartition,
    FusedTurns,
    compiled_check_fused,
    compiled_entry_search,
    compiled_fused_search,
    compiled_infos,
    compiled_op_ids,
    fused_outcome,
    fused_progress,
    fused_refuted,
)
from etcdspec.checker.entry_search import EntryProgress, entry_search
from etcdspec.checker.gc_pause import paused_gc
from etcdspec.checker.history import Operation
from etcdspec.checker.linearizability_result import (
    Failure,
    LinearizabilityResult,
    PartitionResult,
    Refutation,
)
from etcdspec.checker.models import CheckModel, PreparedOp
from etcdspec.verdict import Verdict

_CHECK_EVERY = 512
SLICE_STEPS = 2048  # a partition's turn, in search steps (see _take_turns)


def check_linearizable(
    model: CheckModel,
    operations: Sequence[Operation],
    budget: Budget = UNBOUNDED,
    observed: Mapping[int, set[Hashable]] | None = None,
    *,
    allow_empty: bool = False,
) -> LinearizabilityResult:
    """Decide whether `operations` (one history's) are linearizable for `model`.

    Nothing to check (no operation, or every one dropped as failed or unobservable) is
    unknown, not a pass, unless `allow_empty`.

    `observed` adds writes seen outside the operations (per revision, signatures such as
    ("put", key, value) — e.g. from watch events) to those the responses show: an info
    write then fills a revision only if it matches what was seen there, so the
    linearization found is the one the watches saw, not another that reads alike; and
    it goes on past the last ok operation until it has every revision seen."""
    # The search allocates many long-lived, acyclic objects (states, memo entries); the
    # cyclic collector would rescan them over and over, so it is paused meanwhile.
    with paused_gc():
        return _check(model, operations, budget, observed or {}, allow_empty)


def _nothing_to_check(total: int) -> str:
    if total == 0:
        return "the history has no operation: nothing was checked"
    return (
        f"all {total} operation(s) were dropped (failed, or unobservable by the model): "
        "nothing was checked"
    )


def _check(
    model: CheckModel,
    operations: Sequence[Operation],
    budget: Budget,
    observed: Mapping[int, set[Hashable]],
    allow_empty: bool,
) -> LinearizabilityResult:
    clock = BudgetClock(budget)
    # Register and kv: one C call from the operations to the partitions' first turns
    # (compiled_search.py).
    fused = compiled_check_fused(model, operations, clock, SLICE_STEPS, _CHECK_EVERY)
    if fused is not None:
        return _check_fused(model, operations, clock, observed, allow_empty, *fused)
    prepared, dropped = model.prepare_all(operations)
    synthetic: list[PreparedOp] = []
    if type(model).synthetic_ops is not CheckModel.synthetic_ops:  # only when asked
        next_id = max((op.id for op in operations), default=-1) + 1
        synthetic = model.synthetic_ops(prepared, next_id)
        prepared.extend(synthetic)
    count = len(prepared)
    if not count and not allow_empty:
        return _empty(model, operations, clock, dropped)
    parts = model.partitions(prepared)
    groups: list[tuple[str | None, list[PreparedOp]]] = (
        [(None, prepared)] if parts is None else [(k, parts[k]) for k in sorted(parts)]
    )
    searches = [_Search(model, items, name, clock, observed) for name, items in groups]
    order = (
        sorted(range(len(searches)), key=lambda i: _difficulty(searches[i]))
        if len(searches) > 1
        else list(range(len(searches)))
    )
    pending = [(i, searches[i]) for i in order]
    results: dict[int, PartitionResult] = {}
    spent = [0.0] * len(searches)
    searches = []  # _take_turns holds them, and drops each when it is finished
    reason = _take_turns(pending, results, spent)
    listed = [results[i] for i in range(len(results))]
    synthetic_ops = tuple(p.op for p in synthetic)
    return _result(model, count, listed, reason, clock, dropped, synthetic_ops)


def _empty(
    model: CheckModel, operations: Sequence[Operation], clock: BudgetClock, dropped: int
) -> LinearizabilityResult:
    """Nothing to check: unknown, saying why."""
    return LinearizabilityResult(
        verdict=Verdict.UNKNOWN,
        model=model.name,
        operations=0,
        partitions=(),
        seconds=time.monotonic() - clock.start,
        reason=_nothing_to_check(len(operations)),
        dropped=dropped,
        notes=tuple(getattr(model, "notes", ())),
    )


def _result(
    model: CheckModel,
    count: int,
    results: list[PartitionResult],
    reason: str,
    clock: BudgetClock,
    dropped: int,
    synthetic: tuple[Operation, ...] = (),
) -> LinearizabilityResult:
    """The history's result from its partitions' (merged: false > unknown > true)."""
    verdict = Verdict.merge_all([r.verdict for r in results])
    if verdict is Verdict.UNKNOWN:
        decided = sum(1 for r in results if r.verdict is not Verdict.UNKNOWN)
        reason = f"{reason}; decided {decided} of {len(results)} partition(s) before that"
    return LinearizabilityResult(
        verdict=verdict,
        model=model.name,
        operations=count,
        partitions=tuple(results),
        seconds=time.monotonic() - clock.start,
        reason=reason if verdict is Verdict.UNKNOWN else "",
        dropped=dropped,
        notes=tuple(getattr(model, "notes", ())),
        synthetic=synthetic,
    )


def _check_fused(
    model: CheckModel,
    operations: Sequence[Operation],
    clock: BudgetClock,
    observed: Mapping[int, set[Hashable]],
    allow_empty: bool,
    dropped: int,
    count: int,
    turns: tuple[PartitionResult, ...] | FusedTurns,
) -> LinearizabilityResult:
    """`_check` of the partitions the fused pass built, after their first turns (run in
    the C call, in the turns' order, while each linearizes: most do). A history all of
    whose partitions they linearized comes with its results, and costs no `_Search`
    and no Python per partition. Otherwise the first partition not linearized, and all
    after it, go on taking turns as `_check`'s searches do, from where the C call left
    them."""
    if not count and not allow_empty:
        return _empty(model, operations, clock, dropped)
    if not isinstance(turns, FusedTurns):  # every partition linearized in its first turn
        return LinearizabilityResult(
            Verdict.TRUE, model.name, count, turns, time.monotonic() - clock.start, "",
            dropped, tuple(getattr(model, "notes", ())),
        )  # fmt: skip
    named, order, done = turns.named, turns.order, turns.done
    parts = [named[i][1] for i in order]
    true = Verdict.TRUE
    results = {
        i: PartitionResult(named[i][0], true, len(part.ops), ids, state, None, "", steps, took)
        for i, part, (ids, state, steps, took) in zip(order, parts, done, strict=False)
    }
    first = len(done)
    name, part = named[order[first]]
    if fused_refuted(part):  # refuted in its first turn: that decides the history
        results[order[first]] = PartitionResult.refuted(
            name,
            len(part.ops),
            _fused_refutation(model, name, part, clock, observed),
            turns.seconds,
        )
        why = _decided_by(name)
        for j in order[first + 1 :]:
            unsearched = len(named[j][1].ops)
            results[j] = PartitionResult(named[j][0], Verdict.UNKNOWN, unsearched, (), None, None, why, 0, 0.0)  # fmt: skip
        listed = [results[i] for i in range(len(order))]
        return LinearizabilityResult(
            Verdict.FALSE, model.name, count, tuple(listed), time.monotonic() - clock.start,
            "", dropped, tuple(getattr(model, "notes", ())),
        )  # fmt: skip
    rest = [(i, _Search(model, None, named[i][0], clock, observed, named[i][1])) for i in order[first:]]  # fmt: skip
    spent = [0.0] * len(order)
    spent[order[first]] = turns.seconds
    fused_progress(parts[first], rest[0][1].progress)
    reason = _take_turns(rest, results, spent)
    return _result(model, count, [results[i] for i in range(len(order))], reason, clock, dropped)


def _fused_refutation(
    model: CheckModel,
    name: str | None,
    part: FusedPartition,
    clock: BudgetClock,
    observed: Mapping[int, set[Hashable]],
) -> Refutation:
    """The report of a fused partition whose compiled search refuted it in its first turn,
    worked out when read, as the turns loop would have made it (`_Search.search`): its
    items, the deepest configuration and the `impossible` sweep. It keeps this
    partition's operations and search only."""
    return Refutation(lambda: _Search(model, None, name, clock, observed, part).explain_fused())


def _decided_by(partition: str | None) -> str:
    """Why the partitions still running when `partition` was refuted end unknown."""
    return f"not searched to the end: partition {partition} is refuted, which decides the history"


def _difficulty(search: _Search) -> tuple[int, int]:
    """What a partition's search is expected to cost, for the order of the first turns:
    info operations fork the search, so fewer of them (then fewer operations) first."""
    infos = compiled_infos(search.items)
    if infos is None:
        infos = len(search.is_ok) - sum(search.is_ok)
    return (infos, search.size)


def _take_turns(
    pending: list[tuple[int, _Search]], results: dict[int, PartitionResult], spent: list[float]
) -> str:
    """Run the searches of `pending` (index, search), in that order, to their results
    (into `results` by index) and return, when the budget ran out, why. `spent`: the
    seconds of each partition's own turns so far (by index; added to).

    The searches take turns of SLICE_STEPS steps (round-robin, the cheapest-looking
    first), so no partition whose search is hard holds the others back: a partition
    that can be refuted is refuted after about (partitions x its own steps) steps
    whatever comes before it, and that refutation decides the history (the searches
    still running end unknown, saying so). Running out of budget ends them all."""
    # A finished search is dropped at once: its memo is the bulk of its memory.
    running = {i: (search, search.search()) for i, search in pending}
    pending.clear()
    reason = ""
    while running:
        for i, (_, turns) in list(running.items()):
            started = time.monotonic()
            try:
                next(turns)
                spent[i] += time.monotonic() - started
                continue
            except StopIteration as done:
                spent[i] += time.monotonic() - started
                result: PartitionResult = done.value
            results[i] = result.with_seconds(spent[i])
            del running[i]
            if result.verdict is Verdict.TRUE:
                continue
            if result.verdict is Verdict.FALSE:
                why = _decided_by(result.partition)
            else:
                reason = why = result.reason
            for j, (other, rest) in running.items():
                rest.close()
                results[j] = other.unfinished(why, spent[j])
            running.clear()
            break
    return reason


# Where a frame's enumeration of candidates stands (`_Frame.phase`), in the order
# `_next_candidate` tries them.
_BY_CALL = 0  # no revision hints: every unplaced op invoked before the boundary
_AT_REVISION = 1  # ok ops that may run at the state's revision
_FREE_OK = 2  # ok ops with no revision hint
_INFO_ANY = 3  # info ops that need not take a revision (and lazy ones)
_GAP_MATCHES = 4  # info writes matching what was observed at the next revision
_GAP_WILDCARDS = 5  # info writes that may have written anything (observed revision)
_GAP_BEFORE = 6  # other info writes invoked before the likely time, newest first
_GAP_AFTER = 7  # the rest of them, oldest first
_EXHAUSTED = 8

_NO_REJECTS: tuple[int, ...] = ()


class _Frame:
    """One placed operation on the search's stack: the configuration it reaches and
    where the enumeration of its successors stands (a resumable cursor, not a suspended
    generator: the 100k-operation history keeps ~100k frames live)."""

    __slots__ = (
        "call_ptr",
        "item",
        "pending",
        "phase",
        "pos",
        "rejected",
        "ret_ptr",
        "revision",
        "state",
        "tags",
        "zobrist",
    )

    def __init__(
        self,
        state: Any,
        zobrist: int,
        item: int,
        ret_ptr: int,
        call_ptr: int,
        revision: int | None,
    ) -> None:
        self.state = state
        self.zobrist = zobrist
        self.item = item  # local index placed to reach this frame (-1 at the root)
        self.ret_ptr = ret_ptr  # first unplaced ok op in return order
        self.call_ptr = call_ptr  # first unplaced op in call order (no revision hints)
        self.revision = revision  # the state's revision (None: no revision hints)
        # ok candidates the model rejected here, in the order tried (a list once any)
        self.rejected: Sequence[int] = _NO_REJECTS
        self.phase = _BY_CALL if revision is None else _AT_REVISION
        self.pos = call_ptr if revision is None else 0  # the position within the phase
        self.tags: set[Hashable] | None = None  # what the ok candidates so far name
        # the states of a candidate not yet returned: (index, states, next, bump_only)
        self.pending: tuple[int, Sequence[Any], int, bool] | None = None


class _Search:
    """One partition's depth-first search (see the module docstring)."""

    def __init__(
        self,
        model: CheckModel,
        items: list[PreparedOp] | None,
        name: str | None,
        clock: BudgetClock,
        seen_elsewhere: Mapping[int, set[Hashable]],
        fused: FusedPartition | None = None,
    ) -> None:
        """`items`, or None with `fused` (the fused pass's partition: its items are
        built when first used)."""
        self.model = model
        self.fused = fused
        if items is not None:
            self.items = items
        self.size = len(items) if items is not None else len(fused.ops) if fused else 0
        self.name = name
        self.clock = clock
        self.seen_elsewhere = seen_elsewhere
        self.placed = bytearray(self.size)
        self.memo: set[tuple[int, Hashable]] = set()
        # entry_search's memo: (ok operations' hash, state) -> info sets placed there
        self.entry_memo: dict[tuple[int, Hashable], list[int]] = {}
        self.bump_only: set[int] = set()  # lazy candidates yielded only to fill a revision
        self.steps = 0
        self.progress = EntryProgress()  # entry_search's count of steps
        self.deepest: Refutation | None = None  # a refuted entry search's report, unread
        init = model.init()
        self.hinted = model.revision(init) is not None
        if self.hinted:
            self._index_revisions()

    # The search's tables, built when first used (the compiled core needs none of them
    # unless it has a failure to describe).
    @cached_property
    def items(self) -> list[PreparedOp]:
        """A fused partition's items (`prepare_all` of its operations: the same items)."""
        assert self.fused is not None
        return self.model.prepare_all(self.fused.ops)[0]

    @cached_property
    def is_ok(self) -> list[bool]:
        return [p.op.type == "ok" for p in self.items]

    @cached_property
    def zob(self) -> list[int]:
        rng = random.Random(self.clock.budget.seed)
        return [rng.getrandbits(128) for _ in self.items]

    @cached_property
    def call(self) -> list[int]:
        return [p.op.call for p in self.items]

    @cached_property
    def ok_by_ret(self) -> list[int]:
        rets: list[Any] = [p.op.ret for p in self.items]
        returned = [i for i, ret in enumerate(rets) if ret is not None]
        # By position, then index (a stable sort; rets come nearly in order, which
        # timsort takes in runs).
        returned.sort(key=rets.__getitem__)
        return returned

    @cached_property
    def by_call(self) -> list[int]:
        return sorted(range(len(self.items)), key=self.call.__getitem__)

    # -- revision hints -------------------------------------------------------------
    def _index_revisions(self) -> None:
        self.pre_index: dict[int, list[int]] = {}
        self.pending_max: dict[int, int] = {}
        self.max_pre: list[int | None] = [None] * len(self.items)
        self.free_ok: list[int] = []
        self.surely_bumps: list[bool] = [False] * len(self.items)
        self.info_gap: list[int] = []
        self.info_any: list[int] = []
        pre_index, pending_max, items, is_ok = (
            self.pre_index,
            self.pending_max,
            self.items,
            self.is_ok,
        )
        # The earliest return among the ok operations that ran at each revision.
        self.gap_time: dict[int, int] = {}
        gap_time = self.gap_time
        for i in self.by_call:
            prepared = items[i]
            if is_ok[i]:
                revisions = prepared.pre_revisions
                if revisions:
                    if len(revisions) > 1:
                        revisions = tuple(sorted(set(revisions)))
                    for rev in revisions:
                        listed = pre_index.get(rev)
                        if listed is None:
                            pre_index[rev] = [i]
                        else:
                            listed.append(i)
                    top = revisions[-1]
                    self.surely_bumps[i] = prepared.bumps_to is not None
                    self.max_pre[i] = top
                    pending_max[top] = pending_max.get(top, 0) + 1
                    ret = prepared.op.ret
                    if ret is not None:
                        for rev in revisions:
                            known = gap_time.get(rev)
                            if known is None or ret < known:
                                gap_time[rev] = ret
                else:
                    self.free_ok.append(i)
            elif prepared.bumps_or_noop:
                self.info_gap.append(i)
            else:
                self.info_any.append(i)
        self.info_gap_calls = [self.call[i] for i in self.info_gap]
        observed = self.model.observed_writes(self.items)
        for rev, signatures in self.seen_elsewhere.items():
            observed.setdefault(rev, set()).update(signatures)
        self.last_seen = max(self.seen_elsewhere, default=0)
        by_signature: dict[Hashable, list[int]] = {}
        for i in self.info_gap:
            for signature in self.items[i].signatures:
                by_signature.setdefault(signature, []).append(i)
        self.observed = observed
        self.observed_revisions = set(observed)
        self.pinned: list[int | None] = [None] * len(self.items)
        for i, revision in self.model.pinned_revisions(self.items, observed).items():
            self.pinned[i] = revision
        self.info_wildcards = [i for i in self.info_gap if self.items[i].wildcard]
        self.by_signature = by_signature
        # Revision -> the info writes matching what was observed there, in call order;
        # filled on first use (only revisions no ok operation takes ever need it).
        self.gap_first: dict[int, list[int]] = {}
        self.gap_tried: dict[int, frozenset[int]] = {}

    def _gap_matches(self, revision: int) -> list[int]:
        """The info writes with a signature observed at `revision`, in call order."""
        found = self.gap_first.get(revision)
        if found is None:
            by_signature = self.by_signature
            matches = {i for s in self.observed.get(revision, ()) for i in by_signature.get(s, ())}
            found = sorted(matches)  # ties in call order stay in index order
            found.sort(key=self.call.__getitem__)
            self.gap_first[revision] = found
        return found

    def _place(self, i: int) -> None:
        self.placed[i] = 1
        if self.hinted and self.max_pre[i] is not None:
            top = self.max_pre[i]
            assert top is not None
            self.pending_max[top] -= 1

    def _unplace(self, i: int) -> None:
        self.placed[i] = 0
        if self.hinted and self.max_pre[i] is not None:
            top = self.max_pre[i]
            assert top is not None
            self.pending_max[top] += 1

    def _revision_allows(self, before: int, after: int, own: int | None) -> bool:
        """No unplaced ok operation needs a revision in [before, after), besides the one
        being placed, whose last allowed revision is `own` (None: no revision hint)."""
        pending = self.pending_max
        if after == before + 1:  # the common case: one write, one revision
            return pending.get(before, 0) == (1 if own == before else 0)
        return all(pending.get(rev, 0) == (1 if own == rev else 0) for rev in range(before, after))

    # -- candidates -----------------------------------------------------------------
    def _boundary(self, ret_ptr: int) -> int:
        return self.boundaries[ret_ptr]

    @cached_property
    def boundaries(self) -> list[int]:
        """The return of the ok operation at each position of `ok_by_ret`, and after the
        last one a time after every call (every operation is a candidate then)."""
        items = self.items
        found: list[int] = [items[i].op.ret or 0 for i in self.ok_by_ret]
        found.append(1 << 62)
        return found

    def _candidate_indices(self, frame: _Frame) -> Iterator[int]:
        """The operations to try next at `frame`, in the order the search tries them."""
        while (i := self._next_candidate(frame)) >= 0:
            yield i

    def _next_candidate(self, frame: _Frame) -> int:
        """The next operation to try at `frame` (-1: none left), resuming where the last
        call left off. Between two calls the search explores the child and unplaces it
        again, so `placed` and `pending_max` are as they were; what is recomputed on each
        call (the boundary, what is pending at this revision) is therefore the same."""
        phase = frame.phase
        if phase == _EXHAUSTED:
            return -1
        boundary = self.boundaries[frame.ret_ptr]
        placed, call = self.placed, self.call
        k = frame.pos
        if phase == _BY_CALL:
            by_call = self.by_call
            while k < len(by_call):
                i = by_call[k]
                k += 1
                if call[i] >= boundary:
                    break
                if not placed[i]:
                    frame.pos = k
                    return i
            frame.phase = _EXHAUSTED
            return -1
        revision = frame.revision
        assert revision is not None
        # An ok write that surely advances the revision strands every other unplaced
        # ok operation that needs this revision: try it only when none is left.
        others = self.pending_max.get(revision, 0)
        items = self.items
        if phase == _AT_REVISION:
            listed = self.pre_index.get(revision, ())
            surely_bumps, max_pre = self.surely_bumps, self.max_pre
            while k < len(listed):
                i = listed[k]
                k += 1
                if call[i] >= boundary:
                    break
                if placed[i]:
                    continue
                named = items[i].tags
                if named:
                    frame.tags = set(named) if frame.tags is None else frame.tags | named
                if surely_bumps[i] and others > (1 if max_pre[i] == revision else 0):
                    continue
                frame.pos = k
                return i
            phase, k = _FREE_OK, 0
        if phase == _FREE_OK:
            free_ok = self.free_ok
            while k < len(free_ok):
                i = free_ok[k]
                k += 1
                if call[i] >= boundary:
                    break
                if not placed[i]:
                    named = items[i].tags
                    if named:
                        frame.tags = set(named) if frame.tags is None else frame.tags | named
                    frame.phase, frame.pos = phase, k
                    return i
            phase, k = _INFO_ANY, 0
        gap = others == 0
        if phase == _INFO_ANY:
            info_any, tags = self.info_any, frame.tags
            while k < len(info_any):
                i = info_any[k]
                k += 1
                if call[i] >= boundary:
                    break
                if placed[i]:
                    continue
                lazy = items[i].lazy_tag
                if lazy is None or (tags is not None and lazy in tags):
                    frame.phase, frame.pos = phase, k
                    return i
                if gap:
                    # Tried only to fill the missing revision: a lazy op that leaves the
                    # revision where it is (a lease expiry with no keys attached) changes
                    # nothing an operation not naming its tag can see, so it is delayed
                    # to right before one that names it (or never placed).
                    self.bump_only.add(i)
                    frame.phase, frame.pos = phase, k
                    return i
            if not gap:
                frame.phase = _EXHAUSTED
                return -1
            phase, k = _GAP_MATCHES, 0
        after = revision + 1
        pinned = self.pinned
        if phase == _GAP_MATCHES:
            first = self._gap_matches(after)
            while k < len(first):
                i = first[k]
                k += 1
                if call[i] < boundary and not placed[i] and pinned[i] in (None, after):
                    frame.phase, frame.pos = phase, k
                    return i
            if after in self.observed_revisions:
                phase, k = _GAP_WILDCARDS, 0
            else:
                # The info write that took revision+1 was most likely invoked shortly
                # before the first operation that ran at revision+1 returned: newest
                # first from there.
                phase, k = _GAP_BEFORE, self._gap_split(after, boundary) - 1
        if phase == _GAP_WILDCARDS:
            # A response saw what was written there: only a match can fit.
            wildcards = self.info_wildcards
            while k < len(wildcards):
                i = wildcards[k]
                k += 1
                if call[i] < boundary and not placed[i] and pinned[i] in (None, after):
                    frame.phase, frame.pos = phase, k
                    return i
            frame.phase = _EXHAUSTED
            return -1
        info_gap, possible = self.info_gap, self.model.info_possible
        if phase == _GAP_BEFORE:
            tried = self._gap_tried(after)
            while k >= 0:
                i = info_gap[k]
                k -= 1
                if (
                    not placed[i]
                    and pinned[i] is None
                    and i not in tried
                    and possible(items[i], after)
                ):
                    frame.phase, frame.pos = phase, k
                    return i
            phase, k = _GAP_AFTER, self._gap_split(after, boundary)
        tried = self._gap_tried(after)
        while k < len(info_gap):
            i = info_gap[k]
            k += 1
            if call[i] >= boundary:
                break
            if not placed[i] and pinned[i] is None and i not in tried and possible(items[i], after):
                frame.phase, frame.pos = phase, k
                return i
        frame.phase = _EXHAUSTED
        return -1

    def _gap_split(self, after: int, boundary: int) -> int:
        """Where the info writes invoked before the likely time of the write that took
        revision `after` end (in call order)."""
        limit = min(boundary, self.gap_time.get(after, boundary))
        return bisect.bisect_left(self.info_gap_calls, limit)

    def _gap_tried(self, after: int) -> frozenset[int]:
        """`_gap_matches(after)` as a set (tried first, so skipped after)."""
        found = self.gap_tried.get(after)
        if found is None:
            found = self.gap_tried[after] = frozenset(self._gap_matches(after))
        return found

    def _next_child(self, frame: _Frame) -> tuple[int, Any, int | None] | None:
        """The next configuration to explore from `frame` (the operation placed and the
        state it leaves), or None when none is left: candidates in `_next_candidate`'s
        order, each counted as a step, each of its states kept unless a cut drops it or
        the configuration was seen before (Lowe's memo); with the state's revision."""
        model, items, memo = self.model, self.items, self.memo
        hinted = self.hinted
        observed_revisions = self.observed_revisions if hinted else set()
        pending_max = self.pending_max if hinted else {}
        state_before = frame.state
        before = frame.revision
        pending = frame.pending
        while True:
            if pending is not None:
                i, states, start, bump_only = pending
                frame.pending = pending = None
            else:
                i = self._next_candidate(frame)
                if i < 0:
                    return None
                self.steps += 1
                if self.steps % _CHECK_EVERY == 0:
                    self.clock.check()
                bump_only = False
                bump_set = self.bump_only
                if bump_set and i in bump_set:
                    bump_only = True
                    bump_set.discard(i)
                states = model.step(state_before, items[i])
                start = 0
                if not states and self.is_ok[i]:
                    if frame.rejected:
                        frame.rejected.append(i)  # type: ignore[attr-defined]
                    else:
                        frame.rejected = [i]
            ok = self.is_ok[i]
            prepared = items[i]
            for k in range(start, len(states)):
                state = states[k]
                if not ok and (
                    state == state_before or not model.info_state_possible(prepared, state)
                ):
                    continue
                after = None
                if before is not None:
                    after = model.revision(state)
                    assert after is not None
                    if bump_only and after == before:
                        continue
                    if after > before:
                        if after == before + 1:  # `_revision_allows`' common case, inline
                            own = self.max_pre[i]
                            if pending_max.get(before, 0) != (1 if own == before else 0):
                                continue
                        elif not self._revision_allows(before, after, self.max_pre[i]):
                            continue
                        # What was seen written at the revision this op takes must be
                        # what it wrote (one revision is one write).
                        if after in observed_revisions and not model.writes_match(
                            state, self.observed[after]
                        ):
                            continue
                key = (frame.zobrist ^ self.zob[i], state)
                seen = len(memo)
                memo.add(key)  # one hash of the state (`in`, then `add`, hashed it twice)
                if len(memo) == seen:  # the configuration was there already
                    continue
                if k + 1 < len(states):
                    frame.pending = (i, states, k + 1, bump_only)
                return i, state, after

    def _reaches_observed(self, frame: _Frame) -> bool:
        """Whether the state has every revision seen elsewhere (e.g. a watch event after
        the last ok operation): info operations, expiries too, must explain those."""
        if not self.hinted or not self.seen_elsewhere:
            return True
        revision = self.model.revision(frame.state)
        assert revision is not None
        return revision >= self.last_seen

    def _advance_call(self, call_ptr: int) -> int:
        while call_ptr < len(self.by_call) and self.placed[self.by_call[call_ptr]]:
            call_ptr += 1
        return call_ptr

    def _advance_ret(self, ret_ptr: int) -> int:
        while ret_ptr < len(self.ok_by_ret) and self.placed[self.ok_by_ret[ret_ptr]]:
            ret_ptr += 1
        return ret_ptr

    # -- the search -----------------------------------------------------------------
    def unfinished(self, reason: str, seconds: float) -> PartitionResult:
        """The result of a search stopped before it was decided."""
        self.steps = max(self.steps, self.progress.steps)
        return PartitionResult(
            self.name,
            Verdict.UNKNOWN,
            self.size,
            (),
            None,
            None,
            reason,
            self.steps,
            seconds,
        )

    def search(self) -> Generator[None, None, PartitionResult]:
        """The search, yielding after each SLICE_STEPS steps (a turn) and returning its
        result; the PartitionResult's seconds are wall time from the first turn.

        The cuts' verdicts are the same whenever they are computed: an `impossible` read
        refutes the partition at once (no steps, no prefix), an `overwritten` one after
        the first turn. Both are sound, so a partition linearized in its first turn has
        neither; models without revision hints (register, kv) therefore run the first
        turn before sweeping for them, and skip the sweeps when it linearizes."""
        start = time.monotonic()
        if self.hinted:
            doomed = self.model.impossible(self.items)
            if doomed:
                return self._refuted_at_once(*doomed[0], time.monotonic() - start, steps=0)
            full = self.frame_search(start)
        else:
            full = self.entry_search(start)
        try:
            next(full)
        except StopIteration as done:
            decided: PartitionResult = done.value
            if self.hinted or decided.verdict is Verdict.TRUE:
                return decided
            if decided.verdict is Verdict.FALSE and self.deepest is not None:
                # Refuted: the sweep can only give a simpler report, so it runs when the
                # report is read.
                deepest = self.deepest
                refutation = Refutation(lambda: self._impossible_or(deepest))
                return PartitionResult.refuted(self.name, self.size, refutation, decided.seconds)
            doomed = self.model.impossible(self.items)
            if doomed:
                return self._refuted_at_once(*doomed[0], time.monotonic() - start, steps=0)
            return decided
        if not self.hinted:
            doomed = self.model.impossible(self.items)
            if doomed:
                full.close()
                return self._refuted_at_once(*doomed[0], time.monotonic() - start, steps=0)
        stale = self.model.overwritten(self.items)
        if stale:
            # A read the model shows was overwritten refutes the partition; the search
            # had its first turn to do so itself, with the deepest configuration.
            full.close()
            return self._refuted_at_once(*stale[0], time.monotonic() - start)
        yield  # the end of the first turn
        return (yield from full)

    def frame_search(self, start: float) -> Generator[None, None, PartitionResult]:
        """The search over an explicit stack of frames, each resuming its own candidates
        (`_next_child`): every model (the only one for revision hints); `entry_search` is
        the faster form of it for the others."""
        next_turn = SLICE_STEPS
        init = self.model.init()
        revision = self.model.revision(init) if self.hinted else None
        root = _Frame(init, 0, -1, self._advance_ret(0), 0, revision)
        stack = [root]
        best_depth = -1
        best_pending = True  # the deepest frame has not been recorded yet
        deepest: tuple[list[int], _Frame] | None = None
        place, next_child, zob = self._place, self._next_child, self.zob
        advance_ret, advance_call, ok_count = (
            self._advance_ret,
            self._advance_call,
            len(self.ok_by_ret),
        )
        by_revision = self.hinted  # then no frame reads its position in call order
        try:
            self.clock.check()
            while stack:
                if self.steps >= next_turn:
                    next_turn = self.steps + SLICE_STEPS
                    yield
                frame = stack[-1]
                if frame.ret_ptr >= ok_count and self._reaches_observed(frame):
                    items = self.items
                    order = tuple([items[f.item].op.id for f in stack[1:]])
                    return PartitionResult(
                        self.name,
                        Verdict.TRUE,
                        len(self.items),
                        order,
                        frame.state,
                        None,
                        "",
                        self.steps,
                        time.monotonic() - start,
                    )
                child = next_child(frame)
                if child is None:
                    if best_pending and len(stack) - 1 >= best_depth:
                        deepest = ([f.item for f in stack[1:]], frame)
                        best_depth = len(stack) - 1
                        best_pending = False
                    stack.pop()
                    if frame.item >= 0:
                        self._unplace(frame.item)
                    continue
                i, state, revision = child
                place(i)
                new = _Frame(
                    state,
                    frame.zobrist ^ zob[i],
                    i,
                    advance_ret(frame.ret_ptr),
                    frame.call_ptr if by_revision else advance_call(frame.call_ptr),
                    revision,
                )
                stack.append(new)
                if len(stack) - 1 > best_depth:
                    best_pending = True
        except OutOfBudget as out:
            placed = sum(self.placed)
            return self.unfinished(
                f"{out.reason} after placing {placed} of {len(self.items)} operations "
                f"({self.steps} steps, {len(self.memo)} configurations)",
                time.monotonic() - start,
            )
        finally:
            self._leave_to_collector(stack)
        assert deepest is not None
        failure = self._failure(*deepest)
        return PartitionResult(
            self.name,
            Verdict.FALSE,
            len(self.items),
            (),
            None,
            failure,
            "",
            self.steps,
            time.monotonic() - start,
        )

    def _leave_to_collector(self, stack: list[_Frame]) -> None:
        """Leave the search's objects (its frames, memo and model states: millions at
        100k operations) to the cyclic collector instead of freeing them inline when the
        search is dropped: a self-reference makes them one cycle. `check_linearizable`
        pauses the collector, and `etcdspec check` ends after the report with the heap
        frozen, so the command does not spend ~0.2 s freeing them one by one just before
        it exits; an in-process caller gets the memory back at its next full collection.
        (The generator-per-frame search this loop replaced left them so by accident: each
        frame and its generator referred to each other.)"""
        self.left_to_collector = (self, stack)

    def entry_search(self, start: float) -> Generator[None, None, PartitionResult]:
        """The search for a model without revision hints: checker/entry_search.py's loop,
        which explores in the same order as `search`'s and is several times faster."""
        model = self.model
        overridden = type(model).info_state_possible is not CheckModel.info_state_possible
        progress = self.progress
        compiled = None
        if self.fused is not None:
            compiled = compiled_fused_search(
                model, self.fused, self.clock, progress, SLICE_STEPS, _CHECK_EVERY
            )
        elif not overridden:
            compiled = compiled_entry_search(
                model, self.items, self.clock.budget.seed, self.clock, progress,
                SLICE_STEPS, _CHECK_EVERY,
            )  # fmt: skip
        try:
            outcome = yield from compiled or entry_search(
                self.items,
                model.init(),
                [model.stepper(p) for p in self.items],
                self.is_ok,
                [p.op.ret is not None for p in self.items],
                self.zob,
                self.entry_memo,
                self.clock,
                progress,
                SLICE_STEPS,
                _CHECK_EVERY,
                model.info_state_possible if overridden else None,
            )
        except OutOfBudget as out:
            self.steps = progress.steps
            return self.unfinished(
                f"{out.reason} after placing {progress.placed} of {self.size} operations "
                f"({self.steps} steps, "
                f"{max(len(self.entry_memo), progress.configurations)} configurations)",
                time.monotonic() - start,
            )
        self.steps = progress.steps
        if outcome.linearized:
            return PartitionResult(
                self.name,
                Verdict.TRUE,
                self.size,
                compiled_op_ids(self.fused.ops if self.fused else self.items, outcome.order)
                or tuple([self.items[i].op.id for i in outcome.order]),
                outcome.state,
                None,
                "",
                self.steps,
                time.monotonic() - start,
            )
        # The report needs the deepest configuration only: not the memo (of the pure
        # loop, or the compiled search's, which may be millions of configurations).
        self.entry_memo = {}
        if self.fused is not None:
            self.fused = self.fused._replace(search=None)
        self.deepest = self._deepest(outcome.order, outcome.state)
        return PartitionResult.refuted(self.name, self.size, self.deepest, time.monotonic() - start)

    def _deepest(self, order: Sequence[int], state: Any) -> Refutation:
        """The report of a refuted entry search, from the deepest configuration it reached
        (`order` placed, leaving `state`), worked out when read; steps as searched."""
        steps = self.steps

        def explain() -> tuple[Failure, int]:
            path = list(order)
            for i in path:
                self.placed[i] = 1
            try:  # an error (a model's) leaves the search as it was, for the next read
                frame = _Frame(state, 0, -1, self._advance_ret(0), self._advance_call(0), None)
                frame.rejected = self._rejected(frame)
            finally:
                for i in path:
                    self.placed[i] = 0
            return self._failure(path, frame), steps

        return Refutation(explain)

    def _impossible_or(self, deepest: Refutation) -> tuple[Failure, int]:
        """The report of a partition its search refuted in the first turn, as when the
        `impossible` sweep runs first: its first read no reachable state gives (no
        steps, no prefix), or else the search's deepest configuration."""
        doomed = self.model.impossible(self.items)
        if doomed:
            return self._failure_at_once(*doomed[0]), 0
        return deepest.found()

    def explain_fused(self) -> tuple[Failure, int]:
        """`_impossible_or` for a fused partition whose compiled search ended refuted in
        its first turn (`_check_fused`)."""
        assert self.fused is not None
        outcome, self.steps = fused_outcome(self.model, self.fused)
        return self._impossible_or(self._deepest(outcome.order, outcome.state))

    def _rejected(self, frame: _Frame) -> list[int]:
        """The ok candidates at `frame` (placed flags set for its path) that the model
        rejects in its state, in the order the search tries them."""
        step, items, is_ok = self.model.step, self.items, self.is_ok
        return [
            i
            for i in self._candidate_indices(frame)
            if is_ok[i] and not step(frame.state, items[i])
        ]

    def _refuted_at_once(
        self, i: int, why: str, seconds: float, steps: int | None = None
    ) -> PartitionResult:
        """The partition refuted without a search (or with a search cut short): no state
        the partition can reach gives op `i`'s response. `steps`: the count to report
        (default: the steps searched)."""
        self.steps = max(self.steps, self.progress.steps) if steps is None else steps
        failure = self._failure_at_once(i, why)
        return PartitionResult(
            self.name, Verdict.FALSE, len(self.items), (), None, failure, "", self.steps, seconds
        )

    def _failure_at_once(self, i: int, why: str) -> Failure:
        """The failure of op `i`, whose response no state the partition reaches gives."""
        op = self.items[i].op
        return Failure(
            partition=self.name,
            failing_op=op.id,
            reason=why,
            window=(op.id,),
            prefix=(),
            state="any: no state the partition can reach gives this response",
            state_json=None,
            prefix_end_index=op.complete_index if op.complete_index is not None else -1,
        )

    def _short_of_observed(self, path: list[int], frame: _Frame) -> Failure:
        """Every ok operation is placed, but no info operation explains a revision seen
        elsewhere (`_reaches_observed`)."""
        revision = self.model.revision(frame.state)
        last = self.items[path[-1]].op if path else None
        return Failure(
            partition=self.name,
            failing_op=last.id if last is not None else -1,
            reason=(
                f"every ok operation is placed at revision {revision}, but no operation "
                f"explains the writes seen up to revision {self.last_seen}"
            ),
            window=(),
            prefix=tuple(self.items[i].op.id for i in path),
            state=self.model.describe_state(frame.state),
            state_json=self.model.state_json(frame.state),
            prefix_end_index=last.complete_index or last.invoke_index if last else -1,
        )

    def _failure(self, path: list[int], frame: _Frame) -> Failure:
        """The failure at the deepest configuration reached (`path` placed, `frame`)."""
        for i in path:
            self.placed[i] = 1
        try:
            return self._describe_failure(path, frame)
        finally:
            for i in path:
                self.placed[i] = 0

    def _describe_failure(self, path: list[int], frame: _Frame) -> Failure:
        if frame.ret_ptr >= len(self.ok_by_ret):
            return self._short_of_observed(path, frame)
        boundary_op = self.ok_by_ret[frame.ret_ptr]
        failing = frame.rejected[0] if frame.rejected else boundary_op
        reason = self.model.mismatch(frame.state, self.items[failing])
        if not frame.rejected and self.model.step(frame.state, self.items[failing]):
            reason = (
                f"{self.model.describe_op(self.items[failing])}: the model accepts it here, "
                "but then the remaining operations cannot all be placed"
            )
            revision = self.model.revision(frame.state) if self.hinted else None
            if revision is not None:
                stranded = [
                    self.items[i].op.id
                    for i in range(len(self.items))
                    if i != failing
                    and not self.placed[i]
                    and self.is_ok[i]
                    and self.max_pre[i] == revision
                ]
                if stranded:
                    reason += (
                        f": op(s) {', '.join(map(str, stranded[:5]))} also need revision "
                        f"{revision}, which it would leave behind"
                    )
        boundary = self._boundary(frame.ret_ptr)
        window = sorted(
            {self.items[failing].op.id}
            | {
                self.items[i].op.id
                for i in range(len(self.items))
                if not self.placed[i] and self.is_ok[i] and self.call[i] < boundary
            }
        )
        end = self.items[boundary_op].op.complete_index
        return Failure(
            partition=self.name,
            failing_op=self.items[failing].op.id,
            reason=reason,
            window=tuple(window),
            prefix=tuple(self.items[i].op.id for i in path),
            state=self.model.describe_state(frame.state),
            state_json=self.model.state_json(frame.state),
            prefix_end_index=end if end is not None else -1,
        )

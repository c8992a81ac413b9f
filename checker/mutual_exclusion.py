"""Mutual exclusion of etcd locks, judged from a recorded history's revisions.

A lock history (the conformance workload `locks`) holds `lock` and `unlock` operations
(etcd's v3lock service) and the holders' fenced writes: ok `txn`s of the form

    if create_revision(K) > 0            K: the holder's lock key, N/<lease hex>
    then put(fence/N, v), range(N/ ..)   the write, and the lock's whole queue
    else range(K)

so a fenced write that succeeded happened at its header revision W while K existed,
and its range shows every key of the lock's queue at W with its create revision.

The rule checked, for each lock N (the holder of N at a revision r is the key under
"N/" with the lowest create revision at r, as etcd's Lock grants it):
1. Queue: a fenced write of K at W finds K in the queue it read, and no key in it with
   a lower create revision: K held N at W.
2. Tenures: a holder's tenure is the revision span from its first to its last fenced
   write; no fenced write of another holder of N falls inside it (two holders at once),
   and tenures follow the holders' create revisions (the queue's order).
Only fenced writes that succeeded count: one whose guard failed (the holder's lease
expired or was revoked, so it may have lost the lock) wrote nothing, and one of unknown
outcome (info) is evidence of nothing; leaving them out can miss a violation, never
invent one.

Verdict: FALSE when a rule breaks (details name the writes and revisions); UNKNOWN
when no lock had fenced writes from two holders (nothing was judged, which is never a
pass); TRUE otherwise. Pure: reads the history only.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from etcdspec.checker.history import History, Operation, decode_bytes
from etcdspec.checker.results import CheckResult
from etcdspec.verdict import Verdict

CHECK_NAME = "MutualExclusion"
LOCK_FS = frozenset({"lock", "unlock"})
FENCE_PREFIX = "fence/"


@dataclass(frozen=True)
class FencedWrite:
    """One successful fenced write: who wrote, on which lock, at which revision, and
    the lock's queue (key, create revision) it read at that revision."""

    op: Operation
    lock: str
    holder: str
    revision: int
    queue: tuple[tuple[str, int], ...]

    def create_revision(self) -> int | None:
        return next((c for key, c in self.queue if key == self.holder), None)

    def events(self) -> tuple[int, ...]:
        done = () if self.op.complete_index is None else (self.op.complete_index,)
        return (self.op.invoke_index, *done)

    def describe(self) -> str:
        return (
            f"op {self.op.id} (p{self.op.process}) {self.holder} wrote at revision {self.revision}"
        )


def is_lock_history(history: History) -> bool:
    """Whether the history holds lock operations (the `locks` workload's)."""
    return any(op.f in LOCK_FS for op in history.operations)


def fenced_writes(history: History) -> list[FencedWrite]:
    """Every successful fenced write of the history, in history order."""
    found = []
    for op in history.operations:
        write = _fenced_write(op)
        if write is not None:
            found.append(write)
    return found


def refused_fenced_writes(history: History) -> int:
    """How many fenced writes were answered with their guard false: the holder's key was
    gone (its lease expired or was revoked), so it wrote nothing."""
    return sum(
        1
        for op in history.operations
        if _fence_of(op) is not None
        and isinstance(op.response, dict)
        and not op.response.get("succeeded")
    )


def _fence_of(op: Operation) -> str | None:
    """The fence key of an ok txn shaped as a fenced write, else None."""
    if op.f != "txn" or op.type != "ok" or not isinstance(op.request, dict):
        return None
    compare = op.request.get("compare") or []
    success = op.request.get("success") or []
    if len(compare) != 1 or len(success) != 2:
        return None
    guard = compare[0]
    put = success[0].get("request_put") if isinstance(success[0], dict) else None
    if guard.get("target") != "CREATE" or guard.get("result") != "GREATER" or put is None:
        return None
    fence = _text(put.get("key"))
    return fence if fence.startswith(FENCE_PREFIX) else None


def _fenced_write(op: Operation) -> FencedWrite | None:
    fence = _fence_of(op)
    if fence is None:
        return None
    guard = op.request["compare"][0]
    response: dict[str, Any] = op.response if isinstance(op.response, dict) else {}
    if not response.get("succeeded"):
        return None
    replies = response.get("responses") or []
    listing = replies[1].get("response_range", {}) if len(replies) == 2 else {}
    queue = tuple(
        (_text(kv.get("key")), int(kv.get("create_revision", 0))) for kv in listing.get("kvs", [])
    )
    return FencedWrite(
        op=op,
        lock=fence.removeprefix(FENCE_PREFIX),
        holder=_text(guard.get("key")),
        revision=int(response.get("header", {}).get("revision", 0)),
        queue=queue,
    )


def _text(value: Any) -> str:
    return decode_bytes(value).decode("utf-8", errors="replace") if value is not None else ""


def check_mutual_exclusion(history: History) -> CheckResult:
    """The rule of the module docstring over `history`: one CheckResult."""
    start = time.monotonic()
    writes = fenced_writes(history)
    by_lock: dict[str, list[FencedWrite]] = defaultdict(list)
    for write in writes:
        by_lock[write.lock].append(write)
    details: list[str] = []
    events: set[int] = set()
    contended = 0
    for lock in sorted(by_lock):
        lock_writes = sorted(by_lock[lock], key=lambda w: w.revision)
        if len({w.holder for w in lock_writes}) >= 2:
            contended += 1
        for write in lock_writes:
            problem = _queue_problem(write)
            if problem:
                details.append(f"{lock}: {problem}")
                events.update(write.events())
        for problem, involved in _tenure_problems(lock_writes):
            details.append(f"{lock}: {problem}")
            for write in involved:
                events.update(write.events())
    holders = len({(w.lock, w.holder) for w in writes})
    summary = f"{len(writes)} fenced writes by {holders} holders of {len(by_lock)} locks"
    refused = refused_fenced_writes(history)
    if refused:
        summary += f" ({refused} refused: the holder's key was gone)"
    if details:
        verdict = Verdict.FALSE
        summary += f"; {len(details)} violations"
    elif contended == 0:
        verdict = Verdict.UNKNOWN
        summary += "; no lock had fenced writes from two holders, so nothing was judged"
    else:
        verdict = Verdict.TRUE
    return CheckResult(
        CHECK_NAME,
        verdict,
        summary,
        time.monotonic() - start,
        tuple(details),
        tuple(sorted(events)),
    )


def _queue_problem(write: FencedWrite) -> str:
    """Rule 1 for one write ("" when it holds)."""
    mine = write.create_revision()
    if mine is None:
        return (
            f"{write.describe()}, but the queue it read at that revision does not hold "
            f"{write.holder} although its guard said it exists"
        )
    ahead = [(key, c) for key, c in write.queue if c < mine]
    if not ahead:
        return ""
    key, created = min(ahead, key=lambda kc: kc[1])
    return (
        f"{write.describe()} while {key} (create revision {created}) was ahead of it in "
        f"the queue (its own create revision {mine}): it did not hold the lock"
    )


def _tenure_problems(
    writes: list[FencedWrite],
) -> list[tuple[str, tuple[FencedWrite, ...]]]:
    """Rule 2 for one lock's writes (sorted by revision)."""
    spans: dict[str, list[FencedWrite]] = defaultdict(list)
    for write in writes:
        spans[write.holder].append(write)
    problems: list[tuple[str, tuple[FencedWrite, ...]]] = []
    ordered = sorted(spans.items(), key=lambda item: item[1][0].revision)
    for holder, own in ordered:
        first, last = own[0], own[-1]
        for other in writes:
            if other.holder != holder and first.revision < other.revision < last.revision:
                problems.append(
                    (
                        f"two holders at once: {holder} held from revision {first.revision} "
                        f"to {last.revision}, and {other.describe()}",
                        (first, other, last),
                    )
                )
    for (a_holder, a), (b_holder, b) in itertools.pairwise(ordered):
        a_created, b_created = a[0].create_revision(), b[0].create_revision()
        if a_created is not None and b_created is not None and a_created > b_created:
            problems.append(
                (
                    f"out of queue order: {a_holder} (create revision {a_created}) held "
                    f"before {b_holder} (create revision {b_created}), which was ahead of it",
                    (a[0], b[0]),
                )
            )
    return problems

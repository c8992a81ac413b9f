"""A spec's proof obligations split over this process and worker processes.

`prove_parallel(loaded, jobs, ...)` discharges the same obligations, in the same order,
with the same checks as the serial `etcdspec.spec.prove.prove` (without `fail_fast`),
but answers them in `jobs` processes: this one and `jobs - 1` workers started with the
"spawn" method (Z3 contexts cannot be pickled or shared, so each worker loads its own
copy of the spec and encodes it once, in its own Z3 context). The obligations are dealt
from one shared counter over a list sorted by an estimate of their cost (the induction
queries that no syntactic rule of etcdspec.spec.discharge settles first, larger
formulas first), so a busy or late-starting process simply takes fewer of them. Each
result keeps its own time; the report lists them in the serial order.

A worker that crashes, or that sends nothing for `stall_seconds` while it holds an
obligation, is stopped, and the obligations it held are UNKNOWN (never proved). Workers
are always stopped and joined before `prove_parallel` returns. `WorkerFault` makes a
worker fail on purpose, for the tests of that path.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from multiprocessing.process import BaseProcess
from typing import Any

from etcdspec.spec import ast
from etcdspec.spec.discharge import settle
from etcdspec.spec.hints import Hints, book
from etcdspec.spec.loader import LoadedSpec
from etcdspec.spec.proof_report import CheckKind, CheckResult, ProofReport
from etcdspec.spec.prove import (
    DEFAULT_TIMEOUT_MS,
    WALL_SLACK,
    Prover,
    hint_summary,
    select_actions,
    select_properties,
)
from etcdspec.verdict import Verdict

# Preserve (first try, two finite searches, full budget) asks at most 4 queries, each
# capped at WALL_SLACK times the timeout; a worker silent for longer is stuck.
QUERIES_PER_OBLIGATION = 4
STARTUP_SECONDS = 60.0  # a worker's own imports and spec loading, on a loaded machine


# Below this many induction queries left after the syntactic rules, starting a worker (about
# 1 s of imports and encoding on this machine) costs more than it saves: mvcc and lease
# (27 and 17) prove faster in one process, raft (116) and raft_steps (85) in two.
MIN_PARALLEL_QUERIES = 64


def default_jobs() -> int:
    """Processes a proof uses by default: both cores of a 2-core machine, at most 2."""
    return max(1, min(2, os.cpu_count() or 1))


def auto_jobs(
    loaded: LoadedSpec,
    only: Sequence[str] = (),
    actions: Sequence[str] = (),
    witnesses: bool = True,
) -> int:
    """`default_jobs()` for a proof with at least MIN_PARALLEL_QUERIES induction
    queries that no syntactic rule settles, else 1."""
    found = obligations(loaded, only, actions, witnesses)
    heavy = sum(1 for o in found if o.kind is CheckKind.PRESERVE and o.cost > 0)
    return default_jobs() if heavy >= MIN_PARALLEL_QUERIES else 1


@dataclass(frozen=True)
class Obligation:
    """One obligation: `index` is its place in the serial order."""

    index: int
    kind: CheckKind
    prop: str | None  # INIT and PRESERVE
    action: str | None  # PRESERVE and ENABLED
    witness: str | None  # WITNESS
    cost: int  # estimated cost (relative), for dealing the heavy ones first

    def describe(self) -> str:
        subject = " ".join(x for x in (self.prop, self.action, self.witness) if x)
        return f"#{self.index} {self.kind.value} {subject} (cost {self.cost})"


class WorkerFault(Enum):
    """A failure a worker injects on its first obligation (tests of the failure path)."""

    NONE = "none"
    EXIT = "exit"  # the worker process exits abruptly
    HANG = "hang"  # the worker stops answering


@dataclass(frozen=True)
class WorkerJob:
    """What a worker needs: the spec, the budgets, and which obligations to deal
    (the worker lists them itself, `dealing_order(obligations(...))`, the same list as
    its parent's, so that the parent can start it before listing them)."""

    loaded: LoadedSpec
    timeout_ms: int
    isolated: bool
    only: tuple[str, ...]
    actions: tuple[str, ...]
    witnesses: bool
    reserve: int = 0  # this worker takes the first `reserve` dealt positions itself
    fault: WorkerFault = WorkerFault.NONE
    hints: Hints | None = None  # the parent's hints (the same in every process)

    def describe(self) -> str:
        only = f", only {', '.join(self.only)}" if self.only else ""
        actions = f", actions {', '.join(self.actions)}" if self.actions else ""
        return (
            f"worker job: {self.loaded.describe()}{only}{actions}, "
            f"timeout {self.timeout_ms} ms, reserve {self.reserve}, fault {self.fault.value}"
        )


def _size(node: Any) -> int:
    """The number of AST nodes under `node` (a cost proxy)."""
    if isinstance(node, tuple):
        return sum(_size(x) for x in node)
    if not is_dataclass(node) or isinstance(node, (type, ast.Span)):
        return 0
    return 1 + sum(_size(getattr(node, f.name)) for f in fields(node) if f.name != "span")


def obligations(
    loaded: LoadedSpec,
    only: Sequence[str] = (),
    actions: Sequence[str] = (),
    witnesses: bool = True,
) -> list[Obligation]:
    """Every obligation `prove` discharges, in its serial order, with a cost estimate."""
    spec = loaded.spec
    targets = select_properties(spec, only)
    chosen = select_actions(spec, actions)
    found: list[Obligation] = []
    sizes = {prop.name: _size(prop.formula) for prop in targets}

    def add(
        kind: CheckKind, prop: str | None, action: str | None, witness: str | None, cost: int
    ) -> None:
        found.append(Obligation(len(found), kind, prop, action, witness, cost))

    if not actions:
        for prop in targets:
            add(CheckKind.INIT, prop.name, None, None, 1 + sizes[prop.name] // 4)
    for action in chosen:
        action_size = _size(action.body)
        for prop in targets:
            settled = settle(loaded.info, action, prop) is not None
            cost = 0 if settled else 10 + sizes[prop.name] + action_size // 2
            add(CheckKind.PRESERVE, prop.name, action.name, None, cost)
        add(CheckKind.ENABLED, None, action.name, None, 10 + action_size)
    if witnesses and not actions:
        for witness in spec.witnesses():
            add(CheckKind.WITNESS, None, None, witness.name, 20 + 10 * len(witness.steps))
    return found


def dealing_order(found: Sequence[Obligation]) -> list[Obligation]:
    """Heaviest first; ties in the serial order (so one action's queries stay together)."""
    return sorted(found, key=lambda o: (-o.cost, o.index))


class _Discharger:
    """Answers obligations with one Prover (one Z3 encoding of the spec per process)."""

    def __init__(
        self, loaded: LoadedSpec, timeout_ms: int, isolated: bool, hints: Hints | None
    ) -> None:
        self.prover = Prover(loaded, timeout_ms, isolated, hints)
        self.spec = loaded.spec
        self.properties = {p.name: p for p in self.spec.properties()}

    def answer(self, obligation: Obligation) -> CheckResult:
        kind = obligation.kind
        if kind is CheckKind.INIT:
            assert obligation.prop is not None
            return self.prover.check_init([self.properties[obligation.prop]])[0]
        if kind is CheckKind.WITNESS:
            witness = next(w for w in self.spec.witnesses() if w.name == obligation.witness)
            return self.prover.check_witness(witness)
        action = self.spec.action(obligation.action or "")
        assert action is not None, obligation.describe()
        if kind is CheckKind.ENABLED:
            return self.prover.check_enabled(action)
        assert obligation.prop is not None
        return self.prover.check_preserve(action, self.properties[obligation.prop])


def _claim(counter: Any, limit: int) -> int | None:
    with counter.get_lock():
        position = int(counter.value)
        if position >= limit:
            return None
        counter.value = position + 1
        return position


def _worker_main(job: WorkerJob, counter: Any, results: Any) -> None:
    """A worker process: claims obligations (its reserved ones first, then from the
    shared counter), announces each claim, then sends its result."""
    dealt = dealing_order(obligations(job.loaded, job.only, job.actions, job.witnesses))
    discharger = _Discharger(job.loaded, job.timeout_ms, job.isolated, job.hints)
    pending = list(range(min(job.reserve, len(dealt))))
    while True:
        position = pending.pop(0) if pending else _claim(counter, len(dealt))
        if position is None:
            break
        results.put(("claim", position, None))
        if job.fault is WorkerFault.EXIT:
            os._exit(70)
        if job.fault is WorkerFault.HANG:
            time.sleep(3600)
        results.put(("done", position, discharger.answer(dealt[position])))
    results.put(("finished", -1, None))
    results.close()
    results.join_thread()


def _unknown(obligation: Obligation, seconds: float, why: str) -> CheckResult:
    subject = obligation.prop or obligation.action or obligation.witness or "?"
    action = obligation.action if obligation.kind is not CheckKind.INIT else None
    if obligation.kind is CheckKind.WITNESS:
        action = None
    return CheckResult(obligation.kind, subject, action, Verdict.UNKNOWN, seconds, None, why)


def prove_parallel(
    loaded: LoadedSpec,
    jobs: int,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    only: Sequence[str] = (),
    on_result: Callable[[CheckResult], None] | None = None,
    actions: Sequence[str] = (),
    witnesses: bool = True,
    isolated: bool = False,
    stall_seconds: float | None = None,
    fault: WorkerFault = WorkerFault.NONE,
    reserve: int = 0,
    hints: Hints | None = None,
) -> ProofReport:
    """The proof of `prove`, answered by this process and `jobs - 1` spawned workers.

    `stall_seconds` (default: the longest one obligation may take, plus start-up) is how
    long a worker holding an obligation may stay silent before it is stopped; `fault`
    and `reserve` (the first `reserve` dealt obligations go to the first worker) are
    for tests of the failure path. `hints` (etcdspec.spec.hints) go to every process,
    so an obligation is asked the same way wherever it is answered. The workers are started first, before this process
    lists the obligations: their start-up (imports, reading the job) overlaps its work."""
    started = time.perf_counter()
    select_properties(loaded.spec, only)  # unknown names fail here, before any worker starts
    select_actions(loaded.spec, actions)
    stall = stall_seconds
    if stall is None:
        stall = QUERIES_PER_OBLIGATION * WALL_SLACK * timeout_ms / 1000 + STARTUP_SECONDS
    context = multiprocessing.get_context("spawn")
    counter = context.Value("i", 0)
    channel = context.Queue()
    workers: list[BaseProcess] = []
    reserve = max(reserve, 0) if jobs > 1 else 0
    with counter.get_lock():
        counter.value = reserve  # positions below it belong to the first worker
    found: list[Obligation] = []
    dealt: list[Obligation] = []
    done: dict[int, CheckResult] = {}
    held: dict[int, tuple[int, float]] = {}  # position -> (worker, claimed at)
    emitted = 0
    broken: list[str] = []  # why the channel from the workers became unreadable
    own_done = 0.0  # seconds until this process had nothing left to take
    first_claim: list[float | None] = [None]  # seconds until a worker took its first
    by_workers = [0]  # obligations the workers took

    def emit() -> None:
        nonlocal emitted
        while emitted < len(found) and found[emitted].index in done:
            if on_result is not None:
                on_result(done[found[emitted].index])
            emitted += 1

    def receive(block_seconds: float) -> bool:
        if broken:
            return False
        try:
            what, position, payload = channel.get(timeout=block_seconds)
        except queue.Empty:
            return False
        except (EOFError, OSError, pickle.UnpicklingError) as error:
            # a worker died in the middle of a message: nothing after it can be read
            broken.append(f"{type(error).__name__}: {error}")
            return False
        if what == "claim":
            held[position] = (0, time.perf_counter())
            if first_claim[0] is None:
                first_claim[0] = time.perf_counter() - started
            by_workers[0] += 1
        elif what == "done":
            held.pop(position, None)
            done[dealt[position].index] = payload
        return True

    try:
        for number in range(jobs - 1):
            job = WorkerJob(
                loaded,
                timeout_ms,
                isolated,
                tuple(only),
                tuple(actions),
                witnesses,
                reserve if number == 0 else 0,
                fault,
                hints,
            )
            worker = context.Process(target=_worker_main, args=(job, counter, channel), daemon=True)
            worker.start()
            workers.append(worker)
        found.extend(obligations(loaded, only, actions, witnesses))
        dealt.extend(dealing_order(found))
        discharger = _Discharger(loaded, timeout_ms, isolated, hints)
        while (position := _claim(counter, len(dealt))) is not None:
            obligation = dealt[position]
            done[obligation.index] = discharger.answer(obligation)
            while receive(0):
                pass
            emit()
        # Everything is dealt: wait for what the workers hold.
        own_done = time.perf_counter() - started
        while len(done) < len(found):
            if receive(0.05):
                continue
            alive = any(w.is_alive() for w in workers)
            now = time.perf_counter()
            stuck = [p for p, (_, at) in held.items() if now - at > stall]
            if alive and not stuck and not broken:
                continue
            while receive(0.2):  # what a dead worker sent before it died
                pass
            why = "worker stopped answering" if alive else "worker process died"
            if broken:
                why = f"worker results unreadable ({broken[0]})"
            for position in range(len(dealt)):
                obligation = dealt[position]
                if obligation.index not in done:
                    claimed_at = held.get(position, (0, now))[1]
                    done[obligation.index] = _unknown(
                        obligation, now - claimed_at, f"{why}: not proved"
                    )
            break
        emit()
    finally:
        for process in workers:
            if process.is_alive():
                process.terminate()
        for process in workers:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
        channel.close()
        channel.join_thread()
    results = tuple(done[o.index] for o in found)
    return ProofReport(
        loaded.name,
        loaded.mutation,
        results,
        time.perf_counter() - started,
        {
            "jobs": jobs,
            "by_workers": by_workers[0],
            "worker_first_claim_seconds": first_claim[0],
            "own_done_seconds": round(own_done, 3),
            "hints": hint_summary(hints, book(hints, loaded.spec)),
        },
    )

"""A spec's proof obligations, and the seeded bugs' checks, answered on a worker pool.

Contract: `prove_distributed(loaded, pool, ...)` discharges the same obligations, with
the same checks, as `etcdspec.spec.prove.prove` (without `fail_fast`; the list and the
answering are etcdspec.spec.parallel's `obligations`, `dealing_order` and `_Discharger`),
as one task per obligation on `pool` (etcdspec.workers: a Dask cluster's scheduler hands
the tasks, heaviest first, to whichever worker is free). Each worker process encodes the
spec once per proof (a Z3 context cannot be pickled: the job, the spec and its hints,
goes to each worker once and each process keeps one Discharger for it). The report
lists the results in the serial order. A lost worker makes the proof's unanswered
obligations UNKNOWN (never proved).

`catch_distributed(bugs, pool)`: `etcdspec.spec.mutations.catch` of each seeded bug, one
task each. No I/O besides the pool's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from etcdspec.spec.hints import Hints, book
from etcdspec.spec.loader import LoadedSpec
from etcdspec.spec.mutations import SeededBug, catch
from etcdspec.spec.parallel import Obligation, _Discharger, _unknown, dealing_order, obligations
from etcdspec.spec.proof_report import CheckResult, ProofReport
from etcdspec.spec.prove import (
    DEFAULT_TIMEOUT_MS,
    hint_summary,
    resolve_hints,
    select_actions,
    select_properties,
)
from etcdspec.workers import WorkerLost, WorkerPool


@dataclass(frozen=True)
class ProofJob:
    """What every task of one proof shares; `token` names the proof in a worker's memo."""

    token: str
    loaded: LoadedSpec
    timeout_ms: int
    isolated: bool
    only: tuple[str, ...]
    actions: tuple[str, ...]
    witnesses: bool
    hints: Hints | None

    def describe(self) -> str:
        return f"proof job {self.token[:8]}: {self.loaded.describe()}, {self.timeout_ms} ms"


# In each worker process: the last proof's (token, dealt obligations, Discharger).
_MEMO: dict[str, tuple[list[Obligation], _Discharger]] = {}


def answer(job: ProofJob, position: int) -> CheckResult:
    """The obligation at `position` of the proof's dealing order (a worker's task)."""
    found = _MEMO.get(job.token)
    if found is None:
        _MEMO.clear()  # one proof at a time per process: the older encoding goes
        dealt = dealing_order(obligations(job.loaded, job.only, job.actions, job.witnesses))
        found = _MEMO[job.token] = (
            dealt,
            _Discharger(job.loaded, job.timeout_ms, job.isolated, job.hints),
        )
    dealt, discharger = found
    return discharger.answer(dealt[position])


def prove_distributed(
    loaded: LoadedSpec,
    pool: WorkerPool,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    only: Sequence[str] = (),
    actions: Sequence[str] = (),
    witnesses: bool = True,
    isolated: bool = False,
    hints: Hints | bool = True,
    on_result: Callable[[CheckResult], None] | None = None,
) -> ProofReport:
    """The proof of `prove`, its obligations answered on `pool` (module docstring)."""
    started = time.perf_counter()
    select_properties(loaded.spec, only)  # unknown names fail here, before any task
    select_actions(loaded.spec, actions)
    chosen = resolve_hints(loaded, hints)
    found = obligations(loaded, only, actions, witnesses)
    dealt = dealing_order(found)
    job = ProofJob(
        uuid.uuid4().hex,
        loaded,
        timeout_ms,
        isolated,
        tuple(only),
        tuple(actions),
        witnesses,
        chosen,
    )
    lost = ""
    try:
        answers = pool.map(answer, job, list(range(len(dealt))))
    except WorkerLost as error:
        lost = str(error)
        seconds = time.perf_counter() - started
        answers = [_unknown(o, seconds, f"{lost}: not proved") for o in dealt]
    by_index = {obligation.index: result for obligation, result in zip(dealt, answers, strict=True)}
    results = tuple(by_index[o.index] for o in found)
    if on_result is not None:
        for result in results:
            on_result(result)
    return ProofReport(
        loaded.name,
        loaded.mutation,
        results,
        time.perf_counter() - started,
        {
            "pool": pool.describe(),
            "worker_lost": lost or None,
            "hints": hint_summary(chosen, book(chosen, loaded.spec)),
        },
    )


def _catch(_: None, bug: SeededBug) -> ProofReport:
    return catch(bug)


def catch_distributed(bugs: Sequence[SeededBug], pool: WorkerPool) -> list[ProofReport]:
    """`catch(bug)` for each bug, one task each on `pool`, in the given order."""
    return pool.map(_catch, None, list(bugs))

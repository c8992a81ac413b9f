"""`etcdspec check` as a library call: read a history, check it, give one report.

Contract:
- `load_history(path, fmt, model)` reads JSON Lines (`jsonl`) or Jepsen EDN (`edn`);
  malformed input raises BadInput (the command exits 4) naming the file and line.
- `check_history(history, options)` runs linearizability against the chosen model and,
  for the etcd model, each watch guarantee against the linearized history (with watch
  events, the search first takes what the watches saw as observations; see
  `_check_with_watches`); every
  check is a CheckResult. The overall verdict merges them (false > unknown > true).
  An operation the model cannot read is BadInput too (naming another model that reads
  the whole history, when one does). A history with no operation is EmptyHistory (a
  BadInput), and one whose every operation the model drops is unknown, unless
  `CheckOptions.allow_empty`: nothing checked is never a pass.
- A lock history (`lock`/`unlock` operations, the `locks` workload) is judged by the
  mutual-exclusion check (checker/mutual_exclusion.py) alone: its lock keys are
  written by the server's Lock service, which no model operation describes, so
  linearizability against a model and the watch guarantees are not checked (a note
  says so).
- A history with held keys (the `lease-guarantee` workload's) is also judged by the
  lease guarantee (checker/lease_checks.py), with `CheckOptions.lease_tolerance_s`.
- Memory: `CheckOptions.max_memory_mb` None (the default) bounds resident memory by
  `default_memory_mb()` (4,096 MB or half the physical memory, whichever is smaller);
  0 means unbounded. Reaching the bound gives unknown, never a pass.
- `CheckReport.to_json()` is result.json (versioned: `schema_version`), with one entry
  per check and its duration; `describe()` is the terminal table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from etcdspec.checker.budget import Budget
from etcdspec.checker.gc_pause import paused_gc
from etcdspec.checker.history import History, HistoryError, read_history
from etcdspec.checker.lease_checks import (
    DEFAULT_TOLERANCE_S,
    check_lease_guarantee,
    is_lease_guarantee_history,
)
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.linearizability_result import LinearizabilityResult
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.checker.models import CheckModel, ModelInputError, get_model, model_names
from etcdspec.checker.mutual_exclusion import check_mutual_exclusion, is_lock_history
from etcdspec.checker.results import CheckResult
from etcdspec.verdict import Verdict

RESULT_SCHEMA_VERSION = 1
FORMATS = ("jsonl", "edn")
DEFAULT_MEMORY_MB = 4096.0
_MEMINFO = Path("/proc/meminfo")


class BadInput(ValueError):
    """The history cannot be read or does not fit the model (exit 4)."""


class EmptyHistory(BadInput):
    """The history holds no operation (exit 4 unless empty input is allowed): a
    recorder that wrote nothing must not pass a CI job."""


def default_memory_mb(meminfo: Path = _MEMINFO) -> float:
    """The resident memory bound when none is given: DEFAULT_MEMORY_MB or half the
    physical memory (MemTotal in /proc/meminfo), whichever is smaller."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                total_mb = int(line.split()[1]) / 1024  # the field is in kB
                return min(DEFAULT_MEMORY_MB, max(total_mb / 2, 1.0))
    except (OSError, ValueError, IndexError):
        return DEFAULT_MEMORY_MB  # no /proc (not Linux): the fixed default
    return DEFAULT_MEMORY_MB


@dataclass(frozen=True)
class CheckOptions:
    """max_memory_mb: None is the default bound (`default_memory_mb()`), 0 unbounded."""

    model: str = "etcd"
    timeout_s: float | None = None
    max_memory_mb: float | None = None
    lease_expiry: bool = True
    seed: int = 0
    allow_empty: bool = False  # no operation (or none the model can check) holds
    # the lease guarantee's tolerance (checker/lease_checks.py): election timeout + slack
    lease_tolerance_s: float = DEFAULT_TOLERANCE_S

    def memory_bound_mb(self) -> float | None:
        """The resident memory bound in force (None: unbounded)."""
        if self.max_memory_mb is None:
            return default_memory_mb()
        return self.max_memory_mb if self.max_memory_mb > 0 else None

    def make_model(self) -> CheckModel:
        if self.model == "etcd":
            return EtcdModel(lease_expiry=self.lease_expiry)
        return get_model(self.model)


@dataclass(frozen=True)
class CheckReport:
    source: str
    model: str
    verdict: Verdict
    results: tuple[CheckResult, ...]
    history: History
    linearizability: LinearizabilityResult | None
    seconds: float
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        """The terminal summary: one row per check, then the verdict."""
        width = max([len(r.name) for r in self.results] + [5])
        lines = [f"etcdspec check {self.source} (model {self.model})", ""]
        lines.append(f"  {'check'.ljust(width)}  {'verdict':<9} {'time':>8}  summary")
        for result in self.results:
            lines.append(
                f"  {result.name.ljust(width)}  {result.verdict.describe():<9} "
                f"{result.seconds:>7.2f}s  {result.summary}"
            )
        failure = self.linearizability.failure if self.linearizability else None
        if failure is not None:
            lines += ["", f"  failing op: {failure.describe()}"]
        for result in self.results:
            for detail in result.details[:3]:
                if result.name != "Linearizable":
                    lines.append(f"  {result.name}: {detail}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        lines += ["", f"verdict: {self.verdict.describe()} ({self.seconds:.2f} s)"]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": RESULT_SCHEMA_VERSION,
            "valid": self.verdict.to_json(),
            "source": self.source,
            "model": self.model,
            "seconds": round(self.seconds, 4),
            "history": {
                "events": len(self.history.events),
                "operations": len(self.history.operations),
                "watch_events": len(self.history.watch_events),
            },
            "checks": [result.to_json() for result in self.results],
            "linearizability": self.linearizability.to_json() if self.linearizability else None,
            "notes": list(self.notes),
        }


def load_history(path: Path | str, fmt: str = "jsonl", model: str = "etcd") -> History:
    """Read a history file (BadInput when it is malformed)."""
    if fmt not in FORMATS:
        raise BadInput(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "edn":
        # Imported here: the EDN reader loads lark, which a JSON Lines check never needs.
        from etcdspec.checker.edn import EdnError
        from etcdspec.checker.jepsen import read_jepsen

        try:
            return read_jepsen(path, model)
        except (HistoryError, EdnError) as error:
            raise BadInput(str(error)) from error
    try:
        return read_history(path)
    except HistoryError as error:
        raise BadInput(str(error)) from error


def check_history(history: History, options: CheckOptions = CheckOptions()) -> CheckReport:
    """Linearizability and (etcd model) the watch guarantees of one history."""
    if options.model not in model_names():
        raise BadInput(f"unknown model {options.model!r}; choose one of {', '.join(model_names())}")
    if not history.operations and not options.allow_empty:
        watch = f" ({len(history.watch_events)} watch events, which need operations)"
        raise EmptyHistory(
            f"{history.source}: the history holds no operation"
            f"{watch if history.watch_events else ''}, so there is nothing to check; "
            "if the recorder ran, it wrote nothing (pass --allow-empty to accept an "
            "empty history)"
        )
    # The search's objects (and the history's) are acyclic; the cyclic collector would
    # only rescan them (a full collection of a 100k-operation history costs a second).
    if is_lock_history(history):
        return _check_locks(history, options)
    with paused_gc():
        return _check_history(history, options)


def _check_locks(history: History, options: CheckOptions) -> CheckReport:
    start = time.monotonic()
    result = check_mutual_exclusion(history)
    note = (
        "a lock history: its lock keys are written by the server's Lock service, which "
        "no model operation describes, so only mutual exclusion is checked"
    )
    return CheckReport(
        source=history.source,
        model=options.model,
        verdict=result.verdict,
        results=(result,),
        history=history,
        linearizability=None,
        seconds=time.monotonic() - start,
        notes=(*history.notes, note),
    )


def _check_history(history: History, options: CheckOptions) -> CheckReport:
    start = time.monotonic()
    budget = Budget(options.timeout_s, options.memory_bound_mb(), options.seed)
    model = options.make_model()
    watch_results: list[CheckResult] = []
    try:
        if options.model == "etcd" and history.watch_events:
            lin, watch_results = _check_with_watches(history, options, budget)
        else:
            lin = check_linearizable(
                model, history.operations, budget, allow_empty=options.allow_empty
            )
            # No watch event here (or not the etcd model): no watch guarantee to judge
            # (check_watches would return no result), so watch_checks is not loaded.
    except ModelInputError as error:
        raise BadInput(f"{history.source}: {error}{_model_hint(history, options)}") from error
    except HistoryError as error:
        raise BadInput(str(error)) from error
    results = [_linearizable_result(lin, history), *watch_results]
    if options.model != "etcd" and history.watch_events:
        results.append(
            CheckResult(
                "Watch",
                Verdict.UNKNOWN,
                f"{len(history.watch_events)} watch events need the etcd model",
            )
        )
    if options.model == "etcd" and is_lease_guarantee_history(history):
        results.append(check_lease_guarantee(history, options.lease_tolerance_s))
    verdict = Verdict.merge_all([r.verdict for r in results])
    return CheckReport(
        source=history.source,
        model=options.model,
        verdict=verdict,
        results=tuple(results),
        history=history,
        linearizability=lin,
        seconds=time.monotonic() - start,
        notes=history.notes + lin.notes,
    )


def _check_with_watches(
    history: History, options: CheckOptions, budget: Budget
) -> tuple[LinearizabilityResult, list[CheckResult]]:
    """Linearizability, and the watch guarantees judged against a linearization the
    watches agree with.

    The KV history may allow several linearizations that read alike (two info writes to
    a key nobody read back; two lease expiries): any one found need not be the one the
    server took. So the search first takes the writes the watches saw (puts and
    deletes, so also the revision each lease expiry took) as observations: those cut
    the info writes and expiries to what was seen, which is also much faster on runs
    with many of them. A linearization found so is a linearization of the history; the
    watches are judged by it. When there is none (a watch shows what no linearization
    has) or a watch guarantee breaks against it, the search runs again without the
    watch observations, and the watches are judged by that one too: a guarantee is
    reported broken only when it breaks against both (or the second finds none).
    With a time budget, the first search gets half of it."""
    from etcdspec.checker.watch_checks import check_watches, observed_writes, parse_watches

    seen = observed_writes(parse_watches(history))
    first_budget = budget
    if budget.timeout_s is not None:
        first_budget = replace(budget, timeout_s=budget.timeout_s / 2)
    start = time.monotonic()
    agreed = check_linearizable(
        options.make_model(),
        history.operations,
        first_budget,
        seen,
        allow_empty=options.allow_empty,
    )
    if agreed.verdict is Verdict.TRUE:
        results = check_watches(history, agreed)
        if all(r.verdict is not Verdict.FALSE for r in results):
            return agreed, results
    rest = budget
    if budget.timeout_s is not None:
        rest = replace(budget, timeout_s=max(budget.timeout_s - (time.monotonic() - start), 0.0))
    plain = check_linearizable(
        options.make_model(), history.operations, rest, allow_empty=options.allow_empty
    )
    if agreed.verdict is Verdict.TRUE and plain.verdict is not Verdict.FALSE:
        # Both found one (or the second ran out): the first one's verdicts stand
        # unless the second one's watches all hold.
        if plain.verdict is Verdict.TRUE:
            again = check_watches(history, plain)
            if all(r.verdict is not Verdict.FALSE for r in again):
                return plain, again
        return agreed, results
    return plain, check_watches(history, plain)


def _model_hint(history: History, options: CheckOptions) -> str:
    """ "; it reads as a NAME history: pass --model NAME" when another model takes
    every operation of the history, else ""."""
    for name in model_names():
        if name == options.model:
            continue
        model = replace(options, model=name).make_model()
        try:
            for op in history.operations:
                model.prepare(op)
        except ModelInputError:
            continue
        return f"; it reads as a {name} history: pass --model {name}"
    return ""


def _linearizable_result(lin: LinearizabilityResult, history: History) -> CheckResult:
    parts = len(lin.partitions)
    summary = f"{lin.operations} operations" + (f", {parts} keys" if parts > 1 else "")
    if lin.dropped:
        summary += f" ({lin.dropped} fail/unobservable dropped)"
    details: tuple[str, ...] = ()
    events: list[int] = []
    failure = lin.failure
    if failure is not None:
        details = (failure.describe(),)
        by_id = {op.id: op for op in history.operations}  # only for a failure's window
        for op_id in failure.window:
            op = by_id.get(op_id)
            if op is not None:
                events.append(op.invoke_index)
                if op.complete_index is not None:
                    events.append(op.complete_index)
    elif lin.reason:
        details = (lin.reason,)
        summary += f"; {lin.reason}"
    return CheckResult(
        "Linearizable", lin.verdict, summary, lin.seconds, details, tuple(sorted(events))
    )

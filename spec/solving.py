"""One Z3 query, asked the same way every time.

`ask(assertions, budget)` checks the assertions on a solver of their own, seeded with
`SEED`, capped by the budget; it returns the answer with its model when satisfiable
and the reason Z3 gave when unknown. The budget has two caps:
- `rlimit`, Z3's resource count (relative to the start of the query): deterministic,
  the same on an idle and on a loaded machine, so "gave up after this much work" is a
  property of the query, not of the machine's load;
- `timeout_ms`, wall clock: the user's cap on waiting, reached only by a hard query or
  a heavily loaded machine.
With `isolated=True` the query is first copied into a fresh Z3 context, so nothing
asked before (the order Z3 met the terms in, its caches) can change its answer or its
cost: the same query then reports the same rlimit count wherever it is asked. That copy
costs about 3 ms a query, so it is an option (tests and `--isolated` style checks), not
the default path. Unknown (either cap, or Z3's incompleteness) is never sat or unsat.
The module does no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import z3

SEED = 0  # Z3's random_seed for every query


@dataclass(frozen=True)
class Budget:
    """How much a query may take: wall-clock milliseconds and Z3 resource units (0: no cap)."""

    timeout_ms: int
    rlimit: int = 0

    def describe(self) -> str:
        limit = f", rlimit {self.rlimit}" if self.rlimit else ""
        return f"timeout {self.timeout_ms} ms{limit}"

    def capped(self, timeout_ms: int) -> Budget:
        return Budget(min(self.timeout_ms, timeout_ms), self.rlimit)


@dataclass(frozen=True)
class Answer:
    """What Z3 said, with the model (in the caller's context) when it said sat."""

    result: z3.CheckSatResult
    model: z3.ModelRef | None
    reason: str  # Z3's reason_unknown, when unknown
    rlimit_used: int | None  # Z3's resource count for this query (isolated queries only)
    seconds: float

    @property
    def sat(self) -> bool:
        return self.result == z3.sat

    @property
    def unsat(self) -> bool:
        return self.result == z3.unsat

    def describe(self) -> str:
        reason = f" ({self.reason})" if self.reason else ""
        return (
            f"{self.result}{reason} after {self.seconds * 1000:.0f} ms, rlimit {self.rlimit_used}"
        )


def configure(solver: z3.Solver, budget: Budget) -> z3.Solver:
    """Seed and cap `solver` by `budget`."""
    solver.set("random_seed", SEED)
    solver.set("timeout", max(int(budget.timeout_ms), 1))
    if budget.rlimit:
        solver.set("rlimit", int(budget.rlimit))
    return solver


def ask(
    assertions: Sequence[z3.BoolRef],
    budget: Budget,
    want_model: bool = True,
    isolated: bool = False,
) -> Answer:
    """Check the conjunction of `assertions` on a fresh solver (in a fresh context if
    `isolated`); the model, if any, is in the assertions' context."""
    started = time.perf_counter()
    home = assertions[0].ctx if assertions else z3.main_ctx()
    context = z3.Context() if isolated else None
    solver = configure(z3.Solver(ctx=context or home), budget)
    if context is None:
        solver.add(*assertions)
    else:
        for assertion in assertions:
            solver.add(assertion.translate(context))
    result = solver.check()
    model = None
    if result == z3.sat and want_model:
        model = solver.model()
        if context is not None:
            model = model.translate(home)
    reason = solver.reason_unknown() if result == z3.unknown else ""
    used = _rlimit_count(solver) if isolated else None
    return Answer(result, model, reason, used, time.perf_counter() - started)


def _rlimit_count(solver: z3.Solver) -> int:
    try:
        return int(solver.statistics().get_key_value("rlimit count"))
    except z3.Z3Exception:  # no such statistic: Z3 did no work worth counting
        return 0

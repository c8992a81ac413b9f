"""The budget of one history check: a time limit, a resident-memory bound, and the seed
of the search's hashing.

Contract
- `Budget` is the caller's limits (None: unbounded) and seed; `describe()` is its text.
- `BudgetClock(budget)` starts the clock when made; `check()` raises `OutOfBudget`
  (with the reason in words) once the time is spent or resident memory, read from
  /proc by `resident_mb()`, is over the bound. A search calls `check()` every few
  hundred steps; running out is an unknown verdict for the caller, never a pass.
- `resident_mb()` is None where /proc is not there: the memory bound is then not
  enforced. Reads the clock and /proc only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Budget:
    """Limits of one check: seconds and resident memory; None is unbounded."""

    timeout_s: float | None = None
    max_memory_mb: float | None = None
    seed: int = 0

    def describe(self) -> str:
        limits = []
        if self.timeout_s is not None:
            limits.append(f"timeout {self.timeout_s:g} s")
        if self.max_memory_mb is not None:
            limits.append(f"memory {self.max_memory_mb:g} MB")
        return ", ".join(limits) or "no limits"


UNBOUNDED = Budget()
"""No limits, seed 0: the default budget."""


class OutOfBudget(Exception):
    """A budget ran out; `reason` says which and by how much."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BudgetClock:
    """One check's budget, started when the clock is made and shared across its partitions."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.start = time.monotonic()
        self.deadline = None if budget.timeout_s is None else self.start + budget.timeout_s

    def check(self) -> None:
        """Raise OutOfBudget if the time is up or resident memory is over the bound."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OutOfBudget(f"time budget of {self.budget.timeout_s:g} s spent")
        if self.budget.max_memory_mb is not None:
            rss = resident_mb()
            if rss is not None and rss > self.budget.max_memory_mb:
                raise OutOfBudget(
                    f"memory bound of {self.budget.max_memory_mb:g} MB reached ({rss:.0f} MB)"
                )


def resident_mb() -> float | None:
    """This process's resident memory in MB (from /proc; None where there is none)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * _PAGE / 2**20
    except (OSError, ValueError, IndexError):
        return None

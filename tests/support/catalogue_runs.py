"""Each catalogued bug's finder run (etcdspec.model.explore.find_bug, seed 0), made once
per test session: the exploration tests and the diagram tests read the same result
instead of repeating a search of up to ~10 s per bug. Runs are deterministic from their
seed, so sharing one changes no test's answer."""

from __future__ import annotations

from functools import cache

from etcdspec.model.explore import ExploreResult, find_bug


@cache
def found(name: str) -> ExploreResult:
    """The finder's run of bug `name` from seed 0 (what `etcdspec explore --bug NAME` runs)."""
    return find_bug(name, seed=0)

"""The bug catalogue is found by exploration, and the correct model passes the same runs.

Parametrized over model/bugs.py CATALOGUE: a bug added to the catalogue without a finder
in etcdspec.model.explore.FINDERS fails here. Each finder is a seeded Hypothesis run (a
few consecutive seeds) or a bounded exhaustive search, so every run is deterministic.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from catalogue_runs import found

from etcdspec.model.bugs import BY_NAME, CATALOGUE, MUTATION_NAMES, NO_BUGS
from etcdspec.model.explore import FINDERS, run_exhaustive, run_hypothesis
from etcdspec.verdict import Verdict

BUG_NAMES = [bug.name for bug in CATALOGUE]


def test_every_catalogued_bug_has_a_finder() -> None:
    assert set(FINDERS) == set(BY_NAME) | MUTATION_NAMES


@pytest.mark.parametrize("name", BUG_NAMES)
def test_exploration_finds_the_bug_with_a_counterexample(name: str) -> None:
    result = found(name)
    assert result.verdict is Verdict.FALSE, result.describe()
    assert not result.crashed
    cex = result.counterexample
    assert cex is not None
    assert cex.steps, "a counterexample has at least one step"
    assert cex.invariant and cex.detail
    rendered = cex.describe()
    assert f"invariant {cex.invariant} violated" in rendered
    assert "  1. " in rendered
    itf = cex.to_itf().to_json()
    assert len(itf["states"]) == len(cex.steps) + 1


@pytest.mark.parametrize("name", BUG_NAMES)
def test_the_correct_model_passes_the_same_run(name: str) -> None:
    """The first seed of the finder's run (the same bounds, for a search), with no bug on."""
    finder = FINDERS[name]
    options = replace(finder.options, bugs=NO_BUGS, seed=0)
    if finder.mode == "exhaustive":
        bugged = found(name)
        # no violation among as many states as the bug needed to show itself (capped,
        # to keep the suite short)
        states = min(max(bugged.distinct_states, 2000), 15000)
        budget = replace(finder.bounds, max_states=states)
        result = run_exhaustive(options, budget)
        assert result.verdict in (Verdict.TRUE, Verdict.UNKNOWN), result.describe()
        assert result.counterexample is None
        assert result.distinct_states >= min(bugged.distinct_states, states)
    else:
        result = run_hypothesis(options)
        assert result.verdict is Verdict.TRUE, result.describe()
        assert result.examples >= min(options.max_examples, 10)

"""The exhaustive search's memo tables (model/search_cache.py) change no answer: the same
state counts as the plain search had, the same successors with and without a cache,
canonical keys that identify the same states as the plain keys, invariant checks that
fail exactly where the full check fails."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest

from etcdspec.model.bugs import BugSet
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.exhaustive import explore_exhaustive, small_config
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.search_cache import SearchCache
from etcdspec.verdict import Verdict


def test_terms_2_logs_1_has_13423_distinct_states() -> None:
    # pinned: a faster search must find exactly the states the plain one found
    result = explore_exhaustive(small_config(max_term=2, max_log=1))
    assert result.verdict is Verdict.TRUE, result.describe()
    assert (result.distinct_states, result.depth_reached) == (13423, 31)


def test_the_search_leaves_the_garbage_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    explore_exhaustive(small_config(max_term=1, max_log=0))
    assert gc.isenabled()
    gc.disable()
    try:
        explore_exhaustive(small_config(max_term=1, max_log=0))
        assert not gc.isenabled()
    finally:
        gc.enable()


CONFIGS: dict[str, ClusterConfig] = {
    "small": small_config(max_term=3, max_log=2, max_messages=3),
    "full-featured": ClusterConfig(
        timeouts="free", max_term=3, max_log=3, max_messages=4, max_crashes=2
    ),
    "explicit-persist": small_config(max_term=3, max_log=2, persist="explicit", max_crashes=1),
    "figure8-bug": small_config(
        max_term=3, max_log=1, allow_heartbeat=False, bugs=BugSet.of("figure8_commit")
    ),
    "five-nodes": small_config(nodes=5, max_term=2, max_log=1, max_messages=4),
}


def _violation(state: Cluster, cache: SearchCache | None) -> str | None:
    try:
        state.check_invariants(None, cache)
    except InvariantViolation as violation:
        return violation.describe()
    return None


def _walk(config: ClusterConfig, seed: int, steps: int) -> int:
    """A seeded random walk through cached successors (from the start again at a dead
    end), comparing at each state the cached and the plain successors (action label,
    state, outputs) and checks; returns how many successors were compared."""
    rng = random.Random(seed)
    cache = SearchCache()
    state = Cluster.start(config)
    compared = 0
    for _ in range(steps):
        cached = list(state.successors(cache))
        plain = list(state.successors())
        assert [(a.describe(), s.fingerprint(), s.outputs) for a, s in cached] == [
            (a.describe(), s.fingerprint(), s.outputs) for a, s in plain
        ]
        assert _violation(state, cache) == _violation(state, None)
        compared += len(cached)
        state = rng.choice(cached)[1] if cached else Cluster.start(config)
    return compared


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cached_successors_and_checks_equal_the_plain_ones(name: str, seed: int) -> None:
    assert _walk(CONFIGS[name], seed, 60) > 60


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cached_keys_identify_the_states_the_plain_keys_identify(name: str) -> None:
    config = CONFIGS[name]
    cache = SearchCache()
    states: list[Cluster] = []
    for seed in range(4):
        rng = random.Random(seed)
        state = Cluster.start(config)
        for _ in range(40):
            states.append(state)
            successors = [s for _, s in state.successors(cache)]
            if not successors:
                break
            # visit a state and a renamed twin of it by choosing among all successors
            state = rng.choice(successors)
    plain = [s.canonical_fingerprint() for s in states]
    cached = [s.canonical_fingerprint(cache) for s in states]
    by_plain: dict[Any, set[Any]] = {}
    by_cached: dict[Any, set[Any]] = {}
    for p, c in zip(plain, cached, strict=True):
        by_plain.setdefault(p, set()).add(c)
        by_cached.setdefault(c, set()).add(p)
    assert all(len(group) == 1 for group in by_plain.values())
    assert all(len(group) == 1 for group in by_cached.values())
    assert len(by_plain) > 20


def test_renamed_states_share_a_cached_key() -> None:
    config = small_config(max_term=2, max_log=1)
    cache = SearchCache()
    start = Cluster.start(config)
    one = dict((a.describe(), s) for a, s in start.successors(cache))
    assert one["timeout(n1)"].canonical_fingerprint(cache) == one[
        "timeout(n3)"
    ].canonical_fingerprint(cache)
    assert one["timeout(n1)"].canonical_fingerprint(cache) != start.canonical_fingerprint(cache)


def test_a_cache_serves_one_config() -> None:
    cache = SearchCache()
    list(Cluster.start(small_config(max_term=1, max_log=0)).successors(cache))
    with pytest.raises(ValueError, match="one cluster config"):
        list(Cluster.start(small_config(max_term=2, max_log=0)).successors(cache))


def test_a_cached_check_still_fails_a_violating_state() -> None:
    # the commit_without_quorum bug's shortest run: its last state breaks an invariant
    config = small_config(max_term=2, max_log=1, bugs=BugSet.of("commit_without_quorum"))
    result = explore_exhaustive(config, time_budget_s=300)
    assert result.verdict is Verdict.FALSE and result.counterexample is not None
    final = result.counterexample[-1][1]
    cache = SearchCache()
    for _ in range(2):  # a failed check is never remembered as passed
        with pytest.raises(InvariantViolation, match="LeaderCompleteness"):
            final.check_invariants(None, cache)

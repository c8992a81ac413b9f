"""The distributed exhaustive explorer gives the single-process search's answers: the same
verdict, distinct-state count, depth, first violation and counterexample, and the same
count where a state budget stops it, whatever the number of shards. These tests drive the
shards in this process (etcdspec.workers.InlinePool: deterministic, no engine); the ones
on a real local Dask cluster are in test_distributed_dask.py."""

from __future__ import annotations

from typing import Any

import pytest

from etcdspec.model.bugs import BugSet
from etcdspec.model.cluster import Cluster
from etcdspec.model.distributed_explore import explore_distributed
from etcdspec.model.distributed_shard import SearchShard
from etcdspec.model.exhaustive import ExhaustiveResult, explore_exhaustive, small_config
from etcdspec.model.symmetry import canonical_key
from etcdspec.verdict import Verdict
from etcdspec.workers import InlinePool

CASES = {
    "holds-term2-log1": (small_config(max_term=2, max_log=1), {}),
    "holds-crash": (small_config(max_term=1, max_log=0, max_crashes=1), {}),
    "commit_without_quorum": (
        small_config(bugs=BugSet.of("commit_without_quorum"), max_term=2, max_log=1),
        {},
    ),
    "vote_not_persisted": (
        small_config(bugs=BugSet.of("vote_not_persisted"), max_term=1, max_log=0, max_crashes=1),
        {},
    ),
    "max_states": (small_config(max_term=2, max_log=1), {"max_states": 5000}),
    "max_depth": (small_config(max_term=2, max_log=1), {"max_depth": 6}),
    # the budget runs out in the level of the first violation, before it: unknown, as
    # the single-process search says
    "max_states-before-violation": (
        small_config(bugs=BugSet.of("commit_without_quorum"), max_term=2, max_log=1),
        {"max_states": 2400},
    ),
}


def assert_same(single: ExhaustiveResult, distributed: ExhaustiveResult) -> None:
    assert distributed.verdict is single.verdict, distributed.describe()
    assert distributed.distinct_states == single.distinct_states
    assert distributed.depth_reached == single.depth_reached
    if single.violation is None:
        assert distributed.violation is None and distributed.counterexample is None
        return
    assert distributed.violation is not None and distributed.counterexample is not None
    assert distributed.violation.describe() == single.violation.describe()
    assert single.counterexample is not None
    assert [a for a, _ in distributed.counterexample] == [a for a, _ in single.counterexample]
    assert [s for _, s in distributed.counterexample] == [s for _, s in single.counterexample]


@pytest.mark.parametrize("shards", [1, 2, 3])
@pytest.mark.parametrize("case", list(CASES))
def test_in_process_shards_give_the_single_process_answers(case: str, shards: int) -> None:
    config, limits = CASES[case]
    single = explore_exhaustive(config, **limits)
    pool = InlinePool(shards)
    try:
        # small slices: many rounds per level, so batches cross levels' boundaries often
        distributed = explore_distributed(config, pool, slice_size=50, **limits)
    finally:
        pool.close()
    assert_same(single, distributed)
    assert ("this process" if shards == 1 else f"{shards} in-process shards") in distributed.reason


def test_the_budget_case_really_stops_before_the_violation() -> None:
    config, limits = CASES["max_states-before-violation"]
    assert explore_exhaustive(config).verdict is Verdict.FALSE
    assert explore_exhaustive(config, **limits).verdict is Verdict.UNKNOWN


def test_every_shard_owns_some_states_and_each_state_has_one_owner() -> None:
    config = small_config(max_term=2, max_log=1)
    pool = InlinePool(3)
    try:
        result = explore_distributed(config, pool)
        shards: list[SearchShard] = pool.objects
        owned = [len(shard.visited) for shard in shards]
    finally:
        pool.close()
    assert sum(owned) == result.distinct_states
    assert min(owned) > result.distinct_states // 10, owned


def test_the_owner_is_the_same_for_every_renaming_of_a_state() -> None:
    # states three steps from the start, grouped by canonical key: a group of more than
    # one concrete state is renamings of one state (node names differ)
    config = small_config(max_term=2, max_log=1)
    level = [Cluster.start(config)]
    groups: dict[Any, list[Cluster]] = {}
    for _ in range(3):
        level = [successor for state in level for _, successor in state.successors()]
        for state in level:
            key = canonical_key(state.nodes, state.up, state.network, 0, state.ghost)
            groups.setdefault(key, []).append(state)
    renamings = [group for group in groups.values() if len({s.fingerprint() for s in group}) > 1]
    assert len(renamings) > 10
    first, second = SearchShard(config, 0, 4), SearchShard(config, 1, 4)
    try:
        owners = set()
        for group in renamings:
            found = {first.owner(s, s.canonical_fingerprint(first.cache)) for s in group}
            found |= {second.owner(s, s.canonical_fingerprint(second.cache)) for s in group}
            assert len(found) == 1
            owners |= found
        assert len(owners) > 1  # and the states are spread
    finally:
        first.close()
        second.close()


def test_a_spent_time_budget_is_unknown() -> None:
    pool = InlinePool(2)
    try:
        result = explore_distributed(small_config(max_term=3, max_log=2), pool, time_budget_s=0.2)
    finally:
        pool.close()
    assert result.verdict is Verdict.UNKNOWN
    assert "time budget" in result.reason


def test_a_pool_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least 1 worker"):
        InlinePool(0)

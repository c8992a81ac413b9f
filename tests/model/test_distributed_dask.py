"""The distributed explorer on a real local Dask cluster of 2 worker processes gives the
single-process search's answers (state counts, depth, the first violation and its run),
and the cluster's processes are gone after the pool is closed."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import psutil
import pytest

from etcdspec.model.bugs import BugSet
from etcdspec.model.distributed_explore import explore_distributed
from etcdspec.model.exhaustive import explore_exhaustive, small_config
from etcdspec.verdict import Verdict
from etcdspec.workers import DaskPool, WorkerLost, open_pool

pytest.importorskip("distributed", reason="Dask distributed is a dependency: pip install -e .")


@pytest.fixture(scope="module")
def pool() -> Iterator[DaskPool]:
    before = {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}
    started = DaskPool.local(2)
    # the worker processes (multiprocessing's resource tracker stays until we exit)
    workers = [
        p
        for p in psutil.Process(os.getpid()).children(recursive=True)
        if p.pid not in before and "resource_tracker" not in " ".join(p.cmdline())
    ]
    assert started.size == 2 and workers
    try:
        yield started
    finally:
        started.close()
    _, alive = psutil.wait_procs(workers, timeout=10)
    alive = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"worker processes left running: {alive}"


def test_two_dask_workers_exhaust_the_bound_with_the_same_count(pool: DaskPool) -> None:
    config = small_config(max_term=2, max_log=2)
    single = explore_exhaustive(config)
    distributed = explore_distributed(config, pool)
    assert single.verdict is Verdict.TRUE
    assert distributed.verdict is Verdict.TRUE, distributed.describe()
    assert distributed.distinct_states == single.distinct_states == 58959
    assert distributed.depth_reached == single.depth_reached
    assert "a local Dask cluster of 2 workers" in distributed.reason


@pytest.mark.parametrize(
    ("bug", "bounds"),
    [
        ("commit_without_quorum", {"max_term": 2, "max_log": 1}),
        ("vote_not_persisted", {"max_term": 1, "max_log": 0, "max_crashes": 1}),
    ],
)
def test_two_dask_workers_find_the_same_first_violation(
    pool: DaskPool, bug: str, bounds: dict[str, int]
) -> None:
    config = small_config(bugs=BugSet.of(bug), **bounds)
    single = explore_exhaustive(config)
    distributed = explore_distributed(config, pool, slice_size=200)
    assert single.verdict is Verdict.FALSE and distributed.verdict is Verdict.FALSE
    assert distributed.distinct_states == single.distinct_states
    assert distributed.depth_reached == single.depth_reached
    assert single.violation is not None and distributed.violation is not None
    assert distributed.violation.describe() == single.violation.describe()
    assert single.counterexample is not None and distributed.counterexample is not None
    assert [a for a, _ in distributed.counterexample] == [a for a, _ in single.counterexample]


def test_a_scheduler_that_is_not_there_is_a_clear_error() -> None:
    with pytest.raises(WorkerLost, match=r"cannot reach a Dask scheduler at tcp://127\.0\.0\.1:9"):
        DaskPool.connect("tcp://127.0.0.1:9", timeout_s=2)


def test_a_worker_killed_in_the_middle_is_worker_lost_never_a_result() -> None:
    pool = DaskPool.local(2)
    try:
        victim = list(pool.client.run(os.getpid).values())[1]
        # a search of minutes; the worker is killed 2 s in
        killer = threading.Timer(2.0, os.kill, (victim, signal.SIGKILL))
        killer.start()
        try:
            with pytest.raises(WorkerLost, match="a worker of a local Dask cluster of 2 workers"):
                explore_distributed(small_config(max_term=2, max_log=2, max_messages=3), pool)
        finally:
            killer.cancel()
    finally:
        pool.close()


def test_a_spent_time_budget_on_the_workers_is_unknown(pool: DaskPool) -> None:
    config = small_config(max_term=2, max_log=2, max_messages=3)
    result = explore_distributed(config, pool, time_budget_s=1.0)
    assert result.verdict is Verdict.UNKNOWN and "time budget 1 s spent" in result.reason


def test_a_memory_bound_is_each_local_workers_limit() -> None:
    """`--worker-memory MB` (and `worker_memory` in [tool.etcdspec]) reaches Dask as each
    worker's limit, past which its nanny stops it (WorkerLost: the search is unknown)."""
    bounded = open_pool(2, None, 300)
    assert bounded is not None
    try:
        limits = [w["memory_limit"] for w in bounded.client.scheduler_info()["workers"].values()]
        assert limits == [300 * 2**20] * 2
    finally:
        bounded.close()
    with pytest.raises(ValueError, match="a running cluster's workers have the limit"):
        open_pool(None, "tcp://127.0.0.1:9", 300)
    with pytest.raises(ValueError, match="at least 1 MB, got 0"):
        open_pool(2, None, 0)


def test_an_actor_asked_after_its_worker_died_is_worker_lost() -> None:
    """distributed's Actor raises a plain RuntimeError when a method is asked after its
    worker died (before any future exists): that is a lost worker too, never a crash.
    A CI-like run hit it when the kill above fell between two calls of a level."""
    from etcdspec.workers import _lost

    said = RuntimeError("Worker holding Actor was lost.  Status: error")
    lost = _lost("a local Dask cluster of 2 workers", said)
    assert isinstance(lost, WorkerLost)
    assert str(lost).startswith("a worker of a local Dask cluster of 2 workers was lost")
    own = RuntimeError("the search's own failure")
    assert _lost("here", own) is own

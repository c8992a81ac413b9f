"""Exhaustive exploration over a pool of workers, with the single-process search's answers.

Contract: `explore_distributed(config, pool, ...)` searches the same bounded space as
`etcdspec.model.exhaustive.explore_exhaustive(config, ...)` with one SearchShard
(etcdspec.model.distributed_shard) per worker of `pool` (etcdspec.workers): each shard
owns the states that hash to it and their share of the visited set. The search goes
level by level (breadth-first); within a level, rounds of `receive` (the batches routed to their owners) and `expand`
(every shard, at most `slice_size` states each) run until every shard's frontier is
expanded (a round is one `step` call per shard: receive what
was routed to it in the last round, then expand its next slice). Then each shard makes its level's winners visited
and the coordinator merges their tags into global ranks: the next level's order, which is
the single-process search's discovery order.

The result is the single-process one: the same verdict, the same distinct-state count,
depth and counterexample (the first violation in discovery order: the smallest depth,
then the smallest (parent rank, successor index) tag), and with `max_states` the same
count the single-process search stops at. Only the time budget is met at round
boundaries, and `cpu_seconds` adds up the workers' CPU time.

Progress (`progress`, about once a second): states, depth, rate and each worker's
figures. A worker lost in the middle raises etcdspec.workers.WorkerLost (never a result). No
I/O besides the pool's calls.
"""

from __future__ import annotations

import heapq
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from etcdspec.model.actions import Action
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.distributed_shard import NO_TAG, LevelEnd, SearchShard, ShardStats
from etcdspec.model.exhaustive import ExhaustiveResult, finite_config
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.search_cache import SearchCache
from etcdspec.verdict import Verdict
from etcdspec.workers import WorkerPool

SLICE_SIZE = 10_000  # frontier states a shard expands per step call (a call costs 1-20 ms)


@dataclass(frozen=True)
class DistributedProgress:
    distinct_states: int  # visited before this level plus this level's new states so far
    depth: int
    seconds: float
    workers: tuple[ShardStats, ...]

    def describe(self) -> str:
        rate = self.distinct_states / self.seconds if self.seconds > 0 else 0.0
        shards = "; ".join(s.describe() for s in self.workers)
        return (
            f"depth {self.depth}, {self.distinct_states:,} distinct states, "
            f"{rate:,.0f} states/s [{shards}]"
        )


def explore_distributed(
    config: ClusterConfig,
    pool: WorkerPool,
    max_depth: int | None = None,
    max_states: int | None = None,
    time_budget_s: float | None = None,
    progress: Callable[[DistributedProgress], None] | None = None,
    slice_size: int = SLICE_SIZE,
) -> ExhaustiveResult:
    """Search `config`'s bounded space on `pool`'s workers (see the module docstring).
    The pool is started with the shards here and is not closed (its owner closes it)."""
    return _Search(config, pool, max_depth, max_states, time_budget_s, progress, slice_size).run()


class _Search:
    def __init__(
        self,
        config: ClusterConfig,
        pool: WorkerPool,
        max_depth: int | None,
        max_states: int | None,
        time_budget_s: float | None,
        progress: Callable[[DistributedProgress], None] | None,
        slice_size: int,
    ) -> None:
        self.config = finite_config(config)
        self.pool = pool
        self.max_depth = max_depth
        self.max_states = max_states
        self.time_budget_s = time_budget_s
        self.progress = progress
        self.slice_size = slice_size
        self.started = time.monotonic()
        self.last_report = self.started
        self.depth = 0
        self.visited = 0
        self.stats: tuple[ShardStats, ...] = ()

    def run(self) -> ExhaustiveResult:
        pool = self.pool
        size = pool.size
        pool.start(SearchShard, [(self.config, index, size) for index in range(size)])
        seeded = pool.call("seed", [()] * size)
        owners = [index for index, answer in enumerate(seeded) if answer != NO_TAG]
        if len(owners) != 1:
            raise RuntimeError(f"the start state is owned by shards {owners}, not by one")
        self.visited = 1
        if seeded[owners[0]] == 0:
            return self.finish(
                Verdict.FALSE, "the initial state violates an invariant", (owners[0], 0)
            )
        frontier = 1
        while frontier:
            if self.max_depth is not None and self.depth >= self.max_depth:
                return self.finish(Verdict.UNKNOWN, f"max_depth {self.max_depth} reached")
            self.depth += 1
            if not self.expand_level():
                budget = self.time_budget_s
                return self.finish(Verdict.UNKNOWN, f"time budget {budget:g} s spent")
            ends: list[LevelEnd] = pool.call("end_level", [()] * size)
            self.stats = tuple(end.stats for end in ends)
            ranks = _global_ranks([_ints(end.tags) for end in ends])
            found = self.first_violation(ends, ranks)
            new = sum(len(rank_list) for rank_list in ranks)
            if found is not None:
                shard, local_id, rank = found
                count = self.visited + rank + 1
                if self.max_states is None or count <= self.max_states:
                    self.visited = count
                    return self.finish(Verdict.FALSE, "an invariant is violated", (shard, local_id))
            if self.max_states is not None and self.visited + new >= self.max_states:
                self.visited = self.max_states
                return self.finish(Verdict.UNKNOWN, f"max_states {self.max_states} reached")
            self.visited += new
            pool.call("begin_level", [(_packed(shard_ranks),) for shard_ranks in ranks])
            frontier = new
        self.depth -= 1  # the last level produced no new state
        return self.finish(Verdict.TRUE, "the bounded state space is exhausted")

    def expand_level(self) -> bool:
        """Expand the level; False when the time budget ran out first. A pool whose
        workers run at once (`concurrent`) gets one thread here per worker, so that no
        worker waits for the others between its slices; otherwise rounds in step."""
        if getattr(self.pool, "concurrent", False):
            return _Level(self).run()
        return self.expand_in_rounds()

    def expand_in_rounds(self) -> bool:
        """Rounds of receive-and-expand on every shard at once until every shard's
        frontier is done (deterministic: the in-process pool's path)."""
        pool, size = self.pool, self.pool.size
        inbound: list[list[tuple[int, bytes]]] = [[] for _ in range(size)]
        while True:
            answers = pool.call("step", [(inbound[i], self.slice_size) for i in range(size)])
            inbound = [[] for _ in range(size)]
            for sender, (batches, _) in enumerate(answers):
                for owner, blob in batches.items():
                    inbound[owner].append((sender, blob))
            left = sum(remaining for _, remaining in answers)
            if left == 0:
                if any(inbound):
                    pool.call("receive", [(batches,) for batches in inbound])
                return True
            now = time.monotonic()
            if self.time_budget_s is not None and now - self.started > self.time_budget_s:
                return False
            if self.progress is not None and now - self.last_report >= 1.0:
                self.last_report = now
                self.stats = tuple(pool.call("stats", [()] * size))
                seen = self.visited + sum(s.pending for s in self.stats)
                self.progress(DistributedProgress(seen, self.depth, now - self.started, self.stats))

    def first_violation(
        self, ends: list[LevelEnd], ranks: list[list[int]]
    ) -> tuple[int, int, int] | None:
        """(shard, local id, global rank) of the level's violating state of least rank."""
        best: tuple[int, int, int] | None = None
        for shard, end in enumerate(ends):
            if end.violation_tag == NO_TAG:
                continue
            rank = ranks[shard][_ints(end.tags).index(end.violation_tag)]
            if best is None or rank < best[2]:
                best = (shard, end.violation_id, rank)
        return best

    def finish(
        self, verdict: Verdict, reason: str, violating: tuple[int, int] | None = None
    ) -> ExhaustiveResult:
        size = self.pool.size
        if not self.stats:
            self.stats = tuple(self.pool.call("stats", [()] * size))
        counterexample = None
        violation = None
        if violating is not None:
            counterexample, violation = self.rebuild(*violating)
        return ExhaustiveResult(
            verdict=verdict,
            distinct_states=self.visited,
            depth_reached=self.depth,
            seconds=time.monotonic() - self.started,
            counterexample=counterexample,
            violation=violation,
            reason=f"{reason} ({self.pool.describe()})",
            config=self.config,
            cpu_seconds=sum(s.cpu_seconds for s in self.stats),
        )

    def rebuild(
        self, shard: int, local_id: int
    ) -> tuple[list[tuple[Action, Cluster]], InvariantViolation]:
        """The run to the violating state: follow the links back to the start, then
        replay the successor indices forward (the first-found concrete states)."""
        positions: list[int] = []
        owner, at = shard, local_id
        while owner >= 0:
            owner, at, position = self.pool.call_one(owner, "path", at)
            if owner >= 0:
                positions.append(position)
        positions.reverse()
        cache = SearchCache()
        state = Cluster.start(self.config)
        run: list[tuple[Action, Cluster]] = []
        for position in positions:
            for index, (action, successor) in enumerate(state.successors(cache)):
                if index == position:
                    run.append((action, successor))
                    state = successor
                    break
            else:
                raise RuntimeError(f"a path names successor {position}, which does not exist")
        try:
            state.check_invariants()
        except InvariantViolation as violation:
            return run, violation
        raise RuntimeError("the rebuilt run does not end in a violating state")


class _Level:
    """One level expanded without rounds: a thread per worker calls its shard's `step`
    with whatever was routed to it, again and again, and routes what the step returns to
    the owners' inboxes; each shard's inbox is read in the order its senders sent (a
    sender's batches are numbered against the ones before). The level is done when every
    shard has expanded its frontier, no step is running and every inbox is empty. Which
    batch arrives first does not change the result: of the offers of one state the
    smallest tag wins, whenever it comes."""

    def __init__(self, search: _Search) -> None:
        self.search = search
        size = search.pool.size
        self.lock = threading.Condition()
        self.inbox: list[list[tuple[int, bytes]]] = [[] for _ in range(size)]
        self.expanded = [False] * size
        self.running = [False] * size
        self.errors: list[BaseException] = []
        self.out_of_time = False

    def run(self) -> bool:
        search = self.search
        threads = [
            threading.Thread(target=self.serve, args=(index,), daemon=True)
            for index in range(search.pool.size)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(1.0)
                now = time.monotonic()
                if search.progress is not None and now - search.last_report >= 1.0:
                    search.last_report = now
                    search.stats = tuple(search.pool.call("stats", [()] * search.pool.size))
                    seen = search.visited + sum(s.pending for s in search.stats)
                    search.progress(
                        DistributedProgress(seen, search.depth, now - search.started, search.stats)
                    )
        if self.errors:
            raise self.errors[0]
        return not self.out_of_time

    def serve(self, index: int) -> None:
        search = self.search
        try:
            while True:
                with self.lock:
                    while True:
                        if self.errors or self.out_of_time:
                            return
                        if self.inbox[index] or not self.expanded[index]:
                            break
                        if all(self.expanded) and not any(self.running) and not any(self.inbox):
                            self.lock.notify_all()
                            return
                        self.lock.wait()
                    batches, self.inbox[index] = self.inbox[index], []
                    self.running[index] = True
                    limit = 0 if self.expanded[index] else search.slice_size
                out, left = search.pool.call_one(index, "step", batches, limit)
                with self.lock:
                    for owner, blob in out.items():
                        self.inbox[owner].append((index, blob))
                    self.running[index] = False
                    self.expanded[index] = left == 0
                    budget = search.time_budget_s
                    if budget is not None and time.monotonic() - search.started > budget:
                        self.out_of_time = True
                    self.lock.notify_all()
        except BaseException as error:  # handed to the coordinator's thread
            with self.lock:
                self.errors.append(error)
                self.lock.notify_all()


def _global_ranks(tags: list[list[int]]) -> list[list[int]]:
    """Each shard's sorted tags -> their positions in the merge of all of them."""
    ranks: list[list[int]] = [[0] * len(shard_tags) for shard_tags in tags]
    streams = [_tagged(shard, shard_tags) for shard, shard_tags in enumerate(tags)]
    for rank, (_, shard, position) in enumerate(heapq.merge(*streams)):
        ranks[shard][position] = rank
    return ranks


def _tagged(shard: int, tags: list[int]) -> Iterator[tuple[int, int, int]]:
    for position, tag in enumerate(tags):
        yield tag, shard, position


def _ints(packed: bytes) -> list[int]:
    """Tags and ranks cross the engine as packed 64-bit ints: Dask walks a list argument
    element by element (about 30 µs per int), bytes go as one block."""
    return array("q", packed).tolist()


def _packed(values: list[int]) -> bytes:
    return array("q", values).tobytes()

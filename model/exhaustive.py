"""Bounded exhaustive exploration of the cluster: breadth-first over reachable states.

Contract: `explore_exhaustive(config, ...)` visits every state reachable from
`Cluster.start(config)` within the config's bounds (max_term, max_log, max_messages,
max_crashes; see `finite_config` for the defaults and what is left out; `small_config`
gives a config sized for search), deduplicating states by `canonical_fingerprint()` (symmetry reduction over
node names), and checks `check_invariants()` on each distinct state. Breadth-first order
makes the first violation found a shortest one; its run is rebuilt by replaying the
recorded actions from the start state, so the counterexample is a list of concrete
(action, state-after) pairs.

Speed: one `SearchCache` (etcdspec.model.search_cache) serves the whole search, so each
node transition, renamed node or message and invariant check on the same (nodes,
history) is computed once; states come out exactly as without it (the state counts of
the pinned bounds are tested).

Verdicts: FALSE with a counterexample when an invariant breaks; TRUE only when the whole
bounded space was exhausted; UNKNOWN when max_depth, max_states or the time budget ran
out first. No I/O except calling `progress` (if given) about once a second.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from etcdspec.model.actions import Action
from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig, ConfigError
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.search_cache import SearchCache
from etcdspec.verdict import Verdict


@dataclass(frozen=True)
class ExploreProgress:
    distinct_states: int
    depth: int
    frontier: int
    seconds: float

    def describe(self) -> str:
        rate = self.distinct_states / self.seconds if self.seconds > 0 else 0.0
        return (
            f"depth {self.depth}, {self.distinct_states} distinct states, frontier "
            f"{self.frontier}, {rate:,.0f} states/s"
        )


@dataclass(frozen=True)
class ExhaustiveResult:
    verdict: Verdict
    distinct_states: int
    depth_reached: int
    seconds: float
    counterexample: list[tuple[Action, Cluster]] | None
    violation: InvariantViolation | None
    reason: str  # why the search stopped, one line
    config: ClusterConfig | None = None
    cpu_seconds: float = 0.0  # process CPU time: the rate that does not depend on load

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.seconds if self.seconds > 0 else 0.0

    @property
    def states_per_cpu_second(self) -> float:
        return self.distinct_states / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    def describe(self) -> str:
        head = (
            f"exhaustive: {self.verdict.describe()} — {self.distinct_states} distinct states, "
            f"depth {self.depth_reached}, {self.seconds:.2f} s "
            f"({self.states_per_second:,.0f} states/s; "
            f"{self.states_per_cpu_second:,.0f} per CPU second); {self.reason}"
        )
        if self.violation is None or self.counterexample is None:
            return head
        lines = [head, f"violation: {self.violation.describe()}", "shortest run:"]
        for number, (action, _) in enumerate(self.counterexample, start=1):
            lines.append(f"  {number:>3}. {action.describe()}")
        if self.counterexample:
            lines.append("final state:")
            final = self.counterexample[-1][1].describe()
            lines.extend(f"  {line}" for line in final.splitlines())
        return "\n".join(lines)


def small_config(
    nodes: int = 3,
    max_term: int = 2,
    max_log: int = 1,
    max_messages: int = 2,
    bugs: BugSet = NO_BUGS,
    **more: Any,
) -> ClusterConfig:
    """A cluster config sized for exhaustive search (bounds above; `more` overrides).

    Timeouts are nondeterministic actions, every step persists at once (persist="sync";
    pass persist="explicit" for the durability bugs), PreVote, CheckQuorum and the
    leader's no-op entry are off, a message sent into a full network is lost (no drop
    steps needed), no duplicates, partitions, compaction, reads or crashes (pass
    max_crashes=1 to allow one). ReadIndex stays off because each read takes a new read
    id, which would make the space infinite.
    """
    settings: dict[str, Any] = dict(
        nodes=nodes,
        timeouts="free",
        persist="sync",
        prevote=False,
        check_quorum=False,
        noop_on_leader=False,
        max_term=max_term,
        max_log=max_log,
        max_messages=max_messages,
        lossy_overflow=True,
        max_crashes=0,
        allow_drop=False,
        allow_duplicate=False,
        allow_partition=False,
        allow_compaction=False,
        reads=(),
        bugs=bugs,
    )
    settings.update(more)
    return ClusterConfig(**settings)


DEFAULT_BOUNDS = {"max_term": 2, "max_log": 2, "max_messages": 3}


def finite_config(config: ClusterConfig) -> ClusterConfig:
    """The config the search really runs: bounds left None get DEFAULT_BOUNDS, and ReadIndex
    is left out (each read takes a fresh read id, which would make the space infinite).
    Tick-counted timeouts cannot be searched exhaustively (the seeded timeout draws count
    up forever): that is a ConfigError saying to use timeouts="free"."""
    if config.timeouts != "free":
        raise ConfigError(
            'exhaustive search needs timeouts="free" (election timeouts as actions); '
            "tick-counted timeouts draw new random timeouts forever"
        )
    changes: dict[str, Any] = {
        name: value for name, value in DEFAULT_BOUNDS.items() if getattr(config, name) is None
    }
    if config.reads:
        changes["reads"] = ()
    return dataclasses.replace(config, **changes) if changes else config


def explore_exhaustive(
    config: ClusterConfig,
    max_depth: int | None = None,
    max_states: int | None = None,
    time_budget_s: float | None = None,
    progress: Callable[[ExploreProgress], None] | None = None,
) -> ExhaustiveResult:
    """Search the bounded space of `config` (see the module docstring).

    Python's cyclic garbage collector is paused while the search runs and put back as it
    was after: the search allocates millions of small acyclic tuples, which reference
    counting frees at once, and the collector's repeated passes over the growing set of
    visited states only cost time (about a fifth of it)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _search(config, max_depth, max_states, time_budget_s, progress)
    finally:
        if collecting:
            gc.enable()


def _search(
    config: ClusterConfig,
    max_depth: int | None,
    max_states: int | None,
    time_budget_s: float | None,
    progress: Callable[[ExploreProgress], None] | None,
) -> ExhaustiveResult:
    config = finite_config(config)
    started = time.monotonic()
    cpu_started = time.process_time()
    start = Cluster.start(config)
    cache = SearchCache()
    start_key = start.canonical_fingerprint(cache)
    # key -> (parent key, action from the parent's first-found concrete state)
    parents: dict[Any, tuple[Any, Action] | None] = {start_key: None}
    frontier: list[tuple[Cluster, Any]] = [(start, start_key)]
    depth = 0
    last_report = started

    def finish(
        verdict: Verdict, reason: str, violation: InvariantViolation | None, key: Any
    ) -> ExhaustiveResult:
        counterexample = _rebuild(start, parents, key) if key is not None else None
        return ExhaustiveResult(
            verdict=verdict,
            distinct_states=len(parents),
            depth_reached=depth,
            seconds=time.monotonic() - started,
            counterexample=counterexample,
            violation=violation,
            reason=reason,
            config=config,
            cpu_seconds=time.process_time() - cpu_started,
        )

    try:
        start.check_invariants(cache=cache)
    except InvariantViolation as violation:
        return finish(
            Verdict.FALSE, "the initial state violates an invariant", violation, start_key
        )

    while frontier:
        if max_depth is not None and depth >= max_depth:
            return finish(Verdict.UNKNOWN, f"max_depth {max_depth} reached", None, None)
        depth += 1
        next_frontier: list[tuple[Cluster, Any]] = []
        for state, state_key in frontier:
            for action, successor in state.successors(cache):
                key = successor.canonical_fingerprint(cache)
                known = len(parents)
                parents.setdefault(key, (state_key, action))
                if len(parents) == known:
                    continue
                try:
                    successor.check_invariants(state, cache)
                except InvariantViolation as violation:
                    return finish(Verdict.FALSE, "an invariant is violated", violation, key)
                next_frontier.append((successor, key))
                if max_states is not None and len(parents) >= max_states:
                    return finish(Verdict.UNKNOWN, f"max_states {max_states} reached", None, None)
            now = time.monotonic()
            if time_budget_s is not None and now - started > time_budget_s:
                return finish(Verdict.UNKNOWN, f"time budget {time_budget_s:g} s spent", None, None)
            if progress is not None and now - last_report >= 1.0:
                last_report = now
                progress(ExploreProgress(len(parents), depth, len(next_frontier), now - started))
        frontier = next_frontier
    depth -= 1  # the last level produced no new state
    return finish(Verdict.TRUE, "the bounded state space is exhausted", None, None)


def _rebuild(
    start: Cluster, parents: dict[Any, tuple[Any, Action] | None], key: Any
) -> list[tuple[Action, Cluster]]:
    actions: list[Action] = []
    link = parents[key]
    while link is not None:
        parent_key, action = link
        actions.append(action)
        link = parents[parent_key]
    actions.reverse()
    run: list[tuple[Action, Cluster]] = []
    state = start
    for action in actions:
        state = state.apply(action)
        run.append((action, state))
    return run

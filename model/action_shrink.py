"""Action-level shrinking: a failing run's model steps replayed on the cluster, and cut
down by delta debugging while the replay still violates the same invariant.

Contract
- `replay(config, actions)` runs the actions from `Cluster.start(config)`, skipping any
  that is no longer enabled (a message not in flight, a node down, ...), checks the
  invariants and the responses' postconditions after each (as the cluster machine
  does), and stops at the first violation.
- `shrink_actions(config, actions, invariant, max_replays)` removes chunks of steps
  (halving their size down to single steps) while a replay still violates
  `invariant`; at most `max_replays` replays. None when the run does not replay to
  that violation. The result (`ShrunkRun`) holds the kept steps' (label, state) trace.
- Deterministic: the same actions give the same result. No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from etcdspec.model.actions import Action
from etcdspec.model.cluster import Cluster, IllegalActionError
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.response_oracle import check_step_responses


@dataclass(frozen=True)
class ShrunkRun:
    """A failing run shrunk by replay: its (label, state) steps and the violation."""

    trace: list[tuple[str, Any]]
    violation: tuple[str, str]  # (invariant, detail)
    original: int  # steps before shrinking


def replay(
    config: ClusterConfig, actions: Sequence[Action], postconditions: bool = True
) -> tuple[list[Action], list[tuple[str, Any]], InvariantViolation | None]:
    """Run `actions` from the start state, skipping any that is no longer enabled (a
    message not in flight, a node down, ...), checking invariants after each (and the
    responses of its outputs, as the cluster machine does, unless `postconditions` is
    off); stops at the first violation. Returns the actions kept, their (label, state)
    and the violation."""
    cluster = Cluster.start(config)
    kept: list[Action] = []
    trace: list[tuple[str, Any]] = []
    for action in actions:
        try:
            after = cluster.apply(action)
        except IllegalActionError:
            continue
        kept.append(action)
        trace.append((action.describe(), after))
        try:
            after.check_invariants(cluster)
            if postconditions:
                check_step_responses(cluster, after, action)
        except InvariantViolation as violation:
            return kept, trace, violation
        cluster = after
    return kept, trace, None


def shrink_actions(
    config: ClusterConfig,
    actions: Sequence[Any],
    invariant: str,
    max_replays: int = 2000,
) -> ShrunkRun | None:
    """Delta debugging over the model steps of a failing run: remove chunks (halving
    their size down to single steps) while a replay still violates `invariant`.
    None when the run does not replay to that violation (e.g. a watch check failed)."""
    if any(action is None for action in actions):
        actions = [a for a in actions if a is not None]
    current, trace, violation = replay(config, actions)
    if violation is None or violation.invariant != invariant:
        return None
    original = len(actions)
    replays = 1
    chunk = max(1, len(current) // 2)
    while chunk >= 1 and replays < max_replays:
        start = len(current) - chunk
        changed = False
        while start >= 0 and replays < max_replays:
            candidate = current[:start] + current[start + chunk :]
            kept, candidate_trace, found = replay(config, candidate)
            replays += 1
            if found is not None and found.invariant == invariant:
                current, trace, violation, changed = kept, candidate_trace, found, True
                start = min(start, len(current)) - chunk
            else:
                start -= chunk
        if not changed:
            chunk //= 2
    assert violation is not None
    return ShrunkRun(trace, (violation.invariant, violation.detail), original)

"""Shorten a violating run by replaying it on the finite evaluator.

Bounded model checking asks the solver for some violating run, not the shortest: a
run may carry steps the violation does not need (a follower's restart, a leader's
append to itself, a round's idle turns filled with harmless actions). `shorten` drops
steps one at a time, from the last to the first, and keeps a drop when the rest still
replays — every step enabled in the state before it (`evaluator.enabled`), its
post-state computed by `evaluator.step` — and still ends in a state where one of the
checked properties fails. The states it returns are the finite evaluator's own
reading of the run, a second opinion independent of the Z3 encoding; if the run as
found does not replay, `shorten` says so (`None`) rather than return it. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from etcdspec.spec import ast
from etcdspec.spec.counterexample import format_value
from etcdspec.spec.evaluator import Instance, enabled, holds, step
from etcdspec.spec.loader import LoadedSpec

Step = tuple[str, Mapping[str, Any]]  # action name, parameter values (element names)


def describe_step(action: str, params: Mapping[str, Any]) -> str:
    """`action(p=v, ...)`, as counterexamples label their steps."""
    return f"{action}({', '.join(f'{n}={format_value(v)}' for n, v in params.items())})"


def replay(
    loaded: LoadedSpec, instance: Instance, first: Mapping[str, Any], steps: Sequence[Step]
) -> list[dict[str, Any]] | None:
    """The states of the run from `first` through `steps`, or None if a step is not
    enabled where it is taken."""
    states = [dict(first)]
    for action, params in steps:
        if not enabled(loaded, action, params, states[-1], instance):
            return None
        states.append(step(loaded, action, params, states[-1], instance))
    return states


def shorten(
    loaded: LoadedSpec,
    instance: Instance,
    first: Mapping[str, Any],
    steps: Sequence[Step],
    props: Sequence[ast.FormulaDecl],
) -> tuple[list[Step], list[dict[str, Any]]] | None:
    """A sub-run of `steps` (same order) that still replays from `first` and still ends
    where one of `props` fails, with its states; None if `steps` itself does not."""

    def violating(candidate: Sequence[Step]) -> list[dict[str, Any]] | None:
        states = replay(loaded, instance, first, candidate)
        if states is None:
            return None
        last = states[-1]
        return states if any(not holds(loaded, p.formula, last, instance) for p in props) else None

    kept = list(steps)
    states = violating(kept)
    if states is None:
        return None
    for index in reversed(range(len(kept))):
        candidate = kept[:index] + kept[index + 1 :]
        shorter = violating(candidate)
        if shorter is not None:
            kept, states = candidate, shorter
    return kept, states

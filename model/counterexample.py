"""Counterexamples found by exploration: numbered steps with the states that matter.

A counterexample is the run that broke an invariant, as it is shown to people and
written for tools. It is built from plain values only: an initial abstract state (a
mapping of variable name to plain value, as `Cluster.abstract()` gives it), then one
(label, abstract state) pair per step. Nothing here knows Raft or the store.

Contract:
- `Counterexample.describe()` is the one canonical text: a header naming the violated
  invariant, then numbered steps, each with its action label and the state changes it
  made (path: before → after), then the invariant's own detail text.
- `Counterexample.to_itf()` gives an `etcdspec.itf.ItfTrace` (ITF JSON, Apalache and
  Quint read it): one state per step, each after the first labelled in `#meta.action`.
- The initial state is shown whole, one line per record (a node's fields on its line).
- The changes shown per step are capped (`MAX_CHANGES_PER_STEP`) with a line saying how
  many more there are and that the ITF trace (`--itf`) keeps all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from etcdspec.itf import ItfTrace

MAX_CHANGES_PER_STEP = 14


@dataclass(frozen=True)
class Step:
    """One step of a counterexample: its 1-based number, action label and its effects."""

    number: int
    label: str
    changes: tuple[str, ...]
    state: Mapping[str, Any] = field(compare=False)

    def describe(self) -> str:
        lines = [f"{self.number:3d}. {self.label}"]
        shown = self.changes[:MAX_CHANGES_PER_STEP]
        lines += [f"       {change}" for change in shown]
        hidden = len(self.changes) - len(shown)
        if hidden > 0:
            lines.append(f"       … {hidden} more change(s), see the ITF trace")
        if not self.changes:
            lines.append("       (no state change)")
        return "\n".join(lines)


@dataclass(frozen=True)
class Counterexample:
    """A run of the model that violates `invariant`, shortest Hypothesis or BFS found."""

    machine: str  # "cluster" or "store"
    invariant: str
    detail: str
    initial: Mapping[str, Any] = field(compare=False)
    steps: tuple[Step, ...]
    context: str = ""  # e.g. "3 nodes, bugs: figure8_commit, seed 4"
    config: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # the cluster's config as JSON (model/cluster_config.py config_to_json), written into
    # the ITF's #meta so the run can be rebuilt (`etcdspec replay --on spec`); {} if none

    def describe(self) -> str:
        context = f" ({self.context})" if self.context else ""
        lines = [
            f"Counterexample: invariant {self.invariant} violated after "
            f"{len(self.steps)} step(s) of the {self.machine} model{context}",
            "  0. initial state",
        ]
        lines += [f"       {line}" for line in summarize(self.initial)]
        lines += [step.describe() for step in self.steps]
        lines.append(f"Violated: {self.invariant}")
        lines += [f"  {line}" for line in self.detail.splitlines()]
        return "\n".join(lines)

    def to_itf(self) -> ItfTrace:
        variables = sorted(self.initial)
        trace = ItfTrace(
            variables=variables,
            source=f"etcdspec explore ({self.machine} model)",
            description=f"violates {self.invariant}"
            + (f"; {self.context}" if self.context else ""),
            meta={"etcdspec-config": dict(self.config)} if self.config else {},
        )
        trace.add_state(self.initial)
        for step in self.steps:
            trace.add_state(step.state, action=step.label)
        return trace

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "invariant": self.invariant,
            "detail": self.detail,
            "context": self.context,
            "steps": [{"label": s.label, "changes": list(s.changes)} for s in self.steps],
        }


def build(
    machine: str,
    invariant: str,
    detail: str,
    initial: Mapping[str, Any],
    labelled_states: Sequence[tuple[str, Mapping[str, Any]]],
    context: str = "",
    config: Mapping[str, Any] | None = None,
) -> Counterexample:
    """A counterexample from the initial abstract state and each step's (label, state)."""
    steps = []
    before = initial
    for number, (label, after) in enumerate(labelled_states, start=1):
        steps.append(Step(number, label, tuple(changes(before, after)), after))
        before = after
    return Counterexample(
        machine, invariant, detail, initial, tuple(steps), context, dict(config or {})
    )


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """Plain value -> {path: text of a leaf}; dicts by key (`a.b`), sequences by index."""
    out: dict[str, str] = {}
    if isinstance(value, Mapping) and value:
        for key in sorted(value, key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            out.update(flatten(value[key], path))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{index}]"))
    else:
        out[prefix] = text(value)
    return out


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The leaves that differ between two abstract states, as `path: old → new` lines."""
    old, new = flatten(before), flatten(after)
    lines = []
    for path in sorted(old.keys() | new.keys(), key=_path_order):
        if path not in new:
            if not _became_container(path, old[path], new):
                lines.append(f"{path}: {old[path]} → (gone)")
        elif path not in old:
            if not _became_container(path, new[path], old):
                lines.append(f"{path}: (new) {new[path]}")
        elif old[path] != new[path]:
            lines.append(f"{path}: {old[path]} → {new[path]}")
    return lines


def _became_container(path: str, leaf: str, other: Mapping[str, str]) -> bool:
    """An empty list/dict leaf whose path has children on the other side: not a change."""
    return leaf in ("[]", "{}", "") and any(
        key.startswith(path + "[") or key.startswith(path + ".") for key in other
    )


def summarize(state: Mapping[str, Any]) -> list[str]:
    """Every leaf of a state (the initial state: nothing left out), one line per record:
    `nodes.n1: applied_index = 0, commit_index = 0, …`; a top-level leaf as `path = value`."""
    groups: dict[str, list[str]] = {}
    for path, value in flatten(state).items():
        owner, dot, leaf = path.rpartition(".")
        if not dot or "[" in leaf:
            owner, leaf = path, ""
        groups.setdefault(owner, []).append(f"{leaf} = {value}" if leaf else value)
    return [
        f"{owner}: {', '.join(items)}"
        if len(items) > 1 or "=" in items[0]
        else f"{owner} = {items[0]}"
        for owner, items in groups.items()
    ]


def text(value: Any) -> str:
    """The compact text of a leaf value (bytes decoded, tuples in parentheses)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        return "(" + ", ".join(text(v) for v in value) + ")"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(text(v) for v in value)) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{text(k)}: {text(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "none"
    return str(value)


def _path_order(path: str) -> tuple[Any, ...]:
    """Sort paths so that `log[10]` comes after `log[9]`."""
    parts: list[Any] = []
    for piece in path.replace("[", ".[").split("."):
        if piece.startswith("[") and piece.endswith("]") and piece[1:-1].isdigit():
            parts.append((1, int(piece[1:-1]), ""))
        else:
            parts.append((0, 0, piece))
    return tuple(parts)

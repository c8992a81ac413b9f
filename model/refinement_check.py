"""Refinement checks: a model step, abstracted, is a sequence of spec/raft_steps.spec
actions on the acting node.

Contract
- `check_step(pre, action, post, stats)` abstracts the acting node before and after
  (model/refinement_abstraction.py), plans the step (model/refinement_plans.py) and runs
  the plan through the finite evaluator from the node's abstract pre-state: each action
  must be enabled (if not, the first failing `require` is named with its spec line) and
  the sequence must end in the abstract post-state (if not, the differing symbols are
  listed); no other node may change. With `check_properties=True` the spec's safety
  properties and invariants are evaluated on the post-state as well. It raises
  `RefinementViolation` (an InvariantViolation named "Refinement") whose `describe()`
  shows the model action, the node's abstract pre and post, the plan and the failed
  part. `stats` counts the spec actions checked (a witness that a run was not vacuous).
- `check_plan(plan, before, after, nodes)` is that check for one plan: '' when it
  holds, else what failed. Only the acting node enters the evaluated state: the
  actions are node-local, so this is exact and keeps a check cheap; the index range is
  a window over the live logs. Results are memoised (a pure function) until
  `forget_checked_plans()`.
- `check_initial(cluster)`: the cluster's abstract state satisfies the spec's init.
- The spec's properties are proved inductive for these actions (`etcdspec prove
  spec/raft_steps.spec`), so checked steps from an initial state keep them;
  `check_properties=True` re-evaluates them (slower). No I/O besides reading the spec.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from etcdspec.model.actions import Action
from etcdspec.model.cluster import Cluster
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_messages import node_name
from etcdspec.model.refinement_abstraction import (
    SPEC_PATH,
    NodeView,
    abstract_for_spec,
    make_instance,
    node_view,
    raft_steps_spec,
    spec_state,
    view_bounds,
)
from etcdspec.model.refinement_plans import (
    SpecStep,
    StepPlan,
    acting_node,
    plan_step,
    resolve_action,
)
from etcdspec.spec import ast
from etcdspec.spec.evaluator import Instance, enabled, holds, initial, step, violated_properties
from etcdspec.spec.loader import LoadedSpec


class RefinementViolation(InvariantViolation):
    """A model step that no sequence of spec actions explains; `describe()` says which
    model action, the node's abstract pre and post, the plan, and what failed."""

    def __init__(
        self, action: str, node: int, before: NodeView, after: NodeView, plan: str, failed: str
    ) -> None:
        self.action = action
        self.node = node
        self.before = before
        self.after = after
        self.plan = plan
        self.failed = failed
        super().__init__("Refinement", self._text())

    def _text(self) -> str:
        who = node_name(self.node) if self.node else "network"
        return (
            f"model step {self.action} on {who} does not refine raft_steps.spec\n"
            f"  pre:    {self.before.describe()}\n"
            f"  post:   {self.after.describe()}\n"
            f"  plan:   {self.plan}\n"
            f"  failed: {self.failed}"
        )

    def describe(self) -> str:
        return f"Refinement: {self._text()}"


@dataclass
class RefinementStats:
    """What a run checked: spec actions by name, stutters, and model steps."""

    actions: Counter[str] = field(default_factory=Counter)
    stutters: int = 0
    steps: int = 0

    def describe(self) -> str:
        counts = ", ".join(f"{name} {count}" for name, count in sorted(self.actions.items()))
        return f"{self.steps} model steps, {self.stutters} stutters; spec actions: {counts}"


def _requirement_text(loaded: LoadedSpec, req: ast.Require) -> str:
    line, end = req.span.line, max(req.span.end_line, req.span.line)
    lines = SPEC_PATH.read_text().splitlines() if line else []
    if 0 < line <= end <= len(lines):
        source = " ".join(text.strip() for text in lines[line - 1 : end])
    else:
        source = "require ..."
    if req.label and f"[{req.label}]" not in source:
        source = f"[{req.label}] {source}"
    return f"{source} (raft_steps.spec:{line})"


def _failed_guard(
    loaded: LoadedSpec, spec_step: SpecStep, state: Mapping[str, Any], instance: Instance
) -> str:
    """The first `require` of the step's action that fails in `state`, as spec text."""
    action = loaded.spec.action(spec_step.action)
    assert action is not None, f"raft_steps.spec has no action {spec_step.action}"
    params = dict(spec_step.params)
    for stmt in action.body:
        if isinstance(stmt, ast.Require) and not holds(
            loaded, stmt.formula, state, instance, params
        ):
            return f"guard {_requirement_text(loaded, stmt)} fails"
    raise AssertionError(f"{spec_step.describe()} is not enabled, yet every guard holds")


def _key_text(key: Any) -> str:
    """A state key as spec arguments: node ids as names (n2), indices as numbers."""
    if isinstance(key, tuple):
        return ", ".join([node_name(key[0]), *(str(k) for k in key[1:])])
    return node_name(key)


def _diff(expected: Mapping[str, Any], actual: Mapping[str, Any], n: int) -> str:
    """The symbols on which two node-n states differ, as spec terms."""
    parts = []
    for name in sorted(expected):
        want, got = expected[name], actual[name]
        if want == got:
            continue
        if isinstance(want, dict):
            keys = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            shown = ", ".join(
                f"{name}({_key_text(k)}): spec {want.get(k)} model {got.get(k)}" for k in keys
            )
            parts.append(shown)
        else:
            parts.append(f"{name}: spec {sorted(want)} model {sorted(got)}")
    return "; ".join(parts)


def check_plan(
    plan: StepPlan, before: NodeView, after: NodeView, nodes: int, check_properties: bool = False
) -> str:
    """'' when the plan takes `before` to `after` in the spec; else what failed."""
    if plan.unexplained:
        return plan.unexplained
    loaded = raft_steps_spec()
    n = plan.node
    max_term, max_index = view_bounds((before, after))
    sent = dict(plan.sent)
    max_term = max([max_term, *sent.values()])
    # The index range is a window: from the lowest snapshot (in memory or durable) or
    # index parameter up. Below it every log position is term0 before and after and no
    # action reads it, so the window decides the same as the range from index0 (and the
    # cost of the spec's index quantifiers follows the live log, not its history).
    min_index = min(before.snap_index, before.dsnap_index, after.snap_index, after.dsnap_index)
    for spec_step in plan.steps:
        for name, value in spec_step.params:
            if name in ("t", "lt", "pt", "st"):
                max_term = max(max_term, value)
            elif name in ("i", "li", "pi", "si"):
                max_index = max(max_index, value)
                min_index = min(min_index, value)
    indices = range(min_index, max_index + 1)
    # with membership (views carry configurations) the instance has every set of nodes
    # as a configuration and a quorum
    membership = bool(before.config or after.config)
    instance = make_instance(
        nodes,
        max_term,
        max_index,
        sent,
        plan.sent_commit,
        plan.sent_last,
        min_index=min_index,
        membership=membership,
    )
    state = spec_state({n: before}, indices, nodes)
    for spec_step in plan.steps:
        params = dict(spec_step.params)
        if not enabled(loaded, spec_step.action, params, state, instance):
            return f"{spec_step.describe()}: {_failed_guard(loaded, spec_step, state, instance)}"
        state = step(loaded, spec_step.action, params, state, instance)
    actual = spec_state({n: after}, indices, nodes)
    actual = {name: _normalise(value) for name, value in actual.items()}
    expected = {name: _normalise(value) for name, value in state.items()}
    if expected != actual:
        return "the spec steps end in another state: " + _diff(expected, actual, n)
    if check_properties and plan.steps:
        own = make_instance(
            nodes,
            max_term,
            max_index,
            sent,
            plan.sent_commit,
            plan.sent_last,
            node_ids=[n],
            min_index=min_index,
            membership=membership,
        )
        broken = violated_properties(loaded, state, own)
        if broken:
            return f"the post-state breaks {', '.join(broken)}"
    return ""


@lru_cache(maxsize=8192)
def _check_plan_cached(
    plan: StepPlan, before: NodeView, after: NodeView, nodes: int, check_properties: bool
) -> str:
    """check_plan is a pure function of its arguments: Hypothesis examples replay the
    same steps (every example starts from the same bootstrap), so results are kept."""
    return check_plan(plan, before, after, nodes, check_properties)


def forget_checked_plans() -> None:
    """Empty check_step's memo of checked plans (a timed run pays for its own checks)."""
    _check_plan_cached.cache_clear()


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    return value


def check_step(
    pre: Cluster,
    action: Action,
    post: Cluster,
    stats: RefinementStats | None = None,
    check_properties: bool = False,
) -> None:
    """Raise RefinementViolation unless the model step pre --action--> post, abstracted,
    is a sequence of raft_steps actions on the acting node (or a stutter)."""
    action = resolve_action(pre, action)
    acting = acting_node(action)
    label = action.describe()
    nodes = len(pre.nodes)
    for position in range(nodes):
        n = position + 1
        node_before, node_after = pre.nodes[position], post.nodes[position]
        up_before, up_after = pre.up[position], post.up[position]
        if node_before is node_after and up_before == up_after:
            if n == acting and stats is not None:
                stats.stutters += 1
            continue
        before = node_view(node_before, up_before, pre.params)
        after = node_view(node_after, up_after, pre.params)
        if n != acting:
            if before != after:
                where = node_name(acting) if acting else "the network only"
                raise RefinementViolation(
                    label, n, before, after, f"stutter (the step acts on {where})", "it changed"
                )
            continue
        plan = plan_step(n, before, after, action, nodes)
        failed = _check_plan_cached(plan, before, after, nodes, check_properties)
        if failed:
            raise RefinementViolation(label, n, before, after, plan.describe(), failed)
        if stats is not None:
            if plan.steps:
                stats.actions.update(s.action for s in plan.steps)
            else:
                stats.stutters += 1
    if stats is not None:
        stats.steps += 1


def check_initial(cluster: Cluster) -> bool:
    """Whether a cluster's abstract state satisfies the spec's init conditions."""
    state, instance = abstract_for_spec(cluster)
    return initial(raft_steps_spec(), state, instance)

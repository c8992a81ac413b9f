"""Refinement: every step of the cluster model, abstracted, is a step of spec/raft_steps.spec.

Contract
- `abstract_for_spec(cluster)` maps a cluster to a state in the vocabulary of
  raft_steps.spec (per node: current_term, vote, role, up, snapshot index/term, the log's
  entry terms, commit_index, a leader's acknowledged index per follower (match), and
  the durable copy of term, vote and log) with a finite `Instance` (contiguous term and
  index ranges, the majorities as quorums, node 0 standing for "nobody").
- `plan_step(n, before, after, action, nodes)` names the spec actions a model step
  performs on node n, in order, with their parameters. A step is node-local (ticks,
  timeouts, proposals, deliveries act on one node) and may be several node-local
  transitions, in the order term, role, vote, log, acknowledgements, durability,
  commit: receiving AppendEntries from a new leader is adopt_term ; accept_entries ;
  persist ; advance_commit. Parameters come from the model action (the message: its
  term, prev index/term, entries, commit, acked index) and from the node's post-state
  (the term or commit index it reached); the spec's guards decide whether that was
  allowed. An empty plan is a stutter: the node's abstract state must not change.
- `check_step(pre, action, post, stats)` runs the plan through the finite evaluator
  from the acting node's abstract pre-state: each action must be enabled (if not, the
  first failing `require` is named with its spec line) and the sequence must end in the
  abstract post-state (if not, the differing symbols are listed); no other node may
  change. With `check_properties=True` the spec's safety properties and invariants are
  evaluated on the post-state as well. It raises `RefinementViolation` (an
  InvariantViolation named "Refinement") whose `describe()` shows the model action, the
  node's abstract pre and post, the plan and the failed part. `stats` counts the spec
  actions checked (a witness that a run was not vacuous).
- `RefinementMachine` is the Hypothesis cluster machine with `check_step` after every
  model step (it overrides `ClusterMachine._do`, the one place every step goes through);
  `run_exploration(options, checked)` runs it (or the plain machine) once, seeded.

Only the acting node enters the evaluated state: the actions are node-local, so this
is exact and keeps a check cheap; the index range is a window over the live logs (see
check_plan), and results are memoised within a run. The spec's properties are proved
inductive for these actions (`etcdspec prove spec/raft_steps.spec`), so checked steps
from an initial state keep them; `check_properties=True` re-evaluates them (slower). No
I/O besides reading the spec file; the clock is read only to time `run_exploration`.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, cast

from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from etcdspec.model.actions import MESSAGE_KINDS, Action
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.explore import ExploreOptions, RunRecorder, hypothesis_settings
from etcdspec.model.hypothesis_cluster import (
    ClusterMachine,
    abstract_state,
    cluster_config,
    focused,
)
from etcdspec.model.hypothesis_replay import replayable_draws
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_messages import Message, MsgType, node_name
from etcdspec.model.raft_node import Node, Role
from etcdspec.spec import ast
from etcdspec.spec.evaluator import (
    Instance,
    enabled,
    holds,
    initial,
    step,
    violated_properties,
)
from etcdspec.spec.loader import SPEC_DIR, LoadedSpec, load_spec

SPEC_PATH = SPEC_DIR / "raft_steps.spec"
NOBODY = 0
ROLE_NAMES = {
    Role.FOLLOWER: "follower",
    Role.PRE_CANDIDATE: "precandidate",
    Role.CANDIDATE: "candidate",
    Role.LEADER: "leader",
}
ROLES = ("follower", "precandidate", "candidate", "leader")
NODE_SYMBOLS = (
    "current_term",
    "vote",
    "role",
    "snap_index",
    "snap_term",
    "last_index",
    "commit_index",
    "dterm",
    "dvote",
    "dsnap_index",
    "dsnap_term",
    "dlast_index",
)
# Steps that only move messages or the partition: no node's abstract state may change.
NETWORK_KINDS = (*MESSAGE_KINDS, "partition", "heal")


@lru_cache(maxsize=1)
def raft_steps_spec() -> LoadedSpec:
    """The step-level spec, parsed and type-checked once."""
    return load_spec(str(SPEC_PATH))


# --------------------------------------------------------------------------- abstraction


class NodeView(NamedTuple):
    """One node in the spec's vocabulary (log: the entry terms after the snapshot)."""

    term: int
    vote: int
    role: str
    up: bool
    snap_index: int
    snap_term: int
    log: tuple[int, ...]
    commit_index: int
    dterm: int
    dvote: int
    dsnap_index: int
    dsnap_term: int
    dlog: tuple[int, ...]
    match: tuple[int, ...] = ()  # a leader's acked index per node (position id-1); () none

    @property
    def last_index(self) -> int:
        return self.snap_index + len(self.log)

    @property
    def dlast_index(self) -> int:
        return self.dsnap_index + len(self.dlog)

    def describe(self) -> str:
        vote = node_name(self.vote) if self.vote else "none"
        state = "up" if self.up else "down"
        log = " ".join(str(t) for t in self.log)
        dlog = " ".join(str(t) for t in self.dlog)
        return (
            f"{self.role} term {self.term} vote {vote} {state} "
            f"log [snap {self.snap_index}/{self.snap_term}] [{log}] commit {self.commit_index}; "
            f"durable term {self.dterm} vote {node_name(self.dvote) if self.dvote else 'none'} "
            f"log [snap {self.dsnap_index}/{self.dsnap_term}] [{dlog}]"
            + (f"; acks {list(self.match)}" if any(self.match) else "")
        )

    def acked(self, node: int) -> int:
        return self.match[node - 1] if self.match else 0

    def durable_holds(self, index: int) -> bool:
        """The durable log holds the in-memory log's entry at `index`."""
        if index > self.dlast_index or index > self.last_index:
            return False
        memory = _log_terms(self.snap_index, self.log, range(index, index + 1))[0]
        durable = _log_terms(self.dsnap_index, self.dlog, range(index, index + 1))[0]
        return memory == durable


def node_view(node: Node, up: bool) -> NodeView:
    log = node.log
    hard = node.hard_state()
    terms = tuple(e.term for e in log.entries)
    return NodeView(
        term=node.term,
        vote=node.vote,
        role=ROLE_NAMES[node.role],
        up=up,
        snap_index=log.snapshot.last_index,
        snap_term=log.snapshot.last_term,
        log=terms,
        commit_index=node.commit_index,
        dterm=hard.term,
        dvote=hard.vote,
        dsnap_index=hard.log.snapshot.last_index,
        dsnap_term=hard.log.snapshot.last_term,
        dlog=terms if hard.log is log else hard.log.terms(),
        match=node.match if any(node.match) else (),
    )


def cluster_views(cluster: Cluster) -> tuple[NodeView, ...]:
    return tuple(node_view(node, cluster.up[node.id - 1]) for node in cluster.nodes)


def _view_value(view: NodeView, symbol: str) -> Any:
    if symbol == "last_index":
        return view.last_index
    if symbol == "dlast_index":
        return view.dlast_index
    if symbol == "dterm":
        return view.dterm
    return getattr(view, "term" if symbol == "current_term" else symbol)


def _log_terms(snap_index: int, log: tuple[int, ...], indices: range) -> list[int]:
    """The normalised log: term0 at and below the snapshot and beyond the end."""
    last = snap_index + len(log)
    return [log[j - snap_index - 1] if snap_index < j <= last else 0 for j in indices]


def spec_state(views: Mapping[int, NodeView], indices: range, nodes: int) -> dict[str, Any]:
    """The spec state of the given nodes (by id) over an index universe, in a cluster
    of `nodes` nodes."""
    state: dict[str, Any] = {name: {} for name in NODE_SYMBOLS}
    state["up"] = {n for n, view in views.items() if view.up}
    log_term: dict[tuple[int, int], int] = {}
    dlog_term: dict[tuple[int, int], int] = {}
    for n, view in views.items():
        for name in NODE_SYMBOLS:
            state[name][n] = _view_value(view, name)
        for j, t in zip(indices, _log_terms(view.snap_index, view.log, indices), strict=True):
            log_term[(n, j)] = t
        for j, t in zip(indices, _log_terms(view.dsnap_index, view.dlog, indices), strict=True):
            dlog_term[(n, j)] = t
    state["log_term"] = log_term
    state["match"] = {
        (n, m): view.acked(m) for n, view in views.items() for m in range(1, nodes + 1)
    }
    state["dlog_term"] = dlog_term
    return state


@lru_cache(maxsize=8)
def quorums(nodes: int) -> tuple[frozenset[int], ...]:
    """The smallest majorities of nodes 1..nodes (larger ones add nothing to a check)."""
    size = nodes // 2 + 1
    return tuple(frozenset(c) for c in itertools.combinations(range(1, nodes + 1), size))


def make_instance(
    nodes: int,
    max_term: int,
    max_index: int,
    sent: Mapping[int, int] | None = None,
    sent_commit: int = 0,
    sent_last: int = 0,
    node_ids: Sequence[int] | None = None,
    min_index: int = 0,
) -> Instance:
    """Contiguous term and index ranges (the spec's next_index / next_term need them);
    node 0 is "nobody" (a rigid value outside the universe); `sent` gives the entry
    terms of the message being received. `min_index` starts the index range above 0
    (a window over the live part of the logs, see check_plan)."""
    indices = range(min_index, max_index + 1)
    sent = sent or {}
    ids = list(range(1, nodes + 1)) if node_ids is None else list(node_ids)
    return Instance(
        universes={
            "node": ids,
            "role": ROLES,
            "quorum": quorums(nodes),
            "term": range(max_term + 1),
            "index": indices,
        },
        rigid={
            "nobody": NOBODY,
            "term0": 0,
            "index0": 0,
            "follower": "follower",
            "precandidate": "precandidate",
            "candidate": "candidate",
            "leader": "leader",
            "sent_term": {j: sent.get(j, 0) for j in indices},
            "sent_commit": sent_commit,
            "sent_last": sent_last,
            "member": {(m, q) for q in quorums(nodes) for m in q},
        },
    )


def _bounds(views: Sequence[NodeView]) -> tuple[int, int]:
    max_term = max(
        [0, *(max(v.term, v.dterm, v.snap_term, v.dsnap_term, *v.log, *v.dlog) for v in views)]
    )
    max_index = max([0, *(max(v.last_index, v.dlast_index, v.commit_index) for v in views)])
    return max_term, max_index


def abstract_for_spec(cluster: Cluster) -> tuple[dict[str, Any], Instance]:
    """The whole cluster in raft_steps vocabulary, with an instance that covers it."""
    views = cluster_views(cluster)
    max_term, max_index = _bounds(views)
    instance = make_instance(len(views), max_term, max_index)
    by_id = {position + 1: view for position, view in enumerate(views)}
    return spec_state(by_id, range(max_index + 1), len(views)), instance


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class SpecStep:
    """One spec action with its parameters."""

    action: str
    params: tuple[tuple[str, Any], ...]

    def describe(self) -> str:
        args = ", ".join(f"{name}={_param_text(name, value)}" for name, value in self.params)
        return f"{self.action}({args})"


def _param_text(name: str, value: Any) -> str:
    if name == "q":
        return "{" + ",".join(node_name(m) for m in sorted(value)) + "}"
    return node_name(value) if name in ("n", "c", "m") and value else str(value)


def _spec_step(action: str, **params: Any) -> SpecStep:
    return SpecStep(action, tuple(params.items()))


@dataclass(frozen=True)
class StepPlan:
    """The spec actions a model step performs on one node (empty: a stutter), and the
    message it reacts to (for the rigid sent_term / sent_commit)."""

    node: int
    steps: tuple[SpecStep, ...]
    sent: tuple[tuple[int, int], ...] = ()
    sent_commit: int = 0
    sent_last: int = 0
    unexplained: str = ""  # a change no spec action can make, said in words

    def describe(self) -> str:
        if not self.steps:
            return "stutter (no spec action)"
        return " ; ".join(s.describe() for s in self.steps)


def _resolve(pre: Cluster, action: Action) -> Action:
    if action.kind in MESSAGE_KINDS and isinstance(action.args[0], int):
        return Action(action.kind, (pre.network.messages[action.args[0]],))
    return action


def acting_node(action: Action) -> int | None:
    """The node a model step acts on (None: a network-only step)."""
    if action.kind in NETWORK_KINDS:
        if action.kind == "deliver":
            message: Message = action.args[0]
            return message.dst
        return None
    return int(action.args[0])


def plan_step(
    n: int, before: NodeView, after: NodeView, action: Action, nodes: int = 3
) -> StepPlan:
    """The spec actions that take node n from `before` to `after` in this model step."""
    if before == after:
        return StepPlan(n, ())
    kind = action.kind
    if kind == "crash":
        return StepPlan(n, (_spec_step("crash", n=n),))
    if kind == "restart":
        return StepPlan(n, (_spec_step("restart", n=n),))
    message: Message | None = action.args[0] if kind == "deliver" else None
    steps: list[SpecStep] = []
    role, vote, commit = before.role, before.vote, before.commit_index
    # 1. the term: an election of its own, or a higher term heard of
    if after.term != before.term:
        own = message is None or (message.type == MsgType.PRE_VOTE_RESP and not message.reject)
        if own and after.vote == n and after.role in ("candidate", "leader"):
            steps.append(_spec_step("campaign", n=n, t=after.term))
            role, vote = "candidate", n
        else:
            steps.append(_spec_step("adopt_term", n=n, t=after.term))
            role, vote = "follower", NOBODY
    # 2. the role within the term
    if after.role != role:
        name = {
            "follower": "resign",
            "precandidate": "pre_campaign",
            "leader": "become_leader",
        }.get(after.role)
        if name is not None:
            steps.append(_spec_step(name, n=n))
        else:
            steps.append(_spec_step("campaign", n=n, t=after.term))
    # 3. the vote
    if after.vote != vote:
        li, lt = (0, 0)
        if message is not None and message.type == MsgType.VOTE:
            li, lt = message.log_index, message.log_term
        steps.append(_spec_step("grant_vote", n=n, c=after.vote, li=li, lt=lt))
    # 4. the log
    sent: tuple[tuple[int, int], ...] = ()
    unexplained = ""
    log_before = (before.snap_index, before.snap_term, before.log)
    log_after = (after.snap_index, after.snap_term, after.log)
    if log_after != log_before:
        if kind == "compact_log":
            steps.append(_spec_step("compact", n=n, i=after.snap_index))
        elif message is not None and message.type == MsgType.SNAPSHOT:
            snapshot = message.snapshot
            steps.append(
                _spec_step(
                    "restore_snapshot",
                    n=n,
                    t=message.term,
                    si=snapshot.last_index,
                    st=snapshot.last_term,
                )
            )
            commit = snapshot.last_index
        elif message is not None and message.type == MsgType.APPEND:
            pi = message.log_index
            sent = tuple((pi + k + 1, e.term) for k, e in enumerate(message.entries))
            steps.append(
                _spec_step(
                    "accept_entries",
                    n=n,
                    t=message.term,
                    pi=pi,
                    pt=message.log_term,
                    li=pi + len(message.entries),
                )
            )
        elif after.role == "leader" and after.last_index > before.last_index:
            for i in range(before.last_index + 1, after.last_index + 1):
                steps.append(_spec_step("leader_append", n=n, i=i))
        else:
            unexplained = (
                f"the log changed in a {kind} step that is no append, snapshot install or "
                f"compaction: [snap {before.snap_index}] {list(before.log)} -> "
                f"[snap {after.snap_index}] {list(after.log)}"
            )
    # 5. a leader's record of acknowledgements (from an AppendEntries reply)
    if after.match != before.match and after.role == "leader":
        for m in range(1, nodes + 1):
            if after.acked(m) != before.acked(m):
                i = after.acked(m)
                if message is not None and message.type == MsgType.APPEND_RESP:
                    i = message.log_index if m == message.src else i
                steps.append(_spec_step("record_ack", n=n, m=m, i=i))
    # 6. durability, then the commit index (a leader counts its own log once durable)
    durable_before = (
        before.dterm,
        before.dvote,
        before.dsnap_index,
        before.dsnap_term,
        before.dlog,
    )
    durable_after = (after.dterm, after.dvote, after.dsnap_index, after.dsnap_term, after.dlog)
    if durable_after != durable_before:
        steps.append(_spec_step("persist", n=n))
    if after.commit_index != commit:
        i = after.commit_index
        options = quorums(nodes)
        acked = {
            m
            for m in range(1, nodes + 1)
            if (m == n and after.durable_holds(i)) or (m != n and after.acked(m) >= i)
        }
        q = next((q for q in options if q <= acked), options[0])
        steps.append(_spec_step("advance_commit", n=n, i=i, q=q))
    sent_last = 0
    if message is not None and message.type == MsgType.APPEND:
        sent_last = message.log_index + len(message.entries)
    elif message is not None and message.type == MsgType.SNAPSHOT:
        sent_last = message.snapshot.last_index
    return StepPlan(
        n,
        tuple(steps),
        sent,
        message.commit if message is not None else 0,
        sent_last,
        unexplained,
    )


# --------------------------------------------------------------------------- checking


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
    max_term, max_index = _bounds((before, after))
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
    instance = make_instance(
        nodes, max_term, max_index, sent, plan.sent_commit, plan.sent_last, min_index=min_index
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
    action = _resolve(pre, action)
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
        before, after = node_view(node_before, up_before), node_view(node_after, up_after)
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


# --------------------------------------------------------------------------- exploration


class RefinementMachine(ClusterMachine):
    """The cluster machine with every model step checked against raft_steps.spec."""

    def __init__(
        self,
        config: ClusterConfig | None = None,
        recorder: RunRecorder | None = None,
        stats: RefinementStats | None = None,
    ) -> None:
        self.refinement_stats = stats if stats is not None else RefinementStats()
        super().__init__(config, recorder)

    def _do(self, action: Action) -> None:
        before = self.cluster
        super()._do(action)
        check_step(before, action, self.cluster, self.refinement_stats)


def refinement_machine_factory(
    options: ExploreOptions, recorder: RunRecorder, stats: RefinementStats
) -> Any:
    """A factory of refinement-checked machines for one seeded run (as the cluster's
    `machine_factory`, plus the stats every machine of the run adds to)."""
    config = cluster_config(options)
    machine: type[RuleBasedStateMachine] = focused(RefinementMachine, options.rules)

    def factory() -> RuleBasedStateMachine:
        return machine(config, recorder, stats)  # type: ignore[call-arg]

    return factory


@dataclass(frozen=True)
class RefinementRun:
    """One seeded exploration: model steps taken, wall time, what was checked, and the
    first violation (None: every step refined the spec, or `checked` was off)."""

    checked: bool
    steps: int
    seconds: float
    stats: RefinementStats
    violation: InvariantViolation | None

    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def describe(self) -> str:
        mode = "with refinement" if self.checked else "without refinement"
        outcome = "holds" if self.violation is None else self.violation.describe()
        return (
            f"{mode}: {self.steps} steps in {self.seconds:.2f} s "
            f"({self.steps_per_second():.0f} steps/s); {outcome}"
        )


def run_exploration(options: ExploreOptions, checked: bool = True) -> RefinementRun:
    """One seeded Hypothesis run of the cluster machine, with refinement checks on every
    step when `checked` (else the plain ClusterMachine on the same seed and settings)."""
    recorder = RunRecorder(abstract_state, None)
    stats = RefinementStats()
    config = cluster_config(options)
    machine: type[Any] = focused(RefinementMachine if checked else ClusterMachine, options.rules)

    def factory() -> RuleBasedStateMachine:
        if checked:
            return cast(RuleBasedStateMachine, machine(config, recorder, stats))
        return cast(RuleBasedStateMachine, machine(config, recorder))

    factory._hypothesis_internal_use_seed = options.seed  # type: ignore[attr-defined]
    if checked:
        raft_steps_spec()  # parse the spec before the clock starts: a one-time cost
        _check_plan_cached.cache_clear()  # a run pays for its own checks
    started = time.monotonic()
    violation: InvariantViolation | None = None
    try:
        with replayable_draws():
            run_state_machine_as_test(cast(Any, factory), settings=hypothesis_settings(options))
    except InvariantViolation as found:
        violation = found
    return RefinementRun(checked, recorder.steps, time.monotonic() - started, stats, violation)


__all__ = [
    "NodeView",
    "RefinementMachine",
    "RefinementRun",
    "RefinementStats",
    "RefinementViolation",
    "SpecStep",
    "StepPlan",
    "abstract_for_spec",
    "check_initial",
    "check_plan",
    "check_step",
    "plan_step",
    "raft_steps_spec",
    "refinement_machine_factory",
    "run_exploration",
]

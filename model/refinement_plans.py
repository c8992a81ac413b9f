"""Step plans: the spec/raft_steps.spec actions one model step performs on one node.

Contract
- `plan_step(n, before, after, action, nodes)` names the spec actions a model step
  performs on node n (from NodeView `before` to `after`), in order, with their
  parameters (a `StepPlan` of `SpecStep`s). A step is node-local (ticks, timeouts,
  proposals, deliveries act on one node) and may be several node-local transitions,
  in the order term, role, vote, log, configuration, acknowledgements, durability,
  commit: receiving AppendEntries from a new leader is adopt_term ; accept_entries ;
  persist ; advance_commit. With membership, a leader's proposed configuration change
  is leader_reconfigure (not leader_append), and a node whose configuration changed
  otherwise (its log took or lost a configuration entry) adopt_config; a leader's
  commit names a majority of its configuration. Parameters come from the model action (the message: its term, prev
  index/term, entries, commit, acked index) and from the node's post-state (the term
  or commit index it reached); whether that was allowed is the spec's guards' to say
  (model/refinement_check.py). An empty plan is a stutter: the node's abstract state
  must not change. A change no spec action can make is `unexplained`, in words.
- `acting_node(action)` is the node a model step acts on (None for a step that only
  moves messages or the partition, `NETWORK_KINDS`).
- Pure functions of their arguments: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from etcdspec.model.actions import MESSAGE_KINDS, Action
from etcdspec.model.cluster import Cluster
from etcdspec.model.raft_messages import ConfChange, Message, MsgType, node_name
from etcdspec.model.refinement_abstraction import NOBODY, NodeView, config_quorums, quorums

# Steps that only move messages or the partition: no node's abstract state may change.
NETWORK_KINDS = (*MESSAGE_KINDS, "partition", "heal")


@dataclass(frozen=True)
class SpecStep:
    """One spec action with its parameters."""

    action: str
    params: tuple[tuple[str, Any], ...]

    def describe(self) -> str:
        args = ", ".join(f"{name}={_param_text(name, value)}" for name, value in self.params)
        return f"{self.action}({args})"


def _param_text(name: str, value: Any) -> str:
    if name in ("q", "c") and isinstance(value, frozenset):
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


def resolve_action(pre: Cluster, action: Action) -> Action:
    """The action with a message named by its position replaced by the message."""
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
    # 2. the role within the term (a leader whose removal this step commits steps down
    # after the commit: its acknowledgements and commit come first, as leader)
    removed = (
        before.role == "leader"
        and after.role == "follower"
        and after.term == before.term
        and after.commit_index != before.commit_index
    )
    if after.role != role and not removed:
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
    config = before.config
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
        elif (
            after.role == "leader"
            and after.last_index == before.last_index + 1
            and kind == "propose"
            and isinstance(action.args[1], ConfChange)
        ):
            steps.append(_spec_step("leader_reconfigure", n=n, i=after.last_index, c=after.config))
            config = after.config
        elif after.role == "leader" and after.last_index > before.last_index:
            for i in range(before.last_index + 1, after.last_index + 1):
                steps.append(_spec_step("leader_append", n=n, i=i))
        else:
            unexplained = (
                f"the log changed in a {kind} step that is no append, snapshot install or "
                f"compaction: [snap {before.snap_index}] {list(before.log)} -> "
                f"[snap {after.snap_index}] {list(after.log)}"
            )
    # 4b. the configuration, where the log brought another one
    if after.config != config:
        steps.append(_spec_step("adopt_config", n=n, c=after.config))
    # 5. a leader's record of acknowledgements (from an AppendEntries reply)
    leader_view = after
    if removed:  # its acknowledgements as they were before it stepped down
        acks = list(before.match or (0,) * nodes)
        if message is not None and message.type == MsgType.APPEND_RESP and not message.reject:
            acks[message.src - 1] = max(acks[message.src - 1], message.log_index)
        leader_view = after._replace(match=tuple(acks))
    if leader_view.match != before.match and (after.role == "leader" or removed):
        for m in range(1, nodes + 1):
            if leader_view.acked(m) != before.acked(m):
                i = leader_view.acked(m)
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
        options = config_quorums(after.config) if after.config else quorums(nodes)
        acked = {
            m
            for m in (after.config or range(1, nodes + 1))
            if (m == n and after.durable_holds(i)) or (m != n and leader_view.acked(m) >= i)
        }
        q = next((q for q in options if q <= acked), options[0])
        steps.append(_spec_step("advance_commit", n=n, i=i, q=q))
    if removed:
        steps.append(_spec_step("resign", n=n))
    sent_last = 0
    if message is not None and message.type == MsgType.APPEND:
        sent_last = message.log_index + len(message.entries)
    elif message is not None and message.type == MsgType.SNAPSHOT:
        sent_last = message.snapshot.last_index
    elif message is not None and message.type == MsgType.HEARTBEAT:
        # etcd raft's heartbeat vouches for the follower's log up to its commit, which
        # is min(match, commit): the follower holds the leader's entries that far
        sent_last = message.commit
    return StepPlan(
        n,
        tuple(steps),
        sent,
        message.commit if message is not None else 0,
        sent_last,
        unexplained,
    )

"""The cluster's labelled actions: one `Action` per kind of step, and its label.

Contract
- An `Action` is a frozen (kind, args) value: `args` holds node ids (ints), messages,
  requests, or partition groups. Equal actions are the same step; actions are hashable
  and can be memoised (model/search_cache.py does).
- `describe()` is the action's label, the one text used by transcripts, counterexamples
  and shrinking, e.g. `timeout(n2)` or
  `deliver(n1→n3 AppendEntries term 4 prev 2/3 1 entry commit 2)`.
- One constructor per kind (`tick(node)`, `deliver(message)`, `partition(groups)`, ...).
  A message action may name the message by its position in `cluster.messages`;
  `Cluster.apply` resolves it. `partition` puts its groups in a canonical order.
- Whether an action is enabled is the cluster's question (model/cluster.py), not this
  module's; `NODE_KINDS`, `MESSAGE_KINDS` and `NODE_INPUT_KINDS` sort the kinds by what
  they act on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from etcdspec.model.raft_messages import ConfChange, Message, node_name
from etcdspec.model.requests import RangeRequest

NODE_KINDS = ("tick", "timeout", "heartbeat", "persist", "crash", "restart", "compact_log")
MESSAGE_KINDS = ("deliver", "drop", "duplicate")
NODE_INPUT_KINDS = frozenset(
    ("tick", "timeout", "heartbeat", "persist", "compact_log", "propose", "read_index", "keepalive")
)


@dataclass(frozen=True)
class Action:
    """One step of the cluster. `args` holds node ids (ints), messages, requests, groups."""

    kind: str
    args: tuple[Any, ...] = ()

    def describe(self) -> str:
        kind, args = self.kind, self.args
        if kind in NODE_KINDS:
            return f"{kind}({node_name(args[0])})"
        if kind in MESSAGE_KINDS:
            target = args[0]
            text = target.describe() if isinstance(target, Message) else f"#{target}"
            return f"{kind}({text})"
        if kind in ("propose", "read_index"):
            return f"{kind}({node_name(args[0])}, {describe_request(args[1])})"
        if kind == "keepalive":
            return f"keepalive({node_name(args[0])}, lease {args[1]})"
        if kind == "partition":
            groups = " | ".join(",".join(node_name(n) for n in sorted(g)) for g in args[0])
            return f"partition({groups})"
        return f"{kind}()"


def describe_request(request: Any) -> str:
    """A request's or response's describe(), or its repr for a value without one."""
    describe = getattr(request, "describe", None)
    return describe() if callable(describe) else repr(request)


def tick(node: int) -> Action:
    return Action("tick", (node,))


def timeout(node: int) -> Action:
    return Action("timeout", (node,))


def heartbeat(node: int) -> Action:
    return Action("heartbeat", (node,))


def persist(node: int) -> Action:
    return Action("persist", (node,))


def crash(node: int) -> Action:
    return Action("crash", (node,))


def restart(node: int) -> Action:
    return Action("restart", (node,))


def compact_log(node: int) -> Action:
    return Action("compact_log", (node,))


def deliver(message: Message | int) -> Action:
    """Deliver a message in flight (a Message, or its position in `cluster.messages`)."""
    return Action("deliver", (message,))


def drop(message: Message | int) -> Action:
    return Action("drop", (message,))


def duplicate(message: Message | int) -> Action:
    return Action("duplicate", (message,))


def propose(node: int, request: Any) -> Action:
    return Action("propose", (node, request))


def conf_change(node: int, op: str, target: int) -> Action:
    """Leader `node` proposes a configuration change of node `target` (op: add, remove,
    learner, promote; see raft_messages.ConfChange): a propose action, labelled e.g.
    `propose(n1, conf add n4)`."""
    return propose(node, ConfChange(op, target))


def read_index(node: int, request: Any = None) -> Action:
    return Action("read_index", (node, RangeRequest(b"k") if request is None else request))


def keepalive(node: int, lease_id: int) -> Action:
    return Action("keepalive", (node, lease_id))


def partition(groups: Iterable[Iterable[int]]) -> Action:
    canonical = tuple(sorted((frozenset(g) for g in groups), key=lambda g: sorted(g)))
    return Action("partition", (canonical,))


def heal() -> Action:
    return Action("heal", ())

"""Memo tables that make one exhaustive search fast: interned nodes and messages, memoised
node transitions, canonical keys built from small ints, memoised invariant checks.

Contract: a `SearchCache` belongs to one search over clusters of ONE config (the memoised
transitions are functions of the config's params). Everything it stores is the result
of a pure function of the values it is keyed by, so using it never changes an answer:
- Interning: a node, message or history equal to one seen before is replaced by the first
  object, so equal values reached along different paths become the same object and the
  identity-keyed tables below hit. Equal nodes are interchangeable because every model
  function reads nodes by content.
- `transition(before, action, ...)`: the node-level part of one step (the Raft
  transition, durability, lease clocks, applying committed entries) is a pure function
  of the node before and the action, so it is computed once per (node, action); so are
  a node's action list, a message's actions, the history after a step (`ghost_after`)
  and the network after a delivery or a send (`network_without`, `network_with`;
  networks are interned too).
- `key(...)`: the canonical key of a cluster (model/symmetry.py's `canonical_key`): the
  renamed nodes in canonical order and the renamed history, each as one interned int,
  the network as the sorted ints of its renamed messages. Two keys from one cache are
  equal exactly when the renamed states are equal, as with the plain tuple keys.
- `check(...)`: Raft's invariants are a pure function of (nodes, ghost), the store's of
  one store, so a combination that passed once passes again and is not rechecked.
Identity-keyed tables hold a reference to every object whose id they use, so while the
cache lives no other object can have that id: a hit on an id is a hit on the object.
No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from etcdspec.model import lease_clocks
from etcdspec.model import store as kv
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.network import Network
from etcdspec.model.raft_invariants import Ghost, check_raft, update_ghost
from etcdspec.model.raft_messages import Message
from etcdspec.model.raft_node import Node
from etcdspec.model.symmetry import (
    message_key,
    node_key,
    perm_of,
    rename_groups,
    rename_leaders,
    signature,
)

Transition = tuple[Node, tuple[Message, ...], tuple[Any, ...]]
"""The node after one input, the messages it sends now, and the step's outputs."""


class SearchCache:
    """The memo tables of one search; see the module docstring."""

    __slots__ = (
        "actions",
        "checked",
        "combos",
        "config",
        "contents",
        "ghost_steps",
        "ghost_values",
        "ghosts",
        "message_contents",
        "message_infos",
        "messages",
        "network_keys",
        "network_steps",
        "networks",
        "node_infos",
        "nodes",
        "orders",
        "steps",
        "stores_checked",
    )

    def __init__(self) -> None:
        self.config: object = None
        self.nodes: dict[Node, Node] = {}
        self.messages: dict[Message, Message] = {}
        self.steps: dict[tuple[int, int], tuple[Node, Any, Any]] = {}
        self.node_infos: dict[int, list[Any]] = {}
        self.contents: dict[tuple[Any, ...], int] = {}
        self.message_infos: dict[int, list[Any]] = {}
        self.message_contents: dict[tuple[Any, ...], int] = {}
        self.orders: dict[tuple[int, ...], tuple[tuple[int, ...], int]] = {}
        self.ghosts: dict[tuple[int, int], tuple[Ghost, int]] = {}
        self.ghost_values: dict[Ghost, Ghost] = {}
        self.networks: dict[Network, Network] = {}
        self.network_steps: dict[tuple[int, int], tuple[Network, Any, Network]] = {}
        self.network_keys: dict[tuple[int, int], tuple[Network, tuple[int, ...]]] = {}
        self.ghost_steps: dict[tuple[int, int, int], tuple[Ghost, Node, Node, Ghost]] = {}
        self.combos: dict[tuple[Any, ...], Any] = {}
        self.actions: dict[int, tuple[Any, tuple[Any, ...]]] = {}
        self.checked: dict[tuple[int, ...], tuple[tuple[Node, ...], Ghost]] = {}
        self.stores_checked: dict[int, Any] = {}

    # ------------------------------------------------------------------ interning

    def node(self, node: Node) -> Node:
        """The first node seen equal to `node`."""
        return self.nodes.setdefault(node, node)

    def ghost(self, ghost: Ghost) -> Ghost:
        """The first history seen equal to `ghost`."""
        return self.ghost_values.setdefault(ghost, ghost)

    def ghost_after(self, ghost: Ghost, before: Node, after: Node) -> Ghost:
        """`update_ghost(ghost, (before,), (after,))`, interned, computed once."""
        key = (id(ghost), id(before), id(after))
        hit = self.ghost_steps.get(key)
        if hit is None:
            result = update_ghost(ghost, (before,), (after,))
            hit = (ghost, before, after, self.ghost(result))
            self.ghost_steps[key] = hit
        return hit[3]

    def message(self, message: Message) -> Message:
        """The first message seen equal to `message`."""
        return self.messages.setdefault(message, message)

    # ------------------------------------------------------------------ transitions

    def transition(
        self,
        before: Node,
        action: Any,
        compute: Callable[[Node, Any], Transition],
        fits: Callable[[Node], bool],
        config: object,
    ) -> tuple[Node, tuple[Message, ...], tuple[Any, ...], bool]:
        """`compute(before, action)` and whether its node `fits` the bounds, computed once
        per (node, action object); the node and the messages are interned. Actions are
        keyed by identity: the ones `node_actions` and `message_actions` hand out come
        again and again. `config` is the cluster config the transitions depend on: a
        cache serves one config, and a second one is a ValueError (a search bug)."""
        if config is not self.config:
            if self.config is not None:
                raise ValueError("a SearchCache serves the states of one cluster config")
            self.config = config
        key = (id(before), id(action))
        hit = self.steps.get(key)
        if hit is not None:
            return hit[2]
        after, out, outputs = compute(before, action)
        after = self.node(after)
        result = (after, tuple([self.message(m) for m in out]), outputs, fits(after))
        self.steps[key] = (before, action, result)
        return result

    # ------------------------------------------------------------------ networks

    def network_without(self, network: Network, message: Message) -> Network:
        """`network` with one copy of `message` delivered (taken out), interned,
        computed once per (network, message)."""
        key = (id(network), id(message))
        hit = self.network_steps.get(key)
        if hit is None:
            result = network.remove(network.index_of(message))
            hit = (network, message, self.networks.setdefault(result, result))
            self.network_steps[key] = hit
        return hit[2]

    def network_with(self, network: Network, out: tuple[Message, ...]) -> Network:
        """`network` with the messages `out` sent, interned, computed once per (network,
        out tuple)."""
        key = (id(network), id(out))
        hit = self.network_steps.get(key)
        if hit is None:
            result = network.send(out)
            hit = (network, out, self.networks.setdefault(result, result))
            self.network_steps[key] = hit
        return hit[2]

    # ------------------------------------------------------------------ actions

    def node_actions(self, node: Node, compute: Callable[[Node], Iterable[Any]]) -> tuple[Any, ...]:
        """`compute(node)` (a node's enabled inputs), made once per node."""
        hit = self.actions.get(id(node))
        if hit is None:
            hit = self.actions[id(node)] = (node, tuple(compute(node)))
        return hit[1]

    def message_actions(
        self, message: Message, compute: Callable[[Message], tuple[Any, ...]]
    ) -> tuple[Any, ...]:
        """`compute(message)` (the actions on one message in flight), made once per
        message."""
        hit = self.actions.get(id(message))
        if hit is None:
            hit = self.actions[id(message)] = (message, compute(message))
        return hit[1]

    # ------------------------------------------------------------------ canonical keys

    def _node_info(self, node: Node) -> list[Any]:
        """[node, its signature's number, {perm_id * 2 + up: its renamed key's number}]."""
        content = ("signature", signature(node, True))
        number = self.contents.setdefault(content, len(self.contents))
        info: list[Any] = [node, number, {}]
        self.node_infos[id(node)] = info
        return info

    def _renamed_node(
        self, info: list[Any], up: bool, perm: tuple[int, ...], perm_id: int, order: tuple[int, ...]
    ) -> int:
        content = node_key(info[0], up, perm, order)
        number = self.contents.setdefault(content, len(self.contents))
        info[2][perm_id * 2 + up] = number
        return number

    def _message_info(self, message: Message) -> list[Any]:
        """[message, {perm_id: its renamed key's number}]."""
        info: list[Any] = [message, {}]
        self.message_infos[id(message)] = info
        return info

    def _renamed_message(self, info: list[Any], perm: tuple[int, ...], perm_id: int) -> int:
        content = message_key(info[0], perm)
        number = self.message_contents.setdefault(content, len(self.message_contents))
        info[1][perm_id] = number
        return number

    def _order(self, order: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
        hit = (tuple(perm_of(order)), len(self.orders))
        self.orders[order] = hit
        return hit

    def _combo(
        self,
        combo_key: tuple[Any, ...],
        nodes: tuple[Node, ...],
        up: tuple[bool, ...],
        groups: tuple[frozenset[int], ...],
    ) -> tuple[tuple[Node, ...], tuple[int, ...], int, int]:
        """(nodes, perm, perm_id, number of the renamed nodes in canonical order) for
        one combination of node objects, up flags and partition."""
        node_infos = self.node_infos
        infos: list[list[Any]] = []
        for node in nodes:
            info = node_infos.get(id(node))
            if info is None:
                info = self._node_info(node)
            infos.append(info)
        ranks: list[tuple[int, ...]]
        if groups:
            sizes = {n: len(g) for g in groups for n in g}
            ranks = [(sizes[i + 1], info[1], up[i]) for i, info in enumerate(infos)]
        else:
            ranks = [(info[1], flag) for info, flag in zip(infos, up, strict=True)]
        order = tuple(sorted(range(len(nodes)), key=ranks.__getitem__))
        perm, perm_id = self.orders.get(order) or self._order(order)
        node_keys: list[int] = []
        for old in order:
            info = infos[old]
            flag = up[old]
            number = info[2].get(perm_id * 2 + flag)
            if number is None:
                number = self._renamed_node(info, flag, perm, perm_id, order)
            node_keys.append(number)
        content = ("nodes", tuple(node_keys))
        number = self.contents.setdefault(content, len(self.contents))
        combo = (nodes, perm, perm_id, number)
        self.combos[combo_key] = combo
        return combo

    def key(
        self,
        nodes: tuple[Node, ...],
        up: tuple[bool, ...],
        network: Network,
        crashes: int,
        ghost: Ghost,
    ) -> tuple[Any, ...]:
        """The canonical key (see the module docstring). Nodes are ordered by (partition
        group size,) signature and up, as `canonical_order` orders them: ties are the
        same, so the same states share a key; ties keep the given order."""
        groups = network.groups
        combo_key = (*map(id, nodes), up, groups)
        combo = self.combos.get(combo_key)
        if combo is None:
            combo = self._combo(combo_key, nodes, up, groups)
        _, perm, perm_id, nodes_number = combo
        network_key = (id(network), perm_id)
        known = self.network_keys.get(network_key)
        if known is None:
            known = (network, self._renamed_network(network, perm, perm_id))
            self.network_keys[network_key] = known
        renamed = known[1]
        ghost_hit = self.ghosts.get((id(ghost), perm_id))
        if ghost_hit is None:
            ghost_hit = self._ghost_number(ghost, perm, perm_id)
        return (
            nodes_number,
            ghost_hit[1],
            renamed,
            rename_groups(groups, perm) if groups else (),
            crashes,
        )

    def _renamed_network(
        self, network: Network, perm: tuple[int, ...], perm_id: int
    ) -> tuple[Any, ...]:
        """The sorted numbers of the network's renamed messages (a multiset's key)."""
        message_infos = self.message_infos
        renamed: list[int] = []
        for message in network.messages:
            minfo = message_infos.get(id(message))
            if minfo is None:
                minfo = self._message_info(message)
            number = minfo[1].get(perm_id)
            if number is None:
                number = self._renamed_message(minfo, perm, perm_id)
            renamed.append(number)
        renamed.sort()
        return tuple(renamed)

    def _ghost_number(self, ghost: Ghost, perm: tuple[int, ...], perm_id: int) -> tuple[Ghost, int]:
        content = (
            "ghost",
            ghost.committed,
            rename_leaders(ghost.leaders, perm),
            ghost.violation,
        )
        number = self.contents.setdefault(content, len(self.contents))
        hit = self.ghosts[(id(ghost), perm_id)] = (ghost, number)
        return hit

    # ------------------------------------------------------------------ invariants

    def check(self, nodes: tuple[Node, ...], ghost: Ghost) -> None:
        """Raft's invariants on (nodes, ghost) and the store's on each node's store, each
        combination checked once; raises InvariantViolation as Cluster.check_invariants."""
        key = (*map(id, nodes), id(ghost))
        if key in self.checked:
            return
        check_raft(nodes, ghost)
        for node in nodes:
            lease_clocks.check_lease_guarantee(node)
            store = node.store
            if id(store) in self.stores_checked:
                continue
            try:
                kv.check_invariants(store)
            except InvariantViolation as violation:
                raise InvariantViolation(
                    violation.invariant, f"{node.name}: {violation.detail}"
                ) from violation
            self.stores_checked[id(store)] = store
        self.checked[key] = (nodes, ghost)

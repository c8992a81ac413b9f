"""The cluster simulator: N Raft nodes, a network, faults, clients, leases — one pure value,
and its step relation (which actions are enabled, the state each leads to).

Contract
- `Cluster.start(config)` builds nodes n1..nN (config: model/cluster_config.py). A
  cluster never changes: `cluster.apply(action)` returns a NEW cluster (structure is
  shared, nothing is deep copied), so any earlier state stays valid for search and
  shrinking. An action that is not enabled (or would leave the configured bounds)
  raises `IllegalActionError` and changes nothing.
- `enabled_actions()` lists the enabled actions (model/actions.py, each with its
  label) in a deterministic order; `successors()` gives each with the state it leads
  to, in the same order.
- A step that gives one node an input is a pure function of (config, that node,
  action) plus the network and history around it: the Raft transition
  (model/raft_node.py), the lease clocks (model/lease_clocks.py), then the committed
  entries applied and confirmed reads served (model/applier.py). Each step's results
  are in `cluster.outputs` (not part of the state's identity).
- `check_invariants()` checks Raft's invariants (raft_invariants), the store's on
  every node's applied state and the lease guarantee on every leader
  (lease_clocks.check_lease_guarantee), raising InvariantViolation.
- `fingerprint()` identifies the state; `canonical_fingerprint()` identifies it up to
  renaming nodes (model/symmetry.py: symmetry reduction for the exhaustive explorer),
  except with membership: configuration entries name nodes, so it is the fingerprint.
- With `config.membership`, a leader that may change its configuration
  (raft_node.can_change_config) is offered `propose(n, ConfChange(op, m))` for every
  change its configuration allows, over the fixed universe of nodes 1..N.
- The exhaustive explorer passes one `SearchCache` (model/search_cache.py) to
  `successors`, `canonical_fingerprint` and `check_invariants`: memo tables that give
  the same answers as the plain calls, computed once per distinct node, message, etc.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from etcdspec.model import lease_clocks
from etcdspec.model import raft_node as rn
from etcdspec.model import store as kv
from etcdspec.model.actions import (
    MESSAGE_KINDS,
    NODE_INPUT_KINDS,
    NODE_KINDS,
    Action,
    compact_log,
    crash,
    deliver,
    describe_request,
    drop,
    duplicate,
    heal,
    heartbeat,
    keepalive,
    partition,
    persist,
    propose,
    read_index,
    restart,
    tick,
    timeout,
)
from etcdspec.model.applier import Output, apply_committed
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.network import Network
from etcdspec.model.raft_invariants import Ghost, check_raft, update_ghost
from etcdspec.model.raft_messages import CONF_OPS, ConfChange, Message, node_name
from etcdspec.model.raft_node import Node, RaftParams, Role
from etcdspec.model.search_cache import SearchCache, Transition
from etcdspec.model.symmetry import canonical_key


class IllegalActionError(Exception):
    """An action that is not enabled in this state (or would leave the bounds)."""


class Cluster:
    """An immutable cluster state; see the module docstring."""

    __slots__ = ("config", "crashes", "ghost", "network", "nodes", "outputs", "params", "up")

    config: ClusterConfig
    params: RaftParams
    nodes: tuple[Node, ...]
    up: tuple[bool, ...]
    network: Network
    crashes: int
    ghost: Ghost
    outputs: tuple[Output, ...]

    def __init__(
        self,
        config: ClusterConfig,
        params: RaftParams,
        nodes: tuple[Node, ...],
        up: tuple[bool, ...],
        network: Network,
        crashes: int,
        ghost: Ghost,
        outputs: tuple[Output, ...] = (),
    ) -> None:
        self.config = config
        self.params = params
        self.nodes = nodes
        self.up = up
        self.network = network
        self.crashes = crashes
        self.ghost = ghost
        self.outputs = outputs

    @staticmethod
    def start(config: ClusterConfig | None = None) -> Cluster:
        config = config or ClusterConfig()
        params = config.params()
        initial = kv.initial_state()
        nodes = tuple(rn.new_node(params, i, initial) for i in range(1, config.nodes + 1))
        return Cluster(config, params, nodes, (True,) * config.nodes, Network(), 0, Ghost())

    def _with(
        self,
        nodes: tuple[Node, ...] | None = None,
        up: tuple[bool, ...] | None = None,
        network: Network | None = None,
        crashes: int | None = None,
        ghost: Ghost | None = None,
        outputs: tuple[Output, ...] = (),
    ) -> Cluster:
        return Cluster(
            self.config,
            self.params,
            self.nodes if nodes is None else nodes,
            self.up if up is None else up,
            self.network if network is None else network,
            self.crashes if crashes is None else crashes,
            self.ghost if ghost is None else ghost,
            outputs,
        )

    # ------------------------------------------------------------------ queries

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.network.messages

    def leader_ids(self) -> list[int]:
        return [n.id for n in self.nodes if n.role == Role.LEADER and self.up[n.id - 1]]

    def max_term(self) -> int:
        return max(n.term for n in self.nodes)

    def committed(self) -> list[tuple[int, int, str]]:
        """(index, term, request text) of every entry known committed, in log order."""
        return [(i + 1, term, key) for i, (term, key, _) in enumerate(self.ghost.committed)]

    def commit_index(self) -> int:
        return len(self.ghost.committed)

    def fingerprint(self) -> tuple[Any, ...]:
        """Identifies the state (the network as a multiset: order of sending ignored)."""
        network = self.network
        messages = tuple(sorted(network.messages, key=Message.sort_key))
        return (self.nodes, self.up, messages, network.groups, self.crashes, self.ghost)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cluster) and self.fingerprint() == other.fingerprint()

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def canonical_fingerprint(self, cache: SearchCache | None = None) -> tuple[Any, ...]:
        """A key of this state renamed so that nodes come in a canonical order: clusters
        that differ only by node names mostly share it. Ties keep the given order, which
        is sound: equal keys always mean renamings of each other (the key holds the whole
        state, with ids renamed). Keys made with one SearchCache compare only with keys
        made with the same cache (they are built from its interned numbers)."""
        if self.config.membership:
            return self.fingerprint()  # entries name nodes: renaming them is not sound
        if cache is None:
            return canonical_key(
                self.nodes, self.up, self.network, self.bounded_crashes(), self.ghost
            )
        return cache.key(self.nodes, self.up, self.network, self.bounded_crashes(), self.ghost)

    def bounded_crashes(self) -> int:
        """The crash count as the state's identity sees it: it matters only as a bound
        (unbounded, it would make the space infinite)."""
        return self.crashes if self.config.max_crashes is not None else 0

    # ------------------------------------------------------------------ checks

    def check_invariants(
        self, previous: Cluster | None = None, cache: SearchCache | None = None
    ) -> None:
        """Raft's invariants and the store's on each node's applied state. With
        `previous`, a state that PASSED this check (usually the one this state was
        reached from), only what differs from it is checked (see raft_invariants.
        check_raft; stores that did not change are not checked again); with `cache`, no
        combination of nodes and history that passed before is checked again (the
        checks are pure functions of them)."""
        if cache is not None:
            cache.check(self.nodes, self.ghost)
            return
        check_raft(
            self.nodes, self.ghost, None if previous is None else (previous.nodes, previous.ghost)
        )
        for position, node in enumerate(self.nodes):
            if previous is None or previous.nodes[position] is not node:
                lease_clocks.check_lease_guarantee(node)
            if previous is not None and previous.nodes[position].store is node.store:
                continue
            try:
                kv.check_invariants(node.store)
            except InvariantViolation as violation:
                raise InvariantViolation(
                    violation.invariant, f"{node.name}: {violation.detail}"
                ) from violation

    # ------------------------------------------------------------------ actions

    def enabled_actions(self) -> list[Action]:
        if not self._bounded():
            return list(self._candidate_actions())
        return [action for action, _ in self.successors()]

    def _bounded(self) -> bool:
        config = self.config
        return not (
            config.max_term is None and config.max_log is None and config.max_messages is None
        )

    def successors(self, cache: SearchCache | None = None) -> Iterator[tuple[Action, Cluster]]:
        """Every enabled action with the state it leads to, in a deterministic order.
        With `cache` (one search's memo tables) node transitions are computed once and
        nodes and messages are interned: the same actions and states come out."""
        for action in self._candidate_actions(cache):
            result = self._try(action, cache)
            if result is not None:
                yield action, result

    def apply(self, action: Action) -> Cluster:
        action = self._resolve(action)
        if not self._precondition(action):
            raise IllegalActionError(f"{action.describe()} is not enabled: {self._why()}")
        result = self._try(action)
        if result is None:
            raise IllegalActionError(
                f"{action.describe()} would leave the bounds ({self.config.describe()})"
            )
        return result

    def _why(self) -> str:
        return "see cluster.enabled_actions() for what can happen in this state"

    def _resolve(self, action: Action) -> Action:
        if action.kind in MESSAGE_KINDS and isinstance(action.args[0], int):
            index = action.args[0]
            if not 0 <= index < len(self.network.messages):
                raise IllegalActionError(
                    f"{action.kind}(#{index}): only {len(self.network.messages)} messages in flight"
                )
            return Action(action.kind, (self.network.messages[index],))
        return action

    def _candidate_actions(self, cache: SearchCache | None = None) -> Iterator[Action]:
        """The actions whose preconditions hold, in a fixed order; the ones that surely
        leave the bounds are left out early (the bounds are checked again on the result).
        With `cache`, each node's action list and each message's actions are made once."""
        config = self.config
        up = self.up
        for node in self.nodes:
            if up[node.id - 1]:
                if cache is None:
                    yield from self._node_actions(node)
                else:
                    yield from cache.node_actions(node, self._node_actions)
        network = self.network
        messages = network.messages
        for index, message in enumerate(messages):
            if index and message in messages[:index]:
                continue  # one copy of each message in flight
            if cache is None:
                deliver_it, drop_it, duplicate_it = _message_actions(message)
            else:
                deliver_it, drop_it, duplicate_it = cache.message_actions(message, _message_actions)
            if up[message.dst - 1] and network.connected(message.src, message.dst):
                yield deliver_it
            if config.allow_drop:
                yield drop_it
            if config.allow_duplicate:
                yield duplicate_it
        for node in self.nodes:
            if up[node.id - 1]:
                if config.max_crashes is None or self.crashes < config.max_crashes:
                    yield crash(node.id)
            else:
                yield restart(node.id)
        if config.allow_partition and config.nodes > 1:
            if network.groups:
                yield heal()
            else:
                everyone = frozenset(range(1, config.nodes + 1))
                for size in range(1, (config.nodes - 1) // 2 + 1):
                    for minority in itertools.combinations(range(1, config.nodes + 1), size):
                        yield partition((frozenset(minority), everyone - set(minority)))

    def _node_actions(self, node: Node) -> Iterator[Action]:
        """The enabled inputs of one node that is up: a function of the config and the
        node only."""
        config = self.config
        max_term, max_log = config.max_term, config.max_log
        i = node.id
        if config.persist == "explicit" and rn.needs_persist(node):
            yield persist(i)
        leader = node.role == Role.LEADER
        if config.timeouts == "free":
            # (a real campaign past max_term would leave the bounds: not offered)
            if (leader and config.check_quorum) or (
                not leader and (config.prevote or max_term is None or node.term < max_term)
            ):
                yield timeout(i)
            if leader and config.allow_heartbeat:
                yield heartbeat(i)
            if lease_clocks.leases_running(node):
                yield tick(i)  # time passes for the leader's leases alone
        else:
            yield tick(i)
        if leader:
            if max_log is None or node.log.last_index < max_log:
                for request in config.proposals:
                    yield propose(i, request)
                if config.membership:
                    yield from self.conf_changes(node)
            if rn.can_read_index(node):
                for request in config.reads:
                    yield read_index(i, request)
            for lease_id, _ in node.leases:
                if lease_clocks.can_keep_alive(self.params, node, lease_id):
                    yield keepalive(i, lease_id)
        if config.allow_compaction and self._can_compact(node):
            yield compact_log(i)

    def conf_changes(self, node: Node) -> Iterator[Action]:
        """The configuration changes a leader may propose now (in a fixed order)."""
        params = self.params
        if not rn.can_change_config(params, node):
            return
        current = rn.config_of(params, node.log)
        for op in CONF_OPS:
            for target in range(1, self.config.nodes + 1):
                change = ConfChange(op, target)
                if change.allowed(current):
                    yield propose(node.id, change)

    def _can_compact(self, node: Node) -> bool:
        lag = node.applied_index - node.log.snapshot.last_index
        return rn.can_compact(node) and lag >= max(1, self.config.max_snapshot_lag)

    def _precondition(self, action: Action) -> bool:
        kind, args = action.kind, action.args
        config = self.config
        if kind in NODE_KINDS or kind in ("propose", "read_index", "keepalive"):
            if not isinstance(args[0], int) or not 1 <= args[0] <= config.nodes:
                return False
            node = self.nodes[args[0] - 1]
            alive = self.up[args[0] - 1]
            if kind == "restart":
                return not alive
            if not alive:
                return False
            if kind == "crash":
                return config.max_crashes is None or self.crashes < config.max_crashes
            if kind == "tick":
                return config.timeouts == "ticks" or lease_clocks.leases_running(node)
            if kind == "timeout":
                return config.timeouts == "free" and (
                    node.role != Role.LEADER or config.check_quorum
                )
            if kind == "heartbeat":
                return (
                    config.timeouts == "free"
                    and config.allow_heartbeat
                    and node.role == Role.LEADER
                )
            if kind == "persist":
                return config.persist == "explicit" and rn.needs_persist(node)
            if kind == "compact_log":
                return config.allow_compaction and self._can_compact(node)
            if kind == "propose":
                request = args[1]
                if isinstance(request, ConfChange):
                    return (
                        config.membership
                        and request.result is None
                        and 1 <= request.node <= config.nodes
                        and rn.can_change_config(self.params, node)
                        and request.allowed(rn.config_of(self.params, node.log))
                    )
                return node.role == Role.LEADER
            if kind == "read_index":
                return rn.can_read_index(node)
            return lease_clocks.can_keep_alive(self.params, node, args[1])
        if kind in MESSAGE_KINDS:
            message = args[0]
            if message not in self.network.messages:
                return False
            if kind == "deliver":
                return self.up[message.dst - 1] and self.network.connected(message.src, message.dst)
            return config.allow_drop if kind == "drop" else config.allow_duplicate
        if kind == "partition":
            return (
                config.allow_partition
                and not self.network.groups
                and _is_split(args[0], config.nodes)
            )
        if kind == "heal":
            return bool(self.network.groups)
        return False

    def _try(self, action: Action, cache: SearchCache | None = None) -> Cluster | None:
        """The successor state, or None if it leaves the configured bounds."""
        kind = action.kind
        if kind == "deliver":
            message: Message = action.args[0]
            if cache is None:
                network = self.network.remove(self.network.index_of(message))
            else:
                network = cache.network_without(self.network, message)
            return self._node_step(message.dst, action, network, cache)
        if kind in NODE_INPUT_KINDS:
            return self._node_step(action.args[0], action, self.network, cache)
        result = self._step(action)
        return result if result._within_bounds() else None

    def _within_bounds(self) -> bool:
        config = self.config
        max_term, max_log, max_messages = config.max_term, config.max_log, config.max_messages
        held = len(self.network.messages)
        for node in self.nodes:
            if max_term is not None and node.term > max_term:
                return False
            if (
                max_log is not None
                and node.log.snapshot.last_index + len(node.log.entries) > max_log
            ):
                return False
            held += len(node.outbox)
        return max_messages is None or held <= max_messages

    def _step(self, action: Action) -> Cluster:
        """A step that gives no node an input: the network, partitions, crashes."""
        kind, args = action.kind, action.args
        if kind == "drop":
            return self._with(network=self.network.remove(self.network.index_of(args[0])))
        if kind == "duplicate":
            return self._with(network=self.network.duplicate(self.network.index_of(args[0])))
        if kind == "partition":
            return self._with(network=self.network.partition(args[0]))
        if kind == "heal":
            return self._with(network=self.network.heal())
        node_id: int = args[0]
        if kind == "crash":
            nodes = list(self.nodes)
            nodes[node_id - 1] = rn.restart(self.params, self.nodes[node_id - 1])
            up = list(self.up)
            up[node_id - 1] = False
            return self._with(nodes=tuple(nodes), up=tuple(up), crashes=self.crashes + 1)
        if kind == "restart":
            up = list(self.up)
            up[node_id - 1] = True
            return self._with(up=tuple(up))
        raise IllegalActionError(f"unknown action kind {kind!r}")

    def _transition(self, before: Node, action: Action) -> Transition:
        """The node-level part of a step that gives node `before` an input: the Raft
        transition, durability, lease clocks, applying what became committed. A pure
        function of (this config, before, action): the rest of the state plays no part,
        which is what lets a SearchCache compute it once."""
        params = self.params
        kind, args = action.kind, action.args
        messages: Iterable[Message]
        if kind == "deliver":
            after, messages = rn.step(params, before, args[0])
        elif kind == "tick" and self.config.timeouts == "free":
            after, messages = lease_clocks.lease_tick(params, before)
        elif kind == "tick":
            after, messages = lease_clocks.tick(params, before)
        elif kind == "timeout":
            after, messages = rn.timeout(params, before)
        elif kind == "heartbeat":
            after, messages = rn.heartbeat(params, before)
        elif kind == "persist":
            after, messages = rn.persist(params, before)
        elif kind == "compact_log":
            after, messages = rn.compact(params, before), ()
        elif kind == "propose":
            request = args[1]
            after, messages = rn.propose(params, before, describe_request(request), request)
        elif kind == "read_index":
            after, messages = rn.read_index(params, before, args[1])
        elif kind == "keepalive":
            after, ack = lease_clocks.keep_alive(before, args[1], self.config.lease_tick_scale)
            messages = ()
        else:
            raise IllegalActionError(f"{action.describe()} is not an input to one node")
        out: tuple[Message, ...]
        if kind == "persist":
            out = tuple(messages)  # the released outbox: it waited for this persist
        else:
            after, out = rn.finish(params, before, after, list(messages))
        outputs: list[Output] = [ack] if kind == "keepalive" else []
        if after.role == Role.LEADER and before.role != Role.LEADER:
            after = lease_clocks.start_lease_clocks(after, self.config.lease_tick_scale)
        if after.commit_index > after.applied_index or after.ready_reads:
            after, applied = apply_committed(params, after, self.config.lease_tick_scale)
            outputs.extend(applied)
        return after, out, tuple(outputs)

    def _node_step(
        self, node_id: int, action: Action, network: Network, cache: SearchCache | None
    ) -> Cluster | None:
        """Give one node an input (`network`: the network with a delivered message
        already taken out): its transition, then the network and the history; None if
        the result leaves the bounds. Only this node and the network change, and this
        state is within the bounds (every state is: the start is, and each step is
        checked), so the bounds are checked on this node and the message count only."""
        before = self.nodes[node_id - 1]
        config = self.config
        if cache is None:
            after, out, outputs = self._transition(before, action)
            if not self._fits(after):
                return None
        else:
            after, out, outputs, fits = cache.transition(
                before, action, self._transition, self._fits, config
            )
            if not fits:
                return None
        max_messages = config.max_messages
        # outboxes hold messages only with explicit persistence (see rn.finish)
        explicit = self.params.explicit_persist
        if max_messages is not None and config.lossy_overflow:
            if explicit:
                kept, out = self._lose_overflow(node_id, after, out, network)
                if kept is not after and cache is not None:
                    kept = cache.node(kept)
                after = kept
            else:  # _lose_overflow with empty outboxes
                room = max_messages - len(network.messages)
                if len(out) > room:
                    out = out[: max(room, 0)]
        nodes = list(self.nodes)
        nodes[node_id - 1] = after
        new_nodes = tuple(nodes)
        if out:
            network = network.send(out) if cache is None else cache.network_with(network, out)
        if max_messages is not None:
            held = len(network.messages)
            if explicit:
                for node in new_nodes:
                    held += len(node.outbox)
            if held > max_messages:
                return None
        ghost = self.ghost
        if after.role == Role.LEADER or after.commit_index > len(ghost.committed):
            # (else the history cannot change)
            if cache is None:
                ghost = update_ghost(ghost, (before,), (after,))
            else:
                ghost = cache.ghost_after(ghost, before, after)
        return Cluster(
            config, self.params, new_nodes, self.up, network, self.crashes, ghost, outputs
        )

    def _fits(self, node: Node) -> bool:
        """Whether one node is within the term and log bounds."""
        max_term, max_log = self.config.max_term, self.config.max_log
        return (max_term is None or node.term <= max_term) and (
            max_log is None or node.log.last_index <= max_log
        )

    def _lose_overflow(
        self, node_id: int, after: Node, out: tuple[Message, ...], network: Network
    ) -> tuple[Node, tuple[Message, ...]]:
        """With lossy_overflow: messages beyond max_messages (in flight plus waiting in
        outboxes) are lost, the newest first."""
        assert self.config.max_messages is not None
        room = self.config.max_messages - len(network.messages)
        if self.params.explicit_persist:
            room -= sum(len(n.outbox) for n in self.nodes if n.id != node_id)
        room = max(room, 0)
        if len(after.outbox) + len(out) <= room:
            return after, out
        if len(after.outbox) > room:
            after = after._replace(outbox=after.outbox[:room])
        return after, out[: room - len(after.outbox)]

    # ------------------------------------------------------------------ views

    def abstract(self) -> dict[str, Any]:
        """Plain values for ITF traces and refinement checks against the spec."""
        return {
            "nodes": {
                node.name: {
                    "role": node.role.describe(),
                    "term": node.term,
                    "voted_for": node_name(node.vote) if node.vote else None,
                    "log": [[e.term, e.key] for e in node.log.entries],
                    "snapshot_index": node.log.snapshot.last_index,
                    "snapshot_term": node.log.snapshot.last_term,
                    "commit_index": node.commit_index,
                    "applied_index": node.applied_index,
                    "up": self.up[node.id - 1],
                    "durable_term": node.hard_state().term,
                    "durable_voted_for": (
                        node_name(node.hard_state().vote) if node.hard_state().vote else None
                    ),
                    "durable_log_length": node.hard_state().log.last_index,
                    "revision": getattr(node.store, "revision", None),
                    **(
                        {"config": rn.config_of(self.params, node.log).describe()}
                        if self.config.membership
                        else {}
                    ),
                }
                for node in self.nodes
            },
            "messages": [m.describe() for m in self.network.messages],
            "partition": [sorted(node_name(n) for n in g) for g in self.network.groups],
            "committed": [[term, key] for term, key, _ in self.ghost.committed],
            "leaders": [[term, node_name(n)] for term, n in self.ghost.leaders],
        }

    def describe(self) -> str:
        lines = []
        for node in self.nodes:
            state = "" if self.up[node.id - 1] else " [down]"
            lines.append(node.describe() + state)
        lines.append("network: " + self.network.describe())
        return "\n".join(lines)


# --------------------------------------------------------------------------- helpers


def _message_actions(message: Message) -> tuple[Action, ...]:
    return (deliver(message), drop(message), duplicate(message))


def _is_split(groups: Any, nodes: int) -> bool:
    if not isinstance(groups, tuple) or not all(isinstance(g, frozenset) for g in groups):
        return False
    members = [n for g in groups for n in g]
    return sorted(members) == list(range(1, nodes + 1)) and len(groups) >= 2


__all__ = ["Cluster", "IllegalActionError"]

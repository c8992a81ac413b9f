"""Symmetry: a cluster state's key up to renaming its nodes (symmetry reduction).

Contract
- Nodes are put in a canonical order by name-free facts (`signature`: role, term, log
  shape, commit and applied index, up, ...; inside a partition, the size of the node's
  group first); ties keep the given order. `perm_of(order)` is the renaming that makes
  the node at order[k] node k+1; `perm[0] == 0` keeps "nobody".
- `node_key`, `message_key`, `rename_groups` and `rename_leaders` are a node, a message,
  a partition and the leader history with every node id renamed (and a node's per-peer
  tuples reordered); `message_order` is a total order on renamed messages.
- `canonical_key(nodes, up, network, crashes, ghost)` is a whole cluster's key from
  these: two states with equal keys are renamings of each other (the key holds the
  whole state, renamed), so an explorer may keep one of them. It is sound whatever the
  ties, and complete enough that states differing only by names mostly share a key.
  `SearchCache.key` (model/search_cache.py) builds the same key from interned ints;
  keys of the two kinds do not compare with each other.
- Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from etcdspec.model.network import Network
from etcdspec.model.raft_invariants import Ghost
from etcdspec.model.raft_messages import Message
from etcdspec.model.raft_node import HardState, Node


def signature(node: Node, up: bool) -> tuple[Any, ...]:
    """What orders nodes canonically: name-free facts, cheap to compare."""
    log = node.log
    entries = log.entries
    return (
        node.role,
        node.term,
        log.snapshot.last_index + len(entries),
        tuple([e.term for e in entries]),
        node.commit_index,
        node.applied_index,
        up,
        node.vote == 0,
        node.durable is None,
        len(node.outbox),
    )


def message_order(message: tuple[Any, ...]) -> tuple[Any, ...]:
    """A total order on message keys (requests enter only through their text)."""
    entries = message[6]
    snapshot = message[11]
    return (
        message[:6],
        tuple((e.term, e.key) for e in entries),
        message[7:11],
        snapshot.last_index,
        snapshot.last_term,
    )


def message_key(message: Message, perm: Sequence[int]) -> tuple[Any, ...]:
    """The message with its node ids renamed by `perm`."""
    return (message.type, perm[message.src], perm[message.dst], *message[3:])


def _permute(values: tuple[Any, ...], order: Sequence[int]) -> tuple[Any, ...]:
    return tuple([values[old] for old in order])


def node_key(node: Node, up: bool, perm: Sequence[int], order: Sequence[int]) -> tuple[Any, ...]:
    """Everything of a node, with node ids renamed by `perm` and per-node tuples
    reordered by `order` (perm[0] == 0 keeps "none")."""
    durable = node.durable
    if durable is not None:
        durable = HardState(durable.term, perm[durable.vote], durable.log)
    outbox: tuple[Any, ...] = ()
    if node.outbox:
        outbox = tuple(sorted((message_key(m, perm) for m in node.outbox), key=message_order))
    reads: tuple[Any, ...] = ()
    if node.reads or node.ready_reads:
        rounds = [
            (r.id, r.read_index, frozenset(perm[a] for a in r.acks), r.request)
            for r in node.reads + node.ready_reads
        ]
        reads = (*rounds, len(node.reads))
    return (
        up,
        node.role,
        node.term,
        perm[node.vote],
        perm[node.lead],
        node.log,
        node.commit_index,
        node.applied_index,
        node.store,
        node.election_elapsed,
        node.heartbeat_elapsed,
        node.randomized_timeout,
        node.timeout_draws,
        node.votes and _permute(node.votes, order),
        node.match and _permute(node.match, order),
        node.next and _permute(node.next, order),
        node.recent_active and _permute(node.recent_active, order),
        durable,
        outbox,
        reads,
        node.read_seq,
        node.leases,
    )


def canonical_order(
    nodes: Sequence[Node], up: Sequence[bool], groups: tuple[frozenset[int], ...]
) -> list[int]:
    """Positions of the nodes in canonical order: by (partition group size,) signature;
    ties keep the given order."""
    if groups:
        sizes = {n: len(g) for g in groups for n in g}
        return sorted(range(len(nodes)), key=lambda i: (sizes[i + 1], signature(nodes[i], up[i])))
    return sorted(range(len(nodes)), key=lambda i: signature(nodes[i], up[i]))


def perm_of(order: Sequence[int]) -> list[int]:
    """The renaming that puts the node at position order[k] as node k+1 (perm[0] == 0)."""
    perm = [0] * (len(order) + 1)
    for new_position, old_position in enumerate(order):
        perm[old_position + 1] = new_position + 1
    return perm


def rename_groups(groups: tuple[frozenset[int], ...], perm: Sequence[int]) -> tuple[Any, ...]:
    return tuple(sorted(tuple(sorted(perm[n] for n in g)) for g in groups))


def rename_leaders(leaders: tuple[tuple[int, int], ...], perm: Sequence[int]) -> tuple[Any, ...]:
    return tuple(sorted((term, perm[n]) for term, n in leaders))


def canonical_key(
    nodes: Sequence[Node], up: Sequence[bool], network: Network, crashes: int, ghost: Ghost
) -> tuple[Any, ...]:
    """The canonical key as plain tuples (no cache): see Cluster.canonical_fingerprint.
    `crashes` is the crash count as the state's identity sees it (Cluster.bounded_crashes)."""
    order = canonical_order(nodes, up, network.groups)
    perm = perm_of(order)
    node_keys = tuple(node_key(nodes[old], up[old], perm, order) for old in order)
    messages = tuple(sorted((message_key(m, perm) for m in network.messages), key=message_order))
    groups = rename_groups(network.groups, perm) if network.groups else ()
    return (
        node_keys,
        messages,
        groups,
        crashes,
        ghost.committed,
        rename_leaders(ghost.leaders, perm),
        ghost.violation,
    )

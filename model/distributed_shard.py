"""One worker's share of a distributed breadth-first search: its states, its visited set.

Contract: `SearchShard(config, index, count)` owns the states whose `owner()` is `index`
(a hash of name-free facts of the state's nodes and history, the same for every renaming
of it, so every state with one canonical key has one owner, in every process). The coordinator
(etcdspec.model.distributed_explore) drives a level in rounds:
- `expand(limit)` takes the next `limit` states of this shard's frontier in rank order
  and computes their successors with this shard's SearchCache. A successor owned here is
  offered to this shard at once; one owned elsewhere goes into that shard's outgoing
  batch (unless this shard sent a state with the same key before: the owner has it, at
  a level no later, with a smaller tag). It returns the batches, one opaque bytes blob
  per destination, and how many frontier states are left.
- `receive(batches)` decodes the batches sent to this shard and offers each state.
- Offering a state whose key is visited does nothing; otherwise, of the offers of one
  key in one level the one with the smallest tag (the parent's rank, the successor's
  position in the parent's successor list) wins. The single-process search
  (etcdspec.model.exhaustive) keeps the first discovery of each state, and its frontier
  is in discovery order, which is exactly the order of these tags: so each shard keeps
  the same concrete state for each key as the single-process search does.
- `end_level()` makes the winners visited (in tag order), checks their invariants until
  the first violation and returns their sorted tags and that first violation's tag;
  `begin_level(ranks)` gets their global ranks (the coordinator's merge of all shards'
  tags) and makes them the next frontier.
- `path(local_id)`: the (owner, local id, successor index) link that reached a state, to
  rebuild a counterexample by replaying successor indices from the start state.

Wire format: a batch is pickled (new objects, rows). Nodes, networks and histories are
sent once per (sender, receiver) pair and referred to by number after, so a row is a few
small ints; the receiver interns what it is sent in its own SearchCache.

No I/O; nothing here knows which engine runs it (an in-process list of shards runs the
same code in the tests).
"""

from __future__ import annotations

import gc
import pickle
import resource
import time
import zlib
from array import array
from dataclasses import dataclass
from typing import Any

from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.exhaustive import finite_config
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.network import Network
from etcdspec.model.search_cache import SearchCache

# A tag is the parent's global rank shifted left by TAG_BITS, plus the successor's index.
TAG_BITS = 20
NO_TAG = -1
START_LINK = (-1, -1, -1)
# Keys of states sent to other shards that are remembered (not sent again); past it the
# memory is cleared, which costs only sending again: the memory a shard uses stays bounded.
SENT_CAP = 1_000_000

_NODE, _NETWORK, _GHOST = 0, 1, 2


@dataclass(frozen=True)
class ShardStats:
    """One shard's figures, for progress lines and the result."""

    index: int
    visited: int
    frontier_left: int
    pending: int  # this level's new states so far
    cpu_seconds: float
    max_rss_mb: float

    def describe(self) -> str:
        return (
            f"w{self.index}: {self.visited + self.pending:,} states, "
            f"{self.frontier_left:,} to expand, "
            f"{self.max_rss_mb:,.0f} MB"
        )


@dataclass(frozen=True)
class LevelEnd:
    """What `end_level` reports: the new states' sorted tags and the first violation."""

    tags: bytes  # packed 64-bit ints (array "q"), sorted
    violation_tag: int  # NO_TAG: none of this shard's new states violates an invariant
    violation_id: int  # that state's local id (-1 with NO_TAG)
    stats: ShardStats


class _Encoder:
    """Numbers the objects one shard has sent to one other shard."""

    __slots__ = ("numbers", "objects")

    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}  # id(object) -> its number
        self.objects: list[Any] = []  # keeps every numbered object alive

    def number(self, kind: int, value: Any, new: list[tuple[int, Any]]) -> int:
        found = self.numbers.get(id(value))
        if found is None:
            found = self.numbers[id(value)] = len(self.objects)
            self.objects.append(value)
            new.append((kind, value))
        return found


class SearchShard:
    """See the module docstring."""

    def __init__(
        self, config: ClusterConfig, index: int, count: int, sent_cap: int = SENT_CAP
    ) -> None:
        if not 0 <= index < count:
            raise ValueError(f"shard index {index} is not in 0..{count - 1}")
        gc.disable()  # as in explore_exhaustive: millions of acyclic tuples
        self.config = finite_config(config)
        self.index = index
        self.count = count
        self.cache = SearchCache()
        self.start = Cluster.start(self.config)
        self.visited: dict[Any, int] = {}  # canonical key -> local id
        self.links: list[tuple[int, int, int]] = []  # local id -> (owner, parent id, successor)
        self.frontier: list[tuple[Cluster, int, int]] = []  # (state, local id, rank)
        self.cursor = 0
        self.pending: dict[Any, tuple[int, Cluster, tuple[int, int, int]]] = {}
        self.new_states: list[tuple[Cluster, int]] = []  # the last level's, in tag order
        self.sent: set[Any] = set()
        self.sent_cap = sent_cap
        self.encoders = [_Encoder() for _ in range(count)]
        self.decoded: list[list[Any]] = [[] for _ in range(count)]
        self.nodes_hashes: dict[int, int] = {}
        self.cpu_started = time.process_time()

    # ------------------------------------------------------------------ ownership

    def owner(self, state: Cluster, key: Any) -> int:
        """The shard that owns `state` (whose canonical key in this shard's cache is
        `key`): a hash of each node's term, log length, commit index and whether it has
        voted (name-free facts, summed without order) and the history's length.
        Memoised by the interned number of the state's renamed nodes (the key's first
        part). The messages in flight are left out on purpose: most steps deliver or
        send a message and change few of these facts, so a state's successors mostly stay
        with its shard. Against a hash of everything, that ships a third as many states
        and keeps each shard's memo tables warm, for a 45/55 split of the states at the
        bounds measured (bench/distributed_explore.py)."""
        if self.count == 1:
            return 0
        nodes_hash = self.nodes_hashes.get(key[0])
        if nodes_hash is None:
            nodes_hash = 0
            for node in state.nodes:
                log = node.log
                facts = (node.term, log.snapshot.last_index + len(log.entries))
                text = repr((*facts, node.commit_index, node.vote == 0)).encode()
                nodes_hash += zlib.crc32(text) * 0x85EBCA6B
            self.nodes_hashes[key[0]] = nodes_hash
        total = nodes_hash + len(state.ghost.committed) * 0x9E3779B1
        return (total ^ (total >> 29)) % self.count

    # ------------------------------------------------------------------ levels

    def seed(self) -> int:
        """Take the start state if this shard owns it; NO_TAG, or 0 when the start state
        violates an invariant (then this shard owns it), or 1 when it holds."""
        start = self.start
        key = start.canonical_fingerprint(self.cache)
        if self.owner(start, key) != self.index:
            return NO_TAG
        self.visited[key] = 0
        self.links.append(START_LINK)
        self.frontier = [(start, 0, 0)]
        try:
            start.check_invariants(cache=self.cache)
        except InvariantViolation:
            return 0
        return 1

    def expand(self, limit: int) -> tuple[dict[int, bytes], int]:
        """Expand up to `limit` more frontier states; (batches by destination, states
        left)."""
        cache = self.cache
        index = self.index
        rows: dict[int, list[tuple[Any, ...]]] = {}
        new: dict[int, list[tuple[int, Any]]] = {}
        end = min(len(self.frontier), self.cursor + limit)
        for state, local_id, rank in self.frontier[self.cursor : end]:
            base = rank << TAG_BITS
            for position, (_, successor) in enumerate(state.successors(cache)):
                if position >> TAG_BITS:
                    raise ValueError(f"a state with more than {1 << TAG_BITS} successors")
                key = successor.canonical_fingerprint(cache)
                owner = self.owner(successor, key)
                if owner == index:
                    self._offer(key, base + position, successor, (index, local_id, position))
                    continue
                if key in self.sent:
                    continue
                if len(self.sent) >= self.sent_cap:
                    self.sent.clear()  # only saves sending again: the owner dedupes too
                self.sent.add(key)
                encoder = self.encoders[owner]
                fresh = new.setdefault(owner, [])
                rows.setdefault(owner, []).append(
                    (
                        base + position,
                        local_id,
                        position,
                        tuple([encoder.number(_NODE, n, fresh) for n in successor.nodes]),
                        successor.up,
                        encoder.number(_NETWORK, successor.network, fresh),
                        successor.crashes,
                        encoder.number(_GHOST, successor.ghost, fresh),
                    )
                )
        self.cursor = end
        batches = {
            owner: pickle.dumps((new[owner], batch), protocol=pickle.HIGHEST_PROTOCOL)
            for owner, batch in rows.items()
        }
        return batches, len(self.frontier) - end

    def step(self, batches: list[tuple[int, bytes]], limit: int) -> tuple[dict[int, bytes], int]:
        """`receive(batches)`, then `expand(limit)`: one round in one call."""
        self.receive(batches)
        return self.expand(limit)

    def receive(self, batches: list[tuple[int, bytes]]) -> None:
        """Offer the states of batches sent by other shards: (sender, blob) pairs, each
        sender's in the order it sent them."""
        cache = self.cache
        config, params = self.config, self.start.params
        for sender, blob in batches:
            fresh, rows = pickle.loads(blob)
            table = self.decoded[sender]
            for kind, value in fresh:
                table.append(self._intern(kind, value))
            for tag, parent_id, position, nodes, up, network, crashes, ghost in rows:
                state = Cluster(
                    config,
                    params,
                    tuple([table[n] for n in nodes]),
                    up,
                    table[network],
                    crashes,
                    table[ghost],
                )
                key = state.canonical_fingerprint(cache)
                self._offer(key, tag, state, (sender, parent_id, position))

    def _intern(self, kind: int, value: Any) -> Any:
        cache = self.cache
        if kind == _NODE:
            return cache.node(value)
        if kind == _GHOST:
            return cache.ghost(value)
        network = Network(tuple([cache.message(m) for m in value.messages]), value.groups)
        return cache.networks.setdefault(network, network)

    def _offer(self, key: Any, tag: int, state: Cluster, link: tuple[int, int, int]) -> None:
        if key in self.visited:
            return
        known = self.pending.get(key)
        if known is None or tag < known[0]:
            self.pending[key] = (tag, state, link)

    def end_level(self) -> LevelEnd:
        """Make this level's winners visited, in tag order, and check them."""
        winners = sorted(self.pending.items(), key=lambda item: item[1][0])
        self.pending = {}
        visited, links = self.visited, self.links
        tags: list[int] = []
        new_states: list[tuple[Cluster, int]] = []
        for key, (tag, state, link) in winners:
            local_id = len(links)
            visited[key] = local_id
            links.append(link)
            tags.append(tag)
            new_states.append((state, local_id))
        violation_tag, violation_id = NO_TAG, -1
        for position, (state, local_id) in enumerate(new_states):
            try:
                state.check_invariants(cache=self.cache)
            except InvariantViolation:
                violation_tag, violation_id = tags[position], local_id
                break
        self.new_states = new_states
        self.frontier = []
        self.cursor = 0
        return LevelEnd(array("q", tags).tobytes(), violation_tag, violation_id, self.stats())

    def begin_level(self, packed_ranks: bytes) -> None:
        """Make the last level's new states the frontier, with their global ranks
        (packed 64-bit ints, in the order of end_level's tags)."""
        ranks = array("q", packed_ranks).tolist()
        if len(ranks) != len(self.new_states):
            raise ValueError(f"{len(ranks)} ranks for {len(self.new_states)} new states")
        self.frontier = [
            (state, local_id, rank)
            for (state, local_id), rank in zip(self.new_states, ranks, strict=True)
        ]
        self.new_states = []
        self.cursor = 0

    def path(self, local_id: int) -> tuple[int, int, int]:
        """The link that reached state `local_id`: (owner, parent's local id, successor
        index); START_LINK for the start state."""
        return self.links[local_id]

    def stats(self) -> ShardStats:
        return ShardStats(
            index=self.index,
            visited=len(self.visited),
            frontier_left=len(self.frontier) - self.cursor,
            pending=len(self.pending),
            cpu_seconds=time.process_time() - self.cpu_started,
            max_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        )

    def close(self) -> None:
        """Drop the search's tables and put the garbage collector back."""
        self.visited = {}
        self.pending = {}
        self.frontier = []
        self.new_states = []
        self.sent = set()
        self.cache = SearchCache()
        gc.enable()

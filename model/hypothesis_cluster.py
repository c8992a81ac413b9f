"""A Hypothesis state machine over the Raft cluster simulator, invariants after every step.

`ClusterMachine` drives `etcdspec.model.cluster.Cluster` (a persistent value: each rule
replaces `self.cluster` with `cluster.apply(action)`) through rules for ticks or
election timeouts, heartbeats, persistence, deliveries, drops, duplicates, partitions,
crashes and restarts, and client operations proposed at a leader (put, delete, txn,
lease grant and revoke, compaction), linearizable reads (ReadIndex), lease keep-alives,
log compaction and watches on a node's applied store. After every step
`cluster.check_invariants()` runs (Raft's invariants and every store's).

Choices are drawn as small indexes into the currently enabled candidates (the up nodes,
the deliverable messages, the leaders), so that preconditions stay cheap, no step is
wasted on an action that is not enabled, and shrinking towards 0 keeps runs meaningful.

Swarm testing: Hypothesis switches rules on and off per example (its feature flags),
so some examples never crash, some never drop, ...; progress rules come in pairs
(timeout while leaderless / disrupt while led, deliver any / deliver next) and an
initialize rule elects a first leader in most examples. Witnesses are counted with `hypothesis.event()` and in
the run's `RunRecorder` (leader elected, entry committed, term change, crash-restart),
and `target()` steers towards higher terms and diverging logs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from etcdspec.model import cluster as cl
from etcdspec.model.cluster import Action, Cluster, ClusterConfig
from etcdspec.model.explore import ExploreOptions, RunRecorder
from etcdspec.model.hypothesis_store import keys, range_ends, txns, values
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_node import Role
from etcdspec.model.requests import (
    CompactionRequest,
    DeleteRangeRequest,
    LeaseGrantRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    Request,
)
from etcdspec.model.watch import WatchRequest, check_watch, watch_responses
from hypothesis import strategies as st
from hypothesis import target
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

picks = st.integers(min_value=0, max_value=7)
"""An index into the enabled candidates (taken modulo their number)."""


def abstract_state(cluster: Cluster) -> dict[str, Any]:
    """The cluster as plain values (for counterexamples and ITF)."""
    return cluster.abstract()


def cluster_config(options: ExploreOptions) -> ClusterConfig:
    """The simulator configuration an exploration runs (timeouts per options.timeouts)."""
    return ClusterConfig(
        nodes=options.nodes,
        seed=options.seed,
        bugs=options.bugs,
        timeouts=options.timeouts,
        persist=options.persist,
        election_ticks=4,
        heartbeat_ticks=1,
    )


def client_requests() -> st.SearchStrategy[Request]:
    """Writes a client proposes at a leader (lease ids are small numbers, as granted)."""
    return st.one_of(
        st.builds(PutRequest, key=keys, value=values),
        st.tuples(keys, values, st.integers(min_value=1, max_value=3)).map(
            lambda t: PutRequest(key=t[0], value=t[1], lease=t[2])
        ),
        st.builds(DeleteRangeRequest, key=keys, range_end=range_ends),
        txns(),
    )


class ClusterMachine(RuleBasedStateMachine):
    """Random schedules of the Raft cluster; see the module docstring."""

    def __init__(
        self, config: ClusterConfig | None = None, recorder: RunRecorder | None = None
    ) -> None:
        super().__init__()
        self.config = config or ClusterConfig(timeouts="free")
        self.recorder = recorder or RunRecorder(abstract_state, None)
        self.cluster = Cluster.start(self.config)
        self.previous: Cluster | None = None
        self.nodes = tuple(range(1, self.config.nodes + 1))
        self.free = self.config.timeouts == "free"
        self.max_term = 0
        self.max_commit = 0
        self.leaders_seen = 0
        self.recorder.begin(self.cluster)

    # ------------------------------------------------------------------ start
    @initialize(leaderless=st.booleans(), pick=picks)
    def bootstrap(self, leaderless: bool, pick: int) -> None:
        """Most examples start from an elected leader (leader n: n times out, then every
        message is delivered in order until it leads); leaderless ones start from scratch.
        Initialize rules always run, so no example loses its way to a first leader to
        Hypothesis' per-example rule switching."""
        if leaderless:
            return
        leader = self.nodes[pick % len(self.nodes)]
        if self.free:
            self._do(cl.timeout(leader))
        for _ in range(12 * len(self.nodes)):
            if self._has_leader() and not self._deliverable():
                break
            if self.cluster.config.persist == "explicit" and self._needs_persist():
                self._do(cl.persist(self._needs_persist()[0]))
            elif self._deliverable():
                self._do(cl.deliver(self.cluster.messages[self._deliverable()[0]]))
            elif not self.free:
                self._do(cl.tick(leader))
            else:
                break

    # ------------------------------------------------------------------ helpers
    def _do(self, action: Action) -> None:
        before = self.cluster
        after = before.apply(action)
        self.previous, self.cluster = before, after
        self.recorder.step(action.describe(), after)
        self._witness(before, after)

    def _witness(self, before: Cluster, after: Cluster) -> None:
        leaders = len(after.ghost.leaders)
        if leaders > self.leaders_seen:
            self.leaders_seen = leaders
            self.recorder.witness("cluster: leader elected")
        commit = after.commit_index()
        if commit > self.max_commit:
            self.max_commit = commit
            self.recorder.witness("cluster: entry committed")
        term = after.max_term()
        if term > self.max_term:
            self.max_term = term
            self.recorder.witness("cluster: term change")

    def _up(self) -> list[int]:
        return [n for n in self.nodes if self.cluster.up[n - 1]]

    def _has_leader(self) -> bool:
        return bool(self.cluster.leader_ids())

    def _leaders(self) -> list[int]:
        return self.cluster.leader_ids()

    def _deliverable(self) -> list[int]:
        cluster = self.cluster
        network = cluster.network
        return [
            index
            for index, m in enumerate(cluster.messages)
            if cluster.up[m.dst - 1] and network.connected(m.src, m.dst)
        ]

    def _needs_persist(self) -> list[int]:
        return [
            n.id for n in self.cluster.nodes if n.durable is not None and self.cluster.up[n.id - 1]
        ]

    # ------------------------------------------------------------------ time
    @precondition(lambda self: not self.free)
    @rule(pick=picks)
    def tick(self, pick: int) -> None:
        up = self._up()
        if up:
            self._do(cl.tick(up[pick % len(up)]))

    @precondition(lambda self: self.free and not self._has_leader())
    @rule(pick=picks)
    def timeout(self, pick: int) -> None:
        """An election timeout while no leader is up: the way to make progress."""
        up = self._up()
        if up:
            self._do(cl.timeout(up[pick % len(up)]))

    @precondition(lambda self: self.free and self._has_leader())
    @rule(pick=picks)
    def disrupt(self, pick: int) -> None:
        """An election timeout while a leader is up (a leader's: its CheckQuorum)."""
        candidates = [
            n
            for n in self._up()
            if self.cluster.nodes[n - 1].role != Role.LEADER or self.config.check_quorum
        ]
        if candidates:
            self._do(cl.timeout(candidates[pick % len(candidates)]))

    @precondition(lambda self: self.free and bool(self.cluster.leader_ids()))
    @rule(pick=picks)
    def heartbeat(self, pick: int) -> None:
        leaders = self._leaders()
        self._do(cl.heartbeat(leaders[pick % len(leaders)]))

    @precondition(lambda self: self.config.persist == "explicit")
    @rule(pick=picks)
    def persist(self, pick: int) -> None:
        pending = self._needs_persist()
        if pending:
            self._do(cl.persist(pending[pick % len(pending)]))

    # ------------------------------------------------------------------ network
    @precondition(lambda self: bool(self.cluster.messages))
    @rule(pick=st.integers(min_value=0, max_value=31))
    def deliver(self, pick: int) -> None:
        deliverable = self._deliverable()
        if deliverable:
            self._do(cl.deliver(self.cluster.messages[deliverable[pick % len(deliverable)]]))

    @precondition(lambda self: bool(self.cluster.messages))
    @rule()
    def deliver_next(self) -> None:
        """In-order delivery, the common case: the oldest deliverable message."""
        deliverable = self._deliverable()
        if deliverable:
            self._do(cl.deliver(self.cluster.messages[deliverable[0]]))

    @precondition(lambda self: bool(self.cluster.messages))
    @rule(pick=st.integers(min_value=0, max_value=31))
    def drop(self, pick: int) -> None:
        messages = self.cluster.messages
        self._do(cl.drop(messages[pick % len(messages)]))

    @precondition(lambda self: bool(self.cluster.messages))
    @rule(pick=st.integers(min_value=0, max_value=31))
    def duplicate(self, pick: int) -> None:
        messages = self.cluster.messages
        self._do(cl.duplicate(messages[pick % len(messages)]))

    @precondition(lambda self: not self.cluster.network.groups)
    @rule(minority=st.sets(st.integers(min_value=1, max_value=5), min_size=1, max_size=2))
    def partition(self, minority: set[int]) -> None:
        alone = {n for n in minority if n <= len(self.nodes)}
        if alone and len(alone) * 2 < len(self.nodes):
            self._do(cl.partition((alone, set(self.nodes) - alone)))

    @precondition(lambda self: bool(self.cluster.network.groups))
    @rule()
    def heal(self) -> None:
        self._do(cl.heal())

    # ------------------------------------------------------------------ faults
    @rule(pick=picks)
    def crash(self, pick: int) -> None:
        up = self._up()
        if up:
            self._do(cl.crash(up[pick % len(up)]))

    @precondition(lambda self: not all(self.cluster.up))
    @rule(pick=picks)
    def restart(self, pick: int) -> None:
        down = [n for n in self.nodes if not self.cluster.up[n - 1]]
        self._do(cl.restart(down[pick % len(down)]))
        self.recorder.witness("cluster: crash-restart")

    # ------------------------------------------------------------------ clients
    @precondition(lambda self: bool(self.cluster.leader_ids()))
    @rule(pick=picks, request=client_requests())
    def propose(self, pick: int, request: Request) -> None:
        leaders = self._leaders()
        self._do(cl.propose(leaders[pick % len(leaders)], request))

    @precondition(lambda self: bool(self.cluster.leader_ids()))
    @rule(pick=picks, ttl=st.integers(min_value=1, max_value=4))
    def lease_grant(self, pick: int, ttl: int) -> None:
        leaders = self._leaders()
        self._do(cl.propose(leaders[pick % len(leaders)], LeaseGrantRequest(ttl=ttl)))

    @precondition(lambda self: bool(self.cluster.leader_ids()))
    @rule(pick=picks, lease=st.integers(min_value=1, max_value=3))
    def lease_revoke(self, pick: int, lease: int) -> None:
        leaders = self._leaders()
        self._do(cl.propose(leaders[pick % len(leaders)], LeaseRevokeRequest(id=lease)))

    @precondition(lambda self: bool(self.cluster.leader_ids()))
    @rule(pick=picks, lease=st.integers(min_value=1, max_value=3))
    def keepalive(self, pick: int, lease: int) -> None:
        leader = self.cluster.node(self._leaders()[pick % len(self._leaders())])
        if any(lid == lease and remaining > 0 for lid, remaining in leader.leases):
            self._do(cl.keepalive(leader.id, lease))

    @precondition(lambda self: bool(self.cluster.leader_ids()))
    @rule(pick=picks, back=st.integers(min_value=0, max_value=3))
    def compact(self, pick: int, back: int) -> None:
        leader = self.cluster.node(self._leaders()[pick % len(self._leaders())])
        revision = max(1, leader.store.revision - back)
        self._do(cl.propose(leader.id, CompactionRequest(revision=revision)))

    @rule(pick=picks)
    def compact_log(self, pick: int) -> None:
        candidates = [n for n in self._up() if self.cluster._can_compact(self.cluster.nodes[n - 1])]
        if candidates:
            self._do(cl.compact_log(candidates[pick % len(candidates)]))

    @precondition(lambda self: bool(self.cluster.leader_ids()))
    @rule(pick=picks, key=keys, range_end=range_ends)
    def read_index(self, pick: int, key: bytes, range_end: bytes) -> None:
        from etcdspec.model import raft_node

        leaders = [n for n in self._leaders() if raft_node.can_read_index(self.cluster.node(n))]
        if leaders:
            request = RangeRequest(key=key, range_end=range_end)
            self._do(cl.read_index(leaders[pick % len(leaders)], request))

    @rule(pick=picks, key=keys, range_end=range_ends, back=st.integers(min_value=0, max_value=3))
    def watch(self, pick: int, key: bytes, range_end: bytes, back: int) -> None:
        """Watch guarantees on one node's applied store, against the committed history
        as the most advanced store holds it."""
        stores = [n.store for n in self.cluster.nodes]
        node_store = stores[pick % len(stores)]
        if node_store.revision <= 1:
            return
        start = max(1, node_store.revision - back)
        request = WatchRequest(key=key, range_end=range_end, start_revision=start)
        responses = watch_responses(node_store, request, self.config.bugs)
        reference = max(stores, key=lambda s: s.revision)
        lowest = max(start, reference.compact_revision, 1)
        history = reference.events_since(lowest)
        if start < reference.compact_revision or start < node_store.compact_revision:
            return  # the reference no longer holds those events: nothing to compare with
        violations = check_watch(history, request, responses)
        self.recorder.step(f"check {request.describe()} on n{pick % len(stores) + 1}", self.cluster)
        if violations:
            raise InvariantViolation(
                violations[0].guarantee, "\n".join(v.describe() for v in violations)
            )

    # ------------------------------------------------------------------ checks
    @invariant()
    def cluster_invariants(self) -> None:
        self.cluster.check_invariants(self.previous)

    def teardown(self) -> None:
        target(float(self.max_term), label="max term")
        target(float(_log_divergence(self.cluster)), label="log divergence")
        self.recorder.finish()


def _log_divergence(cluster: Cluster) -> int:
    """How many (index, node pair) positions hold entries of different terms."""
    terms_at: dict[int, set[int]] = {}
    for node in cluster.nodes:
        first = node.log.first_index
        for offset, entry in enumerate(node.log.entries):
            terms_at.setdefault(first + offset, set()).add(entry.term)
    return sum(len(terms) - 1 for terms in terms_at.values())


def machine_factory(
    options: ExploreOptions, recorder: RunRecorder
) -> Callable[[], RuleBasedStateMachine]:
    """The factory `etcdspec.model.explore.run_hypothesis` runs: one machine per example."""
    config = cluster_config(options)

    def factory() -> RuleBasedStateMachine:
        return ClusterMachine(config, recorder)

    return factory

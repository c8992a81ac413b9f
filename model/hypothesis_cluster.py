"""A Hypothesis state machine over the Raft cluster simulator, invariants after every step.

`ClusterMachine` drives `etcdspec.model.cluster.Cluster` (a persistent value: each rule
replaces `self.cluster` with `cluster.apply(action)`) through rules for ticks or
election timeouts, heartbeats, persistence, deliveries, drops, duplicates, partitions,
crashes and restarts, and client operations proposed at a leader (put, delete, txn,
lease grant and revoke, compaction), linearizable reads (ReadIndex), lease keep-alives,
log compaction and watches on a node's applied store. After every step
`cluster.check_invariants()` runs (Raft's invariants and every store's), and every
response the step output (each applied entry's, each ReadIndex read's) is checked
against an oracle of the applying node's store (ResponsePostcondition,
model/response_oracle.py; `postconditions = False` switches that off).

Choices are drawn as small indexes into the currently enabled candidates (the up nodes,
the deliverable messages, the leaders), so that preconditions stay cheap, no step is
wasted on an action that is not enabled, and shrinking towards 0 keeps runs meaningful.

Swarm testing: Hypothesis switches rules on and off per example (its feature flags),
so some examples never crash, some never drop, ...; progress rules come in pairs
(timeout while leaderless / disrupt while led, deliver any / deliver next) and an
initialize rule elects a first leader in most examples. Macro rules take several model
steps, each checked: stabilize (deliver until quiet) and elect; `SplitBrainMachine`
adds split_brain (the leader cut off with a write of its own while the others elect
another) for runs whose `ExploreOptions.rules` name it. Rules that the configuration
rules out (tick with free timeouts, persist with sync persistence, ...) are left out
of the machine a run uses. Witnesses are counted with `hypothesis.event()` and in the
run's `RunRecorder` (leader elected, entry committed, term change, crash-restart), and
`target()` steers towards higher terms and diverging logs.

As a machine module of explore.run_hypothesis it gives `abstract_state`,
`machine_factory` and `shrink_run` (a failing run's model steps shrunk by replay:
model/action_shrink.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from hypothesis import currently_in_test_context, target
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from etcdspec.model import actions as act
from etcdspec.model import lease_clocks, raft_node
from etcdspec.model.action_shrink import ShrunkRun, shrink_actions
from etcdspec.model.actions import Action
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.explore import ExploreOptions, RunRecorder
from etcdspec.model.hypothesis_rules import focused, has_initialize_rules, rule_names
from etcdspec.model.hypothesis_store import (
    keys,
    range_ends,
    range_requests,
    rich_txns,
    txns,
    values,
)
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_messages import MsgType
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
from etcdspec.model.response_oracle import check_step_responses
from etcdspec.model.watch import WatchRequest, check_watch, watch_responses

_CAMPAIGN = (MsgType.PRE_VOTE, MsgType.VOTE)

picks = st.integers(min_value=0, max_value=7)
"""An index into the enabled candidates (taken modulo their number)."""


def abstract_state(cluster: Cluster) -> dict[str, Any]:
    """The cluster as plain values (for counterexamples and ITF), from `abstract()` with
    logs as `term:request` texts and the network as a multiset {message: copies}, so that
    a step's changes read as entries and messages that came or went."""
    state = cluster.abstract()
    for node in state["nodes"].values():
        node["log"] = [f"{term}:{key}" for term, key in node["log"]]
    messages: dict[str, int] = {}
    for text in state["messages"]:
        messages[text] = messages.get(text, 0) + 1
    state["messages"] = messages
    state["committed"] = [f"{term}:{key}" for term, key in state["committed"]]
    state["leaders"] = [f"{leader}@{term}" for term, leader in state["leaders"]]
    return state


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
        noop_on_leader=options.noop_on_leader,
        prevote=options.prevote,
        check_quorum=options.check_quorum,
        membership=options.membership,
        etcd_heartbeats=options.etcd_heartbeats,
        max_append_entries=options.max_append_entries,
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


# Preconditions are named functions, not lambdas: Hypothesis describes every
# precondition it evaluates (for its statistics), which is a name lookup for a function
# but a cache search for a lambda. Each reads only cheap state.
def _unpartitioned(machine: ClusterMachine) -> bool:
    return not machine.cluster.network.groups


def _partitioned(machine: ClusterMachine) -> bool:
    return bool(machine.cluster.network.groups)


def _counted_ticks(machine: ClusterMachine) -> bool:
    return not machine.free


def _free_leaderless(machine: ClusterMachine) -> bool:
    return machine.free and not machine.cluster.leader_ids()


def _free_led(machine: ClusterMachine) -> bool:
    return machine.free and bool(machine.cluster.leader_ids())


def _explicit_persist(machine: ClusterMachine) -> bool:
    return machine.explicit


def _in_flight(machine: ClusterMachine) -> bool:
    return bool(machine.cluster.network.messages)


def _some_down(machine: ClusterMachine) -> bool:
    return not all(machine.cluster.up)


def _led(machine: ClusterMachine) -> bool:
    return bool(machine.cluster.leader_ids())


def _reconfigurable(machine: ClusterMachine) -> bool:
    cluster = machine.cluster
    return any(
        raft_node.can_change_config(cluster.params, cluster.node(n)) for n in cluster.leader_ids()
    )


def _reconfigurable_and_unpartitioned(machine: ClusterMachine) -> bool:
    return not machine.cluster.network.groups and _reconfigurable(machine)


def _led_and_unpartitioned(machine: ClusterMachine) -> bool:
    return not machine.cluster.network.groups and bool(machine.cluster.leader_ids())


def dead_rules(config: ClusterConfig) -> frozenset[str]:
    """Rules that can never run under `config` (their precondition reads only the
    configuration): leaving them out of the machine saves Hypothesis drawing and
    rejecting them at every step, and changes nothing that runs."""
    dead = {"tick"} if config.timeouts == "free" else {"timeout", "disrupt", "heartbeat"}
    if config.persist != "explicit":
        dead.add("persist")
    return frozenset(dead)


class ClusterMachine(RuleBasedStateMachine):
    """Random schedules of the Raft cluster; see the module docstring."""

    postconditions = True  # check each step's responses (model/response_oracle.py)

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
        self.explicit = self.config.persist == "explicit"
        self.checked: Cluster | None = None  # the last state whose invariants were checked
        # Without an initialize rule, Hypothesis checks invariants once before any rule.
        self.uncounted_check = not has_initialize_rules(type(self))
        self.max_term = 0
        self.max_commit = 0
        self.leaders_seen = 0
        self.failed = False  # a step raised: teardown must not add steps
        self.epilogue = True
        self.recorder.begin(self.cluster)

    # ------------------------------------------------------------------ start
    @initialize(start=st.integers(min_value=0, max_value=3), pick=picks)
    def bootstrap(self, start: int, pick: int) -> None:
        """Most examples start from an elected leader (leader n: n times out, then every
        message is delivered in order until it leads); start 3 begins leaderless.
        Initialize rules always run, so no example loses its way to a first leader to
        Hypothesis' per-example rule switching."""
        if start == 3:  # leaderless
            return
        leader = self.nodes[pick % len(self.nodes)]
        if self.free:
            self._do(act.timeout(leader))
            self._settle()
            return
        for _ in range(4 * self.config.election_ticks):
            if self._has_leader():
                break
            self._do(act.tick(leader))
            self._settle()

    # ------------------------------------------------------------------ macro steps
    @rule()
    def stabilize(self) -> None:
        """Deliver (and persist) in order until nothing deliverable is left: the quiet
        network most schedules return to. Each delivery is its own labelled step."""
        self._settle()

    @rule(pick=picks)
    def elect(self, pick: int) -> None:
        """An election among the nodes one up node can reach: it times out first, then
        every other follower there (their leader is gone: their timers ran out too, but
        their own campaign messages are lost), then the network settles — usually with
        the candidate leading."""
        up = self._up()
        if up:
            self._elect(up[pick % len(up)])

    def _elect(self, candidate: int) -> None:
        """See `elect`; with counted ticks the others tick until one leads (bounded)."""
        network = self.cluster.network
        others = [
            n
            for n in self._up()
            if n != candidate
            and network.connected(candidate, n)
            and self.cluster.node(n).role != Role.LEADER
        ]
        if not self.free:
            for _ in range(4 * self.config.election_ticks):
                if any(self.cluster.node(n).role == Role.LEADER for n in (candidate, *others)):
                    return
                for node in (candidate, *others):
                    self._do(act.tick(node))
                self._settle(prefer=candidate)
            return
        if self.cluster.node(candidate).role == Role.LEADER and not self.config.check_quorum:
            return  # without CheckQuorum a leader has no election timeout: it stays
        self._do(act.timeout(candidate))
        if not self.config.prevote:
            others = []  # without PreVote they would campaign in the candidate's term
        for node in others:
            self._do(act.timeout(node))
            if self.cluster.node(node).durable is not None or self.cluster.node(node).outbox:
                self._do(act.persist(node))
            for message in self.cluster.messages:
                if message.src == node and message.type in _CAMPAIGN:
                    self._do(act.drop(message))
        self._settle(prefer=candidate)

    @precondition(_unpartitioned)
    @rule(pick=picks)
    def isolate(self, pick: int) -> None:
        """Cut one node off from the others (heal reconnects)."""
        node = self.nodes[pick % len(self.nodes)]
        self._do(act.partition(({node}, set(self.nodes) - {node})))

    def _settle(self, prefer: int = 0) -> None:
        """Persist and deliver in order until quiet; messages from `prefer` first, then
        those to it (so that the node an election is for usually wins it)."""
        explicit = self.config.persist == "explicit"
        for _ in range(16 * len(self.nodes)):
            pending = self._needs_persist() if explicit else []
            if pending:
                self._do(act.persist(pending[0]))
                continue
            messages = self.cluster.messages
            deliverable = [messages[i] for i in self._deliverable()]
            if not deliverable:
                return
            from_prefer = [m for m in deliverable if m.src == prefer]
            to_prefer = [m for m in deliverable if m.dst == prefer]
            self._do(act.deliver((from_prefer or to_prefer or deliverable)[0]))

    # ------------------------------------------------------------------ helpers
    def _do(self, action: Action) -> None:
        """Take one model step and check every invariant on the state it reaches (also
        inside macro rules, so a transient violation is never masked)."""
        before = self.cluster
        self.failed = True  # until the step and its checks are through
        after = before.apply(action)
        self.previous, self.cluster = before, after
        self.recorder.step(None, after, action)  # labelled only if it is ever shown
        self._witness(before, after)
        after.check_invariants(before)
        if self.postconditions and check_step_responses(before, after, action):
            self.recorder.witness("cluster: response checked")
        self.checked = after
        self.failed = False

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
    @precondition(_counted_ticks)
    @rule(pick=picks)
    def tick(self, pick: int) -> None:
        up = self._up()
        if up:
            self._do(act.tick(up[pick % len(up)]))

    @precondition(_free_leaderless)
    @rule(pick=picks)
    def timeout(self, pick: int) -> None:
        """An election timeout while no leader is up: the way to make progress."""
        up = self._up()
        if up:
            self._do(act.timeout(up[pick % len(up)]))

    @precondition(_free_led)
    @rule(pick=picks)
    def disrupt(self, pick: int) -> None:
        """An election timeout while a leader is up (a leader's: its CheckQuorum)."""
        candidates = [
            n
            for n in self._up()
            if self.cluster.nodes[n - 1].role != Role.LEADER or self.config.check_quorum
        ]
        if candidates:
            self._do(act.timeout(candidates[pick % len(candidates)]))

    @precondition(_free_led)
    @rule(pick=picks)
    def heartbeat(self, pick: int) -> None:
        leaders = self._leaders()
        self._do(act.heartbeat(leaders[pick % len(leaders)]))

    @precondition(_explicit_persist)
    @rule(pick=picks)
    def persist(self, pick: int) -> None:
        pending = self._needs_persist()
        if pending:
            self._do(act.persist(pending[pick % len(pending)]))

    # ------------------------------------------------------------------ network
    @precondition(_in_flight)
    @rule(pick=st.integers(min_value=0, max_value=31))
    def deliver(self, pick: int) -> None:
        deliverable = self._deliverable()
        if deliverable:
            self._do(act.deliver(self.cluster.messages[deliverable[pick % len(deliverable)]]))

    @precondition(_in_flight)
    @rule()
    def deliver_newest(self) -> None:
        """Reordering at its most adversarial: the newest deliverable message overtakes
        every older one (stale responses then arrive after newer proposals)."""
        deliverable = self._deliverable()
        if deliverable:
            self._do(act.deliver(self.cluster.messages[deliverable[-1]]))

    @precondition(_in_flight)
    @rule()
    def deliver_next(self) -> None:
        """In-order delivery, the common case: the oldest deliverable message."""
        deliverable = self._deliverable()
        if deliverable:
            self._do(act.deliver(self.cluster.messages[deliverable[0]]))

    @precondition(_in_flight)
    @rule(pick=st.integers(min_value=0, max_value=31))
    def drop(self, pick: int) -> None:
        messages = self.cluster.messages
        self._do(act.drop(messages[pick % len(messages)]))

    @precondition(_in_flight)
    @rule(pick=st.integers(min_value=0, max_value=31))
    def duplicate(self, pick: int) -> None:
        messages = self.cluster.messages
        self._do(act.duplicate(messages[pick % len(messages)]))

    @precondition(_unpartitioned)
    @rule(minority=st.sets(st.integers(min_value=1, max_value=5), min_size=1, max_size=2))
    def partition(self, minority: set[int]) -> None:
        alone = {n for n in minority if n <= len(self.nodes)}
        if alone and len(alone) * 2 < len(self.nodes):
            self._do(act.partition((alone, set(self.nodes) - alone)))

    @precondition(_partitioned)
    @rule()
    def heal(self) -> None:
        self._do(act.heal())

    # ------------------------------------------------------------------ faults
    @rule(pick=picks)
    def crash(self, pick: int) -> None:
        """Crash an up node; nodes holding unpersisted state come first (pick 0 is the
        worst moment to crash), then the others in order."""
        up = sorted(self._up(), key=lambda n: self.cluster.node(n).durable is None)
        if up:
            self._do(act.crash(up[pick % len(up)]))

    @precondition(_some_down)
    @rule(pick=picks)
    def restart(self, pick: int) -> None:
        down = [n for n in self.nodes if not self.cluster.up[n - 1]]
        self._do(act.restart(down[pick % len(down)]))
        self.recorder.witness("cluster: crash-restart")

    # ------------------------------------------------------------------ clients
    @precondition(_led)
    @rule(pick=picks, request=client_requests())
    def propose(self, pick: int, request: Request) -> None:
        leaders = self._leaders()
        self._do(act.propose(leaders[pick % len(leaders)], request))

    @precondition(_led)
    @rule(
        pick=picks,
        request=st.one_of(
            st.builds(PutRequest, key=keys, value=values, prev_kv=st.just(True)),
            st.builds(DeleteRangeRequest, key=keys, range_end=range_ends, prev_kv=st.just(True)),
            rich_txns(),
        ),
    )
    def propose_options(self, pick: int, request: Request) -> None:
        """A write asking for all its response can carry (prev_kv, nested txns, range
        options), whose applied responses the postconditions check on every node."""
        leaders = self._leaders()
        self._do(act.propose(leaders[pick % len(leaders)], request))

    @precondition(_led)
    @rule(pick=picks, ttl=st.integers(min_value=1, max_value=4))
    def lease_grant(self, pick: int, ttl: int) -> None:
        leaders = self._leaders()
        self._do(act.propose(leaders[pick % len(leaders)], LeaseGrantRequest(ttl=ttl)))

    @precondition(_led)
    @rule(pick=picks, lease=st.integers(min_value=1, max_value=3))
    def lease_revoke(self, pick: int, lease: int) -> None:
        leaders = self._leaders()
        self._do(act.propose(leaders[pick % len(leaders)], LeaseRevokeRequest(id=lease)))

    @precondition(_led)
    @rule(pick=picks, lease=st.integers(min_value=1, max_value=3))
    def keepalive(self, pick: int, lease: int) -> None:
        leader = self.cluster.node(self._leaders()[pick % len(self._leaders())])
        if lease_clocks.can_keep_alive(self.cluster.params, leader, lease):
            self._do(act.keepalive(leader.id, lease))

    @precondition(_led)
    @rule(pick=picks, back=st.integers(min_value=0, max_value=3))
    def compact(self, pick: int, back: int) -> None:
        leader = self.cluster.node(self._leaders()[pick % len(self._leaders())])
        revision = max(1, leader.store.revision - back)
        self._do(act.propose(leader.id, CompactionRequest(revision=revision)))

    @rule(pick=picks)
    def compact_log(self, pick: int) -> None:
        candidates = [n for n in self._up() if self.cluster._can_compact(self.cluster.nodes[n - 1])]
        if candidates:
            self._do(act.compact_log(candidates[pick % len(candidates)]))

    @precondition(_led)
    @rule(pick=picks, request=range_requests())
    def read_index(self, pick: int, request: RangeRequest) -> None:
        """A linearizable read with any range options (its response is checked)."""
        leaders = [n for n in self._leaders() if raft_node.can_read_index(self.cluster.node(n))]
        if leaders:
            self._do(act.read_index(leaders[pick % len(leaders)], request))

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
        """After every rule. The steps inside it were checked one by one already, so the
        state is checked again only if something changed it outside `_do`. Counts the
        rule that ran."""
        if self.uncounted_check:
            self.uncounted_check = False
        else:
            self.recorder.rule_step()
        if self.cluster is not self.checked:
            self.cluster.check_invariants(self.previous)
            self.checked = self.cluster

    def teardown(self) -> None:
        try:
            if not self.failed and self.epilogue:
                self._depose_leader()
            if currently_in_test_context():
                target(float(_log_divergence(self.cluster)), label="log divergence")
        finally:
            self.recorder.finish()

    def _depose_leader(self) -> None:
        """The final phase of every example (as Jepsen ends with recovery): heal, crash
        and restart every follower holding unpersisted state, cut the leader off, let
        the others elect one of themselves and settle. Whatever the run
        left inconsistent (an entry committed without a quorum, a stale append accepted)
        then shows as a violation, checked step by step."""
        if self.cluster.network.groups:
            self._do(act.heal())
        leaders = self._leaders()
        if not leaders or len(self._up()) < 2:
            return
        leader = leaders[0]
        for node in self._up():  # a power cut: followers lose what they had not persisted
            if node != leader and self.cluster.node(node).durable is not None:
                self._do(act.crash(node))
                self._do(act.restart(node))
        self._do(act.partition(({leader}, set(self.nodes) - {leader})))
        others = [n for n in self._up() if n != leader]
        self._elect(others[0])


class SplitBrainMachine(ClusterMachine):
    """The cluster machine plus the split_brain macro rule (and expire_lease,
    keepalive_held), for focused runs (bug finders name them in `ExploreOptions.rules`);
    default runs keep ClusterMachine's rules, so their seeded schedules stay as they were."""

    @precondition(_led_and_unpartitioned)
    @rule(pick=picks, request=st.builds(PutRequest, key=keys, value=values))
    def split_brain(self, pick: int, request: PutRequest) -> None:
        """Raft's classic divergence: a leader is cut off from the others holding a
        write of its own that cannot commit, and the others elect a leader among
        themselves, whose writes then take the same log indexes (heal lets the two
        logs meet)."""
        leaders = self._leaders()
        leader = leaders[pick % len(leaders)]
        self._do(act.partition(({leader}, set(self.nodes) - {leader})))
        self._do(act.propose(leader, request))
        others = [n for n in self._up() if n != leader]
        if others:
            self._elect(others[pick % len(others)])

    @precondition(_led)
    @rule(pick=picks)
    def expire_lease(self, pick: int) -> None:
        """The network settles (grants commit), then a leader ticks (each tick its own
        step) until a lease's clock runs out: it proposes that lease's expiry, which
        stays pending until the network delivers again."""
        self._settle()
        leaders = [n for n in self._leaders() if self.cluster.node(n).leases]
        if not leaders or self.cluster.config.timeouts != "ticks":
            return
        leader = leaders[pick % len(leaders)]
        running = {lid for lid, r in self.cluster.node(leader).leases if r > 0}
        while running:  # every tick takes one off each running clock: this ends
            self._do(act.tick(leader))
            node = self.cluster.node(leader)
            clocks = {lid: r for lid, r in node.leases if lid in running}
            if node.role != Role.LEADER or len(clocks) < len(running) or 0 in clocks.values():
                return  # a clock ran out (its expiry proposed), or the leader moved on

    @precondition(_led)
    @rule(pick=picks, lease=st.integers(min_value=0, max_value=3))
    def keepalive_held(self, pick: int, lease: int) -> None:
        """A keep-alive of a lease the leader holds a clock for (keepalive draws any id)."""
        leader = self.cluster.node(self._leaders()[pick % len(self._leaders())])
        if leader.leases:
            held = leader.leases[lease % len(leader.leases)][0]
            if lease_clocks.can_keep_alive(self.cluster.params, leader, held):
                self._do(act.keepalive(leader.id, held))


class MembershipRules:
    """The rule of membership runs (mixed into a cluster machine only when the config
    has membership on, so that other runs draw the very rules they always drew)."""

    cluster: Cluster

    @precondition(_reconfigurable)
    @rule(pick=picks, change=st.integers(min_value=0, max_value=31))
    def reconfigure(self, pick: int, change: int) -> None:
        """A leader that may change its configuration proposes one of the changes its
        configuration allows (add, remove, add as learner, promote)."""
        leaders = self._reconfiguring_leaders()
        if leaders:
            self._reconfigure_at(leaders[pick % len(leaders)], change)

    @precondition(_reconfigurable_and_unpartitioned)
    @rule(
        pick=picks,
        partner=picks,
        change=st.integers(min_value=0, max_value=31),
        rival_change=st.integers(min_value=0, max_value=31),
        candidate=picks,
    )
    def split_reconfigure(
        self, pick: int, partner: int, change: int, rival_change: int, candidate: int
    ) -> None:
        """split_brain for configurations, on both sides: a leader that may change its
        configuration is cut off with one other node and proposes a change there (it
        reaches that node); the others elect a leader among themselves, which proposes a
        change too if it may; the network then splits the other way (that leader with
        one of its voters against the rest), each side settles, and the rest elect (in
        up to two rounds)."""
        machine = cast(ClusterMachine, self)
        nodes = set(machine.nodes)
        leader = self._reconfiguring_leaders()[pick % len(self._reconfiguring_leaders())]
        others = [n for n in machine.nodes if n != leader]
        side = {leader, others[partner % len(others)]}
        machine._do(act.partition((side, nodes - side)))
        self._reconfigure_at(leader, change)
        machine._settle(prefer=leader)
        rest = [n for n in machine._up() if n not in side]
        if not rest:
            return
        machine._elect(rest[pick % len(rest)])
        rivals = [n for n in self._reconfiguring_leaders() if n in rest]
        if not rivals:
            return
        rival = rivals[0]
        self._reconfigure_at(rival, rival_change)
        voters = raft_node.config_of(self.cluster.params, self.cluster.node(rival).log).voters
        mates = sorted(voters - {rival})
        if not mates:
            return
        second = {rival, mates[partner % len(mates)]}
        machine._do(act.heal())
        machine._do(act.partition((second, nodes - second)))
        machine._settle(prefer=rival)
        remaining = [n for n in machine._up() if n not in second]
        if remaining:
            chosen = remaining[candidate % len(remaining)]
            for _ in range(2):  # a second round when the first met votes of its term
                machine._elect(chosen)
                if self.cluster.node(chosen).role == Role.LEADER:
                    break

    def _reconfiguring_leaders(self) -> list[int]:
        cluster = self.cluster
        return [
            n
            for n in cluster.leader_ids()
            if raft_node.can_change_config(cluster.params, cluster.node(n))
        ]

    def _reconfigure_at(self, leader: int, change: int) -> None:
        changes = list(self.cluster.conf_changes(self.cluster.node(leader)))
        if changes:
            cast(ClusterMachine, self)._do(changes[change % len(changes)])
            cast(ClusterMachine, self).recorder.witness("cluster: configuration change")


class MembershipMachine(MembershipRules, SplitBrainMachine):
    """The cluster machine with configuration changes (membership runs)."""


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
    base = MembershipMachine if config.membership else SplitBrainMachine
    rules = frozenset(rule_names(ClusterMachine)) if options.rules is None else options.rules
    if config.membership and options.rules is None:
        rules |= {"reconfigure"}
    machine = focused(base, rules - dead_rules(config))

    def factory() -> RuleBasedStateMachine:
        return machine(config, recorder)

    return factory


def shrink_run(
    options: ExploreOptions,
    actions: Sequence[Any],
    invariant: str,
    max_replays: int = 2000,
) -> ShrunkRun | None:
    """The machine module's shrinker (explore.run_hypothesis looks it up by name): the
    run's model steps shrunk by replay on this run's cluster configuration."""
    return shrink_actions(cluster_config(options), actions, invariant, max_replays)

"""A deterministic simulator of N Raft drivers (test helper for tests/impl/test_impl_raft_*).

The network is a multiset of in-flight messages: any one may be delivered next (reorder),
dropped, or duplicated. Partitions block delivery between groups. A crash keeps only what
the node persisted through its Readies (hard state, snapshot, entries) and loses the rest;
a restart builds a new driver from that. Every Ready is handled right away, in the
contract's order: persist, then send, then apply, then advance.

`check()` asserts the Raft safety properties over the whole cluster after every step:
Election Safety, Log Matching, State Machine Safety, Leader Completeness, commit <= last
index, and each node's own invariants (and, as nodes apply conf changes, Configuration
Agreement: every node is in the same configuration after the same conf change). Violations raise AssertionError with a description.

Configuration changes: `propose_conf_change` at a leader; every node applies a committed
CONF_CHANGE entry through `apply_conf_change` as it applies its log (as a server does);
`add_node` boots a node that joins (as a learner, or with an empty configuration).
"""

from __future__ import annotations

import contextlib
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from etcdspec.impl.raft.core import PersistedState, RaftConfig, Role
from etcdspec.impl.raft.driver import RaftDriver, Ready
from etcdspec.impl.raft.messages import (
    BadLeaderTransferee,
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ProposalDropped,
    ReadState,
    Snapshot,
)
from etcdspec.impl.storage import snapfile
from etcdspec.impl.storage.wal import Wal, recorded_snapshots


def encode_state_machine(applied: list[Entry]) -> bytes:
    """[term, index, data hex] per entry, and the type when it is not NORMAL."""
    return json.dumps(
        [[e.term, e.index, e.data.hex(), *([int(e.type)] if e.type else [])] for e in applied]
    ).encode()


def decode_state_machine(blob: bytes) -> list[Entry]:
    if not blob:
        return []
    return [
        Entry(t, i, bytes.fromhex(d), EntryType(k[0] if k else 0))
        for t, i, d, *k in json.loads(blob)
    ]


# Seeded durability bugs (the simulator's own bug catalogue): the safety checks must
# catch each of them in some seeded run.
BUGS = frozenset({"vote_not_persisted", "ack_before_fsync"})


@dataclass
class Disk:
    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)
    fsyncs: int = 0
    bugs: frozenset[str] = frozenset()

    unsynced: Ready | None = None  # with ack_before_fsync: written, but lost by a crash

    def save(self, ready: Ready) -> None:
        if "vote_not_persisted" in self.bugs and ready.hard_state is not None:
            ready = replace(ready, hard_state=replace(ready.hard_state, vote=0))
        if "ack_before_fsync" in self.bugs:
            # the fsync lags one Ready behind: a crash loses the last Ready's writes
            previous, self.unsynced = self.unsynced, ready
            if previous is None:
                return
            ready = previous
        self._write(ready)

    def _write(self, ready: Ready) -> None:
        if ready.snapshot is not None:
            self.snapshot = ready.snapshot
            self.entries = []
        if ready.entries:
            first = ready.entries[0].index
            while self.entries and self.entries[-1].index >= first:
                self.entries.pop()
            self.entries.extend(ready.entries)
        if ready.hard_state is not None:
            self.hard_state = ready.hard_state
        if ready.must_fsync:
            self.fsyncs += 1

    def crash(self) -> None:
        self.unsynced = None

    def compact(self, snapshot: Snapshot) -> None:
        if self.unsynced is not None:  # writing the snapshot file syncs the disk
            self._write(self.unsynced)
            self.unsynced = None
        self.snapshot = snapshot
        self.entries = [e for e in self.entries if e.index > snapshot.meta.index]

    def persisted(self) -> PersistedState:
        return PersistedState(self.hard_state, self.snapshot, tuple(self.entries))


class FileDisk:
    """A node's storage on real files: the WAL and snapshot files of etcdspec.impl.

    A crash closes the WAL without flushing anything more (as kill -9 does; the page
    cache survives, so the fsync is a counter here to keep runs fast). Restart recovers
    as the server does: the newest snapshot file the WAL records, then the WAL after it.
    """

    def __init__(self, root: Path, segment_bytes: int = 300) -> None:
        self.wal_dir, self.snap_dir = root / "wal", root / "snap"
        self.segment_bytes = segment_bytes
        self.wal: Wal | None = None
        self.snapshot: Snapshot | None = None
        self.fsyncs = 0
        self.warnings: list[str] = []

    def _fsync(self, fd: int) -> None:
        self.fsyncs += 1

    def persisted(self) -> PersistedState:
        self.crash()
        seen = recorded_snapshots(self.wal_dir)
        loaded = snapfile.load_newest(self.snap_dir, accept=lambda m: (m.index, m.term) in seen)
        self.snapshot = loaded.snapshot if loaded is not None else None
        self.wal, state = Wal.open(
            self.wal_dir,
            snapshot=self.snapshot.meta if self.snapshot else None,
            segment_bytes=self.segment_bytes,
            fsync=self._fsync,
        )
        self.warnings.extend(state.warnings)
        return PersistedState(state.hard_state, self.snapshot, state.entries)

    def save(self, ready: Ready) -> None:
        assert self.wal is not None
        if ready.snapshot is not None:
            snapfile.save(self.snap_dir, ready.snapshot, fsync=self._fsync)
            self.snapshot = ready.snapshot
        self.wal.save_ready(ready)

    def compact(self, snapshot: Snapshot) -> None:
        assert self.wal is not None
        snapfile.save(self.snap_dir, snapshot, fsync=self._fsync)
        self.wal.save_snapshot(snapshot.meta)
        self.wal.release_to(snapshot.meta.index)
        snapfile.prune(self.snap_dir, keep=2)
        self.snapshot = snapshot

    def crash(self) -> None:
        if self.wal is not None:
            self.wal.close()
            self.wal = None


@dataclass
class SimNode:
    id: int
    driver: RaftDriver | None
    disk: Disk | FileDisk
    applied: list[Entry]
    read_states: list[ReadState] = field(default_factory=list)


class Cluster:
    def __init__(
        self,
        n: int = 3,
        seed: int = 0,
        *,
        pre_vote: bool = True,
        check_quorum: bool = True,
        election_tick: int = 10,
        heartbeat_tick: int = 1,
        max_size_per_msg: int = 1024 * 1024,
        max_inflight_msgs: int = 256,
        defer_commit_broadcast: bool = False,
        unsafe_conf_change: frozenset[str] = frozenset(),
        bugs: frozenset[str] = frozenset(),
        record_events: bool = False,
        storage_root: Path | None = None,
    ) -> None:
        unknown = bugs - BUGS
        assert not unknown, f"unknown simulator bugs {sorted(unknown)}; known: {sorted(BUGS)}"
        self.bugs = bugs
        self.record_events = record_events  # the event log `log` (golden tests read it)
        self.rng = random.Random(seed)
        self.seed = seed
        self.ids = tuple(range(1, n + 1))
        self.config_kwargs = dict(
            pre_vote=pre_vote,
            check_quorum=check_quorum,
            election_tick=election_tick,
            heartbeat_tick=heartbeat_tick,
            max_size_per_msg=max_size_per_msg,
            max_inflight_msgs=max_inflight_msgs,
            defer_commit_broadcast=defer_commit_broadcast,
            unsafe_conf_change=unsafe_conf_change,
        )
        self.nodes: dict[int, SimNode] = {}
        self.restarts = 0
        self.storage_root = storage_root
        # each node's configuration at its first start (RaftConfig.voters, .learners)
        self.initial_conf: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for node_id in self.ids:
            self._create(node_id, self.ids, ())
        self.network: list[Message] = []
        self.groups: list[frozenset[int]] | None = None
        self.leaders_by_term: dict[int, int] = {}
        self.committed: dict[int, Entry] = {}  # index -> the entry applied there by anyone
        self.conf_after: dict[int, ConfState] = {}  # conf change index -> configuration
        self.read_floor: dict[bytes, int] = {}  # read context -> commit known at request
        self.reads_served = 0  # read states handed out, restarts included
        self.elections = 0
        self.delivered: Counter[MessageType] = Counter()
        self.log: list[str] = []

    # --- lifecycle ---------------------------------------------------------------------
    def config(self, node_id: int) -> RaftConfig:
        voters, learners = self.initial_conf[node_id]
        return RaftConfig(id=node_id, voters=voters, learners=learners, **self.config_kwargs)  # type: ignore[arg-type]

    def _create(self, node_id: int, voters: tuple[int, ...], learners: tuple[int, ...]) -> None:
        disk: Disk | FileDisk = Disk(bugs=self.bugs)
        if self.storage_root is not None:
            disk = FileDisk(self.storage_root / f"node{node_id}")
        self.initial_conf[node_id] = (voters, learners)
        self.nodes[node_id] = SimNode(node_id, None, disk, [])
        self._boot(node_id)

    def add_node(
        self, node_id: int, voters: tuple[int, ...] = (), learners: tuple[int, ...] = ()
    ) -> None:
        """Boot a new node that joins: with the configuration that added it (itself a
        learner), or with an empty one (it learns it from a snapshot)."""
        assert node_id not in self.nodes, f"node {node_id} exists"
        self.ids = (*self.ids, node_id)
        self._create(node_id, voters, learners)
        self.log.append(f"add node {node_id} voters={list(voters)} learners={list(learners)}")

    def _boot(self, node_id: int) -> None:
        node = self.nodes[node_id]
        rng = random.Random(self.seed * 1000 + node_id * 31 + self.restarts)
        node.driver = RaftDriver(self.config(node_id), rng, node.disk.persisted())
        node.applied = decode_state_machine(node.disk.snapshot.data if node.disk.snapshot else b"")

    def crash(self, node_id: int) -> None:
        self.nodes[node_id].driver = None
        self.nodes[node_id].disk.crash()
        self.network = [m for m in self.network if m.to != node_id and m.from_ != node_id]
        self.log.append(f"crash {node_id}")

    def restart(self, node_id: int) -> None:
        self.restarts += 1
        self._boot(node_id)
        self.log.append(f"restart {node_id}")

    def alive(self) -> list[int]:
        return [i for i in self.ids if self.nodes[i].driver is not None]

    def driver(self, node_id: int) -> RaftDriver:
        driver = self.nodes[node_id].driver
        assert driver is not None, f"node {node_id} is down"
        return driver

    # --- network -----------------------------------------------------------------------
    def partition(self, *groups: set[int]) -> None:
        self.groups = [frozenset(g) for g in groups]
        self.log.append(f"partition {[sorted(g) for g in groups]}")

    def heal(self) -> None:
        self.groups = None
        self.log.append("heal")

    def connected(self, a: int, b: int) -> bool:
        if self.groups is None:
            return True
        return any(a in g and b in g for g in self.groups)

    def deliver(self, position: int) -> None:
        m = self.network.pop(position)
        node = self.nodes[m.to]
        if node.driver is None or not self.connected(m.from_, m.to):
            if self.record_events:
                why = "down" if node.driver is None else "partitioned"
                self.log.append(f"lost ({why}) {m.describe()}")
            return
        if self.record_events:
            self.log.append(f"deliver {m.describe()}")
        self.delivered[m.type] += 1
        node.driver.step(m)  # a forwarded proposal with nowhere to go is dropped
        self.process(m.to)

    def deliver_where(self, wanted: Callable[[Message], bool], max_rounds: int = 10_000) -> int:
        """Deliver the oldest message `wanted` accepts, again and again, until none is
        left (messages sent meanwhile included); returns how many were delivered."""
        for delivered in range(max_rounds):
            position = next((i for i, m in enumerate(self.network) if wanted(m)), None)
            if position is None:
                return delivered
            self.deliver(position)
        return max_rounds

    def drop_where(self, unwanted: Callable[[Message], bool]) -> int:
        """Lose every message in flight that `unwanted` accepts; returns how many."""
        before = len(self.network)
        self.network = [m for m in self.network if not unwanted(m)]
        return before - len(self.network)

    def deliver_all(self, max_rounds: int = 10_000) -> None:
        rounds = 0
        while self.network and rounds < max_rounds:
            self.deliver(0)
            rounds += 1

    # --- inputs ------------------------------------------------------------------------
    def tick(self, node_id: int, times: int = 1) -> None:
        for _ in range(times):
            self.driver(node_id).tick()
            self.process(node_id)

    def tick_all(self, times: int = 1) -> None:
        for _ in range(times):
            for node_id in self.alive():
                self.tick(node_id)

    def propose(self, node_id: int, data: bytes) -> bool:
        try:
            self.driver(node_id).propose(data)
        except ProposalDropped:
            return False
        self.process(node_id)
        return True

    def read_index(self, node_id: int, context: bytes) -> bool:
        self.read_floor[context] = max(self.committed, default=0)
        try:
            self.driver(node_id).read_index(context)
        except ProposalDropped:
            return False
        self.process(node_id)
        return True

    def flush_commit(self, node_id: int) -> None:
        """What a server's commit timer does (RaftConfig.defer_commit_broadcast)."""
        self.driver(node_id).flush_commit()
        self.process(node_id)

    def campaign(self, node_id: int) -> None:
        self.driver(node_id).campaign()
        self.process(node_id)

    def propose_conf_change(self, node_id: int, cc: ConfChange) -> bool:
        try:
            self.driver(node_id).propose_conf_change(cc)
        except ProposalDropped:
            return False
        self.log.append(f"{node_id} proposes {cc.describe()}")
        self.process(node_id)
        return True

    def members(self, node_id: int) -> tuple[int, ...]:
        return self.driver(node_id).conf_state.members()

    def transfer_leader(self, node_id: int, target: int) -> None:
        self.driver(node_id).transfer_leader(target)
        self.process(node_id)

    def compact(self, node_id: int) -> bool:
        node = self.nodes[node_id]
        driver = self.driver(node_id)
        applied = driver.core.log.applied
        if applied <= driver.core.log.offset:
            return False
        blob = encode_state_machine([e for e in node.applied if e.index <= applied])
        snapshot = driver.compact(applied, blob)
        node.disk.compact(snapshot)
        self.log.append(f"compact {node_id} at {applied}")
        return True

    # --- the Ready hand-off --------------------------------------------------------------
    def process(self, node_id: int) -> None:
        node = self.nodes[node_id]
        driver = self.driver(node_id)
        while driver.has_ready():
            ready = driver.ready()
            node.disk.save(ready)
            if self.record_events:
                self._record(node_id, ready)
            self.network.extend(ready.messages)
            if ready.snapshot is not None:
                node.applied = decode_state_machine(ready.snapshot.data)
            for entry in ready.committed_entries:
                self._apply(node, entry)
            for read_state in ready.read_states:
                self._check_read(node_id, read_state)
                node.read_states.append(read_state)
                self.reads_served += 1
            if ready.soft_state is not None and ready.soft_state.role is Role.LEADER:
                self._on_leader(node_id)
            driver.advance(ready)
        self.check()

    def _record(self, node_id: int, ready: Ready) -> None:
        if ready.soft_state is not None:
            term = self.driver(node_id).term
            self.log.append(f"{node_id} is {ready.soft_state.describe()} at term {term}")
        if ready.snapshot is not None:
            self.log.append(f"{node_id} restores {ready.snapshot.describe()}")
        self.log.extend(f"{node_id} applies {e.describe()}" for e in ready.committed_entries)
        self.log.extend(f"{node_id} {r.describe()}" for r in ready.read_states)
        self.log.extend(f"send {m.describe()}" for m in ready.messages)

    def _apply(self, node: SimNode, entry: Entry) -> None:
        expected = node.applied[-1].index + 1 if node.applied else None
        if expected is not None:
            assert entry.index == expected, (
                f"node {node.id} applied {entry.index}, expected {expected}"
            )
        known = self.committed.setdefault(entry.index, entry)
        assert known == entry, (
            f"State Machine Safety: node {node.id} applied {entry.describe()} at {entry.index},"
            f" another node applied {known.describe()}"
        )
        node.applied.append(entry)
        if entry.type is EntryType.CONF_CHANGE:
            conf = self.driver(node.id).apply_conf_change(ConfChange.decode(entry.data))
            if self.record_events:
                self.log.append(f"{node.id} config {conf.describe()}")
            # A joining node holds, before its own addition, the configuration given to it.
            if not self.driver(node.id).core.joining:
                known_conf = self.conf_after.setdefault(entry.index, conf)
                assert known_conf == conf, (
                    f"Configuration Agreement: node {node.id} is in {conf.describe()} after"
                    f" the conf change at {entry.index}, another node in {known_conf.describe()}"
                )

    def _check_read(self, node_id: int, read_state: ReadState) -> None:
        floor = self.read_floor.get(read_state.context, 0)
        assert read_state.index >= floor, (
            f"ReadIndex: node {node_id} read {read_state.context!r} at {read_state.index},"
            f" but {floor} was already applied somewhere when it was asked"
        )

    def _on_leader(self, node_id: int) -> None:
        driver = self.driver(node_id)
        term = driver.term
        other = self.leaders_by_term.setdefault(term, node_id)
        assert other == node_id, f"Election Safety: {other} and {node_id} both lead term {term}"
        self.elections += 1
        log = driver.core.log
        for index, entry in self.committed.items():
            if index > log.offset:
                assert log.term(index) == entry.term, (
                    f"Leader Completeness: leader {node_id} of term {term} lacks committed"
                    f" {entry.describe()}"
                )

    # --- safety --------------------------------------------------------------------------
    def check(self) -> None:
        live = {i: self.driver(i) for i in self.alive()}
        for driver in live.values():
            driver.core.check()
            if driver.is_leader():
                other = self.leaders_by_term.setdefault(driver.term, driver.id)
                assert other == driver.id, (
                    f"Election Safety: {other} and {driver.id} both lead term {driver.term}"
                )
        drivers = list(live.values())
        for a_index, a in enumerate(drivers):
            for b in drivers[a_index + 1 :]:
                self._check_log_matching(a, b)

    @staticmethod
    def _check_log_matching(a: RaftDriver, b: RaftDriver) -> None:
        la, lb = a.core.log, b.core.log
        low = max(la.first_index(), lb.first_index())
        high = min(la.last_index(), lb.last_index())
        matched = False
        for index in range(high, low - 1, -1):
            ta, tb = la.term(index), lb.term(index)
            if matched:
                ea, eb = la.slice(index, index + 1)[0], lb.slice(index, index + 1)[0]
                assert ea == eb, (
                    f"Log Matching: nodes {a.id} and {b.id} agree later but differ at {index}:"
                    f" {ea.describe()} vs {eb.describe()}"
                )
            elif ta == tb:
                matched = True
                ea, eb = la.slice(index, index + 1)[0], lb.slice(index, index + 1)[0]
                assert ea == eb, f"Log Matching: same term, different entry at {index}"

    # --- queries -----------------------------------------------------------------------
    def leader(self) -> int | None:
        leaders = [i for i in self.alive() if self.driver(i).is_leader()]
        if not leaders:
            return None
        return max(leaders, key=lambda i: self.driver(i).term)

    def stabilize(self, max_ticks: int = 500) -> int:
        """Tick and deliver (no faults) until one leader's log is applied everywhere alive."""
        for _ in range(max_ticks):
            self.deliver_all()
            leader = self.leader()
            if leader is not None:
                commit = self.driver(leader).core.log.committed
                last = self.driver(leader).core.log.last_index()
                members = self.members(leader)
                if commit == last and all(
                    self.driver(i).core.log.applied == commit and self.driver(i).leader_id == leader
                    for i in self.alive()
                    if i in members
                ):
                    return leader
            self.tick_all()
        raise AssertionError(f"no stable leader after {max_ticks} ticks:\n" + self.describe())

    def describe(self) -> str:
        lines = [self.driver(i).status().describe() for i in self.alive()]
        lines.append(f"network: {len(self.network)} messages; groups={self.groups}")
        return "\n".join(lines)


@dataclass
class ChaosStats:
    elections: int = 0
    proposals: int = 0
    committed: int = 0
    crashes: int = 0
    compactions: int = 0
    reads: int = 0
    snapshots_installed: int = 0
    conf_changes_proposed: int = 0
    conf_changes_refused: int = 0
    conf_changes_applied: int = 0  # distinct conf change entries applied somewhere
    leader_removals: int = 0  # a leader proposed its own removal
    final_voters: int = 0

    def describe(self) -> str:
        text = (
            f"elections={self.elections} proposals={self.proposals} committed={self.committed}"
            f" crashes={self.crashes} compactions={self.compactions} reads={self.reads}"
            f" snapshots_installed={self.snapshots_installed}"
        )
        if self.conf_changes_proposed or self.conf_changes_refused:
            text += (
                f" conf_changes proposed={self.conf_changes_proposed}"
                f" refused={self.conf_changes_refused} applied={self.conf_changes_applied}"
                f" leader_removals={self.leader_removals}"
                f" final_voters={self.final_voters}"
            )
        return text


MAX_NODES = 7  # chaos with conf changes adds nodes up to this many ids


def random_conf_change(cluster: Cluster, rng: random.Random, stats: ChaosStats) -> None:
    """At the leader (if any): add a new node as a learner (booted as a server boots a
    new member: with the configuration that adds it), promote a learner, or remove a
    member (the leader itself included)."""
    leader = cluster.leader()
    if leader is None:
        return
    conf = cluster.driver(leader).conf_state
    kinds = ["remove"] if len(conf.voters) > 1 or conf.learners else []
    if len(cluster.ids) < MAX_NODES:
        kinds.append("add")
    if conf.learners:
        kinds.append("promote")
    if not kinds:
        return
    kind = rng.choice(kinds)
    if kind == "add":
        node = max(cluster.ids) + 1
        cc = ConfChange(ConfChangeType.ADD_LEARNER_NODE, node, f"member {node}".encode())
    elif kind == "promote":
        cc = ConfChange(ConfChangeType.ADD_NODE, rng.choice(conf.learners))
    else:
        members = conf.members() if len(conf.voters) > 1 else conf.learners
        cc = ConfChange(ConfChangeType.REMOVE_NODE, rng.choice(members))
    stats.conf_changes_proposed += 1
    if not cluster.propose_conf_change(leader, cc):
        stats.conf_changes_refused += 1
        return
    stats.leader_removals += cc.type is ConfChangeType.REMOVE_NODE and cc.node_id == leader
    if kind == "add" and cluster.config_kwargs["unsafe_conf_change"]:
        # With a conf-change rule off, the configuration this change will apply to is
        # not the leader's now: the node starts empty and learns it from a snapshot.
        cluster.add_node(cc.node_id)
    elif kind == "add":
        cluster.add_node(cc.node_id, conf.voters, (*conf.learners, cc.node_id))


def run_chaos(cluster: Cluster, steps: int, conf_changes: float = 0.0) -> ChaosStats:
    """Random faults and inputs for `steps` steps, then heal, restart all, and converge.

    Safety is checked after every step (Cluster.process calls check()). At the end a final
    proposal must commit on every member of the leader's configuration: the liveness
    witness. With `conf_changes` > 0, that share of the steps proposes a random
    configuration change (random_conf_change); without, the runs are as before.
    """
    rng = cluster.rng
    stats = ChaosStats()
    n = len(cluster.ids)
    for step in range(steps):
        if conf_changes and rng.random() < conf_changes:
            random_conf_change(cluster, rng, stats)
            continue
        roll = rng.random()
        alive = cluster.alive()
        if roll < 0.25 and alive:
            cluster.tick(rng.choice(alive))
        elif roll < 0.70 and cluster.network:
            cluster.deliver(rng.randrange(len(cluster.network)))
        elif roll < 0.74 and cluster.network:
            cluster.network.pop(rng.randrange(len(cluster.network)))  # loss
        elif roll < 0.77 and cluster.network:
            cluster.network.append(rng.choice(cluster.network))  # duplication
        elif roll < 0.86 and alive:
            stats.proposals += cluster.propose(rng.choice(alive), f"v{step}".encode())
        elif roll < 0.88 and alive:
            stats.reads += cluster.read_index(rng.choice(alive), f"r{step}".encode())
        elif roll < 0.895 and len(alive) > n // 2:
            cluster.crash(rng.choice(alive))
            stats.crashes += 1
        elif roll < 0.93:
            down = [i for i in cluster.ids if i not in alive]
            if down:
                cluster.restart(rng.choice(down))
        elif roll < 0.95:
            ids = list(cluster.ids)
            rng.shuffle(ids)
            cut = rng.randrange(1, n) if n > 1 else 1
            cluster.partition(set(ids[:cut]), set(ids[cut:]))
        elif roll < 0.97:
            cluster.heal()
        elif roll < 0.99 and alive:
            stats.compactions += cluster.compact(rng.choice(alive))
        elif alive:
            leader = cluster.leader()
            if leader is not None:
                with contextlib.suppress(BadLeaderTransferee):  # not a voter (yet)
                    cluster.transfer_leader(leader, rng.choice(cluster.ids))
    cluster.heal()
    for node_id in cluster.ids:
        if cluster.nodes[node_id].driver is None:
            cluster.restart(node_id)
    leader = cluster.stabilize(max_ticks=2000)
    for _ in range(20):
        if cluster.propose(leader, b"final"):
            break
        cluster.tick_all()  # e.g. a leader transfer in progress: let it finish or time out
        leader = cluster.stabilize(max_ticks=2000)
    leader = cluster.stabilize(max_ticks=2000)
    final = [e for e in cluster.nodes[leader].applied if e.data == b"final"]
    assert final, "the final proposal did not commit after healing:\n" + cluster.describe()
    members = cluster.members(leader)
    for node_id in members:
        assert cluster.nodes[node_id].applied[-1].index >= final[0].index
    stats.conf_changes_applied = sum(
        1 for e in cluster.committed.values() if e.type is EntryType.CONF_CHANGE
    )
    stats.final_voters = len(cluster.driver(leader).conf_state.voters)
    stats.elections = cluster.elections
    stats.committed = len(cluster.committed)
    stats.snapshots_installed = cluster.delivered[MessageType.SNAP]
    return stats

"""The synchronous driver of one Raft node: inputs in, `Ready` out, `advance()` back.

API (stable; the server and the simulator use only this):

    driver = RaftDriver(RaftConfig(id=1, voters=(1, 2, 3)), random.Random(seed),
                        persisted=PersistedState(hard_state, snapshot, entries),
                        applied=None)       # None: the snapshot index
    driver.tick()                           # one logical clock tick
    driver.step(message)                    # a message from a peer (False: dropped)
    driver.propose(data)                    # ProposalDropped / NotLeader if not accepted
    driver.read_index(context)              # ReadIndex request; answer is a ReadState
    driver.transfer_leader(target_id)       # leader transfer (MsgTimeoutNow); a target
                                            # that is not a voter: BadLeaderTransferee
    driver.propose_conf_change(cc)          # leader only: NotLeader / ConfChangeRefused
    driver.apply_conf_change(cc)            # -> ConfState; the application applies a
                                            # committed CONF_CHANGE entry (in log order)
    driver.conf_state                       # -> ConfState (voters, learners)
    driver.campaign()                       # start an election now
    driver.report_unreachable(peer_id)      # transport could not reach peer
    driver.report_snapshot(peer_id, ok)     # transport finished (or failed) sending a snapshot
    driver.compact(applied_index, blob)     # -> Snapshot; drops the log up to applied_index
    if driver.has_ready():
        ready = driver.ready()              # see the contract below
        ...persist, send, apply...
        driver.advance(ready)
    driver.status()                         # -> Status (term, role, leader_id, commit, ...)

The Ready contract, field by field, in the order the caller must act:

1. Persist, as ONE atomic batch (when `must_sync`), covered by ONE fsync when
   `must_fsync` (etcd raft's MustSync: new entries, a snapshot, or a new term or vote;
   a change of the commit index alone may be written without an fsync, since a lost
   commit index is learnt again from the leader):
   - `snapshot`: a snapshot received from the leader. Save its blob (snapfile) and
     record its metadata in the WAL; every persisted entry is superseded by it.
   - `entries`: append to the persisted log; persisted entries with index >=
     `entries[0].index` are a conflicting suffix and must be dropped first.
   - `hard_state`: term, vote and commit index, when changed (None: unchanged).
2. Only after step 1 is durable may `messages` be sent (each to `message.to`). Votes,
   appends and their acknowledgements therefore never outrun the disk.
3. If `snapshot` is set, restore the state machine from `snapshot.data`; then apply
   `committed_entries` in order (they are durable after step 1). An entry with empty
   `data` is a leader's no-op. An entry of type CONF_CHANGE holds `ConfChange.encode()`:
   apply it by calling `apply_conf_change(ConfChange.decode(entry.data))` (or with
   `ConfChange(type, NONE)` to reject it) once per such entry, in log order; the new
   configuration takes effect then (it may be later, after `advance`, if the
   application applies later).
4. `read_states`: a linearizable read with that `context` may be answered once the state
   machine has applied `index` (serializable reads need no Raft round at all).
5. `soft_state` (leader and role, None when unchanged) is for display and routing.
6. Call `advance(ready)`. `ready()` may not be called again before that; `tick`, `step`
   and `propose` may (their results go out in the next Ready).

`compact(index, blob)` is called by the server after it applied `index` and took the
state-machine snapshot `blob`; it returns the Snapshot to write with snapfile and to
record in the WAL (after which WAL segments before it may be released).

Proposals made on a follower are forwarded to the leader (etcd raft's behaviour; those
made one after another, with no other message between, go in one MsgProp; the
follower cannot tell whether they commit, so the server matches applied entries to
its waiting requests by an id inside `data`). With RaftConfig(forward_proposals=False)
a follower raises NotLeader(leader_id) instead. Without a known leader, or while
leadership is being transferred, propose raises ProposalDropped.

Recovery after a restart (what the server does before building the driver):

    seen = wal.recorded_snapshots(wal_dir)
    loaded = snapfile.load_newest(snap_dir, accept=lambda m: (m.index, m.term) in seen)
    snapshot = loaded.snapshot if loaded else None
    wal, state = Wal.open(wal_dir, snapshot=snapshot.meta if snapshot else None)
    persisted = PersistedState(state.hard_state, snapshot, state.entries)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from etcdspec.impl.raft.core import PersistedState, RaftConfig, RaftCore, Role, SoftState
from etcdspec.impl.raft.messages import (
    NONE,
    NOT_FROM_PEERS,
    TERMLESS_FROM_PEERS,
    BadLeaderTransferee,
    ConfChange,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ProposalDropped,
    ReadState,
    Snapshot,
    UsageError,
)


@dataclass(frozen=True)
class Ready:
    soft_state: SoftState | None
    hard_state: HardState | None
    snapshot: Snapshot | None
    entries: tuple[Entry, ...]
    committed_entries: tuple[Entry, ...]
    messages: tuple[Message, ...]
    read_states: tuple[ReadState, ...]
    must_fsync: bool = True

    @property
    def must_sync(self) -> bool:
        """Whether step 1 has anything to write (entries, snapshot or hard state)."""
        return bool(self.entries) or self.snapshot is not None or self.hard_state is not None

    def describe(self) -> str:
        lines = ["Ready:"]
        if self.soft_state is not None:
            lines.append(f"  soft: {self.soft_state.describe()}")
        if self.hard_state is not None:
            sync = "" if self.must_fsync else " (no fsync needed)"
            lines.append(f"  hard: {self.hard_state.describe()}{sync}")
        if self.snapshot is not None:
            lines.append(f"  snapshot: {self.snapshot.describe()}")
        for e in self.entries:
            lines.append(f"  persist: {e.describe()}")
        for e in self.committed_entries:
            lines.append(f"  apply: {e.describe()}")
        for m in self.messages:
            lines.append(f"  send: {m.describe()}")
        for r in self.read_states:
            lines.append(f"  {r.describe()}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Status:
    id: int
    term: int
    vote: int
    role: Role
    leader_id: int
    commit_index: int
    applied_index: int
    last_index: int
    snapshot_index: int
    progress: tuple[tuple[int, str], ...]

    def describe(self) -> str:
        head = (
            f"node {self.id} {self.role.value} term={self.term} vote={self.vote}"
            f" leader={self.leader_id} commit={self.commit_index} applied={self.applied_index}"
            f" last={self.last_index} snapshot={self.snapshot_index}"
        )
        return head + "".join(f"\n  {peer}: {text}" for peer, text in self.progress)


class RaftDriver:
    def __init__(
        self,
        config: RaftConfig,
        rng: random.Random,
        persisted: PersistedState | None = None,
        applied: int | None = None,
    ) -> None:
        persisted = persisted or PersistedState()
        self.core = RaftCore(config, rng, persisted, applied)
        self._prev_hard = persisted.hard_state
        self._prev_soft = self.core.soft_state()
        self._outstanding = False
        self.dropped_messages = 0

    # --- inputs ------------------------------------------------------------------------
    @property
    def id(self) -> int:
        return self.core.id

    def tick(self) -> None:
        self.core.tick()

    def step(self, message: Message) -> bool:
        """A message from a peer; False if it was dropped (counted in `dropped_messages`).

        Network input never raises for being unwanted: local-only kinds and transport
        reports, term-less messages of kinds that must carry a term, messages for another
        node or from this node itself, and forwarded proposals or reads this node cannot
        pass on (no leader known) are dropped, as etcd raft drops them. Messages from
        nodes outside this node's configuration are heard, as etcd raft hears them: a
        node added by a change not applied here yet, or a leader elected by nodes that
        have not applied a removal yet. A removed node still answers (it never starts
        anything: it is no voter): the nodes that have not learnt of its removal may
        need its vote and its acknowledgements to elect a leader and commit, and so to
        learn of the removal. A server stops a removed member once it is told
        (`removed`), or drops its traffic at the transport, as etcd does.
        """
        if (
            message.type in NOT_FROM_PEERS
            or (message.term == 0 and message.type not in TERMLESS_FROM_PEERS)
            or message.to != self.core.id
            or message.from_ == self.core.id
            or message.from_ == 0
        ):
            self.dropped_messages += 1
            return False
        try:
            self.core.step(message)
        except ProposalDropped:
            self.dropped_messages += 1
            return False
        return True

    def propose(self, data: bytes) -> None:
        if not data:
            raise UsageError("a proposal needs non-empty data (empty entries are leader no-ops)")
        self.core.step(Message(MessageType.PROP, from_=self.core.id, entries=(Entry(0, 0, data),)))

    def read_index(self, context: bytes) -> None:
        if not context:
            raise UsageError("read_index needs a non-empty, unique context (a request id)")
        self.core.step(Message(MessageType.READ_INDEX, from_=self.core.id, context=context))

    def transfer_leader(self, target: int) -> None:
        if target not in self.core.voters:
            raise BadLeaderTransferee(target, self.core.voters)
        self.core.step(Message(MessageType.TRANSFER_LEADER, from_=target))

    def propose_conf_change(self, cc: ConfChange) -> None:
        """Propose a single-server configuration change (leader only; see the Raft core's
        doc for when ConfChangeRefused is raised). It takes effect when applied."""
        self.core.propose_conf_change(cc)

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        """Apply the next committed CONF_CHANGE entry (etcd raft's ApplyConfChange)."""
        return self.core.apply_conf_change(cc)

    @property
    def conf_state(self) -> ConfState:
        return self.core.conf_state

    def conf_state_at(self, index: int) -> ConfState:
        """The configuration at an applied `index` (what a snapshot taken there holds)."""
        return self.core.conf_state_at(index)

    @property
    def removed(self) -> bool:
        """This node applied its own removal from the configuration."""
        return self.core.removed

    @property
    def learners(self) -> tuple[int, ...]:
        return self.core.learners

    def match_index(self, peer: int) -> int:
        """The leader's view of how far `peer`'s log matches its own (0 if unknown)."""
        progress = self.core.progress.get(peer) if self.is_leader() else None
        return progress.match if progress is not None else 0

    def campaign(self) -> None:
        self.core.step(Message(MessageType.HUP, from_=self.core.id))

    def report_unreachable(self, peer: int) -> None:
        if peer in self.core.members:
            self.core.step(Message(MessageType.UNREACHABLE, from_=peer))

    def report_snapshot(self, peer: int, ok: bool) -> None:
        if peer in self.core.members:
            self.core.step(Message(MessageType.SNAP_STATUS, from_=peer, reject=not ok))

    def compact(self, index: int, data: bytes) -> Snapshot:
        return self.core.compact(index, data)

    def compactable(self, index: int, term: int) -> bool:
        """Whether `compact` may take a state machine at `index` of `term`: past the log's
        snapshot, applied, and the log's entry there of that term (a state machine copied
        a while ago may be behind a snapshot received since)."""
        log = self.core.log
        return log.offset < index <= log.applied and log.term(index) == term

    @property
    def voters(self) -> tuple[int, ...]:
        return self.core.voters

    @property
    def commit_pending(self) -> bool:
        """A leader with defer_commit_broadcast owes its followers a commit index."""
        return self.core.commit_pending

    def flush_commit(self) -> None:
        """Send the commit index owed (see RaftConfig.defer_commit_broadcast)."""
        self.core.flush_commit()

    # --- the hand-off ------------------------------------------------------------------
    def has_ready(self) -> bool:
        core = self.core
        log = core.log
        last = log.last_index()
        hard, soft = self._prev_hard, self._prev_soft
        # The hard and soft state compared field by field: called several times per
        # request, this builds no HardState or SoftState.
        return bool(
            core.msgs
            or core.broadcast_pending
            or core.read_states
            or log.pending_snapshot is not None
            or last > max(log.stable_index, log.offset)
            or min(log.committed, last) > max(log.applied, log.offset)
            or core.term != hard.term
            or core.vote != hard.vote
            or log.committed != hard.commit
            or core.lead != soft.leader_id
            or core.role is not soft.role
        )

    def ready(self) -> Ready:
        if self._outstanding:
            raise UsageError("ready() called again before advance() of the previous Ready")
        core = self.core
        core.flush_broadcast()
        log = core.log
        soft = core.soft_state()
        hard = core.hard_state()
        entries = tuple(log.unstable_entries())
        prev = self._prev_hard
        committed = tuple(log.next_committed(log.last_index()))
        core.conf_queue.extend(e.index for e in committed if e.type is EntryType.CONF_CHANGE)
        ready = Ready(
            soft_state=soft if soft != self._prev_soft else None,
            hard_state=hard if hard != prev else None,
            snapshot=log.pending_snapshot,
            entries=entries,
            committed_entries=committed,
            messages=tuple(core.msgs),
            read_states=tuple(core.read_states),
            must_fsync=bool(entries)
            or log.pending_snapshot is not None
            or (hard.term, hard.vote) != (prev.term, prev.vote),
        )
        core.msgs = []
        core.read_states = []
        self._outstanding = True
        return ready

    def advance(self, ready: Ready) -> None:
        if not self._outstanding:
            raise UsageError("advance() without an outstanding Ready")
        self._outstanding = False
        core = self.core
        if ready.soft_state is not None:
            self._prev_soft = ready.soft_state
        if ready.hard_state is not None:
            self._prev_hard = ready.hard_state
        if ready.snapshot is not None:
            core.log.snapshot_persisted(ready.snapshot)
        if ready.entries:
            last = ready.entries[-1]
            core.stable_to(last.index, last.term)
        if ready.committed_entries:
            core.log.applied_to(ready.committed_entries[-1].index)

    # --- observation -------------------------------------------------------------------
    @property
    def role(self) -> Role:
        return self.core.role

    @property
    def leader_id(self) -> int:
        return self.core.lead

    @property
    def term(self) -> int:
        return self.core.term

    def is_leader(self) -> bool:
        return self.core.role is Role.LEADER

    def status(self) -> Status:
        core = self.core
        progress = tuple(
            (peer, pr.describe()) for peer, pr in sorted(core.progress.items()) if peer != core.id
        )
        return Status(
            id=core.id,
            term=core.term,
            vote=core.vote,
            role=core.role,
            leader_id=core.lead,
            commit_index=core.log.committed,
            applied_index=core.log.applied,
            last_index=core.log.last_index(),
            snapshot_index=core.log.offset,
            progress=progress,
        )


__all__ = ["NONE", "PersistedState", "RaftConfig", "RaftDriver", "Ready", "Role", "Status"]

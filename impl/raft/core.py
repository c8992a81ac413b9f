"""The Raft consensus core: a pure state machine over messages and ticks (no I/O).

`RaftCore.step(message)` and `RaftCore.tick()` change the node's state and queue
outgoing messages in `msgs`; nothing here touches a socket, a file, a clock or the
global random generator (election jitter comes from the `random.Random` passed in).
`raft_driver.RaftDriver` wraps the core with the Ready/advance hand-off.

Implemented: leader election with PreVote (§9.6 of Ongaro's thesis) and CheckQuorum
(a leader that has not heard from a quorum within an election timeout steps down, and
followers that heard from a leader within the timeout ignore vote requests); log
replication with the Figure 8 commit rule (only entries of the current term are
committed by counting); pipelined, batched MsgApp with flow control per follower
(raft_progress); leader transfer (MsgTimeoutNow); ReadIndex (raft_readonly; followers
forward MsgReadIndex to the leader); InstallSnapshot for followers whose next entry was
compacted away; single-server configuration changes and learners (below).

Configuration changes (etcd raft's way): a ConfChange goes through the log as an entry of
type CONF_CHANGE and takes effect at a node when the application applies it
(`apply_conf_change`, in log order). Quorums count voters only; learners receive the log
and snapshots but never vote, campaign or count toward a commit. The leader refuses a
change (ConfChangeRefused) while an earlier one in its log is not yet applied, and until
it has committed an entry of its own term: so at most one change is ever in flight, and a
new leader never stacks a change on one from an earlier term it does not know the fate
of. A leader removed from the configuration hands over and steps down (it tells a
quorum of the remaining voters that its removal is committed, then asks the most
up-to-date one to campaign); a removed node never campaigns but still answers. Snapshots carry the configuration at their
index. A node started as a learner (RaftConfig.learners holds its id) or with an empty
configuration is joining: its configuration is the one right after the change that added
it, so the changes in the log up to that one are not applied again (with an empty
configuration it learns the configuration only from a snapshot).

Proposals on a follower are forwarded to the leader (as etcd raft does) unless
`forward_proposals` is False, in which case `NotLeader(leader_id)` is raised. A proposal
that cannot be taken (no leader known, leader transfer in progress) raises
`ProposalDropped`.

Durability: the leader counts its own log towards a commit quorum only up to
`log.stable_index`, i.e. after the driver reported the entries persisted (`advance`).

Roles change only through `_transition`, which checks the table `ALLOWED_TRANSITIONS`
and raises IllegalTransition without changing anything on an illegal change.
"""

from __future__ import annotations

import enum
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from etcdspec.impl.raft.log import RaftLog
from etcdspec.impl.raft.messages import (
    CAMPAIGN_TRANSFER,
    LOCAL_MESSAGES,
    NONE,
    VOTE_REQUESTS,
    ConfChange,
    ConfChangeRefused,
    ConfChangeType,
    ConfigError,
    ConfState,
    Entry,
    EntryType,
    HardState,
    IllegalTransition,
    InvariantViolation,
    Message,
    MessageType,
    NotLeader,
    ProposalDropped,
    ReadState,
    Snapshot,
    SnapshotMeta,
    UsageError,
)
from etcdspec.impl.raft.progress import Progress, ProgressState
from etcdspec.impl.raft.readonly import ReadOnly

MT = MessageType


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


class CampaignKind(enum.Enum):
    PRE_ELECTION = "pre-election"  # PreVote: ask without raising the term
    ELECTION = "election"  # a real election (after a won pre-election, or PreVote off)
    TRANSFER = "transfer"  # leader transfer: skips PreVote, overrides the leader lease


# The conf-change rules a test may turn off (RaftConfig.unsafe_conf_change).
HANDOVER = b"ConfHandover"  # the context of a removed leader's handover heartbeats
SKIP_PENDING_CHECK = "skip_pending_check"  # accept a change while one is not yet applied
SKIP_TERM_CHECK = "skip_term_check"  # accept one before committing an entry of the term
CONF_CHANGE_BUGS = frozenset({SKIP_PENDING_CHECK, SKIP_TERM_CHECK})

ALLOWED_TRANSITIONS: dict[Role, frozenset[Role]] = {
    Role.FOLLOWER: frozenset({Role.FOLLOWER, Role.PRE_CANDIDATE, Role.CANDIDATE}),
    Role.PRE_CANDIDATE: frozenset({Role.FOLLOWER, Role.PRE_CANDIDATE, Role.CANDIDATE}),
    Role.CANDIDATE: frozenset({Role.FOLLOWER, Role.PRE_CANDIDATE, Role.CANDIDATE, Role.LEADER}),
    Role.LEADER: frozenset({Role.FOLLOWER}),
}


@dataclass(frozen=True)
class RaftConfig:
    """Static configuration of one node. Times are in ticks.

    election_tick: followers campaign after a random timeout in
        [election_tick, 2 * election_tick) ticks without hearing from a leader.
    heartbeat_tick: a leader sends heartbeats every heartbeat_tick ticks.
    max_size_per_msg: at most this many bytes of entry data per MsgApp (at least one
        entry is always sent).
    max_inflight_msgs: at most this many unacknowledged MsgApps per follower in REPLICATE.
    defer_commit_broadcast: when the leader's commit index advances, do not send each
        follower an MsgApp just to carry it (etcd raft does): the next MsgApp or
        heartbeat carries it, or `flush_commit()`, which the server calls when a
        commit has waited a moment (`commit_pending`). One write at a time then costs
        one round of messages instead of two; followers learn of a commit that late.
        Except a commit that covers an entry a follower forwarded (whose client waits
        for that follower to apply it): that one goes out at once.
    learners: members that receive the log but do not vote (a node started as a learner
        is joining: see the module doc).
    unsafe_conf_change: bug hooks for tests only (names from CONF_CHANGE_BUGS): turn off
        one of the leader's conf-change rules, to show that the simulator's safety checks
        catch what the rule prevents. Never set outside tests.
    """

    id: int
    voters: tuple[int, ...]
    election_tick: int = 10
    heartbeat_tick: int = 1
    max_size_per_msg: int = 1024 * 1024
    max_inflight_msgs: int = 256
    pre_vote: bool = True
    check_quorum: bool = True
    forward_proposals: bool = True
    defer_commit_broadcast: bool = False
    learners: tuple[int, ...] = ()
    unsafe_conf_change: frozenset[str] = frozenset()

    def validate(self) -> None:
        if self.id == NONE:
            raise ConfigError("RaftConfig.id must be a positive node id, not 0")
        members = (*self.voters, *self.learners)
        if members and self.id not in members:
            raise ConfigError(
                f"RaftConfig.id {self.id} is not among voters {list(self.voters)}"
                f" (nor learners {list(self.learners)}); a joining node may leave both empty"
            )
        if len(set(self.voters)) != len(self.voters) or NONE in self.voters:
            raise ConfigError(
                f"RaftConfig.voters {list(self.voters)} must be distinct and non-zero"
            )
        if len(set(members)) != len(members) or NONE in self.learners:
            raise ConfigError(
                f"RaftConfig.learners {list(self.learners)} must be distinct, non-zero"
                f" and not voters {list(self.voters)}"
            )
        if members and not self.voters:
            raise ConfigError("RaftConfig with learners needs voters too")
        unknown = self.unsafe_conf_change - CONF_CHANGE_BUGS
        if unknown:
            raise ConfigError(
                f"RaftConfig.unsafe_conf_change: unknown {sorted(unknown)};"
                f" known: {sorted(CONF_CHANGE_BUGS)}"
            )
        if self.heartbeat_tick <= 0:
            raise ConfigError("RaftConfig.heartbeat_tick must be positive")
        if self.election_tick <= self.heartbeat_tick:
            raise ConfigError("RaftConfig.election_tick must be greater than heartbeat_tick")
        if self.max_inflight_msgs <= 0 or self.max_size_per_msg <= 0:
            raise ConfigError("RaftConfig.max_inflight_msgs and max_size_per_msg must be positive")

    def describe(self) -> str:
        learners = f" learners {list(self.learners)}" if self.learners else ""
        return (
            f"node {self.id} of {list(self.voters)}{learners} election={self.election_tick}"
            f" heartbeat={self.heartbeat_tick} pre_vote={self.pre_vote}"
            f" check_quorum={self.check_quorum}"
            + (" defer_commit_broadcast" if self.defer_commit_broadcast else "")
        )


@dataclass(frozen=True)
class PersistedState:
    """What a node recovers from disk on start: hard state, snapshot, entries after it."""

    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot | None = None
    entries: tuple[Entry, ...] = ()

    def describe(self) -> str:
        snap = self.snapshot.describe() if self.snapshot else "no snapshot"
        last = (
            self.entries[-1].index
            if self.entries
            else (self.snapshot.meta.index if self.snapshot else 0)
        )
        return f"{self.hard_state.describe()}; {snap}; {len(self.entries)} entries to {last}"


@dataclass(frozen=True)
class SoftState:
    """Volatile state the server may want to show: who leads, and this node's role."""

    leader_id: int
    role: Role

    def describe(self) -> str:
        return f"{self.role.value} (leader {self.leader_id})"


class RaftCore:
    def __init__(
        self,
        config: RaftConfig,
        rng: random.Random,
        persisted: PersistedState | None = None,
        applied: int | None = None,
    ) -> None:
        config.validate()
        persisted = persisted or PersistedState()
        self.config = config
        self.id = config.id
        self.rng = rng
        given = ConfState(tuple(sorted(config.voters)), tuple(sorted(config.learners)))
        snapshot = persisted.snapshot or Snapshot(SnapshotMeta(0, 0, given.voters, given.learners))
        if persisted.snapshot is not None and persisted.snapshot.meta.voters:
            given = persisted.snapshot.meta.conf_state
            self.joining = False
        else:
            # Joining (see the module doc): the given configuration already holds the
            # changes up to the one that added this node.
            self.joining = self.id in given.learners or not given.voters
        self._set_conf(given)
        self.removed_ids: set[int] = set()
        self.conf_applied_index = snapshot.meta.index  # the last conf change applied
        self.conf_queue: deque[int] = deque()  # conf changes handed out, to be applied
        self.conf_history: list[tuple[int, ConfState]] = [(snapshot.meta.index, given)]
        self.pending_conf_index = 0  # a leader's last conf change entry
        # A leader that applied its own removal hands over before it steps down: it
        # tells the remaining voters the commit index (heartbeats with HANDOVER) until a
        # quorum of them acknowledged one that covers the removal at `handover_index`.
        self.handover_index = 0
        # From the entry that removes a leader on, it appends nothing more: its log then
        # ends within what a quorum holds, so its vote (which the nodes that have not
        # learnt of its removal may need) never refuses all of them.
        self.leaving_index = 0
        self.handover_sent: dict[int, int] = {}  # peer -> commit index it was told
        self.handover_acks: set[int] = set()
        hs = persisted.hard_state
        start = snapshot.meta.index
        applied_index = start if applied is None else applied
        if not start <= applied_index <= max(hs.commit, start):
            raise ConfigError(
                f"applied index {applied_index} must lie between the snapshot index {start}"
                f" and the commit index {hs.commit}"
            )
        if persisted.entries and persisted.entries[0].index != start + 1:
            raise ConfigError(
                f"persisted entries start at {persisted.entries[0].index}, expected {start + 1}"
                " (the entry after the snapshot)"
            )
        self.log = RaftLog(snapshot, persisted.entries, max(hs.commit, start), applied_index)
        self.term = hs.term
        self.vote = hs.vote
        self.lead = NONE
        self.role = Role.FOLLOWER
        self.progress: dict[int, Progress] = {}
        self.votes: dict[int, bool] = {}
        self.msgs: list[Message] = []
        self.read_states: list[ReadState] = []
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = config.election_tick
        self.lead_transferee = NONE
        self.read_only = ReadOnly()
        self.pending_read_index: list[Message] = []
        self.broadcast_pending = False
        self.commit_pending = False
        self.forwarded_last = 0  # the last entry appended from a follower's MsgProp
        self.term_start_index = 0  # a leader's first entry of its term (its no-op)
        self._reset(self.term)
        for entry in persisted.entries:
            if entry.index <= applied_index and entry.type is EntryType.CONF_CHANGE:
                self.conf_queue.append(entry.index)  # applied before: the state machine
                self.apply_conf_change(ConfChange.decode(entry.data))  # will not again

    # --- small helpers -----------------------------------------------------------------
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    def hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.log.committed)

    def soft_state(self) -> SoftState:
        return SoftState(self.lead, self.role)

    def promotable(self) -> bool:
        return self.id in self.voters and self.log.pending_snapshot is None

    @property
    def conf_state(self) -> ConfState:
        return ConfState(self.voters, self.learners)

    def _set_conf(self, conf: ConfState) -> None:
        self.voters = conf.voters
        self.voter_set = frozenset(conf.voters)
        self.learners = conf.learners
        self.members = frozenset(conf.voters) | frozenset(conf.learners)

    def committed_conf_unapplied(self) -> bool:
        """A committed conf change that this node has not applied yet."""
        committed = self.log.committed
        low = max(self.conf_applied_index, self.log.offset) + 1
        return low <= committed and any(_is_conf(e) for e in self.log.slice(low, committed + 1))

    @property
    def removed(self) -> bool:
        """This node applied its own removal (it drops every message from then on)."""
        return self.id in self.removed_ids

    def _send(self, message: Message) -> None:
        self.msgs.append(message)

    def _reply(self, m: Message, **fields: Any) -> None:
        self._send(Message(to=m.from_, from_=self.id, **fields))

    def describe(self) -> str:
        return (
            f"node {self.id} {self.role.value} term={self.term} vote={self.vote}"
            f" lead={self.lead} {self.log.describe()}"
        )

    # --- roles -------------------------------------------------------------------------
    def _transition(self, role: Role) -> None:
        if role not in ALLOWED_TRANSITIONS[self.role]:
            raise IllegalTransition(
                f"node {self.id}: {self.role.value} -> {role.value} is not a Raft transition"
            )
        self.role = role

    def _reset(self, term: int) -> None:
        if self.term != term:
            self.term = term
            self.vote = NONE
        self.lead = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = self.config.election_tick + self.rng.randrange(
            self.config.election_tick
        )
        self.votes = {}
        self.lead_transferee = NONE
        self.read_only = ReadOnly()
        self.pending_read_index = []
        self.progress = {}
        self.broadcast_pending = False
        self.commit_pending = False
        self.forwarded_last = 0
        self.leaving_index = 0

    def become_follower(self, term: int, lead: int) -> None:
        self._transition(Role.FOLLOWER)
        if self.handover_index:  # a removed leader's handover ends: it is removed now
            self.removed_ids.add(self.id)
            self.handover_index = 0
        self._reset(term)
        self.lead = lead

    def become_pre_candidate(self) -> None:
        self._transition(Role.PRE_CANDIDATE)
        # No term change and no vote: a pre-election only asks whether it could win.
        self.votes = {}
        self.lead = NONE

    def become_candidate(self) -> None:
        self._transition(Role.CANDIDATE)
        self._reset(self.term + 1)
        self.vote = self.id

    def become_leader(self) -> None:
        self._transition(Role.LEADER)
        self._reset(self.term)
        self.lead = self.id
        self.vote = self.id
        last = self.log.last_index()
        for member in sorted(self.members):
            progress = Progress(last + 1, self.config.max_inflight_msgs)
            if member == self.id:
                progress.become_replicate()
                progress.match = min(self.log.stable_index, last)
                progress.next = last + 1
            progress.recent_active = member == self.id
            self.progress[member] = progress
        # The term rule's second half: a conf change from an earlier term still in the log
        # and not applied here is pending (etcd raft sets pendingConfIndex to the last
        # index at election for this); no other change until it is applied.
        self.pending_conf_index = 0
        unapplied = [e for e in self._entries_after(self.conf_applied_index) if _is_conf(e)]
        if SKIP_TERM_CHECK not in self.config.unsafe_conf_change:
            self.pending_conf_index = max((e.index for e in unapplied), default=0)
        self.leaving_index = max(
            (e.index for e in unapplied if _removes(e, self.id)),
            default=0,
        )
        # A new leader commits an entry of its own term before anything else (§5.4.2).
        self.term_start_index = last + 1
        self.log.append([Entry(self.term, last + 1)])
        self._broadcast_append()

    def _entries_after(self, index: int) -> list[Entry]:
        low = max(index, self.log.offset) + 1
        return (
            self.log.slice(low, self.log.last_index() + 1) if low <= self.log.last_index() else []
        )

    # --- the entry points --------------------------------------------------------------
    def tick(self) -> None:
        if self.role is Role.LEADER:
            self._tick_heartbeat()
        else:
            self._tick_election()

    def _tick_election(self) -> None:
        self.election_elapsed += 1
        if self.promotable() and self.election_elapsed >= self.randomized_election_timeout:
            self.election_elapsed = 0
            self.step(Message(MT.HUP, from_=self.id))

    def _tick_heartbeat(self) -> None:
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.config.election_tick:
            self.election_elapsed = 0
            if self.config.check_quorum:
                self.step(Message(MT.CHECK_QUORUM, from_=self.id))
            if self.role is Role.LEADER and self.lead_transferee != NONE:
                self.lead_transferee = NONE  # the transfer took too long: abort it
        if self.role is not Role.LEADER:
            return
        for peer, progress in self.progress.items():
            if peer != self.id and progress.state is ProgressState.SNAPSHOT:
                progress.snapshot_elapsed += 1
                if progress.snapshot_elapsed >= self.config.election_tick:
                    progress.become_probe()  # the snapshot was probably lost
        if self.heartbeat_elapsed >= self.config.heartbeat_tick:
            self.heartbeat_elapsed = 0
            self.step(Message(MT.BEAT, from_=self.id))

    def campaign(self, kind: CampaignKind | None = None) -> None:
        """Start an election of `kind` (default: a pre-election when PreVote is on).

        Not while a committed conf change is still to be applied here (etcd raft's rule):
        the node would count votes in a configuration the cluster has left."""
        if not self.promotable() or self.committed_conf_unapplied():
            return
        if kind is None:
            kind = CampaignKind.PRE_ELECTION if self.config.pre_vote else CampaignKind.ELECTION
        if kind is CampaignKind.PRE_ELECTION:
            self.become_pre_candidate()
            vote_type, term = MT.PRE_VOTE, self.term + 1
        else:
            self.become_candidate()
            vote_type, term = MT.VOTE, self.term
        if self._record_vote(self.id, True) >= self.quorum():
            if vote_type is MT.PRE_VOTE:
                self.campaign(CampaignKind.ELECTION)
            else:
                self.become_leader()
            return
        transfer = kind is CampaignKind.TRANSFER
        context = CAMPAIGN_TRANSFER if transfer else b""
        for voter in self.voters:
            if voter != self.id:
                self._send(
                    Message(
                        vote_type,
                        to=voter,
                        from_=self.id,
                        term=term,
                        index=self.log.last_index(),
                        log_term=self.log.last_term(),
                        context=context,
                    )
                )

    def _record_vote(self, node: int, granted: bool) -> int:
        if node in self.voters:  # a learner's or a stranger's answer does not count
            self.votes.setdefault(node, granted)
        return sum(1 for g in self.votes.values() if g)

    def step(self, m: Message) -> None:
        """Process one message (received, or local such as MsgHup/MsgProp)."""
        if m.term == 0 or m.type in LOCAL_MESSAGES:
            pass
        elif m.term > self.term:
            if m.type in VOTE_REQUESTS:
                force = m.context == CAMPAIGN_TRANSFER
                in_lease = (
                    self.config.check_quorum
                    and self.lead != NONE
                    and self.election_elapsed < self.config.election_tick
                )
                if not force and in_lease:
                    return  # a leader is alive: do not let a disruptive node win (§9.6)
            if m.type is MT.PRE_VOTE or (m.type is MT.PRE_VOTE_RESP and not m.reject):
                pass  # pre-votes never change terms; a won pre-vote leads to a real election
            elif m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP):
                self.become_follower(m.term, m.from_)
            else:
                self.become_follower(m.term, NONE)
        elif m.term < self.term:
            if (self.config.check_quorum or self.config.pre_vote) and m.type in (
                MT.HEARTBEAT,
                MT.APP,
            ):
                # A stale leader (perhaps cut off by CheckQuorum/PreVote) learns our term.
                self._reply(m, type=MT.APP_RESP, term=self.term)
            elif m.type is MT.PRE_VOTE:
                self._reply(m, type=MT.PRE_VOTE_RESP, term=self.term, reject=True)
            elif m.type is MT.VOTE and m.from_ not in self.voter_set:
                # A candidate this node does not count among the voters never hears of
                # our term from our own campaigns: tell it (Raft's stale-term reply), or
                # with PreVote off it may stay terms behind a node it needs the vote of.
                self._reply(m, type=MT.VOTE_RESP, term=self.term, reject=True)
            return

        if m.type is MT.HUP:
            if self.role is not Role.LEADER:
                transfer = m.context == CAMPAIGN_TRANSFER
                self.campaign(CampaignKind.TRANSFER if transfer else None)
        elif m.type in VOTE_REQUESTS:
            self._handle_vote_request(m)
        elif self.role is Role.LEADER:
            self._step_leader(m)
        elif self.role is Role.FOLLOWER:
            self._step_follower(m)
        else:
            self._step_candidate(m)

    def _handle_vote_request(self, m: Message) -> None:
        can_vote = (
            self.vote == m.from_
            or (self.vote == NONE and self.lead == NONE)
            or (m.type is MT.PRE_VOTE and m.term > self.term)
        )
        resp_type = MT.VOTE_RESP if m.type is MT.VOTE else MT.PRE_VOTE_RESP
        if can_vote and self.log.is_up_to_date(m.index, m.log_term):
            self._reply(m, type=resp_type, term=m.term)
            if m.type is MT.VOTE:
                self.election_elapsed = 0
                self.vote = m.from_
        else:
            self._reply(m, type=resp_type, term=self.term, reject=True)

    # --- follower ----------------------------------------------------------------------
    def _step_follower(self, m: Message) -> None:
        if m.type is MT.PROP:
            if self.lead == NONE:
                raise ProposalDropped("no leader to forward the proposal to", NONE)
            if not self.config.forward_proposals:
                raise NotLeader(self.lead)
            last = self.msgs[-1] if self.msgs else None
            if last is not None and last.type is MT.PROP and last.to == self.lead:
                # Proposals made since the last message go out as one MsgProp (one frame
                # and one step at the leader, which appends its entries in order).
                self.msgs[-1] = replace(last, entries=(*last.entries, *m.entries))
            else:
                self._send(Message(MT.PROP, to=self.lead, from_=self.id, entries=m.entries))
        elif m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP):
            self.election_elapsed = 0
            self.lead = m.from_
            if m.type is MT.APP:
                self._handle_append(m)
            elif m.type is MT.HEARTBEAT:
                self._handle_heartbeat(m)
            else:
                self._handle_snapshot(m)
        elif m.type is MT.TRANSFER_LEADER:
            if self.lead != NONE:
                self._send(Message(MT.TRANSFER_LEADER, to=self.lead, from_=m.from_))
        elif m.type is MT.TIMEOUT_NOW:
            self.campaign(CampaignKind.TRANSFER)  # skips PreVote and the leader lease
        elif m.type is MT.READ_INDEX:
            if self.lead == NONE:
                raise ProposalDropped("no leader to confirm the read index", NONE)
            self._send(Message(MT.READ_INDEX, to=self.lead, from_=self.id, context=m.context))
        elif m.type is MT.READ_INDEX_RESP:
            self.read_states.append(ReadState(m.index, m.context))

    def _handle_append(self, m: Message) -> None:
        if m.index < self.log.committed:
            self._reply(m, type=MT.APP_RESP, term=self.term, index=self.log.committed)
            return
        if self.log.match_term(m.index, m.log_term):
            # Entries at or below the commit index are already ours: skip them.
            entries = [e for e in m.entries if e.index > self.log.committed]
            self.log.append_after_conflict(entries)
            last_new = m.index + len(m.entries)
            self.log.commit_to(min(m.commit, last_new))
            self._reply(m, type=MT.APP_RESP, term=self.term, index=last_new)
        else:
            # Skip whole terms at once (Raft thesis §5.3 optimisation, as etcd raft does):
            # the hint is our last index whose term is <= the leader's term at m.index.
            hint, hint_term = self.log.find_conflict_by_term(
                min(m.index, self.log.last_index()), m.log_term
            )
            self._reply(
                m,
                type=MT.APP_RESP,
                term=self.term,
                index=m.index,
                reject=True,
                reject_hint=hint,
                log_term=hint_term,
            )

    def _handle_heartbeat(self, m: Message) -> None:
        self.log.commit_to(min(m.commit, self.log.last_index()))
        self._reply(m, type=MT.HEARTBEAT_RESP, term=self.term, context=m.context)

    def _handle_snapshot(self, m: Message) -> None:
        snapshot = m.snapshot
        if snapshot is None:
            raise InvariantViolation(f"MsgSnap without a snapshot: {m.describe()}")
        meta = snapshot.meta
        if meta.index <= self.log.committed:
            pass  # already have everything it covers
        elif self.log.match_term(meta.index, meta.term):
            self.log.commit_to(meta.index)
        else:
            self.log.restore(snapshot)
            self._restore_conf(meta.index, meta.conf_state)
        self._reply(m, type=MT.APP_RESP, term=self.term, index=self.log.committed)

    def _restore_conf(self, index: int, conf: ConfState) -> None:
        """A snapshot's configuration replaces ours: exact at its index. Conf changes
        handed out before it and applied after it are superseded (apply_conf_change
        skips them)."""
        if not conf.voters:
            return  # a snapshot without a configuration (never written by this core)
        self._set_conf(conf)
        self.joining = False
        self.conf_applied_index = max(self.conf_applied_index, index)
        self.conf_history = [(index, conf)]

    # --- candidate ---------------------------------------------------------------------
    def _step_candidate(self, m: Message) -> None:
        expected = MT.PRE_VOTE_RESP if self.role is Role.PRE_CANDIDATE else MT.VOTE_RESP
        if m.type is MT.PROP:
            raise ProposalDropped("an election is in progress", NONE)
        if m.type is MT.READ_INDEX:
            raise ProposalDropped("an election is in progress", NONE)
        if m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP):
            self.become_follower(m.term, m.from_)
            self._step_follower(m)
        elif m.type is expected:
            granted = self._record_vote(m.from_, not m.reject)
            rejected = sum(1 for g in self.votes.values() if not g)
            if granted >= self.quorum():
                if self.role is Role.PRE_CANDIDATE:
                    self.campaign(CampaignKind.ELECTION)
                else:
                    self.become_leader()
            elif rejected >= self.quorum():
                self.become_follower(self.term, NONE)

    # --- leader ------------------------------------------------------------------------
    def _step_leader(self, m: Message) -> None:
        t = m.type
        if t is MT.BEAT:
            if self.handover_index:
                self._broadcast_handover()
            else:
                self._broadcast_heartbeat(b"")
        elif t is MT.CHECK_QUORUM:
            active = sum(
                1
                for peer, pr in self.progress.items()
                if peer in self.voter_set and (peer == self.id or pr.recent_active)
            )
            for peer, pr in self.progress.items():
                pr.recent_active = peer == self.id
            if active < self.quorum():
                self.become_follower(self.term, NONE)
        elif t is MT.PROP:
            self._propose(m)
        elif t is MT.READ_INDEX:
            self._handle_read_index(m)
        elif t is MT.TRANSFER_LEADER:
            self._handle_transfer(m.from_)
        elif m.from_ in self.progress and m.from_ != self.id:
            self._step_leader_response(m, self.progress[m.from_])

    def _propose(self, m: Message) -> None:
        if not m.entries:
            raise InvariantViolation("MsgProp without entries")
        if self.lead_transferee != NONE:
            raise ProposalDropped(f"leadership is moving to {self.lead_transferee}", self.id)
        if self.handover_index or self.leaving_index:
            raise ProposalDropped("this leader is being removed from the configuration", NONE)
        if m.from_ != self.id and any(_is_conf(e) for e in m.entries):
            # Conf changes come only from this leader's propose_conf_change, one at a time
            # (the driver's own proposals are NORMAL entries: no need to look at them).
            raise ProposalDropped("a forwarded proposal holds a conf change", self.id)
        last = self.log.last_index()
        self.log.append([Entry(self.term, last + i + 1, e.data) for i, e in enumerate(m.entries)])
        if m.from_ != self.id:
            self.forwarded_last = self.log.last_index()
        # Replicate lazily: every proposal until the next Ready goes out in one MsgApp
        # per follower (flush_broadcast), not one MsgApp per proposal.
        self.broadcast_pending = True

    def propose_conf_change(self, cc: ConfChange) -> None:
        """Append `cc` to the leader's log (NotLeader on a follower; ConfChangeRefused when
        the single-server-change rules do not allow it now).

        The pending rule: no change while this leader's last one is not applied here.
        The term rule: none before the leader has committed an entry of its term and
        applied every change that came before it (a change from an earlier term may have
        been committed by a quorum this leader never heard from: stacking a second one on
        it would let two changes commit under the old configuration)."""
        if self.role is not Role.LEADER:
            if self.lead == NONE:
                raise ProposalDropped("no leader to take the configuration change", NONE)
            raise NotLeader(self.lead)
        self._check_conf_change(cc)
        index = self.log.last_index() + 1
        self.log.append([Entry(self.term, index, cc.encode(), EntryType.CONF_CHANGE)])
        self.pending_conf_index = index
        if cc.type is ConfChangeType.REMOVE_NODE and cc.node_id == self.id:
            self.leaving_index = index
        self.broadcast_pending = True

    def _check_conf_change(self, cc: ConfChange) -> None:
        bugs = self.config.unsafe_conf_change
        if self.handover_index:
            raise ConfChangeRefused("this leader was removed from the configuration", NONE)
        if self.lead_transferee != NONE:
            raise ConfChangeRefused(f"leadership is moving to {self.lead_transferee}", self.id)
        if SKIP_TERM_CHECK not in bugs and self.log.committed < self.term_start_index:
            raise ConfChangeRefused("leader has not committed an entry of its term", self.id)
        if SKIP_PENDING_CHECK not in bugs and self.pending_conf_index > self.conf_applied_index:
            raise ConfChangeRefused(
                f"a configuration change is pending (entry {self.pending_conf_index}"
                f" not yet applied)",
                self.id,
            )
        node, kind = cc.node_id, cc.type
        if node == NONE:
            raise ConfChangeRefused("a conf change needs a node id, not 0", self.id)
        if kind is ConfChangeType.ADD_NODE and node in self.voters:
            raise ConfChangeRefused(f"node {node} is already a voter", self.id)
        if kind is ConfChangeType.ADD_LEARNER_NODE and node in self.members:
            what = "voter" if node in self.voters else "learner"
            raise ConfChangeRefused(f"node {node} is already a {what}", self.id)
        if kind in (ConfChangeType.REMOVE_NODE, ConfChangeType.UPDATE_NODE):
            if node not in self.members:
                raise ConfChangeRefused(f"unknown node {node}", self.id)
            if kind is ConfChangeType.REMOVE_NODE and self.voters == (node,):
                raise ConfChangeRefused(f"node {node} is the last voter", self.id)

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        """The application applies the next committed CONF_CHANGE entry (in log order):
        the configuration changes now. `ConfChange(type, NONE)` applies it as a no-op
        (etcd's way for a change the application rejects). Returns the configuration."""
        if not self.conf_queue:
            raise UsageError(
                "apply_conf_change: no committed conf change entry is waiting to be applied"
                " (call it once per CONF_CHANGE entry of a Ready's committed_entries, in order)"
            )
        index = self.conf_queue.popleft()
        if index <= self.conf_applied_index:
            return self.conf_state  # superseded by a snapshot restored since
        self.conf_applied_index = index
        if self.joining:
            if not self.voters or self.id not in self.members:
                return self.conf_state  # configuration unknown until a snapshot
            if cc.node_id == self.id and cc.type in (
                ConfChangeType.ADD_NODE,
                ConfChangeType.ADD_LEARNER_NODE,
            ):
                self.joining = False  # our own addition: what follows is new to us
            if cc.type is not ConfChangeType.ADD_NODE or cc.node_id != self.id:
                return self.conf_state  # already in the configuration we were given
        self._change_conf(cc, index)
        return self.conf_state

    def _change_conf(self, cc: ConfChange, index: int) -> None:
        voters, learners = set(self.voters), set(self.learners)
        node, kind = cc.node_id, cc.type
        if node == NONE or kind is ConfChangeType.UPDATE_NODE:
            return
        if kind is ConfChangeType.ADD_NODE:
            learners.discard(node)
            voters.add(node)
        elif kind is ConfChangeType.ADD_LEARNER_NODE:
            if node not in voters:  # a voter is never demoted by a single change
                learners.add(node)
        elif voters != {node}:  # REMOVE_NODE; the last voter is never removed
            voters.discard(node)
            learners.discard(node)
            if node == self.id and self.role is Role.LEADER:
                self.handover_index = index  # removed when the handover ends
                self.handover_sent.clear()
                self.handover_acks.clear()
            else:
                self.removed_ids.add(node)
        conf = ConfState(tuple(sorted(voters)), tuple(sorted(learners)))
        if conf == self.conf_state:
            return
        self._set_conf(conf)
        self.conf_history.append((index, conf))
        if self.role is Role.LEADER:
            self._leader_conf_changed()
        elif self.role is not Role.FOLLOWER and self.id not in self.voters:
            self.become_follower(self.term, NONE)  # a campaign of a non-voter ends

    def _leader_conf_changed(self) -> None:
        for peer in list(self.progress):
            if peer not in self.members and peer != self.id:
                del self.progress[peer]
        for member in sorted(self.members - set(self.progress)):
            progress = Progress(self.log.last_index() + 1, self.config.max_inflight_msgs)
            progress.recent_active = True  # not counted out by CheckQuorum at once
            self.progress[member] = progress
            self._send_append(member)
        if self.lead_transferee not in self.voters:
            self.lead_transferee = NONE
        if self._maybe_commit():  # a smaller quorum may commit more at once
            self._committed_more()
        if self.handover_index:
            self._broadcast_handover()

    def _broadcast_handover(self) -> None:
        for peer in self.progress:
            if peer != self.id:
                self._send_handover(peer)

    def _send_handover(self, peer: int) -> None:
        """A heartbeat telling `peer` the commit index (up to what it holds); the context
        names that index, so that the answer says what the peer was told."""
        told = min(self.progress[peer].match, self.log.committed)
        self.handover_sent[peer] = told
        context = HANDOVER + b" " + str(told).encode()
        self._send(
            Message(
                MT.HEARTBEAT, to=peer, from_=self.id, term=self.term, commit=told, context=context
            )
        )

    def _handover_acked(self, peer: int, context: bytes) -> None:
        """`peer` answered a handover heartbeat: if that one told it of the removal's
        commit, it counts; with a quorum of the remaining voters the leader steps down,
        after asking the most up-to-date of them to campaign at once (MsgTimeoutNow)."""
        told = context[len(HANDOVER) + 1 :]
        if not self.handover_index or not told.isdigit() or int(told) < self.handover_index:
            return
        self.handover_acks.add(peer)
        acked = self.handover_acks & self.voter_set
        if len(acked) < self.quorum():
            return
        successor = max(sorted(acked), key=lambda v: self.progress[v].match)
        if self.progress[successor].match == self.log.last_index():
            self._send(
                Message(
                    MT.TIMEOUT_NOW, to=successor, from_=self.id, term=self.term, context=HANDOVER
                )
            )
        self.become_follower(self.term, NONE)

    def conf_state_at(self, index: int) -> ConfState:
        """The configuration at `index` (at or after the snapshot, up to applied)."""
        conf = self.conf_history[0][1]
        for at, state in self.conf_history:
            if at <= index:
                conf = state
        return conf

    def flush_broadcast(self) -> None:
        """Send the MsgApps owed for proposals appended since the last flush."""
        if self.broadcast_pending and self.role is Role.LEADER:
            self._broadcast_append()
        self.broadcast_pending = False

    def flush_commit(self) -> None:
        """Send every follower the commit index it is owed (defer_commit_broadcast)."""
        if self.commit_pending and self.role is Role.LEADER:
            self._broadcast_append()
        self.commit_pending = False

    def _committed_more(self) -> None:
        """The commit index advanced: tell the followers now, or owe it to them."""
        forwarded_committed = 0 < self.forwarded_last <= self.log.committed
        if self.config.defer_commit_broadcast and not forwarded_committed:
            self.commit_pending = True
        else:
            self._broadcast_append()

    def _step_leader_response(self, m: Message, pr: Progress) -> None:
        t = m.type
        if t is MT.APP_RESP:
            pr.recent_active = True
            if m.reject:
                hint = m.reject_hint
                if m.log_term > 0:
                    hint = self.log.find_conflict_by_term(hint, m.log_term)[0]
                if pr.maybe_decrease_to(m.index, hint):
                    if pr.state is ProgressState.REPLICATE:
                        pr.become_probe()
                    self._send_append(m.from_)
                return
            was_paused = pr.is_paused()
            if not pr.maybe_update(m.index):
                return
            if pr.state is ProgressState.PROBE:
                pr.become_replicate()
            elif pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot:
                pr.become_probe()
                pr.become_replicate()
            elif pr.state is ProgressState.REPLICATE:
                pr.inflights.free_le(m.index)
            if self._maybe_commit():
                self._committed_more()
                if self.commit_pending and was_paused:
                    self._send_append(m.from_)
            elif was_paused:
                self._send_append(m.from_)
            while self._send_append(m.from_, send_if_empty=False):
                pass
            if (
                self.handover_index
                and pr.match >= self.handover_index
                and self.handover_sent.get(m.from_, 0) < self.handover_index
            ):
                self._send_handover(m.from_)  # it can be told of the removal's commit now
            if m.from_ == self.lead_transferee and pr.match == self.log.last_index():
                self._send(Message(MT.TIMEOUT_NOW, to=m.from_, from_=self.id, term=self.term))
        elif t is MT.HEARTBEAT_RESP:
            pr.recent_active = True
            pr.probe_sent = False
            if pr.state is ProgressState.REPLICATE and pr.inflights.full():
                pr.inflights.free_first()
            if pr.match < self.log.last_index():
                self._send_append(m.from_)
            if m.context.startswith(HANDOVER):
                self._handover_acked(m.from_, m.context)
            elif m.context:
                acks = self.read_only.recv_ack(m.from_, m.context)
                if len(acks & self.voter_set) >= self.quorum():
                    for status in self.read_only.advance(m.context):
                        self._respond_read_index(status.request, status.index)
        elif t is MT.SNAP_STATUS:
            if pr.state is ProgressState.SNAPSHOT:
                if m.reject:
                    pr.pending_snapshot = 0
                pr.become_probe()
                pr.probe_sent = True  # wait for a heartbeat answer before probing again
        elif t is MT.UNREACHABLE and pr.state is ProgressState.REPLICATE:
            pr.become_probe()

    def _handle_transfer(self, target: int) -> None:
        if target not in self.voters or target not in self.progress or target == self.id:
            return
        if self.lead_transferee == target:
            return
        self.lead_transferee = target
        self.election_elapsed = 0  # the transfer must finish within an election timeout
        if self.progress[target].match == self.log.last_index():
            self._send(Message(MT.TIMEOUT_NOW, to=target, from_=self.id, term=self.term))
        else:
            self._send_append(target)

    def _committed_entry_in_current_term(self) -> bool:
        return self.log.term(self.log.committed) == self.term

    def _handle_read_index(self, m: Message) -> None:
        if self.handover_index:
            raise ProposalDropped("this leader was removed from the configuration", NONE)
        if not self._committed_entry_in_current_term():
            self.pending_read_index.append(m)
            return
        if self.voters == (self.id,):
            self._respond_read_index(m, self.log.committed)
            return
        if self.read_only.add_request(self.log.committed, m):
            self.read_only.recv_ack(self.id, m.context)
            self._broadcast_heartbeat(m.context)

    def _respond_read_index(self, request: Message, index: int) -> None:
        if request.from_ in (NONE, self.id):
            self.read_states.append(ReadState(index, request.context))
        else:
            self._send(
                Message(
                    MT.READ_INDEX_RESP,
                    to=request.from_,
                    from_=self.id,
                    term=self.term,
                    index=index,
                    context=request.context,
                )
            )

    def _release_pending_read_index(self) -> None:
        pending, self.pending_read_index = self.pending_read_index, []
        for m in pending:
            self._handle_read_index(m)

    def _maybe_commit(self) -> bool:
        """Advance the commit index to the highest index a quorum has (Figure 8 rule)."""
        if self.learners or self.handover_index:  # progress beyond the voters
            voters = self.voter_set
            matches = sorted(
                (pr.match for peer, pr in self.progress.items() if peer in voters), reverse=True
            )
        else:
            matches = sorted((pr.match for pr in self.progress.values()), reverse=True)
        candidate = matches[self.quorum() - 1]
        if candidate > self.log.committed and self.log.term(candidate) == self.term:
            self.log.commit_to(candidate)
            self._release_pending_read_index()
            return True
        return False

    def stable_to(self, index: int, term: int) -> None:
        """The driver persisted entries up to (index, term): count them for the leader."""
        self.log.stable_to(index, term)
        if self.role is Role.LEADER:
            own = self.progress[self.id]
            if own.maybe_update(min(self.log.stable_index, self.log.last_index())):
                own.next = max(own.next, self.log.last_index() + 1)
                if self._maybe_commit():
                    self._committed_more()

    def _broadcast_append(self) -> None:
        # Every MsgApp carries the commit index, so nothing is owed after this (a paused
        # follower has it with its next MsgApp or heartbeat).
        self.broadcast_pending = False
        self.commit_pending = False
        if self.forwarded_last <= self.log.committed:
            self.forwarded_last = 0
        for peer in self.progress:
            if peer != self.id:
                self._send_append(peer)

    def _broadcast_heartbeat(self, context: bytes) -> None:
        for peer in self.progress:
            if peer != self.id:
                pr = self.progress[peer]
                self._send(
                    Message(
                        MT.HEARTBEAT,
                        to=peer,
                        from_=self.id,
                        term=self.term,
                        commit=min(pr.match, self.log.committed),
                        context=context,
                    )
                )

    def _send_append(self, to: int, send_if_empty: bool = True) -> bool:
        pr = self.progress[to]
        if pr.is_paused():
            return False
        prev_index = pr.next - 1
        prev_term = self.log.term(prev_index)
        if prev_term is None or pr.next < self.log.first_index():
            return self._send_snapshot(to, pr)
        entries: Sequence[Entry] = []
        if pr.next <= self.log.last_index():
            entries = self.log.slice(
                pr.next, self.log.last_index() + 1, self.config.max_size_per_msg
            )
        if not entries and not send_if_empty:
            return False
        self._send(
            Message(
                MT.APP,
                to=to,
                from_=self.id,
                term=self.term,
                index=prev_index,
                log_term=prev_term,
                entries=tuple(entries),
                commit=self.log.committed,
            )
        )
        pr.sent_entries(entries[-1].index if entries else None)
        return True

    def _send_snapshot(self, to: int, pr: Progress) -> bool:
        if not pr.recent_active:
            return False
        snapshot = self.log.snapshot
        self._send(Message(MT.SNAP, to=to, from_=self.id, term=self.term, snapshot=snapshot))
        pr.become_snapshot(snapshot.meta.index)
        return True

    # --- local snapshots ---------------------------------------------------------------
    def compact(self, index: int, data: bytes) -> Snapshot:
        """Take a snapshot blob of the state machine at applied `index`; drop the log before."""
        term = self.log.term(index)
        if term is None:
            raise InvariantViolation(
                f"cannot snapshot at {index}: not in the log [{self.log.first_index()},"
                f" {self.log.last_index()}]"
            )
        conf = self.conf_state_at(index)
        snapshot = Snapshot(SnapshotMeta(index, term, conf.voters, conf.learners), data)
        self.log.compact(snapshot)
        self.conf_history = [(index, conf)] + [h for h in self.conf_history if h[0] > index]
        return snapshot

    # --- invariants --------------------------------------------------------------------
    def check(self) -> None:
        """Raise InvariantViolation unless this node's own invariants hold."""
        self.log.check()
        if self.log.last_index() and self.log.last_term() > self.term:
            raise InvariantViolation(f"last log term {self.log.last_term()} > term {self.term}")
        if self.role is Role.LEADER:
            if self.lead != self.id or self.vote != self.id:
                raise InvariantViolation(f"leader {self.id} with lead {self.lead} vote {self.vote}")
            for pr in self.progress.values():
                pr.check()
        if self.role is Role.CANDIDATE and self.vote != self.id:
            raise InvariantViolation(f"candidate {self.id} voted for {self.vote}")


def _is_conf(entry: Entry) -> bool:
    return entry.type is EntryType.CONF_CHANGE


def _removes(entry: Entry, node: int) -> bool:
    """Whether a CONF_CHANGE entry removes `node` (False for one it cannot decode)."""
    try:
        cc = ConfChange.decode(entry.data)
    except ValueError:
        return False
    return cc.type is ConfChangeType.REMOVE_NODE and cc.node_id == node

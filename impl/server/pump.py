"""The Ready pump's plan: the order in which a member handles one Ready, as a pure function.

The Raft driver's Ready contract (etcdspec.impl.raft.driver) says what must be durable
before which message may leave and what may be applied when. `plan(facts, settings)`
writes that rule once: from what a Ready holds and what the member knows (`ReadyFacts`)
and how the member runs (`PumpSettings`), the steps to take, in order. The member's
Raft loop (etcdspec.impl.server.raft_loop) only carries them out; golden scripts and a
property test pin the plans (tests/impl/server/), and the trace checker's ReadyContract
judges what the plans do on a traced cluster.

The plain contract, with every variation off:
    persist (write + one fsync) -> send -> restore a received snapshot -> apply
    -> release the reads now applied -> advance
The speed-ups are named variations of it, each a setting, each safe for its own reason:
- `fsync_inline`: the write and fsync run on the loop thread while the disk's recent
  fsyncs are fast (`FsyncPace`), else in a worker thread, which the loop does not wait
  for until it must (AWAIT_FSYNC);
- `leader_sends_early` (the leader's parallel persist, Raft dissertation §10.2.1, as
  etcd does): a leader's MsgApp leaves before its own fsync, when the Ready changes
  neither term nor vote and restores no snapshot, so that what the MsgApp claims of the
  leader itself is durable already. Only MsgApp: acknowledgements and votes still wait.
  Safe because the Raft core counts the leader in a commit quorum only up to its stable
  index, which moves in `advance`, after this fsync (see `leader_sends_early`);
- `apply_during_fsync`: while a worker's fsync runs, the committed entries that earlier
  Readies persisted are applied (committed means durable on a quorum already), unless
  this Ready's entries replace some of them or it restores a snapshot;
- `defer_follower_apply`: a follower may hold committed entries back (APPLY_OR_DEFER),
  to apply them in a batch at its turn, when nobody at this member waits for them; who
  waits is known only when the step runs (after a worker's fsync, new proposals may
  have come), so the step decides (etcdspec.impl.server.apply).
And one planted bug (failpoint ack_before_fsync): `ack_before_fsync` writes the Ready
after it is sent and applied, without an fsync (WRITE_LATE).

A Ready that only moves the commit index is written without an fsync (WRITE; as etcd
raft's MustSync): a lost commit index is learnt again from the leader, and what was
applied is never applied again (the backend's consistent index).

Pure: no I/O, no clock. Per Ready the Raft loop computes only an int of the facts
(`facts_key`) and looks the plan up (`Plans`, one per settings), so that the plan costs
the member about what the inline checks it replaced did.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from enum import Enum

from etcdspec.impl.raft.driver import Ready
from etcdspec.impl.raft.messages import HardState


class Step(Enum):
    """One step of a plan; the value is its name in golden scripts and logs."""

    WRITE = "write"  # write the Ready without an fsync (only the commit index moved)
    FSYNC_WORKER = "fsync-in-worker"  # start the write and its fsync in a worker thread
    SEND_APPENDS = "send-appends"  # the leader's MsgApps leave (parallel persist)
    FSYNC_INLINE = "fsync-inline"  # write and fsync on the loop thread
    SOFT_STATE = "soft-state"  # act on a change of leader or role
    APPLY_PERSISTED = "apply-persisted"  # apply what earlier Readies persisted, meanwhile
    AWAIT_FSYNC = "await-fsync"  # wait for the worker's write and fsync
    SEND = "send"  # send the messages
    SEND_REST = "send-rest"  # send the messages but the MsgApps SEND_APPENDS sent
    RESTORE = "restore"  # restore the state machine from a received snapshot
    APPLY = "apply"  # apply the committed entries (those held back first)
    APPLY_OR_DEFER = "apply-or-defer"  # a follower's: apply, or hold back for a batch
    RELEASE_READS = "release-reads"  # answer the linearizable reads now applied
    WRITE_LATE = "write-late"  # failpoint ack_before_fsync: write after send, no fsync
    ADVANCE = "advance"  # tell the driver the Ready is handled


Plan = tuple[Step, ...]


@dataclass(frozen=True)
class ReadyFacts:
    """What a plan depends on: what the Ready holds, and what the member knows of it."""

    writes: bool = False  # entries, a snapshot or a hard state to write (Ready.must_sync)
    needs_fsync: bool = False  # entries, a snapshot, or a new term or vote (`needs_fsync`)
    entries: bool = False  # new entries to persist
    snapshot: bool = False  # a snapshot received from the leader
    committed: bool = False  # committed entries to apply
    committed_persisted: bool = False  # all of them persisted by earlier Readies
    messages: bool = False
    soft_state: bool = False  # a change of leader or role
    leader: bool = False  # this member leads
    term_vote_kept: bool = False  # the Ready changes neither term nor vote

    def describe(self) -> str:
        held = [name for name, value in vars(self).items() if value]
        return " ".join(held) or "empty"

    @classmethod
    def from_key(cls, key: int) -> ReadyFacts:
        """The facts a key holds (`facts_key`: bit i is the i-th field)."""
        return cls(**{f.name: bool(key >> bit & 1) for bit, f in enumerate(fields(cls))})


@dataclass(frozen=True)
class PumpSettings:
    """How the member runs its pump: the variations of the plain plan (module docstring)."""

    fsync_inline: bool = True
    leader_sends_early: bool = True
    apply_during_fsync: bool = True
    defer_follower_apply: bool = True
    ack_before_fsync: bool = False  # failpoint: a planted bug

    def describe(self) -> str:
        return " ".join(f"{name}={'on' if on else 'off'}" for name, on in vars(self).items())


PLAIN = PumpSettings(
    fsync_inline=True,
    leader_sends_early=False,
    apply_during_fsync=False,
    defer_follower_apply=False,
)


@functools.cache
def plan(facts: ReadyFacts, settings: PumpSettings) -> Plan:
    """The steps that handle a Ready with `facts`, in order (see the module docstring)."""
    steps: list[Step] = []
    late = facts.writes and settings.ack_before_fsync
    inline = worker = False
    if facts.writes and not late:
        if not facts.needs_fsync:
            steps.append(Step.WRITE)
        elif settings.fsync_inline:
            inline = True
        else:
            worker = True
            steps.append(Step.FSYNC_WORKER)
    early = (
        (inline or worker)
        and settings.leader_sends_early
        and facts.leader
        and facts.entries
        and not facts.snapshot
        and facts.term_vote_kept
        and facts.messages
    )
    if early:
        steps.append(Step.SEND_APPENDS)
    if inline:
        steps.append(Step.FSYNC_INLINE)
    if facts.soft_state:
        steps.append(Step.SOFT_STATE)
    applied_early = worker and settings.apply_during_fsync and facts.committed_persisted
    if applied_early:
        steps.append(Step.APPLY_PERSISTED)
    if worker:
        steps.append(Step.AWAIT_FSYNC)
    if facts.messages:
        steps.append(Step.SEND_REST if early else Step.SEND)
    if facts.snapshot:
        steps.append(Step.RESTORE)
    if facts.committed and not applied_early:
        deferrable = settings.defer_follower_apply and not facts.leader
        steps.append(Step.APPLY_OR_DEFER if deferrable else Step.APPLY)
    steps.append(Step.RELEASE_READS)
    if late:
        steps.append(Step.WRITE_LATE)
    steps.append(Step.ADVANCE)
    return tuple(steps)


def describe_plan(steps: Plan) -> str:
    return " -> ".join(step.value for step in steps)


def facts_of(ready: Ready, *, leader: bool, persisted: HardState) -> ReadyFacts:
    """The facts of `ready` for a member that leads (or not), whose durable hard state is
    `persisted`."""
    return ReadyFacts.from_key(facts_key(ready, leader=leader, persisted=persisted))


# Each fact is one bit of a facts key, in ReadyFacts' field order.
(
    WRITES,
    NEEDS_FSYNC,
    ENTRIES,
    SNAPSHOT,
    COMMITTED,
    COMMITTED_PERSISTED,
    MESSAGES,
    SOFT_STATE,
    LEADER,
    TERM_VOTE_KEPT,
) = (1 << bit for bit in range(len(fields(ReadyFacts))))


def facts_key(ready: Ready, *, leader: bool, persisted: HardState) -> int:
    """`facts_of(...)` as an int, one bit a fact: what the Raft loop computes per Ready
    (a few attribute reads, no object made), to look its plan up (`Plans`)."""
    hard = ready.hard_state
    entries = ready.entries
    has_snapshot = ready.snapshot is not None
    key = 0
    if hard is None or (hard.term == persisted.term and hard.vote == persisted.vote):
        key = TERM_VOTE_KEPT
        if entries or has_snapshot:
            key |= WRITES | NEEDS_FSYNC
        elif hard is not None:
            key |= WRITES
    else:
        key = WRITES | NEEDS_FSYNC
    if entries:
        key |= ENTRIES
    if has_snapshot:
        key |= SNAPSHOT
    committed = ready.committed_entries
    if committed:
        key |= COMMITTED
        if not has_snapshot and (not entries or committed[-1].index < entries[0].index):
            key |= COMMITTED_PERSISTED
    if ready.messages:
        key |= MESSAGES
    if ready.soft_state is not None:
        key |= SOFT_STATE
    if leader:
        key |= LEADER
    return key


class Plans:
    """The plans under one PumpSettings, by facts key, each computed once: the Raft loop
    looks one up per Ready."""

    def __init__(self, settings: PumpSettings) -> None:
        self.settings = settings
        self._by_key: dict[int, Plan] = {}

    def for_key(self, key: int) -> Plan:
        steps = self._by_key.get(key)
        if steps is None:
            steps = self._by_key[key] = plan(ReadyFacts.from_key(key), self.settings)
        return steps


def committed_already_persisted(ready: Ready) -> bool:
    """Whether `ready` has committed entries, all persisted by earlier Readies: no
    snapshot to restore first, and none at or after the first index of the entries this
    Ready persists (which may replace a conflicting suffix). Those may be applied while
    this Ready's own persist runs."""
    committed = ready.committed_entries
    if not committed or ready.snapshot is not None:
        return False
    return not ready.entries or committed[-1].index < ready.entries[0].index


def leader_sends_early(ready: Ready, is_leader: bool, persisted: HardState) -> bool:
    """Whether this Ready's MsgApp messages may leave before its fsync completes.

    The leader's parallel persist (Raft dissertation §10.2.1; etcd's raftNode sends a
    leader's messages before it saves the Ready): only a leader, and only when the
    Ready changes neither term nor vote and restores no snapshot, so that what its
    MsgApp claims about the leader itself (its term, which it voted for in) is durable
    already. Only MsgApp leaves early; acknowledgements (MsgAppResp, vote grants)
    and everything else still wait for the fsync.

    Why acknowledged writes stay durable on a quorum: a MsgApp promises nothing about
    the leader's own disk. The Raft core counts the leader in a commit quorum only up
    to `log.stable_index`, which moves in `advance`, after this Ready's fsync
    (raft.core.RaftCore.stable_to); a follower answers only after its own fsync. So
    an entry is committed only when a quorum, the leader counted only if it is
    durable there, holds it on disk; and a client is answered only when its entry
    is applied, which is after commit. If the leader dies before its fsync, its lost
    entries are uncommitted ones or ones a quorum of followers holds durably (the
    election restriction then keeps them).

    The same condition as `plan`'s SEND_APPENDS (a test holds them equal).
    """
    if not is_leader or ready.snapshot is not None or not ready.entries:
        return False
    hard = ready.hard_state
    return hard is None or (hard.term, hard.vote) == (persisted.term, persisted.vote)


class FsyncPace:
    """Whether the next WAL write and fsync should run on the loop thread (inline).

    A worker thread lets the loop serve while an fsync runs, but costs two thread
    hand-offs and GIL transfers per Ready: with fsyncs of ~0.1 ms (this machine's disk)
    that is more CPU and more latency than the fsync itself (server_bench, put with one
    client: p50 2.8 -> 2.2 ms, CPU per put -25%; at 64 clients no worse). With a slow
    disk the loop must not stall: the moving average of recent write+fsync times
    (weight ALPHA for the newest) decides, inline while it is under INLINE_MAX_S.
    """

    INLINE_MAX_S = 0.002
    ALPHA = 0.2

    def __init__(self) -> None:
        self.average_s = 0.0

    def inline(self) -> bool:
        return self.average_s < self.INLINE_MAX_S

    def observe(self, seconds: float) -> None:
        self.average_s += self.ALPHA * (seconds - self.average_s)

"""The vocabulary of the Raft core: entries, hard state, snapshots, messages, read states.

Every value here is a frozen dataclass with a `describe()` that gives the one canonical
text used in logs, traces and test failures. Node ids are positive integers; `NONE` (0)
means "no node" (no vote cast, no leader known), as in etcd raft.

Message fields follow etcd raft's `raftpb.Message`: `index`/`log_term` name the log
position a message refers to (the entry before `entries` in MsgApp, the candidate's last
entry in MsgVote, the index acknowledged in MsgAppResp), `commit` is the sender's commit
index, `reject_hint` is the rejecting follower's last index, and `context` carries the
ReadIndex request id or the leader-transfer campaign marker.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

NONE = 0

CAMPAIGN_TRANSFER = b"CampaignTransfer"


class RaftError(Exception):
    """Base class of the errors the Raft core and driver raise."""


class ProposalDropped(RaftError):
    """A proposal or read request could not be accepted by this node right now.

    `leader_id` is the leader this node knows of (NONE when it knows none): retry there,
    or retry later when an election has finished.
    """

    def __init__(self, reason: str, leader_id: int) -> None:
        self.reason = reason
        self.leader_id = leader_id
        where = f"leader is {leader_id}" if leader_id != NONE else "no leader is known"
        super().__init__(f"proposal dropped: {reason} ({where}); retry later or elsewhere")


class NotLeader(ProposalDropped):
    """This node is not the leader and does not forward (forward_proposals=False)."""

    def __init__(self, leader_id: int) -> None:
        super().__init__("this node is not the leader", leader_id)


class IllegalTransition(RaftError):
    """A role change that Raft does not allow (e.g. follower straight to leader)."""


class InvariantViolation(RaftError):
    """The core found its own state inconsistent: a bug, or a corrupted persisted log."""


class ConfigError(RaftError):
    """A RaftConfig or initial state that cannot run (says which field and why)."""


class UsageError(RaftError):
    """The driver was called out of order (e.g. ready() twice without advance())."""


class BadLeaderTransferee(UsageError):
    """Leadership can move only to a voter of the current configuration (the server
    answers etcd's "etcdserver: bad leader transferee")."""

    def __init__(self, target: int, voters: tuple[int, ...]) -> None:
        self.target = target
        super().__init__(
            f"cannot transfer leadership to {target}: not a voter (voters {list(voters)});"
            " pick one of the voters"
        )


class ConfChangeRefused(ProposalDropped):
    """The leader will not take this configuration change now (a change is pending, the
    leader has not committed an entry of its term yet, or the change makes no sense for
    the current configuration); `reason` says which. Retry after the pending change is
    applied, or fix the change."""


class EntryType(enum.IntEnum):
    """What an entry's data is: a state-machine command, or an encoded ConfChange."""

    NORMAL = 0
    CONF_CHANGE = 1


@dataclass(frozen=True)
class Entry:
    """One log entry. Empty `data` is the no-op a new leader appends in its term; an entry
    of type CONF_CHANGE holds an encoded ConfChange (applied with apply_conf_change)."""

    term: int
    index: int
    data: bytes = b""
    type: EntryType = EntryType.NORMAL

    def describe(self) -> str:
        if self.type is EntryType.CONF_CHANGE:
            try:
                what = ConfChange.decode(self.data).describe()
            except ValueError:
                what = f"undecodable conf change {describe_data(self.data)}"
            return f"{self.term}/{self.index} {what}"
        return f"{self.term}/{self.index} {describe_data(self.data)}"


class ConfChangeType(enum.IntEnum):
    """Single-server configuration changes (etcd raftpb's ConfChangeType numbering)."""

    ADD_NODE = 0  # add a voter, or promote a learner
    REMOVE_NODE = 1
    UPDATE_NODE = 2  # the member's record (context) changes; the configuration does not
    ADD_LEARNER_NODE = 3


_CONF_CHANGE_HEAD = struct.Struct(">BBQ")  # version, type, node id; then the context
_CONF_CHANGE_VERSION = 1


@dataclass(frozen=True)
class ConfChange:
    """One configuration change. `context` is opaque to Raft (the server puts the
    member's record there)."""

    type: ConfChangeType
    node_id: int
    context: bytes = b""

    def encode(self) -> bytes:
        return _CONF_CHANGE_HEAD.pack(_CONF_CHANGE_VERSION, int(self.type), self.node_id) + (
            self.context
        )

    @staticmethod
    def decode(data: bytes) -> ConfChange:
        """The ConfChange `encode` gave; ValueError naming the problem for anything else."""
        if len(data) < _CONF_CHANGE_HEAD.size:
            raise ValueError(
                f"conf change: {len(data)} bytes, at least {_CONF_CHANGE_HEAD.size} needed"
            )
        version, type_code, node_id = _CONF_CHANGE_HEAD.unpack_from(data)
        if version != _CONF_CHANGE_VERSION:
            raise ValueError(
                f"conf change: format version {version}, this build reads {_CONF_CHANGE_VERSION}"
            )
        try:
            change_type = ConfChangeType(type_code)
        except ValueError:
            raise ValueError(f"conf change: unknown type {type_code} at offset 1") from None
        return ConfChange(change_type, node_id, data[_CONF_CHANGE_HEAD.size :])

    def describe(self) -> str:
        what = {
            ConfChangeType.ADD_NODE: "add voter",
            ConfChangeType.REMOVE_NODE: "remove",
            ConfChangeType.UPDATE_NODE: "update",
            ConfChangeType.ADD_LEARNER_NODE: "add learner",
        }[self.type]
        context = f" context={describe_data(self.context)}" if self.context else ""
        return f"conf change: {what} {self.node_id}{context}"


@dataclass(frozen=True)
class ConfState:
    """The configuration: who votes, and who only receives the log (learners)."""

    voters: tuple[int, ...]
    learners: tuple[int, ...] = ()

    def members(self) -> tuple[int, ...]:
        return tuple(sorted((*self.voters, *self.learners)))

    def describe(self) -> str:
        learners = f" learners={list(self.learners)}" if self.learners else ""
        return f"voters={list(self.voters)}{learners}"


def describe_data(data: bytes, limit: int = 24) -> str:
    """Entry data for people: quoted text when printable ASCII, else hex; `noop` if empty."""
    if not data:
        return "noop"
    head, more = data[:limit], "…" if len(data) > limit else ""
    if all(32 <= b < 127 for b in head):
        return f'"{head.decode()}"{more}'
    return f"0x{head.hex()}{more}"


@dataclass(frozen=True)
class HardState:
    """What Raft must persist before it speaks: current term, vote cast in it, commit index."""

    term: int = 0
    vote: int = NONE
    commit: int = 0

    def describe(self) -> str:
        return f"term={self.term} vote={self.vote} commit={self.commit}"


@dataclass(frozen=True)
class SnapshotMeta:
    """Where a snapshot sits in the log, and the configuration at that point."""

    index: int = 0
    term: int = 0
    voters: tuple[int, ...] = ()
    learners: tuple[int, ...] = ()

    @property
    def conf_state(self) -> ConfState:
        return ConfState(self.voters, self.learners)

    def describe(self) -> str:
        learners = f" learners={list(self.learners)}" if self.learners else ""
        return f"snapshot {self.term}/{self.index} voters={list(self.voters)}{learners}"


@dataclass(frozen=True)
class Snapshot:
    """A state-machine snapshot blob (opaque to Raft) with its metadata."""

    meta: SnapshotMeta
    data: bytes = b""

    def describe(self) -> str:
        return f"{self.meta.describe()} ({len(self.data)} bytes)"


@dataclass(frozen=True)
class ReadState:
    """A linearizable read may be served once the state machine has applied `index`."""

    index: int
    context: bytes

    def describe(self) -> str:
        return f"read {describe_data(self.context)} at index {self.index}"


class MessageType(enum.IntEnum):
    """Message kinds (etcd raft numbering is not kept; raft_codec encodes these values).

    HUP, BEAT, CHECK_QUORUM are local-only (never sent on the wire); PROP, READ_INDEX and
    TRANSFER_LEADER may be local or forwarded; SNAP_STATUS and UNREACHABLE are reports
    from the transport.
    """

    HUP = 0
    BEAT = 1
    PROP = 2
    APP = 3
    APP_RESP = 4
    VOTE = 5
    VOTE_RESP = 6
    PRE_VOTE = 7
    PRE_VOTE_RESP = 8
    SNAP = 9
    HEARTBEAT = 10
    HEARTBEAT_RESP = 11
    UNREACHABLE = 12
    SNAP_STATUS = 13
    CHECK_QUORUM = 14
    TRANSFER_LEADER = 15
    TIMEOUT_NOW = 16
    READ_INDEX = 17
    READ_INDEX_RESP = 18


LOCAL_MESSAGES = frozenset({MessageType.HUP, MessageType.BEAT, MessageType.CHECK_QUORUM})
# Never received from a peer: local kinds, and the transport's own reports.
NOT_FROM_PEERS = LOCAL_MESSAGES | {MessageType.SNAP_STATUS, MessageType.UNREACHABLE}
# The only kinds a peer may send without a term (forwarded requests, and a pre-vote
# rejection from a node that has not seen any term yet).
TERMLESS_FROM_PEERS = frozenset(
    {
        MessageType.PROP,
        MessageType.READ_INDEX,
        MessageType.TRANSFER_LEADER,
        MessageType.PRE_VOTE_RESP,
    }
)
VOTE_REQUESTS = frozenset({MessageType.VOTE, MessageType.PRE_VOTE})


@dataclass(frozen=True)
class Message:
    type: MessageType
    to: int = NONE
    from_: int = NONE
    term: int = 0
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    snapshot: Snapshot | None = None
    context: bytes = b""

    def describe(self) -> str:
        parts = [f"{self.type.name} {self.from_}->{self.to} term={self.term}"]
        if self.type in (MessageType.APP, MessageType.VOTE, MessageType.PRE_VOTE):
            parts.append(f"log={self.log_term}/{self.index}")
        elif self.index:
            parts.append(f"index={self.index}")
        if self.commit:
            parts.append(f"commit={self.commit}")
        if self.reject:
            term_hint = f" term {self.log_term}" if self.log_term else ""
            parts.append(f"reject(hint={self.reject_hint}{term_hint})")
        if self.entries:
            parts.append("entries=[" + ", ".join(e.describe() for e in self.entries) + "]")
        if self.snapshot is not None:
            parts.append(self.snapshot.describe())
        if self.context:
            parts.append(f"context={describe_data(self.context)}")
        return " ".join(parts)

"""Raft log entries, snapshots and messages of the model, as small immutable tuples.

Contract: every value here is immutable, hashable and compared by content, so a whole
cluster state can be hashed and deduplicated by the exhaustive explorer. Node ids are
ints 1..N and are written n1..nN in every text. `describe()` gives the one canonical
text used in action labels, counterexamples and reports. `sort_key()` gives a plain,
totally ordered key (client requests enter it through their describe() text), so the
network's multiset has a canonical order without comparing request objects.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple


def node_name(node_id: int) -> str:
    """The one name of a node in every text: n1..nN."""
    return f"n{node_id}"


class Entry(NamedTuple):
    """One log entry: the term of the leader that created it and the client request.

    `key` is the request's describe() text, computed once when the entry is proposed; it
    orders entries canonically without comparing request objects.
    """

    term: int
    key: str
    request: Any  # an etcdspec.model.requests.Request

    def describe(self) -> str:
        return f"{self.term}:{self.key}"


class Membership(NamedTuple):
    """A cluster configuration: the voters and the learners (node ids). Learners receive
    the log but neither vote, campaign nor count toward commit."""

    voters: frozenset[int]
    learners: frozenset[int] = frozenset()

    def members(self) -> frozenset[int]:
        return self.voters | self.learners

    @property
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    def describe(self) -> str:
        voters = ",".join(node_name(n) for n in sorted(self.voters))
        learners = ",".join(node_name(n) for n in sorted(self.learners))
        return f"voters {voters}" + (f" learners {learners}" if learners else "")


CONF_OPS = ("add", "remove", "learner", "promote")


class ConfChange(NamedTuple):
    """A single-server configuration change (etcd's MemberAdd, MemberRemove, MemberAdd
    as learner, MemberPromote) of node `node`. As a client's request `result` is None;
    in a log entry it is the configuration the change leads to (the leader computes it
    when it appends the entry), so an entry alone says which configuration it holds."""

    op: str  # one of CONF_OPS
    node: int
    result: Membership | None = None

    def describe(self) -> str:
        text = f"conf {self.op} {node_name(self.node)}"
        return text if self.result is None else f"{text} → {self.result.describe()}"

    def applied_to(self, config: Membership) -> Membership:
        """The configuration after this change (the change must be allowed: see
        `allowed`)."""
        voters, learners = set(config.voters), set(config.learners)
        if self.op == "add":
            voters.add(self.node)
            learners.discard(self.node)
        elif self.op == "learner":
            learners.add(self.node)
        elif self.op == "promote":
            learners.discard(self.node)
            voters.add(self.node)
        else:
            voters.discard(self.node)
            learners.discard(self.node)
        return Membership(frozenset(voters), frozenset(learners))

    def allowed(self, config: Membership) -> bool:
        """Whether the change makes sense in `config` (as etcd's MemberAdd refuses a
        member that exists, MemberPromote a voter, MemberRemove the last voter)."""
        node = self.node
        if self.op in ("add", "learner"):
            return node not in config.members()
        if self.op == "promote":
            return node in config.learners
        return node in config.members() and config.voters != frozenset({node})


class Snapshot(NamedTuple):
    """A compacted log prefix: the last included index and term, and the applied state;
    with membership, the configuration as of last_index (None: the cluster's initial)."""

    last_index: int
    last_term: int
    data: Any  # the state machine's state after applying entries 1..last_index
    config: Membership | None = None

    def describe(self) -> str:
        return f"snapshot {self.last_index}/{self.last_term}"


EMPTY_SNAPSHOT = Snapshot(0, 0, None)


class MsgType(IntEnum):
    PRE_VOTE = 1
    PRE_VOTE_RESP = 2
    VOTE = 3
    VOTE_RESP = 4
    APPEND = 5
    APPEND_RESP = 6
    SNAPSHOT = 7
    HEARTBEAT = 8
    HEARTBEAT_RESP = 9


_MSG_TEXT = {
    MsgType.PRE_VOTE: "PreVote",
    MsgType.PRE_VOTE_RESP: "PreVoteResp",
    MsgType.VOTE: "RequestVote",
    MsgType.VOTE_RESP: "RequestVoteResp",
    MsgType.APPEND: "AppendEntries",
    MsgType.APPEND_RESP: "AppendEntriesResp",
    MsgType.SNAPSHOT: "InstallSnapshot",
    MsgType.HEARTBEAT: "Heartbeat",
    MsgType.HEARTBEAT_RESP: "HeartbeatResp",
}


class Message(NamedTuple):
    """A Raft message, one shape for all types (as etcd raft's raftpb.Message).

    Field use per type:
    - PRE_VOTE / VOTE: `log_index`/`log_term` = the candidate's last log index and term.
    - *_RESP to votes: `reject` says whether the vote was refused.
    - APPEND: `log_index`/`log_term` = prev index/term, `entries`, `commit` = leader commit,
      `context` = the ReadIndex round it confirms (0: none).
    - APPEND_RESP: `log_index` = the follower's match index on success, or the rejected prev
      index with `reject_hint` = the follower's last index; `context` echoed.
    - SNAPSHOT: `snapshot` and `commit`.
    - HEARTBEAT (RaftParams.etcd_heartbeats): `commit` = min(the follower's match index,
      the leader's commit), as etcd raft's sendHeartbeat: a follower takes it without
      checking its log, so it must never exceed what the follower is known to hold;
      `context` as for APPEND. HEARTBEAT_RESP: `context` echoed.
    """

    type: MsgType
    src: int
    dst: int
    term: int
    log_index: int = 0
    log_term: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    context: int = 0
    snapshot: Snapshot = EMPTY_SNAPSHOT

    def sort_key(self) -> tuple[Any, ...]:
        return (
            self.src,
            self.dst,
            int(self.type),
            self.term,
            self.log_index,
            self.log_term,
            tuple((e.term, e.key) for e in self.entries),
            self.commit,
            self.reject,
            self.reject_hint,
            self.context,
            self.snapshot.last_index,
            self.snapshot.last_term,
        )

    def describe(self) -> str:
        head = (
            f"{node_name(self.src)}→{node_name(self.dst)} {_MSG_TEXT[self.type]} term {self.term}"
        )
        kind = self.type
        if kind in (MsgType.PRE_VOTE, MsgType.VOTE):
            return f"{head} last {self.log_index}/{self.log_term}"
        if kind in (MsgType.PRE_VOTE_RESP, MsgType.VOTE_RESP):
            return f"{head} {'rejected' if self.reject else 'granted'}"
        if kind == MsgType.APPEND:
            n = len(self.entries)
            text = (
                f"{head} prev {self.log_index}/{self.log_term} {n} entr{'y' if n == 1 else 'ies'}"
            )
            text += f" commit {self.commit}"
            return text + (f" read {self.context}" if self.context else "")
        if kind == MsgType.HEARTBEAT:
            return f"{head} commit {self.commit}" + (
                f" read {self.context}" if self.context else ""
            )
        if kind == MsgType.HEARTBEAT_RESP:
            return head + (f" read {self.context}" if self.context else "")
        if kind == MsgType.APPEND_RESP:
            if self.reject:
                text = f"{head} rejected {self.log_index} hint {self.reject_hint}"
            else:
                text = f"{head} match {self.log_index}"
            return text + (f" read {self.context}" if self.context else "")
        return f"{head} {self.snapshot.describe()}"

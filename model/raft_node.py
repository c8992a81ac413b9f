"""One Raft node as a pure value: (node, input) -> (node', messages to send).

Contract
- A `Node` is an immutable NamedTuple; every function here returns a new node and the
  messages it emits, and never changes its argument. No I/O, no clock, no global random:
  time is counted in ticks and the election jitter comes from a deterministic draw over
  (seed, node, draw count), the draw count being part of the node's state.
- Persistent state is `term`, `vote` and `log` (with its snapshot). Volatile state is the
  rest: role, lead, commit_index, applied_index, election/heartbeat elapsed, votes
  received, the leader's progress (match/next), ReadIndex rounds and lease clocks.
- Durability ("explicit" mode): a step that changes term, vote or log leaves the last
  durable hard state in `durable` and holds the step's messages in `outbox`; `persist`
  makes the hard state durable and releases the outbox (as etcd's Ready: persist, then
  send). `crash` keeps only the durable hard state. In "sync" mode (`explicit=False`)
  every step persists at once. The leader counts its own log for commit only as far as it
  is durable. `ready(node)` states the pending work field by field (persist, then send,
  then apply).
- Roles are an enum; every role change goes through `_transition`, which raises
  `IllegalTransitionError` (changing nothing) on a transition Raft does not allow.
- Applying committed entries to the state machine is the driver's job (the cluster):
  it applies entries applied_index+1..commit_index and calls `mark_applied`.
- Bugs from model/bugs.py are small mutations at the exact spot, each guarded by
  `params.bugs.on(NAME)`.
- Membership (`params.membership`; off: every node of 1..N is a voter, always): the
  configuration is a log entry (a `ConfChange` with the `Membership` it leads to), and a
  node uses the latest configuration in its log, committed or not — it takes effect
  when APPENDED, as the Raft dissertation (§4.1) says, not when applied as in etcd raft;
  a truncated configuration entry takes its configuration with it, and a snapshot
  carries the configuration as of its index. (etcd's apply-time rule needs its own
  argument for the configurations a lagging applier still uses; the append-time rule is
  the one proved safe for single-server changes.) A leader sends the log to voters and
  learners; only voters campaign, are asked for votes and count toward commit,
  elections and CheckQuorum; a leader removed by a committed change steps down. The
  leader's guards (`can_change_config`): no change while one is uncommitted in its log,
  and none before it has committed an entry of its own term (the single-server bug that
  Ongaro reported on raft-dev in 2015; bugs `two_pending_changes` and
  `reconfig_before_term_commit` skip them).
"""

from __future__ import annotations

import random
from enum import IntEnum
from typing import Any, NamedTuple

from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.raft_log import RaftLog
from etcdspec.model.raft_messages import (
    ConfChange,
    Entry,
    Membership,
    Message,
    MsgType,
    Snapshot,
    node_name,
)

NOOP_KEY = "noop"

_FROM_LEADER = (MsgType.APPEND, MsgType.SNAPSHOT, MsgType.HEARTBEAT)


class Role(IntEnum):
    FOLLOWER = 0
    PRE_CANDIDATE = 1
    CANDIDATE = 2
    LEADER = 3

    def describe(self) -> str:
        return self.name.lower().replace("_", "-")


LEGAL_TRANSITIONS: frozenset[tuple[Role, Role]] = frozenset(
    {
        (Role.FOLLOWER, Role.FOLLOWER),
        (Role.FOLLOWER, Role.PRE_CANDIDATE),
        (Role.FOLLOWER, Role.CANDIDATE),
        (Role.PRE_CANDIDATE, Role.FOLLOWER),
        (Role.PRE_CANDIDATE, Role.PRE_CANDIDATE),
        (Role.PRE_CANDIDATE, Role.CANDIDATE),
        (Role.CANDIDATE, Role.FOLLOWER),
        (Role.CANDIDATE, Role.CANDIDATE),
        (Role.CANDIDATE, Role.PRE_CANDIDATE),
        (Role.CANDIDATE, Role.LEADER),
        (Role.LEADER, Role.FOLLOWER),
    }
)


class IllegalTransitionError(Exception):
    """A role change Raft does not allow (e.g. follower straight to leader)."""

    def __init__(self, node_id: int, source: Role, target: Role) -> None:
        super().__init__(
            f"{node_name(node_id)}: illegal role transition {source.describe()} -> "
            f"{target.describe()}; a node becomes leader only as a candidate with a quorum"
        )
        self.node_id = node_id
        self.source = source
        self.target = target


class RaftParams(NamedTuple):
    """What every node of one cluster shares: size, timing, options, bugs."""

    nodes: int = 3
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    prevote: bool = True
    check_quorum: bool = True
    free_timeouts: bool = False  # election timeouts are nondeterministic actions
    explicit_persist: bool = True  # persistence is a separate step (see module docstring)
    noop_on_leader: bool = True  # a new leader appends an empty entry, as etcd does
    seed: int = 0
    bugs: BugSet = NO_BUGS
    membership: bool = False  # configurations change through the log (module docstring)
    initial_voters: frozenset[int] = frozenset()  # membership: the first config (empty: all)
    # etcd raft's heartbeats: a leader's heartbeat is a HEARTBEAT message carrying
    # min(match, commit), taken by a follower without a log check, answered by a
    # HEARTBEAT_RESP on which the leader sends what the follower lacks (False: a
    # heartbeat resends AppendEntries, the model's first design)
    etcd_heartbeats: bool = False
    max_append_entries: int = 0  # at most this many entries per AppendEntries (0: all)

    @property
    def quorum(self) -> int:
        return self.nodes // 2 + 1


class HardState(NamedTuple):
    """The durable part of a node: what survives a crash."""

    term: int
    vote: int
    log: RaftLog


class ReadRound(NamedTuple):
    """A ReadIndex round at the leader: read `request` once `index` is applied, after a
    quorum (`acks`) has confirmed leadership in the current term."""

    id: int
    read_index: int
    acks: frozenset[int]
    request: Any


class Node(NamedTuple):
    id: int
    # persistent
    term: int
    vote: int  # 0: none
    log: RaftLog
    # durability bookkeeping (None: everything is durable)
    durable: HardState | None
    outbox: tuple[Message, ...]
    # volatile
    role: Role
    lead: int  # 0: unknown
    commit_index: int
    applied_index: int
    store: Any  # the state machine's state after entries 1..applied_index
    election_elapsed: int
    heartbeat_elapsed: int
    randomized_timeout: int
    timeout_draws: int
    votes: tuple[int, ...]  # per node (position id-1): 1 granted, -1 rejected, 0 unknown
    match: tuple[int, ...]  # leader only, per node
    next: tuple[int, ...]  # leader only, per node
    recent_active: tuple[bool, ...]  # leader with check_quorum only, per node
    reads: tuple[ReadRound, ...]  # leader: ReadIndex rounds waiting for a quorum
    ready_reads: tuple[ReadRound, ...]  # confirmed, served once applied_index >= index
    read_seq: int
    leases: tuple[tuple[int, int], ...]  # leader: (lease_id, remaining ticks), sorted

    @property
    def name(self) -> str:
        return node_name(self.id)

    def hard_state(self) -> HardState:
        return (
            self.durable if self.durable is not None else HardState(self.term, self.vote, self.log)
        )

    def describe(self) -> str:
        lead = f" lead {node_name(self.lead)}" if self.lead else ""
        vote = f" vote {node_name(self.vote)}" if self.vote else ""
        pending = " (unpersisted)" if self.durable is not None else ""
        return (
            f"{self.name} {self.role.describe()} term {self.term}{vote}{lead} "
            f"log {self.log.describe()} commit {self.commit_index} applied {self.applied_index}"
            f"{pending}"
        )


# --------------------------------------------------------------------------- creation


def _draw_timeout(params: RaftParams, node_id: int, draws: int) -> int:
    if params.free_timeouts:
        return params.election_ticks
    rng = random.Random(f"{params.seed}:{node_id}:{draws}")
    return params.election_ticks + rng.randrange(params.election_ticks)


def new_node(params: RaftParams, node_id: int, initial_store: Any) -> Node:
    """A node as it first boots: follower, term 0, empty log, store at its initial state."""
    log = RaftLog(Snapshot(0, 0, initial_store), ())
    return Node(
        id=node_id,
        term=0,
        vote=0,
        log=log,
        durable=None,
        outbox=(),
        role=Role.FOLLOWER,
        lead=0,
        commit_index=0,
        applied_index=0,
        store=initial_store,
        election_elapsed=0,
        heartbeat_elapsed=0,
        randomized_timeout=_draw_timeout(params, node_id, 0),
        timeout_draws=0 if params.free_timeouts else 1,
        votes=(),
        match=(),
        next=(),
        recent_active=(),
        reads=(),
        ready_reads=(),
        read_seq=0,
        leases=(),
    )


# --------------------------------------------------------------------------- roles


def _transition(node: Node, target: Role) -> None:
    if (node.role, target) not in LEGAL_TRANSITIONS:
        raise IllegalTransitionError(node.id, node.role, target)


def _reset(params: RaftParams, node: Node, **changes: Any) -> Node:
    """Reset the election clock (with a fresh randomized timeout) and leader state."""
    draws = node.timeout_draws
    timeout = _draw_timeout(params, node.id, draws)
    if not params.free_timeouts:
        draws += 1
    return node._replace(
        election_elapsed=0,
        heartbeat_elapsed=0,
        randomized_timeout=timeout,
        timeout_draws=draws,
        votes=(),
        match=(),
        next=(),
        recent_active=(),
        reads=(),
        ready_reads=(),
        leases=(),
    )._replace(**changes)


def become_follower(params: RaftParams, node: Node, term: int, lead: int) -> Node:
    _transition(node, Role.FOLLOWER)
    vote = node.vote if term == node.term else 0
    keep = node.leases if params.bugs.on("lease_revoke_by_stale_leader") else ()
    result = _reset(params, node, role=Role.FOLLOWER, term=term, vote=vote, lead=lead)
    return result._replace(leases=keep) if keep else result


def _become_pre_candidate(params: RaftParams, node: Node) -> Node:
    _transition(node, Role.PRE_CANDIDATE)
    votes = tuple(1 if i == node.id else 0 for i in range(1, params.nodes + 1))
    # etcd: a pre-candidate keeps its term and vote; it forgets the leader.
    return node._replace(
        role=Role.PRE_CANDIDATE,
        lead=0,
        votes=votes,
        match=(),
        next=(),
        recent_active=(),
        reads=(),
        ready_reads=(),
        leases=(),
    )


def _become_candidate(params: RaftParams, node: Node) -> Node:
    _transition(node, Role.CANDIDATE)
    votes = tuple(1 if i == node.id else 0 for i in range(1, params.nodes + 1))
    result = _reset(params, node, role=Role.CANDIDATE, term=node.term + 1, vote=node.id, lead=0)
    return result._replace(votes=votes)


def _become_leader(params: RaftParams, node: Node) -> tuple[Node, list[Message]]:
    _transition(node, Role.LEADER)
    n = params.nodes
    last = node.log.last_index
    log = node.log
    if params.noop_on_leader:
        log = log.append(Entry(node.term, NOOP_KEY, None))
    leader = _reset(
        params,
        node,
        role=Role.LEADER,
        lead=node.id,
        log=log,
    )._replace(
        match=tuple(0 for _ in range(n)),
        next=tuple(last + 1 for _ in range(n)),
        recent_active=tuple(i == node.id for i in range(1, n + 1)) if params.check_quorum else (),
    )
    if not params.explicit_persist:  # (else the no-op is not durable yet: persist commits)
        leader = _maybe_commit(params, leader)
    return _broadcast_append(params, leader)


# --------------------------------------------------------------------------- helpers


def initial_config(params: RaftParams) -> Membership:
    """The configuration every node boots with (the snapshot of index 0 holds None)."""
    return Membership(params.initial_voters or frozenset(range(1, params.nodes + 1)))


def config_of(params: RaftParams, log: RaftLog) -> Membership:
    """The node's configuration: the latest one in its log (taken when appended)."""
    for entry in reversed(log.entries):
        request = entry.request
        if isinstance(request, ConfChange) and request.result is not None:
            return request.result
    return log.snapshot.config or initial_config(params)


def config_at(params: RaftParams, log: RaftLog, index: int) -> Membership:
    """The configuration as of entry `index` (held, or the snapshot's)."""
    if index <= log.snapshot.last_index:
        return log.snapshot.config or initial_config(params)
    return config_of(params, RaftLog(log.snapshot, log.slice(log.first_index, index)))


def config_index(log: RaftLog) -> int:
    """The index of the latest configuration entry held (0: none after the snapshot)."""
    for offset in range(len(log.entries) - 1, -1, -1):
        if isinstance(log.entries[offset].request, ConfChange):
            return log.snapshot.last_index + offset + 1
    return 0


def _voters(params: RaftParams, node: Node) -> range | list[int]:
    if not params.membership:
        return range(1, params.nodes + 1)
    return sorted(config_of(params, node.log).voters)


def _quorum(params: RaftParams, node: Node) -> int:
    if not params.membership:
        return params.quorum
    return config_of(params, node.log).quorum


def promotable(params: RaftParams, node: Node) -> bool:
    """Whether the node may campaign: a voter of its own configuration."""
    return not params.membership or node.id in config_of(params, node.log).voters


def can_change_config(params: RaftParams, node: Node) -> bool:
    """Whether a leader may append a configuration change now (module docstring)."""
    if node.role != Role.LEADER:
        return False
    if (
        not params.bugs.on("reconfig_before_term_commit")
        and node.log.term_at(node.commit_index) != node.term
    ):
        return False
    return params.bugs.on("two_pending_changes") or config_index(node.log) <= node.commit_index


def _peers(params: RaftParams, node: Node) -> range | list[int]:
    """The nodes a leader replicates to (and itself): voters and learners."""
    if not params.membership:
        return range(1, params.nodes + 1)
    return sorted(config_of(params, node.log).members() | {node.id})


def _self_match(node: Node) -> int:
    """How far the leader's own log is durable (it counts for commit only that far)."""
    if node.durable is None:
        return node.log.last_index
    durable_log = node.durable.log
    index = min(durable_log.last_index, node.log.last_index)
    while index > node.log.snapshot.last_index and durable_log.term_at(index) != node.log.term_at(
        index
    ):
        index -= 1
    return max(index, 0)


def _maybe_commit(params: RaftParams, node: Node) -> Node:
    voters = _voters(params, node)
    matches = sorted(_self_match(node) if i == node.id else node.match[i - 1] for i in voters)
    quorum_index = matches[len(matches) - _quorum(params, node)]
    if quorum_index <= node.commit_index:
        return node
    if params.bugs.on("figure8_commit"):
        # Bug: commit by counting replicas, whatever the entry's term (Figure 8).
        return node._replace(commit_index=quorum_index)
    if node.log.term_at(quorum_index) != node.term:
        return node  # Raft §5.4.2: only entries of the leader's own term commit by counting
    return node._replace(commit_index=quorum_index)


def _append_to(params: RaftParams, node: Node, peer: int, context: int = 0) -> Message:
    next_index = node.next[peer - 1]
    log = node.log
    if next_index <= log.snapshot.last_index:
        return Message(
            MsgType.SNAPSHOT,
            node.id,
            peer,
            node.term,
            commit=node.commit_index,
            snapshot=log.snapshot,
        )
    prev = next_index - 1
    prev_term = log.term_at(prev)
    assert prev_term is not None
    entries = log.slice_from(next_index)
    if params.max_append_entries:
        entries = entries[: params.max_append_entries]
    return Message(
        MsgType.APPEND,
        node.id,
        peer,
        node.term,
        log_index=prev,
        log_term=prev_term,
        entries=entries,
        commit=node.commit_index,
        context=context,
    )


def _broadcast_append(
    params: RaftParams, node: Node, context: int = 0
) -> tuple[Node, list[Message]]:
    out = [
        _append_to(params, node, peer, context) for peer in _peers(params, node) if peer != node.id
    ]
    return node, out


def _campaign(params: RaftParams, node: Node, pre: bool) -> tuple[Node, list[Message]]:
    """Start an election: a pre-vote round when `pre`, else a real one (new term). A
    learner or a node outside its configuration does not campaign."""
    if node.role == Role.LEADER or not promotable(params, node):
        return node, []
    if pre:
        node = _become_pre_candidate(params, node)
        kind, term = MsgType.PRE_VOTE, node.term + 1
    else:
        node = _become_candidate(params, node)
        kind, term = MsgType.VOTE, node.term
    if _quorum(params, node) == 1:
        return _campaign(params, node, False) if pre else _become_leader(params, node)
    out = [
        Message(
            kind, node.id, peer, term, log_index=node.log.last_index, log_term=node.log.last_term
        )
        for peer in _voters(params, node)
        if peer != node.id
    ]
    return node, out


# --------------------------------------------------------------------------- inputs


def tick(params: RaftParams, node: Node) -> tuple[Node, list[Message]]:
    """One clock tick (ticks mode): election timeout for followers/candidates; heartbeats
    and the CheckQuorum round for a leader."""
    if node.role != Role.LEADER:
        elapsed = node.election_elapsed + 1
        node = node._replace(election_elapsed=elapsed)
        if elapsed >= node.randomized_timeout:
            return _campaign(params, node, params.prevote)
        return node, []
    node = node._replace(
        election_elapsed=node.election_elapsed + 1, heartbeat_elapsed=node.heartbeat_elapsed + 1
    )
    if node.election_elapsed >= params.election_ticks:
        node = node._replace(election_elapsed=0)
        if params.check_quorum:
            node, stepped_down = _check_quorum(params, node)
            if stepped_down:
                return node, []
    if node.heartbeat_elapsed >= params.heartbeat_ticks:
        node = node._replace(heartbeat_elapsed=0)
        return _broadcast_heartbeat(params, node)
    return node, []


def _check_quorum(params: RaftParams, node: Node) -> tuple[Node, bool]:
    if params.membership:
        active = sum(1 for n in _voters(params, node) if node.recent_active[n - 1])
    else:
        active = sum(1 for flag in node.recent_active if flag)
    if active < _quorum(params, node):
        return become_follower(params, node, node.term, 0), True
    reset = tuple(i == node.id for i in range(1, params.nodes + 1))
    return node._replace(recent_active=reset), False


def timeout(params: RaftParams, node: Node) -> tuple[Node, list[Message]]:
    """The election timeout fires now (free mode): a follower or candidate campaigns; a
    leader runs its CheckQuorum round."""
    if node.role == Role.LEADER:
        node, _ = _check_quorum(params, node)
        return node, []
    if not promotable(params, node):
        return node, []
    node = node._replace(election_elapsed=params.election_ticks)
    return _campaign(params, node, params.prevote)


def heartbeat(params: RaftParams, node: Node) -> tuple[Node, list[Message]]:
    """A leader sends AppendEntries (the pending entries, or none) to every peer; with
    etcd_heartbeats, a HEARTBEAT instead (etcd raft's bcastHeartbeat)."""
    if node.role != Role.LEADER:
        return node, []
    return _broadcast_heartbeat(params, node)


def _broadcast_heartbeat(params: RaftParams, node: Node) -> tuple[Node, list[Message]]:
    if not params.etcd_heartbeats:
        return _broadcast_append(params, node)
    full = params.bugs.on("heartbeat_full_commit")
    out = [
        Message(
            MsgType.HEARTBEAT,
            node.id,
            peer,
            node.term,
            # Bug heartbeat_full_commit: the leader's whole commit index, as etcd raft
            # must not send it (the follower commits it without a log check).
            commit=node.commit_index if full else min(node.match[peer - 1], node.commit_index),
        )
        for peer in _peers(params, node)
        if peer != node.id
    ]
    return node, out


def propose(
    params: RaftParams, node: Node, entry_key: str, request: Any
) -> tuple[Node, list[Message]]:
    """A client request at the leader: append it and replicate. A configuration change
    (allowed: `can_change_config`) is appended with the configuration it leads to."""
    assert node.role == Role.LEADER, f"{node.name} is not leader"
    if isinstance(request, ConfChange):
        assert can_change_config(params, node), f"{node.name} cannot change its config now"
        request = request._replace(result=request.applied_to(config_of(params, node.log)))
        entry_key = request.describe()
    node = node._replace(log=node.log.append(Entry(node.term, entry_key, request)))
    if not params.explicit_persist:
        # (else the entry is not durable yet: `persist` commits it where a quorum of one
        # suffices; with more voters the others' acks are still missing anyway)
        node = _maybe_commit(params, node)
    return _broadcast_append(params, node)


def read_index(params: RaftParams, node: Node, request: Any) -> tuple[Node, list[Message]]:
    """Start a ReadIndex round at the leader (needs an entry of its term committed)."""
    assert can_read_index(node), f"{node.name} cannot serve ReadIndex now"
    read_id = node.read_seq + 1
    round_ = ReadRound(read_id, node.commit_index, frozenset({node.id}), request)
    node = node._replace(read_seq=read_id)
    if _quorum(params, node) == 1:
        return node._replace(ready_reads=(*node.ready_reads, round_)), []
    node = node._replace(reads=(*node.reads, round_))
    return _broadcast_append(params, node, context=read_id)


def can_read_index(node: Node) -> bool:
    return node.role == Role.LEADER and node.log.term_at(node.commit_index) == node.term


def step(params: RaftParams, node: Node, m: Message) -> tuple[Node, list[Message]]:
    """Receive one message (etcd raft's Step)."""
    if m.term > node.term:
        if m.type in (MsgType.PRE_VOTE, MsgType.VOTE):
            in_lease = (
                params.check_quorum
                and node.lead != 0
                and node.election_elapsed < params.election_ticks
            )
            if in_lease:
                return node, []  # a node that hears from a leader ignores campaigns
        if m.type == MsgType.PRE_VOTE or (m.type == MsgType.PRE_VOTE_RESP and not m.reject):
            pass  # pre-votes carry a future term and change nothing
        else:
            lead = m.src if m.type in _FROM_LEADER else 0
            node = become_follower(params, node, m.term, lead)
    elif m.term < node.term:
        if m.type == MsgType.APPEND and params.bugs.on("accept_stale_term_append"):
            # Bug: take entries from a deposed leader of an older term.
            return _handle_append(params, node, m)
        if m.type in _FROM_LEADER and (params.check_quorum or params.prevote):
            # Tell the stale leader about the newer term so it steps down.
            return node, [Message(MsgType.APPEND_RESP, node.id, m.src, node.term)]
        if m.type == MsgType.PRE_VOTE:
            return node, [Message(MsgType.PRE_VOTE_RESP, node.id, m.src, node.term, reject=True)]
        return node, []

    if m.type in (MsgType.PRE_VOTE, MsgType.VOTE):
        return _handle_vote_request(params, node, m)
    if node.role == Role.LEADER:
        return _step_leader(params, node, m)
    if node.role in (Role.CANDIDATE, Role.PRE_CANDIDATE):
        return _step_candidate(params, node, m)
    return _step_follower(params, node, m)


def _handle_vote_request(params: RaftParams, node: Node, m: Message) -> tuple[Node, list[Message]]:
    pre = m.type == MsgType.PRE_VOTE
    can_vote = (
        node.vote == m.src or (node.vote == 0 and node.lead == 0) or (pre and m.term > node.term)
    )
    resp_type = MsgType.PRE_VOTE_RESP if pre else MsgType.VOTE_RESP
    if can_vote and node.log.is_up_to_date(m.log_index, m.log_term):
        if not pre:
            node = node._replace(vote=m.src, election_elapsed=0)
        return node, [Message(resp_type, node.id, m.src, m.term)]
    return node, [Message(resp_type, node.id, m.src, node.term, reject=True)]


def _step_candidate(params: RaftParams, node: Node, m: Message) -> tuple[Node, list[Message]]:
    own = MsgType.PRE_VOTE_RESP if node.role == Role.PRE_CANDIDATE else MsgType.VOTE_RESP
    if m.type in _FROM_LEADER:
        node = become_follower(params, node, m.term, m.src)
        return _step_follower(params, node, m)
    if m.type != own:
        return node, []
    votes = list(node.votes)
    if votes[m.src - 1] == 0:
        votes[m.src - 1] = -1 if m.reject else 1
    node = node._replace(votes=tuple(votes))
    if params.membership:
        voters = _voters(params, node)
        granted = sum(1 for n in voters if votes[n - 1] == 1)
        rejected = sum(1 for n in voters if votes[n - 1] == -1)
    else:
        granted = votes.count(1)
        rejected = votes.count(-1)
    quorum = _quorum(params, node)
    if granted >= quorum:
        if node.role == Role.PRE_CANDIDATE:
            return _campaign(params, node, False)
        return _become_leader(params, node)
    if rejected >= quorum:
        return become_follower(params, node, node.term, 0), []
    return node, []


def _step_follower(params: RaftParams, node: Node, m: Message) -> tuple[Node, list[Message]]:
    if m.type == MsgType.APPEND:
        node = node._replace(election_elapsed=0, lead=m.src)
        return _handle_append(params, node, m)
    if m.type == MsgType.SNAPSHOT:
        node = node._replace(election_elapsed=0, lead=m.src)
        return _handle_snapshot(params, node, m)
    if m.type == MsgType.HEARTBEAT:
        # etcd raft's handleHeartbeat: commitTo(m.Commit) with no log check (the leader
        # sends no more than the follower's match), where etcd would panic beyond the
        # last index the model stops at it
        commit = max(node.commit_index, min(m.commit, node.log.last_index))
        node = node._replace(election_elapsed=0, lead=m.src, commit_index=commit)
        return node, [Message(MsgType.HEARTBEAT_RESP, node.id, m.src, node.term, context=m.context)]
    return node, []


def _handle_append(params: RaftParams, node: Node, m: Message) -> tuple[Node, list[Message]]:
    if m.log_index < node.commit_index:
        reply = Message(
            MsgType.APPEND_RESP,
            node.id,
            m.src,
            node.term,
            log_index=node.commit_index,
            context=m.context,
        )
        return node, [reply]
    if node.log.matches(m.log_index, m.log_term):
        truncate = not params.bugs.on("no_truncate_conflict")
        log = node.log.merge(m.log_index, m.entries, truncate=truncate)
        last_new = m.log_index + len(m.entries)
        commit = max(node.commit_index, min(m.commit, last_new))
        node = node._replace(log=log, commit_index=commit)
        return node, [
            Message(
                MsgType.APPEND_RESP,
                node.id,
                m.src,
                node.term,
                log_index=last_new,
                context=m.context,
            )
        ]
    reply = Message(
        MsgType.APPEND_RESP,
        node.id,
        m.src,
        node.term,
        log_index=m.log_index,
        reject=True,
        reject_hint=node.log.last_index,
        context=m.context,
    )
    return node, [reply]


def _handle_snapshot(params: RaftParams, node: Node, m: Message) -> tuple[Node, list[Message]]:
    snapshot = m.snapshot
    if snapshot.last_index <= node.commit_index:
        index = node.commit_index
    elif node.log.matches(snapshot.last_index, snapshot.last_term):
        node = node._replace(commit_index=snapshot.last_index)
        index = node.log.last_index
    else:
        node = node._replace(
            log=node.log.restore(snapshot),
            commit_index=snapshot.last_index,
            applied_index=snapshot.last_index,
            store=snapshot.data,
        )
        index = snapshot.last_index
    return node, [Message(MsgType.APPEND_RESP, node.id, m.src, node.term, log_index=index)]


def _step_leader(params: RaftParams, node: Node, m: Message) -> tuple[Node, list[Message]]:
    if m.type not in (MsgType.APPEND_RESP, MsgType.HEARTBEAT_RESP):
        return node, []
    peer = m.src - 1
    if node.recent_active:
        active = list(node.recent_active)
        active[peer] = True
        node = node._replace(recent_active=tuple(active))
    out: list[Message] = []
    if m.type == MsgType.HEARTBEAT_RESP:
        # etcd raft: a follower behind the leader's log gets what it lacks
        if node.match[peer] < node.log.last_index:
            out.append(_append_to(params, node, m.src))
        if m.context and node.reads:
            node = _ack_read(params, node, m.src, m.context)
        return node, out
    if m.reject:
        # a rejection at or below the match index is stale and changes nothing
        next_index = max(node.match[peer] + 1, min(m.log_index, m.reject_hint + 1))
        if m.log_index > node.match[peer] and next_index < node.next[peer]:
            nexts = list(node.next)
            nexts[peer] = next_index
            node = node._replace(next=tuple(nexts))
            out.append(_append_to(params, node, m.src))
    else:
        index = m.log_index
        if params.bugs.on("commit_without_quorum"):
            # Bug: take the leader's own last index as the follower's match.
            index = node.log.last_index
        if index > node.match[peer]:
            matches = list(node.match)
            matches[peer] = index
            nexts = list(node.next)
            nexts[peer] = max(nexts[peer], index + 1)
            node = node._replace(match=tuple(matches), next=tuple(nexts))
            node = _maybe_commit(params, node)
            if params.max_append_entries and index < node.log.last_index:
                out.append(
                    _append_to(params, node, m.src)
                )  # the next batch (etcd's maybeSendAppend)
    if m.context and node.reads:
        node = _ack_read(params, node, m.src, m.context)
    return _step_down_if_removed(params, node), out


def _step_down_if_removed(params: RaftParams, node: Node) -> Node:
    """A leader whose removal is committed steps down (dissertation §4.2.2)."""
    if (
        params.membership
        and node.role == Role.LEADER
        and not promotable(params, node)
        and node.commit_index >= config_index(node.log)
    ):
        return become_follower(params, node, node.term, 0)
    return node


def _ack_read(params: RaftParams, node: Node, peer: int, context: int) -> Node:
    pending: list[ReadRound] = []
    ready = list(node.ready_reads)
    for round_ in node.reads:
        if round_.id <= context:
            # an ack for a later round confirms the earlier ones too (etcd's readOnly)
            round_ = round_._replace(acks=round_.acks | {peer})
        acks = len(round_.acks)
        if params.membership:
            acks = len(round_.acks & config_of(params, node.log).voters)
        if acks >= _quorum(params, node):
            ready.append(round_)
        else:
            pending.append(round_)
    return node._replace(reads=tuple(pending), ready_reads=tuple(ready))


# --------------------------------------------------------------------------- driver side


def finish(
    params: RaftParams, before: Node, after: Node, messages: list[Message]
) -> tuple[Node, tuple[Message, ...]]:
    """Account for durability after one input: returns the node and the messages that
    leave now (the rest wait in the outbox until `persist`)."""
    if not params.explicit_persist:
        return after, tuple(messages)
    durable = after.durable
    if durable is None and (
        after.term != before.term or after.vote != before.vote or after.log is not before.log
    ):
        durable = HardState(before.term, before.vote, before.log)
        after = after._replace(durable=durable)
    if durable is None and not after.outbox:
        return after, tuple(messages)
    if params.bugs.on("ack_before_persist"):
        # Bug: acknowledge appended entries before they are durable.
        now = tuple(m for m in messages if m.type == MsgType.APPEND_RESP)
        held = tuple(m for m in messages if m.type != MsgType.APPEND_RESP)
        return after._replace(outbox=after.outbox + held), now
    return after._replace(outbox=after.outbox + tuple(messages)), ()


def persist(params: RaftParams, node: Node) -> tuple[Node, tuple[Message, ...]]:
    """Make the hard state durable and release the messages that waited for it."""
    released = node.outbox
    node = node._replace(durable=None, outbox=())
    if node.role == Role.LEADER:
        node = _step_down_if_removed(params, _maybe_commit(params, node))
    return node, released


class Ready(NamedTuple):
    """What a driver owes one node, in this order (etcd raft's Ready): make `hard_state`
    durable (None: nothing new), then send `messages` (they waited for it), then apply
    `committed_entries` to the state machine and report it with `mark_applied`."""

    hard_state: HardState | None
    messages: tuple[Message, ...]
    committed_entries: tuple[Entry, ...]

    def describe(self) -> str:
        persist = (
            "nothing"
            if self.hard_state is None
            else (
                f"term {self.hard_state.term} vote {self.hard_state.vote} "
                f"log {self.hard_state.log.describe()}"
            )
        )
        return (
            f"persist {persist}; send {len(self.messages)}; apply "
            f"{' '.join(e.describe() for e in self.committed_entries) or 'nothing'}"
        )


def ready(node: Node) -> Ready:
    """The node's pending work (see Ready)."""
    hard = HardState(node.term, node.vote, node.log) if node.durable is not None else None
    committed: tuple[Entry, ...] = ()
    if node.commit_index > node.applied_index:
        committed = node.log.slice(node.applied_index + 1, node.commit_index)
    return Ready(hard, node.outbox, committed)


def needs_persist(node: Node) -> bool:
    return node.durable is not None or bool(node.outbox)


def restart(params: RaftParams, node: Node) -> Node:
    """A node boots from its durable state after a crash: volatile state is gone."""
    hard = node.hard_state()
    vote = hard.vote
    if params.bugs.on("vote_not_persisted"):
        vote = 0  # Bug: the vote lived only in memory
    snapshot = hard.log.snapshot
    fresh = new_node(params, node.id, snapshot.data)
    return fresh._replace(
        term=hard.term,
        vote=vote,
        log=hard.log,
        commit_index=snapshot.last_index,
        applied_index=snapshot.last_index,
        timeout_draws=node.timeout_draws,
        randomized_timeout=_draw_timeout(params, node.id, node.timeout_draws),
    )


def mark_applied(node: Node, applied_index: int, store: Any) -> Node:
    return node._replace(applied_index=applied_index, store=store)


def compact(params: RaftParams, node: Node) -> Node:
    """Compact the log up to applied_index into a snapshot of the applied store."""
    assert can_compact(node), f"{node.name}: nothing to compact, or unpersisted state"
    config = config_at(params, node.log, node.applied_index) if params.membership else None
    return node._replace(log=node.log.compact(node.applied_index, node.store, config))


def can_compact(node: Node) -> bool:
    """Compaction needs applied entries beyond the snapshot and a fully durable log (the
    snapshot is written with the log it replaces)."""
    return node.applied_index > node.log.snapshot.last_index and node.durable is None

"""Trace validation: replay the members' Raft traces and report the first event the model
cannot follow (`etcdspec check-trace FILE…`).

Contract
- `check_traces(paths)` reads one trace file per member (checker/trace_format.py; bad
  input raises TraceFormatError) and replays their events in one causal order
  (checker/trace_order.py: each member's events in file order, a `receive` after the
  matching `send`); traces that cannot be ordered fail rule Causality. A path that is
  a directory stands for its `*.trace.ndjson` files (the layout of `etcdspec cluster
  up --trace`). The result is a `TraceResult` (checker/trace_result.py).
- Each node's abstract Raft state is rebuilt as the events go: term, vote, role, commit,
  applied, the in-memory last index, and what is durable — the persisted log (a model
  RaftLog of (index, term) entries, built from `persist` and `snapshot` events; a
  snapshot received in MsgSnap and accepted becomes durable at the next `persist`,
  which is where the server writes it) and a lower bound on the durable (term, vote):
  raised at each `persist` to the state traced at the previous one (the Ready persisted
  now was taken after it), and by every message the Ready contract lets leave only
  after the hard state is on disk (a vote request or grant: that vote; any other
  message but PreVote's: its term). The state fields of a `persist` line itself may
  already show steps taken during the fsync, so they are not taken as durable.
- At each event the rules below are checked; the first that fails ends the replay with
  a `TraceFailure` naming the rule, the event (file:line), an explanation, and the
  reconstructed states of the nodes that matter. Rules:
  TermMonotonic (a run's term never decreases), VoteOnce (one vote per node and term,
  across restarts for votes that were durable), DurableRestart (after `start`, term and
  vote are at least the durable ones and the log still holds what was applied),
  ElectionSafety and LogMatching (the model's own invariant code,
  etcdspec.model.raft_invariants.check_raft, run on model nodes holding the durable logs
  and the leaders seen), CommitWithinLog (applied <= commit <= last index),
  CommitMonotonic (within a run), LeaderElection (below), LeaderCommit (a leader commits
  only an entry of its term that a quorum, itself counted only as far as it is durable,
  acknowledged by MsgAppResp), FollowerCommit (no further than the leader said), ReadyContract (a
  message leaves only after what it carries or acknowledges is durable, a granted vote
  only after it was persisted; except the leader's parallel persist: a leader's MsgApp
  may carry its own term's entries before the persist that covers them, once its term
  and vote are durable, since LeaderCommit counts it only as far as it is durable), StateMachineSafety (the same (index, term) applied
  everywhere), ApplyOrder (entries applied one by one, in order, committed, and as
  the node's log holds them), AppliedKept (a persist never overwrites an applied
  entry) and LogContiguity (persisted entries leave no hole).
- LeaderElection: where a node's role goes to leader in a term t (or a restart shows it
  leader), it holds grants from a quorum of the voters of its configuration at that
  event: VOTE_RESP not rejected, of term t, received by it in its candidacy of term t
  (from the first event that shows it a candidate in t, in the same run: the votes a
  candidate has received live in memory only), and its own vote if its vote in t is for
  itself (VoteOnce makes that its only vote of t). PreVote grants are not votes; grants
  of another term, from learners or from non-members do not count. The configuration is
  the one the raft core tallies with when the win is decided, i.e. the node's
  configuration at that event, as etcd raft's TallyVotes counts the voters of the
  current configuration (a change applied between campaign and win counts: a grant from
  a voter since removed no longer counts, one from a learner since promoted does). Our
  core and etcd raft refuse to campaign with a committed conf change unapplied, and a
  candidate's commit index cannot move (an append makes it a follower first), so real
  runs do not change configuration mid-campaign; the rule still says what holds if they
  did. A single voter elects itself with its own vote. Format 1.0: a majority of the
  node ids, as LeaderCommit counts. Each win accepted is listed in
  `TraceResult.elections` (ElectionTally: the votes counted and the electorate).
- `TraceResult.witnesses` counts how often each kind of check had work (restarts, votes
  sent, elections checked, vote grants received, leader commits, entries
  persisted/applied/overwritten, snapshots restored, matched receives, leader terms), so
  a caller can tell a replay that checked little.
- Configuration (trace format 1.1): each node's configuration is followed as its trace
  says: set at `start`, changed only where the node applies a CONF_CHANGE entry (in log
  order, by ApplyOrder) to the old configuration with that change made (ADD_NODE adds a
  voter or promotes a learner, ADD_LEARNER_NODE adds a learner, REMOVE_NODE removes,
  UPDATE_NODE changes nothing) or leaves it as it was (a change refused when applied, or
  one a joining node skips), or where it takes a snapshot's configuration (receiving
  MsgSnap, `restore`); anything else fails rule ConfChange. LeaderCommit counts the
  quorum of the leader's configuration at the commit: a majority of its voters, each
  counted only if a voter (learners never count, nor the leader once it left the
  voters). A member that stops tracing (removed, or killed) is never required to go on.
- Without a configuration in the traces (format 1.0) the quorum is a majority of the
  node ids the traces name (trace owners and message endpoints); ids that only messages
  name are listed in `untraced`. No I/O besides reading the files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from etcdspec.checker.trace_format import (
    ConfChangeEntry,
    TraceConf,
    TraceEvent,
    TraceMessage,
    read_trace_file,
)
from etcdspec.checker.trace_order import CausalOrder
from etcdspec.checker.trace_result import ElectionTally, NodeSummary, TraceFailure, TraceResult
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_invariants import Ghost, check_raft
from etcdspec.model.raft_log import RaftLog
from etcdspec.model.raft_messages import Entry, Snapshot
from etcdspec.model.raft_node import RaftParams, Role, new_node
from etcdspec.verdict import Verdict

NO_TERM_TYPES = frozenset({"PRE_VOTE", "PRE_VOTE_RESP", "PROP", "SNAP_STATUS", "UNREACHABLE"})
MODEL_ROLES = {
    "follower": Role.FOLLOWER,
    "precandidate": Role.PRE_CANDIDATE,
    "candidate": Role.CANDIDATE,
    "leader": Role.LEADER,
}


class _Broken(Exception):
    def __init__(self, rule: str, explanation: str, involved: Sequence[int] = ()) -> None:
        super().__init__(f"{rule}: {explanation}")
        self.rule = rule
        self.explanation = explanation
        self.involved = tuple(involved)


@dataclass
class _Node:
    """One member's reconstructed state (internal, mutable during the replay)."""

    node: int
    name: str
    small_id: int
    path: str
    run: int = 0
    seen: bool = False
    term: int = 0
    vote: int = 0
    role: str = "follower"
    commit: int = 0
    applied: int = 0
    last_index: int = 0
    last_term: int = 0
    durable: RaftLog = field(default_factory=RaftLog)
    floor_term: int = 0  # durable (term, vote) is at least this
    floor_vote: int = 0
    floor_where: str = "the start of its trace"
    last_persist_state: tuple[int, int] = (0, 0)
    vote_changed_at: int = 0  # replay position where the in-memory (term, vote) last changed
    vote_persisted_at: int = 0  # replay position of the last persist after that change
    max_applied: int = 0  # highest index applied in any run
    max_applied_run: int = 0  # last index applied in this run
    prev_commit: int = 0  # commit index before the current event
    pending_snapshot: tuple[int, int] | None = None  # accepted MsgSnap, durable at next persist
    acks: dict[int, int] = field(default_factory=dict)  # leader: follower -> acked index
    conf: TraceConf | None = None  # its configuration, where the trace gives it (format 1.1)
    candidacy: int = 0  # the term of its current candidacy (0: not a candidate in this run)
    grants: dict[int, str] = field(default_factory=dict)  # voter -> where its grant arrived
    other_grants: list[str] = field(default_factory=list)  # other terms' grants, pre-votes

    def raise_floor(self, term: int, vote: int, where: str) -> None:
        if term > self.floor_term or (term == self.floor_term and vote and not self.floor_vote):
            self.floor_term, self.floor_vote, self.floor_where = term, vote, where

    def summary(self) -> NodeSummary:
        return NodeSummary(
            name=self.name,
            node=self.node,
            path=self.path,
            run=self.run,
            role=self.role,
            term=self.term,
            vote=self.vote,
            commit=self.commit,
            applied=self.applied,
            last_index=self.last_index,
            durable_term=self.floor_term,
            durable_vote=self.floor_vote,
            durable_log=_log_text(self.durable),
        )


def _changed(conf: TraceConf, change: ConfChangeEntry) -> TraceConf:
    """The configuration after `change` (etcd raft's single-server changes)."""
    voters, learners = set(conf.voters), set(conf.learners)
    if change.type == "ADD_NODE":
        voters.add(change.node)
        learners.discard(change.node)
    elif change.type == "ADD_LEARNER_NODE":
        learners.add(change.node)
        voters.discard(change.node)
    elif change.type == "REMOVE_NODE":
        voters.discard(change.node)
        learners.discard(change.node)
    return TraceConf(frozenset(voters), frozenset(learners))


def _log_text(log: RaftLog, keep: int = 8) -> str:
    entries = [f"{log.snapshot.last_index + i + 1}@{e.term}" for i, e in enumerate(log.entries)]
    head = (
        f"[snapshot {log.snapshot.last_index}@{log.snapshot.last_term}] "
        if log.snapshot.last_index
        else ""
    )
    if len(entries) > keep:
        entries = [*entries[:2], "…", *entries[-(keep - 3) :]]
    return head + "[" + " ".join(entries) + "]"


def _entry(index: int, term: int) -> Entry:
    """A model entry standing for a traced one: the model writes it `term:#index`."""
    return Entry(term, f"#{index}", None)


class _Replay:
    def __init__(self, traces: Sequence[list[TraceEvent]]) -> None:
        self.traces = traces
        self.nodes: dict[int, _Node] = {}
        for position, events in enumerate(traces):
            head = events[0]
            self.nodes[head.node] = _Node(
                node=head.node, name=f"n{position + 1}", small_id=position + 1, path=head.path
            )
        voters = set(self.nodes)
        for events in traces:
            for event in events:
                if event.message is not None:
                    voters.update(x for x in (event.message.from_, event.message.to) if x)
        self.quorum = len(voters) // 2 + 1
        self.untraced = tuple(sorted(voters - set(self.nodes)))
        self.leaders: dict[int, int] = {}  # term -> node
        self.durable_votes: dict[tuple[int, int], tuple[int, str]] = {}
        self.applied: dict[int, tuple[int, str]] = {}  # index -> (term, where)
        self.position = 0
        self.witness: Counter[str] = Counter()
        self.checked_leaders: set[tuple[int, int]] = set()
        self.elections: list[ElectionTally] = []
        params = RaftParams(nodes=len(self.nodes))
        self.templates = {
            n.small_id: new_node(params, n.small_id, None) for n in self.nodes.values()
        }

    def name(self, node: int) -> str:
        known = self.nodes.get(node)
        return known.name if known is not None else f"node {node}"

    # ----------------------------------------------------------------- run

    def run(self) -> TraceResult:
        order = CausalOrder(self.traces)
        for event in order:
            failure = self._step(event)
            if failure is not None:
                return self._result(failure, order)
        if order.stuck is not None:
            return self._result(self._causality(*order.stuck), order)
        return self._result(None, order)

    def _causality(self, event: TraceEvent, send: TraceEvent) -> TraceFailure:
        self.position += 1
        states = tuple(
            n.summary() for n in self.nodes.values() if n.node in (event.node, send.node) and n.seen
        )
        return TraceFailure(
            "Causality",
            f"{self.name(event.node)} received a message that {self.name(send.node)} sends only "
            f"later, at {send.location}, after events that depend on this receive: the traces "
            "cannot be ordered (a receive comes after its send)",
            event,
            self.position,
            states,
        )

    def _result(self, failure: TraceFailure | None, order: CausalOrder) -> TraceResult:
        nodes = tuple(f"{n.name} = {n.node} ({Path(n.path).name})" for n in self.nodes.values())
        witness = Counter(self.witness)
        if order.matched:
            witness["matched receives"] = order.matched
        return TraceResult(
            verdict=Verdict.TRUE if failure is None else Verdict.FALSE,
            events=self.position,
            nodes=nodes,
            unmatched_receives=order.unmatched,
            failure=failure,
            witnesses=tuple(sorted({**witness, "leader terms": len(self.leaders)}.items())),
            untraced=self.untraced,
            elections=tuple(self.elections),
        )

    def _step(self, event: TraceEvent) -> TraceFailure | None:
        self.position += 1
        node = self.nodes[event.node]
        try:
            self._apply(node, event)
        except _Broken as broken:
            involved = [node.node, *broken.involved]
            states = tuple(
                self.nodes[n].summary()
                for n in dict.fromkeys(involved)
                if n in self.nodes and self.nodes[n].seen
            )
            return TraceFailure(broken.rule, broken.explanation, event, self.position, states)
        return None

    # ----------------------------------------------------------------- the rules

    def _apply(self, node: _Node, event: TraceEvent) -> None:
        where = f"{event.location} (event {self.position})"
        if event.event == "start":
            self._start(node, event)
        else:
            self._same_run(node, event)
        node.prev_commit = 0 if event.event == "start" else node.commit
        previous_role, previous_term = node.role, node.term
        if (event.term, event.vote) != (node.term, node.vote) or event.event == "start":
            node.vote_changed_at = self.position
        node.term, node.vote, node.role = event.term, event.vote, event.role
        node.commit, node.applied = event.commit, event.applied
        node.last_index, node.last_term = event.last_index, event.last_term
        node.seen = True
        self._vote_once(node, event)
        self._election_safety(node, event)
        self._commit_within_log(node, event)
        self._follow_conf(node, event)
        self._follow_candidacy(node, event)
        handler = getattr(self, f"_on_{event.event}")
        handler(node, event, where)
        if event.role == "leader" and (
            previous_role != "leader" or previous_term != event.term or event.event == "start"
        ):
            self._leader_election(node, event)
        if (
            event.role == "leader"
            and previous_role == "leader"
            and previous_term == event.term
            and event.event != "start"
            and event.commit > node.prev_commit
        ):
            self._leader_commit(node, event)
        if previous_role != "leader" or previous_term != event.term:
            node.acks = {}

    def _start(self, node: _Node, event: TraceEvent) -> None:
        if not node.seen:
            node.run = 1
            node.durable = RaftLog(Snapshot(event.last_index, event.last_term, None), ())
            node.floor_term, node.floor_vote = event.term, event.vote
            node.floor_where = f"its first start ({event.location})"
            node.last_persist_state = (event.term, event.vote)
            node.max_applied = event.applied
            node.max_applied_run = event.applied
            return
        node.run += 1
        self.witness["restarts"] += 1
        term, vote = event.term, event.vote
        if term < node.floor_term or (
            term == node.floor_term and node.floor_vote and vote != node.floor_vote
        ):
            durable_vote = f", vote {self.name(node.floor_vote)}" if node.floor_vote else ""
            restarted_vote = f" vote {self.name(vote)}" if vote else " and no vote"
            raise _Broken(
                "DurableRestart",
                f"{node.name} restarted with term {term}{restarted_vote}, but before the crash "
                f"its durable state was at least term {node.floor_term}{durable_vote} "
                f"(known from {node.floor_where}): a restart must recover the persisted "
                "term and vote",
            )
        if event.last_index < node.max_applied:
            raise _Broken(
                "DurableRestart",
                f"{node.name} restarted with last index {event.last_index}, but it had applied "
                f"entries up to {node.max_applied} before the crash: committed entries were "
                "lost from its log",
            )
        durable = node.durable
        if event.last_index == durable.last_index:
            if event.last_term != durable.last_term and durable.last_index > 0:
                raise _Broken(
                    "DurableRestart",
                    f"{node.name} restarted with last entry {event.last_index}@{event.last_term}"
                    f", but its persisted log ends with {durable.last_index}@{durable.last_term}",
                )
        elif (
            event.last_index < durable.snapshot.last_index or event.last_index > durable.last_index
        ):
            # Lines written after the last flush were lost with the process (kill -9): the
            # recovered log is known only by its last entry.
            node.durable = RaftLog(Snapshot(event.last_index, event.last_term, None), ())
        else:
            node.durable = RaftLog(
                durable.snapshot,
                durable.entries[: event.last_index - durable.snapshot.last_index],
            )
            if node.durable.last_term != event.last_term:
                node.durable = RaftLog(Snapshot(event.last_index, event.last_term, None), ())
        node.last_persist_state = (term, vote)
        node.max_applied_run = event.applied
        node.raise_floor(term, vote, f"its restart ({event.location})")

    def _same_run(self, node: _Node, event: TraceEvent) -> None:
        if event.term < node.term:
            raise _Broken(
                "TermMonotonic",
                f"{node.name}'s term went back from {node.term} to {event.term}",
            )
        if event.term == node.term and node.vote and event.vote != node.vote:
            raise _Broken(
                "VoteOnce",
                f"{node.name} changed its vote in term {event.term} from "
                f"{self.name(node.vote)} to {self.name(event.vote) if event.vote else 'nobody'}",
            )
        if event.commit < node.commit:
            raise _Broken(
                "CommitMonotonic",
                f"{node.name}'s commit index went back from {node.commit} to {event.commit}",
            )

    def _vote_once(self, node: _Node, event: TraceEvent) -> None:
        if not event.vote:
            return
        known = self.durable_votes.get((node.node, event.term))
        if known is not None and known[0] != event.vote:
            raise _Broken(
                "VoteOnce",
                f"{node.name} votes for {self.name(event.vote)} in term {event.term}, but it "
                f"had already cast a durable vote for {self.name(known[0])} in that term "
                f"({known[1]}): a node votes at most once per term, across restarts",
                (event.vote, known[0]),
            )

    def _election_safety(self, node: _Node, event: TraceEvent) -> None:
        if event.role != "leader":
            return
        first = self.leaders.setdefault(event.term, node.node)
        if first != node.node or (event.term, node.node) not in self.checked_leaders:
            self.checked_leaders.add((event.term, node.node))
            self._model_invariants(node)

    def _model_invariants(self, node: _Node) -> None:
        """ElectionSafety and LogMatching by the model's own invariant code."""
        seen = [replayed for replayed in self.nodes.values() if replayed.seen]
        # Entries up to `agreed` were applied by every node with the same terms
        # (StateMachineSafety, ApplyOrder) and are never overwritten (AppliedKept): they
        # cannot break Log Matching, so the check starts after them and stays cheap.
        agreed = min(min(r.max_applied_run, r.durable.last_index) for r in seen)
        model_nodes = []
        for replayed in seen:
            model = self.templates[replayed.small_id]
            commit = min(replayed.commit, replayed.durable.last_index)
            log = replayed.durable
            if log.snapshot.last_index < agreed <= log.last_index:
                log = log.compact(agreed, None)
            model_nodes.append(
                model._replace(
                    term=replayed.term,
                    log=log,
                    role=MODEL_ROLES[replayed.role],
                    commit_index=commit,
                    applied_index=min(replayed.applied, commit),
                )
            )
        leaders = tuple(sorted((term, self.nodes[n].small_id) for term, n in self.leaders.items()))
        # A second leader of a term is not in `leaders` (one per term): add it for the check.
        if node.role == "leader" and self.leaders.get(node.term) != node.node:
            leaders = tuple(sorted((*leaders, (node.term, node.small_id))))
        try:
            check_raft(model_nodes, Ghost(leaders=leaders))
        except InvariantViolation as violation:
            by_small = {n.small_id: n.node for n in self.nodes.values()}
            involved = list(by_small.values())
            if node.role == "leader" and self.leaders.get(node.term) not in (None, node.node):
                involved = [self.leaders[node.term]]
            raise _Broken(
                violation.invariant,
                f"{violation.detail} (the model's invariant, etcdspec.model.raft_invariants, on "
                "the durable logs; entries written term:#index)",
                involved,
            ) from None

    def _follow_conf(self, node: _Node, event: TraceEvent) -> None:
        """Rule ConfChange: the configuration changes only as the node's log says."""
        if event.event == "start":
            node.conf = event.conf
            return
        new = event.conf
        old = node.conf
        if event.event == "apply" and event.conf_changes:
            self.witness["conf changes applied"] += len(event.conf_changes)
        if new is None or old is None or new == old:
            if new is not None:
                node.conf = new
            return
        if event.event == "restore" or (
            event.event == "receive" and event.message is not None and event.message.type == "SNAP"
        ):
            self.witness["configurations from snapshots"] += 1
            node.conf = new
            return
        if event.event == "apply" and event.conf_changes:
            expected = old
            for change in event.conf_changes:
                expected = _changed(expected, change)
            if new != expected:
                raise _Broken(
                    "ConfChange",
                    f"{node.name} applied "
                    + ", ".join(c.describe() for c in event.conf_changes)
                    + f" to {old.describe()} and then used {new.describe()}, where the change "
                    f"gives {expected.describe()}",
                )
            self.witness["configurations changed"] += 1
            node.conf = new
            return
        raise _Broken(
            "ConfChange",
            f"{node.name} changed its configuration from {old.describe()} to "
            f"{new.describe()} at a {event.event} event: a configuration changes only where a "
            "conf change entry is applied or a snapshot is restored",
        )

    @staticmethod
    def _follow_candidacy(node: _Node, event: TraceEvent) -> None:
        """The candidacy whose grants count: it begins where the node is first seen a
        candidate in a term and ends where it is anything but a candidate or the leader of
        that term, or restarts (the votes a candidate has received live in memory only)."""
        if event.event == "start" or event.role not in ("candidate", "leader"):
            node.candidacy, node.grants, node.other_grants = 0, {}, []
        elif event.role == "candidate" and node.candidacy != event.term:
            node.candidacy, node.grants, node.other_grants = event.term, {}, []

    def _leader_election(self, node: _Node, event: TraceEvent) -> None:
        """Rule LeaderElection: a node becomes leader of a term only with the grants of a
        quorum of the voters of its configuration at the win."""
        term = event.term
        self.witness["elections checked"] += 1
        conf = node.conf
        grants = dict(node.grants) if node.candidacy == term else {}
        if event.vote == node.node:
            grants.setdefault(node.node, "its own vote")
        counted = [v for v in sorted(grants) if conf is None or v in conf.voters]
        quorum = conf.quorum() if conf is not None else self.quorum
        if len(counted) >= quorum:
            self.elections.append(
                ElectionTally(
                    term=term,
                    winner=node.name,
                    position=self.position,
                    location=event.location,
                    votes=self._names(counted),
                    quorum=quorum,
                    electorate=self._electorate(conf),
                )
            )
            return
        parts = []
        for voter, where in sorted(grants.items()):
            who = "itself" if voter == node.node else self.name(voter)
            if conf is not None and voter in conf.learners:
                why = ", a learner: not counted"
            elif conf is not None and voter not in conf.voters:
                why = ", not in its configuration: not counted"
            else:
                why = ""
            parts.append(f"{who} ({where}{why})")
        if event.vote != node.node:
            vote = self.name(event.vote) if event.vote else "nobody"
            parts.append(f"not itself (its vote in term {term} is for {vote})")
        if node.other_grants and node.candidacy == term:
            parts.append("not counted: " + ", ".join(node.other_grants))
        raise _Broken(
            "LeaderElection",
            f"{node.name} became leader of term {term} with {len(counted)} of the {quorum} "
            f"votes it needs (a majority of {self._electorate(conf)}); votes in this candidacy: "
            + ("; ".join(parts) if parts else "none")
            + f". A candidate wins only with grants (VOTE_RESP, term {term}) from a majority "
            "of its configuration's voters at the win; learners, removed members, pre-votes "
            "and grants of other terms do not count",
            [v for v in grants if v != node.node],
        )

    def _names(self, ids: Iterable[int]) -> tuple[str, ...]:
        """The members' names in the replay's order (n1, n2, …; untraced ids last)."""

        def order(node: int) -> tuple[int, int]:
            known = self.nodes.get(node)
            return (known.small_id, 0) if known is not None else (len(self.nodes) + 1, node)

        return tuple(self.name(node) for node in sorted(ids, key=order))

    def _electorate(self, conf: TraceConf | None) -> str:
        if conf is None:
            return f"the {len(self.nodes) + len(self.untraced)} nodes the traces name"
        learners = ",".join(self._names(conf.learners))
        voters = ",".join(self._names(conf.voters))
        return f"voters {voters}" + (f" learners {learners}" if learners else "")

    def _commit_within_log(self, node: _Node, event: TraceEvent) -> None:
        if event.commit > event.last_index:
            raise _Broken(
                "CommitWithinLog",
                f"{node.name} commit index {event.commit} is beyond its last index "
                f"{event.last_index}",
            )
        if event.applied > event.commit:
            raise _Broken(
                "CommitWithinLog",
                f"{node.name} applied {event.applied} entries but its commit index is "
                f"{event.commit}",
            )

    def _leader_commit(self, node: _Node, event: TraceEvent) -> None:
        index = event.commit
        self.witness["leader commits"] += 1
        term = node.durable.term_at(index)
        if term is not None and term != event.term:
            raise _Broken(
                "LeaderCommit",
                f"leader {node.name} of term {event.term} advanced its commit index to "
                f"{index}, an entry of term {term}: a leader commits by counting replicas "
                "only entries of its own term (Raft §5.4.2, Figure 8)",
            )
        conf = node.conf
        counts = conf.voters.__contains__ if conf is not None else lambda _: True
        quorum = conf.quorum() if conf is not None else self.quorum
        holders = [node.node] if node.durable.last_index >= index and counts(node.node) else []
        holders += [f for f, acked in sorted(node.acks.items()) if acked >= index and counts(f)]
        if len(holders) < quorum:
            acked = ", ".join(f"{self.name(f)} up to {i}" for f, i in sorted(node.acks.items()))
            config = f" of its configuration ({conf.describe()})" if conf is not None else ""
            raise _Broken(
                "LeaderCommit",
                f"leader {node.name} of term {event.term} advanced its commit index to "
                f"{index}, but only {len(holders)} of the quorum of {quorum}{config} hold "
                f"it (its durable log ends at {node.durable.last_index}; acknowledgements in "
                f"this term: {acked or 'none'}; only voters count, learners never)",
                list(node.acks),
            )

    # ----------------------------------------------------------------- per event

    def _on_start(self, node: _Node, event: TraceEvent, where: str) -> None:
        node.acks = {}
        node.pending_snapshot = None

    def _on_propose(self, node: _Node, event: TraceEvent, where: str) -> None:
        return

    def _on_role(self, node: _Node, event: TraceEvent, where: str) -> None:
        return

    def _on_receive(self, node: _Node, event: TraceEvent, where: str) -> None:
        message = event.message
        assert message is not None
        if message.type == "VOTE_RESP" and not message.reject and message.to == node.node:
            if message.term == node.candidacy:
                node.grants.setdefault(message.from_, f"received at {where}")
                self.witness["vote grants received"] += 1
            elif node.candidacy:
                node.other_grants.append(
                    f"{self.name(message.from_)}'s grant of term {message.term} at {where}"
                )
        if message.type == "PRE_VOTE_RESP" and not message.reject and node.candidacy:
            node.other_grants.append(f"{self.name(message.from_)}'s pre-vote at {where}")
        if (
            message.type == "APP_RESP"
            and not message.reject
            and event.role == "leader"
            and message.term == event.term
        ):
            node.acks[message.from_] = max(node.acks.get(message.from_, 0), message.index)
        if (
            message.type == "SNAP"
            and message.snapshot is not None
            and event.last_index == message.snapshot
            and event.commit == message.snapshot
        ):
            node.pending_snapshot = (message.snapshot, event.last_term)
        if message.type in ("APP", "HEARTBEAT") and event.role != "leader":
            limit = max(message.commit, node.prev_commit)
            if event.commit > limit and message.term == event.term:
                raise _Broken(
                    "FollowerCommit",
                    f"{node.name} moved its commit index to {event.commit}, beyond the "
                    f"leader's commit index {message.commit} in the message it received",
                    (message.from_,),
                )

    def _on_persist(self, node: _Node, event: TraceEvent, where: str) -> None:
        # The hard state made durable here was read after the previous persist line.
        term, vote = node.last_persist_state
        node.raise_floor(term, vote, f"the persist before {where}")
        node.last_persist_state = (event.term, event.vote)
        node.vote_persisted_at = self.position
        if node.pending_snapshot is not None:
            # The Ready that restores a received snapshot persists it with its entries.
            index, term = node.pending_snapshot
            node.durable = node.durable.restore(Snapshot(index, term, None))
            node.pending_snapshot = None
            self.witness["snapshots restored"] += 1
        if not event.entries:
            return
        first = event.entries[0][0]
        for (a, _), (b, _) in zip(event.entries, event.entries[1:], strict=False):
            if b != a + 1:
                raise _Broken("LogContiguity", f"{node.name} persisted entries {a} and then {b}")
        log = node.durable
        if first <= node.max_applied_run:
            raise _Broken(
                "AppliedKept",
                f"{node.name} persisted entries from {first} over its log, but it had applied "
                f"entries up to {node.max_applied_run}: an applied (committed) entry is never "
                "overwritten",
            )
        if first > log.last_index + 1:
            raise _Broken(
                "LogContiguity",
                f"{node.name} persisted entries from {first}, but its durable log ends at "
                f"{log.last_index}: a log has no holes",
            )
        if first <= log.snapshot.last_index:  # overwrites the compacted prefix: start afresh
            log = RaftLog(Snapshot(first - 1, 0, None), ()) if first > 1 else RaftLog()
        if first <= log.last_index:
            self.witness["entries overwritten"] += log.last_index - first + 1
        kept = log.entries[: first - log.snapshot.last_index - 1]
        node.durable = RaftLog(log.snapshot, kept + tuple(_entry(i, t) for i, t in event.entries))
        self.witness["entries persisted"] += len(event.entries)
        self._model_invariants(node)

    def _on_send(self, node: _Node, event: TraceEvent, where: str) -> None:
        message = event.message
        assert message is not None
        log = node.durable
        for index, term in message.entries:
            if message.type != "APP":
                break
            held = log.term_at(index)
            if held is None and index <= log.snapshot.last_index:
                continue  # compacted: it was persisted before
            if held is None and self._leader_sends_ahead(node, event, message, index, term):
                self.witness["entries sent before the leader persisted them"] += 1
                continue
            if held != term:
                have = "does not hold it" if held is None else f"holds {index}@{held}"
                raise _Broken(
                    "ReadyContract",
                    f"{node.name} sent entry {index}@{term} to {self.name(message.to)} before "
                    f"persisting it (its durable log {have}): a Ready's entries are persisted "
                    "before its messages leave (a leader's own new entries excepted, when "
                    "its term and vote are durable)",
                    (message.to,),
                )
        if message.type == "APP_RESP" and not message.reject and message.index > log.last_index:
            raise _Broken(
                "ReadyContract",
                f"{node.name} acknowledged index {message.index} to {self.name(message.to)}, "
                f"but its durable log ends at {log.last_index}: an acknowledgement leaves only "
                "after the entries are persisted",
                (message.to,),
            )
        granted = (message.type == "VOTE_RESP" and not message.reject) or message.type == "VOTE"
        if granted:
            candidate = message.to if message.type == "VOTE_RESP" else node.node
            if (node.term, node.vote) != (message.term, candidate) or (
                node.vote_persisted_at < node.vote_changed_at
            ):
                raise _Broken(
                    "ReadyContract",
                    f"{node.name} sent {message.type} for {self.name(candidate)} in term "
                    f"{message.term} before persisting that vote (no persist since its vote "
                    "changed): a vote is durable before it is announced",
                    (candidate,),
                )
            known = self.durable_votes.setdefault((node.node, message.term), (candidate, where))
            if known[0] != candidate:
                raise _Broken(
                    "VoteOnce",
                    f"{node.name} granted its vote in term {message.term} to "
                    f"{self.name(candidate)}, but it had granted it to {self.name(known[0])} "
                    f"({known[1]})",
                    (candidate, known[0]),
                )
            node.raise_floor(message.term, candidate, f"its {message.type} at {where}")
            self.witness["votes sent"] += 1
        elif message.type not in NO_TERM_TYPES:
            node.raise_floor(message.term, 0, f"its {message.type} at {where}")

    @staticmethod
    def _leader_sends_ahead(
        node: _Node, event: TraceEvent, message: TraceMessage, index: int, term: int
    ) -> bool:
        """The leader's parallel persist: a leader's MsgApp may carry entries of its own
        term that it holds but has not persisted yet, once its term and vote are durable
        (no change of them since its last persist). It is counted in a commit quorum only
        as far as it is durable (LeaderCommit), so nothing is acknowledged on its
        unpersisted entries."""
        return (
            event.role == "leader"
            and message.from_ == node.node
            and message.term == event.term == term
            and index <= event.last_index
            and node.vote_persisted_at >= node.vote_changed_at
        )

    def _on_apply(self, node: _Node, event: TraceEvent, where: str) -> None:
        for index, term in event.entries:
            expected = node.max_applied_run + 1
            if index != expected:
                raise _Broken(
                    "ApplyOrder",
                    f"{node.name} applied entry {index}, but the next entry to apply was "
                    f"{expected}",
                )
            node.max_applied_run = index
            if index > event.commit:
                raise _Broken(
                    "ApplyOrder",
                    f"{node.name} applied entry {index} beyond its commit index {event.commit}",
                )
            held = node.durable.term_at(index)
            if held is not None and held != term:
                raise _Broken(
                    "ApplyOrder",
                    f"{node.name} applied {index}@{term} but its durable log holds {index}@{held}",
                )
            first = self.applied.setdefault(index, (term, f"{node.name} at {where}"))
            if first[0] != term:
                raise _Broken(
                    "StateMachineSafety",
                    f"{node.name} applied entry {index} of term {term}, but {first[1]} applied "
                    f"entry {index} of term {first[0]}: every member applies the same entries",
                )
            node.max_applied = max(node.max_applied, index)
            self.witness["entries applied"] += 1

    def _on_snapshot(self, node: _Node, event: TraceEvent, where: str) -> None:
        index = event.index or 0
        log = node.durable
        if log.snapshot.last_index < index <= log.last_index:
            node.durable = log.compact(index, None)

    def _on_restore(self, node: _Node, event: TraceEvent, where: str) -> None:
        index = event.index or 0
        term = event.last_term if event.last_index == index else 0
        node.durable = node.durable.restore(Snapshot(index, term, None))
        node.max_applied_run = index
        node.max_applied = max(node.max_applied, index)


def check_traces(paths: Sequence[str | Path]) -> TraceResult:
    """Replay the members' traces (one file per member); see the module docstring."""
    from etcdspec.checker.trace_format import TraceFormatError

    expanded: list[str | Path] = []
    for path in paths:
        if Path(path).is_dir():
            found = sorted(Path(path).glob("*.trace.ndjson"))
            if not found:
                raise TraceFormatError(
                    str(path), 0, "a directory without *.trace.ndjson files; pass trace files"
                )
            expanded.extend(found)
        else:
            expanded.append(path)
    if not expanded:
        raise TraceFormatError("(no files)", 0, "give at least one trace file")
    files = [read_trace_file(path) for path in expanded]
    traces = [list(file.events) for file in files]
    owners: dict[int, str] = {}
    for events in traces:
        head = events[0]
        if head.node in owners:
            raise TraceFormatError(
                head.path,
                head.line,
                f"node {head.node} is traced in {owners[head.node]} too; give each member once",
            )
        owners[head.node] = head.path
    result = _Replay(traces).run()
    torn = sum(file.torn_lines for file in files)
    return replace(result, torn_lines=torn) if torn else result


# check_traces's result types, importable with it (conform/trace_stage.py does).
__all__ = ["ElectionTally", "NodeSummary", "TraceFailure", "TraceResult", "check_traces"]

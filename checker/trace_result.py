"""What trace validation gives: the verdict, what was replayed and checked, and the first
event the model could not follow.

Contract
- `TraceResult`: the verdict (true, or false with a `TraceFailure`), the events
  replayed, the members ("n1 = <node id> (<file>)"), receives let through without a
  traced send, torn lines dropped, node ids no trace covers, and `witnesses`: how often
  each kind of check had work, so a caller can tell a replay that checked little.
- `ElectionTally`: a win that rule LeaderElection accepted (term, winner, the votes
  counted, the quorum and the configuration it was counted in); `TraceResult.elections`
  lists them in replay order (the trace diagram notes them at their steps).
- `TraceFailure`: the rule broken, the explanation, the event (file:line) and its
  position in the merged order, and the reconstructed states (`NodeSummary`) of the
  nodes that matter.
- `describe()` is the one text of each, `to_json()` its versioned report form.
  Frozen dataclasses, made by checker/trace_check.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from etcdspec.checker.trace_format import TraceEvent
from etcdspec.verdict import Verdict


@dataclass(frozen=True)
class NodeSummary:
    """A node's reconstructed state at the failing event (what the explanation refers to)."""

    name: str
    node: int
    path: str
    run: int
    role: str
    term: int
    vote: int
    commit: int
    applied: int
    last_index: int
    durable_term: int
    durable_vote: int
    durable_log: str

    def describe(self) -> str:
        vote = f" vote {self.vote}" if self.vote else ""
        durable_vote = f" vote {self.durable_vote}" if self.durable_vote else ""
        return (
            f"{self.name} (node {self.node}, {Path(self.path).name}, run {self.run}): "
            f"{self.role} term {self.term}{vote} commit {self.commit} applied {self.applied} "
            f"last {self.last_index}; durable term >= {self.durable_term}{durable_vote}, "
            f"log {self.durable_log}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node": self.node,
            "path": self.path,
            "run": self.run,
            "role": self.role,
            "term": self.term,
            "vote": self.vote,
            "commit": self.commit,
            "applied": self.applied,
            "last_index": self.last_index,
            "durable_term": self.durable_term,
            "durable_vote": self.durable_vote,
            "durable_log": self.durable_log,
        }


@dataclass(frozen=True)
class ElectionTally:
    """A win rule LeaderElection accepted: whose votes counted, against which quorum.
    Members are named n1… as the replay names them."""

    term: int
    winner: str
    position: int  # 1-based position of the winning event in the merged order
    location: str  # file:line of the winning event
    votes: tuple[str, ...]  # the voters whose votes counted (the winner's own included)
    quorum: int
    electorate: str  # "voters n1,n2,n3 learners n4", or the names for a format-1.0 trace

    def describe(self) -> str:
        return (
            f"{self.winner} elected leader of term {self.term} by {','.join(self.votes)} "
            f"(a quorum of {self.quorum} of {self.electorate})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "term": self.term,
            "winner": self.winner,
            "position": self.position,
            "location": self.location,
            "votes": list(self.votes),
            "quorum": self.quorum,
            "electorate": self.electorate,
        }


@dataclass(frozen=True)
class TraceFailure:
    """The first event the model cannot follow, and why."""

    rule: str
    explanation: str
    event: TraceEvent
    position: int  # 1-based position of the event in the merged order
    states: tuple[NodeSummary, ...]

    def describe(self) -> str:
        lines = [
            f"{self.rule} broken at event {self.position}: {self.event.describe()}",
            f"  {self.explanation}",
            "  reconstructed states (the failing node as last followed; the event's own "
            "fields are on its line above):",
            *(f"    {state.describe()}" for state in self.states),
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "explanation": self.explanation,
            "location": self.event.location,
            "position": self.position,
            "event": self.event.describe(),
            "states": [state.to_json() for state in self.states],
        }


@dataclass(frozen=True)
class TraceResult:
    verdict: Verdict
    events: int
    nodes: tuple[str, ...]  # "n1 = <node id> (<file>)"
    unmatched_receives: int
    failure: TraceFailure | None = None
    witnesses: tuple[tuple[str, int], ...] = ()  # how often each kind of check had work
    torn_lines: int = 0  # lines cut short by a kill, dropped when reading
    untraced: tuple[int, ...] = ()  # node ids that messages name but no trace file covers
    elections: tuple[ElectionTally, ...] = ()  # the wins rule LeaderElection accepted

    def witness(self, name: str) -> int:
        return dict(self.witnesses).get(name, 0)

    def describe(self) -> str:
        head = (
            f"trace validation {self.verdict.describe()}: {self.events} events replayed "
            f"over {len(self.nodes)} members ({', '.join(self.nodes)})"
        )
        if self.unmatched_receives:
            head += f"; {self.unmatched_receives} receives without a traced send"
        if self.torn_lines:
            head += f"; {self.torn_lines} torn lines dropped"
        if self.untraced:
            head += "; members without a trace (their own steps unchecked): " + ", ".join(
                str(node) for node in self.untraced
            )
        if self.witnesses:
            head += "\nchecked: " + ", ".join(f"{count} {name}" for name, count in self.witnesses)
        if self.failure is not None:
            head += "\n" + self.failure.describe()
        return head

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.to_json(),
            "events": self.events,
            "nodes": list(self.nodes),
            "unmatched_receives": self.unmatched_receives,
            "witnesses": dict(self.witnesses),
            "torn_lines": self.torn_lines,
            "untraced": list(self.untraced),
            "elections": [election.to_json() for election in self.elections],
            "failure": None if self.failure is None else self.failure.to_json(),
        }

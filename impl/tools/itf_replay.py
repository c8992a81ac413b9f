"""A counterexample of the model's cluster (ITF JSON) replayed on the server's Raft core.

Contract
- `replay_itf(document)` drives one RaftDriver per node of the ITF's cluster
  (`etcdspec explore --itf`: variable `nodes` maps "n1"… to records with `role`, `term`,
  `log` of "TERM:…" texts, `commit_index`), in memory, deterministically (seeded, no
  ticks but those the run has), each Ready handled at once: persisted, its messages put
  in flight, advanced. The run's steps map as: `timeout(n)` → campaign, `tick(n)` →
  tick, `propose(n, R)` → propose, `deliver(A→B KIND term T …)` → the core's message
  of that kind and term from A to B still in flight is stepped at B, `drop(…)` → that
  message is removed. A step that does not map (another kind, or no such message in
  flight at the core) stops the replay there, saying why.
- After each step that maps, every node is compared: role, term, commit index and the
  terms of its log. A step `agrees` when all match, else it `differs` (listed per node);
  a difference does not stop the replay: the layers may disagree and go on.
- This module reads the ITF as plain JSON (it knows the model's variable names, not the
  model's code: impl never imports model or spec). No I/O.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from etcdspec.impl.raft.core import RaftConfig
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import Message, MessageType, ProposalDropped

KINDS: Mapping[str, tuple[MessageType, ...]] = {
    "PreVote": (MessageType.PRE_VOTE,),
    "PreVoteResp": (MessageType.PRE_VOTE_RESP,),
    "RequestVote": (MessageType.VOTE,),
    "RequestVoteResp": (MessageType.VOTE_RESP,),
    "AppendEntries": (MessageType.APP, MessageType.HEARTBEAT),
    "AppendEntriesResp": (MessageType.APP_RESP, MessageType.HEARTBEAT_RESP),
}
_MESSAGE = re.compile(r"(drop|deliver)\(n(\d+)→n(\d+) (\w+) term (\d+)")


class ReplayInputError(ValueError):
    """An ITF document that is not a run of the model's cluster."""


@dataclass(frozen=True)
class ReplayStep:
    """One step of the run and how the core followed it."""

    number: int
    label: str
    outcome: str  # "agrees", "differs" or "does not map"
    detail: str = ""

    def describe(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.number:3d}. {self.label} — {self.outcome}{detail}"


@dataclass(frozen=True)
class Replay:
    """The replay of a run on the core; `mapped` counts the steps the core took."""

    steps: tuple[ReplayStep, ...]
    total: int

    @property
    def mapped(self) -> int:
        return sum(1 for s in self.steps if s.outcome != "does not map")

    @property
    def agreed(self) -> int:
        return sum(1 for s in self.steps if s.outcome == "agrees")

    def first_difference(self) -> ReplayStep | None:
        return next((s for s in self.steps if s.outcome != "agrees"), None)

    def describe(self) -> str:
        head = (
            f"replayed {self.mapped} of {self.total} step(s) on the server's Raft core: "
            f"{self.agreed} agree"
        )
        first = self.first_difference()
        if first is not None:
            head += f"; first difference at step {first.number} ({first.outcome})"
        return "\n".join([head, *(s.describe() for s in self.steps)])


class _Cluster:
    def __init__(self, ids: list[int]) -> None:
        self.drivers = {
            i: RaftDriver(RaftConfig(id=i, voters=tuple(ids)), random.Random(i)) for i in ids
        }
        self.in_flight: list[Message] = []
        self.drain()

    def drain(self) -> None:
        moved = True
        while moved:
            moved = False
            for driver in self.drivers.values():
                if driver.has_ready():
                    ready = driver.ready()
                    self.in_flight.extend(ready.messages)
                    driver.advance(ready)
                    moved = True

    def take(self, sender: int, receiver: int, kind: str, term: int) -> Message | None:
        types = KINDS.get(kind, ())
        for wanted in types:
            for index, message in enumerate(self.in_flight):
                if (message.type, message.from_, message.to, message.term) == (
                    wanted,
                    sender,
                    receiver,
                    term,
                ):
                    return self.in_flight.pop(index)
        return None

    def node_text(self, node: int) -> str:
        core = self.drivers[node].core
        terms = [core.log.term(i) for i in range(core.log.first_index(), core.log.last_index() + 1)]
        return (
            f"{core.role.value} term {core.term} commit {core.log.committed} "
            f"log {[t for t in terms if t is not None]}"
        )

    def compare(self, nodes: Mapping[str, Any]) -> list[str]:
        differences = []
        for name, record in sorted(nodes.items()):
            node = int(name[1:])
            core = self.drivers[node].core
            log_terms = [int(str(e).split(":", 1)[0]) for e in record.get("log", [])]
            log = core.log
            core_terms = [log.term(i) for i in range(log.first_index(), log.last_index() + 1)]
            same = (
                record.get("role") == core.role.value
                and record.get("term") == core.term
                and record.get("commit_index") == log.committed
                and log_terms == core_terms
            )
            if not same:
                model = (
                    f"{record.get('role')} term {record.get('term')} commit "
                    f"{record.get('commit_index')} log {log_terms}"
                )
                differences.append(f"{name}: model {model}, core {self.node_text(node)}")
        return differences


def replay_itf(document: Mapping[str, Any]) -> Replay:
    """See the module docstring."""
    states = document.get("states")
    if not isinstance(states, list) or not states or not isinstance(states[0].get("nodes"), dict):
        raise ReplayInputError(
            "not a run of the model's cluster: give the ITF of `etcdspec explore --itf` "
            "(a state variable `nodes`)"
        )
    names = sorted(states[0]["nodes"])
    if not all(re.fullmatch(r"n\d+", n) for n in names):
        raise ReplayInputError(f"node names {names} are not n1, n2, …")
    cluster = _Cluster([int(n[1:]) for n in names])
    steps: list[ReplayStep] = []
    for number, state in enumerate(states[1:], start=1):
        label = str(state.get("#meta", {}).get("action", ""))
        why = _apply(cluster, label)
        if why:
            steps.append(ReplayStep(number, label, "does not map", why))
            break
        cluster.drain()
        differences = cluster.compare(state["nodes"])
        outcome = "differs" if differences else "agrees"
        steps.append(ReplayStep(number, label, outcome, "; ".join(differences)))
    return Replay(tuple(steps), len(states) - 1)


def _apply(cluster: _Cluster, label: str) -> str:
    """Apply one labelled step; "" when it mapped, else why not."""
    node_step = re.fullmatch(r"(timeout|tick)\(n(\d+)\)", label)
    if node_step:
        driver = cluster.drivers[int(node_step.group(2))]
        driver.campaign() if node_step.group(1) == "timeout" else driver.tick()
        return ""
    proposal = re.fullmatch(r"propose\(n(\d+), (.+)\)", label)
    if proposal:
        try:
            cluster.drivers[int(proposal.group(1))].propose(proposal.group(2).encode())
        except ProposalDropped as error:
            return f"the core dropped the proposal ({error})"
        return ""
    message = _MESSAGE.match(label)
    if message:
        verb, sender, receiver, kind, term = message.groups()
        found = cluster.take(int(sender), int(receiver), kind, int(term))
        if found is None:
            flying = ", ".join(
                f"{m.type.name} {m.from_}->{m.to} term {m.term}" for m in cluster.in_flight
            )
            return (
                f"the core has no {kind} of term {term} in flight (in flight: {flying or 'none'})"
            )
        if verb == "deliver":
            cluster.drivers[int(receiver)].step(found)
        return ""
    return "the core's replay knows no such step (only timeout, tick, propose, deliver, drop)"

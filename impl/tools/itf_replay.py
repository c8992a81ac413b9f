"""A counterexample of the model's cluster (ITF JSON) replayed on the server's Raft core.

Contract
- `replay_itf(document)` drives one RaftDriver per node of the ITF's cluster
  (`etcdspec explore --itf`: variable `nodes` maps "n1"… to records with `role`, `term`,
  `log` of "TERM:…" texts, `commit_index`), in memory, deterministically (seeded, no
  ticks but those the run has), each Ready handled at once: persisted, its messages put
  in flight, advanced. The run's steps map as: `timeout(n)` → campaign, `tick(n)` →
  tick, `propose(n, R)` → propose, `deliver(A→B KIND term T …)` → the core's message
  of that kind and term from A to B still in flight is stepped at B, `drop(…)` → that
  message is removed; `crash(n)` → the node's driver is discarded (what it had not
  persisted is lost; messages in flight stay), `restart(n)` → a new driver from what its
  Readies persisted (hard state, snapshot, entries), as the server restarts from its
  WAL; `partition(...)`/`heal()` → the groups are noted and a delivery across them
  does not map (the run's own deliveries are the network). A step that does not map
  (another kind, a down node, or no such message in flight at the core) stops the
  replay there, saying why.
- When the ITF's `#meta` holds the model's config (`etcdspec-config`, written by
  `explore --itf`), the core runs with its prevote, check-quorum and tick settings;
  else with the core's defaults.
- After each step that maps, every node is compared: role, term, commit index and the
  terms of its log; a down node by its persisted term, vote and log terms against the
  model's durable ones. A step `agrees` when all match, else it `differs` (listed per
  node); a difference does not stop the replay: the layers may disagree and go on.
- This module reads the ITF as plain JSON, its values decoded by etcdspec.itf (it knows
  the model's variable names, not the model's code: impl never imports model or spec).
  No I/O.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from etcdspec.impl.raft.core import PersistedState, RaftConfig
from etcdspec.impl.raft.driver import RaftDriver, Ready
from etcdspec.impl.raft.messages import (
    Entry,
    HardState,
    Message,
    MessageType,
    ProposalDropped,
    Snapshot,
)
from etcdspec.itf import from_itf_value
from etcdspec.layer_replay import LayerReplay, ReplayStep

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


class Replay(LayerReplay):
    """The replay of a run on the server's Raft core."""

    LAYER = "the server's Raft core"


@dataclass
class _Disk:
    """What a node's Readies persisted (a server's WAL and snapshot, in memory)."""

    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)

    def save(self, ready: Ready) -> None:
        if ready.snapshot is not None:
            self.snapshot = ready.snapshot
            self.entries = [e for e in self.entries if e.index > ready.snapshot.meta.index]
        if ready.entries:
            first = ready.entries[0].index
            self.entries = [e for e in self.entries if e.index < first] + list(ready.entries)
        if ready.hard_state is not None:
            self.hard_state = ready.hard_state

    def persisted(self) -> PersistedState:
        return PersistedState(self.hard_state, self.snapshot, tuple(self.entries))

    def log_terms(self) -> list[int]:
        return [e.term for e in self.entries]


class _Cluster:
    def __init__(self, ids: list[int], settings: Mapping[str, Any]) -> None:
        self.ids = tuple(ids)
        self.settings = settings
        self.disks = {i: _Disk() for i in ids}
        self.drivers: dict[int, RaftDriver | None] = {i: self._boot(i, 0) for i in ids}
        self.restarts = 0
        self.groups: list[frozenset[int]] | None = None
        self.in_flight: list[Message] = []
        self.drain()

    def _boot(self, node: int, restarts: int) -> RaftDriver:
        config = RaftConfig(id=node, voters=self.ids, **self.settings)
        rng = random.Random(node + 1000 * restarts)
        return RaftDriver(config, rng, self.disks[node].persisted())

    def driver(self, node: int) -> RaftDriver | None:
        return self.drivers.get(node)

    def crash(self, node: int) -> None:
        self.drivers[node] = None

    def restart(self, node: int) -> None:
        self.restarts += 1
        self.drivers[node] = self._boot(node, self.restarts)

    def connected(self, a: int, b: int) -> bool:
        return self.groups is None or any(a in g and b in g for g in self.groups)

    def drain(self) -> None:
        moved = True
        while moved:
            moved = False
            for node, driver in self.drivers.items():
                if driver is not None and driver.has_ready():
                    ready = driver.ready()
                    self.disks[node].save(ready)
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
        driver = self.drivers[node]
        if driver is None:
            disk = self.disks[node]
            state = disk.hard_state
            return f"down, persisted term {state.term} vote {state.vote} log {disk.log_terms()}"
        core = driver.core
        terms = [core.log.term(i) for i in range(core.log.first_index(), core.log.last_index() + 1)]
        return (
            f"{core.role.value} term {core.term} commit {core.log.committed} "
            f"log {[t for t in terms if t is not None]}"
        )

    def _compare_down(self, name: str, record: Mapping[str, Any]) -> str:
        node = int(name[1:])
        log_terms = [int(str(e).split(":", 1)[0]) for e in record.get("log", [])]
        durable = log_terms[: int(record.get("durable_log_length", len(log_terms)))]
        vote = record.get("durable_voted_for")
        model = (
            f"down, durable term {record.get('durable_term')} vote "
            f"{int(str(vote)[1:]) if vote else 0} log {durable}"
        )
        if self.drivers[node] is not None:
            return f"{name}: model {model}, core {self.node_text(node)}"
        disk = self.disks[node]
        same = (
            record.get("durable_term") == disk.hard_state.term
            and (int(str(vote)[1:]) if vote else 0) == disk.hard_state.vote
            and durable == disk.log_terms()
        )
        return "" if same else f"{name}: model {model}, core {self.node_text(node)}"

    def compare(self, nodes: Mapping[str, Any]) -> list[str]:
        differences = []
        for name, record in sorted(nodes.items()):
            node = int(name[1:])
            if record.get("up") is False:
                difference = self._compare_down(name, record)
                differences += [difference] if difference else []
                continue
            driver = self.drivers[node]
            if driver is None:
                differences.append(f"{name}: model up, core {self.node_text(node)}")
                continue
            core = driver.core
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
    cluster = _Cluster([int(n[1:]) for n in names], _settings(document))
    steps: list[ReplayStep] = []
    for number, state in enumerate(states[1:], start=1):
        label = str(state.get("#meta", {}).get("action", ""))
        why = _apply(cluster, label)
        if why:
            steps.append(ReplayStep(number, label, "does not map", why))
            break
        cluster.drain()
        differences = cluster.compare(from_itf_value(state["nodes"]))
        outcome = "differs" if differences else "agrees"
        steps.append(ReplayStep(number, label, outcome, "; ".join(differences)))
    return Replay(tuple(steps), len(states) - 1)


def _settings(document: Mapping[str, Any]) -> dict[str, Any]:
    """The core's settings from the model's config in #meta (plain JSON), if any."""
    meta = document.get("#meta")
    config = meta.get("etcdspec-config") if isinstance(meta, dict) else None
    if not isinstance(config, dict):
        return {}
    wanted = {
        "pre_vote": ("prevote", bool),
        "check_quorum": ("check_quorum", bool),
        "election_tick": ("election_ticks", int),
        "heartbeat_tick": ("heartbeat_ticks", int),
    }
    settings: dict[str, Any] = {}
    for setting, (name, kind) in wanted.items():
        if name in config:
            if not isinstance(config[name], kind):
                raise ReplayInputError(f"#meta etcdspec-config {name} is not a {kind.__name__}")
            settings[setting] = config[name]
    return settings


def _lifecycle(cluster: _Cluster, label: str) -> str | None:
    """crash, restart, partition and heal; None when the label is none of them."""
    step = re.fullmatch(r"(crash|restart)\(n(\d+)\)", label)
    if step:
        verb, node = step.group(1), int(step.group(2))
        up = cluster.driver(node) is not None
        if (verb == "crash" and not up) or (verb == "restart" and up):
            return f"n{node} is already {'down' if verb == 'crash' else 'up'} at the core"
        cluster.crash(node) if verb == "crash" else cluster.restart(node)
        return ""
    if label == "heal()":
        cluster.groups = None
        return ""
    partition = re.fullmatch(r"partition\((.*)\)", label)
    if partition:  # the model's label: partition(n1 | n2,n3)
        groups = [
            frozenset(int(n) for n in re.findall(r"n(\d+)", group))
            for group in partition.group(1).split("|")
        ]
        if not all(groups):
            return "the core's replay cannot read this partition's groups"
        cluster.groups = groups
        return ""
    return None


def _apply(cluster: _Cluster, label: str) -> str:
    """Apply one labelled step; "" when it mapped, else why not."""
    lifecycle = _lifecycle(cluster, label)
    if lifecycle is not None:
        return lifecycle
    node_step = re.fullmatch(r"(timeout|tick)\(n(\d+)\)", label)
    if node_step:
        driver = cluster.driver(int(node_step.group(2)))
        if driver is None:
            return f"n{node_step.group(2)} is down at the core"
        driver.campaign() if node_step.group(1) == "timeout" else driver.tick()
        return ""
    proposal = re.fullmatch(r"propose\(n(\d+), (.+)\)", label)
    if proposal:
        driver = cluster.driver(int(proposal.group(1)))
        if driver is None:
            return f"n{proposal.group(1)} is down at the core"
        try:
            driver.propose(proposal.group(2).encode())
        except ProposalDropped as error:
            return f"the core dropped the proposal ({error})"
        return ""
    message = _MESSAGE.match(label)
    if message:
        verb, sender, receiver, kind, term = message.groups()
        if verb == "deliver" and not cluster.connected(int(sender), int(receiver)):
            return f"n{sender} and n{receiver} are partitioned at the core"
        if verb == "deliver" and cluster.driver(int(receiver)) is None:
            return f"n{receiver} is down at the core"
        found = cluster.take(int(sender), int(receiver), kind, int(term))
        if found is None:
            flying = ", ".join(
                f"{m.type.name} {m.from_}->{m.to} term {m.term}" for m in cluster.in_flight
            )
            return (
                f"the core has no {kind} of term {term} in flight (in flight: {flying or 'none'})"
            )
        receiving = cluster.driver(int(receiver))
        if verb == "deliver" and receiving is not None:
            receiving.step(found)
        return ""
    return (
        "the core's replay knows no such step (only timeout, tick, propose, deliver, drop, "
        "crash, restart, partition, heal)"
    )

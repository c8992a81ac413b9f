"""Hand-made member traces (format 1.0, or 1.1 with `minor=1`) for the trace-validation tests.

`TraceBuilder` keeps each node's state and writes one line per call, as impl/server/trace.py
does (state read after the transition, seq from 1 per run). `clean_run()` is a correct
3-member run: n1 is elected in term 1 (votes persisted before they are sent), replicates
and commits two entries, everyone applies them, n3 crashes and restarts from its durable
state, and n2 then wins term 2 with n3's vote. Mutations in the tests edit its lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

NODES = (1, 2, 3)


def message(
    kind: str,
    from_: int,
    to: int,
    term: int,
    *,
    log_term: int = 0,
    index: int = 0,
    commit: int = 0,
    reject: bool = False,
    entries: tuple[tuple[int, int], ...] = (),
) -> dict[str, Any]:
    return {
        "type": kind,
        "from": from_,
        "to": to,
        "term": term,
        "log_term": log_term,
        "index": index,
        "commit": commit,
        "reject": reject,
        "reject_hint": 0,
        "entries": [list(e) for e in entries],
        "snapshot": None,
    }


class TraceBuilder:
    def __init__(self, nodes: tuple[int, ...] = NODES, minor: int = 0) -> None:
        self.minor = minor
        self.lines: dict[int, list[dict[str, Any]]] = {n: [] for n in nodes}
        self.state: dict[int, dict[str, Any]] = {}
        self.seq: dict[int, int] = {}

    def event(self, node: int, event: str, **fields: Any) -> dict[str, Any]:
        """Change `node`'s state by the state fields given, then write the event line."""
        keys = ("message", "entries", "index", "leader", "conf_changes", "conf")
        extra = {k: fields.pop(k) for k in keys if k in fields}
        if event == "start":
            self.seq[node] = 0
            self.state[node] = {
                "term": 0,
                "vote": 0,
                "role": "follower",
                "commit": 0,
                "applied": 0,
                "last_index": 0,
                "last_term": 0,
            }
        self.state[node].update(fields)
        self.seq[node] += 1
        version = {"v": 1, "minor": self.minor} if self.minor else {"v": 1}
        line = {**version, "seq": self.seq[node], "event": event, "node": node}
        line.update(self.state[node])
        line.update(extra)
        self.lines[node].append(line)
        return line

    def write(self, directory: Path) -> list[Path]:
        paths = []
        for node, lines in self.lines.items():
            path = directory / f"n{node}.trace.ndjson"
            path.write_text("".join(json.dumps(line) + "\n" for line in lines))
            paths.append(path)
        return paths


def clean_run() -> TraceBuilder:
    b = TraceBuilder()
    for node in NODES:
        b.event(node, "start")
    # n1 campaigns in term 1; n2 and n3 grant their votes (persisted before they are sent).
    b.event(1, "persist", term=1, vote=1, role="candidate")
    for peer in (2, 3):
        b.event(1, "send", message=message("VOTE", 1, peer, 1))
    for peer in (2, 3):
        b.event(peer, "receive", message=message("VOTE", 1, peer, 1), term=1, vote=1)
        b.event(peer, "persist")
        b.event(peer, "send", message=message("VOTE_RESP", peer, 1, 1))
    b.event(
        1,
        "receive",
        message=message("VOTE_RESP", 2, 1, 1),
        role="leader",
        last_index=1,
        last_term=1,
    )
    b.event(1, "role", leader=1)
    b.event(1, "persist", entries=[[1, 1]])
    for peer in (2, 3):
        b.event(1, "send", message=message("APP", 1, peer, 1, entries=((1, 1),)))
    b.event(1, "receive", message=message("VOTE_RESP", 3, 1, 1))
    for peer in (2, 3):
        b.event(
            peer,
            "receive",
            message=message("APP", 1, peer, 1, entries=((1, 1),)),
            last_index=1,
            last_term=1,
        )
        b.event(peer, "persist", entries=[[1, 1]])
        b.event(peer, "send", message=message("APP_RESP", peer, 1, 1, index=1))
    b.event(1, "receive", message=message("APP_RESP", 2, 1, 1, index=1), commit=1)
    b.event(1, "receive", message=message("APP_RESP", 3, 1, 1, index=1))
    b.event(1, "apply", entries=[[1, 1]], applied=1)
    # A client write: entry 2, replicated, committed, applied everywhere.
    b.event(1, "propose", last_index=2)
    b.event(1, "persist", entries=[[2, 1]])
    for peer in (2, 3):
        app = message("APP", 1, peer, 1, log_term=1, index=1, commit=1, entries=((2, 1),))
        b.event(1, "send", message=app)
    for peer in (2, 3):
        app = message("APP", 1, peer, 1, log_term=1, index=1, commit=1, entries=((2, 1),))
        b.event(peer, "receive", message=app, last_index=2, commit=1)
        b.event(peer, "persist", entries=[[2, 1]])
        b.event(peer, "send", message=message("APP_RESP", peer, 1, 1, index=2))
        b.event(peer, "apply", entries=[[1, 1]], applied=1)
    b.event(1, "receive", message=message("APP_RESP", 3, 1, 1, index=2), commit=2)
    b.event(1, "apply", entries=[[2, 1]], applied=2)
    for peer in (2, 3):
        b.event(1, "send", message=message("HEARTBEAT", 1, peer, 1, commit=2))
    for peer in (2, 3):
        b.event(peer, "receive", message=message("HEARTBEAT", 1, peer, 1, commit=2), commit=2)
        b.event(peer, "apply", entries=[[2, 1]], applied=2)
    # n3 crashes (kill -9) and restarts from its durable state: term 1, vote n1, log 1..2.
    b.event(3, "start", term=1, vote=1, commit=2, applied=2, last_index=2, last_term=1)
    # n2 campaigns in term 2 and wins with n3's vote.
    b.event(2, "persist", term=2, vote=2, role="candidate")
    b.event(2, "send", message=message("VOTE", 2, 3, 2, log_term=1, index=2))
    b.event(3, "receive", message=message("VOTE", 2, 3, 2, log_term=1, index=2), term=2, vote=2)
    b.event(3, "persist")
    b.event(3, "send", message=message("VOTE_RESP", 3, 2, 2))
    b.event(
        2,
        "receive",
        message=message("VOTE_RESP", 3, 2, 2),
        role="leader",
        last_index=3,
        last_term=2,
    )
    b.event(2, "persist", entries=[[3, 2]])
    b.event(
        2, "send", message=message("APP", 2, 3, 2, log_term=1, index=2, commit=2, entries=((3, 2),))
    )
    app = message("APP", 2, 3, 2, log_term=1, index=2, commit=2, entries=((3, 2),))
    b.event(3, "receive", message=app, last_index=3, last_term=2)
    b.event(3, "persist", entries=[[3, 2]])
    b.event(3, "send", message=message("APP_RESP", 3, 2, 2, index=3))
    b.event(2, "receive", message=message("APP_RESP", 3, 2, 2, index=3), commit=3)
    b.event(2, "apply", entries=[[3, 2]], applied=3)
    return b


def figure8_run(bug: bool) -> TraceBuilder:
    """n1 leads term 1 and appends 1@1, which reaches nobody; re-elected in term 2 with
    n3's vote, it appends its no-op 2@2 and replicates to n2. Correct: n2 acknowledges
    index 2 and n1 commits 2 (which commits 1@1 with it). With `bug` (Raft's Figure 8
    rule broken) n1 sends only 1@1, n2 acknowledges index 1, and n1 commits 1 by counting
    replicas of an entry from an older term."""
    b = TraceBuilder()
    for node in NODES:
        b.event(node, "start")
    b.event(1, "persist", term=1, vote=1, role="candidate")
    b.event(1, "send", message=message("VOTE", 1, 3, 1))
    b.event(3, "receive", message=message("VOTE", 1, 3, 1), term=1, vote=1)
    b.event(3, "persist")
    b.event(3, "send", message=message("VOTE_RESP", 3, 1, 1))
    b.event(
        1,
        "receive",
        message=message("VOTE_RESP", 3, 1, 1),
        role="leader",
        last_index=1,
        last_term=1,
    )
    b.event(1, "persist", entries=[[1, 1]])
    b.event(1, "send", message=message("APP", 1, 2, 1, entries=((1, 1),)))  # lost
    b.event(1, "persist", term=2, vote=1, role="candidate")
    b.event(1, "send", message=message("VOTE", 1, 3, 2, log_term=1, index=1))
    b.event(3, "receive", message=message("VOTE", 1, 3, 2, log_term=1, index=1), term=2, vote=1)
    b.event(3, "persist")
    b.event(3, "send", message=message("VOTE_RESP", 3, 1, 2))
    b.event(
        1,
        "receive",
        message=message("VOTE_RESP", 3, 1, 2),
        role="leader",
        last_index=2,
        last_term=2,
    )
    b.event(1, "persist", entries=[[2, 2]])
    sent = ((1, 1),) if bug else ((1, 1), (2, 2))
    app = message("APP", 1, 2, 2, entries=sent)
    b.event(1, "send", message=app)
    b.event(2, "receive", message=app, term=2, last_index=len(sent), last_term=sent[-1][1])
    b.event(2, "persist", entries=[list(e) for e in sent])
    ack = message("APP_RESP", 2, 1, 2, index=len(sent))
    b.event(2, "send", message=ack)
    b.event(1, "receive", message=ack, commit=len(sent))
    return b


class MembershipRun:
    """A format 1.1 run through configuration changes, leader n1 in term 1 throughout:
    n1 starts alone (voters [1]) and commits by itself; adds n2 as a learner, which
    catches up while n1 still commits alone; promotes n2 (from then on n1 needs n2's
    acknowledgement); adds n3 as a learner and writes entry 7, which the learner
    acknowledges first and n2 second; promotes n3; removes n2 (committed with n3's
    acknowledgement, n2 applies its removal and its trace ends there); and writes entry
    10, committed in the configuration voters [1, 3].

    Planted bugs (`bug`): "alone" — n1 commits entry 5 by itself after n2 was promoted;
    "learner" — n1 commits entry 7 on the learner n3's acknowledgement; "removed" — n1
    commits entry 10 on the acknowledgement of n2, which it has removed; "conf" — n2's
    configuration after its promotion names n3 too; "unlogged" — n1 changes its
    configuration where it applies no conf change entry."""

    def __init__(self, bug: str | None = None) -> None:
        self.bug = bug
        self.b = TraceBuilder(minor=1)
        self.changes: dict[int, list[Any]] = {}

    @staticmethod
    def conf(voters: list[int], learners: list[int] | None = None) -> dict[str, list[int]]:
        return {"voters": voters, "learners": learners or []}

    def _changes(self, entries: list[list[int]]) -> dict[str, Any]:
        changes = [self.changes[i] for i, _ in entries if i in self.changes]
        return {"conf_changes": changes} if changes else {}

    def append(self, index: int, change: tuple[str, int] | None = None, **state: Any) -> None:
        """n1 proposes entry `index` (a conf change if given) and persists it."""
        if change is not None:
            self.changes[index] = [index, *change]
        self.b.event(1, "propose", last_index=index)
        entries = [[index, 1]]
        self.b.event(1, "persist", entries=entries, **self._changes(entries), **state)

    def replicate(self, peer: int, first: int, last: int) -> None:
        """n1 sends entries first..last to `peer`, which persists and acknowledges them."""
        commit = self.b.state[1]["commit"]
        entries = tuple((i, 1) for i in range(first, last + 1))
        prev = first - 1
        app = message(
            "APP", 1, peer, 1, log_term=1 if prev else 0, index=prev, commit=commit, entries=entries
        )
        self.b.event(1, "send", message=app)
        self.b.event(
            peer,
            "receive",
            message=app,
            term=1,
            last_index=last,
            last_term=1,
            commit=min(commit, last),
        )
        persisted = [list(e) for e in entries]
        self.b.event(peer, "persist", entries=persisted, **self._changes(persisted))
        self.b.event(peer, "send", message=message("APP_RESP", peer, 1, 1, index=last))

    def ack(self, peer: int, index: int, **state: Any) -> None:
        self.b.event(1, "receive", message=message("APP_RESP", peer, 1, 1, index=index), **state)

    def heartbeat(self, peer: int) -> None:
        commit = self.b.state[1]["commit"]
        beat = message("HEARTBEAT", 1, peer, 1, commit=commit)
        self.b.event(1, "send", message=beat)
        self.b.event(peer, "receive", message=beat, commit=commit)

    # The configuration after each conf change entry, and the entry that added each node
    # (a joining member's configuration starts right after it: it skips the changes up to it).
    CONFS: ClassVar[dict[int, tuple[list[int], list[int]]]] = {
        2: ([1], [2]),
        4: ([1, 2], []),
        6: ([1, 2], [3]),
        8: ([1, 2, 3], []),
        9: ([1, 3], []),
    }
    JOINED: ClassVar[dict[int, int]] = {1: 0, 2: 2, 3: 6}

    def apply(self, node: int, upto: int) -> None:
        """`node` applies its entries up to `upto`, one line each, with the configuration
        on the lines that changed it."""
        for index in range(self.b.state[node]["applied"] + 1, upto + 1):
            entries = [[index, 1]]
            extra = self._changes(entries)
            if index in self.CONFS and index > self.JOINED[node]:
                voters, learners = self.CONFS[index]
                if self.bug == "conf" and node == 2 and index == 4:
                    voters = [1, 2, 3]  # the promotion of n2 wrongly adds n3 as well
                extra["conf"] = self.conf(voters, learners)
            self.b.event(node, "apply", entries=entries, applied=index, **extra)

    def build(self) -> TraceBuilder:
        b, bug = self.b, self.bug
        b.event(1, "start", conf=self.conf([1]))
        b.event(1, "persist", term=1, vote=1, role="candidate")
        b.event(1, "role", role="leader", last_index=1, last_term=1, leader=1)
        b.event(1, "persist", entries=[[1, 1]], commit=1)  # alone: the quorum of [1] is 1
        self.apply(1, 1)
        self.append(2, ("ADD_LEARNER_NODE", 2), commit=2)
        self.apply(1, 2)
        # n2 joins as a learner and catches up; n1 still commits alone.
        b.event(2, "start", conf=self.conf([1], [2]))
        self.replicate(2, 1, 2)
        self.ack(2, 2)
        self.apply(2, 2)  # a joining member skips the changes up to its own addition
        self.append(3, commit=3)
        self.apply(1, 3)
        if bug == "unlogged":  # n1 uses the promotion before it has even proposed it
            b.event(1, "role", leader=1, conf=self.conf([1, 2]))
        self.append(4, ("ADD_NODE", 2), commit=4)  # promotes n2; committed in [1]
        self.apply(1, 4)
        self.replicate(2, 3, 4)
        self.ack(2, 4)
        self.apply(2, 4)
        # Entry 5 needs n2 now.
        self.append(5, **({"commit": 5} if bug == "alone" else {}))
        self.replicate(2, 5, 5)
        self.ack(2, 5, commit=5)
        self.apply(1, 5)
        # n3 joins as a learner.
        self.append(6, ("ADD_LEARNER_NODE", 3))
        self.replicate(2, 6, 6)
        self.ack(2, 6, commit=6)
        self.apply(1, 6)
        b.event(3, "start", conf=self.conf([1, 2], [3]))
        self.replicate(3, 1, 6)
        self.ack(3, 6)
        self.apply(3, 6)
        # Entry 7: the learner acknowledges first; only n2's acknowledgement commits it.
        self.append(7)
        self.replicate(3, 7, 7)
        self.replicate(2, 7, 7)
        self.ack(3, 7, **({"commit": 7} if bug == "learner" else {}))
        self.ack(2, 7, commit=7)
        self.apply(1, 7)
        # n3 is promoted.
        self.append(8, ("ADD_NODE", 3))
        self.replicate(2, 8, 8)
        self.ack(2, 8, commit=8)
        self.apply(1, 8)
        self.replicate(3, 8, 8)
        self.ack(3, 8)
        # n2 is removed: committed with n3's acknowledgement (2 of the voters [1, 2, 3]).
        self.append(9, ("REMOVE_NODE", 2))
        self.replicate(2, 9, 9)
        self.replicate(3, 9, 9)
        self.ack(3, 9, commit=9)
        self.apply(1, 9)
        self.heartbeat(2)
        self.apply(2, 9)  # n2 applies its removal; its trace ends here
        # Entry 10 in voters [1, 3]: n3's acknowledgement commits it, not n2's.
        self.append(10)
        if bug == "removed":
            app = message("APP", 1, 2, 1, log_term=1, index=9, commit=9, entries=((10, 1),))
            b.event(1, "send", message=app)
            b.event(2, "receive", message=app, last_index=10)
            b.event(2, "persist", entries=[[10, 1]])
            b.event(2, "send", message=message("APP_RESP", 2, 1, 1, index=10))
            self.ack(2, 10, commit=10)
        self.replicate(3, 10, 10)
        self.ack(3, 10, commit=10)
        self.apply(1, 10)
        self.heartbeat(3)
        self.apply(3, 8)
        self.apply(3, 9)
        self.apply(3, 10)
        return b

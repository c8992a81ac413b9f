"""Hand-made member traces (format v1) for the trace-validation tests.

`TraceBuilder` keeps each node's state and writes one line per call, as impl/server/trace.py
does (state read after the transition, seq from 1 per run). `clean_run()` is a correct
3-member run: n1 is elected in term 1 (votes persisted before they are sent), replicates
and commits two entries, everyone applies them, n3 crashes and restarts from its durable
state, and n2 then wins term 2 with n3's vote. Mutations in the tests edit its lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    def __init__(self) -> None:
        self.lines: dict[int, list[dict[str, Any]]] = {n: [] for n in NODES}
        self.state: dict[int, dict[str, Any]] = {}
        self.seq: dict[int, int] = {}

    def event(self, node: int, event: str, **fields: Any) -> dict[str, Any]:
        """Change `node`'s state by the state fields given, then write the event line."""
        extra = {k: fields.pop(k) for k in ("message", "entries", "index", "leader") if k in fields}
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
        line = {"v": 1, "seq": self.seq[node], "event": event, "node": node, **self.state[node]}
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

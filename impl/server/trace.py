"""The member's Raft trace (`etcdspec serve --trace FILE`): one NDJSON line per transition.

Format (version 1.1), one JSON object per line, keys in this order:
    {"v":1, "minor":1, "seq":N, "event":E, "node":ID, "term":T, "vote":V, "role":R,
     "commit":C, "applied":A, "last_index":I, "last_term":LT, "message":{...}?,
     "entries":[...]?, "conf_changes":[...]?, "conf":{...}?}
Events:
    start    the member started from its recovered state
    propose  a client proposal handed to Raft (entries: the request's data length)
    receive  a message from a peer was stepped into Raft (message)
    persist  a Ready's durable part was fsynced (entries: [index, term] pairs persisted)
    send     a message left after its Ready was persisted (message)
    role     the role or the known leader changed ("leader" field)
    apply    a committed entry was applied (entries: [[index, term]])
    snapshot a local snapshot was taken ("index")
    restore  a snapshot received from the leader is restored ("index")
The state fields are read after the transition.
Configuration (minor version 1; version 1.0 lines have no "minor" and none of this):
    conf_changes  on persist and apply: the CONF_CHANGE entries among "entries", as
                  [index, type, node] (type ADD_NODE, REMOVE_NODE, UPDATE_NODE or
                  ADD_LEARNER_NODE as in etcd raftpb; ADD_NODE of a learner promotes it)
    conf          {"voters":[ids], "learners":[ids]}: the configuration the member's Raft
                  core uses, on `start` and on any event after which it changed (the
                  apply of a conf change entry, a restored snapshot) Node ids are decimal 64-bit integers.
Messages: {"type","from","to","term","log_term","index","commit","reject","reject_hint",
"entries":[[index,term],...],"snapshot":index|null}. Ticks are not traced (their effects
are: a campaign shows up as role and send events).

The writer is line-buffered in memory and flushed after each Ready (no fsync: the trace
is evidence for checking, not part of durability).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO, Any

from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import ConfChange, ConfState, Entry, EntryType, Message

TRACE_VERSION = 1
TRACE_MINOR = 1  # 1: configuration entries and the configuration ("conf_changes", "conf")


def conf_changes_json(entries: tuple[Entry, ...] | list[Entry]) -> list[list[Any]]:
    """The CONF_CHANGE entries among `entries` as [index, type, node]."""
    changes: list[list[Any]] = []
    for entry in entries:
        if entry.type is EntryType.CONF_CHANGE:
            try:
                change = ConfChange.decode(entry.data)
            except ValueError:  # not ours to judge here; the checker refuses the type
                changes.append([entry.index, "UNDECODABLE", 0])
                continue
            changes.append([entry.index, change.type.name, change.node_id])
    return changes


def conf_json(conf: ConfState) -> dict[str, list[int]]:
    return {"voters": sorted(conf.voters), "learners": sorted(conf.learners)}


def message_json(message: Message) -> dict[str, Any]:
    return {
        "type": message.type.name,
        "from": message.from_,
        "to": message.to,
        "term": message.term,
        "log_term": message.log_term,
        "index": message.index,
        "commit": message.commit,
        "reject": message.reject,
        "reject_hint": message.reject_hint,
        "entries": [[e.index, e.term] for e in message.entries],
        "snapshot": message.snapshot.meta.index if message.snapshot is not None else None,
    }


class TraceWriter:
    """Writes trace lines for one member; see the module docstring for the format."""

    def __init__(self, path: str, node: int) -> None:
        self.node = node
        self._file: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self._seq = 0
        self._conf: dict[str, list[int]] | None = None  # the configuration last written

    def event(
        self,
        driver: RaftDriver,
        event: str,
        *,
        applied: int,
        message: Message | None = None,
        entries: tuple[Entry, ...] | list[Entry] = (),
        **extra: Any,
    ) -> None:
        if self._file is None:
            return
        core = driver.core
        self._seq += 1
        line: dict[str, Any] = {
            "v": TRACE_VERSION,
            "minor": TRACE_MINOR,
            "seq": self._seq,
            "event": event,
            "node": self.node,
            "term": core.term,
            "vote": core.vote,
            "role": core.role.value,
            "commit": core.log.committed,
            "applied": applied,
            "last_index": core.log.last_index(),
            "last_term": core.log.last_term(),
        }
        if message is not None:
            line["message"] = message_json(message)
        if entries:
            line["entries"] = [[e.index, e.term] for e in entries]
            changes = conf_changes_json(entries)
            if changes:
                line["conf_changes"] = changes
        line.update(extra)
        conf = conf_json(driver.conf_state)
        if event == "start" or conf != self._conf:
            line["conf"] = conf
            self._conf = conf
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class MemberTrace:
    """A member's trace as its parts write it: events of its driver's state, with the
    applied index read from `applied` at each event."""

    def __init__(self, writer: TraceWriter, driver: RaftDriver, applied: Callable[[], int]) -> None:
        self.writer = writer
        self.driver = driver
        self.applied = applied

    def event(
        self,
        event: str,
        *,
        message: Message | None = None,
        entries: tuple[Entry, ...] | list[Entry] = (),
        **extra: Any,
    ) -> None:
        self.writer.event(
            self.driver, event, applied=self.applied(), message=message, entries=entries, **extra
        )

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()

"""Reading and validating member traces (impl/server/trace.py, format version 1.x) for replay.

Contract
- `read_trace(path)` returns the file's events in file order as `TraceEvent` values. A
  member's trace file is appended to by every run of that member, so the file order is
  the member's order; `seq` counts from 1 within one run and starts again at 1 on the
  `start` event that opens the next run.
- Bad input raises `TraceFormatError` naming file:line, the field and what to do: a
  line that is not a JSON object, a version other than 1, an unknown event, a missing
  or mistyped field, a seq that does not follow, a first event other than `start`, or
  a file whose events come from more than one node. An empty file is an error too (a
  trace with no events proves nothing).
- A member killed with SIGKILL may leave its last line cut short: a final line with no
  newline that does not parse is dropped, and so is a cut line that the next run's
  `start` line was appended to (the start is kept); `TraceFile.torn_lines` counts them.
- Version 1.0 lines (no "minor") and 1.1 lines (configuration entries and the
  configuration: "conf_changes", "conf") both read; a 1.0 line has no configuration
  (`conf` None, `conf_changes` empty). A later minor version reads as 1.1 (a minor
  version only adds fields).
- Only the fields the replay uses are kept; unknown extra keys are allowed (the writer
  may add fields such as "size" or "leader").
No I/O besides reading the named files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

Fail = Callable[[str], NoReturn]

TRACE_VERSION = 1
EVENTS = frozenset(
    {"start", "propose", "receive", "persist", "send", "role", "apply", "snapshot", "restore"}
)
ROLES = frozenset({"follower", "pre-candidate", "precandidate", "candidate", "leader"})
STATE_FIELDS = ("term", "vote", "commit", "applied", "last_index", "last_term")
CONF_CHANGE_TYPES = frozenset({"ADD_NODE", "REMOVE_NODE", "UPDATE_NODE", "ADD_LEARNER_NODE"})
MESSAGE_INT_FIELDS = ("from", "to", "term", "log_term", "index", "commit", "reject_hint")


class TraceFormatError(ValueError):
    """A trace file that cannot be read; `location` is file:line."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        super().__init__(f"{path}:{line}: {problem}")

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class TraceMessage:
    """A Raft message as traced: entries are (index, term) pairs."""

    type: str
    from_: int
    to: int
    term: int
    log_term: int
    index: int
    commit: int
    reject: bool
    reject_hint: int
    entries: tuple[tuple[int, int], ...]
    snapshot: int | None

    def key(self) -> tuple[Any, ...]:
        """Identifies the message on the wire: a receive matches a send with this key."""
        return (
            self.type,
            self.from_,
            self.to,
            self.term,
            self.log_term,
            self.index,
            self.commit,
            self.reject,
            self.reject_hint,
            self.entries,
            self.snapshot,
        )

    def describe(self) -> str:
        parts = [f"{self.type} {self.from_}->{self.to} term {self.term}"]
        if self.type in ("APP", "VOTE", "PRE_VOTE"):
            parts.append(f"prev/last {self.index}@{self.log_term}")
        if self.type in ("APP_RESP",):
            parts.append(f"index {self.index}")
        if self.entries:
            first, last = self.entries[0], self.entries[-1]
            parts.append(
                f"entries {first[0]}@{first[1]}..{last[0]}@{last[1]} ({len(self.entries)})"
            )
        if self.type in ("APP", "HEARTBEAT"):
            parts.append(f"commit {self.commit}")
        if self.reject:
            parts.append(f"reject (hint {self.reject_hint})")
        if self.snapshot is not None:
            parts.append(f"snapshot {self.snapshot}")
        return " ".join(parts)


@dataclass(frozen=True)
class ConfChangeEntry:
    """A CONF_CHANGE entry as traced: its index, type (etcd raftpb's names) and node."""

    index: int
    type: str
    node: int

    def describe(self) -> str:
        return f"{self.index}: {self.type} {self.node}"


@dataclass(frozen=True)
class TraceConf:
    """A member's configuration: who votes, and who only receives the log."""

    voters: frozenset[int]
    learners: frozenset[int]

    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    def describe(self) -> str:
        learners = f" learners {sorted(self.learners)}" if self.learners else ""
        return f"voters {sorted(self.voters)}{learners}"


@dataclass(frozen=True)
class TraceEvent:
    """One trace line: the event and the member's Raft state read after it."""

    path: str
    line: int
    seq: int
    event: str
    node: int
    term: int
    vote: int
    role: str
    commit: int
    applied: int
    last_index: int
    last_term: int
    message: TraceMessage | None
    entries: tuple[tuple[int, int], ...]
    index: int | None  # snapshot / restore
    conf_changes: tuple[ConfChangeEntry, ...] = ()  # minor 1: CONF_CHANGE entries
    conf: TraceConf | None = None  # minor 1: the configuration, where it is written

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def state_text(self) -> str:
        vote = f" vote {self.vote}" if self.vote else ""
        return (
            f"{self.role} term {self.term}{vote} commit {self.commit} applied {self.applied} "
            f"last {self.last_index}@{self.last_term}"
        )

    def describe(self) -> str:
        what = self.event
        if self.message is not None:
            what += f" {self.message.describe()}"
        if self.entries:
            what += " entries " + ",".join(f"{i}@{t}" for i, t in self.entries)
        if self.index is not None:
            what += f" index {self.index}"
        if self.conf_changes:
            what += " conf changes " + ", ".join(c.describe() for c in self.conf_changes)
        if self.conf is not None:
            what += f" conf {self.conf.describe()}"
        return f"{self.location} node {self.node} seq {self.seq}: {what} -> {self.state_text()}"


def _int(data: dict[str, Any], name: str, fail: Fail) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        fail(f"field {name!r} must be a non-negative integer, not {value!r}")
    return int(value)


def _pairs(value: Any, name: str, fail: Fail) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list):
        fail(f"field {name!r} must be a list of [index, term] pairs, not {value!r}")
    pairs = []
    for item in value:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in item)
        ):
            fail(f"field {name!r} must hold [index, term] pairs of integers, not {item!r}")
        pairs.append((int(item[0]), int(item[1])))
    return tuple(pairs)


def _ids(data: dict[str, Any], name: str, fail: Fail) -> frozenset[int]:
    value = data.get(name)
    if not isinstance(value, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in value
    ):
        fail(f"conf field {name!r} must be a list of node ids, not {value!r}")
    return frozenset(int(x) for x in value)


def _conf(value: Any, fail: Fail) -> TraceConf:
    if not isinstance(value, dict):
        fail(f"field 'conf' must be an object {{'voters':[...],'learners':[...]}}, not {value!r}")
    voters, learners = _ids(value, "voters", fail), _ids(value, "learners", fail)
    if voters & learners:
        fail(f"conf names {sorted(voters & learners)} as both voter and learner")
    return TraceConf(voters, learners)


def _conf_changes(value: Any, fail: Fail) -> tuple[ConfChangeEntry, ...]:
    if not isinstance(value, list):
        fail(f"field 'conf_changes' must be a list of [index, type, node], not {value!r}")
    changes = []
    for item in value:
        if (
            not isinstance(item, list)
            or len(item) != 3
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in (item[0], item[2]))
            or item[1] not in CONF_CHANGE_TYPES
        ):
            fail(
                f"field 'conf_changes' must hold [index, type, node] with type one of "
                f"{', '.join(sorted(CONF_CHANGE_TYPES))}, not {item!r}"
            )
        changes.append(ConfChangeEntry(int(item[0]), str(item[1]), int(item[2])))
    return tuple(changes)


def _message(data: Any, fail: Fail) -> TraceMessage:
    if not isinstance(data, dict):
        fail(f"field 'message' must be an object, not {data!r}")
    if not isinstance(data.get("type"), str):
        fail("message field 'type' must be a string")
    ints = {name: _int(data, name, fail) for name in MESSAGE_INT_FIELDS}
    if not isinstance(data.get("reject"), bool):
        fail("message field 'reject' must be true or false")
    snapshot = data.get("snapshot")
    if snapshot is not None and (not isinstance(snapshot, int) or isinstance(snapshot, bool)):
        fail(f"message field 'snapshot' must be an index or null, not {snapshot!r}")
    return TraceMessage(
        type=data["type"],
        from_=ints["from"],
        to=ints["to"],
        term=ints["term"],
        log_term=ints["log_term"],
        index=ints["index"],
        commit=ints["commit"],
        reject=bool(data["reject"]),
        reject_hint=ints["reject_hint"],
        entries=_pairs(data.get("entries", []), "message.entries", fail),
        snapshot=snapshot,
    )


def parse_line(path: str, number: int, text: str) -> TraceEvent:
    """One trace line as an event; TraceFormatError names path:number."""

    def fail(problem: str) -> NoReturn:
        raise TraceFormatError(path, number, problem)

    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TraceFormatError(
            path, number, f"not JSON ({error.msg} at column {error.colno}); one object a line"
        ) from None
    if not isinstance(data, dict):
        fail("a trace line must be a JSON object")
    if data.get("v") != TRACE_VERSION:
        fail(f"trace version {data.get('v')!r}; this checker reads version {TRACE_VERSION}.x")
    minor = data.get("minor", 0)
    if isinstance(minor, bool) or not isinstance(minor, int) or minor < 0:
        fail(f"field 'minor' must be a non-negative integer, not {minor!r}")
    event = data.get("event")
    if event not in EVENTS:
        fail(f"unknown event {event!r}; expected one of {', '.join(sorted(EVENTS))}")
    role = data.get("role")
    if role not in ROLES:
        fail(f"unknown role {role!r}; expected one of {', '.join(sorted(ROLES))}")
    ints = {name: _int(data, name, fail) for name in ("seq", "node", *STATE_FIELDS)}
    message = None
    if event in ("send", "receive"):
        if "message" not in data:
            fail(f"a {event} event needs a 'message'")
        message = _message(data["message"], fail)
    index = None
    if event in ("snapshot", "restore"):
        index = _int(data, "index", fail)
    entries = _pairs(data.get("entries", []), "entries", fail)
    conf_changes: tuple[ConfChangeEntry, ...] = ()
    conf = None
    if minor >= 1:
        conf_changes = _conf_changes(data.get("conf_changes", []), fail)
        indices = {index for index, _ in entries}
        for change in conf_changes:
            if change.index not in indices:
                fail(f"conf change at index {change.index} is not among the event's entries")
        if "conf" in data:
            conf = _conf(data["conf"], fail)
        elif event == "start":
            fail("a start event of minor version 1 needs 'conf' (the member's configuration)")
    return TraceEvent(
        path=path,
        line=number,
        seq=ints["seq"],
        event=str(event),
        node=ints["node"],
        term=ints["term"],
        vote=ints["vote"],
        role="precandidate" if role == "pre-candidate" else str(role),
        commit=ints["commit"],
        applied=ints["applied"],
        last_index=ints["last_index"],
        last_term=ints["last_term"],
        message=message,
        entries=entries,
        index=index,
        conf_changes=conf_changes,
        conf=conf,
    )


@dataclass(frozen=True)
class TraceFile:
    """One member's validated trace, and how many torn lines (cut by a kill) were dropped."""

    path: str
    events: tuple[TraceEvent, ...]
    torn_lines: int

    def describe(self) -> str:
        torn = f", {self.torn_lines} torn lines dropped" if self.torn_lines else ""
        return f"{self.path}: {len(self.events)} events{torn}"


def _parse_or_torn(
    name: str, number: int, raw: str, last_unterminated: bool
) -> tuple[TraceEvent | None, bool]:
    """The line's event, or (None, True) for a line a kill -9 cut short at the end of the
    file, or (event, True) for a cut line glued to the start of the member's next run."""
    try:
        return parse_line(name, number, raw), False
    except TraceFormatError:
        cut = raw.rfind('{"v":')
        if cut > 0:
            try:
                event = parse_line(name, number, raw[cut:])
            except TraceFormatError:
                event = None
            if event is not None and event.event == "start":
                return event, True
        if last_unterminated:
            return None, True
        raise


def read_trace_file(path: str | Path) -> TraceFile:
    """Every event of one member's trace file, validated; see the module docstring."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceFormatError(name, 0, "no such file; pass the members' trace files") from None
    except (OSError, UnicodeDecodeError) as error:
        raise TraceFormatError(name, 0, f"cannot read the file: {error}") from None
    events: list[TraceEvent] = []
    torn_lines = 0
    raw_lines = text.splitlines()
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        last_unterminated = number == len(raw_lines) and not text.endswith("\n")
        event, torn = _parse_or_torn(name, number, raw, last_unterminated)
        torn_lines += torn
        if event is None:
            continue
        if not events:
            if event.event != "start":
                raise TraceFormatError(
                    name, number, f"a trace begins with a start event, not {event.event!r}"
                )
        elif event.node != events[0].node:
            raise TraceFormatError(
                name,
                number,
                f"node {event.node} in the trace of node {events[0].node}; "
                "give each member's trace as its own file",
            )
        if event.event == "start":
            if event.seq != 1:
                raise TraceFormatError(name, number, f"a start event has seq 1, not {event.seq}")
        elif events and event.seq != events[-1].seq + 1:
            raise TraceFormatError(
                name,
                number,
                f"seq {event.seq} does not follow seq {events[-1].seq}; lines were lost or reordered",
            )
        events.append(event)
    if not events:
        raise TraceFormatError(name, 1, "the trace has no events")
    return TraceFile(name, tuple(events), torn_lines)


def read_trace(path: str | Path) -> list[TraceEvent]:
    """Every event of one member's trace file (torn lines dropped); see read_trace_file."""
    return list(read_trace_file(path).events)

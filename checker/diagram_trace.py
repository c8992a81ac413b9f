"""The reference server's Raft traces → `Diagram`, marked where trace validation fails.

Contract
- `diagram_from_traces(paths)` reads the members' trace files (checker/trace_format.py),
  merges them in the causal order trace validation replays (checker/trace_order.py) and
  runs that validation (checker/trace_check.py). Each event is a step on its member's
  lifeline; a `send` starts a message, the matching `receive` delivers it (the same
  message on the wire), a send never received is in flight at the end. A `start` after
  the first is a restart (the member crashed before it). A `persist` with entries places
  them in that member's log (truncating at the first entry's index), which is how the
  log per step is known. The failing event, if any, carries the broken rule's name, and
  the diagram ends there (what follows was not checked).
- Members are named n1, n2, … in the order of their files, as trace validation names
  them (a real cluster's member ids are 64-bit numbers): lifelines, votes, message ends
  and the step labels use these names.
- Configuration changes (trace format 1.1): a conf change entry is drawn in the log as
  `TERM:+nX` (add), `TERM:+learner nX`, `TERM:-nX` (remove) or `TERM:~nX` (update);
  the step that persists or applies one notes it, and a member whose configuration
  changes (a `conf` field that differs from its last) gets a note naming its voters and
  learners (in lifeline order).
- Elections: each win trace validation accepted (rule LeaderElection) is noted at its step
  with the votes counted and the configuration they were counted in
  (`TraceResult.elections`, `ElectionTally.describe()`); a win it refused is the failing
  step, its explanation the diagram's note.
- Bad files raise TraceFormatError (file:line), as check-trace does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from etcdspec.checker.diagram import Diagram, Message, NodeState, build_steps
from etcdspec.checker.trace_check import check_traces
from etcdspec.checker.trace_format import TraceConf, TraceEvent, TraceMessage, read_trace
from etcdspec.checker.trace_order import CausalOrder


def _expand(paths: Sequence[str | Path]) -> list[Path]:
    found: list[Path] = []
    for path in map(Path, paths):
        found.extend(sorted(path.glob("*.trace.ndjson")) if path.is_dir() else [path])
    return found


def diagram_from_traces(paths: Sequence[str | Path]) -> Diagram:
    """See the module docstring."""
    files = _expand(paths)
    result = check_traces(files)
    traces = [read_trace(path) for path in files]
    failure = result.failure
    wins = {election.position: election.describe() for election in result.elections}
    names = {events[0].node: f"n{position}" for position, events in enumerate(traces, start=1)}
    lifelines = tuple(names.values())
    logs: dict[str, list[int]] = {name: [] for name in lifelines}
    changes: dict[str, dict[int, str]] = {name: {} for name in lifelines}  # index -> mark
    confs: dict[str, TraceConf | None] = {name: None for name in lifelines}
    started: set[str] = set()
    current = {name: NodeState(role="follower", term=0) for name in lifelines}
    extra: list[tuple[str, ...]] = [()]
    labels: list[str] = ["before the traces"]
    actors: list[str | None] = [None]
    states = [dict(current)]
    messages: list[dict[str, Any]] = []
    waiting: dict[tuple[Any, ...], list[int]] = {}
    order = CausalOrder(traces)
    for position, event in enumerate(order, start=1):
        name = names.get(event.node, f"n{event.node}")
        restart = event.event == "start" and name in started
        _follow(event, name, logs, started, messages, waiting, position, names)
        step_notes = [f"{name} restarted (crashed before)"] if restart else []
        step_notes += _conf_notes(event, name, changes, confs, names)
        if position in wins:
            step_notes.append(wins[position])
        current[name] = NodeState(
            role=event.role,
            term=event.term,
            vote=_name(names, event.vote) if event.vote else "",
            log=tuple(
                f"{term}:{changes[name][index]}" if index in changes[name] else str(term)
                for index, term in enumerate(logs[name], start=1)
            ),
            commit=event.commit,
            up=True,
        )
        extra.append(tuple(step_notes))
        labels.append(_label(event, names))
        actors.append(name)
        states.append(dict(current))
        if failure is not None and position == failure.position:
            break
    violation = (failure.position, failure.rule) if failure is not None else None
    steps = build_steps(labels, actors, states, violation, extra)
    title = (
        f"{failure.rule} broken at event {failure.position}"
        if failure is not None
        else "traces replayed without a broken rule"
    )
    notes = (failure.explanation,) if failure is not None else ()
    return Diagram(
        title,
        "server Raft traces",
        lifelines,
        steps,
        tuple(
            Message(
                m["label"],
                m["from"],
                m["to"],
                m["sent"],
                m.get("fate", "in flight"),
                m.get("ended"),
            )
            for m in messages
        ),
        failure.rule if failure is not None else "",
        True,
        notes,
    )


def _name(names: dict[int, str], node: int) -> str:
    return names.get(node, f"n{node}")


def _ordered(names: dict[int, str], nodes: frozenset[int]) -> list[str]:
    """The members' names in lifeline order (n1, n2, …), untraced ids after them."""
    order = {node: position for position, node in enumerate(names)}
    return [_name(names, n) for n in sorted(nodes, key=lambda n: (order.get(n, len(order)), n))]


_CHANGE_MARKS = {
    "ADD_NODE": "+",
    "ADD_LEARNER_NODE": "+learner ",
    "REMOVE_NODE": "-",
    "UPDATE_NODE": "~",
}
_VERBS = {"persist": "persists", "apply": "applies"}


def _conf_notes(
    event: TraceEvent,
    name: str,
    changes: dict[str, dict[int, str]],
    confs: dict[str, TraceConf | None],
    names: dict[int, str],
) -> list[str]:
    """Mark the member's conf change entries in its log; note them and a new configuration."""
    notes = []
    for change in event.conf_changes:
        mark = _CHANGE_MARKS.get(change.type, f"{change.type} ") + _name(names, change.node)
        changes[name][change.index] = mark
        verb = _VERBS.get(event.event, event.event)
        notes.append(f"{name} {verb} conf change {change.index}: {mark}")
    if event.conf is not None and event.conf != confs[name]:
        if confs[name] is not None or event.event != "start" or event.conf.learners:
            voters = ",".join(_ordered(names, event.conf.voters))
            learners = ",".join(_ordered(names, event.conf.learners))
            notes.append(
                f"{name} configuration: voters {voters or 'none'}"
                + (f", learners {learners}" if learners else "")
            )
        confs[name] = event.conf
    return notes


def _label(event: TraceEvent, names: dict[int, str]) -> str:
    what = event.event
    if event.message is not None:
        message = event.message
        ends = f"{message.from_}->{message.to}"
        what += " " + message.describe().replace(
            ends, f"{_name(names, message.from_)}->{_name(names, message.to)}"
        )
    if event.entries:
        what += " entries " + ",".join(f"{i}@{t}" for i, t in event.entries)
    if event.index is not None:
        what += f" index {event.index}"
    return f"{what} ({Path(event.path).name}:{event.line})"


def _follow(
    event: TraceEvent,
    name: str,
    logs: dict[str, list[int]],
    started: set[str],
    messages: list[dict[str, Any]],
    waiting: dict[tuple[Any, ...], list[int]],
    position: int,
    names: dict[int, str],
) -> None:
    """One event's effect on the logs and the messages."""
    if event.event == "start":
        started.add(name)
        # A restart reloads what was durable: the log up to the traced last index.
        del logs[name][event.last_index :]
    elif event.event == "persist" and event.entries:
        first = event.entries[0][0]
        del logs[name][first - 1 :]
        logs[name].extend(term for _, term in event.entries)
    elif event.event in ("snapshot", "restore") and event.index is not None:
        logs[name][: event.index] = [event.last_term] * min(event.index, len(logs[name]))
    message = event.message
    if message is None:
        return
    if event.event == "send":
        waiting.setdefault(message.key(), []).append(len(messages))
        label = _message_label(message)
        messages.append(
            {
                "label": label,
                "from": _name(names, message.from_),
                "to": _name(names, message.to),
                "sent": position,
            }
        )
    elif event.event == "receive":
        queue = waiting.get(message.key())
        if queue:
            messages[queue.pop(0)].update(fate="delivered", ended=position)
        else:  # its send was not traced (a killed sender's last lines)
            label = _message_label(message)
            messages.append(
                {
                    "label": label,
                    "from": _name(names, message.from_),
                    "to": _name(names, message.to),
                    "sent": position,
                    "fate": "delivered",
                    "ended": position,
                }
            )


def _message_label(message: TraceMessage) -> str:
    return message.describe().replace(f" {message.from_}->{message.to}", "")

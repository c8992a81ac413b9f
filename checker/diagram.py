"""A counterexample as a message-sequence diagram: lifelines, messages, states per step.

This is the pure part of the diagrams (the page is checker/diagram_page.py); the readers
that make one are checker/diagram_itf.py (ITF: our model's, our BMC's, Apalache's and
Quint's) and checker/diagram_trace.py (the reference server's Raft traces).

Contract
- A `Diagram` is a run of `Step`s, step 0 being the initial state. Every step holds
  every lifeline's `NodeState` after it (role, term, vote, log as entry texts, commit
  index, up or crashed), the notes it made (role and term changes, crashes, restarts)
  and, at the step where it breaks, the violated invariant's name.
- A `Message` is one message instance: sent at one step from one lifeline, then
  delivered to one lifeline at a later (or the same) step, dropped at a step, or still
  in flight at the end. A receiver of None means a broadcast or an unknown destination.
- `recognised` is False when the reader did not find a cluster in the input; the
  diagram then has no lifelines and each step carries the raw variables (`raw`), and
  `notes` says what was expected.
- `describe()` is the one canonical text; `to_json()` is what the page draws (format 1).
- `MessageBag` turns the multiset of messages in flight per state into Message values:
  a count that grows is a send, one that shrinks a delivery when the step's action
  delivers that message, else a drop. Frozen values; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DIAGRAM_FORMAT = 1


@dataclass(frozen=True)
class NodeState:
    """One lifeline's state after a step."""

    role: str = ""
    term: int | None = None
    vote: str = ""
    log: tuple[str, ...] = ()
    commit: int | None = None
    up: bool = True

    def describe(self) -> str:
        parts = [self.role or "?"]
        if self.term is not None:
            parts.append(f"term {self.term}")
        if self.vote:
            parts.append(f"vote {self.vote}")
        if self.commit is not None:
            parts.append(f"commit {self.commit}")
        parts.append("log [" + ", ".join(self.log) + "]")
        if not self.up:
            parts.append("DOWN")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "term": self.term,
            "vote": self.vote,
            "log": list(self.log),
            "commit": self.commit,
            "up": self.up,
        }


@dataclass(frozen=True)
class Message:
    """One message instance, from its send to its delivery or drop."""

    label: str
    sender: str
    receiver: str | None
    sent: int
    fate: str  # "delivered", "dropped" or "in flight"
    ended: int | None = None  # the step that delivered or dropped it

    def describe(self) -> str:
        to = self.receiver or "*"
        end = f" at step {self.ended}" if self.ended is not None else ""
        label = self.label.removeprefix(f"{self.sender}→{to} ")
        return f"{self.sender}→{to} {label}: sent at step {self.sent}, {self.fate}{end}"

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "from": self.sender,
            "to": self.receiver,
            "sent": self.sent,
            "fate": self.fate,
            "ended": self.ended,
        }


@dataclass(frozen=True)
class Step:
    """The state after one step (step 0: the initial state)."""

    number: int
    label: str
    actor: str | None
    nodes: Mapping[str, NodeState]
    notes: tuple[str, ...] = ()
    violation: str = ""
    raw: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        actor = f" [{self.actor}]" if self.actor else ""
        lines = [f"{self.number:3d}. {self.label or 'initial state'}{actor}"]
        lines += [f"       {note}" for note in self.notes]
        if self.violation:
            lines.append(f"       VIOLATED: {self.violation}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "label": self.label,
            "actor": self.actor,
            "nodes": {name: state.to_json() for name, state in self.nodes.items()},
            "notes": list(self.notes),
            "violation": self.violation,
            "raw": dict(self.raw),
        }


@dataclass(frozen=True)
class Diagram:
    """A counterexample to draw; see the module docstring."""

    title: str
    source: str  # what kind of input: "model ITF", "BMC ITF", "trace", ...
    lifelines: tuple[str, ...]
    steps: tuple[Step, ...]
    messages: tuple[Message, ...]
    invariant: str = ""
    recognised: bool = True
    notes: tuple[str, ...] = ()

    @property
    def violation_step(self) -> int | None:
        return next((s.number for s in self.steps if s.violation), None)

    def describe(self) -> str:
        lines = [
            f"Diagram: {self.title} ({self.source}), {len(self.steps) - 1} step(s), "
            f"lifelines {', '.join(self.lifelines) or 'none'}, {len(self.messages)} message(s)"
        ]
        lines += [f"  note: {note}" for note in self.notes]
        lines += [step.describe() for step in self.steps]
        lines += [f"  message {m.describe()}" for m in self.messages]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": DIAGRAM_FORMAT,
            "title": self.title,
            "source": self.source,
            "lifelines": list(self.lifelines),
            "invariant": self.invariant,
            "violation_step": self.violation_step,
            "recognised": self.recognised,
            "notes": list(self.notes),
            "steps": [step.to_json() for step in self.steps],
            "messages": [m.to_json() for m in self.messages],
        }


def state_notes(before: Mapping[str, NodeState], after: Mapping[str, NodeState]) -> list[str]:
    """What changed between two steps that a reader looks for: crashes, restarts, roles,
    terms, commits (logs are drawn beside the lifelines)."""
    notes = []
    for name, new in after.items():
        old = before.get(name)
        if old is None:
            continue
        if old.up and not new.up:
            notes.append(f"{name} crashed")
        elif new.up and not old.up:
            notes.append(f"{name} restarted")
        if old.role != new.role and new.up:
            notes.append(f"{name}: {old.role} → {new.role}")
        if old.term != new.term:
            notes.append(f"{name}: term {old.term} → {new.term}")
        if old.commit != new.commit:
            notes.append(f"{name}: commit {old.commit} → {new.commit}")
    return notes


@dataclass
class MessageBag:
    """Messages in flight per state → Message instances (see the module docstring)."""

    endpoints: Callable[[str], tuple[str, str | None]]
    delivers: Callable[[str, str], bool]  # (action label, message key) -> is a delivery
    outstanding: dict[str, list[int]] = field(default_factory=dict)  # key -> index in sent
    sent: list[dict[str, Any]] = field(default_factory=list)
    previous: dict[str, int] = field(default_factory=dict)

    def step(self, number: int, label: str, bag: Mapping[str, int]) -> None:
        for key in sorted(set(bag) | set(self.previous)):
            grew = bag.get(key, 0) - self.previous.get(key, 0)
            for _ in range(grew):
                sender, receiver = self.endpoints(key)
                self.outstanding.setdefault(key, []).append(len(self.sent))
                self.sent.append(
                    {"label": key, "sender": sender, "receiver": receiver, "sent": number}
                )
            for _ in range(-grew):
                waiting = self.outstanding.get(key)
                if not waiting:  # it was in flight before the trace began
                    sender, receiver = self.endpoints(key)
                    self.sent.append(
                        {"label": key, "sender": sender, "receiver": receiver, "sent": number}
                    )
                    waiting = [len(self.sent) - 1]
                index = waiting.pop(0)
                fate = "delivered" if self.delivers(label, key) else "dropped"
                self.sent[index].update(fate=fate, ended=number)
        self.previous = dict(bag)

    def messages(self) -> tuple[Message, ...]:
        return tuple(
            Message(
                label=m["label"],
                sender=m["sender"],
                receiver=m["receiver"],
                sent=m["sent"],
                fate=m.get("fate", "in flight"),
                ended=m.get("ended"),
            )
            for m in self.sent
        )


def build_steps(
    labels: Sequence[str],
    actors: Sequence[str | None],
    states: Sequence[Mapping[str, NodeState]],
    violation: tuple[int, str] | None,
    extra_notes: Sequence[tuple[str, ...]] = (),
) -> tuple[Step, ...]:
    """Steps from each state's label, actor and node states; `violation` is (step, name);
    `extra_notes` per step, when given, come before the notes found by comparing states."""
    steps = []
    for number, (label, actor, nodes) in enumerate(zip(labels, actors, states, strict=True)):
        notes = list(extra_notes[number]) if extra_notes else []
        notes += state_notes(states[number - 1], nodes) if number else []
        broken = violation[1] if violation is not None and violation[0] == number else ""
        steps.append(Step(number, label, actor, dict(nodes), tuple(notes), broken))
    return tuple(steps)

"""The causal order of several members' traces: one sequence of events to replay.

Contract
- Iterating a `CausalOrder(traces)` yields every event once: each member's events in
  file order, and a `receive` only after the matching `send` (the same message on the
  wire, `TraceMessage.key()`; duplicates are counted as a multiset). A send counts as
  sent once the consumer asks for the next event (a replay that stops at a failure
  stops the iteration). Among members that can move, the lowest-numbered goes first.
- A receive whose send was never traced (the sender was killed before it flushed its
  trace, or its file was not given) is let through only when nothing else can move;
  `unmatched` counts them and `matched` the receives paired with a send.
- When every waiting receive's send is still ahead, the traces cannot be ordered: the
  iteration ends early with `stuck` = (the first such receive, the later send it
  needs). Otherwise `stuck` stays None.
- No I/O; the traces are read, never changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from etcdspec.checker.trace_format import TraceEvent


class CausalOrder:
    """One merge of the traces; see the module docstring."""

    def __init__(self, traces: Sequence[list[TraceEvent]]) -> None:
        self.traces = traces
        self.matched = 0
        self.unmatched = 0
        self.stuck: tuple[TraceEvent, TraceEvent] | None = None

    def __iter__(self) -> Iterator[TraceEvent]:
        traces = self.traces
        heads = [0] * len(traces)
        pending: Counter[tuple[Any, ...]] = Counter()
        future: Counter[tuple[Any, ...]] = Counter(
            e.message.key() for t in traces for e in t if e.message and e.event == "send"
        )
        remaining = sum(len(t) for t in traces)
        while remaining:
            moved = False
            for member, events in enumerate(traces):
                if heads[member] >= len(events):
                    continue
                event = events[heads[member]]
                if event.event == "receive":
                    assert event.message is not None
                    key = event.message.key()
                    if pending[key] <= 0:
                        continue
                    pending[key] -= 1
                    self.matched += 1
                elif event.event == "send":
                    assert event.message is not None
                    future[event.message.key()] -= 1
                yield event
                if event.event == "send":
                    assert event.message is not None
                    pending[event.message.key()] += 1
                heads[member] += 1
                remaining -= 1
                moved = True
            if not moved:
                # Every member waits on a receive. One whose send is nowhere ahead was
                # sent by a member whose last lines were lost (kill -9) or whose trace was
                # not given: let it through. If every one is sent later, a message was
                # received before it was sent.
                blocked = [m for m, ev in enumerate(traces) if heads[m] < len(ev)]
                lost = [m for m in blocked if future[self._head_key(m, heads)] <= 0]
                if not lost:
                    self.stuck = self._later_send(blocked[0], heads)
                    return
                self.unmatched += 1
                yield traces[lost[0]][heads[lost[0]]]
                heads[lost[0]] += 1
                remaining -= 1

    def _head_key(self, member: int, heads: list[int]) -> tuple[Any, ...]:
        message = self.traces[member][heads[member]].message
        assert message is not None
        return message.key()

    def _later_send(self, member: int, heads: list[int]) -> tuple[TraceEvent, TraceEvent]:
        event = self.traces[member][heads[member]]
        key = self._head_key(member, heads)
        send = next(
            e
            for m, events in enumerate(self.traces)
            for e in events[heads[m] :]
            if e.event == "send" and e.message is not None and e.message.key() == key
        )
        return event, send

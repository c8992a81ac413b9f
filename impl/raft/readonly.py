"""The leader's queue of ReadIndex requests waiting for a heartbeat quorum (Raft §6.4).

A request records the commit index at the time it arrived. It is confirmed when a
quorum of voters (the leader included) has answered a heartbeat that carried its
`context`; confirming a request also confirms every request queued before it, since the
leader was still leader when they were queued. Contexts are the callers' request ids and
must be unique among pending requests (a duplicate is rejected by the caller's driver).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from etcdspec.impl.raft.messages import Message


@dataclass
class ReadIndexStatus:
    request: Message
    index: int
    acks: set[int] = field(default_factory=set)


class ReadOnly:
    def __init__(self) -> None:
        self._pending: dict[bytes, ReadIndexStatus] = {}
        self._queue: list[bytes] = []

    def add_request(self, index: int, request: Message) -> bool:
        """Queue a request at commit `index`; False if its context is already pending."""
        context = request.context
        if context in self._pending:
            return False
        self._pending[context] = ReadIndexStatus(request, index)
        self._queue.append(context)
        return True

    def recv_ack(self, node_id: int, context: bytes) -> set[int]:
        """Record a heartbeat answer for `context`; the nodes that acknowledged it."""
        status = self._pending.get(context)
        if status is None:
            return set()
        status.acks.add(node_id)
        return status.acks

    def advance(self, context: bytes) -> list[ReadIndexStatus]:
        """Pop and return every request up to and including `context`, oldest first."""
        if context not in self._pending:
            return []
        position = self._queue.index(context)
        done = self._queue[: position + 1]
        del self._queue[: position + 1]
        return [self._pending.pop(c) for c in done]

    def last_pending_context(self) -> bytes | None:
        return self._queue[-1] if self._queue else None

    def __len__(self) -> int:
        return len(self._queue)

"""The simulated network: a multiset of messages in flight, and partitions.

Contract: a `Network` is an immutable value. Messages are kept in the order they were
sent (deterministic for a given run); any message may be delivered next (reordering),
dropped or duplicated, so the order carries no meaning: the cluster's fingerprints treat
the messages as a multiset (sorted by `Message.sort_key()`). A partition is a tuple of disjoint groups of node
ids; a message is deliverable only between nodes of one group. Partitioning does not
destroy messages: they wait until the partition heals (or are dropped).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from etcdspec.model.raft_messages import Message, node_name


class Network(NamedTuple):
    messages: tuple[Message, ...] = ()
    groups: tuple[frozenset[int], ...] = ()  # () = fully connected

    def send(self, messages: Iterable[Message]) -> Network:
        new = tuple(messages)
        if not new:
            return self
        return Network(self.messages + new, self.groups)

    def remove(self, index: int) -> Network:
        return Network(self.messages[:index] + self.messages[index + 1 :], self.groups)

    def duplicate(self, index: int) -> Network:
        return self.send((self.messages[index],))

    def index_of(self, message: Message) -> int:
        """The position of one copy of `message`; ValueError if it is not in flight."""
        return self.messages.index(message)

    def connected(self, src: int, dst: int) -> bool:
        if not self.groups:
            return True
        for group in self.groups:
            if src in group:
                return dst in group
        return False

    def partition(self, groups: Iterable[Iterable[int]]) -> Network:
        canonical = tuple(sorted((frozenset(g) for g in groups), key=lambda g: sorted(g)))
        return self._replace(groups=canonical)

    def heal(self) -> Network:
        return self._replace(groups=())

    def describe(self) -> str:
        parts = [f"{len(self.messages)} in flight"]
        if self.groups:
            text = " | ".join(
                ",".join(node_name(n) for n in sorted(group)) for group in self.groups
            )
            parts.append(f"partition {text}")
        lines = [m.describe() for m in self.messages]
        return "; ".join(parts) + "".join(f"\n  {line}" for line in lines)

"""What a leader knows of each follower's log, and the flow control of replication.

A follower's `Progress` is in one of three states (etcd raft's tracker):
- PROBE: the leader does not know where the follower's log ends; it sends one MsgApp
  and waits for the answer (or a heartbeat response) before sending the next.
- REPLICATE: the follower is caught up; MsgApps are pipelined, `next` advances
  optimistically, and at most `max_inflight` unacknowledged MsgApps are outstanding.
- SNAPSHOT: the follower needs entries that were compacted away; a snapshot was sent
  and nothing else is sent until it is acknowledged, reported, or `snapshot_timeout`
  ticks pass (then the leader probes again).

Transitions happen only through the `become_*` methods; `check()` states the invariant
`match < next`.
"""

from __future__ import annotations

import enum
from collections import deque

from etcdspec.impl.raft.messages import InvariantViolation


class ProgressState(enum.Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


class Inflights:
    """The last indices of MsgApps sent but not yet acknowledged, oldest first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._indices: deque[int] = deque()

    def add(self, last_index: int) -> None:
        if self.full():
            raise InvariantViolation("add to full inflights")
        self._indices.append(last_index)

    def free_le(self, index: int) -> None:
        while self._indices and self._indices[0] <= index:
            self._indices.popleft()

    def free_first(self) -> None:
        if self._indices:
            self._indices.popleft()

    def reset(self) -> None:
        self._indices.clear()

    def full(self) -> bool:
        return len(self._indices) >= self.capacity

    def __len__(self) -> int:
        return len(self._indices)


class Progress:
    def __init__(self, next_index: int, max_inflight: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.snapshot_elapsed = 0
        self.recent_active = False
        self.inflights = Inflights(max_inflight)

    def _reset(self, state: ProgressState) -> None:
        self.state = state
        self.probe_sent = False
        self.pending_snapshot = 0
        self.snapshot_elapsed = 0
        self.inflights.reset()

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            pending = self.pending_snapshot
            self._reset(ProgressState.PROBE)
            self.next = max(self.match + 1, pending + 1)
        else:
            self._reset(ProgressState.PROBE)
            self.next = self.match + 1

    def become_replicate(self) -> None:
        self._reset(ProgressState.REPLICATE)
        self.next = self.match + 1

    def become_snapshot(self, snapshot_index: int) -> None:
        self._reset(ProgressState.SNAPSHOT)
        self.pending_snapshot = snapshot_index

    def maybe_update(self, index: int) -> bool:
        """A successful MsgAppResp for `index`; False if it is stale."""
        updated = False
        if self.match < index:
            self.match = index
            updated = True
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        return updated

    def maybe_decrease_to(self, rejected: int, hint: int) -> bool:
        """A rejected MsgApp at `rejected`; the follower's last index is `hint`."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, hint + 1), self.match + 1)
        self.probe_sent = False
        return True

    def sent_entries(self, last_index: int | None) -> None:
        """Record a MsgApp that was sent; `last_index` is its last entry (None if empty)."""
        if self.state is ProgressState.REPLICATE:
            if last_index is not None:
                self.next = last_index + 1
                self.inflights.add(last_index)
        elif self.state is ProgressState.PROBE:
            self.probe_sent = True

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return self.inflights.full()
        return True

    def check(self) -> None:
        if self.match >= self.next:
            raise InvariantViolation(f"progress match {self.match} >= next {self.next}")

    def describe(self) -> str:
        extra = f" pending_snapshot={self.pending_snapshot}" if self.pending_snapshot else ""
        return (
            f"{self.state.value} match={self.match} next={self.next}"
            f" inflight={len(self.inflights)}{extra}"
        )

"""The Raft log of one node, in memory: a snapshot point, the entries after it, and marks.

Indices: `snapshot.meta.index` (the compaction point, `first_index() - 1`) <= `applied`
<= `committed` <= `last_index()`. Entries in `(snapshot index, last_index()]` are held
in `entries`. `stable_index` is the last index known to be persisted; entries after it
(and a restored snapshot not yet persisted, `pending_snapshot`) are "unstable" and go
out in the next Ready. A conflicting suffix is replaced by `append_after_conflict`,
which lowers `stable_index` so the replacement is persisted again (the persisted copy
of the suffix is overwritten: storage must truncate at the first index it receives).

`check()` states the invariants this data must keep; the core and the tests call it.
"""

from __future__ import annotations

from collections.abc import Sequence

from etcdspec.impl.raft.messages import Entry, InvariantViolation, Snapshot, SnapshotMeta


class RaftLog:
    offset: int  # the snapshot's index (`first_index() - 1`), kept with `snapshot`

    def __init__(
        self, snapshot: Snapshot, entries: Sequence[Entry], committed: int, applied: int
    ) -> None:
        self.snapshot = snapshot
        self.entries: list[Entry] = list(entries)
        self.committed = committed
        self.applied = applied
        self.stable_index = self.last_index()
        self.pending_snapshot: Snapshot | None = None
        self.check()

    # --- positions ---------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @snapshot.setter
    def snapshot(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self.offset = snapshot.meta.index  # read on every position check: a plain field

    def first_index(self) -> int:
        return self.offset + 1

    def last_index(self) -> int:
        return self.offset + len(self.entries)

    def term(self, index: int) -> int | None:
        """The term of the entry at `index`, or None if compacted away or beyond the end."""
        if index == self.offset:
            return self.snapshot.meta.term
        if self.offset < index <= self.last_index():
            return self.entries[index - self.offset - 1].term
        return None

    def last_term(self) -> int:
        term = self.term(self.last_index())
        assert term is not None
        return term

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft §5.4.1: a candidate's log is at least as up to date as this one."""
        mine = self.last_term()
        return last_term > mine or (last_term == mine and last_index >= self.last_index())

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The largest index <= `index` whose term is <= `term`, with that term.

        Stops at the snapshot point (whose entries are committed, so they match any
        leader's). Used for rejection hints so that backtracking skips whole terms.
        """
        index = min(index, self.last_index())
        while index > self.offset:
            entry_term = self.term(index)
            assert entry_term is not None
            if entry_term <= term:
                return index, entry_term
            index -= 1
        if index < self.offset:
            return index, 0
        return index, self.snapshot.meta.term

    def slice(self, low: int, high: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries [low, high); at least one entry if any, then up to max_bytes of data."""
        if low < self.first_index() or high > self.last_index() + 1:
            raise InvariantViolation(
                f"slice [{low}, {high}) outside the log [{self.first_index()}, {self.last_index()}]"
            )
        out: list[Entry] = []
        size = 0
        for entry in self.entries[low - self.offset - 1 : high - self.offset - 1]:
            size += len(entry.data)
            if out and max_bytes is not None and size > max_bytes:
                break
            out.append(entry)
        return out

    # --- changes -----------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries that start right after the last index (the leader's own)."""
        for entry in entries:
            if entry.index != self.last_index() + 1:
                raise InvariantViolation(
                    f"append of {entry.describe()} after last index {self.last_index()}"
                )
            self.entries.append(entry)

    def find_conflict(self, entries: Sequence[Entry]) -> int:
        """The index of the first entry not already in the log with that term, or 0."""
        for entry in entries:
            if not self.match_term(entry.index, entry.term):
                return entry.index
        return 0

    def append_after_conflict(self, entries: Sequence[Entry]) -> None:
        """Follower append (Raft §5.3): drop the conflicting suffix, append the rest."""
        conflict = self.find_conflict(entries)
        if conflict == 0:
            return
        if conflict <= self.committed:
            raise InvariantViolation(
                f"entry {conflict} conflicts with a committed entry (commit {self.committed})"
            )
        if conflict <= self.offset:
            raise InvariantViolation(f"entry {conflict} conflicts below the snapshot {self.offset}")
        del self.entries[conflict - self.offset - 1 :]
        self.stable_index = min(self.stable_index, conflict - 1)
        first = entries[0].index
        self.append(entries[conflict - first :])

    def commit_to(self, index: int) -> bool:
        if index <= self.committed:
            return False
        if index > self.last_index():
            raise InvariantViolation(f"commit to {index} beyond the last index {self.last_index()}")
        self.committed = index
        return True

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the whole log by a received snapshot (InstallSnapshot)."""
        self.snapshot = snapshot
        self.entries = []
        self.committed = snapshot.meta.index
        self.stable_index = snapshot.meta.index
        self.pending_snapshot = snapshot

    def compact(self, snapshot: Snapshot) -> None:
        """Drop the entries covered by a local snapshot taken at an applied index."""
        index = snapshot.meta.index
        if index <= self.offset:
            raise InvariantViolation(
                f"compaction to {index} is not past the snapshot {self.offset}"
            )
        if index > self.applied:
            raise InvariantViolation(
                f"compaction to {index} is beyond the applied index {self.applied}"
            )
        if self.term(index) != snapshot.meta.term:
            raise InvariantViolation(
                f"snapshot term {snapshot.meta.term} at {index} differs from the log's {self.term(index)}"
            )
        del self.entries[: index - self.offset]
        self.snapshot = snapshot

    def unstable_entries(self) -> list[Entry]:
        start = max(self.stable_index, self.offset) + 1
        return self.slice(start, self.last_index() + 1) if start <= self.last_index() else []

    def stable_to(self, index: int, term: int) -> None:
        """Entries up to (index, term) are persisted, if the log still holds that entry."""
        if self.match_term(index, term) and index > self.stable_index:
            self.stable_index = index

    def snapshot_persisted(self, snapshot: Snapshot) -> None:
        if self.pending_snapshot is not None and self.pending_snapshot.meta == snapshot.meta:
            self.pending_snapshot = None
            self.applied = max(self.applied, snapshot.meta.index)

    def next_committed(self, max_index: int) -> list[Entry]:
        """Committed entries after `applied` up to min(committed, max_index)."""
        low = max(self.applied, self.offset) + 1
        high = min(self.committed, max_index)
        return self.slice(low, high + 1) if low <= high else []

    def applied_to(self, index: int) -> None:
        if index > self.committed:
            raise InvariantViolation(f"applied {index} beyond the commit index {self.committed}")
        self.applied = max(self.applied, index)

    # --- invariants --------------------------------------------------------------------
    def check(self) -> None:
        """Raise InvariantViolation if the log's own invariants do not hold."""
        if not self.offset <= self.committed <= self.last_index():
            raise InvariantViolation(
                f"commit {self.committed} outside [{self.offset}, {self.last_index()}]"
            )
        if self.applied > self.committed:
            raise InvariantViolation(f"applied {self.applied} > commit {self.committed}")
        previous_term = self.snapshot.meta.term
        for position, entry in enumerate(self.entries):
            if entry.index != self.offset + position + 1:
                raise InvariantViolation(f"entry {entry.describe()} out of place at {position}")
            if entry.term < previous_term:
                raise InvariantViolation(f"entry {entry.describe()} has a lower term than before")
            previous_term = entry.term

    def describe(self) -> str:
        return (
            f"log({self.snapshot.meta.term}/{self.offset}..{self.last_index()}"
            f" commit={self.committed} applied={self.applied} stable={self.stable_index})"
        )


def empty_snapshot(voters: tuple[int, ...]) -> Snapshot:
    return Snapshot(SnapshotMeta(0, 0, voters))

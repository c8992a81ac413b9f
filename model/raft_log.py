"""A Raft log as an immutable value: a snapshot (the compacted prefix) plus entries.

Contract: indices start at 1; entry i (i > snapshot.last_index) is `entries[i - snapshot.last_index
- 1]`. Index snapshot.last_index has term snapshot.last_term; indices below it are compacted and have
no known term (`term_at` returns None). Every operation returns a new RaftLog and leaves
the old one intact, so logs are shared freely between cluster states.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from etcdspec.model.raft_messages import EMPTY_SNAPSHOT, Entry, Snapshot


class RaftLog(NamedTuple):
    snapshot: Snapshot = EMPTY_SNAPSHOT
    entries: tuple[Entry, ...] = ()

    @property
    def first_index(self) -> int:
        """The first index still held as an entry (snapshot.last_index + 1)."""
        return self.snapshot.last_index + 1

    @property
    def last_index(self) -> int:
        return self.snapshot.last_index + len(self.entries)

    @property
    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snapshot.last_term

    def term_at(self, index: int) -> int | None:
        """The term of entry `index`; 0 for index 0; None if compacted or beyond the end."""
        offset = index - self.snapshot.last_index
        if offset == 0:
            return self.snapshot.last_term
        if offset < 0 or offset > len(self.entries):
            return None
        return self.entries[offset - 1].term

    def matches(self, index: int, term: int) -> bool:
        return self.term_at(index) == term

    def entry(self, index: int) -> Entry:
        return self.entries[index - self.snapshot.last_index - 1]

    def slice_from(self, index: int) -> tuple[Entry, ...]:
        """Entries index..last (index must be > snapshot.last_index)."""
        return self.entries[index - self.snapshot.last_index - 1 :]

    def slice(self, lo: int, hi: int) -> tuple[Entry, ...]:
        """Entries lo..hi inclusive (lo must be > snapshot.last_index)."""
        base = self.snapshot.last_index + 1
        return self.entries[lo - base : hi - base + 1]

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft §5.4.1: a candidate's log (last_index/last_term) is at least as up to date."""
        own_term = self.last_term
        return last_term > own_term or (last_term == own_term and last_index >= self.last_index)

    def append(self, entry: Entry) -> RaftLog:
        return RaftLog(self.snapshot, (*self.entries, entry))

    def merge(self, prev_index: int, entries: tuple[Entry, ...], truncate: bool = True) -> RaftLog:
        """Place `entries` after prev_index (which must match): skip the ones already held,
        truncate at the first conflicting one and append from there.

        With truncate=False (the no_truncate_conflict bug) a conflicting entry is kept and
        only entries beyond the end are appended.
        """
        log = self
        index = prev_index
        for position, entry in enumerate(entries):
            index = prev_index + position + 1
            if index <= log.snapshot.last_index:
                continue
            existing = log.term_at(index)
            if existing is None:
                return RaftLog(log.snapshot, log.entries + entries[position:])
            if existing != entry.term:
                if not truncate:
                    continue
                kept = log.entries[: index - log.snapshot.last_index - 1]
                return RaftLog(log.snapshot, kept + entries[position:])
        return log

    def compact(self, index: int, data: Any, config: Any = None) -> RaftLog:
        """Drop entries up to `index` (held), keeping a snapshot with `data` (and, with
        membership, the configuration as of `index`) in their place."""
        term = self.term_at(index)
        assert term is not None, f"compact at {index}: not held (log {self.describe()})"
        return RaftLog(Snapshot(index, term, data, config), self.slice_from(index + 1))

    def restore(self, snapshot: Snapshot) -> RaftLog:
        """Install a snapshot: keep the suffix after it if the log agrees there, else drop all."""
        if (
            self.matches(snapshot.last_index, snapshot.last_term)
            and snapshot.last_index <= self.last_index
        ):
            return RaftLog(snapshot, self.slice_from(snapshot.last_index + 1))
        return RaftLog(snapshot, ())

    def terms(self) -> tuple[int, ...]:
        return tuple(entry.term for entry in self.entries)

    def describe(self) -> str:
        head = f"[{self.snapshot.describe()}] " if self.snapshot.last_index else ""
        return head + "[" + " ".join(entry.describe() for entry in self.entries) + "]"

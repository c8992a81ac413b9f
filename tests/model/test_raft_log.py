"""RaftLog: AppendEntries placement (skip held entries, truncate at the first conflict),
the up-to-date rule, compaction and snapshot installation."""

from __future__ import annotations

import pytest

from etcdspec.model.raft_log import RaftLog
from etcdspec.model.raft_messages import EMPTY_SNAPSHOT, Entry, Snapshot


def _log(*terms: int, snapshot: Snapshot = EMPTY_SNAPSHOT) -> RaftLog:
    return RaftLog(snapshot, tuple(Entry(t, f"e{t}", None) for t in terms))


def _entries(*terms: int) -> tuple[Entry, ...]:
    return tuple(Entry(t, f"e{t}", None) for t in terms)


@pytest.mark.parametrize(
    ("held", "prev_index", "incoming", "expected"),
    [
        ((), 0, (1, 1), (1, 1)),  # append to an empty log
        ((1, 1), 2, (2,), (1, 1, 2)),  # append at the end
        ((1, 1, 2), 1, (1,), (1, 1, 2)),  # a stale, already-held prefix changes nothing
        ((1, 1, 1), 1, (2,), (1, 2)),  # conflict at 2: truncate there and append
        ((1, 1, 1), 1, (1, 3), (1, 1, 3)),  # skip the held entry, truncate at the conflict
        ((1, 2, 2), 0, (1, 3, 3, 3), (1, 3, 3, 3)),
    ],
)
def test_merge_truncates_at_the_first_conflict(
    held: tuple[int, ...], prev_index: int, incoming: tuple[int, ...], expected: tuple[int, ...]
) -> None:
    merged = _log(*held).merge(prev_index, _entries(*incoming))
    assert merged.terms() == expected


def test_merge_without_truncation_keeps_the_conflicting_entry() -> None:
    # the no_truncate_conflict bug: the follower keeps term 1 at index 2
    merged = _log(1, 1).merge(1, _entries(2, 2), truncate=False)
    assert merged.terms() == (1, 1, 2)


def test_merge_returns_the_same_log_when_nothing_changes() -> None:
    log = _log(1, 2)
    assert log.merge(0, _entries(1, 2)) is log


@pytest.mark.parametrize(
    ("own", "last_index", "last_term", "up_to_date"),
    [
        ((1, 1), 2, 1, True),
        ((1, 1), 1, 1, False),
        ((1, 1), 1, 2, True),
        ((1, 2), 5, 1, False),
        ((), 0, 0, True),
    ],
)
def test_is_up_to_date_compares_last_term_then_length(
    own: tuple[int, ...], last_index: int, last_term: int, up_to_date: bool
) -> None:
    assert _log(*own).is_up_to_date(last_index, last_term) is up_to_date


def test_compaction_keeps_indices_and_terms() -> None:
    log = _log(1, 1, 2).compact(2, "state-after-2")
    assert log.snapshot == Snapshot(2, 1, "state-after-2")
    assert (log.first_index, log.last_index, log.last_term) == (3, 3, 2)
    assert log.term_at(2) == 1 and log.term_at(1) is None and log.term_at(3) == 2
    assert log.slice_from(3) == _entries(2)


@pytest.mark.parametrize(
    ("held", "snapshot", "expected_terms"),
    [
        ((1, 1, 2), Snapshot(2, 1, "s"), (2,)),  # the log agrees at the snapshot: keep the rest
        ((1, 1, 2), Snapshot(2, 3, "s"), ()),  # it disagrees: drop everything
        ((1,), Snapshot(4, 2, "s"), ()),  # the snapshot is beyond the log
    ],
)
def test_restore_keeps_only_an_agreeing_suffix(
    held: tuple[int, ...], snapshot: Snapshot, expected_terms: tuple[int, ...]
) -> None:
    restored = _log(*held).restore(snapshot)
    assert restored.snapshot == snapshot
    assert restored.terms() == expected_terms


def test_describe_is_the_canonical_text() -> None:
    assert _log(1, 2).describe() == "[1:e1 2:e2]"
    assert _log(2, snapshot=Snapshot(3, 1, None)).describe() == "[snapshot 3/1] [2:e2]"

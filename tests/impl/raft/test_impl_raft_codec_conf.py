"""Codec format 2: conf change entries and learners round-trip through messages, the WAL
and snapshot files; what format 1 (the build before configuration changes) wrote still
decodes to the same values (bytes recorded from that build); bad entry types are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from etcdspec.impl.raft.codec import (
    CodecError,
    Reader,
    decode_message,
    encode_entry,
    encode_message,
    encode_snapshot_meta,
    read_entry,
    read_snapshot_meta,
)
from etcdspec.impl.raft.messages import (
    ConfChange,
    ConfChangeType,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
)
from etcdspec.impl.storage import snapfile
from etcdspec.impl.storage.wal import Wal

CC = ConfChange(ConfChangeType.ADD_LEARNER_NODE, 4, b"member 4").encode()
CONF_ENTRY = Entry(3, 9, CC, EntryType.CONF_CHANGE)
META = SnapshotMeta(20, 3, (1, 2, 3), (4, 5))

# Recorded from the format-1 build (main before this change): a MsgSnap, a MsgApp with two
# entries, and a snapshot file, each as that build encoded it.
FORMAT1_SNAP = bytes.fromhex(
    "01090000000000000002000000000000000100000000000000030000000000000000000000000000"
    "00000000000000000014000000000000000000000000000000000001000000000000001400000000"
    "0000000300030000000000000001000000000000000200000000000000030000000000000004626c"
    "6f62"
)
FORMAT1_APP = bytes.fromhex(
    "01030000000000000002000000000000000100000000000000030000000000000002000000000000"
    "00070000000000000006000000000000000000000000000000000200000000000000030000000000"
    "0000080000000161000000000000000300000000000000090000000000"
)
FORMAT1_SNAPFILE = bytes.fromhex(
    "4553534e415001bd5ba4210000000000000014000000000000000300030000000000000001000000"
    "000000000200000000000000030000000000000004626c6f62"
)
OLD_SNAPSHOT = Snapshot(SnapshotMeta(20, 3, (1, 2, 3)), b"blob")


def test_format1_messages_still_decode() -> None:
    assert decode_message(FORMAT1_SNAP) == Message(
        MessageType.SNAP, to=2, from_=1, term=3, commit=20, snapshot=OLD_SNAPSHOT
    )
    assert decode_message(FORMAT1_APP) == Message(
        MessageType.APP,
        to=2,
        from_=1,
        term=3,
        log_term=2,
        index=7,
        commit=6,
        entries=(Entry(3, 8, b"a"), Entry(3, 9, b"")),
    )


def test_format1_snapshot_file_still_loads() -> None:
    assert snapfile.decode(FORMAT1_SNAPFILE, "old.snap") == OLD_SNAPSHOT


def test_what_format1_could_say_is_written_as_format1_bytes() -> None:
    """Normal entries and metadata without learners keep format 1's bytes (only the
    message's version byte changed), so WAL records and snapshot files of a cluster
    without conf changes are byte for byte what the old build wrote."""
    assert encode_message(decode_message(FORMAT1_APP))[1:] == FORMAT1_APP[1:]
    assert encode_message(decode_message(FORMAT1_SNAP))[1:] == FORMAT1_SNAP[1:]
    assert snapfile.encode(OLD_SNAPSHOT) == FORMAT1_SNAPFILE


def test_conf_change_entries_and_learners_round_trip_in_messages() -> None:
    app = Message(
        MessageType.APP,
        to=2,
        from_=1,
        term=3,
        index=8,
        log_term=3,
        entries=(Entry(3, 9, b"x"), CONF_ENTRY, Entry(3, 10, b"")),
    )
    snap = Message(MessageType.SNAP, to=2, from_=1, term=3, snapshot=Snapshot(META, b"db"))
    for message in (app, snap):
        assert decode_message(encode_message(message)) == message


def test_entry_and_meta_round_trip_through_their_readers() -> None:
    reader = Reader(encode_entry(CONF_ENTRY) + encode_entry(Entry(1, 1, b"n")), "test")
    assert (read_entry(reader), read_entry(reader)) == (CONF_ENTRY, Entry(1, 1, b"n"))
    reader.done()
    reader = Reader(encode_snapshot_meta(META), "test")
    assert read_snapshot_meta(reader) == META
    reader.done()


def test_an_unknown_entry_type_is_refused_with_the_entry_named() -> None:
    data = bytearray(encode_entry(CONF_ENTRY))
    data[20] = 7  # the type byte after term, index and the flagged length
    with pytest.raises(CodecError, match="entry 9 has unknown type 7"):
        read_entry(Reader(bytes(data), "test"))


def test_wal_keeps_conf_change_entries_and_learners(tmp_path: Path) -> None:
    before = [Entry(3, i, f"x{i}".encode()) for i in range(1, 9)]
    wal, _ = Wal.open(tmp_path)
    wal.save(HardState(3, 1, 9), [*before, CONF_ENTRY])
    wal.save_snapshot(SnapshotMeta(8, 3, (1, 2, 3), (4,)))
    wal.close()
    wal, state = Wal.open(tmp_path)
    wal.close()
    assert state.entries == (*before, CONF_ENTRY)
    wal, state = Wal.open(tmp_path, snapshot=SnapshotMeta(8, 3, (1, 2, 3), (4,)))
    wal.close()
    assert state.snapshot == SnapshotMeta(8, 3, (1, 2, 3), (4,))
    assert state.entries == (CONF_ENTRY,)


def test_snapshot_file_keeps_learners(tmp_path: Path) -> None:
    snapshot = Snapshot(META, b"state")
    snapfile.save(tmp_path, snapshot)
    loaded = snapfile.load_newest(tmp_path)
    assert loaded is not None and loaded.snapshot == snapshot

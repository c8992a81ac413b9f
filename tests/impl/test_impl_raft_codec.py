"""raft_codec v1: every message kind round-trips, one table of (value, bytes) pins the
layout, and malformed input is refused with the field and offset named."""

from __future__ import annotations

import pytest
from etcdspec.impl.raft_codec import CodecError, decode_message, encode_message
from etcdspec.impl.raft_messages import Entry, Message, MessageType, Snapshot, SnapshotMeta

SAMPLES = [
    Message(
        MessageType.APP,
        to=2,
        from_=1,
        term=3,
        log_term=2,
        index=7,
        commit=6,
        entries=(Entry(3, 8, b"a"), Entry(3, 9, b"")),
    ),
    Message(MessageType.APP_RESP, to=1, from_=2, term=3, index=7, reject=True, reject_hint=5),
    Message(
        MessageType.VOTE, to=3, from_=1, term=4, log_term=3, index=9, context=b"CampaignTransfer"
    ),
    Message(
        MessageType.SNAP,
        to=2,
        from_=1,
        term=3,
        snapshot=Snapshot(SnapshotMeta(20, 3, (1, 2, 3)), b"\x00\x01blob"),
    ),
    Message(MessageType.READ_INDEX_RESP, to=2, from_=1, term=3, index=12, context=b"req-1"),
] + [Message(t, to=1, from_=2, term=1) for t in MessageType]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: m.describe())
def test_every_message_round_trips(message: Message) -> None:
    assert decode_message(encode_message(message)) == message


def test_layout_is_pinned() -> None:
    m = Message(MessageType.HEARTBEAT, to=2, from_=1, term=5, commit=4, context=b"r")
    assert encode_message(m).hex() == (
        "01"
        "0a"
        "0000000000000002"
        "0000000000000001"
        "0000000000000005"
        "0000000000000000"
        "0000000000000000"
        "0000000000000004"
        "00"
        "0000000000000000"
        "00000001"
        "72"
        "00000000"
        "00"
    )


@pytest.mark.parametrize(
    "data,problem",
    [
        (b"", "version needs 1 bytes at offset 0"),
        (b"\x02" + bytes(70), "format version 2"),
        (encode_message(SAMPLES[0])[:-3], "truncated"),
        (encode_message(SAMPLES[0]) + b"\x00", "trailing bytes"),
        (b"\x01\x63" + encode_message(SAMPLES[1])[2:], "unknown message type 99"),
    ],
)
def test_malformed_input_is_refused_with_a_reason(data: bytes, problem: str) -> None:
    with pytest.raises(CodecError, match=problem):
        decode_message(data)

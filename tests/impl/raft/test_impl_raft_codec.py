"""raft_codec v2: every message kind round-trips, one table of (value, bytes) pins the
layout, and malformed input is refused with the field and offset named."""

from __future__ import annotations

import pytest

from etcdspec.impl.raft.codec import CodecError, decode_message, encode_message
from etcdspec.impl.raft.messages import Entry, Message, MessageType, Snapshot, SnapshotMeta

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
        "02"
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
        (b"\x03" + bytes(70), "format version 3"),
        (encode_message(SAMPLES[0])[:-3], "truncated"),
        (encode_message(SAMPLES[0]) + b"\x00", "trailing bytes"),
        (b"\x01\x63" + encode_message(SAMPLES[1])[2:], "unknown message type 99"),
    ],
)
def test_malformed_input_is_refused_with_a_reason(data: bytes, problem: str) -> None:
    with pytest.raises(CodecError, match=problem):
        decode_message(data)


def test_arbitrary_bytes_decode_or_raise_codec_error_only() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    valid = encode_message(SAMPLES[0])

    @given(st.binary(max_size=200) | st.binary(max_size=8).map(lambda b: valid[:60] + b))
    def check(data: bytes) -> None:
        try:
            message = decode_message(data)
        except CodecError:
            return
        assert encode_message(message) == data  # the encoding is canonical

    check()


def test_messages_round_trip_for_generated_values() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    u64 = st.integers(0, 2**64 - 1)
    entries = st.lists(st.builds(Entry, u64, u64, st.binary(max_size=20)), max_size=4)
    snapshots = st.none() | st.builds(
        Snapshot,
        st.builds(SnapshotMeta, u64, u64, st.lists(u64, max_size=5).map(tuple)),
        st.binary(max_size=30),
    )
    messages = st.builds(
        Message,
        type=st.sampled_from(MessageType),
        to=u64,
        from_=u64,
        term=u64,
        log_term=u64,
        index=u64,
        entries=entries.map(tuple),
        commit=u64,
        reject=st.booleans(),
        reject_hint=u64,
        snapshot=snapshots,
        context=st.binary(max_size=20),
    )

    @given(messages)
    def check(message: Message) -> None:
        assert decode_message(encode_message(message)) == message

    check()

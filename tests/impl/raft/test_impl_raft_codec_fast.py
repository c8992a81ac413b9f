"""raft_codec's fast message decoder (`_decode_plain`) against the checked one: on any
bytes, either the fast pass declines (None, struct.error, IndexError) or both give the
same message; it never accepts what the checked decoder refuses. And the encoder's
fast case (no entries, no snapshot) writes the general layout."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from etcdspec.impl.raft import codec as raft_codec
from etcdspec.impl.raft.codec import CodecError, decode_message, encode_message
from etcdspec.impl.raft.messages import Entry, Message, MessageType, Snapshot, SnapshotMeta

U64 = st.integers(0, 2**64 - 1)
MESSAGES = st.builds(
    Message,
    type=st.sampled_from(MessageType),
    to=U64,
    from_=U64,
    term=U64,
    log_term=U64,
    index=U64,
    entries=st.lists(st.builds(Entry, U64, U64, st.binary(max_size=12)), max_size=3).map(tuple),
    commit=U64,
    reject=st.booleans(),
    reject_hint=U64,
    snapshot=st.none()
    | st.builds(
        Snapshot, st.builds(SnapshotMeta, U64, U64, st.just((1, 2))), st.binary(max_size=8)
    ),
    context=st.binary(max_size=10),
)


def _fast(data: bytes) -> Message | None:
    try:
        return raft_codec._decode_plain(data)
    except (struct.error, IndexError):
        return None


def _checked(data: bytes) -> Message | CodecError:
    try:
        return raft_codec._decode_checked(data)
    except CodecError as error:
        return error


def _agree(data: bytes) -> None:
    fast, checked = _fast(data), _checked(data)
    if fast is not None:
        assert fast == checked, f"fast decoder accepted {data.hex()} differently"
    result: Message | CodecError
    try:
        result = decode_message(data)
    except CodecError as error:
        result = error
    if isinstance(checked, CodecError):
        assert isinstance(result, CodecError) and str(result) == str(checked)
    else:
        assert result == checked


@given(MESSAGES)
def test_fast_decoder_gives_the_checked_decoders_message(message: Message) -> None:
    data = encode_message(message)
    fast = _fast(data)
    if message.snapshot is None:
        assert fast == message
    else:
        assert fast is None  # snapshots are left to the checked reader
    assert decode_message(data) == message


@given(MESSAGES, st.data())
def test_fast_decoder_never_accepts_what_the_checked_decoder_refuses(
    message: Message, data: st.DataObject
) -> None:
    encoded = bytearray(encode_message(message))
    cut = data.draw(st.integers(0, len(encoded)), label="cut")
    _agree(bytes(encoded[:cut]))
    _agree(bytes(encoded) + data.draw(st.binary(min_size=1, max_size=3), label="tail"))
    position = data.draw(st.integers(0, len(encoded) - 1), label="position")
    encoded[position] = data.draw(st.integers(0, 255), label="byte")
    _agree(bytes(encoded))


@pytest.mark.parametrize(
    "data,problem",
    [
        (b"\x01\x02" + bytes(10), "message header needs 59 bytes"),
        (encode_message(Message(MessageType.APP_RESP, to=1))[:-1], "snapshot flag needs 1"),
        (encode_message(Message(MessageType.APP_RESP, to=1))[:-1] + b"\x02", "snapshot flag 2"),
        (b"\x01\x04" + bytes(48) + b"\x02" + bytes(8) + bytes(9), "reject flag 2"),
    ],
)
def test_what_the_fast_decoder_declines_is_refused_with_a_reason(data: bytes, problem: str) -> None:
    assert _fast(data) is None
    with pytest.raises(CodecError, match=problem):
        decode_message(data)


@pytest.mark.parametrize("kind", list(MessageType), ids=lambda t: t.name)
def test_messages_without_entries_encode_in_the_general_layout(kind: MessageType) -> None:
    message = Message(kind, to=2, from_=1, term=9, index=4, commit=3, context=b"ctx")
    # The general layout: the same message with one entry, minus that entry's bytes.
    with_entry = encode_message(
        Message(
            kind, to=2, from_=1, term=9, index=4, commit=3, context=b"ctx", entries=(Entry(1, 1),)
        )
    )
    head = len(with_entry) - 1 - struct.calcsize(">QQI") - 4
    expected = with_entry[:head] + struct.pack(">I", 0) + b"\x00"
    assert encode_message(message) == expected

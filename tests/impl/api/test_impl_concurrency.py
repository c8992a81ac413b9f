"""The concurrency recipes' pure parts: prefix ends and participant keys as etcd's
client library forms them (GetPrefixRangeEnd, fmt "%s%x" of an int64 lease), and the
error re-coding of the Lock and Election services."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from etcdspec.impl import errors
from etcdspec.impl.api.concurrency import client_errors, participant_key, prefix_end
from etcdspec.impl.errors import RpcError


@pytest.mark.parametrize(
    ("prefix", "end"),
    [(b"lock/", b"lock0"), (b"a\xff", b"b"), (b"a\xff\xff", b"b"), (b"\xff", b"\0"), (b"", b"\0")],
)
def test_prefix_end_is_etcds(prefix: bytes, end: bytes) -> None:
    assert prefix_end(prefix) == end


@pytest.mark.parametrize(
    ("lease", "key"),
    [(0x694D7F3A1B2C3D4E, b"m/694d7f3a1b2c3d4e"), (10, b"m/a"), (-1, b"m/-1")],
)
def test_participant_key_is_the_lease_in_lower_case_hex(lease: int, key: bytes) -> None:
    assert participant_key(b"m/", lease) == key


class Raising:
    def __init__(self, error: Exception) -> None:
        self.error = error

    @client_errors
    async def call(self, request: int) -> int:
        raise self.error


@pytest.mark.parametrize(
    "kind", [errors.LEASE_NOT_FOUND, errors.EMPTY_KEY, errors.NO_LEADER, errors.SESSION_EXPIRED]
)
def test_etcd_errors_leave_as_unknown_with_their_message(kind: errors.EtcdErrorKind) -> None:
    with pytest.raises(RpcError) as raised:
        asyncio.run(Raising(RpcError(kind)).call(1))
    assert (raised.value.code, raised.value.message) == (grpc.StatusCode.UNKNOWN, kind.message)


def test_other_errors_pass_unchanged() -> None:
    with pytest.raises(KeyError):
        asyncio.run(Raising(KeyError("x")).call(1))

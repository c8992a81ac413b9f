"""The recording client: definite failures are `fail`, unknown outcomes `info` (and the
process takes a new id), reads that err are `fail`; what it records is a valid history
for the checker's reader; the wire conversion keeps every field the model reads."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from etcdspec.checker.check import check_history
from etcdspec.checker.history import read_history
from etcdspec.conform.recorder import Process, Recorder, RecordingClient, classify, classify_lock
from etcdspec.conform.wire import from_pb, to_pb
from etcdspec.impl.pb import kv_pb2, rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools.launcher import free_ports
from etcdspec.model.requests import (
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    LeaseKeepAliveRequest,
    PutRequest,
    RangeRequest,
    Request,
    TxnRequest,
)

PUT = PutRequest(b"k", b"v")
READ_TXN = TxnRequest(
    compare=(Compare(b"k", CompareTarget.MOD, CompareResult.EQUAL, 3),),
    success=(RangeRequest(b"k"),),
    failure=(RangeRequest(b"j"),),
)
WRITE_TXN = TxnRequest(success=(RangeRequest(b"k"), DeleteRangeRequest(b"k")))
S = grpc.StatusCode


@pytest.mark.parametrize(
    ("request_", "code", "details", "expected"),
    [
        (PUT, S.INVALID_ARGUMENT, "etcdserver: key is not provided", "fail"),
        (PUT, S.FAILED_PRECONDITION, "etcdserver: requested lease not found", "fail"),
        (
            CompactionRequest(5),
            S.OUT_OF_RANGE,
            "mvcc: required revision has been compacted",
            "fail",
        ),
        (PUT, S.NOT_FOUND, "etcdserver: requested lease not found", "fail"),
        (PUT, S.RESOURCE_EXHAUSTED, "etcdserver: too many requests", "fail"),
        (PUT, S.UNAVAILABLE, "failed to connect to all addresses", "fail"),
        (PUT, S.DEADLINE_EXCEEDED, "Deadline Exceeded", "info"),
        (PUT, S.UNAVAILABLE, "etcdserver: leader changed", "info"),
        (PUT, S.UNAVAILABLE, "Socket closed", "info"),
        (PUT, S.UNKNOWN, "Stream removed", "info"),
        (PUT, S.CANCELLED, "", "info"),
        (WRITE_TXN, S.DEADLINE_EXCEEDED, "", "info"),
        (LeaseKeepAliveRequest(7), S.UNAVAILABLE, "Connection reset by peer", "info"),
        (RangeRequest(b"k"), S.DEADLINE_EXCEEDED, "", "fail"),
        (READ_TXN, S.UNAVAILABLE, "Socket closed", "fail"),
    ],
)
def test_classify_definite_or_unknown(
    request_: Request, code: grpc.StatusCode, details: str, expected: str
) -> None:
    assert classify(request_, code, details) == expected


@pytest.mark.parametrize(
    ("code", "details", "expected"),
    [
        (S.UNKNOWN, "mutex: session is expired", "fail"),  # its key is gone: holds nothing
        (S.UNAVAILABLE, "failed to connect to all addresses", "fail"),
        (S.UNKNOWN, "etcdserver: requested lease not found", "info"),
        (S.DEADLINE_EXCEEDED, "Deadline Exceeded", "info"),  # it may hold the lock
        (S.UNAVAILABLE, "Socket closed", "info"),
    ],
)
def test_classify_lock_calls(code: grpc.StatusCode, details: str, expected: str) -> None:
    assert classify_lock(code, details) == expected


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accepts HTTP/2 and never answers: every call ends in DEADLINE_EXCEEDED."""
    try:
        while await reader.read(4096):
            pass
    except ConnectionError:
        pass
    finally:
        writer.close()


def test_recorded_outcomes_and_process_ids_against_dead_and_silent_servers(
    tmp_path: Path,
) -> None:
    async def main() -> Recorder:
        recorder = Recorder()
        dead_port, silent_port = free_ports(2)
        server = await asyncio.start_server(_silent, "127.0.0.1", silent_port)
        process = Process(recorder.new_process())
        dead = RecordingClient(recorder, f"http://127.0.0.1:{dead_port}", 0.5)
        silent = RecordingClient(recorder, f"http://127.0.0.1:{silent_port}", 0.3)
        try:
            refused = await dead.call(process, PUT)
            assert (refused.type, refused.code) == ("fail", "UNAVAILABLE")
            assert process.id == 0
            read = await silent.call(process, RangeRequest(b"k"))
            assert (read.type, read.code) == ("fail", "DEADLINE_EXCEEDED")
            assert process.id == 0
            write = await silent.call(process, PUT)
            assert (write.type, write.code) == ("info", "DEADLINE_EXCEEDED")
            assert process.id == 1
        finally:
            await dead.close()
            await silent.close()
            server.close()
            await server.wait_closed()
        return recorder

    recorder = asyncio.run(main())
    path = tmp_path / "history.jsonl"
    recorder.write(path)
    history = read_history(path)
    assert [op.type for op in history.operations] == ["fail", "fail", "info"]
    assert [op.process for op in history.operations] == [0, 0, 0]
    assert history.operations[0].response["code"] == "UNAVAILABLE"
    times = [event.time for event in history.events]
    assert times == sorted(times)
    assert check_history(history).verdict.describe() == "holds"


KV = kv_pb2.KeyValue(key=b"k", create_revision=2, mod_revision=4, version=3, value=b"v", lease=9)


@pytest.mark.parametrize(
    ("request_", "reply", "expected_fields"),
    [
        (
            RangeRequest(b"a", b"z", limit=2, revision=3),
            rpc_pb2.RangeResponse(
                header=rpc_pb2.ResponseHeader(revision=7), kvs=[KV], count=4, more=True
            ),
            {"revision": 7, "kvs": 1, "count": 4, "more": True},
        ),
        (
            PutRequest(b"k", b"v", prev_kv=True),
            rpc_pb2.PutResponse(header=rpc_pb2.ResponseHeader(revision=8), prev_kv=KV),
            {"revision": 8, "prev_kv": True},
        ),
        (
            READ_TXN,
            rpc_pb2.TxnResponse(
                header=rpc_pb2.ResponseHeader(revision=9),
                succeeded=False,
                responses=[rpc_pb2.ResponseOp(response_range=rpc_pb2.RangeResponse(count=0))],
            ),
            {"revision": 9, "succeeded": False},
        ),
    ],
)
def test_wire_round_trip_keeps_model_fields(
    request_: Request, reply: object, expected_fields: dict[str, object]
) -> None:
    message = to_pb(request_)
    assert type(message).__name__ == type(request_).__name__
    response = from_pb(request_, reply)
    assert response.header.revision == expected_fields["revision"]
    if "kvs" in expected_fields:
        assert len(response.kvs) == 1 and response.kvs[0].lease == 9  # type: ignore[attr-defined]
        assert response.more is True and response.count == 4  # type: ignore[attr-defined]
    if "prev_kv" in expected_fields:
        assert response.prev_kv is not None and response.prev_kv.version == 3  # type: ignore[attr-defined]
    if "succeeded" in expected_fields:
        assert response.succeeded is False  # type: ignore[attr-defined]


class _KeepAliveServicer(rpc_pb2_grpc.LeaseServicer):  # type: ignore[misc]
    """Answers every keep-alive with header revision 5 and TTL 9."""

    async def LeaseKeepAlive(self, requests: Any, context: Any) -> Any:
        async for request in requests:
            yield rpc_pb2.LeaseKeepAliveResponse(
                header=rpc_pb2.ResponseHeader(revision=5), ID=request.ID, TTL=9
            )


@pytest.mark.parametrize(("as_info", "expected"), [(True, "info"), (False, "ok")])
def test_answered_keepalive_is_info_unless_asked(as_info: bool, expected: str) -> None:
    async def main() -> Recorder:
        server = grpc.aio.server()
        rpc_pb2_grpc.add_LeaseServicer_to_server(_KeepAliveServicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        recorder = Recorder()
        client = RecordingClient(recorder, f"127.0.0.1:{port}", 2.0, keepalive_as_info=as_info)
        process = Process(recorder.new_process())
        try:
            outcome = await client.call(process, LeaseKeepAliveRequest(42))
        finally:
            await client.close()
            await server.stop(None)
        assert outcome.type == expected
        assert process.id == (1 if as_info else 0)
        return recorder

    recorder = asyncio.run(main())
    completion = recorder.events[-1]
    assert completion.type == expected
    assert completion.value["ID"] == 42 and completion.value["TTL"] == 9
    assert completion.value["header"]["revision"] == 5
    assert completion.value.get("answered", False) is as_info

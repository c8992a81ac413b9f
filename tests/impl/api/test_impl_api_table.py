"""README's table of etcd's services and methods is exactly what a member of ours serves.

Every method of etcd 3.5's API (impl/api/etcd_api.METHODS) is called, with an empty
request and a short deadline, on a running member of ours and on real etcd 3.5.1; a
method is served unless the answer is UNIMPLEMENTED (a deadline, an error about the empty
request, or an answer all count as served). README's table must be the rendering of what
our member serves (regenerate it with `pytest tests/impl/api/test_impl_api_table.py
--rewrite-golden`); every method of the table must be served by real etcd; and the
versions reported are the API version's.
"""

from __future__ import annotations

from pathlib import Path

import etcd_procs
import grpc
import pytest

from etcdspec.impl.api.etcd_api import METHODS, TABLE_END, TABLE_START, Kind, Method, render_table
from etcdspec.impl.api.versions import API_VERSION, SERVER_VERSION
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

pytestmark = pytest.mark.etcd

README = Path(__file__).resolve().parents[3] / "README.md"


def _same(data: bytes) -> bytes:
    return data


def probe(channel: grpc.Channel, method: Method) -> str:
    """The status code of calling `method` with an empty request ("OK" if answered)."""
    try:
        if method.kind is Kind.UNARY:
            call = channel.unary_unary(
                method.path, request_serializer=_same, response_deserializer=_same
            )
            call(b"", timeout=2)
        elif method.kind is Kind.SERVER_STREAM:
            stream = channel.unary_stream(
                method.path, request_serializer=_same, response_deserializer=_same
            )(b"", timeout=2)
            next(stream, None)
            stream.cancel()
        else:
            bidi = channel.stream_stream(
                method.path, request_serializer=_same, response_deserializer=_same
            )(iter([b""]), timeout=2)
            next(bidi, None)
            bidi.cancel()
    except grpc.RpcError as error:
        code = error.code()
        return code.name if code is not None else "UNKNOWN"
    return "OK"


def served_by(endpoint: str) -> dict[str, str]:
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        return {method.path: probe(channel, method) for method in METHODS}


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    out = {}
    for kind in ("ours", "etcd"):
        with etcd_procs.cluster(kind, tmp_path_factory.mktemp(kind), size=1) as running:
            out[kind] = served_by(running.endpoints[0])
            with grpc.insecure_channel(running.endpoints[0].removeprefix("http://")) as channel:
                status = rpc_pb2_grpc.MaintenanceStub(channel).Status(
                    rpc_pb2.StatusRequest(), timeout=5
                )
                out[kind]["version"] = status.version
    return out


def _served(answers: dict[str, str]) -> set[str]:
    return {m.path for m in METHODS if answers[m.path] != "UNIMPLEMENTED"}


def test_readme_table_is_what_our_member_serves(
    answers: dict[str, dict[str, str]], rewrite_golden: bool
) -> None:
    expected = render_table(_served(answers["ours"]))
    text = README.read_text()
    assert TABLE_START in text and TABLE_END in text, f"{README} has no table markers"
    start = text.index(TABLE_START)
    end = text.index(TABLE_END) + len(TABLE_END)
    if text[start:end] != expected and rewrite_golden:
        README.write_text(text[:start] + expected + text[end:])
        pytest.fail(f"rewrote the table in {README}; check and commit it")
    assert text[start:end] == expected, (
        "README's table of served methods is not what a member of ours serves; run "
        "`pytest tests/impl/api/test_impl_api_table.py --rewrite-golden` to regenerate it"
    )


def test_every_method_of_the_table_is_served_by_real_etcd(
    answers: dict[str, dict[str, str]],
) -> None:
    missing = [m.describe() for m in METHODS if answers["etcd"][m.path] == "UNIMPLEMENTED"]
    assert missing == []


def test_the_probe_tells_served_from_not_served(answers: dict[str, dict[str, str]]) -> None:
    """Not vacuous: our member serves the KV service and not (yet) every method."""
    ours = _served(answers["ours"])
    assert {m.path for m in METHODS if m.service == "KV"} <= ours
    assert ours != {m.path for m in METHODS}


def test_version_reported_is_the_api_version_implemented(
    answers: dict[str, dict[str, str]],
) -> None:
    assert answers["ours"]["version"] == SERVER_VERSION == f"{API_VERSION}.0"
    assert answers["etcd"]["version"].startswith(f"{API_VERSION}.")

"""Malformed gRPC framing over a raw socket (bench/fuzz_grpc.py's FRAMINGS), side by side:
etcd 3.5.1 and our member answer each with the same grpc-status and message (the decoder's
own words after "unmarshalling request: " aside), and a short slice of the `frames` fuzz
target (named framings and mutated connections) finds nothing on ours.

Regressions from the fuzzer: a message that is not the method's request type had reached
the handler's catch-all (UNKNOWN "Unexpected <class DecodeError>", a traceback in the log)
where etcd answers INTERNAL "grpc: error unmarshalling request"; the compressed and
unknown payload flags were UNIMPLEMENTED (etcd: INTERNAL), a request ending inside a
message or carrying none INTERNAL (etcd: UNKNOWN "unexpected EOF" / "EOF"), and a second
message on a unary call refused (etcd answers the first).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from etcd_procs import cluster

from bench.fuzz import run
from bench.fuzz_grpc import FRAMINGS, Answer, connection_bytes, exchange, expected, frames_target


def _answers(kind: str, directory: Path) -> dict[str, Answer]:
    with cluster(kind, directory, 1) as running:
        host, port = running.endpoints[0].removeprefix("http://").rsplit(":", 1)
        return {
            name: exchange((host, int(port)), connection_bytes(body), 5.0)
            for name, body in FRAMINGS.items()
        }


@pytest.mark.etcd
def test_malformed_framing_gets_etcds_status_from_both(tmp_path: Path) -> None:
    theirs = _answers("etcd", tmp_path / "etcd")
    ours = _answers("ours", tmp_path / "ours")
    wrong = {
        name: f"etcd {theirs[name].describe()}; ours {ours[name].describe()}"
        for name in FRAMINGS
        if not (expected(name, theirs[name]) and expected(name, ours[name]))
    }
    assert not wrong, wrong


def test_a_slice_of_the_frames_target_finds_nothing() -> None:
    result = run(frames_target(), 60, seed=1)
    assert result.findings == [], result.findings[:3]
    assert result.inputs == 60 and 0 < result.refused < 60

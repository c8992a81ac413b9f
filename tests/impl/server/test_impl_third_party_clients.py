"""Real third-party etcd clients against our server and real etcd 3.5.1, side by side.

Two libraries people use from Python, installed from PyPI by `make` (python-etcd3 0.12,
threads and grpc; aetcd 1.0, asyncio), each drive one scenario (tests/support/
third_party_client.py: puts, gets, a prefix, compare-and-swap both ways, deletes, a watch,
a lease with a key, the library's lock contended by a second client, a refused request)
in its own process, against a fresh 3-member cluster of each kind. The transcripts must be
equal, revisions included; and etcd's must show the outcomes that make the comparison
worth something (a lock refused while held, a failed CAS, a watch event, an error).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import etcd_procs
import pytest

CLIENT = Path(__file__).resolve().parents[2] / "support" / "third_party_client.py"
LIBRARIES = ("etcd3", "aetcd")


def run_client(library: str, endpoint: str) -> list[list[Any]]:
    env = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}
    address = endpoint.removeprefix("http://")
    done = subprocess.run(
        [sys.executable, str(CLIENT), library, address],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"{library} client failed:\n{done.stderr[-3000:]}"
    transcript: list[list[Any]] = json.loads(done.stdout)
    return transcript


@pytest.fixture(scope="module")
def transcripts(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[tuple[str, str], list[list[Any]]]]:
    for library in LIBRARIES:
        done = subprocess.run(
            [sys.executable, "-c", f"import {library}"],
            capture_output=True,
            text=True,
            env={**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"},
            check=False,
        )
        assert done.returncode == 0, (
            f"the {library} client library is missing: `make` installs it "
            f"(see the Makefile's install step)\n{done.stderr[-500:]}"
        )
    results: dict[tuple[str, str], list[list[Any]]] = {}
    for kind in ("etcd", "ours"):
        with etcd_procs.cluster(kind, tmp_path_factory.mktemp(kind), 3) as cluster:
            for library in LIBRARIES:
                results[(kind, library)] = run_client(library, cluster.endpoints[0])
    yield results


@pytest.mark.etcd
@pytest.mark.parametrize("library", LIBRARIES)
def test_third_party_client_sees_what_it_sees_on_etcd(
    transcripts: dict[tuple[str, str], list[list[Any]]], library: str
) -> None:
    expected = transcripts[("etcd", library)]
    actual = transcripts[("ours", library)]
    assert [step[0] for step in actual] == [step[0] for step in expected]
    for want, got in zip(expected, actual, strict=True):
        assert got == want, f"{library}: {want[0]}"


@pytest.mark.etcd
@pytest.mark.parametrize("library", LIBRARIES)
def test_third_party_scenario_has_both_outcomes_on_etcd(
    transcripts: dict[tuple[str, str], list[list[Any]]], library: str
) -> None:
    steps = {step[0]: step[1:] for step in transcripts[("etcd", library)]}
    assert steps["cas b 2->3"][0] is True and steps["cas b 2->4"][0] is False
    assert steps["watch event arrived"] == [True]
    assert steps["lock 2 acquire while held"] == [False]
    assert steps["lock 2 acquire"] == [True]
    assert steps["leased key after revoke"] == [None]
    assert "duplicate key given in txn request" in steps["duplicate key txn"][0]

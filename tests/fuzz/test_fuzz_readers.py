"""Short slices of bench/fuzz.py's reader targets (the 100,000-input runs and their rates
are in docs/benchmarks.md): each finds nothing, and each refuses some of its inputs and
accepts some (a slice that only ever met one kind would test nothing). The oracles
themselves catch what they must: a reader that reads a damaged input without a word is a
finding (the planted snap_skip_crc, and a WAL reader that drops the payload checksum)."""

from __future__ import annotations

import pytest

from bench.fuzz import TARGETS, mutate, run
from etcdspec.impl import failpoints

SLICE = {"history": 100, "edn": 40, "spec": 30, "wal": 30, "snapfile": 100}


@pytest.mark.parametrize("name", sorted(SLICE))
def test_a_slice_of_the_reader_target_finds_nothing(name: str) -> None:
    result = run(TARGETS[name](), SLICE[name], seed=3)
    assert result.findings == [], result.findings[:3]
    assert result.inputs == SLICE[name] and result.refused > 0, result.describe()


def test_a_slice_of_the_etcd_snapshot_target_finds_nothing() -> None:
    result = run(TARGETS["etcd-snapshot"](), 60, seed=3)
    assert result.findings == [], result.findings[:3]
    assert 0 < result.refused < result.inputs == 60, result.describe()


@pytest.mark.parametrize(
    ("name", "failpoint"), [("snapfile", "snap_skip_crc"), ("wal", "wal_skip_payload_crc")]
)
def test_a_reader_without_its_checksum_is_a_finding(name: str, failpoint: str) -> None:
    with failpoints.active(failpoint):
        result = run(TARGETS[name](), 80, seed=3)
    assert any("silent wrong result" in finding for finding in result.findings), result.describe()


def test_mutations_change_the_input_and_replay_from_their_seed() -> None:
    import random

    data = bytes(range(64))
    first = [mutate(data, random.Random(seed)) for seed in range(50)]
    assert first == [mutate(data, random.Random(seed)) for seed in range(50)]
    assert sum(item != data for item in first) >= 45

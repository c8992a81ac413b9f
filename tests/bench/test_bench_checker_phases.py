"""bench/checker_phases.py: every phase of the etcd check timed on a small simulated
history and on a history file (reading timed too); a history that is not linearizable
stops it with the verdict, as the phases of a check that failed are not the figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.checker_phases import main

DATA = Path(__file__).resolve().parent.parent / "checker" / "data"


def test_every_phase_is_timed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--ops", "300", "--rounds", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["operations"] == 300 and report["rounds"] == 2
    assert set(report["phases"]) == {"prepare", "index", "search", "check"}
    for figures in report["phases"].values():
        assert 0 < figures["cpu_min"] <= figures["cpu_median"]
        assert 0 < figures["wall_min"] <= figures["wall_median"]
    assert len(report["load_before"]) == 3


def test_a_file_is_read_and_timed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--file", str(DATA / "etcd_ok.jsonl"), "--rounds", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["history"].endswith("etcd_ok.jsonl")
    assert set(report["phases"]) == {"read", "prepare", "index", "search", "check"}


def test_a_violation_is_not_timed() -> None:
    with pytest.raises(SystemExit, match="said false"):
        main(["--file", str(DATA / "etcd_stale_read.jsonl"), "--rounds", "1"])

"""The pytest plugin: `pytest --pyargs etcdspec.conform.suite` from another project's CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from etcdspec.conform.suite import CHECKS


def _suite(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--pyargs",
            "etcdspec.conform.suite",
            "--etcdspec-report",
            str(tmp_path / "report"),
            *options,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )


def test_suite_without_a_target_is_a_usage_error(tmp_path: Path) -> None:
    run = _suite(tmp_path)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "--etcdspec-endpoints" in run.stderr and "--etcdspec-target" in run.stderr


@pytest.mark.slow
def test_suite_passes_one_test_per_check_on_the_reference_server(tmp_path: Path) -> None:
    run = _suite(
        tmp_path,
        "--etcdspec-target",
        "reference",
        "--etcdspec-duration",
        "6",
        "--etcdspec-seed",
        "3",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"{len(CHECKS)} passed" in run.stdout
    assert (tmp_path / "report" / "latest" / "history.jsonl").exists()

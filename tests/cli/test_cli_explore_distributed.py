"""`etcdspec explore --exhaustive --workers N / --cluster ADDRESS`: the same report as the
single-process search, on a local Dask cluster the verb starts and stops, or on a running
scheduler with its workers (started here as separate processes, as a user would)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode

pytest.importorskip("distributed", reason="Dask distributed is a dependency: pip install -e .")

BUG_SEARCH = [
    "explore",
    "--exhaustive",
    "--bug",
    "commit_without_quorum",
    "--max-term",
    "2",
    "--max-log",
    "1",
    "--json",
    "--quiet",
]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--exhaustive", "--workers", "0"], "--workers must be at least 1, got 0"),
        (
            ["--exhaustive", "--workers", "2", "--cluster", "tcp://127.0.0.1:1"],
            "give one of them",
        ),
        (["--workers", "2"], "add --exhaustive"),
        (["--cluster", "tcp://127.0.0.1:1"], "add --exhaustive"),
        (["--exhaustive", "--worker-memory", "512"], "add --workers N (N of 2 or more)"),
        (
            ["--exhaustive", "--cluster", "tcp://127.0.0.1:1", "--worker-memory", "512"],
            "add --workers N",
        ),
        (
            ["--exhaustive", "--workers", "2", "--worker-memory", "0"],
            "--worker-memory must be at least 1 MB, got 0",
        ),
    ],
)
def test_bad_worker_options_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["explore", *argv]) == ExitCode.USAGE
    assert message in capsys.readouterr().err


def _explore(*extra: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "etcdspec", *BUG_SEARCH, *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def _comparable(document: dict[str, Any]) -> dict[str, Any]:
    """The report without what depends on timing or on where it ran."""
    return {k: v for k, v in document.items() if k not in ("seconds", "note", "rate")}


def test_two_local_workers_report_what_one_process_reports() -> None:
    code, single = _explore()
    assert code == ExitCode.VIOLATION
    code, distributed = _explore("--workers", "2")
    assert code == ExitCode.VIOLATION
    assert _comparable(distributed) == _comparable(single)
    assert "a local Dask cluster of 2 workers" in json.dumps(distributed)


@pytest.fixture()
def running_cluster(tmp_path: Path) -> Iterator[str]:
    """A Dask scheduler and 2 workers, each its own process, as `dask scheduler` and
    `dask worker` start them; stopped after the test."""
    scheduler_file = tmp_path / "scheduler.json"
    python = [sys.executable, "-m"]
    procs = [
        subprocess.Popen(
            [
                *python,
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--dashboard-address",
                ":0",
                "--scheduler-file",
                str(scheduler_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() or not scheduler_file.read_text().strip():
            if time.monotonic() > deadline or procs[0].poll() is not None:
                pytest.fail("the Dask scheduler did not write its address")
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        *python,
                        "distributed.cli.dask_worker",
                        address,
                        "--nthreads",
                        "1",
                        "--no-nanny",
                        "--no-dashboard",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        from distributed import Client

        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        # no nanny, so no children: killing them leaves nothing behind (a graceful
        # SIGTERM takes Dask's workers over 20 s to act on)
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=30)


def test_a_running_cluster_reports_what_one_process_reports(running_cluster: str) -> None:
    code, single = _explore()
    code_distributed, distributed = _explore("--cluster", running_cluster)
    assert code == code_distributed == ExitCode.VIOLATION
    assert _comparable(distributed) == _comparable(single)
    assert f"the Dask cluster at {running_cluster} (2 workers)" in json.dumps(distributed)
    # the verb leaves a cluster it did not start running: a second search uses it again
    code, again = _explore("--cluster", running_cluster)
    assert code == ExitCode.VIOLATION and _comparable(again) == _comparable(single)


def test_an_unreachable_scheduler_is_a_clear_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "etcdspec", *BUG_SEARCH, "--cluster", "tcp://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == ExitCode.UNREACHABLE
    assert "cannot reach a Dask scheduler at tcp://127.0.0.1:9" in done.stderr
    assert "dask scheduler" in done.stderr  # what to do


def test_a_campaign_on_two_local_workers_finds_each_bug_and_reports_coverage() -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "etcdspec", "explore", "--campaign", "--workers", "2"),
            *("--time-budget", "8", "--max-examples", "5", "--steps", "20", "--json"),
            *("--bug", "commit_without_quorum", "--bug", "vote_not_persisted"),
        ],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == ExitCode.HOLDS, done.stderr
    document = json.loads(done.stdout)
    assert document["schema"] == "etcdspec.campaign/1" and document["valid"] is True
    assert document["runs"] >= 3
    assert document["where"] == "a local Dask cluster of 2 workers"
    found = {c["bug"]: c["invariant"] for c in document["counterexamples"]}
    assert found == {
        "commit_without_quorum": "LeaderCompleteness",
        "vote_not_persisted": "ElectionSafety",
    }
    assert document["actions_fired"]["timeout"] > 0
    assert document["witnesses"]["cluster: leader elected"] > 0


def test_a_campaign_needs_a_budget(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["explore", "--campaign"]) == ExitCode.USAGE
    assert "give --time-budget SECONDS" in capsys.readouterr().err
    assert run(["explore", "--campaign", "--exhaustive", "--time-budget", "1"]) == ExitCode.USAGE

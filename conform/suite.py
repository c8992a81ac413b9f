"""The conformance suite, for another project's CI: one recorded run, one test per check.

    pytest --pyargs etcdspec.conform.suite --etcdspec-endpoints=http://127.0.0.1:2379
    pytest --pyargs etcdspec.conform.suite --etcdspec-target=etcd --etcdspec-duration=30

One conformance run (etcdspec.conform.run) is recorded per session; every check of
its verdict table is a test of its own — Linearizable, each watch guarantee as etcd names
it, HashKV agreement — so the CI shows which guarantee broke. An "unknown" check fails
its test: a check that could not be decided is never a pass. The options come from
etcdspec.conform.pytest_plugin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from etcdspec.checker.results import CheckResult
from etcdspec.conform.run import ConformOptions, ConformResult, run_conform
from etcdspec.model.watch import GUARANTEES
from etcdspec.verdict import Verdict

CHECKS: tuple[str, ...] = ("Linearizable", *GUARANTEES, "HashKV")


def options_from(config: pytest.Config) -> ConformOptions:
    endpoints = config.getoption("--etcdspec-endpoints")
    target = config.getoption("--etcdspec-target")
    if (endpoints is None) == (target is None):
        raise pytest.UsageError(
            "etcdspec.conform.suite needs exactly one of --etcdspec-endpoints=URL,... "
            "(a running cluster) or --etcdspec-target=reference|etcd (a local one)"
        )
    faults_option = config.getoption("--etcdspec-faults")
    faults = () if faults_option == "none" else tuple(f for f in faults_option.split(",") if f)
    return ConformOptions(
        report_dir=Path(config.getoption("--etcdspec-report")),
        target=target or "reference",
        endpoints=tuple(e for e in (endpoints or "").split(",") if e),
        etcd_bin=config.getoption("--etcdspec-etcd-bin"),
        workload=config.getoption("--etcdspec-workload"),
        faults=faults,
        duration_s=config.getoption("--etcdspec-duration"),
        seed=config.getoption("--etcdspec-seed"),
    )


@pytest.fixture(scope="session")
def conformance_run(pytestconfig: pytest.Config) -> ConformResult:
    return run_conform(options_from(pytestconfig))


def _result(run: ConformResult, name: str) -> CheckResult | None:
    if name == "HashKV":
        return run.hashkv
    if run.check is None:
        return None
    return next((r for r in run.check.results if r.name == name), None)


@pytest.mark.parametrize("check", CHECKS)
def test_guarantee(conformance_run: ConformResult, check: str) -> None:
    result = _result(conformance_run, check)
    where = f"report: {conformance_run.run_dir}"
    if result is None:
        pytest.fail(f"{check} was not checked: the run recorded nothing it applies to ({where})")
    details = "\n".join(result.details[:10])
    assert result.verdict is Verdict.TRUE, f"{result.describe()}\n{details}\n{where}"

"""The conformance stage of `etcdspec verify`: a short run of the reference server.

Contract: `run_stage(options) -> StageResult` starts a 3-member cluster of our server,
runs the etcd-kv workload with kill, partition, compaction and disk (corrupt-wal) faults
(about a minute; about 15 s with `options.quick`), checks the history, compares HashKV
and judges every member started on a damaged WAL (it must refuse). The report
folder is options.report_dir/conform. The verdict is the run's (a run that could not
start its cluster is UNKNOWN, never a pass).
"""

from __future__ import annotations

import time

from etcdspec.conform.run import ConformOptions, run_conform
from etcdspec.conform.targets import TargetError
from etcdspec.stage import StageOptions, StageResult
from etcdspec.verdict import Verdict

NAME = "conform"


def stage_options(options: StageOptions) -> ConformOptions:
    return ConformOptions(
        report_dir=options.report_dir / NAME,
        target="reference",
        workload="etcd-kv",
        faults=("kill", "partition", "compact", "corrupt-wal"),
        duration_s=12.0 if options.quick else 50.0,
        seed=options.seed,
        fault_interval_s=2.5 if options.quick else 4.0,
    )


def run_stage(options: StageOptions) -> StageResult:
    started = time.monotonic()
    conform = stage_options(options)
    try:
        result = run_conform(conform)
    except TargetError as error:
        return StageResult(
            NAME, Verdict.UNKNOWN, f"could not run: {error}", time.monotonic() - started
        )
    counts = result.counts
    summary = (
        f"reference 3 members, etcd-kv {conform.duration_s:g} s: {counts['ok']} ok, "
        f"{counts['fail']} fail, {counts['info']} info, {counts['watch']} watch events, "
        f"{len(result.faults)} faults; {result.hashkv.summary}"
        + "".join(f"; {check.summary}" for check in result.more_checks)
    )
    failing = []
    if result.check is not None:
        failing = [r.describe() for r in result.check.results if r.verdict is not Verdict.TRUE]
    for extra in (result.hashkv, *result.more_checks):
        if extra.verdict is not Verdict.TRUE:
            failing.append(extra.describe())
    return StageResult(
        NAME,
        result.verdict,
        summary,
        time.monotonic() - started,
        {"report": str(result.run_dir), "failing": failing, "faults": list(result.faults)},
    )

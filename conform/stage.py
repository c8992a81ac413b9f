"""The conformance stage of `etcdspec verify`: a short run of the reference server.

Contract: `run_stage(options) -> StageResult` starts a 3-member cluster of our server,
runs the etcd-kv workload with kill, partition, compaction, disk (corrupt-wal, and in
the full run corrupt-snap) and membership (replace-member) faults (about a minute; about
15 s with `options.quick`), checks the history, compares HashKV, judges every member
started on a damaged WAL (it must refuse) or snapshot file (refuse, or recover naming
it and keep every acknowledged write) and the membership history (one leader per term across the changes, the
final member list as the changes left it); then a short secured
run (`secured_options`: TLS on the client ports, client certificates, auth enabled, the
clients logged in as root, one kill so that a restarted member's forgotten tokens are
met). The main run gave up SECURED_S of its time to it, so the stage takes about as long
as before. The report folders are options.report_dir/conform and .../conform/secured.
The verdict is both runs' merged (a run that could not start its cluster is UNKNOWN,
never a pass).
"""

from __future__ import annotations

import time

from etcdspec.conform.run import ConformOptions, run_conform
from etcdspec.conform.targets import TargetError
from etcdspec.stage import StageOptions, StageResult
from etcdspec.verdict import Verdict

NAME = "conform"
SECURED_S = (8.0, 5.0)  # the secured run's duration: full, quick


def stage_options(options: StageOptions) -> ConformOptions:
    return ConformOptions(
        report_dir=options.report_dir / NAME,
        target="reference",
        workload="etcd-kv",
        # corrupt-snap in the full run only: it makes the cluster snapshot every
        # SNAPSHOT_FAULT_COUNT entries and costs a member's two restarts.
        faults=("kill", "partition", "compact", "corrupt-wal", "replace-member")
        + (() if options.quick else ("corrupt-snap",)),
        duration_s=12.0 if options.quick else 50.0 - SECURED_S[0],
        seed=options.seed,
        fault_interval_s=2.5 if options.quick else 4.0,
    )


def secured_options(options: StageOptions) -> ConformOptions:
    return ConformOptions(
        report_dir=options.report_dir / NAME / "secured",
        target="reference",
        workload="etcd-kv",
        faults=("kill",),
        duration_s=SECURED_S[1] if options.quick else SECURED_S[0],
        seed=options.seed,
        fault_interval_s=2.0,
        fault_hold_s=1.0,
        secure=True,
    )


def run_stage(options: StageOptions) -> StageResult:
    started = time.monotonic()
    conform = stage_options(options)
    try:
        result = run_conform(conform)
        secured = run_conform(secured_options(options))
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
        + f"; secured (TLS, auth) {secured_options(options).duration_s:g} s: "
        f"{secured.counts['ok']} ok, {len(secured.faults)} faults, {secured.verdict.describe()}"
    )
    failing = []
    if result.check is not None:
        failing = [r.describe() for r in result.check.results if r.verdict is not Verdict.TRUE]
    if secured.check is not None:
        failing += [
            f"secured: {r.describe()}"
            for r in secured.check.results
            if r.verdict is not Verdict.TRUE
        ]
    for extra in (result.hashkv, *result.more_checks, secured.hashkv):
        if extra.verdict is not Verdict.TRUE:
            failing.append(extra.describe())
    return StageResult(
        NAME,
        Verdict.merge_all([result.verdict, secured.verdict]),
        summary,
        time.monotonic() - started,
        {
            "report": str(result.run_dir),
            "secured_report": str(secured.run_dir),
            "failing": failing,
            "faults": list(result.faults),
            "secured_faults": list(secured.faults),
        },
    )

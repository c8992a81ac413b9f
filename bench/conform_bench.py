"""Conformance-run benchmark: how many recorded operations per second a run sustains
against our 3-member server and against real etcd, and how long checking them takes
(goal: checking never takes longer than the run).

Run: `.venv/bin/python -m bench.conform_bench` (10 s per target, no faults, 8 clients,
unthrottled, etcd-kv), or e.g. `--duration 60 --faults kill,partition
--workloads etcd-kv,kubernetes --targets reference,etcd`. Each run's report folder goes
under a temporary directory (`--keep DIR` keeps them there instead); the figures are
printed as a table and, with --json, as JSON. The check gets `--check-timeout` seconds
(default twice the run), so a check slower than the run shows as its time, and one
that does not finish as unknown.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from etcdspec.conform.faults import parse_faults
from etcdspec.conform.run import ConformOptions, run_conform
from etcdspec.conform.targets import find_etcd


def bench(
    target: str,
    duration_s: float,
    clients: int,
    workload: str,
    faults: tuple[str, ...] = (),
    check_timeout_s: float | None = None,
    keep: Path | None = None,
    seed: int = 0,
) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="conform-bench-") as folder:
        options = ConformOptions(
            report_dir=keep or Path(folder),
            target=target,
            etcd_bin=find_etcd(None) if target == "etcd" else None,
            workload=workload,
            faults=faults,
            duration_s=duration_s,
            clients=clients,
            rate=100_000.0,
            seed=seed,
            check_timeout_s=check_timeout_s or max(60.0, 2 * duration_s),
        )
        result = run_conform(options)
        check_s = result.check.seconds if result.check is not None else float("nan")
        checks = {}
        if result.check is not None:
            checks = {
                r.name: [r.verdict.describe(), round(r.seconds, 2)] for r in result.check.results
            }
        operations = sum(result.counts[k] for k in ("ok", "fail", "info"))
        return {
            "target": target,
            "workload": workload,
            "faults": ",".join(faults) or "none",
            "fault_count": len(result.faults),
            "clients": clients,
            "duration_s": duration_s,
            "operations": operations,
            "ops_per_s": round(operations / duration_s, 1),
            "ok_per_s": round(result.counts["ok"] / duration_s, 1),
            "fail": result.counts["fail"],
            "info": result.counts["info"],
            "watch_events": result.counts["watch"],
            "check_s": round(check_s, 2),
            "check_within_run": check_s <= duration_s,
            "checks": checks,
            "hashkv": result.hashkv.verdict.describe(),
            "verdict": result.verdict.describe(),
            "report": str(result.run_dir) if keep else "",
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workload", default=None, help="one workload (as --workloads)")
    parser.add_argument("--workloads", default="etcd-kv", help="comma-separated")
    parser.add_argument("--targets", default="reference,etcd")
    parser.add_argument("--faults", default="none", help="e.g. kill,partition (default none)")
    parser.add_argument("--check-timeout", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the reports here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    faults = parse_faults(args.faults)
    workloads = (args.workload or args.workloads).split(",")
    rows = []
    for workload in workloads:
        for target in args.targets.split(","):
            row = bench(
                target,
                args.duration,
                args.clients,
                workload,
                faults,
                args.check_timeout,
                args.keep,
                args.seed,
            )
            rows.append(row)
            if not args.json:
                print(_line(row), file=sys.stdout, flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


def _line(row: dict[str, object]) -> str:
    slow = "" if row["check_within_run"] else " (check slower than the run)"
    return (
        f"{row['target']:<10} {row['workload']:<10} faults {row['faults']} "
        f"({row['fault_count']}) {row['clients']} clients {row['operations']:>6} ops in "
        f"{row['duration_s']:g} s = {row['ops_per_s']:>7} ops/s ({row['ok_per_s']} ok/s, "
        f"{row['fail']} fail, {row['info']} info), "
        f"{row['watch_events']} watch events, check {row['check_s']} s{slow}, "
        f"HashKV {row['hashkv']}, {row['verdict']}; checks {row['checks']}"
    )


if __name__ == "__main__":
    raise SystemExit(main())

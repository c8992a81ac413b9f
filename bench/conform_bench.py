"""Conformance-run benchmark: how many recorded operations per second a run sustains
against our 3-member server and against real etcd, and how long checking them takes.

Run: `.venv/bin/python -m bench.conform_bench` (10 s per target, no faults, 8 clients,
unthrottled) or `--duration 5 --targets reference`. Each run's report folder goes under
a temporary directory; the figures are printed as a table and, with --json, as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from etcdspec.checker.conform_run import ConformOptions, run_conform
from etcdspec.checker.conform_targets import find_etcd


def bench(target: str, duration_s: float, clients: int, workload: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="conform-bench-") as folder:
        options = ConformOptions(
            report_dir=Path(folder),
            target=target,
            etcd_bin=find_etcd(None) if target == "etcd" else None,
            workload=workload,
            faults=(),
            duration_s=duration_s,
            clients=clients,
            rate=100_000.0,
        )
        result = run_conform(options)
        check_s = result.check.seconds if result.check is not None else float("nan")
        operations = sum(result.counts[k] for k in ("ok", "fail", "info"))
        return {
            "target": target,
            "workload": workload,
            "clients": clients,
            "duration_s": duration_s,
            "operations": operations,
            "ops_per_s": round(operations / duration_s, 1),
            "watch_events": result.counts["watch"],
            "check_s": round(check_s, 2),
            "verdict": result.verdict.describe(),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workload", default="etcd-kv")
    parser.add_argument("--targets", default="reference,etcd")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [
        bench(target, args.duration, args.clients, args.workload)
        for target in args.targets.split(",")
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(
                f"{row['target']:<10} {row['workload']:<8} {row['clients']} clients "
                f"{row['operations']:>6} ops in {row['duration_s']:g} s = {row['ops_per_s']:>7} "
                f"ops/s, {row['watch_events']} watch events, check {row['check_s']} s, "
                f"{row['verdict']}",
                file=sys.stdout,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

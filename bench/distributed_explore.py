"""Speed-up of the distributed exhaustive explorer: the single-process search, then a
local Dask cluster of each worker count, on the same bounds; the state counts must agree.

Run (the issue's bound: terms <= 2, logs <= 2, 3 messages in flight):
    .venv/bin/python -m bench.distributed_explore --max-term 2 --max-log 2 --max-messages 3 \
        --workers 1 2
Prints one line per run (wall seconds, the workers' CPU seconds, states, states/s, the
speed-up over the single-process wall time), each worker's states and peak memory at the
last progress report, and the load average before and after, since on a shared machine
wall times mean little without it (the CPU seconds are the steadier figure). Exits 1 if a run's verdict, state
count or depth differs from the single-process search's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from etcdspec.model.distributed_explore import DistributedProgress, explore_distributed
from etcdspec.model.exhaustive import ExhaustiveResult, explore_exhaustive, small_config
from etcdspec.workers import DaskPool


def _line(name: str, result: ExhaustiveResult, wall: float, baseline: float | None) -> str:
    speedup = f", speed-up {baseline / wall:.2f}x" if baseline else ""
    return (
        f"{name}: {result.verdict.describe()}, {result.distinct_states:,} states, depth "
        f"{result.depth_reached}, {wall:.1f} s wall, {result.cpu_seconds:.1f} CPU s, "
        f"{result.distinct_states / wall:,.0f} states/s{speedup}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-term", type=int, default=3)
    parser.add_argument("--max-log", type=int, default=1)
    parser.add_argument("--max-messages", type=int, default=2)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-single", action="store_true", help="Skip the single-process run.")
    args = parser.parse_args()
    config = small_config(
        max_term=args.max_term, max_log=args.max_log, max_messages=args.max_messages
    )
    print(f"bounds: {config.describe()}", flush=True)
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    baseline: ExhaustiveResult | None = None
    baseline_wall: float | None = None
    if not args.no_single:
        started = time.monotonic()
        baseline = explore_exhaustive(config)
        baseline_wall = time.monotonic() - started
        print(_line("single process", baseline, baseline_wall, None), flush=True)
    differs = False
    for workers in args.workers:
        started = time.monotonic()
        pool = DaskPool.local(workers)
        startup = time.monotonic() - started
        try:
            begun = time.monotonic()
            last: list[DistributedProgress] = []
            result = explore_distributed(config, pool, progress=last.append)
            wall = time.monotonic() - begun
        finally:
            pool.close()
        name = f"{workers} Dask worker{'s' if workers > 1 else ''} (+{startup:.1f} s start-up)"
        print(_line(name, result, wall, baseline_wall), flush=True)
        if last:
            shards = "; ".join(s.describe() for s in last[-1].workers)
            print(f"  last progress, per worker: {shards}", flush=True)
        if baseline is not None and (
            (result.verdict, result.distinct_states, result.depth_reached)
            != (baseline.verdict, baseline.distinct_states, baseline.depth_reached)
        ):
            print("  DIFFERS from the single-process search", flush=True)
            differs = True
    print(f"load average after: {os.getloadavg()[0]:.1f}", flush=True)
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())

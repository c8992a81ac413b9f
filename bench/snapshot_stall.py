"""Where one cluster's slow puts come from: stalls, and whether they fall at a snapshot.

Starts our 3-member cluster (--snapshot-count 10,000, as server_bench's), runs --clients
async clients putting 256-byte values for --duration seconds, and records when each
request slower than --slow-ms started and ended. Overlapping slow requests (within
--gap-s of each other) form one stall. Then it reads the members' logs for their
"snapshot saved" lines and says, for each stall, whether a member saved a snapshot
during it (or within --gap-s of it), with the throughput and p50/p99 of the whole run.

Over 40 s at 64 clients the cluster takes about 130,000 puts and its database grows to
about 45 MB, so a snapshot's cost that grows with the database shows as stalls that
grow from one snapshot to the next.

Usage: python -m bench.snapshot_stall [--duration 40] [--clients 64] [--slow-ms 100]
       [--gap-s 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import server_bench


@dataclass
class Stall:
    """Slow requests that overlap: from the first one's start to the last one's end."""

    start: float
    end: float
    requests: int
    longest_s: float

    def at_snapshot(self, snapshots: list[float], gap_s: float) -> bool:
        return any(self.start - gap_s <= t <= self.end + gap_s for t in snapshots)

    def describe(self, snapshots: list[float], gap_s: float) -> str:
        return (
            f"stall at {self.start:.3f}: {1000 * (self.end - self.start):.0f} ms, "
            f"{self.requests} slow requests, longest {1000 * self.longest_s:.0f} ms"
            + (", at a snapshot" if self.at_snapshot(snapshots, gap_s) else "")
        )


def group_stalls(slow: list[tuple[float, float]], gap_s: float) -> list[Stall]:
    """Slow requests (start, seconds) grouped into stalls: a request that starts within
    `gap_s` of the current stall's end joins it."""
    stalls: list[Stall] = []
    for start, seconds in sorted(slow):
        end = start + seconds
        if stalls and start - stalls[-1].end < gap_s:
            last = stalls[-1]
            last.end = max(last.end, end)
            last.requests += 1
            last.longest_s = max(last.longest_s, seconds)
        else:
            stalls.append(Stall(start, end, 1, seconds))
    return stalls


def snapshot_times(log_path: str) -> list[float]:
    """When a member's log says it saved a snapshot (its JSON lines' `ts`)."""
    times = []
    for line in Path(log_path).read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # what the member wrote to stderr outside its log, or a partial line
        if isinstance(entry, dict) and entry.get("msg") == "snapshot saved":
            times.append(float(entry["ts"]))
    return times


async def _put_load(
    endpoints: list[str], clients: int, seconds: float, slow_s: float
) -> tuple[server_bench.Cell, list[tuple[float, float]]]:
    """server_bench's load of puts; the cell, and its requests slower than `slow_s` as
    (wall-clock start, seconds)."""
    load = server_bench._Load(endpoints, clients, seed=1)
    to_wall = time.time() - time.perf_counter()
    try:
        await load.run("put", seconds)
    finally:
        await load.close()
    slow = [
        (to_wall + start, took)
        for start, took in zip(load.starts, load.latencies, strict=True)
        if took > slow_s
    ]
    return load.cell("ours", "put", float("nan")), slow


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=40.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--slow-ms", type=float, default=100.0)
    parser.add_argument("--gap-s", type=float, default=0.5)
    args = parser.parse_args(argv)
    with server_bench.running_cluster("ours", snapshot_count=10_000) as (plan, members):
        asyncio.run(server_bench._populate(plan.endpoints))
        before = sum(server_bench.read_cpu_seconds(m.pid) for m in members)
        cell, slow = asyncio.run(
            _put_load(list(plan.endpoints), args.clients, args.duration, args.slow_ms / 1000)
        )
        cpu = sum(server_bench.read_cpu_seconds(m.pid) for m in members) - before
        snapshots = sorted(t for m in members for t in snapshot_times(m.log_path))
    cell = server_bench.Cell(**{**cell.__dict__, "cpu_ms_per_op": 1000 * cpu / max(1, cell.ops)})
    stalls = group_stalls(slow, args.gap_s)
    for stall in stalls:
        print(stall.describe(snapshots, args.gap_s))
    at_snapshot = sum(1 for stall in stalls if stall.at_snapshot(snapshots, args.gap_s))
    longest = max((s.end - s.start for s in stalls), default=0.0)
    print(cell.describe())
    print(
        f"{len(stalls)} stalls over {args.slow_ms:g} ms, {at_snapshot} at a snapshot; "
        f"longest {1000 * longest:.0f} ms; {len(snapshots)} snapshots saved by the members"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

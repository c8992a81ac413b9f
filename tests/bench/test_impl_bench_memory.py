"""bench/server_bench.py: the RSS and CPU time it reads, the tables it prints, the
leader-first order of endpoints, and a cell run in alternating slices (`--slices`)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# bench/ is a folder of scripts, not an installed package: load the module from its file.
_PATH = Path(__file__).resolve().parents[2] / "bench" / "server_bench.py"
_SPEC = importlib.util.spec_from_file_location("server_bench", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
server_bench = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("server_bench", server_bench)  # dataclasses look their module up
_SPEC.loader.exec_module(server_bench)
MIB = server_bench.MIB
MemberMemory = server_bench.MemberMemory
format_memory_table = server_bench.format_memory_table
read_rss = server_bench.read_rss
read_cpu_seconds = server_bench.read_cpu_seconds
Cell = server_bench.Cell
format_table = server_bench.format_table


def test_read_rss_gives_the_resident_and_peak_bytes_of_a_live_process() -> None:
    rss, peak = read_rss(os.getpid())
    assert 0 < rss <= peak
    assert rss % 1024 == 0


def test_memory_table_puts_both_targets_side_by_side_with_their_ratio() -> None:
    rows = [
        MemberMemory("ours", "m1", 80 * MIB, 120 * MIB, 100_000, 25.0),
        MemberMemory("etcd", "m1", 160 * MIB, 161 * MIB, 100_000, 4.0),
    ]
    table = format_memory_table(rows).splitlines()
    assert table[2].split() == ["m1", "|", "80.0", "160.0", "0.50", "|", "120.0", "161.0"]
    assert table[-1] == "MiB after loading 100000 keys (ours 4000 keys/s, etcd 25000 keys/s)"


def test_read_cpu_seconds_grows_with_work_done() -> None:
    before = read_cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    assert read_cpu_seconds(os.getpid()) > before


def test_throughput_table_shows_latencies_and_cpu_per_op_side_by_side() -> None:
    cells = [
        Cell("ours", "put", 64, 600, 3.0, 40.0, 500.0, 0, 1.1),
        Cell("etcd", "put", 64, 2400, 3.0, 12.0, 60.0, 0, 0.3),
    ]
    row = format_table(cells).splitlines()[2]
    assert row.split(" | ") == [
        "put                       64",
        "       200        800   0.25",
        "   40.00    12.00",
        "  500.00    60.00",
        "    1.10     0.30",
    ]


def test_endpoints_go_leader_first_or_follower_first_the_rest_in_order() -> None:
    statuses = [
        {"endpoint": "http://a", "member_id": 1, "leader": 2},
        {"endpoint": "http://b", "member_id": 2, "leader": 2},
        {"endpoint": "http://c", "member_id": 3, "leader": 2},
    ]
    assert server_bench.order_endpoints(statuses) == ["http://b", "http://a", "http://c"]
    assert server_bench.order_endpoints(statuses, "follower") == [
        "http://a",
        "http://c",
        "http://b",
    ]


def test_a_cell_in_slices_alternates_the_clusters_until_each_ran_its_duration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--slices`: one real cluster of ours, entered as two targets: the slices alternate
    a, b, a, b, ..., each at most the slice long, until each target ran the duration, on
    the same clients' channels throughout; both cells count their ops and members' CPU."""
    slices: list[tuple[int, float]] = []
    run = server_bench._Load.run

    async def recorded(self: Any, workload: str, seconds: float) -> None:
        slices.append((id(self), seconds))
        channels = list(self.channels)
        await run(self, workload, seconds)
        assert self.channels == channels

    monkeypatch.setattr(server_bench._Load, "run", recorded)
    with server_bench.running_cluster("ours", snapshot_count=10_000) as (plan, members):
        endpoints = list(plan.endpoints)
        plain = server_bench.PLAIN
        clusters = {"a": (endpoints, members, plain), "b": (endpoints, members, plain)}
        cells = asyncio.run(
            server_bench._run_cell_in_slices(clusters, "put", 2, 0.5, seed=1, slice_s=0.2)
        )
    a, b = cells
    assert (a.target, b.target) == ("a", "b")
    loads = [load for load, _ in slices]
    assert loads[0::2] == [loads[0]] * len(loads[0::2])
    assert loads[1::2] == [loads[1]] * len(loads[1::2]) and loads[0] != loads[1]
    assert len(slices) >= 4 and all(seconds <= 0.2 for _, seconds in slices)
    for cell in cells:
        assert cell.seconds >= 0.5 and cell.ops > 0 and cell.errors == 0
        assert cell.cpu_ms_per_op > 0 and cell.p50_ms <= cell.p99_ms

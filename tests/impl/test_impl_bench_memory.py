"""bench/server_bench.py: the RSS and CPU time it reads, the tables it prints, and the
leader-first order of endpoints."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

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

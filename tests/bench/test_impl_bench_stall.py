"""bench/snapshot_stall.py: slow requests grouped into stalls, and the members' snapshot
times read from their logs."""

from __future__ import annotations

import json
from pathlib import Path

from bench.snapshot_stall import Stall, group_stalls, snapshot_times


def test_overlapping_or_close_slow_requests_form_one_stall() -> None:
    slow = [(10.0, 0.3), (10.1, 0.15), (10.5, 0.2), (12.0, 0.12)]  # (start, seconds)
    stalls = group_stalls(slow, gap_s=0.5)
    assert stalls == [Stall(10.0, 10.7, 3, 0.3), Stall(12.0, 12.12, 1, 0.12)]
    assert stalls[0].at_snapshot([10.9], gap_s=0.5)
    assert not stalls[1].at_snapshot([10.9], gap_s=0.5)
    assert stalls[0].describe([10.9], 0.5) == (
        "stall at 10.000: 700 ms, 3 slow requests, longest 300 ms, at a snapshot"
    )


def test_snapshot_times_come_from_the_members_json_log_lines(tmp_path: Path) -> None:
    log = tmp_path / "m1.log"
    lines = [
        json.dumps({"level": "info", "ts": 5.5, "msg": "member starting"}),
        json.dumps({"level": "info", "ts": 7.25, "msg": "snapshot saved", "index": 10000}),
        "a line that is not JSON",
        json.dumps({"level": "info", "ts": 9.0, "msg": "snapshot saved", "index": 20000}),
    ]
    log.write_text("\n".join(lines) + "\n")
    assert snapshot_times(str(log)) == [7.25, 9.0]

"""The default resident memory bound of `check_history` (unknown when reached)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from etcdspec.checker.check import (
    DEFAULT_MEMORY_MB,
    CheckOptions,
    check_history,
    default_memory_mb,
)
from etcdspec.checker.history import build_history
from etcdspec.checker.simulate import simulate_register
from etcdspec.verdict import Verdict


@pytest.mark.parametrize(
    ("meminfo", "expected"),
    [
        ("MemTotal:       24684544 kB\nMemFree: 1 kB\n", DEFAULT_MEMORY_MB),
        ("MemTotal:        2097152 kB\n", 1024.0),
        ("MemFree: 5 kB\n", DEFAULT_MEMORY_MB),
        ("MemTotal: lots kB\n", DEFAULT_MEMORY_MB),
    ],
)
def test_default_bound_is_the_smaller_of_fixed_and_half_physical(
    tmp_path: Path, meminfo: str, expected: float
) -> None:
    path = tmp_path / "meminfo"
    path.write_text(meminfo)
    assert default_memory_mb(path) == expected


def test_default_bound_without_proc_is_fixed(tmp_path: Path) -> None:
    assert default_memory_mb(tmp_path / "absent") == DEFAULT_MEMORY_MB


@pytest.mark.parametrize(
    ("given", "bound"),
    [(None, "default"), (0.0, None), (512.0, 512.0)],
)
def test_memory_option_none_is_default_and_zero_is_unbounded(
    given: float | None, bound: float | str | None
) -> None:
    expected = default_memory_mb() if bound == "default" else bound
    assert CheckOptions(max_memory_mb=given).memory_bound_mb() == expected


def test_reaching_the_bound_in_check_history_is_unknown() -> None:
    history = build_history(simulate_register(9, ops=200))
    report = check_history(history, CheckOptions(model="register", max_memory_mb=1))
    assert report.verdict is Verdict.UNKNOWN
    assert "memory bound of 1 MB" in report.results[0].summary


def test_unbounded_memory_still_decides() -> None:
    history = build_history(simulate_register(9, ops=200))
    report = check_history(history, CheckOptions(model="register", max_memory_mb=0))
    assert report.verdict is Verdict.TRUE


# Run in a fresh process: memory an earlier test freed stays resident (the allocator
# keeps it for reuse), so in the test process the search could grow 40 MB without the
# resident size moving, and run into the time budget instead.
# The search: fourteen overlapping appends and a read no order of them gives. Every
# order leaves another string, so the memo grows with every step (a register history
# with many info operations, used before, now grows slowly: the memo's subsumption
# keeps few configurations, and the time budget came first).
_HARD_SEARCH = """
import json
from etcdspec.checker.check import CheckOptions, check_history
from etcdspec.checker.history import HistoryBuilder
from etcdspec.checker.budget import resident_mb
builder = HistoryBuilder()
for p in range(14):
    builder.add(p, "invoke", "append", {"key": "k", "value": f"{p:x}"})
for p in range(14):
    builder.add(p, "ok", "append", {"key": "k", "value": f"{p:x}"})
builder.add(100, "invoke", "get", {"key": "k"})
builder.add(100, "ok", "get", {"key": "k", "value": "00"})
history = builder.history()
before = resident_mb()
bound = before + 40
options = CheckOptions(model="kv", max_memory_mb=bound, timeout_s=60)
report = check_history(history, options)
print(json.dumps({"bound": bound, "after": resident_mb(), "verdict": report.verdict.value,
                  "summary": report.results[0].summary}))
"""


def test_bound_is_honoured_within_a_few_megabytes_on_a_hard_search() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _HARD_SEARCH], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout)
    assert result["verdict"] == Verdict.UNKNOWN.value
    assert "memory bound" in result["summary"]
    assert result["after"] < result["bound"] + 32

"""One stage of `etcdspec verify`: a named check with a verdict, a summary and its time.

Each part of the project offers a stage as a library function
`run_stage(options: StageOptions) -> StageResult`; `etcdspec verify` runs them in order
and prints one table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from etcdspec.verdict import Verdict


@dataclass(frozen=True)
class StageOptions:
    report_dir: Path
    seed: int = 0
    quick: bool = False  # a shorter run (tests use it); the verdict logic is the same
    # where the distributed parts run (etcdspec.workers.open_pool): local worker
    # processes (more than 1) or a running Dask scheduler's address; neither: this process
    workers: int | None = None
    cluster: str | None = None
    worker_memory_mb: int | None = None  # each local worker's memory bound (None: Dask's auto)


@dataclass(frozen=True)
class StageResult:
    name: str
    verdict: Verdict
    summary: str
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.name}: {self.verdict.describe()} — {self.summary} ({self.seconds:.1f} s)"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "valid": self.verdict.to_json(),
            "summary": self.summary,
            "seconds": round(self.seconds, 3),
            "details": self.details,
        }

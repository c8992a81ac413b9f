"""One named check's outcome, as the terminal table, result.json and the timeline show it.

Contract: `CheckResult` is frozen; `verdict` is three-valued (a check that could not be
decided is UNKNOWN, never TRUE); `details` are describe() texts of what broke;
`events` are history event indices to highlight (the failing operations).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from etcdspec.verdict import Verdict


@dataclass(frozen=True)
class CheckResult:
    name: str
    verdict: Verdict
    summary: str
    seconds: float = 0.0
    details: tuple[str, ...] = field(default=())
    events: tuple[int, ...] = field(default=())

    def describe(self) -> str:
        return f"{self.name}: {self.verdict.describe()} — {self.summary}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "valid": self.verdict.to_json(),
            "summary": self.summary,
            "seconds": round(self.seconds, 4),
            "details": list(self.details),
            "events": list(self.events),
        }

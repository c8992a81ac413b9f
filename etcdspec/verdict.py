"""Three-valued verdicts: a check holds, is violated, or could not be decided.

Merging is pessimistic: false > unknown > true. A crashed or timed-out check is
unknown, never a pass.
"""

from __future__ import annotations

from enum import Enum

from etcdspec.exitcodes import ExitCode


class Verdict(Enum):
    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"

    def merge(self, other: Verdict) -> Verdict:
        if Verdict.FALSE in (self, other):
            return Verdict.FALSE
        if Verdict.UNKNOWN in (self, other):
            return Verdict.UNKNOWN
        return Verdict.TRUE

    @staticmethod
    def merge_all(verdicts: list[Verdict]) -> Verdict:
        merged = Verdict.TRUE
        for verdict in verdicts:
            merged = merged.merge(verdict)
        return merged

    def exit_code(self) -> ExitCode:
        return {
            Verdict.TRUE: ExitCode.HOLDS,
            Verdict.FALSE: ExitCode.VIOLATION,
            Verdict.UNKNOWN: ExitCode.UNKNOWN,
        }[self]

    def to_json(self) -> bool | str:
        """As result.json writes it: true, false or "unknown"."""
        if self is Verdict.TRUE:
            return True
        if self is Verdict.FALSE:
            return False
        return "unknown"

    def describe(self) -> str:
        return {Verdict.TRUE: "holds", Verdict.FALSE: "VIOLATED", Verdict.UNKNOWN: "unknown"}[self]

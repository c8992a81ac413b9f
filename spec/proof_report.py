"""A proof's results: one verdict per obligation, and the report of the whole proof.

Contract
- `CheckKind`: the obligations (init, preserve, enabled, witness; see spec/prove.py).
- `CheckResult`: one obligation's verdict (true, false or unknown), time, and what
  explains it: a counterexample (false), a note (why unknown; the rule that settled
  it), the route a preservation took (rule, hint, fallback, full query) and the Z3
  work it cost (isolated proofs only). `label()` names the obligation.
- `ProofReport`: every result of one spec (or mutation), in the order they were
  checked, with the merged verdict (false > unknown > true) and the hint routes.
- `describe()` is the one text of each, `to_json()` its part of result.json.
  Frozen dataclasses, made by spec/prove.py and spec/parallel.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from etcdspec.spec.counterexample import Counterexample
from etcdspec.spec.hints import Route
from etcdspec.verdict import Verdict


class CheckKind(Enum):
    INIT = "init"
    PRESERVE = "preserve"
    ENABLED = "enabled"
    WITNESS = "witness"


@dataclass(frozen=True)
class CheckResult:
    kind: CheckKind
    subject: str  # the property, action (enabled) or witness
    action: str | None
    verdict: Verdict
    seconds: float
    counterexample: Counterexample | None = None
    note: str = ""
    route: Route | None = None  # preserve only: by rule, by hint, or by the full query
    rlimit: int | None = None  # Z3 work of its queries (isolated proofs only)

    def label(self) -> str:
        if self.kind is CheckKind.INIT:
            return f"init => {self.subject}"
        if self.kind is CheckKind.PRESERVE:
            return f"{self.subject} preserved by {self.action}"
        if self.kind is CheckKind.ENABLED:
            return f"action {self.subject} can fire"
        return f"witness {self.subject}"

    def describe(self) -> str:
        notes = [x for x in (self._route_text(), self.note) if x]
        note = f"  [{'; '.join(notes)}]" if notes else ""
        return f"{self.verdict.describe():8} {self.label()}  ({self.seconds * 1000:.0f} ms){note}"

    def _route_text(self) -> str:
        if self.route is None or self.route is Route.RULE:
            return ""  # a rule's note names the rule
        return self.route.describe()

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "kind": self.kind.value,
            "subject": self.subject,
            "action": self.action,
            "valid": self.verdict.to_json(),
            "seconds": round(self.seconds, 4),
        }
        if self.note:
            document["note"] = self.note
        if self.route is not None:
            document["route"] = self.route.value
        if self.rlimit is not None:
            document["rlimit"] = self.rlimit
        if self.counterexample is not None:
            document["counterexample"] = self.counterexample.to_json()
        return document


@dataclass(frozen=True)
class ProofReport:
    spec: str
    mutation: str | None
    results: tuple[CheckResult, ...]
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def vacuous(self) -> bool:
        """No invariant was checked (the spec states none): nothing proved is no pass."""
        return not any(r.kind in (CheckKind.INIT, CheckKind.PRESERVE) for r in self.results)

    @property
    def verdict(self) -> Verdict:
        verdicts = [r.verdict for r in self.results]
        return Verdict.merge_all(verdicts + [Verdict.UNKNOWN] * self.vacuous)

    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.verdict is not Verdict.TRUE]

    def first_counterexample(self) -> Counterexample | None:
        return next(
            (
                r.counterexample
                for r in self.results
                if r.counterexample is not None and r.verdict is Verdict.FALSE
            ),
            None,
        )

    def describe(self) -> str:
        head = f"spec {self.spec}" + (f" (mutation {self.mutation})" if self.mutation else "")
        lines = [head]
        lines += ["  " + r.describe() for r in self.results]
        for result in self.results:
            if result.verdict is Verdict.FALSE and result.counterexample is not None:
                lines.append("")
                lines.append(result.counterexample.describe())
        if self.vacuous:
            lines.append("  unknown  no invariant to prove: the spec states none")
        counts = {v: sum(1 for r in self.results if r.verdict is v) for v in Verdict}
        routes = self.routes()
        hinted = ""
        if routes[Route.HINT] or routes[Route.FALLBACK] or routes[Route.STALE]:
            hinted = (
                f"; hints: {routes[Route.HINT]} proved by hint, {routes[Route.FALLBACK]} "
                f"fell back, {routes[Route.STALE]} stale"
            )
        lines.append(
            f"{head}: {self.verdict.describe()} — {counts[Verdict.TRUE]} proved, "
            f"{counts[Verdict.FALSE]} failed, {counts[Verdict.UNKNOWN]} unknown, "
            f"{self.seconds:.2f} s{hinted}"
        )
        return "\n".join(lines)

    def routes(self) -> dict[Route, int]:
        """How many preservation obligations took each route (rule, hint, fallback...)."""
        return {route: sum(1 for r in self.results if r.route is route) for route in Route}

    def rlimit(self, kinds: Sequence[CheckKind] = tuple(CheckKind)) -> int | None:
        """The Z3 work of the obligations of `kinds` (None unless each of them was
        counted: an isolated proof counts init, preserve and enabled)."""
        counts = [r.rlimit for r in self.results if r.kind in kinds]
        return None if any(c is None for c in counts) else sum(c or 0 for c in counts)

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "mutation": self.mutation,
            "valid": self.verdict.to_json(),
            "seconds": round(self.seconds, 3),
            "routes": {route.value: count for route, count in self.routes().items()},
            "results": [r.to_json() for r in self.results],
            **({"note": "no invariant to prove: the spec states none"} if self.vacuous else {}),
        }

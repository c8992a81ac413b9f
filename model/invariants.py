"""The one exception every model invariant check raises: `InvariantViolation`.

Contract: a check that finds a broken invariant raises `InvariantViolation(invariant,
detail)`, where `invariant` is the invariant's name as the spec and the reports spell it
(e.g. "RevisionMonotonic", "ElectionSafety") and `detail` is the `describe()` text of the
states that matter. It subclasses AssertionError so that pytest and Hypothesis report it
as a failed check, never as an internal error. Store invariants live in
`etcdspec.model.store.check_invariants`; Raft's in the Raft modules.
"""

from __future__ import annotations


class InvariantViolation(AssertionError):
    """A named model invariant does not hold; `detail` shows the offending state."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"invariant {invariant} violated: {detail}")
        self.invariant = invariant
        self.detail = detail

    def describe(self) -> str:
        return f"{self.invariant}: {self.detail}"

"""What a linearizability check gives: its verdict per partition, the linearization
found, and on a violation where the search got furthest.

Contract
- `LinearizabilityResult`: the merged verdict (false > unknown > true), the model's
  name, operations checked and dropped, one `PartitionResult` per partition searched
  (verdict, linearization as op ids in order, steps, time, the reason of an unknown),
  the model's notes and synthetic operations (e.g. lease expiries).
- `Failure`: the longest linearizable prefix (placed op ids, in order), the operation
  that could not be placed with the model's reason, the window of concurrent operations
  around it, and the model state there (text and JSON).
- `describe()` is the one text of each, `to_json()` its part of result.json.
  Frozen dataclasses: made by checker/linearizability.py, read by reports.
- The verdict first, the explanation when asked for: `PartitionResult.refuted` makes a
  refuted partition's result whose `failure` and `steps` a `Refutation` works out (the
  failure from the finished search's deepest configuration, or a model sweep's simpler
  one) the first time either is read, and keeps. Every read goes through the fields
  (`describe`, `to_json`, ==, `asdict`, repr), so each sees exactly what an eager
  result holds; a caller that reads only `verdict` never pays for the report.
  `with_seconds` copies a result without working it out.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from etcdspec.checker.history import Operation
from etcdspec.verdict import Verdict


@dataclass(frozen=True)
class Failure:
    """Where the search got furthest before it had to give up on a partition."""

    partition: str | None
    failing_op: int  # op id
    reason: str
    window: tuple[int, ...]  # op ids: the failing op and the operations concurrent with it
    prefix: tuple[int, ...]  # op ids placed, in linearization order (longest prefix)
    state: str
    state_json: Any
    prefix_end_index: int  # history event index: every ok op returned before it is placed

    def describe(self) -> str:
        where = f"key {self.partition}: " if self.partition else ""
        return (
            f"{where}op {self.failing_op} cannot be linearized after the longest "
            f"linearizable prefix of {len(self.prefix)} operations: {self.reason}; "
            f"model state: {self.state}; window: ops {', '.join(map(str, self.window))}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "failing_op": self.failing_op,
            "reason": self.reason,
            "window": list(self.window),
            "prefix": list(self.prefix),
            "prefix_end_index": self.prefix_end_index,
            "state": self.state,
            "state_json": self.state_json,
        }


class Refutation:
    """A refuted partition's (failure, steps), worked out by `explain` when first asked
    for and kept; `explain` (and the search it holds) is dropped then. An error in it
    propagates to the reader and is raised again at the next read."""

    __slots__ = ("_explain", "_found")

    def __init__(self, explain: Callable[[], tuple[Failure, int]]) -> None:
        self._explain: Callable[[], tuple[Failure, int]] | None = explain
        self._found: tuple[Failure, int] | None = None

    def found(self) -> tuple[Failure, int]:
        if self._found is None:
            assert self._explain is not None
            self._found = self._explain()
            self._explain = None
        return self._found

    @property
    def pending(self) -> bool:
        """Whether it has not been worked out yet."""
        return self._found is None


class _Explained:
    """`failure` or `steps` of a result made by `PartitionResult.refuted`: absent from
    its __dict__ until read, then both are worked out by its Refutation and kept there.
    A non-data descriptor, so a result made with the values (the dataclass's __init__
    puts them in its __dict__) reads them as plain attributes; ==, repr and `asdict`
    read every field, so they work a pending one out."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            raise AttributeError(self.name)
        fields = obj.__dict__
        fields["failure"], fields["steps"] = fields["_refutation"].found()
        return fields[self.name]


@dataclass(frozen=True)
class PartitionResult:
    """One partition's verdict. `failure` and `steps` may be given one `Refutation` (a
    refuted partition whose report is worked out when first read; see the module
    docstring)."""

    partition: str | None
    verdict: Verdict
    operations: int
    linearization: tuple[int, ...]  # op ids in order (info ops that took effect included)
    final_state: Any
    failure: Failure | None
    reason: str
    steps: int
    seconds: float

    @classmethod
    def refuted(
        cls, partition: str | None, operations: int, refutation: Refutation, seconds: float
    ) -> PartitionResult:
        """A refuted partition whose failure and steps `refutation` works out when either
        is first read."""
        result = cls(partition, Verdict.FALSE, operations, (), None, None, "", 0, seconds)
        fields = result.__dict__
        del fields["failure"], fields["steps"]  # read through `_Explained`
        fields["_refutation"] = refutation
        return result

    def with_seconds(self, seconds: float) -> PartitionResult:
        """This result with `seconds` set; a pending report stays pending."""
        timed = copy.copy(self)
        object.__setattr__(timed, "seconds", seconds)
        return timed

    @property
    def explained(self) -> bool:
        """False while its failure is a `Refutation` not yet worked out."""
        fields = self.__dict__
        return "failure" in fields or not fields["_refutation"].pending

    def describe(self) -> str:
        name = self.partition if self.partition is not None else "(all)"
        text = f"{name}: {self.verdict.describe()} — {self.operations} ops, {self.steps} steps"
        if self.failure is not None:
            text += f"; {self.failure.describe()}"
        elif self.reason:
            text += f"; {self.reason}"
        return text


# The two fields a Refutation may stand for, set after the dataclass is made (so that it
# has no default for them).
PartitionResult.failure = _Explained("failure")  # type: ignore[assignment]
PartitionResult.steps = _Explained("steps")  # type: ignore[assignment]


@dataclass(frozen=True)
class LinearizabilityResult:
    verdict: Verdict
    model: str
    operations: int
    partitions: tuple[PartitionResult, ...]
    seconds: float
    reason: str = ""
    dropped: int = 0  # fail operations and unobservable info operations
    notes: tuple[str, ...] = field(default=())
    synthetic: tuple[Operation, ...] = field(default=())  # the model's (e.g. lease expiry)

    @property
    def failure(self) -> Failure | None:
        for part in self.partitions:
            if part.failure is not None:
                return part.failure
        return None

    def linearization(self) -> tuple[int, ...]:
        """The whole order (one partition) or the concatenation per partition."""
        return tuple(op for part in self.partitions for op in part.linearization)

    def describe(self) -> str:
        head = (
            f"linearizability ({self.model}): {self.verdict.describe()} — "
            f"{self.operations} operations, {len(self.partitions)} partition(s), "
            f"{self.seconds:.2f} s"
        )
        if self.failure is not None:
            return f"{head}\n  {self.failure.describe()}"
        if self.reason:
            return f"{head}\n  {self.reason}"
        return head

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.verdict.to_json(),
            "model": self.model,
            "operations": self.operations,
            "dropped": self.dropped,
            "seconds": round(self.seconds, 4),
            "reason": self.reason,
            "failure": self.failure.to_json() if self.failure else None,
            "partitions": [
                {
                    "partition": part.partition,
                    "valid": part.verdict.to_json(),
                    "operations": part.operations,
                    "steps": part.steps,
                    "seconds": round(part.seconds, 4),
                    "reason": part.reason,
                }
                for part in self.partitions
            ],
        }

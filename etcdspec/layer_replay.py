"""What replaying a model run on another layer came to, step by step: the result shared
by the replays on the spec's evaluator (model/refinement_replay.py) and on the server's
Raft core (impl/tools/itf_replay.py). Each step agrees, differs, or does not map onto the
layer; `LayerReplay.LAYER` names the layer in `describe()`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class ReplayStep:
    """One step of the run and how the layer followed it."""

    number: int
    label: str
    outcome: str  # "agrees", "differs" or "does not map"
    detail: str = ""

    def describe(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.number:3d}. {self.label} — {self.outcome}{detail}"


@dataclass(frozen=True)
class LayerReplay:
    """The replay of a run on one layer; `mapped` counts the steps the layer took."""

    steps: tuple[ReplayStep, ...]
    total: int
    LAYER: ClassVar[str] = "another layer"

    @property
    def mapped(self) -> int:
        return sum(1 for s in self.steps if s.outcome != "does not map")

    @property
    def agreed(self) -> int:
        return sum(1 for s in self.steps if s.outcome == "agrees")

    def first_difference(self) -> ReplayStep | None:
        return next((s for s in self.steps if s.outcome != "agrees"), None)

    def describe(self) -> str:
        head = (
            f"replayed {self.mapped} of {self.total} step(s) on {self.LAYER}: {self.agreed} agree"
        )
        first = self.first_difference()
        if first is not None:
            head += f"; first difference at step {first.number} ({first.outcome})"
        return "\n".join([head, *(s.describe() for s in self.steps)])

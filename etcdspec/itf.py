"""ITF JSON: the Informal Trace Format that Apalache and Quint read and draw.

Counterexamples from the spec (`etcdspec prove --itf`) and from the model
(`etcdspec explore --itf`) are written with this one writer. A trace is a list of
states, each a mapping from variable name to value, and each state after the first
carries, in its `#meta`, the label of the action that produced it.

Value encoding (ITF): bool, str and int as JSON (ints beyond 2**53 as `#bigint`);
lists as JSON arrays (sequences); dicts with str keys as records; tuples as `#tup`;
sets and frozensets as `#set`; other dicts as `#map`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SAFE_INT = 2**53


def to_itf_value(value: Any) -> Any:
    """Encode one Python value as an ITF value."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, int):
        return value if -_SAFE_INT < value < _SAFE_INT else {"#bigint": str(value)}
    if isinstance(value, tuple):
        return {"#tup": [to_itf_value(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        items = [to_itf_value(v) for v in value]
        items.sort(key=lambda v: json.dumps(v, sort_keys=True))
        return {"#set": items}
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: to_itf_value(v) for k, v in value.items()}
        pairs = [[to_itf_value(k), to_itf_value(v)] for k, v in value.items()]
        pairs.sort(key=lambda kv: json.dumps(kv[0], sort_keys=True))
        return {"#map": pairs}
    if isinstance(value, Sequence):
        return [to_itf_value(v) for v in value]
    return {"#unserializable": str(value)}


@dataclass
class ItfTrace:
    """A trace under construction: variables, states and the action labels between them."""

    variables: list[str]
    source: str = ""
    description: str = ""
    states: list[dict[str, Any]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # more #meta fields (plain JSON)

    def add_state(self, values: Mapping[str, Any], action: str = "") -> None:
        """Append a state; `action` is the label of the step that led to it ("" for init)."""
        missing = [v for v in self.variables if v not in values]
        if missing:
            raise ValueError(f"ITF state lacks variables {missing}: give every declared variable")
        self.states.append({v: values[v] for v in self.variables})
        self.actions.append(action)

    def to_json(self) -> dict[str, Any]:
        states = []
        for index, (values, action) in enumerate(zip(self.states, self.actions, strict=True)):
            meta: dict[str, Any] = {"index": index}
            if action:
                meta["action"] = action
            state: dict[str, Any] = {"#meta": meta}
            state.update({k: to_itf_value(v) for k, v in values.items()})
            states.append(state)
        return {
            "#meta": {
                "format": "ITF",
                "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
                "source": self.source,
                "description": self.description,
                **self.meta,
            },
            "vars": list(self.variables),
            "states": states,
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n")

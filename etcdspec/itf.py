"""ITF JSON: the Informal Trace Format that Apalache and Quint read and draw.

Counterexamples from the spec (`etcdspec prove --itf`) and from the model
(`etcdspec explore --itf`) are written with this one writer. A trace is a list of
states, each a mapping from variable name to value, and each state after the first
carries, in its `#meta`, the label of the action that produced it.

Value encoding (ITF, Apalache's ADR-015 as revised 2023-09-14): bool and str as JSON;
every int as `{"#bigint": "N"}` (JSON numbers are not ITF values); lists as JSON arrays
(sequences); dicts whose keys are all identifiers as records (Quint's records and
itf-py's named tuples need identifiers), other dicts as `#map`; tuples as `#tup`; sets
and frozensets as `#set`; None (ITF has no null) as the variant `{"tag": "Nil",
"value": {}}` (a tag with an empty record: Quint's `None` is a Python keyword that
itf-py cannot name).

`from_itf_value` decodes a value back to plain Python (ints, tuples, lists for sets,
dicts, None); `problems(document)` lists where a document departs from ITF's shape
(`#meta`, `vars`, `states`, each state's variables, every value's encoding).
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NONE_VALUE: dict[str, Any] = {"tag": "Nil", "value": {}}
_BIGINT = re.compile(r"-?[0-9]+")


def _field_name(key: str) -> bool:
    """Whether a str key can be a record's field: an identifier (Quint's records and
    itf-py's named tuples need one), else the dict is written as a #map."""
    return key.isidentifier() and not keyword.iskeyword(key) and not key.startswith("_")


def to_itf_value(value: Any) -> Any:
    """Encode one Python value as an ITF value."""
    if value is None:
        return {"tag": "Nil", "value": {}}
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return {"#bigint": str(value)}
    if isinstance(value, tuple):
        return {"#tup": [to_itf_value(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        items = [to_itf_value(v) for v in value]
        items.sort(key=lambda v: json.dumps(v, sort_keys=True))
        return {"#set": items}
    if isinstance(value, Mapping):
        if all(isinstance(k, str) and _field_name(k) for k in value):
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


def from_itf_value(value: Any) -> Any:
    """An ITF value as plain Python: #bigint → int, #tup → tuple, #set → list, #map →
    dict, the empty option → None, records → dict, lists → list."""
    if isinstance(value, list):
        return [from_itf_value(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value == NONE_VALUE:
        return None
    if "#bigint" in value:
        return int(value["#bigint"])
    if "#tup" in value:
        return tuple(from_itf_value(v) for v in value["#tup"])
    if "#set" in value:
        return [from_itf_value(v) for v in value["#set"]]
    if "#map" in value:
        return {_key(from_itf_value(k)): from_itf_value(v) for k, v in value["#map"]}
    return {k: from_itf_value(v) for k, v in value.items() if k != "#meta"}


def _key(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _key(v)) for k, v in value.items()))
    return value


_TAGS = ("#bigint", "#tup", "#set", "#map", "#unserializable")


def _value_problems(value: Any, where: str) -> list[str]:
    if isinstance(value, (bool, str)):
        return []
    if value is None:
        return [f"{where}: null is not an ITF value"]
    if isinstance(value, (int, float)):
        return [f'{where}: the JSON number {value} is not an ITF value (write {{"#bigint": ...}})']
    if isinstance(value, list):
        return [p for k, v in enumerate(value) for p in _value_problems(v, f"{where}[{k}]")]
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__} is not an ITF value"]
    tags = [k for k in value if k.startswith("#")]
    if not tags:  # a record
        return [p for k, v in value.items() for p in _value_problems(v, f"{where}.{k}")]
    if len(value) != 1 or tags[0] not in _TAGS:
        return [f"{where}: an object with {sorted(value)} is no ITF value (one of {_TAGS})"]
    tag, body = tags[0], value[tags[0]]
    if tag == "#bigint":
        ok = isinstance(body, str) and _BIGINT.fullmatch(body) is not None
        return [] if ok else [f"{where}: #bigint takes a string of digits, got {body!r}"]
    if tag == "#unserializable":
        return [] if isinstance(body, str) else [f"{where}: #unserializable takes a string"]
    if not isinstance(body, list):
        return [f"{where}: {tag} takes a list, got {type(body).__name__}"]
    if tag == "#map":
        if not all(isinstance(pair, list) and len(pair) == 2 for pair in body):
            return [f"{where}: #map takes a list of [key, value] pairs"]
        return [
            p
            for k, pair in enumerate(body)
            for side, v in zip(("key", "value"), pair, strict=True)
            for p in _value_problems(v, f"{where}#map[{k}].{side}")
        ]
    return [p for k, v in enumerate(body) for p in _value_problems(v, f"{where}{tag}[{k}]")]


def problems(document: Any) -> list[str]:
    """Where `document` departs from ITF's documented shape; [] when it conforms."""
    if not isinstance(document, dict):
        return ["an ITF trace is a JSON object"]
    found = []
    if not isinstance(document.get("#meta", {}), dict):
        found.append("#meta: must be an object")
    variables = document.get("vars")
    if not isinstance(variables, list) or not all(isinstance(v, str) for v in variables):
        found.append("vars: must be a list of variable names")
        variables = []
    states = document.get("states")
    if not isinstance(states, list) or not states:
        return [*found, "states: must be a non-empty list"]
    for index, state in enumerate(states):
        where = f"states[{index}]"
        if not isinstance(state, dict):
            found.append(f"{where}: a state is an object")
            continue
        if not isinstance(state.get("#meta", {}), dict):
            found.append(f"{where}.#meta: must be an object")
        names = sorted(k for k in state if k != "#meta")
        missing = sorted(set(variables) - set(names))
        if missing:  # more is allowed: Quint adds its mbt:: fields, not in vars
            found.append(f"{where}: lacks variable(s) {missing} of vars")
        for name in names:
            found += _value_problems(state[name], f"{where}.{name}")
    loop = document.get("loop")
    if loop is not None and not (isinstance(loop, int) and 0 <= loop < len(states)):
        found.append("loop: must be the index of a state")
    return found

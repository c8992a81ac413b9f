"""Our ITF output has ITF's documented shape (Apalache's ADR-015, revised 2023-09-14):
`#meta`, `vars`, `states`, every int as {"#bigint": "N"}, sets as {"#set": [...]}, maps
as {"#map": [[k, v], ...]}, tuples as {"#tup": [...]}, no JSON number and no null; and a
third-party reader (itf-py, Informal Systems' format in Python) reads every kind we write
back to the same values: the model's explorer (cluster and store), the prover's
counterexample to induction and BMC's run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from itf_py import trace_from_json

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.itf import ItfTrace, from_itf_value, problems, to_itf_value
from etcdspec.model.counterexample import build

BMC_SIZES = "node=3,term=2,index=1,value=1,quorum=2"


def _written(tmp_path: Path, argv: list[str]) -> dict[str, Any]:
    itf = tmp_path / "out.itf.json"
    assert run([*argv, "--itf", str(itf), "--quiet"]) == ExitCode.VIOLATION
    document: dict[str, Any] = json.loads(itf.read_text())
    return document


@pytest.mark.parametrize(
    "argv",
    [
        ["explore", "--bug", "vote_not_persisted"],  # the cluster model (exhaustive)
        ["prove", "lease", "--mutation", "no_checkpoint", "--only", "no_key_on_expired_lease"],
        ["prove", "raft", "--mutation", "two_votes", "--bmc", "4", "--size", BMC_SIZES],
    ],
    ids=["explore-cluster", "prove-cti", "prove-bmc"],
)
def test_what_we_write_has_itf_s_shape_and_itf_py_reads_it(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    document = _written(tmp_path, argv)
    capsys.readouterr()
    assert problems(document) == []
    trace = trace_from_json(document)
    assert trace.vars == document["vars"] and len(trace.states) == len(document["states"]) >= 2
    for state, raw in zip(trace.states, document["states"], strict=True):
        assert set(state.values) == set(document["vars"])
        assert state.meta == raw["#meta"]
    text = json.dumps(document["states"])
    assert '"#bigint"' in text and ": null" not in text


def test_the_store_model_s_counterexample_too() -> None:
    """The store's state: keys that are not identifiers (a map), revisions (ints)."""
    initial = {"revision": 1, "compact_revision": 0, "kvs": {}, "leases": {}}
    after = {
        "revision": 2,
        "compact_revision": 0,
        "kvs": {"a/b": "x (c2 m2 v1)"},
        "leases": {7: {"ttl": 3, "keys": frozenset({"a/b"})}},
    }
    document = build("store", "X", "", initial, [("put(a/b=x)", after)]).to_itf().to_json()
    assert problems(document) == []
    state = trace_from_json(document).states[1].values
    assert state["revision"] == 2 and state["kvs"]["a/b"] == "x (c2 m2 v1)"
    assert state["leases"][7].ttl == 3 and state["leases"][7].keys == frozenset({"a/b"})


@pytest.mark.parametrize(
    "value",
    [
        0,
        -3,
        2**70,
        None,
        True,
        "n1→n2 AppendEntries term 1",
        ("n1", 2),
        [1, None, "x"],
        {"term": 1, "voted_for": None},
        {"n1→n2 RequestVote term 1": 2},
        {(1, 2): "pair key"},
    ],
)
def test_values_round_trip(value: Any) -> None:
    encoded = to_itf_value(value)
    assert _value_problems(encoded) == []
    assert from_itf_value(json.loads(json.dumps(encoded))) == value


def test_sets_are_sets_and_ints_are_bigints() -> None:
    assert to_itf_value(frozenset({2, 1})) == {"#set": [{"#bigint": "1"}, {"#bigint": "2"}]}
    assert to_itf_value(-5) == {"#bigint": "-5"}
    assert to_itf_value({"#odd key": 1}) == {"#map": [["#odd key", {"#bigint": "1"}]]}


def _value_problems(value: Any) -> list[str]:
    return problems({"#meta": {}, "vars": ["x"], "states": [{"#meta": {}, "x": value}]})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, "states[0].x: the JSON number 3 is not an ITF value"),
        (None, "states[0].x: null is not an ITF value"),
        ({"a": [1.5]}, "states[0].x.a[0]: the JSON number 1.5"),
        ({"#bigint": "12a"}, "#bigint takes a string of digits"),
        ({"#set": {"a": 1}}, "#set takes a list"),
        ({"#map": [["k"]]}, "#map takes a list of [key, value] pairs"),
        ({"#bag": []}, "is no ITF value"),
        ({"#tup": [None]}, "states[0].x#tup[0]: null"),
    ],
)
def test_departures_from_the_shape_are_named_where(value: Any, expected: str) -> None:
    found = _value_problems(value)
    assert len(found) == 1 and expected in found[0], found


def test_a_document_s_frame_is_checked() -> None:
    assert problems([]) == ["an ITF trace is a JSON object"]
    assert "states: must be a non-empty list" in problems({"vars": [], "states": []})
    trace = ItfTrace(variables=["x", "y"])
    trace.add_state({"x": 1, "y": 2})
    document = trace.to_json()
    del document["states"][0]["y"]
    assert problems(document) == ["states[0]: lacks variable(s) ['y'] of vars"]

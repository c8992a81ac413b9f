"""Counterexample rendering: numbered steps, the changes each made, ITF with action labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from etcdspec.model.counterexample import MAX_CHANGES_PER_STEP, build, changes, flatten, text

INITIAL: dict[str, Any] = {
    "nodes": {"n1": {"role": "follower", "term": 0, "log": []}},
    "messages": [],
}
AFTER_TIMEOUT: dict[str, Any] = {
    "nodes": {"n1": {"role": "candidate", "term": 1, "log": []}},
    "messages": [("n1", "n2", "RequestVote term 1")],
}
AFTER_APPEND: dict[str, Any] = {
    "nodes": {"n1": {"role": "leader", "term": 1, "log": [(1, "put a=1")]}},
    "messages": [],
}


def _example() -> Any:
    return build(
        "cluster",
        "ElectionSafety",
        "n1 and n2 are both leaders of term 1",
        INITIAL,
        [("timeout(n1)", AFTER_TIMEOUT), ("propose(n1, put a=1)", AFTER_APPEND)],
        context="3 nodes, bugs: vote_not_persisted, seed 0",
    )


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ({"a": 1}, {"a": 2}, ["a: 1 → 2"]),
        ({"a": 1}, {"a": 1}, []),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, ["a.c: (new) 2"]),
        ({"log": [1, 2]}, {"log": [1]}, ["log[1]: 2 → (gone)"]),
        ({"log": []}, {"log": [(1, "x")]}, ["log[0]: (new) (1, x)"]),
    ],
)
def test_changes_list_only_the_leaves_that_differ(
    before: dict[str, Any], after: dict[str, Any], expected: list[str]
) -> None:
    assert changes(before, after) == expected


def test_flatten_orders_log_indexes_numerically_in_changes() -> None:
    before = {"log": list(range(12))}
    after = {"log": [v + 1 for v in range(12)]}
    paths = [line.split(":")[0] for line in changes(before, after)]
    assert paths == [f"log[{i}]" for i in range(12)]
    assert flatten({"a": {"b": [1]}}) == {"a.b[0]": "1"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [(b"k\xff", "k\\xff"), ((1, "a"), "(1, a)"), (frozenset({2, 1}), "{1, 2}"), (None, "none")],
)
def test_leaf_text_is_compact_and_stable(value: Any, expected: str) -> None:
    assert text(value) == expected


def test_describe_numbers_each_step_with_its_label_and_changes() -> None:
    rendered = _example().describe()
    lines = rendered.splitlines()
    assert lines[0].startswith("Counterexample: invariant ElectionSafety violated after 2 step(s)")
    assert "  1. timeout(n1)" in rendered
    assert "  2. propose(n1, put a=1)" in rendered
    assert "nodes.n1.role: follower → candidate" in rendered
    assert "nodes.n1.role: candidate → leader" in rendered
    assert rendered.index("1. timeout") < rendered.index("2. propose")
    assert lines[-2] == "Violated: ElectionSafety"
    assert "both leaders" in lines[-1]


def test_long_steps_are_capped_with_a_pointer_to_the_itf() -> None:
    big_before = {"log": []}
    big_after = {"log": list(range(MAX_CHANGES_PER_STEP + 5))}
    rendered = build("store", "X", "", big_before, [("put", big_after)]).describe()
    assert "… 5 more change(s)" in rendered


def test_itf_has_one_state_per_step_labelled_with_its_action(tmp_path: Path) -> None:
    path = tmp_path / "cex.itf.json"
    _example().to_itf().write(path)
    document = json.loads(path.read_text())
    assert document["vars"] == ["messages", "nodes"]
    states = document["states"]
    assert len(states) == 3
    assert "action" not in states[0]["#meta"]
    assert [s["#meta"]["action"] for s in states[1:]] == ["timeout(n1)", "propose(n1, put a=1)"]
    assert states[1]["messages"] == [{"#tup": ["n1", "n2", "RequestVote term 1"]}]
    assert "ElectionSafety" in document["#meta"]["description"]


def test_to_json_lists_labels_and_changes() -> None:
    document = _example().to_json()
    assert [s["label"] for s in document["steps"]] == ["timeout(n1)", "propose(n1, put a=1)"]
    assert document["invariant"] == "ElectionSafety"


def test_the_initial_state_is_shown_whole_one_line_per_record() -> None:
    """Every leaf of the initial state is printed (it was cut at 14 lines with no marker),
    each node's fields on one line."""
    nodes = {
        f"n{i}": {"role": "follower", "term": 0, "voted_for": None, "log": [], "up": True}
        for i in range(1, 6)
    }
    initial = {"nodes": nodes, "messages": {}, "partition": []}
    after = {**initial, "nodes": {**nodes, "n1": {**nodes["n1"], "role": "candidate"}}}
    rendered = build("cluster", "X", "", initial, [("timeout(n1)", after)]).describe()
    head = rendered.split("  1. timeout(n1)")[0]
    for name in nodes:
        line = next(line for line in head.splitlines() if line.strip().startswith(f"nodes.{name}:"))
        for field in ("role = follower", "term = 0", "voted_for = none", "log = []", "up = True"):
            assert field in line, line
    assert "messages = {}" in head and "partition = []" in head

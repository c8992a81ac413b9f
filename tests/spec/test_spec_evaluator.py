"""The finite evaluator: `satisfies(spec, action, params, pre, post)` over plain values."""

from __future__ import annotations

from typing import Any

import pytest

from etcdspec.spec.evaluator import (
    EvaluationError,
    Instance,
    enabled,
    initial,
    satisfies,
    step,
    successors,
    violated_properties,
)
from etcdspec.spec.loader import load_spec

LEASE = Instance({"key": ["k1", "k2"], "lease": ["l1", "l2"], "tick": [0, 1, 2, 3]}, {"tick0": 0})


def lease_state(**changes: Any) -> dict[str, Any]:
    state: dict[str, Any] = {
        "now": 0,
        "granted": set(),
        "revoked": set(),
        "expiry": {"l1": 0, "l2": 0},
        "live": set(),
        "attached": set(),
        "expired": set(),
        "promised": {"l1": 0, "l2": 0},
    }
    state.update(changes)
    return state


def test_initial_state_is_recognised() -> None:
    loaded = load_spec("lease")
    assert initial(loaded, lease_state(), LEASE)
    assert not initial(loaded, lease_state(now=2), LEASE)


def test_step_derives_the_frame() -> None:
    loaded = load_spec("lease")
    pre = lease_state(granted={"l1"}, expiry={"l1": 3, "l2": 0})
    post = step(loaded, "put_with_lease", {"k": "k1", "l": "l1"}, pre, LEASE)
    assert post["live"] == frozenset({"k1"})
    assert post["attached"] == frozenset({("k1", "l1")})
    assert post["expiry"] == {"l1": 3, "l2": 0}  # not assigned: unchanged


@pytest.mark.parametrize(
    ("action", "params", "pre", "post", "expected"),
    [
        # a put attaching k1 to a usable lease
        (
            "put_with_lease",
            {"k": "k1", "l": "l1"},
            lease_state(granted={"l1"}, expiry={"l1": 3, "l2": 0}),
            lease_state(
                granted={"l1"}, expiry={"l1": 3, "l2": 0}, live={"k1"}, attached={("k1", "l1")}
            ),
            True,
        ),
        # the same step but the post-state forgot the attachment
        (
            "put_with_lease",
            {"k": "k1", "l": "l1"},
            lease_state(granted={"l1"}, expiry={"l1": 3, "l2": 0}),
            lease_state(granted={"l1"}, expiry={"l1": 3, "l2": 0}, live={"k1"}),
            False,
        ),
        # guard fails: the lease was never granted
        (
            "put_with_lease",
            {"k": "k1", "l": "l2"},
            lease_state(),
            lease_state(live={"k1"}, attached={("k1", "l2")}),
            False,
        ),
        # revoke deletes attached keys
        (
            "revoke",
            {"l": "l1"},
            lease_state(
                granted={"l1"},
                expiry={"l1": 3, "l2": 0},
                live={"k1", "k2"},
                attached={("k1", "l1")},
            ),
            lease_state(granted={"l1"}, revoked={"l1"}, expiry={"l1": 3, "l2": 0}, live={"k2"}),
            True,
        ),
        # time may not pass a live lease's expiry
        (
            "advance",
            {"t": 3},
            lease_state(granted={"l1"}, expiry={"l1": 2, "l2": 0}),
            lease_state(now=3, granted={"l1"}, expiry={"l1": 2, "l2": 0}),
            False,
        ),
    ],
)
def test_satisfies_decides_a_concrete_step(
    action: str, params: dict[str, Any], pre: dict[str, Any], post: dict[str, Any], expected: bool
) -> None:
    assert satisfies(load_spec("lease"), action, params, pre, post, LEASE) is expected


def test_raft_step_with_tuple_relations() -> None:
    loaded = load_spec("raft")
    nodes = ["n1", "n2", "n3"]
    instance = Instance(
        {
            "node": nodes,
            "quorum": ["q12", "q23", "q13"],
            "value": ["v"],
            "term": [0, 1, 2],
            "index": [0, 1, 2],
        },
        {
            "member": {
                ("n1", "q12"),
                ("n2", "q12"),
                ("n2", "q23"),
                ("n3", "q23"),
                ("n1", "q13"),
                ("n3", "q13"),
            },
            "term0": 0,
            "index0": 0,
        },
    )
    empty: dict[str, Any] = {
        "current_term": {(n, 0) for n in nodes},
        "voted": set(),
        "log": set(),
        "value_at": {(i, t): "v" for i in range(3) for t in range(3)},
        "leader": set(),
        "request_vote_msg": set(),
        "vote_msg": set(),
        "append_msg": set(),
        "append_reply_msg": set(),
        "left_term": set(),
        "elected": set(),
        "started": set(),
        "voting_quorum": {t: "q12" for t in range(3)},
        "term_leader": {t: "n1" for t in range(3)},
        "leader_log": set(),
        "committed_at": set(),
    }
    assert initial(loaded, empty, instance)
    params = {"n": "n1", "t": 1, "li": 0, "lt": 0}
    assert enabled(loaded, "timeout", params, empty, instance)
    post = step(loaded, "timeout", params, empty, instance)
    assert post["current_term"] == frozenset({("n1", 1), ("n2", 0), ("n3", 0)})
    assert post["request_vote_msg"] == frozenset({("n1", 1, 0, 0)})
    assert satisfies(loaded, "timeout", params, empty, post, instance)
    assert violated_properties(loaded, post, instance) == []
    # a node may not time out into its own current term
    assert not enabled(loaded, "timeout", {"n": "n1", "t": 0, "li": 0, "lt": 0}, empty, instance)


@pytest.mark.parametrize(
    ("params", "match"),
    [({"k": "k1"}, "missing"), ({"k": "k1", "l": "l1", "x": 1}, "unknown")],
)
def test_bad_parameters_are_typed_errors(params: dict[str, Any], match: str) -> None:
    with pytest.raises(EvaluationError, match=match):
        satisfies(load_spec("lease"), "put_with_lease", params, lease_state(), lease_state(), LEASE)


def test_missing_state_symbol_is_a_typed_error() -> None:
    state = lease_state()
    del state["attached"]
    with pytest.raises(EvaluationError, match="attached"):
        initial(load_spec("lease"), state, LEASE)


def test_unknown_action_is_a_typed_error() -> None:
    with pytest.raises(EvaluationError, match="unknown action"):
        step(load_spec("lease"), "renew", {}, lease_state(), LEASE)


def test_successors_run_the_lease_spec_and_keep_its_properties() -> None:
    loaded = load_spec("lease")
    frontier = [lease_state()]
    seen = 0
    for _ in range(3):  # three steps of breadth-first search from the initial state
        next_frontier = []
        for state in frontier:
            for action, params, post in successors(loaded, state, LEASE):
                assert satisfies(loaded, action, params, state, post, LEASE)
                assert violated_properties(loaded, post, LEASE) == []
                next_frontier.append(post)
                seen += 1
        frontier = next_frontier[:40]
    assert seen > 50


def test_successors_find_the_seeded_bug() -> None:
    loaded = load_spec("lease", "attach_revoked")
    granted = lease_state(granted={"l1"}, revoked={"l1"}, expiry={"l1": 3, "l2": 0})
    bad = [
        (action, params)
        for action, params, post in successors(loaded, granted, LEASE)
        if violated_properties(loaded, post, LEASE)
    ]
    assert ("put_with_lease", {"k": "k1", "l": "l1"}) in bad

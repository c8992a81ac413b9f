"""A violating run is replayed on the finite evaluator and shortened to the steps the
violation needs; a run that does not replay is refused, not shown as replayed."""

from __future__ import annotations

from etcdspec.spec.evaluator import Instance, holds
from etcdspec.spec.loader import load_spec
from etcdspec.spec.run_shrink import Step, replay, shorten

# raft with two_votes on 3 nodes, 2 terms: a node votes for two candidates of term 1
LOADED = load_spec("raft", "two_votes")
INSTANCE = Instance(
    {"node": ("a", "b", "c"), "quorum": ("q",), "value": ("v",), "term": (0, 1), "index": (0,)},
    {"member": frozenset({("a", "q"), ("b", "q")}), "term0": 0, "index0": 0},
)
FIRST = {
    "current_term": frozenset({("a", 0), ("b", 0), ("c", 0)}),
    "voted": frozenset(),
    "log": frozenset(),
    "value_at": {(0, 0): "v", (0, 1): "v"},
    "leader": frozenset(),
    "request_vote_msg": frozenset(),
    "vote_msg": frozenset(),
    "append_msg": frozenset(),
    "append_reply_msg": frozenset(),
    "left_term": frozenset(),
    "elected": frozenset(),
    "started": frozenset(),
    "voting_quorum": {0: "q", 1: "q"},
    "term_leader": {0: "a", 1: "a"},
    "leader_log": frozenset(),
    "committed_at": frozenset(),
}
ONE_VOTE = [p for p in LOADED.spec.properties() if p.name == "one_vote_per_term"]


def timeout(n: str) -> Step:
    return ("timeout", {"n": n, "t": 1, "li": 0, "lt": 0})


def vote(n: str, c: str) -> Step:
    return (
        "receive_request_vote",
        {"n": n, "c": c, "t": 1, "li": 0, "lt": 0, "mli": 0, "mlt": 0},
    )


def test_steps_the_violation_does_not_need_are_dropped() -> None:
    padded = [timeout("a"), ("restart", {"n": "c"}), timeout("b"), vote("c", "a"), vote("c", "b")]
    result = shorten(LOADED, INSTANCE, FIRST, padded, ONE_VOTE)
    assert result is not None
    steps, states = result
    # c's restart goes; both candidates' timeouts and both of c's votes are needed
    assert [a for a, _ in steps] == [
        "timeout",
        "timeout",
        "receive_request_vote",
        "receive_request_vote",
    ]
    assert len(states) == len(steps) + 1
    assert not holds(LOADED, ONE_VOTE[0].formula, states[-1], INSTANCE)


def test_a_run_that_does_not_replay_is_refused() -> None:
    # c votes for a before a asked for votes: not enabled
    assert replay(LOADED, INSTANCE, FIRST, [vote("c", "a")]) is None
    assert shorten(LOADED, INSTANCE, FIRST, [vote("c", "a"), timeout("a")], ONE_VOTE) is None


def test_a_run_whose_end_breaks_nothing_is_refused() -> None:
    assert shorten(LOADED, INSTANCE, FIRST, [timeout("a"), vote("c", "a")], ONE_VOTE) is None

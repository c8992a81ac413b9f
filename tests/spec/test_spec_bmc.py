"""Bounded model checking finds concrete violating runs of seeded bugs, and none in
the unmutated specs within the bound."""

from __future__ import annotations

import pytest

from etcdspec.spec.bmc import bmc, parse_sizes
from etcdspec.spec.errors import SpecLookupError
from etcdspec.spec.loader import load_spec
from etcdspec.verdict import Verdict

SMALL_RAFT = {"node": 3, "term": 2, "index": 1, "value": 1, "quorum": 2}

# (spec, mutation, depth, sizes, property that the run violates, the actions a shortest
# violating run is made of: Z3 picks one such run, e.g. put or txn_put2 reusing a revision)
VIOLATING_RUNS = [
    (
        "raft",
        "two_votes",
        5,
        SMALL_RAFT,
        "election_safety",
        {"timeout", "receive_request_vote", "become_leader"},
    ),
    # a leader of an older term appends to a node that moved on: the entry's term is
    # one the receiver has passed (a 2-node instance keeps the run short and quick)
    (
        "raft",
        "stale_append",
        5,
        {"node": 2, "term": 3, "index": 2, "value": 1, "quorum": 1},
        "log_not_future",
        {"timeout", "become_leader", "propose", "send_append", "receive_append"},
    ),
    ("mvcc", "compact_future", 1, {}, "compact_le_current", {"compact"}),
    ("mvcc", "reuse_revision", 2, {}, "one_txn_per_revision", {"put", "txn_put2"}),
    (
        "lease",
        "attach_revoked",
        3,
        {},
        "no_key_on_revoked_lease",
        {"grant", "revoke", "put_with_lease"},
    ),
    (
        "lease",
        "no_checkpoint",
        3,
        {},
        "no_key_on_expired_lease",
        {"grant", "put_with_lease", "advance"},
    ),
]


@pytest.mark.parametrize(("spec", "mutation", "depth", "sizes", "prop", "actions"), VIOLATING_RUNS)
def test_bmc_finds_a_concrete_violating_run(
    spec: str, mutation: str, depth: int, sizes: dict[str, int], prop: str, actions: set[str]
) -> None:
    result = bmc(load_spec(spec, mutation), depth, sizes, only=[prop])
    assert result.verdict is Verdict.FALSE, result.describe()
    assert result.violated == (prop,)
    run = result.counterexample
    assert run is not None
    assert len(run.states) == result.reached + 1 == len(run.steps) + 1
    taken = {step.split("(")[0] for step in run.steps}
    assert taken and taken <= actions, run.describe()
    assert "violating run" in result.describe()


@pytest.mark.parametrize(
    ("spec", "depth", "sizes"), [("mvcc", 2, {}), ("lease", 3, {}), ("raft", 3, SMALL_RAFT)]
)
def test_bmc_finds_nothing_in_correct_specs(spec: str, depth: int, sizes: dict[str, int]) -> None:
    result = bmc(load_spec(spec), depth, sizes)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.reached == depth


def test_bmc_reports_a_violated_auxiliary_invariant_at_the_shallowest_depth() -> None:
    result = bmc(load_spec("raft", "two_votes"), 4, SMALL_RAFT)
    assert result.verdict is Verdict.FALSE
    assert result.violated == ("one_vote_per_term",)
    assert result.reached == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [("node=3,term=2", {"node": 3, "term": 2}), ("", {}), (" index = 4 ", {"index": 4})],
)
def test_sizes_parse(text: str, expected: dict[str, int]) -> None:
    assert parse_sizes(text) == expected


@pytest.mark.parametrize("text", ["node", "node=0", "node=x", "=3"])
def test_bad_sizes_are_rejected_with_advice(text: str) -> None:
    with pytest.raises(ValueError, match="SORT=N"):
        parse_sizes(text)


def test_unknown_sort_in_sizes_is_a_lookup_error() -> None:
    with pytest.raises(SpecLookupError, match=r"unknown sort nodes"):
        bmc(load_spec("raft"), 1, {"nodes": 2})

"""Bounded model checking finds concrete violating runs of seeded bugs, and none in
the unmutated specs within the bound."""

from __future__ import annotations

import pytest

from etcdspec.spec.bmc import bmc, parse_sizes, symmetric_sorts
from etcdspec.spec.errors import SpecLookupError
from etcdspec.spec.loader import load_spec
from etcdspec.spec.mutations import SEEDED_BUGS
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
    # a lease granted, expired once its deadline passed, then kept alive all the same:
    # a deadline promised after the lease was gone
    (
        "lease",
        "keepalive_after_expiry",
        4,
        {},
        "keepalive_honoured",
        {"grant", "advance", "expire", "keepalive"},
    ),
    # a permission revoked (or its role), then a token of the revision before used: the
    # access takes effect at a revision whose permissions do not allow it
    (
        "auth",
        "stale_token",
        6,
        {"user": 2, "role": 2, "access": 1, "key": 1, "authrev": 5},
        "access_in_force",
        {"grant_permission", "grant_role", "revoke_permission", "revoke_role", "enable", "access"},
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


# The deep seeded bugs, each on its catalogue property (spec/mutations.py): the
# shortest violating runs take 9-10 steps (no_truncation: two leaders of successive
# terms append different entries at index 1 to the same follower; stale_append: a
# leader that committed an entry of its term takes an older leader's conflicting entry
# and drops its own). One bit-blasted query covers every run up to the bound; the
# tests assert that the run is found, not how fast (docs/benchmarks.md has times).
# Step by step, stale_append (10 steps); in rounds (see test below), both.
DEEP_RUNS = [
    ("stale_append", 10, {"node": 2, "term": 3, "index": 2, "value": 1, "quorum": 1}),
]
NO_TRUNCATION_SIZES = {"node": 3, "term": 3, "index": 2, "value": 1, "quorum": 1}


@pytest.mark.parametrize(("mutation", "depth", "sizes"), DEEP_RUNS)
def test_bmc_finds_a_deep_seeded_bug_on_its_catalogue_property(
    mutation: str, depth: int, sizes: dict[str, int]
) -> None:
    bug = next(b for b in SEEDED_BUGS if b.spec == "raft" and b.mutation == mutation)
    result = bmc(load_spec("raft", mutation), depth, sizes, timeout_ms=600_000, only=[bug.prop])
    assert result.verdict is Verdict.FALSE, result.describe()
    assert result.violated == (bug.prop,)
    run = result.counterexample
    assert run is not None and len(run.steps) == result.reached <= depth
    assert bug.action in {step.split("(")[0] for step in run.steps}, run.describe()
    trace = run.to_itf(source=f"raft --mutation {mutation}").to_json()
    assert len(trace["states"]) == result.reached + 1


# (mutation, rounds, sizes): the fewest rounds that hold a violating run
DEEP_RUNS_IN_ROUNDS = [
    ("no_truncation", 2, NO_TRUNCATION_SIZES),
    ("stale_append", 3, DEEP_RUNS[0][2]),
]


@pytest.mark.parametrize(("mutation", "rounds", "sizes"), DEEP_RUNS_IN_ROUNDS)
def test_bmc_in_rounds_finds_a_deep_seeded_bug_on_its_catalogue_property(
    mutation: str, rounds: int, sizes: dict[str, int]
) -> None:
    bug = next(b for b in SEEDED_BUGS if b.spec == "raft" and b.mutation == mutation)
    result = bmc(
        load_spec("raft", mutation), rounds, sizes, timeout_ms=600_000, only=[bug.prop], rounds=True
    )
    assert result.verdict is Verdict.FALSE, result.describe()
    assert result.violated == (bug.prop,)
    run = result.counterexample
    assert run is not None and "replayed by the finite evaluator" in run.title
    # deeper than any bug the step-by-step tests above reach quickly
    assert 9 <= len(run.steps) == result.reached, run.describe()
    assert bug.action in {step.split("(")[0] for step in run.steps}, run.describe()


def test_a_deep_seeded_bug_is_out_of_reach_of_a_shorter_bound() -> None:
    # the same instance as no_truncation's run, one round short of it: no violation
    result = bmc(
        load_spec("raft", "no_truncation"),
        1,
        NO_TRUNCATION_SIZES,
        only=["log_matching"],
        rounds=True,
    )
    assert result.verdict is Verdict.TRUE, result.describe()


def test_bmc_reports_a_violated_auxiliary_invariant_within_the_bound() -> None:
    # a second vote needs two candidates' requests and two votes of one node: 3 steps at
    # least; one query covers every run of up to 4 steps (stutters after the real ones)
    result = bmc(load_spec("raft", "two_votes"), 4, SMALL_RAFT)
    assert result.verdict is Verdict.FALSE
    assert "one_vote_per_term" in result.violated
    assert 3 <= result.reached <= 4
    run = result.counterexample
    assert run is not None and len(run.steps) == result.reached


def test_bmc_finds_no_run_longer_than_the_bound() -> None:
    result = bmc(load_spec("raft", "two_votes"), 2, SMALL_RAFT)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.reached == 2


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


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("raft", ["node", "quorum", "value"]),
        # raft_steps names nodes (nobody) and roles (follower, ...) by rigid constants
        ("raft_steps", ["quorum"]),
    ],
)
def test_only_sorts_nothing_tells_apart_have_their_symmetry_broken(
    spec: str, expected: list[str]
) -> None:
    assert symmetric_sorts(load_spec(spec).info) == expected


# Figure 8 (spec/mutations.py: a leader commits an entry of an older term by counting
# its replicas) needs 17 steps on 5 terms: two elections that append conflicting
# entries, a re-election that replicates and commits the older one, and an election
# of the other leader, which lacks it. In rounds (each action at most once a round, in
# declaration order) that run is 4 rounds: elect and propose, elect and propose, elect
# and replicate and commit, elect. The test asserts that it is found, not how fast.
FIGURE8_SIZES = {"node": 3, "term": 5, "index": 2, "value": 1, "quorum": 1}


def test_bmc_in_rounds_finds_figure8_on_its_catalogue_property() -> None:
    bug = next(b for b in SEEDED_BUGS if b.spec == "raft" and b.mutation == "figure8")
    result = bmc(
        load_spec("raft", "figure8"),
        4,
        FIGURE8_SIZES,
        timeout_ms=600_000,
        only=[bug.prop],
        rounds=True,
    )
    assert result.verdict is Verdict.FALSE, result.describe()
    assert result.violated == (bug.prop,)
    run = result.counterexample
    assert run is not None and "replayed by the finite evaluator" in run.title
    taken = [step.split("(")[0] for step in run.steps]
    # shortened to what the bug needs: at least the shortest run's 17 steps, among
    # them the old-term commit and a later election
    assert 17 <= len(taken) == result.reached, run.describe()
    assert taken.count("become_leader") >= 4 and "commit" in taken, run.describe()
    trace = run.to_itf(source="raft --mutation figure8").to_json()
    assert len(trace["states"]) == result.reached + 1
    assert "in 4 rounds" in result.describe()


def test_rounds_cover_runs_that_interleave_actions_of_different_nodes() -> None:
    # two candidates' requests and a second vote: 2 rounds (timeout, vote; timeout, vote)
    result = bmc(load_spec("raft", "two_votes"), 2, SMALL_RAFT, rounds=True)
    assert result.verdict is Verdict.FALSE, result.describe()
    assert "one_vote_per_term" in result.violated
    assert result.to_json()["rounds"] is True


def test_rounds_find_nothing_in_the_correct_spec() -> None:
    result = bmc(load_spec("raft"), 2, SMALL_RAFT, rounds=True)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert "2 rounds" in result.describe()

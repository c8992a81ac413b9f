"""raft_steps.spec on hand-built steps: each action accepts a correct step and the
finite evaluator rejects a bad one, naming the guard or the state that is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.refinement_abstraction import (
    SPEC_PATH,
    NodeView,
    abstract_for_spec,
    make_instance,
    raft_steps_spec,
    spec_state,
)
from etcdspec.model.refinement_check import check_initial, check_plan
from etcdspec.model.refinement_plans import SpecStep, StepPlan
from etcdspec.spec.evaluator import enabled, step, violated_properties
from etcdspec.spec.loader import load_spec

BASE = NodeView(
    term=2,
    vote=0,
    role="follower",
    up=True,
    snap_index=0,
    snap_term=0,
    log=(1, 1, 2),
    commit_index=1,
    dterm=2,
    dvote=0,
    dsnap_index=0,
    dsnap_term=0,
    dlog=(1, 1, 2),
)


TWO = frozenset({1, 2})
THREE = frozenset({1, 2, 3})
ONE_THREE = frozenset({1, 3})


def view(**changes: Any) -> NodeView:
    return BASE._replace(**changes)


def plan(
    action: str, sent: dict[int, int] | None = None, commit: int = 0, last: int = 0, **params: Any
) -> StepPlan:
    if action == "advance_commit":
        params.setdefault("q", frozenset({1, 2}))
    return StepPlan(
        1,
        (SpecStep(action, tuple({"n": 1, **params}.items())),),
        tuple((sent or {}).items()),
        commit,
        last,
    )


# (id, plan, before, after, expected failure text: "" for a correct step)
CASES = [
    ("adopt_term", plan("adopt_term", t=3), view(role="candidate", vote=1), view(term=3), ""),
    ("adopt_term lower term", plan("adopt_term", t=1), view(), view(term=1), "[higher]"),
    ("resign", plan("resign"), view(role="leader"), view(), ""),
    ("resign a follower", plan("resign"), view(), view(), "role(n) != follower"),
    ("pre_campaign", plan("pre_campaign"), view(), view(role="precandidate"), ""),
    (
        "pre_campaign a leader",
        plan("pre_campaign"),
        view(role="leader", vote=1),
        view(role="precandidate", vote=1),
        "role(n) != leader",
    ),
    ("campaign", plan("campaign", t=3), view(), view(term=3, vote=1, role="candidate"), ""),
    (
        "campaign skips a term",
        plan("campaign", t=4),
        view(),
        view(term=4, vote=1, role="candidate"),
        "[next]",
    ),
    ("grant_vote", plan("grant_vote", c=2, li=3, lt=2), view(), view(vote=2), ""),
    (
        "grant_vote second vote",
        plan("grant_vote", c=2, li=3, lt=2),
        view(vote=3),
        view(vote=2),
        "[one_vote]",
    ),
    (
        "grant_vote stale log",
        plan("grant_vote", c=2, li=5, lt=1),
        view(),
        view(vote=2),
        "[up_to_date]",
    ),
    (
        "become_leader",
        plan("become_leader"),
        view(role="candidate", vote=1),
        view(role="leader", vote=1),
        "",
    ),
    (
        "become_leader from follower",
        plan("become_leader"),
        view(vote=1),
        view(role="leader", vote=1),
        "role(n) = candidate",
    ),
    (
        "leader_append",
        plan("leader_append", i=4),
        view(role="leader", vote=1),
        view(role="leader", vote=1, log=(1, 1, 2, 2)),
        "",
    ),
    (
        "leader_append old term",
        plan("leader_append", i=4),
        view(role="leader", vote=1),
        view(role="leader", vote=1, log=(1, 1, 2, 1)),
        "another state",
    ),
    (
        "accept_entries truncates",
        plan("accept_entries", {2: 2}, t=2, pi=1, pt=1, li=2),
        view(log=(1, 1, 1)),
        view(log=(1, 2)),
        "",
    ),
    (
        "accept_entries keeps conflict",
        plan("accept_entries", {2: 2}, t=2, pi=1, pt=1, li=2),
        view(log=(1, 1, 1)),
        view(log=(1, 2, 1)),
        "another state",
    ),
    (
        "accept_entries stale term",
        plan("accept_entries", {4: 1}, t=1, pi=3, pt=2, li=4),
        view(),
        view(log=(1, 1, 2, 1)),
        "[term]",
    ),
    (
        "accept_entries prev mismatch",
        plan("accept_entries", {4: 2}, t=2, pi=3, pt=1, li=4),
        view(),
        view(log=(1, 1, 2, 2)),
        "[prev]",
    ),
    (
        "restore_snapshot",
        plan("restore_snapshot", t=2, si=5, st=2),
        view(),
        view(snap_index=5, snap_term=2, log=(), commit_index=5),
        "",
    ),
    (
        "restore_snapshot future term",
        plan("restore_snapshot", t=2, si=5, st=3),
        view(),
        view(snap_index=5, snap_term=3, log=(), commit_index=5),
        "st <= t",
    ),
    (
        "advance_commit follower",
        plan("advance_commit", commit=3, last=3, i=3),
        view(),
        view(commit_index=3),
        "",
    ),
    (
        "advance_commit beyond log",
        plan("advance_commit", commit=4, last=4, i=4),
        view(),
        view(commit_index=4),
        "[held]",
    ),
    (
        "advance_commit beyond message",
        plan("advance_commit", commit=3, last=2, i=3),
        view(),
        view(commit_index=3),
        "[sender]",
    ),
    (
        "advance_commit goes back",
        plan("advance_commit", commit=3, last=3, i=0),
        view(),
        view(commit_index=0),
        "[grows]",
    ),
    (
        "advance_commit old-term entry",
        plan("advance_commit", i=3),
        view(term=3, role="leader", vote=1, log=(1, 1, 2, 3)),
        view(term=3, role="leader", vote=1, log=(1, 1, 2, 3), commit_index=3),
        "[current_term_rule]",
    ),
    (
        "advance_commit leader with a quorum",
        plan("advance_commit", i=4),
        view(
            term=3,
            role="leader",
            vote=1,
            log=(1, 1, 2, 3),
            dterm=3,
            dlog=(1, 1, 2, 3),
            match=(0, 4, 0),
        ),
        view(
            term=3,
            role="leader",
            vote=1,
            log=(1, 1, 2, 3),
            dterm=3,
            dlog=(1, 1, 2, 3),
            match=(0, 4, 0),
            commit_index=4,
        ),
        "",
    ),
    (
        "advance_commit leader without a quorum",
        plan("advance_commit", i=4),
        view(
            term=3,
            role="leader",
            vote=1,
            log=(1, 1, 2, 3),
            dterm=3,
            dlog=(1, 1, 2, 3),
            match=(0, 3, 0),
        ),
        view(
            term=3,
            role="leader",
            vote=1,
            log=(1, 1, 2, 3),
            dterm=3,
            dlog=(1, 1, 2, 3),
            match=(0, 3, 0),
            commit_index=4,
        ),
        "[quorum]",
    ),
    (
        "advance_commit leader counting an undurable entry",
        plan("advance_commit", i=4),
        view(term=3, role="leader", vote=1, log=(1, 1, 2, 3), dterm=3, match=(0, 4, 0)),
        view(
            term=3,
            role="leader",
            vote=1,
            log=(1, 1, 2, 3),
            dterm=3,
            match=(0, 4, 0),
            commit_index=4,
        ),
        "[quorum]",
    ),
    (
        "record_ack",
        plan("record_ack", m=2, i=3),
        view(role="leader", vote=1, match=(0, 1, 0)),
        view(role="leader", vote=1, match=(0, 3, 0)),
        "",
    ),
    (
        "record_ack overstated",
        plan("record_ack", m=2, i=3),
        view(role="leader", vote=1, match=(0, 1, 0)),
        view(role="leader", vote=1, match=(0, 4, 0)),
        "another state",
    ),
    (
        "record_ack beyond the leader's log",
        plan("record_ack", m=2, i=4),
        view(role="leader", vote=1, match=(0, 1, 0)),
        view(role="leader", vote=1, match=(0, 4, 0)),
        "[held]",
    ),
    ("compact", plan("compact", i=1), view(), view(snap_index=1, snap_term=1, log=(1, 2)), ""),
    (
        "compact uncommitted",
        plan("compact", i=2),
        view(),
        view(snap_index=2, snap_term=1, log=(2,)),
        "i <= commit_index(n)",
    ),
    ("persist", plan("persist"), view(dterm=1, dlog=(1,)), view(), ""),
    (
        "persist another term",
        plan("persist"),
        view(dterm=1, dlog=(1,)),
        view(dterm=1),
        "another state",
    ),
    (
        "crash",
        plan("crash"),
        view(term=3, vote=2, dterm=2, dvote=0, log=(1, 1, 2, 3), commit_index=2),
        view(up=False, commit_index=0),
        "",
    ),
    (
        "crash keeps a vote not durable",
        plan("crash"),
        view(term=3, vote=2, dterm=2, dvote=0),
        view(up=False, term=2, vote=2, commit_index=0),
        "another state",
    ),
    ("restart", plan("restart"), view(up=False, commit_index=0), view(commit_index=0), ""),
    ("restart an up node", plan("restart"), view(), view(), "!up(n)"),
    # membership: n1 leads voters n1, n2 (of nodes n1..n3), its term-2 entry 3 committed
    (
        "leader_reconfigure",
        plan("leader_reconfigure", i=4, c=frozenset({1, 2, 3})),
        view(role="leader", vote=1, commit_index=3, config=TWO, dconfig=TWO),
        view(role="leader", vote=1, commit_index=3, log=(1, 1, 2, 2), config=THREE, dconfig=TWO),
        "",
    ),
    (
        "leader_reconfigure before an entry of its term commits",
        plan("leader_reconfigure", i=4, c=frozenset({1, 2, 3})),
        view(role="leader", vote=1, config=TWO, dconfig=TWO),
        view(role="leader", vote=1, log=(1, 1, 2, 2), config=THREE, dconfig=TWO),
        "[term_commit]",
    ),
    (
        "leader_reconfigure two voters at once",
        plan("leader_reconfigure", i=4, c=frozenset({1, 2, 3})),
        view(role="leader", vote=1, commit_index=3, config=frozenset({1}), dconfig=TWO),
        view(role="leader", vote=1, commit_index=3, log=(1, 1, 2, 2), config=THREE, dconfig=TWO),
        "[one_voter]",
    ),
    (
        "adopt_config",
        plan("adopt_config", c=frozenset({1, 2, 3})),
        view(config=TWO, dconfig=TWO),
        view(config=THREE, dconfig=TWO),
        "",
    ),
    (
        "adopt_config at a leader",
        plan("adopt_config", c=frozenset({1, 2, 3})),
        view(role="leader", vote=1, config=TWO, dconfig=TWO),
        view(role="leader", vote=1, config=THREE, dconfig=TWO),
        "role(n) != leader",
    ),
    (
        "advance_commit by n1, n2 where n1, n3 vote",
        plan("advance_commit", i=3, q=frozenset({1, 2})),
        view(role="leader", vote=1, match=(0, 3, 0), config=ONE_THREE, dconfig=ONE_THREE),
        view(role="leader", vote=1, match=(0, 3, 0), commit_index=3, config=ONE_THREE),
        "[majority]",
    ),
    (
        "advance_commit by n1, n3 where n1, n3 vote",
        plan("advance_commit", i=3, q=frozenset({1, 3})),
        view(role="leader", vote=1, match=(0, 0, 3), config=ONE_THREE, dconfig=ONE_THREE),
        view(
            role="leader",
            vote=1,
            match=(0, 0, 3),
            commit_index=3,
            config=ONE_THREE,
            dconfig=ONE_THREE,
        ),
        "",
    ),
]


@pytest.mark.parametrize(
    ("plan_", "before", "after", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_spec_action_accepts_correct_and_rejects_bad_step(
    plan_: StepPlan, before: NodeView, after: NodeView, expected: str
) -> None:
    failed = check_plan(plan_, before, after, nodes=3, check_properties=True)
    if expected:
        assert expected in failed, failed
    else:
        assert failed == ""


def test_every_spec_action_has_a_correct_and_a_bad_case() -> None:
    actions = {a.name for a in raft_steps_spec().spec.actions()}
    good = {c[1].steps[0].action for c in CASES if not c[4]}
    bad = {c[1].steps[0].action for c in CASES if c[4]}
    assert good == actions and bad == actions


def test_initial_cluster_abstraction_satisfies_init_and_properties() -> None:
    cluster = Cluster.start(ClusterConfig(nodes=3))
    assert check_initial(cluster)
    state, instance = abstract_for_spec(cluster)
    assert violated_properties(raft_steps_spec(), state, instance) == []
    assert state["current_term"] == {1: 0, 2: 0, 3: 0}


@pytest.mark.parametrize(
    ("mutation", "action", "params", "before", "broken"),
    [
        (
            "second_vote",
            "grant_vote",
            {"c": 2, "li": 3, "lt": 2},
            view(vote=3, dvote=3),
            "durable_vote_kept",
        ),
        ("vote_not_persisted", "crash", {}, view(vote=3, dvote=3), "durable_vote_kept"),
    ],
)
def test_spec_mutation_breaks_a_safety_property(
    mutation: str, action: str, params: dict[str, Any], before: NodeView, broken: str
) -> None:
    """Each seeded spec bug, run by the evaluator, leads to a state that breaks the
    named property (as `etcdspec prove --mutation` finds by induction); the unmutated
    action is not enabled there or keeps it."""
    mutated = load_spec(str(SPEC_PATH), mutation=mutation)
    instance = make_instance(3, 3, 3)
    state = spec_state({1: before}, range(4), 3)
    own = make_instance(3, 3, 3, node_ids=[1])
    full = {"n": 1, **params}
    assert enabled(mutated, action, full, state, instance)
    assert broken in violated_properties(mutated, step(mutated, action, full, state, instance), own)
    correct = raft_steps_spec()
    if enabled(correct, action, full, state, instance):
        assert violated_properties(correct, step(correct, action, full, state, instance), own) == []

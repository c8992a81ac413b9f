"""Configuration changes in the model (issue 19): off unless asked, the leader's two
guards, learners, snapshots that carry the configuration, and the exhaustive search of
a 3-node universe with one node outside the first configuration (state counts pinned).

The catalogued bugs that skip a guard have scripted reproductions in test_raft_bugs.py
and finders in test_explore_bugs.py; golden scenarios of a learner and of a removed
leader are in raft_scripts/.
"""

from __future__ import annotations

import pytest

from etcdspec.model import actions as act
from etcdspec.model import raft_node as rn
from etcdspec.model.bugs import BugSet
from etcdspec.model.cluster import Cluster, IllegalActionError
from etcdspec.model.cluster_config import ClusterConfig, ConfigError
from etcdspec.model.exhaustive import explore_exhaustive, small_config
from etcdspec.model.raft_messages import ConfChange, Membership
from etcdspec.model.raft_script import run_script
from etcdspec.model.requests import PutRequest
from etcdspec.verdict import Verdict


def _changes(cluster: Cluster) -> list[str]:
    return [
        a.describe()
        for a in cluster.enabled_actions()
        if a.kind == "propose" and isinstance(a.args[1], ConfChange)
    ]


def _led(config: ClusterConfig) -> Cluster:
    """n1 elected, its no-op committed everywhere."""
    _, cluster = run_script(["timeout 1", "stabilize"], config)
    return cluster


def test_without_membership_no_configuration_change_is_offered_or_accepted() -> None:
    cluster = _led(ClusterConfig(timeouts="free", persist="sync"))
    assert _changes(cluster) == []
    with pytest.raises(IllegalActionError):
        cluster.apply(act.conf_change(1, "add", 3))


def test_a_leader_is_offered_every_change_its_configuration_allows() -> None:
    cluster = _led(ClusterConfig(timeouts="free", persist="sync", membership=True))
    assert rn.config_of(cluster.params, cluster.node(1).log) == Membership(frozenset({1, 2}))
    assert _changes(cluster) == [
        "propose(n1, conf add n3)",
        "propose(n1, conf remove n1)",
        "propose(n1, conf remove n2)",
        "propose(n1, conf learner n3)",
    ]


@pytest.mark.parametrize(
    ("bug", "offered_before_term_commit", "offered_while_pending"),
    [
        (None, False, False),
        ("reconfig_before_term_commit", True, False),
        ("two_pending_changes", False, True),
    ],
)
def test_guards_one_change_pending_and_none_before_a_term_commit(
    bug: str | None, offered_before_term_commit: bool, offered_while_pending: bool
) -> None:
    config = ClusterConfig(
        timeouts="free",
        persist="sync",
        membership=True,
        noop_on_leader=False,
        prevote=False,
        bugs=BugSet.of(bug) if bug else BugSet(),
    )
    elected = _led(config)  # no no-op: nothing of term 1 is committed yet
    assert bool(_changes(elected)) is offered_before_term_commit
    _, committed = run_script(["timeout 1", "stabilize", "propose 1 a=1", "stabilize"], config)
    assert _changes(committed)  # an entry of its term is committed: a change may go
    pending = committed.apply(act.conf_change(1, "add", 3))
    assert bool(_changes(pending)) is offered_while_pending


def test_a_snapshot_keeps_the_configuration_and_a_restart_finds_it() -> None:
    config = ClusterConfig(timeouts="free", persist="sync", membership=True)
    _, cluster = run_script(
        ["timeout 1", "stabilize", "conf 1 add 3", "stabilize", "compact 1", "crash 1"], config
    )
    log = cluster.node(1).log
    assert log.entries == () and log.snapshot.last_index == 2
    assert log.snapshot.config == Membership(frozenset({1, 2, 3}))
    restarted = cluster.apply(act.restart(1))
    assert rn.config_of(restarted.params, restarted.node(1).log).voters == {1, 2, 3}


def test_a_learner_neither_campaigns_nor_is_asked_for_its_vote() -> None:
    config = ClusterConfig(timeouts="free", persist="sync", membership=True)
    _, cluster = run_script(["timeout 1", "stabilize", "conf 1 learner 3", "stabilize"], config)
    learner = cluster.node(3)
    assert learner.log.last_index == 2  # it got the log
    assert cluster.apply(act.timeout(3)).node(3) == learner  # a stutter
    campaign = cluster.apply(act.crash(1)).apply(act.timeout(2))
    assert {m.dst for m in campaign.messages} == {1}  # votes asked of voters only


def test_proposals_still_go_through_with_membership() -> None:
    cluster = _led(ClusterConfig(timeouts="free", persist="sync", membership=True))
    after = cluster.apply(act.propose(1, PutRequest(b"k", b"v")))
    assert after.node(1).log.last_index == 2


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"voters": 2}, "voters needs membership=True"),
        ({"membership": True, "voters": 4}, "voters must be between 1 and nodes"),
    ],
)
def test_bad_membership_settings_say_what_to_change(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        ClusterConfig(nodes=3, **settings)  # type: ignore[arg-type]


@pytest.mark.parametrize(("max_log", "states"), [(1, 1_046), (2, 15_303)])
def test_exhaustive_search_with_configuration_changes(max_log: int, states: int) -> None:
    """3 nodes, voters n1, n2 and n3 outside, max_term 2: every reachable state keeps
    every invariant; the counts pin the space (membership states are not reduced by
    symmetry: configuration entries name nodes)."""
    config = small_config(nodes=3, max_term=2, max_log=max_log, membership=True)
    result = explore_exhaustive(config, time_budget_s=120)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.distinct_states == states

"""The lease guarantee in the model (model/lease_clocks.py): a keep-alive is answered with
a client-visible KeepAliveAck carrying its TTL, and the invariant LeaseKeepAliveHonoured
(no leader holds a running clock for a lease whose expiry is pending in its log) is
checked by the exhaustive explorer too: it finds the keepalive_after_expiry bug in a
small space at once, the correct model exhausts the same spaces, and a new leader that
restarted the clock of a lease whose expiry it already holds (etcd's Promote without the
exception) is found at a leader change.
"""

from __future__ import annotations

import pytest

from etcdspec.model import lease_clocks
from etcdspec.model import store as kv
from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.exhaustive import (
    ExhaustiveResult,
    explore_exhaustive,
    finite_config,
    small_config,
)
from etcdspec.model.raft_node import Node
from etcdspec.model.raft_script import run_script
from etcdspec.model.requests import LeaseGrantRequest
from etcdspec.verdict import Verdict

GRANT = (LeaseGrantRequest(ttl=1, id=1),)


def _search(bugs: BugSet, nodes: int, max_term: int) -> ExhaustiveResult:
    config = small_config(
        nodes=nodes, max_term=max_term, max_log=2, max_messages=2, bugs=bugs, proposals=GRANT
    )
    return explore_exhaustive(finite_config(config), max_states=50_000, time_budget_s=60)


def test_keepalive_is_answered_with_its_ttl() -> None:
    script = ["tick 1 20", "stabilize", "grant 1 7 3", "stabilize", "keepalive 1 7", "check"]
    config = ClusterConfig(prevote=False, check_quorum=False, persist="sync")
    transcript, _ = run_script(script, config)
    assert "n1 (leader, term 1) acknowledged keep-alive of lease 7 with ttl 3" in transcript
    assert transcript.rstrip().endswith("> check\nok"), transcript


def test_exhaustive_search_finds_a_keepalive_after_expiry() -> None:
    result = _search(BugSet.of("keepalive_after_expiry"), nodes=3, max_term=1)
    assert result.verdict is Verdict.FALSE, result.describe()
    assert "LeaseKeepAliveHonoured" in result.describe()
    assert result.distinct_states < 2000


@pytest.mark.parametrize(("nodes", "max_term"), [(3, 1), (2, 2)])
def test_correct_model_exhausts_the_same_space(nodes: int, max_term: int) -> None:
    result = _search(NO_BUGS, nodes, max_term)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert "exhausted" in result.describe()


def test_a_new_leader_restarting_a_pending_expiry_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    def restart_every_clock(node: Node, scale: int) -> Node:
        clocks = tuple(
            (lease, lease_clocks.clock_ticks(kv.lease_ttl(node.store, lease) or 0, scale))
            for lease in sorted(node.store.lease_ids())
        )
        return node._replace(leases=clocks)

    monkeypatch.setattr(lease_clocks, "start_lease_clocks", restart_every_clock)
    result = _search(NO_BUGS, nodes=2, max_term=2)
    assert result.verdict is Verdict.FALSE, result.describe()
    assert "(leader, term 2) proposed the expiry of lease 1" in result.describe()

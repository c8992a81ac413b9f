"""Configuration changes under random faults: the chaos simulator proposes random changes
(add a learner, promote one, remove a member, the leader included) among partitions,
crashes, loss, duplication, reordering, compactions and leader transfers, and checks
Election Safety, Log Matching, State Machine Safety, Leader Completeness and
Configuration Agreement after every step, then that a final entry commits on every member
(liveness). With the pending-change rule turned off, the same chaos finds a violation."""

from __future__ import annotations

from pathlib import Path

import pytest
from impl_raft_sim import ChaosStats, Cluster, FileDisk, run_chaos

from etcdspec.impl.raft.core import SKIP_PENDING_CHECK

SEEDS = range(40)
RATE = 0.04  # share of the steps that propose a conf change
SAFETY = ("Election Safety", "Leader Completeness", "State Machine Safety", "Log Matching")


def chaos(nodes: int, seed: int, **options: object) -> ChaosStats:
    cluster = Cluster(nodes, seed=seed, election_tick=5, **options)  # type: ignore[arg-type]
    return run_chaos(cluster, steps=1500, conf_changes=RATE)


@pytest.mark.parametrize("nodes", [3, 5])
def test_safety_and_liveness_hold_with_random_conf_changes(nodes: int) -> None:
    totals = ChaosStats()
    for seed in SEEDS:
        stats = chaos(nodes, seed)
        for name in ("elections", "committed", "crashes", "snapshots_installed"):
            setattr(totals, name, getattr(totals, name) + getattr(stats, name))
        totals.conf_changes_proposed += stats.conf_changes_proposed
        totals.conf_changes_refused += stats.conf_changes_refused
        totals.conf_changes_applied += stats.conf_changes_applied
        totals.leader_removals += stats.leader_removals
    # Not vacuous: changes of every kind were made and applied, leaders removed themselves.
    # (measured: 162 applied, 25 leader removals with 3 nodes; 69 and 3 with 5 nodes)
    assert totals.conf_changes_applied >= len(SEEDS), totals.describe()
    assert totals.leader_removals >= 2, totals.describe()
    assert totals.conf_changes_refused >= 1, totals.describe()
    assert totals.snapshots_installed >= 10, totals.describe()


@pytest.mark.parametrize("seed", range(3))
def test_conf_changes_survive_real_wal_and_snapshot_files(seed: int, tmp_path: Path) -> None:
    """The same chaos with each node on wal.py and snapfile.py: conf change entries and
    snapshots with learners are written, recovered on every restart, and agree."""
    cluster = Cluster(3, seed=seed, election_tick=5, storage_root=tmp_path)
    stats = run_chaos(cluster, steps=1500, conf_changes=RATE)
    assert stats.conf_changes_applied >= 1 and stats.crashes >= 1, stats.describe()
    assert all(
        isinstance(n.disk, FileDisk) and n.disk.warnings == [] for n in cluster.nodes.values()
    )


def test_without_the_pending_rule_random_chaos_finds_a_violation() -> None:
    bug = frozenset({SKIP_PENDING_CHECK})
    for seed in range(100):
        try:
            chaos(3, seed, unsafe_conf_change=bug)
        except AssertionError as violation:
            if str(violation).startswith(SAFETY):
                chaos(3, seed)  # the same seed with the rule: holds
                return
    raise AssertionError("skip_pending_check was not caught in 100 seeded runs")

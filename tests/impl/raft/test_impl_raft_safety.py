"""Raft safety under random faults: Election Safety, Log Matching, State Machine Safety,
Leader Completeness and commit <= last index, checked after every simulator step, over
many seeded runs with partitions, crashes, loss, duplication and reordering; and a
witness that leaders get elected and entries commit (no vacuous pass)."""

from __future__ import annotations

from pathlib import Path

import pytest
from impl_raft_sim import Cluster, FileDisk, run_chaos

SEEDS = range(12)


@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_safety_properties_hold_under_random_faults(nodes: int, seed: int) -> None:
    cluster = Cluster(nodes, seed=seed, election_tick=5, max_inflight_msgs=4, max_size_per_msg=8)
    stats = run_chaos(cluster, steps=1200)
    assert stats.elections >= 1, stats.describe()
    assert stats.committed >= 2, stats.describe()


@pytest.mark.parametrize("pre_vote,check_quorum", [(False, False), (True, False), (False, True)])
def test_safety_holds_without_pre_vote_or_check_quorum(pre_vote: bool, check_quorum: bool) -> None:
    for seed in range(6):
        cluster = Cluster(3, seed=100 + seed, pre_vote=pre_vote, check_quorum=check_quorum)
        run_chaos(cluster, steps=1000)


def test_chaos_runs_witness_elections_commits_and_compactions() -> None:
    totals = dict.fromkeys(
        ["elections", "committed", "compactions", "reads", "crashes", "snapshots_installed"], 0
    )
    for seed in range(8):
        stats = run_chaos(Cluster(3, seed=seed, election_tick=5), steps=1200)
        for name in totals:
            totals[name] += getattr(stats, name)
    assert totals["elections"] >= 16, totals
    assert totals["committed"] >= 40, totals
    assert totals["compactions"] >= 4, totals
    assert totals["reads"] >= 8, totals
    assert totals["crashes"] >= 8, totals
    assert totals["snapshots_installed"] >= 1, totals


@pytest.mark.parametrize("seed", range(4))
def test_safety_holds_with_nodes_on_real_wal_and_snapshot_files(seed: int, tmp_path: Path) -> None:
    """The same chaos, each node persisting through wal.py and snapfile.py and recovering
    from them on every restart (small segments, so rolls and releases happen)."""
    cluster = Cluster(3, seed=seed, election_tick=5, storage_root=tmp_path)
    stats = run_chaos(cluster, steps=1000)
    assert stats.crashes >= 1 and stats.committed >= 2, stats.describe()
    disks = [node.disk for node in cluster.nodes.values()]
    assert all(isinstance(d, FileDisk) and d.fsyncs > 0 and d.warnings == [] for d in disks)
    first_segments = [min((tmp_path / f"node{i}" / "wal").glob("*.wal")).name for i in cluster.ids]
    assert any(not name.startswith("0" * 16) for name in first_segments)  # segments released

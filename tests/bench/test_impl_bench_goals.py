"""bench/server_goals.py: the goals against etcd judged at the median over rounds, and
server_bench's --rounds, which runs every cell once per round on the same clusters."""

from __future__ import annotations

import pytest

from bench import server_bench
from bench.server_bench import Cell
from bench.server_goals import (
    GOALS,
    MET,
    MISSED,
    UNKNOWN,
    Goal,
    format_ratios,
    format_verdicts,
    judge,
    ratio,
)

P99_GOAL = Goal("p99_ms", 2.0, at_least=False)


def pair(workload: str, clients: int, p99_ours: float, p99_etcd: float) -> list[Cell]:
    """ours and etcd in one cell, alike but for their p99 (ms)."""
    return [
        Cell("ours", workload, clients, 1000, 1.0, 1.0, p99_ours, 0, 1.0),
        Cell("etcd", workload, clients, 1000, 1.0, 1.0, p99_etcd, 0, 1.0),
    ]


def test_a_goal_is_judged_at_the_median_ratio_over_the_rounds_not_at_each_round() -> None:
    # put x1 goes over 2x in one round in three (2.5x), under it at the median (1.5x).
    rounds = [pair("put", 1, 3.0, 2.0), pair("put", 1, 5.0, 2.0), pair("put", 1, 2.0, 2.0)]
    (verdict,) = judge(rounds, [P99_GOAL])
    assert verdict.ratios == (1.5, 2.5, 1.0)
    assert verdict.median == 1.5 and verdict.status == MET
    assert verdict.describe() == "put x1: median 1.50 (1.00-2.50), held in 2 of 3 rounds: met"
    # Over 2x at the median: missed, though one round held.
    rounds = [pair("put", 1, 5.0, 2.0), pair("put", 1, 4.4, 2.0), pair("put", 1, 3.0, 2.0)]
    (verdict,) = judge(rounds, [P99_GOAL])
    assert verdict.median == 2.2 and verdict.status == MISSED


def test_throughput_goals_are_lower_bounds_and_apply_only_to_their_cells() -> None:
    cells = [
        Cell("ours", "put", 64, 400, 1.0, 50.0, 90.0, 0, 1.0),  # 400 ops/s
        Cell("etcd", "put", 64, 1000, 1.0, 20.0, 60.0, 0, 0.5),
        Cell("ours", "range-serializable", 1, 600, 1.0, 0.5, 1.0, 0, 0.2),
        Cell("etcd", "range-serializable", 1, 1000, 1.0, 0.3, 1.0, 0, 0.2),
    ]
    verdicts = {(v.goal, v.workload, v.clients): v for v in judge([cells])}
    put_goal, p99_goal, range_goal = GOALS
    assert verdicts[(put_goal, "put", 64)].status == MISSED  # 0.4x, under 0.5x
    assert verdicts[(p99_goal, "put", 64)].status == MET  # 1.5x
    assert verdicts[(range_goal, "range-serializable", 1)].status == MET  # 0.6x
    assert (put_goal, "range-serializable", 1) not in verdicts
    assert (range_goal, "put", 64) not in verdicts
    assert len(verdicts) == 4


def test_a_round_with_errors_or_no_ops_or_no_etcd_cell_makes_the_cell_unknown() -> None:
    good = pair("put", 1, 1.0, 1.0)
    errors = [Cell("ours", "put", 1, 1000, 1.0, 1.0, 1.0, 3, 1.0), good[1]]
    no_ops = [good[0], Cell("etcd", "put", 1, 0, 1.0, float("nan"), float("nan"), 0)]
    no_etcd = [good[0]]
    for bad in (errors, no_ops, no_etcd):
        (verdict,) = judge([good, bad, good], [P99_GOAL])
        assert verdict.ratios == (1.0, None, 1.0)
        # The median of the rounds that gave a ratio would pass: still unknown.
        assert verdict.median == 1.0 and verdict.status == UNKNOWN
        assert verdict.describe().endswith("held in 2 of 3 rounds, 1 without a ratio: unknown")


def test_ratio_is_none_when_etcd_measured_zero() -> None:
    ours, etcd = pair("put", 1, 1.0, 0.0)
    assert ratio(ours, etcd, "p99_ms") is None
    assert ratio(ours, etcd, "throughput") == 1.0


def test_the_verdicts_name_every_goal_and_count_them_and_the_unmeasured() -> None:
    rounds = [pair("put", 1, 3.0, 2.0) + pair("put", 16, 9.0, 3.0)]
    text = format_verdicts(judge(rounds), 1).splitlines()
    assert text == [
        "goals, ours / etcd, judged at the median over 1 round(s):",
        "  throughput at least 0.5x etcd (put at 64 clients)",
        "    not measured: no cell of this run is one it applies to",
        "  p99 at most 2x etcd (every workload)",
        "    put x1: median 1.50 (1.50-1.50), held in 1 of 1 rounds: met",
        "    put x16: median 3.00 (3.00-3.00), held in 0 of 1 rounds: missed",
        "  throughput at least 0.5x etcd (range-serializable)",
        "    not measured: no cell of this run is one it applies to",
        "goals: 1 met, 1 missed, 0 unknown (of 2 goal-cells); 2 goal(s) not measured",
    ]


def test_the_ratios_table_gives_each_metric_median_and_range_over_rounds() -> None:
    rounds = [pair("put", 1, 3.0, 2.0), pair("put", 1, 5.0, 2.0), pair("put", 1, 2.0, 2.0)]
    row = format_ratios(rounds).splitlines()[3]
    assert [part.strip() for part in row.split(" | ")] == [
        "put                        1",
        "1.00 (1.00-1.00)",
        "1.00 (1.00-1.00)",
        "1.50 (1.00-2.50)",
        "1.00 (1.00-1.00)",
    ]


def test_rounds_below_one_are_refused_with_the_value() -> None:
    with pytest.raises(SystemExit) as raised:
        server_bench.main(["--rounds", "0"])
    assert raised.value.code == 2


def test_rounds_run_every_cell_once_per_round_on_one_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real cluster of ours, two rounds of two cells: the cluster starts once, and each
    round has each cell, in workload then client order, with ops of its own."""
    started: list[str] = []
    running = server_bench.running_cluster

    def counted(target: str, snapshot_count: int) -> object:
        started.append(target)
        return running(target, snapshot_count)

    monkeypatch.setattr(server_bench, "running_cluster", counted)
    rounds = server_bench.bench_clusters(
        ["ours"], [1, 2], 0.3, seed=1, workloads=("put",), via="leader", slice_s=0.3, rounds=2
    )
    assert started == ["ours"]
    assert [[(c.workload, c.clients) for c in cells] for cells in rounds] == [
        [("put", 1), ("put", 2)],
        [("put", 1), ("put", 2)],
    ]
    for cells in rounds:
        for cell in cells:
            assert cell.ops > 0 and cell.errors == 0 and cell.seconds >= 0.3

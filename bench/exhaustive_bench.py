"""Benchmarks of the model core: the exhaustive explorer's speed and one model step's cost.

Run: `.venv/bin/python -m bench.exhaustive_bench` (`--quick` for the small bounds only,
`--json` for machine-readable output, `--repeat N` to keep the best of N runs).

Figures (CPU seconds from time.process_time(), the best of --repeat runs, since the
machine may be shared; wall seconds alongside):
1. Exhaustive search of the correct 3-node model (exhaustive.small_config) at three
   bounds: distinct states (pinned: 13,423 / 58,959 / 133,099), depth, states per CPU
   second. A different count is reported as an error, not a figure.
2. The figure8_commit bug's finder (exhaustive, terms <= 3, logs <= 1, no heartbeat):
   seconds to the counterexample and states searched.
3. One model step as Hypothesis pays it: `Cluster.apply` and `check_invariants(previous)`
   per step, microseconds, over seeded walks that mostly deliver and propose.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

from etcdspec.model.actions import Action
from etcdspec.model.bugs import BugSet
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.exhaustive import ExhaustiveResult, explore_exhaustive, small_config
from etcdspec.verdict import Verdict

# (label, small_config bounds, the distinct states the bound has)
SEARCHES: list[tuple[str, dict[str, Any], int]] = [
    ("terms<=2 logs<=1", {"max_term": 2, "max_log": 1}, 13_423),
    ("terms<=2 logs<=2", {"max_term": 2, "max_log": 2}, 58_959),
    ("terms<=3 logs<=1", {"max_term": 3, "max_log": 1}, 133_099),
]
QUICK = 1  # --quick runs the first search only

FIGURE8_BOUNDS: dict[str, Any] = {"max_term": 3, "max_log": 1, "allow_heartbeat": False}

STEP_WEIGHTS = {"deliver": 20.0, "propose": 3.0, "persist": 6.0, "tick": 2.0, "timeout": 1.0}


def _best(runs: int, search: dict[str, Any]) -> ExhaustiveResult:
    best: ExhaustiveResult | None = None
    for _ in range(runs):
        result = explore_exhaustive(small_config(**search))
        if best is None or result.cpu_seconds < best.cpu_seconds:
            best = result
    assert best is not None
    return best


def bench_searches(quick: bool, repeat: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for label, search, expected in SEARCHES[: QUICK if quick else None]:
        result = _best(repeat, search)
        if result.verdict is not Verdict.TRUE or result.distinct_states != expected:
            raise SystemExit(
                f"exhaustive {label}: expected {expected} states and a pass, got "
                f"{result.describe()}"
            )
        rows.append(
            {
                "bounds": label,
                "distinct_states": result.distinct_states,
                "depth": result.depth_reached,
                "cpu_seconds": round(result.cpu_seconds, 2),
                "seconds": round(result.seconds, 2),
                "states_per_cpu_s": round(result.states_per_cpu_second),
            }
        )
        print(f"[bench] {result.describe()}", file=sys.stderr)
    return rows


def bench_figure8(repeat: int) -> dict[str, Any]:
    config = small_config(bugs=BugSet.of("figure8_commit"), **FIGURE8_BOUNDS)
    best: ExhaustiveResult | None = None
    for _ in range(repeat):
        result = explore_exhaustive(config)
        if result.verdict is not Verdict.FALSE:
            raise SystemExit(f"figure8_commit not found: {result.describe()}")
        if best is None or result.cpu_seconds < best.cpu_seconds:
            best = result
    assert best is not None
    return {
        "distinct_states": best.distinct_states,
        "cpu_seconds": round(best.cpu_seconds, 2),
        "seconds": round(best.seconds, 2),
        "run_length": len(best.counterexample or []),
    }


def _walk(config: ClusterConfig, seed: int, steps: int) -> list[Action]:
    rng = random.Random(seed)
    state = Cluster.start(config)
    path: list[Action] = []
    for _ in range(steps):
        actions = state.enabled_actions()
        action = rng.choices(actions, [STEP_WEIGHTS.get(a.kind, 0.05) for a in actions])[0]
        path.append(action)
        state = state.apply(action)
    return path


def bench_steps(quick: bool, repeat: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    configs = {"ticks": ClusterConfig(), "free": ClusterConfig(timeouts="free", max_crashes=1)}
    for name, config in configs.items():
        paths = [_walk(config, seed, 300) for seed in range(3 if quick else 10)]
        steps = sum(len(path) for path in paths)
        best_apply = best_check = float("inf")
        for _ in range(repeat):
            apply_s = check_s = 0.0
            for path in paths:
                state = Cluster.start(config)
                for action in path:
                    started = time.process_time()
                    after = state.apply(action)
                    applied = time.process_time()
                    after.check_invariants(state)
                    checked = time.process_time()
                    apply_s += applied - started
                    check_s += checked - applied
                    state = after
            best_apply, best_check = min(best_apply, apply_s), min(best_check, check_s)
        rows[name] = {
            "steps": steps,
            "apply_us": round(best_apply / steps * 1e6, 1),
            "check_us": round(best_check / steps * 1e6, 1),
            "step_us": round((best_apply + best_check) / steps * 1e6, 1),
        }
    return rows


def table(report: dict[str, Any]) -> str:
    lines = ["| figure | value |", "|---|---|"]
    for row in report["searches"]:
        lines.append(
            f"| exhaustive {row['bounds']}: states, depth, CPU s, states/CPU s | "
            f"{row['distinct_states']:,}, {row['depth']}, {row['cpu_seconds']}, "
            f"{row['states_per_cpu_s']:,} |"
        )
    fig8 = report["figure8"]
    if fig8 is not None:
        lines.append(
            f"| find figure8_commit (exhaustive): CPU s, wall s, states | "
            f"{fig8['cpu_seconds']}, {fig8['seconds']}, {fig8['distinct_states']:,} |"
        )
    for name, row in report["steps"].items():
        lines.append(
            f"| model step ({name}): apply + check_invariants µs | "
            f"{row['apply_us']} + {row['check_us']} = {row['step_us']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.exhaustive_bench")
    parser.add_argument("--quick", action="store_true", help="the smallest bounds only")
    parser.add_argument("--repeat", type=int, default=2, help="keep the best of N runs")
    parser.add_argument("--json", action="store_true", help="JSON on stdout")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    report = {
        "searches": bench_searches(args.quick, args.repeat),
        "figure8": None if args.quick else bench_figure8(args.repeat),
        "steps": bench_steps(args.quick, args.repeat),
    }
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmarks of model exploration: Hypothesis speed, exhaustive speed, time to find bugs.

Run: `.venv/bin/python -m bench.model_bench` (add `--quick` for a short run, `--json` for
machine-readable output, `--seeds N`, `--bug NAME` to time only some bugs, `--bugs-only`
to skip figures 1 and 2).

Figures (wall-clock and CPU seconds both, since the machine may be shared):
1. Hypothesis on the 3-node cluster (correct model): rule steps/s and model steps/s.
2. The exhaustive explorer, 3 nodes, terms <= 2, logs <= 2 (exhaustive.small_config):
   distinct states, states/s, and whether it covered the whole bounded space.
3. Time to find each catalogued bug with its finder (etcdspec.model.explore.FINDERS):
   median over N seeds (wall and CPU), and how many seeds found it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from typing import Any

from etcdspec.model.bugs import CATALOGUE
from etcdspec.model.explore import (
    FINDERS,
    ExhaustiveBounds,
    ExploreOptions,
    find_bug,
    run_exhaustive,
    run_hypothesis,
)
from etcdspec.verdict import Verdict


def bench_hypothesis(quick: bool) -> dict[str, Any]:
    options = ExploreOptions(max_examples=20 if quick else 100, steps=50)
    # Import the machine's modules before the clock starts: with PYTHONDONTWRITEBYTECODE
    # (as in this project's sessions) each run would otherwise pay for compiling them.
    importlib.import_module(f"etcdspec.model.hypothesis_{options.machine}")
    cpu = time.process_time()
    result = run_hypothesis(options)
    cpu = time.process_time() - cpu
    return {
        "examples": result.examples,
        "rule_steps": result.rule_steps,
        "model_steps": result.steps,
        "seconds": round(result.seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "rule_steps_per_s": round(result.rule_steps / result.seconds, 1),
        "model_steps_per_s": round(result.steps / result.seconds, 1),
        "rule_steps_per_cpu_s": round(result.rule_steps / cpu, 1) if cpu else None,
        "verdict": result.verdict.describe(),
    }


def bench_exhaustive(quick: bool) -> dict[str, Any]:
    bounds = ExhaustiveBounds(max_term=2, max_log=2, time_budget_s=30 if quick else 300)
    cpu = time.process_time()
    result = run_exhaustive(ExploreOptions(), bounds)
    cpu = time.process_time() - cpu
    return {
        "bounds": bounds.describe(),
        "distinct_states": result.distinct_states,
        "depth": result.depth,
        "seconds": round(result.seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "states_per_s": round(result.states_per_second, 1),
        "states_per_cpu_s": round(result.distinct_states / cpu, 1) if cpu else None,
        "complete": result.verdict is Verdict.TRUE,
        "verdict": result.verdict.describe(),
        "note": result.note,
    }


def bench_bugs(names: list[str], seeds: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for name in names:
        times: list[float] = []
        cpu_times: list[float] = []
        found = 0
        for seed in range(seeds):
            cpu = time.process_time()
            result = find_bug(name, seed=seed)
            cpu_times.append(time.process_time() - cpu)
            times.append(result.seconds)
            found += result.verdict is Verdict.FALSE
            print(f"[bench] {name} seed {seed}: {result.describe()}", file=sys.stderr)
        rows[name] = {
            "finder": FINDERS[name].describe(),
            "median_seconds": round(statistics.median(times), 2),
            "max_seconds": round(max(times), 2),
            "median_cpu_seconds": round(statistics.median(cpu_times), 2),
            "max_cpu_seconds": round(max(cpu_times), 2),
            "found": f"{found}/{seeds}",
        }
    return rows


def table(report: dict[str, Any]) -> str:
    hyp, exh = report["hypothesis"], report["exhaustive"]
    lines = ["| figure | value |", "|---|---|"]
    if hyp is not None:
        lines += [
            f"| Hypothesis rule steps/s (3 nodes, wall) | {hyp['rule_steps_per_s']:,} |",
            f"| Hypothesis rule steps/s (3 nodes, CPU) | {hyp['rule_steps_per_cpu_s']:,} |",
            f"| Hypothesis model steps/s (3 nodes, wall) | {hyp['model_steps_per_s']:,} |",
        ]
    if exh is not None:
        lines += [
            f"| exhaustive distinct states ({exh['bounds']}) | {exh['distinct_states']:,}"
            f" ({'complete' if exh['complete'] else 'NOT complete'}) |",
            f"| exhaustive states/s (wall / CPU) | {exh['states_per_s']:,} / "
            f"{exh['states_per_cpu_s']:,} |",
        ]
    for name, row in report["bugs"].items():
        lines.append(
            f"| find {name}: median s (max), CPU median s (max), found | "
            f"{row['median_seconds']} ({row['max_seconds']}), {row['median_cpu_seconds']} "
            f"({row['max_cpu_seconds']}), {row['found']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.model_bench")
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per bug (median)")
    parser.add_argument("--bug", action="append", default=None, help="only this bug")
    parser.add_argument("--json", action="store_true", help="JSON on stdout")
    parser.add_argument("--bugs-only", action="store_true", help="only the time to find bugs")
    args = parser.parse_args(argv)
    names = args.bug or [bug.name for bug in CATALOGUE]
    report = {
        "hypothesis": None if args.bugs_only else bench_hypothesis(args.quick),
        "exhaustive": None if args.bugs_only else bench_exhaustive(args.quick),
        "bugs": bench_bugs(names, 1 if args.quick else args.seeds),
    }
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

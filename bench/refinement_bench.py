"""Refinement benchmark: exploration steps/s with and without refinement checks.

Run: `.venv/bin/python -m bench.refinement_bench` (defaults: seeds 1-3, 30 examples of
50 steps, both persistence modes, 3 repeats) or `--quick`. The same seeded Hypothesis
run (etcdspec.model.refinement.run_exploration) is timed with the plain ClusterMachine
and with RefinementMachine, alternating, so both see the same machine load; each pair
takes the same model steps. Reported per persistence mode: the median wall-clock and
CPU (process) seconds over repeats, steps/s, and the slowdown ratio (checked / plain,
summed over seeds). Goal (issue 3): refinement slows exploration by no more than 2x,
judged on CPU time (fairer on a shared machine). Exit code 0 when the goal is met,
1 when not. Parsing the spec is a one-time cost outside the clock.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass

from etcdspec.model.explore import ExploreOptions
from etcdspec.model.refinement import run_exploration
from etcdspec.model.refinement_abstraction import raft_steps_spec

GOAL = 2.0


@dataclass(frozen=True)
class Timing:
    steps: int
    wall: float
    cpu: float


def timed(options: ExploreOptions, checked: bool) -> Timing:
    cpu_start = time.process_time()
    run = run_exploration(options, checked=checked)
    cpu = time.process_time() - cpu_start
    if run.violation is not None:
        raise SystemExit(f"the correct model failed: {run.violation.describe()}")
    return Timing(run.steps, run.seconds, cpu)


def bench_mode(
    persist: str, seeds: list[int], examples: int, steps: int, repeat: int
) -> dict[str, float]:
    plain: dict[int, list[Timing]] = {s: [] for s in seeds}
    checked: dict[int, list[Timing]] = {s: [] for s in seeds}
    for _ in range(repeat):
        for seed in seeds:
            options = ExploreOptions(
                nodes=3, seed=seed, max_examples=examples, steps=steps, persist=persist
            )
            plain[seed].append(timed(options, False))
            checked[seed].append(timed(options, True))

    def total(runs: dict[int, list[Timing]], field: str) -> float:
        return sum(statistics.median(getattr(t, field) for t in runs[s]) for s in seeds)

    model_steps = sum(plain[s][0].steps for s in seeds)
    result = {
        "steps": float(model_steps),
        "plain_wall_s": total(plain, "wall"),
        "checked_wall_s": total(checked, "wall"),
        "plain_cpu_s": total(plain, "cpu"),
        "checked_cpu_s": total(checked, "cpu"),
    }
    result["plain_steps_per_s"] = model_steps / result["plain_cpu_s"]
    result["checked_steps_per_s"] = model_steps / result["checked_cpu_s"]
    result["ratio_cpu"] = result["checked_cpu_s"] / result["plain_cpu_s"]
    result["ratio_wall"] = result["checked_wall_s"] / result["plain_wall_s"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--examples", type=int, default=30)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one seed, 10 examples, 1 repeat")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    examples, repeat = args.examples, args.repeat
    if args.quick:
        seeds, examples, repeat = seeds[:1], 10, 1
    raft_steps_spec()
    results = {
        persist: bench_mode(persist, seeds, examples, args.steps, repeat)
        for persist in ("sync", "explicit")
    }
    met = all(r["ratio_cpu"] <= GOAL for r in results.values())
    if args.json:
        print(json.dumps({"goal_ratio": GOAL, "met": met, "modes": results}, indent=2))
    else:
        print(
            f"seeds {','.join(map(str, seeds))}, {examples} examples x {args.steps} steps, "
            f"median of {repeat}"
        )
        print("persist   steps  plain steps/s  checked steps/s  ratio(cpu)  ratio(wall)")
        for persist, r in results.items():
            print(
                f"{persist:8s} {int(r['steps']):6d}  {r['plain_steps_per_s']:13.0f}  "
                f"{r['checked_steps_per_s']:15.0f}  {r['ratio_cpu']:10.2f}  {r['ratio_wall']:11.2f}"
            )
        print(f"goal: ratio <= {GOAL} (cpu): {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

"""The model's stage of `etcdspec verify`: explore the correct model, expect nothing found.

`run_stage(options)` runs, in order:
1. a seeded Hypothesis run of the cluster machine (3 nodes, PreVote and CheckQuorum on),
2. the same with explicit persistence and tick-counted timeouts (full mode only),
3. a seeded Hypothesis run of the cluster with configuration changes (membership: 5
   nodes, 4 of them voters to begin with),
4. a seeded Hypothesis run of the store machine,
5. a bounded exhaustive search of the cluster (small bounds that complete), over the
   workers `options.workers` / `options.cluster` name if any (the same answers),
6. the same with configuration changes (3 nodes, 2 voters to begin with).
Each run's verdict merges pessimistically (false > unknown > true). A Hypothesis run
that never elected a leader or never committed an entry proves nothing: its verdict
becomes UNKNOWN ("vacuous"). An exhaustive search that runs out of budget is UNKNOWN.

Report files, under `<report_dir>/model/`: `explore.json` (every run's JSON result) and,
for any violation, `<run>.counterexample.txt` and `<run>.itf.json`. `quick=True`
shortens every run (tests use it); the verdict logic is the same.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace

from etcdspec.model.explore import (
    ExhaustiveBounds,
    ExploreOptions,
    ExploreResult,
    run_exhaustive,
    run_hypothesis,
)
from etcdspec.stage import StageOptions, StageResult
from etcdspec.verdict import Verdict
from etcdspec.workers import open_pool

REQUIRED_WITNESSES = ("cluster: leader elected", "cluster: entry committed")

RunPlan = tuple[str, Callable[[], ExploreResult]]


def plan(options: StageOptions) -> list[RunPlan]:
    """The runs of the stage, named, for the given seed and length."""
    quick, seed = options.quick, options.seed
    cluster = ExploreOptions(
        machine="cluster",
        seed=seed,
        max_examples=8 if quick else 100,
        steps=30 if quick else 50,
    )
    store = ExploreOptions(
        machine="store", seed=seed, max_examples=15 if quick else 200, steps=30 if quick else 50
    )
    bounds = (
        ExhaustiveBounds(max_term=1, max_log=1, time_budget_s=60)
        if quick
        else ExhaustiveBounds(max_term=2, max_log=2, time_budget_s=300)
    )
    runs: list[RunPlan] = [
        ("hypothesis-cluster", lambda: run_hypothesis(cluster)),
    ]
    if not quick:
        durable = replace(cluster, persist="explicit", timeouts="ticks", max_examples=40)
        runs.append(("hypothesis-cluster-ticks-explicit", lambda: run_hypothesis(durable)))
    members = replace(cluster, nodes=5, membership=True)
    runs.append(("hypothesis-cluster-membership", lambda: run_hypothesis(members)))
    runs.append(("hypothesis-store", lambda: run_hypothesis(store)))
    runs.append(("exhaustive-cluster", lambda: _exhaustive(replace(cluster), bounds, options)))
    # 3 nodes, voters n1, n2 and n3 outside: 1,046 states at max_term 2, max_log 1;
    # 15,303 at max_term 2, max_log 2 (about a second)
    member_bounds = ExhaustiveBounds(
        max_term=2, max_log=1 if quick else 2, time_budget_s=60 if quick else 120
    )
    runs.append(
        (
            "exhaustive-cluster-membership",
            lambda: _exhaustive(replace(cluster, membership=True), member_bounds, options),
        )
    )
    return runs


def _exhaustive(
    explore: ExploreOptions, bounds: ExhaustiveBounds, options: StageOptions
) -> ExploreResult:
    """The exhaustive run, over the workers `options` name (the same answers) or here."""
    pool = open_pool(options.workers, options.cluster, options.worker_memory_mb)
    if pool is None:
        return run_exhaustive(explore, bounds)
    try:
        return run_exhaustive(explore, bounds, pool=pool)
    finally:
        pool.close()


def judge(name: str, result: ExploreResult) -> tuple[Verdict, str]:
    """A run's verdict for the stage, with one line saying why."""
    if result.crashed:
        return Verdict.UNKNOWN, f"{name}: the model crashed: {result.crashed}"
    if result.verdict is Verdict.TRUE and name.startswith("hypothesis-cluster"):
        missing = [w for w in REQUIRED_WITNESSES if not result.witnesses.get(w)]
        if missing:
            return Verdict.UNKNOWN, f"{name}: vacuous, never saw {', '.join(missing)}"
    return result.verdict, f"{name}: {result.describe()}"


def run_stage(options: StageOptions) -> StageResult:
    """Explore the correct model (see the module docstring); report under report_dir."""
    started = time.monotonic()
    folder = options.report_dir / "model"
    folder.mkdir(parents=True, exist_ok=True)
    verdicts: list[Verdict] = []
    lines: list[str] = []
    documents: dict[str, object] = {}
    figures: list[str] = []
    for name, run in plan(options):
        result = run()
        verdict, line = judge(name, result)
        verdicts.append(verdict)
        lines.append(line)
        documents[name] = {"stage_verdict": verdict.to_json(), **result.to_json()}
        if result.counterexample is not None:
            (folder / f"{name}.counterexample.txt").write_text(
                result.counterexample.describe() + "\n"
            )
            result.counterexample.to_itf().write(folder / f"{name}.itf.json")
        if result.mode == "exhaustive":
            figures.append(f"{result.distinct_states} states exhaustive")
        else:
            figures.append(f"{result.examples} {result.options.machine} examples")
    (folder / "explore.json").write_text(
        json.dumps({"schema": "etcdspec.model-stage/1", "runs": documents}, indent=2) + "\n"
    )
    verdict = Verdict.merge_all(verdicts)
    bad = [line for line, v in zip(lines, verdicts, strict=True) if v is not Verdict.TRUE]
    summary = "; ".join(bad) if bad else "no violation: " + ", ".join(figures)
    return StageResult(
        name="model",
        verdict=verdict,
        summary=summary,
        seconds=time.monotonic() - started,
        details={"runs": lines, "report": str(folder)},
    )

"""A randomized campaign: many seeded Hypothesis runs and the bug catalogue's finders,
spread over a worker pool until a time budget, every distinct counterexample collected.

Contract: `run_campaign(pool, budget_s, ...)` hands out waves of runs (`CampaignTask`:
a seeded run of the correct cluster model, or a catalogued bug's finder with a seed),
one task each on `pool` (etcdspec.workers: Dask hands them to free workers; an
InlinePool runs them here), until the budget is spent (checked between waves, so the
campaign ends within about one wave's time of it). Each run shrinks its own
counterexample (Hypothesis, then the finder's shrinker); the campaign keeps the
distinct ones, keyed by (bug, invariant, the shrunk run's action labels), with the
first task that found each. Coverage: which actions fired (model steps by kind) and
which states were witnessed (leader elected, entry committed, ...), summed over runs.

Verdict: FALSE when a run of the correct model broke an invariant; UNKNOWN when a run
crashed (the model's own error: `explore` exits 255 then), when the budget allowed no
run, or when a catalogued bug was never found although its finder ran (the campaign
could not tell the checks work); TRUE otherwise (no violation in the
runs made: evidence, not proof). Runs replay: each task names its seed.

Why not HypoFuzz (the maintained engine for running Hypothesis tests as a fuzzing
campaign): it fuzzes pytest-collected test functions in local processes, adaptively
(coverage-guided, so a run is not named by a seed), until stopped, reporting on its
dashboard; our runs are RuleBasedStateMachine explorations and exhaustive finders that
must replay from a seed, spread over the same Dask workers as the exhaustive search,
and end at a budget with a verdict and a report. A campaign is a list of seeded tasks,
so the engine's own scheduler (Dask's) is all the scheduling it needs.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from etcdspec.model.explore import ExploreOptions, ExploreResult, find_bug, run_hypothesis
from etcdspec.verdict import Verdict
from etcdspec.workers import WorkerPool


@dataclass(frozen=True)
class CampaignTask:
    """One run: the correct model with `seed` (bug None), or bug `bug`'s finder."""

    seed: int
    bug: str | None = None

    def describe(self) -> str:
        what = f"the finder of {self.bug}" if self.bug else "the correct model"
        return f"{what}, seed {self.seed}"


@dataclass(frozen=True)
class RunOutcome:
    """What a worker sends back about one run (small: no states)."""

    task: CampaignTask
    verdict: Verdict
    seconds: float
    steps: int
    invariant: str | None
    labels: tuple[str, ...]
    report: str  # the counterexample's text, or ""
    crashed: str
    witnesses: dict[str, int]
    actions: dict[str, int]


def run_task(options: ExploreOptions, task: CampaignTask) -> RunOutcome:
    """Run one task (a pool task: module-level, its arguments picklable)."""
    result: ExploreResult
    if task.bug is None:
        result = run_hypothesis(replace(options, seed=task.seed))
    else:
        result = find_bug(task.bug, task.seed)
    counterexample = result.counterexample
    return RunOutcome(
        task=task,
        verdict=result.verdict,
        seconds=result.seconds,
        steps=result.steps,
        invariant=counterexample.invariant if counterexample is not None else None,
        labels=tuple(result.labels()),
        report=counterexample.describe() if counterexample is not None else "",
        crashed=result.crashed,
        witnesses=dict(result.witnesses),
        actions=dict(result.actions_fired),
    )


@dataclass
class CampaignResult:
    budget_s: float
    where: str
    runs: int = 0
    steps: int = 0
    seconds: float = 0.0
    model_violations: int = 0
    crashes: list[str] = field(default_factory=list)
    # (bug or "", invariant, labels) -> the first outcome with it
    distinct: dict[tuple[str, str, tuple[str, ...]], RunOutcome] = field(default_factory=dict)
    bugs_found: dict[str, int] = field(default_factory=dict)  # bug -> runs that found it
    bugs_tried: Counter[str] = field(default_factory=Counter)
    witnesses: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)

    @property
    def verdict(self) -> Verdict:
        if self.model_violations:
            return Verdict.FALSE
        if self.crashes or self.runs == 0:
            return Verdict.UNKNOWN
        if any(bug not in self.bugs_found for bug in self.bugs_tried):
            return Verdict.UNKNOWN
        return Verdict.TRUE

    def add(self, outcome: RunOutcome) -> None:
        self.runs += 1
        self.steps += outcome.steps
        self.witnesses.update(outcome.witnesses)
        self.actions.update(outcome.actions)
        bug = outcome.task.bug
        if bug is not None:
            self.bugs_tried[bug] += 1
        if outcome.crashed:
            self.crashes.append(f"{outcome.task.describe()}: {outcome.crashed}")
            return
        if outcome.verdict is not Verdict.FALSE or outcome.invariant is None:
            return
        if bug is None:
            self.model_violations += 1
        else:
            self.bugs_found[bug] = self.bugs_found.get(bug, 0) + 1
        self.distinct.setdefault((bug or "", outcome.invariant, outcome.labels), outcome)

    def describe(self) -> str:
        lines = [
            f"campaign: {self.verdict.describe()} — {self.runs} runs, {self.steps:,} model "
            f"steps in {self.seconds:.1f} s (budget {self.budget_s:g} s) on {self.where}; "
            f"{len(self.distinct)} distinct counterexamples",
        ]
        if self.model_violations:
            lines.append(f"the correct model broke an invariant in {self.model_violations} runs")
        lines.extend(f"crashed: {line}" for line in self.crashes)
        for bug in sorted(self.bugs_tried):
            found = self.bugs_found.get(bug, 0)
            lines.append(f"bug {bug}: found in {found} of {self.bugs_tried[bug]} runs")
        fired = ", ".join(f"{k} {v}" for k, v in sorted(self.actions.items()))
        lines.append(f"actions fired: {fired or 'none'}")
        seen = ", ".join(f"{k} {v}" for k, v in sorted(self.witnesses.items()))
        lines.append(f"states witnessed: {seen or 'none'}")
        for (bug, invariant, labels), outcome in sorted(self.distinct.items()):
            lines.append(
                f"counterexample {bug or 'correct model'} / {invariant}, {len(labels)} steps "
                f"(first by {outcome.task.describe()})"
            )
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "etcdspec.campaign/1",
            "valid": self.verdict.to_json(),
            "runs": self.runs,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "budget_seconds": self.budget_s,
            "where": self.where,
            "bugs": {
                bug: {"runs": self.bugs_tried[bug], "found": self.bugs_found.get(bug, 0)}
                for bug in sorted(self.bugs_tried)
            },
            "actions_fired": dict(sorted(self.actions.items())),
            "witnesses": dict(sorted(self.witnesses.items())),
            "counterexamples": [
                {
                    "bug": bug or None,
                    "invariant": invariant,
                    "steps": list(labels),
                    "found_by": outcome.task.describe(),
                    "report": outcome.report,
                }
                for (bug, invariant, labels), outcome in sorted(self.distinct.items())
            ],
            "crashes": self.crashes,
        }


def tasks(first_seed: int, bugs: Sequence[str], count: int, start: int) -> list[CampaignTask]:
    """Tasks number `start` .. `start + count - 1` of the campaign's endless list: each
    round is one seeded run of the correct model, then one finder run per bug, the seed
    going up by one per round."""
    per_round = 1 + len(bugs)
    made: list[CampaignTask] = []
    for number in range(start, start + count):
        round_number, slot = divmod(number, per_round)
        seed = first_seed + round_number
        made.append(CampaignTask(seed, None if slot == 0 else bugs[slot - 1]))
    return made


def run_campaign(
    pool: WorkerPool,
    budget_s: float,
    options: ExploreOptions,
    bugs: Sequence[str] = (),
    wave: int | None = None,
    max_runs: int | None = None,
    progress: Callable[[CampaignResult], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> CampaignResult:
    """Waves of tasks on `pool` until `budget_s` is spent or `max_runs` ran (see the
    module docstring). `options` are the correct model's runs' (their seed is the
    first seed); `bugs` the catalogued bugs whose finders take turns with them."""
    if budget_s <= 0:
        raise ValueError(f"a campaign needs a positive time budget, got {budget_s}")
    started = clock()
    result = CampaignResult(budget_s=budget_s, where=pool.describe())
    size = wave if wave is not None else 2 * pool.size
    done = 0
    while clock() - started < budget_s and (max_runs is None or done < max_runs):
        count = size if max_runs is None else min(size, max_runs - done)
        batch = tasks(options.seed, bugs, count, done)
        for outcome in pool.map(run_task, options, batch):
            result.add(outcome)
        done += count
        result.seconds = clock() - started
        if progress is not None:
            progress(result)
    result.seconds = clock() - started
    return result

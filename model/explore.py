"""Exploration of the model: bounded Hypothesis runs and the exhaustive explorer, one result.

`run_hypothesis(options)` runs one of the stateful machines (the cluster machine of
`etcdspec.model.hypothesis_cluster` or the store machine of
`etcdspec.model.hypothesis_store`) programmatically: seeded (the run is replayable from
`options.seed`), without the example database, quiet on stdout. When an invariant
breaks, Hypothesis shrinks the run and replays the shortest one last; the machines
record each step's (label, state) in a `RunRecorder`, so the recorder's last example is
the shrunk counterexample, which is rendered by `etcdspec.model.counterexample`.

`run_exhaustive(options, bounds)` wraps `etcdspec.model.exhaustive.explore_exhaustive`
into the same `ExploreResult`.

Verdicts: FALSE when an invariant was violated; TRUE when a Hypothesis run found
nothing (a bounded search: "nothing found", not a proof) or when the exhaustive search
covered its whole bounded space; UNKNOWN when a budget ran out first or the model
itself crashed (`crashed` is then set: that is a defect of the model, not a finding).
This module measures wall time for reports; the model it drives does no I/O.
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.counterexample import Counterexample, build
from etcdspec.model.invariants import InvariantViolation
from hypothesis import HealthCheck, Phase, Verbosity, currently_in_test_context, event, settings
from hypothesis.errors import HypothesisException
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from etcdspec.verdict import Verdict

MACHINES = ("cluster", "store")
NODE_COUNTS = (3, 5)


@dataclass(frozen=True)
class Progress:
    """A progress report: sent after every example (Hypothesis) or by the explorer."""

    examples: int
    steps: int
    states: int
    seconds: float

    def describe(self) -> str:
        rate = self.steps / self.seconds if self.seconds > 0 else 0.0
        return (
            f"{self.examples} examples, {self.steps} steps ({rate:,.0f} steps/s), "
            f"{self.states} distinct states, {self.seconds:.1f} s"
        )


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class ExploreOptions:
    """What to explore and how long: the machine, its size, the bugs switched on."""

    machine: str = "cluster"  # "cluster" or "store"
    nodes: int = 3
    seed: int = 0
    max_examples: int = 100
    steps: int = 50
    bugs: BugSet = NO_BUGS
    timeouts: str = "free"  # cluster: "free" (timeout(n) is an action) or "ticks"
    persist: str = "sync"  # cluster: "sync" (every step durable) or "explicit" (persist(n))

    def __post_init__(self) -> None:
        if self.machine not in MACHINES:
            raise ValueError(f"machine must be one of {', '.join(MACHINES)}, got {self.machine!r}")
        if self.nodes not in NODE_COUNTS:
            raise ValueError(f"nodes must be 3 or 5, got {self.nodes}")
        if self.timeouts not in ("free", "ticks"):
            raise ValueError(f"timeouts must be 'free' or 'ticks', got {self.timeouts!r}")
        if self.persist not in ("sync", "explicit"):
            raise ValueError(f"persist must be 'sync' or 'explicit', got {self.persist!r}")
        if self.max_examples < 1 or self.steps < 1:
            raise ValueError("max_examples and steps must be at least 1")

    def describe(self) -> str:
        size = (
            f"{self.nodes} nodes, {self.timeouts} timeouts, {self.persist} persist, "
            if self.machine == "cluster"
            else ""
        )
        return f"{self.machine} model, {size}bugs: {self.bugs.describe()}, seed {self.seed}"


@dataclass(frozen=True)
class ExhaustiveBounds:
    """Bounds of the exhaustive search (None: the explorer's own default)."""

    max_term: int | None = 2
    max_log: int | None = 2
    max_messages: int | None = None
    max_states: int | None = None
    max_depth: int | None = None
    time_budget_s: float | None = None

    def describe(self) -> str:
        parts = [
            f"{name}={value}"
            for name, value in (
                ("max_term", self.max_term),
                ("max_log", self.max_log),
                ("max_messages", self.max_messages),
                ("max_states", self.max_states),
                ("max_depth", self.max_depth),
                ("time_budget_s", self.time_budget_s),
            )
            if value is not None
        ]
        return ", ".join(parts) or "unbounded"


@dataclass(frozen=True)
class ExploreResult:
    """The outcome of one exploration run (see the module docstring for verdicts)."""

    verdict: Verdict
    mode: str  # "hypothesis" or "exhaustive"
    options: ExploreOptions
    examples: int
    steps: int
    distinct_states: int
    depth: int
    seconds: float
    witnesses: Mapping[str, int] = field(default_factory=dict)
    counterexample: Counterexample | None = None
    crashed: str = ""  # the model's own exception, when it crashed
    note: str = ""

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.seconds if self.seconds > 0 else 0.0

    def labels(self) -> list[str]:
        """The action labels of the counterexample, in order ([] when there is none)."""
        return [step.label for step in self.counterexample.steps] if self.counterexample else []

    def describe(self) -> str:
        if self.mode == "exhaustive":
            size = f"{self.distinct_states} distinct states, depth {self.depth}"
        else:
            size = f"{self.examples} examples, {self.steps} steps ({self.steps_per_second:,.0f}/s)"
        outcome = {
            Verdict.TRUE: "no violation found",
            Verdict.FALSE: "violation found",
            Verdict.UNKNOWN: "unknown",
        }[self.verdict]
        if self.crashed:
            outcome = "the model crashed"
        note = f"; {self.note}" if self.note else ""
        return (
            f"{self.mode} exploration of the {self.options.describe()}: {outcome} — "
            f"{size}, {self.seconds:.1f} s{note}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "etcdspec.explore/1",
            "valid": self.verdict.to_json(),
            "mode": self.mode,
            "machine": self.options.machine,
            "nodes": self.options.nodes,
            "seed": self.options.seed,
            "bugs": sorted(self.options.bugs.names),
            "examples": self.examples,
            "steps": self.steps,
            "distinct_states": self.distinct_states,
            "depth": self.depth,
            "seconds": round(self.seconds, 3),
            "steps_per_second": round(self.steps_per_second, 1),
            "witnesses": dict(sorted(self.witnesses.items())),
            "counterexample": self.counterexample.to_json() if self.counterexample else None,
            "crashed": self.crashed or None,
            "note": self.note,
        }


class RunRecorder:
    """Shared by every example of one Hypothesis run: counts, witnesses, the last trace.

    A machine calls `begin(initial_state)` when it is created, `step(label, state)` after
    each rule and `finish()` at teardown. States are kept as the model's own persistent
    objects (cheap references) and abstracted only when a counterexample is built.
    """

    def __init__(
        self, abstract: Callable[[Any], Mapping[str, Any]], progress: ProgressCallback | None
    ) -> None:
        self.abstract = abstract
        self.progress = progress
        self.started = time.monotonic()
        self.examples = 0
        self.steps = 0
        self.witnesses: Counter[str] = Counter()
        self.initial: Any = None
        self.trace: list[tuple[str, Any]] = []
        self.violation: InvariantViolation | None = None

    def begin(self, initial: Any) -> None:
        self.initial = initial
        self.trace = []
        self.violation = None

    def step(self, label: str, state: Any) -> None:
        self.steps += 1
        self.trace.append((label, state))

    def witness(self, name: str) -> None:
        """Count a witness over the whole run and show it in Hypothesis' statistics."""
        self.witnesses[name] += 1
        if currently_in_test_context():
            event(name)

    def finish(self) -> None:
        self.examples += 1
        if self.progress is not None:
            self.progress(Progress(self.examples, self.steps, 0, time.monotonic() - self.started))

    def counterexample(
        self, invariant: str, detail: str, context: str, machine: str
    ) -> Counterexample:
        labelled = [(label, self.abstract(state)) for label, state in self.trace]
        return build(machine, invariant, detail, self.abstract(self.initial), labelled, context)


MachineFactory = Callable[[], RuleBasedStateMachine]


def _factory(
    options: ExploreOptions, recorder_progress: ProgressCallback | None
) -> tuple[MachineFactory, RunRecorder]:
    module = importlib.import_module(f"etcdspec.model.hypothesis_{options.machine}")
    recorder = RunRecorder(module.abstract_state, recorder_progress)
    return module.machine_factory(options, recorder), recorder


def hypothesis_settings(options: ExploreOptions) -> settings:
    """The settings of a programmatic run: seeded elsewhere, no database, quiet, no deadline."""
    return settings(
        max_examples=options.max_examples,
        stateful_step_count=options.steps,
        derandomize=False,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        print_blob=False,
        # No `explain` phase: its line tracing makes each replay many times slower.
        phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink),
    )


def run_hypothesis(
    options: ExploreOptions, progress: ProgressCallback | None = None
) -> ExploreResult:
    """One seeded Hypothesis run of a stateful machine; see the module docstring."""
    factory, recorder = _factory(options, progress)
    # The equivalent of @seed(options.seed): Hypothesis reads it from the factory.
    factory._hypothesis_internal_use_seed = options.seed  # type: ignore[attr-defined]
    started = time.monotonic()
    failure: BaseException | None = None
    try:
        run_state_machine_as_test(cast(Any, factory), settings=hypothesis_settings(options))
    except InvariantViolation as violation:
        failure = violation
    except HypothesisException as error:  # flaky, unsatisfiable: the run proves nothing
        return _result(options, recorder, started, Verdict.UNKNOWN, note=f"hypothesis: {error}")
    except Exception as error:  # the model itself raised: a defect, never a finding
        failure = error
    if failure is None:
        return _result(options, recorder, started, Verdict.TRUE)
    if isinstance(failure, InvariantViolation):
        cex = recorder.counterexample(
            failure.invariant, failure.detail, options.describe(), options.machine
        )
        return _result(options, recorder, started, Verdict.FALSE, counterexample=cex)
    crash = "".join(traceback.format_exception_only(type(failure), failure)).strip()
    cex = recorder.counterexample(
        f"model crash ({type(failure).__name__})",
        "".join(traceback.format_exception(failure)[-6:]),
        options.describe(),
        options.machine,
    )
    return _result(options, recorder, started, Verdict.UNKNOWN, counterexample=cex, crashed=crash)


def _result(
    options: ExploreOptions,
    recorder: RunRecorder,
    started: float,
    verdict: Verdict,
    counterexample: Counterexample | None = None,
    crashed: str = "",
    note: str = "",
) -> ExploreResult:
    return ExploreResult(
        verdict=verdict,
        mode="hypothesis",
        options=options,
        examples=recorder.examples,
        steps=recorder.steps,
        distinct_states=0,
        depth=0,
        seconds=time.monotonic() - started,
        witnesses=dict(recorder.witnesses),
        counterexample=counterexample,
        crashed=crashed,
        note=note,
    )


def run_exhaustive(
    options: ExploreOptions,
    bounds: ExhaustiveBounds,
    progress: ProgressCallback | None = None,
) -> ExploreResult:
    """Breadth-first search of the bounded cluster space (etcdspec.model.exhaustive)."""
    from etcdspec.model.cluster import Cluster, ClusterConfig
    from etcdspec.model.exhaustive import ExploreProgress, explore_exhaustive

    config = ClusterConfig(
        nodes=options.nodes,
        seed=options.seed,
        bugs=options.bugs,
        timeouts="free",
        max_term=bounds.max_term,
        max_log=bounds.max_log,
        max_messages=bounds.max_messages,
    )

    def report(step: ExploreProgress) -> None:
        if progress is not None:
            progress(Progress(0, 0, step.distinct_states, step.seconds))

    found = explore_exhaustive(
        config,
        max_depth=bounds.max_depth,
        max_states=bounds.max_states,
        time_budget_s=bounds.time_budget_s,
        progress=report,
    )
    counterexample = None
    if found.violation is not None and found.counterexample is not None:
        counterexample = build(
            "cluster",
            found.violation.invariant,
            found.violation.detail,
            Cluster.start(config).abstract(),
            [(action.describe(), state.abstract()) for action, state in found.counterexample],
            context=f"{options.describe()}; bounds {bounds.describe()}",
        )
    return ExploreResult(
        verdict=found.verdict,
        mode="exhaustive",
        options=options,
        examples=0,
        steps=0,
        distinct_states=found.distinct_states,
        depth=found.depth_reached,
        seconds=found.seconds,
        counterexample=counterexample,
        note=f"{found.reason}; bounds {bounds.describe()}",
    )

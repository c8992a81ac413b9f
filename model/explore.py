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
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from hypothesis import HealthCheck, Phase, Verbosity, currently_in_test_context, event, settings
from hypothesis.errors import HypothesisException
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from etcdspec.model.bugs import NO_BUGS, RESPONSE_MUTATIONS, BugSet
from etcdspec.model.counterexample import Counterexample, build
from etcdspec.model.hypothesis_replay import replayable_draws
from etcdspec.model.invariants import InvariantViolation
from etcdspec.verdict import Verdict

if TYPE_CHECKING:
    from etcdspec.workers import WorkerPool

MACHINES = ("cluster", "store")
NODE_COUNTS = (3, 5)


@dataclass(frozen=True)
class Progress:
    """A progress report: sent after every example (Hypothesis) or by the explorer."""

    examples: int
    steps: int
    states: int
    seconds: float
    detail: str = ""  # a distributed search's own line: depth, rate, each worker's figures

    def describe(self) -> str:
        if self.detail:
            return self.detail
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
    noop_on_leader: bool = True  # cluster: a new leader appends an empty entry of its term
    prevote: bool = True  # cluster: PreVote (etcd --pre-vote)
    check_quorum: bool = True  # cluster: CheckQuorum (leaders step down without a quorum)
    # "hypothesis": Hypothesis shrinks the failing run (the store's default); "actions":
    # Hypothesis only finds it, then its model steps are shrunk by deterministic replay
    # (the cluster's default: far faster for long runs); "none": report it as found.
    shrinker: str = "auto"
    rules: frozenset[str] | None = None  # only these rules of the machine (None: all)
    # cluster: every step, abstracted, must also satisfy its spec/raft_steps.spec action
    # (etcdspec.model.refinement); a failure is the invariant "Refinement"
    refine: bool = False
    # cluster: configuration changes (add, remove, learner, promote) at leaders; the
    # last node starts outside the configuration (ClusterConfig.membership)
    membership: bool = False
    # cluster: etcd raft's heartbeats (min(match, commit), no log check at the follower)
    # and at most this many entries per AppendEntries (0: all); ClusterConfig's fields
    etcd_heartbeats: bool = False
    max_append_entries: int = 0

    def __post_init__(self) -> None:
        if self.machine not in MACHINES:
            raise ValueError(f"machine must be one of {', '.join(MACHINES)}, got {self.machine!r}")
        if self.nodes not in NODE_COUNTS:
            raise ValueError(f"nodes must be 3 or 5, got {self.nodes}")
        if self.timeouts not in ("free", "ticks"):
            raise ValueError(f"timeouts must be 'free' or 'ticks', got {self.timeouts!r}")
        if self.shrinker not in ("auto", "hypothesis", "actions", "none"):
            raise ValueError(
                f"shrinker must be auto, hypothesis, actions or none: {self.shrinker!r}"
            )
        if self.persist not in ("sync", "explicit"):
            raise ValueError(f"persist must be 'sync' or 'explicit', got {self.persist!r}")
        if self.max_examples < 1 or self.steps < 1:
            raise ValueError("max_examples and steps must be at least 1")
        if self.membership and self.machine != "cluster":
            raise ValueError("membership changes the cluster: use machine 'cluster'")
        if self.refine and self.machine != "cluster":
            raise ValueError("refinement checks the cluster machine's steps: use machine 'cluster'")

    def resolved_shrinker(self) -> str:
        if self.shrinker != "auto":
            return self.shrinker
        return "actions" if self.machine == "cluster" else "hypothesis"

    def describe(self) -> str:
        size = (
            f"{self.nodes} nodes, {self.timeouts} timeouts, {self.persist} persist, "
            if self.machine == "cluster"
            else ""
        )
        refine = ", refinement checked" if self.refine else ""
        members = ", membership changes" if self.membership else ""
        return (
            f"{self.machine} model, {size}bugs: {self.bugs.describe()}, seed {self.seed}"
            f"{members}{refine}"
        )


@dataclass(frozen=True)
class ExhaustiveBounds:
    """Bounds of the exhaustive search (None: the explorer's own default)."""

    max_term: int | None = 2
    max_log: int | None = 2
    max_messages: int | None = None
    max_states: int | None = None
    max_depth: int | None = None
    time_budget_s: float | None = None
    # ClusterConfig settings over exhaustive.small_config's, e.g. (("max_crashes", 1),)
    settings: tuple[tuple[str, Any], ...] = ()

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
        parts += [f"{name}={value}" for name, value in self.settings]
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
    rule_steps: int = 0  # Hypothesis rules run (steps counts model steps)
    witnesses: Mapping[str, int] = field(default_factory=dict)
    counterexample: Counterexample | None = None
    crashed: str = ""  # the model's own exception, when it crashed
    note: str = ""
    actions_fired: Mapping[str, int] = field(default_factory=dict)  # model steps by kind

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
            size = f"{self.examples_text()}, {self.steps} steps ({self.steps_per_second:,.0f}/s)"
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

    def examples_text(self) -> str:
        """The examples run, against the number asked (--max-examples, per seed)."""
        asked = self.options.max_examples
        if self.examples <= asked:
            return f"{self.examples} examples (of at most {asked})"
        return (
            f"{self.examples} examples ({asked} asked; Hypothesis also ran "
            f"{self.examples - asked} it did not count, e.g. discarded or overrun draws)"
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
            "rule_steps": self.rule_steps,
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
    objects (cheap references) and abstracted only when a counterexample is built; a
    step may pass label None with its action, whose `describe()` is then the label,
    built only when a counterexample is.
    """

    def __init__(
        self, abstract: Callable[[Any], Mapping[str, Any]], progress: ProgressCallback | None
    ) -> None:
        self.abstract = abstract
        self.progress = progress
        self.started = time.monotonic()
        self.examples = 0
        self.found_at: int | None = None  # the example that first broke an invariant
        self.steps = 0
        self.witnesses: Counter[str] = Counter()
        self.initial: Any = None
        self.trace: list[tuple[str | None, Any]] = []  # None: the action's describe()
        self.actions: list[Any] = []  # the model's replayable step per trace entry (or None)
        self.rule_steps = 0
        self.kinds: Counter[str] = Counter()  # model steps by action kind (coverage)

    def begin(self, initial: Any) -> None:
        self.initial = initial
        self.trace = []
        self.actions = []

    def step(self, label: str | None, state: Any, action: Any = None) -> None:
        self.steps += 1
        kind = getattr(action, "kind", None)
        if not isinstance(kind, str):  # a labelled step: its name, before its arguments
            kind = (label or "?").split("(")[0].split(" ")[0]
        self.kinds[kind] += 1
        self.trace.append((label, state))
        self.actions.append(action)

    def labels(self) -> list[str]:
        """The label of every step of the last example (built now for lazy ones)."""
        return [
            label if label is not None else action.describe()
            for (label, _), action in zip(self.trace, self.actions, strict=True)
        ]

    def rule_step(self) -> None:
        """One Hypothesis rule ran (a rule may take several model steps, or none)."""
        self.rule_steps += 1

    def witness(self, name: str) -> None:
        """Count a witness over the whole run and show it in Hypothesis' statistics."""
        self.witnesses[name] += 1
        if currently_in_test_context():
            event(name)

    def finish(self) -> None:
        self.examples += 1
        # Called from the machine's teardown; a failing example tears down while its
        # violation propagates. The examples after the first failing one are
        # Hypothesis shrinking it, not exploration: they are not counted as examples.
        if self.found_at is None and isinstance(sys.exc_info()[1], InvariantViolation):
            self.found_at = self.examples
        if self.progress is not None:
            self.progress(Progress(self.examples, self.steps, 0, time.monotonic() - self.started))

    def counterexample(
        self,
        invariant: str,
        detail: str,
        context: str,
        machine: str,
        config: Mapping[str, Any] | None = None,
    ) -> Counterexample:
        labels = self.labels()
        labelled = [
            (label, self.abstract(state))
            for label, (_, state) in zip(labels, self.trace, strict=True)
        ]
        initial = self.abstract(self.initial)
        return build(machine, invariant, detail, initial, labelled, context, config)


MachineFactory = Callable[[], RuleBasedStateMachine]


def _factory(
    options: ExploreOptions, recorder_progress: ProgressCallback | None
) -> tuple[MachineFactory, RunRecorder]:
    module = importlib.import_module(f"etcdspec.model.hypothesis_{options.machine}")
    recorder = RunRecorder(module.abstract_state, recorder_progress)
    if options.refine:
        # Imported here: the refinement check loads the spec (model/ imports spec/ only
        # for refinement, and only when asked).
        from etcdspec.model.refinement import refinement_machine_factory
        from etcdspec.model.refinement_check import RefinementStats

        return refinement_machine_factory(options, recorder, RefinementStats()), recorder
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
        phases=(Phase.explicit, Phase.generate, Phase.target)
        + ((Phase.shrink,) if options.resolved_shrinker() == "hypothesis" else ()),
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
        with replayable_draws():
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
        invariant, detail = failure.invariant, failure.detail
        note = ""
        if options.resolved_shrinker() == "actions":
            module = importlib.import_module(f"etcdspec.model.hypothesis_{options.machine}")
            shrunk = module.shrink_run(options, recorder.actions, invariant)
            if shrunk is not None:
                recorder.trace, (invariant, detail) = list(shrunk.trace), shrunk.violation
                recorder.actions = [None] * len(shrunk.trace)
                note = f"shrunk by replay from {shrunk.original} to {len(shrunk.trace)} steps"
        cex = recorder.counterexample(
            invariant, detail, options.describe(), options.machine, _config_json(options)
        )
        return _result(options, recorder, started, Verdict.FALSE, counterexample=cex, note=note)
    crash = "".join(traceback.format_exception_only(type(failure), failure)).strip()
    if recorder.initial is None:  # it crashed before any machine started
        return _result(options, recorder, started, Verdict.UNKNOWN, crashed=crash)
    cex = recorder.counterexample(
        f"model crash ({type(failure).__name__})",
        "".join(traceback.format_exception(failure)[-6:]),
        options.describe(),
        options.machine,
    )
    return _result(options, recorder, started, Verdict.UNKNOWN, counterexample=cex, crashed=crash)


def _config_json(options: ExploreOptions) -> dict[str, Any] | None:
    """The cluster machine's config as JSON (for the ITF), None for the store machine."""
    if options.machine != "cluster":
        return None
    from etcdspec.model.cluster_config import config_to_json
    from etcdspec.model.hypothesis_cluster import cluster_config

    return config_to_json(cluster_config(options))


def _result(
    options: ExploreOptions,
    recorder: RunRecorder,
    started: float,
    verdict: Verdict,
    counterexample: Counterexample | None = None,
    crashed: str = "",
    note: str = "",
) -> ExploreResult:
    shrink_runs = recorder.examples - recorder.found_at if recorder.found_at is not None else 0
    if shrink_runs:
        note = (note + "; " if note else "") + f"{shrink_runs} more runs while shrinking"
    return ExploreResult(
        verdict=verdict,
        mode="hypothesis",
        options=options,
        examples=recorder.found_at if recorder.found_at is not None else recorder.examples,
        steps=recorder.steps,
        distinct_states=0,
        depth=0,
        seconds=time.monotonic() - started,
        rule_steps=recorder.rule_steps,
        witnesses=dict(recorder.witnesses),
        counterexample=counterexample,
        crashed=crashed,
        note=note,
        actions_fired=dict(recorder.kinds),
    )


def run_exhaustive(
    options: ExploreOptions,
    bounds: ExhaustiveBounds,
    progress: ProgressCallback | None = None,
    pool: WorkerPool | None = None,
) -> ExploreResult:
    """Breadth-first search of the bounded cluster space (etcdspec.model.exhaustive), or
    over `pool`'s workers (etcdspec.model.distributed_explore: the same answers)."""
    from etcdspec.model.cluster import Cluster
    from etcdspec.model.cluster_config import config_to_json
    from etcdspec.model.exhaustive import (
        ExploreProgress,
        explore_exhaustive,
        finite_config,
        small_config,
    )
    from etcdspec.model.hypothesis_cluster import abstract_state

    sized: dict[str, Any] = {"max_term": bounds.max_term, "max_log": bounds.max_log}
    if bounds.max_messages is not None:
        sized["max_messages"] = bounds.max_messages
    sized.update(dict(bounds.settings))
    if options.membership:
        sized["membership"] = True
    config = finite_config(
        small_config(nodes=options.nodes, bugs=options.bugs, seed=options.seed, **sized)
    )

    def report(step: ExploreProgress) -> None:
        if progress is not None:
            progress(Progress(0, 0, step.distinct_states, step.seconds))

    if pool is None:
        found = explore_exhaustive(
            config,
            max_depth=bounds.max_depth,
            max_states=bounds.max_states,
            time_budget_s=bounds.time_budget_s,
            progress=report,
        )
    else:
        from etcdspec.model.distributed_explore import DistributedProgress, explore_distributed

        def report_shards(step: DistributedProgress) -> None:
            if progress is not None:
                progress(Progress(0, 0, step.distinct_states, step.seconds, step.describe()))

        found = explore_distributed(
            config,
            pool,
            max_depth=bounds.max_depth,
            max_states=bounds.max_states,
            time_budget_s=bounds.time_budget_s,
            progress=report_shards,
        )
    counterexample = None
    if found.violation is not None and found.counterexample is not None:
        counterexample = build(
            "cluster",
            found.violation.invariant,
            found.violation.detail,
            abstract_state(Cluster.start(config)),
            [(action.describe(), abstract_state(state)) for action, state in found.counterexample],
            context=f"{options.describe()}; bounds {bounds.describe()}",
            config=config_to_json(config),
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


# ---------------------------------------------------------------------------- bug finders


@dataclass(frozen=True)
class Finder:
    """How exploration finds one catalogued bug reliably and fast: a Hypothesis run
    (tried with up to `attempts` consecutive seeds, each a fresh seeded run) or an
    exhaustive search with the given bounds."""

    mode: str  # "hypothesis" or "exhaustive"
    options: ExploreOptions = ExploreOptions()
    bounds: ExhaustiveBounds = ExhaustiveBounds()
    attempts: int = 1

    def describe(self, bug: str = "") -> str:
        """The finder's search; with `bug`, its options as they run (that bug switched on)."""
        if self.mode == "exhaustive":
            return f"exhaustive search, {self.bounds.describe()}"
        options = replace(self.options, bugs=BugSet.of(bug)) if bug else self.options
        rules = options.rules
        only = f", rules {', '.join(sorted(rules))}" if rules is not None else ""
        return (
            f"hypothesis, {options.describe()}{only}, {options.max_examples} examples "
            f"of {options.steps} steps per seed, up to {self.attempts} seeds"
        )


def find_bug(
    name: str,
    seed: int = 0,
    progress: ProgressCallback | None = None,
    max_examples: int | None = None,
    steps: int | None = None,
) -> ExploreResult:
    """Explore the model with bug `name` on, as FINDERS says; the first result with a
    counterexample, or the last one (nothing found) when every attempt came up empty.
    `max_examples` and `steps`, when given, replace the finder's own (per seed)."""
    finder = with_budget(FINDERS[name], max_examples, steps)
    bugs = BugSet.of(name)
    if finder.mode == "exhaustive":
        return run_exhaustive(
            replace(finder.options, bugs=bugs, seed=seed), finder.bounds, progress
        )
    started = time.monotonic()
    result: ExploreResult | None = None
    examples = steps = 0
    for attempt in range(finder.attempts):
        options = replace(finder.options, bugs=bugs, seed=seed + attempt)
        result = run_hypothesis(options, progress)
        examples += result.examples
        steps += result.steps
        if result.verdict is not Verdict.TRUE:
            break
    assert result is not None
    return replace(
        result,
        examples=examples,
        steps=steps,
        seconds=time.monotonic() - started,
        note=(result.note + "; " if result.note else "") + f"{attempt + 1} seed(s) tried",
    )


def with_budget(finder: Finder, max_examples: int | None, steps: int | None) -> Finder:
    """The finder with the examples per seed and steps per example asked instead of its own."""
    options = finder.options
    if max_examples is not None:
        options = replace(options, max_examples=max_examples)
    if steps is not None:
        options = replace(options, steps=steps)
    return replace(finder, options=options)


# The rules a split-brain schedule needs: the leader cut off with a write of its own
# while the others elect a leader (split_brain), writes at either leader, heal, and
# delivery until quiet. Without a no-op entry at election, a new leader's log holds
# only client writes, so old-term entries are what it replicates (Figure 8).
SPLIT_BRAIN_RULES = frozenset(("split_brain", "propose", "heal", "stabilize"))
SPLIT_BRAIN = ExploreOptions(
    max_examples=100, steps=12, noop_on_leader=False, rules=SPLIT_BRAIN_RULES
)

# Without the elect rule the first violation is mostly the lost committed entry
# (LeaderCompleteness) rather than two leaders of one term (ElectionSafety): seeds 0-7
# of reconfig_before_term_commit all end in LeaderCompleteness, in 1-25 s at load 9-13.
RECONFIGURE_RULES = frozenset(
    ("split_reconfigure", "reconfigure", "propose", "heal", "stabilize", "disrupt")
)
RECONFIGURE = ExploreOptions(
    nodes=5,
    membership=True,
    max_examples=100,
    steps=12,
    prevote=False,
    check_quorum=False,
    noop_on_leader=False,
    rules=RECONFIGURE_RULES,
)

FINDERS: dict[str, Finder] = {
    "txn_revision_per_op": Finder(
        "hypothesis", ExploreOptions(machine="store", max_examples=200, steps=30), attempts=3
    ),
    # Only what the bug needs: writes, compactions and watches opened below them.
    "watch_drops_event_at_compaction": Finder(
        "hypothesis",
        ExploreOptions(
            machine="store",
            max_examples=300,
            steps=30,
            rules=frozenset(("put", "compact", "watch")),
        ),
        attempts=3,
    ),
    "no_truncate_conflict": Finder("hypothesis", SPLIT_BRAIN, attempts=5),
    "accept_stale_term_append": Finder("hypothesis", SPLIT_BRAIN, attempts=5),
    "commit_without_quorum": Finder("exhaustive", bounds=ExhaustiveBounds(max_term=2, max_log=1)),
    # etcd raft's heartbeats: a stale entry on a cut-off old leader, committed by the
    # heartbeat of the next term's leader that commits its own entry at that index.
    "heartbeat_full_commit": Finder(
        "exhaustive",
        bounds=ExhaustiveBounds(max_term=2, max_log=1, settings=(("etcd_heartbeats", True),)),
    ),
    "vote_not_persisted": Finder(
        "exhaustive", bounds=ExhaustiveBounds(max_term=1, max_log=0, settings=(("max_crashes", 1),))
    ),
    "figure8_commit": Finder("hypothesis", SPLIT_BRAIN, attempts=5),
    "ack_before_persist": Finder(
        "hypothesis",
        ExploreOptions(
            max_examples=40,
            steps=8,
            persist="explicit",
            prevote=False,
            check_quorum=False,
            rules=frozenset(("propose", "persist", "deliver_next", "deliver_newest")),
        ),
        attempts=10,
    ),
    # Configuration changes on both sides of a shifting partition (split_reconfigure),
    # 5 nodes with 4 voters, no no-op at election (so that a new leader's first entry
    # can be its configuration change): two configurations with disjoint majorities.
    "reconfig_before_term_commit": Finder("hypothesis", RECONFIGURE, attempts=10),
    "two_pending_changes": Finder(
        "hypothesis", replace(RECONFIGURE, rules=RECONFIGURE_RULES | {"elect"}), attempts=12
    ),
    # A leader cut off (split_brain) while its leases run out tick by tick.
    "lease_revoke_by_stale_leader": Finder(
        "hypothesis",
        ExploreOptions(
            max_examples=50,
            steps=30,
            timeouts="ticks",
            prevote=False,
            check_quorum=False,
            rules=frozenset(("split_brain", "lease_grant", "tick", "stabilize", "heal")),
        ),
        attempts=6,
    ),
    # A leader's lease clock runs out tick by tick (expire_lease: it proposes the
    # expiry), and a keep-alive arrives before the revoke commits.
    "keepalive_after_expiry": Finder(
        "hypothesis",
        ExploreOptions(
            max_examples=30,
            steps=10,
            timeouts="ticks",
            prevote=False,
            check_quorum=False,
            rules=frozenset(
                ("elect", "lease_grant", "expire_lease", "stabilize", "keepalive_held")
            ),
        ),
        attempts=6,
    ),
}
"""One finder per catalogued bug (a test fails for any bug without one)."""

# The response mutations (model/bugs.py RESPONSE_MUTATIONS): the store machine, whose
# postconditions catch them (so that `explore --bug NAME` runs them like any bug).
FINDERS.update(
    {
        bug.name: Finder(
            "hypothesis", ExploreOptions(machine="store", max_examples=100, steps=30), attempts=3
        )
        for bug in RESPONSE_MUTATIONS
    }
)

"""Refinement runs: Hypothesis explorations of the cluster model with every step checked
against spec/raft_steps.spec.

Contract
- `RefinementMachine` is the Hypothesis cluster machine with `check_step`
  (model/refinement_check.py) after every model step: it overrides
  `ClusterMachine._do`, the one place every step goes through. A step that does not
  refine the spec raises RefinementViolation, which Hypothesis shrinks as any
  invariant violation.
- `refinement_machine_factory(options, recorder, stats)` gives such machines for one
  seeded run (what `etcdspec explore --refine` runs).
- `run_exploration(options, checked)` runs it (or the plain machine on the same seed
  and settings, when `checked` is off) once, seeded, and gives a `RefinementRun`: the
  model steps, wall time, spec actions checked and the first violation.
- The clock is read only to time `run_exploration`; the spec is parsed and the memo of
  checked plans emptied before the clock starts. No I/O besides reading the spec.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from etcdspec.model.actions import Action
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.explore import ExploreOptions, RunRecorder, hypothesis_settings
from etcdspec.model.hypothesis_cluster import (
    ClusterMachine,
    MembershipMachine,
    MembershipRules,
    abstract_state,
    cluster_config,
    focused,
)
from etcdspec.model.hypothesis_replay import replayable_draws
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.refinement_abstraction import raft_steps_spec
from etcdspec.model.refinement_check import RefinementStats, check_step, forget_checked_plans


class RefinementMachine(ClusterMachine):
    """The cluster machine with every model step checked against raft_steps.spec."""

    def __init__(
        self,
        config: ClusterConfig | None = None,
        recorder: RunRecorder | None = None,
        stats: RefinementStats | None = None,
    ) -> None:
        self.refinement_stats = stats if stats is not None else RefinementStats()
        super().__init__(config, recorder)

    def _do(self, action: Action) -> None:
        before = self.cluster
        super()._do(action)
        check_step(before, action, self.cluster, self.refinement_stats)


class MembershipRefinementMachine(MembershipRules, RefinementMachine):
    """The refinement-checked machine with configuration changes (membership runs)."""


def _machine(config: ClusterConfig, checked: bool) -> type[ClusterMachine]:
    if config.membership:
        return MembershipRefinementMachine if checked else MembershipMachine
    return RefinementMachine if checked else ClusterMachine


def refinement_machine_factory(
    options: ExploreOptions, recorder: RunRecorder, stats: RefinementStats
) -> Any:
    """A factory of refinement-checked machines for one seeded run (as the cluster's
    `machine_factory`, plus the stats every machine of the run adds to)."""
    config = cluster_config(options)
    machine: type[RuleBasedStateMachine] = focused(_machine(config, True), options.rules)

    def factory() -> RuleBasedStateMachine:
        return machine(config, recorder, stats)  # type: ignore[call-arg]

    return factory


@dataclass(frozen=True)
class RefinementRun:
    """One seeded exploration: model steps taken, wall time, what was checked, and the
    first violation (None: every step refined the spec, or `checked` was off)."""

    checked: bool
    steps: int
    seconds: float
    stats: RefinementStats
    violation: InvariantViolation | None

    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def describe(self) -> str:
        mode = "with refinement" if self.checked else "without refinement"
        outcome = "holds" if self.violation is None else self.violation.describe()
        return (
            f"{mode}: {self.steps} steps in {self.seconds:.2f} s "
            f"({self.steps_per_second():.0f} steps/s); {outcome}"
        )


def run_exploration(options: ExploreOptions, checked: bool = True) -> RefinementRun:
    """One seeded Hypothesis run of the cluster machine, with refinement checks on every
    step when `checked` (else the plain ClusterMachine on the same seed and settings)."""
    recorder = RunRecorder(abstract_state, None)
    stats = RefinementStats()
    config = cluster_config(options)
    machine: type[Any] = focused(_machine(config, checked), options.rules)

    def factory() -> RuleBasedStateMachine:
        if checked:
            return cast(RuleBasedStateMachine, machine(config, recorder, stats))
        return cast(RuleBasedStateMachine, machine(config, recorder))

    factory._hypothesis_internal_use_seed = options.seed  # type: ignore[attr-defined]
    if checked:
        raft_steps_spec()  # parse the spec before the clock starts: a one-time cost
        forget_checked_plans()  # a run pays for its own checks
    started = time.monotonic()
    violation: InvariantViolation | None = None
    try:
        with replayable_draws():
            run_state_machine_as_test(cast(Any, factory), settings=hypothesis_settings(options))
    except InvariantViolation as found:
        violation = found
    return RefinementRun(checked, recorder.steps, time.monotonic() - started, stats, violation)

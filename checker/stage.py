"""The checker's `etcdspec verify` stage: the checker judges histories of known verdict.

`run_stage(options)` generates seeded histories from the pure store model
(etcdspec.checker.simulate): clean ones must hold, and each injected fault — KV
anomalies (ETCD_FAULTS, REGISTER_FAULTS) and broken watch guarantees (WATCH_FAULTS) —
must be caught as a violation of the right check. The stage holds only if every
expectation is met; a history left undecided within its budget makes it unknown.
Details list every case with its verdict. `quick` uses fewer and shorter histories.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from etcdspec.checker.check import CheckOptions, check_history
from etcdspec.checker.history import HistoryEvent, build_history
from etcdspec.checker.simulate import (
    ETCD_FAULTS,
    REGISTER_FAULTS,
    WATCH_FAULTS,
    simulate_etcd,
    simulate_kv,
    simulate_register,
)
from etcdspec.stage import StageOptions, StageResult
from etcdspec.verdict import Verdict

NAME = "checker"
Maker = Callable[[], list[HistoryEvent]]


def _cases(seed: int, quick: bool) -> list[tuple[str, str, Maker, str | None]]:
    """(label, model, history maker, the check that must fail or None for a clean one)."""
    ops = 150 if quick else 600
    cases: list[tuple[str, str, Maker, str | None]] = [
        ("etcd clean", "etcd", partial(simulate_etcd, seed, ops=ops, watch=True), None),
        ("register clean", "register", partial(simulate_register, seed, ops=100), None),
        ("kv clean", "kv", partial(simulate_kv, seed, ops=ops), None),
    ]
    for fault in ETCD_FAULTS:
        make = partial(simulate_etcd, seed, ops=ops, fault=fault)
        cases.append((f"etcd {fault}", "etcd", make, "Linearizable"))
    for fault in REGISTER_FAULTS:
        make = partial(simulate_register, seed, ops=200, processes=1, info_rate=0, fault=fault)
        cases.append((f"register {fault}", "register", make, "Linearizable"))
    for fault, guarantee in WATCH_FAULTS.items():
        make = partial(simulate_etcd, seed, ops=ops, watch_fault=fault)
        cases.append((f"watch {fault}", "etcd", make, guarantee))
    return cases


def run_stage(options: StageOptions) -> StageResult:
    start = time.monotonic()
    outcomes: list[Verdict] = []
    details: dict[str, str] = {}
    for label, model, make, must_fail in _cases(options.seed, options.quick):
        try:
            events = make()
        except ValueError as error:  # this seed never reached the fault: undecided
            outcomes.append(Verdict.UNKNOWN)
            details[label] = f"no history: {error}"
            continue
        report = check_history(
            build_history(events, label), CheckOptions(model=model, timeout_s=60)
        )
        verdicts = {r.name: r.verdict for r in report.results}
        if must_fail is None:
            outcome = report.verdict
            details[label] = f"expected to hold: {report.verdict.describe()}"
        else:
            found = verdicts.get(must_fail, Verdict.UNKNOWN)
            outcome = {Verdict.FALSE: Verdict.TRUE, Verdict.TRUE: Verdict.FALSE}.get(
                found, Verdict.UNKNOWN
            )
            details[label] = f"expected {must_fail} violated: {found.describe()}"
        outcomes.append(outcome)
    verdict = Verdict.merge_all(outcomes)
    met = sum(1 for o in outcomes if o is Verdict.TRUE)
    return StageResult(
        name=NAME,
        verdict=verdict,
        summary=f"{met}/{len(outcomes)} histories of known verdict judged right",
        seconds=time.monotonic() - start,
        details=details,
    )

"""The parallel proof: the same obligations, order and verdicts as the serial path; a
worker that dies or hangs makes its obligations UNKNOWN (never proved) and is cleaned up;
small proofs stay in one process."""

from __future__ import annotations

import multiprocessing

import pytest
from spec_toy import NOOP_ACTION, toy_spec

from etcdspec.spec.loader import LoadedSpec, load_spec, load_text
from etcdspec.spec.parallel import (
    WorkerFault,
    auto_jobs,
    dealing_order,
    default_jobs,
    obligations,
    prove_parallel,
)
from etcdspec.spec.proof_report import CheckKind, CheckResult, ProofReport
from etcdspec.spec.prove import prove
from etcdspec.verdict import Verdict

TOY = toy_spec(NOOP_ACTION)


def toy(mutation: str | None = None) -> LoadedSpec:
    return load_text(TOY, "toy.spec", mutation)


def outcome(report: ProofReport) -> list[tuple[str, Verdict]]:
    return [(r.label(), r.verdict) for r in report.results]


def no_workers_left() -> bool:
    return not multiprocessing.active_children()


@pytest.mark.parametrize("mutation", [None, "unchecked"])
def test_parallel_proof_matches_serial(mutation: str | None) -> None:
    serial = prove(toy(mutation), jobs=1)
    seen: list[CheckResult] = []
    parallel = prove_parallel(toy(mutation), 2, on_result=seen.append)
    assert outcome(parallel) == outcome(serial)
    assert [r.label() for r in seen] == [r.label() for r in serial.results]
    assert parallel.verdict is serial.verdict
    failed = [r for r in parallel.results if r.verdict is Verdict.FALSE]
    assert all(r.counterexample is not None for r in failed if r.kind is CheckKind.PRESERVE)
    assert no_workers_left()


def test_obligations_are_the_serial_ones_in_order() -> None:
    serial = prove(toy(), jobs=1)
    found = obligations(toy())
    assert [o.kind for o in found] == [r.kind for r in serial.results]
    assert [o.index for o in found] == list(range(len(found)))
    settled = [o for o in found if o.kind is CheckKind.PRESERVE and o.cost == 0]
    # noop assigns nothing (frame rule); restart only shrinks `leader`, which both
    # properties mention only negatively (monotone rule): no Z3 query for either
    assert {o.action for o in settled} == {"noop", "restart"}
    assert dealing_order(found)[-1].cost == 0


@pytest.mark.parametrize(
    ("fault", "stall_seconds", "why"),
    [
        (WorkerFault.EXIT, None, "worker process died"),
        (WorkerFault.HANG, 1.0, "worker stopped answering"),
    ],
)
def test_failed_worker_gives_unknown_never_proved(
    fault: WorkerFault, stall_seconds: float | None, why: str
) -> None:
    loaded = toy()
    reserved = dealing_order(obligations(loaded))[0]
    report = prove_parallel(loaded, 2, fault=fault, reserve=1, stall_seconds=stall_seconds)
    lost = report.results[reserved.index]
    assert lost.verdict is Verdict.UNKNOWN
    assert why in lost.note
    assert report.verdict is Verdict.UNKNOWN
    others = [r for i, r in enumerate(report.results) if i != reserved.index]
    assert all(r.verdict is Verdict.TRUE for r in others)
    assert no_workers_left()


@pytest.mark.parametrize(("name", "parallel"), [("mvcc", False), ("lease", False), ("raft", True)])
def test_only_large_proofs_use_workers_by_default(name: str, parallel: bool) -> None:
    assert auto_jobs(load_spec(name)) == (default_jobs() if parallel else 1)


def test_fail_fast_stays_serial() -> None:
    report = prove(toy("unchecked"), fail_fast=True, jobs=2)
    assert "jobs" not in report.extra
    assert report.results[-1].verdict is Verdict.FALSE

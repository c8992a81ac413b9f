"""Proof obligations and seeded-bug checks answered on a worker pool (in this process, and
on a local Dask cluster of 2 workers) give the serial proof's results: the same
obligations in the same order with the same verdicts, the same bugs caught."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from etcdspec.spec.distributed_prove import catch_distributed, prove_distributed
from etcdspec.spec.loader import load_spec
from etcdspec.spec.mutations import SEEDED_BUGS, catch, caught
from etcdspec.spec.proof_report import ProofReport
from etcdspec.spec.prove import prove
from etcdspec.verdict import Verdict
from etcdspec.workers import DaskPool, InlinePool, WorkerPool

pytest.importorskip("distributed", reason="Dask distributed is a dependency: pip install -e .")

TIMEOUT_MS = 30_000


def _summary(report: ProofReport) -> list[tuple[str, str, str | None, Verdict]]:
    return [(r.kind.value, r.subject, r.action, r.verdict) for r in report.results]


@pytest.fixture(scope="module", params=["inline", "dask"])
def pool(request: pytest.FixtureRequest) -> Iterator[WorkerPool]:
    made: WorkerPool = InlinePool(2) if request.param == "inline" else DaskPool.local(2)
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("spec", ["lease", "mvcc"])
def test_a_distributed_proof_gives_the_serial_results(pool: WorkerPool, spec: str) -> None:
    serial = prove(load_spec(spec), TIMEOUT_MS, jobs=1)
    distributed = prove_distributed(load_spec(spec), pool, TIMEOUT_MS)
    assert serial.verdict is Verdict.TRUE
    assert _summary(distributed) == _summary(serial)
    assert distributed.extra["pool"] == pool.describe()


def test_a_mutated_spec_fails_on_the_pool_as_it_does_serially(pool: WorkerPool) -> None:
    bug = next(b for b in SEEDED_BUGS if b.spec == "mvcc")
    loaded = load_spec(bug.spec, bug.mutation)
    serial = prove(loaded, TIMEOUT_MS, only=[bug.prop], actions=[bug.action], jobs=1)
    distributed = prove_distributed(loaded, pool, TIMEOUT_MS, only=[bug.prop], actions=[bug.action])
    assert serial.verdict is Verdict.FALSE
    assert _summary(distributed) == _summary(serial)
    assert distributed.first_counterexample() is not None


def test_seeded_bugs_are_caught_on_the_pool(pool: WorkerPool) -> None:
    bugs = [b for b in SEEDED_BUGS if b.spec != "raft"]
    reports = catch_distributed(bugs, pool)
    assert [caught(r) for r in reports] == [caught(catch(b)) for b in bugs] == [True] * len(bugs)

"""Independent runs made side by side, once per module: conformance runs mostly wait on
their clusters for a fixed duration (a third of one core each), so a test file's runs
against different targets, or with a failpoint on and off, overlap instead of queueing.

`run_side_by_side({key: job})` runs each job (a function of no argument) in a thread of
its own, at most `workers` at a time, and returns an `Outcome` per key: what the job
returned, or the exception it raised, which `Outcome.value()` raises again in the test
that reads it, so that a failing run fails its own test only. Jobs must share nothing:
each its own cluster, ports and report folder (run_conform runs its own event loop).

Ports: each run plans its cluster with `launcher.free_ports`, which plans below the
kernel's ephemeral range and never hands out a port twice in this process, so runs side
by side do not take each other's ports.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

WORKERS = 3  # ~1 core of conformance runs on a 2-core machine, with room for the checks


@dataclass(frozen=True)
class Outcome(Generic[T]):
    result: T | None
    error: BaseException | None

    def value(self) -> T:
        """The job's result; its exception raised again if it raised one."""
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def run_side_by_side(jobs: dict[K, Callable[[], T]], workers: int = WORKERS) -> dict[K, Outcome[T]]:
    def attempt(job: Callable[[], T]) -> Outcome[T]:
        try:
            return Outcome(job(), None)
        except Exception as error:  # kept for the test that reads this job's outcome
            return Outcome(None, error)

    with ThreadPoolExecutor(max(1, min(workers, len(jobs)))) as pool:
        futures = {key: pool.submit(attempt, job) for key, job in jobs.items()}
        return {key: future.result() for key, future in futures.items()}

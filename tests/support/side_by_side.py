"""Independent runs made side by side, once per module: conformance runs mostly wait on
their clusters for a fixed duration (a third of one core each), so a test file's runs
against different targets, or with a failpoint on and off, overlap instead of queueing.

`run_side_by_side({key: job})` runs each job (a function of no argument) in a thread of
its own, at most `workers` at a time, and returns an `Outcome` per key: what the job
returned, or the exception it raised, which `Outcome.value()` raises again in the test
that reads it, so that a failing run fails its own test only. Jobs must share nothing:
each its own cluster, ports and report folder (run_conform runs its own event loop).

Ports: each run plans its cluster with `launcher.free_ports` (bind port 0, release), a
port from the kernel's ephemeral range, which every outgoing connection also draws from:
with another run's clients and members connecting all the time, a planned port was taken
by a connection before its member bound it ("address already in use", twice in a few
runs). While jobs run side by side, `launcher.free_ports` plans ports below the ephemeral
range instead (no connection is given one), each found free by binding it, and never
the same port twice in this process.
"""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from etcdspec.impl.tools import launcher

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

    with distinct_ports(), ThreadPoolExecutor(max(1, min(workers, len(jobs)))) as pool:
        futures = {key: pool.submit(attempt, job) for key, job in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


_HANDED_OUT: set[int] = set()
_PORTS_LOCK = threading.Lock()


@contextmanager
def distinct_ports() -> Iterator[None]:
    """`launcher.free_ports` from below the ephemeral range, never a port twice."""
    original = launcher.free_ports
    low, high = _planned_range()
    chooser = random.Random()

    def distinct(count: int) -> list[int]:
        with _PORTS_LOCK:
            ports: list[int] = []
            sockets: list[socket.socket] = []
            try:
                for _ in range(100 * count):
                    if len(ports) == count:
                        break
                    port = chooser.randrange(low, high)
                    if port in _HANDED_OUT or port in ports:
                        continue
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    try:
                        sock.bind(("127.0.0.1", port))
                    except OSError:
                        sock.close()
                        continue
                    sockets.append(sock)
                    ports.append(port)
            finally:
                for sock in sockets:
                    sock.close()
            if len(ports) < count:
                return original(count)
            _HANDED_OUT.update(ports)
            return ports

    launcher.free_ports = distinct  # type: ignore[assignment]
    try:
        yield
    finally:
        launcher.free_ports = original  # type: ignore[assignment]


def _planned_range() -> tuple[int, int]:
    """Ports from 10000 up to the start of the kernel's ephemeral range."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    return 10_000, max(ephemeral_low, 12_000)

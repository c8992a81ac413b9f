"""Worker pools: one stateful object per worker, methods called on all of them at once.

Contract: a pool holds `size` objects made by `start(cls, args_per_worker)`, one per
worker, and calls a method on every one of them in parallel with `call(method,
args_per_worker)` (results in worker order) or on one with `call_one`; `map(fn, shared,
items)` runs `fn(shared, item)` for each item wherever a worker is free (stateless tasks;
`shared` is sent to each worker once). Two kinds:
- `InlinePool`: the objects live in this process and are called one after another (the
  deterministic path the core tests drive; no engine needed).
- `DaskPool`: Dask distributed actors, one per Dask worker: `DaskPool.local(n)` starts a
  local cluster of `n` worker processes (one thread each) and stops it on `close()`;
  `DaskPool.connect(address)` uses a running scheduler's workers (their processes need
  etcdspec importable) and leaves them running. Why Dask and not Ray: bench/
  engine_compare.py (docs/benchmarks.md): on this 2-core machine Dask starts 2 workers in
  0.5 s against Ray's 2.8 s, uses 140 MB against Ray's 740 MB, installs 21 MB against
  225 MB, and its per-call overhead (1.1 ms against 0.7 ms) does not matter for batches
  of thousands of states.

`open_pool(workers, cluster, worker_memory_mb)` picks one from a command line's or a
config's values (None: run in this process); `worker_memory_mb` bounds each local
worker's memory (Dask's nanny stops a worker that passes it, which is `WorkerLost`). `describe()` names the pool in logs. A worker that dies is `WorkerLost`, never a result.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

# Dask's statistical profiler samples every thread's stack every 10 ms, and its event-loop
# health check ticks every 20 ms: in a worker busy with one long-running actor call they
# only take CPU (with them a one-worker search used twice the single-process CPU time).
QUIET_WORKERS = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
}


class WorkerLost(RuntimeError):
    """A worker process stopped (crashed, killed, or over its memory limit)."""


class WorkerPool(Protocol):
    size: int

    def start(self, cls: type, args_per_worker: Sequence[tuple[Any, ...]]) -> None: ...

    def call(self, method: str, args_per_worker: Sequence[tuple[Any, ...]]) -> list[Any]: ...

    def call_one(self, worker: int, method: str, *args: Any) -> Any: ...

    def map(
        self, fn: Callable[[Any, Any], Any], shared: Any, items: Sequence[Any]
    ) -> list[Any]: ...

    def describe(self) -> str: ...

    def close(self) -> None: ...


class InlinePool:
    """`size` objects in this process, called in worker order."""

    concurrent = False

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least 1 worker, got {size}")
        self.size = size
        self.objects: list[Any] = []

    def start(self, cls: type, args_per_worker: Sequence[tuple[Any, ...]]) -> None:
        self.objects = [cls(*args) for args in args_per_worker]

    def call(self, method: str, args_per_worker: Sequence[tuple[Any, ...]]) -> list[Any]:
        return [
            getattr(obj, method)(*args)
            for obj, args in zip(self.objects, args_per_worker, strict=True)
        ]

    def call_one(self, worker: int, method: str, *args: Any) -> Any:
        return getattr(self.objects[worker], method)(*args)

    def map(self, fn: Callable[[Any, Any], Any], shared: Any, items: Sequence[Any]) -> list[Any]:
        return [fn(shared, item) for item in items]

    def describe(self) -> str:
        return "this process" if self.size == 1 else f"{self.size} in-process shards"

    def close(self) -> None:
        for obj in self.objects:
            close = getattr(obj, "close", None)
            if close is not None:
                close()
        self.objects = []


class DaskPool:
    """Dask distributed actors, one per worker of a local or a running cluster."""

    concurrent = True  # its workers run at once: callers may call them from threads

    def __init__(self, client: Any, cluster: Any, where: str) -> None:
        self.client = client
        self.cluster = cluster  # None: a running cluster we only connected to
        self.where = where
        self.addresses = sorted(client.scheduler_info()["workers"])
        self.size = len(self.addresses)
        if self.size < 1:
            self.close()
            raise WorkerLost(f"the Dask scheduler at {where} has no workers")
        self.actors: list[Any] = []
        self.futures: list[Any] = []

    @classmethod
    def local(cls, workers: int, memory_limit: str | int = "auto") -> DaskPool:
        """A local cluster of `workers` processes with one thread each; Dask's nanny
        stops a worker past `memory_limit` (per worker; "auto": the machine's memory
        shared out)."""
        if workers < 1:
            raise ValueError(f"--workers must be at least 1, got {workers}")
        import dask
        from distributed import Client, LocalCluster

        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        with dask.config.set(QUIET_WORKERS):
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address="127.0.0.1:0",  # only its health routes, no fixed port
                memory_limit=memory_limit,
                silence_logs=logging.CRITICAL,
            )
        client = Client(cluster)
        client.wait_for_workers(workers)
        return cls(client, cluster, f"a local Dask cluster of {workers} workers")

    @classmethod
    def connect(cls, address: str, timeout_s: float = 10.0) -> DaskPool:
        """The workers of a running Dask scheduler at `address` (tcp://HOST:PORT)."""
        from distributed import Client

        try:
            client = Client(address, timeout=timeout_s)
        except (OSError, TimeoutError) as error:
            raise WorkerLost(
                f"cannot reach a Dask scheduler at {address}: {error} "
                "(start one with `dask scheduler` and workers with `dask worker ADDRESS`)"
            ) from error
        return cls(client, None, f"the Dask cluster at {address}")

    def start(self, cls: type, args_per_worker: Sequence[tuple[Any, ...]]) -> None:
        """New objects on the workers (the last ones, if any, are closed first)."""
        if self.actors:
            with contextlib.suppress(Exception):
                self.call("close", [()] * len(self.actors))
        self.futures = [
            self.client.submit(cls, *args, actor=True, workers=[address], pure=False)
            for address, args in zip(self.addresses, args_per_worker, strict=True)
        ]
        self.actors = [self._result(future) for future in self.futures]

    def call(self, method: str, args_per_worker: Sequence[tuple[Any, ...]]) -> list[Any]:
        with self._losses_as_worker_lost():
            # asking an actor whose worker already died raises here, not in its result
            pending = [
                getattr(actor, method)(*args)
                for actor, args in zip(self.actors, args_per_worker, strict=True)
            ]
            return [future.result() for future in pending]

    def call_one(self, worker: int, method: str, *args: Any) -> Any:
        with self._losses_as_worker_lost():
            return getattr(self.actors[worker], method)(*args).result()

    def map(self, fn: Callable[[Any, Any], Any], shared: Any, items: Sequence[Any]) -> list[Any]:
        """`fn(shared, item)` for every item as Dask tasks (the scheduler balances them
        over the workers), `shared` sent to each worker once; results in item order."""
        if not items:
            return []
        with self._losses_as_worker_lost():
            # hash=False: a fresh key per call (a re-used content key can be released by
            # the last call while this one scatters it again: "lost dependencies")
            [on_workers] = self.client.scatter([shared], broadcast=True, hash=False)
            futures = self.client.map(fn, [on_workers] * len(items), list(items), pure=False)
            return list(self.client.gather(futures))

    def _result(self, future: Any) -> Any:
        with self._losses_as_worker_lost():
            return future.result()

    @contextlib.contextmanager
    def _losses_as_worker_lost(self) -> Iterator[None]:
        """A lost worker, however Dask says it, raised as WorkerLost; other errors as
        they are."""
        try:
            yield
        except Exception as error:
            lost = _lost(self.where, error)
            if lost is error:
                raise
            raise lost from error

    def describe(self) -> str:
        return self.where if self.cluster is not None else f"{self.where} ({self.size} workers)"

    def close(self) -> None:
        if self.actors:
            with contextlib.suppress(Exception):  # the workers may be gone; we only tidy up
                self.call("close", [()] * len(self.actors))
        self.actors = []
        self.futures = []
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _lost(where: str, error: Exception) -> Exception:
    """A lost worker as WorkerLost (Dask says it several ways: the actor's worker cannot
    be contacted, a task's worker was killed, a connection closed); any other error (the
    worker's own code failed) as it is."""
    lost = ("KilledWorker", "CommClosedError", "CancelledError", "FutureCancelledError")
    if isinstance(error, OSError) or type(error).__name__ in lost:
        return WorkerLost(f"a worker of {where} was lost: {error}")
    if type(error) is RuntimeError and str(error).startswith("Worker holding Actor was lost"):
        # distributed's Actor, asked a method after its worker died (CI: a worker killed
        # between two calls of a level)
        return WorkerLost(f"a worker of {where} was lost: {error}")
    return error


def open_pool(
    workers: int | None, cluster: str | None, worker_memory_mb: int | None = None
) -> DaskPool | None:
    """The pool a run asked for: the running cluster at `cluster`, a local cluster of
    `workers` processes (more than 1) with at most `worker_memory_mb` MB each (None:
    Dask's "auto", the machine's memory shared out), or None: run in this process.
    A memory bound with a running cluster is refused: its workers' limits were set
    where they were started (`dask worker --memory-limit`)."""
    if worker_memory_mb is not None and worker_memory_mb < 1:
        raise ValueError(f"a worker's memory bound must be at least 1 MB, got {worker_memory_mb}")
    if cluster is not None:
        if worker_memory_mb is not None:
            raise ValueError(
                "a memory bound applies to local workers: a running cluster's workers have "
                "the limit they were started with (dask worker --memory-limit)"
            )
        return DaskPool.connect(cluster)
    if workers is not None and workers > 1:
        memory: str | int = "auto" if worker_memory_mb is None else worker_memory_mb * 2**20
        return DaskPool.local(workers, memory)
    return None

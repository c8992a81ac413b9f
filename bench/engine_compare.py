"""Ray against Dask distributed for the distributed explorer, on this machine, local workers.

What it measures (each engine started with 2 local worker processes, one thread each):
start-up time (until 2 actors answer), per-call overhead (a round trip to an actor that
does nothing, sequential and with both actors at once), the time to ship 1 MB of bytes to
an actor and back, the resident memory of the engine's processes (this one excluded),
and the installed size of the engine's package folders. Run:
    .venv/bin/python -m bench.engine_compare [--calls 500]
Both engines must be installed (`python3 -m pip install "dask[distributed]" ray`).
"""

from __future__ import annotations

import argparse
import os
import site
import time
from pathlib import Path

import psutil


class Echo:
    def ping(self, payload: bytes = b"") -> bytes:
        return payload


def _tree_rss_mb() -> float:
    me = psutil.Process(os.getpid())
    total = 0
    for child in me.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def _folder_mb(*names: str) -> float:
    total = 0
    for root in site.getsitepackages():
        for name in names:
            folder = Path(root) / name
            if folder.is_dir():
                total += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return total / 2**20


def _report(name: str, figures: dict[str, float]) -> None:
    parts = ", ".join(f"{key} {value:,.2f}" for key, value in figures.items())
    print(f"{name}: {parts}", flush=True)


def measure_dask(calls: int) -> dict[str, float]:
    from distributed import Client, LocalCluster

    started = time.perf_counter()
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    addresses = list(client.scheduler_info()["workers"])
    actors = [
        client.submit(Echo, actor=True, workers=[address], pure=False).result()
        for address in addresses
    ]
    for actor in actors:
        actor.ping().result()
    startup = time.perf_counter() - started
    figures = _calls(actors, calls, lambda a, p: a.ping(p), lambda f: f.result())
    figures = {"start-up s": startup, **figures, "engine RSS MB": _tree_rss_mb()}
    client.close()
    cluster.close()
    figures["installed MB"] = _folder_mb("dask", "distributed")
    return figures


def measure_ray(calls: int) -> dict[str, float]:
    import ray

    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    remote_echo = ray.remote(num_cpus=1)(Echo)
    actors = [remote_echo.remote() for _ in range(2)]  # type: ignore[attr-defined]
    ray.get([actor.ping.remote() for actor in actors])
    startup = time.perf_counter() - started
    figures = _calls(actors, calls, lambda a, p: a.ping.remote(p), ray.get)
    figures = {"start-up s": startup, **figures, "engine RSS MB": _tree_rss_mb()}
    ray.shutdown()
    figures["installed MB"] = _folder_mb("ray")
    return figures


def _calls(actors, calls, call, result) -> dict[str, float]:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    for _ in range(calls):
        result(call(actors[0], b""))
    sequential = (time.perf_counter() - started) / calls
    started = time.perf_counter()
    for _ in range(calls):
        futures = [call(actor, b"") for actor in actors]
        for future in futures:
            result(future)
    both = (time.perf_counter() - started) / calls
    payload = os.urandom(2**20)
    started = time.perf_counter()
    for _ in range(20):
        result(call(actors[0], payload))
    megabyte = (time.perf_counter() - started) / 20
    return {
        "call ms": sequential * 1000,
        "call to both ms": both * 1000,
        "1 MB round trip ms": megabyte * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--engine", choices=["dask", "ray", "both"], default="both")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    engines = [("dask distributed", "distributed", measure_dask), ("ray", "ray", measure_ray)]
    for name, module, measure in engines:
        if args.engine not in ("both", name.split()[0]):
            continue
        try:
            __import__(module)
        except ImportError:
            print(f"{name}: not installed (python3 -m pip install {module}); not measured")
            continue
        _report(name, measure(args.calls))


if __name__ == "__main__":
    main()

"""Throughput of the store model's `apply()`: puts at N keys, reads, a mixed workload.

Contract: `measure(keys, requests, seed)` builds a store with `keys` keys, then times
`requests` puts, single-key ranges and a seeded mixed workload (puts, ranges, deletes,
compare-and-put txns over a few keys), in CPU seconds (time.process_time, so other
processes on a shared machine disturb it less), and returns a `StoreBenchResult`.
Used for docs/benchmarks.md; it does no I/O beyond reading the process clock.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from etcdspec.model.errors import StoreError
from etcdspec.model.requests import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    Request,
    TxnRequest,
)
from etcdspec.model.store import apply, initial_state


@dataclass(frozen=True)
class StoreBenchResult:
    keys: int
    requests: int
    puts_per_s: float
    ranges_per_s: float
    mixed_per_s: float

    def describe(self) -> str:
        return (
            f"store apply() at {self.keys} keys, {self.requests} requests each (CPU time): "
            f"puts {self.puts_per_s:,.0f}/s, single-key ranges {self.ranges_per_s:,.0f}/s, "
            f"mixed {self.mixed_per_s:,.0f}/s"
        )


def _rate(requests: list[Request], keys: int) -> float:
    state = initial_state()
    for i in range(keys):
        state, _ = apply(state, PutRequest(b"key%06d" % i, b"v"))
    start = time.process_time()
    for request in requests:
        try:
            state, _ = apply(state, request)
        except StoreError:
            continue
    elapsed = max(time.process_time() - start, 1e-9)
    return len(requests) / elapsed


def _mixed(rng: random.Random, count: int) -> list[Request]:
    few = [b"key%06d" % i for i in range(8)]
    out: list[Request] = []
    for _ in range(count):
        roll, key = rng.random(), rng.choice(few)
        if roll < 0.4:
            out.append(PutRequest(key, b"v%d" % rng.randrange(3)))
        elif roll < 0.7:
            out.append(RangeRequest(key))
        elif roll < 0.8:
            out.append(DeleteRangeRequest(key))
        else:
            version = Compare(key, CompareTarget.VERSION, CompareResult.EQUAL, rng.randrange(3))
            out.append(TxnRequest((version,), (PutRequest(key, b"x"),), (RangeRequest(key),)))
    return out


def measure(keys: int = 1000, requests: int = 20000, seed: int = 0) -> StoreBenchResult:
    if keys < 1 or requests < 1:
        raise ValueError(f"measure needs keys >= 1 and requests >= 1, got {keys}, {requests}")
    rng = random.Random(seed)
    names = [b"key%06d" % i for i in range(keys)]
    puts: list[Request] = [PutRequest(names[i % keys], b"w%d" % (i % 7)) for i in range(requests)]
    ranges: list[Request] = [RangeRequest(names[rng.randrange(keys)]) for _ in range(requests)]
    return StoreBenchResult(
        keys,
        requests,
        _rate(puts, keys),
        _rate(ranges, keys),
        _rate(_mixed(rng, requests), keys),
    )


if __name__ == "__main__":
    print(measure().describe())

"""What a WAL save costs when the segment is allocated ahead, against appending.

A member saves each Ready's entries and hard state as one WAL record and fdatasyncs it
before its messages leave. Appended to the end of the file, every record gives the file
a new size, which the fdatasync must commit to the filesystem's journal; written into
space allocated ahead (impl/storage/wal.py, `preallocate_bytes`), most fdatasyncs only flush
data. This runs --writers processes at once (three: one per member of a local cluster),
each saving one put-sized entry (a 256-byte value) and a hard state per record, with
--gap-us between saves, for --seconds; the two modes alternate for --rounds, and it
prints the median across rounds of each mode's save latency percentiles, and the ratio.

Usage: python -m bench.wal_fsync [--writers 3] [--seconds 4] [--rounds 4] [--gap-us 300]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

from bench.server_bench import percentile
from etcdspec.impl.raft.messages import Entry, HardState
from etcdspec.impl.storage.wal import PREALLOCATE_BYTES, Wal

MODES = {"appended": 0, "allocated ahead": PREALLOCATE_BYTES}
PERCENTILES = (50, 90, 99)


def _writer(
    directory: str, preallocate: int, seconds: float, gap_s: float, start: float
) -> list[float]:
    wal, _ = Wal.open(directory, preallocate_bytes=preallocate)
    value = bytes(300)  # a put request of a 256-byte value, roughly
    latencies = []
    index = 0
    time.sleep(max(0.0, start - time.time()))
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        index += 1
        began = time.perf_counter()
        wal.save(HardState(2, 1, index - 1), [Entry(2, index, value)])
        latencies.append(time.perf_counter() - began)
        time.sleep(gap_s)
    wal.close()
    return latencies


def _round(writers: int, preallocate: int, seconds: float, gap_s: float) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="wal-fsync-") as root:
        start = time.time() + 0.5
        jobs = [
            (str(Path(root) / f"w{i}"), preallocate, seconds, gap_s, start) for i in range(writers)
        ]
        with multiprocessing.get_context("spawn").Pool(writers) as pool:
            results = pool.starmap(_writer, jobs)
    return [latency for result in results for latency in result]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--gap-us", type=float, default=300.0)
    args = parser.parse_args()
    figures: dict[str, list[list[float]]] = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode, preallocate in MODES.items():
            latencies = _round(args.writers, preallocate, args.seconds, args.gap_us / 1e6)
            figures[mode].append([percentile(latencies, p / 100) * 1e6 for p in PERCENTILES])
            row = " ".join(
                f"p{p}={v:.0f}" for p, v in zip(PERCENTILES, figures[mode][-1], strict=True)
            )
            print(f"  {mode:16s} {len(latencies):6d} saves  {row} µs", flush=True)
    print(
        f"median of {args.rounds} rounds, µs per save (write + fdatasync), {args.writers} writers:"
    )
    base = [statistics.median(r[i] for r in figures["appended"]) for i in range(len(PERCENTILES))]
    for mode in MODES:
        medians = [statistics.median(r[i] for r in figures[mode]) for i in range(len(PERCENTILES))]
        cells = "  ".join(
            f"p{p} {m:7.0f} ({m / b:.2f}x)"
            for p, m, b in zip(PERCENTILES, medians, base, strict=True)
        )
        print(f"  {mode:16s} {cells}")


if __name__ == "__main__":
    main()

"""What applying a put costs a member, by the size of the batch it is applied in.

A member applies committed entries through `StateMachine.apply`, one backend
transaction (a savepoint in the group-committed SQLite transaction) per call. A leader
applies one client's puts one at a time; a follower holds committed entries back and
applies them together (impl/server/apply.py, the pump plan's APPLY_OR_DEFER). This
measures the process CPU time per put for batches of --sizes entries: puts of 256-byte
values to --keys keys (loaded first, so each put replaces a live key), in a member's
state machine in a temporary directory,
each size --rounds times in turn; it prints the median per size and its ratio to the
first size.

Usage: python -m bench.apply_batch [--puts 4000] [--sizes 1,2,4,8,16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from etcdspec.impl.kv.applier import encode_request
from etcdspec.impl.kv.state_machine import StateMachine
from etcdspec.impl.pb import rpc_pb2
from etcdspec.impl.raft.messages import Entry


class _Puts:
    """Consecutive put entries over `keys` keys."""

    def __init__(self, keys: int) -> None:
        self.keys = keys
        self.index = 0

    def take(self, count: int) -> list[Entry]:
        entries = []
        for _ in range(count):
            self.index += 1
            request = rpc_pb2.PutRequest(key=b"key%d" % (self.index % self.keys), value=bytes(256))
            entries.append(Entry(term=2, index=self.index, data=encode_request(request)))
        return entries


def _per_put_us(storage: StateMachine, puts: _Puts, size: int, count: int) -> float:
    batches = [tuple(puts.take(size)) for _ in range(max(1, count // size))]
    started = time.process_time()
    for batch in batches:
        storage.apply(batch)
        storage.flush_if_due()
    return (time.process_time() - started) / (len(batches) * size) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--puts", type=int, default=4000, help="puts per measurement")
    parser.add_argument("--keys", type=int, default=10_000, help="keys written, loaded first")
    parser.add_argument("--sizes", default="1,2,4,8,16", help="batch sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="etcdspec-apply-batch-") as directory:
        storage = StateMachine(Path(directory) / "db", member_id=1, quota_bytes=2**33)
        try:
            puts = _Puts(args.keys)
            _per_put_us(storage, puts, 64, args.keys)  # load every key
            samples: dict[int, list[float]] = {size: [] for size in sizes}
            for _ in range(args.rounds):
                for size in sizes:
                    samples[size].append(_per_put_us(storage, puts, size, args.puts))
        finally:
            storage.close()
    first = statistics.median(samples[sizes[0]])
    print(f"{'batch':>5} | {'µs of CPU per put (median)':>26} | {'ratio':>5} | rounds")
    for size in sizes:
        median = statistics.median(samples[size])
        rounds = ", ".join(f"{value:.1f}" for value in samples[size])
        print(f"{size:>5} | {median:>26.1f} | {median / first:>5.2f} | {rounds}")


if __name__ == "__main__":
    main()

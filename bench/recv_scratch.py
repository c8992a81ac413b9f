"""What a socket read costs an asyncio protocol: a plain Protocol against ScratchProtocol.

A plain `asyncio.Protocol` is read with `sock.recv(256 KiB)`, which allocates (and glibc
maps and unmaps) a 256 KiB object per read; `etcdspec.impl.rpc.scratch_recv.ScratchProtocol`
is read into a shared scratch with `recv_into` and copies out only what arrived. Each
round sends --messages messages of --size bytes one at a time over a loopback socket
pair, the next one sent when the last has arrived, so every message is one read (as a
member's peer and client connections mostly are). Prints the process CPU time per
message for each protocol, alternating them --rounds times, and the medians and their
ratio. Each measurement runs in a fresh process: glibc raises its mmap threshold for good
once a large mapped block is freed whole, after which a 256 KiB read buffer comes from
the heap instead, so one process measuring both would measure the second one wrongly
(a long-running member, whose reads keep their mappings, is the fresh-process case).

Usage: python -m bench.recv_scratch [--messages 20000] [--size 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time

from etcdspec.impl.rpc.scratch_recv import ScratchProtocol, new_scratch


class _Counting:
    """Counts the bytes that arrived; sends the next message when one is whole, and ends
    `done` when all have arrived."""

    def __init__(
        self, size: int, messages: int, sender: socket.socket, done: asyncio.Future[None]
    ) -> None:
        self.size = size
        self.messages = messages
        self.sender = sender
        self.done = done
        self.received = 0

    def take(self, data: bytes) -> None:
        self.received += len(data)
        if self.received >= self.messages * self.size:
            if not self.done.done():
                self.done.set_result(None)
        elif self.received % self.size == 0:
            self.sender.send(bytes(self.size))


class _Plain(asyncio.Protocol):
    def __init__(self, counting: _Counting) -> None:
        self.counting = counting

    def data_received(self, data: bytes) -> None:
        self.counting.take(data)


class _Scratch(ScratchProtocol):
    def __init__(self, counting: _Counting, scratch: memoryview) -> None:
        super().__init__(scratch)
        self.counting = counting

    def data_received(self, data: bytes) -> None:
        self.counting.take(data)


async def _round(kind: str, messages: int, size: int) -> float:
    """CPU seconds per message for one protocol kind over `messages` one-at-a-time sends."""
    loop = asyncio.get_running_loop()
    receiving, sending = socket.socketpair()
    done: asyncio.Future[None] = loop.create_future()
    counting = _Counting(size, messages, sending, done)
    scratch = new_scratch()
    transport, _ = await loop.connect_accepted_socket(
        (lambda: _Plain(counting)) if kind == "plain" else (lambda: _Scratch(counting, scratch)),
        receiving,
    )
    try:
        started = time.process_time()
        sending.send(bytes(size))
        await done
        return (time.process_time() - started) / messages
    finally:
        transport.close()
        sending.close()


def measure(kind: str, messages: int, size: int) -> float:
    """CPU seconds per message for `kind`, measured in a fresh Python process."""
    command = [sys.executable, "-m", "bench.recv_scratch", "--one", kind]
    command += ["--messages", str(messages), "--size", str(size)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return float(output.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=300, help="bytes per message")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", choices=("plain", "scratch"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:  # one measurement, in this (fresh) process
        print(asyncio.run(_round(args.one, args.messages, args.size)))
        return 0
    results: dict[str, list[float]] = {"plain": [], "scratch": []}
    for round_number in range(args.rounds):
        for kind in results:
            cpu = measure(kind, args.messages, args.size)
            results[kind].append(cpu)
            print(f"round {round_number + 1} {kind:8s} {cpu * 1e6:7.2f} µs CPU per message")
    plain, scratch = (statistics.median(results[k]) for k in ("plain", "scratch"))
    print(
        f"median: plain {plain * 1e6:.2f} µs, scratch {scratch * 1e6:.2f} µs per message"
        f" (scratch / plain = {scratch / plain:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

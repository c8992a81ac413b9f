"""Which asyncio event loop a member runs on: asyncio's, or uvloop's when asked for.

A member's one event-loop thread does all of its work (Raft, apply, the gRPC server,
the peer transport), so the loop's own cost per callback, timer and socket event is paid
on every client call. uvloop's loop does the same work for less CPU (bench/grpc_ceiling:
42 against 50 µs of server CPU per call on grpc_h2; measure with `--variants h2,h2-uvloop`
and `bench.server_bench --loop`). It is not the default, which keeps the dependencies
small: the gain is within the run-to-run noise of the cluster benchmark. While the
members served clients with grpc.aio, the conformance run with kill -9 and partition
(tests/conform/test_conform_runs.py, test_short_run_with_kill_and_partition_holds
[reference]) failed in 6 of 34 runs on uvloop (restarted members that said "ready" and
then answered nothing); on grpc_h2 it held in 12 of 12 runs on uvloop and 12 of 12 on
asyncio's loop (session 4).

`run(coroutine)` runs the coroutine to completion on the chosen loop, as `asyncio.run`
does. The choice: the environment variable ETCDSPEC_EVENT_LOOP, "asyncio" (the default
when unset) or "uvloop". Asking for uvloop when it is not installed is an error
(EventLoopChoiceError) that says so, never a silent fallback.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

EVENT_LOOP_ENV = "ETCDSPEC_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")

T = TypeVar("T")


class EventLoopChoiceError(ValueError):
    """ETCDSPEC_EVENT_LOOP names a loop that is unknown or not installed."""


def _uvloop_installed() -> bool:
    try:
        importlib.import_module("uvloop")
    except ImportError:
        return False
    return True


def chosen_loop(environ: dict[str, str] | None = None) -> str:
    """ "uvloop" or "asyncio", from ETCDSPEC_EVENT_LOOP in `environ` (default os.environ)."""
    value = (os.environ if environ is None else environ).get(EVENT_LOOP_ENV, "").strip()
    if not value:
        return "asyncio"
    if value not in CHOICES:
        raise EventLoopChoiceError(
            f"{EVENT_LOOP_ENV}={value!r} is not a known event loop; "
            f"use one of {', '.join(CHOICES)} or leave it unset"
        )
    if value == "uvloop" and not _uvloop_installed():
        raise EventLoopChoiceError(
            f"{EVENT_LOOP_ENV}=uvloop but uvloop is not installed; "
            "install it (pip install uvloop) or set it to asyncio"
        )
    return value


def run(main: Coroutine[Any, Any, T], environ: dict[str, str] | None = None) -> T:
    """Run `main` to completion on the chosen event loop (a new loop, closed after)."""
    try:
        name = chosen_loop(environ)
    except EventLoopChoiceError:
        main.close()  # never started: close it, so it is not reported as never awaited
        raise
    if name == "uvloop":
        uvloop = importlib.import_module("uvloop")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main)
    return asyncio.run(main)

"""Which asyncio event loop a member runs on: uvloop's when it is installed, else asyncio's.

A member's one event-loop thread does all of its work (Raft, apply, the gRPC aio server,
the peer transport), so the loop's own cost per callback, timer and socket event is paid
on every client call. uvloop's loop does the same work for less CPU (measure with
`bench.grpc_ceiling --variants generic,uvloop` and `bench.server_bench --loop`); the
behaviour is asyncio's. `run(coroutine)` runs the
coroutine to completion on the chosen loop, as `asyncio.run` does.

The choice: the environment variable ETCDSPEC_EVENT_LOOP, "uvloop" or "asyncio"; when it
is unset, uvloop if it can be imported, else asyncio. Asking for uvloop when it is not
installed is an error (EventLoopChoiceError) that says so, never a silent fallback.
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
        return "uvloop" if _uvloop_installed() else "asyncio"
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
    if chosen_loop(environ) == "uvloop":
        uvloop = importlib.import_module("uvloop")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main)
    return asyncio.run(main)

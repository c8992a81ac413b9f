"""Run a coroutine at once, in the caller's turn of the event loop, up to its first wait;
a task drives the rest only if it waits.

`loop.create_task` would run the coroutine's first step in the next turn of the loop
(Python 3.12's eager task factory does what this does, for every task; this program runs
on 3.11). The gRPC server starts each call's handler this way (a serializable read then
answers in the read that brought its request), and the member handles its Readies this
way (at the end of the read that brought the message or request that made them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any


class Resumed(Coroutine[Any, Any, None]):
    """A coroutine already run to its first wait (`first`: what it yielded there), for a
    task to drive on: the task's first send gets `first`; everything after, cancellation
    included, goes to the coroutine itself."""

    def __init__(self, coroutine: Coroutine[Any, Any, None], first: Any) -> None:
        self._coroutine = coroutine
        self._first: Any = first
        self._fresh = True

    def send(self, value: Any) -> Any:
        if self._fresh:
            self._fresh = False
            return self._first
        return self._coroutine.send(value)

    def throw(self, *error: Any) -> Any:
        self._fresh = False
        return self._coroutine.throw(*error)

    def close(self) -> None:
        self._coroutine.close()

    def __await__(self) -> Generator[Any, None, None]:
        raise TypeError("a resumed coroutine is driven by its task, not awaited")


def start_eagerly(
    loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, None], name: str | None = None
) -> asyncio.Task[None] | None:
    """Run `coroutine` now, up to its first wait; return the task that drives it on from
    there, or None when it finished without waiting. What it raises before its first wait
    reaches the caller."""
    try:
        first = coroutine.send(None)
    except StopIteration:
        return None
    return loop.create_task(Resumed(coroutine, first), name=name)

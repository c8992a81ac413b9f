"""Pausing Python's cyclic garbage collector around bulk work that builds many objects.

Contract: `paused_gc()` is a context manager that disables the cyclic collector for its
body and restores the previous setting on the way out (also when the body raises).
Nested uses are fine: only the outermost one turns collection back on. Reference
counting still frees everything that is not in a cycle, so memory does not pile up.

Why: reading a history and checking it allocate hundreds of thousands of long-lived,
acyclic objects (parsed JSON, events, operations, model states, memo entries); every
few hundred allocations the collector would rescan the young ones, and its full
collections rescan all of them, which costs a third or more of the run.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic garbage collector for the body; restore it afterwards."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()

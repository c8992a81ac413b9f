"""Pausing Python's cyclic garbage collector around bulk work that builds many objects.

Contract: `paused_gc()` is a context manager that disables the cyclic collector for its
body and restores the previous setting on the way out (also when the body raises).
Nested uses are fine: only the outermost one turns collection back on. Reference
counting still frees everything that is not in a cycle, so memory does not pile up.
On the way out of the outermost pause, the objects the body left alive are moved to the
collector's oldest generation (`gc.freeze()` then `gc.unfreeze()`, both documented) so
that turning the collector back on does not at once rescan them all as young objects;
they stay collectable, by the next full collection, like any long-lived object.

Why: reading a history and checking it allocate hundreds of thousands of long-lived,
acyclic objects (parsed JSON, events, operations, model states, memo entries); every
few hundred allocations the collector would rescan the young ones, and its full
collections rescan all of them, which costs a third or more of the run. Without the
move to the oldest generation, the first allocations after the pause paid a young
collection of everything allocated during it and then a full one (about a second each
time at 100k operations).
"""

from __future__ import annotations

import gc
from types import TracebackType


class paused_gc:  # lower case: used as the function it was, `with paused_gc():`
    """Disable the cyclic garbage collector for the body; restore it afterwards, with
    what the body left alive counted as old (see the module docstring).

    A class, not a `contextlib.contextmanager` generator: a check of a small history
    (checker/linearizability.py) enters it once per check, and the generator's frames
    cost more there than the check's own work (docs/benchmarks.md, Session 16: the
    fixed cost per check)."""

    __slots__ = ("collecting",)

    def __enter__(self) -> None:
        self.collecting = gc.isenabled()
        gc.disable()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.collecting:
            age_survivors()
            gc.enable()


def age_survivors() -> None:
    """Move every object the collector tracks to its oldest generation and zero the
    young generation's allocation count: no collection is due at once, and the objects
    are scanned again only by full collections (which CPython runs when the objects
    that survived young collections since the last one reach a quarter of the old)."""
    gc.freeze()
    gc.unfreeze()

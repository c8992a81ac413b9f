"""Seeded Hypothesis runs that replay: the same seed gives the same run in any process.

Hypothesis (6.1xx and later) draws, about one time in twenty, an integer or string
constant collected from the source of every *local* module imported so far (not
site-packages, not the standard library). Which modules are imported differs between
`etcdspec explore`, a pytest session and an editable or a normal install, so the same
seed used to give different schedules in each: a run did not replay from its seed (a
refinement test saw 1,651 steps in one pytest session and 2,844 in another).

`replayable_draws()` empties that pool for the length of a run, and clears Hypothesis's
cache of the constants it already allowed, on the way in and on the way out. It touches a
private part of Hypothesis (`hypothesis.internal.conjecture.providers`): when that part is
missing (an older or a newer release), nothing is patched and `REPLAY_PATCHED` is False,
which tests check so a change of Hypothesis cannot go unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

try:
    from hypothesis.internal.conjecture import providers as _providers
except ImportError:  # pragma: no cover - a Hypothesis without that module
    _providers = None  # type: ignore[assignment]

REPLAY_PATCHED: bool = (
    _providers is not None
    and hasattr(_providers, "_get_local_constants")
    and hasattr(_providers, "Constants")
    and hasattr(_providers, "CONSTANTS_CACHE")
)


def _clear_constants_cache() -> None:
    cache: Any = _providers.CONSTANTS_CACHE
    cache.cache.clear()


@contextmanager
def replayable_draws() -> Iterator[None]:
    """Within this block, Hypothesis draws no constants taken from local modules."""
    if not REPLAY_PATCHED:
        yield
        return
    original: Callable[[], Any] = _providers._get_local_constants
    empty = _providers.Constants()
    _providers._get_local_constants = lambda: empty
    _clear_constants_cache()
    try:
        yield
    finally:
        _providers._get_local_constants = original
        _clear_constants_cache()

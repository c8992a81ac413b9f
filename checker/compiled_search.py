"""The compiled search core (checker/_wgl.c) and the choice between it and the pure loop.

Contract:
- `compiled_entry_search(model, items, ...)` is checker/entry_search.py's `entry_search`
  for one partition, run by the C extension `etcdspec.checker._wgl`: the same candidates
  in the same order, the same memo (info-set subsumption included), so the same steps,
  verdict, linearization (`EntryOutcome.order`) and deepest configuration, and the same
  turns (a yield when the steps reach each `slice_steps`) and budget checks (every
  `check_every` steps). tests/checker/test_checker_compiled_core.py compares the two.
- It returns None, and the caller runs the pure loop, when the core cannot take the
  partition: the extension is absent (not built), ETCDSPEC_CHECKER_CORE=pure, the model
  has no flat form (`CheckModel.flat` is None: the etcd model), or a value cannot be
  interned faithfully (unhashable, or NaN, which is not equal to itself).
- Flat form: each operation is (kind, a, b) with kind READ (next state: the state, only
  when it equals a), SET (a), CAS (b, only when the state equals a) or TRANSFORM
  (`model.transform(a, state)`, asked once per (a, state) and cached). Values are
  interned in a dict, so ids are equal exactly when Python's == says the values are
  (1, 1.0 and True are one id, as `state == arg` makes them one in the pure loop).
- The state objects returned are the pure loop's: the state after the last operation
  placed is recomputed by that operation's `stepper` from the state before it (a read
  returns its own value object, as the pure loop's stepper does).
- Its turns and budget checks are TURN_FACTOR times the pure loop's in steps (a
  compiled step costs 20-50x less), so about as long in time; the steps, verdicts and
  results do not depend on where the turns end.
- ETCDSPEC_CHECKER_CORE: "auto" (default: compiled when built), "pure", or "compiled"
  (the extension is required: its absence is an error saying how to build it).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Hashable, Sequence
from typing import Any

from etcdspec.checker.budget import BudgetClock
from etcdspec.checker.entry_search import EntryOutcome, EntryProgress
from etcdspec.checker.models import CheckModel, PreparedOp

try:
    from etcdspec.checker import _wgl  # type: ignore[attr-defined]
except ImportError:  # not built: the pure loop serves
    _wgl = None

READ, SET, CAS, TRANSFORM = 0, 1, 2, 3
CORE_ENV = "ETCDSPEC_CHECKER_CORE"
_CHOICES = ("auto", "pure", "compiled")
_LINEARIZED, _REFUTED = 1, 2
TURN_FACTOR = 16


class CoreUnavailable(RuntimeError):
    """ETCDSPEC_CHECKER_CORE=compiled, but the extension was not built."""


def core_choice() -> str:
    """The core ETCDSPEC_CHECKER_CORE asks for: auto, pure or compiled."""
    choice = os.environ.get(CORE_ENV, "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ValueError(
            f"{CORE_ENV}={choice!r}: choose one of {', '.join(_CHOICES)} "
            "(auto: the compiled core when it is built)"
        )
    return choice


def compiled_available() -> bool:
    """Whether the C extension was built and imported."""
    return _wgl is not None


def _use_compiled() -> bool:
    choice = core_choice()
    if choice == "pure":
        return False
    if _wgl is None:
        if choice == "compiled":
            raise CoreUnavailable(
                f"{CORE_ENV}=compiled but etcdspec.checker._wgl is not built: install the "
                "project with a C compiler and the Python headers (`pip install -e .`, or "
                "`make .venv/.installed-stamp`), or unset it to use the pure search"
            )
        return False
    return True


def compiled_entry_search(
    model: CheckModel,
    items: Sequence[PreparedOp],
    seed: int,
    clock: BudgetClock,
    progress: EntryProgress,
    slice_steps: int,
    check_every: int,
) -> Generator[None, None, EntryOutcome] | None:
    """The compiled search of one partition, or None when the pure loop must run (see the
    module docstring)."""
    if not _use_compiled():
        return None
    flat = model.flat_ops(items)
    if flat is None:
        return None
    kinds, a_values, b_values = flat
    init = model.init()
    try:
        # One key per value, the first object met (dict keys compare with ==).
        values = list(dict.fromkeys([init, *a_values, *b_values]))
    except TypeError:  # an unhashable value: the pure loop compares it as it is
        return None
    if any([v != v for v in values]):  # NaN: not equal to itself, so not internable
        return None
    ids = dict(zip(values, range(len(values)), strict=True))
    a = list(map(ids.__getitem__, a_values))
    b = list(map(ids.__getitem__, b_values))
    init_id = 0

    ops = [p[0] for p in items]

    def transform(arg: int, state: int) -> int:
        new = model.transform(values[arg], values[state])
        found = ids.get(new)
        if found is None:
            found = ids[new] = len(values)
            values.append(new)
        return found

    search = _wgl.Search(
        bytes(kinds),
        a,
        b,
        bytes([op.type == "ok" for op in ops]),
        [op.call for op in ops],
        [op.ret for op in ops],
        init_id,
        seed & 0xFFFFFFFFFFFFFFFF,
        transform,
    )
    return _drive(
        model,
        items,
        search,
        values,
        init,
        clock,
        progress,
        slice_steps * TURN_FACTOR,
        check_every * TURN_FACTOR,
    )


def _drive(
    model: CheckModel,
    items: Sequence[PreparedOp],
    search: Any,
    values: list[Any],
    init: Hashable,
    clock: BudgetClock,
    progress: EntryProgress,
    slice_steps: int,
    check_every: int,
) -> Generator[None, None, EntryOutcome]:
    next_turn, next_check = slice_steps, check_every
    clock.check()  # its first check is late (TURN_FACTOR): a spent budget is still seen
    while True:
        status = search.run(min(next_turn, next_check))
        steps = search.steps
        progress.steps, progress.placed = steps, search.depth
        progress.configurations = search.configurations
        if status:
            break
        if steps >= next_check:
            next_check += check_every
            clock.check()
        if steps >= next_turn:
            next_turn = steps + slice_steps
            yield
    order, _, before = search.outcome()
    if order:
        last = items[order[-1]]
        state = model.stepper(last)(values[before])[0]
    else:
        state = init
    if status == _LINEARIZED:
        return EntryOutcome(True, order, state)
    progress.placed = 0
    return EntryOutcome(False, order, state)

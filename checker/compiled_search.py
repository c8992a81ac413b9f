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
- The per-operation work before the search is compiled too, for the models that name a
  `flat_code` (register 1, kv 2): `compiled_prepare` is their `prepare_all` (the common
  shapes decoded in C, every other operation through the model's `prepare`, so the same
  items and the same errors), and `compiled_entry_search` builds the flat arrays and the
  interning in one C pass (`_wgl.flatten`), falling back to `flat_ops` and the Python
  interning when that pass declines (an unknown kind, an unhashable value, NaN). kv's
  TRANSFORM is append, `(state or "") + arg`: `_wgl.Appender` does it in C for str
  values and asks `model.transform` for anything else; `compiled_partitions` groups
  the items by key in C, `compiled_infos` counts a partition's info operations (its
  difficulty) and `compiled_op_ids` turns a linearization into operation ids.
- The fused pass (`compiled_fuse`): for the register and kv models, one C pass from the
  Operation objects straight to each partition's prepared Search (decode, drop, group by
  key, intern, rank the call and return positions), with no PreparedOp built: a
  partition keeps its operations, and its items are built only when asked for (a
  failure to describe, the `impossible`/`overwritten` sweeps), by `prepare_all`, so
  they are the separate passes' items. Anything unusual (an operation `prepare` must
  decide or reject, a value not None/bool/int/float/str, NaN, a position not an int)
  makes it return None, and the separate passes above run, with their items and errors.
  The fused partitions' first turns run in one C call (`compiled_first_turns`, in the
  turns loop's order, with its budget checks; the time limit tested in C, so
  `clock.check` is called only once it is passed or when the budget has a memory
  bound) for as long as each linearizes: their
  results (operation ids, the stepper's state, steps, each one's own seconds) come back
  together; the first partition that is not linearized there goes to the turns loop,
  its Search where the turn left it. `compiled_check_fused` is both in one C call
  (`_wgl.check_fused`), which also sorts the partitions, orders the turns and, when
  every first turn linearizes its partition, makes the PartitionResults: a clean
  history's check runs no Python per partition. The fused pass reads an Operation's
  attributes straight from its values array on CPython 3.11 (getattr elsewhere, and
  for any instance or class that array does not serve), and keeps the operations' ids
  for the linearizations.
  When the first turn refuted a partition (`fused_refuted`: the Search says so itself,
  no step taken), the history is decided there, and `fused_outcome` gives the deepest
  configuration only if the report is read.
- ETCDSPEC_CHECKER_CORE: "auto" (default: compiled when built), "pure", or "compiled"
  (the extension is required: its absence is an error saying how to build it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Generator, Hashable, Sequence
from typing import Any, NamedTuple

from etcdspec.checker.budget import BudgetClock, OutOfBudget
from etcdspec.checker.entry_search import EntryOutcome, EntryProgress
from etcdspec.checker.history import Operation
from etcdspec.checker.linearizability_result import PartitionResult
from etcdspec.checker.models import PREPARED_DEFAULTS, CheckModel, PreparedOp
from etcdspec.verdict import Verdict

try:
    from etcdspec.checker import _wgl  # type: ignore[attr-defined]
except ImportError:  # not built: the pure loop serves
    _wgl = None

READ, SET, CAS, TRANSFORM = 0, 1, 2, 3
CORE_ENV = "ETCDSPEC_CHECKER_CORE"
_CHOICES = ("auto", "pure", "compiled")
_LINEARIZED, _REFUTED = 1, 2
TURN_FACTOR = 16
_SEED_MASK = 0xFFFFFFFFFFFFFFFF
REGISTER, KV = 1, 2  # the models' `flat_code`s: how the C extension decodes them
# PartitionResult's fields, in the order `_wgl.check_fused` gives their values
_RESULT_FIELDS = (
    "partition",
    "verdict",
    "operations",
    "linearization",
    "final_state",
    "failure",
    "reason",
    "steps",
    "seconds",
)


class CoreUnavailable(RuntimeError):
    """ETCDSPEC_CHECKER_CORE=compiled, but the extension was not built."""


def core_choice() -> str:
    """The core ETCDSPEC_CHECKER_CORE asks for: auto, pure or compiled.

    Read on every check (tests and the benchmark set it between checks); through the C
    library's getenv when the extension is built (os.environ's assignments update it),
    a tenth of os.environ.get's cost on a check that starts cold."""
    raw = _wgl.getenv(CORE_ENV) if _wgl is not None else os.environ.get(CORE_ENV)
    if raw is None:
        return "auto"
    choice = raw.strip().lower() or "auto"
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


def compiled_prepare(
    model: CheckModel, code: int, operations: Sequence[Operation], no_key: str = ""
) -> tuple[list[PreparedOp], int] | None:
    """`prepare_all` of the register (code 1) or kv (code 2) model in C, or None when the
    pure path must run (ETCDSPEC_CHECKER_CORE=pure, or the extension is absent)."""
    if not _use_compiled():
        return None
    prepared: tuple[list[PreparedOp], int] = _wgl.prepare(
        code, operations, PreparedOp, PREPARED_DEFAULTS, no_key, model.prepare
    )
    return prepared


class FusedPartition(NamedTuple):
    """One partition as the fused pass leaves it (see the module docstring)."""

    ops: list[Operation]  # the partition's operations, in history order
    search: Any  # its _wgl.Search, not yet run
    values: list[Any]  # the interned values: a state id's value
    infos: int  # how many of its operations are info (its difficulty)


def compiled_fuse(
    model: CheckModel, operations: Sequence[Operation], seed: int
) -> tuple[int, list[tuple[str | None, FusedPartition]]] | None:
    """(dropped, [(partition name, partition), ...] sorted by name) from the fused pass, or
    None when the separate passes must run (no flat code, ETCDSPEC_CHECKER_CORE=pure, the
    extension absent, or an operation the pass does not take). A register history with
    no keyed operation is one partition named None, as `RegisterModel.partitions` says."""
    code = getattr(model, "flat_code", None)
    if code is None or not _use_compiled():
        return None
    fused = _wgl.fuse(code, operations, Operation, "", model.init(), seed & _SEED_MASK)
    if fused is None:
        return None
    dropped, parts = fused
    if code == REGISTER and len(parts) == 1 and parts[0][0] == "":
        return dropped, [(None, FusedPartition(*parts[0][1:]))]
    parts.sort(key=_first)
    return dropped, [
        (key, FusedPartition(ops, search, values, infos))
        for key, ops, search, values, infos in parts
    ]


class FusedTurns(NamedTuple):
    """The fused partitions after their first turns, when one was not linearized there
    (see `compiled_check_fused`)."""

    named: list[tuple[str | None, FusedPartition]]  # sorted by name
    order: list[int]  # the turns' order (indices into named)
    done: list[tuple[tuple[int, ...], Any, int, float]]  # as compiled_first_turns gives
    seconds: float  # the first turn that did not linearize its partition


def compiled_check_fused(
    model: CheckModel,
    operations: Sequence[Operation],
    clock: BudgetClock,
    slice_steps: int,
    check_every: int,
) -> tuple[int, int, tuple[PartitionResult, ...] | FusedTurns] | None:
    """`compiled_fuse` and `compiled_first_turns` in one C call (`_wgl.check_fused`):
    (dropped, operations, then either every partition's result, in name order, when
    each first turn linearized its partition, or the `FusedTurns` for the turns loop to
    go on from), or None when the separate passes must run (as `compiled_fuse`). The
    turns' order is `compiled_first_turns`' callers' (fewest info operations, then
    fewest operations, first). A clean history's check then runs no Python per
    partition: cold, each distinct Python step costs microseconds (docs/benchmarks.md,
    Session 17: kv-1's clean checks)."""
    code = getattr(model, "flat_code", None)
    if code is None or not _use_compiled():
        return None
    fused = _wgl.check_fused(
        code,
        operations,
        Operation,
        "",
        model.init(),
        clock.budget.seed & _SEED_MASK,
        slice_steps * TURN_FACTOR,
        check_every * TURN_FACTOR,
        clock.check,
        OutOfBudget,
        _deadline(clock),
        PartitionResult,
        _RESULT_FIELDS,
        Verdict.TRUE,
    )
    if fused is None or len(fused) == 3:
        return fused
    dropped, count, parts, order, done, seconds, _ = fused
    unkeyed = code == REGISTER and len(parts) == 1 and parts[0][0] == ""
    named = [
        (None if unkeyed else key, FusedPartition(ops, search, values, infos))
        for key, ops, search, values, infos in parts
    ]
    return dropped, count, FusedTurns(named, order, done, seconds)


def _deadline(clock: BudgetClock) -> float:
    """The time the first turns may run to without calling `clock.check`: its time
    limit, or -inf when it has a memory bound to read too (then it is called always)."""
    if clock.budget.max_memory_mb is not None:
        return -math.inf
    return math.inf if clock.deadline is None else clock.deadline


def _first(entry: tuple[Any, ...]) -> Any:
    return entry[0]


def compiled_partitions(items: Sequence[PreparedOp]) -> dict[Any, list[PreparedOp]] | None:
    """The items grouped by their payload's first field (the key), in first-seen key
    order, in C; None when the pure path must run."""
    if not _use_compiled():
        return None
    parts: dict[Any, list[PreparedOp]] = _wgl.group(items)
    return parts


def compiled_infos(items: Sequence[PreparedOp]) -> int | None:
    """How many of the items' operations are not ok, counted in C; None: the pure path."""
    return _wgl.infos(items) if _use_compiled() else None


def compiled_op_ids(
    items: list[PreparedOp] | list[Operation], order: Sequence[int]
) -> tuple[int, ...] | None:
    """The operation ids of `order` (a linearization; items may be the operations
    themselves), in C; None: the pure path."""
    return _wgl.op_ids(items, order) if _use_compiled() else None


def _flat_arrays(
    model: CheckModel, items: Sequence[PreparedOp]
) -> tuple[bytes, list[int], list[int], list[Any], dict[Any, int]] | None:
    """(kinds, a ids, b ids, values, ids) of a partition in Python, or None: no flat
    form, or a value that cannot be interned (see the module docstring)."""
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
    return bytes(kinds), a, b, values, ids


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
    code = getattr(model, "flat_code", None)
    init = model.init()
    flat = None if code is None else _wgl.flatten(code, items, init)
    if flat is not None:
        kinds, a, b, is_ok, calls, rets, values, ids = flat
    else:
        arrays = _flat_arrays(model, items)
        if arrays is None:
            return None
        kinds, a, b, values, ids = arrays
        ops = [p[0] for p in items]
        is_ok = bytes([op.type == "ok" for op in ops])
        calls, rets = [op.call for op in ops], [op.ret for op in ops]
    init_id = 0

    def transform(arg: int, state: int) -> int:
        new = model.transform(values[arg], values[state])
        found = ids.get(new)
        if found is None:
            found = ids[new] = len(values)
            values.append(new)
        return found

    # kv's TRANSFORM (append) runs in C for str values, through `transform` otherwise.
    step = _wgl.Appender(values, ids, transform) if flat is not None and code == KV else transform
    search = _wgl.Search(
        kinds,
        a,
        b,
        is_ok,
        calls,
        rets,
        init_id,
        seed & 0xFFFFFFFFFFFFFFFF,
        step,
    )
    return _drive(
        model,
        items.__getitem__,
        search,
        values,
        init,
        clock,
        progress,
        slice_steps * TURN_FACTOR,
        check_every * TURN_FACTOR,
    )


def compiled_fused_search(
    model: CheckModel,
    part: FusedPartition,
    clock: BudgetClock,
    progress: EntryProgress,
    slice_steps: int,
    check_every: int,
) -> Generator[None, None, EntryOutcome]:
    """`compiled_entry_search` of a partition the fused pass built (its Search ready)."""
    return _drive(
        model,
        _fused_item_at(model, part),
        part.search,
        part.values,
        model.init(),
        clock,
        progress,
        slice_steps * TURN_FACTOR,
        check_every * TURN_FACTOR,
    )


def compiled_first_turns(
    model: CheckModel,
    parts: list[FusedPartition],
    clock: BudgetClock,
    slice_steps: int,
    check_every: int,
) -> tuple[list[tuple[tuple[int, ...], Any, int, float]], float]:
    """The fused partitions' first turns (in the order given), in one C call: each runs
    as `compiled_fused_search`'s generator runs its first turn (the same steps and
    budget checks). Returns, for those that turn linearizes (a prefix of `parts`), (the
    operation ids of the linearization, the state as the model's stepper gives it,
    steps, seconds), and the seconds of the first one it does not linearize (paused,
    refuted, or out of budget: the turns loop then goes on from where its Search is,
    and meets a spent budget again), with its progress recorded. `clock.check` is
    called where the turns loop calls it, but only once the time limit is passed (then
    it raises), unless the budget has a memory bound (then always)."""
    # clock.check is called only once the time limit is passed (it then raises), unless
    # it has a memory bound to read too: no Python call per partition otherwise.
    done, seconds, _ = _wgl.first_turns(
        getattr(model, "flat_code", None),
        parts,
        slice_steps * TURN_FACTOR,
        check_every * TURN_FACTOR,
        clock.check,
        OutOfBudget,
        _deadline(clock),
    )
    return done, seconds


def fused_refuted(part: FusedPartition) -> bool:
    """Whether the partition's search has ended refuted (`run(0)` takes no step: it
    says where the search stands)."""
    return bool(part.search.run(0) == _REFUTED)


def fused_outcome(model: CheckModel, part: FusedPartition) -> tuple[EntryOutcome, int]:
    """(outcome, steps) of a fused partition whose search has ended, as
    `compiled_fused_search` returns them."""
    search = part.search
    return _outcome(model, _fused_item_at(model, part), search, part.values, model.init()), int(
        search.steps
    )


def _fused_item_at(model: CheckModel, part: FusedPartition) -> Callable[[int], PreparedOp]:
    def item_at(i: int) -> PreparedOp:
        item = model.prepare(part.ops[i])
        assert item is not None  # the fused pass dropped what prepare drops
        return item

    return item_at


def fused_progress(part: FusedPartition, progress: EntryProgress) -> None:
    """`progress` as the search's generator leaves it after its last run."""
    search = part.search
    progress.steps, progress.placed = search.steps, search.depth
    progress.configurations = search.configurations


def _drive(
    model: CheckModel,
    item_at: Callable[[int], PreparedOp],
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
    outcome = _outcome(model, item_at, search, values, init)
    if not outcome.linearized:
        progress.placed = 0
    return outcome


def _outcome(
    model: CheckModel,
    item_at: Callable[[int], PreparedOp],
    search: Any,
    values: list[Any],
    init: Hashable,
) -> EntryOutcome:
    """The ended search's linearization, or its deepest configuration when refuted, with
    the state the model's stepper gives there."""
    order, _, before = search.outcome()
    if order:
        last = item_at(order[-1])
        state = model.stepper(last)(values[before])[0]
    else:
        state = init
    return EntryOutcome(bool(search.run(0) == _LINEARIZED), order, state)

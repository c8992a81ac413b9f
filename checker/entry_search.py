"""The linearizability search's hot loop for models without revision hints (register, kv).

Contract:
- `entry_search(...)` is one partition's depth-first search (Wing & Gong with Lowe's
  memo), as checker/linearizability.py's `_Search` describes it, over the call and
  return entries of the partition's operations in one doubly linked list (porcupine's
  `checkSingle`): an operation is a candidate while its call entry comes before the
  first return entry left in the list (the earliest return among the unplaced ok
  operations; a return and a call at the same position: the return first, so a call
  must come strictly before it). Placing an operation lifts its entries out of the list
  in O(1) and backtracking puts them back, so finding the next candidate skips no
  placed operation (the scan of every placed operation after the first unplaced one
  was most of the old loop's time).
- Candidates are tried in the old loop's order: call order (ties by index), each
  one's next states in the model's order; an info operation that leaves the state as it
  was is not placed (dominated by not placing it). The memo is keyed by (Zobrist hash of
  the ok operations placed, state) and holds the sets of info operations placed (int
  bitsets) with which that configuration was searched; a configuration is pruned when
  one of them is a subset of its own (subsumption: with the same ok operations placed,
  the candidates are the same, and an info operation may stay unplaced, so more of them
  placed can only do less). Without info operations that is the old memo exactly; with
  them, fewer configurations are searched, so steps and the deepest configuration
  reported may differ, never the verdict (tests/checker/test_checker_entry_search.py
  compares the two loops on generated histories).
- It is a generator: it yields after each `slice_steps` steps (a partition's turn) and
  returns an `EntryOutcome`. `clock.check()` runs every `check_every` steps; the
  OutOfBudget it may raise propagates to the caller, which reads how far the search got
  from the `EntryProgress` it passed in (kept current at each turn, check and return).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from etcdspec.checker.budget import BudgetClock
from etcdspec.checker.models import PreparedOp

_NONE = object()  # no next state chosen (None is a state: kv's absent key)


@dataclass
class EntryProgress:
    """How far a search has got: read by the caller when the budget runs out."""

    steps: int = 0
    placed: int = 0
    configurations: int = 0  # memo keys (kept by the compiled core, whose memo is its own)


@dataclass(frozen=True)
class EntryOutcome:
    """A finished search: `linearized` True with `order` (indices in placement order) and
    the final `state`; False with the deepest configuration reached (`order` placed,
    `state` there), the one a failure report describes."""

    linearized: bool
    order: tuple[int, ...]
    state: Any


def entry_list(calls: Sequence[int], rets: Sequence[int | None]) -> list[int]:
    """The entries in list order: node 2i is op i's call, 2i+1 its return (ok operations
    only; info operations never return). Sorted by position, a return before a call at
    the same position, then by index."""
    keyed = [(call, 1, 2 * i) for i, call in enumerate(calls)]
    keyed.extend((ret, 0, 2 * i + 1) for i, ret in enumerate(rets) if ret is not None)
    keyed.sort()
    return [node for _, _, node in keyed]


def entry_search(
    items: Sequence[PreparedOp],
    init: Hashable,
    steppers: Sequence[Callable[[Any], Sequence[Any]]],
    is_ok: Sequence[bool],
    returns: Sequence[bool],
    zobrist: Sequence[int],
    memo: dict[tuple[int, Hashable], list[int]],
    clock: BudgetClock,
    progress: EntryProgress,
    slice_steps: int,
    check_every: int,
    info_state_possible: Callable[[PreparedOp, Any], bool] | None,
) -> Generator[None, None, EntryOutcome]:
    """Search one partition (see the module docstring). `steppers[i](state)`: op i's next
    states from `state` (CheckModel.stepper); `returns[i]`: op i has a return entry (it
    bounds the candidates and must be placed); `entry_list` gives the order."""
    n = len(items)
    order = entry_list(
        [p.op.call for p in items], [p.op.ret if returns[i] else None for i, p in enumerate(items)]
    )
    head = 2 * n  # the list's head: never a candidate
    nxt = [-1] * (2 * n + 1)
    prv = [-1] * (2 * n + 1)
    last = head
    for node in order:
        nxt[last] = node
        prv[node] = last
        last = node
    must_place = sum(1 for r in returns if r)
    placed_returns = 0
    # The stack: per placed op, [index, state before, hash before, its states, next state].
    stack: list[list[Any]] = []
    path: list[int] = []  # the indices on the stack, copied cheaply for `deepest`
    state: Any = init
    z = 0  # Zobrist hash of the ok operations placed
    bits = 0  # the info operations placed, one bit each
    info_bit = [0] * n
    count = 0
    for i in range(n):
        if not is_ok[i]:
            info_bit[i] = 1 << count
            count += 1
    best_depth = -1
    best_pending = True
    deepest: tuple[tuple[int, ...], Any] = ((), init)
    steps = 0
    next_turn = slice_steps
    if must_place == 0:
        return EntryOutcome(True, (), init)
    entry = nxt[head]
    while True:
        if steps >= next_turn:
            next_turn = steps + slice_steps
            progress.steps, progress.placed = steps, len(stack)
            yield
        if entry >= 0 and not entry & 1:  # a call entry: try placing its operation
            i = entry >> 1
            steps += 1
            if steps % check_every == 0:
                progress.steps, progress.placed = steps, len(stack)
                clock.check()
            prepared = items[i]
            states = steppers[i](state)
            if not states:
                entry = nxt[entry]
                continue
            ok = is_ok[i]
            if ok:
                zi, bi = z ^ zobrist[i], bits
            else:
                zi, bi = z, bits | info_bit[i]
            k = 0
            chosen: Any = _NONE
            while k < len(states):
                new = states[k]
                k += 1
                if not ok and (
                    new == state
                    or (info_state_possible is not None and not info_state_possible(prepared, new))
                ):
                    continue
                key = (zi, new)
                seen = memo.get(key)
                if seen is None:
                    memo[key] = [bi]
                else:
                    for earlier in seen:
                        if earlier & bi == earlier:
                            break
                    else:
                        seen.append(bi)
                        chosen = new
                        break
                    continue
                chosen = new
                break
            if chosen is _NONE:
                entry = nxt[entry]
                continue
            # Lift op i's entries out of the list.
            a, b = prv[entry], nxt[entry]
            nxt[a] = b
            if b >= 0:
                prv[b] = a
            if returns[i]:
                r = entry + 1
                a, b = prv[r], nxt[r]
                nxt[a] = b
                if b >= 0:
                    prv[b] = a
                placed_returns += 1
            stack.append([i, state, z, bits, states, k])
            path.append(i)
            state, z, bits = chosen, zi, bi
            if len(stack) > best_depth:
                best_pending = True
            if placed_returns == must_place:
                progress.steps, progress.placed = steps, len(stack)
                return EntryOutcome(True, tuple(path), state)
            entry = nxt[head]
            continue
        # A return entry (or the list's end): this configuration has no candidate left.
        if best_pending and len(stack) >= best_depth:
            deepest = (tuple(path), state)
            best_depth = len(stack)
            best_pending = False
        while True:
            if not stack:
                progress.steps, progress.placed = steps, 0
                return EntryOutcome(False, *deepest)
            frame = stack.pop()
            path.pop()
            i, state, z, bits, states, k = frame
            node = 2 * i
            # Put op i's entries back (in the reverse order of lifting).
            if returns[i]:
                r = node + 1
                nxt[prv[r]] = r
                if nxt[r] >= 0:
                    prv[nxt[r]] = r
                placed_returns -= 1
            nxt[prv[node]] = node
            if nxt[node] >= 0:
                prv[nxt[node]] = node
            # The op's other next states, if the model gave several.
            ok = is_ok[i]
            if ok:
                zi, bi = z ^ zobrist[i], bits
            else:
                zi, bi = z, bits | info_bit[i]
            chosen = _NONE
            prepared = items[i]
            while k < len(states):
                new = states[k]
                k += 1
                if not ok and (
                    new == state
                    or (info_state_possible is not None and not info_state_possible(prepared, new))
                ):
                    continue
                key = (zi, new)
                seen = memo.get(key)
                if seen is None:
                    memo[key] = [bi]
                else:
                    for earlier in seen:
                        if earlier & bi == earlier:
                            break
                    else:
                        seen.append(bi)
                        chosen = new
                        break
                    continue
                chosen = new
                break
            if chosen is _NONE:
                entry = nxt[node]
                break
            # Re-place op i in its next state: lift it again.
            a, b = prv[node], nxt[node]
            nxt[a] = b
            if b >= 0:
                prv[b] = a
            if returns[i]:
                r = node + 1
                a, b = prv[r], nxt[r]
                nxt[a] = b
                if b >= 0:
                    prv[b] = a
                placed_returns += 1
            frame[5] = k
            stack.append(frame)
            path.append(i)
            state, z, bits = chosen, zi, bi
            if len(stack) > best_depth:
                best_pending = True
            if placed_returns == must_place:
                progress.steps, progress.placed = steps, len(stack)
                return EntryOutcome(True, tuple(path), state)
            entry = nxt[head]
            break

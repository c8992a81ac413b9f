"""Counterexamples in the spec's own vocabulary: read from a Z3 model, shown, exported.

A counterexample is a run of states (one pre and one post state for a counterexample
to induction; several for a bounded run or a witness). Values are plain Python, the
same shapes the finite evaluator takes: elements of an ordered sort are ints (their
rank), other elements strings such as 'node0'; a relation is a frozenset of tuples
(of bare elements when it has one argument), a function a dict keyed the same way, a
constant its value. `describe()` is the canonical text; `to_itf()` the ITF trace.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import z3

from etcdspec.itf import ItfTrace
from etcdspec.spec import ast
from etcdspec.spec.z3backend import State, Vocabulary


class ElementNames:
    """Names the elements of each sort in one Z3 model."""

    def __init__(self, model: z3.ModelRef, vocab: Vocabulary) -> None:
        self.model = model
        self.vocab = vocab
        self.universes: dict[str, list[Any]] = {}
        self._names: dict[int, Any] = {}
        self._elements: dict[str, list[z3.ExprRef]] = {}
        for name, sort in vocab.sorts.items():
            if vocab.finite:
                elements = list(vocab.elements[name])
            else:
                universe = model.get_universe(sort)
                elements = list(universe) if universe is not None else []
                if name in vocab.le:
                    elements.sort(key=functools.cmp_to_key(self._comparator(vocab.le[name])))
            values: list[Any] = []
            for rank, element in enumerate(elements):
                value: Any = rank if name in vocab.le else f"{name}{rank}"
                self._names[self._key(element)] = value
                values.append(value)
            self.universes[name] = values
            self._elements[name] = elements

    def _comparator(self, le: z3.FuncDeclRef) -> Callable[[z3.ExprRef, z3.ExprRef], int]:
        def compare(a: z3.ExprRef, b: z3.ExprRef) -> int:
            if z3.eq(a, b):
                return 0
            return -1 if z3.is_true(self.model.eval(le(a, b), model_completion=True)) else 1

        return compare

    @staticmethod
    def _key(element: z3.ExprRef) -> int:
        return element.get_id()  # Z3 terms are hash-consed: one id per element

    def value(self, term: z3.ExprRef) -> Any:
        evaluated = self.model.eval(term, model_completion=True)
        if z3.is_bool(evaluated):
            return z3.is_true(evaluated)
        return self._names.get(self._key(evaluated), str(evaluated))

    def read_symbol(self, sym: ast.SymbolDecl, apply: Any) -> Any:
        if not sym.arg_sorts:
            return self.value(apply([]))
        domains = [
            list(zip(self._elements[s], self.universes[s], strict=True)) for s in sym.arg_sorts
        ]
        pairs = []
        for combo in itertools.product(*domains):
            names = tuple(name for _, name in combo)
            key: Any = names[0] if len(names) == 1 else names
            pairs.append((key, self.value(apply([element for element, _ in combo]))))
        if sym.kind is ast.SymbolKind.RELATION:
            return frozenset(k for k, v in pairs if v)
        return dict(pairs)

    def read_state(self, state: State, symbols: Sequence[ast.SymbolDecl]) -> dict[str, Any]:
        return {sym.name: self.read_symbol(sym, state.interps[sym.name]) for sym in symbols}

    def read_run(
        self,
        states: Sequence[State],
        symbols: Sequence[ast.SymbolDecl],
        assigned: Sequence[set[str]],
    ) -> tuple[dict[str, Any], ...]:
        """The states of a run whose step k assigns only the symbols `assigned[k]`: the
        others keep their values (the frame), so only the assigned ones are read again."""
        run = [self.read_state(states[0], symbols)] if states else []
        for state, changed in zip(states[1:], assigned, strict=True):
            reread = [sym for sym in symbols if sym.name in changed]
            run.append({**run[-1], **self.read_state(state, reread)})
        return tuple(run)

    def read_rigid(self) -> dict[str, Any]:
        result = {}
        for sym in self.vocab.info.rigid_symbols():
            decl = self.vocab.rigid[sym.name]
            result[sym.name] = self.read_symbol(sym, lambda args, d=decl: d(*args) if args else d())
        return result


def format_value(value: Any) -> str:
    """Canonical text of a plain value (sorted, so the same state prints the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "(" + ", ".join(format_value(v) for v in value) + ")"
    if isinstance(value, (set, frozenset)):
        items = sorted(value, key=_order_key)
        return "{" + ", ".join(format_value(v) for v in items) + "}"
    if isinstance(value, Mapping):
        keys = sorted(value, key=_order_key)
        return "{" + ", ".join(f"{format_value(k)} -> {format_value(value[k])}" for k in keys) + "}"
    return str(value)


def _order_key(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_order_key(v) for v in value)
    return (0, value, "") if isinstance(value, int) else (1, 0, str(value))


@dataclass(frozen=True)
class Counterexample:
    """A run in the spec's vocabulary: states and the labelled steps between them."""

    title: str
    universes: Mapping[str, tuple[Any, ...]]
    rigid: Mapping[str, Any]
    states: tuple[Mapping[str, Any], ...]
    steps: tuple[str, ...]  # steps[i] leads from states[i] to states[i + 1]
    state_labels: tuple[str, ...] = ()

    def describe(self) -> str:
        lines = [self.title]
        sorts = "; ".join(f"{s} = {format_value(frozenset(v))}" for s, v in self.universes.items())
        lines.append(f"  sorts: {sorts}")
        for name, value in self.rigid.items():
            lines.append(f"  {name} = {format_value(value)}")
        previous: Mapping[str, Any] | None = None
        for index, state in enumerate(self.states):
            label = self.state_labels[index] if index < len(self.state_labels) else f"state {index}"
            if index > 0:
                lines.append(f"  --- {self.steps[index - 1]} --->")
            if previous is None:
                lines.append(f"  {label}:")
                lines += [f"    {name} = {format_value(value)}" for name, value in state.items()]
            else:
                changed = [(n, v) for n, v in state.items() if previous.get(n) != v]
                lines.append(
                    f"  {label} (changed; all else as before):"
                    if changed
                    else f"  {label}: (no change)"
                )
                lines += [f"    {name} = {format_value(value)}" for name, value in changed]
            previous = state
        return "\n".join(lines)

    def to_itf(self, source: str) -> ItfTrace:
        variables = list(self.states[0]) if self.states else []
        trace = ItfTrace(variables=variables, source=source, description=self.title)
        for index, state in enumerate(self.states):
            trace.add_state(dict(state), self.steps[index - 1] if index > 0 else "")
        return trace

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "steps": list(self.steps),
            "text": self.describe(),
        }


def describe_params(names: ElementNames, params: Mapping[str, z3.ExprRef]) -> str:
    return ", ".join(f"{n}={format_value(names.value(v))}" for n, v in params.items())

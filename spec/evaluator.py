"""The finite evaluator: run a spec on a small instance, over plain Python values.

An `Instance` gives each sort its elements (a finite sequence; elements of an ordered
sort must be comparable with `<`, e.g. ints) and the rigid symbols' values. A state is
a mapping from each state symbol to its value:
- a relation: a set of argument tuples (a set of bare elements if it has one argument;
  a bool if it has none);
- a function: a dict from argument tuple (or bare element) to value;
- a constant: its value.

`satisfies(spec, action, params, pre, post, instance)` decides whether the pair of
states is a step of the action with those parameters (guard holds in `pre`, `post` is
exactly the update of `pre`, the frame included). `holds(...)` evaluates a formula,
`step(...)` computes the post-state, `successors(...)` lists every step from a state,
`initial(...)` checks init conditions. The model's
refinement check uses this API. No I/O; errors are `EvaluationError` with what was
wrong and where.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from etcdspec.spec import ast
from etcdspec.spec.loader import LoadedSpec
from etcdspec.spec.typecheck import SpecInfo


class EvaluationError(Exception):
    """A state, parameter or instance does not fit the spec (names what and where)."""


@dataclass(frozen=True)
class Instance:
    """A finite instance: the elements of each sort and the values of rigid symbols."""

    universes: Mapping[str, Sequence[Any]]
    rigid: Mapping[str, Any] = field(default_factory=dict)


def _key(args: Sequence[Any]) -> Any:
    return args[0] if len(args) == 1 else tuple(args)


class _Eval:
    def __init__(self, info: SpecInfo, instance: Instance, state: Mapping[str, Any]) -> None:
        self.info = info
        self.instance = instance
        self.state = state
        for sort in info.sorts:
            if sort not in instance.universes:
                raise EvaluationError(f"the instance gives no elements for sort '{sort}'")

    def value_of(self, name: str, args: Sequence[Any]) -> Any:
        sym = self.info.symbols[name]
        source = self.instance.rigid if sym.rigid else self.state
        if name not in source:
            where = "the instance's rigid values" if sym.rigid else "the state"
            raise EvaluationError(f"{where} lack(s) '{name}'")
        value = source[name]
        if sym.kind is ast.SymbolKind.CONSTANT:
            return value
        if sym.kind is ast.SymbolKind.RELATION:
            if not sym.arg_sorts:
                return bool(value)
            return _key(args) in value or tuple(args) in value
        key = _key(args)
        if key in value:
            return value[key]
        if tuple(args) in value:
            return value[tuple(args)]
        raise EvaluationError(f"function '{name}' has no value at {key!r}")

    def expr(self, expr: ast.Expr, env: Mapping[str, Any]) -> Any:
        if isinstance(expr, ast.BoolLit):
            return expr.value
        if isinstance(expr, ast.Name):
            if expr.name in env:
                return env[expr.name]
            return self.apply(expr.name, [])
        if isinstance(expr, ast.App):
            return self.apply(expr.name, [self.expr(a, env) for a in expr.args])
        if isinstance(expr, ast.Not):
            return not self.expr(expr.operand, env)
        if isinstance(expr, ast.And):
            return all(self.expr(e, env) for e in expr.operands)
        if isinstance(expr, ast.Or):
            return any(self.expr(e, env) for e in expr.operands)
        if isinstance(expr, ast.Implies):
            return (not self.expr(expr.left, env)) or bool(self.expr(expr.right, env))
        if isinstance(expr, ast.Iff):
            return bool(self.expr(expr.left, env)) == bool(self.expr(expr.right, env))
        if isinstance(expr, ast.Compare):
            left, right = self.expr(expr.left, env), self.expr(expr.right, env)
            return {
                ast.CmpOp.EQ: lambda: left == right,
                ast.CmpOp.NE: lambda: left != right,
                ast.CmpOp.LT: lambda: left < right,
                ast.CmpOp.LE: lambda: left <= right,
                ast.CmpOp.GT: lambda: left > right,
                ast.CmpOp.GE: lambda: left >= right,
            }[expr.op]()
        if isinstance(expr, ast.Ite):
            return self.expr(expr.then if self.expr(expr.cond, env) else expr.orelse, env)
        if isinstance(expr, ast.Quant):
            domains = [self.instance.universes[b.sort] for b in expr.binders]
            results = (
                self.expr(
                    expr.body,
                    {**env, **{b.name: v for b, v in zip(expr.binders, combo, strict=True)}},
                )
                for combo in itertools.product(*domains)
            )
            return all(results) if expr.universal else any(results)
        raise AssertionError(f"unknown expression {expr!r}")

    def apply(self, name: str, args: list[Any]) -> Any:
        if name in self.info.symbols:
            return self.value_of(name, args)
        define = self.info.defines[name]
        return self.expr(define.body, {p.name: a for p, a in zip(define.params, args, strict=True)})


def _normalize(sym: ast.SymbolDecl, value: Any) -> Any:
    """One canonical shape per symbol, so states compare equal however they were written."""
    if sym.kind is ast.SymbolKind.CONSTANT:
        return value
    if sym.kind is ast.SymbolKind.RELATION:
        if not sym.arg_sorts:
            return bool(value)
        return frozenset(_key(x if isinstance(x, tuple) else (x,)) for x in value)
    return {_key(k if isinstance(k, tuple) else (k,)): v for k, v in value.items()}


def holds(
    loaded: LoadedSpec,
    formula: ast.Expr,
    state: Mapping[str, Any],
    instance: Instance,
    env: Mapping[str, Any] | None = None,
) -> bool:
    return bool(_Eval(loaded.info, instance, state).expr(formula, env or {}))


def check_state(loaded: LoadedSpec, state: Mapping[str, Any]) -> None:
    missing = [s.name for s in loaded.info.state_symbols() if s.name not in state]
    if missing:
        raise EvaluationError(
            f"the state lacks {', '.join(missing)}: give every state symbol a value"
        )


def _params(action: ast.ActionDecl, params: Mapping[str, Any]) -> dict[str, Any]:
    names = [p.name for p in action.params]
    missing = [n for n in names if n not in params]
    extra = [n for n in params if n not in names]
    if missing or extra:
        raise EvaluationError(
            f"action {action.name}({', '.join(names)}): missing {missing or 'none'}, unknown {extra or 'none'}"
        )
    return {n: params[n] for n in names}


def enabled(
    loaded: LoadedSpec,
    action_name: str,
    params: Mapping[str, Any],
    pre: Mapping[str, Any],
    instance: Instance,
) -> bool:
    action = _action(loaded, action_name)
    check_state(loaded, pre)
    env = _params(action, params)
    ev = _Eval(loaded.info, instance, pre)
    return all(ev.expr(s.formula, env) for s in action.body if isinstance(s, ast.Require))


def step(
    loaded: LoadedSpec,
    action_name: str,
    params: Mapping[str, Any],
    pre: Mapping[str, Any],
    instance: Instance,
) -> dict[str, Any]:
    """The post-state of the action's updates on `pre` (the guard is not checked here)."""
    action = _action(loaded, action_name)
    check_state(loaded, pre)
    env = _params(action, params)
    ev = _Eval(loaded.info, instance, pre)
    post = {s.name: _normalize(s, pre[s.name]) for s in loaded.info.state_symbols()}
    for stmt in action.body:
        if not isinstance(stmt, ast.Assign):
            continue
        sym = loaded.info.symbols[stmt.target]
        binder_names = {b.name for b in stmt.binders}
        fixed = [
            None if isinstance(a, ast.Name) and a.name in binder_names else ev.expr(a, env)
            for a in stmt.args
        ]
        domains = [
            instance.universes[sort] if f is None else [f]
            for f, sort in zip(fixed, sym.arg_sorts, strict=True)
        ]
        current = post[sym.name]
        if sym.kind is ast.SymbolKind.CONSTANT or not sym.arg_sorts:
            value = ev.expr(stmt.value, env)
            post[sym.name] = bool(value) if sym.kind is ast.SymbolKind.RELATION else value
            continue
        updated: Any = set(current) if sym.kind is ast.SymbolKind.RELATION else dict(current)
        for combo in itertools.product(*domains):
            inner = dict(env)
            for arg, value in zip(stmt.args, combo, strict=True):
                if isinstance(arg, ast.Name) and arg.name in binder_names:
                    inner[arg.name] = value
            new_value = ev.expr(stmt.value, inner)
            key = _key(combo)
            if sym.kind is ast.SymbolKind.RELATION:
                if new_value:
                    updated.add(key)
                else:
                    updated.discard(key)
            else:
                updated[key] = new_value
        post[sym.name] = frozenset(updated) if sym.kind is ast.SymbolKind.RELATION else updated
    return post


def satisfies(
    loaded: LoadedSpec,
    action_name: str,
    params: Mapping[str, Any],
    pre: Mapping[str, Any],
    post: Mapping[str, Any],
    instance: Instance,
) -> bool:
    """Whether (pre, post) is a step of `action_name` with `params` on `instance`."""
    if not enabled(loaded, action_name, params, pre, instance):
        return False
    check_state(loaded, post)
    expected = step(loaded, action_name, params, pre, instance)
    return all(expected[s.name] == _normalize(s, post[s.name]) for s in loaded.info.state_symbols())


def initial(loaded: LoadedSpec, state: Mapping[str, Any], instance: Instance) -> bool:
    check_state(loaded, state)
    ev = _Eval(loaded.info, instance, state)
    return all(ev.expr(d.formula, {}) for d in loaded.spec.formulas(ast.FormulaKind.INIT))


def violated_properties(
    loaded: LoadedSpec, state: Mapping[str, Any], instance: Instance
) -> list[str]:
    """The invariants and safety properties that fail in `state`."""
    check_state(loaded, state)
    ev = _Eval(loaded.info, instance, state)
    return [d.name for d in loaded.spec.properties() if not ev.expr(d.formula, {})]


def _action(loaded: LoadedSpec, name: str) -> ast.ActionDecl:
    action = loaded.spec.action(name)
    if action is None:
        known = ", ".join(a.name for a in loaded.spec.actions())
        raise EvaluationError(f"unknown action '{name}' (actions: {known})")
    return action


def successors(
    loaded: LoadedSpec, state: Mapping[str, Any], instance: Instance
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Every step from `state`: (action, parameters, post-state) for each action and each
    choice of parameters from the instance whose guard holds (runs a spec on an instance)."""
    check_state(loaded, state)
    steps = []
    for action in loaded.spec.actions():
        domains = [instance.universes[p.sort] for p in action.params]
        for combo in itertools.product(*domains):
            params = {p.name: v for p, v in zip(action.params, combo, strict=True)}
            if enabled(loaded, action.name, params, state, instance):
                steps.append(
                    (action.name, params, step(loaded, action.name, params, state, instance))
                )
    return steps

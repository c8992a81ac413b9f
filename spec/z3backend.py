"""The Z3 backend: a spec's vocabulary, states and actions as Z3 formulas.

Two modes share one encoder:
- unbounded (proofs): every sort is an uninterpreted Z3 sort; an ordered sort gets a
  rigid `le` relation with the axioms of a total order, so queries over specs written
  in the EPR style stay decidable;
- finite (bounded model checking, counterexample search on small instances): every
  sort is a Z3 enumeration of the given size and `le` is the order of the elements;
  quantifiers stay quantifiers (Z3 instantiates them over the finite domains much
  faster than expanding them in Python would).

A `State` maps each state symbol to an interpretation: a callable from Z3 argument terms
to a Z3 term. The post-state of an action is built by substitution (an assigned symbol
becomes an `If` chain over the pre-state; an unassigned one is the pre-state's own
symbol), so the frame is derived from the assignments and costs no quantifier.
Definitions are expanded at their uses. The encoder does no I/O.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import z3

from etcdspec.spec import ast
from etcdspec.spec.typecheck import BOOL, SpecInfo, symbol_type

Interp = Callable[[Sequence[z3.ExprRef]], z3.ExprRef]

# Z3 enumeration sort names must be unique in their context, and Z3's search depends on
# the names (raft_steps' "record_ack can fire" on 4 elements: 53k rlimit as the first
# spec of a process, 2.2M with the names numbered on after raft's proof). So the names
# are numbered per context: a Prover's own context (etcdspec.spec.prove) numbers them
# the same way whatever was proved before it in the process.
_INSTANCES: weakref.WeakKeyDictionary[z3.Context, Iterator[int]] = weakref.WeakKeyDictionary()


def _next_instance(ctx: z3.Context) -> int:
    if ctx not in _INSTANCES:
        _INSTANCES[ctx] = itertools.count()
    return next(_INSTANCES[ctx])


@dataclass
class State:
    """Interpretations of the state symbols in one state."""

    name: str
    interps: dict[str, Interp]
    decls: dict[str, z3.FuncDeclRef]  # the fresh symbols of this state (empty for derived states)


class Vocabulary:
    """Z3 sorts, the order relations and the rigid symbols of a checked spec, in the Z3
    context `ctx` (default: Z3's main context)."""

    def __init__(
        self,
        info: SpecInfo,
        sizes: Mapping[str, int] | None = None,
        ctx: z3.Context | None = None,
    ) -> None:
        self.info = info
        self.ctx = ctx if ctx is not None else z3.main_ctx()
        self.finite = sizes is not None
        self.sorts: dict[str, z3.SortRef] = {}
        self.elements: dict[str, list[z3.ExprRef]] = {}
        self.le: dict[str, z3.FuncDeclRef] = {}
        self._fresh = itertools.count()
        for name in info.sorts:
            if sizes is not None:
                size = sizes.get(name, 2)
                uid = _next_instance(self.ctx)
                sort, consts = z3.EnumSort(
                    f"{name}!{uid}", [f"{name}{k}!{uid}" for k in range(size)], ctx=self.ctx
                )
                self.sorts[name] = sort
                self.elements[name] = list(consts)
            else:
                self.sorts[name] = z3.DeclareSort(name, self.ctx)
            if info.is_ordered(name):
                self.le[name] = z3.Function(
                    f"le_{name}", self.sorts[name], self.sorts[name], z3.BoolSort(self.ctx)
                )
        self.rigid: dict[str, z3.FuncDeclRef] = {
            sym.name: self._declare(sym, "") for sym in info.rigid_symbols()
        }

    def z3_sort(self, sort: str) -> z3.SortRef:
        return z3.BoolSort(self.ctx) if sort == BOOL else self.sorts[sort]

    def _declare(self, sym: ast.SymbolDecl, suffix: str) -> z3.FuncDeclRef:
        domain = [self.sorts[s] for s in sym.arg_sorts]
        return z3.Function(sym.name + suffix, *domain, self.z3_sort(symbol_type(sym)))

    def fresh_name(self, base: str) -> str:
        return f"{base}!{next(self._fresh)}"

    def new_state(self, name: str) -> State:
        decls = {sym.name: self._declare(sym, f"@{name}") for sym in self.info.state_symbols()}
        interps: dict[str, Interp] = {n: _apply(d) for n, d in decls.items()}
        return State(name, interps, decls)

    def order_axioms(self) -> list[z3.BoolRef]:
        axioms: list[z3.BoolRef] = []
        for name, le in self.le.items():
            if self.finite:
                elems = self.elements[name]
                for (i, a), (j, b) in itertools.product(enumerate(elems), repeat=2):
                    axioms.append(le(a, b) == z3.BoolVal(i <= j, self.ctx))
                continue
            s = self.sorts[name]
            x, y, z = z3.Consts(f"x_{name} y_{name} z_{name}", s)
            axioms += [
                z3.ForAll([x], le(x, x)),
                z3.ForAll([x, y, z], z3.Implies(z3.And(le(x, y), le(y, z)), le(x, z))),
                z3.ForAll([x, y], z3.Implies(z3.And(le(x, y), le(y, x)), x == y)),
                z3.ForAll([x, y], z3.Or(le(x, y), le(y, x))),
            ]
        return axioms

    def axioms(self, encoder: Encoder) -> list[z3.BoolRef]:
        """The order axioms and the spec's own axioms (over the rigid symbols)."""
        spec_axioms = [
            encoder.formula(d.formula, None, {})
            for d in self.info.spec.formulas(ast.FormulaKind.AXIOM)
        ]
        return self.order_axioms() + spec_axioms


def _apply(decl: z3.FuncDeclRef) -> Interp:
    def interp(args: Sequence[z3.ExprRef]) -> z3.ExprRef:
        return decl(*args) if args else decl()

    return interp


class Encoder:
    """Translates spec expressions to Z3 in a given state and variable environment."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.info = vocab.info

    def formula(
        self, expr: ast.Expr, state: State | None, env: Mapping[str, z3.ExprRef]
    ) -> z3.BoolRef:
        result = self.expr(expr, state, env)
        assert z3.is_bool(result)
        return result

    def expr(
        self, expr: ast.Expr, state: State | None, env: Mapping[str, z3.ExprRef]
    ) -> z3.ExprRef:
        if isinstance(expr, ast.BoolLit):
            return z3.BoolVal(expr.value, self.vocab.ctx)
        if isinstance(expr, ast.Name):
            if expr.name in env:
                return env[expr.name]
            return self.apply(expr.name, [], state)
        if isinstance(expr, ast.App):
            return self.apply(expr.name, [self.expr(a, state, env) for a in expr.args], state)
        if isinstance(expr, ast.Not):
            return z3.Not(self.expr(expr.operand, state, env))
        if isinstance(expr, ast.And):
            return z3.And(*[self.expr(e, state, env) for e in expr.operands])
        if isinstance(expr, ast.Or):
            return z3.Or(*[self.expr(e, state, env) for e in expr.operands])
        if isinstance(expr, ast.Implies):
            return z3.Implies(self.expr(expr.left, state, env), self.expr(expr.right, state, env))
        if isinstance(expr, ast.Iff):
            return self.expr(expr.left, state, env) == self.expr(expr.right, state, env)
        if isinstance(expr, ast.Compare):
            return self.compare(expr, state, env)
        if isinstance(expr, ast.Ite):
            return z3.If(
                self.expr(expr.cond, state, env),
                self.expr(expr.then, state, env),
                self.expr(expr.orelse, state, env),
            )
        if isinstance(expr, ast.Quant):
            return self.quantifier(expr, state, env)
        raise AssertionError(f"unknown expression {expr!r}")

    def compare(
        self, expr: ast.Compare, state: State | None, env: Mapping[str, z3.ExprRef]
    ) -> z3.ExprRef:
        left = self.expr(expr.left, state, env)
        right = self.expr(expr.right, state, env)
        op = expr.op
        if op is ast.CmpOp.EQ:
            return left == right
        if op is ast.CmpOp.NE:
            return left != right
        le = self.vocab.le[_sort_name(self.vocab, left)]
        if op is ast.CmpOp.LE:
            return le(left, right)
        if op is ast.CmpOp.GE:
            return le(right, left)
        if op is ast.CmpOp.LT:
            return z3.And(le(left, right), left != right)
        return z3.And(le(right, left), left != right)

    def quantifier(
        self, expr: ast.Quant, state: State | None, env: Mapping[str, z3.ExprRef]
    ) -> z3.ExprRef:
        bound = [
            z3.Const(self.vocab.fresh_name(b.name), self.vocab.sorts[b.sort]) for b in expr.binders
        ]
        inner = dict(env)
        inner.update({b.name: c for b, c in zip(expr.binders, bound, strict=True)})
        body = self.expr(expr.body, state, inner)
        return z3.ForAll(bound, body) if expr.universal else z3.Exists(bound, body)

    def apply(self, name: str, args: list[z3.ExprRef], state: State | None) -> z3.ExprRef:
        rigid = self.vocab.rigid.get(name)
        if rigid is not None:
            return rigid(*args) if args else rigid()
        if name in self.info.symbols:
            if state is None:
                raise AssertionError(f"state symbol '{name}' used where no state is given")
            return state.interps[name](args)
        define = self.info.defines[name]
        inner = {p.name: a for p, a in zip(define.params, args, strict=True)}
        return self.expr(define.body, state, inner)

    # ------------------------------------------------------------ actions

    def action_params(self, action: ast.ActionDecl, tag: str) -> dict[str, z3.ExprRef]:
        return {
            p.name: z3.Const(f"{action.name}.{p.name}{tag}", self.vocab.sorts[p.sort])
            for p in action.params
        }

    def guard(
        self, action: ast.ActionDecl, pre: State, params: Mapping[str, z3.ExprRef]
    ) -> z3.BoolRef:
        requires = [
            self.formula(s.formula, pre, params) for s in action.body if isinstance(s, ast.Require)
        ]
        return z3.And(*requires) if requires else z3.BoolVal(True, self.vocab.ctx)

    def post_state(
        self, action: ast.ActionDecl, pre: State, params: Mapping[str, z3.ExprRef]
    ) -> State:
        """The state after `action`, by substitution into the pre-state."""
        interps = dict(pre.interps)
        for stmt in action.body:
            if isinstance(stmt, ast.Assign):
                interps[stmt.target] = self._updated(stmt, interps[stmt.target], pre, params)
        return State(f"{pre.name}'", interps, {})

    def _updated(
        self, stmt: ast.Assign, previous: Interp, pre: State, params: Mapping[str, z3.ExprRef]
    ) -> Interp:
        binder_names = {b.name for b in stmt.binders}
        fixed = [
            None
            if isinstance(a, ast.Name) and a.name in binder_names
            else self.expr(a, pre, params)
            for a in stmt.args
        ]

        def interp(args: Sequence[z3.ExprRef]) -> z3.ExprRef:
            env = dict(params)
            matches = []
            for arg_expr, fixed_value, actual in zip(stmt.args, fixed, args, strict=True):
                if fixed_value is None:
                    assert isinstance(arg_expr, ast.Name)
                    env[arg_expr.name] = actual
                else:
                    matches.append(actual == fixed_value)
            value = self.expr(stmt.value, pre, env)
            if not matches:
                return value
            return z3.If(z3.And(*matches), value, previous(args))

        return interp

    def transition(
        self, action: ast.ActionDecl, pre: State, post: State, params: Mapping[str, z3.ExprRef]
    ) -> z3.BoolRef:
        """`action` relates `pre` to `post` (a state with its own symbols): guard and frame."""
        derived = self.post_state(action, pre, params)
        parts = [self.guard(action, pre, params)]
        for sym in self.info.state_symbols():
            parts.append(self.symbol_equal(sym, derived, post))
        return z3.And(*parts)

    def symbol_equal(self, sym: ast.SymbolDecl, left: State, right: State) -> z3.BoolRef:
        if not sym.arg_sorts:
            return left.interps[sym.name]([]) == right.interps[sym.name]([])
        xs = [z3.Const(self.vocab.fresh_name("a"), self.vocab.sorts[s]) for s in sym.arg_sorts]
        return z3.ForAll(xs, left.interps[sym.name](xs) == right.interps[sym.name](xs))


def _sort_name(vocab: Vocabulary, term: z3.ExprRef) -> str:
    sort = term.sort()
    for name, candidate in vocab.sorts.items():
        if candidate == sort:
            return name
    raise AssertionError(f"no spec sort for {sort}")

"""A quantifier-free encoding of a spec on a finite instance, for bounded model checking.

On a finite instance (every sort a Z3 enumeration of a given size) a quantifier is a
finite conjunction or disjunction, so `GroundEncoder` expands it over the elements, and
a state is a table: one Z3 constant per state symbol and argument tuple (a Boolean for
a relation, an element for a function). A formula then reaches Z3 with no quantifier
left: propositional logic over enumerations and the rigid symbols, which Z3's SAT core
decides quickly and incrementally, however many steps are unrolled. Arguments that are
elements select a table entry directly; arguments that are not (action parameters)
select it by a case split over the elements. Comparisons of elements are evaluated on
the spot; an order comparison with a non-element is a disjunction over the elements'
ranks. The rigid symbols are tables too (`rigid`, one constant per argument tuple,
shared by every state), so no uninterpreted function is left: every term is a Boolean
or an enumeration constant, which Z3 can bit-blast to a pure SAT problem (what
etcdspec.spec.bmc asks). The encoder does no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import z3

from etcdspec.spec import ast
from etcdspec.spec.typecheck import symbol_type
from etcdspec.spec.z3backend import Encoder, Interp, State, Vocabulary


class GroundEncoder(Encoder):
    """The finite-instance encoder that expands quantifiers and tabulates states."""

    def __init__(self, vocab: Vocabulary) -> None:
        if not vocab.finite:
            raise ValueError("GroundEncoder needs a finite vocabulary (every sort sized)")
        super().__init__(vocab)
        # state name -> its constants, in symbol and tuple order (so two states' lists
        # align entry by entry, for z3.substitute)
        self.constants: dict[str, list[z3.ExprRef]] = {}
        # element id -> (sort, rank): which terms are elements, and their order
        self._rank: dict[int, tuple[str, int]] = {
            element.get_id(): (sort, rank)
            for sort, elements in vocab.elements.items()
            for rank, element in enumerate(elements)
        }
        rigid_tables = {}
        for sym in self.info.rigid_symbols():
            table = self._table(sym, "rigid")
            rigid_tables[sym.name] = self._table_interp(table, sym.arg_sorts)
        # the rigid symbols, read like a state (they are the same in every state)
        self.rigid = State("rigid", rigid_tables, {})

    def rank(self, term: z3.ExprRef) -> int | None:
        """The rank of `term` if it is an element of its sort, else None."""
        found = self._rank.get(term.get_id())
        return None if found is None else found[1]

    # ------------------------------------------------------------ formulas

    def apply(self, name: str, args: list[z3.ExprRef], state: State | None) -> z3.ExprRef:
        table = self.rigid.interps.get(name)
        if table is not None:
            return table(args)
        return super().apply(name, args, state)

    def quantifier(
        self, expr: ast.Quant, state: State | None, env: Mapping[str, z3.ExprRef]
    ) -> z3.ExprRef:
        domains = [self.vocab.elements[b.sort] for b in expr.binders]
        parts = []
        for values in itertools.product(*domains):
            inner = dict(env)
            inner.update({b.name: v for b, v in zip(expr.binders, values, strict=True)})
            parts.append(self.expr(expr.body, state, inner))
        if expr.universal:
            return z3.And(*parts) if parts else z3.BoolVal(True)
        return z3.Or(*parts) if parts else z3.BoolVal(False)

    def compare(
        self, expr: ast.Compare, state: State | None, env: Mapping[str, z3.ExprRef]
    ) -> z3.ExprRef:
        left = self.expr(expr.left, state, env)
        right = self.expr(expr.right, state, env)
        a, b = self.rank(left), self.rank(right)
        if z3.is_bool(left) or (
            expr.op in (ast.CmpOp.EQ, ast.CmpOp.NE) and (a is None or b is None)
        ):
            return super().compare(expr, state, env)
        if a is None or b is None:
            return self._order(expr.op, left, right)
        return z3.BoolVal(
            {
                ast.CmpOp.EQ: a == b,
                ast.CmpOp.NE: a != b,
                ast.CmpOp.LE: a <= b,
                ast.CmpOp.LT: a < b,
                ast.CmpOp.GE: a >= b,
                ast.CmpOp.GT: a > b,
            }[expr.op]
        )

    def _order(self, op: ast.CmpOp, left: z3.ExprRef, right: z3.ExprRef) -> z3.BoolRef:
        """`left op right` for an order comparison, one side not an element: some rank
        pair in that order, each side equal to its element."""
        if op in (ast.CmpOp.GE, ast.CmpOp.GT):
            left, right = right, left
            op = ast.CmpOp.LE if op is ast.CmpOp.GE else ast.CmpOp.LT
        sort = next(s for s, elems in self.vocab.elements.items() if elems[0].sort() == left.sort())
        elements = self.vocab.elements[sort]

        def is_rank(term: z3.ExprRef, k: int) -> z3.BoolRef:
            rank = self.rank(term)
            return z3.BoolVal(rank == k) if rank is not None else term == elements[k]

        parts = []
        for i in range(len(elements)):
            above = range(i, len(elements)) if op is ast.CmpOp.LE else range(i + 1, len(elements))
            parts.append(
                z3.And(
                    is_rank(left, i), z3.Or(z3.BoolVal(False), *[is_rank(right, j) for j in above])
                )
            )
        return z3.Or(*parts)

    # ------------------------------------------------------------ states

    def new_state(self, name: str) -> State:
        """A state with a fresh constant per symbol and argument tuple."""
        interps: dict[str, Interp] = {}
        constants: list[z3.ExprRef] = []
        for sym in self.info.state_symbols():
            table = self._table(sym, name)
            constants.extend(table.values())
            interps[sym.name] = self._table_interp(table, sym.arg_sorts)
        self.constants[name] = constants
        return State(name, interps, {})

    def renaming(self, source: str, target: str) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
        """Pairs for z3.substitute that move a formula from state `source` to `target`."""
        return list(zip(self.constants[source], self.constants[target], strict=True))

    def _table(self, sym: ast.SymbolDecl, state_name: str) -> dict[tuple[int, ...], z3.ExprRef]:
        sort = self.vocab.z3_sort(symbol_type(sym))
        table = {}
        for ranks in itertools.product(
            *[range(len(self.vocab.elements[s])) for s in sym.arg_sorts]
        ):
            suffix = ",".join(str(r) for r in ranks)
            table[ranks] = z3.Const(f"{sym.name}@{state_name}[{suffix}]", sort)
        return table

    def _table_interp(
        self, table: dict[tuple[int, ...], z3.ExprRef], arg_sorts: Sequence[str]
    ) -> Interp:
        def interp(args: Sequence[z3.ExprRef]) -> z3.ExprRef:
            ranks = [self.rank(a) for a in args]
            if all(r is not None for r in ranks):
                return table[tuple(r for r in ranks if r is not None)]
            # a case split over the elements the non-element arguments may denote
            cases: list[tuple[z3.BoolRef, z3.ExprRef]] = []
            choices = [
                [r] if r is not None else list(range(len(self.vocab.elements[s])))
                for r, s in zip(ranks, arg_sorts, strict=True)
            ]
            for combo in itertools.product(*choices):
                conditions = [
                    arg == self.vocab.elements[s][c]
                    for arg, r, s, c in zip(args, ranks, arg_sorts, combo, strict=True)
                    if r is None
                ]
                cases.append((z3.And(*conditions), table[tuple(combo)]))
            result = cases[-1][1]
            for condition, value in reversed(cases[:-1]):
                result = z3.If(condition, value, result)
            return result

        return interp

    def tuples(self, sym: ast.SymbolDecl) -> list[list[z3.ExprRef]]:
        """Every argument tuple of `sym`, as lists of elements."""
        return [
            list(combo)
            for combo in itertools.product(*[self.vocab.elements[s] for s in sym.arg_sorts])
        ]

    def symbol_equal(self, sym: ast.SymbolDecl, left: State, right: State) -> z3.BoolRef:
        return z3.And(
            *[
                left.interps[sym.name](args) == right.interps[sym.name](args)
                for args in self.tuples(sym)
            ]
        )

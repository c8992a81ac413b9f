"""Preservation obligations settled by the shape of the spec, without Z3.

`settle(info, action, prop)` returns why `action` preserves `prop` from every state
where all properties hold (a note for the report), or None when only a Z3 query can
tell. It never answers "not preserved": an obligation it does not settle is asked as
usual. Two rules, both sound for the induction query `axioms ∧ props(pre) ∧
guard(pre) ∧ post = update(pre) ⇒ prop(post)`, whose hypotheses include `prop(pre)`:

- frame: `prop` mentions (through the definitions it uses) no state symbol that the
  action assigns. The post-state interprets every unassigned symbol as the pre-state
  does (etcdspec.spec.z3backend derives the frame from the assignments), so
  `prop(post)` is literally `prop(pre)`.

- monotone: every assigned symbol that `prop` mentions is a relation that the action
  only grows and `prop` mentions only positively, or only shrinks and `prop` mentions
  only negatively. An assignment grows its relation when its value is `true` or a
  disjunction with the assignment's own target atom (`r(args)`, the same arguments)
  as one disjunct, and shrinks it when its value is `false` or a conjunction with that
  atom as one conjunct. Proof: the post-state value of `r` at a point is either its
  pre-state value (no assignment matches the point) or the value of the last
  assignment that matches it; that value is evaluated in the pre-state at that very
  point, so for a growing assignment `r(x) → r'(x)` and for a shrinking one
  `r'(x) → r(x)`, at every point. A formula built with ∧, ∨, ∀, ∃ from atoms in which
  `r` occurs only positively is monotone in `r` (by induction on the formula), and
  negation and the left side of → flip the polarity; so `prop(pre)` implies
  `prop(post)`. An occurrence whose polarity is not fixed counts as both: inside ↔,
  `=`/`!=` or an `ite` condition, and any state symbol inside an argument of an
  application (a function's value may move the point). Function and constant symbols
  are never monotone. Occurrences are over-approximated (a bound variable that shares
  a symbol's name counts as that symbol), which can only leave an obligation to Z3.

The module does no I/O and never calls Z3.
"""

from __future__ import annotations

from etcdspec.spec import ast
from etcdspec.spec.typecheck import SpecInfo

POSITIVE = 1
NEGATIVE = 2
BOTH = POSITIVE | NEGATIVE

FRAME_NOTE = "frame: mentions nothing the action assigns"
MONOTONE_NOTE = "monotone: the action only grows relations it mentions positively, shrinks those it mentions negatively"


def assigned_symbols(action: ast.ActionDecl) -> set[str]:
    """The state symbols `action` assigns (all others keep their values)."""
    return {s.target for s in action.body if isinstance(s, ast.Assign)}


def symbols_of(info: SpecInfo, expr: ast.Expr) -> set[str]:
    """The state symbols `expr` mentions, through the definitions it uses."""
    return set(polarities(info, expr))


def polarities(info: SpecInfo, expr: ast.Expr) -> dict[str, int]:
    """Each state symbol `expr` mentions (through definitions), with the polarities
    (POSITIVE, NEGATIVE or BOTH) of its occurrences, `expr` taken positively."""
    found: dict[str, int] = {}
    _walk(info, expr, POSITIVE, found, frozenset())
    return found


def _flip(polarity: int) -> int:
    return {POSITIVE: NEGATIVE, NEGATIVE: POSITIVE}.get(polarity, polarity)


def _walk(
    info: SpecInfo, node: ast.Expr, polarity: int, found: dict[str, int], expanding: frozenset[str]
) -> None:
    if isinstance(node, (ast.Name, ast.App)):
        args = node.args if isinstance(node, ast.App) else ()
        symbol = info.symbols.get(node.name)
        if symbol is not None:
            if not symbol.rigid:
                mark = polarity if symbol.result is None else BOTH
                found[node.name] = found.get(node.name, 0) | mark
        elif node.name in info.defines and node.name not in expanding:
            # a definition is expanded at its use, with the polarity of the use
            define = info.defines[node.name]
            _walk(info, define.body, polarity, found, expanding | {node.name})
        for arg in args:
            _walk(info, arg, BOTH, found, expanding)
    elif isinstance(node, ast.Not):
        _walk(info, node.operand, _flip(polarity), found, expanding)
    elif isinstance(node, (ast.And, ast.Or)):
        for operand in node.operands:
            _walk(info, operand, polarity, found, expanding)
    elif isinstance(node, ast.Implies):
        _walk(info, node.left, _flip(polarity), found, expanding)
        _walk(info, node.right, polarity, found, expanding)
    elif isinstance(node, (ast.Iff, ast.Compare)):
        _walk(info, node.left, BOTH, found, expanding)
        _walk(info, node.right, BOTH, found, expanding)
    elif isinstance(node, ast.Ite):
        _walk(info, node.cond, BOTH, found, expanding)
        _walk(info, node.then, polarity, found, expanding)
        _walk(info, node.orelse, polarity, found, expanding)
    elif isinstance(node, ast.Quant):
        _walk(info, node.body, polarity, found, expanding)


def _direction(info: SpecInfo, stmt: ast.Assign) -> int | None:
    """POSITIVE if `stmt` only adds tuples to its relation, NEGATIVE if it only removes
    some, BOTH if it changes nothing; None otherwise (or for functions, constants)."""
    if info.symbols[stmt.target].result is not None:
        return None
    atom: ast.Expr = ast.App(stmt.target, stmt.args) if stmt.args else ast.Name(stmt.target)
    value = stmt.value
    if value == atom:
        return BOTH
    if isinstance(value, ast.BoolLit):
        return POSITIVE if value.value else NEGATIVE
    if isinstance(value, ast.Or) and atom in value.operands:
        return POSITIVE
    if isinstance(value, ast.And) and atom in value.operands:
        return NEGATIVE
    return None


def directions(info: SpecInfo, action: ast.ActionDecl) -> dict[str, int | None]:
    """For each symbol `action` assigns: the way every one of its assignments moves it
    (POSITIVE: only grows, NEGATIVE: only shrinks, BOTH: unchanged), or None."""
    moves: dict[str, int | None] = {}
    for stmt in action.body:
        if not isinstance(stmt, ast.Assign):
            continue
        step = _direction(info, stmt)
        before = moves.get(stmt.target, BOTH)
        moves[stmt.target] = None if step is None or before is None else before & step
        if moves[stmt.target] == 0:  # grows at one point, shrinks at another
            moves[stmt.target] = None
    return moves


def settle(info: SpecInfo, action: ast.ActionDecl, prop: ast.FormulaDecl) -> str | None:
    """Why `action` preserves `prop` without asking Z3 (the rule's note), or None."""
    mentioned = polarities(info, prop.formula)
    moves = directions(info, action)
    touched = set(mentioned) & set(moves)
    if not touched:
        return FRAME_NOTE
    for symbol in touched:
        move = moves[symbol]
        # BOTH (unchanged) fits any polarity; a single direction must match the polarity
        if move is None or (move != BOTH and mentioned[symbol] != move):
            return None
    return MONOTONE_NOTE

"""The type checker: names resolve, sorts agree, actions assign only state; all errors.

`check(spec)` returns a `SpecInfo` (the symbol tables every backend uses) or raises
`SpecErrors` listing every problem in the file. `apply_mutation(spec, name)` returns the
spec with one seeded mutation switched on (its labelled statements replace the action's
statements with the same label; its unlabelled statements are added).

Rules worth knowing: comparisons `<`, `<=`, `>`, `>=` need an `ordered` sort; axioms may
mention only rigid symbols (they hold in every state, so they cannot constrain state);
a definition may use only definitions declared before it (no recursion); in
`forall x: s. r(..., x, ...) := e` each bound variable is exactly one whole argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from etcdspec.spec import ast
from etcdspec.spec.errors import IssueCollector, SpecLookupError

BOOL = "bool"


@dataclass
class SpecInfo:
    """Symbol tables of a well-typed spec."""

    spec: ast.Spec
    sorts: dict[str, ast.SortDecl] = field(default_factory=dict)
    symbols: dict[str, ast.SymbolDecl] = field(default_factory=dict)
    defines: dict[str, ast.DefineDecl] = field(default_factory=dict)
    define_types: dict[str, str] = field(default_factory=dict)

    def is_ordered(self, sort: str) -> bool:
        decl = self.sorts.get(sort)
        return decl is not None and decl.ordered

    def state_symbols(self) -> list[ast.SymbolDecl]:
        return [s for s in self.symbols.values() if not s.rigid]

    def rigid_symbols(self) -> list[ast.SymbolDecl]:
        return [s for s in self.symbols.values() if s.rigid]


def symbol_type(decl: ast.SymbolDecl) -> str:
    return decl.result if decl.result is not None else BOOL


class _Checker:
    def __init__(self, spec: ast.Spec) -> None:
        self.spec = spec
        self.info = SpecInfo(spec)
        self.issues = IssueCollector(spec.filename, spec.source)

    def error(self, code: str, message: str, span: ast.Span) -> None:
        self.issues.add(code, message, span)

    # ------------------------------------------------------------ declarations

    def run(self) -> SpecInfo:
        for sort_decl in self.spec.sorts():
            if sort_decl.name in self.info.sorts or sort_decl.name == BOOL:
                self.error(
                    "E201", f"sort '{sort_decl.name}' is declared twice; rename one", sort_decl.span
                )
            else:
                self.info.sorts[sort_decl.name] = sort_decl
        for sym in self.spec.symbols():
            self.declare_symbol(sym)
        seen_formulas: set[str] = set()
        actions: set[str] = set()
        witnesses: set[str] = set()
        mutations: set[str] = set()
        for decl in self.spec.decls:
            if isinstance(decl, ast.DefineDecl):
                self.check_define(decl)
            elif isinstance(decl, ast.FormulaDecl):
                if decl.name in seen_formulas:
                    self.error(
                        "E202",
                        f"{decl.kind.value} name '{decl.name}' is used twice; names must be unique",
                        decl.span,
                    )
                seen_formulas.add(decl.name)
                self.check_formula(decl.formula, {}, rigid_only=decl.kind is ast.FormulaKind.AXIOM)
            elif isinstance(decl, ast.ActionDecl):
                if decl.name in actions:
                    self.error(
                        "E202", f"action '{decl.name}' is declared twice; rename one", decl.span
                    )
                actions.add(decl.name)
                self.check_action(decl, mutations)
        for witness in self.spec.witnesses():
            self.check_witness(witness, witnesses, actions)
        self.issues.raise_if_any()
        return self.info

    def check_witness(self, decl: ast.WitnessDecl, witnesses: set[str], actions: set[str]) -> None:
        if decl.name in witnesses:
            self.error("E202", f"witness '{decl.name}' is declared twice; rename one", decl.span)
        witnesses.add(decl.name)
        for step, span in zip(
            decl.steps, decl.step_spans or [decl.span] * len(decl.steps), strict=False
        ):
            if step not in actions:
                self.error("E401", f"witness step '{step}' is not an action of this spec", span)
        if decl.reach is not None:
            self.check_formula(decl.reach, {})

    def declare_symbol(self, sym: ast.SymbolDecl) -> None:
        if sym.name in self.info.symbols:
            self.error("E201", f"symbol '{sym.name}' is declared twice; rename one", sym.span)
            return
        for sort in (*sym.arg_sorts, *([sym.result] if sym.result else [])):
            if sort not in self.info.sorts:
                self.error(
                    "E203",
                    f"unknown sort '{sort}' in the declaration of '{sym.name}'; declare it with `sort {sort}`",
                    sym.span,
                )
        self.info.symbols[sym.name] = sym

    def check_define(self, decl: ast.DefineDecl) -> None:
        if decl.name in self.info.symbols or decl.name in self.info.defines:
            self.error(
                "E201",
                f"'{decl.name}' is already declared; a definition needs a new name",
                decl.span,
            )
            return
        scope = self.param_scope(decl.params)
        result = self.expr(decl.body, scope, rigid_only=False)
        self.info.defines[decl.name] = decl
        self.info.define_types[decl.name] = result or BOOL

    def param_scope(
        self, params: tuple[ast.Param, ...], outer: dict[str, str] | None = None
    ) -> dict[str, str]:
        scope = dict(outer or {})
        local: set[str] = set()
        for param in params:
            if param.sort not in self.info.sorts:
                self.error("E203", f"unknown sort '{param.sort}' for '{param.name}'", param.span)
            if param.name in local:
                self.error("E204", f"'{param.name}' is bound twice here; rename one", param.span)
            if param.name in self.info.symbols or param.name in self.info.defines:
                self.error(
                    "E205",
                    f"'{param.name}' shadows a declared symbol; choose another name",
                    param.span,
                )
            local.add(param.name)
            scope[param.name] = param.sort
        return scope

    def check_formula(
        self, expr: ast.Expr, scope: dict[str, str], rigid_only: bool = False
    ) -> None:
        kind = self.expr(expr, scope, rigid_only)
        if kind is not None and kind != BOOL:
            self.error("E301", f"expected a formula, found a term of sort '{kind}'", expr.span)

    # ------------------------------------------------------------ actions

    def check_action(self, decl: ast.ActionDecl, mutations: set[str]) -> None:
        scope = self.param_scope(decl.params)
        labels: set[str] = set()
        for stmt in decl.body:
            if stmt.label is not None:
                if stmt.label in labels:
                    self.error(
                        "E402",
                        f"label '{stmt.label}' is used twice in action '{decl.name}'",
                        stmt.span,
                    )
                labels.add(stmt.label)
            self.stmt(stmt, scope)
        for mutation in decl.mutations:
            if mutation.name in mutations:
                self.error(
                    "E403",
                    f"mutation '{mutation.name}' is declared twice; mutation names are global",
                    mutation.span,
                )
            mutations.add(mutation.name)
            for stmt in mutation.body:
                if stmt.label is not None and stmt.label not in labels:
                    self.error(
                        "E404",
                        f"mutation '{mutation.name}' replaces label '{stmt.label}', which action '{decl.name}' does not have",
                        stmt.span,
                    )
                self.stmt(stmt, scope)

    def stmt(self, stmt: ast.Stmt, scope: dict[str, str]) -> None:
        if isinstance(stmt, ast.Require):
            self.check_formula(stmt.formula, scope)
        elif isinstance(stmt, ast.Assign):
            self.assign(stmt, scope)

    def assign(self, stmt: ast.Assign, scope: dict[str, str]) -> None:
        sym = self.info.symbols.get(stmt.target)
        if sym is None:
            self.error(
                "E206",
                f"'{stmt.target}' is not a declared relation, function or constant; only state symbols can be assigned",
                stmt.span,
            )
            return
        if sym.rigid:
            self.error(
                "E405",
                f"'{stmt.target}' is rigid and never changes; drop `rigid` from its declaration to assign it",
                stmt.span,
            )
        if len(stmt.args) != len(sym.arg_sorts):
            self.error(
                "E302",
                f"'{stmt.target}' takes {len(sym.arg_sorts)} argument(s), {len(stmt.args)} given",
                stmt.span,
            )
            return
        inner = self.param_scope(stmt.binders, scope)
        bound_uses: dict[str, int] = {b.name: 0 for b in stmt.binders}
        for arg, sort in zip(stmt.args, sym.arg_sorts, strict=True):
            if isinstance(arg, ast.Name) and arg.name in bound_uses:
                bound_uses[arg.name] += 1
                if inner[arg.name] != sort:
                    self.error(
                        "E303",
                        f"'{arg.name}' has sort '{inner[arg.name]}' but this argument of '{sym.name}' has sort '{sort}'",
                        arg.span,
                    )
                continue
            self.expect(arg, scope, sort)
        for binder in stmt.binders:
            if bound_uses[binder.name] != 1:
                self.error(
                    "E406",
                    f"bound variable '{binder.name}' must be exactly one whole argument of '{stmt.target}' (it is {bound_uses[binder.name]})",
                    binder.span,
                )
        self.expect(stmt.value, inner, symbol_type(sym))

    # ------------------------------------------------------------ expressions

    def expect(self, expr: ast.Expr, scope: dict[str, str], sort: str) -> None:
        found = self.expr(expr, scope, rigid_only=False)
        if found is not None and found != sort:
            self.error("E303", f"expected sort '{sort}', found '{found}'", expr.span)

    def expr(self, expr: ast.Expr, scope: dict[str, str], rigid_only: bool) -> str | None:
        """The type of `expr` (a sort name or 'bool'), or None after an error."""
        if isinstance(expr, ast.BoolLit):
            return BOOL
        if isinstance(expr, ast.Name):
            if expr.name in scope:
                return scope[expr.name]
            return self.application(expr.name, (), expr.span, scope, rigid_only)
        if isinstance(expr, ast.App):
            return self.application(expr.name, expr.args, expr.span, scope, rigid_only)
        if isinstance(expr, ast.Not):
            self.bool_operand(expr.operand, scope, rigid_only)
            return BOOL
        if isinstance(expr, (ast.And, ast.Or)):
            for operand in expr.operands:
                self.bool_operand(operand, scope, rigid_only)
            return BOOL
        if isinstance(expr, (ast.Implies, ast.Iff)):
            self.bool_operand(expr.left, scope, rigid_only)
            self.bool_operand(expr.right, scope, rigid_only)
            return BOOL
        if isinstance(expr, ast.Compare):
            left = self.expr(expr.left, scope, rigid_only)
            right = self.expr(expr.right, scope, rigid_only)
            if left is not None and right is not None and left != right:
                self.error("E304", f"cannot compare '{left}' with '{right}'", expr.span)
            elif (
                left is not None
                and expr.op not in (ast.CmpOp.EQ, ast.CmpOp.NE)
                and not self.info.is_ordered(left)
            ):
                self.error(
                    "E305",
                    f"'{expr.op.value}' needs an ordered sort, and '{left}' is not one; declare `sort {left} ordered`",
                    expr.span,
                )
            return BOOL
        if isinstance(expr, ast.Ite):
            self.bool_operand(expr.cond, scope, rigid_only)
            then = self.expr(expr.then, scope, rigid_only)
            orelse = self.expr(expr.orelse, scope, rigid_only)
            if then is not None and orelse is not None and then != orelse:
                self.error(
                    "E304", f"the branches of `if` differ: '{then}' and '{orelse}'", expr.span
                )
                return None
            return then
        if isinstance(expr, ast.Quant):
            inner = self.param_scope(expr.binders, scope)
            self.bool_operand(expr.body, inner, rigid_only)
            return BOOL
        raise AssertionError(f"unknown expression {expr!r}")

    def bool_operand(self, expr: ast.Expr, scope: dict[str, str], rigid_only: bool) -> None:
        kind = self.expr(expr, scope, rigid_only)
        if kind is not None and kind != BOOL:
            self.error("E301", f"expected a formula, found a term of sort '{kind}'", expr.span)

    def application(
        self,
        name: str,
        args: tuple[ast.Expr, ...],
        span: ast.Span,
        scope: dict[str, str],
        rigid_only: bool,
    ) -> str | None:
        sym = self.info.symbols.get(name)
        if sym is not None:
            if rigid_only and not sym.rigid:
                self.error(
                    "E306",
                    f"an axiom may mention only rigid symbols, and '{name}' is state; make it an init or invariant",
                    span,
                )
            return self.arguments(
                name, args, sym.arg_sorts, span, scope, rigid_only, symbol_type(sym)
            )
        define = self.info.defines.get(name)
        if define is not None:
            sorts = tuple(p.sort for p in define.params)
            return self.arguments(
                name, args, sorts, span, scope, rigid_only, self.info.define_types[name]
            )
        if name in scope:
            self.error("E302", f"'{name}' is a variable and takes no arguments", span)
            return None
        self.error("E207", f"unknown name '{name}'; declare it or fix the spelling", span)
        for arg in args:
            self.expr(arg, scope, rigid_only)
        return None

    def arguments(
        self,
        name: str,
        args: tuple[ast.Expr, ...],
        sorts: tuple[str, ...],
        span: ast.Span,
        scope: dict[str, str],
        rigid_only: bool,
        result: str,
    ) -> str | None:
        if len(args) != len(sorts):
            self.error("E302", f"'{name}' takes {len(sorts)} argument(s), {len(args)} given", span)
            return result
        for arg, sort in zip(args, sorts, strict=True):
            found = self.expr(arg, scope, rigid_only)
            if found is not None and found != sort:
                self.error(
                    "E303",
                    f"argument of '{name}' should have sort '{sort}', found '{found}'",
                    arg.span,
                )
        return result


def check(spec: ast.Spec) -> SpecInfo:
    """Type-check a parsed spec; raise SpecErrors listing every error."""
    return _Checker(spec).run()


def apply_mutation(spec: ast.Spec, name: str) -> ast.Spec:
    """The spec with mutation `name` switched on; SpecLookupError if there is none."""
    decls: list[ast.Decl] = []
    found = False
    for decl in spec.decls:
        if isinstance(decl, ast.ActionDecl):
            mutation = next((m for m in decl.mutations if m.name == name), None)
            if mutation is not None:
                found = True
                decl = replace(decl, body=mutated_body(decl, mutation))
        decls.append(decl)
    if not found:
        known = ", ".join(spec.mutation_names()) or "none"
        raise SpecLookupError(f"unknown mutation '{name}' in {spec.filename} (known: {known})")
    return replace(spec, decls=tuple(decls))


def mutated_body(action: ast.ActionDecl, mutation: ast.Mutation) -> tuple[ast.Stmt, ...]:
    replacements = {s.label: s for s in mutation.body if s.label is not None}
    body = [replacements.get(s.label, s) if s.label is not None else s for s in action.body]
    body.extend(s for s in mutation.body if s.label is None)
    return tuple(body)

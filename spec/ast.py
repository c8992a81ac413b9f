"""The one abstract syntax tree of the spec language, shared by every backend.

Nodes are frozen dataclasses. Each carries a `span` (where it was written) that takes no
part in equality, so a spec printed and parsed again compares equal to the original.
Formulas and terms are both `Expr`; the type checker tells them apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True)
class Span:
    """A stretch of a spec file: 1-based line and column, end exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    def describe(self) -> str:
        return f"{self.line}:{self.column}"


NOWHERE = Span(0, 0, 0, 0)


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Name:
    """A variable, parameter, constant or zero-argument definition."""

    name: str
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class App:
    """A relation, function or definition applied to arguments."""

    name: str
    args: tuple[Expr, ...]
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class BoolLit:
    value: bool
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Not:
    operand: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class And:
    operands: tuple[Expr, ...]
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Or:
    operands: tuple[Expr, ...]
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Implies:
    left: Expr
    right: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Iff:
    left: Expr
    right: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


class CmpOp(Enum):
    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


@dataclass(frozen=True)
class Compare:
    op: CmpOp
    left: Expr
    right: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Ite:
    cond: Expr
    then: Expr
    orelse: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Param:
    """A typed name: an action or definition parameter, or a quantified variable."""

    name: str
    sort: str
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Quant:
    universal: bool
    binders: tuple[Param, ...]
    body: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


Expr = Name | App | BoolLit | Not | And | Or | Implies | Iff | Compare | Ite | Quant


# ---------------------------------------------------------------- declarations


@dataclass(frozen=True)
class SortDecl:
    name: str
    ordered: bool
    span: Span = field(default=NOWHERE, compare=False, repr=False)


class SymbolKind(Enum):
    RELATION = "relation"
    FUNCTION = "function"
    CONSTANT = "constant"


@dataclass(frozen=True)
class SymbolDecl:
    """A relation (result None), function or constant (no arguments)."""

    kind: SymbolKind
    name: str
    arg_sorts: tuple[str, ...]
    result: str | None
    rigid: bool
    span: Span = field(default=NOWHERE, compare=False, repr=False)


class FormulaKind(Enum):
    AXIOM = "axiom"
    INIT = "init"
    INVARIANT = "invariant"
    SAFETY = "safety"


@dataclass(frozen=True)
class FormulaDecl:
    kind: FormulaKind
    name: str
    formula: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class DefineDecl:
    name: str
    params: tuple[Param, ...]
    body: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Require:
    label: str | None
    formula: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Assign:
    """`[forall binders.] target(args) := value`: the new value of `target` at the points
    matching `args`; binders range over whole argument positions."""

    label: str | None
    binders: tuple[Param, ...]
    target: str
    args: tuple[Expr, ...]
    value: Expr
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Skip:
    label: str | None
    span: Span = field(default=NOWHERE, compare=False, repr=False)


Stmt = Require | Assign | Skip


@dataclass(frozen=True)
class Mutation:
    name: str
    description: str
    body: tuple[Stmt, ...]
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class ActionDecl:
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    mutations: tuple[Mutation, ...]
    span: Span = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class WitnessDecl:
    name: str
    steps: tuple[str, ...]
    reach: Expr | None
    span: Span = field(default=NOWHERE, compare=False, repr=False)
    step_spans: tuple[Span, ...] = field(default=(), compare=False, repr=False)


Decl = SortDecl | SymbolDecl | FormulaDecl | DefineDecl | ActionDecl | WitnessDecl


@dataclass(frozen=True)
class Spec:
    """A parsed spec file: its declarations in source order."""

    decls: tuple[Decl, ...]
    filename: str = field(default="<spec>", compare=False)
    source: str = field(default="", compare=False, repr=False)

    def sorts(self) -> list[SortDecl]:
        return [d for d in self.decls if isinstance(d, SortDecl)]

    def symbols(self) -> list[SymbolDecl]:
        return [d for d in self.decls if isinstance(d, SymbolDecl)]

    def formulas(self, kind: FormulaKind) -> list[FormulaDecl]:
        return [d for d in self.decls if isinstance(d, FormulaDecl) and d.kind is kind]

    def properties(self) -> list[FormulaDecl]:
        """Invariants and safety properties, in source order: what `prove` proves."""
        return [
            d
            for d in self.decls
            if isinstance(d, FormulaDecl) and d.kind in (FormulaKind.INVARIANT, FormulaKind.SAFETY)
        ]

    def defines(self) -> dict[str, DefineDecl]:
        return {d.name: d for d in self.decls if isinstance(d, DefineDecl)}

    def actions(self) -> list[ActionDecl]:
        return [d for d in self.decls if isinstance(d, ActionDecl)]

    def action(self, name: str) -> ActionDecl | None:
        return next((a for a in self.actions() if a.name == name), None)

    def witnesses(self) -> list[WitnessDecl]:
        return [d for d in self.decls if isinstance(d, WitnessDecl)]

    def mutation_names(self) -> list[str]:
        return [m.name for a in self.actions() for m in a.mutations]

    def state_symbols(self) -> list[SymbolDecl]:
        return [s for s in self.symbols() if not s.rigid]

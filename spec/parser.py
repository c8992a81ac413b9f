"""Parse spec text into the AST (etcdspec.spec.ast), reporting every syntax error.

`parse_spec(text, filename)` returns a `Spec` or raises `SpecErrors` listing all syntax
errors, each with file:line:col and a caret. Recovery: when the whole file does not
parse, it is cut into top-level declarations (a declaration keyword at the start of a
line, outside braces) and each is parsed alone, so one broken declaration does not hide
errors in the next. The parser never raises anything else on any input.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import lark
from lark import Token, Tree

from etcdspec.spec import ast
from etcdspec.spec.errors import IssueCollector

GRAMMAR_PATH = Path(__file__).with_name("grammar.lark")

DECL_KEYWORDS = (
    "sort",
    "rigid",
    "relation",
    "function",
    "constant",
    "axiom",
    "init",
    "invariant",
    "safety",
    "define",
    "action",
    "witness",
)
_DECL_START = re.compile(r"^[ \t]*(" + "|".join(DECL_KEYWORDS) + r")\b", re.MULTILINE)


@lru_cache(maxsize=1)
def grammar_text() -> str:
    return GRAMMAR_PATH.read_text()


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    return lark.Lark(
        grammar_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True
    )


def parse_spec(text: str, filename: str = "<spec>") -> ast.Spec:
    """Parse a whole spec file; raise SpecErrors with every syntax error."""
    issues = IssueCollector(filename, text)
    try:
        tree = _parser().parse(text)
    except lark.exceptions.LarkError:
        decls: list[ast.Decl] = []
        for line, column, chunk in _chunks(text):
            padded = "\n" * (line - 1) + " " * (column - 1) + chunk
            try:
                decls.extend(_Builder(issues).decls(_parser().parse(padded)))
            except lark.exceptions.LarkError as error:
                _report(issues, error, text, _end_of(padded))
        issues.raise_if_any()
        # Every chunk parsed, yet the whole did not (cannot happen with this grammar,
        # but never let it pass silently).
        issues.add("E100", "the file does not parse as a whole", ast.Span(1, 1, 1, 2))
        issues.raise_if_any()
        return ast.Spec(tuple(decls), filename, text)
    builder = _Builder(issues)
    spec = ast.Spec(tuple(builder.decls(tree)), filename, text)
    issues.raise_if_any()
    return spec


def parse_file(path: Path) -> ast.Spec:
    return parse_spec(path.read_text(), str(path))


def _chunks(text: str) -> list[tuple[int, int, str]]:
    """Top-level declarations as (line, column, text): starts at depth-0 keywords."""
    depths = _depths(text)
    starts = [m.start(1) for m in _DECL_START.finditer(text) if depths[m.start(1)] == 0]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    chunks = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
        chunks.append((line, column, text[start:end]))
    return chunks


def _depths(text: str) -> list[int]:
    """The brace depth before each character (comments and strings do not count)."""
    depths = []
    depth = 0
    in_comment = in_string = False
    for char in text:
        depths.append(depth)
        if in_comment:
            in_comment = char != "\n"
        elif in_string:
            in_string = char != '"'
        elif char == "#":
            in_comment = True
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth = max(depth - 1, 0)
    depths.append(depth)
    return depths


def _describe_terminal(name: str) -> str:
    try:
        pattern = _parser().get_terminal(name).pattern
    except KeyError:
        return name
    if isinstance(pattern, lark.lexer.PatternStr):
        return f"'{pattern.value}'"
    return {"NAME": "a name", "ESCAPED_STRING": "a string", "CMPOP": "a comparison"}.get(
        name, name.lower()
    )


def _end_of(text: str) -> tuple[int, int]:
    """Line and column just after the last non-blank character (where input ran out)."""
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    column = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, column


def _report(
    issues: IssueCollector,
    error: lark.exceptions.LarkError,
    text: str,
    end: tuple[int, int] | None = None,
) -> None:
    line_end, column_end = end if end is not None else _end_of(text)
    if isinstance(error, lark.exceptions.UnexpectedToken):
        token = error.token
        expected = sorted({_describe_terminal(t) for t in error.expected})
        hint = "expected " + ", ".join(expected[:8]) + (", ..." if len(expected) > 8 else "")
        if token.type == "$END":
            line, column = line_end, column_end
            issues.add(
                "E102", f"unexpected end of file; {hint}", ast.Span(line, column, line, column + 1)
            )
            return
        line, column = token.line or 1, token.column or 1
        issues.add(
            "E101",
            f"unexpected {token.value!r}; {hint}",
            ast.Span(line, column, line, column + max(len(str(token.value)), 1)),
        )
    elif isinstance(error, lark.exceptions.UnexpectedCharacters):
        position = error.pos_in_stream if error.pos_in_stream is not None else -1
        char = text[position] if 0 <= position < len(text) else "?"
        issues.add(
            "E103",
            f"unexpected character {char!r}; it is not part of the language",
            ast.Span(error.line, error.column, error.line, error.column + 1),
        )
    elif isinstance(error, lark.exceptions.UnexpectedEOF):
        line, column = line_end, column_end
        issues.add("E102", "unexpected end of file", ast.Span(line, column, line, column + 1))
    else:
        issues.add("E100", f"syntax error: {error}", ast.Span(1, 1, 1, 2))


def _span_of(item: Tree | Token) -> ast.Span:
    if isinstance(item, Token):
        line, column = item.line or 0, item.column or 0
        end_line = item.end_line or line
        end_column = item.end_column or column + len(str(item))
        return ast.Span(line, column, end_line, end_column)
    meta = item.meta
    if getattr(meta, "empty", True):
        return ast.NOWHERE
    return ast.Span(meta.line, meta.column, meta.end_line, meta.end_column)


class _Builder:
    """Lark parse tree -> AST."""

    def __init__(self, issues: IssueCollector) -> None:
        self.issues = issues

    def decls(self, tree: Tree) -> list[ast.Decl]:
        return [self.decl(child) for child in tree.children if isinstance(child, Tree)]

    def decl(self, tree: Tree) -> ast.Decl:
        kind = tree.data
        c = tree.children
        span = _span_of(tree)
        if kind == "sort_decl":
            return ast.SortDecl(str(c[0]), c[1] is not None, span)
        if kind == "relation_decl":
            sorts = self.sort_list(c[2])
            return ast.SymbolDecl(
                ast.SymbolKind.RELATION, str(c[1]), sorts, None, c[0] is not None, span
            )
        if kind == "function_decl":
            sorts = self.sort_list(c[2])
            return ast.SymbolDecl(
                ast.SymbolKind.FUNCTION, str(c[1]), sorts, str(c[3]), c[0] is not None, span
            )
        if kind == "constant_decl":
            return ast.SymbolDecl(
                ast.SymbolKind.CONSTANT, str(c[1]), (), str(c[2]), c[0] is not None, span
            )
        if kind in ("axiom_decl", "init_decl", "invariant_decl", "safety_decl"):
            formula_kind = ast.FormulaKind(kind.removesuffix("_decl"))
            return ast.FormulaDecl(formula_kind, str(c[0]), self.expr(c[1]), span)
        if kind == "define_decl":
            params = self.params(c[1]) if c[1] is not None else ()
            return ast.DefineDecl(str(c[0]), params, self.expr(c[2]), span)
        if kind == "action_decl":
            params = self.params(c[1]) if c[1] is not None else ()
            body: list[ast.Stmt] = []
            mutations: list[ast.Mutation] = []
            for item in c[2:]:
                if item.data == "mutation_block":
                    mutations.append(self.mutation(item))
                else:
                    body.append(self.stmt(item))
            return ast.ActionDecl(str(c[0]), params, tuple(body), tuple(mutations), span)
        if kind == "witness_decl":
            names = [t for t in c[1:] if isinstance(t, Token)]
            reach = c[-1] if isinstance(c[-1], Tree) else None
            return ast.WitnessDecl(
                str(c[0]),
                tuple(str(t) for t in names),
                self.expr(reach) if reach is not None else None,
                span,
                tuple(_span_of(t) for t in names),
            )
        raise AssertionError(f"unknown declaration {kind}")

    def sort_list(self, tree: Tree | None) -> tuple[str, ...]:
        if tree is None:
            return ()
        return tuple(str(t) for t in tree.children)

    def params(self, tree: Tree) -> tuple[ast.Param, ...]:
        return tuple(
            ast.Param(str(p.children[0]), str(p.children[1]), _span_of(p)) for p in tree.children
        )

    def mutation(self, tree: Tree) -> ast.Mutation:
        name, description, *stmts = tree.children
        text = str(description)[1:-1] if description is not None else ""
        return ast.Mutation(str(name), text, tuple(self.stmt(s) for s in stmts), _span_of(tree))

    def stmt(self, tree: Tree) -> ast.Stmt:
        c = tree.children
        label = str(c[0].children[0]) if c[0] is not None else None
        span = _span_of(tree)
        if tree.data == "require_stmt":
            return ast.Require(label, self.expr(c[1]), span)
        if tree.data == "skip_stmt":
            return ast.Skip(label, span)
        binders = self.params(c[1].children[1]) if c[1] is not None else ()
        args = tuple(self.expr(a) for a in c[3].children) if c[3] is not None else ()
        return ast.Assign(label, binders, str(c[2]), args, self.expr(c[4]), span)

    def expr(self, item: Tree | Token) -> ast.Expr:
        span = _span_of(item)
        if isinstance(item, Token):
            raise AssertionError(f"bare token {item!r} in an expression")
        kind = item.data
        c = item.children
        if kind == "name":
            return ast.Name(str(c[0]), span)
        if kind == "app":
            args = tuple(self.expr(a) for a in c[1].children) if c[1] is not None else ()
            return ast.App(str(c[0]), args, span)
        if kind == "true":
            return ast.BoolLit(True, span)
        if kind == "false":
            return ast.BoolLit(False, span)
        if kind == "not_":
            return ast.Not(self.expr(c[0]), span)
        if kind == "and_":
            return ast.And(tuple(self.expr(x) for x in c), span)
        if kind == "or_":
            return ast.Or(tuple(self.expr(x) for x in c), span)
        if kind == "implies":
            return ast.Implies(self.expr(c[0]), self.expr(c[1]), span)
        if kind == "iff":
            return ast.Iff(self.expr(c[0]), self.expr(c[1]), span)
        if kind == "compare":
            return ast.Compare(ast.CmpOp(str(c[1])), self.expr(c[0]), self.expr(c[2]), span)
        if kind == "ite":
            return ast.Ite(self.expr(c[0]), self.expr(c[1]), self.expr(c[2]), span)
        if kind == "quant":
            return ast.Quant(str(c[0]) == "forall", self.params(c[1]), self.expr(c[2]), span)
        raise AssertionError(f"unknown expression {kind}")

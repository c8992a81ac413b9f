"""The printer: AST -> spec source text that parses back to an equal AST.

`print_spec(spec)` renders a whole spec; `print_expr(expr)` one expression, with the
fewest parentheses the grammar's precedence allows (loosest first: quantifiers, `<->`,
`->`, `|`, `&`, `!`, comparisons, atoms). Round trip: parse(print(ast)) == ast.
"""

from __future__ import annotations

from etcdspec.spec import ast

_QUANT, _IFF, _IMPLIES, _OR, _AND, _NOT, _CMP, _ATOM = range(8)


def _level(expr: ast.Expr) -> int:
    if isinstance(expr, ast.Quant):
        return _QUANT
    if isinstance(expr, ast.Iff):
        return _IFF
    if isinstance(expr, ast.Implies):
        return _IMPLIES
    if isinstance(expr, ast.Or):
        return _OR
    if isinstance(expr, ast.And):
        return _AND
    if isinstance(expr, ast.Not):
        return _NOT
    if isinstance(expr, ast.Compare):
        return _CMP
    return _ATOM


def _params(params: tuple[ast.Param, ...]) -> str:
    return ", ".join(f"{p.name}: {p.sort}" for p in params)


def print_expr(expr: ast.Expr) -> str:
    return _fmt(expr, _QUANT)


def _fmt(expr: ast.Expr, minimum: int, quant_ok: bool = False) -> str:
    text = _bare(expr)
    level = _level(expr)
    if level < minimum and not (quant_ok and level == _QUANT):
        return f"({text})"
    return text


def _bare(expr: ast.Expr) -> str:
    if isinstance(expr, ast.BoolLit):
        return "true" if expr.value else "false"
    if isinstance(expr, ast.Name):
        return expr.name
    if isinstance(expr, ast.App):
        return f"{expr.name}({', '.join(_fmt(a, _QUANT) for a in expr.args)})"
    if isinstance(expr, ast.Not):
        # `!x = y` parses as `!(x = y)`; the parentheses are for the reader
        operand = expr.operand
        return "!" + (
            f"({_bare(operand)})" if isinstance(operand, ast.Compare) else _fmt(operand, _NOT)
        )
    if isinstance(expr, ast.And):
        return " & ".join(_fmt(e, _NOT) for e in expr.operands)
    if isinstance(expr, ast.Or):
        return " | ".join(_fmt(e, _AND) for e in expr.operands)
    if isinstance(expr, ast.Implies):
        return f"{_fmt(expr.left, _OR)} -> {_fmt(expr.right, _IMPLIES, quant_ok=True)}"
    if isinstance(expr, ast.Iff):
        return f"{_fmt(expr.left, _IMPLIES)} <-> {_fmt(expr.right, _IMPLIES, quant_ok=True)}"
    if isinstance(expr, ast.Compare):
        return f"{_fmt(expr.left, _ATOM)} {expr.op.value} {_fmt(expr.right, _ATOM)}"
    if isinstance(expr, ast.Ite):
        return f"if {_fmt(expr.cond, _QUANT)} then {_fmt(expr.then, _QUANT)} else {_fmt(expr.orelse, _ATOM)}"
    if isinstance(expr, ast.Quant):
        word = "forall" if expr.universal else "exists"
        return f"{word} {_params(expr.binders)}. {_fmt(expr.body, _QUANT)}"
    raise AssertionError(f"unknown expression {expr!r}")


def print_stmt(stmt: ast.Stmt) -> str:
    label = f"[{stmt.label}] " if stmt.label is not None else ""
    if isinstance(stmt, ast.Require):
        return f"{label}require {print_expr(stmt.formula)};"
    if isinstance(stmt, ast.Skip):
        return f"{label}skip;"
    binders = f"forall {_params(stmt.binders)}. " if stmt.binders else ""
    args = f"({', '.join(print_expr(a) for a in stmt.args)})" if stmt.args else ""
    return f"{label}{binders}{stmt.target}{args} := {print_expr(stmt.value)};"


def print_decl(decl: ast.Decl) -> str:
    if isinstance(decl, ast.SortDecl):
        return f"sort {decl.name}" + (" ordered" if decl.ordered else "")
    if isinstance(decl, ast.SymbolDecl):
        rigid = "rigid " if decl.rigid else ""
        if decl.kind is ast.SymbolKind.RELATION:
            return f"{rigid}relation {decl.name}({', '.join(decl.arg_sorts)})"
        if decl.kind is ast.SymbolKind.FUNCTION:
            return f"{rigid}function {decl.name}({', '.join(decl.arg_sorts)}): {decl.result}"
        return f"{rigid}constant {decl.name}: {decl.result}"
    if isinstance(decl, ast.FormulaDecl):
        return f"{decl.kind.value} {decl.name}:\n  {print_expr(decl.formula)}"
    if isinstance(decl, ast.DefineDecl):
        params = f"({_params(decl.params)})" if decl.params else ""
        return f"define {decl.name}{params} =\n  {print_expr(decl.body)}"
    if isinstance(decl, ast.ActionDecl):
        lines = [f"action {decl.name}({_params(decl.params)}) {{"]
        lines += [f"  {print_stmt(s)}" for s in decl.body]
        for mutation in decl.mutations:
            description = f' "{mutation.description}"' if mutation.description else ""
            lines.append(f"  mutation {mutation.name}{description} {{")
            lines += [f"    {print_stmt(s)}" for s in mutation.body]
            lines.append("  }")
        lines.append("}")
        return "\n".join(lines)
    if isinstance(decl, ast.WitnessDecl):
        lines = [f"witness {decl.name} {{", f"  run {', '.join(decl.steps)};"]
        if decl.reach is not None:
            lines.append(f"  reach {print_expr(decl.reach)};")
        lines.append("}")
        return "\n".join(lines)
    raise AssertionError(f"unknown declaration {decl!r}")


def print_spec(spec: ast.Spec) -> str:
    return "\n\n".join(print_decl(d) for d in spec.decls) + "\n"

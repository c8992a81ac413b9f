"""The printer: AST -> source parses back to the same AST (round trip)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis.extra.lark import from_lark

from etcdspec.spec.errors import SpecErrors
from etcdspec.spec.loader import BUILTIN_SPECS, resolve
from etcdspec.spec.parser import _parser, parse_spec
from etcdspec.spec.printer import print_expr, print_spec


@pytest.mark.parametrize("name", BUILTIN_SPECS)
def test_builtin_spec_round_trips(name: str) -> None:
    spec = parse_spec(resolve(name).read_text(), name)
    printed = print_spec(spec)
    again = parse_spec(printed, "printed")
    assert again == spec
    assert print_spec(again) == printed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(a | b) & c", "(a | b) & c"),
        ("a | (b & c)", "a | b & c"),
        ("a -> b -> c", "a -> b -> c"),
        ("(a -> b) -> c", "(a -> b) -> c"),
        ("!(x = y)", "!(x = y)"),
        ("a & (forall x: s. p(x))", "a & (forall x: s. p(x))"),
        ("a -> forall x: s. p(x)", "a -> forall x: s. p(x)"),
        ("if a then x else (if b then y else z)", "if a then x else if b then y else z"),
    ],
)
def test_expressions_print_with_minimal_parentheses(text: str, expected: str) -> None:
    spec = parse_spec(f"axiom e: {text}\n")
    formula = spec.decls[0].formula  # type: ignore[union-attr]
    assert print_expr(formula) == expected


@settings(max_examples=20)
@given(from_lark(_parser(), start="start"))
def test_any_parsed_text_round_trips(text: str) -> None:
    try:
        spec = parse_spec(text, "fuzz.spec")
    except SpecErrors:
        return
    assert parse_spec(print_spec(spec), "printed") == spec

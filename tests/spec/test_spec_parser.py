"""The spec parser: located errors with carets, every error reported, no crash on any input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

from etcdspec.spec import ast
from etcdspec.spec.errors import SpecErrors
from etcdspec.spec.loader import BUILTIN_SPECS, load_spec
from etcdspec.spec.parser import _parser, parse_spec
from etcdspec.spec.typecheck import check


@pytest.mark.parametrize("name", BUILTIN_SPECS)
def test_builtin_specs_parse_and_typecheck(name: str) -> None:
    loaded = load_spec(name)
    assert loaded.spec.actions(), "a spec without actions proves nothing"
    assert loaded.spec.properties()
    assert loaded.spec.witnesses()


def test_syntax_error_is_located_with_a_caret() -> None:
    text = "sort node\nrelation r(node)\ninvariant bad: forall n: node. r(n) &\n"
    with pytest.raises(SpecErrors) as caught:
        parse_spec(text, "bad.spec")
    issue = caught.value.issues[0]
    assert issue.code == "E102"
    rendered = caught.value.describe()
    assert rendered.startswith("bad.spec:")
    assert "^" in rendered


def test_unexpected_token_points_at_it() -> None:
    text = "sort node\nrelation r(node)\naxiom a: forall n: node. r(n) ) \n"
    with pytest.raises(SpecErrors) as caught:
        parse_spec(text, "x.spec")
    issue = caught.value.issues[0]
    assert (issue.code, issue.span.line, issue.span.column) == ("E101", 3, 31)
    lines = issue.describe().splitlines()
    assert lines[0].startswith("x.spec:3:31: error E101: unexpected ')'")
    assert lines[1].strip() == "axiom a: forall n: node. r(n) )"
    assert lines[2].index("^") - 4 == 30


def test_every_broken_declaration_is_reported() -> None:
    text = (
        "sort node\n"
        "relation r(node\n"  # missing ')'
        "invariant fine: forall n: node. r(n) | !r(n)\n"
        "action a(n: node) { r(n) := ; }\n"  # missing value
        "safety s: forall n: node. r(n) -> \n"  # missing right side
    )
    with pytest.raises(SpecErrors) as caught:
        parse_spec(text, "many.spec")
    lines = sorted(issue.span.line for issue in caught.value.issues)
    assert lines == [2, 4, 5]


@pytest.mark.parametrize(
    ("source", "code", "line"),
    [
        ("sort a\nsort a\n", "E201", 2),
        ("relation r(nosort)\n", "E203", 1),
        ("sort s\nrelation r(s)\ninvariant i: forall x: s. q(x)\n", "E207", 3),
        ("sort s\nrelation r(s)\ninvariant i: forall x: s. r(x, x)\n", "E302", 3),
        ("sort s\nrelation r(s)\ninvariant i: forall x: s. x < x\n", "E305", 3),
        ("sort s\nsort t\nconstant c: s\ninvariant i: forall x: t. x = c\n", "E304", 4),
        ("sort s\nconstant c: s\ninvariant i: c\n", "E301", 3),
        ("sort s\nrelation r(s)\naxiom a: forall x: s. r(x)\n", "E306", 3),
        ("sort s\nrigid relation r(s)\naction a(x: s) { r(x) := true; }\n", "E405", 3),
        ("sort s\nrelation r(s, s)\naction a(x: s) { forall y: s. r(y, y) := true; }\n", "E406", 3),
        (
            "sort s\nrelation r(s)\naction a(x: s) { r(x) := true; mutation m { [nolabel] skip; } }\n",
            "E404",
            3,
        ),
        (
            "sort s\nrelation r(s)\naction a(x: s) { r(x) := true; }\nwitness w { run b; }\n",
            "E401",
            4,
        ),
    ],
)
def test_type_errors_have_codes_and_lines(source: str, code: str, line: int) -> None:
    with pytest.raises(SpecErrors) as caught:
        check(parse_spec(source, "t.spec"))
    assert (code, line) in {(i.code, i.span.line) for i in caught.value.issues}


def test_all_type_errors_of_a_file_are_reported() -> None:
    source = (
        "sort s\nrelation r(s)\ninvariant i: forall x: s. q(x)\nsafety j: forall x: s. r(x, x)\n"
    )
    with pytest.raises(SpecErrors) as caught:
        check(parse_spec(source, "t.spec"))
    assert [i.code for i in caught.value.issues] == ["E207", "E302"]


# from_lark draws slowly (about 0.5 s per spec here): 20 whole specs keep the suite fast.
@settings(max_examples=20)
@given(from_lark(_parser(), start="start"))
def test_grammar_fuzz_never_crashes(text: str) -> None:
    try:
        spec = parse_spec(text, "fuzz.spec")
    except SpecErrors as errors:
        assert errors.issues
        return
    try:
        check(spec)
    except SpecErrors as errors:
        assert all(i.code.startswith("E") for i in errors.issues)


@given(st.text(alphabet='sortaxiomrelation(){}[];:=<>-!&|,. \nxyz#"', max_size=120))
def test_arbitrary_text_gives_only_typed_errors(text: str) -> None:
    try:
        spec = parse_spec(text, "noise.spec")
    except SpecErrors as errors:
        for issue in errors.issues:
            assert issue.span.line >= 1
        return
    assert isinstance(spec, ast.Spec)

"""EDN reader (lark grammar) and the import of Jepsen's history.edn."""

from __future__ import annotations

from pathlib import Path

import pytest

from etcdspec.checker.edn import Char, EdnError, EdnSet, Keyword, Symbol, parse_edn
from etcdspec.checker.history import HistoryError
from etcdspec.checker.jepsen import import_jepsen, read_jepsen

DATA = Path(__file__).parent / "data"

EDN_CASES = [
    ("nil true false", [None, True, False]),
    ("42 -7 +3 12N", [42, -7, 3, 12]),
    ("1.5 -2e3 3.0M", [1.5, -2000.0, 3.0]),
    ('"a\\"b\\n"', ['a"b\n']),
    (":type :jepsen.x/y", [Keyword("type"), Keyword("jepsen.x/y")]),
    ("foo a.b/c", [Symbol("foo"), Symbol("a.b/c")]),
    ("\\a \\newline", [Char("a"), Char("\n")]),
    ("[1 [2 3]] (4 5)", [[1, [2, 3]], [4, 5]]),
    ("{:a 1, :b [2]}", [{Keyword("a"): 1, Keyword("b"): [2]}]),
    ("#{1 2}", [EdnSet((1, 2))]),
    ('#inst "2024-01-01T00:00:00Z"', ["2024-01-01T00:00:00Z"]),
    ("#jepsen.history.Op{:index 1}", [{Keyword("index"): 1}]),
    ("1 #_ 2 3 ; comment\n 4", [1, 3, 4]),
    ("{[1 2] :x}", [{(1, 2): Keyword("x")}]),
]


@pytest.mark.parametrize(("text", "expected"), EDN_CASES, ids=[c[0] for c in EDN_CASES])
def test_edn_values(text: str, expected: list[object]) -> None:
    assert parse_edn(text) == expected


@pytest.mark.parametrize(
    ("text", "line", "column"), [("{:a 1\n :b ]", 2, 5), ("[1 2", 1, 4), ("{:a}", 0, 0)]
)
def test_edn_errors_say_where(text: str, line: int, column: int) -> None:
    with pytest.raises(EdnError) as caught:
        parse_edn(text, "h.edn")
    assert (caught.value.line, caught.value.column) == (line, column)


def test_cas_register_with_info_and_nemesis() -> None:
    history = read_jepsen(DATA / "register_cas_ok.edn")
    assert [op.type for op in history.operations] == ["ok", "info", "fail", "ok", "info", "ok"]
    assert history.operations[1].request == [1, 2]
    assert any("nemesis" in note for note in history.notes)


def test_independent_keys_become_keyed_values() -> None:
    history = read_jepsen(DATA / "register_independent.edn")
    assert history.operations[0].request == {"key": "1", "value": 5}
    cas = next(op for op in history.operations if op.f == "cas")
    assert cas.request == {"key": "1", "value": [5, 6]}


def test_kv_import_maps_read_write_to_get_put_with_string_values() -> None:
    text = """{:index 0 :time 1 :type :invoke :process 0 :f :write :value [:x 3]}
{:index 1 :time 2 :type :ok :process 0 :f :write :value [:x 3]}
{:index 2 :time 3 :type :invoke :process 0 :f :read :value [:x nil]}
{:index 3 :time 4 :type :ok :process 0 :f :read :value [:x 3]}"""
    history = import_jepsen(text, "kv")
    assert [op.f for op in history.operations] == ["put", "get"]
    assert history.operations[1].response == {"key": "x", "value": "3"}


def test_jepsen_history_breaking_its_rules_is_rejected() -> None:
    text = "{:index 0 :time 1 :type :ok :process 0 :f :read :value 1}"
    with pytest.raises(HistoryError, match="return before its call"):
        import_jepsen(text)

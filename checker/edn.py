"""EDN reader (lark grammar checker/edn.lark): the values Jepsen's history.edn holds.

Contract: `parse_edn(text)` returns the top-level values in order, as plain Python:
nil -> None, booleans, int, float, str, `Keyword`, `Symbol`, `Char`, lists and vectors
-> list, maps -> dict (unhashable keys frozen: lists become tuples), sets -> `EdnSet`,
tagged elements -> `Tagged(tag, value)`, except #inst (kept as its string) and record
tags such as #jepsen.history.Op{...} (the map itself). Discarded forms (#_) vanish.
Errors raise EdnError with line and column and a caret under the offending text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput


class EdnError(ValueError):
    """Malformed EDN: where (line:column) and a caret under the offending text."""

    def __init__(self, source: str, line: int, column: int, message: str, excerpt: str) -> None:
        super().__init__(f"{source}:{line}:{column}: {message}\n{excerpt}")
        self.source = source
        self.line = line
        self.column = column
        self.message = message


@dataclass(frozen=True)
class Keyword:
    name: str

    def describe(self) -> str:
        return f":{self.name}"


@dataclass(frozen=True)
class Symbol:
    name: str

    def describe(self) -> str:
        return self.name


@dataclass(frozen=True)
class Char:
    char: str

    def describe(self) -> str:
        return f"\\{self.char}"


@dataclass(frozen=True)
class EdnSet:
    items: tuple[Any, ...]

    def describe(self) -> str:
        return "#{" + " ".join(map(str, self.items)) + "}"


@dataclass(frozen=True)
class Tagged:
    tag: str
    value: Any

    def describe(self) -> str:
        return f"#{self.tag} {self.value!r}"


_DISCARD = object()
_CHARS = {
    "newline": "\n",
    "space": " ",
    "tab": "\t",
    "return": "\r",
    "formfeed": "\f",
    "backspace": "\b",
}
_STRING_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "b": "\b", "f": "\f"}


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted(((_freeze(k), _freeze(v)) for k, v in value.items()), key=repr))
    return value


def _unescape(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt == "u":
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_STRING_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


@v_args(inline=True)
class _ToPython(Transformer[Token, list[Any]]):
    def start(self, *items: Any) -> list[Any]:
        return [item for item in items if item is not _DISCARD]

    def discard(self, _value: Any) -> Any:
        return _DISCARD

    def map(self, *items: Any) -> dict[Any, Any]:
        items = tuple(item for item in items if item is not _DISCARD)
        if len(items) % 2:
            raise ValueError("a map needs an even number of forms (key value pairs)")
        return {_freeze(items[i]): items[i + 1] for i in range(0, len(items), 2)}

    def vector(self, *items: Any) -> list[Any]:
        return [item for item in items if item is not _DISCARD]

    def list(self, *items: Any) -> list[Any]:
        return [item for item in items if item is not _DISCARD]

    def set(self, *items: Any) -> EdnSet:
        return EdnSet(tuple(item for item in items if item is not _DISCARD))

    def tagged(self, tag: Token, value: Any) -> Any:
        name = str(tag)[1:]
        if name == "inst" or name == "uuid":
            return value
        if isinstance(value, dict):  # a record literal, e.g. #jepsen.history.Op{...}
            return value
        return Tagged(name, value)

    def string(self, token: Token) -> str:
        return _unescape(str(token)[1:-1])

    def char(self, token: Token) -> Char:
        body = str(token)[1:]
        if body in _CHARS:
            return Char(_CHARS[body])
        if len(body) == 5 and body[0] == "u":
            return Char(chr(int(body[1:], 16)))
        return Char(body)

    def keyword(self, token: Token) -> Keyword:
        return Keyword(str(token)[1:])

    def int(self, token: Token) -> int:
        return int(str(token).rstrip("N"))

    def float(self, token: Token) -> float:
        return float(str(token).rstrip("M"))

    def symbol(self, token: Token) -> Any:
        name = str(token)
        if name == "nil":
            return None
        if name == "true":
            return True
        if name == "false":
            return False
        return Symbol(name)


@cache
def _parser() -> Lark:
    grammar = resources.files("etcdspec.checker").joinpath("edn.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=False, maybe_placeholders=False)


def parse_edn(text: str, source: str = "<edn>") -> list[Any]:
    """All top-level EDN values in `text`, in order."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as error:
        line, column = error.line, error.column
        excerpt = error.get_context(text, span=40)
        raise EdnError(source, line, column, _message(error), excerpt) from error
    try:
        result: list[Any] = _ToPython().transform(tree)
    except Exception as error:  # lark wraps transformer errors in VisitError
        cause = error.__context__ or error
        raise EdnError(source, 0, 0, str(cause), "") from error
    return result


def _message(error: UnexpectedInput) -> str:
    token = getattr(error, "token", None)
    if token is not None:
        return f"unexpected {json.dumps(str(token))}"
    char = getattr(error, "char", None)
    if char is not None:
        return f"unexpected character {json.dumps(char)}"
    return "unexpected input"

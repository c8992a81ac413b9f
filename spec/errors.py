"""Typed errors in spec files: a code, file:line:col, a message and a caret.

`SpecIssue` is one located problem; `SpecErrors` is the exception that carries every
problem found in a file (the parser and the type checker report all of them, not just
the first). `describe()` renders the canonical text:

    spec/raft.spec:12:13: error E203: unknown relation 'leadr'; declare it or fix the name
        require leadr(n, t);
                ^^^^^

Codes: E1xx syntax, E2xx names and declarations, E3xx types, E4xx actions, mutations
and witnesses. `SpecLookupError` is for a request naming something the spec lacks (an
unknown spec file, property, action or mutation).
"""

from __future__ import annotations

from dataclasses import dataclass

from etcdspec.spec.ast import Span


@dataclass(frozen=True)
class SpecIssue:
    code: str
    message: str
    span: Span
    filename: str
    source_line: str = ""

    def describe(self) -> str:
        head = f"{self.filename}:{self.span.line}:{self.span.column}: error {self.code}: {self.message}"
        if not self.source_line or self.span.line <= 0:
            return head
        start = max(self.span.column - 1, 0)
        if self.span.end_line == self.span.line and self.span.end_column > self.span.column:
            width = self.span.end_column - self.span.column
        else:
            width = max(len(self.source_line.rstrip()) - start, 1)
        width = max(1, min(width, max(len(self.source_line) - start, 1)))
        caret = " " * start + "^" * width
        return f"{head}\n    {self.source_line.rstrip()}\n    {caret}"


class SpecErrors(Exception):
    """Every error found in one spec file (never empty)."""

    def __init__(self, issues: list[SpecIssue]) -> None:
        assert issues, "SpecErrors needs at least one issue"
        self.issues = sorted(issues, key=lambda i: (i.span.line, i.span.column, i.code))
        super().__init__(self.describe())

    def describe(self) -> str:
        return "\n".join(issue.describe() for issue in self.issues)


class SpecLookupError(Exception):
    """A request names a spec, property, action or mutation that does not exist."""


class IssueCollector:
    """Gathers issues for one file, filling in the source line under each caret."""

    def __init__(self, filename: str, source: str) -> None:
        self.filename = filename
        self.lines = source.splitlines()
        self.issues: list[SpecIssue] = []

    def add(self, code: str, message: str, span: Span) -> None:
        line = self.lines[span.line - 1] if 0 < span.line <= len(self.lines) else ""
        self.issues.append(SpecIssue(code, message, span, self.filename, line))

    def raise_if_any(self) -> None:
        if self.issues:
            raise SpecErrors(self.issues)

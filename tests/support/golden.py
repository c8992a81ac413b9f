"""Golden transcripts: one runner, one file format and one rewrite switch for every kind of
data-driven test (the server's Raft core, the model's store, the model's cluster, ...).

File format (`*.txt`, one item a line):

    # a comment                   kept as written, as are blank lines
    config: key=value key=value   optional, before the first command: the settings the
                                  interpreter is started with (at most one such line)
    > command                     one command: the text after `>` is given to the interpreter
    output line                   every other line up to the next command is the expected
    output line                   output of the command above it

Comments and blank lines belong between commands: one written among a command's output
lines is moved after them when the file is rewritten. A script with no command fails.

Interface (all a new kind needs):

    class Interpreter(Protocol):
        def run(self, command: str) -> list[str]: ...   # one command in, its output lines out

    run_golden(path, start, rewrite=...) -> Interpreter

`start(**config)` makes the script's interpreter, called with the config line's settings as
keyword arguments, every value a string (with no config line, `start()`): a class whose
constructor takes the settings is a `start`. The runner gives each command to
`run` in turn; an exception it raises becomes the output line `error: Type: message` (and
the script goes on), so a golden file pins errors too. An output line must be one line, not
blank, without trailing whitespace and not starting with `#` or `>`, so that it reads back
as output; one that would not makes the runner raise `GoldenError`.

The whole transcript is compared: on a mismatch the test fails with a unified diff naming
the file. With `rewrite=True` (pytest's `--rewrite-golden`, registered in tests/conftest.py
and given to tests as the `rewrite_golden` fixture) a file whose transcript differs is
rewritten from the actual output and the test still fails, saying it rewrote the file and
showing the diff: a rewrite run never reads as green, and the diff is what to review before
committing. A file that already matches is left alone and passes.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol, TypeVar

import pytest

CONFIG = "config:"


class Interpreter(Protocol):
    def run(self, command: str) -> list[str]: ...


AnyInterpreter = TypeVar("AnyInterpreter", bound=Interpreter)


class GoldenError(ValueError):
    """A golden script the runner cannot read, or an output line it could not write back."""


class Kind(Enum):
    COMMAND = "command"
    OUTPUT = "output"
    KEPT = "kept"  # a comment, a blank line or the config line: written back as it is


@dataclass(frozen=True)
class Line:
    kind: Kind
    text: str  # a command's text without its `>`; any other line as written
    number: int

    def render(self) -> str:
        return f"> {self.text}" if self.kind is Kind.COMMAND else self.text


@dataclass(frozen=True)
class Script:
    path: Path
    lines: tuple[Line, ...]
    config: dict[str, str]

    def commands(self) -> list[Line]:
        return [line for line in self.lines if line.kind is Kind.COMMAND]

    def expected(self) -> list[list[str]]:
        """The output lines written under each command."""
        outputs: list[list[str]] = []
        for line in self.lines:
            if line.kind is Kind.COMMAND:
                outputs.append([])
            elif line.kind is Kind.OUTPUT:
                outputs[-1].append(line.text)
        return outputs

    def transcript(self, outputs: list[list[str]]) -> str:
        """The script's text with `outputs[i]` under its i-th command."""
        out: list[str] = []
        results = iter(outputs)
        for line in self.lines:
            if line.kind is Kind.OUTPUT:
                continue
            out.append(line.render())
            if line.kind is Kind.COMMAND:
                out.extend(next(results))
        return "\n".join(out) + "\n"


def parse(path: Path, text: str) -> Script:
    """Read a script; a line the format does not allow raises `GoldenError` at path:line."""
    lines: list[Line] = []
    config: dict[str, str] = {}
    started = configured = False  # a command, the config line was read
    for number, raw in enumerate(text.splitlines(), 1):
        line, where = raw.rstrip(), f"{path}:{number}"
        if line.startswith(">"):
            if not line[1:].strip():
                raise GoldenError(f"{where}: `>` with no command; write `> COMMAND`")
            lines.append(Line(Kind.COMMAND, line[1:].strip(), number))
            started = True
        elif not line or line.startswith("#"):
            lines.append(Line(Kind.KEPT, line, number))
        elif started:
            lines.append(Line(Kind.OUTPUT, line, number))
        elif line.startswith(CONFIG) and not configured:
            config, configured = _config(where, line[len(CONFIG) :]), True
            lines.append(Line(Kind.KEPT, line, number))
        else:
            raise GoldenError(
                f"{where}: {line!r} comes before the first command; output goes under a "
                f"`> COMMAND` line, settings on one `{CONFIG} key=value ...` line, notes after `#`"
            )
    if not started:
        raise GoldenError(f"{path}: no commands; a golden script needs `> COMMAND` lines")
    return Script(path, tuple(lines), config)


def _config(where: str, text: str) -> dict[str, str]:
    config: dict[str, str] = {}
    for word in text.split():
        key, equals, value = word.partition("=")
        if not equals or not key or key in config:
            raise GoldenError(f"{where}: config {word!r}: write distinct key=value words")
        config[key] = value
    return config


def outputs_of(interpreter: Interpreter, command: str, where: str) -> list[str]:
    """What `command` prints: the interpreter's lines, or the error it raised."""
    try:
        lines = interpreter.run(command)
    except Exception as error:  # errors are part of the transcript
        return error_lines(error)
    if isinstance(lines, str):
        raise GoldenError(f"{where}: `{command}`: run() must return a list of lines, not a str")
    for line in lines:
        if (
            not isinstance(line, str)
            or not line.strip()
            or "\n" in line
            or line != line.rstrip()
            or line.startswith(("#", ">"))
        ):
            raise GoldenError(
                f"{where}: `{command}` printed {line!r}, which would not read back as output; "
                "an output line is one line, not blank, without trailing whitespace, not "
                "starting with `#` or `>`"
            )
    return list(lines)


def error_lines(error: Exception) -> list[str]:
    """`error: Type: message`; further lines of the message indented under it."""
    first, *rest = str(error).splitlines() or [""]
    head = f"error: {type(error).__name__}" + (f": {first.rstrip()}" if first.strip() else "")
    return [head, *("  " + line.rstrip() for line in rest if line.strip())]


def run_golden(
    path: Path, start: Callable[..., AnyInterpreter], *, rewrite: bool
) -> AnyInterpreter:
    """Run the script at `path` on `start(**config)` and return that interpreter (for
    checks of its final state); fail on a mismatch (see the module docstring)."""
    text = path.read_text()
    script = parse(path, text)
    try:
        interpreter = start(**script.config)
    except Exception as error:
        settings = " ".join(f"{key}={value}" for key, value in script.config.items())
        raise GoldenError(f"{path}: cannot start with `{CONFIG} {settings}`: {error}") from error
    actual = [
        outputs_of(interpreter, line.text, f"{path}:{line.number}") for line in script.commands()
    ]
    produced = script.transcript(actual)
    if rewrite:
        if produced != text:
            path.write_text(produced)
            pytest.fail(
                f"rewrote {path} from the actual output (--rewrite-golden); review the change:\n"
                + _diff(path, text, produced, "before", "rewritten"),
                pytrace=False,
            )
        return interpreter
    expected = script.transcript(script.expected())
    if produced != expected:
        pytest.fail(
            f"{path}: the transcript differs from the golden file "
            "(rerun with --rewrite-golden to accept it):\n"
            + _diff(path, expected, produced, "expected", "actual"),
            pytrace=False,
        )
    return interpreter


def _diff(path: Path, old: str, new: str, old_name: str, new_name: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"{path} ({old_name})",
            tofile=f"{path} ({new_name})",
        )
    )

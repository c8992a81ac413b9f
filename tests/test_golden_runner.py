"""The golden-transcript runner (tests/support/golden.py) on a toy interpreter: a matching
transcript passes, a changed one fails with a diff naming the file, a script without
commands fails, errors are printed into the output, and --rewrite-golden rewrites."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from golden import GoldenError, run_golden

pytest_plugins = ["pytester"]


class Counter:
    """`add N` prints the new total, `quiet` prints nothing, `say WORDS` prints them;
    anything else raises."""

    def __init__(self, start: str = "0") -> None:
        self.total = int(start)

    def run(self, command: str) -> list[str]:
        word, *args = command.split()
        if word == "add":
            self.total += int(args[0])
            return [f"total {self.total}"]
        if word == "quiet":
            return []
        if word == "say":
            return [" ".join(args)]
        raise ValueError(f"unknown command {word!r}\nuse add, quiet or say")


SCRIPT = """\
# adds up
config: start=10
> add 1
total 11

> quiet
> add 2
total 13
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.txt"
    path.write_text(text)
    return path


def test_a_matching_transcript_passes_with_the_config_line_as_keyword_arguments(
    tmp_path: Path,
) -> None:
    interpreter = run_golden(_write(tmp_path, SCRIPT), Counter, rewrite=False)
    assert interpreter.total == 13


def test_a_changed_expectation_fails_with_a_diff_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, SCRIPT.replace("total 13", "total 14"))
    with pytest.raises(pytest.fail.Exception) as failure:
        run_golden(path, Counter, rewrite=False)
    message = str(failure.value)
    assert f"--- {path} (expected)\n+++ {path} (actual)\n" in message
    assert "\n-total 14\n+total 13\n" in message
    assert "--rewrite-golden" in message
    assert path.read_text() == SCRIPT.replace("total 13", "total 14")


@pytest.mark.parametrize(
    "text",
    [
        "> add 1\ntotal 1\ntotal 1\n",
        "> add 1\n> add 1\ntotal 2\n",
        "> add 1\n> add 1\ntotal 1\ntotal 2\n",
    ],
    ids=["an_extra_line", "a_missing_line", "a_line_under_the_wrong_command"],
)
def test_any_difference_in_the_transcript_fails(tmp_path: Path, text: str) -> None:
    with pytest.raises(pytest.fail.Exception, match="differs from the golden file"):
        run_golden(_write(tmp_path, text), Counter, rewrite=False)


def test_output_before_the_first_command_is_refused_at_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "# note\ntotal 1\n> add 1\ntotal 1\n")
    with pytest.raises(GoldenError, match=re.escape(f"{path}:2: 'total 1' comes before the first")):
        run_golden(path, Counter, rewrite=True)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "config: start=1\n"], ids=repr)
def test_a_script_without_commands_fails(tmp_path: Path, text: str) -> None:
    with pytest.raises(GoldenError, match="no commands"):
        run_golden(_write(tmp_path, text), Counter, rewrite=False)
    with pytest.raises(GoldenError, match="no commands"):
        run_golden(_write(tmp_path, text), Counter, rewrite=True)


def test_errors_are_printed_into_the_output_and_the_script_goes_on(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "> frobnicate\n"
        "error: ValueError: unknown command 'frobnicate'\n"
        "  use add, quiet or say\n"
        "> add x\n"
        "error: ValueError: invalid literal for int() with base 10: 'x'\n"
        "> add 1\n"
        "total 1\n",
    )
    run_golden(path, Counter, rewrite=False)


def test_the_rewrite_switch_rewrites_from_the_actual_output_and_fails(tmp_path: Path) -> None:
    path = _write(tmp_path, SCRIPT.replace("total 11\n", "").replace("total 13", "total 99"))
    with pytest.raises(pytest.fail.Exception, match=re.escape(f"rewrote {path} ")):
        run_golden(path, Counter, rewrite=True)
    assert path.read_text() == SCRIPT  # comments, blank lines and the config line kept
    run_golden(path, Counter, rewrite=False)
    run_golden(path, Counter, rewrite=True)  # nothing to rewrite: passes, file untouched
    assert path.read_text() == SCRIPT


def test_an_output_line_that_would_not_read_back_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GoldenError, match="would not read back"):
        run_golden(_write(tmp_path, "> say # not a comment\n"), Counter, rewrite=True)


def test_a_config_line_the_interpreter_does_not_take_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GoldenError, match="cannot start with `config: colour=red`"):
        run_golden(_write(tmp_path, "config: colour=red\n> add 1\n"), Counter, rewrite=False)


def test_rewrite_golden_is_a_pytest_option(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    (pytester.path / "script.txt").write_text("> add 2\ntotal 3\n")
    pytester.makepyfile(
        test_it="""
        from pathlib import Path
        from golden import run_golden

        class Adder:
            total = 0

            def run(self, command):
                self.total += int(command.split()[1])
                return [f"total {self.total}"]

        def test_script(rewrite_golden):
            run_golden(Path("script.txt"), Adder, rewrite=rewrite_golden)
        """
    )
    pytester.runpytest().assert_outcomes(failed=1)
    assert (pytester.path / "script.txt").read_text() == "> add 2\ntotal 3\n"
    rewriting = pytester.runpytest("--rewrite-golden")
    rewriting.assert_outcomes(failed=1)
    rewriting.stdout.fnmatch_lines(["*rewrote script.txt*", "+total 2"])
    assert (pytester.path / "script.txt").read_text() == "> add 2\ntotal 2\n"
    pytester.runpytest().assert_outcomes(passed=1)

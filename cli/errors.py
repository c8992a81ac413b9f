"""The one error type a verb raises to end with a message and a chosen exit code."""

from __future__ import annotations

from etcdspec.exitcodes import ExitCode


class CliError(Exception):
    """Ends the command: `etcdspec: <message>` on stderr, then exit with `code`."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

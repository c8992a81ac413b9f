"""Process exit codes of every `etcdspec` verb (DESIGN.md, "Command line").

An uncaught exception must never exit 1, which means "violation found": the command
line maps it to INTERNAL_ERROR.
"""

from enum import IntEnum


class ExitCode(IntEnum):
    HOLDS = 0
    VIOLATION = 1
    USAGE = 2
    UNKNOWN = 3
    BAD_INPUT = 4
    UNREACHABLE = 5
    INTERNAL_ERROR = 255

"""`etcdspec check-trace FILE…`: replay members' Raft traces on the model.

A thin layer over `etcdspec.checker.trace_check.check_traces` (tests call that directly):
prints the verdict, the number of events and, on failure, the first event the model
cannot follow with the rule it breaks and the nodes' reconstructed states (with --json,
the result as one JSON object on stdout, schema "etcdspec-trace-check" version 1). Exits
0 (the traces replay), 1 (an event cannot be followed) or 4 (a file is missing or
malformed: file:line says where).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode

RESULT_SCHEMA = "etcdspec-trace-check"
RESULT_VERSION = 1


@click.command("check-trace")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def check_trace(files: tuple[Path, ...], as_json: bool) -> int:
    """Replay the members' traces FILES (one per member, from `serve --trace`; a
    directory stands for its *.trace.ndjson files, as `cluster up --trace` writes them)."""
    from etcdspec.checker.trace_check import check_traces
    from etcdspec.checker.trace_format import TraceFormatError

    try:
        result = check_traces(list(files))
    except TraceFormatError as error:
        raise CliError(f"bad trace: {error}", ExitCode.BAD_INPUT) from None
    if as_json:
        document = {"schema": RESULT_SCHEMA, "version": RESULT_VERSION, **result.to_json()}
        click.echo(json.dumps(document, indent=2, sort_keys=False))
    else:
        click.echo(result.describe())
    return int(result.verdict.exit_code())

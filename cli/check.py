"""`etcdspec check HISTORY`: linearizability and watch guarantees of a recorded history.

A thin layer over `etcdspec.checker.check` (tests call that directly): prints the
summary table (or, with --json, result.json on stdout), writes the report folder with
--report, and exits 0 (holds), 1 (violation), 3 (unknown: timeout or memory bound, or
every operation dropped as unobservable) or 4 (bad input, an empty history among it
unless --allow-empty).
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode


@click.command("check")
@click.argument("history", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--model",
    type=click.Choice(["register", "kv", "etcd"]),
    default="etcd",
    show_default=True,
    help="The sequential model the history is checked against.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "edn"]),
    default=None,
    help="History format (default: edn for *.edn, else jsonl).",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write result.json and timeline.html here.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=None,
    help="Seconds before the verdict is unknown.",
)
@click.option(
    "--memory",
    "max_memory_mb",
    type=float,
    default=None,
    help=(
        "Resident memory bound (MB); reaching it gives unknown. Default: 4096 MB or half "
        "the physical memory, whichever is smaller; 0 means unbounded."
    ),
)
@click.option("--no-lease-expiry", is_flag=True, help="Leases cannot expire during the run.")
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Let a history with no operation (or none the model can check) hold.",
)
@click.option("--json", "as_json", is_flag=True, help="Print result.json on stdout.")
def check(
    history: Path,
    model: str,
    fmt: str | None,
    report_dir: Path | None,
    timeout_s: float | None,
    max_memory_mb: float | None,
    no_lease_expiry: bool,
    allow_empty: bool,
    as_json: bool,
) -> int:
    """Check HISTORY (JSON Lines or Jepsen EDN) for linearizability and watch guarantees."""
    from etcdspec.checker.check import BadInput, CheckOptions, check_history, load_history

    if fmt is None:
        fmt = "edn" if history.suffix == ".edn" else "jsonl"
    options = CheckOptions(
        model=model,
        timeout_s=timeout_s,
        max_memory_mb=max_memory_mb,
        lease_expiry=not no_lease_expiry,
        allow_empty=allow_empty,
    )
    try:
        loaded = load_history(history, fmt, model)
        result = check_history(loaded, options)
    except BadInput as error:
        raise CliError(f"bad input: {error}", ExitCode.BAD_INPUT) from error
    # The process ends after the report: the history and the search's objects (millions
    # at 100k operations) go to the collector's permanent generation, so the collection
    # the interpreter runs at exit does not scan them all once more (1.2-1.8 s at 100k
    # operations). They are still freed by reference counting; only cyclic garbage among
    # them would outlive a caller that runs this command in-process.
    gc.freeze()
    if report_dir is not None:
        from etcdspec.checker.report import write_report  # the page's modules, only here

        paths = write_report(result, report_dir, options)
        click.echo(f"report: {paths['result']} and {paths['timeline']}", err=True)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        click.echo(result.describe())
    return int(result.verdict.exit_code())

"""`etcdspec diagram FILE… -o OUT.html`: a counterexample drawn as a message-sequence diagram.

A thin layer over checker/diagram_itf.py, checker/diagram_trace.py and
checker/diagram_page.py (tests call those directly). FILE is one ITF file (`.itf.json`:
`etcdspec explore --itf`, `etcdspec prove --itf`, Apalache, Quint) or the members' Raft
traces (`*.trace.ndjson` files, or a directory of them, as `check-trace` takes). Prints
the page's path and what it shows on stderr (`--quiet`: nothing), and with `--text` the
diagram's canonical text on stdout. Exits 0 when the page is written, 4 when an input
cannot be read (the message says why), 2 on a usage error.
"""

from __future__ import annotations

from pathlib import Path

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode


def is_trace_input(files: tuple[Path, ...]) -> bool:
    return all(f.is_dir() or f.name.endswith(".ndjson") for f in files)


@click.command("diagram")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="The HTML page to write.",
)
@click.option("--invariant", default="", help="Name the violated invariant (ITF from elsewhere).")
@click.option("--text", "as_text", is_flag=True, help="Also print the diagram as text on stdout.")
@click.option("--quiet", is_flag=True, help="Print nothing on stderr.")
def diagram(
    files: tuple[Path, ...], output: Path, invariant: str, as_text: bool, quiet: bool
) -> int:
    """Draw the counterexample in FILES as a self-contained HTML page."""
    from etcdspec.checker.diagram_itf import DiagramInputError, diagram_from_itf, load_itf
    from etcdspec.checker.diagram_page import write_diagram
    from etcdspec.checker.diagram_trace import diagram_from_traces
    from etcdspec.checker.trace_format import TraceFormatError

    try:
        if is_trace_input(files):
            drawn = diagram_from_traces(list(files))
        elif len(files) == 1:
            drawn = diagram_from_itf(load_itf(files[0]), invariant)
        else:
            raise CliError(
                "give one ITF file, or trace files (*.ndjson) or a directory of them",
                ExitCode.USAGE,
            )
    except (DiagramInputError, TraceFormatError) as error:
        raise CliError(f"cannot draw: {error}", ExitCode.BAD_INPUT) from None
    write_diagram(drawn, output)
    if as_text:
        click.echo(drawn.describe())
    if not quiet:
        for note in drawn.notes:
            click.echo(f"[diagram] note: {note}", err=True)
        click.echo(
            f"[diagram] {output}: {drawn.title}; {len(drawn.steps) - 1} step(s), "
            f"{len(drawn.messages)} message(s) ({drawn.source})",
            err=True,
        )
    return int(ExitCode.HOLDS)

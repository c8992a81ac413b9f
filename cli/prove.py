"""`etcdspec prove [SPEC...]`: Z3 proofs of the specs' invariants, or bounded model checking.

A thin layer over etcdspec.spec.prove.prove and etcdspec.spec.bmc.bmc. Progress and
counterexamples go to stderr/stdout as text, or one JSON document on stdout with
--json. Exit: 0 proved, 1 counterexample, 2 unknown spec file / property / mutation,
3 a Z3 timeout or unknown, 4 a spec with syntax or type errors (every error located).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode
from etcdspec.verdict import Verdict


@click.command("prove")
@click.argument("specs", nargs=-1)
@click.option("--mutation", default=None, help="Switch on a seeded mutation (a spec bug) by name.")
@click.option("--only", "only", multiple=True, help="Prove only this property (repeatable).")
@click.option(
    "--action",
    "actions",
    multiple=True,
    help="Check only this action (repeatable); with --bmc, runs of only these actions.",
)
@click.option("--fail-fast", is_flag=True, help="Stop at the first obligation not proved.")
@click.option(
    "--timeout",
    "timeout",
    type=float,
    default=30.0,
    show_default=True,
    help=(
        "Z3 work per query, in seconds of this machine's Z3 speed (counted in Z3's resource "
        "units, so machine load does not change an answer); the wall clock is capped at 3x."
    ),
)
@click.option(
    "--jobs",
    "jobs",
    type=int,
    default=None,
    help="Processes for a proof (default: 2 on a multi-core machine for large specs; 1 = serial).",
)
@click.option(
    "--bmc",
    "bmc_depth",
    type=int,
    default=None,
    help="Bounded model checking up to K steps instead of the proof.",
)
@click.option(
    "--size", "size_text", default="", help="Instance sizes for --bmc, e.g. node=3,term=3,index=3."
)
@click.option(
    "--rounds",
    is_flag=True,
    help=(
        "With --bmc K: K rounds, each firing every action at most once in declaration "
        "order (covers all runs of up to K steps, and deep runs that follow that order)."
    ),
)
@click.option(
    "--itf",
    "itf_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the first counterexample as ITF JSON.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--list-mutations", is_flag=True, help="List the seeded mutations of the specs and exit."
)
@click.option(
    "--hints/--no-hints",
    "use_hints",
    default=True,
    show_default=True,
    help=(
        "Try each induction query first with only the properties its proof hint names "
        "(the spec's .hints sidecar); verdicts do not depend on it."
    ),
)
@click.option(
    "--quiet",
    is_flag=True,
    help="No progress on stderr (progress is shown only when stderr is a terminal).",
)
@click.option(
    "--write-hints",
    is_flag=True,
    help="Compute the SPECs' proof hints (unsat cores), write their .hints sidecars, and exit.",
)
def prove(
    specs: tuple[str, ...],
    mutation: str | None,
    only: tuple[str, ...],
    actions: tuple[str, ...],
    fail_fast: bool,
    timeout: float,
    bmc_depth: int | None,
    size_text: str,
    rounds: bool,
    itf_path: Path | None,
    as_json: bool,
    list_mutations: bool,
    jobs: int | None,
    use_hints: bool,
    quiet: bool,
    write_hints: bool,
) -> int:
    """Prove every invariant of the SPECs inductive (default: raft, raft_steps, mvcc, lease, auth).

    SPEC is a built-in name or a path. Exit: 0 proved, 1 counterexample, 2 unknown
    spec/property/action/mutation, 3 Z3 timeout or unknown, 4 syntax or type errors.
    """
    from etcdspec.spec.bmc import bmc, parse_sizes
    from etcdspec.spec.errors import SpecErrors, SpecLookupError
    from etcdspec.spec.loader import BUILTIN_SPECS, load_spec
    from etcdspec.spec.prove import prove as prove_spec

    names = list(specs) or list(BUILTIN_SPECS)
    if timeout <= 0:
        raise CliError("--timeout must be positive (seconds per Z3 query)", ExitCode.USAGE)
    if jobs is not None and jobs < 1:
        raise CliError("--jobs must be at least 1 (1 proves in this process)", ExitCode.USAGE)
    if bmc_depth is not None and bmc_depth < 0:
        raise CliError("--bmc K needs K >= 0 (the number of steps)", ExitCode.USAGE)
    if rounds and bmc_depth is None:
        raise CliError("--rounds counts the bound of --bmc K: give --bmc K too", ExitCode.USAGE)
    try:
        sizes = parse_sizes(size_text)
    except ValueError as error:
        raise CliError(str(error), ExitCode.USAGE) from error
    try:
        loaded_plain = [load_spec(name) for name in names]
    except SpecErrors as errors:
        click.echo(errors.describe(), err=True)
        raise CliError(
            f"{len(errors.issues)} error(s) in the spec; fix them and run again", ExitCode.BAD_INPUT
        ) from errors
    except SpecLookupError as error:
        raise CliError(str(error), ExitCode.USAGE) from error
    if list_mutations:
        for loaded in loaded_plain:
            for action in loaded.spec.actions():
                for mut in action.mutations:
                    click.echo(f"{loaded.name}: {mut.name} (in {action.name}) — {mut.description}")
        return int(ExitCode.HOLDS)
    if write_hints:
        from etcdspec.spec.hints import write_hints as write_sidecar

        for loaded in loaded_plain:
            path, hints = write_sidecar(loaded)
            click.echo(f"{path}: {len(hints.entries)} hints")
        return int(ExitCode.HOLDS)
    targets = loaded_plain
    if mutation is not None:
        owners = [ls for ls in loaded_plain if mutation in ls.spec.mutation_names()]
        if not owners:
            known = ", ".join(m for ls in loaded_plain for m in ls.spec.mutation_names()) or "none"
            raise CliError(f"unknown mutation '{mutation}' (known: {known})", ExitCode.USAGE)
        targets = [load_spec(str(_path_of(ls.spec.filename, ls.name)), mutation) for ls in owners]
    if only:
        known_props = {p.name for ls in targets for p in ls.spec.properties()}
        missing = [p for p in only if p not in known_props]
        if missing:
            raise CliError(
                f"unknown property {', '.join(missing)} (known: {', '.join(sorted(known_props))})",
                ExitCode.USAGE,
            )

    verdicts: list[Verdict] = []
    documents: list[dict[str, Any]] = []
    first_cex = None
    # One report per stream: the report goes to stdout once; the per-query progress
    # (which repeats the report's lines as they come) only to a terminal's stderr.
    progress = show_progress(as_json, quiet)
    for loaded in targets:
        try:
            if bmc_depth is not None:
                result = bmc(
                    loaded,
                    bmc_depth,
                    sizes,
                    int(timeout * 1000),
                    on_depth=None
                    if not progress
                    else lambda k, s: click.echo(
                        f"  depth {k}: no violation ({s:.2f} s)", err=True
                    ),
                    only=[p for p in only if p in {d.name for d in loaded.spec.properties()}],
                    rounds=rounds,
                    actions=actions,
                )
                verdicts.append(result.verdict)
                documents.append(result.to_json())
                if not as_json:
                    click.echo(result.describe())
                first_cex = first_cex or result.counterexample
                continue
            wanted = [p for p in only if p in {d.name for d in loaded.spec.properties()}]
            if only and not wanted:
                continue
            report = prove_spec(
                loaded,
                int(timeout * 1000),
                wanted,
                on_result=None
                if not progress
                else lambda r: click.echo("  " + r.describe(), err=True),
                actions=actions,
                fail_fast=fail_fast,
                jobs=jobs,
                hints=use_hints,
            )
        except SpecLookupError as error:
            raise CliError(str(error), ExitCode.USAGE) from error
        verdicts.append(report.verdict)
        documents.append(report.to_json())
        if not as_json:
            click.echo(report.describe())
        first_cex = first_cex or report.first_counterexample()
    overall = Verdict.merge_all(verdicts)
    if itf_path is not None and first_cex is not None:
        first_cex.to_itf(source=", ".join(t.describe() for t in targets)).write(itf_path)
        if not as_json and not quiet:
            click.echo(f"counterexample written to {itf_path} (ITF)", err=True)
    if as_json:
        key = "bmc" if bmc_depth is not None else "specs"
        click.echo(
            json.dumps(
                {"schema": "etcdspec.prove/1", "valid": overall.to_json(), key: documents}, indent=2
            )
        )
    return int(overall.exit_code())


def _path_of(filename: str, name: str) -> str:
    path = Path(filename)
    return str(path) if path.is_file() else name


def show_progress(as_json: bool, quiet: bool) -> bool:
    """Progress on stderr: only for a person at a terminal, never with --json or --quiet."""
    return not as_json and not quiet and sys.stderr.isatty()

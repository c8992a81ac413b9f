"""`etcdspec replay FILE.itf.json`: a model counterexample replayed on the other layers.

A thin layer over two library calls (tests call them directly):
- `--on impl`: etcdspec.impl.tools.itf_replay.replay_itf — each step given to the
  server's Raft core, every node's role, term, commit index and log terms compared with
  the model's after each step;
- `--on spec`: etcdspec.model.refinement_replay.replay_on_spec — the run rebuilt from
  the config in the ITF's #meta and each step checked on the spec's finite evaluator
  (raft_steps.spec): which spec actions explain it, or which `require` refuses it.
`--on both` (the default) prints the spec's replay, then the core's; a layer that
cannot read the file is named on stderr and counts as unknown.
Exits 0 when every step maps and agrees on every layer asked, 1 when a layer differs at
a step, 3 when a replay stopped at a step it cannot take before any difference (unknown
beyond it), 4 when the file is not a model cluster's ITF (with its config, for the spec).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode


def _on_spec(document: dict[str, Any]) -> tuple[str, str | None]:
    from etcdspec.model.refinement_replay import SpecReplayInputError, replay_on_spec

    try:
        result = replay_on_spec(document)
    except SpecReplayInputError as error:
        raise CliError(f"cannot replay on the spec: {error}", ExitCode.BAD_INPUT) from None
    first = result.first_difference()
    return result.describe(), None if first is None else first.outcome


def _on_impl(document: dict[str, Any]) -> tuple[str, str | None]:
    from etcdspec.impl.tools.itf_replay import ReplayInputError, replay_itf

    try:
        result = replay_itf(document)
    except ReplayInputError as error:
        raise CliError(f"cannot replay on the core: {error}", ExitCode.BAD_INPUT) from None
    first = result.first_difference()
    return result.describe(), None if first is None else first.outcome


@click.command("replay")
@click.argument("itf_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--on",
    "layer",
    type=click.Choice(["both", "spec", "impl"]),
    default="both",
    show_default=True,
    help="Replay on the spec's evaluator, the server's Raft core, or both.",
)
def replay(itf_file: Path, layer: str) -> int:
    """Replay the model's counterexample ITF_FILE (explore --itf) on the spec's evaluator
    and the server's Raft core."""
    try:
        document = json.loads(itf_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CliError(f"cannot replay {itf_file}: {error}", ExitCode.BAD_INPUT) from None
    if not isinstance(document, dict):
        raise CliError(f"cannot replay {itf_file}: not an ITF object", ExitCode.BAD_INPUT)
    runs = [(_on_spec, "spec"), (_on_impl, "impl")]
    outcomes: list[str | None] = []
    refused: list[CliError] = []
    for replay_on, name in runs:
        if layer not in (name, "both"):
            continue
        try:
            text, outcome = replay_on(document)
        except CliError as error:
            if layer != "both":
                raise
            refused.append(error)
            continue
        click.echo(text)
        outcomes.append(outcome)
    if not outcomes:
        raise refused[0]
    for skipped in refused:
        click.echo(f"{skipped.message} (that layer is skipped)", err=True)
        outcomes.append("does not map")
    if "differs" in outcomes:
        return int(ExitCode.VIOLATION)
    if "does not map" in outcomes:
        return int(ExitCode.UNKNOWN)
    return int(ExitCode.HOLDS)

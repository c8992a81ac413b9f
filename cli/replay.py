"""`etcdspec replay FILE.itf.json`: a model counterexample replayed on the server's Raft core.

A thin layer over etcdspec.impl.tools.itf_replay.replay_itf (tests call it directly):
prints, per step of the run, whether the core took it and whether every node's role,
term, commit index and log terms agree with the model's. Exits 0 when every step maps
and agrees, 1 when the layers differ at a step, 3 when the replay stopped at a step the
core cannot take before any difference (unknown beyond it), 4 when the file is not a
model cluster's ITF.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode


@click.command("replay")
@click.argument("itf_file", type=click.Path(path_type=Path, dir_okay=False))
def replay(itf_file: Path) -> int:
    """Replay the model's counterexample ITF_FILE (explore --itf) on the server's Raft core."""
    from etcdspec.impl.tools.itf_replay import ReplayInputError, replay_itf

    try:
        document = json.loads(itf_file.read_text(encoding="utf-8"))
        result = replay_itf(document)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ReplayInputError) as error:
        raise CliError(f"cannot replay {itf_file}: {error}", ExitCode.BAD_INPUT) from None
    click.echo(result.describe())
    first = result.first_difference()
    if first is None:
        return int(ExitCode.HOLDS)
    return int(ExitCode.VIOLATION if first.outcome == "differs" else ExitCode.UNKNOWN)

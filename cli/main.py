"""Entry point of the `etcdspec` program: the verb table and exit-code discipline.

Verbs are loaded lazily (importing Z3 or gRPC for `etcdspec explore` would only slow
it down). Exit codes follow `etcdspec.exitcodes`: a verb returns its ExitCode; usage
errors exit 2; a CliError exits with its own code; any other exception is an internal
error (255) — never 1, which means "violation found".
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from collections.abc import Sequence

import click

from etcdspec import __version__
from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode

# verb -> (module under etcdspec.cli, one-line help)
VERBS: dict[str, tuple[str, str]] = {
    "verify": ("verify", "The main job: prove the specs, explore the model, test the server."),
    "explore": ("explore", "Explore the model with Hypothesis or exhaustively; find bugs."),
    "prove": ("prove", "Prove the specs' invariants with Z3; bounded model checking."),
    "check": ("check", "Check a recorded history: linearizability and watch guarantees."),
    "check-trace": ("check_trace", "Replay an implementation trace on the model."),
    "diagram": ("diagram", "Draw a counterexample (ITF or Raft traces) as a sequence diagram."),
    "replay": ("replay", "Replay a model counterexample (ITF) on the server's Raft core."),
    "tour": ("tour", "The guided tour (docs/tour.md), run step by step."),
    "conform": ("conform", "Run a workload with faults against a target and check it."),
    "serve": ("serve", "Run one member of the reference server."),
    "cluster": ("cluster", "Start, inspect or stop a local cluster of the reference server."),
    "snapshot": ("snapshot", "Save, inspect or restore a snapshot, as etcdutl does."),
}


class LazyVerbs(click.Group):
    """A group whose verbs are imported only when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [verb for verb, (module, _) in VERBS.items() if _available(module)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in VERBS:
            return None
        module_name, _ = VERBS[cmd_name]
        if not _available(module_name):
            return None
        module = importlib.import_module(f"etcdspec.cli.{module_name}")
        command = getattr(module, module_name)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(verb, VERBS[verb][1]) for verb in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _available(module_name: str) -> bool:
    return importlib.util.find_spec(f"etcdspec.cli.{module_name}") is not None


@click.group(cls=LazyVerbs)
@click.version_option(__version__, prog_name="etcdspec")
def cli() -> None:
    """etcdspec: specify, model, implement and check an etcd-like consensus store.

    Exit codes: 0 holds, 1 violation found, 2 usage error, 3 unknown (timeout, budget
    spent), 4 bad input file, 5 endpoints unreachable, 255 internal error.
    """


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv))


def run(argv: Sequence[str] | None = None) -> int:
    """Run the program and return its exit code (tests call this)."""
    try:
        result = cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except click.exceptions.Exit as stop:
        return int(stop.exit_code)
    except click.exceptions.Abort:
        click.echo("etcdspec: aborted", err=True)
        return int(ExitCode.UNKNOWN)
    except click.ClickException as error:
        error.show()
        return int(ExitCode.USAGE)
    except CliError as error:
        click.echo(f"etcdspec: {error.message}", err=True)
        return int(error.code)
    except KeyboardInterrupt:
        click.echo("etcdspec: interrupted; the result is unknown", err=True)
        return int(ExitCode.UNKNOWN)
    except Exception:
        traceback.print_exc()
        click.echo("etcdspec: internal error (exit 255); please report it", err=True)
        return int(ExitCode.INTERNAL_ERROR)
    if result is None:
        return int(ExitCode.HOLDS)
    return int(result)


if __name__ == "__main__":
    main()

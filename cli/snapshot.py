"""`etcdspec snapshot save|status|restore`: backup and restore, as etcdctl/etcdutl do.

A thin layer over etcdspec.impl.tools.snapshot_cli. Exit codes: 0 done, 2 usage, 4 a bad
snapshot file, 5 the endpoint did not answer.
"""

from __future__ import annotations

import json

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode


@click.group()
def snapshot() -> None:
    """Save, inspect or restore a snapshot, as etcdutl does."""


@snapshot.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--endpoints", required=True, help="One endpoint, e.g. http://127.0.0.1:2379.")
@click.option("--timeout", "timeout_s", default=60.0, show_default=True)
def save(file: str, endpoints: str, timeout_s: float) -> int:
    """Stream a snapshot of one member into FILE."""
    from etcdspec.impl.tools import snapshot_cli

    targets = [e for e in endpoints.split(",") if e]
    if len(targets) != 1:
        raise CliError(f"snapshot save needs exactly one endpoint, got {len(targets)}")
    try:
        size = snapshot_cli.save(targets[0], file, timeout_s=timeout_s)
    except snapshot_cli.SnapshotUnreachable as error:
        raise CliError(str(error), ExitCode.UNREACHABLE) from error
    except snapshot_cli.SnapshotError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    click.echo(f"Snapshot saved at {file} ({size} bytes)")
    return int(ExitCode.HOLDS)


@snapshot.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True)
def status(file: str, as_json: bool) -> int:
    """Hash, revision, total keys and size of a snapshot FILE."""
    from etcdspec.impl.tools import snapshot_cli

    try:
        result = snapshot_cli.status(file)
    except snapshot_cli.SnapshotError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    if as_json:
        click.echo(json.dumps(result.to_json()))
    else:
        click.echo(result.describe())
    return int(ExitCode.HOLDS)


@snapshot.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
@click.option(
    "--skip-hash-check",
    is_flag=True,
    help="Restore an etcd database that has no SHA-256 at its end (a member's member/snap/db).",
)
def restore(file: str, data_dir: str, skip_hash_check: bool) -> int:
    """Write a new member data directory from FILE (start it with --initial-cluster-state new)."""
    from etcdspec.impl.tools import snapshot_cli

    try:
        path = snapshot_cli.restore(file, data_dir, skip_hash_check=skip_hash_check)
    except snapshot_cli.SnapshotError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    click.echo(f"restored {file} into {path.parent.parent.parent}")
    return int(ExitCode.HOLDS)

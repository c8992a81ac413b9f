"""`etcdspec cluster up|status|stop|start|restart|add|remove|promote|down`: a local
cluster of the reference server.

A thin layer over etcdspec.impl.tools.launcher: `up` plans free loopback ports, starts the
members as separate processes, writes DIR/cluster.json and waits until each member
reports a leader; `status` asks every member listed there for Maintenance.Status (a
stopped member is reported stopped, with no pid); `stop NAME` stops one member (`--kill`:
kill -9), `start NAME` starts it again on its data and waits until it reports a leader,
`restart NAME` does both; `add [NAME] [--learner]` asks the cluster to add a member
(MemberAdd), starts it with `--initial-cluster-state existing` and waits until it has
caught up; `remove NAME` asks the cluster to remove one (MemberRemove; it stops itself);
`promote NAME` promotes a learner once it is in sync; `down` stops exactly the processes
the state file lists. `--json` prints machine-readable output on stdout.

A secured cluster: `up --tls` makes a CA, the members' certificate and a client
certificate for root (CN root) in DIR/tls/ (etcdspec.impl.tools.certs) and starts every
member with etcd's TLS flags on https client and peer URLs, client certificates required
and their CN taken as the user (`--client-cert-auth`); `up --auth` adds the root user
with a generated password (written to DIR/root.password, owner-readable only) and
enables auth. `up` then prints what a client needs: endpoints, CA file, certificate and
key, user and password, and an etcdctl command that works.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode

if TYPE_CHECKING:
    import grpc

    from etcdspec.impl.tools import launcher

DEFAULT_DIR = ".etcdspec-cluster"


@click.group()
def cluster() -> None:
    """Start, inspect or stop a local cluster of the reference server."""


@cluster.command()
@click.option("--size", default=3, show_default=True, help="Number of members.")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path())
@click.option("--heartbeat-interval", default=100, show_default=True, help="Milliseconds.")
@click.option("--election-timeout", default=1000, show_default=True, help="Milliseconds.")
@click.option("--snapshot-count", default=10_000, show_default=True)
@click.option("--timeout", "timeout_s", default=60.0, show_default=True, help="Seconds to wait.")
@click.option("--trace", is_flag=True, help="Each member writes DIR/<name>.trace.ndjson.")
@click.option("--tls", is_flag=True, help="TLS on client and peer ports; certificates in DIR/tls.")
@click.option("--auth", is_flag=True, help="Enable auth: root user with a generated password.")
@click.option("--json", "as_json", is_flag=True, help="Print the endpoints as JSON.")
def up(
    size: int,
    directory: str,
    heartbeat_interval: int,
    election_timeout: int,
    snapshot_count: int,
    timeout_s: float,
    trace: bool,
    tls: bool,
    auth: bool,
    as_json: bool,
) -> int:
    """Start SIZE members on free loopback ports; state in DIR/cluster.json."""
    from etcdspec.impl.tools import launcher
    from etcdspec.impl.tools.certs import make_cluster_certs

    if (Path(directory) / launcher.STATE_FILE).exists():
        raise CliError(
            f"a cluster is already recorded in {directory}; "
            f"run `etcdspec cluster down --dir {directory}` first"
        )
    try:
        plan = launcher.plan_cluster(
            directory,
            size,
            heartbeat_ms=heartbeat_interval,
            election_ms=election_timeout,
            snapshot_count=snapshot_count,
            trace=trace,
            security=(
                launcher.SecurityPlan(make_cluster_certs(directory, ("root",))) if tls else None
            ),
        )
        running = launcher.start_cluster(plan)
    except launcher.LauncherError as error:
        raise CliError(str(error), ExitCode.INTERNAL_ERROR) from error
    credentials = _credentials(plan)
    password = None
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=timeout_s, credentials=credentials)
        if auth:
            password = secrets.token_hex(12)
            _write_private(Path(plan.directory) / ROOT_PASSWORD_FILE, password + "\n")
            launcher.enable_auth(plan.endpoints, password, credentials)
    except launcher.LauncherError as error:
        launcher.stop_cluster(directory)
        logs = ", ".join(member.log_path for member in running)
        raise CliError(f"{error}; stopped the members (logs: {logs})", ExitCode.UNKNOWN) from error
    access = client_access(plan, password)
    if as_json:
        click.echo(json.dumps({"endpoints": plan.endpoints, "directory": plan.directory, **access}))
    else:
        for member in running:
            click.echo(member.describe())
        click.echo(f"endpoints: {','.join(plan.endpoints)}")
        if plan.security is not None:
            click.echo(f"CA file: {access['cacert']}")
            click.echo(f"client certificate (CN root): {access['cert']}, key: {access['key']}")
        if password is not None:
            click.echo(
                f"auth enabled: user root, password {password} "
                f"(in {Path(plan.directory) / ROOT_PASSWORD_FILE})"
            )
        click.echo(f"try: {access['etcdctl']}")
    return int(ExitCode.HOLDS)


ROOT_PASSWORD_FILE = "root.password"


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _credentials(plan: launcher.ClusterPlan) -> grpc.ChannelCredentials | None:
    from etcdspec.impl.tools import launcher

    return launcher.channel_credentials(plan.security) if plan.security is not None else None


def client_access(plan: launcher.ClusterPlan, password: str | None) -> dict[str, str | None]:
    """What a client of the cluster needs, and an etcdctl command that uses it."""
    flags = [f"--endpoints={','.join(plan.endpoints)}"]
    access: dict[str, str | None] = {"cacert": None, "cert": None, "key": None}
    if plan.security is not None:
        root = plan.security.certs.client("root")
        access.update(cacert=plan.security.certs.ca_file, cert=root.cert, key=root.key)
        flags += [f"--cacert={access['cacert']}", f"--cert={root.cert}", f"--key={root.key}"]
    if password is not None:
        access.update(user="root", password=password)
        flags.append(f"--user=root:{password}")
    access["etcdctl"] = " ".join(["etcdctl", *flags, "put", "hello", "world"])
    return access


@cluster.command()
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True)
def status(directory: str, as_json: bool) -> int:
    """Show each member's process and Maintenance.Status."""
    from etcdspec.impl.tools import launcher

    try:
        plan, running = launcher.read_state(directory)
    except launcher.LauncherError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    credentials = _credentials(plan)
    rows = []
    unreachable = 0
    for member in running:
        alive = member.alive()
        row: dict[str, object] = {
            "name": member.plan.name,
            "pid": member.pid if alive else None,
            "alive": alive,
            "endpoint": member.plan.client_url,
        }
        if not alive:
            row["error"] = (
                f"stopped (was pid {member.pid}); "
                f"`etcdspec cluster start {member.plan.name} --dir {directory}` starts it"
            )
            unreachable += 1
            rows.append(row)
            continue
        try:
            row.update(launcher.probe_status(member.plan.client_url, credentials=credentials))
        except launcher.LauncherError as error:
            row["error"] = str(error)
            unreachable += 1
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows))
    else:
        for row in rows:
            if not row["alive"]:
                click.echo(f"{row['name']} {row['endpoint']}: {row['error']}")
            elif "error" in row:
                click.echo(f"{row['name']} pid {row['pid']} {row['endpoint']}: {row['error']}")
            else:
                click.echo(
                    f"{row['name']} pid {row['pid']} {row['endpoint']} "
                    f"member {int(row['member_id']):x} leader {int(row['leader']):x} "  # type: ignore[call-overload]
                    f"term {row['raft_term']} revision {row['revision']} "
                    f"raft index {row['raft_index']}"
                    + (" learner" if row.get("is_learner") else "")
                )
    return int(ExitCode.UNREACHABLE if unreachable else ExitCode.HOLDS)


@cluster.command()
@click.argument("name")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path())
@click.option("--kill", is_flag=True, help="kill -9 instead of SIGTERM.")
def stop(name: str, directory: str, kill: bool) -> int:
    """Stop one member (NAME as `status` shows it); the cluster keeps it for `start`."""
    import signal

    from etcdspec.impl.tools import launcher

    try:
        member = launcher.stop_recorded_member(
            directory, name, signal.SIGKILL if kill else signal.SIGTERM
        )
    except launcher.LauncherError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    click.echo(f"{'killed' if kill else 'stopped'} {name} (pid {member.pid})")
    return int(ExitCode.HOLDS)


@cluster.command()
@click.argument("name")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path())
@click.option("--timeout", "timeout_s", default=60.0, show_default=True, help="Seconds to wait.")
def start(name: str, directory: str, timeout_s: float) -> int:
    """Start a stopped member again on its data; wait until it reports a leader."""
    return _start(name, directory, timeout_s)


@cluster.command()
@click.argument("name")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path())
@click.option("--timeout", "timeout_s", default=60.0, show_default=True, help="Seconds to wait.")
def restart(name: str, directory: str, timeout_s: float) -> int:
    """Stop one member (if it runs) and start it again on its data."""
    from etcdspec.impl.tools import launcher

    try:
        _, running = launcher.read_state(directory)
        if launcher.find_member(running, name).alive():
            launcher.stop_recorded_member(directory, name)
    except launcher.LauncherError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    return _start(name, directory, timeout_s)


def _start(name: str, directory: str, timeout_s: float) -> int:
    from etcdspec.impl.tools import launcher

    try:
        member = launcher.start_recorded_member(directory, name)
        plan, _ = launcher.read_state(directory)
    except launcher.LauncherError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    try:
        launcher.wait_ready(
            [member.plan.client_url], timeout_s=timeout_s, credentials=_credentials(plan)
        )
    except launcher.LauncherError as error:
        raise CliError(
            f"{name} (pid {member.pid}) started but is not ready: {error}; "
            f"its log is {member.log_path}",
            ExitCode.UNKNOWN,
        ) from error
    click.echo(member.describe())
    return int(ExitCode.HOLDS)


@cluster.command()
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path())
def down(directory: str) -> int:
    """Stop the members `up` started (and nothing else)."""
    from etcdspec.impl.tools import launcher

    try:
        _, recorded = launcher.read_state(directory)
        running = {member.plan.name for member in recorded if member.alive()}
        stopped = launcher.stop_cluster(directory)
    except launcher.LauncherError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    for member in stopped:
        if member.plan.name in running:
            click.echo(f"stopped {member.plan.name} (pid {member.pid})")
        else:
            click.echo(f"{member.plan.name} was not running (it was pid {member.pid})")
    return int(ExitCode.HOLDS)


@cluster.command()
@click.argument("name", required=False)
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path())
@click.option("--learner", is_flag=True, help="Add it as a learner (promote it later).")
@click.option("--timeout", "timeout_s", default=60.0, show_default=True, help="Seconds to wait.")
def add(name: str | None, directory: str, learner: bool, timeout_s: float) -> int:
    """Add a member (NAME, or the next m<N>): MemberAdd, then start it; wait until it
    has caught up with the others."""
    from etcdspec.impl.tools import launcher

    try:
        member = launcher.add_recorded_member(directory, name, learner=learner)
    except launcher.LauncherError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    plan, _ = launcher.read_state(directory)
    try:
        launcher.wait_caught_up(plan.endpoints, timeout_s=timeout_s)
    except launcher.LauncherError as error:
        raise CliError(
            f"{member.plan.name} (pid {member.pid}) added but has not caught up: {error}; "
            f"its log is {member.log_path}",
            ExitCode.UNKNOWN,
        ) from error
    click.echo(f"added {'learner ' if learner else ''}{member.describe()}")
    return int(ExitCode.HOLDS)


@cluster.command()
@click.argument("name")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path())
def remove(name: str, directory: str) -> int:
    """Remove a member (MemberRemove); it stops itself, and the state file drops it."""
    from etcdspec.impl.tools import launcher

    try:
        member = launcher.remove_recorded_member(directory, name)
    except launcher.LauncherError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    click.echo(f"removed {name} (pid {member.pid}); its data stays in {member.plan.data_dir}")
    return int(ExitCode.HOLDS)


@cluster.command()
@click.argument("name")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path())
def promote(name: str, directory: str) -> int:
    """Promote the learner NAME to a voter (retried until it is in sync with the leader)."""
    from etcdspec.impl.tools import launcher

    try:
        launcher.promote_recorded_member(directory, name)
    except launcher.LauncherError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    click.echo(f"promoted {name}")
    return int(ExitCode.HOLDS)

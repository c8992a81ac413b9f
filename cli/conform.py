"""`etcdspec conform`: run a workload with faults against a target and check what was
recorded.

A thin layer over `etcdspec.conform.run.run_conform` (tests call that directly):
progress on stderr, then the verdict table on stdout (or result.json with --json), and
the report folder REPORT/<run>/ with a `latest` link. Exit 0 holds, 1 violation,
2 usage error, 3 unknown, 5 endpoints unreachable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from etcdspec.cli.errors import CliError

if TYPE_CHECKING:
    from etcdspec.conform.secure import ClientSecurity
from etcdspec.exitcodes import ExitCode

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")


def parse_duration(text: str) -> float:
    """Seconds from `60s`, `1.5m`, `500ms` or a bare number of seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise CliError(f"--duration {text!r}: write it like 60s, 2m or 500ms", ExitCode.USAGE)
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def client_security(
    cacert: str | None,
    cert: str | None,
    key: str | None,
    user: str | None,
    password: str | None,
) -> ClientSecurity | None:
    """The --endpoints security flags as etcdctl reads them (`--user NAME:PASSWORD` too)."""
    from etcdspec.conform.secure import ClientSecurity, SecurityError

    if user is not None and password is None and ":" in user:
        user, password = user.split(":", 1)
    if cacert is None:
        if cert or key or user or password:
            raise CliError(
                "--cert, --key, --user and --password need --cacert: they are sent over TLS only",
                ExitCode.USAGE,
            )
        return None
    security = ClientSecurity(cacert, cert, key, user, password)
    try:
        security.check()
    except SecurityError as error:
        raise CliError(str(error), ExitCode.USAGE) from error
    return security


@click.command("conform")
@click.option(
    "--target",
    type=click.Choice(["reference", "etcd"]),
    default="reference",
    show_default=True,
    help="Start a local cluster of our server or of real etcd.",
)
@click.option(
    "--endpoints",
    default=None,
    help="Client URLs of an existing cluster (http:// or, with --cacert, https://HOST:PORT,"
    "...); its data is "
    "recorded as the history's start, nobody else may write during the run; "
    "process and network faults are skipped.",
)
@click.option("--etcd-bin", default=None, help="The etcd binary for --target etcd.")
@click.option(
    "--workload",
    type=click.Choice(
        ["etcd-kv", "etcd-kv-writes", "leases", "kubernetes", "watch", "locks", "auth"]
    ),
    default="etcd-kv",
    show_default=True,
)
@click.option(
    "--faults",
    default="kill,partition,compact",
    show_default=True,
    help="Comma-separated: kill, pause, partition, delay, drop, compact, defrag, "
    "corrupt-wal (a write damaged mid-WAL while its member is down: it must refuse to "
    "start), corrupt-snap (a bit flipped mid-file in a member's newest snapshot while it is "
    "down: it must refuse, or recover from what is intact naming the file and keep every "
    "acknowledged write), power-cut (kill -9 of one member or all, and every write their disks had not "
    "fsynced dropped), fsync-eio (a member's fsyncs fail: it must stop), or none. "
    "power-cut and fsync-eio put each member's data dir on a FUSE filesystem (faultfs: "
    "needs /dev/fuse, fusermount3 and the mfusepy package), replace-member (one member "
    "removed under load, a fresh one added, started and caught up), learner (a learner "
    "added, caught up and promoted).",
)
@click.option(
    "--failpoints",
    default="",
    help="Comma-separated planted bugs to switch on in our members (--target reference): "
    "ack_before_fsync, local_linearizable_read, skip_watch_event_on_resume, "
    "forget_vote_on_restart, stale_leader_lease_revoke, wal_skip_payload_crc, snap_skip_crc, lock_without_wait.",
)
@click.option("--duration", default="20s", show_default=True, help="How long to run (60s, 2m).")
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports/conform"),
    show_default=True,
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--members", type=int, default=3, show_default=True)
@click.option("--clients", type=int, default=4, show_default=True)
@click.option("--rate", type=float, default=40.0, show_default=True, help="Operations/s in all.")
@click.option("--keys", type=int, default=6, show_default=True)
@click.option("--fault-interval", type=float, default=3.0, show_default=True, help="Seconds.")
@click.option(
    "--fault-hold",
    type=float,
    default=1.5,
    show_default=True,
    help="Seconds a kill, pause or network fault lasts before it is healed.",
)
@click.option("--check-timeout", type=float, default=120.0, show_default=True, help="Seconds.")
@click.option(
    "--hashkv-across",
    is_flag=True,
    help="Also run seeded writes, one at a time, on a fresh member of ours and of real etcd "
    "and check their HashKV equal after each (the check 'HashKV across targets').",
)
@click.option(
    "--secure",
    is_flag=True,
    help="The local target runs with TLS on its client ports, client certificates required "
    "and auth enabled; the run's clients log in as root.",
)
@click.option("--cacert", default=None, help="--endpoints over TLS: the servers' CA (PEM).")
@click.option("--cert", default=None, help="--endpoints: a client certificate (PEM).")
@click.option("--key", default=None, help="--endpoints: the client certificate's key (PEM).")
@click.option("--user", default=None, help="--endpoints: log in as USER (or USER:PASSWORD).")
@click.option("--password", default=None, help="--endpoints: the user's password.")
@click.option("--json", "as_json", is_flag=True, help="Print result.json on stdout.")
def conform(
    target: str,
    endpoints: str | None,
    etcd_bin: str | None,
    workload: str,
    faults: str,
    failpoints: str,
    duration: str,
    report_dir: Path,
    seed: int,
    members: int,
    clients: int,
    rate: float,
    keys: int,
    fault_interval: float,
    fault_hold: float,
    check_timeout: float,
    hashkv_across: bool,
    secure: bool,
    cacert: str | None,
    cert: str | None,
    key: str | None,
    user: str | None,
    password: str | None,
    as_json: bool,
) -> int:
    """Run a workload with faults against a target and check the recorded history."""
    from etcdspec.conform.faults import FaultError, parse_faults
    from etcdspec.conform.run import ConformOptions, run_conform
    from etcdspec.conform.targets import TargetError

    try:
        fault_names = parse_faults(faults)
    except FaultError as error:
        raise CliError(str(error), ExitCode.USAGE) from error
    from etcdspec.impl.failpoints import FailpointError
    from etcdspec.impl.failpoints import parse as parse_failpoints

    try:
        failpoint_names = tuple(sorted(parse_failpoints(failpoints, "--failpoints")))
    except FailpointError as error:
        raise CliError(str(error), ExitCode.USAGE) from error
    for name, value in (("--members", members), ("--clients", clients), ("--keys", keys)):
        if value < 1:
            raise CliError(f"{name} must be at least 1, not {value}", ExitCode.USAGE)
    if rate <= 0:
        raise CliError(f"--rate must be positive, not {rate}", ExitCode.USAGE)
    security = client_security(cacert, cert, key, user, password)
    options = ConformOptions(
        report_dir=report_dir,
        target=target,
        endpoints=tuple(e.strip() for e in endpoints.split(",") if e.strip()) if endpoints else (),
        etcd_bin=etcd_bin,
        workload=workload,
        faults=fault_names,
        duration_s=parse_duration(duration),
        seed=seed,
        members=members,
        clients=clients,
        rate=rate,
        keys=keys,
        fault_interval_s=fault_interval,
        fault_hold_s=fault_hold,
        check_timeout_s=check_timeout,
        failpoints=failpoint_names,
        hashkv_across=hashkv_across,
        security=security,
        secure=secure,
        progress=lambda text: click.echo(text, err=True),
    )
    click.echo(options.describe(), err=True)
    try:
        result = run_conform(options)
    except TargetError as error:
        raise CliError(str(error), error.code) from error
    if as_json:
        click.echo((result.run_dir / "result.json").read_text().rstrip())
    else:
        click.echo(result.describe())
    return int(result.verdict.exit_code())

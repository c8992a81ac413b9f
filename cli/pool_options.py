"""The worker-pool options that `explore` and `verify` share: `--worker-memory`, and the
checks of --workers / --cluster / --worker-memory values that do not depend on the verb."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode

_Command = TypeVar("_Command", bound=Callable[..., Any])


def worker_memory_option(past_the_bound: str) -> Callable[[_Command], _Command]:
    """`--worker-memory MB` (parameter `worker_memory_mb`); `past_the_bound` says what
    becomes of the verb's run when a worker passes it."""
    return click.option(
        "--worker-memory",
        "worker_memory_mb",
        type=int,
        default=None,
        metavar="MB",
        help="With --workers: each local worker's memory bound; a worker that passes it is "
        f"stopped and {past_the_bound}.",
    )


def check_pool_values(
    workers: int | None, cluster_address: str | None, worker_memory_mb: int | None
) -> None:
    """Refuse values no verb accepts: fewer than one worker, a bound under 1 MB, and a
    local cluster asked for together with a running one."""
    if workers is not None and workers < 1:
        raise CliError(f"--workers must be at least 1, got {workers}", ExitCode.USAGE)
    if worker_memory_mb is not None and worker_memory_mb < 1:
        raise CliError(
            f"--worker-memory must be at least 1 MB, got {worker_memory_mb}", ExitCode.USAGE
        )
    if workers is not None and cluster_address is not None:
        raise CliError(
            "--workers starts a local cluster, --cluster uses a running one: give one of them",
            ExitCode.USAGE,
        )

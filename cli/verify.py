"""`etcdspec verify`: the main job — every stage in order, one summary table, a report.

The stages are library functions (see etcdspec.stage); this module only runs them,
merges their verdicts (false > unknown > true) and writes `result.json`.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import click

from etcdspec.cli.errors import CliError
from etcdspec.cli.pool_options import check_pool_values, worker_memory_option
from etcdspec.exitcodes import ExitCode
from etcdspec.stage import StageOptions, StageResult
from etcdspec.tool_config import ToolConfig, ToolConfigError, load_tool_config
from etcdspec.verdict import Verdict

# (stage name, "module:function"), in the order they run.
STAGES: list[tuple[str, str]] = [
    ("spec", "etcdspec.spec.stage:run_stage"),
    ("model", "etcdspec.model.stage:run_stage"),
    ("checker", "etcdspec.checker.stage:run_stage"),
    ("conform", "etcdspec.conform.stage:run_stage"),
    ("trace", "etcdspec.conform.trace_stage:run_stage"),
]


def run_verify(options: StageOptions, only: tuple[str, ...] = ()) -> list[StageResult]:
    results = []
    for name, target in STAGES:
        if only and name not in only:
            continue
        module_name, function_name = target.split(":")
        stage: Callable[[StageOptions], StageResult] = getattr(
            importlib.import_module(module_name), function_name
        )
        started = time.monotonic()
        click.echo(f"[verify] {name} ...", err=True)
        try:
            result = stage(options)
        except Exception as error:  # a crashed stage is unknown, never a pass
            result = StageResult(
                name, Verdict.UNKNOWN, f"stage crashed: {error!r}", time.monotonic() - started
            )
        click.echo(f"[verify] {result.describe()}", err=True)
        results.append(result)
    return results


def format_table(results: list[StageResult]) -> str:
    rows = [("stage", "verdict", "seconds", "summary")]
    rows += [(r.name, r.verdict.describe(), f"{r.seconds:.1f}", r.summary) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = []
    for row in rows:
        lines.append(
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        )
    return "\n".join(lines)


@click.command("verify")
@click.option(
    "--report",
    "report_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Report folder (default: reports/verify-<time>).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for every stage.")
@click.option("--quick", is_flag=True, help="Shorter runs of each stage.")
@click.option(
    "--stage",
    "only",
    multiple=True,
    type=click.Choice([s for s, _ in STAGES]),
    help="Run only this stage (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print result.json on stdout.")
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Run the distributed parts (the exhaustive search) over N local worker processes.",
)
@click.option(
    "--cluster",
    "cluster_address",
    default=None,
    metavar="ADDRESS",
    help="Run the distributed parts on a running Dask scheduler's workers (tcp://HOST:PORT).",
)
@worker_memory_option("the stage is unknown")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("pyproject.toml"),
    show_default=True,
    help="Read `workers` / `cluster` / `worker_memory` defaults from this file's "
    "[tool.etcdspec] table.",
)
def verify(
    report_dir: Path | None,
    seed: int,
    quick: bool,
    only: tuple[str, ...],
    as_json: bool,
    workers: int | None,
    cluster_address: str | None,
    worker_memory_mb: int | None,
    config_path: Path,
) -> int:
    """Prove the specs, explore the model, check histories, run a conformance run of the
    server and replay its Raft traces on the model."""
    tool = _tool_config(config_path, workers, cluster_address, worker_memory_mb)
    if tool.distributed():
        click.echo(f"[verify] distributed parts run on {tool.describe()}", err=True)
    if report_dir is None:
        report_dir = Path("reports") / time.strftime("verify-%Y%m%d-%H%M%S")
    report_dir.mkdir(parents=True, exist_ok=True)
    stage_options = StageOptions(
        report_dir=report_dir,
        seed=seed,
        quick=quick,
        workers=tool.workers,
        cluster=tool.cluster,
        worker_memory_mb=tool.worker_memory_mb,
    )
    results = run_verify(stage_options, only)
    overall = Verdict.merge_all([r.verdict for r in results])
    document = {
        "schema": "etcdspec.verify/1",
        "valid": overall.to_json(),
        "stages": [r.to_json() for r in results],
    }
    (report_dir / "result.json").write_text(json.dumps(document, indent=2) + "\n")
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo(format_table(results))
        click.echo(f"overall: {overall.describe()}   report: {report_dir}")
    return int(overall.exit_code()) if results else int(ExitCode.USAGE)


def _tool_config(
    path: Path, workers: int | None, cluster: str | None, worker_memory_mb: int | None
) -> ToolConfig:
    """[tool.etcdspec] of `path`, with the command line's --workers / --cluster /
    --worker-memory over it."""
    check_pool_values(workers, cluster, worker_memory_mb)
    try:
        config = load_tool_config(path).override(workers, cluster, worker_memory_mb)
    except ToolConfigError as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from error
    if config.worker_memory_mb is not None and (config.workers or 1) < 2:
        raise CliError(
            "--worker-memory bounds local workers: add --workers N (N of 2 or more)"
            if config.cluster is None
            else "--worker-memory bounds local workers; a running cluster's workers have the "
            "limit they were started with (dask worker --memory-limit)",
            ExitCode.USAGE,
        )
    return config

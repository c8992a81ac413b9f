"""`etcdspec explore`: explore the model with Hypothesis or exhaustively, find bugs.

A thin layer over `etcdspec.model.explore` (run_hypothesis, run_exhaustive). Output
discipline: progress on stderr (throttled), the counterexample or `--json` on stdout.
Exit codes: 0 nothing found, 1 violation found, 2 usage error, 3 the exhaustive search
ran out of budget before covering its space (never 0 then), 255 the model crashed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from etcdspec.cli.errors import CliError
from etcdspec.cli.pool_options import check_pool_values, worker_memory_option
from etcdspec.exitcodes import ExitCode
from etcdspec.verdict import Verdict

if TYPE_CHECKING:
    from etcdspec.model.counterexample import Counterexample
    from etcdspec.model.explore import ExhaustiveBounds, ExploreOptions, ExploreResult


class _ThrottledProgress:
    """Prints a progress line on stderr at most every `interval` seconds."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.last = 0.0

    def __call__(self, progress: object) -> None:
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            describe = getattr(progress, "describe", None)
            click.echo(f"[explore] {describe() if describe else progress}", err=True)


@click.command("explore")
@click.option(
    "--machine",
    type=click.Choice(["cluster", "store"]),
    default="cluster",
    show_default=True,
    help="Explore the Raft cluster with its stores, or the pure store alone.",
)
@click.option("--nodes", type=int, default=3, show_default=True, help="Cluster size: 3 or 5.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed; a run replays from it.")
@click.option("--max-examples", type=int, default=100, show_default=True, help="Hypothesis runs.")
@click.option("--steps", type=int, default=50, show_default=True, help="Rule steps per run.")
@click.option("--bug", "bugs", multiple=True, help="Switch on a catalogued bug (repeatable).")
@click.option("--list-bugs", is_flag=True, help="List the bug catalogue and exit.")
@click.option("--exhaustive", is_flag=True, help="Breadth-first search of the bounded space.")
@click.option("--max-term", type=int, default=2, show_default=True, help="Exhaustive: term bound.")
@click.option("--max-log", type=int, default=2, show_default=True, help="Exhaustive: log bound.")
@click.option("--max-messages", type=int, default=None, help="Exhaustive: messages in flight.")
@click.option("--max-states", type=int, default=None, help="Exhaustive: distinct-state budget.")
@click.option("--max-depth", type=int, default=None, help="Exhaustive: depth bound.")
@click.option("--time-budget", type=float, default=None, help="Exhaustive: seconds budget.")
@click.option(
    "--campaign",
    is_flag=True,
    help="Seeded runs of the correct model and the finders of the catalogued bugs (or of "
    "each --bug) until --time-budget, over --workers / --cluster; distinct counterexamples "
    "and coverage.",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Exhaustive: search over N local worker processes (a local Dask cluster); "
    "1 or none: this process.",
)
@click.option(
    "--cluster",
    "cluster_address",
    default=None,
    metavar="ADDRESS",
    help="Exhaustive: search over the workers of a running Dask scheduler (tcp://HOST:PORT).",
)
@worker_memory_option("the search is unknown (exit 3)")
@click.option(
    "--itf",
    "itf_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the counterexample as ITF JSON to this file.",
)
@click.option(
    "--diagram",
    "diagram_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Draw the counterexample as a message-sequence diagram (HTML) in this file.",
)
@click.option(
    "--timeouts",
    type=click.Choice(["free", "ticks"]),
    default="free",
    show_default=True,
    help="Cluster: election timeouts as actions, or counted ticks.",
)
@click.option(
    "--persist",
    type=click.Choice(["sync", "explicit"]),
    default="sync",
    show_default=True,
    help="Cluster: every step durable, or persistence as its own step.",
)
@click.option("--no-prevote", is_flag=True, help="Cluster: PreVote off.")
@click.option("--no-check-quorum", is_flag=True, help="Cluster: CheckQuorum off.")
@click.option("--no-noop", is_flag=True, help="Cluster: a new leader appends no empty entry.")
@click.option(
    "--membership",
    is_flag=True,
    help="Cluster: leaders change the configuration (add, remove, learner, promote); "
    "the last node starts outside it.",
)
@click.option(
    "--plain",
    is_flag=True,
    help="With one --bug: run the options given here, not the bug's catalogued finder.",
)
@click.option(
    "--refine",
    is_flag=True,
    help="Cluster: check every step against its spec/raft_steps.spec action (refinement).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No progress on stderr.")
def explore(
    machine: str,
    nodes: int,
    seed: int,
    max_examples: int,
    steps: int,
    bugs: tuple[str, ...],
    list_bugs: bool,
    exhaustive: bool,
    max_term: int,
    max_log: int,
    max_messages: int | None,
    max_states: int | None,
    max_depth: int | None,
    time_budget: float | None,
    campaign: bool,
    workers: int | None,
    cluster_address: str | None,
    worker_memory_mb: int | None,
    itf_path: Path | None,
    diagram_path: Path | None,
    timeouts: str,
    persist: str,
    no_prevote: bool,
    no_check_quorum: bool,
    no_noop: bool,
    membership: bool,
    plain: bool,
    refine: bool,
    as_json: bool,
    quiet: bool,
) -> int:
    """Explore the model; print a shrunk counterexample when an invariant breaks.

    With exactly one --bug (and none of --exhaustive, --plain, --refine) the bug's catalogued
    finder runs (etcdspec.model.explore.FINDERS: the machine, options and seeds, or the
    exhaustive bounds, that find it reliably); --seed is its first seed."""
    from etcdspec.model.bugs import CATALOGUE, BugSet, UnknownBugError

    if list_bugs:
        width = max(len(bug.name) for bug in CATALOGUE)
        for bug in CATALOGUE:
            click.echo(f"{bug.name.ljust(width)}  [{bug.layer}]  {bug.summary}")
        return int(ExitCode.HOLDS)
    _check_usage(nodes, max_examples, steps, exhaustive, machine)
    if membership and machine != "cluster":
        raise CliError(
            "--membership changes the cluster's configuration: drop --machine store",
            ExitCode.USAGE,
        )
    if refine and (exhaustive or machine != "cluster"):
        raise CliError(
            "--refine checks Hypothesis runs of the cluster: drop --exhaustive / --machine store",
            ExitCode.USAGE,
        )
    _check_bounds(max_term, max_log, max_messages, max_states, max_depth, time_budget)
    _check_workers(workers, cluster_address, worker_memory_mb, exhaustive or campaign)
    if campaign and (exhaustive or refine or machine != "cluster"):
        raise CliError(
            "--campaign runs Hypothesis runs and bug finders of the cluster: drop "
            "--exhaustive / --refine / --machine store",
            ExitCode.USAGE,
        )
    if campaign:
        return _campaign(
            bugs,
            time_budget,
            seed,
            max_examples,
            steps,
            nodes,
            workers,
            cluster_address,
            worker_memory_mb,
            quiet,
            as_json,
        )
    try:
        bug_set = BugSet.of(*bugs)
    except UnknownBugError as error:
        raise CliError(str(error), ExitCode.USAGE) from error

    from etcdspec.model.explore import ExhaustiveBounds, ExploreOptions, run_hypothesis

    options = ExploreOptions(
        machine=machine,
        nodes=nodes,
        seed=seed,
        max_examples=max_examples,
        steps=steps,
        bugs=bug_set,
        timeouts=timeouts,
        persist=persist,
        prevote=not no_prevote,
        check_quorum=not no_check_quorum,
        noop_on_leader=not no_noop,
        refine=refine,
        membership=membership,
    )
    # Progress only for a person at a terminal; the banner and the summary line always
    # (unless --quiet), the report (the counterexample) once, on stdout.
    progress = None if quiet or not sys.stderr.isatty() else _ThrottledProgress()
    ctx = click.get_current_context()
    asked = {
        name: value
        for name, value in (("max_examples", max_examples), ("steps", steps))
        if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT
    }
    use_finder = len(bugs) == 1 and not exhaustive and not plain and not refine
    if not quiet:
        if use_finder:
            from etcdspec.model.explore import FINDERS, with_budget

            finder = with_budget(FINDERS[bugs[0]], asked.get("max_examples"), asked.get("steps"))
            what = f"the finder of {bugs[0]}: {finder.describe(bugs[0])}"
        else:
            mode = "exhaustive" if exhaustive else "hypothesis"
            what = f"{mode} exploration of the {options.describe()}"
        click.echo(f"[explore] {what}", err=True)
    if use_finder:
        from etcdspec.model.explore import find_bug

        result = find_bug(bugs[0], seed, progress, asked.get("max_examples"), asked.get("steps"))
    elif exhaustive:
        bounds = ExhaustiveBounds(
            max_term=max_term,
            max_log=max_log,
            max_messages=max_messages,
            max_states=max_states,
            max_depth=max_depth,
            time_budget_s=time_budget,
        )
        result = _run_exhaustive(
            options, bounds, progress, workers, cluster_address, worker_memory_mb, quiet
        )
    else:
        result = run_hypothesis(options, progress)
    if result.mode == "exhaustive" and result.verdict is Verdict.TRUE and not quiet:
        click.echo("[explore] the bounded space was covered completely", err=True)

    if itf_path is not None and result.counterexample is not None:
        result.counterexample.to_itf().write(itf_path)
    if diagram_path is not None and result.counterexample is not None:
        _write_diagram(result.counterexample, diagram_path)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    elif result.counterexample is not None:
        click.echo(result.counterexample.describe())
    if not quiet or result.crashed:
        click.echo(f"[explore] {result.describe()}", err=True)
        if itf_path is not None:
            written = (
                "written"
                if result.counterexample is not None
                else "not written (no counterexample)"
            )
            click.echo(f"[explore] ITF trace {itf_path}: {written}", err=True)
        if diagram_path is not None:
            drawn = "written" if result.counterexample is not None else "not written"
            click.echo(f"[explore] diagram {diagram_path}: {drawn}", err=True)
    if result.crashed:
        raise CliError(f"the model crashed: {result.crashed}", ExitCode.INTERNAL_ERROR)
    return int(result.verdict.exit_code())


def _write_diagram(counterexample: Counterexample, path: Path) -> None:
    """The counterexample's ITF, drawn (the same page as `etcdspec diagram FILE.itf.json`)."""
    from etcdspec.checker.diagram_itf import diagram_from_itf
    from etcdspec.checker.diagram_page import write_diagram

    document = counterexample.to_itf().to_json()
    write_diagram(diagram_from_itf(document, counterexample.invariant), path)


def _run_exhaustive(
    options: ExploreOptions,
    bounds: ExhaustiveBounds,
    progress: _ThrottledProgress | None,
    workers: int | None,
    cluster_address: str | None,
    worker_memory_mb: int | None,
    quiet: bool,
) -> ExploreResult:
    """The exhaustive search in this process, or over a Dask pool (started here and
    stopped after, or the running cluster at `cluster_address`, left running)."""
    from etcdspec.model.explore import run_exhaustive
    from etcdspec.workers import WorkerLost, open_pool

    try:
        pool = open_pool(workers, cluster_address, worker_memory_mb)
    except WorkerLost as error:
        raise CliError(str(error), ExitCode.UNREACHABLE) from error
    if pool is None:
        return run_exhaustive(options, bounds, progress)
    if not quiet:
        click.echo(f"[explore] searching over {pool.describe()}", err=True)
    try:
        return run_exhaustive(options, bounds, progress, pool)
    except WorkerLost as error:
        limit = "its" if worker_memory_mb is None else f"the --worker-memory {worker_memory_mb} MB"
        raise CliError(
            f"{error}; the search is unknown (a worker may have passed {limit} memory limit)",
            ExitCode.UNKNOWN,
        ) from error
    finally:
        pool.close()


def _campaign(
    bugs: tuple[str, ...],
    time_budget: float | None,
    seed: int,
    max_examples: int,
    steps: int,
    nodes: int,
    workers: int | None,
    cluster_address: str | None,
    worker_memory_mb: int | None,
    quiet: bool,
    as_json: bool,
) -> int:
    """`explore --campaign`: etcdspec.model.campaign over a pool (in this process when
    neither --workers above 1 nor --cluster is given)."""
    from etcdspec.model.bugs import CATALOGUE
    from etcdspec.model.campaign import CampaignResult, run_campaign
    from etcdspec.model.explore import ExploreOptions
    from etcdspec.workers import InlinePool, WorkerLost, WorkerPool, open_pool

    if time_budget is None:
        raise CliError("--campaign runs until a budget: give --time-budget SECONDS", ExitCode.USAGE)
    options = ExploreOptions(
        machine="cluster", nodes=nodes, seed=seed, max_examples=max_examples, steps=steps
    )
    chosen = bugs or tuple(bug.name for bug in CATALOGUE)
    try:
        opened = open_pool(workers, cluster_address, worker_memory_mb)
    except WorkerLost as error:
        raise CliError(str(error), ExitCode.UNREACHABLE) from error
    pool: WorkerPool = opened if opened is not None else InlinePool(1)
    if not quiet:
        click.echo(
            f"[explore] campaign: {options.describe()} and the finders of {len(chosen)} bugs, "
            f"{time_budget:g} s on {pool.describe()}",
            err=True,
        )

    def report(result: CampaignResult) -> None:
        if not quiet:
            click.echo(
                f"[explore] {result.runs} runs, {len(result.distinct)} distinct "
                f"counterexamples, {result.seconds:.0f} s",
                err=True,
            )

    try:
        result = run_campaign(pool, time_budget, options, chosen, progress=report)
    except WorkerLost as error:
        raise CliError(f"{error}; the campaign is unknown", ExitCode.UNKNOWN) from error
    finally:
        pool.close()
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(result.describe())
    if result.crashes:
        raise CliError(f"the model crashed: {result.crashes[0]}", ExitCode.INTERNAL_ERROR)
    return int(result.verdict.exit_code())


def _check_workers(
    workers: int | None, cluster_address: str | None, worker_memory_mb: int | None, exhaustive: bool
) -> None:
    check_pool_values(workers, cluster_address, worker_memory_mb)
    if worker_memory_mb is not None and (workers is None or workers < 2):
        raise CliError(
            "--worker-memory bounds local workers: add --workers N (N of 2 or more)",
            ExitCode.USAGE,
        )
    if (workers is not None or cluster_address is not None) and not exhaustive:
        raise CliError(
            "--workers and --cluster distribute the exhaustive search or a campaign: "
            "add --exhaustive or --campaign",
            ExitCode.USAGE,
        )


def _check_usage(nodes: int, max_examples: int, steps: int, exhaustive: bool, machine: str) -> None:
    if nodes not in (3, 5):
        raise CliError(f"--nodes must be 3 or 5, got {nodes}", ExitCode.USAGE)
    if max_examples < 1:
        raise CliError(f"--max-examples must be at least 1, got {max_examples}", ExitCode.USAGE)
    if steps < 1:
        raise CliError(f"--steps must be at least 1, got {steps}", ExitCode.USAGE)
    if exhaustive and machine != "cluster":
        raise CliError("--exhaustive explores the cluster: drop --machine store", ExitCode.USAGE)


def _check_bounds(
    max_term: int,
    max_log: int,
    max_messages: int | None,
    max_states: int | None,
    max_depth: int | None,
    time_budget: float | None,
) -> None:
    for name, value in (
        ("--max-term", max_term),
        ("--max-log", max_log),
        ("--max-messages", max_messages),
        ("--max-states", max_states),
        ("--max-depth", max_depth),
    ):
        if value is not None and value < 1:
            raise CliError(f"{name} must be at least 1, got {value}", ExitCode.USAGE)
    if time_budget is not None and time_budget <= 0:
        raise CliError(f"--time-budget must be positive seconds, got {time_budget}", ExitCode.USAGE)

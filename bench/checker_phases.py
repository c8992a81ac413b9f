"""Where the etcd model's check of one big history spends its time, phase by phase.

Run: `.venv/bin/python -m bench.checker_phases` (the issue's 100k-operation, 5-process,
5 % info etcd history from `simulate_etcd(0, ...)`, three rounds in one process) or
`--file HISTORY.jsonl` (reading the file is then timed too), `--ops N`, `--rounds N`,
`--json`. The phases are what `check_linearizable` does in turn, timed apart:

- read: the JSON Lines file to operations (`read_history`; with `--file` only);
- prepare: each operation's JSON request and response to the model's (`model.prepare_all`,
  as `check_linearizable` calls it);
- index: the search's tables (revision hints, what responses observed, pinned writes);
- search: the depth-first search to its verdict (the store model's steps inside it);
- check: `check_linearizable` whole, in a round of its own (what the goal is judged on).

Each phase's CPU and wall time are reported as the minimum and the median over the
rounds, with the load average before and after: on a shared machine CPU time is the
steadier figure, and wall time is what the goal (< 5 s, issue 20) names. To compare two
checkouts, run each one's interpreter in turn (`cd OTHER && .venv/bin/python -m
bench.checker_phases`): the figures are comparable only within one sitting.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from etcdspec.checker.budget import UNBOUNDED, BudgetClock
from etcdspec.checker.history import Operation, build_history, read_history
from etcdspec.checker.linearizability import _Search, check_linearizable
from etcdspec.checker.models import get_model
from etcdspec.checker.simulate import simulate_etcd

PHASES = ("read", "prepare", "index", "search", "check")


def _timed(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """`run()`'s value, CPU seconds and wall seconds."""
    start, start_cpu = time.perf_counter(), time.process_time()
    value = run()
    return value, time.process_time() - start_cpu, time.perf_counter() - start


def _search_phases(operations: list[Operation]) -> dict[str, tuple[float, float]]:
    """(CPU, wall) seconds of prepare, index and search, the collector paused (as
    `check_linearizable` pauses it); what they built is dropped on return."""
    times: dict[str, tuple[float, float]] = {}
    model = get_model("etcd")
    (prepared, _), cpu, wall = _timed(lambda: model.prepare_all(operations))
    times["prepare"] = (cpu, wall)
    prepared.extend(model.synthetic_ops(prepared, len(operations)))
    search, cpu, wall = _timed(lambda: _Search(model, prepared, None, BudgetClock(UNBOUNDED), {}))
    times["index"] = (cpu, wall)

    def run_search() -> Any:
        turns = search.search()
        while True:
            try:
                next(turns)
            except StopIteration as done:
                return done.value

    result, cpu, wall = _timed(run_search)
    times["search"] = (cpu, wall)
    if result.verdict.value != "true":
        raise SystemExit(f"the search said {result.verdict.value}: {result.reason}")
    return times


def one_round(operations: list[Operation]) -> dict[str, tuple[float, float]]:
    """(CPU, wall) seconds of prepare, index and search, then of a whole check."""
    gc.disable()
    try:
        times = _search_phases(operations)
    finally:
        gc.enable()
    gc.collect()
    whole, cpu, wall = _timed(lambda: check_linearizable(get_model("etcd"), operations))
    times["check"] = (cpu, wall)
    if whole.verdict.value != "true":
        raise SystemExit(f"check_linearizable said {whole.verdict.value}: {whole.reason}")
    del whole
    gc.collect()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, help="a JSON Lines etcd history (else simulated)")
    parser.add_argument("--ops", type=int, default=100_000, help="simulated operations")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object")
    options = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows: dict[str, list[tuple[float, float]]] = {phase: [] for phase in PHASES}
    if options.file is not None:
        history, cpu, wall = _timed(lambda: read_history(options.file))
        rows["read"].append((cpu, wall))
        source = str(options.file)
    else:
        history = build_history(simulate_etcd(0, ops=options.ops, processes=5, info_rate=0.05))
        source = f"simulate_etcd(0, ops={options.ops}, processes=5, info_rate=0.05)"
    operations = list(history.operations)
    for _ in range(options.rounds):
        for phase, figures in one_round(operations).items():
            rows[phase].append(figures)
    load_after = os.getloadavg()
    summary = {
        phase: {
            "cpu_min": min(c for c, _ in figures),
            "cpu_median": statistics.median(c for c, _ in figures),
            "wall_min": min(w for _, w in figures),
            "wall_median": statistics.median(w for _, w in figures),
        }
        for phase, figures in rows.items()
        if figures
    }
    if options.json:
        print(
            json.dumps(
                {
                    "history": source,
                    "operations": len(operations),
                    "rounds": options.rounds,
                    "load_before": load_before,
                    "load_after": load_after,
                    "phases": summary,
                }
            )
        )
        return 0
    print(f"{source}: {len(operations)} operations, {options.rounds} round(s)")
    print(f"{'phase':<8} {'CPU min':>8} {'CPU med':>8} {'wall min':>9} {'wall med':>9}")
    for phase, shown in summary.items():
        print(
            f"{phase:<8} {shown['cpu_min']:>7.2f}s {shown['cpu_median']:>7.2f}s "
            f"{shown['wall_min']:>8.2f}s {shown['wall_median']:>8.2f}s"
        )
    print(
        "load average before "
        + " ".join(f"{x:.2f}" for x in load_before)
        + ", after "
        + " ".join(f"{x:.2f}" for x in load_after)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

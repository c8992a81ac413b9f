"""The goals our server is held to against real etcd, judged over rounds of server_bench.

Each goal bounds a ratio, ours / etcd in the same run, in some cells (a workload at a
client count): put throughput at 64 clients at least 0.5x, p99 latency at most 2x in
every cell, serializable range throughput at least 0.5x (issue #5; the fourth, memory
per member, is `server_bench --memory`'s table).

One run's ratio is a noisy figure on a shared machine: a one-client p99 at 3 s rests on
a few dozen samples, and went from 0.69x to 2.31x over twenty runs of one build. So
with several rounds (`server_bench --rounds N`), a cell's ratio is judged at its median
over the rounds, and the verdict says in how many rounds it held and the range it
spanned. A round in which either side of a cell had errors, or no operations, gives that
cell no ratio, and a cell missing a ratio is "unknown": never "met".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

MET, MISSED, UNKNOWN = "met", "missed", "unknown"
METRICS = {"throughput": "throughput", "p50_ms": "p50", "p99_ms": "p99", "cpu_ms_per_op": "cpu"}


class Measured(Protocol):
    """What a goal reads of a cell (server_bench's Cell)."""

    @property
    def target(self) -> str: ...
    @property
    def workload(self) -> str: ...
    @property
    def clients(self) -> int: ...
    @property
    def ops(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def throughput(self) -> float: ...
    @property
    def p50_ms(self) -> float: ...
    @property
    def p99_ms(self) -> float: ...
    @property
    def cpu_ms_per_op(self) -> float: ...


@dataclass(frozen=True)
class Goal:
    """A bound on the ratio ours / etcd of `metric`, in the cells of `workload` (every
    workload if None) at `clients` (every client count if None)."""

    metric: str
    bound: float
    at_least: bool
    workload: str | None = None
    clients: int | None = None

    def applies(self, workload: str, clients: int) -> bool:
        return self.workload in (None, workload) and self.clients in (None, clients)

    def holds(self, ratio: float) -> bool:
        return ratio >= self.bound if self.at_least else ratio <= self.bound

    def describe(self) -> str:
        where = f"{self.workload or 'every workload'}"
        where += f" at {self.clients} clients" if self.clients else ""
        side = "at least" if self.at_least else "at most"
        return f"{METRICS[self.metric]} {side} {self.bound:g}x etcd ({where})"


GOALS = (
    Goal("throughput", 0.5, at_least=True, workload="put", clients=64),
    Goal("p99_ms", 2.0, at_least=False),
    Goal("throughput", 0.5, at_least=True, workload="range-serializable"),
)


def ratio(ours: Measured, etcd: Measured, metric: str) -> float | None:
    """ours / etcd of `metric`; None when either side had errors or no operations (its
    figures leave out what failed), or etcd's figure is zero or not a number."""
    if ours.errors or etcd.errors or not ours.ops or not etcd.ops:
        return None
    mine, theirs = getattr(ours, metric), getattr(etcd, metric)
    if not theirs or math.isnan(mine) or math.isnan(theirs):
        return None
    return float(mine / theirs)


@dataclass(frozen=True)
class Verdict:
    """One goal in one cell, over the rounds: the ratio each round gave (None: none)."""

    goal: Goal
    workload: str
    clients: int
    ratios: tuple[float | None, ...]

    @property
    def median(self) -> float | None:
        known = [r for r in self.ratios if r is not None]
        return statistics.median(known) if known else None

    @property
    def status(self) -> str:
        median = self.median
        if median is None or None in self.ratios:
            return UNKNOWN
        return MET if self.goal.holds(median) else MISSED

    def describe(self) -> str:
        known = [r for r in self.ratios if r is not None]
        median = self.median
        spread = f"median {median:.2f} ({min(known):.2f}-{max(known):.2f})" if known else "-"
        held = sum(1 for r in known if self.goal.holds(r))
        missing = len(self.ratios) - len(known)
        note = f", {missing} without a ratio" if missing else ""
        return (
            f"{self.workload} x{self.clients}: {spread}, held in {held} of "
            f"{len(self.ratios)} rounds{note}: {self.status}"
        )


def _pairs(
    rounds: Sequence[Sequence[Measured]],
) -> dict[tuple[str, int], list[tuple[Measured, Measured] | None]]:
    """For each cell any round has, each round's (ours, etcd) pair, None if either is
    missing from that round."""
    keys = sorted({(c.workload, c.clients) for cells in rounds for c in cells})
    pairs: dict[tuple[str, int], list[tuple[Measured, Measured] | None]] = {}
    for key in keys:
        pairs[key] = []
        for cells in rounds:
            found = {c.target: c for c in cells if (c.workload, c.clients) == key}
            ours, etcd = found.get("ours"), found.get("etcd")
            pairs[key].append((ours, etcd) if ours is not None and etcd is not None else None)
    return pairs


def _ratios(
    pair_rounds: list[tuple[Measured, Measured] | None], metric: str
) -> tuple[float | None, ...]:
    return tuple(ratio(*pair, metric) if pair is not None else None for pair in pair_rounds)


def judge(rounds: Sequence[Sequence[Measured]], goals: Sequence[Goal] = GOALS) -> list[Verdict]:
    """Every goal in every cell it applies to that the rounds measured, in goal order."""
    pairs = _pairs(rounds)
    return [
        Verdict(goal, workload, clients, _ratios(pair_rounds, goal.metric))
        for goal in goals
        for (workload, clients), pair_rounds in pairs.items()
        if goal.applies(workload, clients)
    ]


def format_verdicts(verdicts: Sequence[Verdict], rounds: int, goals: Sequence[Goal] = GOALS) -> str:
    """The verdicts goal by goal, with a count; a goal no measured cell applies to is
    named as not measured."""
    lines = [f"goals, ours / etcd, judged at the median over {rounds} round(s):"]
    for goal in goals:
        lines.append(f"  {goal.describe()}")
        mine = [v for v in verdicts if v.goal == goal]
        lines.extend(f"    {verdict.describe()}" for verdict in mine)
        if not mine:
            lines.append("    not measured: no cell of this run is one it applies to")
    counts = {s: sum(1 for v in verdicts if v.status == s) for s in (MET, MISSED, UNKNOWN)}
    unmeasured = sum(1 for goal in goals if not any(v.goal == goal for v in verdicts))
    lines.append(
        f"goals: {counts[MET]} met, {counts[MISSED]} missed, {counts[UNKNOWN]} unknown "
        f"(of {len(verdicts)} goal-cells); {unmeasured} goal(s) not measured"
    )
    return "\n".join(lines)


def format_ratios(rounds: Sequence[Sequence[Measured]]) -> str:
    """Each cell's ratios ours / etcd over the rounds: median (min-max)."""

    def spread(values: tuple[float | None, ...]) -> str:
        known = [v for v in values if v is not None]
        if not known:
            return f"{'-':<16}"
        return f"{statistics.median(known):4.2f} ({min(known):4.2f}-{max(known):4.2f})"

    header = f"{'workload':<20} {'clients':>7} | " + " | ".join(
        f"{name:<16}" for name in METRICS.values()
    )
    lines = [
        f"ratios ours / etcd over {len(rounds)} round(s): median (min-max)",
        header,
        "-" * len(header),
    ]
    for (workload, clients), pair_rounds in _pairs(rounds).items():
        lines.append(
            f"{workload:<20} {clients:>7} | "
            + " | ".join(spread(_ratios(pair_rounds, metric)) for metric in METRICS)
        )
    return "\n".join(lines)

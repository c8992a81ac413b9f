"""Our linearizability checker against porcupine (Go), side by side on the same histories.

Run: `.venv/bin/python -m bench.porcupine_compare` (full, about five minutes) or
`--quick` (small sets, under a minute); `--json` prints one JSON object per history and
per set (the table then goes to stderr); `--timeout S` is the limit per history and per checker
(default 60 s; out of time is undecided, never decided); `--keep DIR` keeps the
exported histories.

The histories come from our simulator (etcdspec.checker.simulate, fixed seeds): a
Jepsen-size CAS register set (300-1,000 operations, 5 processes, 10 % info; every fifth
history with a stale read or a lost write planted) and kv sets with 1, 10 and 50
clients over 10 keys (1,000 operations, 2,000 for 50 clients, 10 % info or less; and
1,000 operations from 50 clients with 20 % info; every other history with a stale get
planted: an ok get late in the history answering its key's first put, long
overwritten). With porcupine's source at hand, its own Jepsen etcd logs (test_data/
jepsen, 103 small register histories, one of them empty) are a set too.

For each history: our `check_linearizable(model, operations, budget)` in this process
(wall and CPU time of that call alone: the model's prepare is inside it; the model
object and the Budget are made before the clock starts, as the harness makes porcupine's
model before its timer), and apart from it the report a caller that reads the result
would then make (`describe()` and `to_json()`: on a violation the failure, which is worked
out only when read; the "with the report" figures add it), then porcupine
on the same operations, exported to JSON (format "etcdspec-porcupine-histories", version
1: each operation's fields as our History has them) and checked by bench/porcupine/
main.go with `porcupine.CheckOperationsTimeout`, timed inside the Go process (not start-
up, not reading the file). Both run on one core: GOMAXPROCS=1 by default
(`--go-maxprocs N` lets porcupine check partitions in parallel). A verdict disagreement
where both decided is a bug in one of them (or in the harness's models): printed
loudly, exit 1.

Porcupine is not part of the repository. The harness is built, once per change of its
source or of porcupine's, into ~/.cache/etcdspec/porcupine/ from porcupine's source at
$PORCUPINE_SRC (default ~/.cache/etcdspec/porcupine-src) with a `replace` directive and
GOPROXY=off. Without Go or the source the porcupine column is skipped, saying what is
missing and how to get it.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from etcdspec.checker.budget import Budget
from etcdspec.checker.compiled_search import CORE_ENV, compiled_available, core_choice
from etcdspec.checker.history import (
    History,
    HistoryBuilder,
    HistoryEvent,
    Operation,
    build_history,
)
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.models import get_model
from etcdspec.checker.simulate import REGISTER_FAULTS, simulate_kv, simulate_register

EXPORT_FORMAT = "etcdspec-porcupine-histories"
RESULT_FORMAT = "etcdspec-porcupine-results"
FORMAT_VERSION = 1
HARNESS_DIR = Path(__file__).resolve().parent / "porcupine"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "etcdspec"
DEFAULT_SRC = CACHE / "porcupine-src"
GET_PORCUPINE = (
    "get it with `git clone https://github.com/anishathalye/porcupine "
    f"{DEFAULT_SRC}` (or export a copy anywhere and set PORCUPINE_SRC to it)"
)
GET_GO = "install Go (Debian: `apt-get install -y golang-go`)"
DEFAULT_TIMEOUT_S = 60.0


# ---------------------------------------------------------------------------- histories


@dataclass(frozen=True)
class HistorySet:
    """A family of generated histories: `count` seeds of one simulator's settings."""

    name: str
    model: str  # register or kv
    count: int
    ops: tuple[int, int]  # operations per history: drawn from [lo, hi] by seed
    processes: int
    info_rate: float
    keys: int = 0  # kv: keys; register: 0 is one plain register
    bad_every: int = 0  # every n-th history (the last of each n) has a bug planted

    def describe(self) -> str:
        lo, hi = self.ops
        size = f"{lo}" if lo == hi else f"{lo}-{hi}"
        keys = f", {self.keys} keys" if self.keys else ""
        bad = f", 1 in {self.bad_every} bad" if self.bad_every else ""
        return (
            f"{self.count} x {size} ops, {self.processes} clients, "
            f"{self.info_rate:.0%} info{keys}{bad}"
        )


@dataclass(frozen=True)
class NamedHistory:
    name: str
    model: str
    history: History
    planted: str | None  # the bug planted, if any (the expected verdict is then false)


FULL = [
    HistorySet("register-jepsen", "register", 30, (300, 1000), 5, 0.1, bad_every=5),
    HistorySet("kv-1-client", "kv", 10, (1000, 1000), 1, 0.05, keys=10, bad_every=2),
    HistorySet("kv-10-clients", "kv", 10, (1000, 1000), 10, 0.1, keys=10, bad_every=2),
    HistorySet("kv-50-clients", "kv", 4, (2000, 2000), 50, 0.1, keys=10, bad_every=2),
    # 20 % info: a fifth of the operations never return, so each stays concurrent with
    # everything after it (the hard case of bench/partition_turns.py, smaller).
    HistorySet("kv-50-clients-20-info", "kv", 2, (1000, 1000), 50, 0.2, keys=10, bad_every=2),
]
QUICK = [
    HistorySet("register-jepsen", "register", 6, (200, 400), 5, 0.1, bad_every=3),
    HistorySet("kv-1-client", "kv", 2, (300, 300), 1, 0.05, keys=5, bad_every=2),
    HistorySet("kv-10-clients", "kv", 2, (300, 300), 10, 0.1, keys=5, bad_every=2),
    HistorySet("kv-50-clients", "kv", 2, (200, 200), 50, 0.1, keys=5, bad_every=2),
]
JEPSEN_LOGS = "porcupine-jepsen-logs"


def generate(hset: HistorySet) -> list[NamedHistory]:
    """The set's histories, the same for the same set (seeded by position)."""
    out = []
    for index in range(hset.count):
        bad = hset.bad_every > 0 and index % hset.bad_every == hset.bad_every - 1
        ops = random.Random(index).randint(*hset.ops)
        if hset.model == "register":
            fault = REGISTER_FAULTS[(index // max(hset.bad_every, 1)) % 2] if bad else None
            events = _register_events(index, ops, hset, fault)
            planted = fault
        else:
            events = simulate_kv(
                index, ops=ops, processes=hset.processes, info_rate=hset.info_rate, keys=hset.keys
            )
            planted = None
            if bad:
                events, planted = plant_stale_get(events)
        name = f"{hset.name}/{index:02d}"
        out.append(NamedHistory(name, hset.model, build_history(events, name), planted))
    return out


def _register_events(
    seed: int, ops: int, hset: HistorySet, fault: str | None
) -> list[HistoryEvent]:
    for attempt in range(10):  # a fault that never applied: the next seed of the family
        try:
            return simulate_register(
                seed + 1000 * attempt,
                ops=ops,
                processes=hset.processes,
                info_rate=hset.info_rate,
                keys=hset.keys,
                fault=fault,
            )
        except ValueError:
            continue
    raise ValueError(f"{hset.name}: fault {fault} never applied from seed {seed}")


def plant_stale_get(events: list[HistoryEvent]) -> tuple[list[HistoryEvent], str]:
    """The history with one ok get, about 60 % of the way through, answering its key's
    first put (overwritten since: a stale read), so it is no longer linearizable."""
    first_put: dict[str, str] = {}
    current: dict[str, str | None] = {}
    start = len(events) * 3 // 5
    for i, event in enumerate(events):
        if event.type != "ok":
            continue
        key = event.value["key"]
        if event.f == "put":
            first_put.setdefault(key, event.value["value"])
        if event.f == "get":
            current[key] = event.value["value"]
            stale = first_put.get(key)
            if i >= start and stale is not None and stale != event.value["value"]:
                planted = list(events)
                planted[i] = replace(event, value={"key": key, "value": stale})
                return planted, f"stale get of {key} (event {event.index})"
    raise ValueError("no ok get late enough to make stale")


_JEPSEN_LINE = re.compile(
    r"^INFO\s+jepsen\.util\s+-\s+(\d+)\s+:(invoke|ok|fail|info)\s+:(read|write|cas)\s+(.*)$"
)


def read_jepsen_log(path: Path) -> list[HistoryEvent]:
    """A Jepsen etcd register log as porcupine's tests have them (`INFO jepsen.util -
    PROCESS :TYPE :F VALUE`; values nil, N, [A B] or :timed-out) as history events.
    An info's value is its invoke's; an operation never completed stays open (info)."""
    builder = HistoryBuilder()
    invoked: dict[int, Any] = {}
    for line in path.read_text().splitlines():
        match = _JEPSEN_LINE.match(line.strip())
        if match is None:
            continue
        process, type_, f, text = int(match[1]), match[2], match[3], match[4].strip()
        if type_ == "invoke" or text != ":timed-out":
            value = _jepsen_value(text)
        else:
            value = invoked.get(process)
        if type_ == "invoke":
            invoked[process] = value
        builder.add(process, type_, f, value)
    return builder.events


def _jepsen_value(text: str) -> Any:
    if text == "nil":
        return None
    if text.startswith("["):
        return [int(part) for part in text.strip("[]").split()]
    return int(text)


def jepsen_log_histories(src: Path) -> list[NamedHistory]:
    out = []
    for path in sorted((src / "test_data" / "jepsen").glob("etcd_*.log")):
        name = f"{JEPSEN_LOGS}/{path.stem}"
        out.append(NamedHistory(name, "register", build_history(read_jepsen_log(path), name), None))
    return out


# ---------------------------------------------------------------------------- export


def operation_json(op: Operation) -> dict[str, Any]:
    """One operation as exported: every field of our Operation, by name (call and ret
    are event positions; ret null for info)."""
    return asdict(op)


def operation_from_json(obj: dict[str, Any]) -> Operation:
    return Operation(**obj)


def write_export(histories: Sequence[NamedHistory], path: Path) -> None:
    doc = {
        "format": EXPORT_FORMAT,
        "version": FORMAT_VERSION,
        "histories": [
            {
                "name": item.name,
                "model": item.model,
                "operations": [operation_json(op) for op in item.history.operations],
            }
            for item in histories
        ],
    }
    path.write_text(json.dumps(doc, ensure_ascii=False))


def read_export(path: Path) -> list[tuple[str, str, list[Operation]]]:
    """(name, model, operations) per history of an exported file."""
    doc = json.loads(path.read_text())
    if doc.get("format") != EXPORT_FORMAT or doc.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: format {doc.get('format')!r} version {doc.get('version')!r}; "
            f"expected {EXPORT_FORMAT!r} version {FORMAT_VERSION}"
        )
    return [
        (h["name"], h["model"], [operation_from_json(op) for op in h["operations"]])
        for h in doc["histories"]
    ]


# ---------------------------------------------------------------------------- checking


@dataclass(frozen=True)
class Outcome:
    """One checker's answer on one history: verdict true, false or unknown."""

    verdict: str
    seconds: float
    cpu_seconds: float
    note: str = ""
    report_cpu_seconds: float = 0.0  # ours: describe() and to_json() after the check

    @property
    def decided(self) -> bool:
        return self.verdict in ("true", "false")


def check_ours(
    model: str, operations: Sequence[Operation], timeout_s: float, core: str | None = None
) -> Outcome:
    """Our check of one history; `core`: ETCDSPEC_CHECKER_CORE for it (None: as set)."""
    saved = os.environ.get(CORE_ENV)
    if core is not None:
        os.environ[CORE_ENV] = core
    try:
        checked, budget = get_model(model), Budget(timeout_s=timeout_s)  # not the check
        gc.collect()  # the previous history's garbage is not this one's cost
        start, start_cpu = time.perf_counter(), time.process_time()
        result = check_linearizable(checked, operations, budget)
        seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        start_cpu = time.process_time()
        result.describe(), result.to_json()  # the report, timed apart from the verdict
        report_cpu = time.process_time() - start_cpu
    finally:
        if saved is None:
            os.environ.pop(CORE_ENV, None)
        else:
            os.environ[CORE_ENV] = saved
    verdict = result.verdict.value
    note = ""
    if verdict == "unknown":
        reasons = sorted({part.reason for part in result.partitions if part.reason})
        note = (result.reason or "; ".join(reasons))[:200]
    return Outcome(verdict, seconds, cpu, note, report_cpu)


@dataclass(frozen=True)
class Porcupine:
    """A built harness, or why there is none."""

    binary: Path | None
    missing: str = ""


def find_porcupine() -> Porcupine:
    """Build the harness if Go and porcupine's source are here (cached by content)."""
    go = shutil.which("go")
    src = Path(os.environ.get("PORCUPINE_SRC", DEFAULT_SRC)).expanduser()
    missing = []
    if go is None:
        missing.append(f"no `go` on PATH: {GET_GO}")
    if not (src / "go.mod").is_file() or "anishathalye/porcupine" not in _read(src / "go.mod"):
        missing.append(f"no porcupine source at {src} (PORCUPINE_SRC): {GET_PORCUPINE}")
    if go is None or missing:
        return Porcupine(None, "; ".join(missing))
    digest = hashlib.sha256(str(src.resolve()).encode())
    for path in [*sorted(HARNESS_DIR.glob("*")), *sorted(src.glob("*.go")), src / "go.mod"]:
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    build = CACHE / "porcupine" / digest.hexdigest()[:16]
    binary = build / "porcupine-harness"
    if binary.is_file():
        return Porcupine(binary)
    build.mkdir(parents=True, exist_ok=True)
    shutil.copy(HARNESS_DIR / "main.go", build / "main.go")
    go_mod = (HARNESS_DIR / "go.mod").read_text()
    (build / "go.mod").write_text(
        f"{go_mod}\nreplace github.com/anishathalye/porcupine => {src.resolve()}\n"
    )
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    done = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=build,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return Porcupine(None, f"building the harness in {build} failed: {done.stderr.strip()}")
    return Porcupine(binary)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def run_porcupine(
    binary: Path, export: Path, count: int, timeout_s: float, maxprocs: int
) -> dict[str, Outcome]:
    """Porcupine's outcome per history name (a history it gave no answer for is left
    out; the caller counts it undecided)."""
    env = {**os.environ, "GOMAXPROCS": str(maxprocs)}
    try:
        done = subprocess.run(
            [str(binary), "-timeout", f"{timeout_s:g}", str(export)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=count * (timeout_s + 5) + 30,
        )
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else ""
        stderr, code = "the harness ran out of time", -1
    lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    if not lines or lines[0].get("format") != RESULT_FORMAT:
        raise RuntimeError(f"porcupine harness: no results (exit {code}): {stderr.strip()}")
    if lines[0].get("version") != FORMAT_VERSION:
        raise RuntimeError(f"porcupine harness: results version {lines[0].get('version')}")
    if code != 0:
        print(f"porcupine harness exited {code}: {stderr.strip()}", file=sys.stderr)
    return {
        line["name"]: Outcome(line["verdict"], line["seconds"], line["cpu_seconds"])
        for line in lines[1:]
    }


# ---------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class Row:
    """One history's outcomes."""

    name: str
    ops: int
    planted: str | None
    ours: Outcome
    theirs: Outcome | None
    pure: Outcome | None = None  # ours with the pure-Python search (--pure)

    @property
    def disagrees(self) -> bool:
        pure_differs = (
            self.pure is not None
            and self.pure.decided
            and self.ours.decided
            and self.pure.verdict != self.ours.verdict
        )
        return pure_differs or (
            self.theirs is not None
            and self.ours.decided
            and self.theirs.decided
            and self.ours.verdict != self.theirs.verdict
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "operations": self.ops,
            "planted": self.planted,
            "ours": asdict(self.ours),
            "porcupine": asdict(self.theirs) if self.theirs is not None else None,
            "ours_pure": asdict(self.pure) if self.pure is not None else None,
            "disagree": self.disagrees,
        }


def run_set(
    histories: Sequence[NamedHistory],
    porcupine: Porcupine,
    timeout_s: float,
    maxprocs: int,
    keep: Path | None,
    progress: Callable[[str], None],
    with_pure: bool = False,
) -> list[Row]:
    ours, pure = {}, {}
    for item in histories:
        if with_pure:  # alternating with the default core, history by history
            pure[item.name] = check_ours(item.model, item.history.operations, timeout_s, "pure")
        ours[item.name] = check_ours(item.model, item.history.operations, timeout_s)
        progress(f"{item.name}: ours {ours[item.name].verdict} {ours[item.name].seconds:.3f} s")
    theirs: dict[str, Outcome] = {}
    if porcupine.binary is not None:
        with tempfile.TemporaryDirectory(prefix="porcupine-compare-") as folder:
            export = (keep or Path(folder)) / (histories[0].name.split("/")[0] + ".json")
            write_export(histories, export)
            theirs = run_porcupine(porcupine.binary, export, len(histories), timeout_s, maxprocs)
        progress(f"{histories[0].name.split('/')[0]}: porcupine done")
    missing = Outcome("unknown", 0.0, 0.0, "no answer from the harness")
    return [
        Row(
            item.name,
            len(item.history.operations),
            item.planted,
            ours[item.name],
            theirs.get(item.name, missing) if porcupine.binary is not None else None,
            pure.get(item.name),
        )
        for item in histories
    ]


@dataclass(frozen=True)
class Summary:
    name: str
    histories: int
    mean_ops: float
    ours_s: float
    ours_cpu_s: float
    theirs_s: float | None
    theirs_cpu_s: float | None
    ratio: float | None  # sum of ours / sum of porcupine's, over histories both decided
    cpu_ratio: float | None
    median_ratio: float | None  # median per-history ratio, over histories both decided
    median_cpu_ratio: float | None  # the same by CPU time
    ours_decided: int
    theirs_decided: int | None
    disagreements: tuple[str, ...]
    pure_cpu_s: float | None = None  # --pure: ours with the pure-Python search
    pure_cpu_ratio: float | None = None
    pure_median_cpu_ratio: float | None = None
    report_cpu_s: float | None = None  # ours: the describe() and to_json() after each check
    report_cpu_ratio: float | None = None  # ours with the report / porcupine, CPU

    def to_json(self) -> dict[str, Any]:
        return {"set": self.name, **{k: v for k, v in asdict(self).items() if k != "name"}}


def summarize(name: str, rows: Sequence[Row]) -> Summary:
    both = [r for r in rows if r.theirs is not None and r.ours.decided and r.theirs.decided]
    have = rows[0].theirs is not None

    def ratio(ours: float, theirs: float) -> float | None:
        return ours / theirs if theirs > 0 else None

    per = [
        x
        for r in both
        if r.theirs is not None and (x := ratio(r.ours.seconds, r.theirs.seconds)) is not None
    ]

    def cpu_ratios(pick: Callable[[Row], Outcome | None]) -> list[float]:
        found = []
        for r in both:
            mine = pick(r)
            if r.theirs is not None and mine is not None:
                x = ratio(mine.cpu_seconds, r.theirs.cpu_seconds)
                if x is not None:
                    found.append(x)
        return found

    per_cpu = cpu_ratios(lambda r: r.ours)
    per_pure = cpu_ratios(lambda r: r.pure)
    pure_rows = [r for r in both if r.pure is not None and r.theirs is not None]
    reported = sum(r.ours.cpu_seconds + r.ours.report_cpu_seconds for r in both)
    return Summary(
        name=name,
        histories=len(rows),
        mean_ops=statistics.mean(r.ops for r in rows),
        ours_s=sum(r.ours.seconds for r in rows),
        ours_cpu_s=sum(r.ours.cpu_seconds for r in rows),
        theirs_s=sum(r.theirs.seconds for r in rows if r.theirs) if have else None,
        theirs_cpu_s=sum(r.theirs.cpu_seconds for r in rows if r.theirs) if have else None,
        ratio=ratio(
            sum(r.ours.seconds for r in both),
            sum(r.theirs.seconds for r in both if r.theirs),
        )
        if both
        else None,
        cpu_ratio=ratio(
            sum(r.ours.cpu_seconds for r in both),
            sum(r.theirs.cpu_seconds for r in both if r.theirs),
        )
        if both
        else None,
        median_ratio=statistics.median(per) if per else None,
        median_cpu_ratio=statistics.median(per_cpu) if per_cpu else None,
        pure_cpu_s=sum(r.pure.cpu_seconds for r in rows if r.pure) if rows[0].pure else None,
        pure_cpu_ratio=ratio(
            sum(r.pure.cpu_seconds for r in pure_rows if r.pure),
            sum(r.theirs.cpu_seconds for r in pure_rows if r.theirs),
        )
        if pure_rows
        else None,
        pure_median_cpu_ratio=statistics.median(per_pure) if per_pure else None,
        report_cpu_s=sum(r.ours.report_cpu_seconds for r in rows),
        report_cpu_ratio=ratio(reported, sum(r.theirs.cpu_seconds for r in both if r.theirs))
        if both
        else None,
        ours_decided=sum(r.ours.decided for r in rows),
        theirs_decided=sum(r.theirs.decided for r in rows if r.theirs) if have else None,
        disagreements=tuple(r.name for r in rows if r.disagrees),
    )


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(summaries: Sequence[Summary]) -> str:
    head = (
        "| set | histories | mean ops | ours Σ s | porcupine Σ s | ours/porcupine "
        "(Σ, both decided) | CPU ratio | median ratio | decided ours | decided porcupine "
        "| disagreements |"
    )
    lines = [head, "|" + "---|" * 11]
    for s in summaries:
        theirs_decided = "-" if s.theirs_decided is None else f"{s.theirs_decided}/{s.histories}"
        lines.append(
            f"| {s.name} | {s.histories} | {s.mean_ops:.0f} | {s.ours_s:.3f} | "
            f"{_num(s.theirs_s, '.3f')} | {_num(s.ratio, '.2f')}x | {_num(s.cpu_ratio, '.2f')}x | "
            f"{_num(s.median_ratio, '.2f')}x | {s.ours_decided}/{s.histories} | "
            f"{theirs_decided} | {len(s.disagreements) or 'none'} |"
        )
    lines += [
        "",
        "| set | ours Σ CPU s | pure Σ CPU s | porcupine Σ CPU s | CPU ratio: ours | "
        "pure | median CPU ratio: ours | pure | report Σ CPU s | CPU ratio with the report |",
        "|" + "---|" * 10,
    ]
    for s in summaries:
        lines.append(
            f"| {s.name} | {s.ours_cpu_s:.3f} | {_num(s.pure_cpu_s, '.3f')} | "
            f"{_num(s.theirs_cpu_s, '.3f')} | {_num(s.cpu_ratio, '.2f')}x | "
            f"{_num(s.pure_cpu_ratio, '.2f')}x | {_num(s.median_cpu_ratio, '.2f')}x | "
            f"{_num(s.pure_median_cpu_ratio, '.2f')}x | {_num(s.report_cpu_s, '.4f')} | "
            f"{_num(s.report_cpu_ratio, '.2f')}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sets only")
    parser.add_argument("--json", action="store_true", help="JSON per history and per set")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="s per check")
    parser.add_argument("--go-maxprocs", type=int, default=1, help="GOMAXPROCS for porcupine")
    parser.add_argument("--sets", help="comma-separated set names to run (default: all)")
    parser.add_argument("--keep", type=Path, help="write the exported histories here")
    parser.add_argument(
        "--pure", action="store_true", help="also check each history with the pure-Python search"
    )
    options = parser.parse_args(argv)
    porcupine = find_porcupine()
    if porcupine.binary is None:
        print(f"porcupine column skipped: {porcupine.missing}", file=sys.stderr)
    sets: list[tuple[str, Callable[[], list[NamedHistory]]]] = [
        (hset.name, lambda hset=hset: generate(hset))  # type: ignore[misc]
        for hset in (QUICK if options.quick else FULL)
    ]
    src = Path(os.environ.get("PORCUPINE_SRC", DEFAULT_SRC)).expanduser()
    if not options.quick and (src / "test_data" / "jepsen").is_dir():
        sets.insert(0, (JEPSEN_LOGS, lambda: jepsen_log_histories(src)))
    if options.sets:
        wanted = set(options.sets.split(","))
        sets = [(name, make) for name, make in sets if name in wanted]
    if options.keep:
        options.keep.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; timeout {options.timeout:g} s "
        f"per check; porcupine GOMAXPROCS={options.go_maxprocs}; our search core: "
        f"{core_choice()} (compiled {'built' if compiled_available() else 'NOT built'})",
        file=sys.stderr,
    )
    summaries = []
    for name, make in sets:
        rows = run_set(
            make(),
            porcupine,
            options.timeout,
            options.go_maxprocs,
            options.keep,
            lambda text: print(text, file=sys.stderr, flush=True),
            options.pure,
        )
        summary = summarize(name, rows)
        summaries.append(summary)
        if options.json:
            for row in rows:
                print(json.dumps({"set": name, **row.to_json()}), flush=True)
            print(json.dumps(summary.to_json()), flush=True)
        for row in rows:
            if row.disagrees and row.theirs is not None:
                pure = f", ours pure {row.pure.verdict}" if row.pure is not None else ""
                print(
                    f"VERDICT DISAGREEMENT on {row.name}: ours {row.ours.verdict}{pure}, "
                    f"porcupine {row.theirs.verdict} (planted: {row.planted})",
                    file=sys.stderr,
                )
    out = sys.stderr if options.json else sys.stdout  # --json: the table still, on stderr
    print(table(summaries), file=out)
    if porcupine.binary is None:
        print(f"(porcupine skipped: {porcupine.missing})", file=out)
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", file=sys.stderr)
    disagreements = [d for s in summaries for d in s.disagreements]
    if disagreements:
        print(f"VERDICT DISAGREEMENTS: {', '.join(disagreements)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Checker benchmarks: time and peak memory of `check_linearizable` against history size.

Run: `.venv/bin/python -m bench.checker_bench` (full: up to 100k-op etcd histories, a few
minutes) or `--quick` (small sizes only). Wall-clock mean and max, and the mean CPU time
of the checking process (fairer on a shared machine), are reported; goals are judged on
the wall-clock mean. Each case runs in a fresh subprocess so that
its peak resident memory (ru_maxrss, which includes generating the history from the
pure store model) is its own. Histories are generated with a fixed seed
(etcdspec.checker.simulate), so figures are comparable between runs. Goals (issue 4):
etcd-model 100k ops < 10 s; 100-op 5-process CAS register with ~15 info ops < 5 ms on
average; 2,000-op 10-key kv history < 10 s. Without --quick it also times what a user
runs, end to end: `etcdspec check FILE --model etcd` on the 100k-op etcd history written
to a file (reading and validating the JSON Lines, preparing, indexing, the search, the
watch checks, the report; wall and CPU of that process); `--cli-only` runs just that.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_CHILD = r"""
import json, resource, sys, time
from etcdspec.checker.history import build_history
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.models import get_model
from etcdspec.checker import simulate
case = json.loads(sys.argv[1])
make = getattr(simulate, "simulate_" + case["model"])
args = dict(ops=case["ops"], processes=case["processes"], info_rate=case["info"])
if case["model"] == "kv":
    args["keys"] = case["keys"]
runs = []
cpu = []
infos = 0
verdicts = set()
for seed in range(case["repeat"]):
    history = build_history(make(seed, **args))
    infos += sum(op.type == "info" for op in history.operations)
    start, start_cpu = time.perf_counter(), time.process_time()
    result = check_linearizable(get_model(case["model"]), history.operations)
    runs.append(time.perf_counter() - start)
    cpu.append(time.process_time() - start_cpu)
    verdicts.add(result.verdict.value)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": sum(runs) / len(runs), "max_seconds": max(runs),
                  "cpu_seconds": sum(cpu) / len(cpu), "peak_mb": peak,
                  "info_ops": infos / case["repeat"], "verdicts": sorted(verdicts)}))
"""


CASE_TIMEOUT_S = 300


@dataclass(frozen=True)
class Case:
    model: str
    ops: int
    processes: int
    info: float
    keys: int = 10
    repeat: int = 1
    goal_s: float | None = None

    def describe(self) -> str:
        keys = f", {self.keys} keys" if self.model == "kv" else ""
        return (
            f"{self.model:<8} {self.ops:>7} ops, {self.processes:>2} processes, "
            f"{self.info:.0%} info{keys}"
        )


FULL = [
    Case("register", 100, 5, 0.15, repeat=50, goal_s=0.005),
    Case("register", 1000, 5, 0.1),
    Case("register", 10000, 5, 0.05),
    Case("kv", 2000, 10, 0.1, keys=10, goal_s=10.0),
    Case("kv", 10000, 50, 0.2, keys=10),
    Case("kv", 100000, 5, 0.05, keys=10),
    Case("etcd", 1000, 5, 0.1),
    Case("etcd", 10000, 5, 0.05),
    Case("etcd", 10000, 50, 0.2),
    Case("etcd", 100000, 5, 0.05, goal_s=10.0),
    Case("etcd", 100000, 50, 0.1),
]
# Timed end to end through the command line (not with --quick: writing it takes a while).
CLI_CASE = Case("etcd", 100000, 5, 0.05, goal_s=10.0)
QUICK = [
    Case("register", 100, 5, 0.15, repeat=20, goal_s=0.005),
    Case("kv", 2000, 10, 0.1, keys=10, goal_s=10.0),
    Case("etcd", 1000, 5, 0.1),
    Case("etcd", 10000, 5, 0.05),
]


def run_case(case: Case) -> dict[str, object]:
    payload = json.dumps(case.__dict__)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, payload],
            capture_output=True,
            text=True,
            check=False,
            timeout=CASE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {CASE_TIMEOUT_S} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, object] = json.loads(done.stdout)
    return result


_WRITE = r"""
import json, sys
from etcdspec.checker import simulate
from etcdspec.checker.history import write_history
case = json.loads(sys.argv[1])
events = simulate.simulate_etcd(0, ops=case["ops"], processes=case["processes"],
                                info_rate=case["info"])
write_history(events, sys.argv[2])
"""


def run_cli_case(case: Case, folder: Path) -> dict[str, object]:
    """The whole `etcdspec check FILE --model etcd` on the case's history written to a
    file (reading and validating the JSON Lines, the check, the report): wall and CPU
    time of the checking process, measured from outside."""
    path = folder / f"etcd-{case.ops}.jsonl"
    if not path.exists():
        subprocess.run(
            [sys.executable, "-c", _WRITE, json.dumps(case.__dict__), str(path)], check=True
        )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "etcdspec.cli.main", "check", str(path), "--model", "etcd"],
            capture_output=True,
            text=True,
            check=False,
            timeout=CASE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {CASE_TIMEOUT_S} s"}
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}: {done.stdout.strip().splitlines()[-1:]}"}
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": wall, "cpu_seconds": cpu}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--json", action="store_true", help="one JSON object per case")
    parser.add_argument(
        "--cli-only",
        action="store_true",
        help="only the end-to-end `etcdspec check FILE --model etcd` of the 100k history",
    )
    options = parser.parse_args(argv)
    if not options.cli_only:
        _search_cases(QUICK if options.quick else FULL, options.json)
    if options.quick:
        return 0
    with tempfile.TemporaryDirectory(prefix="checker-bench-") as folder:
        result = run_cli_case(CLI_CASE, Path(folder))
    label = f"etcdspec check FILE: {CLI_CASE.describe()}"
    if options.json:
        print(json.dumps({"case": {**CLI_CASE.__dict__, "cli": True}, **result}))
    elif "error" in result:
        print(f"{label:<50} error: {result['error']}")
    else:
        seconds = float(result["seconds"])  # type: ignore[arg-type]
        cpu = float(result["cpu_seconds"])  # type: ignore[arg-type]
        goal = "met" if seconds < (CLI_CASE.goal_s or 0) else "MISSED"
        print(f"{label}: {seconds:.2f} s wall, {cpu:.2f} s CPU  < {CLI_CASE.goal_s:g} s: {goal}")
    return 0


def _search_cases(cases: list[Case], as_json: bool) -> None:
    print(
        f"{'case':<50} {'mean':>10} {'max':>10} {'mean CPU':>10} {'peak RSS':>9} {'info':>6}  goal"
    )
    for case in cases:
        result = run_case(case)
        if as_json:
            print(json.dumps({"case": case.__dict__, **result}))
            continue
        if "error" in result:
            print(f"{case.describe():<50} error: {result['error']}")
            continue
        seconds = float(result["seconds"])  # type: ignore[arg-type]
        goal = ""
        if case.goal_s is not None:
            goal = f"< {case.goal_s:g} s: {'met' if seconds < case.goal_s else 'MISSED'}"
        print(
            f"{case.describe():<50} {seconds * 1000:>8.1f}ms {float(result['max_seconds']) * 1000:>8.1f}ms "  # type: ignore[arg-type]
            f"{float(result['cpu_seconds']) * 1000:>8.1f}ms "  # type: ignore[arg-type]
            f"{float(result['peak_mb']):>7.0f}MB {float(result['info_ops']):>6.0f}  {goal}"  # type: ignore[arg-type]
        )


if __name__ == "__main__":
    sys.exit(main())

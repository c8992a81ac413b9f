"""Benchmark of bounded model checking on the seeded Raft bugs, each on its catalogue
property (spec/mutations.py), with a wall-clock cap per bug.

Run: `.venv/bin/python -m bench.spec_bmc_bench [--cap 60] [--only MUTATION] [--rounds] [--json]`.
With `--rounds` each bug's bound counts rounds (each action at most once a round, in
declaration order: `bmc(..., rounds=True)`), with the bounds of `ROUNDS`.
Each row runs in a child process (`bmc()` through its public signature, so the same
script times another checkout: run it from outside the worktree with
`PYTHONPATH=<a tree holding etcdspec/ and etcdspec/spec/>`). The child reports every
bound it cleared (the `on_depth` callback) and its result; the parent kills it at the
cap and keeps the deepest bound cleared, so a row says: found at depth k in s seconds,
no violation up to k, or (killed) cleared up to k within the cap. Instances are the
smallest that hold each bug's shortest run (see tests/spec/test_spec_bmc.py).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

# mutation -> (bound, instance sizes); the property is the catalogue's
RUNS: dict[str, tuple[int, dict[str, int]]] = {
    "two_votes": (5, {"node": 3, "term": 2, "index": 1, "value": 1, "quorum": 2}),
    "stale_append": (10, {"node": 2, "term": 3, "index": 2, "value": 1, "quorum": 1}),
    "no_truncation": (11, {"node": 3, "term": 3, "index": 2, "value": 1, "quorum": 1}),
    "figure8": (17, {"node": 3, "term": 5, "index": 2, "value": 1, "quorum": 1}),
}

# mutation -> the fewest rounds that hold a violating run (measured: one round fewer
# finds none); figure8: elect and propose, elect and propose, elect, replicate and
# commit, elect
ROUNDS: dict[str, int] = {"two_votes": 2, "stale_append": 3, "no_truncation": 2, "figure8": 4}

CHILD = """
import json, sys, time
from etcdspec.spec.bmc import bmc
from etcdspec.spec.loader import load_spec
from etcdspec.spec.mutations import SEEDED_BUGS
mutation, depth, sizes, cap = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
rounds = {"rounds": True} if sys.argv[5] == "rounds" else {}
bug = next(b for b in SEEDED_BUGS if b.spec == "raft" and b.mutation == mutation)
def cleared(k, seconds):
    print(json.dumps({"cleared": k, "seconds": round(seconds, 2)}), flush=True)
result = bmc(load_spec("raft", mutation), depth, sizes, cap * 1000, on_depth=cleared, only=[bug.prop], **rounds)
print(json.dumps({"result": result.verdict.to_json(), "reached": result.reached,
                  "seconds": round(result.seconds, 2), "property": bug.prop}), flush=True)
"""


def run_one(mutation: str, cap: int, rounds: bool = False) -> dict[str, Any]:
    depth, sizes = RUNS[mutation]
    if rounds:
        depth = ROUNDS[mutation]
    started = time.perf_counter()
    cpu_before = _children_cpu()
    bound = f"{depth}r" if rounds else str(depth)
    row: dict[str, Any] = {"bug": f"raft/{mutation}", "bound": bound, "sizes": sizes}
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                mutation,
                str(depth),
                json.dumps(sizes),
                str(cap),
                "rounds" if rounds else "steps",
            ],
            capture_output=True,
            text=True,
            timeout=cap,
            check=False,
        )
        output, killed = done.stdout, False
    except subprocess.TimeoutExpired as expired:
        raw = expired.stdout or b""
        output, killed = raw.decode() if isinstance(raw, bytes) else raw, True
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    cleared = [line for line in lines if "cleared" in line]
    final = next((line for line in lines if "result" in line), None)
    row["wall_seconds"] = round(time.perf_counter() - started, 2)
    row["cpu_seconds"] = round(_children_cpu() - cpu_before, 2)
    if final is not None and final["result"] is False:
        row["outcome"] = f"found at depth {final['reached']}"
    elif final is not None and final["result"] is True:
        row["outcome"] = f"no violation up to {final['reached']}"
    elif cleared:
        row["outcome"] = (
            f"cleared depth {cleared[-1]['cleared']} ({cleared[-1]['seconds']} s), then cap"
        )
    else:
        row["outcome"] = "nothing within the cap" if killed else "unknown"
    return row


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=60, help="wall seconds per bug")
    parser.add_argument("--only", action="append", choices=sorted(RUNS), help="repeatable")
    parser.add_argument("--rounds", action="store_true", help="bounds in rounds (ROUNDS)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [run_one(m, args.cap, args.rounds) for m in args.only or RUNS]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'bug':20} {'bound':>5} {'wall s':>7} {'cpu s':>7}  outcome")
    for row in rows:
        print(
            f"{row['bug']:20} {row['bound']:>5} {row['wall_seconds']:>7.2f}"
            f" {row['cpu_seconds']:>7.2f}  {row['outcome']}"
        )


if __name__ == "__main__":
    main()

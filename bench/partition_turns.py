"""Partitions in turns against one after another, on a 50-client kv history with one bad key.

Run: `.venv/bin/python -m bench.partition_turns` (about five minutes; `--timeout S` per
check, default 120). The history is `simulate_kv(seed, ops=10000, processes=50,
info_rate=0.2, keys=10)` with the fifth ok get of the last key, k9, changed: `phantom`
answers a value nobody wrote, `stale` the key's first put (overwritten long before).
`turns` is the checker as it is (turns of SLICE_STEPS steps, cheapest-looking first);
`in-order` the search before session 11, emulated in the same process: each partition
to its end, by key. Each case runs in its own process (`--case` runs one), so memory
and the collector start fresh; a timeout is reported as undecided, never as decided.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace

from etcdspec.checker.budget import Budget
from etcdspec.checker.history import HistoryEvent, build_history
from etcdspec.checker.models import get_model
from etcdspec.checker.simulate import simulate_kv

KEY = "k9"
NTH_GET = 5


def planted(seed: int, kind: str) -> list[HistoryEvent]:
    """The history with KEY's NTH_GET-th ok get answering wrongly (`kind`)."""
    events = simulate_kv(seed, ops=10000, processes=50, info_rate=0.2, keys=10)
    first_put = next(e for e in events if e.type == "ok" and e.f == "put" and e.value["key"] == KEY)
    wrong = "never-written" if kind == "phantom" else first_put.value["value"]
    seen = 0
    for i, event in enumerate(events):
        if event.type == "ok" and event.f == "get" and event.value["key"] == KEY:
            seen += 1
            if seen == NTH_GET:
                events[i] = replace(event, value={"key": KEY, "value": wrong})
                return events
    raise ValueError(f"seed {seed}: fewer than {NTH_GET} gets of {KEY}")


def run_case(mode: str, kind: str, seed: int, timeout_s: float) -> dict[str, object]:
    import etcdspec.checker.linearizability as lin

    if mode == "in-order":
        lin.SLICE_STEPS = 1 << 62
        lin._difficulty = lambda search: (0, 0)  # keep the order by key
    operations = build_history(planted(seed, kind)).operations
    start = time.perf_counter()
    result = lin.check_linearizable(get_model("kv"), operations, Budget(timeout_s=timeout_s))
    failure = result.failure
    return {
        "mode": mode,
        "kind": kind,
        "seed": seed,
        "verdict": result.verdict.describe(),
        "seconds": round(time.perf_counter() - start, 3),
        "refuted": failure.partition if failure is not None else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--case", help="mode,kind,seed: run one case here (for the parent)")
    args = parser.parse_args()
    if args.case:
        mode, kind, seed = args.case.split(",")
        print(json.dumps(run_case(mode, kind, int(seed), args.timeout)))
        return
    print("| history | mode | verdict | seconds | refuted |")
    print("|---|---|---|---|---|")
    for seed in range(args.seeds):
        for kind in ("phantom", "stale"):
            for mode in ("turns", "in-order"):
                case = f"{mode},{kind},{seed}"
                out = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "bench.partition_turns",
                        "--case",
                        case,
                        "--timeout",
                        str(args.timeout),
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                row = json.loads(out)
                print(
                    f"| {kind} get, seed {seed} | {mode} | {row['verdict']} | "
                    f"{row['seconds']} | {row['refuted'] or '-'} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

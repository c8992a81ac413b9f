"""`make bench`: every benchmark harness in turn, each with its own default settings.

Each harness prints its own table; docs/benchmarks.md records the figures and the exact
command of each. A harness that fails does not stop the others; the exit code is the
number of harnesses that failed.
"""

from __future__ import annotations

import subprocess
import sys

HARNESSES = (
    "etcdspec.model.store_bench",
    "bench.model_bench",
    "bench.exhaustive_bench",
    "bench.distributed_explore",
    "bench.refinement_bench",
    "bench.spec_bench",
    "bench.checker_bench",
    "bench.server_bench",
    "bench.conform_bench",
    "bench.member_catchup",
)


def main() -> int:
    failed = 0
    for module in HARNESSES:
        print(f"== python -m {module}", flush=True)
        if subprocess.run([sys.executable, "-m", module], check=False).returncode != 0:
            print(f"== {module} failed", flush=True)
            failed += 1
    return failed


if __name__ == "__main__":
    sys.exit(main())

"""Z3 parameter study for a spec's induction queries, in Z3's own work units.

Run: `.venv/bin/python -m bench.spec_z3_params [--spec raft] [--seeds 0,1,2,3,4]
[--params '{"smt.propagate_values": false}' ...] [--hints]`. Every induction query that no
syntactic rule settles (etcdspec.spec.discharge) is asked on a fresh solver in a fresh
Z3 context (so nothing asked before changes it), once per random seed and parameter
set; the figure is Z3's `rlimit count` summed over the queries, which does not depend
on the machine's load (CPU seconds are printed too, but on a shared machine they move
by ±30% from run to run). A query's cost depends on Z3's search luck, which the seed
reshuffles: a parameter set pays only if it lowers the mean over seeds, not one seed's
figure. Every answer must be unsat (the spec proves); the study stops otherwise.

Findings on raft (116 queries, session 3): `smt.propagate_values=false` gives 7.6-8.9M
over seeds 0-4 against 9.1-13.0M with Z3's defaults, but in `prove`'s shared context
the two are within each other's spread (9.2-10.8M and 8.3-11.2M over seeds 0-3, one
query up to 2.9M without propagate_values), so prove keeps the defaults.
`auto_config=false`, `smt.qi.eager_threshold`, `smt.case_split`, `smt.relevancy`
(0 makes one query run out), `smt.ematching=false` (4x more work), Then-pipelines of
simplify/propagate-values/solve-eqs before smt, a post-state with fresh symbols
instead of substitution (+15%), and ordered sorts as an injective rank into Int
(10.1-11.6M) did not pay; mbqi and model=false change nothing for unsat queries. Z3's
built-in linear order (z3.LinearOrder) crashes Z3 5.4 on these quantified queries.

Proof hints (`--hints`: each query with only the properties of its unsat core, from
spec/raft.hints; etcdspec.spec.hints): 2.58-2.78M over seeds 0-4 (mean 2.67M, heaviest
query 0.57M, well inside prove's 2M-unit hint budget on every seed) against 9.1-13.0M
for the full queries: 3.4-4.9x less Z3 work. Cores: 116 queries, 1-13 properties of
44 (median 3). `smt.propagate_values=false` on the hinted queries: mean 2.51M (within
the seed spread; not adopted).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass

import z3

from etcdspec.spec.discharge import settle
from etcdspec.spec.hints import book, load_hints
from etcdspec.spec.loader import load_spec
from etcdspec.spec.prove import Prover

Params = dict[str, bool | int | float | str]
RLIMIT_CAP = 50_000_000


@dataclass(frozen=True)
class Sample:
    """One parameter set and seed over every query."""

    params: str
    seed: int
    rlimit: int
    heaviest: int
    heaviest_query: str
    cpu_seconds: float

    def describe(self) -> str:
        return (
            f"{self.params:50} seed {self.seed}: {self.rlimit / 1e6:6.2f}M rlimit, heaviest "
            f"{self.heaviest / 1e6:.2f}M ({self.heaviest_query}), {self.cpu_seconds:.2f} s CPU"
        )


def induction_queries(spec: str, hinted: bool = False) -> list[tuple[str, list[z3.BoolRef]]]:
    """(label, assertions) of every induction query Z3 answers in `prove`; with
    `hinted`, the query with only the properties of its hint (the spec's sidecar,
    etcdspec.spec.hints), as `prove` asks it first."""
    loaded = load_spec(spec)
    instance = Prover(loaded).unbounded
    cores = book(load_hints(loaded), loaded.spec).cores if hinted else {}
    found = []
    for action in loaded.spec.actions():
        for prop in loaded.spec.properties():
            if settle(loaded.info, action, prop) is None:
                step = instance.step(action)
                core = cores.get((prop.name, action.name))
                if hinted and core is None:
                    raise SystemExit(f"{prop.name}/{action.name}: no usable hint (regenerate)")
                base = (
                    step.base
                    if core is None
                    else [*step.axioms, *(step.hypotheses[n] for n in core), step.guard]
                )
                found.append((f"{prop.name}/{action.name}", [*base, step.negation(prop)]))
    return found


def sample(queries: list[tuple[str, list[z3.BoolRef]]], params: Params, seed: int) -> Sample:
    total, heaviest, heaviest_query, cpu = 0, 0, "", 0.0
    for label, assertions in queries:
        context = z3.Context()
        solver = z3.Solver(ctx=context)
        for name, value in params.items():
            solver.set(name, value)
        solver.set("random_seed", seed)
        solver.set("rlimit", RLIMIT_CAP)
        solver.add(*[a.translate(context) for a in assertions])
        started = time.process_time()
        result = solver.check()
        cpu += time.process_time() - started
        if result != z3.unsat:
            raise SystemExit(f"{label}: {result} with {params} seed {seed} (expected unsat)")
        used = int(solver.statistics().get_key_value("rlimit count"))
        total += used
        if used > heaviest:
            heaviest, heaviest_query = used, label
    return Sample(json.dumps(params), seed, total, heaviest, heaviest_query, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="raft")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument(
        "--hints", action="store_true", help="the hinted queries (the sidecar's cores) instead"
    )
    parser.add_argument(
        "--params",
        action="append",
        default=None,
        help='a JSON object of solver parameters (repeatable; default: {} and {"smt.propagate_values": false})',
    )
    args = parser.parse_args()
    choices: list[Params] = [json.loads(p) for p in args.params or []] or [
        {},
        {"smt.propagate_values": False},
    ]
    seeds = [int(s) for s in args.seeds.split(",")]
    queries = induction_queries(args.spec, args.hints)
    kind = "hinted induction queries" if args.hints else "induction queries"
    print(f"{args.spec}: {len(queries)} {kind}, seeds {seeds}")
    for params in choices:
        samples = [sample(queries, params, seed) for seed in seeds]
        for one in samples:
            print(one.describe())
        mean = statistics.mean(s.rlimit for s in samples) / 1e6
        worst = max(s.heaviest for s in samples) / 1e6
        print(f"{json.dumps(params):50} mean {mean:.2f}M rlimit, heaviest query {worst:.2f}M\n")


if __name__ == "__main__":
    main()

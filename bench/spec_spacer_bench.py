"""Z3's Spacer (IC3/PDR over constrained Horn clauses) against the rounds BMC, on the
finite instances of spec/mutations.py's deep Raft bugs (issue 23).

The same ground encoding as etcdspec.spec.bmc (etcdspec.spec.ground: one Z3 constant per
state symbol and argument tuple, the rigid symbols a table too), written as three Horn
clauses over one predicate Reach(rigid, state): axioms and init give Reach; Reach and
one step (StepTemplate, any action) give Reach of the post-state; Reach and a violated
property is the query. Spacer answers "reachable" (a bug, at whatever depth) or
"unreachable" (no run of any length violates the properties: more than a bound), or
runs out of time. The BMC side is `bmc(..., rounds=True)` at the bug's rounds. Each
engine runs in a child process of its own, capped by --cap seconds of wall clock; CPU
seconds are the child's.

    .venv/bin/python -m bench.spec_spacer_bench [--cap 120] [--bugs no_truncation,figure8]

A bench only (docs/benchmarks.md, issue 23): it is not wired into `etcdspec prove`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import resource
import time
from dataclasses import dataclass
from typing import Any

import z3

from etcdspec.spec import ast
from etcdspec.spec.bmc import StepTemplate, bmc, instance_sizes
from etcdspec.spec.ground import GroundEncoder
from etcdspec.spec.loader import load_spec
from etcdspec.spec.prove import select_properties
from etcdspec.spec.z3backend import Vocabulary


@dataclass(frozen=True)
class Case:
    """A seeded bug on its catalogue property, the instance, and the rounds BMC needs."""

    spec: str
    mutation: str
    prop: str
    sizes: dict[str, int]
    rounds: int

    def describe(self) -> str:
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"{self.spec} --mutation {self.mutation} --only {self.prop} ({sizes})"


RAFT = {"node": 3, "index": 2, "value": 1, "quorum": 1}
CASES = {
    "no_truncation": Case("raft", "no_truncation", "log_matching", {**RAFT, "term": 3}, 2),
    "stale_append": Case(
        "raft", "stale_append", "leader_completeness", {**RAFT, "node": 2, "term": 3}, 3
    ),
    "figure8": Case("raft", "figure8", "leader_completeness", {**RAFT, "term": 5}, 4),
}


def spacer(case: Case, cap_s: float) -> dict[str, Any]:
    """Spacer on the Horn clauses of the case's finite instance."""
    loaded = load_spec(case.spec, case.mutation)
    vocab = Vocabulary(loaded.info, instance_sizes(loaded, case.sizes))
    encoder = GroundEncoder(vocab)
    spec = loaded.spec
    pre, post = encoder.new_state("pre"), encoder.new_state("post")
    step = StepTemplate(encoder, spec, pre, post)
    rigid = [
        encoder.rigid.interps[sym.name](args)
        for sym in loaded.info.rigid_symbols()
        for args in encoder.tuples(sym)
    ]
    pre_vars = encoder.constants["pre"]
    post_vars = encoder.constants["post"]
    reach = z3.Function("Reach", *[v.sort() for v in [*rigid, *pre_vars]], z3.BoolSort())
    locals_ = [*(p for params in step.params for p in params.values()), *step.chosen]
    axioms = [encoder.formula(d.formula, None, {}) for d in spec.formulas(ast.FormulaKind.AXIOM)]
    init = [encoder.formula(d.formula, pre, {}) for d in spec.formulas(ast.FormulaKind.INIT)]
    props = select_properties(spec, [case.prop])
    violated = z3.Or(*[z3.Not(encoder.formula(p.formula, pre, {})) for p in props])
    fp = z3.Fixedpoint()
    fp.set("engine", "spacer")
    fp.set("timeout", int(cap_s * 1000))
    fp.declare_var(*rigid, *pre_vars, *post_vars, *locals_)
    fp.register_relation(reach)
    fp.rule(reach(*rigid, *pre_vars), [*axioms, *init])
    fp.rule(reach(*rigid, *post_vars), [reach(*rigid, *pre_vars), step.formula])
    started = time.perf_counter()
    try:
        answer = fp.query(z3.And(reach(*rigid, *pre_vars), violated))
    except z3.Z3Exception as error:  # Spacer reports its timeout as "canceled"
        return {"outcome": f"unknown ({error})", "query_s": round(time.perf_counter() - started, 2)}
    outcome = {z3.sat: "found", z3.unsat: "no run violates it (any depth)"}.get(
        answer, f"unknown ({fp.reason_unknown()})"
    )
    return {"outcome": outcome, "query_s": round(time.perf_counter() - started, 2)}


def rounds_bmc(case: Case, cap_s: float) -> dict[str, Any]:
    loaded = load_spec(case.spec, case.mutation)
    result = bmc(loaded, case.rounds, case.sizes, int(cap_s * 1000), only=[case.prop], rounds=True)
    outcome = result.verdict.name.lower()
    if result.counterexample is not None:
        outcome = f"found ({len(result.counterexample.steps)} steps)"
    return {"outcome": outcome, "query_s": round(result.seconds, 2)}


ENGINES = {"spacer": spacer, "rounds": rounds_bmc}


def _child(engine: str, name: str, cap_s: float, out: Any) -> None:
    result = ENGINES[engine](CASES[name], cap_s)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)
    out.put(result)


def run(engine: str, name: str, cap_s: float) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    started = time.perf_counter()
    child = context.Process(target=_child, args=(engine, name, cap_s, out))
    child.start()
    try:
        result: dict[str, Any] = out.get(timeout=cap_s + 30)
    except queue.Empty:  # nothing within the cap (or the child died): it is stopped
        result = {"outcome": f"nothing within the {cap_s:.0f} s cap"}
    finally:
        if child.is_alive():
            child.terminate()
        child.join()
    result["wall_s"] = round(time.perf_counter() - started, 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=120.0, help="wall seconds per run")
    parser.add_argument("--bugs", default="no_truncation,figure8", help="comma-separated")
    parser.add_argument("--engines", default="rounds,spacer", help="comma-separated")
    args = parser.parse_args()
    for name in args.bugs.split(","):
        for engine in args.engines.split(","):
            result = run(engine, name, args.cap)
            print(f"{name:14} {engine:7} {CASES[name].describe()}: {result}", flush=True)


if __name__ == "__main__":
    main()

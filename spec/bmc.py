"""Bounded model checking: every property on every run of up to K steps from init.

The spec is instantiated with finite sorts of given sizes (`--size node=3,term=3`);
sorts not named get `DEFAULT_SIZE` elements. The encoding is quantifier-free
(etcdspec.spec.ground): quantifiers expand over the elements, each state s0..sK is a
table of Z3 constants, and so are the rigid symbols. One step — at most one action,
with some parameters, the frame derived from what it assigns — and the violation
query are encoded once between two template states and moved to each depth by
z3.substitute, so unrolling a step costs one substitution, not a Python re-encoding.
A step may stutter (no action), but only after the run's real steps, so one query —
some property (invariant or safety) fails in s_K — covers every run of up to K steps;
it is bit-blasted and answered by Z3's SAT solver, much faster on these propositional
problems than its SMT core (docs/benchmarks.md). Runs that differ only by a renaming of
the elements of a symmetric sort (nodes, quorums, values) are searched once.

With `rounds`, the bound counts rounds instead: a round is one transition per action,
in declaration order, each firing its action or not (`unroll`). K rounds cover every
run of K steps and reach far deeper runs whose actions follow that order: Raft's Figure
8 needs 17 steps, which a 17-step query did not answer in 600 s, and 4 rounds, found in
16-19 s of CPU (docs/benchmarks.md).

A violating run is read back in the spec's vocabulary, replayed on the finite evaluator
(an independent second opinion that it is a run) and shortened there: steps it does
not need are dropped (etcdspec.spec.run_shrink), so it has at most K steps (K rounds'
worth), not necessarily the fewest. Its last state is judged again by the evaluator. No
violation up to K is TRUE for that bound only; a Z3 timeout is UNKNOWN.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import z3

from etcdspec.spec import ast
from etcdspec.spec.counterexample import Counterexample, ElementNames
from etcdspec.spec.discharge import assigned_symbols
from etcdspec.spec.errors import SpecLookupError
from etcdspec.spec.evaluator import Instance, holds
from etcdspec.spec.ground import GroundEncoder
from etcdspec.spec.loader import LoadedSpec
from etcdspec.spec.prove import select_actions, select_properties
from etcdspec.spec.run_shrink import Step, describe_step, shorten
from etcdspec.spec.solving import Budget, configure
from etcdspec.spec.typecheck import SpecInfo
from etcdspec.spec.z3backend import State, Vocabulary
from etcdspec.verdict import Verdict

DEFAULT_SIZE = 3


@dataclass(frozen=True)
class BmcResult:
    spec: str
    mutation: str | None
    depth: int  # the bound asked for
    reached: int  # the deepest depth fully checked
    sizes: Mapping[str, int]
    verdict: Verdict
    seconds: float
    violated: tuple[str, ...] = ()
    counterexample: Counterexample | None = None
    note: str = ""
    rounds: bool = False  # the bound counts rounds (see `unroll`), not steps

    @property
    def unit(self) -> str:
        return (
            "rounds (each action at most once a round, in declaration order)"
            if self.rounds
            else "steps"
        )

    def describe(self) -> str:
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes.items())
        head = f"bmc {self.spec}" + (f" (mutation {self.mutation})" if self.mutation else "")
        if self.verdict is Verdict.FALSE and self.counterexample is not None:
            where = f"in {self.depth} rounds, " if self.rounds else ""
            return (
                f"{head}: VIOLATED {where}at depth {self.reached} ({sizes}): {', '.join(self.violated)}"
                f" — {self.seconds:.2f} s\n{self.counterexample.describe()}"
            )
        if self.verdict is Verdict.TRUE:
            return f"{head}: no violation in runs of up to {self.depth} {self.unit} ({sizes}) — {self.seconds:.2f} s"
        if self.reached < 0:
            return f"{head}: unknown: {self.note} — {self.seconds:.2f} s"
        return f"{head}: unknown after depth {self.reached} of {self.depth} ({sizes}): {self.note} — {self.seconds:.2f} s"

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "spec": self.spec,
            "mutation": self.mutation,
            "depth": self.depth,
            "reached": self.reached,
            "sizes": dict(self.sizes),
            "valid": self.verdict.to_json(),
            "seconds": round(self.seconds, 3),
            "violated": list(self.violated),
        }
        if self.note:
            document["note"] = self.note
        if self.rounds:
            document["rounds"] = True
        if self.counterexample is not None:
            document["counterexample"] = self.counterexample.to_json()
        return document


def parse_sizes(text: str) -> dict[str, int]:
    """`node=3,term=4` -> {'node': 3, 'term': 4}; ValueError with what to write instead."""
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"bad size '{part}': write SORT=N with N >= 1, e.g. node=3,term=3")
        sizes[name.strip()] = int(value)
    return sizes


def instance_sizes(loaded: LoadedSpec, sizes: Mapping[str, int]) -> dict[str, int]:
    unknown = [s for s in sizes if s not in loaded.info.sorts]
    if unknown:
        raise SpecLookupError(
            f"unknown sort {', '.join(unknown)} in --size (sorts of {loaded.name}: {', '.join(loaded.info.sorts)})"
        )
    return {s: sizes.get(s, DEFAULT_SIZE) for s in loaded.info.sorts}


def bmc(
    loaded: LoadedSpec,
    depth: int,
    sizes: Mapping[str, int] | None = None,
    timeout_ms: int = 60_000,
    on_depth: Callable[[int, float], None] | None = None,
    only: Sequence[str] = (),
    rounds: bool = False,
    actions: Sequence[str] = (),
) -> BmcResult:
    """Check every property (or only the named ones) on all runs of up to `depth`
    steps (with `rounds`, `depth` rounds: see `unroll`) of a finite instance; with
    `actions`, on the runs of only those actions (a smaller, cheaper query, e.g. for a
    bug whose run is known to need only some of them)."""
    started = time.perf_counter()
    chosen = select_actions(loaded.spec, actions)
    full_sizes = instance_sizes(loaded, sizes or {})
    vocab = Vocabulary(loaded.info, full_sizes)
    encoder = GroundEncoder(vocab)
    spec = loaded.spec
    props = select_properties(spec, only)
    if not props:
        return BmcResult(
            loaded.name,
            loaded.mutation,
            depth,
            -1,
            full_sizes,
            Verdict.UNKNOWN,
            time.perf_counter() - started,
            rounds=rounds,
            note="no invariant to check: the spec states none",
        )
    # One query asks for a violation in the last state of the unrolled run, in which a
    # step may also do nothing (the state stays): a violating run with fewer steps is
    # the same run padded, so one query covers every depth up to the bound.
    assertions = [
        encoder.formula(d.formula, None, {}) for d in spec.formulas(ast.FormulaKind.AXIOM)
    ]
    states = [encoder.new_state("s0")]
    assertions += [
        encoder.formula(d.formula, states[0], {}) for d in spec.formulas(ast.FormulaKind.INIT)
    ]
    # The step and the violation are encoded once, between template states, and moved
    # to each depth by substitution (z3.substitute runs in Z3, not in Python).
    template_pre, template_post = encoder.new_state("pre"), encoder.new_state("post")
    violated_template = z3.Or(
        z3.BoolVal(False), *[z3.Not(encoder.formula(p.formula, template_pre, {})) for p in props]
    )
    steps = unroll(
        encoder, spec, template_pre, template_post, depth, rounds, states, assertions, chosen
    )
    assertions.append(z3.substitute(violated_template, *encoder.renaming("pre", states[-1].name)))
    assertions += symmetry_breaking(encoder, steps)
    solver = configure(_bit_blasting_solver(), Budget(timeout_ms))
    solver.add(*assertions)
    answer = solver.check()
    if answer == z3.unsat:
        if on_depth is not None:
            on_depth(depth, time.perf_counter() - started)
        return BmcResult(
            loaded.name,
            loaded.mutation,
            depth,
            depth,
            full_sizes,
            Verdict.TRUE,
            time.perf_counter() - started,
            rounds=rounds,
        )
    if answer != z3.sat:
        return BmcResult(
            loaded.name,
            loaded.mutation,
            depth,
            -1,
            full_sizes,
            Verdict.UNKNOWN,
            time.perf_counter() - started,
            rounds=rounds,
            note=f"z3: {solver.reason_unknown()}",
        )
    model = solver.model()
    names = ElementNames(model, vocab)
    symbols = loaded.info.state_symbols()
    rigid = names.read_state(encoder.rigid, loaded.info.rigid_symbols())
    found: list[Step] = []
    model_states = [states[0]]
    for options, after in zip(steps, states[1:], strict=True):
        taken = next(
            (
                (a, params)
                for a, params, f in options
                if z3.is_true(model.eval(f, model_completion=True))
            ),
            None,
        )
        if taken is None:
            continue  # this step (a round's turn of one action) does nothing
        found.append((taken[0].name, {n: names.value(v) for n, v in taken[1].items()}))
        model_states.append(after)
    instance = Instance(names.universes, rigid)
    # The run replayed (and shortened) on the finite evaluator: an independent second
    # opinion that it is a run and on which properties fail in its last state.
    first = names.read_state(states[0], symbols)
    shortened = shorten(loaded, instance, first, found, props)
    if shortened is not None:
        run_steps, run_states = shortened
        title = "violating run of {k} step(s) (replayed by the finite evaluator{cut})"
        cut = f"; {len(found) - len(run_steps)} step(s) of the {len(found)} found not needed"
    else:  # not replayed: shown as the solver gave it, and said so
        run_steps = found
        run_states = [names.read_state(s, symbols) for s in model_states]
        title, cut = "violating run of {k} step(s) (NOT replayed by the finite evaluator{cut})", ""
    k = len(run_steps)
    last = run_states[-1]
    violated = tuple(p.name for p in props if not holds(loaded, p.formula, last, instance))
    run = Counterexample(
        title.format(k=k, cut=cut if len(run_steps) < len(found) else "")
        + f": {', '.join(violated)} fail(s) in the last state",
        {s: tuple(v) for s, v in names.universes.items()},
        rigid,
        tuple(run_states),
        tuple(describe_step(action, params) for action, params in run_steps),
    )
    return BmcResult(
        loaded.name,
        loaded.mutation,
        depth,
        k,
        full_sizes,
        Verdict.FALSE,
        time.perf_counter() - started,
        violated,
        run,
        rounds=rounds,
    )


Options = list[tuple[ast.ActionDecl, dict[str, z3.ExprRef], z3.BoolRef]]


def unroll(
    encoder: GroundEncoder,
    spec: ast.Spec,
    pre: State,
    post: State,
    depth: int,
    rounds: bool,
    states: list[State],
    assertions: list[z3.BoolRef],
    actions: Sequence[ast.ActionDecl] | None = None,
) -> list[Options]:
    """Unroll `depth` steps (or rounds) from `states[0]`, appending each new state to
    `states` and the transitions to `assertions`; return each transition's options (the
    actions it may take, their parameters, the Boolean that says it was taken).

    Steps: each transition takes one action or stutters, and stutters come last.
    Rounds: each round is one transition per action, in the spec's declaration order,
    each taking its action or doing nothing; a round that does something follows one
    that did (an idle round changes nothing, so it may as well come last). A run of K
    steps is a run of K rounds (one action each), so K rounds cover every run of up to
    K steps, and more: a round may hold one action of each kind. A deep run whose
    actions come in the declaration order (Raft's elect, propose, replicate, commit)
    packs into a few rounds, each far cheaper than a step that chooses among every
    action. `actions` (default: all of the spec's) are the actions a step may take."""
    steps: list[Options] = []
    chosen = list(spec.actions() if actions is None else actions)
    if not rounds:
        template = StepTemplate(encoder, spec, pre, post, stutter=True, actions=chosen)
        for k in range(depth):
            nxt = encoder.new_state(f"s{k + 1}")
            options = template.instantiate(k, states[k].name, nxt.name, assertions)
            if steps:  # stutters come last: a real step never follows a stutter
                assertions.append(z3.Implies(_any_taken(options), _any_taken(steps[-1])))
            steps.append(options)
            states.append(nxt)
        return steps
    templates = [
        StepTemplate(encoder, spec, pre, post, stutter=True, actions=[action]) for action in chosen
    ]
    previous: list[Options] = []
    for _ in range(depth):
        this_round: list[Options] = []
        for template in templates:
            n = len(steps)
            nxt = encoder.new_state(f"s{n + 1}")
            options = template.instantiate(n, states[n].name, nxt.name, assertions)
            steps.append(options)
            this_round.append(options)
            states.append(nxt)
        if previous:  # idle rounds come last
            assertions.append(
                z3.Implies(
                    z3.Or(*[_any_taken(o) for o in this_round]),
                    z3.Or(*[_any_taken(o) for o in previous]),
                )
            )
        previous = this_round
    return steps


def symmetric_sorts(info: SpecInfo) -> list[str]:
    """The sorts whose elements nothing tells apart: not ordered, and no rigid symbol
    names an element of them (a rigid constant or function of that sort would). The
    spec language has no element literals, so init, axioms and properties cannot
    either; a rigid relation over such a sort is chosen by the solver like the rest."""
    named = {sym.result for sym in info.rigid_symbols() if sym.result is not None}
    return [s for s in info.sorts if not info.is_ordered(s) and s not in named]


def symmetry_breaking(
    encoder: GroundEncoder,
    steps: Sequence[Sequence[tuple[ast.ActionDecl, Mapping[str, z3.ExprRef], z3.BoolRef]]],
) -> list[z3.BoolRef]:
    """Constraints that keep one run of each class of runs equal up to renaming the
    elements of a symmetric sort: elements are first used (as a parameter of a step's
    action) in the order of their names — element j appears at step k only if element
    j-1 appeared at step k or before. Sound: renaming a run's elements in the order of
    their first use gives a run (the sort is symmetric) that violates the same
    properties and satisfies these constraints."""
    constraints: list[z3.BoolRef] = []
    for sort in symmetric_sorts(encoder.info):
        elements = encoder.vocab.elements[sort]
        appears: list[list[z3.BoolRef]] = []
        for options in steps:
            uses = [
                (taken, params[p.name])
                for action, params, taken in options
                for p in action.params
                if p.sort == sort
            ]
            appears.append(
                [
                    z3.Or(z3.BoolVal(False), *[z3.And(taken, arg == e) for taken, arg in uses])
                    for e in elements
                ]
            )
        for k in range(len(appears)):
            for j in range(1, len(elements)):
                earlier = z3.Or(*[appears[s][j - 1] for s in range(k + 1)])
                constraints.append(z3.Implies(appears[k][j], earlier))
    return constraints


def _any_taken(
    options: Sequence[tuple[ast.ActionDecl, Mapping[str, z3.ExprRef], z3.BoolRef]],
) -> z3.BoolRef:
    return z3.Or(z3.BoolVal(False), *[taken for _, _, taken in options])


def _bit_blasting_solver() -> z3.Solver:
    """Z3 as a SAT solver: the ground encoding has only Booleans and enumeration
    constants, so after simplification the enumerations become bit-vectors (dt2bv), the
    bit-vectors Booleans, and the run is a propositional problem for Z3's CDCL SAT
    solver. Measured against Z3's default (SMT) solver on the same query (raft,
    no_truncation, log_matching, 11 steps, 3 nodes): 15 s against 133 s. What is not
    propositional after bit-blasting (a spec whose sorts dt2bv leaves alone) goes to
    Z3's SMT core instead."""
    propositional = z3.Cond(z3.Probe("is-propositional"), z3.Tactic("sat"), z3.Tactic("smt"))
    tactic = z3.Then(
        "simplify", "propagate-values", "solve-eqs", "simplify", "dt2bv", "bit-blast", propositional
    )
    return tactic.solver()


class StepTemplate:
    """One step between two template states: exactly one action (with some parameters)
    leads from `pre` to `post` (with `stutter`, at most one: none leaves the state).
    The actions are the spec's, or the given subset (a round's turn of one action).
    Each post-state entry is the value the taken action gives it: an `If` over the
    actions that assign its symbol, else the pre-state's entry (the frame).
    `instantiate` moves it between two states of the run."""

    def __init__(
        self,
        encoder: GroundEncoder,
        spec: ast.Spec,
        pre: State,
        post: State,
        stutter: bool = False,
        actions: Sequence[ast.ActionDecl] | None = None,
    ) -> None:
        self.encoder = encoder
        self.actions = list(spec.actions() if actions is None else actions)
        self.pre, self.post = pre, post
        self.params: list[dict[str, z3.ExprRef]] = []
        self.chosen: list[z3.BoolRef] = []
        assertions: list[z3.BoolRef] = []
        derived: dict[str, list[tuple[z3.BoolRef, State]]] = {}
        for action in self.actions:
            params = encoder.action_params(action, "@T")
            chosen = z3.Bool(f"stepT={action.name}")
            assertions.append(z3.Implies(chosen, encoder.guard(action, pre, params)))
            after = encoder.post_state(action, pre, params)
            for target in assigned_symbols(action):
                derived.setdefault(target, []).append((chosen, after))
            self.params.append(params)
            self.chosen.append(chosen)
        if not stutter:
            assertions.append(z3.Or(*self.chosen))
        assertions += [z3.Not(z3.And(a, b)) for a, b in itertools.combinations(self.chosen, 2)]
        for sym in encoder.info.state_symbols():
            for args in encoder.tuples(sym):
                value = pre.interps[sym.name](args)
                for chosen, after in reversed(derived.get(sym.name, [])):
                    value = z3.If(chosen, after.interps[sym.name](args), value)
                assertions.append(post.interps[sym.name](args) == value)
        self.formula = z3.And(*assertions)

    def instantiate(
        self, k: int, pre: str, post: str, assertions: list[z3.BoolRef]
    ) -> list[tuple[ast.ActionDecl, dict[str, z3.ExprRef], z3.BoolRef]]:
        """Assert step k, from state `pre` to state `post`; return each action with its
        parameters and the Boolean that says it was taken."""
        pairs = self.encoder.renaming(self.pre.name, pre) + self.encoder.renaming(
            self.post.name, post
        )
        options = []
        for action, params, chosen in zip(self.actions, self.params, self.chosen, strict=True):
            fresh = self.encoder.action_params(action, f"@{k}")
            pairs += [(params[name], fresh[name]) for name in params]
            taken = z3.Bool(f"step{k}={action.name}")
            pairs.append((chosen, taken))
            options.append((action, fresh, taken))
        assertions.append(z3.substitute(self.formula, *pairs))
        return options

"""A spec's Z3 queries, encoded once and asked many times.

Contract
- `QueryInstance(spec, vocab, isolated)` is one Z3 vocabulary of the spec (unbounded,
  or finite of one size) with its axioms, a pre-state and every property in that
  pre-state, encoded once and shared by the queries of every action; `step(action)`
  gives that action's `StepQuery`, built once.
- `StepQuery`: the base (axioms, every property and the guard in the pre-state) and
  the post-state, encoded once. `check(prop, budget)` asks whether `prop` can fail
  after the action (None: whether the action can fire at all); `check_hinted` asks the
  same with only the hinted properties as hypotheses (unsat there is unsat with all of
  them; anything else says nothing); `counterexample` reads a satisfiable answer back
  in the spec's vocabulary.
- Each check is its own Z3 query on a fresh solver with a fixed seed
  (etcdspec.spec.solving.ask). Model searches (can the action fire; any query on a
  finite instance) and hinted queries always run in a fresh Z3 context, as do all
  queries with `isolated`. Hinted queries because their cores were chosen there
  (etcdspec.spec.hints), and in the shared context a core's cost depends on what was
  asked before: of raft_member's 184 hints asked in 8 shuffled orders, 1-3 per order
  ran past their budget in the shared context, none in 6 orders asked fresh (about 3
  ms more a query). Which queries to ask, with which budgets, is spec/prove.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

import z3

from etcdspec.spec import ast
from etcdspec.spec.counterexample import Counterexample, ElementNames, describe_params
from etcdspec.spec.solving import Answer, Budget, ask
from etcdspec.spec.z3backend import Encoder, Vocabulary


class QueryInstance:
    """One Z3 vocabulary of the spec (unbounded, or finite of one size) with its axioms,
    a pre-state and every property in that pre-state, encoded once and shared by the
    induction queries of every action."""

    def __init__(self, spec: ast.Spec, vocab: Vocabulary, isolated: bool) -> None:
        self.spec = spec
        self.isolated = isolated
        self.vocab = vocab
        self.encoder = Encoder(vocab)
        self.axioms = vocab.axioms(self.encoder)
        self.pre = vocab.new_state("pre")
        self.pre_properties = [
            self.encoder.formula(d.formula, self.pre, {}) for d in spec.properties()
        ]
        self.hypotheses = dict(
            zip((d.name for d in spec.properties()), self.pre_properties, strict=True)
        )
        self._steps: dict[str, StepQuery] = {}

    def step(self, action: ast.ActionDecl) -> StepQuery:
        if action.name not in self._steps:
            self._steps[action.name] = StepQuery(self, action)
        return self._steps[action.name]


class StepQuery:
    """One action's induction query on one vocabulary: the base (axioms, every property
    and the guard in the pre-state) and the post-state are encoded once; each check is
    its own Z3 query on a fresh solver with a fixed seed (etcdspec.spec.solving.ask).
    Model searches (can the action fire; a counterexample on a finite instance) always
    run in a fresh Z3 context: they are the queries whose cost earlier queries in a
    shared context changed most (raft_steps' advance_commit "can fire": 0.2 s alone,
    8-30 s after the rest of the proof)."""

    def __init__(self, instance: QueryInstance, action: ast.ActionDecl) -> None:
        self.vocab = instance.vocab
        self.isolated = instance.isolated
        self.encoder = instance.encoder
        self.action = action
        self.pre = instance.pre
        self.params = self.encoder.action_params(action, "")
        self.axioms = instance.axioms
        self.hypotheses = instance.hypotheses
        self.guard = self.encoder.guard(action, self.pre, self.params)
        self.base = [*instance.axioms, *instance.pre_properties, self.guard]
        self.post = self.encoder.post_state(action, self.pre, self.params)
        self._negations: dict[str, z3.BoolRef] = {}

    def negation(self, prop: ast.FormulaDecl) -> z3.BoolRef:
        """`prop` fails in the post-state (encoded once per property)."""
        if prop.name not in self._negations:
            self._negations[prop.name] = z3.Not(self.encoder.formula(prop.formula, self.post, {}))
        return self._negations[prop.name]

    def check(self, prop: ast.FormulaDecl | None, budget: Budget) -> Answer:
        """Can `prop` fail after the action (None: can the action fire at all)?"""
        extra = [] if prop is None else [self.negation(prop)]
        isolated = self.isolated or prop is None or self.vocab.finite
        return ask([*self.base, *extra], budget, isolated=isolated)

    def check_hinted(self, prop: ast.FormulaDecl, core: Sequence[str], budget: Budget) -> Answer:
        """Can `prop` fail after the action from a state satisfying only the properties
        named in `core`? Unsat here means unsat with every property (fewer hypotheses);
        anything else says nothing about the full query."""
        hypotheses = [self.hypotheses[name] for name in core]
        return ask(
            [*self.axioms, *hypotheses, self.guard, self.negation(prop)],
            budget,
            want_model=False,
            isolated=True,
        )

    def counterexample(self, prop: ast.FormulaDecl, answer: Answer) -> Counterexample:
        assert answer.model is not None, "counterexample() needs a satisfiable answer"
        names = ElementNames(answer.model, self.vocab)
        step = f"{self.action.name}({describe_params(names, self.params)})"
        symbols = self.vocab.info.state_symbols()
        return Counterexample(
            f"counterexample to induction: {prop.kind.value} {prop.name} is not preserved by {step}",
            {s: tuple(v) for s, v in names.universes.items()},
            names.read_rigid(),
            (names.read_state(self.pre, symbols), names.read_state(self.post, symbols)),
            (step,),
            ("before (all properties hold)", f"after ({prop.name} fails)"),
        )

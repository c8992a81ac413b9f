"""Prove a spec's properties inductive with Z3, and check its witnesses.

The obligations, each with its own verdict and time:
- init: axioms ∧ init ⇒ P, for every invariant and safety property P;
- preserve: axioms ∧ (all properties, pre) ∧ action ⇒ P (post), for every (P, action);
- enabled: every action can fire in some state satisfying the properties (no vacuity);
- witness: each `witness` run is possible: from some initial state, the listed actions
  in order, ending in a state satisfying its `reach` formula.
A satisfiable negation is a counterexample (to induction, for `preserve`), read back in
the spec's vocabulary. Z3 answering unknown, or a timeout, is UNKNOWN: never proved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import z3

from etcdspec.spec import ast
from etcdspec.spec.counterexample import Counterexample, ElementNames, describe_params
from etcdspec.spec.discharge import assigned_symbols, settle
from etcdspec.spec.errors import SpecLookupError
from etcdspec.spec.hints import EMPTY_BOOK, HINT_TRY_MS, HintBook, Hints, Route, book, load_hints
from etcdspec.spec.loader import LoadedSpec
from etcdspec.spec.solving import Answer, Budget, ask
from etcdspec.spec.z3backend import Encoder, State, Vocabulary
from etcdspec.verdict import Verdict

DEFAULT_TIMEOUT_MS = 30_000


class CheckKind(Enum):
    INIT = "init"
    PRESERVE = "preserve"
    ENABLED = "enabled"
    WITNESS = "witness"


@dataclass(frozen=True)
class CheckResult:
    kind: CheckKind
    subject: str  # the property, action (enabled) or witness
    action: str | None
    verdict: Verdict
    seconds: float
    counterexample: Counterexample | None = None
    note: str = ""
    route: Route | None = None  # preserve only: by rule, by hint, or by the full query
    rlimit: int | None = None  # Z3 work of its queries (isolated proofs only)

    def label(self) -> str:
        if self.kind is CheckKind.INIT:
            return f"init => {self.subject}"
        if self.kind is CheckKind.PRESERVE:
            return f"{self.subject} preserved by {self.action}"
        if self.kind is CheckKind.ENABLED:
            return f"action {self.subject} can fire"
        return f"witness {self.subject}"

    def describe(self) -> str:
        notes = [x for x in (self._route_text(), self.note) if x]
        note = f"  [{'; '.join(notes)}]" if notes else ""
        return f"{self.verdict.describe():8} {self.label()}  ({self.seconds * 1000:.0f} ms){note}"

    def _route_text(self) -> str:
        if self.route is None or self.route is Route.RULE:
            return ""  # a rule's note names the rule
        return self.route.describe()

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "kind": self.kind.value,
            "subject": self.subject,
            "action": self.action,
            "valid": self.verdict.to_json(),
            "seconds": round(self.seconds, 4),
        }
        if self.note:
            document["note"] = self.note
        if self.route is not None:
            document["route"] = self.route.value
        if self.rlimit is not None:
            document["rlimit"] = self.rlimit
        if self.counterexample is not None:
            document["counterexample"] = self.counterexample.to_json()
        return document


@dataclass(frozen=True)
class ProofReport:
    spec: str
    mutation: str | None
    results: tuple[CheckResult, ...]
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        return Verdict.merge_all([r.verdict for r in self.results])

    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.verdict is not Verdict.TRUE]

    def first_counterexample(self) -> Counterexample | None:
        return next(
            (
                r.counterexample
                for r in self.results
                if r.counterexample is not None and r.verdict is Verdict.FALSE
            ),
            None,
        )

    def describe(self) -> str:
        head = f"spec {self.spec}" + (f" (mutation {self.mutation})" if self.mutation else "")
        lines = [head]
        lines += ["  " + r.describe() for r in self.results]
        for result in self.results:
            if result.verdict is Verdict.FALSE and result.counterexample is not None:
                lines.append("")
                lines.append(result.counterexample.describe())
        counts = {v: sum(1 for r in self.results if r.verdict is v) for v in Verdict}
        routes = self.routes()
        hinted = ""
        if routes[Route.HINT] or routes[Route.FALLBACK] or routes[Route.STALE]:
            hinted = (
                f"; hints: {routes[Route.HINT]} proved by hint, {routes[Route.FALLBACK]} "
                f"fell back, {routes[Route.STALE]} stale"
            )
        lines.append(
            f"{head}: {self.verdict.describe()} — {counts[Verdict.TRUE]} proved, "
            f"{counts[Verdict.FALSE]} failed, {counts[Verdict.UNKNOWN]} unknown, "
            f"{self.seconds:.2f} s{hinted}"
        )
        return "\n".join(lines)

    def routes(self) -> dict[Route, int]:
        """How many preservation obligations took each route (rule, hint, fallback...)."""
        return {route: sum(1 for r in self.results if r.route is route) for route in Route}

    def rlimit(self, kinds: Sequence[CheckKind] = tuple(CheckKind)) -> int | None:
        """The Z3 work of the obligations of `kinds` (None unless each of them was
        counted: an isolated proof counts init, preserve and enabled)."""
        counts = [r.rlimit for r in self.results if r.kind in kinds]
        return None if any(c is None for c in counts) else sum(c or 0 for c in counts)

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "mutation": self.mutation,
            "valid": self.verdict.to_json(),
            "seconds": round(self.seconds, 3),
            "routes": {route.value: count for route, count in self.routes().items()},
            "results": [r.to_json() for r in self.results],
        }


FINITE_SEARCH_SIZES = (2, 3)
# Instance sizes for queries expected to be satisfiable (an action can fire, a witness
# run exists): a finite model is quick to find when there is one, and a spec whose
# invariants need a few more elements than 3 (raft_steps' advance_commit) gets them.
MODEL_SEARCH_SIZES = (3, 4)
# "Can the action fire" looks on 2 elements first: most actions fire there, and a model
# on 2 elements is cheaper to find than on 3 (raft's 8 actions: 0.6M rlimit in all on
# 2, 0.8-2.2M on 3); an action that needs more (raft_steps') costs a quick unsat.
ENABLED_SEARCH_SIZES = (2, *MODEL_SEARCH_SIZES)
# Budgets of Z3 work in milliseconds of an idle core, turned into Z3 resource units
# (rlimit) so that whether a query "ran out" does not depend on the machine's load:
# the first try of an induction query, and each finite counterexample search.
FIRST_TRY_MS = 2_000  # every raft induction query needs under 1.5 s of it (2.8M rlimit)
FINITE_SEARCH_MS = 4_000
RLIMIT_PER_MS = 2_000  # Z3 5.4 on this machine: about 2 million rlimit units per second
# A query's timeout is first of all a budget of Z3 work (rlimit), the same on an idle
# and a loaded machine; its wall-clock cap is this many times longer, so that only a
# heavily loaded machine, never an ordinary one, turns a verdict into unknown.
WALL_SLACK = 3


def work_budget(work_ms: int, timeout_ms: int) -> Budget:
    """A deterministic budget of `work_ms` (at most `timeout_ms`) of Z3 work, capped by
    `WALL_SLACK` times `timeout_ms` of wall clock."""
    return Budget(timeout_ms * WALL_SLACK, max(min(work_ms, timeout_ms), 1) * RLIMIT_PER_MS)


class _Instance:
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
        self._steps: dict[str, _StepQuery] = {}

    def step(self, action: ast.ActionDecl) -> _StepQuery:
        if action.name not in self._steps:
            self._steps[action.name] = _StepQuery(self, action)
        return self._steps[action.name]


class _StepQuery:
    """One action's induction query on one vocabulary: the base (axioms, every property
    and the guard in the pre-state) and the post-state are encoded once; each check is
    its own Z3 query on a fresh solver with a fixed seed (etcdspec.spec.solving.ask).
    Model searches (can the action fire; a counterexample on a finite instance) always
    run in a fresh Z3 context: they are the queries whose cost earlier queries in a
    shared context changed most (raft_steps' advance_commit "can fire": 0.2 s alone,
    8-30 s after the rest of the proof)."""

    def __init__(self, instance: _Instance, action: ast.ActionDecl) -> None:
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
            isolated=self.isolated or self.vocab.finite,
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


def _work(answers: Sequence[Answer]) -> int | None:
    """The Z3 work of `answers` (None if one was asked in the shared context, uncounted)."""
    counts = [a.rlimit_used for a in answers]
    return None if any(c is None for c in counts) else sum(c or 0 for c in counts)


def _outcome(answer: Answer) -> tuple[Verdict, str]:
    if answer.unsat:
        return Verdict.TRUE, ""
    if answer.sat:
        return Verdict.FALSE, ""
    return Verdict.UNKNOWN, f"z3: {answer.reason or 'unknown'}"


class Prover:
    """Holds the Z3 vocabularies of one loaded spec and discharges its obligations.

    Every obligation is its own Z3 query on a fresh solver with a fixed seed (see
    etcdspec.spec.solving), and the budgets that steer the search (the first try, the
    finite counterexample search, `timeout_ms`) count Z3's work (rlimit), so whether a
    query runs out does not depend on the machine's load; `timeout_ms` also caps
    wall-clock time (times WALL_SLACK). Model searches (enabled, witnesses, finite
    counterexamples) run in a fresh Z3 context each; with `isolated` the induction
    and init queries do too, so that no verdict or cost depends on what was asked
    before (about 1-2 s more CPU for raft's 175 such queries: an option)."""

    def __init__(
        self,
        loaded: LoadedSpec,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        isolated: bool = False,
        hints: Hints | None = None,
    ) -> None:
        self.loaded = loaded
        self.hints: HintBook = book(hints, loaded.spec) if hints is not None else EMPTY_BOOK
        self.hint_try_ms = HINT_TRY_MS
        self.isolated = isolated
        self.spec = loaded.spec
        self.info = loaded.info
        self.timeout_ms = timeout_ms
        self.first_try_ms = FIRST_TRY_MS
        self._unbounded: _Instance | None = None
        self._finite: dict[int, _Instance] = {}

    @property
    def unbounded(self) -> _Instance:
        if self._unbounded is None:
            self._unbounded = _Instance(self.spec, Vocabulary(self.info), self.isolated)
        return self._unbounded

    def finite(self, size: int) -> _Instance:
        """The instance where every sort has `size` elements (built once, shared)."""
        if size not in self._finite:
            vocab = Vocabulary(self.info, {s: size for s in self.info.sorts})
            self._finite[size] = _Instance(self.spec, vocab, self.isolated)
        return self._finite[size]

    @property
    def vocab(self) -> Vocabulary:
        return self.unbounded.vocab

    @property
    def encoder(self) -> Encoder:
        return self.unbounded.encoder

    def full_budget(self) -> Budget:
        return work_budget(self.timeout_ms, self.timeout_ms)

    def holds(self, decls: Sequence[ast.FormulaDecl], state: State) -> list[z3.BoolRef]:
        return [self.encoder.formula(d.formula, state, {}) for d in decls]

    def check_init(self, targets: Sequence[ast.FormulaDecl]) -> list[CheckResult]:
        instance = self.unbounded
        state = self.vocab.new_state("init")
        base = [*instance.axioms, *self.holds(self.spec.formulas(ast.FormulaKind.INIT), state)]
        results = []
        for prop in targets:
            started = time.perf_counter()
            answer = ask(
                [*base, z3.Not(self.encoder.formula(prop.formula, state, {}))],
                self.full_budget(),
                isolated=self.isolated,
            )
            verdict, note = _outcome(answer)
            cex = None
            if verdict is Verdict.FALSE and answer.model is not None:
                names = ElementNames(answer.model, self.vocab)
                cex = Counterexample(
                    f"counterexample: {prop.kind.value} {prop.name} does not hold in this initial state",
                    {s: tuple(v) for s, v in names.universes.items()},
                    names.read_rigid(),
                    (names.read_state(state, self.info.state_symbols()),),
                    (),
                    ("initial state",),
                )
            results.append(
                CheckResult(
                    CheckKind.INIT,
                    prop.name,
                    None,
                    verdict,
                    time.perf_counter() - started,
                    cex,
                    note,
                    rlimit=answer.rlimit_used,
                )
            )
        return results

    def check_preserve(self, action: ast.ActionDecl, prop: ast.FormulaDecl) -> CheckResult:
        """Does `action` preserve `prop` from every state satisfying all properties?

        With a hint for (prop, action), the query with only the hinted properties as
        hypotheses is asked first on `hint_try_ms` of Z3 work: unsat proves the full
        query (it has more hypotheses); anything else falls back to the full query,
        which alone gives FALSE (with its counterexample) or UNKNOWN."""
        started = time.perf_counter()

        def result(
            verdict: Verdict,
            route: Route,
            work: int | None,
            cex: Counterexample | None = None,
            note: str = "",
        ) -> CheckResult:
            seconds = time.perf_counter() - started
            return CheckResult(
                CheckKind.PRESERVE, prop.name, action.name, verdict, seconds, cex, note, route, work
            )

        settled = settle(self.info, action, prop)
        if settled is not None:
            # The action leaves the property's symbols alone (frame) or moves them only
            # the way the property allows (monotone): see etcdspec.spec.discharge.
            return result(Verdict.TRUE, Route.RULE, 0, note=settled)
        query = self.unbounded.step(action)
        answers: list[Answer] = []
        route = self.hints.route_without(prop.name, action.name)
        core = self.hints.cores.get((prop.name, action.name))
        if core is not None:
            hinted = query.check_hinted(prop, core, work_budget(self.hint_try_ms, self.timeout_ms))
            answers.append(hinted)
            if hinted.unsat:
                return result(Verdict.TRUE, Route.HINT, _work(answers))
            route = Route.FALLBACK
        answer = query.check(prop, work_budget(self.first_try_ms, self.timeout_ms))
        answers.append(answer)
        if not answer.unsat:
            # Z3 is slow at building models of quantified formulas, and its models
            # are large: look for a small counterexample on finite instances first,
            # then (if there is none) give the unbounded query its full budget.
            for size in FINITE_SEARCH_SIZES:
                finite_query = self.finite(size).step(action)
                finite_answer = finite_query.check(
                    prop, work_budget(FINITE_SEARCH_MS, self.timeout_ms)
                )
                answers.append(finite_answer)
                if finite_answer.sat:
                    answer, query = finite_answer, finite_query
                    break
            else:
                if not answer.sat:
                    answer = query.check(prop, self.full_budget())
                    answers.append(answer)
        verdict, note = _outcome(answer)
        cex = query.counterexample(prop, answer) if verdict is Verdict.FALSE else None
        return result(verdict, route, _work(answers), cex, note)

    def check_enabled(self, action: ast.ActionDecl) -> CheckResult:
        """No vacuity: the action can fire in some state where every property holds."""
        started = time.perf_counter()
        answers = []
        for size in ENABLED_SEARCH_SIZES:
            answer = (
                self.finite(size)
                .step(action)
                .check(None, work_budget(FINITE_SEARCH_MS, self.timeout_ms))
            )
            answers.append(answer)
            if answer.sat:
                break
        else:
            answer = self.unbounded.step(action).check(None, self.full_budget())
            answers.append(answer)
        verdict, note = _outcome(answer)
        enabled = {Verdict.TRUE: Verdict.FALSE, Verdict.FALSE: Verdict.TRUE}.get(
            verdict, Verdict.UNKNOWN
        )
        if enabled is Verdict.FALSE:
            note = "its guard is unsatisfiable in every state satisfying the properties"
        return CheckResult(
            CheckKind.ENABLED,
            action.name,
            action.name,
            enabled,
            time.perf_counter() - started,
            None,
            note,
            rlimit=_work(answers),
        )

    def check_action(
        self, action: ast.ActionDecl, targets: Sequence[ast.FormulaDecl], fail_fast: bool = False
    ) -> list[CheckResult]:
        results = []
        for prop in targets:
            result = self.check_preserve(action, prop)
            results.append(result)
            if fail_fast and result.verdict is not Verdict.TRUE:
                return results
        results.append(self.check_enabled(action))
        return results

    def _witness_query(
        self, vocab: Vocabulary, witness: ast.WitnessDecl, budget: Budget
    ) -> tuple[Answer, list[State], list[tuple[ast.ActionDecl, Any]]]:
        encoder = Encoder(vocab)
        state = vocab.new_state("w0")
        assertions = [
            *vocab.axioms(encoder),
            *[
                encoder.formula(d.formula, state, {})
                for d in self.spec.formulas(ast.FormulaKind.INIT)
            ],
        ]
        states = [state]
        all_params = []
        for index, step in enumerate(witness.steps):
            action = self.spec.action(step)
            if action is None:
                raise SpecLookupError(f"witness {witness.name}: unknown action '{step}'")
            params = encoder.action_params(action, f"@{index}")
            if vocab.finite:
                # states with symbols of their own: reading the run back is then cheap
                nxt = vocab.new_state(f"w{index + 1}")
                assertions.append(encoder.transition(action, states[-1], nxt, params))
                states.append(nxt)
            else:
                assertions.append(encoder.guard(action, states[-1], params))
                states.append(encoder.post_state(action, states[-1], params))
            all_params.append((action, params))
        if witness.reach is not None:
            assertions.append(encoder.formula(witness.reach, states[-1], {}))
        return ask(assertions, budget, isolated=True), states, all_params

    def check_witness(self, witness: ast.WitnessDecl) -> CheckResult:
        """A witness run exists: looked for on a small instance first, then unbounded."""
        started = time.perf_counter()
        for size in MODEL_SEARCH_SIZES:
            vocab = self.finite(size).vocab
            answer, states, all_params = self._witness_query(
                vocab, witness, work_budget(FINITE_SEARCH_MS, self.timeout_ms)
            )
            if answer.sat:
                break
        else:
            vocab = self.vocab
            answer, states, all_params = self._witness_query(vocab, witness, self.full_budget())
        if answer.sat and answer.model is not None:
            names = ElementNames(answer.model, vocab)
            symbols = self.info.state_symbols()
            steps = tuple(f"{a.name}({describe_params(names, p)})" for a, p in all_params)
            run = Counterexample(
                f"witness {witness.name}: a run of {len(steps)} steps",
                {s: tuple(v) for s, v in names.universes.items()},
                names.read_rigid(),
                names.read_run(states, symbols, [assigned_symbols(a) for a, _ in all_params]),
                steps,
            )
            return CheckResult(
                CheckKind.WITNESS,
                witness.name,
                None,
                Verdict.TRUE,
                time.perf_counter() - started,
                run,
            )
        if answer.unsat:
            reach = " and reaches its goal" if witness.reach is not None else ""
            note = f"no run from init takes the steps {', '.join(witness.steps)}{reach}: some action can never fire there"
            return CheckResult(
                CheckKind.WITNESS,
                witness.name,
                None,
                Verdict.FALSE,
                time.perf_counter() - started,
                None,
                note,
            )
        return CheckResult(
            CheckKind.WITNESS,
            witness.name,
            None,
            Verdict.UNKNOWN,
            time.perf_counter() - started,
            None,
            f"z3: {answer.reason or 'unknown'}",
        )


def resolve_hints(loaded: LoadedSpec, hints: Hints | bool) -> Hints | None:
    """The hints a proof uses: given ones, the spec's sidecar (True), or none (False)."""
    if hints is True:
        return load_hints(loaded)
    if hints is False:
        return None
    return hints


def hint_summary(hints: Hints | None, usable: HintBook) -> dict[str, int]:
    """The hints a proof had: entries in the sidecar, matching the spec, stale."""
    entries = len(hints.entries) if hints is not None else 0
    return {"entries": entries, "usable": len(usable.cores), "stale": len(usable.stale)}


def select_actions(spec: ast.Spec, names: Sequence[str]) -> list[ast.ActionDecl]:
    if not names:
        return spec.actions()
    known = {a.name for a in spec.actions()}
    missing = [n for n in names if n not in known]
    if missing:
        raise SpecLookupError(
            f"unknown action {', '.join(missing)} in {spec.filename} (known: {', '.join(sorted(known))})"
        )
    return [a for a in spec.actions() if a.name in names]


def select_properties(spec: ast.Spec, only: Sequence[str]) -> list[ast.FormulaDecl]:
    props = spec.properties()
    if not only:
        return props
    known = {p.name for p in props}
    missing = [n for n in only if n not in known]
    if missing:
        raise SpecLookupError(
            f"unknown property {', '.join(missing)} in {spec.filename} (known: {', '.join(sorted(known))})"
        )
    return [p for p in props if p.name in only]


def prove(
    loaded: LoadedSpec,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    only: Sequence[str] = (),
    on_result: Callable[[CheckResult], None] | None = None,
    actions: Sequence[str] = (),
    fail_fast: bool = False,
    witnesses: bool = True,
    isolated: bool = False,
    jobs: int | None = None,
    hints: Hints | bool = True,
) -> ProofReport:
    """Discharge every obligation of `loaded` (or only those of the named properties
    and actions). `on_result` is called after each obligation (progress output);
    `fail_fast` stops after the first obligation that is not proved; `isolated`
    asks every Z3 query in a context of its own (etcdspec.spec.solving), so that its
    verdict and cost are the same whatever else is checked (model searches always are).
    `jobs` > 1 answers the obligations in that many processes (etcdspec.spec.parallel:
    the same obligations, checks and order); None (the default) uses min(2, cores)
    processes for a proof with many induction queries (raft) and this one otherwise;
    jobs=1 and `fail_fast` take the serial path here, in this process. A program that
    calls it with jobs != 1 needs the usual `if __name__ == "__main__":` guard (the
    workers are started with "spawn"). `hints` (default True: the sidecar next to the
    spec, etcdspec.spec.hints, if there is one; False: none) lets each induction query
    try its hinted subset of the properties first; verdicts do not depend on it."""
    chosen_hints = resolve_hints(loaded, hints)
    if jobs != 1 and not fail_fast:
        from etcdspec.spec.parallel import auto_jobs, prove_parallel

        processes = auto_jobs(loaded, only, actions, witnesses) if jobs is None else jobs
        if processes > 1:
            return prove_parallel(
                loaded,
                processes,
                timeout_ms,
                only,
                on_result,
                actions,
                witnesses,
                isolated,
                hints=chosen_hints,
            )
    started = time.perf_counter()
    targets = select_properties(loaded.spec, only)
    prover = Prover(loaded, timeout_ms, isolated, chosen_hints)
    results: list[CheckResult] = []

    def record(batch: list[CheckResult]) -> None:
        results.extend(batch)
        if on_result is not None:
            for result in batch:
                on_result(result)

    chosen = select_actions(loaded.spec, actions)

    def stop() -> bool:
        return fail_fast and any(r.verdict is not Verdict.TRUE for r in results)

    if not actions:
        record(prover.check_init(targets))
    for action in chosen:
        if stop():
            break
        record(prover.check_action(action, targets, fail_fast))
    for witness in loaded.spec.witnesses() if witnesses and not actions else []:
        if stop():
            break
        record([prover.check_witness(witness)])
    return ProofReport(
        loaded.name,
        loaded.mutation,
        tuple(results),
        time.perf_counter() - started,
        {"hints": hint_summary(chosen_hints, prover.hints)},
    )

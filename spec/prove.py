"""Prove a spec's properties inductive with Z3, and check its witnesses.

The obligations, each with its own verdict and time:
- init: axioms ∧ init ⇒ P, for every invariant and safety property P;
- preserve: axioms ∧ (all properties, pre) ∧ action ⇒ P (post), for every (P, action);
- enabled: every action can fire in some state satisfying the properties (no vacuity);
- witness: each `witness` run is possible: from some initial state, the listed actions
  in order, ending in a state satisfying its `reach` formula.
A satisfiable negation is a counterexample (to induction, for `preserve`), read back in
the spec's vocabulary. Z3 answering unknown, or a timeout, is UNKNOWN: never proved.

`Prover` decides how each obligation is discharged (a rule, a hinted query, small
instances first, budgets counted in Z3 work); the queries themselves are encoded in
spec/step_queries.py, and the results are spec/proof_report.py's. `prove()` runs a
whole proof, serially here or in processes (spec/parallel.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import z3

from etcdspec.spec import ast
from etcdspec.spec.counterexample import Counterexample, ElementNames, describe_params
from etcdspec.spec.discharge import assigned_symbols, settle
from etcdspec.spec.errors import SpecLookupError
from etcdspec.spec.hints import EMPTY_BOOK, HINT_TRY_MS, HintBook, Hints, Route, book, load_hints
from etcdspec.spec.loader import LoadedSpec
from etcdspec.spec.proof_report import CheckKind, CheckResult, ProofReport
from etcdspec.spec.solving import Answer, Budget, ask
from etcdspec.spec.step_queries import QueryInstance
from etcdspec.spec.z3backend import Encoder, State, Vocabulary
from etcdspec.verdict import Verdict

DEFAULT_TIMEOUT_MS = 30_000
# Sizes of the finite counterexample search before the unbounded query; 4 because
# raft_steps names four roles by rigid constants, so its counterexamples need 4 elements
# (without it, vote_not_persisted with a forged hint took 21-46 s in the unbounded query).
FINITE_SEARCH_SIZES = (2, 3, 4)
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
    counterexamples) run in a fresh Z3 context each; every other query runs in the
    Prover's own context (so nothing proved before it in the process, no other spec's
    declarations, changes its encoding or Z3's search); with `isolated` the induction
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
        # The spec's own Z3 context: its encoding (and the names Z3's search depends
        # on) is the same whatever was proved before in this process.
        self.ctx = z3.Context()
        self._unbounded: QueryInstance | None = None
        self._finite: dict[int, QueryInstance] = {}

    @property
    def unbounded(self) -> QueryInstance:
        if self._unbounded is None:
            self._unbounded = QueryInstance(
                self.spec, Vocabulary(self.info, ctx=self.ctx), self.isolated
            )
        return self._unbounded

    def finite(self, size: int) -> QueryInstance:
        """The instance where every sort has `size` elements (built once, shared)."""
        if size not in self._finite:
            vocab = Vocabulary(self.info, {s: size for s in self.info.sorts}, self.ctx)
            self._finite[size] = QueryInstance(self.spec, vocab, self.isolated)
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

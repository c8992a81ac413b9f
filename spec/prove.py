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
from etcdspec.spec.errors import SpecLookupError
from etcdspec.spec.loader import LoadedSpec
from etcdspec.spec.typecheck import SpecInfo
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

    def label(self) -> str:
        if self.kind is CheckKind.INIT:
            return f"init => {self.subject}"
        if self.kind is CheckKind.PRESERVE:
            return f"{self.subject} preserved by {self.action}"
        if self.kind is CheckKind.ENABLED:
            return f"action {self.subject} can fire"
        return f"witness {self.subject}"

    def describe(self) -> str:
        note = f"  [{self.note}]" if self.note else ""
        return f"{self.verdict.describe():8} {self.label()}  ({self.seconds * 1000:.0f} ms){note}"

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
        lines.append(
            f"{head}: {self.verdict.describe()} — {counts[Verdict.TRUE]} proved, "
            f"{counts[Verdict.FALSE]} failed, {counts[Verdict.UNKNOWN]} unknown, {self.seconds:.2f} s"
        )
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "mutation": self.mutation,
            "valid": self.verdict.to_json(),
            "seconds": round(self.seconds, 3),
            "results": [r.to_json() for r in self.results],
        }


FINITE_SEARCH_SIZES = (2, 3)
FINITE_SEARCH_MS = 4_000
FIRST_TRY_MS = 4_000


class _StepQuery:
    """One action's induction query on one vocabulary. The base (axioms, every property
    and the guard in the pre-state) is encoded once; each check runs on a fresh solver
    (Z3's incremental mode, after many push/pop rounds, slows quantified queries down)."""

    def __init__(
        self, vocab: Vocabulary, encoder: Encoder, spec: ast.Spec, action: ast.ActionDecl
    ) -> None:
        self.vocab = vocab
        self.encoder = encoder
        self.action = action
        self.pre = vocab.new_state("pre")
        self.params = encoder.action_params(action, "")
        self.base = [
            *vocab.axioms(encoder),
            *[encoder.formula(d.formula, self.pre, {}) for d in spec.properties()],
            encoder.guard(action, self.pre, self.params),
        ]
        self.post = encoder.post_state(action, self.pre, self.params)
        self.solver = z3.Solver()
        self._model: z3.ModelRef | None = None

    def check(self, prop: ast.FormulaDecl | None, timeout_ms: int) -> z3.CheckSatResult:
        """Can `prop` fail after the action (None: can the action fire at all)?"""
        self.solver = z3.Solver()
        self.solver.set("timeout", timeout_ms)
        self.solver.add(*self.base)
        if prop is not None:
            self.solver.add(z3.Not(self.encoder.formula(prop.formula, self.post, {})))
        answer = self.solver.check()
        self._model = self.solver.model() if answer == z3.sat else None
        return answer

    def counterexample(self, prop: ast.FormulaDecl) -> Counterexample:
        assert self._model is not None, "counterexample() needs a satisfiable check first"
        names = ElementNames(self._model, self.vocab)
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


class Prover:
    """Holds the Z3 vocabulary of one loaded spec and discharges its obligations."""

    def __init__(self, loaded: LoadedSpec, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.loaded = loaded
        self.spec = loaded.spec
        self.info = loaded.info
        self.timeout_ms = timeout_ms
        self.first_try_ms = FIRST_TRY_MS
        self.vocab = Vocabulary(self.info)
        self.encoder = Encoder(self.vocab)
        self.axioms = self.vocab.axioms(self.encoder)

    def solver(self) -> z3.Solver:
        solver = z3.Solver()
        solver.set("timeout", self.timeout_ms)
        solver.add(*self.axioms)
        return solver

    def holds(self, decls: Sequence[ast.FormulaDecl], state: State) -> list[z3.BoolRef]:
        return [self.encoder.formula(d.formula, state, {}) for d in decls]

    def _outcome(self, answer: z3.CheckSatResult, solver: z3.Solver) -> tuple[Verdict, str]:
        if answer == z3.unsat:
            return Verdict.TRUE, ""
        if answer == z3.sat:
            return Verdict.FALSE, ""
        return Verdict.UNKNOWN, f"z3: {solver.reason_unknown()}"

    def check_init(self, targets: Sequence[ast.FormulaDecl]) -> list[CheckResult]:
        solver = self.solver()
        state = self.vocab.new_state("init")
        solver.add(*self.holds(self.spec.formulas(ast.FormulaKind.INIT), state))
        results = []
        for prop in targets:
            started = time.perf_counter()
            solver.push()
            solver.add(z3.Not(self.encoder.formula(prop.formula, state, {})))
            answer = solver.check()
            verdict, note = self._outcome(answer, solver)
            cex = None
            if verdict is Verdict.FALSE:
                names = ElementNames(solver.model(), self.vocab)
                cex = Counterexample(
                    f"counterexample: {prop.kind.value} {prop.name} does not hold in this initial state",
                    {s: tuple(v) for s, v in names.universes.items()},
                    names.read_rigid(),
                    (names.read_state(state, self.info.state_symbols()),),
                    (),
                    ("initial state",),
                )
            solver.pop()
            results.append(
                CheckResult(
                    CheckKind.INIT,
                    prop.name,
                    None,
                    verdict,
                    time.perf_counter() - started,
                    cex,
                    note,
                )
            )
        return results

    def check_action(
        self, action: ast.ActionDecl, targets: Sequence[ast.FormulaDecl], fail_fast: bool = False
    ) -> list[CheckResult]:
        unbounded = _StepQuery(self.vocab, self.encoder, self.spec, action)
        finite: dict[int, _StepQuery] = {}

        def finite_query(size: int) -> _StepQuery:
            if size not in finite:
                vocab = Vocabulary(self.info, {s: size for s in self.info.sorts})
                finite[size] = _StepQuery(vocab, Encoder(vocab), self.spec, action)
            return finite[size]

        results = []
        assigned = {s.target for s in action.body if isinstance(s, ast.Assign)}
        for prop in targets:
            started = time.perf_counter()
            if not (symbols_of(self.info, prop.formula) & assigned):
                # The action assigns nothing the property mentions: its post-state value
                # is its pre-state value, a hypothesis (the frame is derived, not assumed).
                results.append(
                    CheckResult(
                        CheckKind.PRESERVE,
                        prop.name,
                        action.name,
                        Verdict.TRUE,
                        time.perf_counter() - started,
                        None,
                        "frame: mentions nothing the action assigns",
                    )
                )
                continue
            query = unbounded
            answer = unbounded.check(prop, min(self.first_try_ms, self.timeout_ms))
            if answer != z3.unsat:
                # Z3 is slow at building models of quantified formulas, and its models
                # are large: look for a small counterexample on finite instances first,
                # then (if there is none) give the unbounded query its full budget.
                for size in FINITE_SEARCH_SIZES:
                    finite_answer = finite_query(size).check(
                        prop, min(FINITE_SEARCH_MS, self.timeout_ms)
                    )
                    if finite_answer == z3.sat:
                        answer, query = finite_answer, finite_query(size)
                        break
                else:
                    if answer == z3.unknown:
                        answer = unbounded.check(prop, self.timeout_ms)
            verdict, note = self._outcome(answer, query.solver)
            cex = query.counterexample(prop) if verdict is Verdict.FALSE else None
            results.append(
                CheckResult(
                    CheckKind.PRESERVE,
                    prop.name,
                    action.name,
                    verdict,
                    time.perf_counter() - started,
                    cex,
                    note,
                )
            )
            if fail_fast and verdict is not Verdict.TRUE:
                return results
        # No vacuity: the action can fire in some state where every property holds.
        started = time.perf_counter()
        query = finite_query(FINITE_SEARCH_SIZES[-1])
        answer = query.check(None, self.timeout_ms)
        if answer != z3.sat:
            query = unbounded
            answer = unbounded.check(None, self.timeout_ms)
        verdict, note = self._outcome(answer, query.solver)
        enabled = {Verdict.TRUE: Verdict.FALSE, Verdict.FALSE: Verdict.TRUE}.get(
            verdict, Verdict.UNKNOWN
        )
        if enabled is Verdict.FALSE:
            note = "its guard is unsatisfiable in every state satisfying the properties"
        results.append(
            CheckResult(
                CheckKind.ENABLED,
                action.name,
                action.name,
                enabled,
                time.perf_counter() - started,
                None,
                note,
            )
        )
        return results

    def _witness_query(
        self, vocab: Vocabulary, witness: ast.WitnessDecl, timeout_ms: int
    ) -> tuple[z3.CheckSatResult, z3.Solver, list[State], list[tuple[ast.ActionDecl, Any]]]:
        encoder = Encoder(vocab)
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(*vocab.axioms(encoder))
        state = vocab.new_state("w0")
        solver.add(
            *[
                encoder.formula(d.formula, state, {})
                for d in self.spec.formulas(ast.FormulaKind.INIT)
            ]
        )
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
                solver.add(encoder.transition(action, states[-1], nxt, params))
                states.append(nxt)
            else:
                solver.add(encoder.guard(action, states[-1], params))
                states.append(encoder.post_state(action, states[-1], params))
            all_params.append((action, params))
        if witness.reach is not None:
            solver.add(encoder.formula(witness.reach, states[-1], {}))
        return solver.check(), solver, states, all_params

    def check_witness(self, witness: ast.WitnessDecl) -> CheckResult:
        """A witness run exists: looked for on a small instance first, then unbounded."""
        started = time.perf_counter()
        size = FINITE_SEARCH_SIZES[-1]
        vocab = Vocabulary(self.info, {s: size for s in self.info.sorts})
        answer, solver, states, all_params = self._witness_query(
            vocab, witness, min(FINITE_SEARCH_MS, self.timeout_ms)
        )
        if answer != z3.sat:
            vocab = self.vocab
            answer, solver, states, all_params = self._witness_query(
                vocab, witness, self.timeout_ms
            )
        answer = solver.check()
        if answer == z3.sat:
            names = ElementNames(solver.model(), vocab)
            symbols = self.info.state_symbols()
            steps = tuple(f"{a.name}({describe_params(names, p)})" for a, p in all_params)
            run = Counterexample(
                f"witness {witness.name}: a run of {len(steps)} steps",
                {s: tuple(v) for s, v in names.universes.items()},
                names.read_rigid(),
                tuple(names.read_state(s, symbols) for s in states),
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
        if answer == z3.unsat:
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
            f"z3: {solver.reason_unknown()}",
        )


def symbols_of(info: SpecInfo, expr: ast.Expr) -> set[str]:
    """The state symbols `expr` mentions, through the definitions it uses."""
    found: set[str] = set()
    pending: list[ast.Expr] = [expr]
    seen_defines: set[str] = set()
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Name, ast.App)):
            if node.name in info.symbols:
                if not info.symbols[node.name].rigid:
                    found.add(node.name)
            elif node.name in info.defines and node.name not in seen_defines:
                seen_defines.add(node.name)
                pending.append(info.defines[node.name].body)
            if isinstance(node, ast.App):
                pending.extend(node.args)
        elif isinstance(node, ast.Not):
            pending.append(node.operand)
        elif isinstance(node, (ast.And, ast.Or)):
            pending.extend(node.operands)
        elif isinstance(node, (ast.Implies, ast.Iff, ast.Compare)):
            pending.extend((node.left, node.right))
        elif isinstance(node, ast.Ite):
            pending.extend((node.cond, node.then, node.orelse))
        elif isinstance(node, ast.Quant):
            pending.append(node.body)
    return found


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
) -> ProofReport:
    """Discharge every obligation of `loaded` (or only those of the named properties
    and actions). `on_result` is called after each obligation (progress output);
    `fail_fast` stops after the first obligation that is not proved."""
    started = time.perf_counter()
    targets = select_properties(loaded.spec, only)
    prover = Prover(loaded, timeout_ms)
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
    return ProofReport(loaded.name, loaded.mutation, tuple(results), time.perf_counter() - started)

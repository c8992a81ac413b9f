"""Obligations settled without Z3 (etcdspec.spec.discharge): the frame and monotone
rules settle exactly the table's cases, and every obligation they settle in the
built-in specs (with and without their seeded mutations) is one Z3 proves from the
property alone, with no other invariant."""

from __future__ import annotations

import pytest
import z3

from etcdspec.spec.discharge import FRAME_NOTE, MONOTONE_NOTE, polarities, settle
from etcdspec.spec.hints import Route
from etcdspec.spec.loader import BUILTIN_SPECS, LoadedSpec, load_spec, load_text
from etcdspec.spec.proof_report import CheckKind
from etcdspec.spec.prove import Prover, prove
from etcdspec.spec.solving import Budget, ask
from etcdspec.verdict import Verdict

TOY = """
sort node
relation r(node)
relation s(node)
function f(node): node
define in_r(n: node) = r(n)
action grow(n: node) { r(n) := true; }
action grow_or(n: node) { forall m: node. r(m) := r(m) | s(m); }
action shrink(n: node) { r(n) := false; }
action shrink_and(n: node) { forall m: node. r(m) := s(m) & r(m); }
action keep(n: node) { forall m: node. r(m) := r(m); }
action grow_and_shrink(n: node) { r(n) := true; forall m: node. r(m) := r(m) & s(m); }
action copy(n: node) { forall m: node. r(m) := s(m); }
action grow_other_point(n: node) { r(f(n)) := r(n) | s(n); }
action move_f(n: node) { f(n) := n; }
invariant r_positive: forall n: node. s(n) -> r(n)
invariant r_negative: forall n: node. r(n) -> s(n)
invariant r_both: forall n: node. r(n) <-> s(n)
invariant r_under_f: forall n: node. r(f(n)) | s(n)
invariant r_via_define: forall n: node. !in_r(n) | s(n)
invariant r_in_ite: forall n: node. if r(n) then s(n) else s(n)
invariant s_only: forall n: node. s(n) | !s(n)
"""

FRAME, MONOTONE, Z3 = "frame", "monotone", "z3"


def toy() -> LoadedSpec:
    return load_text(TOY, "discharge_toy.spec")


@pytest.mark.parametrize(
    ("action", "prop", "expected"),
    [
        ("grow", "r_positive", MONOTONE),
        ("grow", "r_negative", Z3),
        ("grow_or", "r_positive", MONOTONE),
        ("grow_or", "r_negative", Z3),
        ("shrink", "r_negative", MONOTONE),
        ("shrink", "r_positive", Z3),
        ("shrink_and", "r_negative", MONOTONE),
        ("shrink_and", "r_positive", Z3),
        ("keep", "r_both", MONOTONE),  # assigns r its own value: nothing moves
        ("grow", "r_both", Z3),  # ↔ fixes no polarity
        ("shrink", "r_in_ite", Z3),  # nor does an ite condition
        ("grow_and_shrink", "r_positive", Z3),
        ("grow_and_shrink", "r_negative", Z3),
        ("copy", "r_positive", Z3),
        ("grow", "r_under_f", MONOTONE),  # f unchanged: r(f(n)) is a positive atom
        ("move_f", "r_under_f", Z3),  # functions never settle by monotonicity
        ("grow_other_point", "r_positive", Z3),  # the value's atom is not the target's
        ("grow", "r_via_define", Z3),  # negative through the definition
        ("shrink", "r_via_define", MONOTONE),
        ("grow", "s_only", FRAME),
        ("move_f", "r_positive", FRAME),
    ],
)
def test_settle_table(action: str, prop: str, expected: str) -> None:
    loaded = toy()
    decl = loaded.spec.action(action)
    formula = next(p for p in loaded.spec.properties() if p.name == prop)
    assert decl is not None
    note = settle(loaded.info, decl, formula)
    assert note == {FRAME: FRAME_NOTE, MONOTONE: MONOTONE_NOTE, Z3: None}[expected]


def test_polarities_follow_definitions_and_arguments() -> None:
    loaded = toy()
    props = {p.name: p.formula for p in loaded.spec.properties()}
    # POSITIVE = 1, NEGATIVE = 2, BOTH = 3
    assert polarities(loaded.info, props["r_positive"]) == {"r": 1, "s": 2}
    assert polarities(loaded.info, props["r_via_define"]) == {"r": 2, "s": 1}
    assert polarities(loaded.info, props["r_under_f"]) == {"r": 1, "f": 3, "s": 1}
    assert polarities(loaded.info, props["r_in_ite"]) == {"r": 3, "s": 1}


def _settled_cases(loaded: LoadedSpec) -> list[tuple[str, str]]:
    return [
        (action.name, prop.name)
        for action in loaded.spec.actions()
        for prop in loaded.spec.properties()
        if settle(loaded.info, action, prop) is not None
    ]


def _specs_and_mutations() -> list[tuple[str, str | None]]:
    cases: list[tuple[str, str | None]] = [("discharge_toy", None)]
    for name in BUILTIN_SPECS:
        cases.append((name, None))
        cases.extend((name, m) for m in load_spec(name).spec.mutation_names())
    return cases


def _load(name: str, mutation: str | None) -> LoadedSpec:
    return toy() if name == "discharge_toy" else load_spec(name, mutation)


@pytest.mark.parametrize(("name", "mutation"), _specs_and_mutations())
def test_every_settled_obligation_follows_from_the_property_alone(
    name: str, mutation: str | None
) -> None:
    """prop(pre) ∧ guard ∧ ¬prop(post) is unsat for each settled (action, prop): the
    rule's claim, checked by Z3 without the other invariants as hypotheses. Under a
    mutation only the actions it changes are asked again (the others' queries are the
    unmutated spec's, asked in its own case)."""
    loaded = _load(name, mutation)
    instance = Prover(loaded).unbounded
    props = {p.name: p for p in loaded.spec.properties()}
    settled = _settled_cases(loaded)
    assert settled
    if mutation is not None:
        plain = _load(name, None).spec
        changed = {a.name for a in loaded.spec.actions() if a != plain.action(a.name)}
        assert changed, f"{name} --mutation {mutation} changes no action"
        settled = [(a, p) for a, p in settled if a in changed]
    for action_name, prop_name in settled:
        action = loaded.spec.action(action_name)
        assert action is not None
        step = instance.step(action)
        prop = props[prop_name]
        pre = instance.encoder.formula(prop.formula, step.pre, {})
        guard = instance.encoder.guard(action, step.pre, step.params)
        answer = ask([*instance.axioms, pre, guard, step.negation(prop)], Budget(20_000))
        assert answer.unsat, f"{name}: {prop_name} after {action_name}: {answer.describe()}"


def test_raft_settles_frame_and_monotone_obligations_with_their_notes() -> None:
    loaded = load_spec("raft")
    report = prove(loaded, only=["leader_is_current", "request_vote_self"], jobs=1, hints=False)
    notes = {(r.subject, r.action): r.note for r in report.results if r.kind is CheckKind.PRESERVE}
    routes = {
        (r.subject, r.action): r.route for r in report.results if r.kind is CheckKind.PRESERVE
    }
    assert routes[("leader_is_current", "restart")] is Route.RULE
    assert routes[("leader_is_current", "timeout")] is Route.FULL
    assert notes[("leader_is_current", "restart")] == MONOTONE_NOTE  # leader only shrinks
    assert notes[("request_vote_self", "receive_request_vote")] == MONOTONE_NOTE  # voted grows
    assert notes[("request_vote_self", "commit")] == FRAME_NOTE
    assert notes[("leader_is_current", "timeout")] == ""  # current_term moves: asked of Z3
    assert report.verdict is Verdict.TRUE


def test_z3_is_not_consulted_for_settled_obligations(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    original = z3.Solver.check

    def counting_check(self: z3.Solver, *args: z3.ExprRef) -> z3.CheckSatResult:
        asked.append(1)
        return original(self, *args)

    monkeypatch.setattr(z3.Solver, "check", counting_check)
    report = prove(toy(), only=["r_negative"], actions=["shrink"], jobs=1)
    preserve = [r for r in report.results if r.kind is CheckKind.PRESERVE]
    assert [r.note for r in preserve] == [MONOTONE_NOTE]
    assert len(asked) == len(report.results) - len(preserve)  # enabled only

"""Z3 queries are steady: an isolated query costs the same wherever it is asked, a
resource budget (not the machine's load) decides when Z3 gives up, and giving up is
unknown, never proved."""

from __future__ import annotations

import z3

from etcdspec.spec.loader import load_spec
from etcdspec.spec.proof_report import CheckKind
from etcdspec.spec.prove import Prover, prove
from etcdspec.spec.solving import Budget, ask
from etcdspec.verdict import Verdict

GENEROUS = Budget(timeout_ms=120_000)


def _query(prover: Prover, action: str, prop: str) -> list[z3.BoolRef]:
    spec = prover.spec
    decl = next(p for p in spec.properties() if p.name == prop)
    found = spec.action(action)
    assert found is not None
    step = prover.unbounded.step(found)
    return [*step.base, step.negation(decl)]


def test_an_isolated_query_costs_the_same_before_and_after_other_queries() -> None:
    prover = Prover(load_spec("raft"))
    target = _query(prover, "become_leader", "append_prev")
    first = ask(target, GENEROUS, isolated=True)
    # other queries in between create many terms in the main context
    for action, prop in [("propose", "log_sorted"), ("receive_append", "log_functional")]:
        assert ask(_query(prover, action, prop), GENEROUS, isolated=True).unsat
    again = ask(target, GENEROUS, isolated=True)
    assert first.unsat and again.unsat
    assert first.rlimit_used is not None and first.rlimit_used > 0
    assert again.rlimit_used == first.rlimit_used


def test_a_query_is_decided_by_its_resource_budget() -> None:
    prover = Prover(load_spec("raft"))
    target = _query(prover, "become_leader", "append_prev")
    needed = ask(target, GENEROUS, isolated=True).rlimit_used
    assert needed is not None
    short = ask(target, Budget(120_000, max(needed // 4, 1)), isolated=True)
    assert short.result == z3.unknown and short.model is None
    enough = ask(target, Budget(120_000, needed * 2), isolated=True)
    assert enough.unsat


def test_a_satisfiable_isolated_query_returns_a_model_in_the_main_context() -> None:
    x = z3.Int("x")
    answer = ask([x > 3, x < 5], GENEROUS, isolated=True)
    assert answer.sat and answer.model is not None
    assert answer.model.eval(x).as_long() == 4


def test_an_exhausted_budget_is_unknown_never_proved() -> None:
    prover = Prover(load_spec("raft"), timeout_ms=120_000)
    prover.first_try_ms = 0  # the first try gets 1 ms of work: never enough
    loaded = prover.loaded
    action = loaded.spec.action("become_leader")
    prop = next(p for p in loaded.spec.properties() if p.name == "leader_completeness")
    assert action is not None
    # the first try runs out, finite search finds nothing, the full budget proves it
    result = prover.check_preserve(action, prop)
    assert result.verdict is Verdict.TRUE
    short = Prover(loaded, timeout_ms=1).check_preserve(action, prop)
    assert short.verdict is Verdict.UNKNOWN and short.note.startswith("z3:")


def test_raft_steps_advance_commit_can_fire() -> None:
    # it ran out of 30 s when asked after the other queries in one Z3 context; isolated
    # and looked for on a 4-element instance it is found at once
    loaded = load_spec("spec/raft_steps.spec")
    first_prop = loaded.spec.properties()[0].name
    report = prove(loaded, only=[first_prop], actions=["advance_commit"])
    enabled = [r for r in report.results if r.kind is CheckKind.ENABLED]
    assert [r.verdict for r in enabled] == [Verdict.TRUE], [r.describe() for r in enabled]
    assert report.verdict is Verdict.TRUE

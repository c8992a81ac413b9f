"""Proof hints (etcdspec.spec.hints): a hinted query is tried first and only an unsat
answer is taken from it; anything else falls back to the full query, so verdicts,
obligation lists and counterexamples are the same with and without hints. The sidecar
is versioned and fingerprinted: a hint that no longer matches the spec is not used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spec_toy import toy_spec

from etcdspec.spec import ast
from etcdspec.spec.discharge import settle
from etcdspec.spec.errors import SpecLookupError
from etcdspec.spec.hints import (
    HINTS_SCHEMA,
    Hint,
    Hints,
    Route,
    book,
    compute_hints,
    fingerprint,
    hints_path,
    load_hints,
    read_hints,
    render,
    write_hints,
)
from etcdspec.spec.loader import BUILTIN_SPECS, SPEC_DIR, LoadedSpec, load_spec, load_text
from etcdspec.spec.mutations import SEEDED_BUGS, SeededBug
from etcdspec.spec.parallel import prove_parallel
from etcdspec.spec.proof_report import CheckKind, ProofReport
from etcdspec.spec.prove import DEFAULT_TIMEOUT_MS, RLIMIT_PER_MS, Prover, prove
from etcdspec.verdict import Verdict

TOY = toy_spec(witness=False)


def toy(mutation: str | None = None, filename: str = "toy.spec") -> LoadedSpec:
    return load_text(TOY, filename, mutation)


def outcome(report: ProofReport) -> list[tuple[str, Verdict]]:
    return [(r.label(), r.verdict) for r in report.results]


def forged(loaded: LoadedSpec, prop: str, action: str, core: tuple[str, ...]) -> Hints:
    """A hint for (prop, action) that matches `loaded` as loaded (mutation included)."""
    spec = loaded.spec
    decl = next(p for p in spec.properties() if p.name == prop)
    step = spec.action(action)
    assert step is not None
    return Hints(loaded.name, (Hint(prop, action, core, fingerprint(spec, step, decl, core), 0),))


# Two whole proofs each: raft_steps' is left out for the suite's time (its sidecar is
# checked below, its proof by the spec stage's test).
@pytest.mark.parametrize("name", [n for n in BUILTIN_SPECS if n != "raft_steps"])
def test_verdicts_and_obligations_are_the_same_with_and_without_hints(name: str) -> None:
    loaded = load_spec(name)
    hinted = prove(loaded, jobs=1)
    plain = prove(loaded, jobs=1, hints=False)
    assert outcome(hinted) == outcome(plain)
    assert hinted.verdict is Verdict.TRUE
    routes = hinted.routes()
    assert routes[Route.HINT] > 0 and routes[Route.STALE] == 0
    assert plain.routes()[Route.HINT] == 0
    if name == "raft":  # large enough for the parallel proof: its workers use the hints too
        parallel = prove_parallel(loaded, 2, hints=load_hints(loaded))
        assert outcome(parallel) == outcome(plain)
        assert [r.route for r in parallel.results] == [r.route for r in hinted.results]


@pytest.mark.parametrize("name", BUILTIN_SPECS)
def test_committed_sidecar_matches_the_spec_and_covers_every_z3_query(name: str) -> None:
    loaded = load_spec(str(SPEC_DIR / Path(name).name) if "/" in name else name)
    hints = load_hints(loaded)
    assert hints is not None, f"no {hints_path(loaded.spec.filename)}"
    usable = book(hints, loaded.spec)
    asked = {
        (prop.name, action.name)
        for action in loaded.spec.actions()
        for prop in loaded.spec.properties()
        if settle(loaded.info, action, prop) is None
    }
    regenerate = f"regenerate: .venv/bin/python -m etcdspec.spec.hints {name}"
    assert not usable.stale, f"stale hints {sorted(usable.stale)}; {regenerate}"
    assert asked <= set(usable.cores), f"queries without a hint; {regenerate}"


@pytest.mark.parametrize("bug", SEEDED_BUGS, ids=lambda b: f"{b.spec}-{b.mutation}")
def test_seeded_bug_fails_with_the_full_querys_counterexample_despite_a_hint(
    bug: SeededBug,
) -> None:
    loaded = load_spec(bug.spec, bug.mutation)
    plain = Prover(loaded).check_preserve(_action(loaded, bug.action), _prop(loaded, bug.prop))
    # the core the unmutated spec's proof used, made to match the mutated action: the
    # hinted query is sat (fewer hypotheses than a query that is sat), so it falls back
    core = _sidecar_core(bug) or (bug.prop,)
    hints = forged(loaded, bug.prop, bug.action, core)
    hinted = Prover(loaded, hints=hints).check_preserve(
        _action(loaded, bug.action), _prop(loaded, bug.prop)
    )
    assert hinted.route is Route.FALLBACK
    assert hinted.verdict is Verdict.FALSE and plain.verdict is Verdict.FALSE
    assert hinted.counterexample is not None and plain.counterexample is not None
    # the same obligation broken the same way (element names vary between Z3 contexts)
    headline = f"is not preserved by {bug.action}("
    assert headline in hinted.counterexample.describe().splitlines()[0]
    assert headline in plain.counterexample.describe().splitlines()[0]
    assert hinted.seconds <= 10


@pytest.mark.parametrize("bug", SEEDED_BUGS, ids=lambda b: f"{b.spec}-{b.mutation}")
def test_mutated_action_makes_its_sidecar_hints_stale(bug: SeededBug) -> None:
    report = prove(load_spec(bug.spec, bug.mutation), only=[bug.prop], actions=[bug.action])
    assert report.verdict is Verdict.FALSE
    assert report.first_counterexample() is not None
    preserve = next(r for r in report.results if r.kind is CheckKind.PRESERVE)
    assert preserve.route is Route.STALE  # the committed hint was for the action as written
    assert "1 stale" in report.describe()


def test_insufficient_hint_falls_back_and_still_proves() -> None:
    loaded = toy()
    hints = forged(loaded, "one_leader", "elect", ())  # one_leader needs leader_term
    report = prove(loaded, jobs=1, hints=hints)
    result = next(r for r in report.results if (r.subject, r.action) == ("one_leader", "elect"))
    assert result.route is Route.FALLBACK and result.verdict is Verdict.TRUE
    assert "hints: 0 proved by hint, 1 fell back, 0 stale" in report.describe()
    assert report.verdict is Verdict.TRUE


def test_hint_out_of_budget_falls_back_never_unknown() -> None:
    loaded = load_spec("raft")
    hints = load_hints(loaded)
    assert hints is not None
    heaviest = max(hints.entries, key=lambda h: h.rlimit)
    prover = Prover(loaded, hints=hints, isolated=True)
    prover.hint_try_ms = 1  # 2000 rlimit units: less than the hinted query needs
    assert heaviest.rlimit > RLIMIT_PER_MS
    result = prover.check_preserve(_action(loaded, heaviest.action), _prop(loaded, heaviest.prop))
    assert result.route is Route.FALLBACK
    assert result.verdict is Verdict.TRUE


def test_written_sidecar_is_read_back_and_used(tmp_path: Path) -> None:
    spec_file = tmp_path / "toy.spec"
    spec_file.write_text(TOY)
    loaded = toy(filename=str(spec_file))
    path, hints = write_hints(loaded)
    assert path == tmp_path / "toy.hints"
    assert read_hints(path) == hints
    assert json.loads(path.read_text())["schema"] == HINTS_SCHEMA
    report = prove(loaded, jobs=1)
    asked = [r for r in report.results if r.route not in (None, Route.RULE)]
    assert asked and all(r.route is Route.HINT for r in asked)
    assert report.extra["hints"] == {
        "entries": len(hints.entries),
        "usable": len(hints.entries),
        "stale": 0,
    }


def test_parallel_proof_uses_the_same_hints_as_serial() -> None:
    loaded = toy()
    hints = compute_hints(loaded, RLIMIT_PER_MS, DEFAULT_TIMEOUT_MS)
    serial = prove(loaded, jobs=1, hints=hints)
    parallel = prove_parallel(loaded, 2, hints=hints)
    assert outcome(parallel) == outcome(serial)
    assert [r.route for r in parallel.results] == [r.route for r in serial.results]
    assert Route.HINT in {r.route for r in parallel.results}


def test_edited_property_makes_the_hints_that_use_it_stale() -> None:
    loaded = toy()
    hints = compute_hints(loaded, RLIMIT_PER_MS, DEFAULT_TIMEOUT_MS)
    edited = load_text(
        TOY.replace("t <= current_term(n)", "t <= current_term(n) | false"), "e.spec"
    )
    usable = book(hints, edited.spec)
    uses = {(h.prop, h.action) for h in hints.entries if "leader_term" in (h.prop, *h.core)}
    assert uses and usable.stale == uses
    assert set(usable.cores) == {(h.prop, h.action) for h in hints.entries} - uses


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"schema": "etcdspec.hints/0", "hints": []}, "not a etcdspec.hints/1 document"),
        ([], "not a etcdspec.hints/1 document"),
        ({"schema": HINTS_SCHEMA, "hints": [{"property": "p"}]}, "hint #0 is malformed"),
    ],
)
def test_malformed_sidecar_is_a_clear_error(tmp_path: Path, document: object, message: str) -> None:
    path = tmp_path / "x.hints"
    path.write_text(json.dumps(document))
    with pytest.raises(SpecLookupError, match=message):
        read_hints(path)


def test_sidecar_text_round_trips() -> None:
    hints = Hints("toy", (Hint("p", "a", ("p", "q"), "abc", 7), Hint("q", "a", (), "def", 0)))
    assert Hints.from_json(json.loads(render(hints)), "x") == hints
    assert len(render(hints).splitlines()) == 4  # header, one line per hint, footer


def test_hints_are_not_written_for_a_mutation() -> None:
    with pytest.raises(SpecLookupError, match="without --mutation"):
        write_hints(toy("unchecked"))


def _action(loaded: LoadedSpec, name: str) -> ast.ActionDecl:
    action = loaded.spec.action(name)
    assert action is not None
    return action


def _prop(loaded: LoadedSpec, name: str) -> ast.FormulaDecl:
    return next(p for p in loaded.spec.properties() if p.name == name)


def _sidecar_core(bug: SeededBug) -> tuple[str, ...] | None:
    hints = load_hints(load_spec(bug.spec))
    assert hints is not None
    entry = next((h for h in hints.entries if (h.prop, h.action) == (bug.prop, bug.action)), None)
    return None if entry is None else entry.core

"""raft_member.spec: Raft with single-server configuration changes.

The bugs that the configuration-change rule prevents, as concrete runs on the spec's own
semantics (the finite evaluator): with the rule weakened by a mutation, each run is a
run of the spec from an initial state, every state but the last satisfies the safety
properties, and the last breaks the named one; with the rule in place the same run is
refused at the configuration change. Configurations are named A, B, C; adjacent ones
differ by one server, so their quorums intersect; the others' quorums may be disjoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from etcdspec.spec import ast
from etcdspec.spec.evaluator import Instance, enabled, holds, initial, step, violated_properties
from etcdspec.spec.hints import Route
from etcdspec.spec.loader import SPEC_NAMES, LoadedSpec, load_spec, resolve
from etcdspec.spec.parser import parse_spec
from etcdspec.spec.printer import print_decl, print_spec
from etcdspec.spec.proof_report import CheckKind
from etcdspec.spec.prove import prove
from etcdspec.verdict import Verdict

Run = list[tuple[str, dict[str, Any]]]


def instance(
    quorums: dict[str, tuple[str, set[str]]],
    adjacent: set[tuple[str, str]],
    terms: int,
    indexes: int,
) -> Instance:
    """Nodes n1..n3, quorums named with their configuration and members, configuration A
    for the empty log."""
    return Instance(
        {
            "node": ["n1", "n2", "n3"],
            "quorum": list(quorums),
            "config": ["A", "B", "C"],
            "value": ["v"],
            "term": list(range(terms)),
            "index": list(range(indexes)),
        },
        {
            "member": {(n, q) for q, (_, members) in quorums.items() for n in members},
            "quorum_of": {(q, config) for q, (config, _) in quorums.items()},
            "adjacent": adjacent | {(b, a) for a, b in adjacent},
            "config0": "A",
            "term0": 0,
            "index0": 0,
        },
    )


def initial_state(inst: Instance) -> dict[str, Any]:
    nodes, terms = inst.universes["node"], inst.universes["term"]
    entries = [(i, t) for i in inst.universes["index"] for t in terms]
    pairs = [(*x, *y) for x in entries for y in entries]
    empty: set[Any] = set()
    return {
        "current_term": {(n, 0) for n in nodes},
        "voted": empty,
        "log": empty,
        "value_at": dict.fromkeys(entries, "v"),
        "cfg_at": dict.fromkeys(entries, "A"),
        "config_entry": empty,
        "leader": empty,
        "request_vote_msg": empty,
        "vote_msg": empty,
        "append_msg": empty,
        "append_reply_msg": empty,
        "left_term": empty,
        "elected": empty,
        "started": empty,
        "voting_quorum": dict.fromkeys(terms, inst.universes["quorum"][0]),
        "term_leader": dict.fromkeys(terms, nodes[0]),
        "elected_last": empty,
        "elected_index": dict.fromkeys(terms, 0),
        "elected_term": dict.fromkeys(terms, 0),
        "leader_log": empty,
        "committed_at": empty,
        "change_base": dict.fromkeys(pairs, 0),
        "change_index": dict.fromkeys(pairs, 0),
        "change_term": dict.fromkeys(pairs, 0),
    }


def timeout(n: str, t: int, li: int, lt: int) -> tuple[str, dict[str, Any]]:
    return "timeout", {"n": n, "t": t, "li": li, "lt": lt}


def vote(
    voter: str, candidate: str, t: int, li: int, lt: int, mli: int = 0, mlt: int = 0
) -> tuple[str, dict[str, Any]]:
    params = {"n": voter, "c": candidate, "t": t, "li": li, "lt": lt, "mli": mli, "mlt": mlt}
    return "receive_request_vote", params


def elect(n: str, t: int, q: str, li: int, lt: int) -> tuple[str, dict[str, Any]]:
    return "become_leader", {"n": n, "t": t, "q": q, "li": li, "lt": lt}


def change(n: str, t: int, li: int, lt: int, c: str, ic: int = 0) -> tuple[str, dict[str, Any]]:
    return "propose_config", {"n": n, "t": t, "li": li, "lt": lt, "i": li + 1, "c": c, "ic": ic}


def replicate(n: str, t: int, i: int) -> Run:
    """The leader of t sends its entry i (of term t, after entries of term t or none) and
    node n stores it."""
    params = {"t": t, "pi": i - 1, "pt": t if i > 1 else 0, "i": i, "et": t}
    return [("send_append", {"n": "leader", **params}), ("receive_append", {"n": n, **params})]


@dataclass(frozen=True)
class Scenario:
    mutation: str
    inst: Instance
    run: Run
    refused_at: int  # the configuration change the unmutated rule refuses
    broken: str  # the safety property the last step breaks

    def resolved(self) -> Run:
        """The run with each send_append's sender filled in (the leader of its term)."""
        leaders = {p["t"]: p["n"] for a, p in self.run if a == "become_leader"}
        return [(a, {**p, "n": leaders[p["t"]]} if a == "send_append" else p) for a, p in self.run]


# Without the term-commit rule (the flaw in single-server changes reported in 2015): B
# and C each add a server to A. n1 leads term 1 (votes of n2, n3: a quorum of A) and at
# once appends B, which only it holds; n2 leads term 2 (n3's vote), appends C and commits
# it with C's quorum {n2}; n1 wins term 3 with B's quorum {n1, n3} (n3's log is empty, so
# n1's is at least as up to date) and leads without the committed entry.
LOST_COMMIT = Scenario(
    "no_term_commit",
    instance(
        {"qA": ("A", {"n2", "n3"}), "qB": ("B", {"n1", "n3"}), "qC": ("C", {"n2"})},
        {("A", "B"), ("A", "C")},
        terms=4,
        indexes=2,
    ),
    [
        timeout("n1", 1, 0, 0),
        vote("n2", "n1", 1, 0, 0),
        vote("n3", "n1", 1, 0, 0),
        elect("n1", 1, "qA", 0, 0),
        change("n1", 1, 0, 0, "B"),
        timeout("n2", 2, 0, 0),
        vote("n3", "n2", 2, 0, 0),
        elect("n2", 2, "qA", 0, 0),
        change("n2", 2, 0, 0, "C"),
        ("commit", {"n": "n2", "t": 2, "i": 1, "et": 2, "q": "qC"}),
        timeout("n1", 3, 1, 1),
        vote("n3", "n1", 3, 1, 1),
        elect("n1", 3, "qB", 1, 1),
    ],
    refused_at=4,
    broken="leader_completeness",
)

# Two changes in flight: A -> B -> C, B one server more than A, C one more than B, so A's
# quorum {n2} and C's {n3} are disjoint. n1 leads term 1, commits an entry with A's
# quorum, appends B and, before B is committed, C; n3 receives all three entries. In term
# 2, n3 is elected by C's quorum (itself) and n2, whose log ends before B, by A's.
TWO_LEADERS = Scenario(
    "two_in_flight",
    instance(
        {"qA": ("A", {"n2"}), "qB": ("B", {"n2", "n3"}), "qC": ("C", {"n3"})},
        {("A", "B"), ("B", "C")},
        terms=3,
        indexes=4,
    ),
    [
        timeout("n1", 1, 0, 0),
        vote("n2", "n1", 1, 0, 0),
        elect("n1", 1, "qA", 0, 0),
        ("propose", {"n": "n1", "t": 1, "li": 0, "lt": 0, "i": 1, "v": "v"}),
        *replicate("n2", 1, 1),
        ("commit", {"n": "n1", "t": 1, "i": 1, "et": 1, "q": "qA"}),
        change("n1", 1, 1, 1, "B", ic=1),
        change("n1", 1, 2, 1, "C", ic=1),
        *replicate("n3", 1, 1),
        *replicate("n3", 1, 2),
        *replicate("n3", 1, 3),
        timeout("n3", 2, 3, 1),
        elect("n3", 2, "qC", 3, 1),
        timeout("n2", 2, 1, 1),
        elect("n2", 2, "qA", 1, 1),
    ],
    refused_at=8,
    broken="election_safety",
)

SCENARIOS = [LOST_COMMIT, TWO_LEADERS]


def replay(loaded: LoadedSpec, scenario: Scenario) -> tuple[list[dict[str, Any]], int | None]:
    """The states of the run, and the index of the first step whose guard fails (None
    when every step can fire)."""
    states = [initial_state(scenario.inst)]
    for number, (action, params) in enumerate(scenario.resolved()):
        if not enabled(loaded, action, params, states[-1], scenario.inst):
            return states, number
        states.append(step(loaded, action, params, states[-1], scenario.inst))
    return states, None


def test_raft_member_is_a_builtin_spec_name() -> None:
    assert "raft_member" in SPEC_NAMES
    assert load_spec("raft_member").name == "raft_member"


def test_raft_member_round_trips_through_the_printer() -> None:
    spec = parse_spec(resolve("raft_member").read_text(), "raft_member")
    printed = print_spec(spec)
    again = parse_spec(printed, "printed")
    assert again == spec
    assert print_spec(again) == printed


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.mutation)
def test_the_instance_satisfies_the_axioms_and_the_run_starts_initial(scenario: Scenario) -> None:
    loaded = load_spec("raft_member")
    state = initial_state(scenario.inst)
    assert initial(loaded, state, scenario.inst)
    for axiom in loaded.spec.formulas(ast.FormulaKind.AXIOM):
        assert holds(loaded, axiom.formula, state, scenario.inst), axiom.name
    assert violated_properties(loaded, state, scenario.inst) == []


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.mutation)
def test_the_weakened_rule_lets_a_run_break_a_safety_property(scenario: Scenario) -> None:
    loaded = load_spec("raft_member", scenario.mutation)
    states, refused = replay(loaded, scenario)
    assert refused is None
    safety = {d.name for d in loaded.spec.formulas(ast.FormulaKind.SAFETY)}
    for state in states[:-1]:
        assert safety.isdisjoint(violated_properties(loaded, state, scenario.inst))
    assert scenario.broken in violated_properties(loaded, states[-1], scenario.inst)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.mutation)
def test_the_rule_refuses_the_same_run_at_the_configuration_change(scenario: Scenario) -> None:
    states, refused = replay(load_spec("raft_member"), scenario)
    assert refused == scenario.refused_at
    assert scenario.run[scenario.refused_at][0] == "propose_config"
    # up to there the run is one of the unmutated spec
    assert len(states) == scenario.refused_at + 1


def test_the_lost_entry_is_the_committed_configuration_change() -> None:
    states, _ = replay(load_spec("raft_member", "no_term_commit"), LOST_COMMIT)
    last = states[-1]
    assert ("n1", 3) in last["leader"] and (2, 1) in last["committed_at"]
    # C at index 1 of term 2 is committed; the leader of term 3 holds B there instead
    assert (2, 1, 2) in last["leader_log"] and ("n1", 1, 2) not in last["log"]
    assert last["cfg_at"][(1, 2)] == "C" and last["cfg_at"][(1, 1)] == "B"


@pytest.mark.parametrize("mutation", ["no_term_commit", "two_in_flight"])
def test_each_mutation_changes_only_the_configuration_rule(mutation: str) -> None:
    plain = load_spec("raft_member")
    mutated = load_spec("raft_member", mutation)
    changed = [a.name for a in mutated.spec.actions() if a != plain.spec.action(a.name)]
    assert changed == ["propose_config"]


def test_election_safety_is_proved_for_any_cluster_size_and_the_spec_is_not_vacuous() -> None:
    # Of the whole proof (all of it runs in `verify`'s spec stage,
    # tests/spec/test_spec_prove.py), election safety by every action, every action able
    # to fire (propose_config too, with config_change_committed among the properties: its
    # witnesses are ghost functions, not an existential), both witnesses (a committed
    # configuration change among them); the cores are raft_member.hints'.
    report = prove(load_spec("raft_member"), only=["election_safety"], jobs=1)
    failures = [r.label() for r in report.results if r.verdict is not Verdict.TRUE]
    assert report.verdict is Verdict.TRUE, failures
    kinds = {r.kind for r in report.results}
    assert kinds == {CheckKind.INIT, CheckKind.PRESERVE, CheckKind.ENABLED, CheckKind.WITNESS}
    witnesses = {r.subject for r in report.results if r.kind is CheckKind.WITNESS}
    assert witnesses == {"elect_and_commit", "change_configuration"}
    enabled = {r.subject for r in report.results if r.kind is CheckKind.ENABLED}
    assert enabled == {a.name for a in load_spec("raft_member").spec.actions()}


def test_the_winner_lemma_is_preserved_by_a_new_vote() -> None:
    loaded = load_spec("raft_member")
    report = prove(
        loaded,
        only=["winner_is_leader"],
        actions=["receive_request_vote"],
        jobs=1,
        witnesses=False,
        isolated=True,
    )
    assert report.verdict is Verdict.TRUE, [r.label() for r in report.results]


# The obligations this spec's proof closed last: a leader's new entry (propose) or
# configuration change (propose_config) can neither make a stale configuration's quorum
# able to win nor be chosen behind a later term's back (the case analysis of the spec's
# header; by propose_config through config_change_committed), and that lemma is kept by
# both. Each by raft_member.hints' core, each query in a context of its own (the
# verdict must not depend on what was asked before).
CLOSED_LAST = ["stale_configs_blocked", "choosable_later_leaders", "config_change_committed"]


@pytest.mark.parametrize("action", ["propose", "propose_config"])
def test_a_new_entry_keeps_the_configuration_lemmas(action: str) -> None:
    report = prove(
        load_spec("raft_member"),
        only=CLOSED_LAST,
        actions=[action],
        jobs=1,
        witnesses=False,
        isolated=True,
    )
    assert report.verdict is Verdict.TRUE, [r.label() for r in report.results]
    routes = {r.subject: r.route for r in report.results if r.kind is CheckKind.PRESERVE}
    assert routes == dict.fromkeys(CLOSED_LAST, Route.HINT)


def test_the_change_lemma_names_its_witnesses_by_ghost_functions() -> None:
    # every hypothesis of config_change_committed is universal: the change after x in
    # y's log is named by change_base/change_index/change_term, set by the two actions
    # that append entries (and nothing else writes them)
    loaded = load_spec("raft_member")
    lemma = next(p for p in loaded.spec.properties() if p.name == "config_change_committed")
    define = next(
        d for d in loaded.spec.decls if isinstance(d, ast.DefineDecl) and d.name == "change_after"
    )
    assert "change_after(" in print_decl(lemma)
    assert all("exists" not in print_decl(d) for d in (lemma, define))
    ghosts = {"change_base", "change_index", "change_term"}
    writers = {
        a.name
        for a in loaded.spec.actions()
        for s in a.body
        if isinstance(s, ast.Assign) and s.target in ghosts
    }
    assert writers == {"propose", "propose_config"}


def test_the_prover_refutes_a_configuration_change_before_a_term_commit() -> None:
    # no_term_commit: a counterexample to induction, entry_config broken by propose_config
    # (a configuration entry whose predecessor is not committed in the leader's term)
    loaded = load_spec("raft_member", "no_term_commit")
    report = prove(loaded, only=["entry_config"], actions=["propose_config"], fail_fast=True)
    assert report.verdict is Verdict.FALSE
    cex = report.first_counterexample()
    assert cex is not None
    assert "entry_config is not preserved by propose_config(" in cex.describe().splitlines()[0]

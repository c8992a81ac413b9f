"""Counterexamples as diagrams, the pure part: each kind of input (the cluster model's ITF,
the store model's, BMC's, a TLA+/Quint Raft ITF, one that is not recognised, the server's
Raft traces) becomes lifelines, messages with their fate (delivered, dropped, in flight),
crashes and restarts, logs per step and the violated invariant at its step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from trace_scenarios import MembershipRun, clean_run, figure8_run

from etcdspec.checker.diagram_itf import DiagramInputError, diagram_from_itf, load_itf
from etcdspec.checker.diagram_trace import diagram_from_traces
from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.itf import ItfTrace, problems
from etcdspec.model.counterexample import build
from etcdspec.spec.bmc import bmc
from etcdspec.spec.loader import load_spec


def _node(
    role: str = "follower", term: int = 0, log: tuple[str, ...] = (), up: bool = True
) -> dict[str, Any]:
    return {
        "role": role,
        "term": term,
        "voted_for": None,
        "log": list(log),
        "commit_index": 0,
        "up": up,
    }


def _cluster(messages: dict[str, int], **nodes: dict[str, Any]) -> dict[str, Any]:
    everyone = {"n1": _node(), "n2": _node(), "n3": _node()}
    everyone.update(nodes)
    return {
        "committed": [],
        "leaders": [],
        "messages": messages,
        "nodes": everyone,
        "partition": [],
    }


PV2 = "n1→n2 PreVote term 1 last 0/0"
PV3 = "n1→n3 PreVote term 1 last 0/0"
RESP = "n2→n1 PreVoteResp term 1 granted"


def _model_document() -> dict[str, Any]:
    """A run of the cluster model's shape: n1 times out and asks both peers, n2 answers,
    the message to n3 is dropped, n2 crashes and restarts, the answer stays in flight."""
    pc = _node("pre-candidate")
    states = [
        ("timeout(n1)", _cluster({PV2: 1, PV3: 1}, n1=pc)),
        (f"deliver({PV2})", _cluster({PV3: 1, RESP: 1}, n1=pc)),
        (f"drop({PV3})", _cluster({RESP: 1}, n1=pc)),
        ("crash(n2)", _cluster({RESP: 1}, n1=pc, n2=_node(up=False))),
        ("restart(n2)", _cluster({RESP: 1}, n1=pc, n2=_node(term=0, log=("1:put(a=1)",)))),
    ]
    cex = build("cluster", "SomeInvariant", "detail", _cluster({}), states, "3 nodes")
    return cex.to_itf().to_json()


def test_cluster_model_itf_gives_lifelines_message_fates_crashes_and_the_violation() -> None:
    diagram = diagram_from_itf(_model_document())
    assert diagram.source == "model ITF" and diagram.lifelines == ("n1", "n2", "n3")
    assert diagram.invariant == "SomeInvariant" and diagram.violation_step == 5
    fates = {(m.sender, m.receiver, m.fate, m.sent, m.ended) for m in diagram.messages}
    assert fates == {
        ("n1", "n2", "delivered", 1, 2),
        ("n1", "n3", "dropped", 1, 3),
        ("n2", "n1", "in flight", 2, None),
    }
    assert diagram.steps[1].notes == ("n1: follower → pre-candidate",)
    assert "n2 crashed" in diagram.steps[4].notes and "n2 restarted" in diagram.steps[5].notes
    assert diagram.steps[4].nodes["n2"].up is False
    assert diagram.steps[5].nodes["n2"].log == ("1:put(a=1)",)
    assert diagram.steps[2].actor == "n2" and diagram.steps[1].actor == "n1"
    text = diagram.describe()
    assert (
        "VIOLATED: SomeInvariant" in text
        and "n1→n3 PreVote term 1 last 0/0: sent at step 1, dropped at step 3" in text
    )


def test_the_invariant_named_by_the_caller_wins_and_an_unnamed_one_is_said_so() -> None:
    document = _model_document()
    assert diagram_from_itf(document, "Other").steps[-1].violation == "Other"
    document["#meta"]["description"] = ""
    assert "does not name" in diagram_from_itf(document).steps[-1].violation


def test_store_model_itf_is_drawn_as_a_client_and_the_store() -> None:
    trace = ItfTrace(
        ["compact_revision", "kvs", "leases", "revision"],
        "etcdspec explore (store model)",
        "violates Resumable",
    )
    trace.add_state({"compact_revision": 0, "kvs": {}, "leases": {}, "revision": 1})
    trace.add_state(
        {"compact_revision": 0, "kvs": {"a": "0 (c2 m2 v1)"}, "leases": {}, "revision": 2},
        "put(a=0) -> put-> rev 2",
    )
    diagram = diagram_from_itf(trace.to_json())
    assert diagram.lifelines == ("client", "store") and diagram.invariant == "Resumable"
    assert [(m.sender, m.receiver, m.label) for m in diagram.messages] == [
        ("client", "store", "put(a=0)"),
        ("store", "client", "put-> rev 2"),
    ]
    assert diagram.steps[1].nodes["store"].log == ("a=0 (c2 m2 v1)",)


def test_bmc_itf_gives_the_spec_s_nodes_votes_and_the_delivered_request() -> None:
    result = bmc(
        load_spec("raft", "two_votes"),
        5,
        {"node": 3, "term": 2, "index": 1, "value": 1, "quorum": 2},
        only=["one_vote_per_term"],
    )
    assert result.counterexample is not None
    document = result.counterexample.to_itf(source="raft with mutation two_votes").to_json()
    diagram = diagram_from_itf(document)
    assert diagram.source == "spec ITF (BMC)"
    assert diagram.lifelines == ("node0", "node1", "node2")
    assert diagram.invariant == "one_vote_per_term"
    assert diagram.violation_step == len(result.counterexample.steps)
    delivered = [m for m in diagram.messages if m.fate == "delivered"]
    assert delivered and all(m.receiver in diagram.lifelines for m in delivered)
    assert any(s.nodes[n].role == "candidate" for s in diagram.steps for n in diagram.lifelines)


def _tla_state(
    action: str,
    terms: dict[str, int],
    roles: dict[str, str],
    messages: list[tuple[dict[str, Any], int]],
) -> dict[str, Any]:
    def fn(values: dict[str, Any]) -> dict[str, Any]:
        return {"#map": [[k, v] for k, v in values.items()]}

    return {
        "#meta": {"index": 0},
        "mbt::actionTaken": action,
        "currentTerm": fn(terms),
        "state": fn(roles),
        "log": fn(
            {"s1": [{"term": 1, "value": "v"}] if action == "ClientRequest" else [], "s2": []}
        ),
        "commitIndex": fn({"s1": 0, "s2": 0}),
        "votedFor": fn({"s1": "Nil", "s2": "Nil"}),
        "messages": {"#map": [[m, c] for m, c in messages]},
    }


def test_tla_or_quint_raft_itf_is_recognised_by_its_variable_names() -> None:
    """Raft as TLA+ (raft.tla) and Quint write it: node → term functions and a bag of
    messages with msource/mdest; Quint's mbt::actionTaken names the step."""
    request = {"mtype": "RequestVoteRequest", "mterm": 2, "msource": "s1", "mdest": "s2"}
    follower = {"s1": "Follower", "s2": "Follower"}
    candidate = {"s1": "Candidate", "s2": "Follower"}
    document = {
        "#meta": {"format": "ITF", "description": "Created by Apalache"},
        "vars": ["currentTerm", "state", "log", "commitIndex", "votedFor", "messages"],
        "states": [
            _tla_state("init", {"s1": 1, "s2": 1}, follower, []),
            _tla_state("Timeout", {"s1": 2, "s2": 1}, candidate, []),
            _tla_state("RequestVote", {"s1": 2, "s2": 1}, candidate, [(request, 1)]),
            _tla_state("HandleRequestVoteRequest", {"s1": 2, "s2": 2}, candidate, []),
        ],
    }
    diagram = diagram_from_itf(document, "ElectionSafety")
    assert diagram.recognised and diagram.source == "ITF (TLA+/Quint Raft)"
    assert diagram.lifelines == ("s1", "s2")
    assert [(m.sender, m.receiver, m.fate, m.sent, m.ended) for m in diagram.messages] == [
        ("s1", "s2", "delivered", 2, 3)
    ]
    assert diagram.steps[1].nodes["s1"].role == "candidate" and diagram.steps[1].label == "Timeout"
    assert "s2: term 1 → 2" in diagram.steps[3].notes
    assert diagram.steps[3].violation == "ElectionSafety"


def test_an_itf_that_is_not_a_cluster_is_drawn_as_its_variables_and_says_so() -> None:
    document = {
        "vars": ["x"],
        "states": [{"#meta": {"index": 0}, "x": 1}, {"#meta": {"index": 1}, "x": {"#bigint": "2"}}],
    }
    diagram = diagram_from_itf(document)
    assert not diagram.recognised and diagram.lifelines == ()
    assert "not recognised as a Raft cluster" in diagram.notes[0] and "x" in diagram.notes[0]
    assert [s.raw["x"] for s in diagram.steps] == ["1", "2"]


def test_bad_itf_input_is_refused_with_what_to_give(tmp_path: Path) -> None:
    path = tmp_path / "bad.itf.json"
    path.write_text(json.dumps({"states": "nope"}))
    with pytest.raises(DiagramInputError, match="'states' list"):
        load_itf(path)
    path.write_text("{not json")
    with pytest.raises(DiagramInputError, match="not a readable ITF"):
        load_itf(path)
    assert run(["diagram", str(path), "-o", str(tmp_path / "x.html")]) == ExitCode.BAD_INPUT
    assert not (tmp_path / "x.html").exists()
    with pytest.raises(DiagramInputError, match="no states"):
        diagram_from_itf({"states": []})


def test_a_failing_trace_validation_is_drawn_up_to_the_broken_rule(tmp_path: Path) -> None:
    paths = figure8_run(bug=True).write(tmp_path)
    diagram = diagram_from_traces(paths)
    assert diagram.invariant == "LeaderCommit" and diagram.lifelines == ("n1", "n2", "n3")
    assert diagram.violation_step == len(diagram.steps) - 1
    assert "an entry of term 1" in diagram.notes[0]
    lost = [m for m in diagram.messages if m.fate == "in flight"]
    assert [(m.sender, m.receiver) for m in lost] == [("n1", "n2")]  # the APP that reached nobody
    assert all(
        m.ended is not None and m.ended >= m.sent for m in diagram.messages if m.fate == "delivered"
    )
    assert diagram.steps[-1].nodes["n1"].role == "leader"
    assert diagram.steps[-1].nodes["n1"].log[:1] == ("1",)


def test_a_restart_in_the_traces_is_noted_on_its_member(tmp_path: Path) -> None:
    diagram = diagram_from_traces([tmp_path] if clean_run().write(tmp_path) else [])
    assert diagram.violation_step is None and diagram.invariant == ""
    restarts = [s for s in diagram.steps if "n3 restarted (crashed before)" in s.notes]
    assert len(restarts) == 1 and restarts[0].actor == "n3"


def test_configuration_changes_in_the_traces_are_drawn(tmp_path: Path) -> None:
    """Format 1.1: conf change entries marked in the logs, each persist and apply of one
    noted, and a member's new configuration noted with its voters and learners."""
    diagram = diagram_from_traces(MembershipRun().build().write(tmp_path))
    assert diagram.violation_step is None and diagram.lifelines == ("n1", "n2", "n3")
    notes = [note for step in diagram.steps for note in step.notes]
    assert "n1 persists conf change 2: +learner n2" in notes
    assert "n1 applies conf change 4: +n2" in notes
    assert "n1 applies conf change 9: -n2" in notes
    assert "n1 configuration: voters n1,n2, learners n3" in notes
    assert "n1 configuration: voters n1,n3" in notes
    assert diagram.steps[-1].nodes["n1"].log[:4] == ("1", "1:+learner n2", "1", "1:+n2")
    assert diagram.steps[-1].nodes["n1"].log[8] == "1:-n2"


def test_members_are_named_as_trace_validation_names_them(tmp_path: Path) -> None:
    """A real cluster's member ids are 64-bit numbers: the lifelines, votes, message ends
    and labels say n1, n2, n3 (the files' order), as check-trace's explanations do."""
    paths = figure8_run(bug=True).write(tmp_path)
    big = {1: 7394514048465983345, 2: 3861212881127072443, 3: 7206620231537173646}

    def renamed(line: dict[str, Any]) -> dict[str, Any]:
        for record, field in ((line, "node"), (line, "vote"), (line, "leader")):
            if record.get(field):
                record[field] = big[record[field]]
        for field in ("from", "to"):
            if line.get("message", {}).get(field):
                line["message"][field] = big[line["message"][field]]
        return line

    for path in paths:
        lines = [renamed(json.loads(x)) for x in path.read_text().splitlines()]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        assert str(big[1]) in path.read_text()
    diagram = diagram_from_traces(paths)
    assert diagram.lifelines == ("n1", "n2", "n3") and diagram.invariant == "LeaderCommit"
    assert all(str(large) not in step.label for step in diagram.steps for large in big.values())
    assert {(m.sender, m.receiver) for m in diagram.messages} <= {
        (a, b) for a in diagram.lifelines for b in diagram.lifelines
    }
    assert any(state.vote == "n1" for step in diagram.steps for state in step.nodes.values())


QUINT_ITF = Path(__file__).parent / "data" / "quint_votes.itf.json"


def test_a_trace_that_quint_wrote_is_drawn() -> None:
    """Real Quint output (data/quint_votes.qnt says how it was made): variables qualified
    by their module (`buggy::votes::currentTerm`), ints as #bigint, maps as #map, the
    messages a #set of records, the actions named by mbt::actionTaken. It has ITF's
    shape by our own check, and is drawn as a cluster: two leaders of term 2 at the end."""
    document = load_itf(QUINT_ITF)
    assert problems(document) == []
    diagram = diagram_from_itf(document, "oneLeaderPerTerm")
    assert diagram.recognised and diagram.lifelines == ("n1", "n2", "n3")
    assert [s.label for s in diagram.steps[:3]] == ["init", "timeout", "handleRequestVote"]
    last = diagram.steps[-1]
    assert last.violation == "oneLeaderPerTerm"
    assert {n for n, st in last.nodes.items() if st.role == "leader"} == {"n2", "n3"}
    assert {st.term for st in last.nodes.values()} == {2}
    delivered = [m for m in diagram.messages if m.fate == "delivered"]
    assert len(delivered) == 6 and "RequestVote term 2" in {m.label for m in delivered}

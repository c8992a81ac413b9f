"""Rule LeaderElection on hand-made format-1.1 traces: a node becomes leader of a term
only with grants from a majority of the voters of its configuration at the win. Runs
that hold: 3 voters, 5 voters, a learner present, a single voter alone, PreVote then a
real vote, a configuration change between campaign and win (etcd raft tallies the
voters of the configuration in force at the win). Planted runs refused at the winning
line, with the grants named and why each did or did not count: a learner's grant, a
removed member's, too few grants, a grant of an earlier term, pre-votes taken for votes,
and a removal between campaign and win that leaves too few."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trace_scenarios import TraceBuilder, message

from etcdspec.checker.diagram_trace import diagram_from_traces
from etcdspec.checker.trace_check import check_traces
from etcdspec.checker.trace_result import TraceResult
from etcdspec.verdict import Verdict

CANDIDATE = 1


class ElectionRun:
    """n1 campaigns among `voters` (and `learners`), every member traced; the other
    members answer its vote requests, and n1's trace says where it wins."""

    def __init__(self, voters: list[int], learners: list[int] | None = None, **state: Any) -> None:
        learners = learners or []
        self.b = TraceBuilder(nodes=tuple(sorted(voters + learners)), minor=1)
        self.conf = {"voters": voters, "learners": learners}
        for node in self.b.lines:
            self.b.event(node, "start", conf=self.conf, **state)
        self.last = (state.get("last_index", 0), state.get("last_term", 0))

    def _request(self, term: int, peer: int, kind: str = "VOTE") -> dict[str, Any]:
        index, log_term = self.last
        return message(kind, CANDIDATE, peer, term, index=index, log_term=log_term)

    def campaign(self, term: int, peers: list[int]) -> None:
        self.b.event(CANDIDATE, "persist", term=term, vote=CANDIDATE, role="candidate")
        for peer in peers:
            self.b.event(CANDIDATE, "send", message=self._request(term, peer))

    def vote(self, peer: int, term: int, grant: bool = True) -> dict[str, Any]:
        """`peer` receives n1's request of `term` and answers (a grant is persisted first)."""
        state = {"term": term, "vote": CANDIDATE} if grant else {"term": term}
        self.b.event(peer, "receive", message=self._request(term, peer), **state)
        self.b.event(peer, "persist")
        answer = message("VOTE_RESP", peer, CANDIDATE, term, reject=not grant)
        self.b.event(peer, "send", message=answer)
        return answer

    def deliver(self, answer: dict[str, Any], win: bool = False) -> dict[str, Any]:
        """n1 receives `answer`; with `win` its role goes to leader there."""
        return self.b.event(CANDIDATE, "receive", message=answer, **self._won(win))

    def answer(self, peer: int, term: int, grant: bool = True, win: bool = False) -> dict[str, Any]:
        return self.deliver(self.vote(peer, term, grant), win)

    def _won(self, win: bool) -> dict[str, Any]:
        if not win:
            return {}
        term = self.b.state[CANDIDATE]["term"]
        return {"role": "leader", "last_index": self.last[0] + 1, "last_term": term}

    def line(self, event: dict[str, Any]) -> int:
        return self.b.lines[CANDIDATE].index(event) + 1


def _check(run: ElectionRun, tmp_path: Path) -> TraceResult:
    return check_traces(run.b.write(tmp_path))


# --------------------------------------------------------------------- runs that hold


def three_voters() -> ElectionRun:
    run = ElectionRun([1, 2, 3])
    run.campaign(1, [2, 3])
    run.answer(2, 1, win=True)
    run.answer(3, 1)  # arrives at the leader: nothing to count any more
    return run


def five_voters() -> ElectionRun:
    run = ElectionRun([1, 2, 3, 4, 5])
    run.campaign(1, [2, 3, 4, 5])
    run.answer(2, 1)
    run.answer(4, 1, grant=False)
    run.answer(3, 1, win=True)  # itself, n2 and n3: 3 of 5
    return run


def learner_present() -> ElectionRun:
    run = ElectionRun([1, 2, 3], [4])
    run.campaign(1, [2, 3, 4])
    run.answer(4, 1)  # a learner's grant: received, not counted
    run.answer(3, 1, grant=False)
    run.answer(2, 1, win=True)
    return run


def single_voter() -> ElectionRun:
    run = ElectionRun([1], [2])
    run.campaign(1, [])
    run.b.event(CANDIDATE, "role", role="leader", last_index=1, last_term=1, leader=1)
    return run


def prevote_then_vote() -> ElectionRun:
    """PreVote: n1 asks at term 1 without changing its term, becomes a candidate on
    n2's pre-vote, and wins on n3's real vote."""
    run = ElectionRun([1, 2, 3])
    run.b.event(CANDIDATE, "role", role="precandidate")
    for peer in (2, 3):
        request = run._request(1, peer, "PRE_VOTE")
        run.b.event(CANDIDATE, "send", message=request)
        run.b.event(peer, "receive", message=request)
        run.b.event(peer, "send", message=message("PRE_VOTE_RESP", peer, CANDIDATE, 1))
    pre_vote = message("PRE_VOTE_RESP", 2, CANDIDATE, 1)
    run.b.event(CANDIDATE, "receive", message=pre_vote, term=1, vote=1, role="candidate")
    run.b.event(CANDIDATE, "persist")
    run.b.event(CANDIDATE, "send", message=run._request(1, 3))
    late_pre_vote = message("PRE_VOTE_RESP", 3, CANDIDATE, 1)
    run.b.event(CANDIDATE, "receive", message=late_pre_vote)  # no vote: it does not count
    run.answer(3, 1, win=True)
    return run


def _changing(grant_after_change: bool) -> tuple[ElectionRun, dict[str, Any]]:
    """Voters [1, 2, 3, 4] (a quorum of 3); n1 campaigns in term 2 with the removal of
    n2 committed at index 1 but not yet applied (our core and etcd raft refuse such a
    campaign; the traces are judged all the same). n2 grants (2 of 4), n1 applies the
    removal (voters [1, 3, 4], a quorum of 2, n2's grant no longer counts), and n3
    answers: a grant wins (itself and n3); a rejection taken for a win is refused."""
    run = ElectionRun([1, 2, 3, 4], term=1, last_index=1, last_term=1, commit=1)
    run.campaign(2, [2, 3, 4])
    run.answer(2, 2)
    run.b.event(
        CANDIDATE,
        "apply",
        entries=[[1, 1]],
        applied=1,
        conf_changes=[[1, "REMOVE_NODE", 2]],
        conf={"voters": [1, 3, 4], "learners": []},
    )
    return run, run.answer(3, 2, grant=grant_after_change, win=True)


def change_between_campaign_and_win() -> ElectionRun:
    return _changing(grant_after_change=True)[0]


HOLDING = [
    (three_voters, 1, 2),
    (five_voters, 1, 2),
    (learner_present, 1, 2),
    (single_voter, 1, 0),
    (prevote_then_vote, 1, 1),
    (change_between_campaign_and_win, 1, 2),
]


@pytest.mark.parametrize(
    ("build", "elections", "grants"), HOLDING, ids=[h[0].__name__ for h in HOLDING]
)
def test_elections_by_a_quorum_of_the_configuration_hold(
    tmp_path: Path, build: Any, elections: int, grants: int
) -> None:
    result = _check(build(), tmp_path)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.witness("elections checked") == elections
    assert result.witness("vote grants received") >= grants
    assert f"{elections} elections checked" in result.describe()


# --------------------------------------------------------------------- planted wins


def learner_grant() -> tuple[ElectionRun, dict[str, Any]]:
    run = ElectionRun([1, 2, 3], [4])
    run.campaign(1, [2, 3, 4])
    return run, run.answer(4, 1, win=True)


def removed_member_grant() -> tuple[ElectionRun, dict[str, Any]]:
    """n2 was removed (voters [1, 3, 4]) but still answers, as a removed member does."""
    run = ElectionRun([1, 3, 4])
    run.b.lines[2] = []
    run.b.event(2, "start", conf={"voters": [1, 2, 3, 4], "learners": []})
    run.b.lines = dict(sorted(run.b.lines.items()))  # files in node order: n2 is node 2
    run.campaign(1, [2, 3, 4])
    return run, run.answer(2, 1, win=True)


def too_few_grants() -> tuple[ElectionRun, dict[str, Any]]:
    run = ElectionRun([1, 2, 3, 4, 5])
    run.campaign(1, [2, 3, 4, 5])
    run.answer(3, 1, grant=False)
    return run, run.answer(2, 1, win=True)


def earlier_term_grant() -> tuple[ElectionRun, dict[str, Any]]:
    """n2's grant of term 1 arrives after n1 campaigned again in term 2."""
    run = ElectionRun([1, 2, 3])
    run.campaign(1, [2, 3])
    late = run.vote(2, 1)
    run.campaign(2, [3])
    return run, run.deliver(late, win=True)


def pre_votes_taken_for_votes() -> tuple[ElectionRun, dict[str, Any]]:
    run = ElectionRun([1, 2, 3])
    run.b.event(CANDIDATE, "role", role="precandidate")
    for peer in (2, 3):
        request = run._request(1, peer, "PRE_VOTE")
        run.b.event(CANDIDATE, "send", message=request)
        run.b.event(peer, "receive", message=request)
        run.b.event(peer, "send", message=message("PRE_VOTE_RESP", peer, CANDIDATE, 1))
    pre_vote = message("PRE_VOTE_RESP", 2, CANDIDATE, 1)
    run.b.event(CANDIDATE, "receive", message=pre_vote, term=1, vote=1, role="candidate")
    run.b.event(CANDIDATE, "persist")
    win = run.b.event(
        CANDIDATE,
        "receive",
        message=message("PRE_VOTE_RESP", 3, CANDIDATE, 1),
        role="leader",
        last_index=1,
        last_term=1,
    )
    return run, win


def removal_leaves_too_few() -> tuple[ElectionRun, dict[str, Any]]:
    return _changing(grant_after_change=False)


PLANTED = [
    (learner_grant, "n4 (received at", "a learner: not counted", "of voters n1,n2,n3 learners n4)"),
    (removed_member_grant, "n2 (received at", "not in its configuration", "of voters n1,n3,n4)"),
    (
        too_few_grants,
        "with 2 of the 3 votes it needs",
        "n2 (received at",
        "of voters n1,n2,n3,n4,n5)",
    ),
    (earlier_term_grant, "not counted: n2's grant of term 1 at", "itself (its own vote)", "term 2"),
    (
        pre_votes_taken_for_votes,
        "with 1 of the 2 votes",
        "votes in this candidacy: itself",
        "n3's pre-vote at",
    ),
    (
        removal_leaves_too_few,
        "n2 (received at",
        "not in its configuration",
        "(a majority of voters n1,n3,n4)",
    ),
]


@pytest.mark.parametrize(
    ("plant", "first", "second", "third"), PLANTED, ids=[p[0].__name__ for p in PLANTED]
)
def test_planted_win_without_a_quorum_is_refused_at_its_line(
    tmp_path: Path, plant: Any, first: str, second: str, third: str
) -> None:
    run, win = plant()
    result = _check(run, tmp_path)
    failure = result.failure
    assert result.verdict is Verdict.FALSE and failure is not None, result.describe()
    assert failure.rule == "LeaderElection", result.describe()
    assert failure.event.location == f"{tmp_path / 'n1.trace.ndjson'}:{run.line(win)}"
    for needle in (first, second, third):
        assert needle in failure.explanation, failure.explanation
    assert "became leader of term" in failure.explanation
    assert "LeaderElection broken" in result.describe()
    assert failure.states[0].node == CANDIDATE and failure.states[0].role == "leader"


def test_a_leader_whose_vote_is_not_its_own_counts_only_grants(tmp_path: Path) -> None:
    """n1 voted for n2 in term 1 and then shows itself leader of term 1 with n3's grant:
    its own vote is not counted (it went to n2), so 1 of the 2 needed."""
    run = ElectionRun([1, 2, 3])
    run.b.event(CANDIDATE, "persist", term=1, vote=2)
    grant = message("VOTE_RESP", 3, CANDIDATE, 1)
    run.b.event(3, "receive", message=message("VOTE", CANDIDATE, 3, 1), term=1, vote=1)
    run.b.event(3, "persist")
    run.b.event(3, "send", message=grant)
    run.b.event(CANDIDATE, "persist", role="candidate")
    win = run.deliver(grant, win=True)
    failure = _check(run, tmp_path).failure
    assert failure is not None and failure.rule == "LeaderElection", failure
    assert failure.event.location.endswith(f"n1.trace.ndjson:{run.line(win)}")
    assert "not itself (its vote in term 1 is for n2)" in failure.explanation


def test_accepted_wins_are_tallied_with_the_votes_counted(tmp_path: Path) -> None:
    """TraceResult.elections: the learner's grant was received but is not among the
    votes; its JSON form carries the same."""
    result = _check(learner_present(), tmp_path)
    (tally,) = result.elections
    assert tally.describe() == (
        "n1 elected leader of term 1 by n1,n2 (a quorum of 2 of voters n1,n2,n3 learners n4)"
    )
    assert tally.location.endswith("n1.trace.ndjson:" + str(len(learner_present().b.lines[1])))
    assert result.to_json()["elections"][0]["votes"] == ["n1", "n2"]


def test_the_diagram_notes_each_win_and_ends_at_a_refused_one(tmp_path: Path) -> None:
    (tmp_path / "ok").mkdir()
    changed = diagram_from_traces(change_between_campaign_and_win().b.write(tmp_path / "ok"))
    notes = [(step.actor, note) for step in changed.steps for note in step.notes]
    assert ("n1", "n1 configuration: voters n1,n3,n4") in notes
    assert ("n1", "n1 elected leader of term 2 by n1,n3 (a quorum of 2 of voters n1,n3,n4)") in (
        notes
    )
    (tmp_path / "bad").mkdir()
    refused = diagram_from_traces(removal_leaves_too_few()[0].b.write(tmp_path / "bad"))
    assert refused.invariant == "LeaderElection"
    assert refused.steps[-1].violation == "LeaderElection"
    assert "not in its configuration: not counted" in refused.notes[0]

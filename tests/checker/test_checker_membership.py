"""The Membership check on hand-made observations: two leaders in one term is violated,
no leader observed is unknown (never a pass), a new leader still showing its
predecessor's term (etcd's Status reports the last applied entry's term) is one tenure in
its own term, and the final member list must be the one the changes left, on every
member."""

from __future__ import annotations

import pytest

from etcdspec.checker.membership import (
    LeaderObservation,
    MemberChange,
    MemberRecord,
    check_membership,
    tenures,
    two_leaders,
)
from etcdspec.verdict import Verdict

A, B, C = 0xA1, 0xB2, 0xC3
MEMBERS = (MemberRecord(A, "m1"), MemberRecord(B, "m2"), MemberRecord(C, "m3"))
AGREED = {"m1": MEMBERS, "m2": MEMBERS, "m3": MEMBERS}


def seen(seconds: float, member: int, term: int, leader: int) -> LeaderObservation:
    names = {A: "m1", B: "m2", C: "m3"}
    return LeaderObservation(int(seconds * 1e9), names[member], member, term, leader)


STEADY = [seen(0.0, A, 2, A), seen(0.0, B, 2, A), seen(0.1, C, 2, A)]


def test_one_leader_per_term_and_the_expected_list_hold() -> None:
    handover = [seen(1.0, B, 3, B), seen(1.0, A, 3, B), seen(1.1, C, 3, B)]
    result = check_membership(STEADY + handover, [], MEMBERS, AGREED)
    assert result.verdict is Verdict.TRUE, result.describe()
    assert "2 terms" in result.summary


def test_two_leaders_in_one_term_is_violated() -> None:
    split = [*STEADY, seen(0.5, B, 2, B), seen(0.6, C, 2, B)]
    result = check_membership(split, [], MEMBERS, AGREED)
    assert result.verdict is Verdict.FALSE
    assert "two leaders in term 2: m1 and m2" in result.summary
    assert len(two_leaders(split)) == 1


def test_no_leader_observed_is_unknown() -> None:
    leaderless = [seen(0.0, A, 2, 0), seen(0.0, B, 2, 0)]
    for observations in ([], leaderless):
        result = check_membership(observations, [], MEMBERS, AGREED)
        assert result.verdict is Verdict.UNKNOWN, result.describe()
        assert "no leader observed" in result.summary


def test_a_new_leader_showing_its_predecessors_term_is_one_tenure_in_its_own() -> None:
    # B has won term 3 but has not applied an entry of it yet: its Status says term 2.
    lagging = [*STEADY, seen(1.0, B, 2, B), seen(1.2, B, 3, B), seen(1.3, A, 3, B)]
    assert [(t.member, t.term) for t in tenures(lagging)] == [("m1", 2), ("m2", 3)]
    assert check_membership(lagging, [], MEMBERS, AGREED).verdict is Verdict.TRUE


def test_the_same_member_leading_twice_in_one_term_is_one_leader() -> None:
    again = [seen(0.0, A, 2, A), seen(0.3, A, 2, 0), seen(0.6, A, 2, A)]
    assert len(tenures(again)) == 2
    assert check_membership(again, [], MEMBERS, AGREED).verdict is Verdict.TRUE


@pytest.mark.parametrize(
    ("final", "verdict", "words"),
    [
        ({"m1": MEMBERS[:2], "m2": MEMBERS[:2]}, Verdict.FALSE, "expected"),
        ({"m1": MEMBERS, "m2": MEMBERS[:2]}, Verdict.FALSE, "disagree"),
        (
            {"m1": (*MEMBERS[:2], MemberRecord(C, "m3", True))},
            Verdict.FALSE,
            "expected",
        ),
        (None, Verdict.UNKNOWN, "could not be read"),
    ],
)
def test_the_final_member_list_must_be_the_one_the_changes_left(
    final: dict[str, tuple[MemberRecord, ...]] | None, verdict: Verdict, words: str
) -> None:
    result = check_membership(STEADY, [], MEMBERS, final)
    assert result.verdict is verdict, result.describe()
    assert words in result.summary


def test_no_leader_observed_after_a_change_is_unknown() -> None:
    late = MemberChange(int(5e9), "remove", MemberRecord(C, "m3"), MEMBERS[:2])
    result = check_membership(STEADY, [late], MEMBERS[:2], {"m1": MEMBERS[:2]})
    assert result.verdict is Verdict.UNKNOWN
    assert "no leader observed after 5.00s remove m3" in result.summary
    after = [*STEADY, seen(6.0, A, 2, A)]
    assert check_membership(after, [late], MEMBERS[:2], {"m1": MEMBERS[:2]}).verdict is (
        Verdict.TRUE
    )


def test_an_undecided_change_makes_the_run_unknown_and_changes_are_listed() -> None:
    change = MemberChange(0, "remove", MemberRecord(C, "m3"), MEMBERS[:2])
    refused = "not done: target does not serve MemberAdd (UNIMPLEMENTED)"
    result = check_membership(STEADY, [change], MEMBERS[:2], {"m1": MEMBERS[:2]}, (refused,))
    assert result.verdict is Verdict.UNKNOWN
    assert "target does not serve MemberAdd" in result.summary
    assert "0.00s remove m3 c3 -> [m1 a1, m2 b2]" in result.details
    violated = check_membership(STEADY, [change], MEMBERS, {"m1": MEMBERS[:2]}, (refused,))
    assert violated.verdict is Verdict.FALSE  # violated outranks unknown

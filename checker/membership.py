"""The membership history of a run and its check: no two leaders in one term across a
member change, and the final member list the one the changes left.

Contract:
- Input is plain data any harness can record: `LeaderObservation`s (one member's Status
  answer: its id, the Raft term it reports and the leader it names, on the history's
  clock), the `MemberChange`s made (remove, add, add-learner, promote; each with the
  member list it left), the `MemberRecord`s expected at the end, each member's final
  MemberList, and the reasons a change could not be judged (`undecided`).
- Leaders are taken from self-claims only (a member naming itself leader). One member's
  consecutive claims are one tenure, and its term is the highest term seen in it: etcd's
  Status reports the term of the last applied entry, so a leader elected a moment ago
  still shows its predecessor's term until its first entry applies. Two tenures of
  different members with the same term are two leaders in one term: violated.
- The final member list: every member must list the same members (ids, names, learner
  flags) and that list must be the expected one; else violated. Lists that could not be
  read are unknown.
- Verdicts: violated > unknown > holds. No leader observed at all, none observed after
  some change, no final list, or any undecided change: unknown with the reason; never a
  pass on no evidence.
- `check_membership` does no I/O; `describe()` of each value is its report line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from etcdspec.checker.results import CheckResult
from etcdspec.verdict import Verdict

NAME = "Membership"


@dataclass(frozen=True)
class LeaderObservation:
    """One Status answer: `member` (id `member_id`) reports `term` and names `leader`."""

    time: int  # ns, the history's clock
    member: str
    member_id: int
    term: int
    leader: int  # 0: none known

    @property
    def claims_leadership(self) -> bool:
        return self.leader != 0 and self.leader == self.member_id

    def describe(self) -> str:
        named = f"leader {self.leader:x}" if self.leader else "no leader"
        return f"{self.time / 1e9:.2f}s {self.member} ({self.member_id:x}) term {self.term} {named}"

    def to_json(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "member": self.member,
            "member_id": f"{self.member_id:x}",
            "term": self.term,
            "leader": f"{self.leader:x}",
        }


@dataclass(frozen=True)
class MemberRecord:
    """A member as a member list shows it."""

    member_id: int
    name: str
    is_learner: bool = False

    def describe(self) -> str:
        return f"{self.name or '(unstarted)'} {self.member_id:x}" + (
            " learner" if self.is_learner else ""
        )


@dataclass(frozen=True)
class MemberChange:
    """One change of the member list the run made, and the list it left."""

    time: int  # ns, when the cluster answered the call
    change: str  # remove, add, add-learner, promote
    member: MemberRecord
    members_after: tuple[MemberRecord, ...]

    def describe(self) -> str:
        after = ", ".join(m.describe() for m in self.members_after)
        return f"{self.time / 1e9:.2f}s {self.change} {self.member.describe()} -> [{after}]"

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time, "change": self.change, "describe": self.describe()}


@dataclass(frozen=True)
class Tenure:
    """One member's consecutive claims to lead."""

    member: str
    member_id: int
    term: int
    first: int
    last: int

    def describe(self) -> str:
        return (
            f"{self.member} ({self.member_id:x}) led in term {self.term} "
            f"from {self.first / 1e9:.2f}s to {self.last / 1e9:.2f}s"
        )


def tenures(observations: list[LeaderObservation]) -> list[Tenure]:
    """Each member's runs of consecutive self-claims, with the highest term in each."""
    found: list[Tenure] = []
    by_member: dict[int, list[LeaderObservation]] = {}
    for observation in sorted(observations, key=lambda o: o.time):
        by_member.setdefault(observation.member_id, []).append(observation)
    for member_id, seen in by_member.items():
        run: list[LeaderObservation] = []
        ends: list[LeaderObservation | None] = [*seen, None]  # None closes the last run
        for each in ends:
            if each is not None and each.claims_leadership:
                run.append(each)
                continue
            if run:
                term = max(o.term for o in run)
                found.append(Tenure(run[0].member, member_id, term, run[0].time, run[-1].time))
                run = []
    return sorted(found, key=lambda t: (t.term, t.first))


def two_leaders(observations: list[LeaderObservation]) -> list[tuple[Tenure, Tenure]]:
    """Pairs of tenures of different members in the same term."""
    clashes = []
    found = tenures(observations)
    for index, first in enumerate(found):
        for second in found[index + 1 :]:
            if second.term == first.term and second.member_id != first.member_id:
                clashes.append((first, second))
    return clashes


def _shown(records: tuple[MemberRecord, ...]) -> str:
    return "[" + ", ".join(r.describe() for r in sorted(records, key=lambda r: r.name)) + "]"


def check_membership(
    observations: list[LeaderObservation],
    changes: list[MemberChange],
    expected: tuple[MemberRecord, ...],
    final: dict[str, tuple[MemberRecord, ...]] | None,
    undecided: tuple[str, ...] = (),
) -> CheckResult:
    """The Membership check (see the module notes)."""
    started = time.monotonic()
    details: list[str] = []
    verdict = Verdict.TRUE
    summary: list[str] = []
    clashes = two_leaders(observations)
    found = tenures(observations)
    if clashes:
        verdict = Verdict.FALSE
        first, second = clashes[0]
        summary.append(f"two leaders in term {first.term}: {first.member} and {second.member}")
        details.extend(f"{a.describe()}; {b.describe()}" for a, b in clashes)
    elif not found:
        verdict = verdict.merge(Verdict.UNKNOWN)
        summary.append(f"no leader observed in {len(observations)} Status answers")
    else:
        terms = len({t.term for t in found})
        summary.append(f"one leader per term ({terms} terms, {len(observations)} observations)")
        unseen = [c for c in changes if not any(t.last >= c.time for t in found)]
        if unseen:
            verdict = verdict.merge(Verdict.UNKNOWN)
            summary.append(f"no leader observed after {unseen[0].describe()}")
    want = frozenset(expected)
    if final is None or not final:
        verdict = verdict.merge(Verdict.UNKNOWN)
        summary.append("the final member list could not be read")
    else:
        lists = {frozenset(records) for records in final.values()}
        if len(lists) > 1:
            verdict = Verdict.FALSE
            summary.append("members disagree on the final member list")
            details.extend(f"{name} lists {_shown(records)}" for name, records in final.items())
        elif lists.pop() != want:
            verdict = Verdict.FALSE
            listed = next(iter(final.values()))
            summary.append(f"final member list {_shown(listed)}, expected {_shown(expected)}")
        else:
            summary.append(f"final member list as the changes left it: {_shown(expected)}")
    if undecided:
        verdict = verdict.merge(Verdict.UNKNOWN)
        summary.append(f"{len(undecided)} change(s) undecided: {undecided[0]}")
        details.extend(undecided)
    details.extend(change.describe() for change in changes)
    return CheckResult(
        NAME,
        verdict,
        "; ".join(summary) + f"; {len(changes)} member changes",
        time.monotonic() - started,
        tuple(details),
    )

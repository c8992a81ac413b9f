"""The Ready pump's plan (impl/server/pump.py) against the Ready contract, over every case.

The contract (impl/raft/driver.py), restated here on its own, step by step, so that the
plan is checked against a second statement of it rather than against itself:
- Durable first: no message leaves before the Ready's write is durable (FSYNC_INLINE
  done, or AWAIT_FSYNC), except a leader's MsgApps (SEND_APPENDS), and those only when
  the Ready changes neither term nor vote, restores no snapshot and has entries.
- Nothing is applied or restored before the write is durable, except committed entries
  earlier Readies persisted (APPLY_PERSISTED, while a worker's fsync runs).
- A received snapshot is restored before any entry after it is applied.
- Every message is sent once; every committed entry applied (or handed to a follower's
  batch) once; reads are released after the apply; ADVANCE comes last, once.
Every combination of facts a real Ready can have (of 2^11) and settings (2^5) is planned,
and each named variation is shown to change the plan only where it says; the planted bug (ack_before_fsync) breaks
the first rule, so the check below can fail.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import fields, replace

import pytest

from etcdspec.impl.raft.driver import RaftConfig, RaftDriver, Ready
from etcdspec.impl.raft.messages import Entry, HardState, Snapshot, SnapshotMeta
from etcdspec.impl.server.pump import (
    PLAIN,
    PumpSettings,
    ReadyFacts,
    Step,
    describe_plan,
    facts_of,
    leader_sends_early,
    plan,
)

FACT_NAMES = [f.name for f in fields(ReadyFacts)]
SETTING_NAMES = [f.name for f in fields(PumpSettings)]
DURABLE = (Step.FSYNC_INLINE, Step.AWAIT_FSYNC)
APPLIES = (Step.APPLY_PERSISTED, Step.APPLY, Step.APPLY_OR_DEFER)


def _all(cls: type, names: list[str]) -> list:  # type: ignore[type-arg]
    return [
        cls(**dict(zip(names, values, strict=True)))
        for values in itertools.product((False, True), repeat=len(names))
    ]


ALL_FACTS = _all(ReadyFacts, FACT_NAMES)
ALL_SETTINGS = _all(PumpSettings, SETTING_NAMES)


def _possible(facts: ReadyFacts) -> bool:
    """Facts a real Ready can have (facts_of never gives the others)."""
    if facts.needs_fsync and not facts.writes:
        return False
    if (facts.entries or facts.snapshot) and not (facts.writes and facts.needs_fsync):
        return False
    if not facts.term_vote_kept and not (facts.writes and facts.needs_fsync):
        return False
    return not (facts.committed_persisted and (not facts.committed or facts.snapshot))


def contract_violations(
    facts: ReadyFacts, settings: PumpSettings, steps: tuple[Step, ...]
) -> list[str]:
    """The contract's rules (module docstring) that `steps` break, as readable lines."""
    found: list[str] = []
    position = {step: i for i, step in enumerate(steps)}
    durable_at = next((position[s] for s in DURABLE if s in position), None)
    fsynced = facts.writes and facts.needs_fsync
    if fsynced and durable_at is None:
        found.append("the Ready's entries or vote are never made durable")
    if steps.count(Step.ADVANCE) != 1 or steps[-1] is not Step.ADVANCE:
        found.append("ADVANCE is not last, once")
    sends = [s for s in steps if s in (Step.SEND, Step.SEND_REST)]
    if facts.messages and len(sends) != 1:
        found.append(f"the messages are sent by {sends}, not once")
    if not facts.messages and (sends or Step.SEND_APPENDS in position):
        found.append("a send with no messages")
    if (Step.SEND_APPENDS in position) != (Step.SEND_REST in position):
        found.append("SEND_APPENDS without SEND_REST (or the reverse)")
    for step in (Step.SEND, Step.SEND_REST, Step.RESTORE, Step.APPLY, Step.APPLY_OR_DEFER):
        if fsynced and step in position and (durable_at is None or position[step] < durable_at):
            found.append(f"{step.value} before the write is durable")
    if Step.SEND_APPENDS in position:
        if not (facts.leader and facts.entries and facts.term_vote_kept and not facts.snapshot):
            found.append(
                "MsgApps sent early by a Ready that changes term or vote, restores a snapshot, or is not a leader's"
            )
        if durable_at is not None and position[Step.SEND_APPENDS] > durable_at:
            found.append("SEND_APPENDS after the fsync: nothing early about it")
    if Step.APPLY_PERSISTED in position and not facts.committed_persisted:
        found.append("entries applied during the fsync that earlier Readies did not persist")
    applies = [s for s in steps if s in APPLIES]
    if facts.committed and len(applies) != 1:
        found.append(f"the committed entries are handled by {applies}, not once")
    if not facts.committed and applies:
        found.append("an apply with nothing committed")
    if Step.APPLY_OR_DEFER in position and facts.leader:
        found.append("a leader holds committed entries back")
    if Step.RESTORE in position and any(
        position[s] < position[Step.RESTORE] for s in applies if s is not Step.APPLY_PERSISTED
    ):
        found.append("entries applied before the snapshot they follow is restored")
    if facts.snapshot != (Step.RESTORE in position):
        found.append("a received snapshot not restored once")
    if Step.RELEASE_READS not in position or any(
        position[s] > position[Step.RELEASE_READS] for s in applies
    ):
        found.append("reads released before the apply")
    if not facts.writes and any(
        s in position for s in (Step.WRITE, Step.WRITE_LATE, Step.FSYNC_INLINE, Step.FSYNC_WORKER)
    ):
        found.append("a write with nothing to write")
    return found


def test_every_plan_keeps_the_ready_contract() -> None:
    checked = 0
    for facts in filter(_possible, ALL_FACTS):
        for settings in ALL_SETTINGS:
            if settings.ack_before_fsync:
                continue
            steps = plan(facts, settings)
            problems = contract_violations(facts, settings, steps)
            assert not problems, (
                f"{facts.describe()} / {settings.describe()}: {describe_plan(steps)}: {problems}"
            )
            checked += 1
    possible = list(filter(_possible, ALL_FACTS))
    assert len(possible) > 200 and checked == len(possible) * len(ALL_SETTINGS) // 2


def test_the_planted_bug_breaks_the_contract_whenever_there_is_a_vote_or_entry_to_send() -> None:
    """ack_before_fsync: messages leave before the write (and it has no fsync at all)."""
    settings = PumpSettings(ack_before_fsync=True)
    broken = [
        facts
        for facts in filter(_possible, ALL_FACTS)
        if contract_violations(facts, settings, plan(facts, settings))
    ]
    expected = [f for f in filter(_possible, ALL_FACTS) if f.writes and f.needs_fsync]
    assert broken == expected


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (ReadyFacts(), "release-reads -> advance"),
        (
            ReadyFacts(writes=True, needs_fsync=True, entries=True, messages=True, committed=True),
            "fsync-inline -> send -> apply -> release-reads -> advance",
        ),
        (
            ReadyFacts(
                writes=True, needs_fsync=True, snapshot=True, committed=True, soft_state=True
            ),
            "fsync-inline -> soft-state -> restore -> apply -> release-reads -> advance",
        ),
        (ReadyFacts(writes=True, messages=True), "write -> send -> release-reads -> advance"),
    ],
    ids=["empty", "entries", "snapshot", "commit-index-only"],
)
def test_with_every_variation_off_the_plan_is_the_plain_contract(
    facts: ReadyFacts, expected: str
) -> None:
    assert describe_plan(plan(facts, PLAIN)) == expected


LEADER_APPEND = ReadyFacts(
    writes=True,
    needs_fsync=True,
    entries=True,
    committed=True,
    committed_persisted=True,
    messages=True,
    leader=True,
    term_vote_kept=True,
)
FOLLOWER_APPEND = replace(LEADER_APPEND, leader=False)


@pytest.mark.parametrize(
    ("variation", "facts", "off", "on"),
    [
        (
            "fsync_inline",
            FOLLOWER_APPEND,
            "fsync-in-worker -> await-fsync -> send -> apply -> release-reads -> advance",
            "fsync-inline -> send -> apply -> release-reads -> advance",
        ),
        (
            "leader_sends_early",
            LEADER_APPEND,
            "fsync-inline -> send -> apply -> release-reads -> advance",
            "send-appends -> fsync-inline -> send-rest -> apply -> release-reads -> advance",
        ),
        (
            "apply_during_fsync",
            replace(FOLLOWER_APPEND, messages=False),
            "fsync-in-worker -> await-fsync -> apply -> release-reads -> advance",
            "fsync-in-worker -> apply-persisted -> await-fsync -> release-reads -> advance",
        ),
        (
            "defer_follower_apply",
            FOLLOWER_APPEND,
            "fsync-inline -> send -> apply -> release-reads -> advance",
            "fsync-inline -> send -> apply-or-defer -> release-reads -> advance",
        ),
    ],
)
def test_each_variation_changes_only_what_it_names(
    variation: str, facts: ReadyFacts, off: str, on: str
) -> None:
    base = replace(PLAIN, fsync_inline=variation != "apply_during_fsync")
    assert describe_plan(plan(facts, replace(base, **{variation: False}))) == off
    assert describe_plan(plan(facts, replace(base, **{variation: True}))) == on


def _readies(seed: int) -> list[tuple[Ready, bool, HardState]]:
    """Readies of a real 3-node run of the server's Raft core, with who made each (leader
    or not) and the hard state it had persisted before."""
    rng = random.Random(seed)
    drivers = {
        n: RaftDriver(RaftConfig(id=n, voters=(1, 2, 3), election_tick=10), random.Random(seed + n))
        for n in (1, 2, 3)
    }
    persisted = {n: HardState() for n in drivers}
    out: list[tuple[Ready, bool, HardState]] = []
    drivers[1].campaign()
    for _ in range(300):
        node = rng.choice(list(drivers))
        driver = drivers[node]
        if rng.random() < 0.3 and driver.is_leader():
            driver.propose(b"x")
        if rng.random() < 0.1:
            driver.tick()
        if not driver.has_ready():
            continue
        ready = driver.ready()
        out.append((ready, driver.is_leader(), persisted[node]))
        if ready.hard_state is not None:
            persisted[node] = ready.hard_state
        driver.advance(ready)
        for message in ready.messages:
            drivers[message.to].step(message)
    return out


def test_the_parallel_persist_rule_is_the_plans_send_appends() -> None:
    """leader_sends_early (the rule as the tests and the docs state it) and the plan's
    SEND_APPENDS agree on every Ready of real runs, and both happen."""
    early = 0
    for seed in range(5):
        for ready, leader, persisted in _readies(seed):
            facts = facts_of(ready, leader=leader, persisted=persisted)
            planned = Step.SEND_APPENDS in plan(facts, PumpSettings())
            assert planned is (
                leader_sends_early(ready, leader, persisted) and bool(ready.messages)
            ), ready.describe()
            early += planned
    assert early > 10


def test_facts_of_a_ready_with_a_received_snapshot() -> None:
    snapshot = Snapshot(SnapshotMeta(index=5, term=2, voters=(1, 2, 3)), b"db")
    ready = Ready(
        soft_state=None,
        hard_state=HardState(term=2, vote=0, commit=5),
        snapshot=snapshot,
        entries=(Entry(term=2, index=6),),
        committed_entries=(Entry(term=2, index=6),),
        messages=(),
        read_states=(),
    )
    facts = facts_of(ready, leader=False, persisted=HardState(term=2, vote=0, commit=0))
    assert facts.snapshot and facts.needs_fsync and not facts.committed_persisted
    assert describe_plan(plan(facts, PumpSettings(fsync_inline=False))) == (
        "fsync-in-worker -> await-fsync -> restore -> apply-or-defer -> release-reads -> advance"
    )


def _facts_field_by_field(ready: Ready, leader: bool, persisted: HardState) -> ReadyFacts:
    """The facts of a Ready read off it one by one, as the module docstring defines them."""
    hard = ready.hard_state
    kept = hard is None or (hard.term, hard.vote) == (persisted.term, persisted.vote)
    committed = ready.committed_entries
    return ReadyFacts(
        writes=ready.must_sync,
        needs_fsync=bool(ready.entries) or ready.snapshot is not None or not kept,
        entries=bool(ready.entries),
        snapshot=ready.snapshot is not None,
        committed=bool(committed),
        committed_persisted=bool(committed)
        and ready.snapshot is None
        and (not ready.entries or committed[-1].index < ready.entries[0].index),
        messages=bool(ready.messages),
        soft_state=ready.soft_state is not None,
        leader=leader,
        term_vote_kept=kept,
    )


def test_the_facts_key_holds_the_facts_of_real_readies() -> None:
    """The Raft loop's per-Ready int (facts_key) means what the facts say, fact by fact."""
    seen: set[ReadyFacts] = set()
    for seed in range(5):
        for ready, leader, persisted in _readies(seed):
            facts = facts_of(ready, leader=leader, persisted=persisted)
            assert facts == _facts_field_by_field(ready, leader, persisted), ready.describe()
            seen.add(facts)
    assert len(seen) >= 8  # elections, appends, commits, heartbeats: not one kind of Ready
    for facts in ALL_FACTS:
        key = sum(1 << bit for bit, name in enumerate(FACT_NAMES) if getattr(facts, name))
        assert ReadyFacts.from_key(key) == facts

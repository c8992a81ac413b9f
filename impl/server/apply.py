"""Applying committed entries at a member: in order, once each, and a follower's in batches.

`ApplyQueue.apply(entries)` applies through the state machine what is newer than the
applied index (a configuration change alone, in its place in the log, through
`conf_applier`: server.membership) (entries before it were applied already: after a restart, or a snapshot),
answers the clients of this member waiting for them (`Proposals.resolve`), and traces
each entry. A follower may hold committed entries back (`defer`) to apply them with
later ones:

Applying one entry at a time costs a follower 1.7 times the CPU per entry of a batch of
four (bench.apply_batch); and with one client, the CPU a follower spends applying right
after its acknowledgement is CPU the leader, waiting for that acknowledgement, competes
with (members and clients share a machine's cores in tests and benchmarks). So a
follower holds committed entries that nobody here waits for until its turn (`turn`: one
index in as many as there are voters), and for at most APPLY_DEFER_S. It applies them at
once for a leader, for a proposal or a linearizable read waiting here, before a snapshot
is restored, and before any client call starts (`catch_up`): what a client observes here
is what it would without the deferral; only watchers already streaming here see events
up to APPLY_DEFER_S later. (With the fsync in a worker, a follower applies while it waits
for its fsync: that CPU overlaps its own disk wait.)

Runs on the member's event loop.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from etcdspec.impl.kv.state_machine import AppliedEntry, StateMachine
from etcdspec.impl.raft.messages import Entry, EntryType
from etcdspec.impl.server.metrics import Metrics
from etcdspec.impl.server.trace import MemberTrace

# How long a follower may hold committed entries that nobody here waits for, to apply them
# in one batch at its turn.
APPLY_DEFER_S = 0.005


class Resolver(Protocol):
    """Who hears of applied entries: the proposals waiting for them."""

    def resolve(self, results: list[AppliedEntry]) -> None: ...


class ConfApplier(Protocol):
    """Who applies a committed configuration change (server.membership)."""

    def apply(self, entry: Entry) -> None: ...


class ApplyQueue:
    """See the module docstring."""

    def __init__(
        self,
        state: StateMachine,
        voters: tuple[int, ...],
        applied: int,
        *,
        resolver: Resolver,
        metrics: Metrics,
        trace: MemberTrace | None,
    ) -> None:
        self.state = state
        self.applied_index = applied
        self.resolver = resolver
        self.conf_applier: ConfApplier | None = None  # set once the member has built it
        self.metrics = metrics
        self.trace = trace
        self.stopping = False
        self.deferred: tuple[Entry, ...] = ()  # committed, not yet applied (`defer`)
        ordered = sorted(voters)
        self._period = len(ordered)  # a follower's turn to apply (`turn`)
        # A learner (not among the voters) takes the turn of rank 0.
        self._rank = ordered.index(state.member_id) if state.member_id in ordered else 0
        self._timer: asyncio.TimerHandle | None = None

    def apply(self, entries: tuple[Entry, ...]) -> None:
        """Apply the entries held back, then `entries`, skipping those applied already."""
        if self.deferred:  # they precede `entries`
            entries, self.deferred = self.deferred + entries, ()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        self.metrics.proposals_committed += len(entries)
        fresh = tuple(entry for entry in entries if entry.index > self.applied_index)
        if not fresh:
            return
        start = 0
        for position, entry in enumerate(fresh):
            if entry.type is EntryType.CONF_CHANGE:  # applied alone, in log order
                self._apply_normal(fresh[start:position])
                assert self.conf_applier is not None, "a conf change before the member ran"
                self.conf_applier.apply(entry)
                self._applied((entry,))
                start = position + 1
        self._apply_normal(fresh[start:])

    def _apply_normal(self, entries: tuple[Entry, ...]) -> None:
        if not entries:
            return
        results = self.state.apply(entries)
        self._applied(entries)
        self.resolver.resolve(results)

    def _applied(self, entries: tuple[Entry, ...]) -> None:
        self.applied_index = entries[-1].index
        self.metrics.proposals_applied += len(entries)
        if self.trace is not None:
            for entry in entries:
                self.trace.event("apply", entries=(entry,))

    def turn(self, committed: tuple[Entry, ...]) -> bool:
        """Whether the entries held back and `committed` include this member's turn: an
        index equal to its rank among the voters, modulo their number.

        The followers receive the same commit indices at the same moments; with one
        entry per MsgApp, batches ended by a timer alone sometimes ran on both at once,
        and the leader, which needs a core to answer once one of them acknowledges,
        waited for one (in a traced run, the 2.6% of puts that overlapped applies on
        both followers had a p90 of 3.6 ms against 1.1). Turns by index never coincide
        while commits come one entry at a time, and make batches of about the cluster's
        size; under load, when each MsgApp commits many entries, every follower has a
        turn in each, as without deferral.
        """
        period, rank = self._period, self._rank
        first = (self.deferred or committed)[0].index
        return first + (rank - first) % period <= committed[-1].index

    def defer(self, committed: tuple[Entry, ...]) -> None:
        """Hold `committed` back, to be applied with later entries or APPLY_DEFER_S later."""
        self.deferred += committed
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(APPLY_DEFER_S, self.catch_up)

    def catch_up(self) -> None:
        """Apply the committed entries held back, if any (`apply` takes them first, and
        stops their timer)."""
        if self.deferred and not self.stopping:
            self.apply(())

    def restored(self, index: int) -> None:
        """The state machine was restored from a snapshot at `index`."""
        self.applied_index = index

    def stop(self) -> None:
        self.stopping = True
        if self._timer is not None:
            self._timer.cancel()

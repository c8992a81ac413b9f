"""The membership faults of a conformance run: a member replaced under load, and a
learner added, caught up and promoted, through etcd's Cluster API.

Contract:
- `replace-member`: MemberRemove of one member (the leader half the time, as the other
  faults pick), asked of another member; the removed member's process and proxy are
  stopped (LocalCluster.leave); then MemberAdd of a fresh member (empty data dir, its own
  peer proxy), started with `--initial-cluster-state existing` (LocalCluster.join); then
  the wait until it has caught up: it names a leader and its raftAppliedIndex reaches the
  commit index the leader reported when it joined. The removed member's clients are then
  moved to it (`retarget`), so the workload goes on writing through the change.
- `learner`: MemberAdd with is_learner, start, the same catch-up wait, MemberPromote
  (asked again, up to the catch-up deadline, while etcd answers that the learner is not
  in sync yet). To keep repeated rounds from growing the cluster, a round that finds more
  members than the cluster started with first removes a follower.
- Every change the cluster accepted is kept as a `MemberChange` (with the member list
  its answer gave), and `expected()` is the member list the changes left; the run's
  Membership check compares it with the final MemberList (checker/membership.py).
- A change the target refuses as UNIMPLEMENTED ends the fault: "target does not serve
  MemberAdd" (or the method refused) joins `undecided`, and the run is unknown, never a
  pass. So do other refusals that outlast CALL_TRIES tries and a member that does not
  catch up within `catch_up_timeout_s`. Nothing here raises for a refusal.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import grpc
import grpc.aio

from etcdspec.checker.membership import MemberChange, MemberRecord
from etcdspec.conform.member_wire import ClusterClient, ListedMember, MemberCallError, NotServed
from etcdspec.conform.recorder import Recorder
from etcdspec.conform.targets import LocalCluster
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

CALL_TRIES = 10  # a refused change (unhealthy cluster, leader changing) is asked again
CALL_RETRY_S = 1.0
NOT_IN_SYNC = "in sync with leader"  # etcd's refusal of a promote too early

_T = TypeVar("_T")


class FaultUndecided(RuntimeError):
    """The fault could not be carried out; the message says why (it becomes unknown)."""


@dataclass(frozen=True)
class CatchUp:
    """How a new member caught up: the index it had to reach and how long it took."""

    index: int
    seconds: float

    def describe(self) -> str:
        return f"caught up to index {self.index} in {self.seconds:.1f} s"


async def status_of(url: str, timeout_s: float = 1.0) -> rpc_pb2.StatusResponse:
    async with grpc.aio.insecure_channel(url.removeprefix("http://")) as channel:
        return await rpc_pb2_grpc.MaintenanceStub(channel).Status(
            rpc_pb2.StatusRequest(), timeout=timeout_s
        )


async def wait_caught_up(
    new_url: str, other_urls: list[str], timeout_s: float, clock: Callable[[], float]
) -> CatchUp:
    """Wait until the member at `new_url` names a leader and has applied the commit index
    the cluster (the first of `other_urls` that answers) reports now."""
    started = clock()
    index = 0
    for url in other_urls:
        try:
            index = int((await status_of(url)).raftIndex)
            break
        except grpc.aio.AioRpcError:
            continue
    if index == 0:
        raise FaultUndecided("no member answered Status to tell the commit index to reach")
    last = "no answer"
    while clock() - started < timeout_s:
        try:
            status = await status_of(new_url)
            applied = int(status.raftAppliedIndex)
            last = f"applied index {applied}, leader {status.leader:x}"
            if status.leader != 0 and applied >= index:
                return CatchUp(index, clock() - started)
        except grpc.aio.AioRpcError as error:
            last = f"{error.code().name} {error.details()}"
        await asyncio.sleep(0.1)
    raise FaultUndecided(
        f"the new member did not catch up to index {index} within {timeout_s:g} s ({last})"
    )


def _record(listed: ListedMember) -> MemberRecord:
    return MemberRecord(listed.member_id, listed.name, listed.is_learner)


@dataclass
class MemberFaults:
    """The membership faults on one local cluster (its member list as they leave it)."""

    cluster: LocalCluster
    recorder: Recorder
    rng: random.Random
    retarget: Callable[[str, str], Awaitable[None]]
    catch_up_timeout_s: float = 30.0
    initial_size: int = 0
    changes: list[MemberChange] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    catch_ups: list[CatchUp] = field(default_factory=list)
    learners: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.initial_size:
            self.initial_size = len(self.cluster.member_names())

    def expected(self) -> tuple[MemberRecord, ...]:
        """The member list the changes left: the cluster's members, learners as such."""
        return tuple(
            MemberRecord(self.cluster.ids[name], name, name in self.learners)
            for name in self.cluster.member_names()
        )

    def _now_s(self) -> float:
        return self.recorder.now() / 1e9

    async def _ask(self, via: list[str], call: Callable[[ClusterClient], Awaitable[_T]]) -> _T:
        """One Cluster call, asked of the members `via` in turn, CALL_TRIES times in all;
        NotServed at once, other refusals after the last try."""
        last: MemberCallError | None = None
        for attempt in range(CALL_TRIES):
            client = ClusterClient(self.cluster.client_url(via[attempt % len(via)]), 5.0)
            try:
                return await call(client)
            except NotServed:
                raise
            except MemberCallError as error:
                last = error
            finally:
                await client.close()
            await asyncio.sleep(CALL_RETRY_S)
        assert last is not None
        raise FaultUndecided(f"{last} ({CALL_TRIES} tries)")

    def _changed(self, change: str, member: MemberRecord, after: tuple[ListedMember, ...]) -> None:
        self.changes.append(
            MemberChange(self.recorder.now(), change, member, tuple(_record(m) for m in after))
        )

    async def replace(self, victim: str, role: str) -> tuple[str, str]:
        """Remove `victim` (the `role` it has), add a fresh member, wait for it."""
        try:
            removed = await self._remove(victim)
            new, catch_up = await self._add(learner=False)
            await self.retarget(self.cluster_url_of(removed), self.cluster.client_url(new))
        except NotServed as error:
            return self._undecided(victim, f"not done: {error.describe()}")
        except FaultUndecided as error:
            return self._undecided(victim, f"undecided: {error}")
        return f"{victim}-{new}", (
            f"{role} {victim} removed, {new} added and started on an empty data dir, "
            f"{catch_up.describe()}"
        )

    async def learner(self) -> tuple[str, str]:
        """Add a learner, start it, wait for it, promote it."""
        names = self.cluster.member_names()
        shrunk = ""
        try:
            if len(names) > self.initial_size:
                follower = await self._follower()
                removed = await self._remove(follower)
                shrunk = f"follower {follower} removed first (the cluster had grown); "
                moved_from: str | None = self.cluster_url_of(removed)
            else:
                moved_from = None
            new, catch_up = await self._add(learner=True)
            member_id = self.cluster.ids[new]
            tries = max(1, int(self.catch_up_timeout_s / CALL_RETRY_S))
            for attempt in range(tries):
                try:
                    after = await self._ask(
                        self._others(new), lambda client: client.member_promote(member_id)
                    )
                    break
                except FaultUndecided as error:
                    if NOT_IN_SYNC not in str(error) or attempt == tries - 1:
                        raise
            promoted = next(m for m in after if m.member_id == member_id)
            self.learners.discard(new)
            self._changed("promote", _record(promoted), after)
            if moved_from is not None:
                await self.retarget(moved_from, self.cluster.client_url(new))
        except NotServed as error:
            return self._undecided("learner", f"not done: {error.describe()}")
        except FaultUndecided as error:
            return self._undecided("learner", f"undecided: {error}")
        return new, f"{shrunk}learner {new} added, {catch_up.describe()}, promoted"

    def cluster_url_of(self, member: ListedMember) -> str:
        return member.client_urls[0] if member.client_urls else ""

    def _undecided(self, target: str, detail: str) -> tuple[str, str]:
        if detail not in self.undecided:  # a refusal repeated each round counts once
            self.undecided.append(detail)
        return target, detail

    def _others(self, name: str) -> list[str]:
        return [n for n in self.cluster.member_names() if n != name and n not in self.learners]

    async def _follower(self) -> str:
        for name in self._others(""):
            try:
                status = await status_of(self.cluster.client_url(name))
            except grpc.aio.AioRpcError:
                continue
            if status.leader not in (0, status.header.member_id):
                return name
        raise FaultUndecided("no follower answered Status")

    async def _remove(self, name: str) -> ListedMember:
        member_id = self.cluster.ids[name]
        before = ListedMember(
            member_id, name, (), (self.cluster.client_url(name),), name in self.learners
        )
        after = await self._ask(self._others(name), lambda c: c.member_remove(member_id))
        self._changed("remove", _record(before), after)
        await self.cluster.leave(name)
        self.learners.discard(name)
        await self._wait_leader(member_id)
        return before

    async def _wait_leader(self, removed_id: int) -> None:
        """Wait until the remaining members name a leader other than the removed member
        (a change asked of a cluster still electing one waits out etcd's request timeout)."""
        started = self._now_s()
        while self._now_s() - started < self.catch_up_timeout_s:
            leaders = set()
            for name in self._others(""):
                try:
                    leaders.add(int((await status_of(self.cluster.client_url(name))).leader))
                except grpc.aio.AioRpcError:
                    leaders.add(0)
            if len(leaders) == 1 and leaders.isdisjoint({0, removed_id}):
                return
            await asyncio.sleep(0.1)
        raise FaultUndecided(f"no leader within {self.catch_up_timeout_s:g} s of the removal")

    async def _add(self, learner: bool) -> tuple[str, CatchUp]:
        plan = self.cluster.plan_member()
        peer_url = self.cluster.proxied_peer_url(plan.name)
        voters = self._others("")
        added, after = await self._ask(voters, lambda c: c.member_add([peer_url], learner))
        if learner:
            self.learners.add(plan.name)
        record = MemberRecord(added.member_id, plan.name, learner)
        self._changed("add-learner" if learner else "add", record, after)
        await self.cluster.join(plan, added.member_id)
        voter_urls = [self.cluster.client_url(n) for n in voters]
        catch_up = await wait_caught_up(
            plan.client_url, voter_urls, self.catch_up_timeout_s, self._now_s
        )
        self.catch_ups.append(catch_up)
        return plan.name, catch_up

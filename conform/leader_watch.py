"""Who leads, as each member says, through a conformance run; and the final member lists.

Contract:
- `LeaderWatch(target, recorder).run(stop)` asks every current member (the target's
  member list is read each round, so members added or removed by a fault are followed)
  for Maintenance.Status every `interval_s`, all members at once, each call with a short
  deadline, and keeps one `LeaderObservation` per answer (member, its id from the
  answer's header, raftTerm, leader) on the history's clock. A member that does not
  answer is skipped that round (`missed` counts it). Unrecorded calls: they are not
  operations of the history.
- `final_member_lists(urls)` asks each member for MemberList until all list the same
  members or `timeout_s` passes (a conf change is applied on each member in its own
  time): name -> records, or None when some member never answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

import grpc
import grpc.aio

from etcdspec.checker.membership import LeaderObservation, MemberRecord
from etcdspec.conform.member_wire import ClusterClient, MemberCallError
from etcdspec.conform.recorder import Recorder
from etcdspec.conform.targets import Target
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


@dataclass
class LeaderWatch:
    target: Target
    recorder: Recorder
    interval_s: float = 0.25
    timeout_s: float = 0.5
    observations: list[LeaderObservation] = field(default_factory=list)
    missed: int = 0
    _channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                names = self.target.member_names()
                await asyncio.gather(*(self._observe(name) for name in names))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval_s)
        finally:
            for channel in self._channels.values():
                await channel.close()
            self._channels.clear()

    async def _observe(self, name: str) -> None:
        try:
            url = self.target.client_url(name)
        except Exception:  # the member left between the list and this call
            return
        channel = self._channels.get(url)
        if channel is None:
            channel = grpc.aio.insecure_channel(url.removeprefix("http://"))
            self._channels[url] = channel
        try:
            status = await rpc_pb2_grpc.MaintenanceStub(channel).Status(
                rpc_pb2.StatusRequest(), timeout=self.timeout_s
            )
        except grpc.aio.AioRpcError:
            self.missed += 1
            return
        self.observations.append(
            LeaderObservation(
                self.recorder.now(),
                name,
                int(status.header.member_id),
                int(status.raftTerm),
                int(status.leader),
            )
        )


def _records(listed: tuple[object, ...]) -> tuple[MemberRecord, ...]:
    return tuple(
        MemberRecord(m.member_id, m.name, m.is_learner)  # type: ignore[attr-defined]
        for m in listed
    )


async def final_member_lists(
    urls: dict[str, str], timeout_s: float = 15.0
) -> dict[str, tuple[MemberRecord, ...]] | None:
    """Each member's MemberList (name -> records), retried until they agree or the
    deadline; None when a member never answered."""
    deadline = time.monotonic() + timeout_s
    lists: dict[str, tuple[MemberRecord, ...]] = {}
    while True:
        lists = {}
        for name, url in urls.items():
            client = ClusterClient(url, 2.0)
            try:
                lists[name] = _records(await client.member_list())
            except MemberCallError:
                pass
            finally:
                await client.close()
        complete = len(lists) == len(urls)
        names_known = all(r.name for records in lists.values() for r in records)
        if complete and names_known and len({frozenset(r) for r in lists.values()}) == 1:
            return lists
        if time.monotonic() > deadline:
            return lists if complete else None
        await asyncio.sleep(0.3)

"""The members' agreement at the end of a conformance run: HashKV at one revision, and a
divergence test for members that applied the same log yet hold different stores.

Contract:
- `hashkv_agreement(urls, timeout_s)` -> CheckResult "HashKV": every member's HashKV at
  one revision (read linearizably from the first member), same compact revision, same
  hash, and no divergence (below): TRUE; different hashes: FALSE with each member's
  hash. Until then, errors (a member down, or not yet at that revision) are retried.
- A member whose store lost or gained writes never reaches the others' revision, so
  HashKV at one revision cannot be asked of it. While retrying, each member's Status
  is read (and once more before a TRUE): when every member reports the same raft
  applied index but not the same store revision, twice 0.5 s apart with nothing
  moving in between (`stable_divergence`), the members applied
  the same log and got different stores — FALSE at once, with each member's applied
  index and revision as the evidence (`diverged`). A deterministic state machine
  cannot do that; etcd 3.5.0-3.5.2 did after kill -9 under write load (etcd issue
  13766), and so does a leader that deletes keys outside the log.
- Otherwise, members that never reach one revision within `timeout_s` give UNKNOWN,
  never a pass.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import grpc
import grpc.aio

from etcdspec.checker.results import CheckResult
from etcdspec.conform.recorder import Process, Recorder, RecordingClient
from etcdspec.impl.pb import rpc_pb2
from etcdspec.model.requests import RangeRequest, RangeResponse
from etcdspec.verdict import Verdict

NAME = "HashKV"


@dataclass(frozen=True)
class MemberState:
    """What one member's Status says about its store: applied index and revision."""

    url: str
    version: str
    applied_index: int
    revision: int

    def describe(self) -> str:
        port = self.url.rsplit(":", 1)[-1]
        return (
            f"{port} (etcd {self.version or '?'}): applied index {self.applied_index}, "
            f"revision {self.revision}"
        )


def diverged(states: list[MemberState]) -> bool:
    """Every member applied the same log (same applied index) yet the store revisions
    differ: the same entries made different stores."""
    if len(states) < 2:
        return False
    return len({s.applied_index for s in states}) == 1 and len({s.revision for s in states}) > 1


async def member_states(urls: list[str]) -> list[MemberState] | None:
    """Each member's Status (None if one does not answer)."""
    states = []
    for url in urls:
        client = RecordingClient(Recorder(), url, 2.0)
        try:
            status = await client.maintenance("Status", rpc_pb2.StatusRequest(), 2.0)
        except grpc.aio.AioRpcError:
            return None
        finally:
            await client.close()
        states.append(
            MemberState(
                url,
                str(status.version),
                int(status.raftAppliedIndex),
                int(status.header.revision),
            )
        )
    return states


async def stable_divergence(urls: list[str], pause_s: float = 0.5) -> list[MemberState] | None:
    """The members' states if they have diverged (`diverged`) and still show the same
    applied indexes and revisions `pause_s` later (nothing was moving); else None."""
    first = await member_states(urls)
    if first is None or not diverged(first):
        return None
    await asyncio.sleep(pause_s)
    second = await member_states(urls)
    if second is None or not diverged(second):
        return None
    if [(s.applied_index, s.revision) for s in first] != [
        (s.applied_index, s.revision) for s in second
    ]:
        return None
    return second


def _diverged_result(states: list[MemberState], seconds: float) -> CheckResult:
    return CheckResult(
        NAME,
        Verdict.FALSE,
        f"members applied the same log (applied index {states[0].applied_index}) but "
        "their stores are at different revisions",
        seconds,
        tuple(s.describe() for s in states),
    )


class _NotThere(RuntimeError):
    """The revision probe got no ok answer (the member is down or has no leader)."""


async def hashkv_agreement(urls: list[str], timeout_s: float = 30.0) -> CheckResult:
    started = time.monotonic()
    deadline = started + timeout_s
    last_problem = ""
    while time.monotonic() < deadline:
        try:
            revision = await _linearizable_revision(urls[0])
            results = []
            for url in urls:
                client = RecordingClient(Recorder(), url, 3.0)
                try:
                    reply = await client.maintenance(
                        "HashKV", rpc_pb2.HashKVRequest(revision=revision), 5.0
                    )
                finally:
                    await client.close()
                results.append((url, int(reply.hash), int(reply.compact_revision)))
        except (grpc.aio.AioRpcError, _NotThere) as error:
            last_problem = (
                error.details() or "" if isinstance(error, grpc.aio.AioRpcError) else str(error)
            )
            split = await stable_divergence(urls)
            if split is not None:
                return _diverged_result(split, time.monotonic() - started)
            await asyncio.sleep(0.5)
            continue
        compacts = {c for _, _, c in results}
        if len(compacts) > 1:
            last_problem = f"compact revisions differ: {results}"
            await asyncio.sleep(0.5)
            continue
        hashes = {h for _, h, _ in results}
        seconds = time.monotonic() - started
        shown = ", ".join(f"{u.rsplit(':', 1)[-1]}={h}" for u, h, _ in results)
        if len(hashes) == 1:
            split = await stable_divergence(urls)
            if split is not None:
                return _diverged_result(split, time.monotonic() - started)
            return CheckResult(
                NAME, Verdict.TRUE, f"{len(results)} members agree at revision {revision}", seconds
            )
        return CheckResult(
            NAME,
            Verdict.FALSE,
            f"members disagree at revision {revision} (compact {compacts.pop()})",
            seconds,
            (shown,),
        )
    return CheckResult(
        NAME,
        Verdict.UNKNOWN,
        f"members did not reach one revision within {timeout_s:g} s: {last_problem}",
        time.monotonic() - started,
    )


async def _linearizable_revision(url: str) -> int:
    client = RecordingClient(Recorder(), url, 3.0)
    try:
        outcome = await client.call(Process(0), RangeRequest(b"hashkv-probe"))
    finally:
        await client.close()
    if not isinstance(outcome.response, RangeResponse):
        raise _NotThere(f"{url}: revision probe {outcome.describe()}")
    return outcome.response.header.revision

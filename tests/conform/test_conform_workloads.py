"""Workloads: seeded (same seed, same requests), written values unique, every request
one the wire and the checker can carry; driven against the pure store model in place of
a server, their recorded histories hold."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from etcdspec.checker.check import check_history
from etcdspec.checker.etcd_json import request_to_json, response_to_json
from etcdspec.checker.history import build_history
from etcdspec.conform.recorder import LockOutcome, Outcome, Process, Recorder
from etcdspec.conform.wire import to_pb
from etcdspec.conform.workloads import WORKLOADS, Worker, WorkloadError, make_workload
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import DeleteRangeRequest, PutRequest, Request, TxnRequest
from etcdspec.model.store import StoreState, apply, initial_state
from etcdspec.model.watch import WatchRequest


class ModelClient:
    """Stands in for RecordingClient: records like it, answers from the store model."""

    def __init__(self, recorder: Recorder, state: list[StoreState]) -> None:
        self.recorder = recorder
        self.state = state
        self.sent: list[Request] = []

    async def call(self, process: Process, request: Request) -> Outcome:
        to_pb(request)  # the wire can carry it
        self.sent.append(request)
        f, value = request_to_json(request)
        self.recorder.add(process.id, "invoke", f, value)
        try:
            self.state[0], response = apply(self.state[0], request)
        except StoreError as error:
            self.recorder.add(process.id, "fail", f, {"error": str(error), "code": error.code})
            return Outcome("fail", code=error.code)
        self.recorder.add(process.id, "ok", f, response_to_json(response))
        return Outcome("ok", response)

    async def lock(
        self, process: Process, name: bytes, lease: int, timeout_s: float
    ) -> LockOutcome:
        """etcd's Lock when nobody holds it (workers here step one at a time): the key
        name/<lease hex> put with the lease."""
        key = name + b"/" + format(lease, "x").encode()
        self.recorder.add(process.id, "invoke", "lock", {"name": name.decode(), "lease": lease})
        self.state[0], response = apply(self.state[0], PutRequest(key, b"", lease=lease))
        revision = response.header.revision
        body = {"header": {"revision": revision}, "key": key.decode()}
        self.recorder.add(process.id, "ok", "lock", body)
        return LockOutcome("ok", key, revision)

    async def unlock(self, process: Process, key: bytes) -> LockOutcome:
        self.recorder.add(process.id, "invoke", "unlock", {"key": key.decode()})
        self.state[0], response = apply(self.state[0], DeleteRangeRequest(key))
        revision = response.header.revision
        self.recorder.add(process.id, "ok", "unlock", {"header": {"revision": revision}})
        return LockOutcome("ok", key, revision)


def _drive(name: str, seed: int, steps: int = 150) -> tuple[list[Request], Recorder, int]:
    recorder = Recorder()
    state = [initial_state()]
    watches: list[WatchRequest] = []

    def start_watch(watch_name: str, request: WatchRequest, seconds: float) -> None:
        watches.append(request)

    clients = [ModelClient(recorder, state) for _ in range(3)]
    workers = [
        Worker(
            i,
            clients[i],  # type: ignore[arg-type]
            Process(recorder.new_process()),
            random.Random(f"{seed}-{i}"),
            keys=4,
            watch_starter=start_watch,
        )
        for i in range(3)
    ]
    workload = make_workload(name)

    async def main() -> None:
        for step in range(steps):
            await workload.step(workers[step % 3])

    asyncio.run(main())
    sent = [r for c in clients for r in c.sent]
    return sent, recorder, len(watches)


def _written_values(request: Any) -> list[bytes]:
    if isinstance(request, PutRequest):
        return [request.value]
    if isinstance(request, TxnRequest):
        return [v for op in (*request.success, *request.failure) for v in _written_values(op)]
    return []


# The auth workload sends tokens and Auth calls on a real channel (conform/auth_client.py),
# which ModelClient does not stand in for: tests/conform/test_conform_auth.py runs it
# against our server and real etcd instead.
@pytest.mark.parametrize("name", sorted(set(WORKLOADS) - {"auth"}))
def test_workload_is_seeded_unique_and_holds_on_the_model(name: str) -> None:
    sent, recorder, watches = _drive(name, seed=5)
    again, _, _ = _drive(name, seed=5)
    other, _, _ = _drive(name, seed=6)
    assert [r.describe() for r in sent] == [r.describe() for r in again]
    assert [r.describe() for r in sent] != [r.describe() for r in other]
    values = [v for r in sent for v in _written_values(r) if not v.isdigit()]
    assert values and len(values) == len(set(values))
    kinds = {type(r).__name__ for r in sent}
    kinds |= {e.f for e in recorder.events if e.f in ("lock", "unlock")}  # not model requests
    assert len(kinds) >= 3, kinds
    if name in ("watch", "kubernetes"):
        assert watches > 0
    report = check_history(build_history(recorder.events))
    assert report.verdict.describe() == "holds", report.describe()


def test_unknown_workload_is_refused_with_the_choices() -> None:
    with pytest.raises(WorkloadError, match="etcd-kv"):
        make_workload("bank")

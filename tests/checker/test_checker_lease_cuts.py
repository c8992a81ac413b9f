"""Lease expiries in the cut search: an expiry that deletes no key is tried only right
before an operation naming its lease, never merely to fill a missing revision (it
cannot fill one). Differential: on small histories whose leases really expire between
operations (some completions lost, some responses corrupted) the cut search and the
plain Wing & Gong / Lowe search agree."""

from __future__ import annotations

import random
from typing import Any

import pytest

from etcdspec.checker.etcd_json import request_to_json, response_to_json
from etcdspec.checker.history import HistoryEvent, build_history
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.checker.models import PreparedOp
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import (
    LeaseGrantRequest,
    LeaseKeepAliveRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    Request,
)
from etcdspec.model.store import StoreState, apply, initial_state, lease_ttl
from etcdspec.verdict import Verdict

SECOND = 1_000_000_000


class PlainEtcdModel(EtcdModel):
    """The same semantics with no revision hints: the search tries every order."""

    def revision(self, state: Any) -> int | None:
        return None

    def info_possible(self, prepared: PreparedOp, revision: int) -> bool:
        return True

    def info_state_possible(self, prepared: PreparedOp, state: Any) -> bool:
        return True


def _request(rng: random.Random, leases: list[int]) -> Request:
    roll = rng.random()
    key = rng.choice([b"a", b"b"])
    if roll < 0.2 or not leases:
        return LeaseGrantRequest(ttl=1)
    lease = rng.choice(leases)
    if roll < 0.5:
        return PutRequest(key, f"v{rng.randrange(100)}".encode(), lease=lease)
    if roll < 0.7:
        return RangeRequest(key)
    if roll < 0.85:
        return LeaseKeepAliveRequest(lease)
    return LeaseRevokeRequest(lease)


def _answer(state: StoreState, request: Request) -> tuple[StoreState, Any]:
    if isinstance(request, LeaseKeepAliveRequest):
        ttl = lease_ttl(state, request.id)
        return state, {"header": {"revision": state.revision}, "ID": request.id, "TTL": ttl or 0}
    new_state, response = apply(state, request)
    return new_state, response_to_json(response)


def _corrupt(rng: random.Random, answer: Any) -> Any:
    header = answer["header"]
    return {**answer, "header": {"revision": header["revision"] + rng.choice([-1, 1])}}


def lease_expiry_history(seed: int, corrupt: bool, ops: int = 12) -> list[HistoryEvent]:
    """A run against the store model in which leases (TTL 1 s, one operation a second)
    expire unrecorded between operations; operations overlap their neighbours, a
    quarter lose their completion (info, whether or not they took effect) and, with
    `corrupt`, one ok response reports a neighbouring revision."""
    rng = random.Random(seed)
    state = initial_state()
    granted: dict[int, int] = {}  # lease id -> invoke time of its grant
    leases: list[int] = []
    timed: list[tuple[int, HistoryEvent]] = []
    corrupt_at = rng.randrange(ops) if corrupt else -1
    for n in range(ops):
        now = (n + 1) * SECOND
        for lease_id, since in sorted(granted.items()):
            record_ttl = lease_ttl(state, lease_id)
            due = record_ttl is not None and now >= since + record_ttl * SECOND
            if due and rng.random() < 0.5:  # the server expires it here, unrecorded
                state, _ = apply(state, LeaseRevokeRequest(lease_id))
        request = _request(rng, leases)
        f, value = request_to_json(request)
        invoke = now - SECOND // 4
        ret = now + rng.choice([SECOND // 4, SECOND + SECOND // 2])
        try:
            new_state, answer = _answer(state, request)
        except StoreError:
            continue  # a refused request is a fail op: no effect, nothing to check
        lost = rng.random() < 0.25
        if lost and rng.random() < 0.5:
            new_state = state  # lost before it took effect
        if isinstance(request, LeaseGrantRequest) and new_state is not state:
            lease_id = answer["ID"]
            granted[lease_id] = invoke
            leases.append(lease_id)
        state = new_state
        if n == corrupt_at and not lost:
            answer = _corrupt(rng, answer)
        process = n
        timed.append((invoke, HistoryEvent(0, process, "invoke", f, value, invoke)))
        completion = (
            HistoryEvent(0, process, "info", f, value, ret)
            if lost
            else HistoryEvent(0, process, "ok", f, answer, ret)
        )
        timed.append((ret, completion))
    timed.sort(key=lambda pair: pair[0])
    return [
        HistoryEvent(index, e.process, e.type, e.f, e.value, e.time)
        for index, (_, e) in enumerate(timed)
    ]


CASES = [(seed, corrupt) for seed in range(30) for corrupt in (False, True)]


@pytest.mark.parametrize(("seed", "corrupt"), CASES)
def test_lease_expiry_cuts_agree_with_plain_search(seed: int, corrupt: bool) -> None:
    history = build_history(lease_expiry_history(seed, corrupt))
    cut = check_linearizable(EtcdModel(), history.operations)
    plain = check_linearizable(PlainEtcdModel(), history.operations)
    assert plain.verdict is not Verdict.UNKNOWN
    assert cut.verdict is plain.verdict, (cut.describe(), plain.describe())


def test_lease_expiry_cases_include_both_verdicts() -> None:
    verdicts = set()
    for seed, corrupt in CASES:
        history = build_history(lease_expiry_history(seed, corrupt))
        verdicts.add(check_linearizable(EtcdModel(), history.operations).verdict)
    assert verdicts == {Verdict.TRUE, Verdict.FALSE}

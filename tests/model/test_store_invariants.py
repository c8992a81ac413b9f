"""Store invariants: the correct model keeps them (Hypothesis), corrupt states and the
seeded bug `txn_revision_per_op` break them, and the persistent map behaves like a dict."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from etcdspec.model.bugs import BugSet
from etcdspec.model.errors import StoreError
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.lease import LeaseRecord
from etcdspec.model.pmap import PMap
from etcdspec.model.requests import (
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    KeyValue,
    LeaseGrantRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    Request,
    TxnRequest,
)
from etcdspec.model.store import StoreState, apply, apply_all, check_invariants, initial_state
from etcdspec.model.store_bench import measure

KEYS = [b"a", b"b", b"c", b"d"]


def base() -> StoreState:
    state, _ = apply_all(
        initial_state(),
        [
            LeaseGrantRequest(10, 1),
            PutRequest(b"a", b"1", lease=1),
            PutRequest(b"b", b"1"),
            PutRequest(b"b", b"2"),
        ],
    )
    return state


CORRUPTIONS: list[tuple[str, Callable[[StoreState], StoreState], str]] = [
    (
        "compact beyond revision",
        lambda s: s._replace(compact_main_revision=s.revision + 1),
        "CompactRevisionBounded",
    ),
    (
        "revision without a write",
        lambda s: s._replace(revision=s.revision + 1),
        "OneRevisionPerWrite",
    ),
    (
        "mod revision beyond current",
        lambda s: s._replace(live=s.live.set(b"b", KeyValue(b"b", 3, 9, 2, b"2"))),
        "KeyRevisionsOrdered",
    ),
    (
        "version not counting writes",
        lambda s: s._replace(live=s.live.set(b"b", KeyValue(b"b", 3, 4, 5, b"2"))),
        "VersionCountsWrites",
    ),
    (
        "live value not the last event",
        lambda s: s._replace(live=s.live.set(b"b", KeyValue(b"b", 3, 4, 2, b"other"))),
        "LiveMatchesHistory",
    ),
    ("key on a revoked lease", lambda s: s._replace(leases=s.leases.without(1)), "LeaseAttachment"),
    (
        "lease lists a key it does not hold",
        lambda s: s._replace(
            leases=s.leases.with_record(LeaseRecord(1, 10, frozenset({b"a", b"b"})))
        ),
        "LeaseAttachment",
    ),
]


@pytest.mark.parametrize(
    ("corrupt", "invariant"), [pytest.param(c, i, id=n) for n, c, i in CORRUPTIONS]
)
def test_store_invariant_catches_corrupt_state(
    corrupt: Callable[[StoreState], StoreState], invariant: str
) -> None:
    check_invariants(base())
    with pytest.raises(InvariantViolation) as raised:
        check_invariants(corrupt(base()))
    assert raised.value.invariant == invariant
    assert "store rev" in raised.value.detail


def test_store_bug_txn_revision_per_op_is_caught() -> None:
    txn = TxnRequest((), (PutRequest(b"a", b"1"), PutRequest(b"b", b"1")), ())
    good, good_response = apply(initial_state(), txn)
    check_invariants(good)
    assert good_response.describe() == "txn-> rev 2 success [put-> rev 2; put-> rev 2]"
    bad, bad_response = apply(initial_state(), txn, BugSet.of("txn_revision_per_op"))
    assert bad_response.describe() == "txn-> rev 3 success [put-> rev 2; put-> rev 3]"
    with pytest.raises(InvariantViolation) as raised:
        check_invariants(bad)
    assert raised.value.invariant == "OneRevisionPerWrite"


# ---------------------------------------------------------------------------- Hypothesis

keys = st.sampled_from(KEYS)
values = st.sampled_from([b"", b"x", b"y"])
leases = st.sampled_from([0, 0, 1, 2])


@st.composite
def ranges(draw: st.DrawFn) -> tuple[bytes, bytes]:
    key = draw(keys)
    end = draw(st.sampled_from([b"", b"\x00", b"c", b"e", b"a"]))
    return key, end


def simple_ops() -> st.SearchStrategy[Request]:
    return st.one_of(
        st.builds(PutRequest, keys, values, leases, st.booleans()),
        ranges().map(lambda r: DeleteRangeRequest(r[0], r[1], prev_kv=True)),
        ranges().map(lambda r: RangeRequest(r[0], r[1])),
    )


compares = st.builds(
    Compare,
    keys,
    st.sampled_from([CompareTarget.VERSION, CompareTarget.MOD, CompareTarget.CREATE]),
    st.sampled_from(list(CompareResult)),
    st.integers(0, 6),
)

requests: st.SearchStrategy[Request] = st.one_of(
    simple_ops(),
    simple_ops(),
    st.builds(
        TxnRequest,
        st.lists(compares, max_size=2).map(tuple),
        st.lists(simple_ops(), max_size=3).map(tuple),
        st.lists(simple_ops(), max_size=2).map(tuple),
    ),
    st.builds(LeaseGrantRequest, st.integers(0, 10), st.sampled_from([0, 1, 2])),
    st.builds(LeaseRevokeRequest, st.sampled_from([1, 2, 3])),
    st.integers(0, 12).map(CompactionRequest),
)


def run(ops: list[Request]) -> tuple[list[StoreState], int]:
    states = [initial_state()]
    rejected = 0
    for op in ops:
        before = states[-1]
        try:
            state, _ = apply(before, op)
        except StoreError:
            rejected += 1
            continue
        check_invariants(state)
        states.append(state)
    return states, rejected


@given(st.lists(requests, max_size=25))
def test_store_random_requests_keep_invariants_and_past_reads_match(ops: list[Request]) -> None:
    states, _ = run(ops)
    final = states[-1]
    all_keys = RangeRequest(b"\x00", b"\x00")
    for earlier in states:
        if earlier.revision < final.compact_revision:
            continue
        _, response = apply(final, RangeRequest(b"\x00", b"\x00", revision=earlier.revision))
        _, then = apply(earlier, all_keys)
        assert response.kvs == then.kvs  # type: ignore[union-attr]


@given(st.lists(requests, max_size=20))
def test_store_equal_histories_give_equal_states(ops: list[Request]) -> None:
    one, _ = run(ops)
    two, _ = run(ops)
    assert one[-1] == two[-1]
    assert hash(one[-1]) == hash(two[-1])
    assert one[-1].describe() == two[-1].describe()


@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"k%d" % i for i in range(200)]),
            st.one_of(st.none(), st.integers(0, 3)),
        ),
        max_size=300,
    )
)
def test_store_pmap_behaves_like_a_dict(changes: list[tuple[bytes, int | None]]) -> None:
    pmap: PMap[bytes, int] = PMap()
    model: dict[bytes, int] = {}
    snapshots = []
    for key, value in changes:
        pmap = pmap.set(key, value) if value is not None else pmap.remove(key)
        if value is None:
            model.pop(key, None)
        else:
            model[key] = value
        snapshots.append((pmap, dict(model)))
    for snapshot, expected in snapshots:
        assert dict(snapshot.items()) == expected
        assert len(snapshot) == len(expected)
        rebuilt = PMap.from_mapping(expected)
        assert rebuilt == snapshot and hash(rebuilt) == hash(snapshot)


def test_store_bench_measures_every_workload() -> None:
    result = measure(keys=50, requests=200)
    assert min(result.puts_per_s, result.ranges_per_s, result.mixed_per_s) > 0
    assert result.describe().startswith("store apply() at 50 keys")
    with pytest.raises(ValueError, match="keys >= 1"):
        measure(keys=0)


def test_store_state_pickles_across_processes_with_other_hash_seeds(tmp_path: Path) -> None:
    ops: list[Request] = [
        LeaseGrantRequest(10, 1),
        PutRequest(b"a", b"1", lease=1),
        PutRequest(b"b", b"2"),
        TxnRequest((), (PutRequest(b"c", b"3"), DeleteRangeRequest(b"b")), ()),
        CompactionRequest(3),
    ]
    state, _ = apply_all(initial_state(), ops)
    blob = tmp_path / "state.pickle"
    blob.write_bytes(pickle.dumps(state))
    assert pickle.loads(blob.read_bytes()) == state
    program = (
        "import pickle, sys\n"
        "from etcdspec.model.requests import *\n"
        "from etcdspec.model.store import apply_all, check_invariants, initial_state\n"
        f"ops = {ops!r}\n"
        "fresh, _ = apply_all(initial_state(), ops)\n"
        "loaded = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "check_invariants(loaded)\n"
        "assert loaded == fresh and hash(loaded) == hash(fresh), 'not equal after load'\n"
        "assert loaded.get(b'a') is not None and {fresh, loaded} == {fresh}\n"
    )
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", program, str(blob)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr

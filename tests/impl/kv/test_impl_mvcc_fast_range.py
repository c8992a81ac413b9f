"""KVStore.range's one-key fast path gives the general path's answer: after any history
of puts, deletes and compactions, a one-key read at the current revision (with every
option that applies to it) equals the same read as a range [key, key + b"\\x00"), which
goes through the general path."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.mvcc import KVStore
from etcdspec.impl.pb import rpc_pb2 as pb

KEYS = [b"a", b"b", b"c"]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(KEYS), st.binary(max_size=3)),
        st.tuples(st.just("delete"), st.sampled_from(KEYS), st.just(b"")),
        st.tuples(st.just("compact"), st.sampled_from(KEYS), st.just(b"")),
    ),
    max_size=12,
)
OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "keys_only": st.booleans(),
        "count_only": st.booleans(),
        "limit": st.integers(0, 2),
        "min_mod_revision": st.integers(0, 8),
        "max_mod_revision": st.integers(0, 8),
        "min_create_revision": st.integers(0, 8),
        "max_create_revision": st.integers(0, 8),
        "sort_order": st.sampled_from([0, 1, 2]),
        "sort_target": st.sampled_from([0, 1, 2, 3, 4]),
    },
)


@given(STEPS, st.sampled_from([*KEYS, b"zz"]), OPTIONS)
def test_one_key_read_equals_the_general_path(
    steps: list[tuple[str, bytes, bytes]], key: bytes, options: dict[str, int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        backend = Backend(Path(tmp) / "db", durable=False)
        store = KVStore(backend)
        try:
            for kind, step_key, value in steps:
                with backend.transaction():
                    txn = store.write(lambda lease: False)
                    if kind == "put":
                        txn.put(pb.PutRequest(key=step_key, value=value))
                    elif kind == "delete":
                        txn.delete_range(pb.DeleteRangeRequest(key=step_key))
                    txn.finish()
                    if (
                        kind == "compact"
                        and backend.current_revision() > backend.compact_revision()
                    ):
                        store.compact(backend.current_revision())
            fast = store.range(pb.RangeRequest(key=key, **options))  # type: ignore[arg-type]
            general = store.range(
                pb.RangeRequest(key=key, range_end=key + b"\x00", **options)  # type: ignore[arg-type]
            )
            assert fast == general
        finally:
            backend.close()

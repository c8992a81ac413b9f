"""A Hypothesis state machine over the pure store: random requests, invariants after each.

`StoreMachine` applies random KV, txn, lease, compaction and watch requests to
`etcdspec.model.store` and checks after every step:
- the store's own invariants (`store.check_invariants`);
- OneRevisionPerRequest: a request raises the revision by 0 or 1, and every key a
  write txn changed carries the txn's one new revision;
- PastReadsConsistent: a read at a past revision r (compact_revision <= r <= current)
  returns exactly what a read at the latest revision returned when the store was at r;
  below the compaction it fails with CompactedError, above the head with
  FutureRevisionError;
- the watch guarantees (`etcdspec.model.watch`) for a watch opened at a random past
  revision and the responses the model's watch semantics give for it.

Swarm testing: an initialize rule picks which optional rule groups run in this example
(a run focused on some rules, `ExploreOptions.rules`, keeps them all on instead).
`machine_factory(options, recorder)` gives the factory `etcdspec.model.explore` runs;
`StoreMachine.TestCase` runs the machine under pytest with the default recorder.
Keys, values and request strategies here are shared with the cluster machine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from etcdspec.model import store as store_model
from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.errors import CompactedError, FutureRevisionError, StoreError
from etcdspec.model.explore import ExploreOptions, RunRecorder
from etcdspec.model.hypothesis_rules import focused, has_initialize_rules
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.requests import (
    RANGE_END_ALL,
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    Event,
    KeyValue,
    LeaseGrantRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    RangeResponse,
    Request,
    TxnOp,
    TxnRequest,
    show_bytes,
)
from etcdspec.model.watch import WatchRequest, check_watch, watch_responses

KEYS = (b"a", b"b", b"c", b"d")
VALUES = (b"0", b"1", b"2")

keys = st.sampled_from(KEYS)
values = st.sampled_from(VALUES)
range_ends = st.sampled_from((b"", b"", b"c", RANGE_END_ALL))
lease_ids = st.sampled_from((0, 0, 1, 2, 3))
"""Lease ids are drawn as numbers: the store grants 1, 2, 3, ... in order, so small ids
usually exist, others exercise LeaseNotFound, and a shrunk run keeps its meaning."""


def compares() -> st.SearchStrategy[Compare]:
    int_targets = (CompareTarget.VERSION, CompareTarget.CREATE, CompareTarget.MOD)
    int_compare = st.tuples(
        keys,
        st.sampled_from((*int_targets, CompareTarget.LEASE)),
        st.sampled_from(tuple(CompareResult)),
        st.integers(min_value=0, max_value=4),
    ).map(lambda t: Compare(t[0], t[1], t[2], t[3]))
    value_compare = st.tuples(keys, st.sampled_from(tuple(CompareResult)), values).map(
        lambda t: Compare(t[0], CompareTarget.VALUE, t[1], t[2])
    )
    return st.one_of(int_compare, value_compare)


def txn_ops() -> st.SearchStrategy[TxnOp]:
    return st.one_of(
        st.builds(PutRequest, key=keys, value=values),
        st.builds(DeleteRangeRequest, key=keys, range_end=range_ends),
        st.builds(RangeRequest, key=keys, range_end=range_ends),
    )


def txns() -> st.SearchStrategy[TxnRequest]:
    ops = st.lists(txn_ops(), max_size=3).map(tuple)
    return st.builds(
        TxnRequest, compare=st.lists(compares(), max_size=2).map(tuple), success=ops, failure=ops
    )


def abstract_state(state: Any) -> dict[str, Any]:
    """The store as plain values (for counterexamples and ITF): revisions, keys, leases."""
    return {
        "revision": state.revision,
        "compact_revision": state.compact_revision,
        "kvs": {show_bytes(kv.key): _kv_text(kv) for kv in state.items()},
        "leases": {
            str(record.id): _lease_text(record.ttl, record.keys)
            for record in sorted(state.leases, key=lambda record: record.id)
        },
    }


def _kv_text(kv: KeyValue) -> str:
    lease = f" lease {kv.lease}" if kv.lease else ""
    return f"{show_bytes(kv.value)} (c{kv.create_revision} m{kv.mod_revision} v{kv.version}{lease})"


def _lease_text(ttl: int, keys: frozenset[bytes]) -> str:
    return f"ttl {ttl} keys [{', '.join(show_bytes(k) for k in sorted(keys))}]"


OPTIONAL_RULES = ("delete", "txn", "compact", "lease", "read_past", "watch")


class StoreMachine(RuleBasedStateMachine):
    """Random requests against the pure store; see the module docstring for the checks."""

    def __init__(self, bugs: BugSet = NO_BUGS, recorder: RunRecorder | None = None) -> None:
        super().__init__()
        self.bugs = bugs
        self.recorder = recorder or RunRecorder(abstract_state, None)
        self.state = store_model.initial_state()
        # revision -> the last state at that revision: its key-values are fixed for good.
        self.at_revision: dict[int, Any] = {self.state.revision: self.state}
        self.enabled: frozenset[str] = frozenset(OPTIONAL_RULES)
        self.events: list[Event] = []  # every event ever, compaction or not (for watches)
        # Without an initialize rule, Hypothesis checks invariants once before any rule.
        self.uncounted_check = not has_initialize_rules(type(self))
        self.recorder.begin(self.state)

    # ------------------------------------------------------------------ swarm
    @initialize(enabled=st.sets(st.sampled_from(OPTIONAL_RULES)))
    def choose_rules(self, enabled: set[str]) -> None:
        self.enabled = frozenset(enabled)

    # ------------------------------------------------------------------ helpers
    def _apply(self, request: Request) -> Any:
        before = self.state
        try:
            after, response = store_model.apply(before, request, self.bugs)
        except StoreError as error:
            self.recorder.step(f"{request.describe()} -> {error.code}", before)
            return error
        label = f"{request.describe()} -> {response.describe()}"
        self.recorder.step(label, after)
        self.state = after
        self._check_revision_step(request, before, after)
        self.at_revision[after.revision] = after
        if after.revision > before.revision:
            self.events.extend(after.events_since(before.revision + 1))
        if after.revision > before.revision:
            self.recorder.witness("store: revision advanced")
        return response

    def _check_revision_step(self, request: Request, before: Any, after: Any) -> None:
        step = after.revision - before.revision
        if step not in (0, 1):
            raise InvariantViolation(
                "OneRevisionPerRequest",
                f"{request.describe()} moved the revision from {before.revision} to "
                f"{after.revision}; one request takes at most one revision",
            )
        if step == 1 and isinstance(request, TxnRequest):
            stale = [
                kv
                for kv in after.items()
                if kv.mod_revision > before.revision and kv.mod_revision != after.revision
            ]
            if stale:
                raise InvariantViolation(
                    "OneRevisionPerRequest",
                    f"{request.describe()} at revision {after.revision} wrote "
                    + ", ".join(kv.describe() for kv in stale),
                )

    # ------------------------------------------------------------------ rules
    @rule(key=keys, value=values, lease=lease_ids)
    def put(self, key: bytes, value: bytes, lease: int) -> None:
        self._apply(PutRequest(key=key, value=value, lease=lease))

    @rule(key=keys, range_end=range_ends, limit=st.integers(min_value=0, max_value=2))
    def range_now(self, key: bytes, range_end: bytes, limit: int) -> None:
        self._apply(RangeRequest(key=key, range_end=range_end, limit=limit))

    @precondition(lambda self: "delete" in self.enabled)
    @rule(key=keys, range_end=range_ends, prev_kv=st.booleans())
    def delete(self, key: bytes, range_end: bytes, prev_kv: bool) -> None:
        self._apply(DeleteRangeRequest(key=key, range_end=range_end, prev_kv=prev_kv))

    @precondition(lambda self: "txn" in self.enabled)
    @rule(txn=txns())
    def txn(self, txn: TxnRequest) -> None:
        self._apply(txn)

    @precondition(lambda self: "compact" in self.enabled and self.state.revision > 1)
    @rule(back=st.integers(min_value=0, max_value=4))
    def compact(self, back: int) -> None:
        revision = max(1, self.state.revision - back)
        self._apply(CompactionRequest(revision=revision))

    @precondition(lambda self: "lease" in self.enabled)
    @rule(ttl=st.integers(min_value=1, max_value=30))
    def lease_grant(self, ttl: int) -> None:
        self._apply(LeaseGrantRequest(ttl=ttl))

    @precondition(lambda self: "lease" in self.enabled)
    @rule(lease=st.integers(min_value=1, max_value=4))
    def lease_revoke(self, lease: int) -> None:
        self._apply(LeaseRevokeRequest(id=lease))

    @precondition(lambda self: "read_past" in self.enabled)
    @rule(key=keys, range_end=range_ends, back=st.integers(min_value=0, max_value=6))
    def read_past(self, key: bytes, range_end: bytes, back: int) -> None:
        """PastReadsConsistent: a read at revision r equals the latest read back at r."""
        revision = self.state.revision - back
        if revision < 1:
            revision = self.state.revision + 1  # a future revision: must be refused
        request = RangeRequest(key=key, range_end=range_end, revision=revision)
        response = self._apply(request)
        state = self.state
        if revision > state.revision:
            _expect_error(request, response, FutureRevisionError, "a future revision")
            return
        if revision < state.compact_revision:
            _expect_error(request, response, CompactedError, "a compacted revision")
            return
        past = self.at_revision.get(revision)
        if past is None:
            return  # the revision was skipped by no request (cannot happen: revisions are dense)
        expected = store_model.apply(past, RangeRequest(key=key, range_end=range_end))[1]
        assert isinstance(expected, RangeResponse)
        if not isinstance(response, RangeResponse) or response.kvs != expected.kvs:
            got = response.describe() if hasattr(response, "describe") else str(response)
            raise InvariantViolation(
                "PastReadsConsistent",
                f"{request.describe()} at revision {state.revision} gave {got}, "
                f"but at revision {revision} the store held {expected.describe()}",
            )
        self.recorder.witness("store: past read checked")

    @precondition(lambda self: "watch" in self.enabled and self.state.revision > 1)
    @rule(
        key=keys,
        range_end=range_ends,
        from_compaction=st.booleans(),
        back=st.integers(min_value=0, max_value=4),
        prev_kv=st.booleans(),
    )
    def watch(
        self, key: bytes, range_end: bytes, from_compaction: bool, back: int, prev_kv: bool
    ) -> None:
        """The watch guarantees for a watch opened `back` revisions before the head or
        before the compact revision (where catching up must be refused)."""
        anchor = self.state.compact_revision if from_compaction else self.state.revision
        start = max(1, anchor - back)
        request = WatchRequest(key=key, range_end=range_end, start_revision=start, prev_kv=prev_kv)
        responses = watch_responses(self.state, request, self.bugs)
        self.recorder.step(
            f"{request.describe()} -> " + "; ".join(r.describe() for r in responses), self.state
        )
        violations = check_watch(self.events, request, responses)
        if violations:
            raise InvariantViolation(
                violations[0].guarantee, "\n".join(v.describe() for v in violations)
            )
        self.recorder.witness("store: watch checked")

    # ------------------------------------------------------------------ invariants
    @invariant()
    def store_invariants(self) -> None:
        """After every rule; counts the rule that ran."""
        if self.uncounted_check:
            self.uncounted_check = False
        else:
            self.recorder.rule_step()
        store_model.check_invariants(self.state)

    def teardown(self) -> None:
        self.recorder.finish()


def _expect_error(request: Request, response: Any, expected: type[StoreError], why: str) -> None:
    if not isinstance(response, expected):
        got = response.describe() if hasattr(response, "describe") else str(response)
        raise InvariantViolation(
            "PastReadsConsistent",
            f"{request.describe()} reads {why} and must fail with "
            f"{expected.__name__} ({expected.message}), but got {got}",
        )


def machine_factory(
    options: ExploreOptions, recorder: RunRecorder
) -> Callable[[], RuleBasedStateMachine]:
    """The factory `etcdspec.model.explore.run_hypothesis` runs: one machine per example."""

    # A focused run (options.rules) keeps all its rules on: no per-example swarm choice.
    drop = frozenset() if options.rules is None else frozenset(("choose_rules",))
    machine = focused(StoreMachine, options.rules, drop)

    def factory() -> RuleBasedStateMachine:
        return cast(RuleBasedStateMachine, machine(options.bugs, recorder))

    return factory

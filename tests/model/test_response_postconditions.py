"""Response postconditions (model/response_oracle.py): the plain oracle agrees with the
store model response for response, the check names the field that differs, and each
response mutation (model/bugs.py RESPONSE_MUTATIONS) is caught by the postconditions of
the store machine and of the cluster machine, and by no state invariant (the same
derandomized run passes with the postconditions off)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from etcdspec.model import store as store_model
from etcdspec.model.bugs import NO_BUGS, RESPONSE_MUTATIONS, BugSet
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.explore import RunRecorder
from etcdspec.model.hypothesis_cluster import ClusterMachine, focused
from etcdspec.model.hypothesis_cluster import abstract_state as cluster_state
from etcdspec.model.hypothesis_store import StoreMachine, abstract_state
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.requests import (
    RANGE_END_ALL,
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    KeyValue,
    LeaseGrantRequest,
    LeaseRevokeRequest,
    PutRequest,
    PutResponse,
    RangeRequest,
    SortOrder,
    SortTarget,
    TxnRequest,
)
from etcdspec.model.response_oracle import ResponseOracle, check_response, first_difference

MUTATIONS = [bug.name for bug in RESPONSE_MUTATIONS]

# A script touching every response field the oracle models: limits (exact and cut),
# sorts, filters, keys_only, count_only, past reads, prev_kv, deletes, nested txns,
# compaction and a lease revoke that deletes keys.
SCRIPT = [
    LeaseGrantRequest(ttl=10),
    PutRequest(b"a", b"1"),
    PutRequest(b"b", b"2", lease=1),
    PutRequest(b"a", b"3", prev_kv=True),
    PutRequest(b"c", b"0"),
    RangeRequest(b"a", RANGE_END_ALL, limit=3),
    RangeRequest(b"a", RANGE_END_ALL, limit=2, sort_order=SortOrder.DESCEND),
    RangeRequest(b"a", b"c", sort_target=SortTarget.MOD, keys_only=True),
    RangeRequest(b"a", RANGE_END_ALL, count_only=True, min_mod_revision=4),
    RangeRequest(b"a", RANGE_END_ALL, min_create_revision=3, sort_target=SortTarget.VALUE),
    RangeRequest(b"a", revision=2),
    TxnRequest(
        compare=(Compare(b"a", CompareTarget.VERSION, CompareResult.EQUAL, 2),),
        success=(
            PutRequest(b"d", b"9", prev_kv=True),
            RangeRequest(b"a", RANGE_END_ALL, limit=1),
            TxnRequest(
                compare=(Compare(b"d", CompareTarget.VERSION, CompareResult.EQUAL, 0),),
                success=(DeleteRangeRequest(b"c", prev_kv=True),),
            ),
        ),
        failure=(DeleteRangeRequest(b"a"),),
    ),
    DeleteRangeRequest(b"x", prev_kv=True),
    CompactionRequest(3),
    RangeRequest(b"a", RANGE_END_ALL, revision=3),
    LeaseRevokeRequest(1),
    RangeRequest(b"a", RANGE_END_ALL),
]


def test_the_oracle_agrees_with_the_store_on_every_field() -> None:
    state = store_model.initial_state()
    oracle = ResponseOracle()
    for request in SCRIPT:
        state, response = store_model.apply(state, request)
        expected = check_response(oracle, request, response)
        assert expected is not None and oracle.revision == state.revision, request.describe()


def test_an_oracle_of_a_store_reads_every_revision_the_store_can_read() -> None:
    state = store_model.initial_state()
    for request in SCRIPT:
        state, _ = store_model.apply(state, request)
    oracle = ResponseOracle.of_store(state)
    assert (oracle.revision, oracle.compact_revision) == (state.revision, 3)
    for revision in range(3, state.revision + 1):
        read = RangeRequest(b"a", RANGE_END_ALL, revision=revision)
        check_response(ResponseOracle.of_store(state), read, store_model.apply(state, read)[1])


def test_a_difference_is_named_by_its_field_path() -> None:
    state, response = store_model.apply(
        store_model.apply(store_model.initial_state(), PutRequest(b"a", b"1"))[0],
        TxnRequest(success=(PutRequest(b"a", b"2", prev_kv=True),)),
    )
    put = response.responses[0]
    assert isinstance(put, PutResponse)
    other = replace(response, responses=(replace(put, prev_kv=KeyValue(b"a", 3, 2, 1, b"1")),))
    found = first_difference(response, other)
    assert found is not None and found == "responses[0].prev_kv.create_revision: 3, expected 2"
    with pytest.raises(
        InvariantViolation, match=r"ResponsePostcondition.*\(kvs: 1 item\(s\), expected 2\)"
    ):
        state = store_model.apply(state, PutRequest(b"b", b"1"))[0]
        check_response(
            ResponseOracle.of_store(state),
            RangeRequest(b"a", b"c"),
            store_model.apply(state, RangeRequest(b"a"))[1],
        )


# ---------------------------------------------------------------------------- mutations

SETTINGS = settings(
    max_examples=40,
    stateful_step_count=15,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate),  # found is enough: no shrinking here
)


def _store_factory(bug: str, postconditions: bool) -> Callable[[], RuleBasedStateMachine]:
    machine = type("Machine", (StoreMachine,), {"postconditions": postconditions})
    return lambda: machine(BugSet.of(bug))


CLUSTER_RULES = frozenset(("propose", "propose_options", "read_index", "stabilize"))


def _cluster_factory(bug: str, postconditions: bool) -> Callable[[], RuleBasedStateMachine]:
    machine = type(
        "Machine", (focused(ClusterMachine, CLUSTER_RULES),), {"postconditions": postconditions}
    )
    config = ClusterConfig(timeouts="free", bugs=BugSet.of(bug))
    return lambda: machine(config)


@pytest.mark.parametrize("machine", ["store", "cluster"])
@pytest.mark.parametrize("bug", MUTATIONS)
def test_a_response_mutation_is_caught_by_postconditions_only(bug: str, machine: str) -> None:
    make = _store_factory if machine == "store" else _cluster_factory
    examples = 0
    checked = make(bug, postconditions=True)

    def counted() -> RuleBasedStateMachine:
        nonlocal examples
        examples += 1
        return checked()

    budget = (
        SETTINGS
        if machine == "store"
        else settings(SETTINGS, stateful_step_count=20, max_examples=100)
    )
    with pytest.raises(InvariantViolation) as caught:
        run_state_machine_as_test(counted, settings=budget)
    assert caught.value.invariant == "ResponsePostcondition", caught.value.describe()
    # The state invariants alone: the very same derandomized examples, up to and
    # including the one that was caught, all pass.
    same = settings(budget, max_examples=examples)
    run_state_machine_as_test(make(bug, postconditions=False), settings=same)


def test_the_correct_model_meets_every_postcondition() -> None:
    """The same runs with no mutation pass, and the checks were not vacuous."""
    store_recorder = RunRecorder(abstract_state, None)
    quick = settings(SETTINGS, max_examples=15)
    run_state_machine_as_test(lambda: StoreMachine(NO_BUGS, store_recorder), settings=quick)
    assert store_recorder.witnesses["store: response checked"] > 50
    cluster = focused(ClusterMachine, CLUSTER_RULES)
    recorder = RunRecorder(cluster_state, None)
    config = ClusterConfig(timeouts="free")
    run_state_machine_as_test(lambda: cluster(config, recorder), settings=quick)
    assert recorder.witnesses["cluster: response checked"] > 20

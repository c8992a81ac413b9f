"""The revision cuts of the etcd search change its speed, never its verdict: on small
histories (clean and faulty, many info ops) the cut search and the plain Wing & Gong /
Lowe search over the same model agree."""

from __future__ import annotations

from typing import Any

import pytest

from etcdspec.checker.history import HistoryEvent, build_history
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.checker.models import PreparedOp
from etcdspec.checker.simulate import ETCD_FAULTS, simulate_etcd
from etcdspec.checker.watch_checks import observed_writes, parse_watches
from etcdspec.verdict import Verdict


class PlainEtcdModel(EtcdModel):
    """The same semantics with no revision hints: the search tries every order."""

    def revision(self, state: Any) -> int | None:
        return None

    def info_possible(self, prepared: PreparedOp, revision: int) -> bool:
        return True

    def info_state_possible(self, prepared: PreparedOp, state: Any) -> bool:
        return True


CASES = [(seed, fault) for seed in range(12) for fault in (None, *ETCD_FAULTS)]


@pytest.mark.parametrize(("seed", "fault"), CASES)
def test_cut_search_agrees_with_plain_search(seed: int, fault: str | None) -> None:
    events = simulate_etcd(seed, ops=30, processes=4, info_rate=0.2, keys=3, fault=fault)
    history = build_history(events)
    cut = check_linearizable(EtcdModel(), history.operations)
    plain = check_linearizable(PlainEtcdModel(), history.operations)
    assert plain.verdict is not Verdict.UNKNOWN
    assert cut.verdict is plain.verdict, (cut.describe(), plain.describe())


@pytest.mark.parametrize("seed", range(8))
def test_cut_search_agrees_with_plain_search_with_leases(seed: int) -> None:
    events = simulate_etcd(seed, ops=30, processes=4, info_rate=0.2, keys=3, leases=True)
    history = build_history(events)
    cut = check_linearizable(EtcdModel(), history.operations)
    plain = check_linearizable(PlainEtcdModel(), history.operations)
    assert plain.verdict is not Verdict.UNKNOWN
    assert cut.verdict is plain.verdict, (cut.describe(), plain.describe())


def _lease_history(seed: int, fault: str | None) -> list[HistoryEvent] | None:
    try:
        return simulate_etcd(
            seed, ops=30, processes=4, info_rate=0.3, keys=3, fault=fault, leases=True
        )
    except ValueError:  # the fault found nothing to corrupt in so short a history
        return None


LEASE_FAULT_CASES = [
    (seed, fault)
    for seed in range(10)
    for fault in (None, *ETCD_FAULTS)
    if _lease_history(seed, fault) is not None
]


@pytest.mark.parametrize(("seed", "fault"), LEASE_FAULT_CASES)
def test_cut_search_agrees_with_plain_search_with_leases_faults_and_many_infos(
    seed: int, fault: str | None
) -> None:
    """Observed writes (put, create), pinned info writes and lease expiries together."""
    events = _lease_history(seed, fault)
    assert events is not None
    history = build_history(events)
    cut = check_linearizable(EtcdModel(), history.operations)
    plain = check_linearizable(PlainEtcdModel(), history.operations)
    assert plain.verdict is not Verdict.UNKNOWN
    assert cut.verdict is plain.verdict, (cut.describe(), plain.describe())


def test_differential_cases_include_violations() -> None:
    verdicts = set()
    for seed, fault in CASES[:20]:
        try:
            events = simulate_etcd(seed, ops=30, processes=4, info_rate=0.2, keys=3, fault=fault)
        except ValueError:
            continue
        verdicts.add(check_linearizable(EtcdModel(), build_history(events).operations).verdict)
    assert verdicts == {Verdict.TRUE, Verdict.FALSE}


@pytest.mark.parametrize(
    ("seed", "leases"), [(seed, leases) for seed in range(8) for leases in (False, True)]
)
def test_search_with_watch_observations_agrees_with_plain_search(seed: int, leases: bool) -> None:
    """The watches' writes as observations (every revision then has one: the observed-
    write matches of each gap revision, the one-revision cut and writes_match all run)
    agree with the plain search on clean histories with many info writes."""
    events = simulate_etcd(
        seed, ops=30, processes=4, info_rate=0.3, keys=3, leases=leases, watch=True
    )
    history = build_history(events)
    seen = observed_writes(parse_watches(history))
    assert seen
    cut = check_linearizable(EtcdModel(), history.operations, observed=seen)
    plain = check_linearizable(PlainEtcdModel(), history.operations)
    assert plain.verdict is Verdict.TRUE
    assert cut.verdict is plain.verdict, (cut.describe(), plain.describe())
